"""The maths and tensors of RL fine-tuning: advantages, losses, KL controllers, minibatches, the
natural-gradient step, rollouts (generation, capture, NLPO's mask, scoring), the actor-critic
policies, and model loading (``models``, ``model_args``, ``quantization`` for 4/8-bit, the built-in
``tiny`` models, and hfrl's own transformers architectures: ``gpt_neox_reward`` with its config,
registered by ``auto_classes``).

Imports only ``hfrl.core`` and ``hfrl.utils`` (tests/unit/test_imports.py checks it)."""
