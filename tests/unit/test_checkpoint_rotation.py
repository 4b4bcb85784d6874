"""Old checkpoints rotate on every supported transformers: 5.2 and later have ``rotate_checkpoints``; 5.0 and
5.1 (pyproject's floor, run by .ci/floors) only the Trainer's ``_rotate_checkpoints``, and importing the
function there failed every checkpoint (CI at the floors: "cannot import name 'rotate_checkpoints'")."""

import os

import pytest
import torch

from hfrl.trainers.crash_safe import rotate_old_checkpoints


def _checkpoints(run_dir):
    for step in (1, 2, 3):
        os.makedirs(run_dir / f"checkpoint-{step}")
    return str(run_dir)


def _kept(run_dir):
    return sorted(p.name for p in run_dir.iterdir())


def test_rotation_keeps_the_newest_and_the_best_on_the_installed_transformers(tmp_path):
    from transformers import Trainer, TrainingArguments

    run_dir = tmp_path / "run"
    _checkpoints(run_dir)
    trainer = Trainer(model=torch.nn.Linear(2, 2), args=TrainingArguments(str(tmp_path / "out"), report_to=[]))
    trainer.state.best_model_checkpoint = str(run_dir / "checkpoint-1")
    rotate_old_checkpoints(str(run_dir), 1, trainer.state.best_model_checkpoint, trainer)
    # a limit of 1 with a best checkpoint that is not the newest keeps two: the best and the newest
    assert _kept(run_dir) == ["checkpoint-1", "checkpoint-3"]
    assert trainer.args.save_total_limit is None  # the trainer's own setting is left as it was


def test_without_rotate_checkpoints_the_trainer_rotates_with_the_limit_for_the_call(tmp_path, monkeypatch):
    import transformers.trainer_utils

    monkeypatch.delattr(transformers.trainer_utils, "rotate_checkpoints", raising=False)
    seen = []

    class Args:
        save_total_limit = None

    class OldTrainer:  # transformers 5.0's Trainer: the limit from its args, the best from its state
        args = Args()

        def _rotate_checkpoints(self, use_mtime=False, output_dir=None):
            seen.append((self.args.save_total_limit, use_mtime, output_dir))

    trainer = OldTrainer()
    rotate_old_checkpoints("run", 2, None, trainer)
    assert seen == [(2, True, "run")]
    assert trainer.args.save_total_limit is None
    with pytest.raises(ImportError, match="rotate_checkpoints"):
        rotate_old_checkpoints("run", 2, None, None)
