"""Reward functions. A reward is a plain TRL reward function:

``reward(prompts: list, completions: list[str], **columns) -> list[float]`` (one score per
completion), or one list of floats per completion token for a token-level reward. Parameterised
rewards are small picklable classes; YAML names them by id with args: ``{id: NAME, args: {...}}``.
Rewards that return None (or NaN) for a sample give no score there: hfrl's trainers count it as 0,
TRL's leave it out of the sum over reward functions. Every reward is also a metric (``hfrl.metrics``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

from hfrl.utils.registry import Entry, built, is_code_path, resolve, spec_parts, unknown

# Rewards that are not a metric's per-sample score (those are rewards too, by the metric's id:
# hfrl.metrics.METRICS, through MetricReward). name -> Entry (where, inputs, range, needs).
REWARDS: dict[str, Entry] = {
    # synthetic tasks (synthetic.py)
    "increasing_numbers": Entry("hfrl.rewards.synthetic:IncreasingNumbers", range="[0, 1]"),
    "contains_date": Entry("hfrl.rewards.synthetic:contains_date", range="{0, 1}"),
    # verifiable answers (arithmetic.py): the arith_chains task
    "exact_answer": Entry("hfrl.rewards.arithmetic:exact_answer", ("answer",), "{0, 1}"),
    "answer_format": Entry("hfrl.rewards.arithmetic:answer_format", range="{0, 1}"),
    # composition (composite.py)
    "weighted": Entry("hfrl.rewards.composite:WeightedSum", range="the weighted sum of its rewards'"),
    # task rewards: HH's reward model (A-LoL)
    "openassistant_reward": Entry("hfrl.rewards.oasst:OpenAssistantReward", range="[0, 1]", needs=("model",)),
    # Leftover-Lunch dialogue attributes (dialogue.py) and the COMET critic (comet_critic.py)
    "cola_fluency": Entry("hfrl.rewards.dialogue:CoLAFluency", range="[0, 1]", needs=("model",)),
    "dialogrpt_depth": Entry("hfrl.rewards.dialogue:DialogRPTDepth", range="[0, 1]", needs=("model",)),
    "dialogrpt_updown": Entry("hfrl.rewards.dialogue:DialogRPTUpdown", range="[0, 1]", needs=("model",)),
    "faithcritic": Entry(  # the knowledge column, else the prompt's Knowledge: segment
        "hfrl.rewards.dialogue:FaithCritic", range="[0, 1]", needs=("model",), optional_inputs=("knowledge",)
    ),
    "offensive_safety": Entry("hfrl.rewards.dialogue:OffensiveSafety", range="[0, 1]", needs=("model",)),
    "tfidf_diversity": Entry("hfrl.rewards.dialogue:TfidfDiversity", range="[0, 1]"),
    "comet_critic": Entry(  # the head and relation columns, else parsed from the prompt
        "hfrl.rewards.comet_critic:CometCritic", range="[0, 1]", needs=("model",), optional_inputs=("head", "relation")
    ),
}


def spec_problem(spec: Any, where: str, kind: str = "reward") -> str | None:
    """What is wrong with a ``kind``'s spec as a file or the command line gives it, in one line that
    starts with its place ``where`` (``rewards[0]``), or None. A spec is an id (text: a registered
    name or a ``module:attr`` path) or a mapping ``{id: ID, args: {argument: value}}``, nothing else.

    >>> spec_problem("rouge", "rewards[0]"), spec_problem({"id": "rouge", "args": {"rouge_type": "rougeL"}}, "r")
    (None, None)
    >>> spec_problem({"id": 5}, "rewards[0]")
    'rewards[0].id takes a reward id (text: hfrl list rewards, or module:attr), got 5'
    >>> print(spec_problem({"id": "increasing_numbers", "args": [1, 2]}, "rewards[0]"))
    rewards[0].args takes a mapping of argument: value, such as {min_tokens: 20}, got [1, 2] (reward ...)
    """
    ids = f"a {kind} id (text: hfrl list {kind}s, or module:attr)"
    if isinstance(spec, str):
        return None if spec.strip() else f"{where} takes {ids}, got an empty text"
    if not isinstance(spec, dict) or "id" not in spec:
        return f"{where} takes {ids} or {{id: ID, args: {{argument: value}}}}, got {spec!r}"
    extra = [str(key) for key in spec if key not in ("id", "args")]
    if extra:
        return f"{where} holds id and args, not {', '.join(repr(k) for k in extra)}"
    if not isinstance(spec["id"], str) or not spec["id"].strip():
        return f"{where}.id takes {ids}, got {spec['id']!r}"
    if spec.get("args") is not None and not isinstance(spec["args"], dict):
        example = "{min_tokens: 20}" if kind == "reward" else "{n: 2}"
        return (
            f"{where}.args takes a mapping of argument: value, such as {example}, got {spec['args']!r} "
            f"({kind} {spec['id']!r})"
        )
    return None


def check_spec(spec: Any, kind: str = "reward") -> None:
    """A one-line ``ValueError`` for a spec :func:`spec_problem` refuses (a callable, or an ``id`` that is
    one, is Python's own and passes)."""
    if callable(spec) or (isinstance(spec, dict) and callable(spec.get("id"))):
        return
    problem = spec_problem(spec, f"{kind} spec", kind)
    if problem:
        raise ValueError(problem)


def load_task_metric(spec: str | dict[str, Any] | Callable[..., Any]) -> Callable[..., Any]:
    """A task's metric: a metric (:func:`hfrl.metrics.load_metric`), or a reward used as one (its
    per-sample values and their mean: :class:`hfrl.rewards.as_metric.RewardMetric`), by id,
    ``{id, args}``, ``{id: reward, args: {reward: ...}}``, ``module:attr`` or callable."""
    from hfrl.metrics import METRICS, load_metric
    from hfrl.rewards.as_metric import RewardMetric

    if callable(spec):
        return spec
    check_spec(spec, "metric")
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


def load_reward(spec: str | dict[str, Any] | Callable[..., Any]) -> Callable[..., Any]:
    """A reward from a registry id, a ``module:attr`` path, ``{id, args}`` or a callable."""
    if callable(spec):
        return spec
    check_spec(spec)
    name, args = spec_parts(spec, "reward")
    if callable(name):
        return cast(Callable[..., Any], built(name, args, "reward", name))
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
    return cast(Callable[..., Any], built(resolve(name, reward_ids(), "reward"), args, "reward", name))


def _takes_any(metric: str) -> bool:
    """Whether a metric's class takes ``**kwargs`` (its arguments cannot be listed)."""
    from hfrl.metrics import METRICS
    from hfrl.utils.registry import import_path, path_of

    params = inspect.signature(import_path(path_of(METRICS[metric]))).parameters.values()
    return any(p.kind is p.VAR_KEYWORD for p in params)


def reward_inputs(func: Callable[..., Any]) -> tuple[str, tuple[str, ...]] | None:
    """``(id, the dataset columns it needs)`` of a reward built from the registries (a registered
    function, class or metric id: its entry's ``inputs``; a weighted sum: its rewards'), or None for
    a reward of your own (only its code knows what it reads).

    >>> reward_inputs(load_reward("exact_answer")), reward_inputs(load_reward({"id": "rouge"}))
    (('exact_answer', ('answer',)), ('rouge', ('references',)))
    >>> reward_inputs(lambda prompts, completions, **columns: [1.0] * len(completions)) is None
    True
    """
    from hfrl.metrics import METRICS
    from hfrl.rewards.from_metrics import MetricReward

    owner = func if inspect.isfunction(func) else type(func)
    path = f"{owner.__module__}:{owner.__qualname__}"
    name = next((name for name, entry in REWARDS.items() if entry.path == path), None)
    if name == "weighted":  # hfrl.rewards.composite.WeightedSum: what its rewards read
        parts = [reward_inputs(r) for r in getattr(func, "rewards", [])]
        return name, tuple(dict.fromkeys(c for part in parts if part is not None for c in part[1]))
    if name is not None:
        return name, REWARDS[name].inputs
    metric = getattr(func, "metric_id", None) if isinstance(func, MetricReward) else None
    if metric in METRICS:
        return metric, METRICS[metric].inputs
    return None


def missing_inputs_problem(
    reward_funcs: Sequence[Callable[..., Any]], columns: Sequence[str], where: str
) -> str | None:
    """The first reward of ``reward_funcs`` that needs a column the data lacks, in one line that names
    the reward, the column(s) and ``where`` (``the train split of task 'numbers'``), or None. Rewards of
    your own are not checked (:func:`reward_inputs`).

    >>> print(missing_inputs_problem([load_reward("exact_answer")], ["prompt"], "the train split of task 'x'"))
    reward exact_answer reads column 'answer', which the train split of task 'x' lacks: add it or choose another reward
    """
    for func in reward_funcs:
        known = reward_inputs(func)
        if known is not None and known[0] == "weighted":  # its rewards by their own ids
            problem = missing_inputs_problem(getattr(func, "rewards", []), columns, where)
            if problem:
                return problem.replace(" reads", " (in weighted) reads", 1)
            continue
        missing = [c for c in known[1] if c not in columns] if known is not None else []
        if known is not None and missing:
            listed = ", ".join(repr(c) for c in missing)
            return (
                f"reward {known[0]} reads column{'s' if len(missing) > 1 else ''} {listed}, which {where} "
                f"lack{'' if len(missing) > 1 else 's'}: add {'them' if len(missing) > 1 else 'it'} "
                "or choose another reward"
            )
    return None


def reward_list(reward_funcs: Any, weights: Any = None) -> tuple[list[Callable[..., Any]], list[float]]:
    """A reward function or a list of them, with their weights (default 1 each), checked to match."""
    funcs = [] if reward_funcs is None else reward_funcs
    funcs = list(funcs) if isinstance(funcs, (list, tuple)) else [funcs]
    weights = list(weights or [1.0] * len(funcs))
    problem = reward_weights_problem(weights, len(funcs))
    if problem:
        raise ValueError(problem)
    return funcs, weights


def reward_weights_problem(weights: Any, rewards: int) -> str | None:
    """One weight per reward function (``rewards``: how many the run has), or what to change; also
    checked by ``hfrl train`` before torch is imported (:func:`hfrl.runs.experiment.resolve_run`).

    >>> reward_weights_problem([1.0, 2.0], 1)
    'reward_weights has 2 entries for 1 reward functions: give one weight per reward'
    """
    if not isinstance(weights, (list, tuple)) or len(weights) == rewards:
        return None
    return f"reward_weights has {len(weights)} entries for {rewards} reward functions: give one weight per reward"


__all__ = [
    "check_spec",
    "load_reward",
    "missing_inputs_problem",
    "reward_ids",
    "reward_inputs",
    "reward_list",
    "reward_weights_problem",
    "spec_problem",
]
