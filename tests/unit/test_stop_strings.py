"""Stop strings (hfrl/core/rollout/stop.py): a completion ends at the token that completes the first
task-declared stop string, in hfrl's generation, its rewards, TRL's GRPO and the vLLM settings."""

import pytest
import torch
from datasets import Dataset

from hfrl import PPOConfig, PPOTrainer
from hfrl.core.models import load_model, load_tokenizer
from hfrl.core.rollout import generate_completions
from hfrl.core.rollout.stop import stop_index, stop_mask, stop_strings
from hfrl.trainers.online.vllm_rollout import sampling_settings

TEXT = "3.\nAnswer: 3\n\nStart"  # tiny's tokens: '3' '.' '\n' 'A' 'n' 'swer' ':' ' 3' '\n' '\n' 'S' ...


@pytest.fixture(scope="module")
def tiny(tiny_causal_dir):
    return load_model(tiny_causal_dir).eval(), load_tokenizer(tiny_causal_dir)


def test_the_stop_is_the_token_that_completes_the_first_stop_string(tiny):
    _, tokenizer = tiny
    ids = tokenizer.encode(TEXT)
    assert [tokenizer.decode([i]) for i in ids[8:10]] == ["\n", "\n"]
    assert stop_index(ids, tokenizer, ["\n\n"]) == 9  # the second newline, counted from 0
    assert stop_index(ids, tokenizer, ["r: 3"]) == 7  # a string across three tokens ends in its last
    assert stop_index(ids, tokenizer, ["Answer", "\n\n"]) == 5  # the first of several
    assert stop_index(ids, tokenizer, ["\n\n\n"]) is None
    mask = stop_mask(torch.tensor([ids, ids]), tokenizer, ["\n\n"])
    assert mask.sum(1).tolist() == [10, 10] and mask[0, :10].all()


def test_bad_stop_strings_are_one_line():
    assert stop_strings({"stop_strings": "\n\n"}) == ("\n\n",)
    with pytest.raises(ValueError, match=r"^generation_kwargs stop_strings must be a non-empty string or a list"):
        stop_strings({"stop_strings": [""]})


def forced_newlines(tokenizer) -> dict:
    """Greedy generation that writes newlines only (a large bias on the newline token)."""
    (newline,) = tokenizer.encode("\n")
    return {"do_sample": False, "max_new_tokens": 6, "sequence_bias": [[[newline], 100.0]]}


def test_generation_stops_at_the_stop_string_and_pads_the_rest(tiny):
    lm, tokenizer = tiny
    ids = torch.tensor([tokenizer.encode("1 2 3"), tokenizer.encode("4 5 6")])
    kwargs = forced_newlines(tokenizer)
    plain = generate_completions(lm, ids, torch.ones_like(ids), kwargs, tokenizer.pad_token_id)
    assert plain.response_mask.sum(1).tolist() == [6, 6]  # six newlines each, no stop
    stopped = generate_completions(lm, ids, torch.ones_like(ids), {**kwargs, "stop_strings": ["\n\n"]},
                                   tokenizer.pad_token_id, tokenizer=tokenizer)  # fmt: skip
    assert stopped.response_mask.sum(1).tolist() == [2, 2]
    assert (stopped.response_ids[:, 2:] == tokenizer.pad_token_id).all()
    assert tokenizer.batch_decode(stopped.response_ids, skip_special_tokens=True) == ["\n\n", "\n\n"]
    with pytest.raises(ValueError, match=r"^generation_kwargs stop_strings needs the tokenizer: pass tokenizer="):
        generate_completions(lm, ids, torch.ones_like(ids), {**kwargs, "stop_strings": "\n\n"}, 0)


def test_the_reward_reads_the_stopped_completion(tiny_causal_dir, tmp_path):
    tokenizer = load_tokenizer(tiny_causal_dir)
    seen: list[str] = []

    def record(prompts, completions, **kwargs):
        seen.extend(completions)
        return [0.0] * len(completions)

    kwargs = {**forced_newlines(tokenizer), "do_sample": True, "top_k": 0, "stop_strings": ["\n\n"]}
    args = PPOConfig(output_dir=str(tmp_path), num_iterations=1, rollout_batch_size=4, mini_batch_size=4,
                     max_new_tokens=6, generation_kwargs=kwargs, report_to=[])  # fmt: skip
    PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=record,
               train_dataset=Dataset.from_dict({"prompt": ["1 2", "3 4", "5", "6"]})).train()  # fmt: skip
    assert seen == ["\n\n"] * 4


def test_vllm_and_trl_take_the_stop_under_vllm_names():
    settings = sampling_settings({"do_sample": True, "stop_strings": ["\n\n"]}, 8)
    assert settings["generation_kwargs"] == {"stop": ["\n\n"], "include_stop_str_in_output": True}
    from hfrl.trainers.trl_adapters import GRPOConfig

    common = {"output_dir": "unused", "generation_kwargs": {"stop_strings": ["\n\n"]}, "report_to": []}
    assert GRPOConfig(**common).generation_kwargs == {"stop_strings": ["\n\n"]}  # transformers' generate
    assert GRPOConfig(**common, use_vllm=True).generation_kwargs == {
        "stop": ["\n\n"],
        "include_stop_str_in_output": True,
    }


def test_trl_on_vllm_takes_min_new_tokens_as_min_tokens():
    """numbers' min_new_tokens reached vLLM's SamplingParams under transformers' name, and TRL's GRPO on vLLM
    stopped at its first generation: "TypeError: Unexpected keyword argument 'min_new_tokens'"."""
    from hfrl.trainers.trl_adapters import GRPOConfig

    kwargs = {"min_new_tokens": 4, "repetition_penalty": 1.1}
    common = {"output_dir": "unused", "max_completion_length": 8, "report_to": []}
    assert GRPOConfig(**common, generation_kwargs=kwargs).generation_kwargs == kwargs  # transformers' generate
    on_vllm = GRPOConfig(**common, generation_kwargs=kwargs, use_vllm=True).generation_kwargs
    assert on_vllm == {"min_tokens": 4, "repetition_penalty": 1.1}
    clipped = GRPOConfig(**common, generation_kwargs={"min_new_tokens": 20}, use_vllm=True).generation_kwargs
    assert clipped == {"min_tokens": 8}  # clipped to the budget first, then renamed


def test_trl_grpo_on_transformers_generates_with_the_task_stop(tmp_path, capsys):
    """arith_chains declares stop_strings; TRL 1.16 calls generate without the tokenizer, which transformers
    needs for them ("could not locate a tokenizer"): the adapter binds it for the call."""
    from hfrl.testing import run_cli

    task = ["--task", "arith_chains", "--task-arg", "train_size=16", "--task-arg", "eval_size=4"]
    budget = ["--max_steps", "1", "--max_completion_length", "8", "--per_device_train_batch_size", "4"]
    argv = ["train", *task, "--alg", "grpo", "--model", "tiny", *budget, "--output_dir", str(tmp_path / "grpo")]
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "stop_strings" in (tmp_path / "grpo" / "config.yaml").read_text()
