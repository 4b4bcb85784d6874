"""The COMET critic (West et al. 2022, "Symbolic Knowledge Distillation"): the reward of the
Leftover-Lunch ``comet`` task, the probability that a (head, relation, tail) inference is valid.

The critic is a RoBERTa-large (roberta-large-mnli) with a custom classification head, converted from
Keras to PyTorch by LoL-RL's ``convert_keras_roberta_to_huggingface.py`` into one local folder:

- ``config.json``, the weights and the tokenizer files of a ``RobertaModel`` with its pooler;
- ``custom_roberta_classification_head.pt``: the head's state dict, ``dense`` (``Linear(1024, 512)``)
  and ``out_proj`` (``Linear(512, 1)``); shape 1024 -> 512 -> 1.

Score (LoL-RL ``utils/comet_utils.py``): ``sigmoid(out_proj(gelu(dense(pooler_output))))`` of the
text pair ``(head, "{relation phrase} {tail}")``, ``PersonX`` / ``PersonY`` replaced by first names.
The head's sizes are read from its state dict, so a smaller stand-in loads through the same code.
The ``.pt`` file is read with ``torch.load(weights_only=True)``: tensors only, no code.

    from hfrl.rewards.comet_critic import CometCritic
    CometCritic(model="saved_models/comet_critic_keras_to_pytorch")(
        prompts=["<head> PersonX buys a car </head> <relation> xWant </relation> [GEN] "], completions=["to drive it"])
"""

from __future__ import annotations

import os
import re
from typing import Any

from hfrl.metrics.base import cached, default_device, encoded, evaluating_on, text_of

HEAD_FILE = "custom_roberta_classification_head.pt"
# SKD's verbalisation of ATOMIC-10x's seven relations (comet_utils._RELATIONS)
RELATIONS = {
    "HinderedBy": "can be hindered by",
    "xNeed": "but before, PersonX needed",
    "xWant": "as a result, PersonX wants",
    "xIntent": "because PersonX wanted",
    "xReact": "as a result, PersonX feels",
    "xAttr": "so, PersonX is seen as",
    "xEffect": "as a result, PersonX",
}
_PROMPT = re.compile(r"<head>(.*?)</head>\s*<relation>(.*?)</relation>", re.S)


def comet_prompt(head: str, relation: str) -> str:
    """LoL-RL's COMET prompt.

    >>> comet_prompt("PersonX buys a car", "xWant")
    '<head> PersonX buys a car </head> <relation> xWant </relation> [GEN] '
    """
    return f"<head> {head.strip()} </head> <relation> {relation} </relation> [GEN] "


def parse_prompt(prompt: str) -> tuple[str, str]:
    """``(head, relation)`` of a COMET prompt.

    >>> parse_prompt(comet_prompt("PersonX buys a car", "xWant"))
    ('PersonX buys a car', 'xWant')
    """
    match = _PROMPT.search(prompt)
    if match is None:
        raise ValueError(
            f"comet_critic: the prompt is not '<head> ... </head> <relation> ... </relation> [GEN]': {prompt!r:.80}"
        )
    return match.group(1).strip(), match.group(2).strip()


def critic_texts(head: str, relation: str, tail: str, names: tuple[str, str]) -> tuple[str, str]:
    """The critic's text pair: the head and ``"{relation phrase} {tail}"``, PersonX / PersonY named.

    >>> critic_texts("PersonX calls PersonY", "xWant", "to talk", ("Alex", "Sam"))
    ('Alex calls Sam', 'as a result, Alex wants to talk')
    """
    if relation not in RELATIONS:
        raise ValueError(f"comet_critic: unknown relation {relation!r}; the critic knows {', '.join(RELATIONS)}")
    pair = [head, f"{RELATIONS[relation]} {tail.strip()}"]
    return tuple(t.replace("PersonX", names[0]).replace("PersonY", names[1]) for t in pair)  # type: ignore[return-value]


def load_critic(folder: str, device: str) -> Any:
    """``(tokenizer, RobertaModel, head)`` of a converted critic folder, loaded once per process."""

    def build() -> Any:
        import torch
        from transformers import AutoTokenizer, RobertaModel

        path = os.path.join(folder, HEAD_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"comet_critic: no {HEAD_FILE} in {folder}; convert the SKD critic with LoL-RL's "
                "convert_keras_roberta_to_huggingface.py (a RobertaModel folder plus that head file)"
            )
        state = torch.load(path, map_location="cpu", weights_only=True)
        middle, hidden = state["dense.weight"].shape  # published: (512, 1024)
        outputs = state["out_proj.weight"].shape[0]  # published: 1
        dense, out_proj = torch.nn.Linear(hidden, middle), torch.nn.Linear(middle, outputs)
        head = torch.nn.ModuleDict({"dense": dense, "out_proj": out_proj})
        head.load_state_dict(state)
        body = RobertaModel.from_pretrained(folder, add_pooling_layer=True, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        tokenizer.padding_side = "right"
        return tokenizer, evaluating_on(body, device), head.to(device).eval()

    return cached(("comet_critic", folder, str(device)), build)


class CometCritic:
    """The COMET critic's probability that the completion is a valid tail for the prompt's head and
    relation (the sample's ``head`` / ``relation`` columns, else parsed from the prompt).

    ``names`` replace PersonX and PersonY (SKD draws random first names each call; fixed names keep
    the reward deterministic, so that prepared rewards can be cached).

    >>> CometCritic(model="saved_models/comet_critic_keras_to_pytorch")(  # doctest: +SKIP
    ...     prompts=[comet_prompt("PersonX buys a car", "xWant")], completions=["to drive it"])
    [0.93...]
    """

    __name__ = "comet_critic"

    def __init__(
        self,
        model: str,
        names: tuple[str, str] | list[str] = ("Alex", "Sam"),
        batch_size: int = 32,
        max_length: int = 512,
        empty_score: float = 0.0,
        device: str | None = None,
    ) -> None:
        if not model:
            raise ValueError(
                "comet_critic needs the converted COMET critic folder: set model (see hfrl.rewards.comet_critic)"
            )
        if len(names) != 2:
            raise ValueError(f"comet_critic: names holds the two names of PersonX and PersonY, got {names!r}")
        self.model, self.names = model, (str(names[0]), str(names[1]))
        self.batch_size, self.max_length, self.empty_score, self.device = batch_size, max_length, empty_score, device

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        import torch

        completions = [text_of(c) for c in completions]
        if "head" in columns and "relation" in columns:
            pairs = list(zip(columns["head"], columns["relation"], strict=True))
        else:
            pairs = [parse_prompt(text_of(p)) for p in prompts]
        out = [float(self.empty_score)] * len(completions)
        todo = [i for i, c in enumerate(completions) if c.strip()]
        if not todo:
            return out
        device = self.device or default_device()
        tokenizer, body, head = load_critic(self.model, device)
        for start in range(0, len(todo), self.batch_size):
            rows = todo[start : start + self.batch_size]
            texts = [critic_texts(*pairs[i], completions[i], self.names) for i in rows]
            batch = encoded(tokenizer, [a for a, _ in texts], [b for _, b in texts], self.max_length, device)
            with torch.no_grad():
                pooled = body(**batch).pooler_output  # tanh(dense(h_<s>))
                scores = torch.sigmoid(head["out_proj"](torch.nn.functional.gelu(head["dense"](pooled))))[:, 0]
            for i, value in zip(rows, scores.float().cpu().tolist(), strict=True):
                out[i] = float(value)
        return out
