"""``TRPOTrainer``: the shared online core plus a trust-region natural-gradient policy step.

hfrl train --task numbers --alg trpo --model tiny
"""

from __future__ import annotations

import torch

from hfrl.advantages import masked_mean
from hfrl.losses import categorical_kl, trpo_surrogate
from hfrl.natural_gradient import backtracking_line_search, conjugate_gradient, flat, unflat
from hfrl.policies import completion_forward, tempered
from hfrl.rollout import Rollout, action_logprobs
from hfrl.trainers.online.online_trainer import OnlineTrainer
from hfrl.trainers.online.trpo_config import TRPOConfig


class TRPOTrainer(OnlineTrainer):
    """TRPO. The policy step is not an optimizer step, so ``training_step`` is overridden: the first
    micro-step of each iteration makes the natural-gradient step over the whole rollout (over the
    trainable policy parameters only: all of them, or a PEFT adapter's); every micro-step then
    regresses the critic on its minibatch with the Trainer's optimizer, which holds only the
    critic's parameters."""

    config_class = TRPOConfig
    _name = "TRPO"
    _tag_names = ["hfrl", "trpo"]
    _paper = {
        "title": "Trust Region Policy Optimization",
        "id": "1502.05477",
        "citation": """@inproceedings{schulman2015trust,
    title     = {{Trust Region Policy Optimization}},
    author    = {John Schulman and Sergey Levine and Philipp Moritz and Michael Jordan and Pieter Abbeel},
    booktitle = {Proceedings of the 32nd International Conference on Machine Learning},
    year      = 2015
}""",
    }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._require_unsharded_policy("takes second derivatives through every policy parameter at once")

    def create_optimizer(self, model=None):
        return super().create_optimizer(self.accelerator.unwrap_model(self.model).critic_modules())

    def training_step(self, model, inputs, num_items_in_batch=None) -> torch.Tensor:
        model.train()
        fresh = not self._buffer
        minibatch: Rollout = self._prepare_inputs(inputs)
        if fresh:
            self.policy_step(self._rollout)
        with self.compute_loss_context_manager():
            loss = self.compute_loss(model, minibatch)
        self.accelerator.backward(loss / self.args.gradient_accumulation_steps)
        return loss.detach() / self.args.gradient_accumulation_steps

    def compute_loss(self, model, inputs: Rollout, return_outputs: bool = False, num_items_in_batch=None):
        """The critic's loss: ``mean((V - R)^2)`` over completion tokens."""
        _, values = model(
            inputs.query_ids, inputs.query_mask, inputs.response_ids, inputs.response_mask, values_only=True
        )
        loss = masked_mean((values - inputs.returns) ** 2, inputs.response_mask)
        self.record({"loss/value": loss.detach()})
        return (loss, {"values": values}) if return_outputs else loss

    def policy_step(self, rollout: Rollout) -> None:
        """Conjugate gradient on Fisher-vector products, then the line search under ``target_kl``."""
        args = self.args
        policy = self.accelerator.unwrap_model(self.model).policy
        params = [p for p in policy.parameters() if p.requires_grad]
        batch = (rollout.query_ids, rollout.query_mask, rollout.response_ids, rollout.response_mask)
        mask = rollout.response_mask
        action_mask = self.loss_action_mask(rollout)

        def forward() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            logits = tempered(completion_forward(policy, *batch)[0], self.temperature)
            logprobs, entropy = action_logprobs(logits, rollout.response_ids, action_mask, entropy_grad=False)
            return logits, logprobs, entropy

        old_logits, old_objective, full_step, max_step, entropy = self._natural_gradient(forward, rollout, params)

        @torch.no_grad()
        def evaluate() -> tuple[float, float]:
            new_logits, new_logprobs, _ = forward()
            new_objective = trpo_surrogate(new_logprobs, rollout.logprobs, rollout.advantages, mask)
            return new_objective.item(), categorical_kl(old_logits, new_logits, mask).item()

        result = backtracking_line_search(
            params, full_step, evaluate, old_objective, args.target_kl,
            args.line_search_shrinking_factor, args.line_search_max_iter,
        )  # fmt: skip
        self._iteration.update(
            {
                "trpo/step_size": result.step_fraction * max_step,
                "trpo/kl": result.kl if result.accepted else 0.0,
                "trpo/line_search_steps": result.steps,
                "trpo/accepted": float(result.accepted),
                "loss/policy": -result.objective,
                "approx_kl": result.kl if result.accepted else 0.0,
                "entropy": masked_mean(entropy, mask).item(),
            }
        )

    def _natural_gradient(self, forward, rollout: Rollout, params: list[torch.Tensor]):
        """The full step ``sqrt(2 delta / s^T F s) * s`` with ``s`` solving ``F s = g`` by conjugate
        gradient. The double-backward graph lives only inside this call."""
        from torch.nn.attention import SDPBackend, sdpa_kernel

        args, mask = self.args, rollout.response_mask
        with sdpa_kernel([SDPBackend.MATH]):  # the fused CPU/flash kernels have no double backward
            logits, logprobs, entropy = forward()
        objective = trpo_surrogate(logprobs, rollout.logprobs, rollout.advantages, mask)
        grad = flat(torch.autograd.grad(objective, params, retain_graph=True))
        kl = categorical_kl(logits.detach(), logits, mask)  # KL(pi_old || pi), 0 here; its Hessian is F
        grad_kl = flat(torch.autograd.grad(kl, params, create_graph=True))

        def fisher_vector_product(vector: torch.Tensor) -> torch.Tensor:
            hvp = flat(torch.autograd.grad(grad_kl @ vector, params, retain_graph=True))
            return hvp + args.cg_damping * vector

        direction = conjugate_gradient(fisher_vector_product, grad, args.cg_max_steps)
        curvature = direction @ fisher_vector_product(direction)
        max_step = torch.sqrt(2 * args.target_kl / curvature.clamp(min=1e-12)).item()  # 0.5 s^T F s = delta
        full_step = unflat((max_step * direction).detach(), params)
        return logits.detach(), objective.item(), full_step, max_step, entropy.detach()
