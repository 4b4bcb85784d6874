"""Presets (issue 36): named sets of settings over a task's tuning, under the config file and the
command line; recorded in config.yaml and the model card; listed; one line for what cannot apply."""

from __future__ import annotations

import re

import yaml

from hfrl.runs.experiment import resolve_run
from hfrl.testing import run_cli
from hfrl.trainers.presets import preset_names, preset_settings, read_preset
from hfrl.trainers.schema import config_schema


def test_every_preset_sets_fields_of_ppo_and_cites_its_paper():
    from hfrl.trainers.papers import paper

    assert preset_names()  # every shipped file, from the folder: a new preset enrols without an edit here
    fields = config_schema("ppo").names
    for name in preset_names():
        preset = read_preset(name)
        assert preset.description and set(preset.settings) <= fields, name
        assert paper(preset.paper)["id"], name


def test_a_preset_sits_between_the_task_and_the_users_settings(tmp_path):
    run = resolve_run("numbers", "ppo", "tiny", output_dir=str(tmp_path), overrides={"preset": "vapo"})
    assert run["preset"] == "vapo" and run["lam_alpha"] == 0.05 and run["positive_lm_coef"] == 0.1
    assert run["learning_rate"] == 2e-3  # the task's own tuning stays where the preset says nothing
    flagged = resolve_run("numbers", "ppo", "tiny", output_dir=str(tmp_path),
                          overrides={"preset": "vapo", "lam_alpha": 0.5})  # fmt: skip
    assert flagged["lam_alpha"] == 0.5  # the command line wins
    config = tmp_path / "c.yaml"
    config.write_text("preset: sao\ncritic_epochs: 3\n")
    from_file = resolve_run("numbers", "ppo", "tiny", config_file=config, output_dir=str(tmp_path))
    assert from_file["policy_loss"] == "dis" and from_file["critic_epochs"] == 3  # the file over its preset


def test_an_unknown_preset_or_one_that_cannot_apply_is_one_line(tmp_path, capsys):
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--preset", "vappo", "-o",
                            str(tmp_path / "r")], capsys)  # fmt: skip
    assert code == 2 and "unknown preset 'vappo'" in err and "vapo" in err
    code, _, err = run_cli(["train", "--task", "numbers", "--alg", "grpo", "--model", "tiny", "--preset", "vapo",
                            "-o", str(tmp_path / "r")], capsys)  # fmt: skip
    assert code == 2 and err.strip().splitlines()[0] == (
        "error: preset vapo sets critic_warmup_iterations, which GRPOConfig has no field for: a preset tunes the "
        "online core with a critic (--alg ppo, nlpo, a2c)"
    )
    assert not (tmp_path / "r").exists()


def test_hfrl_list_presets_names_each_with_what_it_sets(capsys):
    code, out, _ = run_cli(["list", "presets"], capsys)
    assert code == 0
    for name in preset_names():
        assert re.search(rf"^{name}\s", out, re.M), name
    assert "lam_alpha 1.5" in out and "policy_loss dis" in out


def test_a_preset_run_records_it_and_its_card_names_it(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--task", "numbers", "--model", "tiny", "--preset", "vc_ppo", "-o", str(run), "--num_iterations",
            "2", "--critic_warmup_iterations", "1", "--rollout_batch_size", "8", "--mini_batch_size", "8",
            "--num_ppo_epochs", "1", "--disable_tqdm", "true"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["preset"] == "vc_ppo" and config["lam_critic"] == 1.0 and config["critic_warmup_iterations"] == 1
    card = (run / "README.md").read_text()
    assert "the settings of the preset `vc_ppo` (VC-PPO: value pretraining" in card and "2503.01491" in card


def test_preset_settings_make_a_config_in_python(tmp_path):
    from hfrl import PPOConfig

    args = PPOConfig(output_dir=str(tmp_path), num_iterations=60, **preset_settings("vapo"))
    assert args.cliprange_high == 0.28 and args.loss_settings().clip_bounds == (0.8, 1.28)
