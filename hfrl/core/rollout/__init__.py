"""Rollouts for the online algorithms: generation with the KV cache, rewards, batched scoring.

One rollout = ``B / G`` prompts, ``G`` (``num_generations``, 1 by default) sampled completions each,
at most ``T`` new tokens; a prompt's completions are consecutive rows, its *group*, and share its
prompt encoding (:func:`shared_prefill`). Everything is computed in batches: ``generate`` once per
generation batch, each reward function once per rollout, one forward per model (policy + values,
reference) per scoring batch. No token-by-token re-scoring anywhere. The advantages come from an
estimator (:mod:`hfrl.core.estimators`, :func:`assemble`): GAE with the critic's values, or a
critic-free one (then no values at all).

One iteration's data, typed end to end, one module per phase: :func:`generate_completions`
(``generate.py``) returns :class:`Completions` (with what generation computed per step,
:class:`hfrl.core.capture.Captured`, and its :class:`Groups`), :func:`hfrl.rewards.combine.compute_rewards`
:class:`TaskRewards`, :func:`score` (``score.py``) :class:`Scores`, and :func:`assemble`
(``assemble.py``) builds the :class:`Rollout` from them; the types are in ``types.py``. The shape
of every tensor field of these types, with ``B`` completions, prompts of ``P`` tokens, completions
of ``T``, hidden size ``H`` and vocabulary size ``V``:

    (B, P)               query_ids, query_mask (prompts left-padded for causal models, right for seq2seq)
    (B, T)               response_ids, response_mask, token_mask and every per-token number:
                         logprobs, full_logprobs, ref_logprobs, kl, values, entropy, token_rewards,
                         rewards, advantages, returns, sampler_logprobs and is_weights (vLLM rollouts,
                         :mod:`hfrl.trainers.online.vllm_rollout`) (completions right-padded; masked: 0 at padding)
    (B, T, H)            hidden
    (B, T, ceil(V / 8))  action_sets: uint8, 1 bit per vocabulary entry (:func:`hfrl.core.capture.pack_sets`)
    (B,)                 scores; groups.ids (long: the prompt each completion answers, 0 .. B/G - 1)

``values`` (and ``hidden``) are None without a critic.

``logprobs`` always means the sampled tokens' log-probs under the *action distribution* (the policy
renormalised over the action space's set, :mod:`hfrl.core.action_space`; the full softmax for PPO, A2C and
TRPO): the ratio's denominator. ``full_logprobs`` are under the full softmax: the KL penalty's.
"""

from __future__ import annotations

from hfrl.core.rollout.assemble import assemble, reestimate, rollout_stats
from hfrl.core.rollout.generate import completion_mask, concat, generate_completions, pad, shared_prefill
from hfrl.core.rollout.score import action_logprobs, score
from hfrl.core.rollout.types import Completions, Groups, Rollout, Scores, TaskRewards, select_rows

__all__ = [
    "Completions",
    "Groups",
    "Rollout",
    "Scores",
    "TaskRewards",
    "action_logprobs",
    "assemble",
    "completion_mask",
    "concat",
    "generate_completions",
    "pad",
    "reestimate",
    "rollout_stats",
    "score",
    "select_rows",
    "shared_prefill",
]
