"""Reward functions. A reward is a plain TRL reward function:

``reward(prompts: list, completions: list[str], **columns) -> list[float]`` (one score per
completion), or one list of floats per completion token for a token-level reward. Parameterised
rewards are small picklable classes; YAML names them by id with args: ``{id: NAME, args: {...}}``.
Rewards that return None (or NaN) for a sample give no score there: hfrl's trainers count it as 0,
TRL's leave it out of the sum over reward functions. Every reward is also a metric (``hfrl.metrics``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hfrl.utils.registry import Entry, built, is_code_path, resolve, spec_parts, unknown

# Rewards that are not a metric's per-sample score (those are rewards too, by the metric's id:
# hfrl.metrics.METRICS, through MetricReward). name -> Entry (where, inputs, range, needs).
REWARDS: dict[str, Entry] = {
    # synthetic tasks (synthetic.py)
    "increasing_numbers": Entry("hfrl.rewards.synthetic:IncreasingNumbers", range="[0, 1]"),
    "contains_date": Entry("hfrl.rewards.synthetic:contains_date", range="{0, 1}"),
    # composition (composite.py)
    "weighted": Entry("hfrl.rewards.composite:WeightedSum", range="the weighted sum of its rewards'"),
    # task rewards: HH's reward model (A-LoL)
    "openassistant_reward": Entry("hfrl.tasks.hh:OpenAssistantReward", range="[0, 1]", needs=("model",)),
    # Leftover-Lunch dialogue attributes (dialogue.py) and the COMET critic (comet_critic.py)
    "cola_fluency": Entry("hfrl.rewards.dialogue:CoLAFluency", range="[0, 1]", needs=("model",)),
    "dialogrpt_depth": Entry("hfrl.rewards.dialogue:DialogRPTDepth", range="[0, 1]", needs=("model",)),
    "dialogrpt_updown": Entry("hfrl.rewards.dialogue:DialogRPTUpdown", range="[0, 1]", needs=("model",)),
    "faithcritic": Entry("hfrl.rewards.dialogue:FaithCritic", ("knowledge",), "[0, 1]", ("model",)),
    "offensive_safety": Entry("hfrl.rewards.dialogue:OffensiveSafety", range="[0, 1]", needs=("model",)),
    "tfidf_diversity": Entry("hfrl.rewards.dialogue:TfidfDiversity", range="[0, 1]"),
    "comet_critic": Entry("hfrl.rewards.comet_critic:CometCritic", range="[0, 1]", needs=("model",)),
}


def load_task_metric(spec: str | dict[str, Any] | Callable) -> Callable:
    """A task's metric: a metric (:func:`hfrl.metrics.load_metric`), or a reward used as one (its
    per-sample values and their mean: :class:`hfrl.rewards.as_metric.RewardMetric`), by id,
    ``{id, args}``, ``{id: reward, args: {reward: ...}}``, ``module:attr`` or callable."""
    from hfrl.metrics import METRICS, load_metric
    from hfrl.rewards.as_metric import RewardMetric

    if callable(spec):
        return spec
    name, args = spec_parts(spec, "metric")
    if name == "reward":  # {id: reward, args: {reward: SPEC, key: NAME}}
        if "reward" not in args:
            raise ValueError("metric 'reward' takes args {reward: a reward id, {id, args} or module:attr}")
        return RewardMetric(load_reward(args["reward"]), args.get("key"))
    if name not in METRICS and name in reward_ids():
        return RewardMetric(load_reward({"id": name, "args": args}))
    if name not in METRICS and not is_code_path(name):
        raise unknown("metric", name, [*METRICS, *reward_ids(), "reward"], hint=", or a 'module:attr' path")
    return load_metric(spec)


def reward_ids() -> dict[str, Entry]:
    """Every reward id: :data:`REWARDS`, and every metric with a per-sample score (by the metric's id)."""
    from hfrl.metrics import METRICS

    return {**{k: e for k, e in METRICS.items() if e.reward is not None}, **REWARDS}


def load_reward(spec: str | dict[str, Any] | Callable) -> Callable:
    """A reward from a registry id, a ``module:attr`` path, ``{id, args}`` or a callable."""
    if callable(spec):
        return spec
    name, args = spec_parts(spec, "reward")
    if callable(name):
        return built(name, args, "reward", name)
    if name not in REWARDS:
        from hfrl.metrics import METRICS

        if name in METRICS and METRICS[name].reward is not None:  # a metric's per-sample score
            from hfrl.rewards.from_metrics import MetricReward, metric_reward_arguments

            for key in args:
                known = [*metric_reward_arguments(name), *(["score"] if name == "bertscore" else [])]
                known += ["key"] if name == "evaluate" else []
                if key not in known and not _takes_any(name):
                    raise unknown(f"argument of reward {name!r}", key, known)
            return MetricReward.from_id(name, **args)
    return built(resolve(name, reward_ids(), "reward"), args, "reward", name)


def _takes_any(metric: str) -> bool:
    """Whether a metric's class takes ``**kwargs`` (its arguments cannot be listed)."""
    import inspect

    from hfrl.metrics import METRICS
    from hfrl.utils.registry import import_path, path_of

    params = inspect.signature(import_path(path_of(METRICS[metric]))).parameters.values()
    return any(p.kind is p.VAR_KEYWORD for p in params)


def reward_list(reward_funcs: Any, weights: Any = None) -> tuple[list[Callable], list[float]]:
    """A reward function or a list of them, with their weights (default 1 each), checked to match."""
    funcs = [] if reward_funcs is None else reward_funcs
    funcs = list(funcs) if isinstance(funcs, (list, tuple)) else [funcs]
    weights = list(weights or [1.0] * len(funcs))
    if len(weights) != len(funcs):
        raise ValueError(f"reward_weights has {len(weights)} entries for {len(funcs)} reward functions")
    return funcs, weights
