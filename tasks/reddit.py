"""Leftover-Lunch Reddit response generation (Baheti et al. 2024, §4): ``reddit_pos`` trains on
upvoted comments, ``reddit_neg`` on downvoted ones (a test of A-LoL's robustness to noisy data);
both are evaluated on upvoted and downvoted comments together.

    hfrl train --task reddit_pos --alg nll --task-arg safety_model=PATH            # the reference policy
    hfrl train --task reddit_pos --alg a_lol --model runs/reddit_pos-nll --task-arg safety_model=PATH

Data: the Kaggle "Reddit comment scores" data (not on the Hub): ``comments_positive.csv`` and
``comments_negative.csv`` (columns ``id``, ``parent_id``, ..., ``text``, ``score``, ...,
``parent_text``, ``parent_score``, ...) in the ``data_dir`` folder, else
``$HFRL_DATA_DIR/reddit_comment_scores``. Samples (LoL-RL's
``preprocess_reddit_comment_scores_and_add_rewards.py``): ``sample_size`` (102,000) rows of each
file drawn with ``seed``; rows without a comment or parent dropped; whitespace collapsed; pairs
whose comment or parent has more than ``max_words`` (100) words dropped; URLs replaced by
``<URL>``. Prompt: the parent comment followed by DialoGPT's EOS; completion: the comment. Of each
file the first ``test_size`` (1,000) samples are test, the next ``validation_size`` (1,000)
validation and the rest train. (LoL-RL also drops pairs over 300 DialoGPT tokens; here the configs'
``max_prompt_length`` / ``max_completion_length`` cut them instead.)

Reward (LoL-RL): the sum of five reward functions, weight 1 each (``--reward_weights`` reweights
them): fluency (CoLA), safety (an offensive-language classifier given by the user: ``safety_model``;
the paper's is ToxiChat's DialoGPT classifier; ``safety_model=none`` drops the term), engagement
(DialogRPT-depth), upvote probability (DialogRPT-updown) and diversity (TF-IDF fitted on the
upvoted and downvoted training comments). ``fluency_model``, ``engagement_model`` and
``upvote_model`` swap in other classifiers (a Hub id or a local folder).
"""

from __future__ import annotations

import os
import re
from typing import Any

from hfrl.rewards.dialogue import EOS, fit_diversity
from hfrl.tasks.base import Task, task_from_yaml, with_classifiers, with_model
from hfrl.tasks.local_data import local_files

FOLDER = "reddit_comment_scores"  # $HFRL_DATA_DIR/reddit_comment_scores
FILES = {"pos": "comments_positive.csv", "neg": "comments_negative.csv"}
KAGGLE = "https://www.kaggle.com/code/danofer/reddit-comments-scores-nlp/input"
URL = re.compile(  # LoL-RL's utils.url_regex
    r"https?:\/\/(www\.)?[-a-zA-Z0-9@:%._\+~#=]{1,256}\.[a-zA-Z0-9()]{1,6}\b([-a-zA-Z0-9@:;%_\\\+.~#?&//=]*)"
)
CLASSIFIERS = {  # task argument -> reward id whose model it sets
    "fluency_model": "cola_fluency",
    "safety_model": "offensive_safety",
    "engagement_model": "dialogrpt_depth",
    "upvote_model": "dialogrpt_updown",
}


def clean(text: str) -> str:
    """Whitespace collapsed and URLs replaced by ``<URL>`` (LoL-RL's ``remove_multiple_space`` and
    ``replace_urls``).

    >>> clean("see  https://example.com/a?b=1   now")
    'see <URL> now'
    """
    return URL.sub("<URL>", re.sub(r"\s+", " ", text).strip())


def comment_samples(batch: dict[str, list[Any]], max_words: int = 100) -> dict[str, list[Any]]:
    """Kaggle comment rows -> (prompt, completion) samples; see the module docstring.

    >>> out = comment_samples({"parent_text": ["Any plans?", None], "text": ["A  hike.", "x"],
    ...                        "score": [120, 5], "parent_score": [40, 2]})
    >>> out["prompt"], out["completion"], out["score"]
    (['Any plans?<|endoftext|>'], ['A hike.'], [120.0])
    """
    out: dict[str, list[Any]] = {"prompt": [], "completion": [], "references": [], "score": [], "parent_score": []}
    for parent, text, score, parent_score in zip(
        batch["parent_text"], batch["text"], batch["score"], batch["parent_score"], strict=True
    ):
        if not isinstance(parent, str) or not isinstance(text, str):
            continue  # NaN in the CSV
        parent, text = re.sub(r"\s+", " ", parent).strip(), re.sub(r"\s+", " ", text).strip()
        if not parent or not text or len(parent.split()) > max_words or len(text.split()) > max_words:
            continue
        parent, text = clean(parent), clean(text)
        out["prompt"].append(parent + EOS)
        out["completion"].append(text)
        out["references"].append([text])
        out["score"].append(float(score))
        out["parent_score"].append(float(parent_score))
    return out


def load_comments(
    task: str,
    data_dir: str | os.PathLike[str] | None,
    sample_size: int | None,
    max_words: int,
    seed: int,
) -> dict[str, Any]:
    """``{"pos": Dataset, "neg": Dataset}``: each file's samples in a seeded random order."""
    from datasets import load_dataset

    paths = local_files(task, FOLDER, list(FILES.values()), data_dir, get=KAGGLE)
    raw = load_dataset("csv", data_files={side: paths[name] for side, name in FILES.items()})
    out = {}
    for side, split in raw.items():
        missing = [c for c in ("parent_text", "text", "score", "parent_score") if c not in split.column_names]
        if missing:
            raise ValueError(f"task {task!r}: {FILES[side]} lacks the Kaggle data's column(s) {', '.join(missing)}")
        split = split.shuffle(seed=seed)
        if sample_size is not None and sample_size < len(split):
            split = split.select(range(sample_size))
        out[side] = split.map(
            comment_samples,
            batched=True,
            remove_columns=split.column_names,
            fn_kwargs={"max_words": max_words},
            desc=f"{task}: {FILES[side]}",
        )
    return out


def build_task(
    module_file: str,
    side: str,
    data_dir: str | os.PathLike[str] | None = None,
    sample_size: int | None = 102_000,
    test_size: int = 1000,
    validation_size: int = 1000,
    max_words: int = 100,
    seed: int = 901,
    fluency_model: str | None = None,
    safety_model: str | None = None,
    engagement_model: str | None = None,
    upvote_model: str | None = None,
    **overrides: Any,
) -> Task:
    """The ``reddit_pos`` (``side="pos"``) or ``reddit_neg`` task; see the module docstring."""
    from datasets import DatasetDict, concatenate_datasets

    spec = task_spec(
        module_file, safety_model=safety_model, rewards=overrides.get("rewards"), fluency_model=fluency_model,
        engagement_model=engagement_model, upvote_model=upvote_model,
    )  # fmt: skip
    sides = load_comments(spec["name"], data_dir, sample_size, max_words, seed)
    for name, data in sides.items():
        if len(data) <= test_size + validation_size:
            raise ValueError(
                f"task {spec['name']!r}: {FILES[name]} has {len(data)} usable comments, not more than "
                f"test_size + validation_size = {test_size + validation_size}: lower them"
            )
    cut = test_size + validation_size
    dataset = DatasetDict(
        {
            "train": sides[side].select(range(cut, len(sides[side]))),
            "validation": concatenate_datasets([d.select(range(test_size, cut)) for d in sides.values()]),
            "test": concatenate_datasets([d.select(range(test_size)) for d in sides.values()]),
        }
    )
    task = task_from_yaml(module_file, dataset, spec=spec, **overrides)
    # LoL-RL fits the TF-IDF weights on the upvoted and downvoted training comments together
    fit_diversity(task.reward_funcs, [c for d in sides.values() for c in d.select(range(cut, len(d)))["completion"]])
    return task


def task_spec(
    module_file: str, safety_model: str | None = None, rewards: Any = None, **task_args: Any
) -> dict[str, Any]:
    """The task's YAML with the classifiers the task arguments name (:func:`with_classifiers`) and the
    safety classifier (not needed when ``rewards`` replace the task's)."""
    spec: dict[str, Any] = with_classifiers(module_file, CLASSIFIERS, task_args)
    spec["rewards"] = with_safety(spec["rewards"], safety_model, spec["name"], rewards is not None)
    return spec


def with_safety(specs: list[Any], model: str | None, task: str, replaced: bool) -> list[Any]:
    """The reward specs with the safety classifier set to ``model``; ``"none"`` drops the safety
    reward; a safety reward without a model fails with what to pass."""
    if model is not None and str(model).lower() == "none":
        return [s for s in specs if not (isinstance(s, dict) and s.get("id") == CLASSIFIERS["safety_model"])]
    specs = with_model(specs, (CLASSIFIERS["safety_model"],), model)
    safety = [s for s in specs if isinstance(s, dict) and s.get("id") == CLASSIFIERS["safety_model"]]
    unset = [s for s in safety if not (s.get("args") or {}).get("model")]
    if unset and not replaced:
        raise ValueError(
            f"task {task!r}: the safety reward needs an offensive-language classifier: pass --task-arg "
            "safety_model=FOLDER (the paper's: ToxiChat's DialoGPT classifier, https://github.com/abaheti95/ToxiChat), "
            "or --task-arg safety_model=none to train without the safety term"
        )
    return specs


__all__ = ["build_task", "clean", "comment_samples"]
