"""TRL's trainers on hfrl tasks (``--alg grpo|rloo|sft|dpo``): short runs with the tiny model, TRL's config
classes behind the config keys, the task defaults translated to TRL's names, and clear errors."""

import json
import warnings

import pytest
import yaml

from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES
from hfrl.testing import run_cli

# TRL's default saving (save_strategy "steps"), every step: checkpoints and the end of training
COMMON = ["--model", "tiny", "--max_steps", "2", "--logging_steps", "1", "--report_to", "none",
          "--disable_tqdm", "true", "--save_steps", "1"]  # fmt: skip
ONLINE = ["--per_device_train_batch_size", "4", "--num_generations", "2", "--max_completion_length", "4"]


def train(task, alg, out, capsys, *extra):
    """``hfrl train --task TASK --alg ALG --output-dir OUT`` with the fast settings, then ``extra``."""
    return run_cli(["train", "--task", str(task), "--alg", alg, "--output-dir", str(out), *COMMON, *extra], capsys)


def logs(out):
    state = json.loads((out / "trainer_state.json").read_text())
    return [h for h in state["log_history"] if "loss" in h]


def assert_saved(out, alg):
    """Checkpoints at both steps, the final model loadable, hfrl's card beside it."""
    from hfrl.runs.run_dir import open_run

    assert (out / "checkpoint-1" / "model.safetensors").is_file() and (out / "checkpoint-2").is_dir()
    assert (out / "checkpoint-2" / "checkpoint_complete.json").is_file()  # complete, so --resume may use it
    state = json.loads((out / "trainer_state.json").read_text())
    lines = [json.loads(line) for line in (out / "iterations.jsonl").read_text().splitlines()]
    assert lines == state["log_history"]  # one line per log entry, written as it was logged
    model, tokenizer = open_run(out).load()
    assert model.config.model_type == "gpt2" and tokenizer.pad_token is not None
    assert f"trained with {alg.upper()}" in (out / "README.md").read_text()
    assert (out / "reward_curve.png").read_bytes().startswith(b"\x89PNG")  # the reward (GRPO / RLOO) or the loss


@pytest.mark.parametrize("alg", ["grpo", "rloo"])
def test_online_trl_trainer_on_a_task(alg, tmp_path, capsys, recwarn):
    out = tmp_path / alg
    code, stdout, err = train("numbers", alg, out, capsys, *ONLINE)
    assert code == 0, err
    assert "reward: " in stdout and " at step " in stdout  # per logged step
    # transformers' deprecations of what TRL calls (gradient_checkpointing_*): nothing the user can act on
    assert not [w for w in recwarn if "checkpointing" in str(w.message)], [str(w.message) for w in recwarn]
    steps = logs(out)
    assert len(steps) == 2 and "rewards/increasing_numbers/mean" in steps[0]  # the task's reward, by name
    saved = yaml.safe_load((out / "config.yaml").read_text())
    # the task's shared defaults reach TRL under TRL's names (numbers: 20 new tokens, min_new_tokens 20, top_k 0)
    # min_new_tokens 20 above the 4 tokens asked for: clipped to 4 (transformers would clamp it silently)
    assert saved["max_completion_length"] == 4 and saved["generation_kwargs"] == {"min_new_tokens": 4}
    assert_saved(out, alg)
    card = (out / "README.md").read_text()  # hfrl's card, not TRL's
    assert f"trained with {alg.upper()} on the hfrl task `numbers`" in card
    assert "hfrl train --config config.yaml" in card and "tags:\n- hfrl\n- trl\n- " + alg in card


def test_sft_on_task_references(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    out = tmp_path / "sft"
    code, stdout, err = train("daily_dialog", "sft", out, capsys, "--per_device_train_batch_size", "2")
    assert code == 0, err
    assert "loss: " in stdout and " at step " in stdout and len(logs(out)) == 2
    assert_saved(out, "sft")
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["max_length"] == 148 and saved["learning_rate"] == 1e-5  # 128 + 20 tokens; the task's sft section
    card = (out / "README.md").read_text()
    assert "trained with SFT on the hfrl task `daily_dialog`" in card and "hfrl train --config config.yaml" in card


def test_sft_pairs_and_prompt_preparation(tiny_causal_dir):
    from datasets import Dataset
    from transformers import AutoTokenizer

    from hfrl.trainers.trl_adapters import prepare_prompts, sft_pairs

    pairs = sft_pairs(Dataset.from_dict({"prompt": ["a", "b"], "references": [["x", "y"], []], "id": [1, 2]}))
    assert pairs.to_dict() == {"prompt": ["a", "a"], "completion": ["x", "y"]}
    offline = Dataset.from_dict({"prompt": ["a"], "completion": ["z"], "references": [["x"]]})
    assert sft_pairs(offline).to_dict() == {"prompt": ["a"], "completion": ["z"]}
    with pytest.raises(ValueError, match="every 'references' list of this dataset is empty"):
        sft_pairs(Dataset.from_dict({"prompt": ["a"], "references": [[]]}))
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir)
    prepared = prepare_prompts(Dataset.from_dict({"prompt": ["", "1 2 3 4 5 6 7 8"]}), tokenizer, 3, "left")
    assert prepared["prompt"][0] == tokenizer.bos_token  # generation starts from BOS, as in hfrl's trainers
    assert len(tokenizer(prepared["prompt"][1])["input_ids"]) == 3 and prepared["prompt"][1].endswith("8")


def test_dpo_on_preference_pairs(tmp_path, capsys):
    rows = [{"prompt": f"Count {i}:", "chosen": f" {i + 1} {i + 2}", "rejected": " the the"} for i in range(4)]
    data = tmp_path / "prefs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "dpo"
    code, stdout, err = train(data, "dpo", out, capsys, "--per_device_train_batch_size", "2")
    assert code == 0, err
    assert "loss: " in stdout and " at step " in stdout and len(logs(out)) == 2
    assert_saved(out, "dpo")


def test_clear_errors(tmp_path, capsys, monkeypatch):
    # DPO on a task without preference pairs
    code, _, err = train("numbers", "dpo", tmp_path, capsys)
    assert code == 2 and "error: DPO needs preference pairs: 'prompt', 'chosen' and 'rejected' columns" in err
    # TRL's trainers take causal models
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    code, _, err = train("iwslt2017", "grpo", tmp_path, capsys, "--model", "tiny-t5")
    assert code == 2 and "TRL's GRPOTrainer trains causal language models" in err and "encoder-decoder" in err
    # config keys are TRL's fields
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--alg", "grpo", "--num_generation", "2", "--output-dir", str(tmp_path)], capsys
    )
    assert code == 2 and "unknown config key (from the command line) 'num_generation'; did you mean" in err
    assert "the fields are those of GRPOConfig" in err


def test_list_algs_shows_trl_trainers(capsys):
    import json

    code, out, _ = run_cli(["list", "algs", "--json"], capsys)
    assert code == 0
    rows = {row["name"]: row["description"] for row in json.loads(out)}
    assert {"ppo", "nlpo", "a2c", "trpo", "grpo", "rloo", "sft", "dpo"} <= set(rows)
    assert rows["grpo"] == (
        "TRL's GRPOTrainer (causal models, vLLM on a GPU): group-normalised advantages over several completions."
    )
    assert all("``" not in text and text.endswith(".") for text in rows.values())  # whole sentences, plain text
    code, table, _ = run_cli(["list", "algs"], capsys)  # the table: each name, its sentence wrapped beside it
    assert code == 0 and max(len(line) for line in table.splitlines()) <= 100
    assert {line.split()[0] for line in table.splitlines() if not line.startswith(" ")} == {n.split()[0] for n in rows}


def test_configs_are_trls_with_cpu_defaults(tmp_path):
    import dataclasses

    import torch
    import trl

    from hfrl.trainers.trl_adapters import DPOConfig, GRPOConfig, RewardConfig, RLOOConfig, SFTConfig

    for ours, theirs in ((GRPOConfig, trl.GRPOConfig), (RLOOConfig, trl.RLOOConfig), (SFTConfig, trl.SFTConfig),
                         (DPOConfig, trl.DPOConfig), (RewardConfig, trl.RewardConfig)):  # fmt: skip
        extra = {f.name for f in dataclasses.fields(ours)} - {f.name for f in dataclasses.fields(theirs)}
        assert issubclass(ours, theirs) and extra <= {"max_prompt_length", "truncation_side", "reference_free",
                                                         "overwrite_output_dir"}  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # TRL's default under transformers' current name
            args = ours(output_dir=str(tmp_path), report_to="none")
        assert args.activation_checkpointing is True and args.gradient_checkpointing is True  # TRL's default
        assert ours(output_dir=str(tmp_path), gradient_checkpointing=False).activation_checkpointing is False
        if not torch.cuda.is_available():
            assert args.use_cpu is True and args.bf16 is False
    with pytest.raises(ValueError, match="truncation_side must be 'left' or 'right'"):
        GRPOConfig(output_dir=str(tmp_path), truncation_side="middle")


def test_min_new_tokens_above_the_completion_length_is_clipped_and_said(tmp_path, caplog):
    from hfrl.trainers.trl_adapters import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path), max_completion_length=4, generation_kwargs={"min_new_tokens": 20})
    assert args.generation_kwargs == {"min_new_tokens": 4}
    assert "min_new_tokens 20 (generation_kwargs) is above max_completion_length 4: clipped to 4" in caplog.text
    kept = GRPOConfig(output_dir=str(tmp_path), max_completion_length=30, generation_kwargs={"min_new_tokens": 20})
    assert kept.generation_kwargs == {"min_new_tokens": 20}


def test_translate_task_defaults():
    from hfrl.trainers.trl_adapters import GRPOTrainer, SFTTrainer

    defaults = {"max_new_tokens": 48, "max_prompt_length": 64, "truncation_side": "left", "kl_coef": 0.1,
                "generation_kwargs": {"do_sample": True, "top_k": 50, "min_new_tokens": 48}}  # fmt: skip
    assert GRPOTrainer.translate_task_defaults(defaults) == {
        "max_completion_length": 48, "top_k": 50, "generation_kwargs": {"min_new_tokens": 48},
        "max_prompt_length": 64, "truncation_side": "left",
    }  # fmt: skip
    assert SFTTrainer.translate_task_defaults(defaults) == {"max_length": 112}


def test_task_rewards_and_prompts_in_trls_own_trainer(tmp_path, tiny_causal_dir):
    """The recipe of docs/how-to/from-trl.md: TRL's GRPOTrainer with a task's reward functions and its prompts. The
    `numbers` prompts are empty (generation starts from BOS, as in RL4LMs), which TRL cannot generate
    from: prepare_prompts gives them the tokenizer's BOS text."""
    import trl
    from transformers import AutoTokenizer

    from hfrl.tasks import load_task
    from hfrl.trainers.trl_adapters import prepare_prompts

    task = load_task("numbers")
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir, padding_side="left")
    trainer = trl.GRPOTrainer(
        model=tiny_causal_dir,
        reward_funcs=task.reward_funcs,
        train_dataset=prepare_prompts(task.dataset["train"], tokenizer),
        processing_class=tokenizer,
        args=trl.GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=4, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                            disable_tqdm=True),
    )  # fmt: skip
    trainer.train()
    assert "rewards/increasing_numbers/mean" in trainer.state.log_history[0]
