"""The shared online trainer: rollouts inside ``transformers.Trainer``'s loop.

The training loop is the Trainer's own. The sampler hands the first micro-step of an iteration its
``rollout_batch_size`` prompts and the others placeholders (:mod:`.iteration_sampler`);
``_prepare_inputs`` collects a rollout when its buffer is empty (generate -> reward -> score -> KL
penalty + advantages -> KL controller step, each phase one call on typed data:
:mod:`hfrl.core.rollout`), runs the algorithm's policy step if it has one, and then hands out one
minibatch per micro-step over ``num_ppo_epochs`` shuffled passes. State that is not a model tensor
(KL coefficient, iteration, the action space's) travels in ``online_state.json`` inside each
checkpoint, which counts once it is complete (:mod:`hfrl.trainers.crash_safe`). One iteration's
numbers fill an :class:`~hfrl.trainers.online.iteration_record.IterationRecord` (``self.iteration``),
logged once per iteration.

An algorithm is a subclass that uses the protected hook surface, and nothing else of the core:

- :meth:`OnlineTrainer.loss`: the minibatch loss from the policy's outputs on it (PPO, A2C; TRPO:
  the critic's regression), with its statistics;
- :meth:`OnlineTrainer.policy_step`: an update of the policy over the whole rollout, once per
  iteration before the minibatches (TRPO's natural-gradient step; nothing by default), returning
  what to log; ``minibatch_trains_policy = False`` when the minibatches train the critic alone;
- :meth:`OnlineTrainer._build_action_space` -> ``self.action_space``: which tokens each step may
  sample and the loss renormalises over (:mod:`hfrl.core.action_space`; NLPO's top-p mask);
- :meth:`OnlineTrainer._build_estimator` -> ``self.estimator``: the advantage estimator, the config's
  ``advantage_estimator`` (:mod:`hfrl.core.estimators`); without a critic (all but ``gae``) no value
  head exists.

Class attributes: ``minibatch_trains_policy``, ``minibatch_keeps_groups`` (a loss that needs each
minibatch to hold whole groups). Helpers an algorithm may call: :meth:`OnlineTrainer.action_logprobs`,
:attr:`OnlineTrainer.temperature`, :attr:`OnlineTrainer.has_critic`, :attr:`OnlineTrainer.loss_max_tokens`
(Dr. GRPO's constant normaliser), :meth:`OnlineTrainer.global_sum`, :meth:`OnlineTrainer.require_unsharded_policy`,
:meth:`OnlineTrainer.record`, and ``self.iteration`` (its ``kl_coef``, ``metrics``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple, cast

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.utils import logging

from hfrl.core.action_space import ActionSpace, SampledSets
from hfrl.core.estimators import estimator_class
from hfrl.core.estimators.base import AdvantageEstimator
from hfrl.core.kl import make_kl_controller
from hfrl.core.losses import kl_k3
from hfrl.core.minibatches import plan_epoch, whiten_per_minibatch
from hfrl.core.models import fix_tokenizer, load_tokenizer_for, load_trainable
from hfrl.core.policies import ActorCritic, ReferencePolicy, disable_dropout, is_peft_model, tempered
from hfrl.core.rollout import (
    Completions,
    Rollout,
    TaskRewards,
    action_logprobs,
    assemble,
    rollout_stats,
    score,
    whole_groups,
)
from hfrl.rewards import reward_list
from hfrl.rewards.combine import compute_rewards, reward_name
from hfrl.trainers.crash_safe import CrashSafeMixin
from hfrl.trainers.evaluation import (
    NOT_REWARD_COLUMNS,
    PROMPT_IDS,
    EvaluationMixin,
    encode_prompt,
)
from hfrl.trainers.iteration_log import IterationProgress, SaveStateAtEnd
from hfrl.trainers.online.checkpointing import ONLINE_STATE_NAME, VALUE_HEAD_NAME, OnlineCheckpointing
from hfrl.trainers.online.entropy_watch import EntropyWatch
from hfrl.trainers.online.generation import OnlineGeneration
from hfrl.trainers.online.iteration_record import IterationRecord
from hfrl.trainers.online.iteration_sampler import IterationSampler, PromptBatch, PromptRows
from hfrl.trainers.online.online_config import OnlineConfig
from hfrl.trainers.trainer_mixin import TrainerMixin

RewardFunc = Callable[..., Sequence[Any]]


class PolicyOutputs(NamedTuple):
    """One forward of the trained model over a minibatch, what :meth:`OnlineTrainer.loss` reads (``(B, T)``)."""

    logprobs: torch.Tensor | None  # of the taken tokens under the action distribution (None: critic only)
    entropy: torch.Tensor | None  # of the action distribution, only when in the loss (ent_coef)
    values: torch.Tensor | None  # V(s_t) (None: no critic)
    full_logprobs: torch.Tensor | None = None  # of the taken tokens under the full softmax (kl_in_loss only)


class OnlineTrainer(OnlineCheckpointing, OnlineGeneration, CrashSafeMixin, EvaluationMixin, TrainerMixin, Trainer):
    """Base of PPO / NLPO / A2C / TRPO. Subclasses set ``config_class`` and write :meth:`loss` (and
    :meth:`policy_step`, :meth:`_build_action_space` where they differ: the module's hook surface).
    Saving, the checkpoint's own state and resuming are :class:`OnlineCheckpointing`'s, sampling
    (rollouts, the eval split) :class:`OnlineGeneration`'s: first in the bases, their ``_save``,
    ``_save_own_state`` and ``generate_and_score`` replace the other mixins' and the Trainer's."""

    #: the algorithm names this trainer serves, with their `hfrl list algs` line (hfrl/trainers/declared.py)
    algs: ClassVar[dict[str, str]] = {}  # a base: exported, no name of its own
    config_class: type[OnlineConfig] = OnlineConfig
    args: OnlineConfig
    #: whether each minibatch's loss trains the policy (False: the policy moves in policy_step alone, TRPO)
    minibatch_trains_policy: bool = True
    #: whether a minibatch must hold whole groups (a loss with statistics over a prompt's completions);
    #: False: minibatches are drawn across groups (the advantages already carry the group baseline)
    minibatch_keeps_groups: bool = False
    # Model-card metadata, read by hfrl.cards.
    _name = "Online"
    _tag_names: list[str] = ["hfrl"]
    _paper: dict[str, str] = {}

    def __init__(
        self,
        model: str | PreTrainedModel,
        args: OnlineConfig | None = None,
        reward_funcs: RewardFunc | Sequence[RewardFunc] | None = None,
        train_dataset: Dataset | None = None,
        eval_dataset: Dataset | dict[str, Dataset] | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        peft_config: Any | None = None,
        ref_model: PreTrainedModel | None = None,
        metrics: dict[str, Callable] | None = None,
        callbacks: list[TrainerCallback] | None = None,
        optimizers: tuple = (None, None),
    ) -> None:
        args = args if args is not None else self.default_config(model)
        if reward_funcs is None:
            raise ValueError("reward_funcs is required: pass a reward function or a list of them")
        self.reward_funcs, self.reward_weights = reward_list(reward_funcs, args.reward_weights)
        self.metrics = dict(metrics or {})
        self.estimator = self._build_estimator(args)

        policy, processing_class, fresh = _load_policy(model, args, processing_class, peft_config)
        # No reference model at all when the KL penalty is off for good. A starting adapter (not a
        # fresh one) is part of pi_ref: the reference keeps a frozen copy of it.
        needs_reference = args.kl_coef > 0 or args.kl_target is not None
        self.reference = (
            ReferencePolicy(policy, ref_model, adapter_is_start=is_peft_model(policy) and not fresh)
            if needs_reference
            else None
        )
        # No value head at all for the critic-free estimators: nothing built, scored, trained or saved.
        wrapped = ActorCritic(policy, separate_critic=args.separate_critic, critic=self.estimator.needs_critic)
        self.is_encoder_decoder = wrapped.is_encoder_decoder
        self.tokenizer = processing_class
        self.args = args  # set early: _tokenize reads it before Trainer.__init__ runs

        super().__init__(
            model=wrapped,
            args=args,
            data_collator=PromptBatch,
            train_dataset=self._tokenize(train_dataset),
            eval_dataset=self._tokenize(eval_dataset),
            processing_class=processing_class,
            callbacks=callbacks,
            optimizers=optimizers,
        )
        if self.reference is not None:
            self.reference.prepare(self.accelerator)
        self.kl_ctl = make_kl_controller(args.kl_coef, args.kl_target, args.kl_adapt_rate)
        self._buffer: list[Rollout] = []
        self._rollout: Rollout | None = None  # the current iteration's rollout
        self.iteration: IterationRecord | None = None  # the current iteration's numbers, until it is logged
        self._mean_completion_length = None  # of the last rollout: sizes rollout_tokens' first round
        if not args.disable_tqdm:
            self.remove_callback(ProgressCallback)
            self.add_callback(IterationProgress())
        self.add_callback(SaveStateAtEnd())
        self.action_space = self._build_action_space()
        critic = (VALUE_HEAD_NAME,) if self.has_critic else ()
        self._own_checkpoint_files = (*critic, ONLINE_STATE_NAME, *self.action_space.checkpoint_files)
        self.entropy_watch = EntropyWatch()  # a one-line warning when the policy's entropy collapses
        if args.load_best_model_at_end:
            self._check_best_metric(self.eval_dataset)

    def _check_best_metric(self, eval_dataset: Any) -> None:
        """``load_best_model_at_end`` needs a ``metric_for_best_model`` among the evaluation's (and an
        eval set, without which the Trainer stops as for any ``eval_strategy``): ``eval_reward`` (each
        split's ``eval_NAME_reward`` with a dict of eval sets), a reward function's
        ``eval_rewards/NAME``, or a metric's (``eval_`` + a metric's name or one of its keys: checked
        at the first evaluation, where the keys are known)."""
        name = _eval_metric(cast(str, self.args.metric_for_best_model))
        prefixes = [f"eval_{split}" for split in eval_dataset] if isinstance(eval_dataset, dict) else ["eval"]
        rewards = [reward_name(f) for f in self.reward_funcs]
        known = [f"{p}_{key}" for p in prefixes for key in ("reward", *(f"rewards/{r}" for r in rewards))]
        if name in known or any(name.startswith(f"{p}_{metric}") for p in prefixes for metric in self.metrics):
            return
        raise ValueError(
            f"metric_for_best_model {self.args.metric_for_best_model!r} is no evaluation metric of this run; "
            f"use one of: {', '.join(known + [f'{prefixes[0]}_{m}' for m in self.metrics])}"
        )

    def _determine_best_metric(self, metrics: dict[str, float], trial: Any) -> bool:
        """The Trainer's, with a one-line error when ``metric_for_best_model`` is not among the metrics."""
        name = None if self.args.metric_for_best_model is None else _eval_metric(self.args.metric_for_best_model)
        if name is not None and name not in metrics:
            raise ValueError(
                f"metric_for_best_model {self.args.metric_for_best_model!r} is not among this evaluation's metrics: "
                f"{', '.join(sorted(k for k in metrics if k.startswith('eval_')))}"
            )
        return super()._determine_best_metric(metrics, trial)

    def _build_estimator(self, args: OnlineConfig) -> type[AdvantageEstimator]:
        """How rewards become advantages (:mod:`hfrl.core.estimators`): the config's
        ``advantage_estimator``. Called first in ``__init__``: it decides whether a critic is built."""
        return estimator_class(args.advantage_estimator)

    def _build_action_space(self) -> ActionSpace:
        """What each step may sample and the loss renormalises over (:mod:`hfrl.core.action_space`): the
        whole vocabulary here (with ``sampled_set_loss``, the loss over the sets generation sampled from);
        NLPO builds its own. Called once, at the end of ``__init__``."""
        return SampledSets() if self.args.sampled_set_loss else ActionSpace()

    # ---- data -------------------------------------------------------------------------------
    def _tokenize(self, dataset):
        if dataset is None:
            return None
        if isinstance(dataset, dict):
            return {name: self._tokenize(split) for name, split in dataset.items()}
        if "prompt" not in dataset.column_names:
            raise ValueError(f"the dataset needs a 'prompt' column; it has: {', '.join(dataset.column_names)}")
        args = self.args
        ids = [
            encode_prompt(self.tokenizer, p, args.max_prompt_length, args.truncation_side) for p in dataset["prompt"]
        ]
        if PROMPT_IDS in dataset.column_names:
            dataset = dataset.remove_columns(PROMPT_IDS)
        return dataset.add_column(PROMPT_IDS, ids)

    def _get_train_sampler(self, train_dataset=None):
        # One rollout's prompts per iteration, fetched once; placeholders for its other micro-steps.
        return IterationSampler(
            train_dataset if train_dataset is not None else self.train_dataset,
            batch_size=self.args.rollout_batch_size * self.accelerator.num_processes,
            repeat_count=self.args.micro_steps_per_iteration,
            seed=self.args.seed,
            num_generations=self.args.num_generations,
        )

    def _check_prompt_count(self, dataset: Any, processes: int) -> None:
        """One rollout needs ``rollout_batch_size`` prompts per process (``hfrl train`` checks it before
        torch is imported: :func:`hfrl.runs.experiment.build_trainer`)."""
        if (
            dataset is not None
            and not isinstance(dataset, dict)
            and len(dataset) < self.args.rollout_batch_size * processes
        ):
            raise ValueError(
                f"the train dataset has {len(dataset)} prompts, fewer than one rollout "
                f"({self.args.rollout_batch_size} x {processes} processes); lower rollout_batch_size or add prompts"
            )

    def get_train_dataloader(self):
        if self.train_dataset is None:
            raise ValueError("training requires a train_dataset")
        self._check_prompt_count(self.train_dataset, self.accelerator.num_processes)
        return self._get_dataloader(
            dataset=PromptRows(self.train_dataset),
            description="Training",
            batch_size=self.args.rollout_completions,  # each prompt num_generations times (IterationSampler)
            sampler_fn=self._get_train_sampler,
            is_training=True,
        )

    # ---- rollout ----------------------------------------------------------------------------
    def _prepare_inputs(self, batch: PromptBatch | list[dict[str, Any]]) -> Rollout:  # type: ignore[override]
        if not self._buffer:
            examples = batch.examples if isinstance(batch, PromptBatch) else batch
            if examples[0] is None:  # a placeholder batch (IterationSampler): only a first micro-step has prompts
                raise RuntimeError(
                    f"{self._name}: a micro-step without prompts found no rollout to train on; training "
                    "resumes only at an iteration boundary (a checkpoint written by save_every)"
                )
            self._rollout = self.collect_rollout(examples)
            self._buffer = self._minibatches(self._rollout)
            stats = self.policy_step(self._rollout)
            if stats and self.iteration is not None:
                self.iteration.metrics.update(stats)
        return self._buffer.pop(0)

    def _minibatches(self, rollout: Rollout) -> list[Rollout]:
        """Every micro-step's share of the rollout, ``num_ppo_epochs`` shuffled passes of
        ``rollout_completions / mini_batch_size`` minibatches (:mod:`hfrl.core.minibatches`), of whole
        groups when :attr:`minibatch_keeps_groups`."""
        args = self.args
        if not (self.minibatch_trains_policy or self.has_critic):  # nothing to train: the policy step was all
            return [rollout] * args.micro_steps_per_iteration
        per_minibatch = args.gradient_accumulation_steps
        num_minibatches = args.rollout_completions // args.mini_batch_size
        whitened = args.whiten_advantages if self.estimator.whitening is None else self.estimator.whitening
        whiten = whitened and args.whiten_scope == "minibatch"
        groups = rollout.group_ids if self._whole_groups_per_minibatch() else None
        out = []
        for _ in range(args.num_ppo_epochs):
            for minibatch in plan_epoch(
                rollout.response_mask, num_minibatches, per_minibatch, args.minibatch_unit, group_ids=groups
            ):
                advantages = (
                    whiten_per_minibatch(rollout.advantages, rollout.response_mask, minibatch) if whiten else None
                )
                for micro in minibatch:
                    part = rollout[micro.rows]
                    part.token_mask = micro.token_mask
                    if advantages is not None:
                        part.advantages = advantages[micro.rows]
                    out.append(part)
        return out

    def _whole_groups_per_minibatch(self) -> bool:
        """Minibatches of whole groups: when the loss needs them (:attr:`minibatch_keeps_groups`), or
        when they let the update run each prompt once (no critic, ``num_generations`` > 1, whole
        completions, ``mini_batch_size`` a multiple of it)."""
        args = self.args
        if self.minibatch_keeps_groups:
            return True
        group = args.num_generations
        return (
            group > 1
            and not self.has_critic
            and args.minibatch_unit == "sequences"
            and not args.mini_batch_size % group
        )

    def require_unsharded_policy(self, what: str) -> None:
        """One clear error instead of a silent failure where ``what`` needs the policy's full weights."""
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        if self.is_fsdp_enabled or (plugin is not None and plugin.zero_stage == 3):
            raise ValueError(
                f"{self._name} {what}, which DeepSpeed ZeRO-3 and FSDP shard across processes: use DDP "
                "(hfrl/accelerate_configs/multi_gpu.yaml) or ZeRO-2 (deepspeed_zero2.yaml)"
            )

    def action_logprobs(self, logits: torch.Tensor, inputs: Rollout) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs of the taken tokens and entropies under the action distribution for the loss
        (renormalised over the action space's mask; the full softmax for the whole vocabulary). The
        entropy is computed only when it is in the loss (``ent_coef``); the logged ``entropy`` is
        otherwise the rollout's."""
        mask = self.action_space.loss_mask(inputs.action_sets, logits.shape[-1])
        return action_logprobs(logits, inputs.response_ids, mask, with_entropy=bool(self.args.ent_coef))

    def policy_outputs(self, model, inputs: Rollout) -> PolicyOutputs:
        """One forward of the (wrapped) model over a minibatch. With ``minibatch_trains_policy`` off,
        the critic's values alone (a shared backbone then runs without gradient). With ``kl_in_loss``,
        also the log-probs under the full softmax (the KL term's, when the action space masks)."""
        if not self.minibatch_trains_policy:
            _, values = model(
                inputs.query_ids, inputs.query_mask, inputs.response_ids, inputs.response_mask, values_only=True
            )
            return PolicyOutputs(None, None, values)
        group = self._shared_prompts(inputs)
        grouped = {"group": group} if group > 1 else {}  # each prompt run once for its group (no critic)
        logits, values = model(
            inputs.query_ids, inputs.query_mask, inputs.response_ids, inputs.response_mask, **grouped
        )
        logits = tempered(logits, self.temperature)
        logprobs, entropy = self.action_logprobs(logits, inputs)
        full = None
        if self.args.kl_in_loss:
            from trl.trainer.utils import selective_log_softmax

            full = selective_log_softmax(logits, inputs.response_ids) if self.action_space.records_sets else logprobs
        return PolicyOutputs(logprobs, entropy, values, full)

    def training_step(self, model, inputs, num_items_in_batch=None) -> torch.Tensor:
        """The Trainer's step; with nothing to train in minibatches (TRPO without a critic: the
        iteration's one update is its policy step) only the rollout and the policy step run."""
        if self.minibatch_trains_policy or self.has_critic:
            return super().training_step(model, inputs, num_items_in_batch)
        model.train()
        self._prepare_inputs(inputs)
        return torch.zeros((), device=self.args.device)

    def _shared_prompts(self, batch: Rollout) -> int:
        """The group size when a minibatch's forward may run each prompt once: groups of completions
        (``num_generations`` > 1), whole and in order in the minibatch, and no critic (1 otherwise)."""
        if self.args.num_generations < 2 or self.has_critic or batch.response_ids.shape[1] < 2:
            return 1
        return whole_groups(batch.group_ids)

    def compute_loss(self, model, inputs: Rollout, return_outputs: bool = False, num_items_in_batch=None):  # type: ignore[override]
        """The algorithm's :meth:`loss` on one forward over a minibatch, plus the KL term with
        ``kl_in_loss``, its statistics recorded."""
        out = self.policy_outputs(model, inputs)
        loss, stats = self.loss(inputs, out)
        if out.full_logprobs is not None and self.iteration is not None:
            kl = kl_k3(out.full_logprobs, inputs.ref_logprobs, inputs.train_mask, self.loss_max_tokens)
            loss = loss + self.iteration.kl_coef * kl  # + beta * mean_m(k3) (GRPO)
            stats = {**stats, "loss/kl": kl.detach(), "loss/total": loss.detach()}
        self.record(stats)
        return (loss, {"values": out.values}) if return_outputs else loss

    def loss(self, batch: Rollout, out: PolicyOutputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Hook: the algorithm's loss of a minibatch (``batch``) from the model's outputs on it
        (:class:`PolicyOutputs`), with its detached statistics (``hfrl.core.losses``)."""
        raise NotImplementedError(f"{type(self).__name__} defines no loss")

    def policy_step(self, rollout: Rollout) -> dict[str, float]:
        """Hook: an update of the policy over the whole ``rollout``, once per iteration, after the
        rollout was collected and before its minibatches; returns what to log with the iteration.
        Nothing by default (the minibatches' optimizer steps train the policy); TRPO's natural
        gradient step."""
        return {}

    @property
    def has_critic(self) -> bool:
        """Whether a value head exists (the advantage estimator needs one: ``gae``)."""
        return self.estimator.needs_critic

    @property
    def loss_max_tokens(self) -> int | None:
        """What the policy loss divides its token sum by, per completion (:func:`hfrl.core.losses.token_sum`):
        ``max_new_tokens`` for an estimator with Dr. GRPO's constant normaliser; None: the token mean."""
        if self.estimator.loss_normaliser != "max_tokens":
            return None
        return int(self._rollout_generation_kwargs()["max_new_tokens"])

    @property
    def temperature(self) -> float:
        return float(self.args.generation_kwargs.get("temperature") or 1.0)

    def collect_rollout(self, batch: list[dict[str, Any]]) -> Rollout:
        """Generate, reward, score, penalise KL, estimate advantages, step the KL controller."""
        self.action_space.before_rollout(self.state.global_step // self.args.steps_per_iteration)
        args, start = self.args, time.perf_counter()
        batch, generated = self._generate_rollout(batch)
        t_generate = time.perf_counter()

        prompts, texts = [ex["prompt"] for ex in batch], self._decode(generated.response_ids)
        rewards = self._task_rewards(batch, texts, generated)
        t_reward = time.perf_counter()

        with self._autocast():
            scores = score(
                self.accelerator.unwrap_model(self.model), self.reference, generated,
                batch_size=args.scoring_batch_size or args.mini_batch_size, temperature=self.temperature,
                action_space=self.action_space,
            )  # fmt: skip
        beta = self.kl_ctl.value
        rollout = assemble(
            generated, scores, rewards, kl_coef=beta, estimator=self.estimator, gamma=cast(float, args.gamma),
            lam=args.lam, whiten_advantages=args.whiten_advantages, kl_in_reward=not args.kl_in_loss,
            reduce=self._reduce,
        )  # fmt: skip
        stats = rollout_stats(rollout, self._reduce)  # over every process: the same on all of them
        self.kl_ctl.step(stats["kl"])
        t_score = time.perf_counter()

        self.iteration = IterationRecord(
            start=start,
            update_start=t_score,
            tokens=int(generated.response_mask.sum()),
            kl_coef=beta,
            metrics={
                **stats,
                "beta": beta,
                **self._process_mean({f"rewards/{name}": value for name, value in rewards.means.items()}),
                **self._process_mean({k: sum(v) / len(v) for k, v in self._reward_metrics.items() if v}),  # log_metric
                "time/generate": t_generate - start,
                "time/reward": t_reward - t_generate,
                "time/score": t_score - t_reward,
                **self.action_space.rollout_stats(rollout.action_sets, rollout.response_mask),
            },
        )
        if args.log_completions:
            self._write_completions(prompts, texts, rewards.scores.tolist())
        return rollout

    def _task_rewards(self, examples: list[dict], texts: list[str], generated: Completions) -> TaskRewards:
        """Every reward function once over the rollout (:func:`hfrl.core.rollout.compute_rewards`). A
        completion whose reward is dropped (``invalid_rewards: drop``) gets a zero mask row in
        ``generated``: it takes no part in the update."""
        columns = {k: [ex[k] for ex in examples] for k in examples[0] if k not in NOT_REWARD_COLUMNS}
        mask = generated.response_mask.cpu()  # compute_rewards zeroes the rows it drops
        ids = [row[m.bool()].tolist() for row, m in zip(generated.response_ids.cpu(), mask, strict=True)]
        self._reward_metrics: dict[str, list[float]] = {}
        extras = {  # what TRL's trainers pass a reward function besides the columns (trl 1.16)
            "completion_ids": ids,
            "trainer_state": self.state,
            "log_extra": lambda column, values: None,  # per-completion columns: TRL's completion table only
            "log_metric": lambda name, value: self._reward_metrics.setdefault(name, []).append(float(value)),
        }
        rewards = compute_rewards(
            self.reward_funcs, self.reward_weights, [ex["prompt"] for ex in examples], texts, mask, columns,
            max_abs=self.args.max_abs_reward, drop_invalid=self.args.invalid_rewards == "drop", extras=extras,
        )  # fmt: skip
        generated.response_mask = mask.to(generated.response_mask.device)
        return rewards

    @property
    def _reduce(self):
        """Sum over processes (None in a single process): global whitening, KL and statistics."""
        if self.accelerator.num_processes == 1:
            return None
        return lambda t: self.accelerator.reduce(t.to(self.accelerator.device), reduction="sum")

    def _process_mean(self, values: dict[str, float]) -> dict[str, float]:
        """Mean over processes of per-process means (every process holds an equal share)."""
        if self.accelerator.num_processes == 1 or not values:
            return values
        keys = sorted(values)
        total = self._reduce(torch.tensor([float(values[k]) for k in keys]))
        return dict(zip(keys, (total / self.accelerator.num_processes).tolist(), strict=True))

    def _write_completions(self, prompts: list, completions: list[str], rewards: list[float]) -> None:
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
            iteration = self.state.global_step // self.args.steps_per_iteration + 1
            with open(os.path.join(folder, f"iteration-{iteration}.jsonl"), "w") as fh:
                fh.writelines(json.dumps(row, default=str) + "\n" for row in rows)

    def record(self, stats: dict[str, torch.Tensor]) -> None:
        """Keep a minibatch's loss statistics in the iteration's record; they are averaged into its
        log entry. A non-finite loss term stops the run here, before its backward and optimizer step."""
        values = {key: float(value) for key, value in stats.items()}
        broken = {k: v for k, v in values.items() if k.startswith("loss/") and not math.isfinite(v)}
        if broken:
            terms = ", ".join(f"{k} = {v}" for k, v in broken.items())
            reward = self.iteration.metrics.get("reward", float("nan")) if self.iteration is not None else float("nan")
            raise self.non_finite(f"{terms}; this rollout's reward mean {reward:.3g}")
        if self.iteration is not None:
            self.iteration.add_update(values)

    def global_sum(self, local: torch.Tensor) -> torch.Tensor:
        """``local`` summed over processes (itself in one process): what every process agrees on."""
        return self._reduce(local) if self._reduce is not None else local

    # ---- logging ----------------------------------------------------------------------------
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self.iteration is not None:  # the Trainer's training log: once per iteration
            logs = {**logs, **self._close_iteration(self.iteration)}
            self.iteration = None
        super().log(logs, start_time)

    def _close_iteration(self, record: IterationRecord) -> dict[str, float]:
        """The iteration's log entry: its metrics, the means of its minibatches' statistics (over
        processes), the update's time and the tokens per second of the whole iteration."""
        now = time.perf_counter()
        metrics = dict(record.metrics)
        metrics.update(self._process_mean(record.update_means()))
        metrics["time/update"] = now - record.update_start
        local = torch.tensor(float(record.tokens), device=self.accelerator.device)
        tokens = float(self.accelerator.reduce(local, reduction="sum"))
        metrics["tokens_per_second"] = tokens / max(now - record.start, 1e-9)
        metrics["iteration"] = self.state.global_step // self.args.steps_per_iteration
        entropy = metrics.get("entropy")  # the same on every process (rollout_stats, the loss's: reduced)
        warning = self.entropy_watch.observe(entropy, int(metrics["iteration"])) if entropy is not None else None
        if warning and self.is_world_process_zero():
            logging.get_logger(__name__).warning(warning)
        return metrics


def _load_policy(
    model: str | PreTrainedModel, args: OnlineConfig, tokenizer: PreTrainedTokenizerBase | None, peft_config: Any
) -> tuple[Any, PreTrainedTokenizerBase, bool]:
    """The policy (a PEFT adapter named by ``model`` on ``args.base_model``, or wrapped in a fresh
    one with ``peft_config``; 4/8-bit loading prepared: :func:`hfrl.core.models.load_trainable`), its
    tokenizer with a pad token and an EOS id, and whether the adapter is fresh. Seeded before anything
    is initialised (value head, PEFT adapter): the Trainer only seeds in its own ``__init__``, after
    the model exists, so the same seed gave different value heads."""
    from transformers.trainer_utils import enable_full_determinism, set_seed

    enable_full_determinism(args.seed) if args.full_determinism else set_seed(args.seed)
    policy, fresh = load_trainable(
        model, args.model_init_kwargs, args.base_model, peft_config, bool(args.gradient_checkpointing)
    )
    if tokenizer is None:
        tokenizer = load_tokenizer_for(model, policy)
    fix_tokenizer(tokenizer, policy)
    if args.disable_dropout:
        disable_dropout(policy)
    return policy, tokenizer, fresh


def _eval_metric(name: str) -> str:
    """``metric_for_best_model`` as the Trainer reads it: ``eval_`` prefixed unless it already is."""
    return name if name.startswith("eval_") else f"eval_{name}"
