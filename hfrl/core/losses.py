"""The losses around the policy's: the whole online update (:class:`UpdateLoss`: the policy loss of
:mod:`hfrl.core.policy_losses`, the critic's, the entropy bonus and the KL term, composed once), TRPO's
pieces, the offline A-LoL family (its variants: :mod:`hfrl.core.offline_losses`) and PRO. Pure: tensors
in, ``(loss, stats)`` out. The maths: docs/algorithms.md §2 (PPO), §4 (A2C), §5 (TRPO), §6 (A-LoL),
§7 (PRO), §14 (the KL as a loss term), §15 (policy losses and their aggregation).

All tensors are ``(batch, time)`` over completion tokens with ``mask`` 1 on real tokens; every token is one
transition. ``stats`` holds detached scalars for logging."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from hfrl.core.advantages import masked_mean
from hfrl.core.offline_losses import OFFLINE_LOSSES, offline_loss_class
from hfrl.core.offline_losses.base import OfflineBatch
from hfrl.core.policy_losses.base import PolicyLoss, PolicyOutputs

if TYPE_CHECKING:
    from hfrl.core.rollout import Rollout


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


@dataclass(frozen=True)
class UpdateLoss:
    """The whole loss of an online minibatch, composed here once (SB3's composition, plus GRPO's KL term):

        loss = policy + vf_coef * value - ent_coef * mean(H) + beta * KL + positive_lm_coef * NLL+

    ``policy`` is the policy loss's (:mod:`hfrl.core.policy_losses`), ``value`` the critic's regression to
    the returns (:func:`value_loss`, clipped with ``cliprange_value``; absent without a critic), ``H`` the
    action distribution's entropy (only when ``ent_coef``: the trainers compute it then) and ``KL`` the
    ``k3`` estimate of ``KL(pi || pi_ref)`` (:func:`kl_k3`, only with ``kl_in_loss``), aggregated as the
    policy loss aggregates, and ``NLL+`` VAPO's positive-example LM loss (Yue et al. 2025, arXiv 2504.05118: the
    token-mean negative log-likelihood of the completions whose task reward is above
    ``positive_threshold``, the correct ones of a verifier's 0 / 1 reward; only with
    ``positive_lm_coef``). With vLLM rollouts the policy loss reads each token's advantage times its
    truncated importance weight (:meth:`hfrl.core.rollout.Rollout.importance_weighted`). A forward of
    the critic alone (TRPO's minibatches: its policy moves in its own step; a critic pass) is its value
    loss, unweighted."""

    policy_loss: PolicyLoss
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    cliprange_value: float | None = None
    positive_lm_coef: float = 0.0
    positive_threshold: float = 0.0

    def __call__(self, out: PolicyOutputs, batch: Rollout, kl_coef: float = 0.0) -> tuple[Tensor, dict[str, Tensor]]:
        mask = batch.train_mask
        value = None
        stats: dict[str, Tensor] = {}
        if out.values is not None:
            old = batch.values if batch.values is not None else out.values.detach()
            value, stats = value_loss(out.values, old, batch.returns, mask, self.cliprange_value)
        if out.logprobs is None:  # the critic alone
            assert value is not None, "a forward of neither policy nor critic"
            return value, {"loss/value": value.detach()}
        policy, policy_stats = self.policy_loss(out, batch.importance_weighted())  # w_t A_t with vLLM rollouts
        loss = policy
        stats = {"loss/policy": policy.detach(), **policy_stats, **stats}
        if value is not None:
            loss = loss + self.vf_coef * value  # + c_v * value
            stats["loss/value"] = value.detach()
        if out.entropy is not None:
            entropy = masked_mean(out.entropy, mask)
            loss = loss - self.ent_coef * entropy  # - c_e * mean(H)
            stats["entropy"] = entropy.detach()
        if out.full_logprobs is not None:
            kl = kl_k3(out.full_logprobs, batch.ref_logprobs, mask, self.policy_loss.aggregate)
            loss = loss + kl_coef * kl  # + beta * mean(k3) (GRPO)
            stats["loss/kl"] = kl.detach()
        if self.positive_lm_coef:
            nll = positive_nll(out.logprobs, batch.scores, mask, self.positive_threshold)
            loss = loss + self.positive_lm_coef * nll  # + mu * NLL over the positive examples (VAPO)
            stats["loss/positive_lm"] = nll.detach()
        stats["loss/total"] = loss.detach()
        return loss, stats


def positive_nll(logprobs: Tensor, scores: Tensor, mask: Tensor, threshold: float = 0.0) -> Tensor:
    """The token-mean negative log-likelihood of the completions whose score is above ``threshold``
    (VAPO's positive examples); 0 when there are none.

    >>> positive_nll(torch.log(torch.tensor([[0.5, 0.25], [0.1, 0.1]])), torch.tensor([1.0, 0.0]), torch.ones(2, 2))
    tensor(1.0397)
    """
    keep = mask.to(logprobs.dtype) * (scores > threshold).to(logprobs.dtype)[:, None]
    return -(logprobs * keep).sum() / keep.sum().clamp(min=1)


def kl_k3(
    logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor, aggregate: Callable[[Tensor, Tensor], Tensor] = masked_mean
) -> Tensor:
    """The KL to the reference as a loss term (GRPO, Shao et al. 2024, eq. 4; Schulman's k3 estimator):
    ``agg(exp(ref - logp) - (ref - logp) - 1)`` over the sampled tokens, >= 0 and unbiased for
    ``KL(pi || pi_ref)`` under pi's samples; ``aggregate`` as the policy loss's (the token mean by default).

    >>> round(float(kl_k3(torch.tensor([[-1.0]]), torch.tensor([[-2.0]]), torch.ones(1, 1))), 4)  # e^-1 + 1 - 1
    0.3679
    """
    delta = ref_logprobs - logprobs
    return aggregate(torch.exp(delta) - delta - 1, mask)


def categorical_kl(old_logits: Tensor, new_logits: Tensor, mask: Tensor) -> Tensor:
    """Mean over masked positions of ``KL(softmax(old) || softmax(new))`` over the last dim."""
    old_logp = torch.log_softmax(old_logits, -1)
    kl = (old_logp.exp() * (old_logp - torch.log_softmax(new_logits, -1))).sum(-1)
    return masked_mean(kl, mask)


# ---- Offline: the A-LoL family (docs/algorithms.md §6; the variants: hfrl.core.offline_losses) ------------
ALOL_ALGORITHMS = tuple(OFFLINE_LOSSES)  # A-LoL, its variants and baselines, by name


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
    """Per-example losses ``(B,)`` of the variant ``algorithm`` (:mod:`hfrl.core.offline_losses`) and their
    detached parts.

    ``logprobs``/``ref_logprobs``/``mask`` are ``(B, T)`` over completion tokens; ``rewards`` and
    ``advantages`` are ``(B,)``. ``rho = pi(y|x) / pi_ref(y|x) = exp(L_ref - L)`` is clamped to
    ``[1 - ppo_clip, 1 + ppo_clip]`` (a clamp, not PPO's min). Returned parts: ``nll`` (L), ``weight``
    (the example's detached multiplier of L, or of the per-token NLL for ``r_gold``/``a_lol_seq``: its
    token mean there), ``rho`` (clamped) and ``rho_clipped`` where a ratio is used, ``kl`` where
    ``ref_logprobs`` are given.
    """
    if algorithm not in OFFLINE_LOSSES:
        raise ValueError(f"unknown A-LoL algorithm {algorithm!r}; known: {', '.join(OFFLINE_LOSSES)}")
    variant = offline_loss_class(algorithm)()
    batch = OfflineBatch(logprobs, mask, rewards, advantages, ref_logprobs, ppo_clip, kl_beta, gold_floor)
    nll = batch.token_nll.sum(1)  # L
    parts: dict[str, Tensor] = {"nll": nll.detach()}
    if variant.weight == "reward":
        if rewards is None:
            raise ValueError(f"{algorithm} needs the rewards of the examples")
        scale = rewards.to(nll).detach()  # R
    elif variant.weight == "advantage":
        if advantages is None:
            raise ValueError(f"{algorithm} needs the advantages of the examples")
        scale = advantages.to(nll).detach().clamp(min=0.0)  # A+ = max(A, 0): A <= 0 drops the example
    else:
        scale = torch.ones_like(nll)
    if variant.needs_reference:
        if ref_logprobs is None:
            raise ValueError(f"{algorithm} needs the reference policy's log-probs")
        parts["kl"] = (batch.reference_nll - nll).detach()  # log pi(y|x) - log pi_ref(y|x)
    losses, own = variant.example_losses(batch, scale, nll)
    parts.update(own)
    parts["weight"] = parts["weight"].detach()
    return losses, parts


def alol_loss(algorithm: str, logprobs: Tensor, mask: Tensor, **inputs: Any) -> tuple[Tensor, dict[str, Tensor]]:
    """The A-LoL family's batch loss: the mean of :func:`alol_example_losses` (``inputs``: its
    keyword arguments, ``rewards``, ``advantages``, ``ref_logprobs``, ``ppo_clip``...), with
    detached means of its parts (``nll``, ``weight``, ``rho``, ``rho_clipfrac``, ``kl``) for logging.
    An example's loss sums over its tokens (hundreds for a long completion): ``loss/per_token`` is the
    batch's per completion token, ``sum_i L_i / sum_i |y_i|``, the scale of a token's NLL."""
    losses, parts = alol_example_losses(algorithm, logprobs, mask, **inputs)
    loss = losses.mean()
    stats = {"loss/total": loss.detach(), "loss/per_token": losses.detach().sum() / mask.sum().clamp(min=1)}
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


__all__ = [
    "UpdateLoss",
    "alol_example_losses",
    "alol_loss",
    "categorical_kl",
    "kl_k3",
    "positive_nll",
    "pro_loss",
    "value_loss",
]
