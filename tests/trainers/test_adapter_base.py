"""A bare PEFT adapter as the starting model, on a base model named separately (hh's default policy:
``timdettmers/qlora-hh-rlhf-7b`` holds adapter files only and records a private path as its base;
LoL-RL loads it onto ``huggyllama/llama-7b``). Here: a tiny adapter folder (adapter files only, its
recorded base pointing nowhere) and the tiny model given as the base, through ``load_model``, an
online trainer (PPO) and A-LoL; the task default and the CLI flag."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl.testing import digit_reward

NOWHERE = "/nonexistent/cluster/checkpoints/llama-7b"  # what the published adapter records, in spirit


@pytest.fixture(scope="module")
def bare_adapter(tmp_path_factory, tiny_causal_dir):
    """A LoRA adapter on the tiny model with a non-zero update (so that base and adapter differ),
    saved as adapter files only, its recorded base a path that does not exist."""
    from peft import LoraConfig, get_peft_model

    from hfrl.core.models import load_model

    torch.manual_seed(0)
    lora = LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM")
    lm = get_peft_model(load_model(tiny_causal_dir), lora)
    with torch.no_grad():
        for name, param in lm.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    out = tmp_path_factory.mktemp("bare-adapter")
    lm.save_pretrained(out)
    config = json.loads((out / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = NOWHERE
    (out / "adapter_config.json").write_text(json.dumps(config))
    (out / "README.md").unlink(missing_ok=True)
    assert sorted(os.listdir(out)) == ["adapter_config.json", "adapter_model.safetensors"]
    return str(out)


def logits(lm, ids):
    with torch.no_grad():
        return lm(input_ids=ids).logits


IDS = torch.tensor([[3, 17, 42, 8, 99]])


def test_load_model_puts_the_adapter_on_the_named_base(bare_adapter, tiny_causal_dir):
    from peft import PeftModel

    from hfrl.core.models import load_model, load_tokenizer, load_tokenizer_for

    with pytest.raises(ValueError) as err:
        load_model(bare_adapter)  # today's failure, now a clear one: the recorded base is nowhere
    assert str(err.value) == (
        f"cannot load the base model '{NOWHERE}' (the base its adapter_config.json records) of the PEFT adapter "
        f"{bare_adapter}: pass base_model (--base-model NAME) with its Hub id or local path"
    )
    lm = load_model(bare_adapter, base_model=tiny_causal_dir)
    assert isinstance(lm, PeftModel) and not any(p.requires_grad for p in lm.parameters())
    base = load_model(tiny_causal_dir)
    reference = PeftModel.from_pretrained(load_model(tiny_causal_dir), bare_adapter)  # PEFT's own way
    assert torch.equal(logits(lm, IDS), logits(reference, IDS))
    assert not torch.allclose(logits(lm, IDS), logits(base, IDS))  # the adapter is applied
    # the tokenizer: the adapter ships none, so the base's
    assert load_tokenizer_for(bare_adapter, lm).get_vocab() == load_tokenizer(tiny_causal_dir).get_vocab()
    with pytest.raises(ValueError) as err:
        load_model(tiny_causal_dir, base_model=tiny_causal_dir)
    assert str(err.value) == (
        f"base_model ({tiny_causal_dir}) is the base of a PEFT adapter, but {tiny_causal_dir} is a full model (it has "
        "no adapter_config.json): drop base_model, or give the adapter as the model"
    )


def test_an_adapter_with_its_own_tokenizer_keeps_it(bare_adapter, tiny_causal_dir, tmp_path):
    import shutil

    from hfrl.core.models import load_model, load_tokenizer, load_tokenizer_for

    folder = tmp_path / "with-tokenizer"
    shutil.copytree(bare_adapter, folder)
    tokenizer = load_tokenizer(tiny_causal_dir)
    tokenizer.add_tokens(["<|only-in-the-adapter|>"])
    tokenizer.save_pretrained(folder)
    lm = load_model(str(folder), base_model=tiny_causal_dir)
    assert "<|only-in-the-adapter|>" in load_tokenizer_for(str(folder), lm).get_vocab()


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


def test_ppo_trains_the_adapter_and_its_reference_is_the_starting_adapter(bare_adapter, tiny_causal_dir, make_config):
    """The adapter is trained further; pi_ref is base + the starting adapter (frozen), not the bare base:
    the first iteration's KL is 0, as for any run whose first rollout's policy is its reference."""
    from hfrl import PPOTrainer
    from hfrl.core.policies import REFERENCE_ADAPTER

    args = make_config(base_model=tiny_causal_dir, kl_coef=0.05, kl_target=0.1, learning_rate=1e-2)
    trainer = PPOTrainer(model=bare_adapter, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    policy = trainer.model.policy
    trained = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    assert trained and all(".default." in n for n in trained)  # the starting adapter is what trains
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if f".{REFERENCE_ADAPTER}." in n}
    assert frozen and all(
        torch.equal(frozen[n.replace(".default.", f".{REFERENCE_ADAPTER}.")], p) for n, p in trained.items()
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    # the policy's log-probs come from generation's cached forward, the reference's from a full one: they
    # agree to 1e-5 a token (test_fast_paths), as in test_ppo_trainer's first KL
    assert logs[0]["kl"] == pytest.approx(0.0, abs=1e-5)  # the bare base as reference would give > 0
    for name, param in policy.named_parameters():
        if name in trained:
            assert not torch.equal(param, trained[name]), f"{name} did not change"
            assert param.requires_grad
        if name in frozen:
            assert torch.equal(param, frozen[name]) and not param.requires_grad, f"{name} changed"
    trainer.save_model()
    out = trainer.args.output_dir
    assert os.path.isfile(os.path.join(out, "adapter_model.safetensors"))
    assert not os.path.exists(os.path.join(out, REFERENCE_ADAPTER))  # only the trained adapter is saved
    saved = json.loads(Path(out, "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == tiny_causal_dir  # the base it was trained on, not the private path
    from hfrl.runs.run_dir import open_run

    lm, _ = open_run(out).load()  # hfrl eval / chat / export find the base without --base-model
    assert torch.allclose(logits(lm, IDS), logits(trainer.model.policy.eval(), IDS), atol=1e-6)


def test_alol_trains_the_adapter_on_the_named_base(bare_adapter, tiny_causal_dir, tmp_path):
    from hfrl import ALoLConfig, ALoLTrainer

    data = Dataset.from_dict({"prompt": ["1", "2", "3", "4"] * 4, "completion": [" 2 3 4", " the end"] * 8})
    args = ALoLConfig(
        output_dir=str(tmp_path / "run"),
        preparation_cache_dir=str(tmp_path / "cache"),
        algorithm="a_lol",
        base_model=tiny_causal_dir,
        per_device_train_batch_size=4,
        max_steps=2,
        max_new_tokens=4,
        value_epochs=1,
        learning_rate=1e-2,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = ALoLTrainer(
        model=bare_adapter, args=args, reward_funcs=digit_reward, train_dataset=data, eval_dataset=data.select(range(4))
    )
    policy = trainer.model
    before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    assert before and all("lora_" in n for n in before)
    trainer.train()
    assert any(not torch.equal(p, before[n]) for n, p in policy.named_parameters() if n in before)
    trainer.save_model()
    saved = json.loads(Path(args.output_dir, "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == tiny_causal_dir


def test_hh_default_policy_gets_its_base_and_another_model_does_not():
    from hfrl.runs.experiment import resolve_run

    run = resolve_run("hh", "a_lol", output_dir="/tmp/unused")
    assert (run["model"], run["base_model"]) == ("timdettmers/qlora-hh-rlhf-7b", "huggyllama/llama-7b")
    run = resolve_run("hh", "ppo", output_dir="/tmp/unused")
    assert run["base_model"] == "huggyllama/llama-7b"
    run = resolve_run("hh", "a_lol", model="tiny", output_dir="/tmp/unused")
    assert run["model"] == "tiny" and "base_model" not in run
    run = resolve_run("hh", "a_lol", overrides={"base_model": "./my-llama"}, output_dir="/tmp/unused")
    assert run["base_model"] == "./my-llama"


def test_a_run_that_started_from_an_adapter_reloads_onto_its_named_base():
    """Its saved adapter records a Hub base (not a local path): the run config's base_model, not its
    model (the starting adapter), is what the trained adapter loads onto."""
    from hfrl.runs.run_dir import Run

    run = Run(
        name="runs/hh-ppo",
        path=None,
        config={"model": "timdettmers/qlora-hh-rlhf-7b", "base_model": "huggyllama/llama-7b"},
        adapter_config={"base_model_name_or_path": "huggyllama/llama-7b"},
    )
    assert run.adapter_base == "huggyllama/llama-7b"


def test_cli_trains_an_adapter_on_the_base_named_by_flag(bare_adapter, tiny_causal_dir, tmp_path, capsys):
    import yaml

    from hfrl.testing import run_cli

    out = tmp_path / "run"
    args = ["train", "--task", "numbers", "--alg", "ppo", "--model", bare_adapter, "--base-model", tiny_causal_dir]
    args += ["-o", str(out), "--num_iterations", "1", "--rollout_batch_size", "8", "--mini_batch_size", "8"]
    code, _, err = run_cli([*args, "--disable_tqdm", "true"], capsys)
    assert code == 0, err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["model"], saved["base_model"]) == (bare_adapter, tiny_causal_dir)
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == tiny_causal_dir
    code, _, err = run_cli(["train", "--task", "numbers", "--model", bare_adapter, "-o", str(tmp_path / "b")], capsys)
    assert code == 2 and err.splitlines()[0] == (
        f"error: cannot load the base model '{NOWHERE}' (the base its adapter_config.json records) of the PEFT "
        f"adapter {bare_adapter}: pass base_model (--base-model NAME) with its Hub id or local path"
    )
