"""Losses of the online actor-critic algorithms and the offline A-LoL family and PRO. Pure: tensors in,
``(loss, stats)`` out. The maths: docs/algorithms.md §2 (PPO), §4 (A2C), §5 (TRPO), §6 (A-LoL), §7 (PRO).

All tensors are ``(batch, time)`` over completion tokens with ``mask`` 1 on real tokens; every token is one
transition, so losses are means over the masked tokens (RL4LMs / SB3; Dr. GRPO: :func:`token_sum`).
``stats`` holds detached scalars for logging. The KL as a loss term (GRPO): :func:`kl_k3`, §14."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor

from hfrl.core.advantages import masked_mean


def token_sum(values: Tensor, mask: Tensor, max_tokens: int | None = None) -> Tensor:
    """A policy loss's sum over tokens: ``mean_m(values)``, or with ``max_tokens`` ``sum_m(values) / (rows x
    max_tokens)``, Dr. GRPO's constant normaliser, blind to the completions' lengths (docs/algorithms.md §13.3).

    >>> values, mask = torch.tensor([[1.0, 2.0], [3.0, 0.0]]), torch.tensor([[1, 1], [1, 0]])
    >>> float(token_sum(values, mask)), float(token_sum(values, mask, max_tokens=4))  # 6 / 3, 6 / (2 x 4)
    (2.0, 0.75)
    """
    if max_tokens is None:
        return masked_mean(values, mask)
    return (values * mask.to(values.dtype)).sum() / (mask.shape[0] * max_tokens)


def ppo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cliprange: float = 0.2,
    max_tokens: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped surrogate: ``-mean(min(rho*A, clip(rho, 1-eps, 1+eps)*A))``, ``rho = exp(logp - logp_old)``
    (the mean over tokens as :func:`token_sum` says)."""
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - cliprange, 1 + cliprange) * advantages
    loss = -token_sum(torch.min(unclipped, clipped), mask, max_tokens)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean(((ratio - 1).abs() > cliprange).float(), mask),
            "approx_kl": masked_mean((ratio - 1) - log_ratio, mask),  # k3 estimator, as in SB3
        }
    return loss, stats


def value_loss(
    values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, cliprange_value: float | None = None
) -> tuple[Tensor, dict[str, Tensor]]:
    """MSE to the returns (SB3); with ``cliprange_value`` the max of the plain and the clipped error,
    the prediction clipped to ``old_values +- cliprange_value``."""
    error = (values - returns) ** 2
    if cliprange_value is not None:
        clipped = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
        error_clipped = (clipped - returns) ** 2
        vf_clipfrac = masked_mean((error_clipped > error).float(), mask).detach()
        error = torch.max(error, error_clipped)
    else:
        vf_clipfrac = torch.zeros((), device=values.device)
    return masked_mean(error, mask), {"vf_clipfrac": vf_clipfrac}


def ppo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    values: Tensor | None,
    old_values: Tensor | None,
    returns: Tensor,
    entropy: Tensor | None,
    mask: Tensor,
    cliprange: float = 0.2,
    cliprange_value: float | None = None,
    vf_coef: float = 0.5,
    ent_coef: float = 0.0,
    max_tokens: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO: ``policy_loss + vf_coef * value_loss - ent_coef * entropy`` (SB3's composition); no value
    term without a critic (``values`` None)."""
    pg_loss, pg_stats = ppo_policy_loss(logprobs, old_logprobs, advantages, mask, cliprange, max_tokens)
    vf_loss, vf_stats = None, dict[str, Tensor]()
    if values is not None:
        vf_loss, vf_stats = value_loss(values, cast(Tensor, old_values), returns, mask, cliprange_value)
    loss, stats = _actor_critic_total(pg_loss, vf_loss, entropy, mask, vf_coef, ent_coef)
    return loss, {**stats, **pg_stats, **vf_stats}


def _actor_critic_total(
    pg_loss: Tensor, vf_loss: Tensor | None, entropy: Tensor | None, mask: Tensor, vf_coef: float, ent_coef: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """``pg_loss + vf_coef * vf_loss - ent_coef * mean(H)`` (SB3's composition) and its statistics.
    ``vf_loss=None``: no critic; ``entropy=None``: no entropy term (the trainers skip computing it
    when ``ent_coef`` is 0)."""
    loss, stats = pg_loss, {"loss/policy": pg_loss.detach()}
    if vf_loss is not None:
        loss = loss + vf_coef * vf_loss
        stats["loss/value"] = vf_loss.detach()
    if entropy is not None:
        mean_entropy = masked_mean(entropy, mask)
        loss = loss - ent_coef * mean_entropy
        stats["entropy"] = mean_entropy.detach()
    stats["loss/total"] = loss.detach()
    return loss, stats


def a2c_loss(
    logprobs: Tensor,
    advantages: Tensor,
    values: Tensor | None,
    returns: Tensor,
    entropy: Tensor | None,
    mask: Tensor,
    vf_coef: float = 0.5,
    ent_coef: float = 0.0,
    max_tokens: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """A2C (SB3): ``-mean(A * logp) + vf_coef * mean((V - R)^2) - ent_coef * mean(H)``; no ratio, no
    clipping; no value term without a critic (then REINFORCE with the estimator's baseline)."""
    pg_loss = -token_sum(advantages * logprobs, mask, max_tokens)
    vf_loss = value_loss(values, values, returns, mask)[0] if values is not None else None  # plain MSE
    return _actor_critic_total(pg_loss, vf_loss, entropy, mask, vf_coef, ent_coef)


def kl_k3(logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor, max_tokens: int | None = None) -> Tensor:
    """The KL to the reference as a loss term (GRPO, Shao et al. 2024, eq. 4; Schulman's k3 estimator):
    ``mean_m(exp(ref - logp) - (ref - logp) - 1)`` over the sampled tokens, >= 0 and unbiased for
    ``KL(pi || pi_ref)`` under pi's samples; summed over tokens as :func:`token_sum` says.

    >>> round(float(kl_k3(torch.tensor([[-1.0]]), torch.tensor([[-2.0]]), torch.ones(1, 1))), 4)  # e^-1 + 1 - 1
    0.3679
    """
    delta = ref_logprobs - logprobs
    return token_sum(torch.exp(delta) - delta - 1, mask, max_tokens)


def categorical_kl(old_logits: Tensor, new_logits: Tensor, mask: Tensor) -> Tensor:
    """Mean over masked positions of ``KL(softmax(old) || softmax(new))`` over the last dim."""
    old_logp = torch.log_softmax(old_logits, -1)
    kl = (old_logp.exp() * (old_logp - torch.log_softmax(new_logits, -1))).sum(-1)
    return masked_mean(kl, mask)


def trpo_surrogate(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """TRPO's surrogate objective (to maximise): ``mean(rho * A)``, ``rho = exp(logp - logp_old)``."""
    return masked_mean(torch.exp(logprobs - old_logprobs) * advantages, mask)


# ---- Offline: the A-LoL family (docs/algorithms.md §6) -------------------------------------------
# The whole response is one action. Per example ``L = -sum_t log pi(y_t | x, y_<t)`` (summed over
# tokens, not averaged); every weight is detached; the batch loss is the mean of the example losses.

ALOL_ALGORITHMS = ("nll", "wbc", "r_gold", "r_lol", "a_lol", "a_lol_ref_free", "a_lol_seq", "a_lol_kl")
REWARD_WEIGHTED = ("wbc", "r_gold", "r_lol")  # weighted by the reward R
ADVANTAGE_WEIGHTED = ("a_lol", "a_lol_ref_free", "a_lol_seq", "a_lol_kl")  # weighted by A+ = max(R - V(x), 0)
NEEDS_REFERENCE = ("r_lol", "a_lol", "a_lol_seq", "a_lol_kl")  # need log pi_ref(y_t | x, y_<t)


def alol_example_losses(
    algorithm: str,
    logprobs: Tensor,
    mask: Tensor,
    rewards: Tensor | None = None,
    advantages: Tensor | None = None,
    ref_logprobs: Tensor | None = None,
    ppo_clip: float = 0.9,
    kl_beta: float = 0.0,
    gold_floor: float = 0.1,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-example losses ``(B,)`` of ``algorithm`` and their detached parts.

    ``logprobs``/``ref_logprobs``/``mask`` are ``(B, T)`` over completion tokens; ``rewards`` and
    ``advantages`` are ``(B,)``. ``rho = pi(y|x) / pi_ref(y|x) = exp(L_ref - L)`` is clamped to
    ``[1 - ppo_clip, 1 + ppo_clip]`` (a clamp, not PPO's min). Returned parts: ``nll`` (L), ``weight``
    (the example's detached multiplier of L, or of the per-token NLL for ``r_gold``/``a_lol_seq``: its
    token mean there), ``rho`` (clamped) and ``rho_clipped`` where a ratio is used, ``kl`` where
    ``ref_logprobs`` are given.
    """
    if algorithm not in ALOL_ALGORITHMS:
        raise ValueError(f"unknown A-LoL algorithm {algorithm!r}; known: {', '.join(ALOL_ALGORITHMS)}")
    mask = mask.to(logprobs.dtype)
    token_nll = -logprobs * mask  # -log pi(y_t), 0 on padding
    nll = token_nll.sum(1)  # L
    parts: dict[str, Tensor] = {"nll": nll.detach()}
    if algorithm in REWARD_WEIGHTED:
        if rewards is None:
            raise ValueError(f"{algorithm} needs the rewards of the examples")
        scale = rewards.to(nll).detach()  # R
    elif algorithm in ADVANTAGE_WEIGHTED:
        if advantages is None:
            raise ValueError(f"{algorithm} needs the advantages of the examples")
        scale = advantages.to(nll).detach().clamp(min=0.0)  # A+ = max(A, 0): A <= 0 drops the example
    else:
        scale = torch.ones_like(nll)
    ref = torch.zeros_like(logprobs)
    if algorithm in NEEDS_REFERENCE:
        if ref_logprobs is None:
            raise ValueError(f"{algorithm} needs the reference policy's log-probs")
        ref = ref_logprobs.to(logprobs).detach()  # log pi_ref(y_t)
        ref_nll = -(ref * mask).sum(1)  # L_ref
        parts["kl"] = (ref_nll - nll).detach()  # log pi(y|x) - log pi_ref(y|x)

    low, high = 1.0 - ppo_clip, 1.0 + ppo_clip
    if algorithm in ("nll", "wbc", "a_lol_ref_free"):
        weight = scale  # L, R * L, A+ * L
        losses = weight * nll
    elif algorithm == "r_gold":
        with torch.no_grad():
            token_weight = torch.clamp(logprobs.exp(), min=gold_floor) * mask  # max(pi(y_t), 0.1)
        weight = scale * (token_weight.sum(1) / mask.sum(1).clamp(min=1))
        losses = scale * (token_weight * token_nll).sum(1)  # R * sum_t max(pi(y_t), 0.1) * (-log pi(y_t))
    elif algorithm in ("r_lol", "a_lol"):
        with torch.no_grad():
            raw = torch.exp(ref_nll - nll)  # rho = exp(L_ref - L)
            rho = raw.clamp(low, high)
        parts["rho"], parts["rho_clipped"] = rho, ((raw < low) | (raw > high)).to(nll)
        weight = scale * rho
        losses = weight * nll  # R * clamp(rho) * L, A+ * clamp(rho) * L
    elif algorithm == "a_lol_seq":
        with torch.no_grad():
            raw = torch.exp(logprobs - ref)  # rho_t per token
            rho_t = raw.clamp(low, high) * mask
            count = mask.sum(1).clamp(min=1)
        parts["rho"] = rho_t.sum(1) / count
        parts["rho_clipped"] = (((raw < low) | (raw > high)).to(nll) * mask).sum(1) / count
        weight = scale * parts["rho"]
        losses = scale * (rho_t * token_nll).sum(1)  # A+ * sum_t clamp(rho_t) * (-log pi(y_t))
    else:  # a_lol_kl
        weight = scale
        losses = scale * nll + kl_beta * (ref_nll - nll)  # A+ * L + beta * (log pi(y|x) - log pi_ref(y|x))
    parts["weight"] = weight.detach()
    return losses, parts


def alol_loss(algorithm: str, logprobs: Tensor, mask: Tensor, **inputs: Any) -> tuple[Tensor, dict[str, Tensor]]:
    """The A-LoL family's batch loss: the mean of :func:`alol_example_losses` (``inputs``: its
    keyword arguments, ``rewards``, ``advantages``, ``ref_logprobs``, ``ppo_clip``...), with
    detached means of its parts (``nll``, ``weight``, ``rho``, ``rho_clipfrac``, ``kl``) for logging."""
    losses, parts = alol_example_losses(algorithm, logprobs, mask, **inputs)
    loss = losses.mean()
    stats = {"loss/total": loss.detach()}
    for name, value in parts.items():
        stats["rho_clipfrac" if name == "rho_clipped" else name] = value.float().mean()
    return loss, stats


# ---- Offline: PRO, preference ranking optimisation (Song et al. 2023, arXiv 2306.17492) ----------------
def pro_loss(
    logprob_sums: Tensor, lengths: Tensor, rewards: Tensor, mask: Tensor, sft_weight: float = 0.05
) -> tuple[Tensor, dict[str, Tensor]]:
    """PRO's loss over ``B`` prompts with up to ``N`` scored responses each, ranked by reward.

    Inputs are ``(B, N)``: ``logprob_sums`` ``S = sum_t log pi(y_t | x, y_<t)`` (with gradients),
    ``lengths`` ``|y|``, ``rewards`` ``r`` and ``mask`` (1 on real responses). Each prompt's
    responses are sorted by reward (stable, descending): ``y^1`` best. With ``s = S / |y|`` and, for
    ``k < n``, ``T_k^j = r_k - r_j`` (``j > k``) and ``T_k^k = max_{j > k} T_k^j`` (PRO's
    temperatures, reward differences; its code, also LoL-RL's ``pro_qlora_llama_hh.py``):

        L_k = -log( exp(s_k T_k^k) / (exp(s_k T_k^k) + sum_{j > k} exp(s_j T_k^j)) )
        L   = sum_{k=1}^{n-1} L_k + sft_weight * (n - 1)^2 * (-S_1)

    and the batch loss is the mean of ``L`` over prompts (PRO's code sums the mean of each ``L_k``,
    the same for a fixed ``n``; its ``+ 1e-10`` inside the log is left out: logsumexp is exact).
    Prompts with fewer than two responses add only their SFT term (``(n - 1)^2 = 0``: nothing).
    """
    valid = mask.bool()
    keys = rewards.detach().masked_fill(~valid, float("-inf"))
    order = torch.sort(keys, dim=1, descending=True, stable=True).indices  # padding last
    r, valid = rewards.detach().gather(1, order).masked_fill(~valid.gather(1, order), 0.0), valid.gather(1, order)
    total_logprob = logprob_sums.gather(1, order)
    s = total_logprob / lengths.gather(1, order).to(total_logprob).clamp(min=1)  # length-normalised log-prob
    n = valid.sum(1)
    ranking = torch.zeros_like(s[:, 0])
    for k in range(s.shape[1] - 1):
        later = valid[:, k + 1 :] & valid[:, k : k + 1]
        has = later.any(1)
        temps = (r[:, k : k + 1] - r[:, k + 1 :]).masked_fill(~later, 0.0)  # T_k^j = r_k - r_j
        t_kk = temps.masked_fill(~later, float("-inf")).max(1).values.masked_fill(~has, 0.0)  # max_j T_k^j
        best = s[:, k] * t_kk
        logits = torch.cat([best[:, None], (s[:, k + 1 :] * temps).masked_fill(~later, float("-inf"))], dim=1)
        ranking = ranking + torch.where(has, torch.logsumexp(logits, dim=1) - best, torch.zeros_like(best))
    sft = sft_weight * (n - 1).clamp(min=0).to(s) ** 2 * -total_logprob[:, 0]  # beta (n - 1)^2 (-S_1)
    loss = (ranking + sft).mean()
    with torch.no_grad():
        top = s.masked_fill(~valid, float("-inf")).argmax(1) == 0
        stats = {
            "loss/ranking": ranking.mean().detach(),
            "loss/sft": sft.mean().detach(),
            "loss/total": loss.detach(),
            "top1_accuracy": top.float().mean(),  # the best-rewarded response has the highest s
            "responses": n.float().mean(),
        }
    return loss, stats
