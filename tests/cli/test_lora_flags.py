"""TRL's ModelConfig flags (``--use_peft``, ``--lora_r``, ...) on the command line, for every family of
algorithm: online (causal and seq2seq), TRL's trainers and offline (in test_alol_hh.py)."""

import dataclasses
import json

import pytest
import yaml

from hfrl.core.model_args import MODEL_KEYS
from hfrl.testing import run_cli

LORA = ["--use_peft", "--lora_r", "4", "--lora_alpha", "8", "--lora_dropout", "0.0"]
QUIET = ["--report_to", "none", "--disable_tqdm", "true"]
ONE_ITERATION = ["--num_iterations", "1", "--rollout_batch_size"]


def test_flags_are_trls_model_config():
    import trl

    assert set(MODEL_KEYS) == {f.name for f in dataclasses.fields(trl.ModelConfig)} - {"model_name_or_path"}


def adapter(out):
    return json.loads((out / "adapter_config.json").read_text())


@pytest.mark.parametrize(
    ("task", "model", "extra", "task_type"),
    [
        ("numbers", "tiny", [*ONE_ITERATION, "8", "--mini_batch_size", "8"], "CAUSAL_LM"),
        ("own", "tiny-t5", [*ONE_ITERATION, "4", "--mini_batch_size", "4"], "SEQ_2_SEQ_LM"),
        ("numbers", "tiny", ["--alg", "grpo", "--max_steps", "1", "--per_device_train_batch_size", "4",
                             "--num_generations", "2", "--max_completion_length", "4", "--save_strategy", "no"],
         "CAUSAL_LM"),
        ("own", "tiny", ["--alg", "sft", "--max_steps", "1", "--per_device_train_batch_size", "2",
                         "--save_strategy", "no"], "CAUSAL_LM"),
    ],
    ids=["ppo", "ppo-seq2seq", "grpo", "sft"],
)  # fmt: skip
def test_lora_from_the_command_line(task, model, extra, task_type, tmp_path, capsys):
    if task == "own":
        rows = [{"prompt": f"count {i}", "references": [f"{i} {i + 1}"]} for i in range(8)]
        task = tmp_path / "own.jsonl"
        task.write_text("".join(json.dumps(r) + "\n" for r in rows))
        extra = [*extra, "--rewards", "[rouge]"]
    out = tmp_path / "run"
    code, _, err = run_cli(
        ["train", "--task", str(task), "--model", model, "-o", str(out), *LORA, *QUIET, *extra], capsys
    )
    assert code == 0, err
    config = adapter(out)  # an adapter was trained and saved, not the full model
    assert (config["r"], config["lora_alpha"], config["task_type"]) == (4, 8, task_type)
    assert not (out / "model.safetensors").exists()
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["use_peft"] is True and saved["lora_r"] == 4  # `hfrl train --config` repeats it


def test_gpt2_lora_knows_its_conv1d_layout(tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["--num_iterations", "1", "--rollout_batch_size", "8", "--mini_batch_size", "8"]
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *LORA, *QUIET, *flags], capsys
    )
    assert code == 0 and adapter(out)["fan_in_fan_out"] is True
    assert "fan_in_fan_out" not in err  # PEFT's warning that it had to fix it


def test_bad_model_flags_fail_clearly(tmp_path, capsys, monkeypatch):
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--model", "tiny", "--lora_rank", "4", "-o", str(tmp_path)], capsys
    )
    assert code == 2 and err.startswith("error: unknown config key (from the command line) 'lora_rank'; did you mean")
    assert "lora_r" in err and "trl.ModelConfig's (LoRA)" in err
    import torch

    from hfrl.core import quantization

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on any machine
    monkeypatch.setattr(quantization.importlib.util, "find_spec", lambda name: None)
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--model", "tiny", "--use_peft", "--load_in_4bit", "true", "-o", str(tmp_path)],
        capsys,
    )
    assert code == 2
    assert err.splitlines()[0] == (
        "error: load_in_4bit (QLoRA) needs a CUDA GPU and bitsandbytes, but no CUDA GPU is visible and "
        "bitsandbytes is not installed: run on a GPU machine with `pip install bitsandbytes`, or set load_in_4bit "
        "false to train in full precision"
    )
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--model", "tiny", "--load_in_4bit", "true", "-o", str(tmp_path / "b")], capsys
    )
    assert code == 2
    assert err.splitlines()[0] == (
        "error: load_in_4bit (QLoRA) trains a LoRA adapter on the quantized base: pass peft_config (--use_peft), "
        "or a PEFT adapter as the model"
    )
