"""DeepSpeed ZeRO-3 on 2 real CPU processes for NLPO, TRL's GRPO and A-LoL (the same weights as DDP), a
ZeRO-3 config that shards nothing, a reward model partitioned for inference, and which tensors ZeRO-3
keeps whole (the PPO runs, two machines and the guard are in test_sharding.py)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import load_benchmark
from sharding_checks import assert_sharded_like_ddp, needs_deepspeed, needs_launcher, one_launch_per_module  # noqa: F401


@pytest.mark.slow
@needs_launcher
@needs_deepspeed
@pytest.mark.parametrize("alg", ["nlpo", "grpo", "a_lol"])
def test_nlpo_grpo_and_a_lol_shard_under_zero3_and_match_ddp(alg, tmp_path, tiny_causal_dir):
    bench = load_benchmark("bench_sharding")
    assert_sharded_like_ddp(bench.compare(alg, tmp_path, ("multi_cpu", "deepspeed_zero3")))


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
    assert proc.stderr.count("nothing was sharded") == 1  # every process stops, the first one says why
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
    del engine, params, reward  # then the groups go, as docs/how-to/distributed.md tells a script to end
    from hfrl.trainers.devices import close_process_group
    close_process_group()
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
