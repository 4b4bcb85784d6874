"""One online iteration's data: the rollout collector.

:class:`RolloutCollector` holds what a rollout is collected with (the run's settings, the tokenizer, the
reward functions, the reference policy, the action space, the advantage estimator, the accelerator) and
:meth:`RolloutCollector.collect` runs the phases, one call each on typed data (:mod:`hfrl.core.rollout`):

    generate (num_generations per prompt, topped up to rollout_tokens, through the action space)
    -> reward (every reward function once)  -> score (one forward per model and batch)
    -> assemble (KL penalty + advantages)   -> the iteration's record (rollout statistics, timings)

With ``use_vllm`` the generate phase is vLLM's (:class:`~hfrl.trainers.online.vllm_rollout.VLLMRollouts`,
set as ``vllm`` by the trainer): the same completions, then each token's truncated importance weight
after scoring.

It needs no Trainer: a test builds one from a config, a tokenizer, reward functions and an
``accelerate.Accelerator()`` (:mod:`tests.trainers.test_collector`). The trainer
(:class:`~hfrl.trainers.online.online_trainer.OnlineTrainer`) calls it once per iteration with its
model and the KL coefficient of the iteration, and steps the KL controller with the record's ``kl``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from transformers import TrainerState

from hfrl.core.action_space import FULL_VOCABULARY, ActionSpace
from hfrl.core.capture import CaptureSettings
from hfrl.core.estimators.base import AdvantageEstimator
from hfrl.core.policies import ActorCritic, ReferencePolicy
from hfrl.core.rollout import Completions, Rollout, TaskRewards, assemble, concat, generate_completions, pad, score
from hfrl.rewards.combine import compute_rewards
from hfrl.trainers.evaluation import NOT_REWARD_COLUMNS, PROMPT_IDS
from hfrl.trainers.finite_guard import non_finite_error
from hfrl.trainers.online.iteration_record import IterationRecord
from hfrl.trainers.online.lora_rollouts import merge_refusal, merged_for_rollout
from hfrl.trainers.online.online_config import OnlineConfig

if TYPE_CHECKING:
    from hfrl.trainers.online.vllm_rollout import VLLMRollouts


class RolloutCollector:
    """Collects an online iteration's rollout (the module's phases). ``reduce``: a sum over the run's
    processes (None in one process): batch statistics and logged means are the same on every process."""

    def __init__(
        self,
        args: OnlineConfig,
        tokenizer: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        reward_weights: Sequence[float],
        reference: ReferencePolicy | None,
        action_space: ActionSpace,
        estimator: AdvantageEstimator,
        accelerator: Any,
        is_encoder_decoder: bool,
    ) -> None:
        self.args, self.tokenizer, self.accelerator = args, tokenizer, accelerator
        self.reward_funcs, self.reward_weights = list(reward_funcs), list(reward_weights)
        self.reference, self.action_space, self.estimator = reference, action_space, estimator
        self.is_encoder_decoder = is_encoder_decoder
        self.mean_completion_length: float | None = None  # of the last rollout: sizes rollout_tokens' first round
        self.vllm: VLLMRollouts | None = None  # the rollouts' sampler with use_vllm (set by the trainer)

    # ---- settings ---------------------------------------------------------------------------------------
    @property
    def temperature(self) -> float:
        return rollout_temperature(self.args)

    @property
    def generation_kwargs(self) -> dict[str, Any]:
        """``generate``'s keyword arguments in rollouts."""
        return {"max_new_tokens": self.args.max_new_tokens, **self.args.generation_kwargs}

    @property
    def captures(self) -> bool:
        """Whether the rollout's policy log-probs and values come from generation (no scoring forward of
        the policy): on by config, with the value head on the shared backbone; never for vLLM's rollouts."""
        return self.args.logprobs_from_generation and not self.args.separate_critic and not self.args.use_vllm

    @property
    def reduce(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """Sum over processes (None in a single process): global whitening, KL and statistics."""
        return process_sum(self.accelerator)

    # ---- the iteration ----------------------------------------------------------------------------------
    def collect(
        self,
        model_wrapped: Any,
        examples: list[dict[str, Any]],
        kl_coef: float,
        state: TrainerState,
        estimator: AdvantageEstimator | None = None,
    ) -> tuple[Rollout, IterationRecord]:
        """Generate, reward, score, penalise KL and estimate advantages for ``examples`` (each prompt
        ``num_generations`` times in a row), with the policy ``model_wrapped`` (the trainer's wrapped
        :class:`~hfrl.core.policies.ActorCritic`) at the training ``state`` (its optimizer step; reward
        functions get it as TRL's ``trainer_state``); the rollout and its record. ``estimator``: this
        iteration's, when it is not the collector's (the critic's warm-up: lambda-1 targets)."""
        args, start, step = self.args, time.perf_counter(), state.global_step
        self.action_space.before_rollout(step // args.steps_per_iteration)
        examples, generated = self.generate_rollout(model_wrapped, examples, step)
        t_generate = time.perf_counter()

        prompts, texts = [ex["prompt"] for ex in examples], self.decode(generated.response_ids)
        rewards, reward_metrics = self.task_rewards(examples, texts, generated, state)
        t_reward = time.perf_counter()

        with self.accelerator.autocast():  # the run's mixed precision, as the update's forward
            scores = score(
                self.accelerator.unwrap_model(model_wrapped), self.reference, generated,
                batch_size=args.scoring_batch_size or args.mini_batch_size, temperature=self.temperature,
                action_space=self.action_space,
            )  # fmt: skip
        rollout = assemble(generated, scores, rewards, kl_coef=kl_coef, estimator=estimator or self.estimator,
                           kl_in_reward=not args.kl_in_loss)  # fmt: skip
        sampler: dict[str, float] = {}
        if self.vllm is not None:  # each token's truncated importance weight: the scoring's logprobs vs vLLM's
            rollout, sampler = self.vllm.weigh(rollout, cast(torch.Tensor, generated.sampler_logprobs), self.reduce)
        from hfrl.core.rollout import rollout_stats

        stats = rollout_stats(rollout, self.reduce)  # over every process: the same on all of them
        t_score = time.perf_counter()
        record = IterationRecord(
            start=start,
            update_start=t_score,
            tokens=int(generated.response_mask.sum()),
            kl_coef=kl_coef,
            metrics={
                **stats,
                "beta": kl_coef,
                **self.process_mean({f"rewards/{name}": value for name, value in rewards.means.items()}),
                **self.process_mean(reward_metrics),  # what reward functions logged (log_metric)
                "time/generate": t_generate - start,
                "time/reward": t_reward - t_generate,
                "time/score": t_score - t_reward,
                **self.action_space.rollout_stats(rollout.action_sets, rollout.response_mask),
                **sampler,
            },
        )
        if args.log_completions:
            self.write_completions(prompts, texts, rewards.scores.tolist(), step)
        return rollout, record

    # ---- generate ---------------------------------------------------------------------------------------
    def queries(self, examples: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The examples' prompt ids, padded (left for causal models, right for seq2seq), on the device."""
        side = "right" if self.is_encoder_decoder else "left"
        ids, mask = pad([ex[PROMPT_IDS] for ex in examples], self.tokenizer.pad_token_id, side)
        return ids.to(self.accelerator.device), mask.to(self.accelerator.device)

    def sample(
        self,
        model_wrapped: Any,
        query_ids: torch.Tensor,
        query_mask: torch.Tensor,
        generation_kwargs: dict[str, Any],
        *,
        step: int,
        rollout: bool = False,
        num_generations: int = 1,
    ) -> Completions:
        """Sample ``num_generations`` completions per prompt with the policy in eval mode (each prompt
        encoded once for them, :func:`hfrl.core.rollout.generate_completions`). A rollout's (``rollout``)
        samples through the action space and keeps what generation computed: the sets sampled from when
        the action space records them, the policy's log-probs and hidden states when
        ``logprobs_from_generation`` (and the critic shares the policy's backbone). Without them, a LoRA
        policy's rollout samples with the adapter merged (``merge_lora_for_rollouts``, :meth:`merges_lora`):
        the scoring forward computes the unmerged policy's numbers. With ``use_vllm``, a rollout's are
        vLLM's (:meth:`~hfrl.trainers.online.vllm_rollout.VLLMRollouts.sample`)."""
        from trl.models.utils import unwrap_model_for_generation

        if rollout and self.vllm is not None:
            return self.vllm.sample(query_ids, query_mask, num_generations=num_generations, step=step)
        args = self.args
        model: ActorCritic = self.accelerator.unwrap_model(model_wrapped)
        capture = None
        if rollout and self.captures:
            capture = CaptureSettings(self.temperature, hidden=model.has_critic)  # hidden: a critic's values
        # merged only where the scoring forward computes the (unmerged) policy's numbers anyway: no capture
        merge = rollout and capture is None and self.merges_lora(model.policy)
        with unwrap_model_for_generation(
            model_wrapped,
            self.accelerator,
            gradient_checkpointing_kwargs=cast(dict[str, Any] | None, args.gradient_checkpointing_kwargs),
        ) as unwrapped:
            was_training = unwrapped.training
            unwrapped.eval()
            with (
                self.accelerator.autocast(),
                self._diverged_weights_named(step),
                merged_for_rollout(unwrapped.policy, merge),
            ):
                completions = generate_completions(
                    unwrapped.policy, query_ids, query_mask, generation_kwargs, self.tokenizer.pad_token_id,
                    batch_size=args.generation_batch_size,
                    action_space=self.action_space if rollout else FULL_VOCABULARY,
                    capture=capture, num_generations=num_generations, tokenizer=self.tokenizer,
                )  # fmt: skip
            unwrapped.train(was_training)
        return completions

    def merges_lora(self, policy: Any) -> bool:
        """Whether a rollout of ``policy`` samples with its LoRA adapter merged (``merge_lora_for_rollouts``,
        :func:`hfrl.trainers.online.lora_rollouts.merge_refusal`)."""
        if not self.args.merge_lora_for_rollouts:
            return False
        state = self.accelerator.state
        plugin = getattr(state, "deepspeed_plugin", None)
        sharded = getattr(state, "fsdp_plugin", None) is not None or getattr(plugin, "zero_stage", 0) == 3
        return merge_refusal(policy, sharded) is None

    @contextlib.contextmanager
    def _diverged_weights_named(self, step: int) -> Iterator[None]:
        """Sampling from a policy whose weights went non-finite fails deep in torch ("probability
        tensor contains either inf, nan or element < 0"): say what happened and what to change."""
        try:
            yield
        except RuntimeError as err:
            if "probability tensor contains" not in str(err):
                raise
            what = "the policy's next-token probabilities are NaN or infinite (its weights diverged)"
            raise non_finite_error(self.args, step, what) from err

    def decode(self, response_ids: torch.Tensor) -> list[str]:
        return self.tokenizer.batch_decode(response_ids, skip_special_tokens=True)

    def generate_rollout(
        self, model_wrapped: Any, batch: list[dict[str, Any]], step: int
    ) -> tuple[list[dict[str, Any]], Completions]:
        """Sample the rollout: ``num_generations`` completions per prompt (``batch`` holds each prompt
        that many times in a row, :class:`~hfrl.trainers.online.iteration_sampler.IterationSampler`),
        then, with ``rollout_tokens`` (one completion per prompt), further completions of the same
        prompts (in turn) until the rollout holds that many transitions; the first round already
        samples as many as the previous rollout's mean length asks for. Returns the examples, one per
        completion, and the completions."""
        args, target, group = self.args, self.args.rollout_tokens, self.args.num_generations
        pending = list(batch)
        if len(pending) % group or any(
            ex[PROMPT_IDS] != pending[i - i % group][PROMPT_IDS] for i, ex in enumerate(pending)
        ):
            raise ValueError(f"a rollout's examples must hold each prompt num_generations ({group}) times in a row")
        if target and self.mean_completion_length:
            pending = _cycle(batch, 0, max(len(batch), math.ceil(target / self.mean_completion_length)))
        examples: list[dict[str, Any]] = []
        rounds: list[Completions] = []
        tokens = 0
        while True:
            prompts = pending[::group]  # one example per group
            chunk = min(args.generation_batch_size or len(pending), args.scoring_batch_size or args.mini_batch_size)
            if chunk < len(pending):  # batches of similar prompt lengths: less padding to generate and score over
                prompts = sorted(prompts, key=lambda ex: len(ex[PROMPT_IDS]))
                pending = [ex for ex in prompts for _ in range(group)]
            query_ids, query_mask = self.queries(prompts)
            rounds.append(
                self.sample(
                    model_wrapped,
                    query_ids,
                    query_mask,
                    self.generation_kwargs,
                    step=step,
                    rollout=True,
                    num_generations=group,
                )  # fmt: skip
            )
            examples += pending
            tokens += int(rounds[-1].response_mask.sum())
            if not target or tokens >= target:
                break
            needed = math.ceil((target - tokens) * len(examples) / tokens)  # at the mean length so far
            pending = _cycle(batch, len(examples), needed)
        self.mean_completion_length = tokens / len(examples)
        if len(rounds) == 1:
            return examples, rounds[0]
        return examples, concat(rounds, self.tokenizer.pad_token_id, *self.queries(examples))

    # ---- reward -----------------------------------------------------------------------------------------
    def task_rewards(
        self, examples: list[dict[str, Any]], texts: list[str], generated: Completions, state: TrainerState
    ) -> tuple[TaskRewards, dict[str, float]]:
        """Every reward function once over the rollout (:func:`hfrl.rewards.combine.compute_rewards`), and
        the means of what they logged (TRL's ``log_metric``). A completion whose reward is dropped
        (``invalid_rewards: drop``) gets a zero mask row in ``generated``: it takes no part in the update."""
        columns = {k: [ex[k] for ex in examples] for k in examples[0] if k not in NOT_REWARD_COLUMNS}
        mask = generated.response_mask.cpu()  # compute_rewards zeroes the rows it drops
        ids = [row[m.bool()].tolist() for row, m in zip(generated.response_ids.cpu(), mask, strict=True)]
        logged: dict[str, list[float]] = {}
        extras = {  # what TRL's trainers pass a reward function besides the columns (trl 1.16)
            "completion_ids": ids,
            "trainer_state": state,
            "log_extra": lambda column, values: None,  # per-completion columns: TRL's completion table only
            "log_metric": lambda name, value: logged.setdefault(name, []).append(float(value)),
        }
        rewards = compute_rewards(
            self.reward_funcs, self.reward_weights, [ex["prompt"] for ex in examples], texts, mask, columns,
            max_abs=self.args.max_abs_reward, drop_invalid=self.args.invalid_rewards == "drop", extras=extras,
        )  # fmt: skip
        generated.response_mask = mask.to(generated.response_mask.device)
        return rewards, {k: sum(v) / len(v) for k, v in logged.items() if v}

    def process_mean(self, values: dict[str, float]) -> dict[str, float]:
        """Mean over processes of per-process means (every process holds an equal share)."""
        if self.accelerator.num_processes == 1 or not values:
            return values
        keys = sorted(values)
        total = cast(Callable[[torch.Tensor], torch.Tensor], self.reduce)(
            torch.tensor([float(values[k]) for k in keys])
        )
        return dict(zip(keys, (total / self.accelerator.num_processes).tolist(), strict=True))

    def write_completions(self, prompts: list[Any], completions: list[str], rewards: list[float], step: int) -> None:
        """``completions/iteration-N.jsonl``: every process's prompts, completions and rewards."""
        from accelerate.utils import gather_object

        rank = self.accelerator.process_index
        rows = gather_object(
            [
                {"process": rank, "prompt": p, "completion": c, "reward": r}
                for p, c, r in zip(prompts, completions, rewards, strict=True)
            ]
        )
        if self.args.should_save:
            folder = os.path.join(str(self.args.output_dir), "completions")
            os.makedirs(folder, exist_ok=True)
            iteration = step // self.args.steps_per_iteration + 1
            with open(os.path.join(folder, f"iteration-{iteration}.jsonl"), "w") as fh:
                fh.writelines(json.dumps(row, default=str) + "\n" for row in rows)

    # ---- the eval split ---------------------------------------------------------------------------------
    def complete(self, model_wrapped: Any, examples: list[dict[str, Any]], step: int) -> list[str]:
        """The eval settings' completions of ``examples`` (tokenized prompts), from the whole vocabulary."""
        args = self.args
        kwargs = {"max_new_tokens": args.eval_max_new_tokens or args.max_new_tokens, **args.eval_generation_kwargs}
        completions = self.sample(model_wrapped, *self.queries(examples), kwargs, step=step)
        return self.decode(completions.response_ids)


def rollout_temperature(args: OnlineConfig) -> float:
    """The rollouts' sampling temperature (``generation_kwargs``' ``temperature``, default 1): every
    log-probability of the policy is taken at it, the update's and NLPO's mask policy's too."""
    return float(args.generation_kwargs.get("temperature") or 1.0)


def process_sum(accelerator: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """A sum over ``accelerator``'s processes (None in a single process): what the estimators' batch
    statistics, the collector's and TRPO's step reduce with."""
    if accelerator.num_processes == 1:
        return None
    return lambda t: accelerator.reduce(t.to(accelerator.device), reduction="sum")


def _cycle(examples: list[dict[str, Any]], start: int, count: int) -> list[dict[str, Any]]:
    """``count`` examples taken in turn from ``examples``, starting at index ``start`` (wrapping)."""
    return [examples[(start + i) % len(examples)] for i in range(count)]


__all__ = ["RolloutCollector", "process_sum", "rollout_temperature"]
