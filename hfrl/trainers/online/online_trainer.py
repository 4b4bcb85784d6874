"""The online trainer: rollouts inside ``transformers.Trainer``'s loop, composed of typed parts.

The training loop is the Trainer's own; this class holds the ``Trainer`` overrides (each marked with the
transformers version it was checked against) and composes what an iteration is made of:

- :class:`~hfrl.trainers.online.collector.RolloutCollector`: generate -> reward -> score -> assemble, once
  per iteration (:meth:`OnlineTrainer._prepare_inputs`, when the iteration's passes are used up);
- :class:`~hfrl.trainers.online.iteration_state.IterationState`: the iteration under way, its rollout, the
  KL coefficient beta it was assembled with (the loss's), its warm-up flag and its pending passes;
- :class:`~hfrl.trainers.online.online_state.OnlineState`: the KL controller, the action space and the
  entropy watch, in every checkpoint;
- the update's loss, :class:`hfrl.core.losses.UpdateLoss`: the registered policy loss
  (:mod:`hfrl.core.policy_losses`, ``policy_loss``) plus the critic's, the entropy bonus and the KL term;
- the advantage estimator (:mod:`hfrl.core.estimators`, ``advantage_estimator``), built with its settings;
- the update (:mod:`hfrl.trainers.online.update`): the critic's passes, then ``num_ppo_epochs`` shuffled
  passes over the rollout (:mod:`hfrl.core.minibatches`), and the critic's optimizer groups.

The sampler hands the first micro-step of an iteration its ``rollout_batch_size`` prompts and the others
placeholders (:mod:`.iteration_sampler`). One iteration's numbers fill an
:class:`~hfrl.trainers.online.iteration_record.IterationRecord`, logged once per iteration.

PPO, A2C and the other losses are settings of this trainer (``PPOTrainer`` and ``A2CTrainer`` only name
their configs); NLPO builds its own action space (:meth:`OnlineTrainer._build_action_space`), TRPO its
own update step (:meth:`OnlineTrainer.policy_step`, with ``minibatch_trains_policy = False``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, cast

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.utils import logging

from hfrl.core.action_space import ActionSpace, SampledSets
from hfrl.core.estimators import estimator_class
from hfrl.core.estimators.base import AdvantageEstimator
from hfrl.core.kl import make_kl_controller
from hfrl.core.losses import UpdateLoss
from hfrl.core.models import fix_tokenizer, load_tokenizer_for, load_trainable
from hfrl.core.policies import (
    ActorCritic,
    ReferencePolicy,
    disable_dropout,
    freeze_attention,
    is_peft_model,
    tempered,
)
from hfrl.core.policy_losses import policy_loss_class
from hfrl.core.policy_losses.base import PolicyLoss, PolicyOutputs
from hfrl.core.rollout import Rollout, action_logprobs
from hfrl.rewards import reward_list
from hfrl.rewards.combine import reward_name
from hfrl.trainers.evaluation import PROMPT_IDS, EvaluationMixin, encode_prompt, generate_and_score
from hfrl.trainers.iteration_log import IterationProgress, SaveStateAtEnd
from hfrl.trainers.online import update
from hfrl.trainers.online.checkpointing import VALUE_HEAD_NAME, load_weights, save_policy
from hfrl.trainers.online.collector import RolloutCollector, process_sum
from hfrl.trainers.online.entropy_watch import EntropyWatch
from hfrl.trainers.online.iteration_record import IterationRecord
from hfrl.trainers.online.iteration_sampler import IterationSampler, PromptBatch, PromptRows
from hfrl.trainers.online.iteration_state import IterationState, Pass
from hfrl.trainers.online.online_config import OnlineConfig
from hfrl.trainers.online.online_state import OnlineState
from hfrl.trainers.trainer_mixin import TrainerMixin

RewardFunc = Callable[..., Sequence[Any]]


class OnlineTrainer(EvaluationMixin, TrainerMixin, Trainer):
    """Base of PPO / NLPO / A2C / TRPO (the module's docstring: what it composes). Subclasses set
    ``config_class`` and their card metadata; NLPO overrides :meth:`_build_action_space`, TRPO
    :meth:`policy_step`."""

    #: the algorithm names this trainer serves, with their `hfrl list algs` line (hfrl/trainers/declared.py)
    algs: ClassVar[dict[str, str]] = {}  # a base: exported, no name of its own
    config_class: type[OnlineConfig] = OnlineConfig
    args: OnlineConfig
    #: whether each minibatch's loss trains the policy (False: the policy moves in policy_step alone, TRPO)
    minibatch_trains_policy: bool = True
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
        metrics: dict[str, Callable[..., Any]] | None = None,
        callbacks: list[TrainerCallback] | None = None,
        optimizers: tuple[torch.optim.Optimizer | None, torch.optim.lr_scheduler.LRScheduler | None] = (None, None),
    ) -> None:  # transformers 5.24: Trainer.__init__
        """TRL's keywords, with hfrl's additions (``metrics``, ``ref_model`` for every algorithm).

        :param model: the policy: a Hub id, a local folder (causal or seq2seq), a ``.gguf`` file, a
            built-in name (``tiny``, ``tiny-t5``, ``smollm2``) or a loaded ``PreTrainedModel``.
        :param args: the algorithm's config (``PPOConfig`` for ``PPOTrainer``, ``NLPOConfig`` for
            ``NLPOTrainer``...). Default: its defaults, saving to ``<model name>-<algorithm>``.
        :param reward_funcs: a TRL-style reward function, ``f(prompts, completions, **columns) ->
            list[float]`` (the dataset's other columns arrive as keywords), or a list of them, summed
            with ``args.reward_weights``; e.g. a task's ``task.reward_funcs`` or
            ``hfrl.rewards.load_reward("rouge")``. Required.
        :param train_dataset: the prompts: a ``datasets.Dataset`` with a ``prompt`` column (text); each
            iteration samples ``rollout_batch_size`` of them.
        :param eval_dataset: a ``Dataset`` with a ``prompt`` column, or ``{name: Dataset}``, for
            ``evaluate()``: the rewards and ``metrics`` of greedy completions.
        :param processing_class: the tokenizer; default: the model's.
        :param peft_config: a ``peft.LoraConfig`` (or other PEFT config): a fresh adapter is trained on
            the frozen model, and the reference policy is the model with the adapter off (no copy).
        :param ref_model: the reference policy of the KL penalty; default: a frozen copy of the starting
            model (none at all when ``kl_coef`` is 0 and ``kl_target`` unset).
        :param metrics: ``{name: metric}`` computed by ``evaluate()`` over the completions, a metric
            being called as a reward function is and returning a float or a dict of floats; e.g. a
            task's ``task.metrics`` or ``{"bleu": hfrl.metrics.load_metric("bleu")}``.
        :param callbacks: ``transformers.TrainerCallback`` instances, as for ``transformers.Trainer``.
        :param optimizers: ``(optimizer, lr_scheduler)``, as for ``transformers.Trainer``; default: the
            Trainer's, from ``args``.
        """
        args = args if args is not None else self.default_config(model)
        if reward_funcs is None:
            raise ValueError("reward_funcs is required: pass a reward function or a list of them")
        self.reward_funcs, self.reward_weights = reward_list(reward_funcs, args.reward_weights)
        self.metrics = dict(metrics or {})
        estimator = self._build_estimator(args)  # its class: whether a critic is built
        self.policy_loss: PolicyLoss = policy_loss_class(args.policy_loss)(args.loss_settings())
        self.update_loss = UpdateLoss(
            self.policy_loss, args.vf_coef, args.ent_coef, args.cliprange_value,
            positive_lm_coef=args.positive_lm_coef, positive_threshold=args.positive_lm_threshold,
        )  # fmt: skip

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
        wrapped = ActorCritic(policy, separate_critic=args.separate_critic, critic=estimator.needs_critic)
        if args.critic_from:  # a trained critic to start from: checked to fit, then loaded (data only)
            from hfrl.trainers.online.critic_from import load_critic

            load_critic(wrapped, args.critic_from)
        if args.critic_freeze_attention:  # SAO's frozen-attention critic (the config checked it is separate)
            freeze_attention(cast(torch.nn.Module, wrapped.critic))
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
        # built with its settings, once the processes are known (batch statistics: their sum)
        settings: dict[str, Any] = {
            "gamma": cast(float, args.gamma), "whiten": args.whiten_advantages,
            "reduce": process_sum(self.accelerator),
        }  # fmt: skip
        self.estimator: AdvantageEstimator = estimator(
            lam=args.lam, lam_critic=args.lam_critic, lam_alpha=args.lam_alpha, **settings
        )
        # the critic's warm-up trains against lambda-1 targets (VC-PPO's value pretraining)
        self.warmup_estimator = estimator(lam=args.lam, lam_critic=1.0, **settings)
        kl = make_kl_controller(args.kl_coef, args.kl_target, args.kl_adapt_rate)
        self.online_state = OnlineState(kl, self._build_action_space(), EntropyWatch())
        self.collector = RolloutCollector(
            args, processing_class, self.reward_funcs, self.reward_weights, self.reference,
            self.online_state.action_space, self.estimator, self.accelerator, self.is_encoder_decoder,
        )  # fmt: skip
        if args.use_vllm:  # rollouts sampled by TRL's VLLMGeneration (a seq2seq model and NLPO refused first)
            from hfrl.trainers.online.vllm_rollout import VLLMRollouts

            self.collector.vllm = VLLMRollouts.for_trainer(self)
        self.current: IterationState | None = None  # the iteration under way (its rollout, beta, passes)
        self.iteration: IterationRecord | None = None  # the current iteration's numbers, until it is logged
        if not args.disable_tqdm:
            self.remove_callback(ProgressCallback)
            self.add_callback(IterationProgress())
        self.add_callback(SaveStateAtEnd())
        critic = (VALUE_HEAD_NAME,) if self.has_critic else ()
        self._own_checkpoint_files = (*critic, *self.online_state.checkpoint_files)
        if args.load_best_model_at_end:
            self._check_best_metric(self.eval_dataset)

    # ---- the parts a subclass may change -------------------------------------------------------------
    def _build_estimator(self, args: OnlineConfig) -> type[AdvantageEstimator]:
        """How rewards become advantages (:mod:`hfrl.core.estimators`): the config's
        ``advantage_estimator``. Called first in ``__init__``: it decides whether a critic is built."""
        return estimator_class(args.advantage_estimator)

    def _build_action_space(self) -> ActionSpace:
        """What each step may sample and the loss renormalises over (:mod:`hfrl.core.action_space`): the
        whole vocabulary here (with ``sampled_set_loss``, the loss over the sets generation sampled from);
        NLPO builds its own. Called once, after ``Trainer.__init__``."""
        return SampledSets() if self.args.sampled_set_loss else ActionSpace()

    def policy_step(self, rollout: Rollout) -> dict[str, float]:
        """Hook: an update of the policy over the whole ``rollout``, once per iteration, after the rollout
        was collected and before its minibatches; returns what to log with the iteration. Nothing by
        default (the minibatches' optimizer steps train the policy); TRPO's natural-gradient step."""
        return {}

    @property
    def action_space(self) -> ActionSpace:
        return self.online_state.action_space

    @property
    def has_critic(self) -> bool:
        """Whether a value head exists (the advantage estimator needs one: ``gae``)."""
        return self.estimator.needs_critic

    @property
    def rollout(self) -> Rollout | None:
        """The current iteration's rollout (the last one's, after training); None before the first."""
        return self.current.rollout if self.current is not None else None

    @property
    def kl_coef(self) -> float:
        """The KL coefficient beta of the current iteration's loss: the one its rollout was assembled with
        (:attr:`IterationState.kl_coef`). Without a rollout collected by the trainer there is none: one
        line, never a silent 0 that would drop the KL term."""
        if self.current is None:
            raise RuntimeError(
                f"{self._name}: the loss's KL coefficient (beta) comes from the iteration's rollout, and this "
                "trainer has collected none; collect one first (trainer.collect_rollout(examples), or train())"
            )
        return self.current.kl_coef

    # ---- data: the prompts, fetched once per iteration -----------------------------------------------
    def _tokenize(self, dataset: Any) -> Any:
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

    def _get_train_sampler(self, train_dataset: Any = None) -> IterationSampler:  # transformers 5.24
        # One rollout's prompts per iteration, fetched once; placeholders for its other micro-steps.
        dataset: Any = train_dataset if train_dataset is not None else self.train_dataset
        return IterationSampler(
            dataset,
            batch_size=self.args.rollout_batch_size * self.accelerator.num_processes,
            repeat_count=self.args.micro_steps_per_iteration,
            seed=self.args.seed,
            num_generations=self.args.num_generations,
        )

    def get_train_dataloader(self) -> Any:  # transformers 5.24: Trainer.get_train_dataloader
        dataset: Any = self.train_dataset
        if dataset is None:
            raise ValueError("training requires a train_dataset")
        processes = self.accelerator.num_processes
        if not isinstance(dataset, dict) and len(dataset) < self.args.rollout_batch_size * processes:
            raise ValueError(  # (hfrl train checks it before torch is imported: hfrl.runs.experiment.build_trainer)
                f"the train dataset has {len(dataset)} prompts, fewer than one rollout "
                f"({self.args.rollout_batch_size} x {processes} processes); lower rollout_batch_size or add prompts"
            )
        return self._get_dataloader(
            dataset=PromptRows(dataset),
            description="Training",
            batch_size=self.args.rollout_completions,  # each prompt num_generations times (IterationSampler)
            sampler_fn=self._get_train_sampler,
            is_training=True,
        )

    # ---- the iteration: a rollout, then its minibatches ---------------------------------------------
    def _prepare_inputs(self, batch: PromptBatch | list[dict[str, Any]]) -> Rollout:  # type: ignore[override]  # transformers 5.24
        """A micro-step's minibatch, the next of the iteration's passes; the first micro-step of an
        iteration collects its rollout and makes its passes (:meth:`_minibatches`), then the policy step."""
        current = self.current
        if current is None or not current.pending:
            examples = batch.examples if isinstance(batch, PromptBatch) else batch
            if examples[0] is None:  # a placeholder batch (IterationSampler): only a first micro-step has prompts
                raise RuntimeError(
                    f"{self._name}: a micro-step without prompts found no rollout to train on; training "
                    "resumes only at an iteration boundary (a checkpoint written by save_every)"
                )
            rollout = self.collect_rollout(examples)
            current = cast(IterationState, self.current)  # made by collect_rollout
            current.pending = self._minibatches(rollout)
            metrics = cast(IterationRecord, self.iteration).metrics
            if current.warming_up:  # the critic alone learns: no policy step either (TRPO's)
                metrics["critic_warmup"] = 1.0
            else:
                metrics.update(self.policy_step(rollout))
        return current.next_minibatch()

    def collect_rollout(self, examples: list[dict[str, Any]]) -> Rollout:
        """The iteration's rollout of ``examples`` (:meth:`RolloutCollector.collect` with the policy and the
        iteration's KL coefficient; during the critic's warm-up, lambda-1 targets), the iteration's state
        made from it (:attr:`current`), its record kept for the log, the KL controller stepped."""
        iteration = self.state.global_step // self.args.steps_per_iteration
        warming_up = iteration < self.args.critic_warmup_iterations
        estimator = self.warmup_estimator if warming_up else self.estimator
        rollout, self.iteration = self.collector.collect(
            self.model_wrapped, examples, self.online_state.kl.value, self.state, estimator=estimator
        )
        self.current = IterationState(rollout, kl_coef=self.iteration.kl_coef, warming_up=warming_up)
        self.online_state.kl.step(self.iteration.metrics["kl"])
        return rollout

    def _minibatches(self, rollout: Rollout) -> list[Pass]:
        """The iteration's passes over ``rollout`` (:func:`hfrl.trainers.online.update.minibatches`): the
        critic's first, then the policy's, made when their turn comes from re-estimated advantages."""
        args = self.args

        def reestimated(source: Rollout) -> Rollout:  # the critic as its passes left it, when their turn is over
            model: ActorCritic = self.accelerator.unwrap_model(self.model)
            size = args.scoring_batch_size or args.mini_batch_size
            return update.reestimated(source, model, self.estimator, batch_size=size, accelerator=self.accelerator)

        return update.minibatches(
            rollout,
            args,
            trains_policy=self.minibatch_trains_policy,
            has_critic=self.has_critic,
            warming_up=self.current is not None and self.current.warming_up,
            whole_groups=update.whole_groups_per_minibatch(args, self.policy_loss.needs_groups, self.has_critic),
            whitens=self.estimator.whitens,
            reestimated=reestimated,
        )

    def create_optimizer(self, *args: Any, **kwargs: Any) -> torch.optim.Optimizer:  # transformers 5.0-5.24
        """The Trainer's optimizer; with ``critic_learning_rate`` (or ``critic_learning_rate_ratio`` x
        ``learning_rate``), the critic's parameters in groups of their own at that rate
        (:func:`hfrl.trainers.online.update.split_critic_groups`). (transformers 5.24 passes the model;
        5.0, the floor, passes nothing.)"""
        optimizer = super().create_optimizer(*args, **kwargs)
        model = args[0] if args else kwargs.get("model")
        rate = update.critic_learning_rate(self.args)
        if rate is None or not self.has_critic:
            return optimizer
        wrapper: ActorCritic = self.accelerator.unwrap_model(model if model is not None else self.model)
        return update.split_critic_groups(optimizer, wrapper.critic_modules().parameters(), rate)

    def training_step(
        self, model: Any, inputs: Any, num_items_in_batch: Any = None
    ) -> torch.Tensor:  # transformers 5.24
        """The Trainer's step; with nothing to train in minibatches (TRPO without a critic: the
        iteration's one update is its policy step) only the rollout and the policy step run."""
        if self.minibatch_trains_policy or self.has_critic:
            return super().training_step(model, inputs, num_items_in_batch)
        model.train()
        self._prepare_inputs(inputs)
        return torch.zeros((), device=self.args.device)

    def compute_loss(  # type: ignore[override]  # transformers 5.24
        self,
        model: Any,
        inputs: Rollout,
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, Any]]:
        """The whole loss of a minibatch on one forward (:class:`hfrl.core.losses.UpdateLoss`: the
        policy loss, the critic's, the entropy bonus and the KL term), its statistics recorded."""
        out = self.policy_outputs(model, inputs)
        loss, stats = self.update_loss(out, inputs, self.kl_coef)
        self.record(stats)
        return (loss, {"values": out.values}) if return_outputs else loss

    def policy_outputs(self, model: Any, inputs: Rollout) -> PolicyOutputs:
        """One forward of the (wrapped) model over a minibatch. With ``minibatch_trains_policy`` off,
        the critic's values alone (a shared backbone then runs without gradient). The action distribution
        renormalised over the action space's mask (the full softmax for the whole vocabulary); its entropy
        only when in the loss (``ent_coef``); with ``kl_in_loss``, also the log-probs under the full softmax."""
        if not self.minibatch_trains_policy or inputs.critic_only:
            _, values = model(
                inputs.query_ids, inputs.query_mask, inputs.response_ids, inputs.response_mask, values_only=True
            )
            return PolicyOutputs(None, None, values)
        group = self._shared_prompts(inputs)
        grouped = {"group": group} if group > 1 else {}  # each prompt run once for its group (no critic)
        logits, values = model(
            inputs.query_ids, inputs.query_mask, inputs.response_ids, inputs.response_mask, **grouped
        )
        logits = tempered(logits, self.collector.temperature)
        mask = self.action_space.loss_mask(inputs.action_sets, logits.shape[-1])
        logprobs, entropy = action_logprobs(logits, inputs.response_ids, mask, with_entropy=bool(self.args.ent_coef))
        full = None
        if self.args.kl_in_loss:
            from trl.trainer.utils import selective_log_softmax

            full = selective_log_softmax(logits, inputs.response_ids) if self.action_space.records_sets else logprobs
        return PolicyOutputs(logprobs, entropy, values, full)

    def _shared_prompts(self, batch: Rollout) -> int:
        """The group size when a minibatch's forward may run each prompt once: groups of completions
        (``num_generations`` > 1), whole and in order in the minibatch, and no critic (1 otherwise)."""
        if batch.groups is None or self.has_critic or batch.response_ids.shape[1] < 2:
            return 1
        return batch.groups.whole()

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
        """``local`` summed over processes (itself in one process; the collector's sum): what every
        process agrees on."""
        reduce = self.collector.reduce
        return reduce(local) if reduce is not None else local

    def require_unsharded_policy(self, what: str) -> None:
        """One clear error instead of a silent failure where ``what`` needs the whole policy and an
        optimizer step of its own (TRPO): DeepSpeed (any ZeRO stage) and FSDP are refused."""
        if self.is_fsdp_enabled or getattr(self.accelerator.state, "deepspeed_plugin", None) is not None:
            raise ValueError(
                f"{self._name} {what}, outside the optimizer that DeepSpeed ZeRO partitions and FSDP shards: "
                "use DDP (hfrl/accelerate_configs/multi_gpu.yaml, or multi_cpu.yaml on the CPU)"
            )

    # ---- logging: one entry per iteration ------------------------------------------------------------
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:  # transformers 5.24: Trainer.log
        if "loss" in logs and self.iteration is not None:  # the Trainer's training log: once per iteration
            logs = {**logs, **self._close_iteration(self.iteration)}
            self.iteration = None
        super().log(logs, start_time)

    def _close_iteration(self, record: IterationRecord) -> dict[str, float]:
        """The iteration's log entry: its metrics, the means of its minibatches' statistics (over
        processes), the update's time and the tokens per second of the whole iteration."""
        now = time.perf_counter()
        metrics = dict(record.metrics)
        metrics.update(self.collector.process_mean(record.update_means()))
        metrics["time/update"] = now - record.update_start
        local = torch.tensor(float(record.tokens), device=self.accelerator.device)
        tokens = float(self.accelerator.reduce(local, reduction="sum"))
        metrics["tokens_per_second"] = tokens / max(now - record.start, 1e-9)
        metrics["iteration"] = self.state.global_step // self.args.steps_per_iteration
        entropy = metrics.get("entropy")  # the same on every process (rollout_stats, the loss's: reduced)
        watch = self.online_state.entropy_watch
        warning = watch.observe(entropy, int(metrics["iteration"])) if entropy is not None else None
        if warning and self.is_world_process_zero():
            logging.get_logger(__name__).warning(warning)
        return metrics

    # ---- evaluation ------------------------------------------------------------------------------------
    def generate_and_score(
        self, dataset: Dataset, prefix: str = "eval"
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """The eval prompts completed by the policy with the eval settings (the whole vocabulary), scored
        (:func:`hfrl.trainers.evaluation.generate_and_score`: :class:`EvaluationMixin`'s ``evaluate``)."""
        if PROMPT_IDS not in dataset.column_names:
            dataset = self._tokenize(dataset)

        def complete(batch: Dataset) -> list[str]:
            return self.collector.complete(self.model_wrapped, list(batch), self.state.global_step)

        scoring = self.scoring(prefix, policy=self.accelerator.unwrap_model(self.model).policy)
        batch_size = self.args.per_device_eval_batch_size
        return generate_and_score(dataset, complete, scoring, batch_size=batch_size, accelerator=self.accelerator)

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

    def _determine_best_metric(self, metrics: dict[str, float], trial: Any) -> bool:  # transformers 5.24
        """The Trainer's, with a one-line error when ``metric_for_best_model`` is not among the metrics."""
        name = None if self.args.metric_for_best_model is None else _eval_metric(self.args.metric_for_best_model)
        if name is not None and name not in metrics:
            raise ValueError(
                f"metric_for_best_model {self.args.metric_for_best_model!r} is not among this evaluation's metrics: "
                f"{', '.join(sorted(k for k in metrics if k.startswith('eval_')))}"
            )
        return super()._determine_best_metric(metrics, trial)

    # ---- saved state ----------------------------------------------------------------------------------
    def _save(  # transformers 5.24
        self, output_dir: str | None = None, state_dict: dict[str, torch.Tensor] | None = None
    ) -> None:
        """The policy as a plain transformers (or PEFT adapter) directory, the value head (if any) beside
        it (:func:`hfrl.trainers.online.checkpointing.save_policy`)."""
        if self.args.should_save:
            model: ActorCritic = self.accelerator.unwrap_model(self.model)
            save_policy(model, self.tokenizer, self.args, str(output_dir or self.args.output_dir), state_dict)

    def _save_own_state(self, folder: str) -> None:
        """``online_state.json`` and the action space's files in the checkpoint (before it is marked
        complete: :mod:`hfrl.trainers.crash_safe`)."""
        if self.args.should_save:
            iteration = self.state.global_step // self.args.steps_per_iteration
            self.online_state.save(folder, iteration, self.args.advantage_estimator)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:  # transformers 5.24
        wrapper = cast(ActorCritic, model if model is not None else self.model)
        load_weights(wrapper, resume_from_checkpoint, self.args.advantage_estimator)
        self.online_state.load(resume_from_checkpoint)  # train() checked the checkpoint is complete

    def _load_best_model(self) -> None:  # transformers 5.24: Trainer._load_best_model
        """``load_best_model_at_end``: the policy, value head and critic of the best evaluated checkpoint
        (``state.best_model_checkpoint``, by ``metric_for_best_model``) back in the model, so that
        ``save_model`` writes them. The rest of the training state (optimizer, KL controller, NLPO's mask
        policy) is the last iteration's: training is over."""
        best = cast(str, self.state.best_model_checkpoint)
        logging.get_logger(__name__).info(
            f"loading the best evaluated policy from {best} ({self.args.metric_for_best_model} = "
            f"{self.state.best_metric})"
        )
        load_weights(cast(ActorCritic, self.model), best, self.args.advantage_estimator)


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
