"""Task ``comet``: commonsense inference generation on ATOMIC-10x (Leftover Lunch, Baheti et al. 2024,
§3): given an event (head) and a relation, generate the inference (tail); reward: the COMET critic.

    hfrl train --task comet --alg nll --task-arg critic_model=PATH                     # the reference
    hfrl train --task comet --alg a_lol --model runs/comet-nll --task-arg critic_model=PATH

Data: Symbolic Knowledge Distillation's ATOMIC-10x (not on the Hub), ``ATOMIC10X.jsonl`` of the
``downloaded/`` folder of
https://storage.googleapis.com/ai2-mosaic-public/projects/symbolic-knowledge-decoding/symbolic-knowledge-distillation.tar.gz
(one JSON object per line: ``head``, ``relation``, ``tail``, ``split`` train / val / test,
``p_valid_model`` the critic's score, ...), in ``data_dir``, else ``$HFRL_DATA_DIR/comet``.

Samples (LoL-RL's ``preprocess_comet_and_add_rewards.py``): prompt
``<head> {head} </head> <relation> {relation} </relation> [GEN] ``, completion the tail, columns
``head`` and ``relation`` for the critic. Train: ATOMIC-10x's train split, its ``reward`` column the
critic's score stored in the data (``use_data_scores=False`` scores the completions with the
reward function instead); validation: ``validation_size`` (10,000, as LoL-RL) rows of its val split
drawn with ``seed``; test: its test split, or, with ``atomic2020_test`` (the path of ATOMIC 2020's
``test.tsv``), ATOMIC 2020's test triples of the seven relations grouped by (head, relation) with
all their tails as references (LoL-RL keeps one tail per pair, the critic's best).

Reward: the COMET critic (:mod:`hfrl.rewards.comet_critic`), a local folder given with
``critic_model`` (LoL-RL converts it from SKD's Keras model); value head ``max_value`` 1. Model:
LoL-RL starts from SKD's COMET-distill (GPT2-XL, a local folder: ``--model PATH``); the default here
is GPT2-XL itself, whose NLL run on ATOMIC-10x gives the reference policy.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from hfrl.rewards.comet_critic import RELATIONS, comet_prompt
from hfrl.tasks.base import Task, read_task_yaml, task_from_yaml, with_model
from hfrl.tasks.local_data import local_files

FOLDER = "comet"  # $HFRL_DATA_DIR/comet holds SKD's downloaded/ files
FILE = "ATOMIC10X.jsonl"
SKD_URL = (
    "https://storage.googleapis.com/ai2-mosaic-public/projects/symbolic-knowledge-decoding/"
    "symbolic-knowledge-distillation.tar.gz (its downloaded/ folder)"
)


def atomic_samples(batch: dict[str, list[Any]], with_reward: bool = True) -> dict[str, list[Any]]:
    """ATOMIC-10x rows -> COMET samples (rows of relations the critic does not know are dropped).

    >>> atomic_samples({"head": ["PersonX buys a car"], "relation": ["xWant"], "tail": ["to drive it"],
    ...                 "p_valid_model": [0.9]})["prompt"]
    ['<head> PersonX buys a car </head> <relation> xWant </relation> [GEN] ']
    """
    out: dict[str, list[Any]] = {"prompt": [], "completion": [], "references": [], "head": [], "relation": []}
    if with_reward:
        out["reward"] = []
    scores = batch.get("p_valid_model") or [None] * len(batch["head"])
    for head, relation, tail, score in zip(batch["head"], batch["relation"], batch["tail"], scores, strict=True):
        if relation not in RELATIONS or not head or not tail or not str(tail).strip():
            continue
        out["prompt"].append(comet_prompt(head, relation))
        out["completion"].append(str(tail).strip())
        out["references"].append([str(tail).strip()])
        out["head"].append(head.strip())
        out["relation"].append(relation)
        if with_reward:
            out["reward"].append(float(score))
    return out


def load_atomic2020_test(path: str | os.PathLike[str]) -> Any:
    """ATOMIC 2020's ``test.tsv`` (head, relation, tail; no header) -> one test sample per (head,
    relation) of the seven relations, every tail a reference."""
    from datasets import Dataset

    grouped: dict[tuple[str, str], list[str]] = {}
    with open(path, newline="") as fh:
        for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) >= 3 and row[1] in RELATIONS and row[2].strip() and row[2].strip().lower() != "none":
                grouped.setdefault((row[0].strip(), row[1]), []).append(row[2].strip())
    if not grouped:
        raise ValueError(f"task 'comet': {path} holds no head / relation / tail row of {', '.join(RELATIONS)}")
    return Dataset.from_dict(
        {
            "prompt": [comet_prompt(h, r) for h, r in grouped],
            "completion": [tails[0] for tails in grouped.values()],
            "references": list(grouped.values()),
            "head": [h for h, _ in grouped],
            "relation": [r for _, r in grouped],
        }
    )


def build(
    data_dir: str | os.PathLike[str] | None = None,
    atomic2020_test: str | os.PathLike[str] | None = None,
    validation_size: int | None = 10_000,
    use_data_scores: bool = True,
    seed: int = 901,
    critic_model: str | None = None,
    **overrides: Any,
) -> Task:
    """The ``comet`` task; see the module docstring."""
    from datasets import DatasetDict, load_dataset

    spec = read_task_yaml(__file__)
    spec["rewards"] = with_model(spec["rewards"], ("comet_critic",), critic_model)
    unset = [s for s in spec["rewards"] if isinstance(s, dict) and s.get("id") == "comet_critic"]
    if any(not (s.get("args") or {}).get("model") for s in unset) and "rewards" not in overrides:
        raise ValueError(
            "task 'comet': the COMET critic is a local folder: pass --task-arg critic_model=FOLDER (a RobertaModel "
            "folder with custom_roberta_classification_head.pt: LoL-RL's convert_keras_roberta_to_huggingface.py)"
        )
    path = local_files("comet", FOLDER, [FILE], data_dir, get=SKD_URL)[FILE]
    raw = load_dataset("json", data_files=path, split="train")
    missing = [c for c in ("head", "relation", "tail", "split", "p_valid_model") if c not in raw.column_names]
    if missing:
        raise ValueError(f"task 'comet': {path} lacks the field(s) {', '.join(missing)} of ATOMIC-10x")
    splits = {}
    for name, atomic in (("train", "train"), ("validation", "val"), ("test", "test")):
        part = raw.filter(lambda batch, a=atomic: [s == a for s in batch["split"]], batched=True, desc=f"comet {name}")
        if name == "validation" and validation_size is not None and validation_size < len(part):
            part = part.shuffle(seed=seed).select(range(validation_size))
        splits[name] = part.map(
            atomic_samples,
            batched=True,
            remove_columns=part.column_names,
            fn_kwargs={"with_reward": name == "train" and use_data_scores},
            desc=f"comet {name}",
        )
    if atomic2020_test is not None:
        splits["test"] = load_atomic2020_test(atomic2020_test)
    empty = [name for name, data in splits.items() if len(data) == 0]
    if empty:
        atomic = "val" if empty[0] == "validation" else empty[0]
        raise ValueError(f"task 'comet': {path} has no {empty[0]} rows (ATOMIC-10x split {atomic!r})")
    return task_from_yaml(__file__, DatasetDict(splits), spec=spec, **overrides)
