"""The RLHF pipeline in one tool: ``--alg reward`` (TRL's RewardTrainer) fits a reward model on preference
pairs (a task's or the user's own), says its held-out pair accuracy and writes it into the card; ``--reward_model
RUN`` rewards an online run with it, and that run's card names the lineage (base -> SFT -> RM -> PPO)."""

import json

import pytest
import torch
import yaml
from safetensors.torch import load_file

from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES
from hfrl.testing import run_cli

FAST_RM = ["--max_steps", "40", "--learning_rate", "1e-3", "--per_device_train_batch_size", "4",
           "--gradient_accumulation_steps", "1", "--warmup_steps", "0", "--logging_steps", "10", "--report_to", "none",
           "--disable_tqdm", "true", "--save_strategy", "no"]  # fmt: skip
FAST_PPO = [
    "--num_iterations",
    "2",
    "--rollout_batch_size",
    "4",
    "--mini_batch_size",
    "2",
    "--num_ppo_epochs",
    "1",
    "--max_new_tokens",
    "6",
    "--eval_every",
    "null",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
]


@pytest.fixture
def hh_fixtures(monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))


def heldout(out, split="test"):
    return json.loads((out / "eval" / f"{split}.json").read_text())["metrics"]


def test_reward_model_on_hh_pairs_then_ppo_with_it_names_the_lineage(hh_fixtures, tmp_path, capsys):
    sft, rm, ppo = tmp_path / "sft", tmp_path / "rm", tmp_path / "ppo"
    common = ["--task", "hh", "--task-arg", "pairs=true"]
    quiet = ["--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no"]
    code, _, err = run_cli(["train", *common, "--alg", "sft", "--model", "tiny", "-o", str(sft), "--max_steps", "2",
                            *quiet], capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(
        ["train", *common, "--alg", "reward", "--model", str(sft), "-o", str(rm), *FAST_RM], capsys
    )
    assert code == 0, err
    # 7 held-out pairs: above chance by a margin (1.0 measured; 5 of 7 is the bar)
    metrics = heldout(rm)
    assert metrics["pair_accuracy"] >= 5 / 7 and metrics["margin"] > 0
    assert "held-out pairs (test, 7): the chosen text scores higher in" in out
    assert f"next: hfrl train --task hh --alg ppo --model {sft} --reward_model {rm}" in out
    card = (rm / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card and "type: pair_accuracy" in card
    assert (
        "A reward model (one score per text: higher is preferred)" in card
        and "AutoModelForSequenceClassification" in card
    )
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(rm)
    assert config.architectures == ["GPT2ForSequenceClassification"] and config.num_labels == 1

    code, out, err = run_cli(["train", "--task", "hh", "--alg", "ppo", "--model", str(sft), "--reward_model", str(rm),
                              "-o", str(ppo), *FAST_PPO], capsys)  # fmt: skip
    assert code == 0, err
    saved = yaml.safe_load((ppo / "config.yaml").read_text())
    assert saved["rewards"] == [{"id": "reward_model", "args": {"model": str(rm)}}]  # in place of the task's
    logged = [h for h in json.loads((ppo / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logged) == 2 and all("rewards/reward_model" in h for h in logged)
    summary = next(line for line in (ppo / "README.md").read_text().splitlines() if line.startswith("A fine-tuned"))
    assert f"hfrl run `{sft}`, SFT on the task `hh`" in summary  # base -> SFT
    assert f"rewarded by the reward model hfrl run `{rm}` (Reward on the task `hh`, from {sft}" in summary  # -> RM


def test_reward_model_scores_as_trl_trained_it(hh_fixtures, tmp_path, capsys):
    """The reward_model reward reads prompt + completion + EOS, as TRL's RewardTrainer tokenizes a pair."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hfrl.rewards import load_reward

    rm = tmp_path / "rm"
    code, _, err = run_cli(["train", "--task", "hh", "--task-arg", "pairs=true", "--alg", "reward", "--model", "tiny",
                            "-o", str(rm), "--max_steps", "4", *FAST_RM[2:]], capsys)  # fmt: skip
    assert code == 0, err
    tokenizer = AutoTokenizer.from_pretrained(rm)
    model = AutoModelForSequenceClassification.from_pretrained(rm).eval()
    prompt, completion = "\n\nHuman: Hi?\n\nAssistant:", " Hello, how can I help?"
    with torch.no_grad():
        expected = model(**tokenizer(prompt + completion + tokenizer.eos_token, return_tensors="pt")).logits[0, 0]
    got = load_reward({"id": "reward_model", "args": {"model": str(rm)}})(prompts=[prompt], completions=[completion])
    assert got == pytest.approx([expected.item()], abs=1e-5)


def test_reward_model_on_own_jsonl_pairs(tmp_path, capsys):
    """A user's own pairs: prompt, chosen, rejected in JSONL files (train and test); the chosen replies
    carry digits, the rejected ones none: a pattern the tiny model learns."""
    data = tmp_path / "pairs"
    data.mkdir()
    for split, n, offset in (("train", 48, 0), ("test", 16, 100)):
        rows = [{"prompt": f"Question {i + offset}:", "chosen": f" {i + offset} {i + offset + 1} {i * 7 % 10}",
                 "rejected": " " + "abcdefghij"[i % 10] * (1 + i % 3)} for i in range(n)]  # fmt: skip
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rm"
    code, stdout, err = run_cli(["train", "--task", str(data), "--alg", "reward", "--model", "tiny", "-o", str(out),
                                 *FAST_RM], capsys)  # fmt: skip
    assert code == 0, err
    assert heldout(out)["pair_accuracy"] >= 0.75  # 16 held-out pairs, chance 0.5 (1.0 measured)


def test_reward_model_run_resumes_exactly(hh_fixtures, tmp_path, capsys):
    args = ["train", "--task", "hh", "--task-arg", "pairs=true", "--alg", "reward", "--model", "tiny",
            "--learning_rate", "1e-3", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
            "--warmup_steps", "0", "--lr_scheduler_type", "constant", "--report_to", "none", "--disable_tqdm", "true",
            "--save_steps", "3"]  # fmt: skip
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert run_cli([*args, "-o", str(whole), "--max_steps", "6"], capsys)[0] == 0
    assert run_cli([*args, "-o", str(parts), "--max_steps", "3"], capsys)[0] == 0
    code, _, err = run_cli([*args, "-o", str(parts), "--max_steps", "6", "--resume"], capsys)
    assert code == 0, err
    a, b = load_file(whole / "model.safetensors"), load_file(parts / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_reward_model_errors_are_one_line(tmp_path, capsys):
    code, _, err = run_cli(["train", "--task", "numbers", "--alg", "reward", "--model", "tiny", "-o",
                            str(tmp_path / "x"), "--max_steps", "1"], capsys)  # fmt: skip
    assert code != 0 and "a reward model trains on preference pairs: 'chosen' and 'rejected' columns" in err
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--reward_model", "", "-o",
                            str(tmp_path / "y")], capsys)  # fmt: skip
    assert code != 0 and "--reward_model takes a reward model" in err
