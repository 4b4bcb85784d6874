"""Model cards: rendered for a full-model run and an adapter run, parsed back with
huggingface_hub.ModelCard (metadata and model-index intact), usage snippets executed."""

import json
import re
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from huggingface_hub import ModelCard

from hfrl.testing import digit_reward


def usage_code(card_text: str) -> str:
    return re.search(r"## Usage\n\n```python\n(.*?)\n```", card_text, re.S).group(1)


def test_training_writes_a_valid_card_and_curve(full_run):
    card = ModelCard.load(full_run / "README.md")  # parses the YAML metadata; errors would raise
    data = card.data
    assert data.library_name == "transformers"
    assert data.pipeline_tag == "text-generation"
    assert {"hfrl", "ppo"} <= set(data.tags)
    assert data.license == "apache-2.0"  # hfrl's built-in tiny model
    assert data.get("base_model") is None  # `tiny` is not a Hub model: no base_model metadata
    text = card.text
    assert "trained with PPO on the hfrl task `numbers`" in text
    assert "`increasing_numbers(min_tokens=20)`" in text
    assert "[Proximal Policy Optimization Algorithms](https://huggingface.co/papers/1707.06347)" in text
    assert "```bibtex\n@article{schulman2017proximal" in text
    assert "hfrl train --config config.yaml" in text
    # how to install the hfrl that trained it (hfrl is not on PyPI): its git commit, or its version
    assert re.search(r'pip install "hfrl (@ git\+\S+@[0-9a-f]{40}|==[\w.]+)"', text), text
    assert "pip install hfrl\n" not in text
    # the headline: the mean of the last iterations, the first and the peak (not one noisy iteration)
    rewards = [h["reward"] for h in json.loads((full_run / "trainer_state.json").read_text())["log_history"]
               if "reward" in h]  # fmt: skip
    assert f"Trained for 2 iterations: mean reward {sum(rewards) / 2:.4f} over the last 2 iterations" in text
    assert str(full_run) not in text  # no absolute path of this machine (the usage snippet's included)
    assert "learning_rate: 0.002" in text and "num_iterations: 2" in text  # the resolved config
    assert "- transformers: " in text and "- torch: " in text
    assert "![Mean reward per iteration](reward_curve.png)" in text
    png = (full_run / "reward_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_eval_results_in_table_and_model_index(full_run):
    card = ModelCard.load(full_run / "README.md")  # `hfrl eval` (the fixture's evaluate calls) updated it
    after = json.loads((full_run / "eval" / "test.json").read_text())["metrics"]
    before = json.loads((full_run / "eval" / "test-base.json").read_text())["metrics"]
    results = {r.metric_type: r for r in card.data.eval_results}
    assert set(results) == set(after)
    for name, value in after.items():
        assert results[name].metric_value == pytest.approx(value, abs=1e-6)
        assert results[name].dataset_split == "test" and results[name].task_type == "text-generation"
    model_index = card.data.to_dict()["model-index"]
    assert model_index[0]["name"] == "numbers-ppo"
    assert ModelCard(str(card)).data.to_dict()["model-index"] == model_index  # round trip
    assert "| split | metric | before | after | change |" in card.text
    change = after["reward"] - before["reward"]
    row = f"| test | reward | {before['reward']:.4f} | {after['reward']:.4f} | {change:+.4f} |"
    assert row in card.text


def test_full_model_usage_snippet_runs(full_run, capsys, monkeypatch):
    from hfrl.runs.run_dir import open_run

    code = usage_code((full_run / "README.md").read_text())
    assert "pipeline(\"text-generation\", model='numbers-ppo')" in code  # the run's folder, not this machine's path
    monkeypatch.chdir(full_run.parent)  # where the run lies, as a user runs it
    exec(compile(code, "card-snippet", "exec"), {})
    printed = capsys.readouterr().out.strip()
    # the snippet's greedy text is the model's own greedy continuation of the BOS prompt
    lm, tokenizer = open_run(full_run).load()
    ids = tokenizer("<|endoftext|>", return_tensors="pt")
    out = lm.generate(**ids, max_new_tokens=20, do_sample=False)
    continuation = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    # (the continuation may be empty: a tiny policy can put EOS first, depending on what ran before)
    assert printed.endswith(continuation.strip())


def test_adapter_card_metadata_and_no_secret(adapter_run, run_secret):
    text = (adapter_run / "README.md").read_text()
    assert run_secret not in text  # hub_token is never rendered
    card = ModelCard(text)
    assert card.data.library_name == "peft"
    assert {"hfrl", "ppo", "lora"} <= set(card.data.tags)
    assert "A LoRA adapter for" in card.text
    assert "started from Python" in card.text and "`digit_reward`" in card.text
    assert "hub_token" not in card.text and "cliprange: 0.2" in card.text  # the trainer's own fields
    assert "Not evaluated yet" in card.text
    # a Hub id for the base model puts it in the metadata (the Hub links adapter and base)
    from hfrl.cards import render_card

    card = render_card(adapter_run, base_model="openai-community/gpt2", repo_id="me/lora-ppo")
    assert card.data.base_model == "openai-community/gpt2"
    assert "PeftModel.from_pretrained(base, 'me/lora-ppo')" in card.text
    assert ModelCard(str(card)).data.base_model == "openai-community/gpt2"


def test_adapter_usage_snippet_runs_and_uses_the_adapter(adapter_run, capsys, monkeypatch):
    from hfrl.runs.run_dir import open_run

    code = usage_code((adapter_run / "README.md").read_text())
    assert "PeftModel.from_pretrained(base," in code
    monkeypatch.chdir(adapter_run.parent)
    scope: dict = {}
    exec(compile(code, "card-snippet", "exec"), scope)
    printed = capsys.readouterr().out.strip()
    assert type(scope["model"]).__name__ == "PeftModel"
    lm, tokenizer = open_run(adapter_run).load()
    inputs = tokenizer("1 2 3", return_tensors="pt")
    expected = tokenizer.decode(lm.generate(**inputs, max_new_tokens=6, do_sample=False)[0], skip_special_tokens=True)
    assert printed == expected
    # the adapter is trained: the LoRA B matrices left zero
    assert any(p.abs().sum() > 0 for n, p in scope["model"].named_parameters() if "lora_B" in n)


def test_seq2seq_card_without_training(tmp_path, tiny_seq2seq_dir, capsys, monkeypatch):
    """A run saved before any iteration: no curve, a seq2seq snippet that runs."""
    from hfrl import PPOConfig, PPOTrainer

    args = PPOConfig(output_dir=str(tmp_path / "t5"), report_to="none", disable_tqdm=True, max_new_tokens=5)
    trainer = PPOTrainer(
        model=tiny_seq2seq_dir, args=args, reward_funcs=digit_reward, train_dataset=Dataset.from_dict({"prompt": ["a"]})
    )
    trainer.save_model()
    card = ModelCard.load(tmp_path / "t5" / "README.md")
    assert card.data.pipeline_tag == "text2text-generation"
    assert "Reward curve" not in card.text and not (tmp_path / "t5" / "reward_curve.png").exists()
    code = usage_code(card.content)
    assert "AutoModelForSeq2SeqLM" in code and "'a'" in code  # the training prompt
    torch.manual_seed(0)
    monkeypatch.chdir(tmp_path)  # the snippet names the run's folder: run it beside the run
    exec(compile(code, "card-snippet", "exec"), {})
    assert capsys.readouterr().out.endswith("\n")


def test_task_dataset_and_license_reach_the_metadata(full_run, monkeypatch):
    """A task that declares its Hub dataset (as GRUE tasks do) fills `datasets` and the model-index."""
    import hfrl.tasks.base
    from hfrl.cards import render_card

    spec = {
        "description": "Dialogue.",
        "rewards": [{"id": "increasing_numbers", "args": {"min_tokens": 5}, "weight": 0.5}],
        "dataset": {"path": "li2017dailydialog/daily_dialog", "revision": "abc"},
        "license": "cc-by-nc-sa-4.0",
    }
    monkeypatch.setattr(hfrl.tasks.base, "read_task_yaml", lambda path: spec)
    card = render_card(full_run, license=None)
    assert card.data.datasets == ["li2017dailydialog/daily_dialog"]
    assert {r.dataset_type for r in card.data.eval_results} == {"li2017dailydialog/daily_dialog"}
    assert card.data.license == "apache-2.0"  # the base model's license comes first (here: built-in tiny)
    assert "0.5 × `increasing_numbers(min_tokens=5)`" in card.text
    assert "https://huggingface.co/datasets/li2017dailydialog/daily_dialog" in card.text
    assert render_card(full_run, license="mit", tags=["extra"]).data.license == "mit"


def test_card_for_a_checkpoint_uses_the_run_config(full_run, tmp_path):
    import shutil

    from hfrl.cards import render_card

    checkpoint = tmp_path / "run" / "checkpoint-4"
    shutil.copytree(full_run, tmp_path / "run", ignore=shutil.ignore_patterns("eval", "predictions"))
    shutil.copytree(full_run, checkpoint, ignore=shutil.ignore_patterns("config.yaml", "eval", "predictions"))
    card = render_card(checkpoint)
    assert "hfrl train --config config.yaml" in card.text and "task: numbers" in card.text


def test_render_errors_are_clear(tmp_path):
    from hfrl.cards import write_card

    with pytest.raises(ValueError, match="holds no model: expected config.json"):
        write_card(tmp_path)
    with pytest.raises(ValueError, match="no run or model at"):
        write_card(tmp_path / "missing")


def test_template_is_package_data():
    from hfrl.cards.render import TEMPLATE

    assert TEMPLATE.is_file() and TEMPLATE.parent.name == "templates" and TEMPLATE.suffix == ".md"
    assert Path(TEMPLATE).read_text().startswith("---\n{{ card_data }}\n---")


def test_a_card_that_fails_never_loses_the_model(tmp_path, tiny_causal_dir, make_config, monkeypatch, caplog):
    """The model is saved before the card; a card error is reported as a warning, not raised."""
    import hfrl.cards
    from hfrl import PPOTrainer

    def broken(*args, **kwargs):
        raise RuntimeError("the card template is broken")

    monkeypatch.setattr(hfrl.cards, "write_card", broken)
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(num_iterations=1),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2"] * 8}),
    )
    trainer.save_model()
    out = Path(trainer.args.output_dir)
    assert (out / "model.safetensors").is_file() and not (out / "README.md").exists()
    assert "its card could not be written: the card template is broken" in caplog.text
    from hfrl.runs.run_report import end_lines

    saved = next(line for line in end_lines(str(out), []) if line.startswith("saved to"))
    assert saved == f"saved to {out}: the model, config.yaml"  # no card claimed that is not there
