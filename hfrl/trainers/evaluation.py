"""The one evaluation path of the trainers and ``hfrl eval``: a split's prompts completed in batches
with the evaluation settings (each caller says how it generates), the completions scored with the
reward functions and metrics (:func:`generate_and_score`), and the trainers' ``evaluate`` that writes
the predictions beside the run (:class:`EvaluationMixin`).

    from hfrl.trainers.evaluation import Scoring, encode_prompt, generate_and_score, score_completions
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from hfrl.rewards.combine import compute_rewards
from hfrl.trainers.config_checks import fit_min_new_tokens

# Dataset columns that are not passed to rewards and metrics as keyword arguments.
PROMPT_IDS = "prompt_ids"  # the tokenized prompt column the trainers add
NOT_REWARD_COLUMNS = ("prompt", "completion", PROMPT_IDS)

if TYPE_CHECKING:  # the mixin's attributes and super() calls are the Trainer's
    from transformers import Trainer as _Trainer
else:
    _Trainer = object


EVAL_FIELDS = (
    "max_new_tokens",
    "eval_max_new_tokens",
    "eval_generation_kwargs",
    "max_prompt_length",
    "truncation_side",
    "reward_weights",
    "per_device_eval_batch_size",
)

_SKIPPED: set[tuple[str, str]] = set()  # (metric, error) pairs already reported


def eval_settings(*sources: dict[str, Any]) -> dict[str, Any]:
    """The evaluation fields: OnlineConfig's defaults, overridden by each source in turn (the
    task's config for the algorithm, then the run's config.yaml)."""
    from hfrl.trainers.online.online_config import OnlineConfig

    out = {}
    for f in dataclasses.fields(OnlineConfig):
        if f.name in EVAL_FIELDS:
            out[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    for source in sources:
        out.update({k: source[k] for k in EVAL_FIELDS if k in source})
    return out


def generation_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    """``generate``'s keyword arguments in evaluation and chat, a ``min_new_tokens`` above the cap (a
    run's 16 under ``hfrl chat --max-new-tokens 8``) clipped to it (:func:`fit_min_new_tokens`)."""
    cap_name = "eval_max_new_tokens" if settings.get("eval_max_new_tokens") else "max_new_tokens"
    kwargs = fit_min_new_tokens(settings.get("eval_generation_kwargs") or {}, settings[cap_name],
                                "eval_generation_kwargs", cap_name)  # fmt: skip
    return {"max_new_tokens": settings[cap_name], **kwargs}


# A chat template is code from the model's folder: it is rendered in a forked child (hfrl.utils.forked:
# Linux) that is killed past its time budget and whose memory is capped, and its text gets a size limit
# (a prompt of more characters than any context window holds tokens cannot be meant). In-process, a
# SIGALRM budget stopped loops, but not one C-level operation: {{ 'x' * 2000000000 }} or a 10 GB string
# built in a loop ran for minutes, and a sandbox that checks each operation ('*', '~', str.ljust, the
# filters...) would have to know every one of them; a process boundary needs to know none.
CHAT_TEMPLATE_SECONDS = 5.0
CHAT_TEMPLATE_MAX_CHARS = 4 << 20  # 4 Mi characters: ~10^6 tokens, the longest context windows
TEMPLATE_FIX = (
    "fix chat_template in its tokenizer_config.json or chat_template.jinja (or chat with --format plain / eou)"
)
_TEMPLATE_WORKER: list[Any] = []  # (weak reference to the tokenizer, its chat template, ForkedWorker): one at a time


def _template_worker(tokenizer: Any) -> Any:
    """The :class:`~hfrl.utils.forked.ForkedWorker` that renders ``tokenizer``'s chat template (a new one
    for another tokenizer or template: the child holds the tokenizer it was forked with)."""
    import weakref

    from hfrl.utils.forked import ForkedWorker

    template = getattr(tokenizer, "chat_template", None)
    if _TEMPLATE_WORKER:
        ref, held, worker = _TEMPLATE_WORKER[0]
        if ref() is tokenizer and held == template:
            return worker
        worker.close(kill=True)
        _TEMPLATE_WORKER.clear()

    def render(messages: list[Any]) -> str:  # in the child
        return cast(str, tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))

    worker = ForkedWorker(render, max_result_bytes=4 * CHAT_TEMPLATE_MAX_CHARS + 4096)  # UTF-8: <= 4 bytes a character
    _TEMPLATE_WORKER.append((weakref.ref(tokenizer), template, worker))
    return worker


def apply_chat_template(tokenizer: Any, messages: list[Any]) -> str:
    """The prompt text of chat ``messages`` by ``tokenizer``'s chat template, within
    :data:`CHAT_TEMPLATE_SECONDS` and :data:`CHAT_TEMPLATE_MAX_CHARS`, rendered in a forked child with
    capped memory (:class:`hfrl.utils.forked.ForkedWorker`; elsewhere than Linux in this process under
    :func:`hfrl.utils.bounded.time_budget`, which stops loops but not one long operation); a template that
    does not parse, raises, loops, runs too long or builds a huge text is one line (a ``ValueError``)
    naming the model and what to change."""
    from jinja2 import TemplateError

    from hfrl.utils.bounded import time_budget
    from hfrl.utils.forked import WorkerFailed, WorkerTimeout, can_fork

    where = getattr(tokenizer, "name_or_path", "") or "the model"
    slow = (
        f"the chat template of {where} did not finish within {CHAT_TEMPLATE_SECONDS:g} s (a loop that never ends?); "
        f"{TEMPLATE_FIX}"
    )
    big = f"the chat template of {where} made a prompt over the limit of {CHAT_TEMPLATE_MAX_CHARS:,} characters"
    try:
        if can_fork():
            text: str = _template_worker(tokenizer).call(messages, CHAT_TEMPLATE_SECONDS)
        else:
            with time_budget(CHAT_TEMPLATE_SECONDS, slow):
                text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    except WorkerTimeout:
        raise ValueError(slow) from None
    except WorkerFailed as err:  # what the template raised in the child, by name
        if err.kind == "ResultTooLarge":
            raise ValueError(f"{big}; {TEMPLATE_FIX}") from None
        problem = str(err) or (
            "the text it builds does not fit in memory" if err.kind == "MemoryError" else "no message"
        )
        raise ValueError(
            f"the chat template of {where} cannot be applied ({err.kind}: {problem}); {TEMPLATE_FIX}"
        ) from None
    except (TemplateError, OverflowError, RecursionError, MemoryError) as err:  # bad syntax, raise, huge range...
        problem = str(err).strip().splitlines()[0] if str(err).strip() else "no message"
        raise ValueError(
            f"the chat template of {where} cannot be applied ({type(err).__name__}: {problem}); {TEMPLATE_FIX}"
        ) from err
    if isinstance(text, str) and len(text) > CHAT_TEMPLATE_MAX_CHARS:
        raise ValueError(
            f"the chat template of {where} made a prompt of {len(text):,} characters, over the limit of "
            f"{CHAT_TEMPLATE_MAX_CHARS:,}; {TEMPLATE_FIX}"
        )
    return text


def encode_prompt(
    tokenizer: Any, prompt: Any, max_length: int | None = None, truncation_side: str = "left"
) -> list[int]:
    """Token ids of a prompt: a string, or a list of chat messages (the chat template is applied:
    :func:`apply_chat_template`).

    Long prompts are cut to ``max_length`` on ``truncation_side``; an empty prompt becomes the BOS
    token (EOS when there is none), as RL4LMs' synthetic tasks start generation.
    """
    if isinstance(prompt, list):  # conversational prompt: a list of {"role", "content"} messages
        prompt = apply_chat_template(tokenizer, prompt)
    ids = list(tokenizer(prompt)["input_ids"])
    if max_length and len(ids) > max_length:
        ids = ids[-max_length:] if truncation_side == "left" else ids[:max_length]
    if not ids:
        ids = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    return ids


@dataclasses.dataclass(frozen=True)
class Scoring:
    """What scores a split's completions: the reward functions and their weights (the logged reward
    is their weighted sum), the metrics, the prefix of the logged names, and the policy with its
    tokenizer for the metrics that read it (``needs_policy``: ``causal_perplexity``, drift)."""

    reward_funcs: Sequence[Callable[..., Any]]
    reward_weights: Sequence[float]
    metrics: dict[str, Callable[..., Any]] = dataclasses.field(default_factory=dict)
    prefix: str = "eval"
    policy: Any = None
    tokenizer: Any = None


def score_completions(
    prompts: list[Any], completions: list[str], rows: list[dict[str, Any]], scoring: Scoring
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Mean reward (and each reward's mean) and every metric over the completions, with one record
    per sample (prompt, completion, reward, extra columns) for a predictions file.

    ``rows`` holds each sample's extra columns; they reach rewards and metrics as keyword arguments.
    A metric returns a float or a dict of floats (an ``hfrl.metrics`` ``MetricResult``, whose
    per-sample scores go into each record under ``scores``); keys are prefixed with ``{prefix}_``.
    Metrics that declare ``needs_policy`` (``causal_perplexity``) also get ``policy`` and ``policy_tokenizer``
    (the scoring's ``policy`` and ``tokenizer``).
    A metric that fails (a model it cannot load offline) is reported as a warning and left out.
    """
    columns = {k: [r[k] for r in rows] for k in (rows[0] if rows else {})}
    mask = torch.ones(len(completions), 1)
    prefix, funcs, weights = scoring.prefix, scoring.reward_funcs, scoring.reward_weights
    scores, token_rewards, means = compute_rewards(funcs, weights, prompts, completions, mask, columns)
    totals = scores + token_rewards.sum(1)
    out = {f"{prefix}_reward": float(totals.mean()) if len(totals) else 0.0}
    out.update({f"{prefix}_rewards/{k}": v for k, v in means.items()})
    per_sample: dict[str, list[float]] = {}
    for name, metric in scoring.metrics.items():
        reads_policy = getattr(metric, "needs_policy", False)
        extra = {"policy": scoring.policy, "policy_tokenizer": scoring.tokenizer} if reads_policy else {}
        try:
            value = metric(prompts=prompts, completions=completions, **columns, **extra)
        except Exception as err:  # noqa: BLE001 - one metric that cannot load or run: reported, skipped
            if (name, str(err)) not in _SKIPPED:  # said once per process, not at every evaluation
                from transformers.utils import logging

                from hfrl.utils.quiet import own_line

                _SKIPPED.add((name, str(err)))
                with own_line():  # not glued to the training bar's line
                    logging.get_logger(__name__).warning(f"metric {name!r} failed and is skipped: {err}")
            continue
        values = value if isinstance(value, dict) else {name: value}
        out.update({f"{prefix}_{k}": float(v) for k, v in values.items()})
        per_sample.update(getattr(value, "per_sample", None) or {})
    records = [
        {"prompt": p, "completion": c, "reward": float(r), **row}
        for p, c, r, row in zip(prompts, completions, totals.tolist(), rows, strict=True)
    ]
    for i, record in enumerate(records):
        if per_sample:
            record["scores"] = {k: v[i] for k, v in per_sample.items()}
    return out, records


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """``model`` in eval mode (dropout off) for the block, then back in the mode it was in."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def completer(
    lm: Any, tokenizer: Any, kwargs: dict[str, Any], max_prompt_length: int | None = None, truncation_side: str = "left"
) -> Callable[[Any], list[str]]:
    """``complete(batch)`` for :func:`generate_and_score`: ``lm``'s completions of a batch's prompts
    (encoded by :func:`encode_prompt`) with the generation keyword arguments ``kwargs``."""
    from hfrl.core.rollout import generate_completions, pad

    side = "right" if getattr(lm.config, "is_encoder_decoder", False) else "left"
    device = next(lm.parameters()).device

    def complete(batch: Any) -> list[str]:
        ids = [encode_prompt(tokenizer, p, max_prompt_length, truncation_side) for p in batch["prompt"]]
        query_ids, query_mask = pad(ids, tokenizer.pad_token_id, side)
        sampled = generate_completions(
            lm, query_ids.to(device), query_mask.to(device), kwargs, tokenizer.pad_token_id, tokenizer=tokenizer
        )
        return cast(list[str], tokenizer.batch_decode(sampled.response_ids, skip_special_tokens=True))

    return complete


def generate_and_score(
    dataset: Any,
    complete: Callable[[Any], list[str]],
    scoring: Scoring,
    *,
    batch_size: int,
    accelerator: Any = None,
    internal_columns: Sequence[str] = NOT_REWARD_COLUMNS,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """``(metrics, records)`` of a split (a ``datasets.Dataset`` with a ``prompt`` column):
    ``complete(batch)`` gives the completions of each batch of ``batch_size`` rows; under
    ``accelerator`` each process completes its contiguous shard and the results are gathered; then
    :func:`score_completions` (``internal_columns`` do not reach rewards and metrics)."""
    if "prompt" not in dataset.column_names:
        raise ValueError(f"the evaluation split needs a 'prompt' column; it has: {', '.join(dataset.column_names)}")
    if accelerator is not None:
        dataset = dataset.shard(accelerator.num_processes, accelerator.process_index, contiguous=True)
    prompts: list[Any] = []
    completions: list[str] = []
    rows: list[dict[str, Any]] = []
    for start in range(0, len(dataset), batch_size):
        batch = dataset.select(range(start, min(start + batch_size, len(dataset))))
        completions += complete(batch)
        prompts += batch["prompt"]
        rows += [{k: v for k, v in ex.items() if k not in internal_columns} for ex in batch]
    if accelerator is not None:
        from accelerate.utils import gather_object

        prompts, completions, rows = gather_object(prompts), gather_object(completions), gather_object(rows)
    return score_completions(prompts, completions, rows, scoring)


class EvaluationMixin(_Trainer):
    """A Trainer's ``evaluate``: :meth:`generate_and_score` (each trainer's own generation through
    :func:`generate_and_score`) on the eval split, or on each split of a dict of them; metrics
    logged and passed to the callbacks; the records saved as
    ``predictions/{prefix}-step{N}.jsonl`` beside the run. For mypy the mixin is a ``Trainer``."""

    reward_funcs: Any
    reward_weights: Any
    metrics: dict[str, Any]
    tokenizer: Any

    def generate_and_score(self, dataset: Any, prefix: str = "eval") -> tuple[dict[str, float], list[dict[str, Any]]]:
        raise NotImplementedError

    def scoring(self, prefix: str, policy: Any) -> Scoring:
        """The trainer's rewards, metrics and tokenizer, with ``policy`` for the metrics that read it."""
        return Scoring(self.reward_funcs, self.reward_weights, self.metrics, prefix, policy, self.tokenizer)

    def evaluate(  # transformers 5.24: Trainer.evaluate
        self, eval_dataset: Any = None, ignore_keys: Any = None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dataset is None:
            raise ValueError("evaluation needs an eval_dataset with a 'prompt' column")
        if isinstance(dataset, dict):
            out: dict[str, float] = {}
            for name, split in dataset.items():
                out.update(self.evaluate(split, ignore_keys, f"{metric_key_prefix}_{name}"))
            return out
        metrics, records = self.generate_and_score(dataset, metric_key_prefix)
        if self.args.should_save:
            folder = os.path.join(str(self.args.output_dir), "predictions")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{metric_key_prefix}-step{self.state.global_step}.jsonl")
            with open(path, "w") as fh:
                fh.writelines(json.dumps(r, default=str) + "\n" for r in records)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
