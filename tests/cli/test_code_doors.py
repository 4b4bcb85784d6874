"""Every door a library opens to code is shut to files: generation and model-init keyword arguments,
a model folder's own code (``auto_map``, with transformers' "[y/N]" prompt), a module name with an
empty attribute. Each payload below creates a marker file if its code runs; each is tried on every
command that reads a run (eval, chat, export, push, train --config, train --resume, python -m hfrl.cli):
exit 2, one line naming the field and --trust-code, and the marker never appears. A positive control
per door shows the payload is live: with --trust-code (the user's own opt-in) it does run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """A real run directory from `hfrl train` (tiny model, one iteration, a checkpoint to resume)."""
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("doors") / "run"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--save_every", "1", *FAST])
    assert exc.value.code in (0, None)
    return out


def touch_code(marker: Path) -> str:
    return f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n"


def downloaded(clean_run: Path, tmp_path: Path, edit: dict) -> Path:
    """A copy of the run, its config.yaml edited as an attacker would."""
    run = tmp_path / "downloaded-run"
    shutil.copytree(clean_run, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **edit}))
    return run


def with_custom_generate(run: Path, marker: Path) -> None:
    """transformers 5's ``generate(custom_generate=FOLDER, trust_remote_code=True)`` imports
    FOLDER/custom_generate/generate.py."""
    (run / "custom_generate").mkdir(exist_ok=True)
    (run / "custom_generate" / "generate.py").write_text(
        touch_code(marker) + "def generate(model, *args, **kwargs):\n    raise SystemExit(0)\n"
    )


def with_auto_map(folder: Path, marker: Path, model_type: str = "gpt2") -> None:
    """A model folder whose config.json names its own classes (a module beside it that touches the marker)."""
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = model_type
    config["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig",
                          "AutoModelForCausalLM": "modeling_evil.EvilModel"}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_evil.py").write_text(touch_code(marker) + "class EvilConfig: ...\n")
    (folder / "modeling_evil.py").write_text(touch_code(marker) + "class EvilModel: ...\n")


GENERATION = {"do_sample": False, "custom_generate": "RUN", "trust_remote_code": True}


def generation_payload(run: Path, field: str) -> dict:
    return {field: {k: (str(run) if v == "RUN" else v) for k, v in GENERATION.items()}}


COMMANDS = {
    "eval": lambda run, tmp: ["eval", str(run), "--max-samples", "2"],
    "chat": lambda run, tmp: ["chat", str(run), "--message", "hi"],
    "export": lambda run, tmp: ["export", str(run), "--out", str(tmp / "exported")],
    "push": lambda run, tmp: ["push", str(run), "--repo-id", "me/run"],
    "train --config": lambda run, tmp: ["train", "--config", str(run / "config.yaml"), "-o", str(tmp / "again"), *FAST],
    "train --resume": lambda run, tmp: ["train", "--resume", "-o", str(run), "--num_iterations", "2"],
}


def assert_refused(code: int, err: str, field: str, marker: Path) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 2, err  # one line, and the HFRL_DEBUG hint
    assert field in err.splitlines()[0] and "--trust-code" in err.splitlines()[0], err
    assert not marker.exists()


@pytest.mark.parametrize("field", ["eval_generation_kwargs", "generation_kwargs"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_generation_kwargs_in_a_file_never_load_code(command, field, clean_run, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    run = tmp_path / "placeholder"
    run = downloaded(clean_run, tmp_path, {})
    with_custom_generate(run, marker)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **generation_payload(run, field)}))
    code, _, err = run_cli(COMMANDS[command](run, tmp_path), capsys)
    assert_refused(code, err, f"{field}.", marker)


def test_custom_generate_is_live_with_the_users_opt_in(clean_run, tmp_path, capsys):
    """The positive control: the same run evaluated with --trust-code runs generate.py."""
    marker = tmp_path / "MARKER"
    run = downloaded(clean_run, tmp_path, {})
    with_custom_generate(run, marker)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **generation_payload(run, "eval_generation_kwargs")}))
    run_cli(["eval", str(run), "--max-samples", "2", "--trust-code"], capsys)
    assert marker.exists()


@pytest.mark.parametrize("command", ["train --config", "train --resume"])
def test_model_init_kwargs_in_a_file_never_trust_remote_code(command, clean_run, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    model = tmp_path / "model"
    shutil.copytree(clean_run, model)
    with_auto_map(model, marker)
    run = downloaded(clean_run, tmp_path, {"model": str(model), "model_init_kwargs": {"trust_remote_code": True}})
    code, _, err = run_cli(COMMANDS[command](run, tmp_path), capsys)
    assert_refused(code, err, "model_init_kwargs.trust_remote_code", marker)


def test_trust_remote_code_on_the_command_line_needs_trust_code(tmp_path, capsys):
    """Even typed: --trust-code is the one switch for code, so a pasted option cannot turn it on in passing."""
    marker = tmp_path / "MARKER"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "run"), *FAST,
            "--model_init_kwargs", "{trust_remote_code: true}"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert_refused(code, err, "--model_init_kwargs sets trust_remote_code=True", marker)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["eval", "chat", "export", "push", "train --model"])
def test_a_model_folder_naming_its_own_code_is_refused(command, clean_run, tmp_path, capsys):
    """A model folder (not a run) whose config.json has an auto_map: refused before transformers asks."""
    marker = tmp_path / "MARKER"
    model = tmp_path / "model"
    shutil.copytree(clean_run, model)
    (model / "config.yaml").unlink()  # a bare model folder
    with_auto_map(model, marker)
    args = {
        "eval": ["eval", str(model), "--task", "numbers", "--max-samples", "2", "-o", str(tmp_path / "ev")],
        "chat": ["chat", str(model), "--message", "hi"],
        "export": ["export", str(model), "--out", str(tmp_path / "exported")],
        "push": ["push", str(model), "--repo-id", "me/model"],
        "train --model": ["train", "--task", "numbers", "--model", str(model), "-o", str(tmp_path / "r"), *FAST],
    }[command]
    code, _, err = run_cli(args, capsys)
    assert_refused(code, err, "auto_map", marker)


def test_the_yes_no_prompt_is_never_asked(clean_run, tmp_path):
    """An unknown model_type with an auto_map: transformers would ask "[y/N]" on the terminal, and
    `echo y |` answered it. hfrl passes trust_remote_code explicitly: nothing is asked, nothing runs."""
    marker = tmp_path / "MARKER"
    model = tmp_path / "model"
    shutil.copytree(clean_run, model)
    with_auto_map(model, marker, model_type="evilnet")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "hfrl.cli", "eval", str(model), "--max-samples", "2"],
                          input="y\ny\ny\n", capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert_refused(proc.returncode, proc.stderr, "auto_map", marker)
    assert "[y/N]" not in proc.stdout + proc.stderr
    # the positive control: trusted, the folder's code is imported
    subprocess.run([sys.executable, "-m", "hfrl.cli", "eval", str(model), "--max-samples", "2", "--trust-code"],
                   capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert marker.exists()


@pytest.mark.parametrize(("name", "command"), [("evil:", "eval"), ("this:", "export"), ("evil:run", "eval")])
def test_a_module_name_with_an_empty_attribute_is_code_too(name, command, clean_run, tmp_path):
    """`task: 'evil:'` imports the module evil; under `python -m`, the current folder is on sys.path."""
    marker = tmp_path / "MARKER"
    run = downloaded(clean_run, tmp_path, {"task": name})
    (run / "evil.py").write_text(touch_code(marker) + "def run(**kwargs):\n    pass\n")
    args = {"eval": ["eval", ".", "--split", "test", "--max-samples", "2"], "export": ["export", ".", "--out", "x"]}
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "hfrl.cli", *args[command]], cwd=run, capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip
    assert_refused(proc.returncode, proc.stderr, f"(task: {name!r})", marker)
    assert "Zen of Python" not in proc.stdout


def test_the_resolvers_and_the_check_agree_on_what_is_code():
    """The check flags exactly what a resolver imports: one predicate, used by both."""
    from hfrl.tasks import task_builder
    from hfrl.utils.registry import is_code_path
    from hfrl.utils.trust import names_code

    for name in ["this:", "os:system", "hfrl.testing:digit_reward", "a.b:", "x:y.z"]:
        assert is_code_path(name) and names_code({"task": name}) == ("task", name)
    for name in ["numbers", "data/my.jsonl", "http://x", "org/dataset", ":x", "C:\\data"]:
        assert not is_code_path(name) and names_code({"task": name}) is None
    import hfrl.testing

    assert task_builder("hfrl.testing:digit_reward") is hfrl.testing.digit_reward  # the resolver imports it


def test_every_pretrained_and_generate_call_passes_trust_remote_code():
    """No call in hfrl loads a model, tokenizer or config, or generates, without naming
    ``trust_remote_code``. The exceptions: PEFT's adapter loading, which opens no code door, hfrl's
    own ``ChatSession.from_pretrained`` (it loads through :func:`hfrl.runs.run_dir.Run.load`) and TRL's
    ``VLLMGeneration.generate`` (``self.engine``: its model was loaded with ``trust_remote_code`` when
    :meth:`hfrl.trainers.online.vllm_rollout.VLLMRollouts.for_trainer` built it), and the CPU engine's sync
    check (``llm``: the ``vllm.LLM`` that :class:`hfrl.trainers.online.vllm_cpu.CPUVLLMGeneration` built with
    ``trust_remote_code``)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    missing = []
    for folder in ("hfrl", "tasks", "cards", "cli"):
        for path in (root / folder).rglob("*.py"):
            if "fixtures" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                if node.func.attr not in ("from_pretrained", "generate", "pipeline"):
                    continue
                owner = ast.unparse(node.func.value)
                if owner in ("PeftModel", "PeftConfig", "ChatSession", "self.engine", "llm"):
                    continue
                keywords = {k.arg for k in node.keywords}
                if "trust_remote_code" not in keywords and None not in keywords:  # **kwargs: checked where built
                    missing.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.func)}")
    assert not missing, missing
