"""Reward combination: every reward function of a task once over a batch of completions, checked
(one finite number per completion, or one per token; ``None`` for a completion it does not score)
and summed with its weight into sequence-level scores and token-level rewards (:class:`TaskRewards`,
shapes in :mod:`hfrl.core.rollout`). Used by the online trainers, A-LoL's preparation, evaluation
and composite rewards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import torch

from hfrl.core.rollout import TaskRewards


def reward_name(func: Callable[..., Any]) -> str:
    """A reward function's name in logs and cards: its ``__name__``, else its class's name."""
    return getattr(func, "__name__", None) or type(func).__name__


MAX_ABS_REWARD = 1e6  # |reward| beyond this is a bug (an unscaled logit sum, 3.4e38 from a clamped inf)


class RewardError(ValueError):
    """A reward function returned something that is not one finite number per completion."""


def compute_rewards(
    reward_funcs: Sequence[Callable[..., Any]],
    reward_weights: Sequence[float],
    prompts: list[Any],
    completions: list[str],
    response_mask: torch.Tensor,
    columns: dict[str, list[Any]],
    *,
    max_abs: float | None = MAX_ABS_REWARD,
    drop_invalid: bool = False,
    extras: dict[str, Any] | None = None,
) -> TaskRewards:
    """Call every reward function once on the whole batch (TRL signature) and combine them.

    A reward returns one float per completion (sequence level) or one list of floats per completion
    token (token level). Returns :class:`TaskRewards` ``(scores, token_rewards, means)``: the
    weighted sequence-level sum, the weighted token-level sum, and each function's own mean for
    logging. ``None`` entries (a reward that does not apply to a sample) count as 0 in the sum.

    A value that is not a number, NaN, +-inf or beyond ``max_abs`` stops with
    :class:`RewardError` naming the function and the completion; with ``drop_invalid`` it is
    reported (a warning) and the completion gets no reward: its row of ``response_mask`` is zeroed
    in place, so that it takes no part in the update.

    TRL's calling convention (trl 1.16's ``GRPOTrainer._calculate_rewards``): ``extras`` (the online
    trainers pass ``completion_ids``, ``trainer_state``, ``log_extra``, ``log_metric``) go to every
    function with the dataset columns; an ``async`` function is awaited, all of them together; a
    ``None`` means "does not apply": that completion gets nothing from that function (left out of its
    weighted sum, as TRL's ``nansum``, and of its logged mean).
    """
    n, width = response_mask.shape
    scores = torch.zeros(n)
    token_rewards = torch.zeros(n, width)
    means: dict[str, float] = {}
    outputs = _call_all(reward_funcs, prompts, completions, {**columns, **(extras or {})})
    for func, weight, out in zip(reward_funcs, reward_weights, outputs, strict=True):
        name = reward_name(func)
        values, token_level = _reward_values(name, out, n)
        missing = torch.tensor([v is None for v in out]) if not token_level else torch.zeros(n, dtype=torch.bool)
        bad = ~torch.isfinite(values) | (values.abs() > max_abs if max_abs is not None else False)
        bad = (bad.any(1) if token_level else bad) & ~missing
        if bool(bad.any()):
            _invalid(name, values, bad, max_abs, drop_invalid)
            values = values.masked_fill(bad.unsqueeze(1) if token_level else bad, 0.0)
            response_mask[bad] = 0
        if token_level:
            lengths = response_mask.sum(1, keepdim=True)
            values = values[:, :width] * (torch.arange(values.shape[1])[None, :width] < lengths)
            token_rewards[:, : values.shape[1]] += weight * values
            means[name] = float(values.sum(1).mean()) if n else 0.0
            continue
        means[name] = float(values.nanmean()) if n else 0.0
        scores += weight * torch.nan_to_num(values, nan=0.0)  # NaN here: None, "does not apply"
    return TaskRewards(scores, token_rewards, means)


def _call_all(
    funcs: Sequence[Callable[..., Any]], prompts: list[Any], completions: list[str], kwargs: dict[str, Any]
) -> list[Any]:
    """Every function's output; the awaitables of ``async`` functions gathered in one event loop."""
    import asyncio
    import inspect

    outputs = [func(prompts=prompts, completions=completions, **kwargs) for func in funcs]
    pending = [i for i, out in enumerate(outputs) if inspect.isawaitable(out)]
    if pending:

        async def gather() -> list[Any]:
            return list(await asyncio.gather(*(outputs[i] for i in pending)))

        try:
            asyncio.get_running_loop()
            running = True
        except RuntimeError:
            running = False
        if running:  # called from inside an event loop (a notebook): run ours in a thread
            import concurrent.futures

            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                done = pool.submit(asyncio.run, gather()).result()
        else:
            done = asyncio.run(gather())
        for i, out in zip(pending, done, strict=True):
            outputs[i] = out
    return outputs


def _reward_values(name: str, out: Any, n: int) -> tuple[torch.Tensor, bool]:
    """A reward function's output as ``(B,)`` floats (None -> NaN) or, token level, ``(B, T)``
    floats padded with 0; one line naming the function for anything else."""
    if isinstance(out, (str, bytes, Mapping, AbstractSet)) or not hasattr(out, "__len__"):
        raise RewardError(
            f"reward function {name!r} returned {type(out).__name__} {out!r:.40}, not one value per completion "
            f"(a list of {n} floats)"
        )
    out = list(out)
    if len(out) != n:
        raise RewardError(f"reward function {name!r} returned {len(out)} values for {n} completions")
    token_level = bool(out) and isinstance(out[0], (list, tuple))
    if token_level:
        rows = []
        for i, row in enumerate(out):
            if not isinstance(row, (list, tuple)):
                raise RewardError(f"reward function {name!r} mixed a list and a {type(row).__name__} (completion {i})")
            rows.append([_number(name, v, i) for v in row])
        width = max((len(r) for r in rows), default=0)
        return torch.tensor([r + [0.0] * (width - len(r)) for r in rows], dtype=torch.float).reshape(n, width), True
    return torch.tensor([float("nan") if v is None else _number(name, v, i) for i, v in enumerate(out)]), False


def _number(name: str, value: Any, i: int) -> float:
    if isinstance(value, (str, bytes, list, tuple, dict)) or value is None:
        raise RewardError(
            f"reward function {name!r} returned {value!r:.40} ({type(value).__name__}) for completion {i}; a reward "
            "is a number per completion (None where it does not apply)"
        )
    try:
        return float(value)
    except OverflowError:  # an int beyond a double (10**400): not a reward
        raise RewardError(
            f"reward function {name!r} returned a number too large for a float ({str(value)[:12]}... with "
            f"{len(str(value))} digits) for completion {i}; scale the reward"
        ) from None
    except (TypeError, ValueError) as err:
        raise RewardError(f"reward function {name!r} returned {value!r:.40} for completion {i}: {err}") from err


def _invalid(name: str, values: torch.Tensor, bad: torch.Tensor, max_abs: float | None, drop: bool) -> None:
    """Stop (or, with ``drop``, warn) naming the function, the first bad completion and its value."""
    i = int(bad.nonzero()[0])
    row = values[i].reshape(-1)
    culprit = row[~torch.isfinite(row) | (row.abs() > max_abs if max_abs is not None else False)][0]
    what = str(float(culprit)) if not bool(torch.isfinite(culprit)) else f"{float(culprit):.3g} (|r| > {max_abs:g})"
    more = f" (and {int(bad.sum()) - 1} more)" if int(bad.sum()) > 1 else ""
    if not drop:
        raise RewardError(
            f"reward function {name!r} returned {what} for completion {i}{more}; fix the reward, raise "
            "max_abs_reward, or set invalid_rewards to 'drop' to leave such completions out"
        )
    from transformers.utils import logging

    logging.get_logger(__name__).warning(
        f"reward function {name!r} returned {what} for completion {i}{more}; left out of this rollout"
    )


__all__ = ["RewardError", "compute_rewards", "reward_name"]
