"""Runs shared by the card, push and export tests (built once per session; tests copy a run before
changing it)."""

from __future__ import annotations

import pytest

RUN_SECRET = "hf_cardTestSecretToken0123456789"  # the adapter run's hub_token: never in a file it writes


@pytest.fixture(scope="session")
def run_secret() -> str:
    return RUN_SECRET


@pytest.fixture(scope="session")
def full_run(tmp_path_factory):
    """`hfrl train` on numbers with the tiny model (2 iterations), then `hfrl eval` after and before."""
    from hfrl.cli.app import main
    from hfrl.runs.run_eval import evaluate

    out = tmp_path_factory.mktemp("runs") / "numbers-ppo"
    fast = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--disable_tqdm", "true"]
    with pytest.raises(SystemExit) as exc:
        main(
            ["train", "--task", "numbers", "--model", "tiny", "--output-dir", str(out), "--num_iterations", "2", *fast]
        )
    assert exc.value.code in (0, None)
    evaluate(out, split="test", max_samples=4)
    evaluate(out, split="test", base=True, max_samples=4)
    return out


@pytest.fixture(scope="session")
def adapter_run(tmp_path_factory, tiny_causal_dir):
    """A LoRA adapter trained from Python (no config.yaml), with a Hub token in its args."""
    from datasets import Dataset
    from peft import LoraConfig

    from hfrl import PPOConfig, PPOTrainer
    from hfrl.testing import digit_reward

    out = tmp_path_factory.mktemp("runs") / "lora-ppo"
    args = PPOConfig(
        output_dir=str(out),
        num_iterations=2,
        rollout_batch_size=8,
        mini_batch_size=4,
        num_ppo_epochs=1,
        max_new_tokens=6,
        learning_rate=5e-2,  # large enough that the adapter changes greedy text
        report_to="none",
        disable_tqdm=True,
        hub_token=RUN_SECRET,
    )
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=args,
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the year"] * 8}),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True),
    )
    trainer.train()
    trainer.save_model()
    return out
