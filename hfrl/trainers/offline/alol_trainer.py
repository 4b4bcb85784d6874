"""``ALoLTrainer``: offline advantage- and reward-weighted training of language models (the A-LoL
family: nll, wbc, r_gold, r_lol, a_lol, a_lol_ref_free, a_lol_seq, a_lol_kl), one Trainer subclass.

hfrl train --task hh --alg a_lol --model MODEL

Phases: preparation once per dataset, cached (:mod:`hfrl.trainers.offline.preparation`: rewards,
reference log-probs, value head, advantages) -> ``transformers.Trainer``'s own loop over a sampler
that draws examples by priority (``P(i) ∝ A+_i``) -> ``compute_loss`` calls the pure
:func:`hfrl.core.losses.alol_loss`. The reference policy is the starting model: everything the losses
need from it is computed during the preparation, so training holds one copy of the weights (with a
fresh PEFT adapter the reference is the base with the adapter disabled).
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import torch
from datasets import Dataset
from torch import nn
from torch.utils.data import Sampler
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)

from hfrl.core.losses import alol_loss
from hfrl.core.models import fix_tokenizer, load_tokenizer_for, load_trainable
from hfrl.core.offline_losses import needs_reference, weight_of
from hfrl.core.policies import completion_forward, disable_dropout, is_peft_model
from hfrl.core.quantization import bnb_config
from hfrl.core.rollout import pad
from hfrl.core.zero3 import is_partitioned, whole_copy
from hfrl.rewards import reward_list
from hfrl.trainers.evaluation import EvaluationMixin, completer, eval_mode, generate_and_score
from hfrl.trainers.iteration_log import SaveStateAtEnd, report_steps
from hfrl.trainers.offline.alol_config import DISPLAY_NAMES, ALoLConfig
from hfrl.trainers.offline.preparation import (
    INTERNAL_COLUMNS,
    Preparation,
    PrepareContext,
    module_fingerprint,
    prepare_dataset,
)
from hfrl.trainers.offline.priority_sampler import PrioritySampler
from hfrl.trainers.papers import paper
from hfrl.trainers.trainer_mixin import TrainerMixin

RewardFunc = Callable[..., Sequence[Any]]


class _CallWithConfig:
    """The Trainer's (possibly DDP / DeepSpeed-wrapped) model, called through its wrapper so that
    gradients synchronise, with the policy's config: what ``completion_forward`` reads."""

    def __init__(self, model: nn.Module, config: Any) -> None:
        self.model, self.config = model, config

    def __call__(self, **kwargs: Any) -> Any:
        return self.model(**kwargs)


class _LogPreparation(TrainerCallback):
    """Log the preparation statistics (positive fraction, value-head MSE, ...) as the run's first
    entry, and write them to ``preparation.json`` in the output directory."""

    def __init__(self, trainer: ALoLTrainer) -> None:
        self.trainer = weakref.ref(trainer)

    def on_train_begin(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        trainer = self.trainer()
        if trainer is None or state.global_step != 0:
            return
        stats = {f"prepare/{k}": v for k, v in trainer.preparation.stats.items()}
        trainer.log(stats)
        if args.should_save:
            os.makedirs(args.output_dir, exist_ok=True)
            with open(os.path.join(args.output_dir, "preparation.json"), "w") as fh:
                json.dump({**trainer.preparation.stats, "from_cache": trainer.preparation.from_cache}, fh, indent=2)


class ALoLTrainer(EvaluationMixin, TrainerMixin, Trainer):
    """Offline RL on (prompt, completion, reward) data: A-LoL and its family, by ``args.algorithm``.

    Example:

    ```python
    from datasets import Dataset
    from hfrl import ALoLConfig, ALoLTrainer

    def digits(prompts, completions, **kwargs):
        return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]

    data = Dataset.from_dict({"prompt": ["count:"] * 32, "completion": ["1 2 3", "the end"] * 16})
    trainer = ALoLTrainer(
        model="tiny",
        args=ALoLConfig(output_dir="runs/alol-demo", algorithm="a_lol", num_train_epochs=2),
        reward_funcs=digits,
        train_dataset=data,
        eval_dataset=data.select(range(8)),
    )
    trainer.train()
    ```
    """

    algs = {  # one trainer, one loss each (docs/algorithms.md §6)
        "nll": "offline: negative log-likelihood of the data's responses (gives A-LoL's reference policy).",
        "wbc": "offline: reward-weighted behaviour cloning, R * NLL.",
        "r_gold": "offline: reward-weighted GOLD, R * sum_t max(pi, 0.1) * -log pi, no reference model.",
        "r_lol": "offline: reward times the clamped importance weight pi / pi_ref times NLL (R-LoL).",
        "a_lol": "offline: positive advantage R - V(x) times the clamped pi / pi_ref times NLL (A-LoL).",
        "a_lol_ref_free": "offline: A-LoL without the importance weight, A+ * NLL.",
        "a_lol_seq": "offline: A-LoL with a clamped importance weight per token.",
        "a_lol_kl": "offline: A-LoL with a KL penalty to pi_ref instead of the importance weight.",
    }
    config_class = ALoLConfig
    args: ALoLConfig
    _name = "A-LoL"
    _tag_names = ["hfrl", "a-lol", "offline-rl"]
    _paper = paper("baheti2024improving")

    def __init__(
        self,
        model: str | PreTrainedModel,
        args: ALoLConfig | None = None,
        reward_funcs: RewardFunc | Sequence[RewardFunc] | None = None,
        train_dataset: Dataset | None = None,
        eval_dataset: Dataset | dict[str, Dataset] | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        peft_config: Any | None = None,
        ref_model: PreTrainedModel | None = None,
        metrics: dict[str, Callable[..., Any]] | None = None,
        callbacks: list[TrainerCallback] | None = None,
        optimizers: tuple[Any, ...] = (None, None),
    ) -> None:
        """
        :param model: the policy: a Hub id, a local folder (causal or seq2seq), a ``.gguf`` file, a
            built-in name (``tiny``, ``tiny-t5``, ``smollm2``) or a loaded ``PreTrainedModel``; a PEFT
            adapter folder loads onto ``args.base_model``.
        :param args: the config (``ALoLConfig``; ``PROConfig`` for ``PROTrainer``): ``args.algorithm``
            picks the loss. Default: its defaults, saving to ``<model name>-<algorithm>``.
        :param reward_funcs: a TRL-style reward function, ``f(prompts, completions, **columns) ->
            list[float]``, or a list of them (summed with ``args.reward_weights``): each completion of
            the data is scored once, before training. Not needed when the data has a ``reward`` column.
        :param train_dataset: the data: a ``datasets.Dataset`` with ``prompt`` and ``completion``
            columns (text), and a ``reward`` column or ``reward_funcs``. Required.
        :param eval_dataset: a ``Dataset`` with a ``prompt`` column, or ``{name: Dataset}``:
            ``evaluate()`` scores greedy completions of its prompts, and the value estimate of the
            advantage-weighted losses is fitted on them (the ``validation`` split of a dict).
        :param processing_class: the tokenizer; default: the model's.
        :param peft_config: a ``peft.LoraConfig`` (or other PEFT config): a fresh adapter is trained on
            the frozen model, and the reference policy is the model with the adapter off.
        :param ref_model: the reference policy pi_ref of the importance weights and the KL variant;
            default: the starting model. Read once, in the preparation before training.
        :param metrics: ``{name: metric}`` computed by ``evaluate()`` over the completions, a metric
            being called as a reward function is and returning a float or a dict of floats; e.g. a
            task's ``task.metrics``.
        :param callbacks: ``transformers.TrainerCallback`` instances, as for ``transformers.Trainer``.
        :param optimizers: ``(optimizer, lr_scheduler)``, as for ``transformers.Trainer``.
        """
        args = args if args is not None else self.default_config(model)
        if not isinstance(args, ALoLConfig):
            raise ValueError(f"args must be an ALoLConfig, got {type(args).__name__}")
        if train_dataset is None:
            raise ValueError("ALoLTrainer needs a train_dataset with 'prompt' and 'completion' columns")
        self.reward_funcs, self.reward_weights = reward_list(reward_funcs, args.reward_weights)
        self.metrics = dict(metrics or {})

        policy, self._fresh_adapter = self._load_policy(model, args, peft_config)
        if processing_class is None:
            processing_class = load_tokenizer_for(model, policy)
        fix_tokenizer(processing_class, policy)
        if args.disable_dropout:
            disable_dropout(policy)
        self.ref_model = ref_model.eval().requires_grad_(False) if ref_model is not None else None
        self.tokenizer = processing_class
        self.is_encoder_decoder = bool(getattr(policy.config, "is_encoder_decoder", False))
        self._stats: dict[str, list[float]] = defaultdict(list)

        super().__init__(
            model=policy,
            args=args,
            data_collator=self._collate,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            optimizers=optimizers,
        )
        if self.ref_model is not None:
            self.ref_model.to(self.accelerator.device)
        self.add_callback(SaveStateAtEnd())
        self.add_callback(_LogPreparation(self))
        report_steps(self)  # one bar with the loss, not a raw log dict per logging step

        # ---- preparation: once per dataset, cached -------------------------------------------
        self.preparation: Preparation = self.prepare(train_dataset, self._value_dataset(eval_dataset))
        self.train_dataset = self.preparation.dataset
        self.ref_model = None  # everything the losses need from pi_ref is in the prepared dataset

    # ---- model and reference ----------------------------------------------------------------
    @staticmethod
    def _load_policy(model: str | PreTrainedModel, args: ALoLConfig, peft_config: Any) -> tuple[nn.Module, bool]:
        """The policy (a model, or a PEFT adapter loaded trainable onto ``args.base_model``, with
        ``load_in_4bit`` on a 4-bit base: :func:`hfrl.core.models.load_trainable`) and whether it
        carries a fresh adapter from ``peft_config``."""
        init_kwargs = dict(args.model_init_kwargs or {})
        if args.load_in_4bit:  # LoL-RL's QLoRA: NF4 with double quantisation, bfloat16 compute
            init_kwargs.setdefault("dtype", torch.bfloat16)
            init_kwargs["quantization_config"] = bnb_config(4, quant_type="nf4", double_quant=True)
        policy, fresh = load_trainable(
            model, init_kwargs, args.base_model, peft_config, bool(args.gradient_checkpointing)
        )
        if is_peft_model(policy) and args.gradient_checkpointing:
            policy.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still need a grad path
        return policy, fresh

    @property
    def policy(self) -> nn.Module:
        return cast(nn.Module, self.accelerator.unwrap_model(self.model))

    _whole_reference: nn.Module | None = None  # under ZeRO-3, during the preparation: a whole copy of pi_ref

    @contextlib.contextmanager
    def reference(self) -> Iterator[nn.Module]:
        """pi_ref in eval mode without gradients: ``ref_model`` if given, else the starting policy
        itself (its fresh PEFT adapter disabled). Used during the preparation only."""
        lm = self._whole_reference or (self.ref_model if self.ref_model is not None else self.policy)
        was_training = lm.training
        lm.eval()
        adapter_off = self._fresh_adapter and self.ref_model is None
        try:
            with (
                torch.no_grad(),
                lm.disable_adapter() if adapter_off and is_peft_model(lm) else contextlib.nullcontext(),
            ):
                yield lm
        finally:
            lm.train(was_training)

    def _reference_fingerprint(self) -> str:
        if self._whole_reference is not None:
            return module_fingerprint(self._whole_reference, skip_adapters=self._fresh_adapter)
        if self.ref_model is not None:
            return module_fingerprint(self.ref_model)
        return module_fingerprint(self.policy, skip_adapters=self._fresh_adapter)

    @staticmethod
    def _value_dataset(eval_dataset: Dataset | dict[str, Dataset] | None) -> Dataset | None:
        """The prompts the value head is fitted on: the eval dataset (its 'validation' split when a dict)."""
        if isinstance(eval_dataset, dict):
            return eval_dataset.get("validation", next(iter(eval_dataset.values()), None))
        return eval_dataset

    def prepare(self, train_dataset: Dataset, validation: Dataset | None) -> Preparation:
        """Rewards, reference log-probs, value head and advantages of ``train_dataset`` (cached; the
        main process computes, the others load its cache)."""
        algorithm = self.args.algorithm
        reference = needs_reference(algorithm) or weight_of(algorithm) == "advantage"  # (V(x): the reference's)
        lm = self.ref_model if self.ref_model is not None else self.policy
        if reference and is_partitioned(lm):
            # ZeRO-3: the main process prepares alone while the others wait, and a partitioned model's
            # forward outside DeepSpeed's engine needs every process: each gathers a whole copy first
            self._whole_reference = whole_copy(lm)
        try:
            return self._prepare(train_dataset, validation, reference)
        finally:
            self._whole_reference = None

    def _prepare(self, train_dataset: Dataset, validation: Dataset | None, reference: bool) -> Preparation:
        context = PrepareContext(
            args=self.args,
            tokenizer=self.tokenizer,
            reference=self.reference,
            reference_fingerprint=self._reference_fingerprint() if reference else "",
            reward_funcs=self.reward_funcs,
            reward_weights=self.reward_weights,
            device=self.accelerator.device,
            is_encoder_decoder=self.is_encoder_decoder,
        )
        with self.accelerator.main_process_first():
            return prepare_dataset(context, train_dataset, validation)

    # ---- data -------------------------------------------------------------------------------
    def _collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """A batch of ``B`` prepared examples: ``prompt_ids``/``prompt_mask (B, P)`` (left-padded for
        causal models), ``completion_ids``/``completion_mask (B, T)`` (right-padded),
        ``ref_logprobs (B, T)`` (zeros when not prepared), ``rewards (B,)``, ``advantages (B,)``."""
        pad_id = self.tokenizer.pad_token_id
        prompt_ids, prompt_mask = pad(
            [r["prompt_ids"] for r in rows], pad_id, "right" if self.is_encoder_decoder else "left"
        )
        completion_ids, completion_mask = pad([r["completion_ids"] for r in rows], pad_id, "right")
        ref_logprobs = torch.zeros(completion_ids.shape)
        if "ref_logprobs" in rows[0]:
            for i, row in enumerate(rows):
                ref_logprobs[i, : len(row["ref_logprobs"])] = torch.tensor(row["ref_logprobs"])
        return {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "ref_logprobs": ref_logprobs,
            "rewards": torch.tensor([float(r["reward"]) for r in rows]),
            "advantages": torch.tensor([float(r.get("advantage", 0.0)) for r in rows]),
        }

    def _get_train_sampler(self, train_dataset: Dataset | None = None) -> Sampler[int] | None:
        """``good_priority``: ``P(i) ∝ A+_i`` (reward methods: ``∝ R_i``), with replacement;
        ``good_random``: uniform over the positive examples; both draw as many examples per epoch as
        are positive. ``none``: the Trainer's shuffling of all examples."""
        weights = self.preparation.sampling_weights
        if self.args.sampling == "none" or weights is None:
            return super()._get_train_sampler(train_dataset)
        return PrioritySampler(weights, uniform=self.args.sampling == "good_random", seed=self.args.seed)

    # ---- loss -------------------------------------------------------------------------------
    def completion_logprobs(self, model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``log pi(y_t | x, y_<t)`` of a batch's completion tokens, ``(B, T)`` (padding not masked)."""
        from trl.trainer.utils import selective_log_softmax

        logits, _ = completion_forward(
            _CallWithConfig(model, self.policy.config),
            inputs["prompt_ids"],
            inputs["prompt_mask"],
            inputs["completion_ids"],
            inputs["completion_mask"],
        )
        return selective_log_softmax(logits, inputs["completion_ids"])

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logprobs = self.completion_logprobs(model, inputs)
        loss, stats = alol_loss(
            self.args.algorithm,
            logprobs,
            inputs["completion_mask"],
            rewards=inputs["rewards"],
            advantages=inputs["advantages"],
            ref_logprobs=inputs["ref_logprobs"],
            ppo_clip=self.args.ppo_clip,
            kl_beta=self.args.kl_beta,
        )
        stats["data_reward"] = inputs["rewards"].mean()
        if weight_of(self.args.algorithm) == "advantage":
            stats["advantage"] = inputs["advantages"].mean()
        stats["completion_length"] = inputs["completion_mask"].sum(1).float().mean()
        for key, value in stats.items():
            self._stats[key].append(float(value))
        return (loss, {"logprobs": logprobs}) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """The Trainer's training log, with the loss statistics averaged since the last one."""
        if "loss" in logs and self._stats:
            logs = {**logs, **{k: sum(v) / len(v) for k, v in self._stats.items()}}
            self._stats.clear()
        super().log(logs, start_time)

    # ---- evaluation (EvaluationMixin.evaluate) ---------------------------------------------
    def generate_and_score(
        self, dataset: Dataset, prefix: str = "eval"
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """The eval prompts completed by the policy with the eval settings, scored
        (:func:`hfrl.trainers.evaluation.generate_and_score`)."""
        from trl.models.utils import unwrap_model_for_generation

        args = self.args
        with unwrap_model_for_generation(self.model_wrapped, self.accelerator) as unwrapped, eval_mode(unwrapped):
            complete = completer(
                unwrapped, self.tokenizer, args.eval_kwargs, args.max_prompt_length, args.truncation_side
            )
            return generate_and_score(
                dataset, complete, self.scoring(prefix, self.policy), batch_size=args.per_device_eval_batch_size,
                accelerator=self.accelerator, internal_columns=INTERNAL_COLUMNS,
            )  # fmt: skip

    # ---- model card -------------------------------------------------------------------------
    def _card_kwargs(self) -> dict[str, Any]:
        """The card names the run's own algorithm of the family (A-LoL seq, R-LoL, ...)."""
        from hfrl.trainers import SUMMARIES

        kwargs = super()._card_kwargs()
        algorithm = self.args.algorithm
        loss = SUMMARIES.get(algorithm, "").removeprefix("offline: ")
        kwargs["algorithm"] = {
            "name": DISPLAY_NAMES[algorithm],
            "tags": [*self._tag_names, algorithm.replace("_", "-")],
            "paper": dict(self._paper),
            "description": f"offline RL on (prompt, completion, reward) data; the loss: {loss}",
        }
        return kwargs
