"""The run's facts reach the trainer as one typed value, set once by the run layer
(hfrl.trainers.run_facts.RunFacts, hfrl.runs.experiment.build_trainer), and hfrl train's closing lines
are read from it (hfrl.runs.train_run)."""

from types import SimpleNamespace

from hfrl.runs.train_run import closing_lines, eval_table_lines
from hfrl.trainers.run_facts import RunFacts


def test_build_trainer_sets_the_runs_facts_once(tmp_path):
    from hfrl.runs.experiment import build_trainer, resolve_run

    run = resolve_run("numbers", "ppo", "tiny", output_dir=str(tmp_path / "run"),
                      overrides={"num_iterations": 1, "report_to": "none"})  # fmt: skip
    trainer = build_trainer(run)
    facts = trainer.run_facts
    assert isinstance(facts, RunFacts) and facts.run_id == run["run_id"] and facts.run_id
    assert facts.definition == {"task": "numbers", "alg": "ppo", "model": "tiny", "rewards": None,
                                "task_args": None, "preset": None}  # fmt: skip
    assert facts.splits == ("train", "validation", "test") and set(facts.dataset) == set(facts.splits)
    assert not facts.reward_model  # PPO scores no held-out pairs
    # nothing else set on the trainer after construction
    assert not any(hasattr(trainer, name) for name in ("run_id", "run_definition", "task_splits", "task_dataset"))


def test_a_python_trainer_holds_the_empty_facts(tiny_causal_dir, make_config):
    from datasets import Dataset

    from hfrl import PPOTrainer
    from hfrl.testing import digit_reward

    trainer = PPOTrainer(model=tiny_causal_dir, args=make_config(), reward_funcs=digit_reward,
                         train_dataset=Dataset.from_dict({"prompt": ["1 2"] * 8}))  # fmt: skip
    assert trainer.run_facts == RunFacts(run_id=None, definition=None, splits=(), dataset=None, reward_model=False)


def _finished(tmp_path, facts):
    """A finished run's trainer, as the closing lines read it: its folder, log history and facts."""
    args = SimpleNamespace(output_dir=str(tmp_path))
    history = [{"reward": 0.25, "iteration": 1}, {"reward": 0.75, "iteration": 2}]
    return SimpleNamespace(args=args, state=SimpleNamespace(log_history=history), run_facts=facts)


def test_the_closing_lines_name_the_tasks_split_from_the_facts(tmp_path):
    trainer = _finished(tmp_path, RunFacts(splits=("train", "validation")))  # no test split: validation
    lines = closing_lines({"task": "numbers", "model": "tiny"}, trainer)
    assert lines[0] == "reward: 0.250 in the first iteration, 0.500 mean of the last 2 iterations"
    assert lines[2] == f"next: hfrl eval {tmp_path} --split validation   (add --base for the model it started from)"


def test_a_reward_models_closing_lines_come_from_the_facts(tmp_path):
    trainer = _finished(tmp_path, RunFacts(splits=("train", "test"), reward_model=True))
    held = "held-out pairs (test, 4): the chosen text scores higher in 75.0% (chance 50%), mean margin 0.500"
    lines = closing_lines({"task": "hh", "model": "tiny"}, trainer, heldout=held)
    assert lines[0] == held  # before the result, as hfrl train printed it
    assert lines[-2:] == [f"next: hfrl train --task hh --alg ppo --reward_model {tmp_path}",
                          f"      hfrl push {tmp_path} --repo-id YOUR_NAME/{tmp_path.name}"]  # fmt: skip


def test_no_eval_table_without_its_files(tmp_path):
    assert eval_table_lines(str(tmp_path), "test") == []
