"""A folder from anywhere is data, all the way down (issue 34): a PEFT adapter folder cannot make PEFT
import code planted beside it, and a run folder's links cannot make hfrl read or write outside it.

Each payload would create a marker file if its code ran, or change a victim file outside the folder if
hfrl wrote through the link: the marker never appears and the victim's SHA-256 never changes. A positive
control per code door shows the payload is live: with --trust-code (the user's own opt-in) it runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def adapter_run(tmp_path_factory) -> Path:
    """`hfrl train --use_peft` (tiny model, one iteration, a checkpoint): a LoRA adapter run folder."""
    out = tmp_path_factory.mktemp("foreign") / "lora"
    from hfrl.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--use_peft", "--lora_r", "4",
              "--save_every", "1", *FAST])  # fmt: skip
    assert exc.value.code in (0, None)
    return out


def planted_megatron(folder: Path, marker: Path) -> None:
    """``megatron/core/__init__.py`` in ``folder``: what PEFT imports when an adapter names a megatron config."""
    (folder / "megatron" / "core").mkdir(parents=True)
    (folder / "megatron" / "__init__.py").write_text("")
    (folder / "megatron" / "core" / "__init__.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\ntensor_parallel = None\n"
    )


def edited_adapter(adapter_run: Path, tmp_path: Path, **keys) -> Path:
    """A copy of the adapter run whose adapter_config.json an attacker edited."""
    folder = tmp_path / "downloaded-adapter"
    shutil.copytree(adapter_run, folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, **keys}))
    return folder


MEGATRON = {"megatron_config": {"tensor_model_parallel_size": 1}, "megatron_core": "megatron.core"}
REFUSED = "adapter_config.json names code to import (megatron_config: PEFT then imports megatron.core by name)"


@pytest.mark.parametrize(
    "command",
    [
        ["eval", ".", "--max-samples", "2"],
        ["train", "--task", "numbers", "--model", ".", "-o", "../again", *FAST],
        ["chat", ".", "--message", "hi"],
        ["export", ".", "--out", "../exported"],
    ],
    ids=["eval", "train", "chat", "export"],
)
def test_an_adapter_naming_a_megatron_config_imports_nothing(command, adapter_run, tmp_path, capsys, monkeypatch):
    """`cd ADAPTER && PYTHONPATH=. hfrl ...`: the folder is the current one and on sys.path."""
    marker = tmp_path / "MARKER"
    folder = edited_adapter(adapter_run, tmp_path, **MEGATRON)
    planted_megatron(folder, marker)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))  # PYTHONPATH=.
    code, _, err = run_cli(command, capsys)
    assert code == 2, err
    assert error_line(err).endswith(f"{REFUSED}; pass --trust-code (trust_code=True in Python) only if you trust it")
    assert not marker.exists()
    assert not (tmp_path / "again").exists() and not (tmp_path / "exported").exists()


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_python_m_never_imports_from_the_current_folder(adapter_run, tmp_path):
    """`cd ADAPTER && python -m hfrl.cli eval .` (python -m puts the current folder first on sys.path).
    With --trust-code the adapter config is the user's to trust, yet the planted module is still not
    imported from the current folder: a megatron of the user's own, installed elsewhere, is (the
    positive control: the payload is live)."""
    marker, installed = tmp_path / "MARKER", tmp_path / "site"
    folder = edited_adapter(adapter_run, tmp_path, **MEGATRON)
    planted_megatron(folder, marker)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    args = [sys.executable, "-m", "hfrl.cli", "eval", ".", "--max-samples", "2"]
    proc = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and REFUSED in error_line(proc.stderr), proc.stderr
    proc = subprocess.run([*args, "--trust-code"], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), proc.stderr
    installed.mkdir()
    planted_megatron(installed, marker)
    env["PYTHONPATH"] = str(installed)
    subprocess.run([*args, "--trust-code"], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert marker.exists()  # the door is real: only the user's opt-in (and their own install) opens it


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"auto_mapping": {"base_model_class": "system", "parent_library": "os"}},
         "adapter_config.json names code to import (auto_mapping: PEFT's AutoPeftModel imports 'os')"),
        ({"megatron_core": "evil.module"},
         "adapter_config.json names code to import (megatron_core: a module PEFT imports by name: 'evil.module')"),
        ({"peft_type": "NOPE"}, "adapter_config.json: unknown peft_type 'NOPE' ("),
    ],
    ids=["auto_mapping", "megatron_core", "peft_type"],
)  # fmt: skip
def test_other_adapter_config_doors_are_one_line(keys, message, adapter_run, tmp_path, capsys):
    folder = edited_adapter(adapter_run, tmp_path, **keys)
    code, _, err = run_cli(["eval", str(folder), "--max-samples", "2"], capsys)
    assert code == 2 and message in error_line(err), err


def test_a_users_own_reward_file_is_named_by_its_path(tmp_path, capsys, monkeypatch):
    """The documented way to a reward of your own: its file's path, not PYTHONPATH=. (a module name of the
    current folder gets the hint)."""
    (tmp_path / "my_rewards.py").write_text(
        "def digits(prompts, completions, **kwargs):\n"
        "    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]\n"
    )
    monkeypatch.chdir(tmp_path)
    run = ["train", "--task", "numbers", "--model", "tiny", *FAST]
    code, _, err = run_cli([*run, "-o", "a", "--rewards", "[my_rewards:digits]"], capsys)
    assert code == 2 and error_line(err).endswith(
        "No module named 'my_rewards'; to use the file my_rewards.py of this folder, name it by its path: "
        "my_rewards.py:NAME"
    ), err
    code, out, err = run_cli([*run, "-o", "b", "--rewards", "[my_rewards.py:digits]"], capsys)
    assert code == 0, err
    assert "rewards:\n- my_rewards.py:digits" in (tmp_path / "b" / "config.yaml").read_text()


# ---- links out of a run folder: never written through, never read ---------------------------------
def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("foreign") / "run"
    from hfrl.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--save_every", "1", *FAST])
    assert exc.value.code in (0, None)
    return out


def linked_run(full_run: Path, tmp_path: Path, name: str, target: Path) -> Path:
    """A copy of the run whose ``name`` is a link to ``target``, outside it."""
    run = tmp_path / "downloaded-run"
    shutil.copytree(full_run, run)
    (run / name).parent.mkdir(parents=True, exist_ok=True)
    if (run / name).exists():
        os.remove(run / name)
    os.symlink(target, run / name)
    return run


LINKED = ["predictions/test.jsonl", "eval/test.json", "README.md", "iterations.jsonl", "model.safetensors"]
WRITERS = {
    "eval": lambda run: ["eval", str(run), "--max-samples", "2"],
    "train --resume": lambda run: ["train", "-o", str(run), "--resume", "--num_iterations", "2"],
}


@pytest.mark.parametrize("name", LINKED)
@pytest.mark.parametrize("command", list(WRITERS))
def test_nothing_is_written_through_a_link_out_of_the_run(command, name, full_run, tmp_path, capsys):
    victim = tmp_path / "bashrc"
    victim.write_text("# the user's own file\n")
    before = sha256(victim)
    run = linked_run(full_run, tmp_path, name, victim)
    code, _, err = run_cli(WRITERS[command](run), capsys)
    assert code == 2, err
    assert error_line(err) == (
        f"error: run folder {run}: {name} is a link to {victim}, outside the folder; hfrl reads and writes only "
        "inside a folder it did not make: replace the link with a copy of the file it points to, or remove it"
    )
    assert sha256(victim) == before


def test_a_prompt_never_reaches_a_shell_file_through_a_link(full_run, tmp_path, capsys):
    """The issue's reproduction: predictions/test.jsonl -> ~/.bashrc, a data prompt `$(touch MARKER)`."""
    marker, bashrc = tmp_path / "MARKER", tmp_path / "bashrc"
    bashrc.write_text("export PS1='$ '\n")
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"prompt": f"$(touch {marker})", "references": ["1"]}) + "\n")
    run = linked_run(full_run, tmp_path, "predictions/test.jsonl", bashrc)
    code, _, err = run_cli(["eval", str(run), "--task", str(data), "--split", "train"], capsys)
    assert code == 2 and "predictions/test.jsonl is a link to" in err
    assert bashrc.read_text() == "export PS1='$ '\n"  # the next shell runs what it always ran


def test_a_link_inside_the_folder_is_followed(full_run, tmp_path, capsys):
    """A link that stays inside (as a Hub cache snapshot's links into its blobs) is data like any file."""
    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    (run / "blobs").mkdir()
    os.replace(run / "tokenizer.json", run / "blobs" / "tokenizer.json")
    os.symlink("blobs/tokenizer.json", run / "tokenizer.json")
    code, _, err = run_cli(["eval", str(run), "--max-samples", "2"], capsys)
    assert code == 0, err


def test_a_fifo_in_a_run_is_refused_not_read(full_run, tmp_path, capsys):
    """A FIFO named like a tokenizer file would block `hfrl export` forever."""
    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    os.mkfifo(run / "vocab.txt")
    code, _, err = run_cli(["export", str(run), "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert f"run folder {run}: vocab.txt is not a regular file or folder (a FIFO)" in error_line(err)


def test_a_model_folder_is_checked_too(full_run, tmp_path, capsys):
    """`hfrl train --model DIR` with a link out of DIR (the weights of someone else's run): refused."""
    model = tmp_path / "model"
    shutil.copytree(full_run, model)
    os.remove(model / "config.json")
    os.symlink(full_run / "config.json", model / "config.json")
    code, _, err = run_cli(["train", "--task", "numbers", "--model", str(model), "-o", str(tmp_path / "r"), *FAST],
                           capsys)  # fmt: skip
    assert code == 2 and f"model folder {model}: config.json is a link to" in error_line(err), err
    assert not (tmp_path / "r").exists()


def test_a_model_folder_naming_a_hub_kernel_is_refused(full_run, tmp_path, capsys):
    """`attn_implementation: owner/kernel` in a model folder's config.json downloads and runs a kernel."""
    model = tmp_path / "model"
    shutil.copytree(full_run, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "attn_implementation": "evil/flash-kernel"}))
    for args in (["eval", str(model), "--max-samples", "2"],
                 ["train", "--task", "numbers", "--model", str(model), "-o", str(tmp_path / "r"), *FAST]):  # fmt: skip
        code, _, err = run_cli(args, capsys)
        assert code == 2, err
        assert error_line(err) == (
            f"error: model folder {model}: config.json names code to load (attn_implementation: evil/flash-kernel); "
            "pass --trust-code (trust_code=True in Python) only if you trust it"
        )
