"""A2C's loss, TRPO's conjugate gradient and line search, and both trainers on tiny models.
(The maths by hand: tests/unit/test_a2c_trpo_maths.py.)"""

import pytest
import torch
from datasets import Dataset

from hfrl import A2CConfig, A2CTrainer, TRPOConfig, TRPOTrainer
from hfrl.testing import digit_reward


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


def test_a2c_defaults(tmp_path):
    args = A2CConfig(output_dir=str(tmp_path), rollout_batch_size=8)
    assert (args.mini_batch_size, args.num_ppo_epochs, args.lam, args.whiten_advantages) == (8, 1, 1.0, False)
    assert args.steps_per_iteration == 1 and (args.optim, args.optim_args) == ("rmsprop", "alpha=0.99,eps=1e-5")


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_a2c_training(kind, tiny_causal_dir, tiny_seq2seq_dir, make_config):
    args = make_config(A2CConfig, mini_batch_size=None, num_ppo_epochs=1, max_new_tokens=6)  # A2C: one step
    assert (args.mini_batch_size, args.steps_per_iteration) == (8, 1)
    model = tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir
    trainer = A2CTrainer(model=model, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    optimizer = trainer.optimizer.optimizer  # under Accelerate's wrapper
    assert isinstance(optimizer, torch.optim.RMSprop)
    assert optimizer.defaults["alpha"] == 0.99 and optimizer.defaults["eps"] == 1e-5
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(p, before[n])]
    assert not unchanged
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and {"loss/policy", "loss/value", "entropy", "kl", "beta"} <= set(logs[0])


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_trpo_step_respects_the_kl_bound(kind, tiny_causal_dir, tiny_seq2seq_dir, make_config):
    args = make_config(TRPOConfig, max_new_tokens=6, target_kl=0.01)
    model = tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir
    trainer = TRPOTrainer(model=model, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    wrapper = trainer.model
    # the Trainer's optimizer holds the critic only: the policy moves by the natural-gradient step
    opt_params = {id(p) for g in trainer.create_optimizer().param_groups for p in g["params"]}
    assert opt_params == {id(p) for p in wrapper.value_head.parameters()}
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    for h in logs:
        assert {"trpo/step_size", "trpo/kl", "trpo/line_search_steps", "loss/value"} <= set(h)
        assert h["trpo/accepted"] == 1.0  # a rejected step would log trpo/kl 0 and pass the bound trivially
        assert 0 < h["trpo/kl"] <= 0.01 and h["trpo/step_size"] > 0
        assert 1 <= h["trpo/line_search_steps"] <= 10


def test_trpo_with_peft_moves_only_the_adapter(tiny_causal_dir, make_config):
    from peft import LoraConfig

    args = make_config(TRPOConfig, num_iterations=1, mini_batch_size=8, num_ppo_epochs=1, max_new_tokens=6)
    trainer = TRPOTrainer(
        model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts(),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False),
    )  # fmt: skip
    policy = trainer.model.policy
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    trainer.train()
    log = [h for h in trainer.state.log_history if "reward" in h][0]
    changed = {n for n, p in policy.named_parameters() if not torch.equal(p, before[n])}
    assert log["trpo/accepted"] == 1.0 and log["trpo/kl"] > 0  # the step was taken...
    assert changed and all("lora_" in n for n in changed)  # ...and moved the adapter only


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_trpo_fisher_chunks_give_the_same_step(kind, tiny_causal_dir, tiny_seq2seq_dir, make_config):
    """``fisher_batch_size=3`` (chunks of 3, 3 and 2 completions, recomputed per Fisher-vector
    product) takes the same natural-gradient step as one graph over the whole rollout."""
    args = make_config(
        TRPOConfig, num_iterations=1, mini_batch_size=8, num_ppo_epochs=1, max_new_tokens=6, target_kl=0.01,
        cg_max_steps=5,
    )  # fmt: skip
    model = tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir
    trainer = TRPOTrainer(model=model, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    policy = trainer.model.policy
    start = {n: p.detach().clone() for n, p in policy.named_parameters()}
    steps, logs = [], []
    for size in (None, 3):
        with torch.no_grad():
            for n, p in policy.named_parameters():
                p.copy_(start[n])
        trainer.args.fisher_batch_size = size
        stats = trainer.policy_step(rollout)
        steps.append(torch.cat([(p.detach() - start[n]).flatten() for n, p in policy.named_parameters()]))
        logs.append({k: stats[k] for k in ("trpo/accepted", "trpo/step_size", "trpo/kl", "loss/policy", "entropy")})
    assert logs[0]["trpo/accepted"] == 1.0 and logs[0]["trpo/step_size"] > 0 and logs[0]["trpo/kl"] > 0
    torch.testing.assert_close(steps[1], steps[0], atol=1e-5, rtol=1e-3)
    for key in logs[0]:
        assert logs[1][key] == pytest.approx(logs[0][key], rel=1e-3, abs=1e-6), key


def test_trpo_fisher_subsample_takes_fisher_vector_products_on_every_kth_completion(tiny_causal_dir, make_config):
    """``fisher_subsample=2``: conjugate gradient's Fisher is the one of completions 0, 2, 4, 6 (the
    gradient and the line search still see all 8); one graph or chunks of one give the same step;
    the step is accepted within the KL bound and differs from the full Fisher's."""
    args = make_config(
        TRPOConfig, num_iterations=1, mini_batch_size=8, num_ppo_epochs=1, max_new_tokens=6, target_kl=0.01,
        cg_max_steps=5,
    )  # fmt: skip
    trainer = TRPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    policy = trainer.model.policy
    start = {n: p.detach().clone() for n, p in policy.named_parameters()}
    seen: list[torch.Tensor] = []
    chunks = trainer._chunks
    trainer._chunks = lambda r: (seen.append(r.response_ids), chunks(r))[1]
    steps, logs = [], []
    for every, size in ((1, None), (2, None), (2, 1)):
        with torch.no_grad():
            for n, p in policy.named_parameters():
                p.copy_(start[n])
        trainer.args.fisher_subsample, trainer.args.fisher_batch_size = every, size
        seen.clear()
        stats = trainer.policy_step(rollout)
        steps.append(torch.cat([(p.detach() - start[n]).flatten() for n, p in policy.named_parameters()]))
        logs.append({k: stats[k] for k in ("trpo/accepted", "trpo/kl", "loss/policy")})
        if every == 2:
            assert [len(ids) for ids in seen] == [8, 4] and torch.equal(seen[1], rollout.response_ids[::2])
    assert all(log["trpo/accepted"] == 1.0 and 0 < log["trpo/kl"] <= 0.01 for log in logs)
    torch.testing.assert_close(steps[2], steps[1], atol=1e-5, rtol=1e-3)
    assert not torch.allclose(steps[1], steps[0], atol=1e-6)


def test_trpo_fisher_subsample_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="fisher_subsample must be >= 1, got 0"):
        TRPOConfig(output_dir=str(tmp_path), fisher_subsample=0)


def test_trpo_fisher_batch_size_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="fisher_batch_size must be >= 1 or None, got 0"):
        TRPOConfig(output_dir=str(tmp_path), fisher_batch_size=0)


def test_trpo_fisher_is_the_kl_hessian_and_its_quadratic_form_needs_no_transpose(tiny_causal_dir, make_config):
    """``_Fisher.product`` is the Hessian-vector product of ``KL(pi_old || pi)`` at ``pi = pi_old``
    (taken here by differentiating the KL twice), and ``_Fisher.quadratic(v)`` (the step's length,
    without ``J^T``'s backward) is ``v @ product(v)``."""
    from hfrl.core.losses import categorical_kl
    from hfrl.core.natural_gradient import flat
    from hfrl.core.policies import completion_forward
    from hfrl.trainers.online.trpo_trainer import _Fisher, _math_attention

    args = make_config(TRPOConfig, num_iterations=1, max_new_tokens=5)
    trainer = TRPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(4)])
    policy = trainer.model.policy
    params = [p for p in policy.parameters() if p.requires_grad]
    batch = (rollout.query_ids, rollout.query_mask, rollout.response_ids, rollout.response_mask)
    vector = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(0))
    with _math_attention():
        logits = completion_forward(policy, *batch)[0]
        fisher = _Fisher(logits, rollout, params)
        product, quadratic = fisher.product(vector), fisher.quadratic(vector)
        kl = categorical_kl(logits.detach(), completion_forward(policy, *batch)[0], rollout.response_mask)
        grad = flat(torch.autograd.grad(kl, params, create_graph=True))
        hvp = flat(torch.autograd.grad(grad @ vector, params))
    torch.testing.assert_close(product, hvp, rtol=1e-4, atol=1e-6)
    assert quadratic.item() == pytest.approx((vector @ product).item(), rel=1e-5)
    assert quadratic.item() > 0
