"""DeepSpeed ZeRO-2/3 on 2 real CPU processes (``accelerate launch`` with hfrl's shipped configs, gloo):
what each process holds, the same weights as DDP, a ZeRO-3 resume, two "machines" on localhost, and
the start-up guard that stops a run which asked to shard and did not."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import load_benchmark, one_launch_at_a_time


@pytest.fixture(scope="module", autouse=True)
def _one_launch_at_a_time(tmp_path_factory):
    """Two processes on accelerate's default port (29500): no other module launches meanwhile (pytest-xdist)."""
    with one_launch_at_a_time(tmp_path_factory):
        yield


needs_launcher = pytest.mark.skipif(shutil.which("accelerate") is None, reason="the accelerate CLI is not on PATH")
needs_deepspeed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("deepspeed") is None, reason="deepspeed is not installed (hfrl[deepspeed])"
)


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


def _assert_sharded_like_ddp(rows, moved=1e-4):
    by_config = {row["config"]: row for row in rows}
    assert by_config["multi_cpu"]["type"] == "MULTI_CPU" and by_config["multi_cpu"]["parameter_share"] == 1.0
    for config, row in by_config.items():
        assert row["moved_from_start"] > moved, row  # it trained: equal weights are not a no-op
        assert row["max_abs_diff_vs_ddp"] <= 1e-5, row  # measured 0 to 2.4e-6
        if config != "multi_cpu":
            assert row["type"] == "DEEPSPEED" and row["optimizer_share"] <= 0.55, row
    if "deepspeed_zero3" in by_config:
        assert by_config["deepspeed_zero3"]["parameter_share"] <= 0.55


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
    _assert_sharded_like_ddp(rows)
    # ZeRO-3 resume: the run's folder without its last checkpoint and final weights, then --resume
    run, resumed = root / "ppo-deepspeed_zero3", tmp_path / "resumed"
    shutil.copytree(run, resumed)
    last = max(resumed.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    shutil.rmtree(last)
    (resumed / "model.safetensors").unlink()
    proc = bench.launch("deepspeed_zero3", ["--resume"], resumed)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from" in proc.stdout + proc.stderr
    assert bench.largest_gap(bench.weights(resumed), bench.weights(run)) == 0.0
    # the sharded optimizer state is in the checkpoint DeepSpeed wrote (one file per process)
    assert len(list((run / last.name).rglob("*optim_states.pt"))) == 2
    # export: the gathered weights, without DeepSpeed's scripts
    exported = tmp_path / "exported"
    proc = subprocess.run([sys.executable, "-m", "hfrl.cli", "export", str(run), "-o", str(exported)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not list(exported.glob("*.py")) and (exported / "README.md").exists()
    policy = {k: v for k, v in bench.weights(run).items() if not k.startswith("value_head.")}
    assert bench.largest_gap(bench.weights(exported), policy) == 0.0


def _two_machines(bench, args, out, port):
    """``accelerate launch --num_machines 2 --machine_rank R --main_process_ip 127.0.0.1``, one process each,
    started as two shells would start them; their outputs once both ended."""
    cmd = ["accelerate", "launch", "--config_file", bench.config_path("multi_cpu"), "--num_machines", "2",
           "--num_processes", "2", "--main_process_ip", "127.0.0.1", "--main_process_port", str(port)]  # fmt: skip
    train = ["-m", "hfrl.cli", "train", *args, "--disable_tqdm", "true", "-o", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
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
    outputs = _two_machines(bench, bench.ALGS["ppo"], out, 29641)
    assert "distributed: MULTI_CPU, 2 processes" in outputs[0][1] + outputs[0][0]
    assert bench.largest_gap(bench.weights(out), bench.weights(root / "ppo-multi_cpu")) == 0.0
    last = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    shutil.rmtree(last)
    (out / "model.safetensors").unlink()
    outputs = _two_machines(bench, ["--resume"], out, 29642)
    assert "resuming from" in outputs[0][0] + outputs[0][1]
    assert bench.largest_gap(bench.weights(out), bench.weights(root / "ppo-multi_cpu")) == 0.0


@pytest.mark.slow
@needs_launcher
@needs_deepspeed
@pytest.mark.parametrize("alg", ["nlpo", "grpo", "a_lol"])
def test_nlpo_grpo_and_a_lol_shard_under_zero3_and_match_ddp(alg, tmp_path, tiny_causal_dir):
    bench = load_benchmark("bench_sharding")
    _assert_sharded_like_ddp(bench.compare(alg, tmp_path, ("multi_cpu", "deepspeed_zero3")))


@pytest.mark.slow
@needs_launcher
@needs_deepspeed
def test_a_zero3_config_that_shards_nothing_stops_at_start_with_one_line(tmp_path, tiny_causal_dir):
    """Every parameter under ``stage3_param_persistence_threshold`` is kept whole on every process: a ZeRO-3
    run that holds a whole copy per process, which nothing else would report."""
    (tmp_path / "ds.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto", "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 10**9},
    }))  # fmt: skip
    (tmp_path / "accelerate.yaml").write_text(
        textwrap.dedent(f"""\
        compute_environment: LOCAL_MACHINE
        distributed_type: DEEPSPEED
        deepspeed_config:
          deepspeed_config_file: {tmp_path / "ds.json"}
          zero3_init_flag: true
        machine_rank: 0
        num_machines: 1
        num_processes: 2
        use_cpu: false
    """)
    )
    cmd = ["accelerate", "launch", "--config_file", str(tmp_path / "accelerate.yaml"), "-m", "hfrl.cli", "train",
           "--task", "numbers", "--model", "tiny", "--num_iterations", "1", "-o", str(tmp_path / "run")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0
    assert (
        "error: ZeRO-3 on 2 processes and a process holds all 165,697 parameters: nothing was sharded (on a small "
        "model set stage3_param_persistence_threshold: 0 in the DeepSpeed config)"
    ) in proc.stderr
    assert not (tmp_path / "run").exists()  # a start that fails leaves no run folder


CLASSIFIER = textwrap.dedent("""
    import json, sys
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs
    from transformers.integrations import HfDeepSpeedConfig
    from hfrl.metrics.learned import load_classifier, shard_classifiers
    from hfrl.rewards import load_reward
    acc = Accelerator(kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])
    config = acc.state.deepspeed_plugin.deepspeed_config  # its "auto" values as a Trainer fills them
    config.update(train_micro_batch_size_per_gpu=1, train_batch_size=2, gradient_accumulation_steps=1,
                  gradient_clipping=1.0)
    keep = HfDeepSpeedConfig(config)  # as a ZeRO-3 TrainingArguments does: transformers loads under zero.Init
    assert shard_classifiers(acc)
    reward = load_reward({"id": "reward_model", "args": {"model": sys.argv[1], "batch_size": 2}})
    texts = sys.argv[3:] if acc.process_index == 0 else ["", " "]  # rank 1: nothing to score, 0 batches to 3
    scores = reward(prompts=[""] * len(texts), completions=texts)
    engine = load_classifier(sys.argv[1], "cpu")[1]
    params = list(engine.module.parameters())
    held = sum(p.ds_tensor.numel() for p in params if hasattr(p, "ds_tensor"))
    total = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in params)
    json.dump({"scores": scores, "held": held, "total": total}, open(f"{sys.argv[2]}/{acc.process_index}.json", "w"))
""")


@pytest.mark.slow
@needs_launcher
@needs_deepspeed
def test_a_reward_model_is_partitioned_under_zero3_and_a_process_with_nothing_to_score_still_joins(tmp_path):
    """Under ZeRO-3 a reward classifier is partitioned as TRL prepares its reward models (each process holds
    about half); each forward gathers from every process, so a process with fewer batches (here none) runs
    filler forwards instead of leaving the others waiting; the scores equal the whole model's. Loaded inside a
    ZeRO-3 run's lifetime, transformers would partition the classifier as it loads (zero.Init) and leave it
    without an engine: it is loaded whole, then partitioned."""
    from transformers import AutoModelForSequenceClassification

    from hfrl.rewards import load_reward

    bench = load_benchmark("bench_sharding")
    folder = bench.tiny_reward_model(tmp_path)
    (tmp_path / "check.py").write_text(CLASSIFIER)
    texts = ["a good film", "bad", "", "3 4 5", "the end of it"]  # 4 to score: 2 batches of 2
    cmd = ["accelerate", "launch", "--config_file", bench.config_path("deepspeed_zero3"), "--num_processes", "2",
           "--mixed_precision", "no", str(tmp_path / "check.py"), folder, str(tmp_path), *texts]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("ACCELERATE_USE_CPU", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1)]
    whole = load_reward({"id": "reward_model", "args": {"model": folder, "device": "cpu"}})
    assert ranks[0]["scores"] == pytest.approx(whole(prompts=[""] * 5, completions=texts), abs=1e-5)
    assert ranks[1]["scores"] == [0.0, 0.0]
    total = ranks[0]["total"]
    assert total == AutoModelForSequenceClassification.from_pretrained(folder).num_parameters()
    assert all(0 < rank["held"] <= 0.55 * total for rank in ranks), ranks


def test_zero3_keeps_only_tensors_under_ten_hidden_sizes_whole_unless_the_config_says():
    """DeepSpeed's default (100,000 elements) kept all of a small model whole on every process; transformers
    fills ``"auto"`` with 10 x the hidden size, and so does hfrl where the config is silent."""
    from types import SimpleNamespace

    from hfrl.core.zero3 import default_persistence_threshold

    def accelerator(stage, zero):
        plugin = SimpleNamespace(zero_stage=stage, deepspeed_config={"zero_optimization": zero})
        return SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin))

    model = SimpleNamespace(config=SimpleNamespace(hidden_size=64))
    silent = accelerator(3, {"stage": 3})
    assert default_persistence_threshold(silent, model) == 640
    zero = silent.state.deepspeed_plugin.deepspeed_config["zero_optimization"]
    assert zero["stage3_param_persistence_threshold"] == 640
    assert default_persistence_threshold(accelerator(3, {"stage3_param_persistence_threshold": "auto"}), model) == 640
    assert default_persistence_threshold(accelerator(3, {"stage3_param_persistence_threshold": 0}), model) is None
    assert default_persistence_threshold(accelerator(2, {}), model) is None
    assert default_persistence_threshold(SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=None)), model) is None
