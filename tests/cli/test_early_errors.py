"""Every input error of `hfrl train` and `hfrl eval` is one line, exit code 2, before torch is imported:
choices (the schema's, from the registries and the libraries' names), cross-field rules (the configs'
own, written once in hfrl.trainers.field_rules), a task's declared splits and columns, and "did you mean"
for a mistyped option or list (issues 52.10, 56.7, 56.8).

All cases run in ONE subprocess that calls the CLI's main in-process, one after another (torch, once
imported, stays: a case that imports it shows in its own row and every later one), reading the option
schema that conftest's ``_warm_schema`` cached.

    python -m pytest -q tests/cli/test_early_errors.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hfrl.tasks import TASKS

TRAIN = ["train", "--task", "numbers", "--model", "tiny"]
EVAL = ["eval", "tiny", "--task", "numbers"]
CAP = "(a larger value cannot be meant: check it for a typo)"
OWN = "or a 'module:attr' path to your own"

# (id, command line, the one error line without "error: ")
CASES = [
    ("lr_scheduler_type", [*TRAIN, "--lr_scheduler_type", "bogus"],
     "--lr_scheduler_type takes one of linear, cosine, cosine_with_restarts, polynomial, constant, "
     "constant_with_warmup, inverse_sqrt, reduce_lr_on_plateau, cosine_with_min_lr, cosine_warmup_with_min_lr, "
     "warmup_stable_decay, greedy, got 'bogus'"),
    ("report_to", [*TRAIN, "--report_to", "bogus"],
     "--report_to takes one of none, all, azure_ml, comet_ml, mlflow, neptune, tensorboard, trackio, wandb, "
     "codecarbon, clearml, dagshub, ..., got 'bogus'"),
    ("report_to_list", [*TRAIN, "--report_to", "[tensorboard, wandbb]"],
     "--report_to takes one of none, all, azure_ml, comet_ml, mlflow, neptune, tensorboard, trackio, wandb, "
     "codecarbon, clearml, dagshub, ..., got 'wandbb'; did you mean 'wandb'?"),
    ("threads", [*TRAIN, "--threads", "-1"], "--threads must be >= 1, got -1"),
    ("advantage_estimator", [*TRAIN, "--advantage_estimator", "bogus"],
     f"--advantage_estimator takes one of gae, rloo, group_norm, dr_grpo, reinforce_baseline, reinforce {OWN}, "
     "got 'bogus'"),
    ("policy_loss", [*TRAIN, "--policy_loss", "gpso"],
     f"--policy_loss takes one of ppo_clip, a2c, gspo, cispo, surrogate, dis {OWN}, got 'gpso'; did you mean 'gspo'?"),
    ("attn_implementation", [*TRAIN, "--attn_implementation", "bogus"],
     "--attn_implementation takes one of eager, flash_attention_4, flash_attention_3, flash_attention_2, "
     "flex_attention, sdpa, paged|eager or a Hub kernel (owner/name), got 'bogus'"),
    ("lora_r", [*TRAIN, "--use_peft", "--lora_r", "0"], "--lora_r must be >= 1, got 0"),
    ("lora_dropout", [*TRAIN, "--use_peft", "--lora_dropout", "1.5"], "--lora_dropout must be in [0, 1], got 1.5"),
    ("empty_model", ["train", "--task", "numbers", "--model", ""],
     "command line: model takes a model name or path (text), got ''"),
    ("grpo_groups", [*TRAIN, "--alg", "grpo", "--num_generations", "3"],
     "generation_batch_size (32) must be a multiple of num_generations (3): set num_generations to a divisor of "
     "it, or per_device_train_batch_size x gradient_accumulation_steps (x processes) to a multiple of it"),
    ("rollout_minibatch", [*TRAIN, "--num_generations", "3", "--rollout_batch_size", "5", "--mini_batch_size", "4"],
     "rollout_batch_size (5) x num_generations (3) must be a multiple of mini_batch_size (4); change one of them"),
    ("loss_reads", [*TRAIN, "--policy_loss", "gspo", "--clip_ratio_c", "3"],
     "policy_loss gspo does not read clip_ratio_c (it reads: cliprange, cliprange_low, cliprange_high, "
     "loss_aggregation): leave clip_ratio_c unset, or choose a loss that reads it (hfrl list fields --alg ppo "
     "says which)"),
    ("group_estimator", [*TRAIN, "--advantage_estimator", "rloo"],
     "advantage_estimator rloo compares the completions of each prompt: set num_generations >= 2 (e.g. 4), got 1"),
    ("whole_sequences", [*TRAIN, "--policy_loss", "gspo", "--minibatch_unit", "tokens"],
     "policy_loss gspo takes each completion whole: set minibatch_unit 'sequences'"),
    ("critic_settings", [*TRAIN, "--advantage_estimator", "rloo", "--num_generations", "4", "--lam_critic", "1"],
     "lam_critic trains the critic, and advantage_estimator rloo has none: use advantage_estimator gae, or leave "
     "lam_critic unset"),
    ("warmup", [*TRAIN, "--preset", "vapo", "--num_iterations", "20", "--critic_warmup_iterations", "50"],
     "critic_warmup_iterations (50) leaves the policy no iteration of num_iterations (20): set num_iterations >= 51 "
     "or critic_warmup_iterations <= 19"),
    ("reward_weights", [*TRAIN, "--reward_weights", "[1, 2]"],
     "reward_weights has 2 entries for 1 reward functions: give one weight per reward"),
    ("reward_unpaired", [*TRAIN, "--alg", "reward"],
     "a reward model trains on preference pairs: 'chosen' and 'rejected' columns, with or without 'prompt' "
     "(missing ['chosen', 'rejected']; the dataset has: prompt, references), or on scored texts: 'text' and 'score' "
     "in [0, 1]; for a task of hfrl's with pairs, see hfrl list tasks (hh: --task-arg pairs=true)"),
    ("named_option", [*TRAIN, "--modle", "tiny"],
     "unknown option --modle; did you mean '--model'? (hfrl train --help)"),
    ("named_option_dash", [*TRAIN, "--eval-tset"],
     "unknown option --eval_tset; did you mean '--eval-test'? (hfrl train --help)"),
    ("eval_max_samples", [*EVAL, "--max-samples", "-1"], "--max-samples must be >= 1, got -1"),
    ("eval_split", [*EVAL, "--split", "nope"],
     "task 'numbers' has no split 'nope'; its splits: train, validation, test (--split NAME)"),
    ("eval_task", ["eval", "tiny", "--task", "numbrs"],
     f"unknown task 'numbrs'; did you mean 'numbers'? (known: {', '.join(sorted(TASKS))}), {OWN} task, a data file "
     "(.jsonl, .json, .csv, .tsv, .parquet), a folder of them or a Hub dataset id"),
    ("list", ["list", "algo"],
     "unknown list 'algo'; did you mean 'algs'? (known: algs, fields, metrics, presets, rewards, tasks)"),
]  # fmt: skip

# Runs every case in this process, one after another: exit code, stderr, torch imported yet
RUNNER = """
import contextlib, io, json, sys
from hfrl.cli.app import main
out = []
for argv in json.loads(sys.argv[1]):
    err, code = io.StringIO(), 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code
    out.append({"code": code, "stderr": err.getvalue(), "torch": "torch" in sys.modules})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_causal_dir):
    """``{id: {code, stderr, torch}}``: every case, in one subprocess (the option schema read, not built;
    the built-in tiny model written once, as a user's first command writes it)."""
    folder = tmp_path_factory.mktemp("early")
    commands = [[*argv, "-o", str(folder / name)] if argv[0] == "train" else argv for name, argv, _ in CASES]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(commands)], capture_output=True, text=True,
                          env=env, cwd=folder, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(zip([name for name, _, _ in CASES], json.loads(proc.stdout.splitlines()[-1]), strict=True))


@pytest.mark.parametrize(
    ("name", "message"), [(name, message) for name, _, message in CASES], ids=[c[0] for c in CASES]
)
def test_every_input_error_is_one_line_before_torch(results, name, message):
    result = results[name]
    assert result["code"] == 2, result
    assert result["stderr"].splitlines() == [f"error: {message}", "(set HFRL_DEBUG=1 for the traceback)"]
    assert not result["torch"], f"{name}: torch was imported before the error"


def test_a_preset_warmup_is_fitted_to_a_short_run():
    """--preset vapo's 50 warm-up iterations on a 20-iteration run: half the run, said in one line;
    a warm-up the command line gives is kept (and refused when it leaves the policy nothing: above)."""
    from hfrl.runs.experiment import resolve_run

    run = resolve_run("numbers", "ppo", "tiny", overrides={"preset": "vapo", "num_iterations": 20})
    assert run["critic_warmup_iterations"] == 10
    assert run.notes == (
        "preset vapo: critic_warmup_iterations 50 -> 10, half of num_iterations 20 "
        "(set --critic_warmup_iterations to choose)",
    )
    long = resolve_run("numbers", "ppo", "tiny", overrides={"preset": "vapo"})  # numbers' 500 iterations
    assert long["critic_warmup_iterations"] == 50 and long.notes == ()
    given = resolve_run("numbers", "ppo", "tiny",
                        overrides={"preset": "vapo", "num_iterations": 20, "critic_warmup_iterations": 10})  # fmt: skip
    assert given["critic_warmup_iterations"] == 10 and given.notes == ()


def test_the_config_gives_the_same_line_as_the_command_line(make_config):
    """The rules are written once: the config's __post_init__ (the last word) says what hfrl train says."""
    with pytest.raises(ValueError) as err:
        make_config(num_iterations=20, critic_warmup_iterations=50)
    assert str(err.value) == CASES[[c[0] for c in CASES].index("warmup")][2]
    with pytest.raises(ValueError) as err:
        make_config(num_generations=3, rollout_batch_size=5, mini_batch_size=4)
    assert str(err.value) == CASES[[c[0] for c in CASES].index("rollout_minibatch")][2]
