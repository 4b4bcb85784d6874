"""OpenAssistant reward models' input format and the A-LoL HH reward through one (Baheti et al. 2024, the
``hh`` task's reward; PRO / LoL-RL's ``metrics_hh.py``): the rewards' layer, so that the rewards' registry
names no module of a layer above it (``hfrl.tasks.hh`` imports them from here)."""

from __future__ import annotations

import re
from typing import Any

from hfrl.rewards.from_metrics import MetricReward

_TURN = re.compile(r"\n\n(Human|Assistant):")


def to_oasst(prompt: str, completion: str, eos: str = "<|endoftext|>") -> str:
    """An HH dialogue and a response in OpenAssistant reward models' format (PRO / LoL-RL's
    ``metrics_hh.py``); the response is cut at a generated ``Human:`` turn, as LoL-RL does.

    >>> to_oasst("\\n\\nHuman: Hi\\n\\nAssistant: Hey\\n\\nHuman: Help?\\n\\nAssistant:", " Sure.\\n\\nHuman: x")
    '<|prompter|>Hi<|endoftext|><|assistant|>Hey<|endoftext|><|prompter|>Help?<|endoftext|><|assistant|>Sure.<|endoftext|>'
    """
    parts = _TURN.split(prompt)  # ["", "Human", " Hi", "Assistant", " Hey", ..., "Assistant", ""]
    turns = [(role, text.strip()) for role, text in zip(parts[1::2], parts[2::2], strict=True)]
    if turns and turns[-1][0] == "Assistant" and not turns[-1][1]:
        turns.pop()
    response = completion.split("\n\nHuman:")[0].split("\nHuman:")[0].strip()
    turns.append(("Assistant", response))
    tag = {"Human": "<|prompter|>", "Assistant": "<|assistant|>"}
    return "".join(f"{tag[role]}{text}{eos}" for role, text in turns)


class OpenAssistantReward(MetricReward):
    """The A-LoL HH reward: ``sigmoid`` of an OpenAssistant reward model's score of the dialogue and
    response (``learned_classifier`` with ``output: probability`` on the OpenAssistant format).

    >>> OpenAssistantReward()(prompts=["\\n\\nHuman: Hi\\n\\nAssistant:"], completions=[" Hello!"])  # doctest: +SKIP
    [0.73...]
    """

    __name__ = "oasst_reward"

    def __init__(
        self,
        model: str = "OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5",
        eos: str = "<|endoftext|>",
        max_length: int = 1024,
        **args: Any,
    ) -> None:
        args.setdefault("output", "probability")
        super().__init__("learned_classifier", model=model, input="completion", max_length=max_length, **args)
        self.__name__, self.eos = "oasst_reward", eos

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        texts = [to_oasst(p, c, self.eos) for p, c in zip(prompts, completions, strict=True)]
        return super().__call__(prompts, texts, **columns)


__all__ = ["OpenAssistantReward", "to_oasst"]
