"""CommonGen's repeat penalty (RL4LMs ``CommonGenPenaltyShapingFunction``): -1 when a generation copies
the prompt instead of writing a sentence, else 0.

A completion is penalised when it contains, case-insensitively, the concept list of its prompt (the
text after ``prefix``, without its final character, as RL4LMs takes it), the prefix itself, or the
words ``generate`` or ``sentence``.

    from hfrl.metrics.commongen import CommonGenRepeatPenalty
"""

from __future__ import annotations

from typing import Any

from hfrl.metrics.base import SampleMetric, text_of

PREFIX = "generate a sentence with: "


def repeat_penalty(prompt: str, completion: str, prefix: str = PREFIX, penalty: float = -1.0) -> float:
    """``penalty`` when ``completion`` repeats the prompt's concepts or instruction, else 0.

    >>> repeat_penalty("generate a sentence with: dog frisbee catch.", "dog frisbee catch the dog")
    -1.0
    >>> repeat_penalty("generate a sentence with: dog frisbee catch.", "The dog catches a frisbee.")
    0.0
    """
    text = completion.lower()
    concepts = prompt.split(prefix, 1)[1][:-1] if prefix in prompt else prompt.strip()
    copied = bool(concepts.strip()) and concepts.lower() in text
    if copied or prefix.lower() in text or "generate" in text or "sentence" in text:
        return float(penalty)
    return 0.0


class CommonGenRepeatPenalty(SampleMetric):
    """CommonGen repeat penalty (RL4LMs): -1 when the completion copies the concepts or the instruction.

    >>> CommonGenRepeatPenalty()(prompts=["generate a sentence with: a b."], completions=["x a b"])
    {'commongen_repeat_penalty': -1.0}
    """

    name = "commongen_repeat_penalty"

    def __init__(self, prefix: str = PREFIX, penalty: float = -1.0) -> None:
        self.prefix, self.penalty = prefix, penalty

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        penalties = [
            repeat_penalty(text_of(p), c, self.prefix, self.penalty) for p, c in zip(prompts, completions, strict=True)
        ]
        return {self.name: penalties}
