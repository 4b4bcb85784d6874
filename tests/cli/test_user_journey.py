"""What a new user meets, command by command (issue 26): the output folder of a second run, what is
said before anything loads (a path that is not there, a network that is not there, WordNet, a
--report_to package), TRL's trainers as runs like any other (resume, the card's Reproduce command,
the curve, TRL's flag names, one progress bar), and what the console says before and after a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES
from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--generation_kwargs", "{do_sample: true, top_k: 0}", "--disable_tqdm", "true"]  # fmt: skip
TRL_FAST = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--num_generations", "2",
            "--max_completion_length", "4", "--generation_kwargs", "{}", "--disable_tqdm", "true"]  # fmt: skip


def error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines[-1] == "(set HFRL_DEBUG=1 for the traceback)", err
    return lines[-2]


@pytest.fixture
def no_model_loads(monkeypatch):
    """Loading any model fails the test: what must be said before anything loads."""

    def never(*args, **kwargs):
        raise AssertionError("a model was loaded")

    import transformers

    from hfrl.core import models

    monkeypatch.setattr(models, "load_model", never)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", never)


@pytest.fixture
def hub_unreachable(monkeypatch):
    """No network, and HF_HUB_OFFLINE unset: what a user without a connection meets."""
    from huggingface_hub import constants

    from hfrl.utils import hub_access

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(
        hub_access, "hub_reachable", lambda timeout=3.0: (False, "huggingface.co unreachable (gaierror)")
    )


# ---- section 1: the output folder of a second run ------------------------------------------------
def test_a_second_run_gets_the_next_number_and_resume_finds_the_newest(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = []
    for _ in range(2):
        code, out, err = run_cli(["train", "--task", "numbers", "--model", "tiny", *FAST, "--save_every", "1"], capsys)
        assert code == 0, err
        lines.append(out.splitlines()[0])
    assert lines[0].endswith("; output folder runs/numbers-ppo")
    assert lines[1].endswith("; output folder runs/numbers-ppo-2 (runs/numbers-ppo holds an earlier run)")
    assert (tmp_path / "runs/numbers-ppo/config.yaml").is_file() and (
        tmp_path / "runs/numbers-ppo-2/config.yaml"
    ).is_file()
    # --resume without -o: the newest run of runs/numbers-ppo* that has a checkpoint, said with its checkpoint
    code, out, err = run_cli(["train", "--task", "numbers", "--resume", "--num_iterations", "2"], capsys)
    assert code == 0, err
    assert out.startswith("--resume: runs/numbers-ppo-2 holds the newest checkpoint (also resumable: runs/numbers-ppo")
    assert "; resuming runs/numbers-ppo-2" in out
    assert "resuming from runs/numbers-ppo-2/checkpoint-4 (iteration 1, step 4)" in err  # 4 PPO epochs x 1 minibatch
    state = json.loads((tmp_path / "runs/numbers-ppo-2/trainer_state.json").read_text())
    assert state["global_step"] == 8


def test_own_data_folder_is_named_after_the_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"prompt": f"{i} {i + 1}", "references": [f"{i + 2}"]} for i in range(10)]
    (tmp_path / "my.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli(["train", "--task", "my.jsonl", "--model", "tiny", *FAST, "--task-arg", "test_size=2"],
                             capsys)  # fmt: skip
    assert code == 0, err
    assert "output folder runs/my-ppo" in out and "next: hfrl eval runs/my-ppo --split test" in out
    code, out, err = run_cli(["eval", "runs/my-ppo", "--split", "test"], capsys)
    assert code == 0 and "(2 prompts)" in out, err


def test_a_missing_split_of_own_data_says_how(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"prompt": f"{i} {i + 1}", "references": [f"{i + 2}"]} for i in range(4)]
    (tmp_path / "my.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli(["train", "--task", "my.jsonl", "--model", "tiny", *FAST], capsys)
    assert code == 0, err
    assert "next: hfrl eval runs/my-ppo --split train" in out  # the one split there is
    code, _, err = run_cli(["eval", "runs/my-ppo", "--split", "test"], capsys)
    assert code == 2 and error_line(err) == (
        "error: task 'my' has no split 'test'; its splits: train (--split NAME); your own data: give a folder "
        "holding train.jsonl and test.jsonl (or .csv ...), or hold rows out of train when training with "
        "--task-arg test_size=0.1 (a fraction or a row count)"
    )


# ---- section 1: said at once, before anything loads ----------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "runs/doesnotexist"], "error: no run or model at 'runs/doesnotexist': no such folder or file;"),
        (["chat", "runs/doesnotexist", "--message", "hi"], "error: no run or model at 'runs/doesnotexist': no such"),
        (["export", "runs/doesnotexist", "--out", "x"], "error: no run or model at 'runs/doesnotexist': no such"),
        (["train", "--task", "numbers", "--model", "./my-t5"], "error: --model ./my-t5: no such folder or file;"),
        (["train", "--task", "my.csv"], "error: --task my.csv: no such data file or folder"),
    ],
    ids=["eval", "chat", "export", "train-model", "train-data"],
)
def test_a_local_path_that_is_not_there_is_said_at_once(args, message, tmp_path, capsys, monkeypatch, no_model_loads,
                                                        hub_unreachable):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()  # runs/doesnotexist beside a runs/ folder: a path, not a Hub id
    code, _, err = run_cli(args, capsys)
    assert code == 2 and error_line(err).startswith(message), err


def test_without_a_network_the_run_names_the_asset_and_the_offline_way(tmp_path, capsys, monkeypatch, no_model_loads,
                                                                       hub_unreachable):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    code, _, err = run_cli(["train", "--task", "hh", "--alg", "a_lol"], capsys)
    assert code == 1 and error_line(err).startswith(
        "error: cannot start: dataset Anthropic/hh-rlhf@09be8c5 is not cached and the Hub cannot be reached: download "
        "it where it can, or point HFRL_DATA_DIR (or --task-arg data_dir) at a copy (and 1 more); `hfrl check --task "
        "hh --alg a_lol --model timdettmers/qlora-hh-rlhf-7b` lists what the run needs"
    )
    (tmp_path / "my.csv").write_text("prompt,references\n1 2,3\n")
    code, _, err = run_cli(["train", "--task", "my.csv"], capsys)  # own data, the task's default model
    assert code == 1 and error_line(err).startswith(
        "error: cannot start: model openai-community/gpt2@607a30d is not cached and the Hub cannot be reached: "
        "download it where it can (`hf download openai-community/gpt2`), or pass a local folder"
    )
    code, _, err = run_cli(["eval", "someone/model", "--task", "numbers"], capsys)
    assert code == 1 and error_line(err).startswith(
        "error: model someone/model is not in the Hugging Face cache and the Hub cannot be reached"
    )
    assert not (tmp_path / "runs").exists()  # nothing written


def test_the_http_clients_own_error_is_one_line(monkeypatch, capsys):
    """A network error that reaches the CLI unconverted (httpx's are no OSError) is one line, exit 1."""
    from hfrl.cli import list_cmd

    connect_error = type("ConnectError", (Exception,), {"__module__": "httpx"})  # the HTTP client's class

    def offline(what):
        raise connect_error("[Errno -2] Name or service not known")

    monkeypatch.setattr(list_cmd, "_rows", offline)
    code, _, err = run_cli(["list", "algs"], capsys)
    assert code == 1 and error_line(err).startswith(
        "error: cannot reach the Hugging Face Hub (ConnectError: [Errno -2] Name or service not known); offline, "
        "set HF_HUB_OFFLINE=1"
    )


def test_wordnet_is_checked_before_the_model_loads(tmp_path, capsys, monkeypatch, no_model_loads):
    from hfrl.metrics import wordnet

    monkeypatch.setattr(wordnet, "DEBIAN_WORDNET", str(tmp_path / "no-wordnet"))
    monkeypatch.setattr(wordnet, "_nltk_wordnet", lambda: None)
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    args = ["train", "--task", "daily_dialog", "--model", "tiny", "--task-arg", "reward_config=offline", "-o",
            str(tmp_path / "run")]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 1 and error_line(err).startswith(
        "error: cannot start: WordNet (METEOR) is missing: python -m nltk.downloader wordnet, or apt-get install "
        "wordnet-base wordnet-sense-index; `hfrl check --task daily_dialog --alg ppo --model tiny "
        "--task-arg=reward_config=offline` lists what the run needs"
    )
    assert not (tmp_path / "run").exists()


def test_report_to_without_its_package_says_what_to_install(tmp_path, capsys, monkeypatch, no_model_loads):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("tensorboard", "tensorboardX") else real(name, *a),
    )
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--report_to", "tensorboard", "-o",
                            str(tmp_path / "run")], capsys)  # fmt: skip
    assert code == 1 and error_line(err).startswith(
        "error: cannot start: --report_to tensorboard needs the tensorboard package: pip install tensorboard "
        "(or --report_to none)"
    )


# ---- section 2: TRL's trainers are runs like any other -------------------------------------------
@pytest.mark.parametrize("alg", ["grpo", "rloo"])
def test_trl_run_resumes_and_the_cards_reproduce_command_runs(alg, tmp_path, capsys):
    out = tmp_path / alg
    code, _, err = run_cli(["train", "--task", "numbers", "--alg", alg, "--model", "tiny", "-o", str(out), *TRL_FAST,
                            "--save_steps", "1"], capsys)  # fmt: skip
    assert code == 0, err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["steps_per_generation"] is None and saved["generation_batch_size"] is None  # as given: derived
    code, out_text, err = run_cli(["train", "--task", "numbers", "--alg", alg, "-o", str(out), "--resume",
                                   "--max_steps", "3"], capsys)  # fmt: skip
    assert code == 0, err
    assert f"resuming from {out}/checkpoint-2 (step 2)" in err
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 3
    card = (out / "README.md").read_text()
    assert "hfrl train --config config.yaml --output-dir runs/reproduced" in card
    code, _, err = run_cli(["train", "--config", str(out / "config.yaml"), "--output-dir", str(tmp_path / "again"),
                            "--max_steps", "1"], capsys)  # fmt: skip
    assert code == 0, err


def test_trl_flag_names(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run_cli(["train", "--model_name_or_path", "tiny", "--dataset_name", "numbers", "--alg", "grpo",
                            "-o", str(out), *TRL_FAST], capsys)  # fmt: skip
    assert code == 0, err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["task"], saved["model"]) == ("numbers", "tiny")
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--model_name_or_path", "tiny-t5"], capsys)
    assert code == 2 and error_line(err) == (
        "error: --model_name_or_path is TRL's name for --model: give one of them ('tiny' or 'tiny-t5')"
    )


def test_trl_runs_show_one_bar_not_log_dicts(tmp_path, capsys):
    args = ["train", "--task", "numbers", "--alg", "grpo", "--model", "tiny", "-o", str(tmp_path / "run"), *TRL_FAST,
            "--disable_tqdm", "false", "--logging_steps", "1"]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "{'loss'" not in out + err and "'train_runtime'" not in out + err  # no raw log dict
    assert "steps: 100%" in err and "reward=" in err


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["grpo", "rloo"])
def test_the_task_settings_of_trl_trainers_learn_on_numbers(alg, tmp_path, capsys):
    """numbers ships grpo and rloo settings (`hfrl list tasks`) that learn with the built-in tiny model:
    the mean reward of the last logged steps clears the first logged step's by a margin."""
    out = tmp_path / alg
    args = ["train", "--task", "numbers", "--alg", alg, "--model", "tiny", "-o", str(out), "--max_steps", "200",
            "--logging_steps", "10", "--disable_tqdm", "true"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    rewards = [
        h["reward"] for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "reward" in h
    ]
    first, last = rewards[0], sum(rewards[-3:]) / 3
    assert last > first + 0.03, rewards


# ---- section 3: what a person expects to see -----------------------------------------------------
def test_the_lines_before_and_after_a_run(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST,
                                 "--eval-test"], capsys)  # fmt: skip
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[0] == (
        f"PPO on numbers: model tiny (0.2M parameters), 1 iteration x 4 completions (4 samples); output folder {out}"
    )
    table = lines.index("numbers / test (64 prompts), before and after training:")
    assert lines[table + 1].split() == ["metric", "before", "after", "change"]
    assert lines[-4].startswith("reward: ") and lines[-3] == (
        f"saved to {out}: the model, config.yaml, the model card README.md, reward_curve.png"
    )
    assert lines[-2:] == [f"next: hfrl chat {out}", f"      hfrl push {out} --repo-id YOUR_NAME/run"]


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_upstream_noise_stays_off_the_console(tmp_path):
    """The built-in seq2seq model, LoRA and NLPO, run as a user runs them (a subprocess, the bar on):
    none of transformers' loading / saving bars, tiny-t5's PAD/BOS/EOS note, the checkpointing
    deprecation PEFT triggers, NLPO's past_key_values warning, or a cursor-up residue."""
    runs = {
        "t5": ["--model", "tiny-t5"],
        "lora": ["--model", "tiny", "--use_peft", "--lora_r", "4"],
        "nlpo": ["--model", "tiny", "--alg", "nlpo"],
    }
    for name, extra in runs.items():
        proc = subprocess.run(
            [sys.executable, "-m", "hfrl.cli", "train", "--task", "numbers", "-o", str(tmp_path / name), *extra,
             *FAST[:-2], "--save_every", "1", "--num_ppo_epochs", "1"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "default"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        for noise in ("Loading weights", "Writing model shards", "PAD/BOS/EOS", "is_gradient_checkpointing",
                      "past_key_values", "\x1b[A", "Warning"):  # fmt: skip
            assert noise not in proc.stderr, (name, noise, proc.stderr)
        assert "iterations: 100%" in proc.stderr  # the one bar


def console_of(command: list[str]) -> list[str]:
    """The lines a terminal shows for ``hfrl COMMAND``: stdout and stderr as written, unbuffered."""
    proc = subprocess.run([sys.executable, "-m", "hfrl.cli", *command], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    return proc.stdout.splitlines()


def test_the_first_line_of_a_run_is_hfrls_start_line(tmp_path):
    """Not DeepSpeed's "Setting accelerator to CPU" note (deepspeed, in the dev extra, is imported by
    accelerate in every Trainer; hfrl.utils.quiet), nor anything else before hfrl's own line."""
    out = tmp_path / "run"
    lines = console_of(["train", "--task", "numbers", "--alg", "ppo", "--model", "tiny", "--num_iterations", "1",
                        "--rollout_batch_size", "8", "--mini_batch_size", "8", "-o", str(out)])  # fmt: skip
    assert lines[0] == (
        f"PPO on numbers: model tiny (0.2M parameters), 1 iteration x 8 completions (8 samples); output folder {out}"
    ), lines[:3]
    assert not any("Setting accelerator to CPU" in line for line in lines)


def test_a_min_new_tokens_above_max_new_tokens_is_clipped_in_one_line(tmp_path):
    """numbers' min_new_tokens 20 under --max_new_tokens 8: one hfrl line before the run, and none of
    generate's two "Unfeasible length constraints" warnings a rollout."""
    out = tmp_path / "run"
    lines = console_of(["train", "--task", "numbers", "--model", "tiny", "--num_iterations", "2", "--max_new_tokens",
                        "8", "--rollout_batch_size", "8", "--mini_batch_size", "8", "-o", str(out)])  # fmt: skip
    note = "min_new_tokens 20 (generation_kwargs) is above max_new_tokens 8: clipped to 8"
    assert lines[0] == note and lines.count(note) == 1, lines[:3]
    assert lines[1].startswith("PPO on numbers: model tiny")
    assert not any("Unfeasible" in line for line in lines)
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["generation_kwargs"]["min_new_tokens"] == 8  # what the run used


# ---- small items ---------------------------------------------------------------------------------
def test_python_api_card_names_the_base_model_and_its_licence(tmp_path):
    from datasets import Dataset
    from huggingface_hub import ModelCard

    from hfrl import PPOConfig, PPOTrainer
    from hfrl.testing import digit_reward

    args = PPOConfig(output_dir=str(tmp_path / "run"), num_iterations=1, rollout_batch_size=4, mini_batch_size=4,
                     max_new_tokens=4, disable_tqdm=True)  # fmt: skip
    trainer = PPOTrainer(model="tiny", args=args, reward_funcs=digit_reward,
                         train_dataset=Dataset.from_dict({"prompt": ["1 2"] * 4}))  # fmt: skip
    trainer.train()
    trainer.save_model()
    card = ModelCard.load(tmp_path / "run" / "README.md")
    assert card.data.license == "apache-2.0"
    assert "A fine-tuned version of hfrl's built-in `tiny` model, trained with PPO" in card.text


def test_exports_carry_the_card_and_the_alol_card_names_its_algorithm(tmp_path, capsys, monkeypatch):
    """An adapter export and a merged one carry the card; the A-LoL family's card names the run's own
    algorithm and its loss; the curve of a run that logs a loss (A-LoL) is drawn."""
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    lora = tmp_path / "lora"
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--use_peft", "--lora_r", "4", "-o",
                            str(lora), *FAST], capsys)  # fmt: skip
    assert code == 0, err
    for flags, name in (([], "adapter"), (["--merge"], "merged")):
        code, _, err = run_cli(["export", str(lora), "--out", str(tmp_path / name), *flags], capsys)
        assert code == 0, err
        assert "trained with PPO on the hfrl task `numbers`" in (tmp_path / name / "README.md").read_text()
    alol = tmp_path / "alol"
    code, _, err = run_cli(["train", "--task", "hh", "--alg", "a_lol_seq", "--model", "tiny", "--task-arg",
                            "reward_config=offline", "-o", str(alol), "--max_steps", "2", "--logging_steps", "1",
                            "--preparation_cache_dir", str(tmp_path / "cache"), "--disable_tqdm", "true"],
                           capsys)  # fmt: skip
    assert code == 0, err
    card = (alol / "README.md").read_text()
    assert "trained with A-LoL seq on the hfrl task `hh`" in card and "args.algorithm" not in card
    assert "the loss: A-LoL with a clamped importance weight per token." in card
    assert "### Training curve" in card and (alol / "reward_curve.png").is_file()
