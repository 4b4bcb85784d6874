"""``kill -9`` a training run anywhere, even in the middle of a checkpoint write, then ``--resume``:
the final weights equal an uninterrupted run's exactly (PPO, NLPO, A-LoL), the killed write is
skipped with one warning line, and ``iterations.jsonl`` holds each step once.

Each run is ``hfrl train`` (the CLI's ``main``) in a child process forked from the test process, so
that it starts in milliseconds instead of re-importing torch and transformers; its stderr comes back
through a pipe. To hit a checkpoint write every time, the child patches one step of the write to
announce itself and sleep, and the test SIGKILLs it there; the "random" runs are killed a seeded
random moment after a logged step. The data has distinct prompts and spans several epochs, so the
resumed run must also draw the prompts the uninterrupted run drew.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file


def child_main(argv: list[str], stage: str, at: str, stderr_fd: int) -> None:
    """The child: stderr into the pipe, stdout dropped, no pytest logging handlers (warnings reach
    stderr as in a terminal), the patches of ``stage`` at checkpoint ``at``, then ``hfrl train``."""
    import tqdm.std
    from transformers import Trainer
    from transformers.trainer_callback import TrainerState

    from hfrl.cli.app import main
    from hfrl.trainers import crash_safe, iteration_log

    # A forked child inherits tqdm's write lock as some thread of the parent held it at the fork (its
    # monitor thread, a progress bar): held, it never frees here and the child hangs. A fresh one.
    tqdm.std.TqdmDefaultWriteLock.th_lock = tqdm.std.TRLock()
    tqdm.std.TqdmDefaultWriteLock.mp_lock = None  # the parent's multiprocessing lock: not taken in the child
    tqdm.tqdm.set_lock(tqdm.std.TqdmDefaultWriteLock())
    os.dup2(stderr_fd, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the child's streams, for its whole life
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    logging.getLogger().handlers.clear()

    def say(tag: str, name: str) -> None:
        sys.stderr.write(f"{tag} {os.path.basename(name)}\n")
        sys.stderr.flush()

    def pause(folder: str) -> None:
        if os.path.basename(folder) == at:
            say("PAUSED", folder)
            time.sleep(600)

    mark_complete, on_log = crash_safe.mark_complete, iteration_log.IterationLog.on_log

    def announce_complete(folder: str, *args) -> None:
        if stage == "marker":  # every file written but the completion marker
            pause(folder)
        mark_complete(folder, *args)
        say("COMPLETE", folder)

    def announce_log(self, args, state, control, **kwargs):
        on_log(self, args, state, control, **kwargs)
        say("LOGGED", f"step-{state.global_step}")

    crash_safe.mark_complete = announce_complete
    iteration_log.IterationLog.on_log = announce_log
    if stage == "trainer_files":  # inside the Trainer's write: weights and optimizer written, RNG and state not
        save_rng_state = Trainer._save_rng_state
        Trainer._save_rng_state = lambda self, folder: (pause(folder), save_rng_state(self, folder))[1]
    if stage == "own_state":  # the Trainer's files written, hfrl's own state (online_state.json, mask policy) not
        save_to_json = TrainerState.save_to_json
        TrainerState.save_to_json = lambda self, path: (save_to_json(self, path), pause(os.path.dirname(path)))[0]
    main(["train", *argv])


# 16 distinct prompts, 8 per rollout: 2 iterations per epoch, 2 optimizer steps per iteration; 8
# iterations = 4 epochs; checkpoints every 3 iterations (checkpoint-6: in the middle of the second
# epoch, checkpoint-12), the last one kept (rotation).
ONLINE = ["--model", "tiny", "--num_iterations", "8", "--save_every", "3", "--save_total_limit", "1",
          "--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--max_new_tokens", "6",
          "--learning_rate", "1e-3", "--kl_coef", "0.05", "--kl_target", "0.01", "--disable_tqdm", "true",
          "--report_to", "none"]  # fmt: skip
NLPO = ["--mask_update_every", "2", "--top_mask", "0.9", "--min_tokens_to_keep", "5"]
# 16 prompts x 2 completions, 4 per step (PRO: 4 rankings): several epochs in 12 steps; a checkpoint every 2.
OFFLINE = ["--model", "tiny", "--max_steps", "12", "--save_strategy", "steps", "--save_steps", "2",
           "--per_device_train_batch_size", "4", "--value_epochs", "2",
           "--max_new_tokens", "6", "--max_completion_length", "10", "--learning_rate", "1e-3", "--logging_steps", "1",
           "--eval_strategy", "no", "--load_best_model_at_end", "false", "--warmup_steps", "0",
           "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip
# what differs between identical runs: timings, and the summary's mean loss of this session's steps
TIMINGS = ("time/", "tokens_per_second", "train_", "total_flos")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Prompts "1".."16" with references (ROUGE-L rewards); for offline runs also two completions each."""
    root = tmp_path_factory.mktemp("data")
    online, offline = root / "online", root / "offline"
    online.mkdir()
    offline.mkdir()
    rows = [{"prompt": str(n), "references": [f"{n} {n + 1} {n + 2}"]} for n in range(1, 17)]
    (online / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = [{**r, "completion": c} for r in rows for c in (r["references"][0], " the movie")]
    (offline / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    (offline / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:8]))
    return root


def hfrl_train(args: list[str], pause: str = "", kill_on: str = "", delay: float = 0.0) -> str:
    """``hfrl train ARGS`` in a forked child; its stderr. ``pause="STAGE checkpoint-N"``: the child
    pauses at that step of that checkpoint's write and is killed there. ``kill_on``: a line the child
    writes (``COMPLETE checkpoint-N``, ``LOGGED step-N``), after which it is killed ``delay`` seconds
    later. With neither, the run must finish."""
    stage, _, at = pause.partition(" ")
    kill_on = f"PAUSED {at}" if pause else kill_on
    read_fd, write_fd = os.pipe()
    proc = multiprocessing.get_context("fork").Process(target=child_main, args=(args, stage, at, write_fd))
    proc.start()
    os.close(write_fd)
    lines = []
    with os.fdopen(read_fd) as stderr:
        for line in stderr:
            lines.append(line)
            if kill_on and line.strip() == kill_on:
                time.sleep(delay)
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.join(timeout=300)
    err = "".join(lines)
    if kill_on:
        assert proc.exitcode == -signal.SIGKILL, (
            f"the run ended (code {proc.exitcode}) before {kill_on!r}:\n{err[-3000:]}"
        )
    else:
        assert proc.exitcode == 0, err[-3000:]
    return err


def weights(run: Path) -> dict[str, torch.Tensor]:
    out = load_file(str(run / "model.safetensors"))
    if (run / "value_head.safetensors").is_file():
        out.update({f"value_head.{k}": v for k, v in load_file(str(run / "value_head.safetensors")).items()})
    return out


def logged(run: Path) -> list[dict]:
    """``iterations.jsonl`` without its timings (all that differs between identical runs)."""
    lines = [json.loads(line) for line in (run / "iterations.jsonl").read_text().splitlines()]
    return [{k: v for k, v in entry.items() if not k.startswith(TIMINGS)} for entry in lines]


def assert_same_run(resumed: Path, reference: Path) -> None:
    ours, theirs = weights(resumed), weights(reference)
    assert ours.keys() == theirs.keys()
    diff = max(float((ours[k] - theirs[k]).abs().max()) for k in ours)
    assert diff == 0.0, f"max abs difference {diff} between the resumed and the uninterrupted run"
    assert logged(resumed) == logged(reference)  # each step once, with the same values


@pytest.fixture(scope="module")
def ppo_reference(data, tmp_path_factory, tiny_causal_dir) -> Path:
    out = tmp_path_factory.mktemp("ppo") / "reference"
    hfrl_train(["--task", str(data / "online"), "--alg", "ppo", "--output-dir", str(out), *ONLINE])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["own_state", "random"])
def test_ppo_killed_then_resumed_matches_an_uninterrupted_run(stage, data, ppo_reference, tmp_path):
    """``own_state``: killed after the Trainer's files of checkpoint-12, before ``online_state.json``
    (the adaptive KL coefficient): resuming from it reset beta and the weights differed by 0.298."""
    out = tmp_path / "run"
    args = ["--task", str(data / "online"), "--alg", "ppo", "--output-dir", str(out), *ONLINE]
    if stage == "random":
        rng = random.Random(13)  # an iteration after checkpoint-6 (steps 8..14), then a moment later
        hfrl_train(args, kill_on=f"LOGGED step-{2 * rng.randint(4, 7)}", delay=rng.uniform(0.0, 0.05))
    else:
        hfrl_train(args, pause=f"{stage} checkpoint-12")
        assert (out / "checkpoint-6" / "checkpoint_complete.json").is_file()  # kept by rotation: not yet replaced
        assert not (out / "checkpoint-12" / "online_state.json").exists()
    err = hfrl_train([*args, "--resume"])
    if stage == "own_state":
        warning = [line for line in err.splitlines() if line.startswith("skipped ")]
        assert warning == [
            "skipped checkpoint-12: incomplete: its writing was interrupted (no checkpoint_complete.json; missing "
            "online_state.json); resuming from checkpoint-6"
        ]
    assert_same_run(out, ppo_reference)
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-16"]  # the last one (save_total_limit 1)


@pytest.mark.slow
@pytest.mark.parametrize(("alg", "estimator", "steps"), [("ppo", "rloo", 4), ("trpo", "reinforce_baseline", 1)])
def test_critic_free_group_run_killed_then_resumed_matches_an_uninterrupted_run(
    alg, estimator, steps, data, tmp_path, tiny_causal_dir
):
    """Two completions per prompt, no critic (no value head in any checkpoint): killed a seeded random
    moment after an iteration between the first and the second checkpoint, then resumed: the same
    weights and log as an uninterrupted run. ``steps``: optimizer steps per iteration (PPO: 16
    completions / 4; TRPO without a critic: its policy step alone)."""
    reference, out = tmp_path / "reference", tmp_path / "run"
    common = ["--task", str(data / "online"), "--alg", alg, *ONLINE, "--advantage_estimator", estimator,
              "--num_generations", "2"]  # fmt: skip
    hfrl_train([*common, "--output-dir", str(reference)])
    rng = random.Random(17)  # an iteration after checkpoint-(3 x steps), then a moment later
    hfrl_train([*common, "--output-dir", str(out)], kill_on=f"LOGGED step-{steps * rng.randint(4, 5)}",
               delay=rng.uniform(0.0, 0.05))  # fmt: skip
    hfrl_train([*common, "--output-dir", str(out), "--resume"])
    assert_same_run(out, reference)
    assert not list(out.rglob("value_head.safetensors")) and not list(reference.rglob("value_head.safetensors"))


@pytest.mark.slow
def test_nlpo_killed_inside_the_trainers_checkpoint_write_resumes_exactly(data, tmp_path, tiny_causal_dir):
    """Killed inside the Trainer's own write of checkpoint-12 (weights and optimizer written; RNG
    state, trainer state, KL controller and mask policy not): a missing mask policy used to reset
    NLPO's mask silently (0.251 difference)."""
    reference, out = tmp_path / "reference", tmp_path / "run"
    common = ["--task", str(data / "online"), "--alg", "nlpo", *ONLINE, *NLPO]
    hfrl_train([*common, "--output-dir", str(reference)])
    hfrl_train([*common, "--output-dir", str(out)], pause="trainer_files checkpoint-12")
    err = hfrl_train([*common, "--output-dir", str(out), "--resume"])
    warning = next(line for line in err.splitlines() if line.startswith("skipped "))
    assert warning.startswith("skipped checkpoint-12: incomplete: its writing was interrupted (no ")
    assert "mask_policy.safetensors" in warning and "online_state.json" in warning
    assert_same_run(out, reference)


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["a_lol", "pro"])
def test_offline_run_killed_at_a_random_point_resumes_exactly(alg, data, tmp_path, tiny_causal_dir):
    """A-LoL's priority sampler draws each epoch from ``seed + epoch``: a run resumed in a later
    epoch draws what the uninterrupted run drew (it used to restart the sampler's generator, and
    the weights differed by 4.2e-3). PRO shuffles with the Trainer's seedable sampler."""
    reference, out = tmp_path / "reference", tmp_path / "run"
    sampling = ["--sampling", "good_priority"] if alg == "a_lol" else []
    common = [
        "--task",
        str(data / "offline"),
        "--alg",
        alg,
        *OFFLINE,
        *sampling,
        "--preparation_cache_dir",
        str(tmp_path),
    ]
    hfrl_train([*common, "--output-dir", str(reference)])
    rng = random.Random(7)  # a step after checkpoint-2, then a moment later
    hfrl_train([*common, "--output-dir", str(out)], kill_on=f"LOGGED step-{rng.randint(3, 10)}",
               delay=rng.uniform(0.0, 0.05))  # fmt: skip
    hfrl_train([*common, "--output-dir", str(out), "--resume"])
    assert_same_run(out, reference)


@pytest.mark.slow
def test_a_kill_before_the_marker_leaves_an_incomplete_checkpoint(data, tmp_path, tiny_causal_dir):
    """Every file written but the marker: the checkpoint is not used, and Python's
    ``resume_from_checkpoint`` refuses it in one line that says where to resume from."""
    from hfrl.runs.experiment import build_trainer, resolve_run

    out = tmp_path / "run"
    args = ["--task", str(data / "online"), "--alg", "ppo", "--output-dir", str(out), *ONLINE]
    hfrl_train(args, pause="marker checkpoint-12")
    assert (out / "checkpoint-12" / "online_state.json").is_file()
    trainer = build_trainer(resolve_run(str(data / "online"), "ppo", "tiny", overrides={"disable_tqdm": True},
                                        output_dir=str(out)))  # fmt: skip
    with pytest.raises(ValueError) as err:
        trainer.train(resume_from_checkpoint=str(out / "checkpoint-12"))
    assert str(err.value) == (
        f"cannot resume from checkpoint {out / 'checkpoint-12'}: incomplete: its writing was interrupted (no "
        f"checkpoint_complete.json); resume from {out / 'checkpoint-6'} (the newest complete one), or delete it"
    )


# ---- the pieces, in-process ----------------------------------------------------------------------
def make_checkpoint(folder: Path, files: dict[str, str], complete: bool = True) -> Path:
    from hfrl.trainers.checkpoints import mark_complete

    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    if complete:
        mark_complete(str(folder))
    return folder


def test_a_checkpoint_is_complete_only_with_every_file_it_listed(tmp_path):
    from hfrl.trainers.checkpoints import checkpoint_problem

    folder = make_checkpoint(tmp_path / "checkpoint-2", {"model.safetensors": "weights", "online_state.json": "{}"})
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    assert json.loads((folder / "checkpoint_complete.json").read_text()) == {
        "format": 2,
        "files": {"model.safetensors": 7, "online_state.json": 2},
        "sha256": {"model.safetensors": sha("weights"), "online_state.json": sha("{}")},
    }
    assert checkpoint_problem(str(folder)) is None
    (folder / "model.safetensors.index.json").write_text("{}")  # a file added: the Trainer would load it first
    assert checkpoint_problem(str(folder)) == (
        "damaged: it holds files added after it was written (model.safetensors.index.json), which its "
        "checkpoint_complete.json does not list"
    )
    (folder / "model.safetensors.index.json").unlink()
    (folder / "model.safetensors").write_text("weightz")  # changed in place, at the same size
    assert checkpoint_problem(str(folder)) == (
        "damaged: model.safetensors changed after the checkpoint was written (its SHA-256 differs)"
    )
    (folder / "model.safetensors").write_text("weig")  # cut short after the fact
    assert checkpoint_problem(str(folder)) == "damaged: model.safetensors changed size after the checkpoint was written"
    (folder / "online_state.json").unlink()
    assert checkpoint_problem(str(folder)) == "damaged: missing online_state.json"
    bare = make_checkpoint(tmp_path / "checkpoint-4", {"model.safetensors": "w"}, complete=False)
    assert checkpoint_problem(str(bare), ["model.safetensors", "online_state.json"]) == (
        "incomplete: its writing was interrupted (no checkpoint_complete.json; missing online_state.json)"
    )


def test_resume_takes_the_newest_complete_checkpoint_and_says_what_it_skipped(tmp_path, caplog):
    from hfrl.runs.experiment import last_checkpoint as has_checkpoint
    from hfrl.trainers.checkpoints import newest_complete_checkpoint as last_checkpoint

    files = {"trainer_state.json": "{}", "online_state.json": "{}", "mask_policy.safetensors": "m"}
    make_checkpoint(tmp_path / "checkpoint-8", files)
    make_checkpoint(tmp_path / "checkpoint-12", {"trainer_state.json": "{}"}, complete=False)
    make_checkpoint(tmp_path / "checkpoint-16", {}, complete=False)
    with caplog.at_level("WARNING", logger="hfrl.trainers.checkpoints"):
        assert last_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-8")
    assert [r.getMessage() for r in caplog.records] == [
        "skipped checkpoint-16: incomplete: its writing was interrupted (no checkpoint_complete.json; missing "
        "mask_policy.safetensors, online_state.json, trainer_state.json); checkpoint-12: incomplete: its writing "
        "was interrupted (no checkpoint_complete.json; missing mask_policy.safetensors, online_state.json); "
        "resuming from checkpoint-8"
    ]
    (tmp_path / "checkpoint-8" / "checkpoint_complete.json").unlink()
    with pytest.raises(ValueError) as err:
        last_checkpoint(str(tmp_path))
    assert str(err.value).startswith(f"no complete checkpoint in {tmp_path} to resume from (checkpoint-16: incomplete")
    assert str(err.value).endswith("); start the run again")
    assert last_checkpoint(str(tmp_path / "elsewhere")) is None
    with pytest.raises(ValueError, match=r"^--resume: no checkpoint-\* folder in "):
        has_checkpoint(str(tmp_path / "elsewhere"))


def test_rotation_keeps_complete_checkpoints_and_the_log_has_one_line_per_iteration(tiny_causal_dir, make_config):
    from hfrl import PPOTrainer
    from hfrl.testing import digit_reward
    from hfrl.trainers.checkpoints import checkpoint_problem

    data = Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * 4})
    args = make_config(num_iterations=3, save_every=1, save_total_limit=2)
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=data)
    trainer.train()
    out, step = Path(args.output_dir), args.steps_per_iteration
    assert {p.name for p in out.glob("checkpoint-*")} == {f"checkpoint-{2 * step}", f"checkpoint-{3 * step}"}
    assert all(checkpoint_problem(str(p)) is None for p in out.glob("checkpoint-*"))
    manifest = json.loads((out / f"checkpoint-{3 * step}" / "checkpoint_complete.json").read_text())["files"]
    assert {"online_state.json", "value_head.safetensors", "optimizer.pt", "rng_state.pth"} <= set(manifest)
    lines = [json.loads(line) for line in (out / "iterations.jsonl").read_text().splitlines()]
    assert lines == json.loads(json.dumps(trainer.state.log_history))  # the log history, entry for entry
    assert [entry["iteration"] for entry in lines if "reward" in entry] == [1, 2, 3]


def test_a_resumed_log_keeps_the_lines_up_to_its_checkpoint(tmp_path):
    from hfrl.trainers.iteration_log import restart_log

    path = tmp_path / "iterations.jsonl"
    path.write_text('{"step": 0, "x": 1}\n{"step": 4, "reward": 0.5}\n{"step": 8, "reward": 0.7}\n{"step": 12, "rew')
    restart_log(str(tmp_path), 4)  # resumed from checkpoint-4: steps 8 and 12 (cut short by the kill) go
    assert path.read_text() == '{"step": 0, "x": 1}\n{"step": 4, "reward": 0.5}\n'
    restart_log(str(tmp_path), None)  # a new run in the same directory starts a new log
    assert path.read_text() == ""


def test_each_iterations_prompts_are_fetched_once_and_epochs_replay_on_resume(tiny_causal_dir, make_config):
    """One batch of rows per iteration, placeholders for its other micro-steps; epoch e draws from
    seed + e, so skipping the batches a checkpoint trained (as the Trainer does on resume) gives
    the batches an uninterrupted run sees."""
    from accelerate import skip_first_batches

    from hfrl import PPOTrainer
    from hfrl.testing import digit_reward

    data = Dataset.from_dict({"prompt": [str(n) for n in range(24)]})
    args = make_config(rollout_batch_size=8, mini_batch_size=4, num_ppo_epochs=2)  # 4 micro-steps
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=data)
    loader = trainer.get_train_dataloader()
    assert len(loader) == 3 * 4  # 3 iterations per epoch

    def epoch(dataloader, number):
        dataloader.set_epoch(number)
        return [[None if row is None else row["prompt"] for row in batch.examples] for batch in dataloader]

    first = epoch(loader, 0)
    for i in range(0, 12, 4):
        assert len(first[i]) == 8 and None not in first[i]
        assert first[i + 1] == first[i + 2] == first[i + 3] == [None] * 8
    prompts = [p for i in range(0, 12, 4) for p in first[i]]
    assert sorted(prompts) == sorted(data["prompt"])  # each prompt once per epoch
    second = epoch(loader, 1)
    assert second != first and epoch(loader, 1) == second
    resumed = skip_first_batches(loader, 4)  # resumed in the second epoch after its first iteration
    assert epoch(resumed, 1) == second[4:]

    with pytest.raises(RuntimeError) as err:
        trainer._prepare_inputs(next(iter(resumed)).__class__([None] * 8))
    assert str(err.value) == (
        "PPO: a micro-step without prompts found no rollout to train on; training resumes only at an iteration "
        "boundary (a checkpoint written by save_every)"
    )


def test_priority_sampling_draws_each_epoch_from_its_own_seed():
    from torch.utils.data import WeightedRandomSampler

    from hfrl.trainers.offline.priority_sampler import PrioritySampler

    weights = torch.tensor([0.0, 1.0, 0.5, 0.0, 2.0, 0.25])
    sampler = PrioritySampler(weights, uniform=False, seed=3)
    torch_draws = WeightedRandomSampler(weights, 4, generator=torch.Generator().manual_seed(3))
    assert list(sampler) == list(torch_draws) and len(sampler) == 4  # as many draws as positive weights
    sampler.set_epoch(1)
    again = PrioritySampler(weights, uniform=False, seed=3)
    again.set_epoch(1)
    assert list(sampler) == list(again) != list(torch_draws)
    assert sorted(PrioritySampler(weights, uniform=True, seed=0)) == [1, 2, 4, 5]


def test_building_the_tiny_model_leaves_the_callers_rng_alone(tmp_path):
    """A run that builds the built-in model on first use draws the same value head as one that loads
    it: the first kill test's uninterrupted run differed from every later run of the same seed."""
    from hfrl.core.tiny import tiny_model_path

    torch.manual_seed(5)
    tiny_model_path("tiny", cache_dir=tmp_path)
    after_build = torch.rand(3)
    torch.manual_seed(5)
    tiny_model_path("tiny", cache_dir=tmp_path)  # loads
    assert torch.equal(torch.rand(3), after_build)
