"""``TRPOTrainer``: the shared online core plus a trust-region natural-gradient policy step.

hfrl train --task numbers --alg trpo --model tiny
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from hfrl.core.advantages import masked_mean
from hfrl.core.losses import categorical_kl, kl_k3
from hfrl.core.natural_gradient import backtracking_line_search, conjugate_gradient, flat, unflat
from hfrl.core.policies import completion_forward, tempered
from hfrl.core.policy_losses.base import PolicyOutputs
from hfrl.core.rollout import Rollout, action_logprobs
from hfrl.trainers.online.online_trainer import OnlineTrainer
from hfrl.trainers.online.trpo_config import TRPOConfig
from hfrl.trainers.papers import paper

if TYPE_CHECKING:
    from contextlib import AbstractContextManager


def _math_attention() -> AbstractContextManager[Any]:
    """PyTorch's plain attention for the block: the fused CPU / flash kernels have no double backward."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


class _Fisher:
    """The Fisher of one chunk's forward graph (kept for every call): ``F = J^T H J``, the Hessian of
    the masked mean ``KL(pi_old || pi)`` in ``params`` at ``pi = pi_old``, with ``J`` the Jacobian of
    the logits in ``params`` and ``H`` the KL's Hessian in the logits, at each of the ``N`` unmasked
    positions ``H_t u = (p_t * u - p_t (p_t . u)) / N`` (softmax's). The Hessian's other term,
    ``sum_t dKL/dz_t * d2 z_t``, vanishes: ``dKL/dz = pi - pi_old = 0`` there (docs/algorithms.md §5).
    So no second derivative of the KL through the network is taken: ``J v`` is the gradient in a
    dummy ``u`` of ``(J^T u) . v`` (the double-backward trick, through the backward graph alone),
    ``J^T w`` one ordinary backward: the same ``F v`` as the KL's Hessian-vector product up to float
    rounding (relative 1e-7), with a third fewer matrix products (the numbers task's policy step:
    0.75 s of CPU instead of 0.93 at one thread)."""

    def __init__(self, logits: torch.Tensor, chunk: Rollout, params: list[torch.Tensor]) -> None:
        mask = chunk.response_mask.to(logits.dtype)
        self.logits, self.params = logits, params
        self.probs = torch.softmax(logits.detach(), dim=-1)
        self.weights = mask / mask.sum()
        self.dummy = torch.zeros_like(logits, requires_grad=True)
        self.transposed = flat(torch.autograd.grad(logits, params, grad_outputs=self.dummy, create_graph=True))

    def _jv(self, vector: torch.Tensor) -> torch.Tensor:
        (jv,) = torch.autograd.grad(self.transposed, self.dummy, grad_outputs=vector, retain_graph=True)
        return jv

    def product(self, vector: torch.Tensor) -> torch.Tensor:
        """``F v``."""
        jv = self._jv(vector)
        hjv = self.weights.unsqueeze(-1) * self.probs * (jv - (self.probs * jv).sum(-1, keepdim=True))
        return flat(torch.autograd.grad(self.logits, self.params, grad_outputs=hjv, retain_graph=True))

    def quadratic(self, vector: torch.Tensor) -> torch.Tensor:
        """``v^T F v = (J v)^T H (J v) = sum_t (p_t . (J v)_t^2 - (p_t . (J v)_t)^2) / N``: the same
        number as ``v @ product(v)`` without ``J^T``'s backward."""
        jv = self._jv(vector)
        pjv = self.probs * jv
        return (self.weights * ((pjv * jv).sum(-1) - pjv.sum(-1) ** 2)).sum()


class TRPOTrainer(OnlineTrainer):
    """TRPO, on the online core's hooks: :meth:`policy_step` makes the natural-gradient step over the
    whole rollout once per iteration (over the trainable policy parameters only: all of them, or a
    PEFT adapter's); every minibatch then regresses the critic (``compute_loss``) with the Trainer's
    optimizer, which holds only the critic's parameters (with ``minibatch_trains_policy`` off,
    ``policy_outputs`` runs the critic alone, so the update's loss, :class:`hfrl.core.losses.UpdateLoss`,
    is its value loss). Without a critic (a critic-free advantage estimator) an iteration is its policy
    step alone."""

    algs = {"trpo": "online: a natural-gradient step inside a KL trust region, then the critic if any (TRPO)."}
    config_class = TRPOConfig
    args: TRPOConfig
    _name = "TRPO"
    _tag_names = ["hfrl", "trpo"]
    _paper = paper("schulman2015trust")
    minibatch_trains_policy = False  # the policy moves in policy_step; the minibatches train the critic

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.require_unsharded_policy(
            "takes second derivatives through every policy parameter and moves the weights itself"
        )

    def create_optimizer(self, model: Any = None) -> torch.optim.Optimizer:
        """The Trainer's optimizer over the critic alone (no parameters without a critic: its steps do nothing)."""
        return super().create_optimizer(self.accelerator.unwrap_model(self.model).critic_modules())

    def _objective(self, logprobs: torch.Tensor, chunk: Rollout) -> torch.Tensor:
        """What the step maximises: minus the policy loss (``policy_loss``; TRPO's own, ``surrogate``, is
        ``-mean_m(rho * A)``), minus ``beta * k3`` with ``kl_in_loss`` (aggregated as the loss aggregates;
        a constant normaliser rescales the objective, which changes no TRPO step)."""
        objective = -self.policy_loss(PolicyOutputs(logprobs, None, None), chunk.importance_weighted())[0]
        if self.args.kl_in_loss:  # beta: the rollout's (one line without one, never a silent 0)
            kl = kl_k3(logprobs, chunk.ref_logprobs, chunk.response_mask, self.policy_loss.aggregate)
            objective = objective - self.kl_coef * kl
        return objective

    def policy_step(self, rollout: Rollout) -> dict[str, float]:
        """Conjugate gradient on Fisher-vector products, then the line search under ``target_kl``.

        Every quantity is the masked mean over all completion tokens of every process: each chunk
        of ``fisher_batch_size`` completions contributes its mean weighted by its share of the
        tokens, and the sums are reduced over processes, so every process computes the same step
        and the policies stay identical (``autograd.grad`` bypasses DDP's gradient all-reduce)."""
        args = self.args
        policy = self.accelerator.unwrap_model(self.model).policy
        params = [p for p in policy.parameters() if p.requires_grad]
        chunks, weights = self._chunks(rollout)
        every = args.fisher_subsample
        fisher = (chunks, weights) if every == 1 else self._chunks(rollout[torch.arange(0, len(rollout), every)])

        def forward(chunk: Rollout, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            batch = (chunk.query_ids, chunk.query_mask, chunk.response_ids, chunk.response_mask)
            logits = tempered(completion_forward(policy, *batch)[0], self.collector.temperature)
            mask = self.action_space.loss_mask(chunk.action_sets, logits.shape[-1])
            logprobs, entropy = action_logprobs(logits, chunk.response_ids, mask, False, with_entropy)
            return logits, logprobs, cast(torch.Tensor, entropy)

        old_logits, old_objective, full_step, max_step, entropy = self._natural_gradient(
            forward, chunks, weights, fisher, params
        )

        @torch.no_grad()
        def evaluate() -> tuple[float, float]:
            sums = torch.zeros(2, device=weights[0].device)
            for chunk, weight, old in zip(chunks, weights, old_logits, strict=True):
                new_logits, new_logprobs, _ = forward(chunk)
                mask = chunk.response_mask
                surrogate = self._objective(new_logprobs, chunk)
                sums += weight * torch.stack([surrogate, categorical_kl(old, new_logits, mask)])
            objective, kl = self.global_sum(sums).tolist()
            return objective, kl

        result = backtracking_line_search(
            params, full_step, evaluate, old_objective, args.target_kl,
            args.line_search_shrinking_factor, args.line_search_max_iter,
        )  # fmt: skip
        return {
            "trpo/step_size": result.step_fraction * max_step,
            "trpo/kl": result.kl if result.accepted else 0.0,
            "trpo/line_search_steps": result.steps,
            "trpo/accepted": float(result.accepted),
            "loss/policy": -result.objective,
            "approx_kl": result.kl if result.accepted else 0.0,
            "entropy": entropy,
        }

    def _chunks(self, rollout: Rollout) -> tuple[list[Rollout], list[torch.Tensor]]:
        """``rollout`` in chunks of ``fisher_batch_size`` completions, each weighted by its share of
        the tokens of every process."""
        size = self.args.fisher_batch_size or len(rollout)
        chunks = [rollout[torch.arange(i, min(i + size, len(rollout)))] for i in range(0, len(rollout), size)]
        total = self.global_sum(rollout.response_mask.sum().float())
        return chunks, [chunk.response_mask.sum().float() / total for chunk in chunks]

    def _natural_gradient(
        self,
        forward: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
        chunks: list[Rollout],
        weights: list[torch.Tensor],
        fisher: tuple[list[Rollout], list[torch.Tensor]],
        params: list[torch.Tensor],
    ) -> tuple[list[torch.Tensor], float, list[torch.Tensor], float, float]:
        """The full step ``sqrt(2 delta / s^T F s) * s`` with ``s`` solving ``F s = g`` by conjugate
        gradient; ``g`` and the step's length ``s^T F s`` over ``chunks``, conjugate gradient's ``F``
        over ``fisher`` (chunks and weights: the same ones, or every ``fisher_subsample``-th
        completion's). One Fisher chunk keeps its graph through conjugate gradient (the gradient's
        own graph when it is the same single chunk); several recompute each chunk's forward per
        Fisher-vector product, so memory is bounded by one chunk's graph. ``s^T F s`` is
        :meth:`_Fisher.quadratic` (no ``J^T`` backward), on the gradient's kept graph when the
        rollout is one chunk. ``KL(pi_old || pi)`` is 0 at the current parameters; its Hessian is
        ``F`` (:class:`_Fisher`)."""
        args = self.args
        fisher_chunks, fisher_weights = fisher
        one_chunk = len(chunks) == 1

        def fisher_of(chunk: Rollout, logits: torch.Tensor | None = None) -> _Fisher:
            """The chunk's Fisher, on ``logits``' kept graph or on a fresh forward."""
            with _math_attention():
                return _Fisher(forward(chunk)[0] if logits is None else logits, chunk, params)

        grad = torch.zeros(sum(p.numel() for p in params), device=weights[0].device)
        sums = torch.zeros(2, device=grad.device)  # surrogate, entropy
        old_logits: list[torch.Tensor] = []
        kept = None  # one chunk: its logits, the forward's graph kept for its Fisher
        for chunk, weight in zip(chunks, weights, strict=True):
            with _math_attention():
                logits, logprobs, entropy = forward(chunk, with_entropy=True)
            mask = chunk.response_mask
            objective = self._objective(logprobs, chunk)
            grad.addcmul_(flat(torch.autograd.grad(objective, params, retain_graph=one_chunk)), weight)
            sums += weight * torch.stack([objective.detach(), masked_mean(entropy, mask)])
            old_logits.append(logits.detach())
            kept = logits if one_chunk else None
        # conjugate gradient's Fisher on a kept graph: the rollout's own (one chunk, not subsampled) or the
        # one Fisher chunk's; None with several chunks (a fresh forward per chunk and product)
        shared = fisher_chunks is chunks
        if shared:
            retained = fisher_of(chunks[0], kept) if kept is not None else None
        else:
            retained = fisher_of(fisher_chunks[0]) if len(fisher_chunks) == 1 else None
        grad = self.global_sum(grad)
        old_objective, entropy = self.global_sum(sums).tolist()

        def fisher_product(vector: torch.Tensor) -> torch.Tensor:  # (F + damping I) v over fisher, in place
            if retained is not None:
                fvp = retained.product(vector).mul_(fisher_weights[0])
            else:
                fvp = torch.zeros_like(vector)
                for chunk, weight in zip(fisher_chunks, fisher_weights, strict=True):
                    fvp.addcmul_(fisher_of(chunk).product(vector), weight)
            return self.global_sum(fvp).add_(vector, alpha=args.cg_damping)

        direction = conjugate_gradient(fisher_product, grad, args.cg_max_steps)
        # the step's length from the whole rollout's Fisher: a subsample's can miss directions it curves in
        # (built after conjugate gradient, on the gradient's kept graph when the rollout is one chunk)
        whole = retained if shared else fisher_of(chunks[0], kept) if kept is not None else None
        if whole is not None:
            quadratic = weights[0] * whole.quadratic(direction)
        else:
            quadratic = torch.zeros((), device=grad.device)
            for chunk, weight in zip(chunks, weights, strict=True):
                quadratic += weight * fisher_of(chunk).quadratic(direction)
        curvature = self.global_sum(quadratic) + args.cg_damping * (direction @ direction)
        max_step = torch.sqrt(2 * args.target_kl / curvature.clamp(min=1e-12)).item()  # 0.5 s^T F s = delta
        full_step = unflat((max_step * direction).detach(), params)
        return old_logits, old_objective, full_step, max_step, entropy
