"""``hfrl chat``: talk to a trained model, interactively or with --message.

hfrl chat runs/daily_dialog-nlpo
"""

from __future__ import annotations

from typing import Annotated

import typer

from hfrl.cli._options import BaseModelOpt, ModelArg, SeedOpt, TrustCodeOpt

HELP = """Chat with a run or a model. The dialogue history is kept and becomes the prompt.

Interactive: type a message; `reset` clears the history, `quit` (or end of input) leaves.
With --message (repeatable) the messages are sent in order as one dialogue; each is printed after
"you> " and its reply after "bot> ", as in the interactive session. Prompt formats: chat-template
(the tokenizer's), eou (RL4LMs' DailyDialog context: utterances joined by <EOU>), plain (one
utterance per line); auto picks the chat template if there is one, eou for a dialogue task, else plain.

\b
Examples:
  hfrl chat runs/daily_dialog-nlpo
  hfrl chat tiny --message "1 2 3" --message "4 5"
  hfrl chat runs/daily_dialog-nlpo --format eou --context-size 5 --sample
"""

MessageOpt = Annotated[
    list[str] | None, typer.Option("--message", "-m", help="Send this message and print the reply (repeatable).")
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="auto, chat-template, eou or plain.")]
ContextOpt = Annotated[
    int | None, typer.Option("--context-size", help="Utterances kept in the prompt (0: all; default 5 for eou).")
]
TokensOpt = Annotated[int | None, typer.Option("--max-new-tokens", help="Reply length limit in tokens.")]
SampleOpt = Annotated[bool, typer.Option("--sample", help="Sample with the run's settings instead of greedy.")]


def chat(
    model: ModelArg,
    message: MessageOpt = None,
    fmt: FormatOpt = "auto",
    context_size: ContextOpt = None,
    max_new_tokens: TokensOpt = None,
    sample: SampleOpt = False,
    seed: SeedOpt = None,
    base_model: BaseModelOpt = None,
    trust_code: TrustCodeOpt = False,
) -> None:
    from hfrl.runs.chat import ChatSession, chat_loop
    from hfrl.utils.trust import trusted_code

    with trusted_code(trust_code):
        session = ChatSession.from_pretrained(model, base_model, fmt, context_size, max_new_tokens, sample)
    import torch  # after the run was opened and checked: a bad folder is one line before torch is imported

    torch.manual_seed(seed or 0)
    if message:
        for text in message:  # labelled as in the interactive session
            typer.echo(f"you> {text}")
            typer.echo(f"bot> {session.reply(text) or '(empty reply)'}")
        return
    typer.echo(f"chatting with {model} (format {session.format}); type `reset` to start over, `quit` to leave")
    chat_loop(session, read=input, write=typer.echo)
