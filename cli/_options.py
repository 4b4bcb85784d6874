"""Option and argument types shared by the commands (declared once, as huggingface_hub's CLI does)."""

from __future__ import annotations

from typing import Annotated

import typer

ModelArg = Annotated[
    str, typer.Argument(help="Run directory, model directory, .gguf file, Hub id, or tiny / tiny-t5 / smollm2.")
]
RunArg = Annotated[str, typer.Argument(help="Run directory (from hfrl train) or a checkpoint inside it.")]
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
