"""What the run layer knows of a run and tells its trainer, once: one typed value.

``hfrl train`` builds the trainer (:func:`hfrl.runs.experiment.build_trainer`) and then sets its
``run_facts``; the trainer records the id and the definition in every checkpoint it writes
(:mod:`hfrl.trainers.checkpoints`), and the run layer reads the rest back after training (the closing
lines' splits, a reward model's held-out pairs: :mod:`hfrl.runs.train_run`). A trainer built in Python
holds the empty one: no id, no definition.

    python -m pytest tests/cli/test_run_facts.py
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunFacts:
    """A run's facts, as its trainer holds them.

    >>> RunFacts().run_id, RunFacts(splits=("train", "test")).splits
    (None, ('train', 'test'))
    """

    run_id: str | None = None  # the run's id (config.yaml's), recorded in each checkpoint, checked on resume
    definition: dict[str, Any] | None = None  # what defines it on the command line (checkpoints.RUN_DEFINITION)
    splits: tuple[str, ...] = ()  # the task's splits: what `hfrl eval RUN --split` can name
    dataset: Any = None  # the task's splits themselves ({name: Dataset}): a reward model's held-out pairs
    reward_model: bool = False  # the trainer fits a reward model (it scores held-out pairs: pair_accuracy)


__all__ = ["RunFacts"]
