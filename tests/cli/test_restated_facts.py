"""Facts asked of their owner, never restated (issue: "ask the owner"): the start line's rollout size
counts num_generations, names a LoRA adapter inside the trainer's wrapper and a preset's warm-up; the
card names the policy loss and cites its paper; num_generations' help lists the registry's group
estimators."""

import shutil
from types import SimpleNamespace

import torch
import yaml


def _trainer(model, **args):
    defaults = {"num_iterations": 3, "rollout_batch_size": 4, "num_generations": 1, "world_size": 1}
    return SimpleNamespace(model=model, args=SimpleNamespace(output_dir="runs/x", **{**defaults, **args}))


def test_the_start_line_counts_every_completion_of_a_rollout():
    from hfrl.runs.run_report import start_line

    line = start_line(_trainer(torch.nn.Linear(2, 2), num_generations=4), {"alg": "ppo", "task": "numbers"})
    # 4 prompts x 4 completions: what the rollout logs (it said 4 before)
    assert "3 iterations x 16 completions (48 samples)" in line, line


def test_the_start_line_names_an_adapter_inside_the_value_head_wrapper(tiny_causal_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hfrl.runs.run_report import start_line

    lm = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    policy = get_peft_model(lm, LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM"))
    wrapper = torch.nn.ModuleDict({"policy": policy, "value_head": torch.nn.Linear(4, 1)})  # as the trainers wrap it
    trained = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    line = start_line(_trainer(wrapper), {"alg": "ppo", "task": "numbers", "model": "tiny"})
    assert f"LORA adapter: {trained:,} trained (" in line, line


def test_the_start_line_names_the_preset_and_its_critic_warmup():
    from hfrl.runs.run_report import start_line

    trainer = _trainer(torch.nn.Linear(2, 2), critic_warmup_iterations=5)
    line = start_line(trainer, {"alg": "ppo", "task": "numbers", "preset": "vapo"})
    assert line.startswith("PPO (preset vapo, the first 5 iterations train the critic only) on numbers"), line


def test_the_card_names_the_policy_loss_and_cites_its_paper(full_run, tmp_path):
    from hfrl.cards import render_card

    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "policy_loss": "gspo"}, sort_keys=False))
    card = render_card(run)
    assert "the policy loss `gspo` (Group Sequence Policy Optimization, arXiv 2507.18071)" in card.text
    assert "The policy loss `gspo`:" in card.text and "@article{zheng2025group," in card.text
    # ppo_clip's paper is PPO's own: cited once
    assert render_card(full_run).text.count("@article{schulman2017proximal,") == 1


def test_num_generations_help_lists_the_registry_group_estimators():
    import dataclasses

    from hfrl.core.estimators import ESTIMATORS, estimator_class
    from hfrl.trainers.online.online_config import OnlineConfig

    help_text = next(f for f in dataclasses.fields(OnlineConfig) if f.name == "num_generations").metadata["help"]
    groups = [name for name in ESTIMATORS if estimator_class(name).needs_groups]
    assert groups and f"({', '.join(groups)})" in help_text


def test_each_policy_loss_declares_the_settings_it_reads_and_refuses_the_others(tmp_path):
    import pytest

    from hfrl import PPOConfig
    from hfrl.core.policy_losses import POLICY_LOSSES, policy_loss_class
    from hfrl.core.policy_losses.base import LOSS_SETTINGS

    for name in POLICY_LOSSES:  # every loss says what it reads, of the config's loss settings
        assert set(policy_loss_class(name).reads) <= set(LOSS_SETTINGS), name
    assert PPOConfig(output_dir=str(tmp_path), clip_ratio_c=3.0).loss_settings().clip_ratio_c == 3.0  # ppo_clip's
    with pytest.raises(
        ValueError, match=r"^policy_loss a2c does not read cliprange_low \(it reads: loss_aggregation\)"
    ):
        PPOConfig(output_dir=str(tmp_path), policy_loss="a2c", cliprange_low=0.1)
    # the one name of the setting, in the config and the losses' settings alike
    settings = PPOConfig(output_dir=str(tmp_path), loss_aggregation="seq-mean-token-mean").loss_settings()
    assert settings.loss_aggregation == "seq-mean-token-mean"
