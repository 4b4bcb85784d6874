"""Configuration shared by the online trainers (PPO, NLPO, A2C, TRPO)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from hfrl.core.estimators import ESTIMATORS
from hfrl.core.policy_losses import POLICY_LOSSES
from hfrl.core.policy_losses.aggregation import AGGREGATIONS
from hfrl.trainers.config_checks import MAX_BATCH, MAX_COUNT, check_values, fit_min_new_tokens
from hfrl.trainers.field_rules import check_online
from hfrl.trainers.rl_config import RLConfig
from hfrl.trainers.schema import CODE
from hfrl.utils.registry import registry_help

if TYPE_CHECKING:
    from hfrl.core.policy_losses.base import LossSettings


def _group_estimators() -> list[str]:
    """The registered estimators that compare a prompt's completions (their class's ``needs_groups``):
    the registry says, not a list kept here."""
    from hfrl.core.estimators import estimator_class

    return [name for name in ESTIMATORS if estimator_class(name).needs_groups]


def _read_by(setting: str) -> str:
    """`` Read by the policy losses ppo_clip, gspo.``: the registered losses that declare ``setting`` among
    what they read (their class's ``reads``); another loss refuses it (hfrl.trainers.field_rules)."""
    from hfrl.core.policy_losses import policy_loss_class

    names = [name for name in POLICY_LOSSES if setting in policy_loss_class(name).reads]
    return f" Read by the policy losses {', '.join(names)}."


MINIBATCH_UNITS = ("sequences", "tokens")
WHITEN_SCOPES = ("rollout", "minibatch")
INVALID_REWARDS = ("error", "drop")


@dataclass
class OnlineConfig(RLConfig):
    """Settings of the rollout, reward, KL penalty and advantage core of the online trainers.

    One *iteration* is one rollout of ``rollout_batch_size`` prompts per process, ``num_generations``
    completions each, followed by ``num_ppo_epochs`` passes over it in minibatches of
    ``mini_batch_size`` completions. Steps,
    logging, evaluation and saving are derived from iterations: ``max_steps = num_iterations *
    steps_per_iteration`` and ``per_device_train_batch_size = mini_batch_size /
    gradient_accumulation_steps``. The prompt, evaluation-generation, reward-weight and model-loading
    fields are :class:`~hfrl.trainers.rl_config.RLConfig`'s.
    """

    #: its section of a task's YAML ``configs``, inherited along the config classes (hfrl.runs.experiment.task_config)
    task_section: ClassVar[str] = "online"

    # ---- Iterations and batches ----
    num_iterations: int = field(default=100, metadata={"help": "Number of rollouts (iterations) to train for."})
    rollout_batch_size: int = field(
        default=16, metadata={"help": "Prompts per rollout, per process (num_generations completions each)."}
    )
    num_generations: int = field(
        default=1,
        metadata={
            "help": "Completions sampled per prompt: a group, which the group estimators "
            f"({', '.join(_group_estimators())}) need >= 2 of. Each prompt is encoded once for its group's "
            "completions."
        },
    )
    mini_batch_size: int = field(
        default=16,
        metadata={"help": "Completions per optimizer step, per process; split into gradient_accumulation_steps."},
    )
    num_ppo_epochs: int = field(default=4, metadata={"help": "Passes over each rollout."})
    minibatch_unit: str = field(
        default="sequences",
        metadata={
            "choices": MINIBATCH_UNITS,
            "help": "What a minibatch holds: 'sequences' (mini_batch_size whole completions) or 'tokens' (an equal "
            "share of the rollout's transitions, drawn at random across all its completions, as SB3's rollout "
            "buffer / RL4LMs). Either way an epoch has (rollout_batch_size x num_generations) / mini_batch_size "
            "minibatches.",
        },
    )
    rollout_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Transitions (completion tokens) per rollout, at least: further completions of the rollout's "
            "prompts are sampled until there are this many (RL4LMs: n_steps x n_envs). None: one completion per prompt."
        },
    )
    generation_batch_size: int | None = field(
        default=None,
        metadata={
            "help": "Completions per `generate` call, a multiple of num_generations (default: the whole rollout)."
        },
    )
    scoring_batch_size: int | None = field(
        default=None, metadata={"help": "Completions per scoring forward pass (default: mini_batch_size)."}
    )

    # ---- Prompts and generation ----
    max_new_tokens: int = field(default=20, metadata={"help": "Maximum completion length in rollouts."})
    generation_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0},
        metadata={"help": "Keyword arguments of `generate` for rollouts (sampling)."},
    )
    logprobs_from_generation: bool = field(
        default=True,
        metadata={
            "help": "Keep the sampled tokens' log-probs and hidden states from generation instead of a second "
            "policy forward at scoring (shared critic; NLPO: also under the top-p set each step sampled from). "
            "Exact in fp32; under bf16/fp16 the cached forward of generation differs slightly from the update's, "
            "so the first ratio is not exactly 1."
        },
    )
    merge_lora_for_rollouts: bool = field(
        default=True,
        metadata={
            "help": "With a LoRA adapter (--use_peft) and no log-probs kept from generation "
            "(logprobs_from_generation false, or a separate critic), merge the adapter into the base weights for "
            "the rollouts' generate and restore them bit for bit after (hfrl.trainers.online.lora_rollouts): one "
            "linear per layer instead of three; the scoring forward still scores the unmerged policy. Not with "
            "NLPO's mask adapter, a quantized base, ZeRO-3 or FSDP."
        },
    )

    # ---- vLLM rollouts (TRL's VLLMGeneration; GRPOConfig's names; hfrl.trainers.online.vllm_rollout) ----
    use_vllm: bool = field(
        default=False,
        metadata={
            "help": "Sample the rollouts with vLLM (TRL's VLLMGeneration; the hfrl[vllm] extra, a CUDA GPU) "
            "instead of generate. hfrl's scoring forward still computes the old log-probs (logprobs_from_generation "
            "is ignored) and each token's policy-loss term is weighted by the truncated importance weight "
            "min(exp(logp_old - logp_vllm), vllm_importance_sampling_clip_max). Causal models, not NLPO, not "
            "sampled_set_loss; evaluation still generates with transformers."
        },
    )
    vllm_mode: str = field(
        default="colocate",
        metadata={
            "choices": ("colocate", "server"),
            "help": "'colocate': a vLLM engine in each training process, sharing its GPU; 'server': requests to a "
            "separate `trl vllm-serve` server.",
        },
    )
    vllm_server_base_url: str | None = field(
        default=None,
        metadata={"help": "Server mode: the server's URL; if set, vllm_server_host and vllm_server_port are ignored."},
    )
    vllm_server_host: str = field(default="0.0.0.0", metadata={"help": "Server mode: the vLLM server's host."})
    vllm_server_port: int = field(default=8000, metadata={"help": "Server mode: the vLLM server's port."})
    vllm_server_timeout: float = field(
        default=240.0, metadata={"help": "Server mode: seconds to wait for the server to be up when training starts."}
    )
    vllm_group_port: int = field(
        default=51216, metadata={"help": "Server mode: the port of the weight-update group (change it if taken)."}
    )
    vllm_sync_timeout: float = field(
        default=600.0,
        metadata={
            "help": "Seconds each iteration's weight sync to vLLM may take before the run stops with an error naming "
            "the server (hfrl's own: TRL waits without limit)."
        },
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.3, metadata={"help": "Colocate mode: the share of GPU memory vLLM reserves (weights, KV cache)."}
    )
    vllm_tensor_parallel_size: int = field(
        default=1, metadata={"help": "Colocate mode: GPUs per vLLM engine (tensor parallelism)."}
    )
    vllm_max_model_length: int | None = field(
        default=None,
        metadata={"help": "vLLM's context window, at least the longest prompt + max_new_tokens (None: the model's)."},
    )
    vllm_enable_sleep_mode: bool = field(
        default=False,
        metadata={"help": "Colocate mode: offload vLLM's weights and KV cache in the update (less memory, slower)."},
    )
    vllm_model_impl: str = field(
        default="vllm",
        metadata={"help": "vLLM's model implementation: 'vllm' (its own) or 'transformers'."},
    )
    vllm_importance_sampling_correction: bool = field(
        default=True,
        metadata={
            "help": "Weight each token's policy-loss term by its truncated importance weight (TRL's token_truncate), "
            "correcting for the gap between vLLM's sampler and the trained policy. False: logged, not applied."
        },
    )
    vllm_importance_sampling_clip_max: float | None = field(
        default=3.0,
        metadata={"help": "The importance weight's cap C: w_t = min(exp(logp_old - logp_vllm), C) (None: no cap)."},
    )

    # ---- Reward and KL penalty ----
    max_abs_reward: float | None = field(
        default=1e6,
        metadata={
            "help": "A reward beyond +-this (or NaN, +-inf) is an error (or dropped: invalid_rewards). None: no bound."
        },
    )
    invalid_rewards: str = field(
        default="error",
        metadata={
            "choices": INVALID_REWARDS,
            "help": "A reward that is NaN, +-inf or beyond max_abs_reward: 'error' stops the run naming the function "
            "and the completion; 'drop' warns and leaves that completion out of the rollout's update.",
        },
    )
    kl_coef: float = field(default=0.1, metadata={"help": "Initial coefficient beta of the per-token KL penalty."})
    kl_target: float | None = field(
        default=None,
        metadata={"help": "Target per-token KL of the adaptive controller; None keeps beta fixed."},
    )
    kl_in_loss: bool = field(
        default=False,
        metadata={
            "help": "Put the KL to the reference in the loss, beta * mean(k3) with k3 = exp(ref - logp) - (ref - logp) "
            "- 1 (GRPO), instead of the per-token penalty -beta * kl_t in the reward (RL4LMs, the default). kl_coef "
            "and kl_target set beta either way."
        },
    )
    sampled_set_loss: bool = field(
        default=False,
        metadata={
            "help": "Renormalise the loss's action distribution (ratio, old log-probs, entropy) over the tokens each "
            "step could sample, what generation_kwargs' top_k / top_p left, as NLPO always does over its mask; the "
            "KL penalty keeps the full softmax. False: the full softmax (RL4LMs' PPO), which with truncated "
            "sampling keeps probability on tokens no rollout draws."
        },
    )
    kl_adapt_rate: float = field(
        default=0.1, metadata={"help": "Adaptive controller rate: beta *= 1 + rate * clip(error, -0.2, 0.2)."}
    )

    # ---- Advantages and critic ----
    advantage_estimator: str = field(
        default="gae",
        metadata={
            "help": "How rewards become advantages (hfrl.core.estimators, docs/algorithms.md §13); all but the ones "
            "with a critic train no value head. " + registry_help(ESTIMATORS, "gae")
        },
    )
    gamma: float | None = field(
        default=None, metadata={"help": "Discount factor (default: 0.99 with a critic, GAE; 1 without)."}
    )
    lam: float = field(default=0.95, metadata={"help": "GAE lambda."})
    whiten_advantages: bool = field(
        default=True,
        metadata={
            "help": "GAE: normalise advantages over each rollout (the other estimators as their definition says)."
        },
    )
    whiten_scope: str = field(
        default="rollout",
        metadata={
            "choices": WHITEN_SCOPES,
            "help": "Where whiten_advantages normalises: 'rollout' (once over the rollout) or 'minibatch' (also over "
            "each minibatch's transitions, as SB3 / RL4LMs).",
        },
    )
    cliprange_value: float | None = field(
        default=None, metadata={"help": "Clip value predictions around the rollout's values (None: no clipping)."}
    )
    vf_coef: float = field(default=0.5, metadata={"help": "Value loss coefficient c_v."})
    ent_coef: float = field(default=0.0, metadata={"help": "Entropy bonus coefficient c_e."})
    separate_critic: bool = field(
        default=False, metadata={"help": "Give the critic its own copy of the backbone (default: shared)."}
    )

    # ---- Training the critic (docs/algorithms.md §16) ----
    lam_critic: float | None = field(
        default=None,
        metadata={
            "help": "GAE lambda of the critic's targets, decoupled from the actor's lam (VC-PPO, VAPO: 1.0, Monte "
            "Carlo returns). None: lam."
        },
    )
    lam_alpha: float | None = field(
        default=None,
        metadata={
            "help": "VAPO's length-adaptive actor lambda: each completion's lam is 1 - 1 / (lam_alpha x its length), "
            "in [0, 1] (VAPO: 0.05 for long reasoning; SAO: 1.5). None: lam for every completion."
        },
    )
    critic_warmup_iterations: int = field(
        default=0,
        metadata={
            "help": "The first N iterations train the critic alone, against lambda-1 targets; the policy is unchanged "
            "(VC-PPO's and VAPO's value pretraining). Logged as critic_warmup."
        },
    )
    critic_epochs: int = field(
        default=0,
        metadata={
            "help": "Critic-only passes over each rollout before the policy's (SAO: 2), on the rollout's returns; "
            "then the advantages are estimated again with the trained critic."
        },
    )
    critic_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "The critic's learning rate (value head, and the separate critic's backbone), scheduled as "
            "learning_rate is. None: learning_rate (or critic_learning_rate_ratio). SAO trains it at 5x, VAPO at 2x "
            "the policy's."
        },
    )
    critic_learning_rate_ratio: float | None = field(
        default=None,
        metadata={
            "help": "The critic's learning rate as a multiple of learning_rate (ORZ: 5, 5e-6 against 1e-6), so that "
            "a preset keeps the task's rate; set it or critic_learning_rate, not both. None: critic_learning_rate."
        },
    )
    critic_freeze_attention: bool = field(
        default=False,
        metadata={
            "help": "SAO's frozen-attention critic: the separate critic's attention weights do not learn (needs "
            "separate_critic)."
        },
    )
    critic_from: str | None = field(
        default=None,
        metadata={
            "help": "Start the critic from a trained one: a run folder, an hfrl export or a Hub id namespace/name "
            "holding value_head.safetensors (and critic/ for separate_critic); safetensors only, no code run "
            "(hfrl.trainers.online.critic_from). Its hidden size, layout (separate or shared) and LoRA must match."
        },
    )
    positive_lm_coef: float = field(
        default=0.0,
        metadata={
            "help": "VAPO's positive-example LM loss: + coef x the NLL of the completions whose reward is above "
            "positive_lm_threshold (VAPO: 0.1). 0: off."
        },
    )
    positive_lm_threshold: float = field(
        default=0.0,
        metadata={"help": "The task reward a completion must exceed to be a positive example (a 0 / 1 verifier: 0)."},
    )

    # ---- Policy loss (docs/algorithms.md §15) ----
    policy_loss: str = field(
        default="ppo_clip",
        metadata={
            "help": "The actor's loss (hfrl.core.policy_losses, docs/algorithms.md §15). "
            + registry_help(POLICY_LOSSES, "ppo_clip")
        },
    )
    cliprange: float = field(
        default=0.2, metadata={"help": "The ratio's clip range epsilon (PPO: 0.2)." + _read_by("cliprange")}
    )
    cliprange_low: float | None = field(
        default=None,
        metadata={
            "help": "The ratio's lower clip, 1 - eps_low (default: the policy loss's own, else cliprange)."
            + _read_by("cliprange_low")
        },
    )
    cliprange_high: float | None = field(
        default=None,
        metadata={
            "help": "The ratio's upper clip, 1 + eps_high; above cliprange_low it is DAPO's clip-higher (e.g. 0.28). "
            "Default: the policy loss's own, else cliprange." + _read_by("cliprange_high")
        },
    )
    clip_ratio_c: float | None = field(
        default=None,
        metadata={
            "help": "Dual-clip (Ye et al. 2020): for a negative advantage the ratio's term is at least c x A "
            "(c > 1, e.g. 3). None: off." + _read_by("clip_ratio_c")
        },
    )
    loss_aggregation: str | None = field(
        default=None,
        metadata={
            "choices": AGGREGATIONS,
            "help": "How the policy loss's per-token terms become one number: token-mean (every token alike), "
            "seq-mean-token-mean (each completion alike: GRPO, GSPO), seq-mean-token-sum, seq-mean-token-sum-norm "
            "(Dr. GRPO's constant, completions x max_new_tokens). Default: the policy loss's own, else the "
            "estimator's (dr_grpo: seq-mean-token-sum-norm), else token-mean." + _read_by("loss_aggregation"),
        },
    )

    # ---- Evaluation and checkpoints, in iterations ----
    eval_every: int | None = field(default=None, metadata={"help": "Evaluate every N iterations (None: never)."})
    save_every: int | None = field(
        default=None,
        metadata={
            "help": "Save a checkpoint every N iterations (None: no checkpoints). Checkpoints keep the Trainer's "
            "optimizer-step numbering: iteration k is checkpoint-(k x steps_per_iteration)."
        },
    )
    log_completions: bool = field(
        default=False,
        metadata={"help": "Write every rollout's prompts, completions and rewards to completions/iteration-N.jsonl."},
    )

    # ---- TrainingArguments defaults that differ for RL ----
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate (GRUE: 1e-6 to 2e-6)."})
    max_grad_norm: float = field(default=0.5, metadata={"help": "Gradient clipping norm (SB3: 0.5)."})
    logging_strategy: str = field(default="steps", metadata={"help": "Log once per iteration (derived)."})
    logging_nan_inf_filter: bool = field(
        default=False, metadata={"help": "Log the real loss (a non-finite one stops the run before the step)."}
    )

    # Ranges (hfrl.trainers.config_checks: checked before torch is imported, and first in __post_init__)
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {
        "num_iterations": {"ge": 1, "cap": MAX_COUNT},
        "rollout_batch_size": {"ge": 1, "cap": MAX_BATCH},
        "num_generations": {"ge": 1, "cap": MAX_BATCH},
        "mini_batch_size": {"ge": 1, "cap": MAX_BATCH},
        "num_ppo_epochs": {"ge": 1, "cap": MAX_COUNT},
        "rollout_tokens": {"ge": 1, "cap": MAX_COUNT, "note": "one completion per prompt"},
        "generation_batch_size": {"ge": 1, "cap": MAX_BATCH},
        "scoring_batch_size": {"ge": 1, "cap": MAX_BATCH},
        "max_abs_reward": {"gt": 0},
        "kl_coef": {"ge": 0},
        "kl_target": {"gt": 0, "note": "fixed beta"},
        "kl_adapt_rate": {"ge": 0},
        "gamma": {"ge": 0, "le": 1},
        "lam": {"ge": 0, "le": 1},
        "vf_coef": {"ge": 0},
        "cliprange": {"gt": 0, "lt": 1},
        "cliprange_low": {"ge": 0, "le": 1},
        "cliprange_high": {"gt": 0},
        "clip_ratio_c": {"gt": 1, "note": "dual-clip bounds -rho A by c x -A"},
        "cliprange_value": {"gt": 0},
        "lam_critic": {"ge": 0, "le": 1},
        "lam_alpha": {"gt": 0},
        "critic_warmup_iterations": {"ge": 0, "cap": MAX_COUNT},
        "critic_epochs": {"ge": 0, "cap": MAX_COUNT},
        "critic_learning_rate": {"gt": 0},
        "critic_learning_rate_ratio": {"gt": 0},
        "positive_lm_coef": {"ge": 0},
        "eval_every": {"ge": 1, "cap": MAX_COUNT},
        "save_every": {"ge": 1, "cap": MAX_COUNT},
        "vllm_server_port": {"ge": 1, "le": 65535},
        "vllm_group_port": {"ge": 1, "le": 65535},
        "vllm_server_timeout": {"gt": 0},
        "vllm_sync_timeout": {"gt": 0},
        "vllm_gpu_memory_utilization": {"gt": 0, "le": 1},
        "vllm_tensor_parallel_size": {"ge": 1},
        "vllm_max_model_length": {"ge": 1},
        "vllm_importance_sampling_clip_max": {"gt": 0, "note": "None: no cap"},
    }
    generate_fields: ClassVar[tuple[str, ...]] = ("generation_kwargs",)  # generate's keyword arguments
    # the registries' names, or your own class's 'module:attr' path: choices of the schema (hfrl.trainers.schema),
    # so that a name no registry holds is refused before torch is imported (resolving it is the last word)
    field_choices: ClassVar[dict[str, tuple[tuple[str, ...], str | None]]] = {
        "advantage_estimator": (tuple(ESTIMATORS), CODE),
        "policy_loss": (tuple(POLICY_LOSSES), CODE),
    }

    def __post_init__(self) -> None:
        check_values(self)  # finite numbers, the ranges above, generate's keyword arguments
        from hfrl.core.estimators import estimator_class
        from hfrl.core.policy_losses import policy_loss_class

        estimator = estimator_class(self.advantage_estimator)  # an unknown name: the registry's one line
        # the rules between fields, written once: hfrl train applies them before torch is imported
        check_online(vars(self), estimator, policy_loss_class(self.policy_loss))
        if self.gamma is None:
            self.gamma = 0.99 if estimator.needs_critic else 1.0
        if self.minibatch_unit not in MINIBATCH_UNITS:
            raise ValueError(f"minibatch_unit must be 'sequences' or 'tokens', got {self.minibatch_unit!r}")
        if self.whiten_scope not in WHITEN_SCOPES:
            raise ValueError(f"whiten_scope must be 'rollout' or 'minibatch', got {self.whiten_scope!r}")
        if self.invalid_rewards not in INVALID_REWARDS:
            raise ValueError(f"invalid_rewards must be 'error' or 'drop', got {self.invalid_rewards!r}")
        self.generation_kwargs = fit_min_new_tokens(self.generation_kwargs or {}, self.max_new_tokens,
                                                    "generation_kwargs", "max_new_tokens")  # fmt: skip
        if self.use_vllm:  # the config's refusals; a seq2seq model's and NLPO's: the trainer's
            from hfrl.trainers.online.vllm_rollout import check_config

            check_config(self)
        self.per_device_train_batch_size = self.mini_batch_size // self.gradient_accumulation_steps
        self.max_steps = self.num_iterations * self.steps_per_iteration
        self.logging_steps = self.steps_per_iteration
        if self.save_every:
            self.save_strategy, self.save_steps = "steps", self.save_every * self.steps_per_iteration
        elif self.save_strategy in ("steps", "epoch"):
            self.save_strategy = "no"
        if self.eval_every:
            self.eval_strategy, self.eval_steps = "steps", self.eval_every * self.steps_per_iteration
        if self.load_best_model_at_end:
            self._check_best_model()
        super().__post_init__()

    def _check_best_model(self) -> None:
        """``load_best_model_at_end`` (transformers): the policy of the best evaluation by
        ``metric_for_best_model`` (default ``eval_reward``) is loaded at the end, so that the saved
        model is it. The best must be on disk: without ``save_every`` a checkpoint is written at each
        evaluation that beats the best so far (``save_strategy`` "best"); with it, every saved
        iteration must be an evaluated one. The metric's name is checked by the trainer, which knows
        the reward functions (:meth:`OnlineTrainer._check_best_metric`)."""
        if _strategy(self.eval_strategy) == "no":
            raise ValueError(
                "load_best_model_at_end keeps the best evaluated policy: set eval_every N (evaluate every N "
                "iterations on the eval set)"
            )
        if self.metric_for_best_model is None:  # transformers' default, "loss", is no evaluation's
            self.metric_for_best_model = "eval_reward"
        if _strategy(self.save_strategy) == "no":
            self.save_strategy = "best"
        elif _strategy(self.save_strategy) == "steps" and self.eval_steps and self.save_steps % self.eval_steps:
            save, every = self.save_steps / self.steps_per_iteration, self.eval_steps / self.steps_per_iteration
            raise ValueError(
                f"load_best_model_at_end: save_every ({save:g} iterations) must "
                f"be a multiple of eval_every ({every:g}), so that every saved "
                "checkpoint was evaluated; or leave save_every unset (a checkpoint at each new best)"
            )

    def loss_settings(self) -> LossSettings:
        """The policy loss's settings (:class:`hfrl.core.policy_losses.base.LossSettings`): a field that is
        set wins, then the policy loss's own default (GSPO's 3e-4 / 4e-4 clip, its per-completion mean),
        then, for the aggregation, the advantage estimator's (Dr. GRPO's constant normaliser), then
        ``cliprange`` and token-mean."""
        from hfrl.core.estimators import estimator_class
        from hfrl.core.policy_losses import policy_loss_class
        from hfrl.core.policy_losses.base import LossSettings

        own = policy_loss_class(self.policy_loss).defaults
        aggregation = (
            self.loss_aggregation
            or own.get("loss_aggregation")
            or estimator_class(self.advantage_estimator).loss_aggregation
            or "token-mean"
        )
        max_tokens = {"max_new_tokens": self.max_new_tokens, **(self.generation_kwargs or {})}["max_new_tokens"]
        return LossSettings(
            cliprange_low=_first(self.cliprange_low, own.get("cliprange_low"), self.cliprange),
            cliprange_high=_first(self.cliprange_high, own.get("cliprange_high"), self.cliprange),
            clip_ratio_c=self.clip_ratio_c,
            loss_aggregation=aggregation,
            max_tokens=int(max_tokens),
        )

    @property
    def rollout_completions(self) -> int:
        """Completions per rollout, per process: ``rollout_batch_size x num_generations``."""
        return self.rollout_batch_size * self.num_generations

    @property
    def steps_per_iteration(self) -> int:
        """Optimizer steps per rollout: (the policy's epochs + the critic's own) x minibatches."""
        return (self.num_ppo_epochs + self.critic_epochs) * (self.rollout_completions // self.mini_batch_size)

    @property
    def micro_steps_per_iteration(self) -> int:
        """Trainer micro-steps (forward/backward calls) per rollout."""
        return self.steps_per_iteration * self.gradient_accumulation_steps


def _first(*values: Any) -> Any:
    """The first of ``values`` that is not None."""
    return next(value for value in values if value is not None)


def _strategy(value: Any) -> str:
    """A TrainingArguments strategy as its string ("no", "steps", ...), before or after its enum conversion."""
    return str(getattr(value, "value", value))
