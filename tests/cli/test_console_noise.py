"""What a run prints besides hfrl's own lines (issue 56, item 10): a reward model's new head in one line
instead of transformers' boxed load report, no "Generating ... split" bars of datasets, help text
without argparse's %% escape, a metric's skip line on a line of its own while the bar is drawn."""

from __future__ import annotations

import logging
import sys

import pytest

from hfrl.testing import digit_reward, run_cli


def test_a_new_score_head_is_one_hfrl_line_not_a_load_report(tiny_causal_dir, caplog, capfd):
    from transformers import AutoModelForSequenceClassification

    from hfrl.utils.quiet import quiet

    quiet()
    with caplog.at_level(logging.WARNING):
        AutoModelForSequenceClassification.from_pretrained(tiny_causal_dir, num_labels=1)
    said = capfd.readouterr().err + caplog.text
    assert "LOAD REPORT" not in said and "MISSING" not in said
    assert "GPT2ForSequenceClassification: a new score head (score.weight), initialised (the checkpoint has none)" in (
        caplog.text
    )


def test_a_load_report_of_anything_but_a_new_head_is_kept():
    from hfrl.utils.quiet import new_head_line

    body = "M LOAD REPORT from: x\nKey | Status | \n--+--+-\n{rows}\n\nNotes:\n- ..."
    assert new_head_line(body.format(rows="transformer.h.0.attn.c_attn.weight | MISSING | ")) is None
    both = "score.weight | MISSING | \nlm_head.weight | UNEXPECTED | "
    assert new_head_line(body.format(rows=both)) == (
        "M: a new score head (score.weight), initialised (the checkpoint has none); the checkpoint's lm_head.weight "
        "is not used"
    )


def test_a_tasks_own_files_load_without_datasets_bars(tmp_path, monkeypatch, capfd):
    import datasets

    from hfrl.tasks import load_task
    from hfrl.tasks.data import FIXTURES

    monkeypatch.delenv("HF_DATASETS_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")  # the splits not yet made
    datasets.enable_progress_bars()
    load_task("iwslt2017", data_dir=str(FIXTURES / "iwslt2017"))
    err = capfd.readouterr().err
    assert "Generating" not in err and "split" not in err, err
    assert not datasets.utils.are_progress_bars_disabled()  # only while the task loads: the user's own stay


def test_help_text_shows_percent_signs_once(capsys):
    code, out, err = run_cli(["list", "fields", "--alg", "grpo"], capsys)
    assert code == 0, err
    assert "~20% slower" in " ".join(out.split()) and "%%" not in out  # TRL's help, written for argparse


def test_a_metric_skipped_while_the_bar_is_drawn_gets_its_own_line(capsys):
    from tqdm import tqdm

    from hfrl.trainers import evaluation
    from hfrl.trainers.evaluation import Scoring, score_completions

    def unavailable(prompts, completions, **kwargs):
        raise RuntimeError("cannot load the intent model: see https://huggingface.co/docs/hub/models-downloading")

    evaluation._SKIPPED.clear()
    log = logging.getLogger("hfrl.trainers.evaluation")
    handler = logging.StreamHandler(sys.stderr)  # the console, next to the bar (pytest's capture of it)
    log.addHandler(handler)
    try:
        bar = tqdm(total=4, desc="iterations", file=sys.stderr, mininterval=0)
        bar.update(1)
        score_completions(["1"], ["2 3"], [{}], Scoring([digit_reward], [1.0], {"intent_accuracy": unavailable}))
        bar.close()
    finally:
        log.removeHandler(handler)
    err = capsys.readouterr().err
    before, line = err.split("metric 'intent_accuracy'", 1)
    assert "iterations:" in before and before.endswith("\r"), repr(before[-80:])  # the bar cleared first
    assert line.split("\n", 1)[0].endswith("https://huggingface.co/docs/hub/models-downloading")  # whole
    assert "iterations:" in line.split("\n", 1)[1]  # the bar, drawn again under it


@pytest.mark.parametrize("escape", ["%%", "%"])
def test_the_percent_escape_is_undone_where_help_is_read(escape):
    import dataclasses

    from hfrl.trainers.schema import fields_of

    @dataclasses.dataclass
    class Config:
        x: int = dataclasses.field(default=1, metadata={"help": f"~20{escape} slower"})

    assert fields_of(Config)["x"].help == "~20% slower"


def test_deepspeeds_cpu_note_and_torchs_collective_deprecations_are_filtered():
    """What every ZeRO-3 process printed (issue 56.1 and 56.5): DeepSpeed's CPU note, from import hfrl on
    (a launch's config imports deepspeed before any trainer), and torch's FutureWarning for each
    collective ZeRO-3 calls, filtered by quiet(). Other warnings pass."""
    import warnings

    import hfrl  # noqa: F401 - its import installs the DeepSpeed filter
    from hfrl.utils.quiet import DEEPSPEED_NOTES, quiet_dependency_warnings

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("DeepSpeed", logging.WARNING, "real_accelerator.py", 213, message, None, None)

    assert not logging.getLogger("DeepSpeed").filter(record(DEEPSPEED_NOTES[0]))
    assert logging.getLogger("DeepSpeed").filter(record("Setting ds_accelerator to cpu (override)"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_dependency_warnings()
        for name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
            warnings.warn(f"`torch.distributed.{name}` is deprecated. Please use x instead.", FutureWarning, 1)
        warnings.warn("`torch.distributed.something_else` is deprecated.", FutureWarning, 1)
    assert [str(w.message) for w in seen] == ["`torch.distributed.something_else` is deprecated."]
