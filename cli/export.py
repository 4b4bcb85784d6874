"""``hfrl export``: a run as a plain transformers directory (the adapter merged when asked).

hfrl export runs/numbers-ppo --out exported/numbers-ppo
"""

from __future__ import annotations

from typing import Annotated

import typer

from hfrl.cli._options import BaseModelOpt, MergeOpt, RunArg, TrustCodeOpt

HELP = """Export a run as a plain transformers directory that AutoModel*.from_pretrained loads.

Writes the model (or the PEFT adapter), the tokenizer, the model card README.md, the reward curve,
config.yaml and the evaluation results; not the value head, optimizer state or training_args.bin.
--merge merges a PEFT adapter into its base model (peft's merge_and_unload) and writes the full model.

\b
Examples:
  hfrl export runs/numbers-ppo --out exported/numbers-ppo
  hfrl export runs/imdb-ppo-lora --out exported/imdb-ppo --merge
  hfrl export runs/imdb-ppo-lora --out exported/imdb-ppo --merge --base-model ./gpt2-local
"""

OutOpt = Annotated[str, typer.Option("--out", "-o", help="New (or empty) directory to write.")]


def export(
    run: RunArg, out: OutOpt, merge: MergeOpt = False, base_model: BaseModelOpt = None, trust_code: TrustCodeOpt = False
) -> None:
    from hfrl.runs.hub import export_run
    from hfrl.utils.trust import trusted_code

    with trusted_code(trust_code):
        path = export_run(run, out, merge=merge, base_model=base_model)
    typer.echo(f"exported {run} to {path}" + (" (adapter merged)" if merge else ""))
