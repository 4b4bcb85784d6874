"""Preparation of an offline dataset for the A-LoL family: once per dataset, cached.

Phases, each a ``Dataset.map`` whose result is an Arrow file named by a deterministic fingerprint
(datasets' own caching: the same inputs load the file instead of recomputing):

1. tokenize: ``prompt_ids``, ``completion_ids`` (EOS appended, cut at ``max_completion_length``);
2. reference (r_lol, a_lol, a_lol_seq, a_lol_kl): ``ref_logprobs``, log pi_ref(y_t | x, y_<t) per token;
3. rewards (no ``reward`` column): ``reward``, the task's reward functions on the dataset responses;
4. values (a_lol family): the value head is fitted on the reference's greedy validation generations
   (:mod:`hfrl.trainers.offline.value_head`), then ``value`` = V(x) and ``advantage`` = R - V(x).

Fingerprints hash the data (token ids and columns), the reference's weights (a sample of every
tensor), the reward functions and every setting a phase reads; the cache lives under
``preparation_cache_dir`` (default ``$HFRL_CACHE/offline``).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from datasets import Dataset
from torch import nn

from hfrl.core.offline_losses import needs_reference, weight_of
from hfrl.core.policies import completion_forward
from hfrl.core.rollout import generate_completions, pad
from hfrl.rewards.combine import compute_rewards
from hfrl.trainers.evaluation import NOT_REWARD_COLUMNS, encode_prompt
from hfrl.trainers.offline.value_head import PromptValueHead
from hfrl.utils.cache import write_atomic

logger = logging.getLogger(__name__)

# Columns the preparation adds; never passed to reward functions or metrics.
PREPARED_COLUMNS = ("prompt_ids", "completion_ids", "ref_logprobs", "value", "advantage")
INTERNAL_COLUMNS = (*NOT_REWARD_COLUMNS, *PREPARED_COLUMNS, "reward")


@dataclass
class PrepareContext:
    """What the preparation reads from the trainer."""

    args: Any  # ALoLConfig
    tokenizer: Any
    reference: Callable[[], contextlib.AbstractContextManager[nn.Module]]  # yields pi_ref (eval, no grad)
    reference_fingerprint: str
    reward_funcs: list[Callable[..., Any]]
    reward_weights: list[float]
    device: torch.device
    is_encoder_decoder: bool

    @property
    def batch_size(self) -> int:
        return cast(int, self.args.preparation_batch_size or self.args.per_device_eval_batch_size)

    @property
    def cache_dir(self) -> Path:
        from hfrl.utils.cache import cache_root

        return Path(self.args.preparation_cache_dir) if self.args.preparation_cache_dir else cache_root() / "offline"


@dataclass
class Preparation:
    """The prepared train set, its summary statistics, and which phases came from the cache."""

    dataset: Dataset
    stats: dict[str, float]
    from_cache: dict[str, bool] = field(default_factory=dict)
    sampling_weights: torch.Tensor | None = None  # (N,) A+ or max(R, 0); None for nll


# ---- fingerprints ----------------------------------------------------------------------------
def fingerprint(*parts: Any) -> str:
    """A deterministic 16-hex-digit hash of ``parts`` (datasets' Hasher, xxhash64)."""
    from datasets.fingerprint import Hasher

    hasher = Hasher()
    for part in parts:
        hasher.update(part)
    return cast(str, hasher.hexdigest())


def module_fingerprint(module: nn.Module, skip_adapters: bool = False, samples: int = 16) -> str:
    """Hash of a model's config and a sample of ``samples`` values of every parameter (cheap even
    at 7B). Parameter names are normalised so that a base model hashes the same with a fresh LoRA
    adapter on it (``skip_adapters``) as without."""
    config = getattr(module, "config", None)
    parts: list[Any] = [config.to_json_string(use_diff=False) if config is not None else ""]
    for name, param in sorted(module.named_parameters(), key=lambda item: item[0]):
        if skip_adapters and ("lora_" in name or "modules_to_save" in name):
            continue
        name = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
        flat = param.detach().reshape(-1)
        count = min(samples, flat.numel())  # evenly spaced, in integers: float32 cannot count past 2^24
        index = (torch.arange(count, dtype=torch.long) * (flat.numel() - 1) // max(count - 1, 1)).to(flat.device)
        parts += [name, tuple(param.shape), str(param.dtype), flat[index].float().cpu().numpy().tobytes()]
    return fingerprint(*parts)


def function_fingerprint(func: Callable[..., Any]) -> str:
    """Hash of a reward function (its code and settings); a random one when it cannot be hashed,
    so that a run with such a function is never served another function's cache."""
    try:
        return fingerprint(func)
    except Exception:  # noqa: BLE001 - any unpicklable object: no caching, not a failure
        from datasets.fingerprint import generate_random_fingerprint

        logger.warning("reward function %r cannot be hashed: its rewards are not cached", func)
        return cast(str, generate_random_fingerprint())


# ---- phases ----------------------------------------------------------------------------------
def check_columns(dataset: Dataset, what: str = "train_dataset") -> None:
    missing = [c for c in ("prompt", "completion") if c not in dataset.column_names]
    if missing:
        raise ValueError(
            f"{what} needs 'prompt' and 'completion' columns (one response per prompt, offline data); "
            f"it lacks {', '.join(missing)} and has: {', '.join(dataset.column_names)}"
        )
    if len(dataset) == 0:
        raise ValueError(f"{what} is empty")


def encode_completion(tokenizer: Any, completions: list[str], max_length: int) -> list[list[int]]:
    """Completion ids with EOS appended (the policy learns to stop), cut to ``max_length``."""
    for text in completions:
        if not isinstance(text, str):
            raise ValueError(f"every 'completion' must be a string, got {type(text).__name__}: {text!r:.80}")
    eos = tokenizer.eos_token_id
    out = []
    for ids in tokenizer(completions, add_special_tokens=False)["input_ids"]:
        ids = list(ids)
        if eos is not None and (not ids or ids[-1] != eos):
            ids.append(eos)
        out.append(ids[:max_length])
    return out


def tokenize(ctx: PrepareContext, dataset: Dataset) -> Dataset:
    """``prompt_ids`` and ``completion_ids`` columns (in memory: cheap, and the data of every later
    fingerprint)."""
    args = ctx.args
    dataset = dataset.remove_columns([c for c in PREPARED_COLUMNS if c in dataset.column_names])
    prompt_ids = [
        encode_prompt(ctx.tokenizer, p, args.max_prompt_length, args.truncation_side) for p in dataset["prompt"]
    ]
    completion_ids = encode_completion(ctx.tokenizer, list(dataset["completion"]), args.max_completion_length)
    return dataset.add_column("prompt_ids", prompt_ids).add_column("completion_ids", completion_ids)


def cached_map(
    ctx: PrepareContext,
    dataset: Dataset,
    phase: str,
    key: str,
    function: Callable[[dict[str, Any]], dict[str, Any]],
    batch_size: int | None = None,
) -> tuple[Dataset, bool]:
    """``dataset.map(function)`` (batched) cached in ``{cache_dir}/{phase}-{key}.arrow``; returns the
    result and whether it came from the cache."""
    ctx.cache_dir.mkdir(parents=True, exist_ok=True)
    path = ctx.cache_dir / f"{phase}-{key}.arrow"
    hit = path.exists() and not ctx.args.overwrite_preparation_cache
    out = dataset.map(
        function,
        batched=True,
        batch_size=batch_size or ctx.batch_size,
        cache_file_name=str(path),
        new_fingerprint=key,
        load_from_cache_file=not ctx.args.overwrite_preparation_cache,
        desc=f"A-LoL preparation: {phase}",
    )
    logger.info("preparation %s: %s %s", phase, "loaded from" if hit else "cached in", path)
    return out, hit


def _queries(ctx: PrepareContext, prompt_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    side = "right" if ctx.is_encoder_decoder else "left"
    ids, mask = pad(prompt_ids, ctx.tokenizer.pad_token_id, side)
    return ids.to(ctx.device), mask.to(ctx.device)


def _unpad(rows: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """The masked positions of each row (left or right padding)."""
    return [row[m.bool()] for row, m in zip(rows, mask, strict=True)]


def reference_logprobs(ctx: PrepareContext, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """log pi_ref(y_t | x, y_<t) of every completion token: one forward per batch."""
    from trl.trainer.utils import selective_log_softmax

    query_ids, query_mask = _queries(ctx, batch["prompt_ids"])
    response_ids, response_mask = pad(batch["completion_ids"], ctx.tokenizer.pad_token_id, "right")
    response_ids, response_mask = response_ids.to(ctx.device), response_mask.to(ctx.device)
    with ctx.reference() as ref:
        logits, _ = completion_forward(ref, query_ids, query_mask, response_ids, response_mask)
    logprobs = selective_log_softmax(logits.float(), response_ids)
    return {"ref_logprobs": [row.tolist() for row in _unpad(logprobs.cpu(), response_mask.cpu())]}


def reward_columns(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {k: v for k, v in batch.items() if k not in INTERNAL_COLUMNS}


def score(
    ctx: PrepareContext, prompts: list[Any], completions: list[str], lengths: list[int], columns: dict[str, Any]
) -> list[float]:
    """Weighted sum of the reward functions (token-level rewards summed over the completion)."""
    mask = torch.zeros(len(completions), max(lengths, default=1) or 1)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    scores, token_rewards, _ = compute_rewards(
        ctx.reward_funcs, ctx.reward_weights, prompts, completions, mask, columns
    )
    return (scores + token_rewards.sum(1)).tolist()


def dataset_rewards(ctx: PrepareContext, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    lengths = [len(ids) for ids in batch["completion_ids"]]
    return {"reward": score(ctx, batch["prompt"], batch["completion"], lengths, reward_columns(batch))}


def reference_states(ctx: PrepareContext, prompt_ids: list[list[int]]) -> Iterator[torch.Tensor]:
    """The reference's last hidden states of each prompt, ``(P_i, H)`` on the CPU."""
    from hfrl.trainers.offline.value_head import prompt_hidden_states

    for start in range(0, len(prompt_ids), ctx.batch_size):
        ids, mask = _queries(ctx, prompt_ids[start : start + ctx.batch_size])
        with ctx.reference() as ref:
            hidden = prompt_hidden_states(ref, ids, mask)
        yield from (h.cpu() for h in _unpad(hidden, mask))


def validation_targets(ctx: PrepareContext, validation: Dataset) -> tuple[list[list[int]], list[float], list[str]]:
    """Prompt ids, rewards and texts of the reference's greedy generations on the validation prompts."""
    args = ctx.args
    prompts = list(validation["prompt"])
    prompt_ids = [encode_prompt(ctx.tokenizer, p, args.max_prompt_length, args.truncation_side) for p in prompts]
    completions, lengths = [], []
    for start in range(0, len(prompt_ids), ctx.batch_size):
        ids, mask = _queries(ctx, prompt_ids[start : start + ctx.batch_size])
        with ctx.reference() as ref:
            sampled = generate_completions(
                ref,  # type: ignore[arg-type]
                ids,
                mask,
                args.value_generation_kwargs,
                ctx.tokenizer.pad_token_id,
                tokenizer=ctx.tokenizer,
            )

        completions += ctx.tokenizer.batch_decode(sampled.response_ids, skip_special_tokens=True)
        lengths += sampled.response_mask.sum(1).tolist()
    columns = reward_columns(validation.to_dict())
    return prompt_ids, score(ctx, prompts, completions, lengths, columns), completions


def fit_values(ctx: PrepareContext, validation: Dataset | None) -> tuple[PromptValueHead, dict[str, float]]:
    """The value head of pi_ref, fitted on its validation generations; stats for logging."""
    from hfrl.trainers.offline.value_head import fit_value_head

    args = ctx.args
    if validation is None:
        raise ValueError(
            f"{args.algorithm} fits a value head on the reference's validation generations: pass an eval_dataset "
            "(the task's validation split) with a 'prompt' column"
        )
    if "prompt" not in validation.column_names:
        raise ValueError(f"the eval_dataset needs a 'prompt' column; it has: {', '.join(validation.column_names)}")
    if not ctx.reward_funcs:
        raise ValueError(f"{args.algorithm} scores the reference's validation generations: pass reward_funcs")
    prompt_ids, targets, _ = validation_targets(ctx, validation)
    states = list(reference_states(ctx, prompt_ids))
    high = max(targets)
    if high > args.max_value or min(targets) < 0:
        logger.warning(
            "validation rewards span [%.3f, %.3f] but the value head predicts in [0, max_value=%s]: set max_value",
            min(targets), high, args.max_value,
        )  # fmt: skip
    head, stats = fit_value_head(
        states,
        targets,
        num_heads=args.value_num_heads,
        max_value=args.max_value,
        epochs=args.value_epochs,
        learning_rate=args.value_learning_rate,
        batch_size=args.value_batch_size,
        holdout_fraction=args.value_holdout_fraction,
        seed=args.seed,
        device=ctx.device,
    )
    stats["reference_reward"] = sum(targets) / len(targets)  # the reference's greedy validation reward
    return head, stats


def values_and_advantages(
    ctx: PrepareContext, head: PromptValueHead, batch: dict[str, list[Any]]
) -> dict[str, list[Any]]:
    """V(x) for each example (one forward per distinct prompt of the batch) and A = R - V(x)."""
    from hfrl.trainers.offline.value_head import value_predictions

    distinct = list(dict.fromkeys(tuple(ids) for ids in batch["prompt_ids"]))
    states = list(reference_states(ctx, [list(ids) for ids in distinct]))
    by_prompt = dict(zip(distinct, value_predictions(head, states).tolist(), strict=True))
    values = [by_prompt[tuple(ids)] for ids in batch["prompt_ids"]]
    return {"value": values, "advantage": [r - v for r, v in zip(batch["reward"], values, strict=True)]}


# ---- the whole preparation -------------------------------------------------------------------
def prepare_dataset(ctx: PrepareContext, train: Dataset, validation: Dataset | None) -> Preparation:
    """Tokenize -> reference log-probs -> rewards -> value head and advantages; see the module doc."""
    args, algorithm = ctx.args, ctx.args.algorithm
    weight = weight_of(algorithm)  # None, "reward" or "advantage"
    check_columns(train)
    data = tokenize(ctx, train)
    from_cache: dict[str, bool] = {}
    stats: dict[str, float] = {"examples": float(len(data))}

    if needs_reference(algorithm):
        key = fingerprint("reference", data._fingerprint, ctx.reference_fingerprint)
        data, from_cache["reference"] = cached_map(ctx, data, "reference", key, lambda b: reference_logprobs(ctx, b))

    if "reward" in data.column_names:
        if any(r is None for r in data["reward"]):
            raise ValueError(
                "the 'reward' column has missing values: fill them, or drop the column to score with reward_funcs"
            )
    elif not ctx.reward_funcs:
        raise ValueError("the train_dataset has no 'reward' column: pass reward_funcs to score its completions")
    else:
        key = fingerprint(
            "rewards", data._fingerprint, [function_fingerprint(f) for f in ctx.reward_funcs], ctx.reward_weights
        )
        # reward functions batch (and a learned classifier loads) once per call: give them large batches
        data, from_cache["rewards"] = cached_map(
            ctx, data, "rewards", key, lambda b: dataset_rewards(ctx, b), batch_size=max(ctx.batch_size, 256)
        )

    if weight == "advantage":
        settings = [
            args.value_generation_kwargs, args.max_prompt_length, args.truncation_side, args.max_value,
            args.value_epochs, args.value_learning_rate, args.value_batch_size, args.value_num_heads,
            args.value_holdout_fraction, args.seed,
        ]  # fmt: skip
        key = fingerprint(
            "values",
            data._fingerprint,
            ctx.reference_fingerprint,
            validation._fingerprint if validation is not None else None,
            [function_fingerprint(f) for f in ctx.reward_funcs],
            ctx.reward_weights,
            settings,
        )
        stats_file = ctx.cache_dir / f"values-{key}.json"
        arrow_file = ctx.cache_dir / f"values-{key}.arrow"
        value_stats = _cached_stats(stats_file, arrow_file) if not args.overwrite_preparation_cache else None
        if value_stats is not None:
            data, from_cache["values"] = cached_map(ctx, data, "values", key, _never)
        else:
            arrow_file.unlink(missing_ok=True)  # values and their statistics are rebuilt together
            head, value_stats = fit_values(ctx, validation)
            data, from_cache["values"] = cached_map(
                ctx, data, "values", key, lambda b: values_and_advantages(ctx, head, b)
            )
            write_atomic(stats_file, json.dumps(value_stats, indent=2))  # a kill leaves no half-written file
        stats.update(value_stats)

    rewards = torch.tensor(data["reward"], dtype=torch.float64)
    stats["reward_mean"] = float(rewards.mean())
    weights = None
    if weight == "advantage":
        advantages = torch.tensor(data["advantage"], dtype=torch.float64)
        stats["value_mean"] = float(torch.tensor(data["value"]).mean())
        stats["advantage_mean"] = float(advantages.mean())
        weights = advantages.clamp(min=0)  # A+
    elif weight == "reward":
        weights = rewards.clamp(min=0)  # P(i) ∝ R_i
    stats["positive_fraction"] = float((weights > 0).double().mean()) if weights is not None else 1.0
    if weights is not None and args.sampling != "none" and not bool((weights > 0).any()):
        what = "advantage (every reward is at or below the value estimate)" if weight == "advantage" else "reward"
        raise ValueError(
            f"no training example has a positive {what}: nothing to sample; check the rewards and max_value, "
            "or set sampling 'none'"
        )
    logger.info("A-LoL preparation (%s): %s", algorithm, ", ".join(f"{k}={v:.4g}" for k, v in stats.items()))
    return Preparation(data, stats, from_cache, weights)


def _cached_stats(stats_file: Path, arrow_file: Path) -> dict[str, float] | None:
    """The value head's statistics cached with its values, or None when they are to be (re)built: not
    cached, or broken (a write cut short before writes were atomic), which is said in one warning."""
    if not (stats_file.exists() and arrow_file.exists()):
        return None
    try:
        stats = json.loads(stats_file.read_text())
        if isinstance(stats, dict):
            return {str(k): float(v) for k, v in stats.items()}
        raise ValueError(f"a mapping was expected, got {type(stats).__name__}")
    except (OSError, ValueError, TypeError) as err:
        logger.warning("the cached value statistics %s are broken (%s): rebuilding them", stats_file, err)
        return None


def _never(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    raise RuntimeError("the value-head cache is incomplete: set overwrite_preparation_cache true")
