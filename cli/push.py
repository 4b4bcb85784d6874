"""``hfrl push``: upload a run's model or adapter with its model card to the Hugging Face Hub.

hfrl push runs/numbers-ppo --repo-id me/numbers-ppo
"""

from __future__ import annotations

from typing import Annotated

import typer

from hfrl.cli._options import BaseModelOpt, MergeOpt, RunArg, TrustCodeOpt

HELP = """Push a run to the Hugging Face Hub (needs the network).

Uploads, in one commit: the model or the PEFT adapter (or, with --merge, the adapter merged into its
base), the tokenizer, the model card README.md (rendered for the repo), reward_curve.png, config.yaml
and the evaluation results eval/*.json. The token comes from HF_TOKEN or `hf auth login`; it is never
written to any file, and nothing containing it is sent.

\b
Examples:
  hfrl push runs/numbers-ppo --repo-id me/numbers-ppo
  hfrl push runs/imdb-ppo-lora --repo-id me/gpt2-imdb-ppo --private
  hfrl push runs/imdb-ppo-lora --repo-id me/gpt2-imdb-ppo-merged --merge
"""

RepoOpt = Annotated[str, typer.Option("--repo-id", "-r", help="Hub model repo, NAMESPACE/NAME (created if missing).")]
PrivateOpt = Annotated[bool, typer.Option("--private", help="Create the repo private (no effect if it exists).")]
MessageOpt = Annotated[str | None, typer.Option("--commit-message", "-m", help="Commit message.")]
RevisionOpt = Annotated[str | None, typer.Option("--revision", help="Branch to push to (default: main).")]


def push(
    run: RunArg,
    repo_id: RepoOpt,
    private: PrivateOpt = False,
    merge: MergeOpt = False,
    base_model: BaseModelOpt = None,
    commit_message: MessageOpt = None,
    revision: RevisionOpt = None,
    trust_code: TrustCodeOpt = False,
) -> None:
    from hfrl.runs.hub import push_run
    from hfrl.utils.trust import trusted_code

    with trusted_code(trust_code):
        info = push_run(
            run,
            repo_id,
            private=private or None,
            merge=merge,
            commit_message=commit_message,
            revision=revision,
            base_model=base_model,
        )
    typer.echo(f"pushed {run} to {info.repo_url}: {info.commit_url}")
