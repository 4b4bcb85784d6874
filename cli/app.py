"""The ``hfrl`` command line: a root typer app mounting one small module per command.

    hfrl --help
    hfrl train --task numbers --alg ppo --model tiny

Errors print one line and exit with code 2 for bad input (unknown names, bad config) or 1 for a
failure while running; ``HFRL_DEBUG=1`` shows the full traceback.
"""

from __future__ import annotations

import os
import sys

import typer

from hfrl.cli import chat, eval_cmd, export, list_cmd, push, train

app = typer.Typer(
    name="hfrl",
    help="Reinforcement-learning fine-tuning of language models (PPO and friends) on the Hugging Face stack.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: paragraphs re-flowed, \b blocks kept as written
)
app.command(
    name="train",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help=train.HELP,
)(train.train)
app.command(name="list", help=list_cmd.HELP)(list_cmd.list_)
app.command(name="eval", help=eval_cmd.HELP)(eval_cmd.eval_)
app.command(name="push", help=push.HELP)(push.push)
app.command(name="export", help=export.HELP)(export.export)
app.command(name="chat", help=chat.HELP)(chat.chat)


def _is_usage_error(err: BaseException) -> bool:
    from hfrl.registry import UnknownNameError

    return isinstance(err, (UnknownNameError, ValueError, FileNotFoundError, KeyError, TypeError))


def main(argv: list[str] | None = None) -> None:
    """Entry point with the one error boundary."""
    try:
        app(args=argv)  # standalone: typer reports its own usage errors (exit code 2)
    except Exception as err:  # noqa: BLE001 - the CLI's single error boundary
        if os.environ.get("HFRL_DEBUG"):
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        sys.stderr.write(f"error: {message}\n(set HFRL_DEBUG=1 for the traceback)\n")
        sys.exit(2 if _is_usage_error(err) else 1)
