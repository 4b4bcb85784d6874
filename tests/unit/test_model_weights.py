"""``load_pretrained_weights``: what ``save_pretrained`` wrote goes back into a model in place, in one
file or in shards (resuming a run whose checkpoint was sharded raised an ImportError before)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from hfrl.core.models import load_pretrained_weights


@pytest.mark.parametrize("shard", [None, "200KB"])
def test_saved_weights_load_back_in_place(shard, tiny_causal_dir, tmp_path):
    trained = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.5)
    kwargs = {"max_shard_size": shard} if shard else {}
    trained.save_pretrained(tmp_path, **kwargs)
    assert (tmp_path / "model.safetensors.index.json").is_file() == bool(shard)
    fresh = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    load_pretrained_weights(fresh, str(tmp_path))
    for (name, a), b in zip(trained.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_a_folder_without_weights_is_one_line(tiny_causal_dir, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    with pytest.raises(ValueError, match=r"^no model weights in checkpoint .* \(expected model.safetensors\)$"):
        load_pretrained_weights(model, str(tmp_path))
