"""Leftover-Lunch knowledge-grounded dialogue (Baheti et al. 2024, §5): the wizard's next turn given a
knowledge snippet and the dialogue so far. Three tasks differ in their training data:

- ``wow``: Wizard of Wikipedia (noisy: many responses are not faithful to their knowledge);
  validation: WoW's unseen-topic validation split; test: FaithDial's test split;
- ``faithdial``: FaithDial (WoW's responses edited to be faithful), its own splits;
- ``faithdial_wow``: both training sets shuffled together; validation: both; test: FaithDial's.

    hfrl train --task faithdial --alg nll                               # the reference policy
    hfrl train --task faithdial --alg a_lol --model runs/faithdial-nll

Data. Wizard of Wikipedia (not on the Hub as files): the published folder
(http://parl.ai/downloads/wizard_of_wikipedia/wizard_of_wikipedia.tgz, unpacked: ``train.json``,
``valid_topic_split.json``, ...) in ``data_dir``, else ``$HFRL_DATA_DIR/wizard_of_wikipedia``. Each
wizard turn whose ``checked_sentence`` holds a knowledge sentence (not ``no_passages_used``) and
that follows at least one turn is a sample. FaithDial: ``McGill-NLP/FaithDial``'s Parquet files at a
pinned revision (``history``, ``knowledge``, ``response`` per row), or a local mirror in
``faithdial_dir``, else ``$HFRL_DATA_DIR/faithdial``.

Prompt (LoL-RL's ``preprocess_wow_and_add_rewards.py``): ``Knowledge: {knowledge}<|endoftext|>``,
then the history's turns each closed by ``<|endoftext|>``, the oldest turns dropped while the
history is longer than ``max_history_words`` (300 words, about LoL-RL's 400 DialoGPT tokens).
Completion: the wizard's response. The ``knowledge`` column goes to the faithfulness reward.

Reward (LoL-RL): the sum of faithfulness (FaithCritic), fluency (CoLA), engagement (DialogRPT-depth
on the history and response) and diversity (TF-IDF fitted on the task's training responses; LoL-RL
fits it on WoW's for all three tasks), weight 1 each. ``faithfulness_model``, ``fluency_model``
and ``engagement_model`` swap in other classifiers. (LoL-RL also drops a wizard turn without a
checked sentence from the history that follows; here the history keeps every turn.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hfrl.rewards.dialogue import EOS, fit_diversity
from hfrl.tasks.base import Task, task_from_yaml, with_classifiers
from hfrl.tasks.local_data import local_files

if TYPE_CHECKING:
    from datasets import DatasetDict

WOW_FOLDER = "wizard_of_wikipedia"  # $HFRL_DATA_DIR/wizard_of_wikipedia
WOW_URL = "http://parl.ai/downloads/wizard_of_wikipedia/wizard_of_wikipedia.tgz"
WOW_FILES = {"train": "train.json", "validation": "valid_topic_split.json"}
FAITHDIAL_FOLDER = "faithdial"  # $HFRL_DATA_DIR/faithdial mirrors the Hub repository
NO_KNOWLEDGE = "no_passages_used"
CLASSIFIERS = {  # task argument -> reward id whose model it sets
    "faithfulness_model": "faithcritic",
    "fluency_model": "cola_fluency",
    "engagement_model": "dialogrpt_depth",
}
COLUMNS = ("prompt", "completion", "references", "knowledge")


def knowledge_prompt(knowledge: str, history: list[str], max_history_words: int | None = 300) -> str:
    """LoL-RL's knowledge-grounded prompt; the oldest turns dropped while the history is too long.

    >>> knowledge_prompt("Paris is in France.", ["Hi!", "Hello, where is Paris?"], max_history_words=4)
    'Knowledge: Paris is in France.<|endoftext|>Hello, where is Paris?<|endoftext|>'
    """
    turns = [t.strip() for t in history]
    while max_history_words and len(turns) > 1 and sum(len(t.split()) for t in turns) > max_history_words:
        turns = turns[1:]
    return f"Knowledge: {knowledge.strip()}{EOS}" + "".join(f"{t}{EOS}" for t in turns)


def sample(knowledge: str, history: list[str], response: str, max_history_words: int | None) -> dict[str, Any]:
    response = response.strip()
    return {
        "prompt": knowledge_prompt(knowledge, history, max_history_words),
        "completion": response,
        "references": [response],
        "knowledge": knowledge.strip(),
    }


def wow_samples(dialogs: list[dict[str, Any]], max_history_words: int | None = 300) -> list[dict[str, Any]]:
    """Wizard of Wikipedia dialogues -> one sample per grounded wizard turn with some history.

    >>> dialog = {"dialog": [
    ...     {"speaker": "1_Apprentice", "text": "I love dogs."},
    ...     {"speaker": "0_Wizard", "text": "Dogs are loyal.", "checked_sentence": {"chosen_Dog_1": "Dogs are loyal."}},
    ...     {"speaker": "1_Apprentice", "text": "True!"},
    ...     {"speaker": "0_Wizard", "text": "Ok.", "checked_sentence": {"no_passages_used": "no_passages_used"}}]}
    >>> [s["prompt"] for s in wow_samples([dialog])]
    ['Knowledge: Dogs are loyal.<|endoftext|>I love dogs.<|endoftext|>']
    """
    out = []
    for dialog in dialogs:
        history: list[str] = []
        for turn in dialog.get("dialog", []):
            text = turn.get("text", "")
            checked = list((turn.get("checked_sentence") or {}).values())
            knowledge = checked[0] if checked else NO_KNOWLEDGE
            if "Wizard" in turn.get("speaker", "") and history and knowledge != NO_KNOWLEDGE and text.strip():
                out.append(sample(knowledge, history, text, max_history_words))
            history.append(text)
    return out


def faithdial_samples(batch: dict[str, list[Any]], max_history_words: int | None = 300) -> dict[str, list[Any]]:
    """FaithDial rows (``history``, ``knowledge``, ``response``) -> samples (batched ``Dataset.map``)."""
    rows = [
        sample(k, h, r, max_history_words)
        for h, k, r in zip(batch["history"], batch["knowledge"], batch["response"], strict=True)
        if r and r.strip()
    ]
    return {c: [row[c] for row in rows] for c in COLUMNS}


def load_wow(task: str, data_dir: str | os.PathLike[str] | None, max_history_words: int | None) -> dict[str, Any]:
    """``{"train": Dataset, "validation": Dataset}`` from the Wizard of Wikipedia folder."""
    from datasets import Dataset

    from hfrl.utils.bounded import load_json

    paths = local_files(task, WOW_FOLDER, list(WOW_FILES.values()), data_dir, get=WOW_URL)
    out = {}
    for split, name in WOW_FILES.items():  # a data file: any size, but no deeper than a dialogue nests
        dialogs = load_json(Path(paths[name]), f"task {task!r}: {paths[name]}", limit=None)
        if not isinstance(dialogs, list):
            raise ValueError(f"task {task!r}: {paths[name]} is not a Wizard of Wikipedia file (a list of dialogues)")
        rows = wow_samples(dialogs, max_history_words)
        out[split] = Dataset.from_dict({c: [r[c] for r in rows] for c in COLUMNS})
    return out


def load_faithdial(
    task: str,
    source: dict[str, Any],
    data_dir: str | os.PathLike[str] | None,
    revision: str | None,
    max_history_words: int | None,
) -> DatasetDict:
    """FaithDial's train / validation / test samples (Hub Parquet files at the pinned revision, or a mirror)."""
    from hfrl.tasks.data import load_parquet_splits, preprocess_splits

    raw = load_parquet_splits(FAITHDIAL_FOLDER, source, data_dir, revision)
    for split, data in raw.items():
        missing = [c for c in ("history", "knowledge", "response") if c not in data.column_names]
        if missing:
            raise ValueError(f"task {task!r}: FaithDial's {split} files lack the column(s) {', '.join(missing)}")
    return preprocess_splits(raw, lambda batch: faithdial_samples(batch, max_history_words))


def task_spec(module_file: str, **task_args: Any) -> dict[str, Any]:
    """The task's YAML with the classifiers the task arguments name (:func:`with_classifiers`)."""
    return cast(dict[str, Any], with_classifiers(module_file, CLASSIFIERS, task_args))


def build_task(
    module_file: str,
    training: str,
    data_dir: str | os.PathLike[str] | None = None,
    faithdial_dir: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    max_history_words: int | None = 300,
    seed: int = 901,
    faithfulness_model: str | None = None,
    fluency_model: str | None = None,
    engagement_model: str | None = None,
    **overrides: Any,
) -> Task:
    """``wow``, ``faithdial`` or ``faithdial_wow`` (``training``); see the module docstring.
    ``data_dir``: the Wizard of Wikipedia folder (for ``faithdial``: the FaithDial mirror)."""
    from datasets import DatasetDict, concatenate_datasets

    spec = task_spec(
        module_file, faithfulness_model=faithfulness_model, fluency_model=fluency_model,
        engagement_model=engagement_model,
    )  # fmt: skip
    name = spec["name"]
    if training == "faithdial":
        faithdial_dir = faithdial_dir if faithdial_dir is not None else data_dir
    faithdial = load_faithdial(name, spec["faithdial"], faithdial_dir, revision, max_history_words)
    if training == "faithdial":
        splits = {s: faithdial[s] for s in ("train", "validation", "test")}
    else:
        wow = load_wow(name, data_dir, max_history_words)
        if training == "wow":
            splits = {"train": wow["train"], "validation": wow["validation"], "test": faithdial["test"]}
        else:  # faithdial_wow
            splits = {
                "train": concatenate_datasets([wow["train"], faithdial["train"]]).shuffle(seed=seed),
                "validation": concatenate_datasets([wow["validation"], faithdial["validation"]]),
                "test": faithdial["test"],
            }
    task = task_from_yaml(module_file, DatasetDict(splits), spec=spec, **overrides)
    fit_diversity(task.reward_funcs, splits["train"]["completion"])
    return task


__all__ = ["build_task", "faithdial_samples", "knowledge_prompt", "wow_samples"]
