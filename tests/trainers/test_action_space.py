"""The action space: the one interface through which the online core meets NLPO's difference."""

import re
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl.core.action_space import ActionSpace
from hfrl.testing import digit_reward

ROOT = Path(__file__).resolve().parents[2]
CORE = [
    "hfrl/core/action_space.py",
    "hfrl/core/rollout/types.py",
    "hfrl/core/rollout/generate.py",
    "hfrl/core/rollout/score.py",
    "hfrl/core/rollout/assemble.py",
    "hfrl/core/capture.py",
    "hfrl/trainers/checkpoints.py",
    "hfrl/trainers/online/online_trainer.py",
    "hfrl/trainers/online/ppo_trainer.py",
    "hfrl/trainers/online/a2c_trainer.py",
    "hfrl/trainers/online/trpo_trainer.py",
]
NLPO_NAMES = [
    "mask_policy",
    "MaskPolicy",
    "top_mask",
    "min_tokens_to_keep",
    "mask_update_every",
    "TopPMaskProcessor",
    "hfrl.core.masking",
    "_processors",
    "last_allowed",
    "_suspended",
    # the hooks NLPO was threaded through before the action space
    "_logits_processor",
    "loss_action_mask",
    "_action_set_from_sampling",
]


def test_the_core_names_nothing_of_nlpo():
    """Following top_mask from the CLI to the loss goes through NLPO's files and the action-space
    interface only: the shared online core mentions none of NLPO's names."""
    texts = {path: (ROOT / path).read_text(encoding="utf-8") for path in CORE}
    found = [
        f"{path}: {name}"
        for path, text in texts.items()
        for name in NLPO_NAMES
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)  # whole names: _get_logits_processor is not one
    ]
    assert not found


@pytest.mark.parametrize("alg", ["ppo", "a2c", "trpo", "nlpo"])
def test_each_trainer_gets_its_action_space(alg, tiny_causal_dir, make_config):
    from hfrl.runs.experiment import algorithm_trainer
    from hfrl.trainers.online.nlpo_trainer import MASK_POLICY_NAME, NLPOActionSpace

    trainer_class = algorithm_trainer(alg)
    trainer = trainer_class(
        model=tiny_causal_dir,
        args=make_config(trainer_class.config_class),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2", "a"] * 4}),
    )
    if alg == "nlpo":
        assert isinstance(trainer.action_space, NLPOActionSpace)
        assert trainer.action_space.mask_policy.top_p == trainer.args.top_mask
        assert MASK_POLICY_NAME in trainer._own_checkpoint_files
    else:  # the whole vocabulary: no processors, no stored sets, the full softmax in the loss
        assert type(trainer.action_space) is ActionSpace
        assert trainer._own_checkpoint_files == ("value_head.safetensors", "online_state.json")


# Two steps over a vocabulary of 10, packed 1 bit per entry (bit i of byte k: entry 8k + i):
# step 0 allows {0, 2, 9}: byte 0 = 1 + 4 = 5, byte 1 = 2 (entry 9 = 8 + 1);
# step 1 allows {1, ..., 8}: byte 0 = 255 - 1 = 254, byte 1 = 1 (entry 8).
PACKED = torch.tensor([[[5, 2], [254, 1]]], dtype=torch.uint8)  # (B=1, T=2, ceil(10 / 8) = 2)


def test_the_whole_vocabulary_has_no_loss_mask():
    space = ActionSpace()
    assert space.loss_mask(PACKED, 10) is None and space.loss_mask(None, 10) is None
    assert not space.records_sets and space.processors(torch.ones(1, 2), torch.ones(1, 2)) == []


def test_nlpo_loss_mask_unpacks_the_sets_sampled_from(tiny_causal_dir):
    from transformers import AutoModelForCausalLM

    from hfrl.core.masking import MaskPolicy
    from hfrl.trainers.online.nlpo_trainer import NLPOActionSpace

    space = NLPOActionSpace(MaskPolicy(AutoModelForCausalLM.from_pretrained(tiny_causal_dir)), update_every=1)
    mask = space.loss_mask(PACKED, 10)
    assert mask.dtype == torch.bool and mask.shape == (1, 2, 10)
    assert mask[0, 0].nonzero().flatten().tolist() == [0, 2, 9]
    assert mask[0, 1].nonzero().flatten().tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert space.loss_mask(None, 10) is None  # nothing recorded: the full softmax
    assert space.records_sets
