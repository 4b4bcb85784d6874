"""Option and argument types shared by the commands (declared once, as huggingface_hub's CLI does)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

ModelArg = Annotated[
    str, typer.Argument(help="Run directory, model directory, .gguf file, Hub id, or tiny / tiny-t5 / smollm2.")
]
RunArg = Annotated[str, typer.Argument(help="Run directory (from hfrl train) or a checkpoint inside it.")]
TaskOpt = Annotated[
    str | None,
    typer.Option(
        "--task",
        "-t",
        help="Task name (hfrl list tasks), a data file or folder, or module:attr (eval: default the run's own task).",
    ),
]
OutputDirOpt = Annotated[
    str | None,
    typer.Option(
        "--output-dir",
        "-o",
        help="Where to write (train: the run directory, default runs/TASK-ALG, or runs/TASK-ALG-2, -3... when that "
        "holds a run; eval: default the run's directory, or runs/eval-NAME).",
    ),
]
AlgOpt = Annotated[
    str | None,
    typer.Option("--alg", "-a", help="Algorithm (hfrl list algs; default ppo); hfrl list fields lists its config."),
]
MergeOpt = Annotated[
    bool, typer.Option("--merge", help="Merge the PEFT adapter into its base model (the full model is written).")
]
BaseModelOpt = Annotated[
    str | None,
    typer.Option(
        "--base-model", help="Base model of an adapter (default: the one it was trained on; a Hub id or path)."
    ),
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Random seed.")]
TrustCodeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-code",
        help="Let the run's config.yaml (or --config file) name code to run: module:attr tasks, rewards or metrics, "
        "`evaluate` modules. Off: such a file is refused. Only for files you trust (like trust_remote_code).",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Hub id, local directory, .gguf file, or built-in tiny / tiny-t5 / smollm2."),
]
TaskArgOpt = Annotated[
    list[str] | None, typer.Option("--task-arg", help="KEY=VALUE argument of the task's builder (repeatable).")
]


def parse_task_args(items: list[str]) -> dict[str, Any]:
    """``["reward_config=openrl", "max_samples=100"]`` -> ``{"reward_config": "openrl", "max_samples": 100}``
    (values read as YAML)."""
    from hfrl.runs.run_config import load_yaml

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--task-arg takes KEY=VALUE, got {item!r}")
        name = key.strip().replace("-", "_")
        out[name] = load_yaml(value, f"--task-arg {name}") if value != "" else ""
    return out
