"""ALoLTrainer end to end on tiny local models: learning, the cached preparation, PEFT, logging,
evaluation, checkpoints, sampling and the errors a user can meet."""

import gc
import json
import os
import random
import warnings
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl import ALoLConfig, ALoLTrainer
from hfrl.tasks import load_task

NUMBERS_REWARD = load_task("numbers", train_size=1, eval_size=1).reward_funcs  # increasing_numbers, min_tokens 20


def numbers_offline(starts):
    """Offline data of mixed quality on prompts ``"n"``: per prompt one good completion (8 increasing
    numbers: reward 0.8), two repeats of ``n`` (0.1) and one sentence (0); the mode is bad."""
    prompts, completions = [], []
    for n in starts:
        prompts += [str(n)] * 4
        completions += [
            " " + " ".join(str(n + k) for k in range(1, 9)),
            " " + " ".join([str(n)] * 8),
            " " + " ".join([str(n)] * 8),
            " the movie was good and fun",
        ]
    return Dataset.from_dict({"prompt": prompts, "completion": completions})


def prompts_only(starts):
    return Dataset.from_dict({"prompt": [str(n) for n in starts]})


@pytest.fixture(scope="module")
def splits():
    starts = list(range(60))
    random.Random(0).shuffle(starts)
    return numbers_offline(starts[:40]), prompts_only(starts[40:50]), prompts_only(starts[50:])


@pytest.fixture
def alol_config(tmp_path):
    """``alol_config(name, **overrides)``: a small, fast ALoLConfig writing into the test's temp dir."""

    def make(name="run", **overrides):
        fields = dict(
            output_dir=str(tmp_path / name),
            preparation_cache_dir=str(tmp_path / "cache"),
            per_device_train_batch_size=16,
            per_device_eval_batch_size=16,
            max_new_tokens=10,
            max_completion_length=12,
            value_epochs=10,
            value_learning_rate=1e-2,
            learning_rate=1e-3,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
            seed=0,
        )
        return ALoLConfig(**{**fields, **overrides})

    return make


def eval_reward(trainer, dataset):
    return trainer.evaluate(dataset, metric_key_prefix="test")["test_reward"]


# ---- learning -----------------------------------------------------------------------------------
def test_a_lol_beats_its_nll_reference_and_more_nll(tiny_causal_dir, splits, alol_config, tmp_path):
    """Reference: nll on the mixed data (it learns the bad mode). From it, a_lol raises the greedy
    reward on held-out prompts; nll for the same number of steps does not."""
    train, validation, test = splits
    ref = ALoLTrainer(
        model=tiny_causal_dir,
        args=alol_config("ref", algorithm="nll", num_train_epochs=20, learning_rate=2e-3),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
    )
    ref.train()
    ref.save_model()
    reference_reward = eval_reward(ref, test)

    alol = ALoLTrainer(
        model=ref.args.output_dir,
        args=alol_config("a_lol", algorithm="a_lol", num_train_epochs=5),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
    )
    alol.train()
    stats = alol.preparation.stats
    positive = round(stats["positive_fraction"] * len(train))
    # the step budget scales with the positive fraction: 5 epochs of the positive examples only
    assert 0 < stats["positive_fraction"] < 1
    assert alol.state.global_step == 5 * -(-positive // 16)
    alol_reward = eval_reward(alol, test)

    nll = ALoLTrainer(
        model=ref.args.output_dir,
        args=alol_config("nll", algorithm="nll", max_steps=alol.state.global_step),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
    )
    nll.train()
    nll_reward = eval_reward(nll, test)
    print(
        f"\nheld-out greedy reward: nll reference {reference_reward:.3f}, a_lol {alol_reward:.3f}, "
        f"nll for the same {alol.state.global_step} steps {nll_reward:.3f}; positive fraction "
        f"{stats['positive_fraction']:.3f}, value-head MSE {stats['value_mse']:.4f}"
    )
    assert alol_reward > reference_reward + 0.3
    assert alol_reward > nll_reward + 0.3


# ---- preparation --------------------------------------------------------------------------------
def test_preparation_runs_once_and_is_reused(tiny_causal_dir, splits, alol_config, monkeypatch):
    from hfrl.trainers.offline import preparation

    train, validation, _ = splits
    make = lambda **kw: ALoLTrainer(  # noqa: E731
        model=tiny_causal_dir,
        args=alol_config(algorithm="a_lol", max_steps=1, **kw),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
    )
    first = make()
    assert first.preparation.from_cache == {"reference": False, "rewards": False, "values": False}
    assert {"prompt_ids", "completion_ids", "ref_logprobs", "reward", "value", "advantage"} <= set(
        first.train_dataset.column_names
    )
    # the data holds what the losses need: log pi_ref per completion token, A = R - V(x)
    row = first.train_dataset[0]
    assert len(row["ref_logprobs"]) == len(row["completion_ids"])
    assert row["advantage"] == pytest.approx(row["reward"] - row["value"])

    def never(*args, **kwargs):
        raise AssertionError("the preparation ran again")

    for name in ("reference_logprobs", "dataset_rewards", "fit_values", "values_and_advantages"):
        monkeypatch.setattr(preparation, name, never)
    second = make()  # a new trainer, model and dataset objects with the same contents
    assert second.preparation.from_cache == {"reference": True, "rewards": True, "values": True}
    assert second.train_dataset["advantage"] == first.train_dataset["advantage"]
    assert second.preparation.stats == first.preparation.stats
    second.train()  # and it trains from the cache
    assert second.state.log_history[0]["prepare/value_mse"] == first.preparation.stats["value_mse"]

    monkeypatch.undo()
    changed = make(value_epochs=3)  # a value-head setting changed: only the values are recomputed
    assert changed.preparation.from_cache == {"reference": True, "rewards": True, "values": False}


def test_a_broken_value_cache_is_rebuilt_with_one_warning(tiny_causal_dir, splits, alol_config, caplog):
    """A kill inside the statistics write (before it was atomic) left an empty values-KEY.json, and every
    later run with these settings failed with 'Expecting value'. Now: one warning, values rebuilt."""
    train, validation, _ = splits
    make = lambda: ALoLTrainer(  # noqa: E731
        model=tiny_causal_dir, args=alol_config(algorithm="a_lol", max_steps=1), reward_funcs=NUMBERS_REWARD,
        train_dataset=train, eval_dataset=validation,
    )  # fmt: skip
    first = make()
    (stats_file,) = Path(first.args.preparation_cache_dir).glob("values-*.json")
    stats_file.write_text("")  # what a kill inside a plain write_text left
    with caplog.at_level("WARNING"):
        second = make()
    assert second.preparation.from_cache["values"] is False
    assert second.preparation.stats == first.preparation.stats
    assert any("are broken" in r.message and "rebuilding" in r.message for r in caplog.records)
    assert json.loads(stats_file.read_text()).items() <= second.preparation.stats.items()  # rewritten whole
    third = make()  # and the rebuilt cache serves the next run
    assert third.preparation.from_cache["values"] is True


def test_dataset_rewards_are_used_and_reward_methods_need_no_value_head(tiny_causal_dir, alol_config):
    data = Dataset.from_dict({"prompt": ["1", "2", "3", "4"], "completion": [" 2 3", " x", " 4 5", " y"]})
    data = data.add_column("reward", [1.0, 0.0, 0.5, -1.0])
    args = alol_config(algorithm="r_lol", max_steps=2, logging_steps=1)
    trainer = ALoLTrainer(model=tiny_causal_dir, args=args, train_dataset=data)
    assert trainer.preparation.from_cache == {"reference": False}  # no reward functions, no value head
    assert trainer.preparation.stats["positive_fraction"] == 0.5  # P(i) ∝ R_i: two positive rewards
    sampler = trainer._get_train_sampler()
    assert set(sampler) <= {0, 2} and len(sampler) == 2
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and logs[0]["rho"] == pytest.approx(1.0)  # pi = pi_ref before the first update


# ---- PEFT ---------------------------------------------------------------------------------------
def test_lora_holds_one_copy_of_the_base_weights(tmp_path, alol_config, splits):
    from peft import LoraConfig
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from hfrl.core.tiny import tiny_model_path

    # a base model whose embedding has a shape no other live tensor has: (vocab, 40)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path("tiny"))
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=40, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    base_dir = tmp_path / "base40"
    GPT2LMHeadModel(config).save_pretrained(base_dir)
    tokenizer.save_pretrained(base_dir)
    shape = (len(tokenizer), 40)

    def copies() -> int:
        """Distinct storages among the live tensors of the embedding's shape."""
        gc.collect()
        with warnings.catch_warnings():  # isinstance() on some gc objects touches deprecated torch names
            warnings.simplefilter("ignore")
            tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
        return len({t.untyped_storage().data_ptr() for t in tensors if tuple(t.shape) == shape})

    train, validation, _ = splits
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM")
    trainer = ALoLTrainer(
        model=str(base_dir),
        args=alol_config(algorithm="a_lol", max_steps=3, value_num_heads=2),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
        peft_config=lora,
    )
    assert copies() == 1  # after the preparation (reference log-probs, value head)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert copies() == 1  # and after training
    assert before and all("lora_" in n for n in before)
    assert all(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    base = GPT2LMHeadModel.from_pretrained(base_dir).eval()
    assert copies() == 2  # the check sees copies: a second load of the base is one
    frozen = {n.replace("base_layer.", ""): p for n, p in trainer.model.get_base_model().named_parameters()}
    for name, param in base.named_parameters():  # the base weights did not move
        assert torch.equal(frozen[name], param), name
    # the reference was the base with the adapter disabled: its log-probs are the base model's
    row = trainer.train_dataset[0]
    ids = torch.tensor([row["prompt_ids"] + row["completion_ids"]])
    logits = base(ids).logits[0, len(row["prompt_ids"]) - 1 : -1]
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(row["completion_ids"])[:, None])[:, 0]
    assert row["ref_logprobs"] == pytest.approx(expected.tolist(), abs=1e-4)


def test_a_saved_adapter_is_trained_further_and_is_the_reference(tiny_causal_dir, splits, alol_config, tmp_path):
    """Starting from an SFT adapter (LoL-RL's QLoRA pi_ref): the adapter trains, and pi_ref is the
    starting model with the adapter on, not the bare base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hfrl.core.policies import is_peft_model

    torch.manual_seed(0)
    lora = LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False)
    sft = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_causal_dir), lora).eval()
    sft.save_pretrained(tmp_path / "sft")
    train, _, _ = splits
    trainer = ALoLTrainer(
        model=str(tmp_path / "sft"),
        args=alol_config(algorithm="r_lol", max_steps=1),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train.select(range(8)),
    )
    assert is_peft_model(trainer.model) and not trainer._fresh_adapter
    assert any(p.requires_grad for n, p in trainer.model.named_parameters() if "lora_" in n)
    row = trainer.train_dataset[0]
    ids = torch.tensor([row["prompt_ids"] + row["completion_ids"]])
    target = torch.tensor(row["completion_ids"])[:, None]

    def logprobs(model):
        logits = model(input_ids=ids).logits[0, len(row["prompt_ids"]) - 1 : -1]
        return torch.log_softmax(logits, -1).gather(1, target)[:, 0].tolist()

    with torch.no_grad():
        with_adapter = logprobs(sft)
        with sft.disable_adapter():
            bare = logprobs(sft)
    assert row["ref_logprobs"] == pytest.approx(with_adapter, abs=1e-4)
    assert row["ref_logprobs"] != pytest.approx(bare, abs=1e-4)
    trainer.train()


def test_a_given_ref_model_is_the_reference(tiny_causal_dir, splits, alol_config):
    from transformers import AutoModelForCausalLM, GPT2LMHeadModel

    torch.manual_seed(1)
    other = GPT2LMHeadModel(AutoModelForCausalLM.from_pretrained(tiny_causal_dir).config).eval()
    train, _, _ = splits
    trainer = ALoLTrainer(
        model=tiny_causal_dir,
        args=alol_config(algorithm="r_lol", max_steps=1),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train.select(range(4)),
        ref_model=other,
    )
    row = trainer.train_dataset[0]
    ids = torch.tensor([row["prompt_ids"] + row["completion_ids"]])
    with torch.no_grad():
        logits = other(input_ids=ids).logits[0, len(row["prompt_ids"]) - 1 : -1]
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(row["completion_ids"])[:, None])[:, 0]
    assert row["ref_logprobs"] == pytest.approx(expected.tolist(), abs=1e-4)
    assert trainer.ref_model is None  # released after the preparation


def test_qlora_without_bitsandbytes_or_gpu_is_one_clear_error(tiny_causal_dir, alol_config, splits, monkeypatch):
    from peft import LoraConfig

    from hfrl.core import quantization

    train, validation, _ = splits
    args = alol_config(algorithm="a_lol", load_in_4bit=True)
    with pytest.raises(ValueError) as err:
        ALoLTrainer(model=tiny_causal_dir, args=args, reward_funcs=NUMBERS_REWARD, train_dataset=train)
    assert str(err.value) == (
        "load_in_4bit (QLoRA) trains a LoRA adapter on the quantized base: pass peft_config (--use_peft), "
        "or a PEFT adapter as the model"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on any machine
    monkeypatch.setattr(quantization.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError) as err:
        ALoLTrainer(
            model=tiny_causal_dir,
            args=args,
            reward_funcs=NUMBERS_REWARD,
            train_dataset=train,
            peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM"),
        )
    assert str(err.value) == (
        "load_in_4bit (QLoRA) needs a CUDA GPU and bitsandbytes, but no CUDA GPU is visible and bitsandbytes is "
        "not installed: run on a GPU machine with `pip install bitsandbytes`, or set load_in_4bit false to train "
        "in full precision"
    )


# ---- logging, evaluation, checkpoints, model card ------------------------------------------------
def test_logs_evaluates_checkpoints_and_writes_the_card(tiny_causal_dir, splits, alol_config):
    train, validation, _ = splits
    args = alol_config(
        algorithm="a_lol_seq",
        max_steps=4,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=4,
        save_strategy="steps",
        save_steps=2,
    )
    trainer = ALoLTrainer(
        model=tiny_causal_dir, args=args, reward_funcs=NUMBERS_REWARD, train_dataset=train, eval_dataset=validation
    )
    trainer.train()
    trainer.save_model()
    out = args.output_dir
    history = trainer.state.log_history
    assert history[0]["prepare/positive_fraction"] == trainer.preparation.stats["positive_fraction"]
    assert "prepare/value_mse" in history[0] and "prepare/reference_reward" in history[0]
    train_logs = [h for h in history if "loss" in h]
    assert len(train_logs) == 2 and {"nll", "rho", "rho_clipfrac", "weight", "advantage"} <= set(train_logs[0])
    assert any("eval_reward" in h for h in history)
    with open(os.path.join(out, "trainer_state.json")) as fh:
        assert json.load(fh)["log_history"][0]["prepare/examples"] == len(train)
    with open(os.path.join(out, "iterations.jsonl")) as fh:  # one line per log entry, as it was logged
        assert [json.loads(line) for line in fh] == json.loads(json.dumps(history))
    with open(os.path.join(out, "preparation.json")) as fh:
        assert "positive_fraction" in json.load(fh)
    assert os.path.isfile(os.path.join(out, "predictions", "eval-step4.jsonl"))
    assert os.path.isfile(os.path.join(out, "checkpoint-2", "model.safetensors"))
    with open(os.path.join(out, "README.md")) as fh:
        card = fh.read()
    assert "A-LoL seq" in card and "2305.14718" in card and "a-lol-seq" in card

    # resume: the checkpoint's weights and step come back, preparation from the cache
    resumed = ALoLTrainer(
        model=tiny_causal_dir,
        args=alol_config(algorithm="a_lol_seq", max_steps=4, save_strategy="steps", save_steps=2),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
    )
    assert all(resumed.preparation.from_cache.values())
    resumed.train(resume_from_checkpoint=os.path.join(out, "checkpoint-2"))
    assert resumed.state.global_step == 4


def test_seq2seq_policy_trains_with_encoder_value_head(tiny_seq2seq_dir, splits, alol_config):
    train, validation, _ = splits
    trainer = ALoLTrainer(
        model=tiny_seq2seq_dir,
        args=alol_config(algorithm="a_lol", max_steps=2, value_epochs=2, max_new_tokens=6),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train.select(range(32)),
        eval_dataset=validation,
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())
    assert "eval_reward" in trainer.evaluate()


def test_sampling_strategies(tiny_causal_dir, splits, alol_config):
    train, validation, _ = splits
    trainer = ALoLTrainer(
        model=tiny_causal_dir,
        args=alol_config(algorithm="a_lol_ref_free", max_steps=1),
        reward_funcs=NUMBERS_REWARD,
        train_dataset=train,
        eval_dataset=validation,
    )
    advantages = torch.tensor(trainer.train_dataset["advantage"])
    positive = set(torch.nonzero(advantages > 0).flatten().tolist())
    drawn = list(trainer._get_train_sampler())  # good_priority: P(i) ∝ A+_i, as many draws as positives
    assert len(drawn) == len(positive) and set(drawn) <= positive
    trainer.args.sampling = "good_random"
    assert sorted(trainer._get_train_sampler()) == sorted(positive)
    trainer.args.sampling = "none"
    assert len(trainer._get_train_sampler()) == len(train)


# ---- configuration and inputs -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"algorithm": "a-lol"}, "unknown algorithm 'a-lol'; did you mean 'a_lol'"),
        ({"sampling": "priority"}, "sampling must be one of none, good_priority, good_random"),
        ({"algorithm": "nll", "sampling": "good_priority"}, "nll has no advantage or reward to sample by"),
        ({"ppo_clip": 0.0}, r"ppo_clip must be in \(0, 1\]"),
        ({"ppo_clip": 1.5}, r"ppo_clip must be in \(0, 1\]"),
        ({"kl_beta": -1.0}, "kl_beta must be >= 0"),
        ({"max_value": 0.0}, "max_value must be > 0"),
        ({"value_epochs": 0}, "value_epochs must be >= 1"),
        ({"value_holdout_fraction": 1.0}, r"value_holdout_fraction must be in \[0, 1\)"),
        ({"truncation_side": "middle"}, "truncation_side must be 'left' or 'right'"),
        ({"max_prompt_length": 0}, "max_prompt_length must be >= 1 or None"),
        ({"remove_unused_columns": True}, "remove_unused_columns must be false"),
    ],
)
def test_config_errors_say_what_to_change(fields, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        ALoLConfig(output_dir=str(tmp_path), report_to="none", **fields)


def test_config_defaults(tmp_path):
    assert ALoLConfig(output_dir=str(tmp_path), algorithm="nll").sampling == "none"
    config = ALoLConfig(output_dir=str(tmp_path))
    assert (config.algorithm, config.sampling, config.ppo_clip, config.remove_unused_columns) == (
        "a_lol",
        "good_priority",
        0.9,
        False,
    )
    assert config.value_generation_kwargs["do_sample"] is False


def test_input_errors(tiny_causal_dir, splits, alol_config):
    train, validation, _ = splits
    with pytest.raises(ValueError, match="needs 'prompt' and 'completion' columns.*lacks completion"):
        ALoLTrainer(model=tiny_causal_dir, args=alol_config(), reward_funcs=NUMBERS_REWARD, train_dataset=validation)
    with pytest.raises(ValueError, match="no 'reward' column: pass reward_funcs"):
        ALoLTrainer(model=tiny_causal_dir, args=alol_config(algorithm="wbc"), train_dataset=train)
    with pytest.raises(ValueError, match="a_lol fits a value head .*: pass an eval_dataset"):
        ALoLTrainer(model=tiny_causal_dir, args=alol_config(), reward_funcs=NUMBERS_REWARD, train_dataset=train)
    with pytest.raises(ValueError, match="value_num_heads \\(3\\) must divide the model's hidden size \\(64\\)"):
        ALoLTrainer(
            model=tiny_causal_dir,
            args=alol_config(value_num_heads=3),
            reward_funcs=NUMBERS_REWARD,
            train_dataset=train,
            eval_dataset=validation,
        )
    zero = lambda prompts, completions, **kw: [0.0] * len(completions)  # noqa: E731
    with pytest.raises(ValueError, match="no training example has a positive reward"):
        ALoLTrainer(model=tiny_causal_dir, args=alol_config(algorithm="wbc"), reward_funcs=zero, train_dataset=train)
    with pytest.raises(ValueError, match="reward_weights has 2 entries for 1 reward functions"):
        ALoLTrainer(
            model=tiny_causal_dir,
            args=alol_config(reward_weights=[1.0, 2.0]),
            reward_funcs=NUMBERS_REWARD,
            train_dataset=train,
        )


def test_value_head_fits_a_prompt_feature():
    from hfrl.trainers.offline.value_head import fit_value_head, value_predictions

    generator = torch.Generator().manual_seed(0)
    states = [
        torch.randn(int(torch.randint(2, 6, (1,), generator=generator)), 8, generator=generator) for _ in range(64)
    ]
    targets = [float(s[:, 0].mean() > 0) * 0.8 + 0.1 for s in states]  # a function of the prompt
    head, stats = fit_value_head(states, targets, num_heads=2, epochs=30, learning_rate=3e-2, holdout_fraction=0.25)
    constant_mse = torch.tensor(targets).var(unbiased=False).item()
    assert stats["value_mse"] < 0.5 * constant_mse  # better than predicting the mean
    assert 1 <= stats["value_best_epoch"] <= 30 and stats["value_holdout_size"] == 16
    again, _ = fit_value_head(states, targets, num_heads=2, epochs=30, learning_rate=3e-2, holdout_fraction=0.25)
    assert torch.equal(value_predictions(head, states), value_predictions(again, states))  # deterministic
    with pytest.raises(ValueError, match="at least 2 validation prompts"):
        fit_value_head(states[:1], targets[:1])


def test_fingerprint_samples_parameters_past_float32_counting():
    """A-LoL's cache key samples 16 values of every parameter. SmolLM2's embedding (28,311,552 values)
    crashed it: float32 indices rounded the last one, 28,311,551, up to 28,311,552 (out of bounds).
    2^24 + 4 values is the smallest such case: the last index, 2^24 + 3, rounds to 2^24 + 4."""
    from torch import nn

    from hfrl.trainers.offline.preparation import module_fingerprint

    module = nn.Module()
    module.weight = nn.Parameter(torch.zeros(2**24 + 4))
    first = module_fingerprint(module)
    with torch.no_grad():
        module.weight[-1] = 1.0  # the last value is among the samples
    assert module_fingerprint(module) != first
