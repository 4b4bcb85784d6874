"""Task ``hh``: the Helpful-Harmless assistant (Anthropic HH-RLHF) as offline RL data (A-LoL).

hfrl train --task hh --alg a_lol

Every HH transcript ends with an assistant turn: the prompt is the dialogue up to and including the
last ``\\n\\nAssistant:``, the completion is that turn. Train: the chosen and the rejected response of
each pair, two examples scored by the reward model (A-LoL learns from both; PRO ranks them);
validation and test: the chosen one (its response is the reference). With ``pairs`` (set by the
task's ``dpo``, ``ppo`` and ``nlpo`` configs): one (prompt, chosen, rejected) row per pair. HH has
train and test files only: ``validation_size`` pairs of the shuffled test split become the
validation split (at most half of it).

Data: the Hub's JSONL files (``{subset}/{split}.jsonl.gz`` of ``Anthropic/hh-rlhf`` at a pinned
revision, no loading script), or a local folder with the same layout, read by the same call: the
``data_dir`` argument or ``$HFRL_DATA_DIR/hh`` (as for every task). The package ships a small such
folder, ``hfrl/tasks/fixtures/hh``, for tests. Reward: the paper's reward model (OpenAssistant
pythia-1.4B) through a sigmoid, reading the dialogue in OpenAssistant's
``<|prompter|>...<|endoftext|><|assistant|>...`` format; ``classifier`` swaps in another model.

    HFRL_DATA_DIR=$(python -c "import hfrl.tasks.hh as t; print(t.FIXTURE_DIR.parent)") \
        hfrl train --task hh --alg a_lol --model tiny
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

# the reward and its format live in the rewards' layer (whose registry names them); the task's names stay
from hfrl.rewards.oasst import OpenAssistantReward as OpenAssistantReward
from hfrl.rewards.oasst import to_oasst as to_oasst
from hfrl.tasks.base import Task, read_task_yaml, task_from_yaml

if TYPE_CHECKING:
    from datasets import DatasetDict

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "hh"
DATA_DIR_ENV = "HFRL_DATA_DIR"  # a folder of task data folders: $HFRL_DATA_DIR/hh mirrors the Hub repository
ASSISTANT = "\n\nAssistant:"


def split_transcript(text: str) -> tuple[str, str] | None:
    """``(prompt, completion)`` of an HH transcript: the dialogue up to the last assistant tag, and
    the last assistant turn; None when there is no assistant turn.

    >>> split_transcript("\\n\\nHuman: Hi\\n\\nAssistant: Hello!")
    ('\\n\\nHuman: Hi\\n\\nAssistant:', ' Hello!')
    """
    cut = text.rfind(ASSISTANT)
    if cut < 0:
        return None
    return text[: cut + len(ASSISTANT)], text[cut + len(ASSISTANT) :]


def data_root(data_dir: str | os.PathLike[str] | None, spec: dict[str, Any]) -> str:
    """Where the JSONL files are: ``data_dir``, else ``$HFRL_DATA_DIR/hh``, else the Hub repository
    at its pinned revision."""
    if data_dir is None and os.environ.get(DATA_DIR_ENV):
        data_dir = os.path.join(os.environ[DATA_DIR_ENV], "hh")
    if data_dir is None:
        return f"hf://datasets/{spec['path']}@{spec['revision']}"
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(
            f"task 'hh': no data folder {data_dir} (it mirrors the Hub repository {spec['path']}; "
            f"unset {DATA_DIR_ENV} or data_dir to download from the Hub)"
        )
    return str(data_dir).rstrip("/")


def data_files(root: str, subsets: list[str]) -> dict[str, list[str]]:
    """``{split: [pattern per subset]}`` for ``load_dataset("json", data_files=...)``.

    >>> data_files("hf://datasets/Anthropic/hh-rlhf@abc", ["helpful-base"])["test"]
    ['hf://datasets/Anthropic/hh-rlhf@abc/helpful-base/test.jsonl*']
    """
    return {split: [f"{root}/{subset}/{split}.jsonl*" for subset in subsets] for split in ("train", "test")}


def to_examples(batch: dict[str, list[Any]], both: bool) -> dict[str, list[Any]]:
    """HH pairs -> (prompt, completion, references) rows: chosen and rejected (``both``) or chosen."""
    out: dict[str, list[Any]] = {"prompt": [], "completion": [], "references": []}
    for chosen, rejected in zip(batch["chosen"], batch["rejected"], strict=True):
        good = split_transcript(chosen)
        for text in (chosen, rejected) if both else (chosen,):
            pair = split_transcript(text)
            if pair is None or not pair[1].strip():
                continue
            out["prompt"].append(pair[0])
            out["completion"].append(pair[1])
            out["references"].append([good[1].strip()] if good else [])
    return out


def to_pairs(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """HH pairs -> one (prompt, chosen, rejected, references) row each: DPO's preference pairs, and
    one row per prompt for the online algorithms. A pair whose transcripts differ before their last
    assistant turn is left out.

    >>> pair = to_pairs({"chosen": ["\\n\\nHuman: Hi\\n\\nAssistant: Hello!"],
    ...                  "rejected": ["\\n\\nHuman: Hi\\n\\nAssistant: Go."]})
    >>> pair["prompt"], pair["chosen"], pair["rejected"], pair["references"]
    (['\\n\\nHuman: Hi\\n\\nAssistant:'], [' Hello!'], [' Go.'], [['Hello!']])
    """
    out: dict[str, list[Any]] = {"prompt": [], "chosen": [], "rejected": [], "references": []}
    for chosen, rejected in zip(batch["chosen"], batch["rejected"], strict=True):
        good, bad = split_transcript(chosen), split_transcript(rejected)
        if good is None or bad is None or good[0] != bad[0] or not good[1].strip() or not bad[1].strip():
            continue
        out["prompt"].append(good[0])
        out["chosen"].append(good[1])
        out["rejected"].append(bad[1])
        out["references"].append([good[1].strip()])
    return out


def load_hh(
    root: str, subsets: list[str], validation_size: int = 500, seed: int = 0, pairs: bool = False
) -> DatasetDict:
    """The ``DatasetDict`` (train / validation / test) from the HH JSONL files under ``root``; with
    ``pairs``, one (prompt, chosen, rejected) row per pair in every split (:func:`to_pairs`)."""
    import glob

    from datasets import DatasetDict, load_dataset

    files = data_files(root, subsets)
    if not root.startswith("hf://"):
        missing = [p for patterns in files.values() for p in patterns if not glob.glob(p)]
        if missing:
            raise FileNotFoundError(
                f"task 'hh': no file matches {missing[0]} (expected {{subset}}/{{split}}.jsonl[.gz])"
            )
    try:
        raw = load_dataset("json", data_files=files)
    except Exception as err:  # noqa: BLE001 - one clear line instead of the network stack's traceback
        if not root.startswith("hf://"):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RuntimeError(
            f"task 'hh': cannot load the Hub dataset {root.removeprefix('hf://datasets/')}: {first}; offline, point "
            "HFRL_DATA_DIR (or --task-arg data_dir) at a folder holding the same files"
        ) from err
    for split in ("train", "test"):
        missing = [c for c in ("chosen", "rejected") if c not in raw[split].column_names]
        if missing:
            raise ValueError(f"hh {split} files under {root} lack the column(s) {', '.join(missing)} of HH-RLHF")
    test = raw["test"].shuffle(seed=seed)
    n_validation = min(validation_size, len(test) // 2)
    splits = {
        "train": raw["train"],
        "validation": test.select(range(n_validation)),
        "test": test.select(range(n_validation, len(test))),
    }
    return DatasetDict(
        {
            name: split.map(
                to_pairs if pairs else to_examples,
                batched=True,
                remove_columns=split.column_names,
                fn_kwargs={} if pairs else {"both": name == "train"},
                desc=f"hh {name}",
            )
            for name, split in splits.items()
        }
    )


def build(
    data_dir: str | os.PathLike[str] | None = None,
    subsets: list[str] | None = None,
    validation_size: int = 500,
    seed: int = 0,
    classifier: str | None = None,
    pairs: bool = False,
    **overrides: Any,
) -> Task:
    """HH-RLHF prompts, chosen and rejected responses; reward: OpenAssistant pythia-1.4B through a
    sigmoid (``classifier``: another sequence classifier, a Hub id or a local folder). ``pairs``:
    one (prompt, chosen, rejected) row per pair (DPO, and the online algorithms' prompts; the task's
    configs for those algorithms set it)."""
    source = read_task_yaml(__file__)["dataset"]
    dataset = load_hh(data_root(data_dir, source), list(subsets or source["subsets"]), validation_size, seed, pairs)
    if classifier is not None and "rewards" not in overrides:
        overrides["rewards"] = [{"id": "openassistant_reward", "args": {"model": classifier}}]
    return task_from_yaml(__file__, dataset, **overrides)
