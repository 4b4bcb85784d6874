"""A new policy loss or advantage estimator is one file (issue 35): a throwaway loss and estimator written
to a temporary folder train one iteration through the command line, named by their file, with no list
of hfrl's edited; the run records them and hfrl list algs names the registered ones from their docstrings."""

from __future__ import annotations

import json

import yaml

from hfrl.testing import run_cli

PARTS = '''
"""A throwaway policy loss and advantage estimator."""
import torch

from hfrl.core.estimators.base import AdvantageEstimator
from hfrl.core.policy_losses.base import PolicyLoss


class HalfPG(PolicyLoss):
    """Half the plain policy gradient."""

    def __call__(self, out, batch):
        return -0.5 * self.aggregate(batch.advantages * out.logprobs, batch.train_mask), {"half": torch.tensor(0.5)}


class Centred(AdvantageEstimator):
    """Each completion's reward minus the rollout's mean reward, on every token."""

    def estimate(self, x):
        kept = x.mask.sum(1) > 0
        centred = x.scores.float() - x.scores[kept].float().mean()
        return self.shaped_returns(x, centred)
'''


def test_a_loss_and_an_estimator_of_ones_own_train_through_the_cli(tmp_path, capsys):
    (tmp_path / "my_parts.py").write_text(PARTS)
    parts, run = tmp_path / "my_parts.py", tmp_path / "run"
    args = [
        "train",
        "--task",
        "numbers",
        "--model",
        "tiny",
        "-o",
        str(run),
        "--num_iterations",
        "1",
        "--rollout_batch_size",
        "4",
        "--mini_batch_size",
        "4",
        "--num_ppo_epochs",
        "1",
        "--max_new_tokens",
        "4",
        "--disable_tqdm",
        "true",
        "--policy_loss",
        f"{parts}:HalfPG",
        "--advantage_estimator",
        f"{parts}:Centred",
    ]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert (config["policy_loss"], config["advantage_estimator"]) == (f"{parts}:HalfPG", f"{parts}:Centred")
    logged = json.loads((run / "iterations.jsonl").read_text().splitlines()[0])
    assert logged["half"] == 0.5 and "loss/value" not in logged  # its statistics; no critic: none trained
    code, _, err = run_cli(["train", "--config", str(run / "config.yaml"), "-o", str(tmp_path / "again")], capsys)
    assert code == 2 and "names code to run (" in err and str(parts) in err  # read back from a file: refused


def test_list_algs_names_every_registered_loss_from_its_docstring(capsys):
    from hfrl.core.policy_losses import POLICY_LOSSES

    code, out, _ = run_cli(["list", "algs"], capsys)
    assert code == 0
    assert all(name in out for name in POLICY_LOSSES)
    assert "GSPO: PPO's clip on each completion's length-normalised sequence ratio" in " ".join(out.split())
