"""Talk to a trained model: a dialogue loop that keeps the history.

    hfrl chat runs/daily_dialog-nlpo
    hfrl chat tiny --message "hello" --message "and then?"

    from hfrl.runs.chat import ChatSession
    session = ChatSession.from_pretrained("runs/daily_dialog-nlpo")
    print(session.reply("Hi, how are you?"))

The history becomes the prompt in one of three formats: ``chat-template`` (the tokenizer's chat
template, user/assistant turns), ``eou`` (RL4LMs' DailyDialog context: the last ``context_size``
utterances joined by ``<EOU>``, then `` <EOU>``; the reply ends at the next ``<EOU>``) or ``plain``
(utterances one per line; the reply ends at the first newline). ``auto`` picks the chat template
when the tokenizer has one, ``eou`` for a run trained on a dialogue task, else ``plain``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

EOU = "<EOU>"  # RL4LMs' DailyDialog end-of-utterance marker
FORMATS = ("auto", "chat-template", "eou", "plain")
RESET, QUIT = ("reset", "/reset"), ("quit", "exit", "/quit", "/exit")


def check_options(fmt: str, context_size: int | None) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown chat format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if context_size is not None and context_size < 0:
        raise ValueError(f"--context-size must be >= 0 (0: the whole history), got {context_size}")


def resolve_format(fmt: str, tokenizer: Any, task: str | None) -> str:
    if fmt != "auto":
        if fmt == "chat-template" and not getattr(tokenizer, "chat_template", None):
            raise ValueError("--format chat-template: this tokenizer has no chat template; use eou or plain")
        return fmt
    if getattr(tokenizer, "chat_template", None):
        return "chat-template"
    return "eou" if task and "dialog" in str(task).lower() else "plain"


class ChatSession:
    """A model, its tokenizer, a prompt format and the dialogue so far (``history``: utterances,
    the user's first, then alternating)."""

    def __init__(
        self,
        lm: Any,
        tokenizer: Any,
        format: str = "auto",
        context_size: int | None = None,
        settings: dict[str, Any] | None = None,
        task: str | None = None,
    ) -> None:
        from hfrl.trainers.evaluation import eval_settings

        check_options(format, context_size)
        self.lm, self.tokenizer = lm, tokenizer
        self.format = resolve_format(format, tokenizer, task)
        # RL4LMs' DailyDialog (GRUE) keeps 5 utterances of context; other formats keep everything.
        self.context_size = context_size if context_size is not None else (5 if self.format == "eou" else 0)
        self.settings = eval_settings(settings or {})
        self.history: list[str] = []

    @classmethod
    def from_pretrained(
        cls,
        model: str | os.PathLike[str],
        base_model: str | None = None,
        format: str = "auto",
        context_size: int | None = None,
        max_new_tokens: int | None = None,
        sample: bool = False,
    ) -> ChatSession:
        """A session on a run directory, model directory, Hub id or built-in model, with the run's
        evaluation generation settings (greedy unless ``sample``)."""
        from hfrl.runs.run_dir import open_run, refuse_scorer

        check_options(format, context_size)
        if max_new_tokens is not None and max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {max_new_tokens}")
        run = open_run(model)
        refuse_scorer(run, "chat")  # a reward model loaded as a causal LM answers with replacement characters
        lm, tokenizer = run.load(base_model=base_model)
        settings = dict(run.config)
        if max_new_tokens is not None:
            settings["eval_max_new_tokens"] = max_new_tokens
        if sample:
            settings["eval_generation_kwargs"] = {**run.config.get("generation_kwargs", {}), "do_sample": True}
            settings["eval_generation_kwargs"].pop("min_new_tokens", None)
        return cls(lm, tokenizer, format, context_size, settings, task=run.task)

    def _window(self) -> list[str]:
        return self.history[-self.context_size :] if self.context_size else list(self.history)

    def prompt(self) -> str | list[dict[str, str]]:
        """The prompt for the next reply, in the session's format."""
        turns = self._window()
        if self.format == "chat-template":
            offset = len(self.history) - len(turns)  # keep roles aligned when the window cuts the history
            roles = ("user", "assistant")
            return [{"role": roles[(offset + i) % 2], "content": t} for i, t in enumerate(turns)]
        if self.format == "eou":
            return EOU.join(turns) + " " + EOU
        return "\n".join(turns) + "\n"

    def _clean(self, text: str) -> str:
        if self.format == "eou":
            text = text.split(EOU)[0]
        elif self.format == "plain":
            text = text.lstrip("\n").split("\n")[0]
        return text.strip()

    def reply(self, message: str) -> str:
        """Add the user's ``message``, generate the model's reply, add it, return it."""
        from hfrl.runs.run_eval import generate_completions

        self.history.append(message.strip())
        completion = generate_completions(self.lm, self.tokenizer, [self.prompt()], self.settings, batch_size=1)[0]
        answer = self._clean(completion)
        self.history.append(answer)
        return answer

    def reset(self) -> None:
        self.history.clear()


def chat_loop(session: ChatSession, read: Callable[[str], str] = input, write: Callable[[str], Any] = print) -> int:
    """Read messages until ``quit``/``exit`` or end of input; ``reset`` clears the history.
    Returns the number of replies."""
    replies = 0
    while True:
        try:
            line = read("you> ")
        except (EOFError, KeyboardInterrupt):
            write("")
            break
        message = line.strip()
        if not message:
            continue
        if message.lower() in QUIT:
            break
        if message.lower() in RESET:
            session.reset()
            write("(history cleared)")
            continue
        write(f"bot> {session.reply(message) or '(empty reply)'}")
        replies += 1
    return replies


__all__ = ["EOU", "FORMATS", "ChatSession", "chat_loop"]
