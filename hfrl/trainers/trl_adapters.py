"""TRL's own trainers on hfrl tasks: ``GRPOTrainer`` and ``RLOOTrainer`` with the task's reward
functions, ``SFTTrainer`` on the task's references (the supervised warm start RL4LMs offered) and
``DPOTrainer`` and ``RewardTrainer`` on tasks with preference pairs. They configure TRL; nothing is re-implemented but
what hfrl adds to every trainer (:class:`~hfrl.trainers.trainer_mixin.TrainerMixin`): the model card
and Hub push (the task, rewards, resolved config and reward or loss curve, and never
``training_args.bin`` on the Hub), the stop on a non-finite gradient norm.

    hfrl train --task numbers --alg grpo --model tiny --max_steps 20
    hfrl train --task daily_dialog --alg sft --model tiny --max_steps 20

Each adapter is the TRL trainer with hfrl's constructor signature (``model, args, reward_funcs,
train_dataset, eval_dataset, metrics, ...``) and a ``config_class``: TRL's config, unchanged but for
hfrl's defaults where no GPU is present (``use_cpu=True``, ``bf16=False``) and, for GRPO / RLOO,
prompt truncation (``max_prompt_length``; TRL 1.16 no longer cuts prompts). A task's shared
``defaults`` (hfrl's online fields) reach TRL through :meth:`translate_task_defaults`: ``max_new_tokens``
becomes ``max_completion_length``, sampling settings TRL's ``temperature`` / ``top_k`` / ``top_p`` /
``generation_kwargs``. ``model`` is a name or folder (``tiny`` included) of a causal LM: TRL's
trainers do not train encoder-decoder models. ``metrics`` is accepted for the common signature;
TRL's evaluation does not compute hfrl's task metrics (``hfrl eval`` does, on the saved run).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import trl

from hfrl.trainers.config_checks import MAX_TOKENS
from hfrl.trainers.iteration_log import SaveStateAtEnd, report_steps
from hfrl.trainers.run_guard import OverwriteOutputDir
from hfrl.trainers.task_defaults import lengths_to_max_length, online_defaults_to_trl
from hfrl.trainers.trainer_mixin import TrainerMixin

if TYPE_CHECKING:
    from transformers import TrainerCallback


def _hfrl_defaults(args: Any) -> None:
    """Without an accelerator: run on the CPU, leave bf16 off unless asked for (TRL turns it on
    by default), and pin no memory. And TRL's default ``gradient_checkpointing=True`` under the
    name transformers 5 reads (``activation_checkpointing``): with the deprecated name alone, every
    config warned that the user should rename an argument they never passed."""
    from hfrl.trainers.config_checks import check_finite
    from hfrl.trainers.devices import cpu_defaults, has_accelerator

    check_finite(args)
    if not has_accelerator():
        args.use_cpu = True
        if args.bf16 is None:
            args.bf16 = False
    cpu_defaults(args)
    for old, new in (
        ("gradient_checkpointing", "activation_checkpointing"),
        ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
    ):
        if hasattr(args, new) and getattr(args, new) is None and getattr(args, old, None) is not None:
            setattr(args, new, getattr(args, old))


# ---- configs: TRL's, with hfrl's CPU defaults ----------------------------------------------------
@dataclass
class _PromptTruncation:
    """hfrl's prompt truncation for TRL's online configs (TRL 1.16 no longer cuts prompts)."""

    max_prompt_length: int | None = field(
        default=None, metadata={"help": "hfrl: cut prompts to this many tokens before TRL sees them (None: keep)."}
    )
    truncation_side: str = field(
        default="left", metadata={"help": "hfrl: which end of a long prompt to cut.", "choices": ("left", "right")}
    )
    # its range, checked before torch is imported (hfrl.trainers.config_checks)
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {"max_prompt_length": {"ge": 1, "cap": MAX_TOKENS}}

    def __post_init__(self) -> None:
        if self.truncation_side not in ("left", "right"):
            raise ValueError(f"truncation_side must be 'left' or 'right', got {self.truncation_side!r}")
        _hfrl_defaults(self)
        _clip_min_new_tokens(self)
        _generation_kwargs_for_vllm(self)
        super().__post_init__()  # type: ignore[misc]  # TRL's config, next in the MRO


def _clip_min_new_tokens(args: Any) -> None:
    """A ``min_new_tokens`` in ``generation_kwargs`` (a task's, such as numbers' 20) above
    ``max_completion_length`` is clipped to it, and said once: transformers would clamp it silently."""
    kwargs = dict(getattr(args, "generation_kwargs", None) or {})
    least, most = kwargs.get("min_new_tokens"), getattr(args, "max_completion_length", None)
    if isinstance(least, int) and isinstance(most, int) and least > most:
        from transformers.utils import logging

        logging.get_logger(__name__).warning(
            f"min_new_tokens {least} (generation_kwargs) is above max_completion_length {most}: clipped to {most}"
        )
        args.generation_kwargs = {**kwargs, "min_new_tokens": most}


def _generation_kwargs_for_vllm(args: Any) -> None:
    """transformers' names in ``generation_kwargs`` (a task's) under vLLM's when TRL samples with vLLM (its
    ``generation_kwargs`` go to ``SamplingParams``, which refuses ``min_new_tokens``): ``min_new_tokens`` as
    ``min_tokens`` (hfrl's own rollouts' :data:`~hfrl.trainers.online.vllm_rollout.SAMPLING_PARAMS`), ``stop_strings``
    as ``stop``, the stop string kept in the text; any other key goes to vLLM as it is."""
    kwargs = dict(getattr(args, "generation_kwargs", None) or {})
    if not getattr(args, "use_vllm", False) or not kwargs:
        return
    from hfrl.core.rollout.stop import STOP_KEY
    from hfrl.trainers.online.vllm_rollout import SAMPLING_PARAMS, vllm_stop

    renamed = {SAMPLING_PARAMS.get(key, key): value for key, value in kwargs.items() if key != STOP_KEY}
    if STOP_KEY in kwargs:
        renamed.update(vllm_stop(kwargs))
    args.generation_kwargs = renamed


@contextlib.contextmanager
def _generate_with_tokenizer(model: Any, tokenizer: Any, needed: bool) -> Iterator[None]:
    """TRL's transformers path calls ``generate`` without the tokenizer (trl 1.16, ``GRPOTrainer``), which
    transformers needs for ``stop_strings``: bind it to the model's ``generate`` for the call (a PEFT model
    passes it on to its base model's)."""
    if not needed:
        yield
        return
    own = vars(model).get("generate")
    model.generate = functools.partial(model.generate, tokenizer=tokenizer)
    try:
        yield
    finally:
        if own is None:
            del model.generate
        else:
            model.generate = own


# TRL derives each of these two from the other in ``__post_init__`` and refuses both set: a run's
# config.yaml records them as given (None when derived), so that ``--config`` and ``--resume`` read it back.
GENERATION_BATCH_FIELDS = ("generation_batch_size", "steps_per_generation")


@contextlib.contextmanager
def _hfrl_engine(trainer: Any, args: Any) -> Iterator[None]:
    """TRL's online trainers build their ``VLLMGeneration`` in their constructor; under ``use_vllm`` hfrl's
    factory builds it instead (:data:`hfrl.trainers.online.vllm_rollout.vllm_generation_factory`, as for hfrl's own
    rollouts): on vLLM's CPU platform an eager engine whose weight sync goes through vLLM's reload path, is checked,
    and shuts down before torch's process group (TRL's own leaves the compiled engine's layers stale and ends with
    "Invalid process group specified"); elsewhere TRL's class, with a ``.gguf`` model's HF folder."""
    trl_class = next((c for c in type(trainer).__mro__ if c.__module__.startswith("trl.")), None)
    module: Any = sys.modules[trl_class.__module__] if trl_class is not None else None
    if not getattr(args, "use_vllm", False) or module is None or not hasattr(module, "VLLMGeneration"):
        yield
        return
    from hfrl.trainers.online import vllm_rollout

    own = module.VLLMGeneration
    module.VLLMGeneration = lambda **kwargs: vllm_rollout.vllm_generation_factory(**kwargs)
    try:
        yield
    finally:
        module.VLLMGeneration = own


@dataclass
class GRPOConfig(OverwriteOutputDir, _PromptTruncation, trl.GRPOConfig):
    """TRL's ``GRPOConfig`` with hfrl's CPU defaults and prompt truncation."""

    derived_fields = GENERATION_BATCH_FIELDS


@dataclass
class RLOOConfig(OverwriteOutputDir, _PromptTruncation, trl.RLOOConfig):
    """TRL's ``RLOOConfig`` with hfrl's CPU defaults and prompt truncation."""

    derived_fields = GENERATION_BATCH_FIELDS


@dataclass
class SFTConfig(OverwriteOutputDir, trl.SFTConfig):
    """TRL's ``SFTConfig`` with hfrl's CPU defaults."""

    def __post_init__(self) -> None:
        _hfrl_defaults(self)
        super().__post_init__()


@dataclass
class DPOConfig(OverwriteOutputDir, trl.DPOConfig):
    """TRL's ``DPOConfig`` with hfrl's CPU defaults and DPO's reference-free option."""

    reference_free: bool = field(
        default=False,
        metadata={
            "help": "hfrl: DPO without a reference model, log pi_ref = 0 for every response (the DPO authors' "
            "reference_free; TRL 1.16 dropped it): the loss is -log sigmoid(beta (log pi(y_w) - log pi(y_l)))."
        },
    )

    def __post_init__(self) -> None:
        _hfrl_defaults(self)
        if self.reference_free:
            self.precompute_ref_log_probs = True  # TRL then loads no reference and reads the zeros below
        super().__post_init__()


# ---- shared pieces -------------------------------------------------------------------------------
def causal_model_path(model: Any, trainer: str) -> Any:
    """A model name or folder for TRL, checked to be a causal LM: a built-in model resolved, a GGUF
    file as its dequantised copy (:func:`hfrl.core.models.plain_model_dir`: TRL reloads its reference
    model from the policy's path, which ``from_pretrained`` must open without a ``gguf_file``)."""
    if not isinstance(model, str):
        config = model.config
    else:
        from hfrl.core.models import load_config, plain_model_dir

        model = plain_model_dir(model)
        config = load_config(model)
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"TRL's {trainer} trains causal language models; {getattr(config, '_name_or_path', model)} is an "
            "encoder-decoder model: pass --model with a causal LM (e.g. tiny or openai-community/gpt2)"
        )
    return model


def load_tokenizer(model: Any, padding_side: str = "left") -> Any:
    from hfrl.core.models import fix_tokenizer
    from hfrl.core.models import load_tokenizer as load

    name = model if isinstance(model, str) else model.config._name_or_path
    tokenizer = load(name)
    tokenizer.padding_side = padding_side
    return fix_tokenizer(tokenizer)


def prepare_prompts(dataset: Any, tokenizer: Any, max_length: int | None = None, side: str = "left") -> Any:
    """Prompts as TRL's online trainers need them: an empty prompt becomes the BOS (or EOS) token, as
    hfrl's trainers start generation; a string prompt longer than ``max_length`` tokens is cut on ``side``."""
    if dataset is None:
        return None
    start = tokenizer.bos_token or tokenizer.eos_token or ""

    def cut(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        out = []
        for prompt in batch["prompt"]:
            if isinstance(prompt, str) and not prompt:
                prompt = start
            elif isinstance(prompt, str) and max_length:
                ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
                if len(ids) > max_length:
                    prompt = tokenizer.decode(ids[-max_length:] if side == "left" else ids[:max_length])
            out.append(prompt)
        return {"prompt": out}

    if "prompt" not in dataset.column_names:
        raise ValueError(f"the dataset needs a 'prompt' column; it has: {', '.join(dataset.column_names)}")
    return dataset.map(cut, batched=True, desc="prompts")


def sft_pairs(dataset: Any) -> Any:
    """Prompt-completion pairs for SFT: the ``completion`` column when the task has one (an offline
    task's responses), else one pair per reference; other columns are dropped."""
    if dataset is None:
        return None
    columns = dataset.column_names
    if "completion" in columns:
        return dataset.select_columns(["prompt", "completion"])
    if "references" not in columns:
        raise ValueError(
            f"SFT needs target texts: a 'completion' or 'references' column (the dataset has: {', '.join(columns)})"
        )

    def expand(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        pairs = [(p, r) for p, refs in zip(batch["prompt"], batch["references"], strict=True) for r in refs or [] if r]
        return {"prompt": [p for p, _ in pairs], "completion": [r for _, r in pairs]}

    pairs = dataset.map(expand, batched=True, remove_columns=columns, desc="sft pairs")
    if len(pairs) == 0:
        raise ValueError("SFT needs target texts, but every 'references' list of this dataset is empty")
    return pairs


@dataclass
class RewardConfig(OverwriteOutputDir, trl.RewardConfig):
    """TRL's ``RewardConfig`` with hfrl's CPU defaults."""

    def __post_init__(self) -> None:
        _hfrl_defaults(self)
        super().__post_init__()


# ---- trainers ------------------------------------------------------------------------------------
class _TRLAdapter:
    """hfrl's constructor for TRL's trainers (mixed in before the TRL class): hfrl's model names
    resolved to a causal model, the task's data as the trainer takes it (:meth:`_task_inputs`), the
    task's metrics kept, the save-state callback added."""

    translate_task_defaults = staticmethod(lambda defaults: defaults)  # the task's config keys in TRL's names
    tokenizer_kwargs: dict[str, Any] = {}  # for the tokenizer hfrl loads when none is given
    _name: str  # the trainer's card name (TrainerMixin's)

    def __init__(
        self,
        model: Any,
        args: Any = None,
        reward_funcs: Any = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        metrics: dict[str, Callable[..., Any]] | None = None,
        processing_class: Any = None,
        peft_config: Any = None,
        callbacks: list[TrainerCallback] | None = None,
        **kwargs: Any,  # DPO: ref_model
    ) -> None:
        """TRL's trainer with hfrl's model names and task data.

        :param model: a causal language model: a Hub id, a local folder, a ``.gguf`` file, a built-in
            name (``tiny``, ``smollm2``) or a loaded ``PreTrainedModel``.
        :param args: the trainer's config (``GRPOConfig`` for ``GRPOTrainer``...: TRL's, with hfrl's
            CPU defaults).
        :param reward_funcs: GRPO and RLOO: a TRL-style reward function, ``f(prompts, completions,
            **columns) -> list[float]``, or a list of them. SFT, DPO and the reward model: optional,
            kept as ``trainer.reward_funcs`` (their training does not read them).
        :param train_dataset: GRPO and RLOO: a ``prompt`` column; SFT: ``prompt`` and ``completion`` (or
            ``references``); DPO: ``prompt``, ``chosen`` and ``rejected``; the reward model:
            ``chosen`` and ``rejected`` (``prompt`` optional) or scored texts, ``text`` and ``score``.
        :param eval_dataset: the same columns, for TRL's evaluation (a split without SFT's or DPO's
            targets is skipped).
        :param metrics: ``{name: metric}``, kept as ``trainer.metrics`` (TRL's evaluation does not compute
            them; ``hfrl eval RUN`` computes a task's metrics on the saved run).
        :param processing_class: the tokenizer; default: the model's.
        :param peft_config: a ``peft.LoraConfig`` (or other PEFT config), as TRL takes it.
        :param callbacks: ``transformers.TrainerCallback`` instances, as for ``transformers.Trainer``.
        :param kwargs: the TRL trainer's other keywords (DPO's ``ref_model``...).
        """
        model = causal_model_path(model, f"{self._name}Trainer")
        if isinstance(model, str) and args is not None:  # TRL loads it: with the user's opt-in for code, never a file's
            from hfrl.utils.trust import remote_code

            args.model_init_kwargs = {"trust_remote_code": remote_code(model), **(args.model_init_kwargs or {})}
        tokenizer = processing_class or load_tokenizer(model, **self.tokenizer_kwargs)
        self.metrics = dict(metrics or {})
        with _hfrl_engine(self, args):
            super().__init__(  # type: ignore[call-arg]
                model=model,
                args=args,
                processing_class=tokenizer,
                peft_config=peft_config,
                callbacks=[*(callbacks or []), SaveStateAtEnd()],
                **self._task_inputs(args, reward_funcs, train_dataset, eval_dataset, tokenizer),
                **kwargs,
            )
        report_steps(self)  # one bar with the reward or loss, not a raw log dict per logging step

    def _task_inputs(self, args: Any, reward_funcs: Any, train: Any, evaluation: Any, tokenizer: Any) -> dict[str, Any]:
        raise NotImplementedError


class _OnlineAdapter(_TRLAdapter):
    """For TRL's online trainers: the task's reward functions and its prompts (empty ones -> BOS,
    long ones cut)."""

    translate_task_defaults = staticmethod(online_defaults_to_trl)

    def _task_inputs(self, args: Any, reward_funcs: Any, train: Any, evaluation: Any, tokenizer: Any) -> dict[str, Any]:
        if reward_funcs is None:
            raise ValueError("reward_funcs is required: pass a reward function or a list of them")
        limit, side = getattr(args, "max_prompt_length", None), getattr(args, "truncation_side", "left")
        return {
            "reward_funcs": reward_funcs,
            "train_dataset": prepare_prompts(train, tokenizer, limit, side),
            "eval_dataset": prepare_prompts(evaluation, tokenizer, limit, side),
        }

    def _generate(self, prompts: list[Any]) -> Any:
        """TRL's generation, without transformers' note about the attention mask its ``generate`` dropped."""
        from hfrl.utils.quiet import dropped_mask_note_quiet

        args = self.args  # type: ignore[attr-defined]
        stops = "stop_strings" in (getattr(args, "generation_kwargs", None) or {}) and not args.use_vllm
        with dropped_mask_note_quiet(), _generate_with_tokenizer(self.model, self.processing_class, stops):  # type: ignore[attr-defined]
            return super()._generate(prompts)  # type: ignore[misc]


class GRPOTrainer(TrainerMixin, _OnlineAdapter, trl.GRPOTrainer):
    """TRL's GRPOTrainer on an hfrl task: group-relative policy optimisation with the task's rewards."""

    algs = {
        "grpo": "TRL's GRPOTrainer (causal models, vLLM on a GPU): group-normalised advantages over several "
        "completions.",
    }
    config_class = GRPOConfig
    _tag_names = ["hfrl", "trl", "grpo"]


class RLOOTrainer(TrainerMixin, _OnlineAdapter, trl.RLOOTrainer):
    """TRL's RLOOTrainer on an hfrl task: REINFORCE leave-one-out with the task's rewards."""

    algs = {"rloo": "TRL's RLOOTrainer (causal models, vLLM on a GPU): REINFORCE with a leave-one-out baseline."}
    config_class = RLOOConfig
    _tag_names = ["hfrl", "trl", "rloo"]


class _PairsAdapter(_TRLAdapter):
    """For TRL's SFT and DPO trainers: the task's data as the trainer's pairs (``_pairs``), a
    right-padding tokenizer; the task's rewards are kept for evaluation and cards."""

    _pairs: Any  # sft_pairs or preference_pairs (a staticmethod)
    translate_task_defaults = staticmethod(lengths_to_max_length)
    tokenizer_kwargs = {"padding_side": "right"}

    def _task_inputs(self, args: Any, reward_funcs: Any, train: Any, evaluation: Any, tokenizer: Any) -> dict[str, Any]:
        self.reward_funcs = list(reward_funcs or [])
        try:
            evaluation = self._pairs(evaluation)
        except ValueError:  # a validation split without targets (a hidden test set): no eval loss
            evaluation = None
        return {"train_dataset": self._pairs(train), "eval_dataset": evaluation}


class SFTTrainer(TrainerMixin, _PairsAdapter, trl.SFTTrainer):
    """TRL's SFTTrainer on an hfrl task: supervised fine-tuning on its references (or completions)."""

    algs = {"sft": "TRL's SFTTrainer: supervised fine-tuning on the task's references or completions."}
    config_class = SFTConfig
    _tag_names = ["hfrl", "trl", "sft"]
    _pairs = staticmethod(sft_pairs)


def preference_pairs(dataset: Any) -> Any:
    """``prompt`` / ``chosen`` / ``rejected`` for DPO; a clear error for a task without pairs."""
    if dataset is None:
        return None
    missing = {"prompt", "chosen", "rejected"} - set(dataset.column_names)
    if missing:
        raise ValueError(
            f"DPO needs preference pairs: 'prompt', 'chosen' and 'rejected' columns (missing {sorted(missing)}; "
            f"the dataset has: {', '.join(dataset.column_names)})"
        )
    return dataset.select_columns(["prompt", "chosen", "rejected"])


class DPOTrainer(TrainerMixin, _PairsAdapter, trl.DPOTrainer):
    """TRL's DPOTrainer on an hfrl task with preference pairs (``chosen`` / ``rejected`` columns)."""

    algs = {"dpo": "TRL's DPOTrainer: direct preference optimisation on chosen / rejected pairs."}
    config_class = DPOConfig
    args: DPOConfig
    _tag_names = ["hfrl", "trl", "dpo"]
    _pairs = staticmethod(preference_pairs)

    def _precompute_ref_logps(self, dataset: Any, name: str, batch_size: int) -> Any:
        """With ``reference_free``, every reference log-prob is 0 (nothing is computed)."""
        if not self.args.reference_free:
            return super()._precompute_ref_logps(dataset, name, batch_size)
        zeros = [0.0] * len(dataset)
        return dataset.add_column("ref_chosen_logps", zeros).add_column("ref_rejected_logps", zeros)


def reward_pairs(dataset: Any) -> Any:
    """``chosen`` / ``rejected`` (with ``prompt`` when the data has one) for a reward model, or scored
    texts (:mod:`hfrl.trainers.reward_scores`); a clear error for data with neither."""
    from hfrl.trainers import reward_scores

    if dataset is None:
        return None
    if reward_scores.is_scored(dataset):
        return reward_scores.scored_rows(dataset)
    from hfrl.trainers.field_rules import reward_columns_problem

    problem = reward_columns_problem(dataset.column_names)  # the rule hfrl train checks before torch, too
    if problem:
        raise ValueError(problem)
    return dataset.select_columns([c for c in ("prompt", "chosen", "rejected", "margin") if c in dataset.column_names])


class RewardTrainer(TrainerMixin, _PairsAdapter, trl.RewardTrainer):
    """TRL's RewardTrainer on an hfrl task with preference pairs: a Bradley-Terry reward model
    (``-log sigmoid(r(chosen) - r(rejected))``, TRL's ``center_rewards_coefficient`` and ``margin``
    column), saved as an ``AutoModelForSequenceClassification`` with one output that
    ``--reward_model RUN`` (the ``reward_model`` reward) scores completions with. Data of scored texts
    (``text`` and ``score`` in [0, 1]) fits the same model by binary cross-entropy to the scores, and an
    encoder without an EOS token (BERT) reads each text as its tokenizer frames it
    (:mod:`hfrl.trainers.reward_scores`)."""

    algs = {
        "reward": "TRL's RewardTrainer: a reward model (one score per text) fitted on chosen / rejected pairs or on "
        "scored texts, for --reward_model.",
    }
    config_class = RewardConfig
    _tag_names = ["hfrl", "trl", "reward-model"]
    _pairs = staticmethod(reward_pairs)

    def __init__(self, model: Any, args: Any = None, *rest: Any, **kwargs: Any) -> None:
        from hfrl.trainers.reward_scores import ScoresOrPairs, replaced_head

        if isinstance(model, str) and args is not None and replaced_head(model):  # a classifier: a new head
            args.model_init_kwargs = {**(args.model_init_kwargs or {}), "ignore_mismatched_sizes": True}
        super().__init__(model, args, *rest, **kwargs)
        self.data_collator = ScoresOrPairs(self.data_collator, self.processing_class.pad_token_id)  # type: ignore[union-attr]

    def _prepare_dataset(self, dataset: Any, processing_class: Any, args: Any, dataset_name: str) -> Any:
        from hfrl.trainers import reward_scores

        columns = set(dataset.column_names)
        if reward_scores.is_scored(dataset):
            if "input_ids" in columns:  # tokenized already: TRL's evaluate prepares a dataset it is given again
                return dataset
            return reward_scores.tokenize_scored(dataset, processing_class, args.max_length)
        if processing_class.eos_token is None and "chosen" in columns and "chosen_ids" not in columns:
            dataset = reward_scores.tokenize_pairs_without_eos(dataset, processing_class)
        return super()._prepare_dataset(dataset, processing_class, args, dataset_name)

    def _set_signature_columns_if_needed(self) -> None:
        if self._signature_columns is None:
            self._signature_columns = ["chosen_ids", "rejected_ids", "margin", "input_ids", "score"]  # type: ignore[assignment]

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        """TRL's pairs loss; for scored texts, binary cross-entropy to the scores, logged as TRL logs
        pairs (``accuracy``: the share of rows where ``r`` is on the score's side of 0.5)."""
        if "score" not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        import torch

        from hfrl.trainers.reward_scores import scored_loss, side_agreement

        mode = "train" if self.model.training else "eval"  # type: ignore[union-attr]
        scores = inputs.pop("score")
        outputs = model(**inputs, use_cache=False)
        rewards = outputs.logits.squeeze(-1)
        loss = scored_loss(rewards, scores)
        with torch.no_grad():
            every = self.accelerator.gather(rewards.detach().float())
            self._metrics[mode]["min_reward"].append(every.min().item())
            self._metrics[mode]["mean_reward"].append(every.mean().item())
            self._metrics[mode]["max_reward"].append(every.max().item())
            agree, decided = side_agreement(rewards.detach(), scores)
            self._metrics[mode]["accuracy"].append(agree / max(decided, 1))
        return (loss, outputs) if return_outputs else loss

    def pair_accuracy(self, dataset: Any) -> dict[str, float]:
        """Held-out pairs: the share where the chosen text scores above the rejected one, the mean
        margin ``r(chosen) - r(rejected)``, and the number of pairs; prepared, batched and scored as
        TRL's evaluation does (its data preparation and collator, chosen and rejected in one batch).
        Held-out scored texts: the share of rows with ``r`` on the score's side of 0.5 (``accuracy``),
        Pearson's r between ``sigmoid(r)`` and the scores, and the number of rows."""
        import torch

        from hfrl.trainers.reward_scores import is_scored, side_agreement

        model: Any = self.model
        args: Any = self.args
        scored = is_scored(dataset)
        pairs = self._prepare_dataset(reward_pairs(dataset), self.processing_class, args, "held-out")
        first: list[torch.Tensor] = []
        second: list[torch.Tensor] = []
        model.eval()
        with torch.no_grad():
            for batch in self.get_eval_dataloader(pairs):
                batch = self._prepare_inputs(batch)
                scores = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                scores = scores.squeeze(-1).float()
                if scored:
                    first.append(scores.cpu())
                    second.append(batch["score"].float().cpu())
                else:
                    chosen, rejected = torch.chunk(scores, chunks=2)
                    first.append(chosen.cpu())
                    second.append(rejected.cpu())
        a = torch.cat(first) if first else torch.zeros(0)
        b = torch.cat(second) if second else torch.zeros(0)
        if scored:
            agree, decided = side_agreement(a, b)
            both = torch.stack([torch.sigmoid(a), b])
            pearson = float(torch.corrcoef(both)[0, 1]) if len(a) > 1 else float("nan")
            return {"accuracy": agree / max(decided, 1), "pearson": pearson, "rows": len(a)}
        n = len(a)
        return {"accuracy": float((a > b).float().mean()) if n else 0.0,
                "margin": float((a - b).mean()) if n else 0.0, "pairs": n}  # fmt: skip


__all__ = [
    "DPOConfig",
    "DPOTrainer",
    "GRPOConfig",
    "GRPOTrainer",
    "RLOOConfig",
    "RLOOTrainer",
    "RewardConfig",
    "RewardTrainer",
    "SFTConfig",
    "SFTTrainer",
]
