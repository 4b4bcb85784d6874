"""``--resume`` continues exactly what was saved, or says why it cannot: a finished run resumed is
unchanged (no extra optimizer step), another run's checkpoint or an edited config.yaml is refused
with the fields that differ, and a checkpoint changed in place (same size) is found by its SHA-256."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4", "--disable_tqdm", "true",
        "--report_to", "none", "--save_every", "1"]  # fmt: skip


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.safetensors"))}


@pytest.fixture(scope="module", params=["ppo", "nlpo"])
def finished(request, tmp_path_factory) -> Path:
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("resume") / request.param
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--alg", request.param, "--model", "tiny", "-o", str(out),
              "--num_iterations", "2", *FAST])  # fmt: skip
    assert exc.value.code in (0, None)
    return out


def copy(run: Path, tmp_path: Path) -> Path:
    dest = tmp_path / run.name
    shutil.copytree(run, dest)
    return dest


def test_a_finished_run_resumed_is_unchanged(finished, tmp_path, capsys):
    run = copy(finished, tmp_path)
    before, checkpoints = digest(run), sorted(p.name for p in run.glob("checkpoint-*"))
    code, _, err = run_cli(["train", "--resume", "-o", str(run)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in run.glob("checkpoint-*")) == checkpoints  # no checkpoint-(N+1)
    assert digest(run) == before  # the weights, to the bit
    code, _, err = run_cli(["train", "--resume", "-o", str(run), "--num_iterations", "3"], capsys)
    assert code == 0, err  # extending it still works
    assert len(list(run.glob("checkpoint-*"))) == len(checkpoints) + 1 and digest(run) != before


def test_another_runs_checkpoint_is_refused(finished, tmp_path, capsys):
    from hfrl.cli.app import main

    other = tmp_path / "other"
    with pytest.raises(SystemExit):
        main(["train", "--task", "numbers", "--alg", finished.name, "--model", "tiny", "-o", str(other),
              "--num_iterations", "1", *FAST])  # fmt: skip
    run = copy(finished, tmp_path)
    for folder in run.glob("checkpoint-*"):
        shutil.rmtree(folder)
    (theirs,) = other.glob("checkpoint-*")
    shutil.copytree(theirs, run / theirs.name)
    code, _, err = run_cli(["train", "--resume", "-o", str(run)], capsys)
    assert code == 2, err
    assert f"cannot resume from {run / theirs.name}: it belongs to another run (run id " in err


@pytest.mark.parametrize(("field", "value"), [("learning_rate", 0.5), ("num_ppo_epochs", 1)])
def test_an_edited_config_is_refused_naming_the_field(field, value, finished, tmp_path, capsys):
    run = copy(finished, tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    saved = config[field]
    (run / "config.yaml").write_text(yaml.safe_dump({**config, field: value}))
    code, _, err = run_cli(["train", "--resume", "-o", str(run), "--num_iterations", "3"], capsys)
    assert code == 2, err
    assert f"it was written with other settings ({field} {saved!r} -> {value!r})" in err


def test_a_checkpoint_changed_in_place_is_not_resumed(finished, tmp_path, capsys, caplog):
    run = copy(finished, tmp_path)
    newest = max(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    weights = newest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-4:] = b"\x00\x00\x80\x7f"  # the last float of the weights, now inf: same size
    weights.write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="hfrl.trainers.checkpoints"):
        code, _, err = run_cli(["train", "--resume", "-o", str(run), "--num_iterations", "3"], capsys)
    assert code == 0, err  # resumed from the older, intact checkpoint
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"skipped {newest.name}: damaged: model.safetensors changed after the checkpoint was written" in warning
