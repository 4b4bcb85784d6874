"""QLoRA as far as a CPU allows: the bitsandbytes config each path builds (TRL's flags, A-LoL's
field), the device map for a process's local rank on a (mocked) CUDA machine, and the one-line errors
without bitsandbytes or CUDA, which every trainer gives the same way."""

from __future__ import annotations

import pytest
import torch

from hfrl.core import quantization
from hfrl.core.quantization import bnb_config, check_kbit_available, kbit_device_map, kbit_flag


def test_four_bit_config_has_the_asked_fields():
    config = bnb_config(4, quant_type="nf4", double_quant=True)
    assert (config.load_in_4bit, config.load_in_8bit) == (True, False)
    assert config.bnb_4bit_quant_type == "nf4" and config.bnb_4bit_use_double_quant is True
    assert config.bnb_4bit_compute_dtype == torch.bfloat16  # QLoRA's compute type unless asked
    config = bnb_config(4, quant_type="fp4", compute_dtype="float16", quant_storage="bfloat16")
    assert config.bnb_4bit_quant_type == "fp4" and config.bnb_4bit_use_double_quant is False
    assert (config.bnb_4bit_compute_dtype, config.bnb_4bit_quant_storage) == (torch.float16, torch.bfloat16)
    eight = bnb_config(8)
    assert (eight.load_in_8bit, eight.load_in_4bit) == (True, False)
    assert (kbit_flag(config), kbit_flag(eight), kbit_flag(None)) == ("load_in_4bit", "load_in_8bit", None)
    assert kbit_flag(config.to_dict()) == "load_in_4bit"  # as read back from a saved config
    with pytest.raises(ValueError, match="bits must be 4 or 8, got 2"):
        bnb_config(2)


def test_trl_model_flags_build_the_same_config(tiny_causal_dir):
    from hfrl.core.model_args import model_loading

    flags = {
        "use_peft": True,
        "lora_r": 8,
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "fp4",
        "use_bnb_nested_quant": True,
        "dtype": "float16",
    }
    peft_config, init_kwargs = model_loading(tiny_causal_dir, flags)
    config = init_kwargs["quantization_config"]
    assert (config.load_in_4bit, config.bnb_4bit_quant_type, config.bnb_4bit_use_double_quant) == (True, "fp4", True)
    assert config.bnb_4bit_compute_dtype == torch.float16  # --dtype, as in TRL's scripts
    assert "device_map" not in init_kwargs  # placed by the trainer, on the process's own GPU
    assert peft_config.r == 8 and peft_config.fan_in_fan_out is True  # GPT-2's Conv1D
    _, init_kwargs = model_loading(tiny_causal_dir, {"use_peft": True, "load_in_8bit": True})
    assert init_kwargs["quantization_config"].load_in_8bit is True


def test_device_map_is_the_local_rank_on_cuda(monkeypatch):
    import accelerate

    class ThirdProcess:  # the fourth GPU's process of a node (local rank 3)
        local_process_index = 3

    monkeypatch.setattr(accelerate, "PartialState", ThirdProcess)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert kbit_device_map() == {"": 3}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if getattr(torch, "xpu", None) is not None:
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    assert kbit_device_map() is None


@pytest.mark.parametrize(
    ("cuda", "bitsandbytes", "missing"),
    [
        (False, True, "no CUDA GPU is visible"),
        (True, False, "bitsandbytes is not installed"),
        (False, False, "no CUDA GPU is visible and bitsandbytes is not installed"),
    ],
)
def test_one_line_error_without_cuda_or_bitsandbytes(monkeypatch, cuda, bitsandbytes, missing):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(quantization.importlib.util, "find_spec", lambda name: object() if bitsandbytes else None)
    with pytest.raises(ValueError) as err:
        check_kbit_available("load_in_8bit")
    assert str(err.value) == (
        f"load_in_8bit (QLoRA) needs a CUDA GPU and bitsandbytes, but {missing}: run on a GPU machine with "
        "`pip install bitsandbytes`, or set load_in_8bit false to train in full precision"
    )


def test_cuda_and_bitsandbytes_pass_the_check(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(quantization.importlib.util, "find_spec", lambda name: object())
    check_kbit_available("load_in_4bit")


def test_quantized_weights_train_only_through_an_adapter(tiny_causal_dir):
    from hfrl.core.models import load_model, load_trainable

    kwargs = {"quantization_config": bnb_config(4)}
    with pytest.raises(ValueError) as err:
        load_trainable(tiny_causal_dir, kwargs)
    assert str(err.value) == (
        "load_in_4bit (QLoRA) trains a LoRA adapter on the quantized base: pass peft_config (--use_peft), "
        "or a PEFT adapter as the model"
    )
    with pytest.raises(ValueError) as err:
        load_trainable(load_model(tiny_causal_dir), kwargs, peft_config=object())
    assert (
        str(err.value)
        == "load_in_4bit quantizes a model loaded by name: pass the model's name or path, not an instance"
    )


def test_a_real_four_bit_base_gets_prepared_and_a_trainable_lora(tiny_causal_dir, monkeypatch):
    """With bitsandbytes installed (it quantises on the CPU too, but trains there only until a model
    is switched to eval mode: its CPU kernels repack the weights for inference), the machine check
    passed: the base is 4-bit, prepared by PEFT, and only the LoRA weights learn."""
    pytest.importorskip("bitsandbytes")
    from peft import LoraConfig

    from hfrl.core.models import load_trainable

    monkeypatch.setattr(quantization, "check_kbit_available", lambda flag: None)
    lora = LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, task_type="CAUSAL_LM")
    kwargs = {"quantization_config": bnb_config(4, compute_dtype="float32")}
    policy, fresh = load_trainable(tiny_causal_dir, kwargs, peft_config=lora)
    assert fresh and quantization.is_kbit(policy.get_base_model())
    layer = policy.get_base_model().transformer.h[0].attn.c_attn.base_layer
    assert type(layer).__name__ == "Linear4bit"
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    policy.train()
    out = policy(input_ids=torch.tensor([[3, 17, 42, 8]]), labels=torch.tensor([[3, 17, 42, 8]]))
    out.loss.backward()
    assert all(p.grad is not None for n, p in policy.named_parameters() if n in trainable and "lora_B" in n)
