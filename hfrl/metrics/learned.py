"""Learned scores from sequence classifiers: any Hub (or local) ``AutoModelForSequenceClassification`` as a
metric or reward (probability of a chosen label, or a regression score), and DailyDialog's intent
accuracy (RL4LMs).

A classifier loads once per process (keyed by name and device) and runs in batches on this process's
device. What it reads is a parameter: the completion, the prompt and the completion, the prompt's last
turn and the completion, or (prompt, completion) as a text pair. An empty completion is not shown
to the classifier: it gets ``empty_score`` (learned_classifier) or 0 (intent_accuracy).

    from hfrl.metrics.learned import LearnedClassifier
    LearnedClassifier(model="lvwerra/distilbert-imdb", label="POSITIVE")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


from hfrl.metrics.base import SampleMetric, cached, default_device, encoded, last_turn, text_of, uncache

INPUTS = ("completion", "prompt+completion", "last_turn+completion", "pair")


class ClassifierUnavailableError(OSError):
    """A learned reward's or metric's classifier that cannot be loaded: not on this machine and the
    Hub unreachable, or of a model type that transformers does not know. The message names it and
    how to replace it."""

    def __init__(self, name: str, cause: BaseException) -> None:
        reason = " ".join(str(cause).split()) or type(cause).__name__
        through = (
            "through the task's classifier argument (e.g. --task-arg classifier=DIR; `hfrl list tasks`), or train "
            "on other rewards (--rewards '[rouge]')"
        )
        model_type = unknown_model_type(cause)
        if model_type is not None:  # the files are there: downloading them again would not help
            from transformers import __version__

            from hfrl.core.auto_classes import ARCHITECTURES

            super().__init__(
                f"cannot load the classifier {name!r} that a reward or metric of this task scores with: its model "
                f"type {model_type!r} is not one that transformers {__version__} knows (hfrl adds "
                f"{', '.join(ARCHITECTURES)}); pass a classifier of a type it knows {through}"
            )
            return
        super().__init__(
            f"cannot load the classifier {name!r} that a reward or metric of this task scores with ({reason[:200]}): "
            f"download it once where the Hub is reachable (`hf download {name}`), or pass a local copy {through}; "
            "offline, HF_HUB_OFFLINE=1 skips the network retries"
        )


def unknown_model_type(err: BaseException) -> str | None:
    """The model type named by transformers' "does not recognize this architecture" error, else None.

    >>> unknown_model_type(ValueError("The checkpoint you are trying to load has model type `rm_x` but "
    ...                               "Transformers does not recognize this architecture."))
    'rm_x'
    """
    import re

    found = re.search(r"model type `([^`]+)` but Transformers does not recognize", str(err))
    return found.group(1) if found else None


_ZERO3: list[Any] = []  # the accelerator whose DeepSpeed ZeRO-3 partitions the classifiers of this process


def shard_classifiers(accelerator: Any) -> bool:
    """Under DeepSpeed ZeRO-3, the classifiers this process loads from now on (learned rewards, reward
    models, judges, intent classifiers) are partitioned across the processes for inference, as TRL
    prepares its reward models (``trl.models.utils.prepare_deepspeed``: each process holds a slice and
    every forward gathers collectively); under ZeRO-1/2 and without DeepSpeed each process keeps its
    whole copy, as TRL does. Every process must then run the same number of forwards:
    :func:`classifier_logits` adds forwards of a one-token text where a process has fewer batches, and
    the scorers call it even with nothing to score. Whether the classifiers are sharded."""
    plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
    _ZERO3.clear()
    if plugin is not None and plugin.zero_stage == 3 and accelerator.num_processes > 1:
        _ZERO3.append(accelerator)
    return bool(_ZERO3)


def release_sharded_classifiers() -> None:
    """Forget the accelerator :func:`shard_classifiers` kept and the partitioned classifiers built under it:
    both hold the run's process groups (through DeepSpeed's engines), which must go before the interpreter
    exits (:func:`hfrl.trainers.devices.close_process_group`)."""
    _ZERO3.clear()
    uncache(lambda key: isinstance(key, tuple) and key[:1] == ("classifier",) and key[-1] is True)


def classifiers_sharded() -> bool:
    """Whether this process's classifiers are partitioned (:func:`shard_classifiers`): scorers then
    call :func:`classifier_logits` even with no text, since every process joins each forward."""
    return bool(_ZERO3)


def _forwards_to_add(batches: int, device: Any) -> int:
    """How many forwards this process lacks to match the process with the most (all-reduce of the counts)."""
    import torch
    import torch.distributed as dist

    count = torch.tensor([batches], device=device)
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    return int(count.item()) - batches


def load_classifier(name: str, device: str) -> Any:
    """``(tokenizer, model)`` of a sequence classifier, loaded once per process and device. A classifier
    that cannot load is tried once: later calls raise the same error at once (no Hub retries at every
    evaluation of a run)."""

    def build() -> Any:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from hfrl.core.models import check_model_folder, fix_tokenizer
        from hfrl.utils.assets import hub_kwargs
        from hfrl.utils.trust import UntrustedCodeError, remote_code

        check_model_folder(name, "classifier folder")  # data, all the way down: no link out (vocab.txt -> ~/x)
        try:
            pin = hub_kwargs(name, trust_remote_code=remote_code(name))  # manifest models at their pin
            tokenizer = AutoTokenizer.from_pretrained(name, **pin)
            model = AutoModelForSequenceClassification.from_pretrained(name, **pin)
        except UntrustedCodeError:
            raise
        except Exception as err:  # noqa: BLE001 - offline, a typo, no network: say which model and what to do
            failure = ClassifierUnavailableError(name, err)
            failure.__cause__ = err
            return failure
        tokenizer.padding_side = "right"  # absolute-position encoders (BERT, RoBERTa) read left padding as text offset
        if tokenizer.pad_token is None:  # GPT-style classifiers: pad with EOS, as their cards advise
            model.config.pad_token_id = fix_tokenizer(tokenizer).pad_token_id
        if _ZERO3:  # partitioned across the processes for inference, as TRL prepares its reward models
            from trl.models.utils import prepare_deepspeed

            return tokenizer, prepare_deepspeed(model, _ZERO3[0])
        return tokenizer, model.to(device).eval()

    loaded = cached(("classifier", name, str(device), bool(_ZERO3)), build)
    if isinstance(loaded, ClassifierUnavailableError):
        raise loaded
    return loaded


def classifier_inputs(
    prompts: list[Any], completions: list[str], show: str, turn_separator: str | None, separator: str
) -> tuple[list[str], list[str] | None]:
    """What the classifier reads, per sample: ``(texts, text_pairs or None)``."""
    if show not in INPUTS:
        raise ValueError(f"input must be one of {', '.join(INPUTS)}, got {show!r}")
    if show == "completion":
        return list(completions), None
    if show == "pair":
        return [text_of(p) for p in prompts], list(completions)
    context = [last_turn(p, turn_separator) if show == "last_turn+completion" else text_of(p) for p in prompts]
    return [f"{x}{separator}{c}" for x, c in zip(context, completions, strict=True)], None


def classifier_logits(
    name: str, texts: list[str], pairs: list[str] | None, batch_size: int, max_length: int, device: Any
) -> tuple[torch.Tensor, Any]:
    """Logits ``(len(texts), num_labels)`` in batches; the model config alongside."""
    import torch

    tokenizer, model = load_classifier(name, device)
    chunks = []
    starts = range(0, len(texts), batch_size)
    # ZeRO-3: each forward gathers the weights from every process, so all run as many (counted before any)
    fillers = _forwards_to_add(len(starts), device) if classifiers_sharded() else 0
    for start in starts:
        second = pairs[start : start + batch_size] if pairs is not None else None
        batch = encoded(tokenizer, texts[start : start + batch_size], second, max_length, device)
        with torch.no_grad():
            chunks.append(model(**batch).logits.float().cpu())
    for _ in range(fillers):
        with torch.no_grad():
            model(**encoded(tokenizer, ["."], [""] if pairs is not None else None, max_length, device))
    config = getattr(model, "module", model).config  # a DeepSpeed engine's own `config` is its DeepSpeed config
    logits = torch.cat(chunks) if chunks else torch.zeros(0, config.num_labels)
    return logits, config


def label_index(label: int | str | None, config: Any, what: str) -> int:
    """A label name or index -> index; None picks the only output (regression) or class 1 of two."""
    n: int = config.num_labels
    if label is None:
        if n <= 2:
            return n - 1
        raise ValueError(f"{what}: the classifier has {n} labels; set label to one of {sorted(config.label2id)}")
    if isinstance(label, str):
        by_name = {str(k).lower(): v for k, v in (config.label2id or {}).items()}
        if label.lower() not in by_name:
            raise ValueError(f"{what}: unknown label {label!r}; the classifier's labels are {sorted(config.label2id)}")
        return int(by_name[label.lower()])
    if not 0 <= int(label) < n:
        raise ValueError(f"{what}: label index {label} out of range for {n} labels")
    return int(label)


class LearnedClassifier(SampleMetric):
    """A sequence classifier's score: probability of ``label`` (softmax; sigmoid for one output) or its logit.

    ``output``: ``probability``, ``logit`` or ``auto`` (probability for classifiers, the raw score for
    regression heads with one output). ``input``: ``completion``, ``prompt+completion``,
    ``last_turn+completion`` (the prompt split on ``turn_separator``) or ``pair``.

    >>> LearnedClassifier(model="lvwerra/distilbert-imdb", label="POSITIVE")(  # doctest: +SKIP
    ...     prompts=[""], completions=["a wonderful film"])
    {'learned_classifier': 0.99...}
    """

    name = "learned_classifier"

    def __init__(
        self,
        model: str,
        label: int | str | None = None,
        output: str = "auto",
        input: str = "completion",
        turn_separator: str | None = "<EOU>",
        separator: str = " ",
        batch_size: int = 32,
        max_length: int = 512,
        empty_score: float = 0.0,
        device: str | None = None,
        key: str | None = None,
    ) -> None:
        if output not in ("auto", "probability", "logit"):
            raise ValueError(f"learned_classifier: output must be auto, probability or logit, got {output!r}")
        if input not in INPUTS:
            raise ValueError(f"learned_classifier: input must be one of {', '.join(INPUTS)}, got {input!r}")
        self.model, self.label, self.output, self.input = model, label, output, input
        self.turn_separator, self.separator = turn_separator, separator
        self.batch_size, self.max_length, self.empty_score, self.device = batch_size, max_length, empty_score, device
        self.key = key or self.name

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        import torch

        out = [float(self.empty_score)] * len(completions)
        todo = [i for i, c in enumerate(completions) if c.strip()]
        if not todo and not classifiers_sharded():
            return {self.key: out}
        texts, pairs = classifier_inputs(
            [prompts[i] for i in todo], [completions[i] for i in todo], self.input, self.turn_separator, self.separator
        )
        device = self.device or default_device()
        texts = self._finish(texts, device)
        logits, config = classifier_logits(self.model, texts, pairs, self.batch_size, self.max_length, device)
        index = label_index(self.label, config, self.name)
        output = self.output if self.output != "auto" else ("probability" if logits.shape[1] > 1 else "logit")
        if output == "logit":
            values = logits[:, index]
        elif logits.shape[1] == 1:
            values = torch.sigmoid(logits[:, 0])
        else:
            values = torch.softmax(logits, dim=-1)[:, index]
        for i, v in zip(todo, values.tolist(), strict=True):
            out[i] = float(v)
        return {self.key: out}

    def _finish(self, texts: list[str], device: Any) -> list[str]:
        """The texts as the classifier reads them (a reward model adds its EOS token)."""
        return texts


class RewardModel(LearnedClassifier):
    """A reward model's score (its one logit) of the prompt and completion, read as TRL's
    ``RewardTrainer`` trained it: ``prompt + completion + EOS``. ``model``: an ``hfrl train --alg
    reward`` run folder, a local model folder or a Hub id (``--reward_model`` on the command line). A
    text over ``max_length`` tokens (TRL's default, 1024) keeps its end.

    >>> RewardModel(model="runs/hh-reward")(prompts=["Q: hi A:"], completions=[" hello"])  # doctest: +SKIP
    {'reward_model': 1.73...}
    """

    name = "reward_model"

    def __init__(
        self,
        model: str,
        input: str = "prompt+completion",
        separator: str = "",
        add_eos: bool = True,
        output: str = "logit",
        max_length: int = 1024,
        **kwargs: Any,
    ) -> None:
        from hfrl.metrics.reward_folder import check_reward_model

        check_reward_model(model)  # a PPO run as --reward_model: one line now, not random scores after generating
        super().__init__(model=model, input=input, separator=separator, output=output, max_length=max_length, **kwargs)
        self.add_eos = add_eos

    def _finish(self, texts: list[str], device: Any) -> list[str]:
        tokenizer = load_classifier(self.model, device)[0]
        tokenizer.truncation_side = "left"  # a text over max_length keeps its end: the completion it scores
        eos = tokenizer.eos_token if self.add_eos else None
        return [t if not eos or t.endswith(eos) else t + eos for t in texts]


class LearnedJudge(LearnedClassifier):
    """A second ``learned_classifier`` under its own id, so that a task can report an independent judge
    (a classifier fitted to other data) beside the classifier it trains on (``movie_snippets``)."""

    name = "learned_judge"


def _intent(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value


class IntentAccuracy(SampleMetric):
    """DailyDialog intent accuracy (RL4LMs): does the intent classifier read the sample's intent label?

    Per sample 1 or 0: the classifier is shown the prompt's last turn and the completion.

    ``label_column`` holds an index (``label_offset`` is added: RL4LMs subtracts 1 from DailyDialog's
    1-4 act labels) or a label name of the classifier. RL4LMs joins last turn and completion with no
    separator; so does the default.

    >>> IntentAccuracy()(prompts=["hi <EOU>"], completions=["how are you?"], intent=[[2]])  # doctest: +SKIP
    {'intent_accuracy': 1.0}
    """

    name = "intent_accuracy"

    def __init__(
        self,
        model: str = "rajkumarrrk/roberta-daily-dialog-intent-classifier",
        label_column: str = "intent",
        label_offset: int = 0,
        turn_separator: str | None = "<EOU>",
        separator: str = "",
        batch_size: int = 32,
        max_length: int = 512,
        device: str | None = None,
    ) -> None:
        self.model, self.label_column, self.label_offset = model, label_column, label_offset
        self.turn_separator, self.separator = turn_separator, separator
        self.batch_size, self.max_length, self.device = batch_size, max_length, device

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        if self.label_column not in columns:
            raise ValueError(
                f"intent_accuracy needs each sample's intent: give the dataset a {self.label_column!r} column "
                "or set label_column"
            )
        targets = [_intent(v) for v in columns[self.label_column]]
        out = [0.0] * len(completions)  # an empty completion carries no intent
        todo = [i for i, c in enumerate(completions) if c.strip()]
        if not todo and not classifiers_sharded():
            return {self.name: out}
        texts, _ = classifier_inputs(
            [prompts[i] for i in todo],
            [completions[i] for i in todo],
            "last_turn+completion",
            self.turn_separator,
            self.separator,
        )
        device = self.device or default_device()
        logits, config = classifier_logits(self.model, texts, None, self.batch_size, self.max_length, device)
        predicted = logits.argmax(dim=-1).tolist()
        for i, p in zip(todo, predicted, strict=True):
            target = targets[i]
            target = (
                label_index(target, config, "intent_accuracy")
                if isinstance(target, str)
                else int(target) + self.label_offset
            )
            out[i] = float(p == target)
        return {self.name: out}
