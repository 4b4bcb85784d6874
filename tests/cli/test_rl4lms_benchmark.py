"""benchmarks/rl4lms_numbers.py keeps running: RL4LMs' tokenizer and model as the issue lists them,
and a tiny run of both layouts writes every figure. (Reward and speed are measured by the
benchmark itself, never asserted here.)"""

import json
import sys

import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    yield load_benchmark("rl4lms_numbers")
    sys.modules.pop("rl4lms_numbers", None)


def test_tokenizer_and_model_are_rl4lms_synthetic_setup(bench, tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    tok = bench.build_tokenizer()
    assert len(tok) == 278
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id) == (0, 0, 1, 2)
    assert tok.convert_tokens_to_ids(["0", "199", "seventeen", "the"]) == [3, 202, 220, 234]
    assert tok("<|endoftext|>")["input_ids"] == [0]
    assert tok.decode(tok("3 4 the 5 <|endoftext|>")["input_ids"], skip_special_tokens=True) == "3 4 the 5"
    path = bench.build_model(str(tmp_path / "m"), seed=0)
    config = AutoConfig.from_pretrained(path)
    assert (config.n_layer, config.n_head, config.n_embd, config.n_positions, config.vocab_size) == (2, 2, 64, 128, 278)
    assert len(AutoTokenizer.from_pretrained(path)) == 278


def test_variant_configs_make_one_difference(bench):
    hfrl, rl4lms = bench.variant_config("hfrl"), bench.variant_config("rl4lms")
    assert {k for k in rl4lms if rl4lms[k] != hfrl.get(k)} == {"minibatch_unit", "whiten_scope", "separate_critic"}
    fast = bench.variant_config("hfrl-60-steps")
    assert {k: fast[k] for k in fast if fast[k] != hfrl.get(k)} == {"num_ppo_epochs": 3, "learning_rate": 1.5e-3}
    assert (hfrl["num_ppo_epochs"], hfrl["learning_rate"]) == (5, 1e-3)
    sequences = bench.variant_config("rl4lms-sequences")
    assert {k for k in sequences if sequences[k] != rl4lms[k]} == {"minibatch_unit"}
    no_eos = bench.variant_config("hfrl-no-eos")["generation_kwargs"]
    assert no_eos == {**hfrl["generation_kwargs"], "min_new_tokens": 20}  # merged, not replaced
    with pytest.raises(ValueError, match="variant must be one of hfrl, rl4lms"):
        bench.variant_config("nope")


def test_tiny_runs_merge_into_one_json(bench, tmp_path, capsys):
    out = tmp_path / "results.json"
    small = ["rollout_tokens=24", "rollout_batch_size=4", "mini_batch_size=2", "num_ppo_epochs=1", "max_new_tokens=6"]
    common = ["--seeds", "0", "--iterations", "2", "--threads", "1", "--json", str(out), "--set", *small]
    bench.main(["--variant", "rl4lms", "--algs", "ppo", *common])
    bench.main(["--variant", "hfrl-60-steps", *common])  # PPO and NLPO: the default variant, the headline
    results = json.loads(out.read_text())
    for key in ("ppo_reward_at_10", "ppo_reward_at_20", "nlpo_reward_at_30"):
        assert key in results and results[key] is None  # the tiny run stops at iteration 2
    hfrl, rl4lms = results["variants"]["hfrl-60-steps"], results["variants"]["rl4lms"]
    assert results["ppo_seconds_per_iteration"] == hfrl["ppo_seconds_per_iteration"] > 0
    assert hfrl["ppo_cpu_seconds_per_iteration"] > 0
    assert 0 <= hfrl["ppo_reward_at_1"] <= 1 and 0 <= hfrl["nlpo_reward_at_1"] <= 1 and "nlpo" not in rl4lms
    assert rl4lms["ppo"]["config"]["separate_critic"] and not hfrl["ppo"]["config"].get("separate_critic", False)
    assert all(t >= 24 for run in rl4lms["ppo"]["runs"] for t in run["transitions"])
    assert "| 1 |" in capsys.readouterr().out  # the printed curve
    bench.main(["--table", str(out)])
    table = capsys.readouterr().out
    assert "| rl4lms | ppo | 1 |" in table and "| hfrl-60-steps | nlpo | 1 |" in table
