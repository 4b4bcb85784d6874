"""One run per folder from Python too (hfrl.trainers.run_guard): the README's example run twice rewrote
runs/digits without a word, while `hfrl train` refuses. A second run into a folder that holds one stops
with the CLI's words; overwrite_output_dir=True writes over it; resuming in it still works."""

from __future__ import annotations

import hashlib

import pytest
from datasets import Dataset

from hfrl import PPOTrainer
from hfrl.testing import digit_reward

PROMPTS = Dataset.from_dict({"prompt": ["1 2 3", "the year"] * 4})


def snapshot(folder):
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def trainer(tiny_causal_dir, make_config, **overrides):
    args = make_config(**{"num_iterations": 1, "num_ppo_epochs": 1, "max_new_tokens": 4, "save_every": 1, **overrides})
    return PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=PROMPTS)


def test_a_second_run_into_a_folder_is_refused_unless_overwritten_or_resumed(tiny_causal_dir, make_config, tmp_path):
    first = trainer(tiny_causal_dir, make_config)
    first.train()
    first.save_model()
    run = tmp_path / "run"
    before = snapshot(run)
    with pytest.raises(ValueError) as err:
        trainer(tiny_causal_dir, make_config).train()
    assert str(err.value) == (
        f"{run} holds another run (checkpoint-2, model.safetensors, trainer_state.json): "
        "train(resume_from_checkpoint=True) continues it, overwrite_output_dir=True writes over it, or give a new "
        "output_dir"
    )
    assert snapshot(run) == before  # nothing written
    first.train()  # the same trainer again: its own run
    trainer(tiny_causal_dir, make_config, num_iterations=2).train(resume_from_checkpoint=True)  # continues it
    assert (run / "checkpoint-4").is_dir()
    trainer(tiny_causal_dir, make_config, overwrite_output_dir=True).train()  # writes over it
