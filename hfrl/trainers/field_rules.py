"""Rules between config fields, written once and without torch: a config's ``__post_init__`` applies
them to itself (the last word), and ``hfrl train`` to the resolved run before torch is imported
(:func:`hfrl.runs.experiment.resolve_run`), with the same one-line messages.

A rule reads ``values``, a mapping of field -> value (a config's own ``vars``, or the schema's defaults
under the run's fields), and the facts of the classes the fields name: the advantage estimator's and the
policy loss's class attributes (``needs_critic``, ``needs_groups``, ``loss_aggregation``,
``needs_whole_sequences``), from the class itself in ``__post_init__`` and from the schema's cached facts
(:func:`hfrl.trainers.schema.estimator_facts`) before torch. A fact that is not known (your own
``module:attr`` estimator, before it is imported) skips the rules that need it: ``__post_init__`` has them.

    python -m pytest tests/cli/test_early_errors.py
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the settings that train the critic: an estimator without one has no use for them
CRITIC_SETTINGS = (
    "lam_critic", "lam_alpha", "critic_warmup_iterations", "critic_epochs", "critic_learning_rate",
    "critic_learning_rate_ratio", "critic_freeze_attention",
)  # fmt: skip


def _fact(facts: Any, name: str, default: Any = None) -> Any:
    """A class attribute (``facts`` a class) or a cached fact (``facts`` a mapping); ``default`` unknown."""
    if facts is None:
        return default
    return facts.get(name, default) if isinstance(facts, Mapping) else getattr(facts, name, default)


def warmup_problem(warmup: int, iterations: int) -> str | None:
    """The critic's warm-up must leave the policy an iteration: the numbers that work, or None.

    >>> print(warmup_problem(50, 20))
    critic_warmup_iterations (50) leaves the policy no iteration of num_iterations (20): set num_iterations >= 51 ...
    >>> warmup_problem(50, 20).endswith("or critic_warmup_iterations <= 19")
    True
    >>> warmup_problem(3, 20) is None
    True
    """
    if warmup < iterations:
        return None
    return (
        f"critic_warmup_iterations ({warmup}) leaves the policy no iteration of num_iterations ({iterations}): "
        f"set num_iterations >= {warmup + 1} or critic_warmup_iterations <= {max(iterations - 1, 0)}"
    )


def check_estimator(values: Mapping[str, Any], estimator: Any) -> None:
    """What ``advantage_estimator`` needs of the other fields (``estimator``: its class or cached facts)."""
    name, generations = values["advantage_estimator"], values["num_generations"]
    if _fact(estimator, "needs_groups", False) and generations < 2:
        raise ValueError(
            f"advantage_estimator {name} compares the completions of each prompt: set num_generations >= 2 "
            f"(e.g. 4), got {generations}"
        )
    if generations > 1 and values.get("rollout_tokens") is not None:
        raise ValueError(
            "rollout_tokens samples one completion per prompt per round: leave it unset with num_generations > 1"
        )
    batch = values.get("generation_batch_size")
    if batch is not None and batch % generations:
        raise ValueError(
            f"generation_batch_size ({batch}) must be a multiple of num_generations ({generations}): a prompt's "
            "completions are generated together"
        )
    critic = _fact(estimator, "needs_critic")
    if values.get("separate_critic") and critic is False:
        raise ValueError(f"separate_critic: advantage_estimator {name} trains no critic; leave separate_critic off")
    if values.get("kl_in_loss") and values.get("kl_coef") == 0 and values.get("kl_target") is None:
        raise ValueError("kl_in_loss needs a KL coefficient: set kl_coef > 0 (or kl_target)")
    if critic is False:
        given = [key for key in CRITIC_SETTINGS if values.get(key) not in (None, 0, False)]
        if given:
            raise ValueError(
                f"{given[0]} trains the critic, and advantage_estimator {name} has none: use advantage_estimator "
                f"gae, or leave {given[0]} unset"
            )
    problem = warmup_problem(values["critic_warmup_iterations"], values["num_iterations"])
    if problem:
        raise ValueError(problem)
    if values.get("critic_learning_rate") is not None and values.get("critic_learning_rate_ratio") is not None:
        raise ValueError(
            "critic_learning_rate and critic_learning_rate_ratio both set the critic's rate: set one of them (the "
            "ratio multiplies learning_rate)"
        )
    if values.get("critic_freeze_attention") and not values.get("separate_critic"):
        raise ValueError(
            "critic_freeze_attention freezes the critic's own attention: set separate_critic true (a shared "
            "backbone's attention is the policy's)"
        )


def check_policy_loss(values: Mapping[str, Any], loss: Any, estimator: Any) -> None:
    """``policy_loss`` gets the minibatches it needs: whole completions for a term over each completion
    (GSPO's ratio, a per-completion aggregation), whole groups for one over each prompt's completions."""
    name = values["policy_loss"]
    aggregation = (
        values.get("loss_aggregation")
        or (_fact(loss, "defaults") or {}).get("loss_aggregation")
        or _fact(loss, "loss_aggregation")
        or _fact(estimator, "loss_aggregation")
        or "token-mean"
    )
    reads = _fact(loss, "reads")  # None: a loss of your own code, not imported yet (__post_init__ asks it)
    if reads is not None:
        unread = [key for key in ("cliprange_low", "cliprange_high", "clip_ratio_c") if values.get(key) is not None]
        unread = [key for key in unread if key not in reads]
        if unread:
            raise ValueError(
                f"policy_loss {name} does not read {unread[0]} (it reads: {', '.join(reads)}): leave {unread[0]} "
                "unset, or choose a loss that reads it (hfrl list fields --alg ppo says which)"
            )
    whole = _fact(loss, "needs_whole_sequences", False)
    if (whole or aggregation != "token-mean") and values.get("minibatch_unit", "sequences") != "sequences":
        why = f"policy_loss {name}" if whole else f"loss_aggregation {aggregation}"
        raise ValueError(f"{why} takes each completion whole: set minibatch_unit 'sequences'")
    if _fact(loss, "needs_groups", False) and values["num_generations"] < 2:
        raise ValueError(f"policy_loss {name} compares the completions of each prompt: set num_generations >= 2")


def check_batches(values: Mapping[str, Any]) -> None:
    """A rollout splits into whole minibatches, a minibatch into whole accumulation steps, and a rollout's
    completions come from sampling (``generation_kwargs`` without beams)."""
    rollout, generations, mini = values["rollout_batch_size"], values["num_generations"], values["mini_batch_size"]
    if mini is not None and (rollout * generations) % mini:  # None: derived by the config (A2C, TRPO)
        per = f" x num_generations ({generations})" if generations > 1 else ""
        raise ValueError(
            f"rollout_batch_size ({rollout}){per} must be a multiple of mini_batch_size ({mini}); change one of them"
        )
    accumulation = values.get("gradient_accumulation_steps", 1)
    if mini is not None and mini % accumulation:
        raise ValueError(f"mini_batch_size ({mini}) must be a multiple of gradient_accumulation_steps ({accumulation})")
    kwargs = values.get("generation_kwargs") or {}
    for name in ("num_beams", "num_return_sequences"):
        if kwargs.get(name, 1) != 1:
            raise ValueError(
                f"generation_kwargs: {name} must be 1 in rollouts (completions are sampled from the policy), got "
                f"{kwargs[name]}; set num_generations for several completions per prompt"
            )


def check_online(values: Mapping[str, Any], estimator: Any, loss: Any) -> None:
    """Every rule above, in the order ``OnlineConfig.__post_init__`` applies them."""
    check_estimator(values, estimator)
    check_policy_loss(values, loss, estimator)
    check_batches(values)


def check_trl_groups(values: Mapping[str, Any], processes: int = 1) -> None:
    """TRL's GRPO / RLOO: a generation batch holds whole groups of ``num_generations`` completions, as
    ``trl.GRPOConfig.__post_init__`` checks it (after torch; its check stays the last word), said in
    hfrl's words with what to change.

    >>> check_trl_groups({"num_generations": 3, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 4})
    Traceback (most recent call last):
    ValueError: generation_batch_size (32) must be a multiple of num_generations (3): set num_generations to a ...
    """
    generations = values.get("num_generations")
    if not isinstance(generations, int) or generations < 1:
        return  # None: TRL's default; its range is the schema's
    batch = values.get("generation_batch_size")
    if batch is None:
        steps = values.get("steps_per_generation") or values.get("gradient_accumulation_steps") or 1
        batch = values.get("per_device_train_batch_size", 8) * processes * steps
    if batch % generations:
        raise ValueError(
            f"generation_batch_size ({batch}) must be a multiple of num_generations ({generations}): set "
            "num_generations to a divisor of it, or per_device_train_batch_size x gradient_accumulation_steps "
            "(x processes) to a multiple of it"
        )


def reward_columns_problem(columns: Any) -> str | None:
    """What a reward model (TRL's RewardTrainer, ``--alg reward``) needs of its data's ``columns``:
    preference pairs (``chosen``, ``rejected``) or scored texts (``score``), else the line saying so.
    Checked on the dataset (:func:`hfrl.trainers.trl_adapters.reward_pairs`) and, for a task that declares
    its ``columns`` in its YAML, before torch is imported.

    >>> print(reward_columns_problem(["prompt", "references"]))
    a reward model trains on preference pairs: ... (missing ['chosen', 'rejected']; the dataset has: prompt, ...
    """
    names = [str(c) for c in columns]
    missing = sorted({"chosen", "rejected"} - set(names))
    if not missing or "score" in names:
        return None
    return (
        f"a reward model trains on preference pairs: 'chosen' and 'rejected' columns, with or without 'prompt' "
        f"(missing {missing}; the dataset has: {', '.join(names)}), or on scored texts: 'text' and 'score' in "
        "[0, 1]; for a task of hfrl's with pairs, see hfrl list tasks (hh: --task-arg pairs=true)"
    )


def split_problem(task: str, split: str, splits: Any) -> str | None:
    """A split the task has (``splits``: its dataset's), else the line naming them; ``hfrl eval`` checks a
    task's declared ``splits`` before torch is imported, and every task's dataset once built.

    >>> split_problem("numbers", "nope", ["train", "validation", "test"])
    "task 'numbers' has no split 'nope'; its splits: train, validation, test (--split NAME)"
    """
    if split in splits:
        return None
    return f"task {task!r} has no split {split!r}; its splits: {', '.join(splits)} (--split NAME)"


__all__ = [
    "CRITIC_SETTINGS",
    "check_batches",
    "check_estimator",
    "check_online",
    "check_policy_loss",
    "check_trl_groups",
    "reward_columns_problem",
    "split_problem",
    "warmup_problem",
]
