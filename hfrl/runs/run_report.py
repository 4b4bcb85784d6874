"""What ``hfrl train`` says on the console before and after a run: one line before the progress bar
(algorithm, task, model and its size, how long, the output folder) and, at the end, the result, where
the run is and the commands that evaluate, chat with and push it.

    PPO on numbers: model tiny (0.1M parameters), 500 iterations x 64 completions (32,000 samples) -> runs/numbers-ppo
    ...
    reward: 0.095 in the first iteration, 0.412 mean of the last 10 iterations
    saved to runs/numbers-ppo: the model, config.yaml, the model card README.md, reward_curve.png
    next: hfrl eval runs/numbers-ppo --split test   (add --base for the model it started from)
          hfrl chat runs/numbers-ppo
          hfrl push runs/numbers-ppo --repo-id YOUR_NAME/numbers-ppo
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any


def parameters(count: int) -> str:
    """``0.1M`` / ``135M`` / ``1.2B`` parameters.

    >>> parameters(98_000), parameters(134_515_008), parameters(1_234_000_000)
    ('0.1M', '135M', '1.2B')
    """
    if count >= 1e9:
        return f"{count / 1e9:.1f}B"
    return f"{count / 1e6:.0f}M" if count >= 1e7 else f"{count / 1e6:.1f}M"


def _numel(p: Any) -> int:
    """A parameter's full size: DeepSpeed ZeRO-3 leaves each process an empty shard and records the
    whole in ``ds_numel``."""
    return int(getattr(p, "ds_numel", 0) or p.numel())


def model_size(model: Any) -> str:
    """``0.1M parameters``, or for a model with a PEFT adapter anywhere inside it (the online trainers wrap
    the policy with its value head) ``0.1M parameters, LoRA adapter: 4,096 trained (2.0%)``; ZeRO-3's
    partitioned parameters count whole.

    >>> import torch
    >>> model_size(torch.nn.Linear(1000, 100))
    '0.1M parameters'
    >>> p = torch.nn.Parameter(torch.empty(0)); p.ds_numel = 2_000_000  # a ZeRO-3 shard
    >>> model_size(torch.nn.ParameterList([p]))
    '2.0M parameters'
    """
    params = list(model.parameters())
    total = sum(_numel(p) for p in params)
    text = f"{parameters(total)} parameters"
    peft = next((m for m in model.modules() if hasattr(m, "peft_config")), None)
    if peft is not None:
        kinds = sorted({str(getattr(c, "peft_type", "PEFT")).split(".")[-1] for c in peft.peft_config.values()})
        trained = sum(_numel(p) for p in peft.parameters() if p.requires_grad)
        share = f" ({100 * trained / total:.1f}%)" if total else ""
        text += f", {'/'.join(kinds)} adapter: {trained:,} trained{share}"
    return text


def _world(args: Any) -> int:
    return max(int(getattr(args, "world_size", 1) or 1), 1)


def length_text(trainer: Any) -> str:
    """How long the run goes on and how many samples it sees, in the trainer's own units."""
    args = trainer.args
    world = _world(args)
    if hasattr(args, "num_iterations") and hasattr(args, "rollout_batch_size"):  # hfrl's online trainers
        # a rollout: rollout_batch_size prompts per process, num_generations completions each (what it logs)
        n, size = args.num_iterations, args.rollout_batch_size * int(getattr(args, "num_generations", 1) or 1) * world
        return f"{n:,} iteration{'s' if n != 1 else ''} x {size:,} completions ({n * size:,} samples)"
    batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
    unit = "completions" if hasattr(args, "num_generations") else "examples"
    if args.max_steps and args.max_steps > 0:
        return f"{args.max_steps:,} steps x {batch:,} {unit} ({args.max_steps * batch:,} samples)"
    rows = len(trainer.train_dataset) if trainer.train_dataset is not None else 0
    epochs = args.num_train_epochs
    if unit == "completions":  # TRL's GRPO / RLOO: each prompt num_generations times
        rows *= args.num_generations
    return f"{epochs:g} epoch{'s' if epochs != 1 else ''} over {rows:,} {unit} in batches of {batch:,}"


def start_line(trainer: Any, run: dict[str, Any], earlier: str | None = None, resumed: bool = False) -> str:
    """The line before the progress bar. ``earlier``: the default folder the run did not take
    (it holds another run)."""
    from hfrl.cards.algorithm import algorithm_name

    alg = algorithm_name(str(run.get("alg", "ppo")))
    folder = trainer.args.output_dir
    moved = (
        f" ({earlier} holds an earlier run)"
        if earlier and os.path.normpath(earlier) != os.path.normpath(folder)
        else ""
    )
    verb = "resuming" if resumed else "output folder"
    return (
        f"{alg}{_preset_text(run, trainer.args)} on {run.get('task')}: model {run.get('model')} "
        f"({model_size(trainer.model)}), {length_text(trainer)}; {verb} {folder}{moved}"
    )


def _preset_text(run: dict[str, Any], args: Any) -> str:
    """`` (preset vapo, the first 50 iterations train the critic only)``: what a preset changes that the
    length alone does not say."""
    preset = run.get("preset") or getattr(args, "preset", None)
    if not preset:
        return ""
    warmup = int(getattr(args, "critic_warmup_iterations", 0) or 0)
    said = f", the first {warmup} iterations train the critic only" if warmup else ""
    return f" (preset {preset}{said})"


def result_line(log_history: list[dict[str, Any]]) -> str | None:
    """The reward the run reached (per iteration, or per logging step for TRL's GRPO / RLOO), else its
    training loss; None when nothing was logged.

    >>> result_line([{"reward": 0.1, "iteration": 1}, {"reward": 0.3, "iteration": 2}])
    'reward: 0.100 in the first iteration, 0.200 mean of the last 2 iterations'
    >>> result_line([{"loss": 2.5, "step": 10}, {"loss": 1.25, "step": 20}])
    'loss: 2.500 at step 10, 1.250 at step 20'
    >>> result_line([{"loss": 397.1, "loss/per_token": 4.963, "step": 10}])  # A-LoL: summed over tokens
    'loss per completion token: 4.963 at step 10'
    """
    iterations = [h for h in log_history if "reward" in h and "iteration" in h]
    if iterations:
        last = [h["reward"] for h in iterations[-10:]]
        over = f"the last {len(last)} iterations" if len(last) > 1 else "the last iteration"
        return (
            f"reward: {iterations[0]['reward']:.3f} in the first iteration, {sum(last) / len(last):.3f} mean of {over}"
        )
    steps = [h for h in log_history if "reward" in h and "step" in h]
    if steps:
        last = [h["reward"] for h in steps[-10:]]
        return (
            f"reward: {steps[0]['reward']:.3f} at step {steps[0]['step']}, {sum(last) / len(last):.3f} mean of the "
            f"last {len(last)} logged step{'s' if len(last) > 1 else ''} (step {steps[-1]['step']})"
        )
    losses = [h for h in log_history if "loss" in h and "step" in h]
    if losses:
        # the A-LoL family's loss sums over each completion's tokens ("loss: 397.081" said no scale): its
        # per-token value, named so, where it is logged
        key, name = ("loss/per_token", "loss per completion token") if "loss/per_token" in losses[0] else (
            "loss", "loss")  # fmt: skip
        start, end = losses[0], losses[-1]
        text = f"{name}: {start[key]:.3f} at step {start['step']}"
        return text + (f", {end[key]:.3f} at step {end['step']}" if len(losses) > 1 else "")
    return None


def _generates(folder: str) -> bool:
    """A local model folder whose config names a causal or seq2seq LM (what PPO can start from)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    from transformers.models.auto import modeling_auto as auto

    names: set[str] = set()
    for mapping in (auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES):
        for value in mapping.values():
            names.update([value] if isinstance(value, str) else value)
    return any(a in names for a in config.get("architectures") or [])


def end_lines(
    output_dir: str,
    log_history: list[dict[str, Any]],
    evaluated: bool = False,
    splits: list[str] | None = None,
    own_code: bool = False,
    reward_model_of: tuple[str, str] | None = None,
) -> list[str]:
    """The lines after the run: its result, what was saved where, and the next commands (``splits``:
    the task's, for the evaluation command: test when it has one; ``own_code``: the run's config names
    the user's own code, which ``hfrl eval`` then runs only with ``--trust-code``; ``reward_model_of``:
    ``(task, model)`` of a reward model run, used next as ``--reward_model``, from the same model when
    that is a local folder such as an SFT run)."""
    from hfrl.cards.curve import CURVE_NAME

    path = shlex.quote(str(output_dir))
    saved = ["the model", "config.yaml"]
    if os.path.isfile(os.path.join(output_dir, "README.md")):  # not when the card failed (said above)
        saved.append("the model card README.md")
    if os.path.isfile(os.path.join(output_dir, CURVE_NAME)):
        saved.append(CURVE_NAME)
    lines = [line] if (line := result_line(log_history)) else []
    lines.append(f"saved to {output_dir}: {', '.join(saved)}")
    name = os.path.basename(os.path.normpath(str(output_dir)))
    splits = list(splits or ["test"])
    split = next((s for s in ("test", "validation") if s in splits), splits[0])
    trust = " --trust-code" if own_code else ""
    note = "(--trust-code: it runs your task's or reward's code again; " if own_code else "("
    evaluate = f"hfrl eval {path} --split {split}{trust}   {note}add --base for the model it started from)"
    commands = [] if evaluated else [evaluate]
    if reward_model_of is not None:  # a sequence classifier: nothing to generate with; a reward to train with
        task, start = reward_model_of
        policy = f" --model {shlex.quote(start)}" if _generates(start) else ""  # an SFT run, not an encoder
        commands = [f"hfrl train --task {shlex.quote(task)} --alg ppo{policy} --reward_model {path}"]
        return [*lines, f"next: {commands[0]}", f"      hfrl push {path} --repo-id YOUR_NAME/{name}"]
    commands += [f"hfrl chat {path}{trust}", f"hfrl push {path} --repo-id YOUR_NAME/{name}{trust}"]
    lines.append(f"next: {commands[0]}")
    lines += [f"      {c}" for c in commands[1:]]
    return lines


__all__ = ["end_lines", "length_text", "model_size", "parameters", "result_line", "start_line"]
