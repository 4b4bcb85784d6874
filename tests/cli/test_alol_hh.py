"""The Helpful-Harmless task ``hh``: HH-RLHF transcripts to offline examples, the OpenAssistant
reward format, the pinned Hub files, the shipped fixture, and ``hfrl train --task hh --alg a_lol``
offline with a tiny random reward model of the paper's reward model's type in its place."""

import json
import os

import pytest
import yaml

from hfrl.tasks import hh

FIXTURES = str(hh.FIXTURE_DIR.parent)


@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory):
    """A tiny OpenAssistant GPT-NeoX reward model in the Hub's layout (the paper's reward model's
    class, key names and config; hfrl's own class loads it)."""
    from hfrl.testing.tiny_classifiers import save_oasst_reward_model

    return save_oasst_reward_model(tmp_path_factory.mktemp("tiny-rm"), seed=3)


def test_transcripts_become_prompt_and_completion():
    text = "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Help me?\n\nAssistant: Sure, how?"
    prompt, completion = hh.split_transcript(text)
    assert prompt == "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Help me?\n\nAssistant:"
    assert completion == " Sure, how?"
    assert hh.split_transcript("\n\nHuman: no answer") is None
    rows = hh.to_examples({"chosen": [text], "rejected": [text.replace("Sure, how?", "No.")]}, both=True)
    assert rows["completion"] == [" Sure, how?", " No."]
    assert rows["references"] == [["Sure, how?"], ["Sure, how?"]]  # the chosen response is the reference
    assert hh.to_examples({"chosen": [text], "rejected": [text]}, both=False)["completion"] == [" Sure, how?"]


def test_reward_model_reads_the_open_assistant_format():
    text = hh.to_oasst("\n\nHuman: Hi\n\nAssistant: Hey\n\nHuman: Help?\n\nAssistant:", " Sure.\n\nHuman: more")
    # PRO / LoL-RL: every turn closed by EOS; a generated next human turn is cut off
    assert text == (
        "<|prompter|>Hi<|endoftext|><|assistant|>Hey<|endoftext|>"
        "<|prompter|>Help?<|endoftext|><|assistant|>Sure.<|endoftext|>"
    )


def test_hub_files_are_pinned_and_the_yaml_declares_the_paper_setup():
    spec = hh.read_task_yaml(hh.__file__)
    source = spec["dataset"]
    assert hh.data_root(None, source) == f"hf://datasets/Anthropic/hh-rlhf@{source['revision']}"
    assert len(source["revision"]) == 40  # a commit, not a branch
    files = hh.data_files(hh.data_root(None, source), source["subsets"])
    assert files["train"][0] == f"hf://datasets/Anthropic/hh-rlhf@{source['revision']}/harmless-base/train.jsonl*"
    reward = spec["rewards"][0]
    assert reward["id"] == "openassistant_reward"  # by registry id: task YAML imports no code path
    assert reward["args"]["model"] == "OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5"
    assert hh.OpenAssistantReward().metric.output == "probability"  # through a sigmoid
    from hfrl.runs.experiment import task_config
    from hfrl.tasks import describe_task
    from hfrl.trainers.schema import config_schema

    task = describe_task("hh")  # the YAML, read as resolving a run reads it
    settings = {alg: task_config(task, alg, config_schema(alg)) for alg in ("a_lol", "a_lol_seq", "nll")}
    assert settings["a_lol_seq"] == settings["a_lol"] == settings["nll"]  # the `offline` section, inherited


def test_fixture_loads_through_the_same_code(monkeypatch, tiny_reward_model):
    from hfrl.tasks import load_task

    monkeypatch.setenv("HFRL_DATA_DIR", FIXTURES)
    task = load_task("hh", classifier=tiny_reward_model)
    train, validation, test = (task.dataset[s] for s in ("train", "validation", "test"))
    assert len(train) == 2 * 21  # chosen and rejected of each of the fixture's 21 train pairs
    assert (len(validation), len(test)) == (7, 7)  # the 14 test pairs split in half
    assert set(train.column_names) == {"prompt", "completion", "references"}
    assert all(p.endswith("\n\nAssistant:") for p in validation["prompt"])
    scores = task.reward_funcs[0](prompts=train["prompt"][:2], completions=train["completion"][:2])
    assert all(0.0 < s < 1.0 for s in scores)  # the classifier's logit through a sigmoid
    with pytest.raises(FileNotFoundError, match="no data folder"):
        load_task("hh", data_dir="/nonexistent/hh")


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_hfrl_train_task_hh_alg_a_lol(lora, monkeypatch, tmp_path, tiny_causal_dir, tiny_reward_model, capsys, caplog):
    import transformers

    from hfrl.cli.app import main

    transformers.utils.logging.enable_propagation()

    monkeypatch.setenv("HFRL_DATA_DIR", FIXTURES)
    config = tmp_path / "config.yaml"
    rewards = [{"id": "openassistant_reward", "args": {"model": tiny_reward_model}}]
    config.write_text(yaml.safe_dump({"rewards": rewards}))
    out = tmp_path / "run"
    args = ["train", "--task", "hh", "--alg", "a_lol", "--model", tiny_causal_dir, "--config", str(config)]
    args += ["--output-dir", str(out), "--preparation_cache_dir", str(tmp_path / "cache")]
    args += ["--max_prompt_length", "64", "--max_completion_length", "16", "--max_new_tokens", "8"]
    args += ["--value_epochs", "2", "--warmup_steps", "0", "--report_to", "none", "--use_cpu", "true"]
    args += ["--disable_tqdm", "true"]
    if lora:  # TRL's ModelConfig flags: an adapter on the starting policy, pi_ref = the adapter switched off
        args += ["--use_peft", "--lora_r", "4", "--max_steps", "2"]
    with pytest.raises(SystemExit) as exc:
        main(args)
        raise SystemExit(0)
    assert (exc.value.code or 0) == 0, capsys.readouterr().err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["task"], saved["alg"], saved["algorithm"], saved["learning_rate"]) == ("hh", "a_lol", "a_lol", 2e-4)
    state = json.loads((out / "trainer_state.json").read_text())
    first = state["log_history"][0]
    assert first["prepare/examples"] == 42 and 0 < first["prepare/positive_fraction"] <= 1
    assert "missing keys" not in caplog.text  # the best model's tied lm_head is re-tied, not reported
    weights = "adapter_model.safetensors" if lora else "model.safetensors"
    assert os.path.isfile(out / weights) and os.path.isfile(out / "README.md")
    assert "A-LoL" in (out / "README.md").read_text()


def test_offline_without_the_reward_model_says_what_is_missing(monkeypatch, tmp_path, capsys):
    """HH's reward model is a Hub model: offline, the error names it and the ways to replace it
    (it was a bare `[Errno -2] Name or service not known`)."""
    from hfrl.testing import run_cli

    monkeypatch.setenv("HFRL_DATA_DIR", FIXTURES)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["train", "--task", "hh", "--alg", "a_lol", "--model", "tiny", "-o", str(tmp_path / "run")]
    args += ["--preparation_cache_dir", str(tmp_path / "cache"), "--max_prompt_length", "64"]
    code, _, err = run_cli(args, capsys)
    err = err[err.index("error: ") :]  # after the datasets progress bars
    assert code == 1 and len(err.splitlines()) == 2  # one line, and the HFRL_DEBUG hint
    assert err.startswith("error: cannot load the classifier 'OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5'")
    assert "--task-arg classifier=DIR" in err and "hf download OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5" in err
