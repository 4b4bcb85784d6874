"""One run per folder, in Python as on the command line: ``trainer.train()`` into an ``output_dir`` that
holds another run (its ``config.yaml``, trainer state, model or checkpoints: :func:`run_marks`) stops
with the line ``hfrl train`` says (:class:`hfrl.runs.run_folder.RunFolder`), instead of writing the new
run's files over the old one's. The way out is the command line's: resume it
(``train(resume_from_checkpoint=...)``), ``overwrite_output_dir=True`` (a config field: transformers 5
dropped ``TrainingArguments.overwrite_output_dir``), or another folder.

    PPOTrainer(model="tiny", args=PPOConfig(output_dir="runs/digits"), ...).train()   # a second time: refused
    PPOConfig(output_dir="runs/digits", overwrite_output_dir=True)                    # writes over it
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# hfrl.runs.run_config.CONFIG_NAME and transformers' TRAINER_STATE_NAME; the weights of a model or adapter
RUN_FILES = ("config.yaml", "trainer_state.json", "model.safetensors", "adapter_model.safetensors")


def run_marks(path: str | os.PathLike[str]) -> list[str]:
    """What makes ``path`` hold a run: its config.yaml, trainer state, weights or checkpoints."""
    path = Path(path)
    if not path.is_dir():
        return []
    return [p.name for p in sorted(path.iterdir()) if p.name in RUN_FILES or p.name.startswith("checkpoint-")]


def another_run(path: str | os.PathLike[str], marks: list[str], python: bool = False) -> str:
    """The one line for a folder ``path`` that holds another run (``marks``: :func:`run_marks`), with the
    ways out of the command line or, ``python``, of the Python API."""
    listed = ", ".join(marks[:4]) + (", ..." if len(marks) > 4 else "")
    if python:
        ways = "train(resume_from_checkpoint=True) continues it, overwrite_output_dir=True writes over it, "
        ways += "or give a new output_dir"
    else:
        ways = "--resume continues it, --overwrite_output_dir replaces it, or give a new --output-dir"
    return f"{path} holds another run ({listed}): {ways}"


def check_output_dir(output_dir: str | os.PathLike[str], overwrite: bool) -> None:
    """A one-line ``ValueError`` when ``output_dir`` holds another run and ``overwrite`` is off."""
    marks = run_marks(output_dir)
    if marks and not overwrite:
        raise ValueError(another_run(output_dir, marks, python=True))


@dataclass
class OverwriteOutputDir:
    """The config field of the rule, mixed into every hfrl config (before ``TrainingArguments``)."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Train into output_dir even when it holds another run (its files are written over). False: "
            "train() refuses such a folder, as hfrl train does (there: --overwrite_output_dir)."
        },
    )


__all__ = ["RUN_FILES", "OverwriteOutputDir", "another_run", "check_output_dir", "run_marks"]
