"""DeepSpeed ZeRO-2/3 on 2 real CPU processes (``accelerate launch`` with hfrl's shipped configs, gloo):
what each process holds, the same weights as DDP, a ZeRO-3 resume, two "machines" on localhost, and
the start-up guard that stops a run which asked to shard and did not."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import load_benchmark
from sharding_checks import assert_sharded_like_ddp, needs_deepspeed, needs_launcher, one_launch_per_module  # noqa: F401


def _report(**kw):
    report = {"distributed_type": "DEEPSPEED", "zero_stage": 3, "fsdp": False, "world_size": 2,
              "model_parameters": 1000, "trainable_parameters": 1000,
              "ranks": [{"parameters": 500, "optimizer": 500}, {"parameters": 500, "optimizer": 500}]}  # fmt: skip
    report.update(kw)
    return report


def test_the_guard_passes_a_sharded_run_and_stops_each_silent_fallback_with_one_line():
    from hfrl.trainers.sharding_guard import check_report, summary

    check_report(_report(), "DeepSpeed")  # ZeRO-3, halves: fine
    assert summary(_report()) == (
        "distributed: DeepSpeed ZeRO-3, 2 processes; per process at most 500 of 1,000 parameters (0.50) and an "
        "optimizer over 500 of 1,000 trainable elements (0.50)"
    )
    with pytest.raises(ValueError) as err:  # asked for DeepSpeed, got DDP
        check_report(_report(distributed_type="MULTI_CPU", zero_stage=None), "DeepSpeed")
    assert str(err.value) == (
        "the launcher asked for DeepSpeed and accelerate set up MULTI_CPU (2 process(es)): the run would hold whole, "
        "unsharded copies; see docs/how-to/distributed.md for what shards on this machine"
    )
    whole = [{"parameters": 1000, "optimizer": 500}, {"parameters": 1000, "optimizer": 500}]
    with pytest.raises(ValueError) as err:  # ZeRO-3 that partitioned nothing
        check_report(_report(ranks=whole), "DeepSpeed")
    assert str(err.value) == (
        "ZeRO-3 on 2 processes and a process holds all 1,000 parameters: nothing was sharded (on a small model set "
        "stage3_param_persistence_threshold: 0 in the DeepSpeed config)"
    )
    full_state = [{"parameters": 1000, "optimizer": 1000}, {"parameters": 1000, "optimizer": 1000}]
    with pytest.raises(ValueError) as err:  # ZeRO-2 whose optimizer state is whole
        check_report(_report(zero_stage=2, ranks=full_state), "DeepSpeed")
    assert str(err.value) == (
        "ZeRO-2 on 2 processes and a process's optimizer holds all 1,000 trainable elements: the optimizer state "
        "was not partitioned"
    )
    check_report(_report(distributed_type="MULTI_CPU", zero_stage=None, ranks=full_state), None)  # DDP asked: fine


WHOLE_COPY = textwrap.dedent("""
    import os, sys, torch
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    from transformers import AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig
    from hfrl.core.zero3 import is_partitioned, whole_copy
    plain = AutoModelForCausalLM.from_pretrained(sys.argv[1])
    keep = HfDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1,
                              "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})
    sharded = AutoModelForCausalLM.from_pretrained(sys.argv[1])  # partitioned at load (zero.Init)
    assert is_partitioned(sharded) and not is_partitioned(plain)
    from hfrl.metrics.base import cached
    scorer = cached("a metric's model", lambda: AutoModelForCausalLM.from_pretrained(sys.argv[1]))
    assert not is_partitioned(scorer)  # what rewards and metrics load stays whole (loading_whole)
    assert is_partitioned(AutoModelForCausalLM.from_pretrained(sys.argv[1]))  # and the run's own loads do not
    from hfrl.core.policies import disable_dropout
    disable_dropout(sharded)  # as the trainers do after loading: the config still says 0.1
    torch.manual_seed(0)
    copy = whole_copy(sharded)
    drawn = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(drawn, torch.rand(3)), "whole_copy drew random numbers"
    assert not is_partitioned(copy) and sum(p.numel() for p in copy.parameters()) == plain.num_parameters()
    assert {m.p for m in copy.modules() if isinstance(m, torch.nn.Dropout)} == {0.0}
    a, b = copy.state_dict(), plain.state_dict()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in b)
    x = torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(copy(x).logits, plain(x).logits)
    print("OK")
""")


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
@needs_deepspeed
def test_a_whole_copy_of_a_zero3_partitioned_model_has_its_weights_and_draws_no_random_numbers(
    tmp_path, tiny_causal_dir
):
    """``copy.deepcopy`` of a ZeRO-3 partitioned model copied empty tensors (the reference failed at its first
    forward); a random initialisation before loading the weights changed every later sample (NLPO's first
    rollout differed from DDP's); a copy built from the config alone had dropout back on (a separate critic
    trained with it). A model a reward or metric loads (through ``hfrl.metrics.base.cached``) is whole, not
    partitioned by transformers as the run's own models are."""
    script = tmp_path / "whole_copy_check.py"  # not copy.py: the script folder comes first on sys.path
    script.write_text(WHOLE_COPY)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, str(script), tiny_causal_dir, "29631"], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]


THREADS_AT_EXIT = textwrap.dedent("""
    import atexit, os

    def _record():  # registered at start-up: the last exit handler to run, before the interpreter's teardown
        names = []
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/comm") as comm:
                    names.append(comm.read().strip())
            except OSError:
                pass
        with open(os.path.join(os.environ["THREADS_AT_EXIT"], "rank" + os.environ["RANK"]), "w") as out:
            out.write("\\n".join(names))

    if os.environ.get("RANK") is not None and os.path.isdir("/proc/self/task"):
        atexit.register(_record)
""")


def threads_at_exit(folder):
    """The environment for a launch whose processes each write their threads' names, as they begin to exit,
    to ``folder/rankR`` (a ``sitecustomize`` first on the path)."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(THREADS_AT_EXIT)
    return {"THREADS_AT_EXIT": str(folder), "PYTHONPATH": os.pathsep.join([str(folder), *sys.path])}


def assert_no_gloo_threads_at_exit(folder):
    """Linux: no process of the launch ran a gloo thread when its interpreter began to exit. A gloo group's
    threads stop only with the last reference to the group: left to the interpreter's teardown, a few ZeRO-3
    runs aborted at exit ("terminate called without an active exception")."""
    if os.path.isdir("/proc/self/task"):
        left = {rank.name: rank.read_text().split() for rank in folder.glob("rank*")}
        assert sorted(left) == ["rank0", "rank1"], left
        assert not [name for names in left.values() for name in names if "gloo" in name], left


@pytest.fixture(scope="module")
def ppo_runs(tmp_path_factory, tiny_causal_dir):
    """PPO (value head on the shared backbone) under DDP, ZeRO-2 and ZeRO-3, 2 processes each."""
    bench = load_benchmark("bench_sharding")
    root = tmp_path_factory.mktemp("sharding")
    return bench, root, bench.compare("ppo", root)


@pytest.mark.slow
@needs_launcher
@needs_deepspeed
def test_ppo_with_a_value_head_shards_under_zero2_and_zero3_matches_ddp_and_resumes_exactly(ppo_runs, tmp_path):
    bench, root, rows = ppo_runs
    assert_sharded_like_ddp(rows)
    # ZeRO-3 resume: the run's folder without its last checkpoint and final weights, then --resume
    run, resumed = root / "ppo-deepspeed_zero3", tmp_path / "resumed"
    shutil.copytree(run, resumed)
    last = max(resumed.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    shutil.rmtree(last)
    (resumed / "model.safetensors").unlink()
    at_exit = tmp_path / "threads-at-exit"
    proc = bench.launch("deepspeed_zero3", ["--resume"], resumed, threads_at_exit(at_exit))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_gloo_threads_at_exit(at_exit)
    said = proc.stdout + proc.stderr
    assert "resuming from" in said
    # torch's deprecations of the collectives ZeRO-3 calls (two a call, per process) are filtered
    # (hfrl.utils.quiet); DeepSpeed's CPU note is left only to accelerate's launcher, which is not hfrl
    assert "FutureWarning" not in said and said.count("Setting accelerator to CPU") <= 1, said[-3000:]
    assert bench.largest_gap(bench.weights(resumed), bench.weights(run)) == 0.0
    # the sharded optimizer state is in the checkpoint DeepSpeed wrote (one file per process)
    assert len(list((run / last.name).rglob("*optim_states.pt"))) == 2
    # a run directory is data: DeepSpeed's recovery scripts (zero_to_fp32.py) are not left in it
    assert not list(run.rglob("*.py")) and not list(resumed.rglob("*.py"))
    # export: the gathered weights, without DeepSpeed's scripts
    exported = tmp_path / "exported"
    proc = subprocess.run([sys.executable, "-m", "hfrl.cli", "export", str(run), "-o", str(exported)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not list(exported.glob("*.py")) and (exported / "README.md").exists()
    # the gathered policy and its value head: an export ships the trained critic too (hfrl.runs.critic_artifact)
    assert bench.largest_gap(bench.weights(exported), bench.weights(run)) == 0.0


def _two_machines(bench, args, out, port, extra_env=None):
    """``accelerate launch --num_machines 2 --machine_rank R --main_process_ip 127.0.0.1``, one process each,
    started as two shells would start them; their outputs once both ended."""
    cmd = ["accelerate", "launch", "--config_file", bench.config_path("multi_cpu"), "--num_machines", "2",
           "--num_processes", "2", "--main_process_ip", "127.0.0.1", "--main_process_port", str(port)]  # fmt: skip
    train = ["-m", "hfrl.cli", "train", *args, "--disable_tqdm", "true", "-o", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path), **(extra_env or {})}
    env.pop("ACCELERATE_USE_CPU", None)
    procs = [subprocess.Popen([*cmd, "--machine_rank", str(rank), *train], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for rank in (0, 1)]  # fmt: skip
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    return outputs


@pytest.mark.slow
@needs_launcher
@needs_deepspeed
def test_two_machines_on_localhost_train_checkpoint_and_resume_as_one_machine_with_two_processes(ppo_runs, tmp_path):
    bench, root, _ = ppo_runs
    out = tmp_path / "two-machines"
    at_exit = tmp_path / "threads-at-exit"
    outputs = _two_machines(bench, bench.ALGS["ppo"], out, 29641, threads_at_exit(at_exit))
    assert "distributed: MULTI_CPU, 2 processes" in outputs[0][1] + outputs[0][0]
    assert_no_gloo_threads_at_exit(at_exit)  # DDP: the reducer and torch.distributed.nn's defaults held the group
    assert bench.largest_gap(bench.weights(out), bench.weights(root / "ppo-multi_cpu")) == 0.0
    last = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    shutil.rmtree(last)
    (out / "model.safetensors").unlink()
    outputs = _two_machines(bench, ["--resume"], out, 29642)
    assert "resuming from" in outputs[0][0] + outputs[0][1]
    assert bench.largest_gap(bench.weights(out), bench.weights(root / "ppo-multi_cpu")) == 0.0
