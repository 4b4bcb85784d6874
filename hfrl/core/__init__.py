"""The maths and tensors of RL fine-tuning: advantages, losses, KL controllers, minibatches, the
natural-gradient step, rollouts (generation, capture, NLPO's mask, scoring), the actor-critic
policies, and model loading (``models``, ``model_args``, the built-in ``tiny`` models).

Imports only ``hfrl.core`` and ``hfrl.utils`` (tests/unit/test_imports.py checks it)."""
