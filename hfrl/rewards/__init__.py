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

from hfrl.utils.registry import built, resolve, spec_parts

_M = "hfrl.rewards.from_metrics"
REWARDS: dict[str, str] = {
    # synthetic tasks (synthetic.py)
    "increasing_numbers": "hfrl.rewards.synthetic:IncreasingNumbers",
    "contains_date": "hfrl.rewards.synthetic:contains_date",
    # composition (composite.py)
    "weighted": "hfrl.rewards.composite:WeightedSum",
    # per-sample metric scores (from_metrics.py over hfrl.metrics)
    "rouge": f"{_M}:Rouge",
    "bleu": f"{_M}:Bleu",
    "sacrebleu": f"{_M}:SacreBleu",
    "chrf": f"{_M}:Chrf",
    "ter": f"{_M}:Ter",
    "meteor": f"{_M}:Meteor",
    "bertscore": f"{_M}:BertScore",
    "bleurt": f"{_M}:Bleurt",
    "cider": f"{_M}:Cider",
    "spice": f"{_M}:Spice",
    "parent": f"{_M}:Parent",
    "commongen_repeat_penalty": f"{_M}:CommonGenRepeatPenalty",
    # learned classifiers
    "learned_classifier": f"{_M}:LearnedClassifier",
    "learned_judge": f"{_M}:LearnedJudge",  # the same, under its own id: a judge beside the trained-on classifier
    # lexicon sentiment: the offline stand-in for IMDB's classifier (hfrl.metrics.sentiment)
    "vader_sentiment": f"{_M}:VaderSentiment",
    "intent_accuracy": f"{_M}:IntentAccuracy",
    # any `evaluate` module with per-sample scores
    "evaluate": f"{_M}:EvaluateReward",
    # task rewards: HH's reward model (A-LoL)
    "openassistant_reward": "hfrl.tasks.hh:OpenAssistantReward",
    # Leftover-Lunch dialogue attributes (dialogue.py) and the COMET critic (comet_critic.py)
    "cola_fluency": "hfrl.rewards.dialogue:CoLAFluency",
    "dialogrpt_depth": "hfrl.rewards.dialogue:DialogRPTDepth",
    "dialogrpt_updown": "hfrl.rewards.dialogue:DialogRPTUpdown",
    "faithcritic": "hfrl.rewards.dialogue:FaithCritic",
    "offensive_safety": "hfrl.rewards.dialogue:OffensiveSafety",
    "tfidf_diversity": "hfrl.rewards.dialogue:TfidfDiversity",
    "comet_critic": "hfrl.rewards.comet_critic:CometCritic",
}


def load_reward(spec: str | dict[str, Any] | Callable) -> Callable:
    """A reward from a registry id, a ``module:attr`` path, ``{id, args}`` or a callable."""
    if callable(spec):
        return spec
    name, args = spec_parts(spec, "reward")
    return built(name if callable(name) else resolve(name, REWARDS, "reward"), args, "reward", name)


def reward_list(reward_funcs: Any, weights: Any = None) -> tuple[list[Callable], list[float]]:
    """A reward function or a list of them, with their weights (default 1 each), checked to match."""
    funcs = [] if reward_funcs is None else reward_funcs
    funcs = list(funcs) if isinstance(funcs, (list, tuple)) else [funcs]
    weights = list(weights or [1.0] * len(funcs))
    if len(weights) != len(funcs):
        raise ValueError(f"reward_weights has {len(weights)} entries for {len(funcs)} reward functions")
    return funcs, weights
