"""A library reward trains a tiny model through TRL's own GRPOTrainer, which passes the dataset's
extra columns as keyword arguments (the rewards themselves: tests/unit/test_rewards.py)."""

import torch

from hfrl.rewards import load_reward


def test_a_library_reward_trains_through_trl_grpo(tiny_causal_dir, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    calls = []
    chrf = load_reward("chrf")  # character n-grams: a random tiny model's outputs already differ in score

    def spy(prompts, completions, **columns):  # TRL passes the dataset's extra columns as keyword arguments
        calls.append(columns["references"])
        return chrf(prompts=prompts, completions=completions, **columns)

    spy.__name__ = "chrf"
    refs = [["4 5 6 7 8 9 10 the good film"]] * 8
    data = Dataset.from_dict({"prompt": ["1 2 3", "the good", "2020-01", "a b"] * 2, "references": refs})
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        max_steps=2,
        learning_rate=1e-2,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(model=tiny_causal_dir, reward_funcs=[spy], args=args, train_dataset=data)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    logged = [h for h in trainer.state.log_history if "rewards/chrf/mean" in h]
    assert len(logged) == 2 and calls and calls[0][0] == refs[0]
    assert any(h["rewards/chrf/std"] > 0 for h in logged)
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)]
    assert changed, "no parameter changed in 2 GRPO steps"
