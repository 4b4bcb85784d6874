"""PRO (preference ranking optimisation, Song et al. 2023): the loss against a hand computation on two
prompts with three ranked responses each, against PRO's own formula written as its code writes it,
the grouping of rows into rankings, and ``hfrl train --alg pro`` on HH and COMET fixtures.

The two rankings (``s = S / |y|``, the length-normalised log-probability; ``sft_weight`` 0.05):

    prompt A: rewards r = [2, 1, 0], S = [-1.0, -1.0, -4.5], |y| = [2, 1, 3] -> s = [-0.5, -1.0, -1.5]
      k = 1: T = r_1 - r_j = [1, 2] (j = 2, 3), T_11 = max = 2
             L_1 = logsumexp(s_1 T_11, s_2 * 1, s_3 * 2) - s_1 T_11 = logsumexp(-1, -1, -3) + 1
                 = ln(2 e^-1 + e^-3) + 1 = ln(2 + e^-2) = ln 2.135335 = 0.758624
      k = 2: T = [1], T_22 = 1: L_2 = logsumexp(-1.0, -1.5) + 1.0 = ln(1 + e^-0.5) = 0.474077
      SFT: 0.05 * (3 - 1)^2 * (-S_1) = 0.05 * 4 * 1.0 = 0.2;  L_A = 1.432701
    prompt B: r = [1, 1, 0] (a tie: the stable order keeps response 1 first), S = [-1, -2, -1], |y| = 1
      k = 1: T = [0, 1], T_11 = 1: L_1 = logsumexp(-1, 0, -1) + 1 = ln(1 + 2 e^-1) + 1 = 1.551445
      k = 2: T = [1], T_22 = 1: L_2 = logsumexp(-2, -1) + 2 = ln(1 + e) = 1.313262
      SFT: 0.05 * 4 * 1 = 0.2;  L_B = 3.064706
    loss = (L_A + L_B) / 2 = 2.248704

(The maths by hand: tests/unit/test_pro_loss.py.)"""

from __future__ import annotations

import json

import pytest

from hfrl.tasks.data import FIXTURES
from hfrl.testing import run_cli


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory):
    from hfrl.testing.tiny_classifiers import save_comet_critic, save_sequence_classifier

    root = tmp_path_factory.mktemp("pro-rewards")
    return {
        "hh": save_sequence_classifier(root / "rm", "gpt2", ["LABEL_0"]),  # the reward model's shape: one output
        "comet": save_comet_critic(root / "critic"),
    }


COMMON = ["--model", "tiny", "--report_to", "none", "--disable_tqdm", "true", "--max_new_tokens", "6"]
COMMON += ["--max_prompt_length", "48", "--max_completion_length", "12", "--per_device_train_batch_size", "4"]
COMMON += ["--per_device_eval_batch_size", "8", "--logging_steps", "1", "--warmup_steps", "0", "--eval_strategy", "no"]
COMMON += ["--save_strategy", "no", "--load_best_model_at_end", "false"]


@pytest.mark.parametrize(
    ("task", "args", "prompts"),
    [
        ("hh", ["--task-arg", "classifier={hh}", "--max_steps", "3"], 21),  # each pair's chosen and rejected
        ("comet", ["--task-arg", "critic_model={comet}", "--num_train_epochs", "1"], 8),  # tails per head + relation
    ],
)
def test_hfrl_train_alg_pro(task, args, prompts, reward_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))
    out = tmp_path / "run"
    args = [a.format(**reward_model) for a in args]
    cache = ["--preparation_cache_dir", str(tmp_path / "cache")]
    code, _, err = run_cli(
        ["train", "--task", task, "--alg", "pro", "--output-dir", str(out), *args, *COMMON, *cache], capsys
    )
    assert code == 0, err
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert history[0]["prepare/prompts"] == prompts and history[0]["prepare/responses_per_prompt"] == 2
    steps = [h for h in history if "loss/ranking" in h]
    assert steps and all(h["loss/total"] > 0 and h["responses"] == 2 for h in steps)
    card = (out / "README.md").read_text()
    assert "trained with PRO" in card and "Preference Ranking Optimization for Human Alignment" in card


def test_pro_config_errors():
    from hfrl.trainers.offline.pro_trainer import PROConfig

    with pytest.raises(ValueError, match="max_responses must be >= 2"):
        PROConfig(output_dir="x", max_responses=1)
    with pytest.raises(ValueError, match="unknown algorithm 'a_lol'"):
        PROConfig(output_dir="x", algorithm="a_lol")
    with pytest.raises(ValueError, match="pro has no advantage or reward to sample by: set sampling 'none'"):
        PROConfig(output_dir="x", sampling="good_priority")
