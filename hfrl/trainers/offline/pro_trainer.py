"""``PROTrainer``: preference ranking optimisation (PRO, Song et al. 2023) over each prompt's scored
responses, the preference baseline of the Leftover-Lunch HH experiments, as an offline algorithm.

hfrl train --task hh --alg pro --model MODEL

The data is the A-LoL family's (prompt, completion) rows: rows that share a prompt are one ranking,
ordered by reward (a ``reward`` column, else the task's reward functions, scored once and cached by
the same preparation as A-LoL's). Each training example is one prompt with its ``n >= 2`` responses;
the loss is :func:`hfrl.core.losses.pro_loss` (the ranking terms plus the SFT term on the best response).
PRO needs no reference model and no value head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from datasets import Dataset
from torch import nn

from hfrl.core.losses import pro_loss
from hfrl.core.rollout import pad
from hfrl.trainers.config_checks import check_finite
from hfrl.trainers.offline.alol_config import ALoLConfig
from hfrl.trainers.offline.alol_trainer import ALoLTrainer
from hfrl.trainers.offline.preparation import Preparation
from hfrl.trainers.papers import paper


@dataclass
class PROConfig(ALoLConfig):
    """Settings of PRO: those of the offline trainer (``ALoLConfig``: data lengths, generation,
    preparation cache) with ``algorithm`` ``pro`` and PRO's own weights."""

    task_section: ClassVar[str] = "pro"

    algorithms = ("pro",)

    algorithm: str = field(default="pro", metadata={"help": "Always 'pro' (preference ranking optimisation)."})
    sft_weight: float = field(
        default=0.05,
        metadata={
            "help": "beta of the SFT term on each prompt's best response, scaled by (n - 1)^2 as in PRO's code "
            "(LoL-RL's HH runs: 0.05)."
        },
    )
    max_responses: int | None = field(
        default=None,
        metadata={
            "help": "Responses ranked per prompt (None: all). With more, the best, the worst and evenly spaced "
            "ranks between them are kept."
        },
    )

    def __post_init__(self) -> None:
        check_finite(self)
        if self.sft_weight < 0:
            raise ValueError(f"sft_weight must be >= 0, got {self.sft_weight}")
        if self.max_responses is not None and self.max_responses < 2:
            raise ValueError(f"max_responses must be >= 2 (PRO ranks responses) or None, got {self.max_responses}")
        super().__post_init__()


def spread(n: int, keep: int | None) -> list[int]:
    """Indices of ``keep`` of ``n`` ranked items: the first, the last and evenly spaced ones between.

    >>> spread(7, 3), spread(3, None), spread(2, 4)
    ([0, 3, 6], [0, 1, 2], [0, 1])
    """
    if keep is None or keep >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / (keep - 1)) for i in range(keep)})


def rankings(data: Dataset, max_responses: int | None) -> tuple[Dataset, dict[str, float]]:
    """Rows grouped by prompt into rankings: ``prompt``, ``prompt_ids``, ``completion_ids`` and
    ``rewards`` (best first); prompts with one response are left out. Statistics alongside."""
    groups: dict[tuple[int, ...], dict[str, Any]] = {}
    for prompt, ids, completion, reward in zip(
        data["prompt"], data["prompt_ids"], data["completion_ids"], data["reward"], strict=True
    ):
        group = groups.setdefault(tuple(ids), {"prompt": prompt, "responses": []})
        group["responses"].append((float(reward), list(completion)))
    rows: dict[str, list[Any]] = {"prompt": [], "prompt_ids": [], "completion_ids": [], "rewards": []}
    for ids, group in groups.items():
        ranked = sorted(group["responses"], key=lambda item: -item[0])  # stable: ties keep the data's order
        if len(ranked) < 2:
            continue
        ranked = [ranked[i] for i in spread(len(ranked), max_responses)]
        rows["prompt"].append(group["prompt"])
        rows["prompt_ids"].append(list(ids))
        rows["completion_ids"].append([c for _, c in ranked])
        rows["rewards"].append([r for r, _ in ranked])
    if not rows["prompt"]:
        raise ValueError(
            f"pro ranks several scored responses per prompt, but none of the {len(groups)} prompts of the "
            "train_dataset has two or more: give each prompt several 'completion' rows"
        )
    stats = {
        "prompts": float(len(rows["prompt"])),
        "single_response_prompts": float(len(groups) - len(rows["prompt"])),
        "responses_per_prompt": sum(len(r) for r in rows["rewards"]) / len(rows["rewards"]),
    }
    return Dataset.from_dict(rows), stats


class PROTrainer(ALoLTrainer):
    """Offline PRO on (prompt, completion, reward) data with several responses per prompt.

    Example:

    ```python
    from datasets import Dataset
    from hfrl.trainers.offline.pro_trainer import PROConfig, PROTrainer

    def digits(prompts, completions, **kwargs):
        return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]

    data = Dataset.from_dict({"prompt": ["count:"] * 4, "completion": ["1 2 3", "the end", "1 b", "a 2 c"]})
    trainer = PROTrainer(
        model="tiny", args=PROConfig(output_dir="runs/pro-demo", num_train_epochs=2), reward_funcs=digits,
        train_dataset=data, eval_dataset=data.select(range(2)),
    )
    trainer.train()
    ```
    """

    args: PROConfig
    algs = {"pro": "offline: preference ranking over several scored responses per prompt, plus an SFT term (PRO)."}
    config_class = PROConfig
    _name = "PRO"
    _tag_names = ["hfrl", "pro", "offline-rl", "preference-ranking"]
    _paper = paper("song2024preference")

    def prepare(self, train_dataset: Dataset, validation: Dataset | None) -> Preparation:
        """The A-LoL preparation (tokens and rewards, cached), then the rows grouped into rankings."""
        prepared = super().prepare(train_dataset, validation)
        data, stats = rankings(prepared.dataset, self.args.max_responses)
        return Preparation(data, {**prepared.stats, **stats}, prepared.from_cache, None)

    def _collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """``B`` rankings of up to ``N`` responses, flattened to ``B * N`` sequences: ``prompt_ids`` /
        ``prompt_mask (B*N, P)``, ``completion_ids`` / ``completion_mask (B*N, T)`` (a missing
        response is one EOS token), ``rewards`` and ``response_mask (B, N)``."""
        pad_id, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        width = max(len(r["completion_ids"]) for r in rows)
        prompts, completions, rewards, present = [], [], torch.zeros(len(rows), width), torch.zeros(len(rows), width)
        for i, row in enumerate(rows):
            for j in range(width):
                prompts.append(row["prompt_ids"])
                if j < len(row["completion_ids"]):
                    completions.append(row["completion_ids"][j])
                    rewards[i, j], present[i, j] = float(row["rewards"][j]), 1.0
                else:
                    completions.append([eos if eos is not None else pad_id])
        prompt_ids, prompt_mask = pad(prompts, pad_id, "right" if self.is_encoder_decoder else "left")
        completion_ids, completion_mask = pad(completions, pad_id, "right")
        return {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "rewards": rewards,
            "response_mask": present,
        }

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logprobs = self.completion_logprobs(model, inputs)
        mask = inputs["completion_mask"].to(logprobs.dtype)
        logprobs = logprobs * mask
        shape = inputs["rewards"].shape
        loss, stats = pro_loss(
            logprobs.sum(1).view(shape),
            mask.sum(1).view(shape),
            inputs["rewards"],
            inputs["response_mask"],
            sft_weight=self.args.sft_weight,
        )
        stats["data_reward"] = (inputs["rewards"] * inputs["response_mask"]).sum() / inputs["response_mask"].sum()
        for key, value in stats.items():
            self._stats[key].append(float(value))
        return (loss, {"logprobs": logprobs}) if return_outputs else loss

    def _card_kwargs(self) -> dict[str, Any]:
        from hfrl.trainers.card_and_push import card_kwargs

        return {**card_kwargs(self), "algorithm": type(self)}


__all__ = ["PROConfig", "PROTrainer", "rankings", "spread"]
