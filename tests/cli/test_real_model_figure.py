"""benchmarks/real_model.py's figure (issue 58, item 6): a run's figure on arith_chains is the mean
held-out accuracy over the last third of training, on as many test problems as the family holds; the
evaluations on the way are kept out of the training minutes and do not change the training's sampling;
the runs measured before are kept in the JSON with their label, in a table of their own; the report
puts the spread between re-runs of one seed beside the spread between seeds. Hand-built curves and
JSON, no training (the end-to-end run is tests/cli/test_real_model_benchmark.py's, marked slow)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_model.py"
sys.path.insert(0, str(SCRIPT.parent))
import real_model  # noqa: E402

OLD, NEW = "final-checkpoint, 64 problems", "mean over last third, 90 problems"


def test_the_figure_is_the_mean_of_the_evaluations_in_the_last_third():
    """20 iterations, every 3rd evaluated and the last: 3 6 9 12 15 18 20; the last third is after
    iteration 13.3: 15, 18, 20, whose accuracies 0.50, 0.25, 0.75 average 0.5 (the final checkpoint's
    alone: 0.75). 30 iterations: after 20, so 21 to 30 (exactly a third)."""
    accuracy = {3: 0.1, 6: 0.2, 9: 0.9, 12: 0.3, 15: 0.5, 18: 0.25, 20: 0.75}
    curve = [{"iteration": i, "reward": r, "reward_std": 0.4, "judges": {}} for i, r in accuracy.items()]
    assert [p["iteration"] for p in real_model.last_third(curve, 20)] == [15, 18, 20]
    assert real_model.figure_of(curve, 20) == {"reward": 0.5, "reward_std": 0.4, "judges": {}, "points": 3}
    every = real_model.default_eval_every(30, "last-third")
    assert every == 5 and [i for i in range(1, 31) if real_model.Curve(every, 30, None).due(i)] == [5, 10, 15, 20, 25]
    points = [{"iteration": i} for i in (5, 10, 15, 20, 25, 30)]
    assert [p["iteration"] for p in real_model.last_third(points, 30)] == [25, 30]
    assert [p["iteration"] for p in real_model.last_third([{"iteration": i} for i in range(1, 31)], 30)] == list(
        range(21, 31)
    )
    # about 7 evaluations a run, the final one included (the run's own last evaluation closes the curve)
    for total in (14, 20, 30, 50, 100):
        every = real_model.default_eval_every(total, "last-third")
        assert 6 <= len([i for i in range(1, total) if real_model.Curve(every, total, None).due(i)]) + 1 <= 8
    assert real_model.default_eval_every(20, "final") == 0  # movie_snippets: none unless asked
    # the judges (movie_snippets with --figure last-third) average the same way
    judged = [
        {"iteration": i, "reward": 0.0, "judges": {"vader_sentiment": v}} for i, v in ((2, 0.9), (3, 0.2), (4, 0.4))
    ]
    assert real_model.figure_of(judged, 4)["judges"] == {"vader_sentiment": pytest.approx(0.3)}
    with pytest.raises(
        ValueError, match=r"^no evaluation after iteration 13.3333 of 20: the curve has none to average$"
    ):
        real_model.figure_of([{"iteration": 3, "reward": 1.0}], 20)


def test_the_gain_is_the_figure_minus_the_base_models_accuracy():
    """The base model does not train: one evaluation (0.25 of the problems); the run's last third
    averages 0.5, so its gain is +0.25, though its final checkpoint alone says +0.5."""
    curve = [
        {"iteration": i, "reward": r, "reward_std": 0.5, "judges": {}} for i, r in ((15, 0.25), (18, 0.5), (20, 0.75))
    ]
    final = {
        "reward": 0.75,
        "reward_std": 0.433,
        "judges": {},
        "judges_std": {},
        "ref_perplexity": 3.0,
        "samples_n": 90,
    }
    base = {"reward": 0.25, "reward_std": 0.433, "judges": {}, "judges_std": {}, "ref_perplexity": 3.0}
    figure = {**final, **real_model.figure_of(curve, 20)}
    assert real_model.gains(figure, base, None)["reward_gain"] == 0.25
    assert real_model.gains(final, base, None)["reward_gain"] == 0.5


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeModel:
    def __init__(self) -> None:
        self.training = True

    def train(self, mode: bool = True) -> None:
        self.training = mode

    def eval(self) -> None:
        self.training = False


def test_evaluations_during_training_are_not_training_time_and_leave_the_sampling_alone():
    """A TRL run of 2 iterations x 4 steps on a clock the test moves: each step takes 2 s (its rollout
    1 s of the first), the evaluation after iteration 1 takes 7 s. The steps' seconds, TRL's phases and
    :func:`train_seconds` hold 16 s, none of the 7; the curve holds them. The evaluation reseeds torch
    and puts the model in eval mode; after it the model trains again and torch samples what it would have."""
    import torch

    clock, model = FakeClock(), FakeModel()

    def evaluate(lm):
        lm.eval()
        torch.manual_seed(123)  # as real_model.evaluate does
        torch.rand(3)
        clock.now += 7.0
        return {"reward": 0.5, "reward_std": 0.5, "judges": {}}

    curve = real_model.Curve(1, 2, evaluate, clock=clock)
    rows: list[dict] = []
    timing = real_model.TRLClock(rows, 4, curve, clock=clock)
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    for step in range(1, 9):
        if step % 4 == 1:  # the iteration's generation
            rows.append({"iteration": len(rows) + 1, "time/rollout": 1.0, "time/update": 0.0, "_seconds": 0.0,
                         "_tokens": 32.0})  # fmt: skip
        timing.begin()
        timing.rollout = 1.0 if step % 4 == 1 else 0.0
        clock.now += 2.0
        timing.end(step, model)
    assert torch.equal(torch.rand(2), expected)  # the evaluation's reseeding did not reach the training
    assert model.training and curve.seconds == 7.0 and clock.now == 23.0
    assert [p["iteration"] for p in curve.points] == [1] and curve.points[0]["seconds"] == 7.0
    assert [row["_seconds"] for row in rows] == [8.0, 8.0] and [row["time/update"] for row in rows] == [7.0, 7.0]
    assert [row["tokens_per_second"] for row in rows] == [4.0, 4.0]
    assert real_model.train_seconds({"iterations": rows}) == 16.0  # rollout 1 + update 7, twice


def _run(alg: str, seed: int, gain: float, figure: str, threads: int = 1, **extra) -> dict:
    eval_sets = {OLD: "the first 64 problems of the test split (eval_size 64)",
                 NEW: "the first 90 problems of the test split (eval_size 90)"}  # fmt: skip
    sample = {"prompt": "Start with 2. Add 3.", "completion": " 2 + 3 = 5.", "reward": 1.0}
    run = {"alg": alg, "mode": "lora", "seed": seed, "reward_gain": gain, "judge_gains": {}, "judge_gain": None,
           "ppl_ratio": 1.0, "distinct_1": 0.1, "distinct_2": 0.2, "mean_length": 30.0, "seconds": 600.0,
           "threads": threads, "load_average": [1.0, 1.0], "date": "2026-12-01 00:00", "noise": {"reward": 0.05},
           "config": {"rollout_batch_size": 16, "num_iterations": 20},
           "iterations": [{"time/generate": 10.0, "time/update": 20.0, "tokens_per_second": 15.0}] * 20,
           "final": {"samples": [sample]}, "figure": figure, "eval_set": eval_sets[figure], **extra}  # fmt: skip
    if alg == "grpo":
        run["config"] = {"per_device_train_batch_size": 4, "max_steps": 80}
    return run


def _results(runs: dict) -> dict:
    settings: dict[str, Any]
    settings = {"model": "smollm2", "task": "arith_chains", "reward": "exact_answer", "judges": [], "judge": None,
                "task_args": {"steps": 2, "operations": ["add"], "operand_max": 5, "train_size": 320, "eval_size": 90},
                "prompts": 16, "new_tokens": 48, "iterations": 20, "eval_prompts": 90, "eval_split": "test",
                "eval_generation": {"do_sample": False}, "lora": real_model.LORA, "figure": "last-third",
                "eval_every": 3, "eval_set": "the first 90 problems of the test split (eval_size 90)",
                "eval_note": "steps=2 operations=[add] operand_max=5 has 500 distinct problems; train_size 320 "
                "leaves 90 for each held-out split (validation, test): the figure is on 90 test problems, "
                "not 256"}  # fmt: skip
    base = {"reward": 0.25, "judges": {}, "distinct_1": 0.1, "distinct_2": 0.2, "completion_length": 47.0,
            "samples": [{"prompt": "Start with 2. Add 3.", "completion": " 2 + 3 = 6.", "reward": 0.0}]}  # fmt: skip
    old_base = {**base, "reward": 0.28125}
    return {"settings": settings, "machine": {"cpu": "a CPU", "cores": 2, "versions": {}, "python": "3.11"},
            "base": {"0": base, "1": base, "2": base},
            "earlier_base": {"the first 64 problems of the test split (eval_size 64)": {"0": old_base, "1": old_base}},
            "runs": runs, "notes": []}  # fmt: skip


def test_old_rows_keep_their_label_and_a_table_of_their_own(tmp_path):
    """The old runs (final checkpoint, 64 problems) and the new (mean over the last third, 90) of the same
    cell are two rows of two tables, each with its base model's level (0.281 on the old 64 problems,
    0.250 on the new 90), never one mean: old ppo +0.10 and +0.30 give +0.200, new +0.40 alone; a new run
    under an old run's name keeps the old one, renamed by its label; the Targets compare each group's
    cells with TRL's on that group's figure alone."""
    runs = {"ppo-lora-s0": _run("ppo", 0, 0.10, OLD), "ppo-lora-s1": _run("ppo", 1, 0.30, OLD),
            "grpo-lora-s0": _run("grpo", 0, 0.05, OLD)}  # fmt: skip
    results = _results(runs)
    real_model.merge_run(results, "ppo-lora-s0", _run("ppo", 0, 0.40, NEW))
    real_model.merge_run(results, "grpo-lora-s0", _run("grpo", 0, 0.20, NEW))
    assert sorted(results["runs"]) == ["grpo-lora-s0", f"grpo-lora-s0 ({OLD})", "ppo-lora-s0", f"ppo-lora-s0 ({OLD})",
                                       "ppo-lora-s1"]  # fmt: skip
    assert results["runs"]["ppo-lora-s0 (final-checkpoint, 64 problems)"]["reward_gain"] == 0.10
    real_model.write_report(results, str(tmp_path / "R.md"), str(tmp_path / "c.png"))
    report = (tmp_path / "R.md").read_text()
    new_table = report.index(f"## Gains on the test prompts (mean ± std over seeds): {NEW}")
    old_table = report.index(f"## Gains on the test prompts (mean ± std over seeds): {OLD}")
    assert new_table < old_table < report.index("## Reward hacking")
    new, old = report[new_table:old_table], report[old_table : report.index("## Reward hacking")]
    assert "| base model | 3 | 0.250 (level) |" in new and "| ppo-lora | 1 | +0.400 |" in new
    assert "| base model | 2 | 0.281 (level) |" in old and "| ppo-lora | 2 | +0.200 ± 0.141 |" in old
    assert "Capped: steps=2 operations=[add] operand_max=5 has 500 distinct problems" in report
    assert "after iteration 13.3333 (iterations 15, 18, 20) are averaged" in report
    targets = report[report.index("## Targets") : report.index("## Re-run spread")]
    # new: 1000 * 0.40 / 320 completions = +1.250 vs grpo's 1000 * 0.20 / 320 = +0.625, per minute 60 * 0.40 /
    # 600 s = +0.0400 vs +0.0200; old: ppo's mean 0.200 (+0.625) vs grpo's 0.05 (+0.156), +0.0200 vs +0.0050
    new_line, old_line = "+1.250 vs +0.625, per minute of training +0.0400 vs +0.0200", "+0.625 vs +0.156"
    assert targets.index(f"Figure: {NEW}.") < targets.index(new_line) < targets.index(f"Figure: {OLD}.")
    assert targets.index(f"Figure: {OLD}.") < targets.index(old_line)
    assert (
        "`ppo-lora-s0 (final-checkpoint, 64 problems)` (2026-12-01 00:00, final-checkpoint, 64 problems, 1 thread)"
        in report
    )


def test_the_recorded_arith_json_labels_its_runs_and_reports_them_as_measured(tmp_path):
    """``--report-only`` on the recorded add-family figures (runs of the version before the figure was
    named): every run is stamped ``final-checkpoint, 64 problems`` in the JSON, and the report's one
    table says so; the gains are those recorded (ppo[lam=1.0]'s +0.441 over 8 seeds)."""
    json_path = tmp_path / "results.json"
    shutil.copy(SCRIPT.parent / "results-real-arith-add.json", json_path)
    real_model.main(["--report-only", "--task", "arith_chains", "--json", str(json_path),
                     "--results", str(tmp_path / "R.md"), "--plot", str(tmp_path / "c.png")])  # fmt: skip
    saved = json.loads(json_path.read_text())
    assert len(saved["runs"]) == 22
    assert {(run["figure"], run["eval_set"]) for run in saved["runs"].values()} == {
        (OLD, "the first 64 problems of the test split (eval_size 64)")
    }
    report = (tmp_path / "R.md").read_text()
    assert report.count("## Gains on the test prompts") == 1 and f"(mean ± std over seeds): {OLD}" in report
    assert "| ppo[lam=1.0]-lora | 8 | +0.441 ± 0.153 |" in report
    assert (
        "--task-arg eval_size=64 --iterations 20 --prompts 16 --new-tokens 48 --figure final --eval-prompts 64"
        in report
    )
    assert "## Re-run spread vs seed spread\n\n- none yet: no seed of a cell has been run twice" in report
    rows = report[report.index("## Each row's command") : report.index("## Reward hacking")]
    assert rows.count("\n- `") == 4  # ppo, ppo+rloo, ppo[lam=1.0], grpo: each with the seeds it ran
    lam = next(line for line in rows.splitlines() if line.startswith("- `ppo[lam=1.0]-lora` seeds 0, 1, 2, 3, 4"))
    assert "--figure final --eval-prompts 64 " in lam  # the command of the version that measured them
    assert lam.endswith("--algs 'ppo[lam=1.0]' --modes lora --seeds 0 1 2 3 4 5 6 7`")
    assert "--algs ppo+rloo --modes lora --seeds 0 1 2`" in rows


def test_the_rerun_spread_sits_beside_the_seed_spread():
    """ppo-lora's seed 0 ran at 1 thread (+0.400) and again at 2 (``--rerun``: +0.430): a re-run spread of
    0.030, beside the std of the cell's three seeds' first runs (0.40, 0.20, 0.60: 0.200). A re-run is no
    seed of the tables (the cell keeps 3 seeds, mean 0.400); one figure at a time."""
    runs = {"ppo-lora-s0": _run("ppo", 0, 0.40, NEW), "ppo-lora-s1": _run("ppo", 1, 0.20, NEW),
            "ppo-lora-s2": _run("ppo", 2, 0.60, NEW), "ppo-lora-s0-t2": _run("ppo", 0, 0.43, NEW, 2, rerun=True),
            "ppo-lora-s0 (final-checkpoint, 64 problems)": _run("ppo", 0, 0.10, OLD)}  # fmt: skip
    results = _results(runs)
    assert real_model.rerun_spread(results) == [
        "The gain is `exact_answer` (held-out; the task has no independent judge); the spread between re-runs is "
        "max - min of the same seed's runs, the spread between seeds the std of the cell's seeds (their first runs).",
        "",
        "| run | seed | figure | runs (threads) | re-run spread | seed std |",
        "| --- | ---: | --- | --- | ---: | ---: |",
        f"| ppo-lora | 0 | {NEW} | +0.400 (1 thread), +0.430 (2 threads) | 0.030 | 0.200 (3 seeds) |",
    ]
    (label, group), _ = real_model.figure_groups(results)
    assert label == NEW and [r["seed"] for r in real_model.cells(group)[("ppo", "lora")]] == [0, 1, 2]
    del runs["ppo-lora-s0-t2"]
    assert real_model.rerun_spread(results) == [
        "- none yet: no seed of a cell has been run twice (re-run one with the command above and `--algs ALG "
        "--modes MODE --seed S --threads N --rerun`); the gain is `exact_answer` (held-out; the task has no "
        "independent judge)."
    ]
    assert real_model.run_key("ppo", "lora", 0, 2) == "ppo-lora-s0-t2"


def test_figure_evals_only_skips_the_evaluations_the_figure_does_not_read_and_leaves_the_training_alone():
    """``--figure-evals-only``: of a 20-iteration run evaluated every 3, only 15 and 18 (and the final one, which
    run_one adds) are evaluated; the figure reads the same points as with every evaluation, and the training
    samples what it would have (each evaluation forks torch's RNG, as in the TRL test above)."""
    import torch

    assert real_model.parse_args(["--task", "arith_chains", "--figure-evals-only"]).figure_evals_only
    seen = []

    def evaluate(lm):
        torch.manual_seed(123)  # as real_model.evaluate does
        seen.append(float(torch.rand(1)))
        return {"reward": 0.5, "reward_std": 0.5, "judges": {}}

    draws = {}
    for only in (False, True):
        curve, model = real_model.Curve(3, 20, evaluate, last_third_only=only), FakeModel()
        torch.manual_seed(0)
        samples = []
        for iteration in range(1, 21):
            samples.append(float(torch.rand(1)))  # the iteration's sampling
            curve.maybe(iteration, model)
        draws[only] = samples
        curve.points.append(real_model.point(20, {"reward": 0.5, "reward_std": 0.5, "judges": {}}, 1.0))
        assert [p["iteration"] for p in real_model.last_third(curve.points, 20)] == [15, 18, 20]
        assert [p["iteration"] for p in curve.points] == ([15, 18, 20] if only else [3, 6, 9, 12, 15, 18, 20])
    assert draws[True] == draws[False] and len(seen) == 6 + 2


def test_evaluation_options_default_per_task_and_refuse_what_cannot_work(capsys):
    """arith_chains: 256 held-out problems and the last third's figure; movie_snippets: 64 prompts and the
    final checkpoint's (its recorded meaning); ``--eval-every 0`` with the last third's figure, or a
    negative number, is a one-line usage error."""
    arith = real_model.parse_args(["--task", "arith_chains"])
    assert (arith.eval_prompts, arith.figure_rule, arith.eval_every) == (256, "last-third", None)
    movie = real_model.parse_args([])
    assert (movie.eval_prompts, movie.figure_rule) == (64, "final")
    assert real_model.parse_args(["--task", "arith_chains", "--figure", "final", "--eval-every", "0"]).eval_every == 0
    for argv, message in (
        (["--task", "arith_chains", "--eval-every", "0"], "--eval-every 0 leaves the last third of training one "
         "evaluation, the final one: give --eval-every K > 0, or --figure final"),
        (["--eval-every", "-1"], "--eval-every must be >= 0 (0: no evaluation during training), got -1"),
        (["--eval-prompts", "0"], "--eval-prompts must be >= 1, got 0"),
        (["--figure-evals-only"], "--figure-evals-only keeps the evaluations that --figure last-third reads; with "
         "--figure final no evaluation during training is read: give --eval-every 0 instead"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as exited:
            real_model.parse_args(argv)
        assert exited.value.code == 2 and message in capsys.readouterr().err
    # the add family holds 500 problems: 320 to train leave 90 to each held-out split
    args, prompts, note = real_model.held_out("arith_chains", {"steps": 2, "operations": ["add"], "operand_max": 5,
                                                               "train_size": 320}, 256)  # fmt: skip
    assert (
        (args["eval_size"], prompts) == (90, 90)
        and note is not None
        and note.endswith("the figure is on 90 test problems, not 256")
    )
    assert real_model.held_out("movie_snippets", {}, 64) == ({}, 64, None)
