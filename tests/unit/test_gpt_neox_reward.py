"""OpenAssistant's GPT-NeoX reward model (the hh task's default reward): hfrl's own class, registered
with transformers' Auto classes by ``import hfrl`` without importing torch, loads a checkpoint in the
Hub's layout (``gpt_neox.*``, ``out_proj.*``, ``pooling: last``, ``pytorch_model.bin`` from
transformers 4.28), and the hh reward scores with it exactly ``sigmoid(out_proj(h_last))``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hfrl.testing.tiny_classifiers import save_oasst_reward_model

TEXTS = [
    "<|prompter|>the movie was<|endoftext|><|assistant|>a good story<|endoftext|>",
    "<|prompter|>hi<|endoftext|><|assistant|>no<|endoftext|>",
]


@pytest.fixture(scope="module")
def rm_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("oasst-rm")
    return {p: save_oasst_reward_model(root / p, pooling=p) for p in ("last", "mean")}


def by_hand(folder: str, texts: list[str], pooling: str) -> torch.Tensor:
    """The score from the checkpoint's tensors, without hfrl's class: a plain GPT-NeoX body built from
    the ``gpt_neox.*`` weights, the hidden state of each text's last token (or the mean over its
    tokens), then ``out_proj`` (one text at a time: no padding involved)."""
    from transformers import AutoTokenizer, GPTNeoXConfig, GPTNeoXModel

    state = torch.load(os.path.join(folder, "pytorch_model.bin"), weights_only=True)
    config = json.loads(Path(folder, "config.json").read_text())
    body = GPTNeoXModel(GPTNeoXConfig(**{k: v for k, v in config.items() if k not in ("model_type", "pooling")}))
    weights = {k.removeprefix("gpt_neox."): v for k, v in state.items() if k.startswith("gpt_neox.")}
    assert not body.load_state_dict(weights, strict=False).missing_keys  # unexpected: the 4.28 attention buffers
    body.eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    scores = []
    for text in texts:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            hidden = body(ids).last_hidden_state[0]  # (T, H)
        pooled = hidden[-1] if pooling == "last" else hidden.mean(0)
        scores.append(pooled @ state["out_proj.weight"][0] + state["out_proj.bias"][0])
    return torch.stack(scores)


def test_the_checkpoint_has_the_published_layout(rm_dirs):
    config = json.loads(Path(rm_dirs["last"], "config.json").read_text())
    assert (config["model_type"], config["architectures"], config["pooling"]) == (
        "gpt_neox_reward_model",
        ["GPTNeoXRewardModel"],
        "last",
    )
    keys = torch.load(os.path.join(rm_dirs["last"], "pytorch_model.bin"), weights_only=True).keys()
    assert {"out_proj.weight", "out_proj.bias", "gpt_neox.embed_in.weight"} <= set(keys)
    assert all(k.startswith(("gpt_neox.", "out_proj.")) for k in keys)


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_auto_class_loads_it_and_scores_out_proj_of_the_pooled_hidden_state(rm_dirs, pooling):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import hfrl  # noqa: F401 - registers the type
    from hfrl.core.gpt_neox_reward import GPTNeoXRewardModel

    model, info = AutoModelForSequenceClassification.from_pretrained(
        rm_dirs[pooling], output_loading_info=True, trust_remote_code=False
    )
    assert isinstance(model, GPTNeoXRewardModel) and model.config.pooling == pooling
    assert model.config.num_labels == 1
    # every published tensor is used; the 4.28 attention buffers are ignored, not reported
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set()
    tokenizer = AutoTokenizer.from_pretrained(rm_dirs[pooling], trust_remote_code=False)
    expected = by_hand(rm_dirs[pooling], TEXTS, pooling)
    for side in ("right", "left"):  # the pad positions are never read, whichever side they are on
        tokenizer.padding_side = side
        batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
        assert batch["attention_mask"].sum(1).tolist()[0] > batch["attention_mask"].sum(1).tolist()[1]
        with torch.no_grad():
            logits = model.eval()(**batch).logits
        assert logits.shape == (2, 1)
        torch.testing.assert_close(logits[0, 0], expected[0], rtol=0, atol=1e-5)  # the longest: no padding
        if side == "right":  # left padding shifts GPT-NeoX's positions (as in OpenAssistant's class)
            torch.testing.assert_close(logits[:, 0], expected, rtol=0, atol=1e-5)


def test_hh_default_reward_scores_sigmoid_of_out_proj_on_the_last_token(rm_dirs):
    """hh's reward (``openassistant_reward`` -> learned_classifier's loading path) on the tiny
    checkpoint: sigmoid(out_proj(h of the last non-pad token)) of the dialogue in OpenAssistant's format."""
    from hfrl.rewards import load_reward
    from hfrl.tasks.hh import to_oasst

    reward = load_reward({"id": "openassistant_reward", "args": {"model": rm_dirs["last"], "device": "cpu"}})
    prompts = ["\n\nHuman: the movie was\n\nAssistant:", "\n\nHuman: hi\n\nAssistant:"]
    completions = [" a good story", " no"]
    scores = reward(prompts=prompts, completions=completions)
    texts = [to_oasst(p, c) for p, c in zip(prompts, completions, strict=True)]
    assert texts == TEXTS
    expected = torch.sigmoid(by_hand(rm_dirs["last"], texts, "last"))
    # batched with padding against one text at a time: the logits agree to 1e-5 (above), the sigmoid's
    # slope is at most 1/4, so the scores to 2.5e-6
    assert scores == pytest.approx(expected.tolist(), abs=2.5e-6)
    assert abs(scores[0] - scores[1]) > 1e-3  # the two dialogues score differently: the text is read


def test_config_pooling():
    from hfrl.core.gpt_neox_reward_config import GPTNeoXRewardModelConfig

    assert GPTNeoXRewardModelConfig(pooling=None).pooling == "last"  # as OpenAssistant's class
    with pytest.raises(ValueError) as err:
        GPTNeoXRewardModelConfig(pooling="max")
    assert str(err.value) == "gpt_neox_reward_model: pooling must be one of last, mean, got 'max'"


def test_unknown_architecture_is_not_told_to_download(tmp_path):
    """A classifier folder whose model type transformers does not know: the error says so, and does
    not send the user to download what is already there."""
    from hfrl.core.tiny import build_tiny_tokenizer
    from hfrl.metrics.learned import ClassifierUnavailableError, load_classifier

    build_tiny_tokenizer().save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no_such_reward_model"}))
    with pytest.raises(ClassifierUnavailableError) as err:
        load_classifier(str(tmp_path), "cpu")
    message = str(err.value)
    assert "its model type 'no_such_reward_model' is not one that transformers" in message
    assert "hfrl adds gpt_neox_reward_model" in message and "download" not in message


SCRIPT = """
import sys
import hfrl
assert "torch" not in sys.modules, "import hfrl imported torch"
from transformers import GPTNeoXConfig  # configuration_auto first imported from inside a config module
from transformers import AutoModelForSequenceClassification
model = AutoModelForSequenceClassification.from_pretrained(sys.argv[1], trust_remote_code=False)
print(type(model).__name__, model.config.pooling)
"""


def test_import_hfrl_first_then_transformers_in_a_fresh_process(rm_dirs):
    """The order the in-process tests cannot see (transformers is loaded there already): ``import
    hfrl`` without torch, then transformers imported the way that meets its modules half-initialised."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, rm_dirs["mean"]], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "GPTNeoXRewardModel mean"
    assert "could not register" not in done.stderr
