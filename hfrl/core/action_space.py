"""The action space of the online algorithms: which tokens each step may sample, and over which set
the loss's action distribution is normalised.

PPO, A2C and TRPO act over the whole vocabulary: :class:`ActionSpace` itself, which changes nothing;
with ``sampled_set_loss`` their loss renormalises over what generation's own processors (top_k,
top_p, ...) left to sample: :class:`SampledSets`. An algorithm that restricts the actions further
subclasses it in its own files (NLPO:
:class:`hfrl.trainers.online.nlpo_trainer.NLPOActionSpace`). The online core (:mod:`hfrl.core.rollout`,
:class:`hfrl.trainers.online.online_trainer.OnlineTrainer`, TRPO's policy step) calls only this
interface:

- :meth:`ActionSpace.before_rollout` at the start of every rollout;
- :meth:`ActionSpace.processors`: the logits processors of one ``generate`` call of the rollout;
- :attr:`ActionSpace.records_sets`: whether generation keeps the set each step sampled from (the
  tokens every logits processor left finite, packed 1 bit per vocabulary entry:
  :class:`hfrl.core.capture.SampledSetRecorder`), stored in the rollout as ``action_sets``;
- :meth:`ActionSpace.loss_mask`: the boolean action mask the scoring forward and the loss
  renormalise over, rebuilt from those sets (None: the full softmax);
- :meth:`ActionSpace.rollout_stats`: what to log about a rollout;
- :meth:`ActionSpace.state` / :meth:`ActionSpace.load_state` (kept in ``online_state.json``) and
  :meth:`ActionSpace.save` / :meth:`ActionSpace.load` (its own :attr:`ActionSpace.checkpoint_files`).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessor


class ActionSpace:
    """The whole vocabulary at every step: no logits processor, no stored sets, the full softmax in
    the loss, nothing to log or checkpoint."""

    #: whether generation keeps, per step, the set sampled from (``Rollout.action_sets``)
    records_sets: bool = False
    #: files :meth:`save` writes into a checkpoint folder (named when an incomplete one lacks them)
    checkpoint_files: tuple[str, ...] = ()

    def before_rollout(self, iteration: int) -> None:
        """Called at the start of each rollout, ``iteration`` the number of iterations done."""

    def processors(
        self, query_ids: torch.Tensor, query_mask: torch.Tensor, num_generations: int = 1
    ) -> list[LogitsProcessor]:
        """Fresh logits processors for one ``generate`` call of a rollout on these ``(B, P)`` prompts
        (they run after ``generate``'s own processors, before its sampling warpers); each run of
        ``num_generations`` rows is one prompt's group (the same prompt: it may be encoded once)."""
        return []

    def loss_mask(self, action_sets: torch.Tensor | None, vocab: int) -> torch.Tensor | None:
        """The boolean ``(B, T, vocab)`` mask the action distribution is renormalised over, from the
        packed ``action_sets`` generation recorded; None for the full softmax."""
        return None

    def rollout_stats(self, action_sets: torch.Tensor | None, response_mask: torch.Tensor) -> dict[str, float]:
        """Statistics of this action space over a rollout (its recorded ``action_sets`` and its
        ``response_mask``), logged with the iteration."""
        return {}

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state kept in the checkpoint's ``online_state.json``."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` from a checkpoint's ``online_state.json`` (the whole dict)."""

    def save(self, folder: str) -> None:
        """Write :attr:`checkpoint_files` into the checkpoint ``folder`` (called where the run saves)."""

    def load(self, folder: str) -> None:
        """Read :attr:`checkpoint_files` back from the checkpoint ``folder``."""


FULL_VOCABULARY = ActionSpace()


class SampledSets(ActionSpace):
    """Sampling unchanged, but the loss's action distribution (ratio, old log-probs, entropy) is the
    policy renormalised over the set each token was sampled from: the tokens generation's processors
    left finite (``top_k``, ``top_p``, ``min_new_tokens``' EOS ban...), recorded 1 bit per vocabulary
    entry. With truncated sampling the full softmax puts probability on tokens the rollout can never
    draw, which no sampled advantage ever lowers; this is the policy that actually acted. NLPO's loss
    does the same over its mask (:class:`hfrl.trainers.online.nlpo_trainer.NLPOActionSpace`)."""

    records_sets = True

    def loss_mask(self, action_sets: torch.Tensor | None, vocab: int) -> torch.Tensor | None:
        from hfrl.core.capture import unpack_sets

        return None if action_sets is None else unpack_sets(action_sets, vocab)

    def rollout_stats(self, action_sets: torch.Tensor | None, response_mask: torch.Tensor) -> dict[str, float]:
        """``sampled_set/tokens``: mean size of the sets sampled from."""
        from hfrl.core.capture import set_sizes

        if action_sets is None:
            return {}
        sizes = set_sizes(action_sets)[response_mask.bool()].float()
        return {"sampled_set/tokens": sizes.mean().item() if len(sizes) else 0.0}
