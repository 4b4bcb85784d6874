"""Trainers: one folder per algorithm family (``online/``: PPO, NLPO, A2C, TRPO; ``offline/``: the A-LoL
family), and ``trl_adapters`` for TRL's own trainers on hfrl tasks."""

from typing import Any

# Algorithm name -> trainer class (each carries its ``config_class``). Imported lazily.
ALGORITHMS: dict[str, str] = {
    "ppo": "hfrl.trainers.online:PPOTrainer",
    "nlpo": "hfrl.trainers.online:NLPOTrainer",
    "a2c": "hfrl.trainers.online:A2CTrainer",
    "trpo": "hfrl.trainers.online:TRPOTrainer",
    "grpo": "hfrl.trainers.trl_adapters:GRPOTrainer",
    "rloo": "hfrl.trainers.trl_adapters:RLOOTrainer",
    "sft": "hfrl.trainers.trl_adapters:SFTTrainer",
    "dpo": "hfrl.trainers.trl_adapters:DPOTrainer",
    "nll": "hfrl.trainers.offline:ALoLTrainer",
    "wbc": "hfrl.trainers.offline:ALoLTrainer",
    "r_gold": "hfrl.trainers.offline:ALoLTrainer",
    "r_lol": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol_ref_free": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol_seq": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol_kl": "hfrl.trainers.offline:ALoLTrainer",
    "pro": "hfrl.trainers.offline.pro_trainer:PROTrainer",
}

# One line per algorithm for `hfrl list algs` (plain text, whole sentences).
SUMMARIES: dict[str, str] = {
    "ppo": "online: clipped-ratio policy updates, per-token KL penalty, GAE with a value head or any estimator (PPO).",
    "nlpo": "online: PPO that samples inside the top-p set of a periodically refreshed mask policy (NLPO).",
    "a2c": "online: advantage actor-critic, one gradient step per rollout, no ratio or clipping (A2C).",
    "trpo": "online: a natural-gradient step inside a KL trust region, then the critic if any (TRPO).",
    "grpo": "TRL's GRPOTrainer (causal models, vLLM on a GPU): group-normalised advantages over several completions.",
    "rloo": "TRL's RLOOTrainer (causal models, vLLM on a GPU): REINFORCE with a leave-one-out baseline.",
    "sft": "TRL's SFTTrainer: supervised fine-tuning on the task's references or completions.",
    "dpo": "TRL's DPOTrainer: direct preference optimisation on chosen / rejected pairs.",
    "nll": "offline: negative log-likelihood of the data's responses (gives A-LoL's reference policy).",
    "wbc": "offline: reward-weighted behaviour cloning, R * NLL.",
    "r_gold": "offline: reward-weighted GOLD, R * sum_t max(pi, 0.1) * -log pi, no reference model.",
    "r_lol": "offline: reward times the clamped importance weight pi / pi_ref times NLL (R-LoL).",
    "a_lol": "offline: positive advantage R - V(x) times the clamped pi / pi_ref times NLL (A-LoL).",
    "a_lol_ref_free": "offline: A-LoL without the importance weight, A+ * NLL.",
    "a_lol_seq": "offline: A-LoL with a clamped importance weight per token.",
    "a_lol_kl": "offline: A-LoL with a KL penalty to pi_ref instead of the importance weight.",
    "pro": "offline: preference ranking over several scored responses per prompt, plus an SFT term (PRO).",
}


def algorithm_trainer(alg: str) -> Any:
    """The trainer class of a registered algorithm name (or a ``module:attr`` path to one's own)."""
    from hfrl.utils.registry import resolve

    return resolve(alg, ALGORITHMS, "algorithm")
