"""Sampling from the online trainers' policy: a rollout's completions (``num_generations`` per
prompt, topped up to ``rollout_tokens``, through the action space, keeping what generation computed)
and the eval split's completions with the eval settings.

A mixin of :class:`~hfrl.trainers.online.online_trainer.OnlineTrainer`; it reads the trainer's
``args``, ``accelerator``, ``model_wrapped``, ``tokenizer``, ``action_space``, ``has_critic`` and
``temperature``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, cast

import torch
from datasets import Dataset

from hfrl.core.action_space import FULL_VOCABULARY
from hfrl.core.capture import CaptureSettings
from hfrl.core.rollout import Completions, concat, generate_completions, pad
from hfrl.trainers.evaluation import PROMPT_IDS, generate_and_score


class OnlineGeneration:
    """``_generate_rollout``, ``_generate`` and ``generate_and_score`` (the eval split's) of the online trainers."""

    _mean_completion_length: float | None = None  # of the last rollout: sizes rollout_tokens' first round

    def _queries(self: Any, batch: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        side = "right" if self.is_encoder_decoder else "left"
        ids, mask = pad([ex[PROMPT_IDS] for ex in batch], self.tokenizer.pad_token_id, side)
        return ids.to(self.accelerator.device), mask.to(self.accelerator.device)

    def _generate(
        self: Any, query_ids, query_mask, generation_kwargs: dict, *, rollout: bool = False, num_generations: int = 1
    ) -> Completions:
        """Sample ``num_generations`` completions per prompt with the policy in eval mode (each prompt
        encoded once for them, :func:`hfrl.core.rollout.generate_completions`). A rollout's (``rollout``)
        samples through the action space and keeps what generation computed
        (:func:`hfrl.core.rollout.generate_completions`): the sets sampled from when the action space
        records them, the policy's log-probs and hidden states when :meth:`_capture_at_generation`."""
        from trl.models.utils import unwrap_model_for_generation

        capture = None
        if rollout and self._capture_at_generation():  # hidden states only for a critic's values
            capture = CaptureSettings(self.temperature, hidden=self.has_critic)
        with unwrap_model_for_generation(
            self.model_wrapped,
            self.accelerator,
            gradient_checkpointing_kwargs=cast(dict | None, self.args.gradient_checkpointing_kwargs),
        ) as unwrapped:
            was_training = unwrapped.training
            unwrapped.eval()
            with self._autocast(), self._diverged_weights_named():
                completions = generate_completions(
                    unwrapped.policy, query_ids, query_mask, generation_kwargs, self.tokenizer.pad_token_id,
                    batch_size=self.args.generation_batch_size,
                    action_space=self.action_space if rollout else FULL_VOCABULARY,
                    capture=capture, num_generations=num_generations,
                )  # fmt: skip
            unwrapped.train(was_training)
        return completions

    @contextlib.contextmanager
    def _diverged_weights_named(self: Any) -> Iterator[None]:
        """Sampling from a policy whose weights went non-finite fails deep in torch ("probability
        tensor contains either inf, nan or element < 0"): say what happened and what to change."""
        try:
            yield
        except RuntimeError as err:
            if "probability tensor contains" not in str(err):
                raise
            raise self.non_finite(
                "the policy's next-token probabilities are NaN or infinite (its weights diverged)"
            ) from err

    def _capture_at_generation(self: Any) -> bool:
        """Whether the rollout's policy log-probs and values come from generation (no scoring forward
        of the policy): on by config, with the value head on the shared backbone."""
        return self.args.logprobs_from_generation and not self.args.separate_critic

    def _autocast(self: Any):
        """Rollout generation and scoring under the run's mixed precision (``bf16`` / ``fp16``), as
        Accelerate runs the update's forward; a no-op in full precision."""
        return self.accelerator.autocast()

    def _decode(self: Any, response_ids: torch.Tensor) -> list[str]:
        return self.tokenizer.batch_decode(response_ids, skip_special_tokens=True)

    def _rollout_generation_kwargs(self: Any) -> dict:
        return {"max_new_tokens": self.args.max_new_tokens, **self.args.generation_kwargs}

    def _generate_rollout(self: Any, batch: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Completions]:
        """Sample the rollout: ``num_generations`` completions per prompt (``batch`` holds each prompt
        that many times in a row, :class:`IterationSampler`), then, with ``rollout_tokens`` (one
        completion per prompt), further completions of the same prompts (in turn) until the rollout
        holds that many transitions; the first round already samples as many as the previous
        rollout's mean length asks for. Returns the examples, one per completion, and the completions."""
        args, target, group = self.args, self.args.rollout_tokens, self.args.num_generations
        pending = list(batch)
        if len(pending) % group or any(
            ex[PROMPT_IDS] != pending[i - i % group][PROMPT_IDS] for i, ex in enumerate(pending)
        ):
            raise ValueError(f"a rollout's examples must hold each prompt num_generations ({group}) times in a row")
        if target and self._mean_completion_length:
            pending = _cycle(batch, 0, max(len(batch), math.ceil(target / self._mean_completion_length)))
        examples: list[dict[str, Any]] = []
        rounds: list[Completions] = []
        tokens = 0
        while True:
            prompts = pending[::group]  # one example per group
            chunk = min(args.generation_batch_size or len(pending), args.scoring_batch_size or args.mini_batch_size)
            if chunk < len(pending):  # batches of similar prompt lengths: less padding to generate and score over
                prompts = sorted(prompts, key=lambda ex: len(ex[PROMPT_IDS]))
                pending = [ex for ex in prompts for _ in range(group)]
            query_ids, query_mask = self._queries(prompts)
            kwargs = self._rollout_generation_kwargs()
            rounds.append(self._generate(query_ids, query_mask, kwargs, rollout=True, num_generations=group))
            examples += pending
            tokens += int(rounds[-1].response_mask.sum())
            if not target or tokens >= target:
                break
            needed = math.ceil((target - tokens) * len(examples) / tokens)  # at the mean length so far
            pending = _cycle(batch, len(examples), needed)
        self._mean_completion_length = tokens / len(examples)
        if len(rounds) == 1:
            return examples, rounds[0]
        return examples, concat(rounds, self.tokenizer.pad_token_id, *self._queries(examples))

    # ---- evaluation (EvaluationMixin.evaluate) ---------------------------------------------
    def generate_and_score(self: Any, dataset: Dataset, prefix: str = "eval") -> tuple[dict[str, float], list[dict]]:
        """The eval prompts completed by the policy with the eval settings (the whole vocabulary, as
        :meth:`_generate` samples outside a rollout), scored
        (:func:`hfrl.trainers.evaluation.generate_and_score`)."""
        kwargs = {"max_new_tokens": self.args.eval_max_new_tokens or self.args.max_new_tokens}
        kwargs.update(self.args.eval_generation_kwargs)
        if PROMPT_IDS not in dataset.column_names:
            dataset = self._tokenize(dataset)

        def complete(batch: Dataset) -> list[str]:
            return self._decode(self._generate(*self._queries(list(batch)), kwargs).response_ids)

        scoring = self.scoring(prefix, policy=self.accelerator.unwrap_model(self.model).policy)
        batch_size = self.args.per_device_eval_batch_size
        return generate_and_score(dataset, complete, scoring, batch_size=batch_size, accelerator=self.accelerator)


def _cycle(examples: list, start: int, count: int) -> list:
    """``count`` examples taken in turn from ``examples``, starting at index ``start`` (wrapping)."""
    return [examples[(start + i) % len(examples)] for i in range(count)]
