"""benchmarks/real_model.py keeps running end to end (the tiny model stands in for SmolLM2, tiny
classifiers for the fitted reward and judge, the shipped slice of movie_snippets for its data): with
``--workers 2`` and two seeds each run is its own process, all merge into one JSON and one report with
the gains the issue asks for, and ``--algs ppo --modes full --seed 0`` re-runs one cell. The figure's own
tests (the last third's mean, old rows labelled, the re-run spread) are tests/cli/test_real_model_figure.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_model.py"


@pytest.mark.slow
def test_two_workers_two_seeds_merge_and_one_cell_reruns(tmp_path):
    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    labels = ["NEGATIVE", "POSITIVE"]
    reward = save_sequence_classifier(tmp_path / "reward", "roberta", labels, seed=0)
    judge = save_sequence_classifier(tmp_path / "judge", "roberta", labels, seed=1)
    out = tmp_path / "r.json"
    common = [
        sys.executable, str(SCRIPT), "--model", "tiny", "--threads", "1", "--task", "movie_snippets",
        "--task-arg", "data=fixture", "--task-arg", f"classifier={reward}", "--task-arg", f"judge={judge}",
        "--prompts", "4", "--new-tokens", "4", "--iterations", "1", "--eval-prompts", "4",
        "--json", str(out), "--results", str(tmp_path / "R.md"), "--plot", str(tmp_path / "c.png"),
    ]  # fmt: skip
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(temporary)}
    command = [*common, "--workers", "2", "--algs", "ppo,a_lol", "--modes", "full", "--seeds", "0", "1"]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert set(results["runs"]) == {"ppo-full-s0", "ppo-full-s1", "a_lol-full-s0", "a_lol-full-s1"}
    assert set(results["base"]) == {"0", "1"} and results["settings"]["eval_split"] == "test"
    # the judges: every sentiment metric of the task but the one the run trains on
    assert results["settings"]["judges"] == ["learned_judge", "vader_sentiment"]
    assert results["settings"]["judge"] == "vader_sentiment"
    for run in results["runs"].values():
        assert run["threads"] == 1 and run["eval_seconds"] > 0
        base = results["base"][str(run["seed"])]
        assert run["reward_gain"] == round(run["final"]["reward"] - base["reward"], 6)
        judged = run["final"]["judges"]["vader_sentiment"] - base["judges"]["vader_sentiment"]
        assert run["judge_gain"] == round(judged, 6) and set(run["judge_gains"]) == set(results["settings"]["judges"])
        assert run["ppl_ratio"] == round(run["final"]["ref_perplexity"] / base["ref_perplexity"], 6)
        assert 0 < run["distinct_1"] <= 1 and 0 < run["distinct_2"] <= 1 and run["mean_length"] == 4
        assert run["noise"]["reward"] > 0 and set(run["noise"]) == {"reward", "learned_judge", "vader_sentiment"}
    report = (tmp_path / "R.md").read_text()
    assert "| ppo-full | 2 |" in report and "| a_lol-full | 2 |" in report and " ± " in report
    assert (tmp_path / "c.png").is_file()
    assert not list(temporary.glob("hfrl-real-*"))  # the workers' and the runs' temporary folders are gone

    before = {name: run["date"] + str(run["seconds"]) for name, run in results["runs"].items()}
    done = subprocess.run([*common, "--algs", "ppo", "--modes", "full", "--seed", "0"], capture_output=True,
                          text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    after = json.loads(out.read_text())
    assert set(after["runs"]) == set(before) and after["base"] == results["base"]  # merged, the base kept
    changed = {name for name, run in after["runs"].items() if run["date"] + str(run["seconds"]) != before[name]}
    assert changed == {"ppo-full-s0"}
    assert not (tmp_path / "c-settings.png").exists()

    # a row with settings of its own is a row of the table, and its curves are drawn in a figure of their own
    done = subprocess.run([*common, "--algs", "ppo[lam=1.0]", "--modes", "full", "--seed", "0"], capture_output=True,
                          text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(out.read_text())["runs"]["ppo[lam=1.0]-full-s0"]["config"]["lam"] == 1.0
    report = (tmp_path / "R.md").read_text()
    assert "| ppo[lam=1.0]-full | 1 |" in report and "(c-settings.png)" in report
    assert (tmp_path / "c-settings.png").is_file()


@pytest.mark.slow
def test_a_task_whose_reward_reads_a_column_runs(tmp_path):
    """arith_chains' reward (exact_answer) reads the rows' ``answer``: the evaluation passes the test rows'
    columns to the reward by name, as the trainers do (no independent judge: judge_gain is empty). Its
    figure is the mean over the last third: with ``--eval-every 1`` over 4 iterations hfrl's PPO and TRL's
    GRPO are evaluated after iterations 1, 2, 3 and at the end, the gain averages iterations 3 and 4, and
    the evaluations' seconds are the run's ``curve_eval_seconds``. The same PPO run without them
    (``--figure final --eval-every 0``) trains on the same samples: its rewards and KL per iteration are
    equal (the evaluations fork the RNG). ``--threads 2 --rerun`` keeps a second run of PPO's seed 0
    beside the first, for the report's re-run spread. Runs of other settings (``--prompts 4``) into the same
    JSON stop in one line and leave it as it was."""
    common = [
        sys.executable, str(SCRIPT), "--model", "tiny", "--threads", "1", "--task", "arith_chains",
        "--prompts", "8", "--new-tokens", "4", "--iterations", "4", "--eval-prompts", "4", "--modes", "full",
        "--seed", "0", "--results", str(tmp_path / "R.md"), "--plot", str(tmp_path / "c.png"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    out = tmp_path / "r.json"
    done = subprocess.run([*common, "--algs", "ppo,grpo", "--eval-every", "1", "--json", str(out)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    settings = results["settings"]
    assert settings["reward"] == "exact_answer" and settings["judge"] is None
    assert (settings["figure"], settings["eval_every"], settings["eval_prompts"]) == ("last-third", 1, 4)
    assert settings["task_args"] == {"eval_size": 128}  # the task's 128 is more than the 4 asked for
    base = results["base"]["0"]["reward"]
    for name in ("ppo-full-s0", "grpo-full-s0"):
        run = results["runs"][name]
        assert run["figure"] == "mean over last third, 4 problems" and run["final"]["reward"] == 0.0
        curve = run["curve"]
        assert [p["iteration"] for p in curve] == [1, 2, 3, 4] and curve[-1]["reward"] == run["final"]["reward"]
        figure = (curve[2]["reward"] + curve[3]["reward"]) / 2
        assert run["reward_gain"] == round(figure - base, 6) == 0.0  # 4 tokens cannot hold "Answer: N"
        assert run["curve_eval_seconds"] == pytest.approx(sum(p["seconds"] for p in curve[:3]))
        assert run["eval_seconds"] == pytest.approx(run["curve_eval_seconds"] + curve[3]["seconds"])
    # a re-run of the PPO cell's seed at 2 threads: kept beside the seed's run, in the re-run spread, in no table
    done = subprocess.run([*common, "--algs", "ppo", "--eval-every", "1", "--threads", "2", "--rerun", "--json",
                           str(out)], capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rerun = json.loads(out.read_text())["runs"]
    assert sorted(rerun) == ["grpo-full-s0", "ppo-full-s0", "ppo-full-s0-t2"]
    assert rerun["ppo-full-s0-t2"]["rerun"] is True and rerun["ppo-full-s0-t2"]["threads"] == 2
    assert rerun["ppo-full-s0"] == results["runs"]["ppo-full-s0"]
    report = (tmp_path / "R.md").read_text()
    spread = "+0.000 (1 thread), +0.000 (2 threads) | 0.000 | - (1 seed) |"
    assert f"| ppo-full | 0 | mean over last third, 4 problems | {spread}" in report
    assert "| ppo-full | 1 |" in report  # one seed in the gains table: the re-run is no seed
    # other settings into the same JSON: refused in one line, its runs left as they were
    held = out.read_bytes()
    done = subprocess.run([*common[:9], "4", *common[10:], "--algs", "ppo", "--json", str(out)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 2 and out.read_bytes() == held
    assert done.stderr.strip().splitlines()[-1] == (
        f"{out} holds 3 runs of other settings (prompts 8 here, not 4): give another --json (and --results, "
        "--plot), or these settings; nothing was run"
    )
    plain = tmp_path / "plain.json"
    done = subprocess.run([*common, "--algs", "ppo", "--figure", "final", "--eval-every", "0", "--json", str(plain)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    alone = json.loads(plain.read_text())["runs"]["ppo-full-s0"]
    assert alone["curve"] == [] and alone["figure"] == "final-checkpoint, 4 problems"
    evaluated = results["runs"]["ppo-full-s0"]["iterations"]
    assert [(r["reward"], r["kl"]) for r in alone["iterations"]] == [(r["reward"], r["kl"]) for r in evaluated]


def _run(alg: str, seed: int, gain: float, seconds: float, config: dict, ppl: float = 1.0) -> dict:
    rows = [{"time/generate": seconds / 4, "time/update": seconds / 4, "tokens_per_second": 10.0}] * 2
    return {"alg": alg, "mode": "lora", "seed": seed, "judge_gain": gain, "config": config, "iterations": rows,
            "ppl_ratio": ppl}  # fmt: skip


def test_against_trl_compares_the_best_online_cell_per_sample_and_per_minute():
    """Hand-computed: every run trains on 480 completions (16 prompts x 30 iterations; TRL: 4 x 120
    steps; ppo+rloo: 4 prompts x 4 generations x 30); per 1,000 completions = 1000 * gain / 480, per
    minute = 60 * gain / the phases' seconds (two rows of generate + update = the seconds given)."""
    sys.path.insert(0, str(SCRIPT.parent))
    import real_model

    online = {"rollout_batch_size": 16, "num_iterations": 30}
    grouped = {"rollout_batch_size": 4, "num_generations": 4, "num_iterations": 30}
    trl = {"per_device_train_batch_size": 4, "max_steps": 120}
    runs = [
        _run("ppo", 0, 0.24, 120.0, online), _run("ppo", 1, 0.30, 120.0, online),   # mean 0.27
        _run("ppo[lam=1.0]", 0, 0.29, 120.0, {**online, "lam": 1.0}),   # a row with settings: the best in bound
        _run("ppo+rloo", 0, 0.12, 60.0, grouped),
        _run("ppo+group_norm", 0, 0.60, 60.0, {**grouped, "sampled_set_loss": True}, ppl=2.5),  # the most gain,
        # but past 1.5x perplexity
        _run("grpo", 0, 0.048, 30.0, trl),   # faster, but less gain per minute: 0.096 < 0.135
        _run("rloo", 0, 0.30, 240.0, trl),   # more gain per sample than the best online cell
    ]  # fmt: skip
    results = {"settings": {"judge": "vader_sentiment"}, "runs": {f"{r['alg']}-{r['seed']}": r for r in runs}}
    assert [alg for alg, _ in real_model.cells(results)] == ["ppo", "ppo+group_norm", "ppo+rloo", "ppo[lam=1.0]",
                                                             "grpo", "rloo"]  # fmt: skip
    assert real_model.train_seconds(runs[0]) == 120.0
    assert [real_model.label(alg, mode, cell) for (alg, mode), cell in real_model.cells(results).items()][:3] == [
        "ppo-lora", "ppo+group_norm-lora (sampled_set_loss)", "ppo+rloo-lora"
    ]  # fmt: skip
    lines = real_model.against_trl(results)
    assert lines == [
        "- lora: hfrl ppo+group_norm (sampled_set_loss) vs TRL grpo (1 / 1 seeds): `vader_sentiment` gain per "
        "1,000 completions +1.250 vs +0.100, per minute of training +0.6000 vs +0.0960, 10.0 vs 10.0 generated "
        "tokens/s, perplexity 2.50x vs 1.00x: **met**",
        "- lora: hfrl ppo+group_norm (sampled_set_loss) vs TRL rloo (1 / 1 seeds): `vader_sentiment` gain per "
        "1,000 completions +1.250 vs +0.625, per minute of training +0.6000 vs +0.0750, 10.0 vs 10.0 generated "
        "tokens/s, perplexity 2.50x vs 1.00x: **met**",
        "- lora: hfrl ppo[lam=1.0], the best within 1.5x perplexity vs TRL grpo (1 / 1 seeds): `vader_sentiment` "
        "gain per 1,000 completions +0.604 vs +0.100, per minute of training +0.1450 vs +0.0960, 10.0 vs 10.0 "
        "generated tokens/s, perplexity 1.00x vs 1.00x: **met**",
        "- lora: hfrl ppo[lam=1.0], the best within 1.5x perplexity vs TRL rloo (1 / 1 seeds): `vader_sentiment` "
        "gain per 1,000 completions +0.604 vs +0.625, per minute of training +0.1450 vs +0.0750, 10.0 vs 10.0 "
        "generated tokens/s, perplexity 1.00x vs 1.00x: **NOT met**",
    ]


@pytest.mark.parametrize("ours, theirs", [("ppo", "grpo"), ("ppo[use_vllm=true]", "grpo[use_vllm=true]")])
def test_against_trl_ranks_a_task_without_a_judge_by_its_held_out_reward(ours, theirs):
    """A verifiable task (arith_chains: exact match, no independent judge) compares the reward's gain on the
    held-out prompts, by name; hand-computed: 1000 * 0.27 / 320 completions (16 x 20) = +0.844, 60 * 0.27 /
    120 s = +0.1350; GRPO 1000 * 0.20 / 320 = +0.625, 60 * 0.20 / 240 s = +0.0500. A TRL row with settings
    (TRL's GRPO on the engine) is a TRL cell too: it was left out, and the page read "no PPO / NLPO run yet"."""
    sys.path.insert(0, str(SCRIPT.parent))
    import real_model

    online, trl = {"rollout_batch_size": 16, "num_iterations": 20}, {"per_device_train_batch_size": 4, "max_steps": 80}
    runs = [{**_run(ours, 0, 0.0, 120.0, online), "reward_gain": 0.27},
            {**_run(theirs, 0, 0.0, 240.0, trl), "reward_gain": 0.20}]  # fmt: skip
    results = {"settings": {"judge": None, "reward": "exact_answer"}, "runs": {f"{r['alg']}-0": r for r in runs}}
    assert real_model.against_trl(results) == [
        f"- lora: hfrl {ours} vs TRL {theirs} (1 / 1 seeds): `exact_answer` (held-out; the task has no independent "
        "judge) gain per 1,000 completions +0.844 vs +0.625, per minute of training +0.1350 vs +0.0500, 10.0 vs "
        "10.0 generated tokens/s, perplexity 1.00x vs 1.00x: **met**"
    ]
    assert real_model.targets(results) == real_model.against_trl(results)  # no +0.25 VADER target without a judge
    del results["runs"][f"{theirs}-0"]
    assert real_model.targets(results) == [
        "- none to measure yet: no plain PPO / NLPO cell, and no TRL cell beside an hfrl one"
    ]


def test_against_trl_with_seeds_says_how_many_standard_errors_apart():
    """With 2 seeds or more a cell, each difference is given in Welch standard errors, and "met" needs 2 of
    them. Hand-computed: ppo per 1,000 = 1000 * (0.30, 0.50) / 320 = (0.9375, 1.5625), grpo (0.3125, 0.9375);
    difference 0.625, standard error sqrt(0.1953 / 2 + 0.1953 / 2) = 0.442: 1.4 SE. Per minute 60 * gain /
    120 s: (0.15, 0.25) vs (0.05, 0.15): 0.1 at the same 1.4 SE."""
    sys.path.insert(0, str(SCRIPT.parent))
    import real_model

    online, trl = {"rollout_batch_size": 16, "num_iterations": 20}, {"per_device_train_batch_size": 4, "max_steps": 80}
    runs = [{**_run(alg, seed, 0.0, 120.0, config), "reward_gain": gain}
            for alg, config, gains in (("ppo", online, (0.30, 0.50)), ("grpo", trl, (0.10, 0.30)))
            for seed, gain in enumerate(gains)]  # fmt: skip
    results = {"settings": {"judge": None, "reward": "exact_answer"},
               "runs": {f"{r['alg']}-{r['seed']}": r for r in runs}}  # fmt: skip
    assert real_model.against_trl(results) == [
        "- lora: hfrl ppo vs TRL grpo (2 / 2 seeds): `exact_answer` (held-out; the task has no independent judge) "
        "gain per 1,000 completions +1.250 vs +0.625, per minute of training +0.2000 vs +0.1000 (differences "
        "+0.625 at 1.4 SE and +0.1000 at 1.4 SE), 10.0 vs 10.0 generated tokens/s, perplexity 1.00x vs 1.00x: "
        "**ahead on the means, under 2 standard errors**"
    ]
    for run, gain in zip(runs, (0.45, 0.50, 0.10, 0.15), strict=True):  # further apart, less spread: 9.9 SE
        run["reward_gain"] = gain
    assert real_model.against_trl(results)[0].endswith("**met**")


def test_lora_rank_sets_r_and_alpha_and_rejects_zero(capsys):
    """``--lora-rank R``: the adapter's r and lora_alpha 2r (the default adapter is left as it is);
    0 is a one-line usage error."""
    import pytest

    sys.path.insert(0, str(SCRIPT.parent))
    import real_model

    assert real_model.parse_args([]).lora == real_model.LORA and real_model.LORA["r"] == 16
    assert real_model.parse_args(["--lora-rank", "32"]).lora == {**real_model.LORA, "r": 32, "lora_alpha": 64}
    assert real_model.LORA["r"] == 16
    with pytest.raises(SystemExit) as exited:
        real_model.parse_args(["--lora-rank", "0"])
    assert exited.value.code == 2 and "--lora-rank must be >= 1, got 0" in capsys.readouterr().err


def test_workers_start_the_longest_runs_first():
    """``--workers``: the jobs run longest first, by the cell's mean seconds in the JSON when it has
    runs of it (here A-LoL-full measured at 40 min outranks TRPO-full's table 20.9), else by the
    table of measured minutes (``ppo+rloo`` as ``ppo``), unknown cells last; the module's doctests
    (``worker_argv``, ``longest_first``) pass."""
    import doctest

    sys.path.insert(0, str(SCRIPT.parent))
    import real_model

    results = {"runs": {"a": {"alg": "a_lol", "mode": "full", "seconds": 2400.0}}}
    jobs = [("ppo", "lora", 0), ("ppo+rloo", "full", 1), ("trpo", "full", 0), ("a_lol", "full", 2), ("x", "lora", 0)]
    assert real_model.longest_first(jobs, results) == [
        ("a_lol", "full", 2), ("trpo", "full", 0), ("ppo+rloo", "full", 1), ("ppo", "lora", 0), ("x", "lora", 0)
    ]  # fmt: skip
    assert doctest.testmod(real_model).failed == 0


def test_figures_of_the_first_format_stop_in_one_line():
    """The archived IMDB-openings figures (runs without a seed) are refused by name, not with a KeyError."""
    sys.path.insert(0, str(SCRIPT.parent))
    import real_model

    path = str(SCRIPT.parent / "results-real-imdb-openings.json")
    with pytest.raises(SystemExit) as stop:
        real_model.load_results(path)
    assert str(stop.value) == (
        f"{path} was written by an earlier real_model.py (runs without a seed): its report stands as written; "
        "give --json a new file to run or report here"
    )


@pytest.mark.slow
def test_out_keeps_a_runs_critic_and_critic_from_starts_another_run_from_it(tmp_path):
    """``--out DIR`` keeps an online run's trained policy with its value head in ``DIR/RUN``, and the report
    shows its critic's value at each step (:mod:`hfrl.runs.value_at_step`, as its CLI reads the folder); a row
    ``ppo[critic_from=DIR/RUN]`` starts its critic there: its first rollout's values (logged per iteration
    with the explained variance) differ from those of the same seed's cold critic, on the same samples."""
    common = [
        sys.executable, str(SCRIPT), "--model", "tiny", "--threads", "1", "--task", "arith_chains",
        "--prompts", "8", "--new-tokens", "4", "--iterations", "1", "--eval-prompts", "2", "--modes", "full",
        "--figure", "final", "--eval-every", "0", "--json", str(tmp_path / "r.json"),
        "--results", str(tmp_path / "R.md"), "--plot", str(tmp_path / "c.png"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    kept = tmp_path / "critics"
    done = subprocess.run([*common, "--algs", "ppo", "--seed", "0", "--out", str(kept)], capture_output=True,
                          text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (kept / "ppo-full-s0" / "value_head.safetensors").is_file()
    # a run folder as hfrl train writes one: the value-at-step table reads it
    table = subprocess.run([sys.executable, "-m", "hfrl.runs.value_at_step", str(kept / "ppo-full-s0"), "--max-samples",
                            "2"], capture_output=True, text=True, env=env)  # fmt: skip
    assert table.returncode == 0, table.stderr[-2000:]
    assert "| start |" in table.stdout
    kept_run = json.loads((tmp_path / "r.json").read_text())["runs"]["ppo-full-s0"]  # the same table, in the report
    assert kept_run["value_at_step"]["num_prompts"] == 2 and kept_run["value_at_step"]["rows"][0]["boundary"] == "start"
    assert "### `ppo-full-s0`" in (tmp_path / "R.md").read_text()
    warm = f"ppo[critic_from={kept / 'ppo-full-s0'}]"
    done = subprocess.run([*common, "--algs", f"ppo,{warm}", "--seed", "1"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    cold, started = runs["ppo-full-s1"], runs[f"{warm}-full-s1"]
    assert started["config"]["critic_from"] == str(kept / "ppo-full-s0") and "critic_from" not in cold["config"]
    first = cold["iterations"][0], started["iterations"][0]
    assert first[0]["reward"] == first[1]["reward"]  # the same samples: the policy starts the same
    assert first[0]["value_mean"] != first[1]["value_mean"] and "explained_variance" in first[1]
    assert "value_at_step" not in cold  # a run not kept has no folder to read
