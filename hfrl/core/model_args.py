"""TRL's ``ModelConfig`` conventions for every algorithm: LoRA and 4/8-bit loading as flags.

    hfrl train --task numbers --alg ppo --model tiny --use_peft --lora_r 8 --lora_alpha 16
    hfrl train --task hh --alg ppo --use_peft --load_in_4bit true   # QLoRA (a CUDA GPU and bitsandbytes)

The flags are the fields of ``trl.ModelConfig`` (but ``model_name_or_path``: that is ``--model``),
read by :func:`model_loading` with TRL's own ``get_peft_config`` / ``get_quantization_config``, so
that they mean what they mean in TRL's scripts. Only the flags a run sets are applied; a run's
``config.yaml`` records them beside the config fields.
"""

from __future__ import annotations

from typing import Any, cast

# trl.ModelConfig's fields but model_name_or_path (tests/cli/test_lora_flags.py checks they stay in sync).
MODEL_KEYS = (
    "model_revision",
    "dtype",
    "attn_implementation",
    "use_peft",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "lora_target_modules",
    "lora_target_parameters",
    "lora_modules_to_save",
    "lora_task_type",
    "use_rslora",
    "use_dora",
    "load_in_8bit",
    "load_in_4bit",
    "bnb_4bit_quant_type",
    "use_bnb_nested_quant",
    "bnb_4bit_quant_storage",
)


def split_model_fields(fields: dict[str, Any], config_fields: set[str]) -> dict[str, Any]:
    """Remove and return the ``ModelConfig`` flags of ``fields`` (those the algorithm's own config
    does not declare: A-LoL's config has its own ``load_in_4bit``)."""
    return {k: fields.pop(k) for k in list(fields) if k in MODEL_KEYS and k not in config_fields}


def model_loading(model: Any, fields: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(peft_config or None, from_pretrained keyword arguments)`` for ``model`` from the
    ``ModelConfig`` flags a run set. LoRA's task type follows the model (seq2seq or causal) unless
    given; GPT-2's Conv1D layers get ``fan_in_fan_out``. 4/8-bit flags add a bitsandbytes config
    (:func:`hfrl.core.quantization.bnb_config`, compute dtype ``--dtype``, default bfloat16); the trainer
    checks the machine, places the model and prepares it (:func:`hfrl.core.models.load_trainable`)."""
    if not fields:
        return None, {}
    from trl import ModelConfig, get_peft_config

    from hfrl.core.quantization import bnb_config

    args = ModelConfig(**fields)
    init_kwargs: dict[str, Any] = {}
    if "model_revision" in fields:
        init_kwargs["revision"] = args.model_revision
    if "dtype" in fields:
        init_kwargs["dtype"] = args.dtype
    if args.attn_implementation is not None:
        init_kwargs["attn_implementation"] = args.attn_implementation
    if args.load_in_4bit or args.load_in_8bit:
        init_kwargs["quantization_config"] = bnb_config(
            4 if args.load_in_4bit else 8,
            quant_type=args.bnb_4bit_quant_type,
            double_quant=args.use_bnb_nested_quant,
            compute_dtype=args.dtype if args.dtype not in (None, "auto") else None,
            quant_storage=args.bnb_4bit_quant_storage,
        )
    peft_config = get_peft_config(args)
    if peft_config is not None:
        from peft import LoraConfig

        config = _model_config(model)
        if "lora_task_type" not in fields and config.get("is_encoder_decoder"):
            peft_config.task_type = "SEQ_2_SEQ_LM"
        if config.get("model_type") == "gpt2" and isinstance(peft_config, LoraConfig):  # TRL's is a LoraConfig
            peft_config.fan_in_fan_out = True  # GPT-2's Conv1D weights are stored (in, out)
    return peft_config, init_kwargs


def _model_config(model: Any) -> dict[str, Any]:
    """The model's config as a dict (a model instance, a built-in tiny model, a path or a Hub id)."""
    if not isinstance(model, str):
        return cast(dict[str, Any], model.config.to_dict())
    from hfrl.core.models import model_config_dict

    return model_config_dict(model)
