"""The ``hfrl`` command line: a root typer app mounting one small module per command.

    hfrl --help
    hfrl train --task numbers --alg ppo --model tiny

Errors (:func:`main`): bad input prints one line and exits with code 2; a failure while running
(a diverging run, a model or data set that cannot be loaded) one line and code 1; anything else is
a bug, not the user's input, and shows its traceback (code 1); a library's panic (a ``BaseException`` that
is no ``Exception``, such as pyo3's ``PanicException``) one line and code 1. ``HFRL_DEBUG=1`` shows every
traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
import typer.core

from hfrl.cli import chat, check, eval_cmd, export, list_cmd, push, train

app = typer.Typer(
    name="hfrl",
    help="Reinforcement-learning fine-tuning of language models (PPO and friends) on the Hugging Face stack.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: paragraphs re-flowed, \b blocks kept as written
)


def _version(value: bool) -> None:
    if value:
        from hfrl import __version__

        typer.echo(f"hfrl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Reinforcement-learning fine-tuning of language models (PPO and friends) on the Hugging Face stack."""


class TrainCommand(typer.core.TyperCommand):
    """``hfrl train``, whose help lists the fields of ``--alg ppo`` (:func:`hfrl.cli.train.help_text`), read
    when the help is shown, not when any command starts: after an install or upgrade the first read of
    the fields builds them from the config classes (:mod:`hfrl.trainers.schema`: seconds, torch)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:  # click's types (recent typer vendors its own click)
        self.help = train.help_text()
        super().format_help(ctx, formatter)


app.command(
    name="train",
    cls=TrainCommand,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help=train.HELP,  # its first line is what `hfrl --help` shows
)(train.train)
app.command(name="list", help=list_cmd.HELP)(list_cmd.list_)
app.command(name="eval", help=eval_cmd.HELP)(eval_cmd.eval_)
app.command(name="push", help=push.HELP)(push.push)
app.command(name="export", help=export.HELP)(export.export)
app.command(name="chat", help=chat.HELP)(chat.chat)
app.command(name="check", help=check.HELP)(check.check)


# Bad input, exit code 2: a bad value (ValueError, and hfrl's own classes derived from it: UnknownNameError,
# UntrustedCodeError, ConfigFileError, RewardError) or a path that does not exist. Click's usage errors
# (a missing option value, a bad option type) are reported by typer itself, also with code 2.
BAD_INPUT: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)
# A failure while running, exit code 1, with its one-line message: a diverging run (NonFiniteError, a
# FloatingPointError), a model, data set or classifier that cannot be loaded or reached (OSError, such
# as ClassifierUnavailableError, ConnectionError), a missing optional package (ImportError), a resource
# hfrl reports as missing (RuntimeError). Anything else (TypeError, KeyError, AttributeError...) is a
# bug in hfrl or a library, not the user's input: its traceback is shown.
RUN_FAILURE: tuple[type[BaseException], ...] = (FloatingPointError, OSError, ImportError, RuntimeError)
# A damaged file met inside a library (safetensors' own error class, a pickle that does not unpickle).
DAMAGED_FILE = ("SafetensorError", "UnpicklingError")


# The HTTP client's own errors (httpx's are no OSError): the network failed, not hfrl
NETWORK_MODULES = ("httpx", "httpcore", "httpx2", "httpcore2", "requests", "urllib3")


def network_error(err: BaseException) -> bool:
    """Whether ``err`` (or what it was raised from) is the HTTP client's error: the network failed."""
    seen = 0
    cause: BaseException | None = err
    while cause is not None and seen < 5:
        if any(c.__module__.split(".")[0] in NETWORK_MODULES for c in type(cause).__mro__[:-2]):
            return True
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return False


NETWORK_HINT = (
    "offline, set HF_HUB_OFFLINE=1 and use cached or local models and data (`hfrl check --task TASK` lists what a "
    "run needs; HFRL_DATA_DIR points the tasks at local copies)"
)


def exit_code(err: BaseException) -> int | None:
    """2 for bad input, 1 for a failure while running, None for a bug (show the traceback)."""
    if network_error(err) and not isinstance(err, BAD_INPUT):
        return 1
    if isinstance(err, BAD_INPUT):
        return 2
    if type(err).__name__ in DAMAGED_FILE:  # raised by a library reading a damaged file: not hfrl's bug
        return 1
    return 1 if isinstance(err, RUN_FAILURE) else None


def main(argv: list[str] | None = None) -> None:
    """Entry point with the one error boundary. The current folder is off ``sys.path`` for the whole
    command (:func:`hfrl.utils.trust.cwd_off_path`: ``python -m hfrl.cli`` puts it there), and no message
    shows a token (:func:`hfrl.utils.secrets.mask_tokens`)."""
    from hfrl.utils.secrets import mask_tokens
    from hfrl.utils.trust import cwd_off_path

    try:
        with cwd_off_path():
            app(args=argv)  # standalone: typer reports its own usage errors (exit code 2)
    except Exception as err:  # noqa: BLE001 - the CLI's single error boundary
        code = exit_code(err)
        if code is None or os.environ.get("HFRL_DEBUG"):
            raise  # a bug: the traceback, exit code 1
        if getattr(err, "said_by_first_process", False):  # a stop every process took; the first one says it
            sys.exit(code)
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if network_error(err) and not isinstance(err, (*BAD_INPUT, *RUN_FAILURE)):  # the client's own error
            message = f"cannot reach the Hugging Face Hub ({type(err).__name__}: {message}); {NETWORK_HINT}"
        sys.stderr.write(f"error: {mask_tokens(message)}\n(set HFRL_DEBUG=1 for the traceback)\n")
        sys.exit(code)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise  # Ctrl-C, an exit code, a generator's close: Python's own, as they are
    except BaseException as err:  # noqa: BLE001 - a library's panic that escapes except Exception
        # pyo3's PanicException (a tokenizer.json whose pre-tokenizer regex backtracks: "Onig: retry-limit-in-match
        # over") derives from BaseException: a library stopped on what it read, one line and code 1
        if os.environ.get("HFRL_DEBUG"):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else "no message"
        sys.stderr.write(
            f"error: a library stopped ({type(err).__name__}: {mask_tokens(first)}); check the files it read "
            "(a model's tokenizer.json, a data file)\n(set HFRL_DEBUG=1 for the traceback)\n"
        )
        sys.exit(1)
