"""Policy losses: the actor's term of an online update (docs/algorithms.md §2, §4, §5, §15).

``policy outputs on a minibatch + the rollout's numbers -> policy loss``, selected by name with the
online configs' ``policy_loss`` (verl's ``policy_loss.loss_mode``, SkyRL's ``policy_loss_type``). Each
loss is one small module with its formula and source on the lines that compute it; this registry is a
dict literal of name -> class, imported lazily. The rest of the update's loss (value, entropy, KL) is
added once, by :class:`hfrl.core.losses.UpdateLoss`.

A new loss is one file and one line here: a subclass of :class:`hfrl.core.policy_losses.base.PolicyLoss`
with its ``__call__`` (``cispo.py`` is the example), registered below; a ``module:attr`` path (or
``path/to/file.py:Class``) to one's own class works too (``--policy_loss my_losses.py:MyLoss``).

    python -m pytest tests/unit/test_policy_losses.py
"""

from __future__ import annotations

from typing import Any

POLICY_LOSSES: dict[str, str] = {
    "ppo_clip": "hfrl.core.policy_losses.ppo_clip:PPOClip",
    "a2c": "hfrl.core.policy_losses.a2c:A2C",
    "gspo": "hfrl.core.policy_losses.gspo:GSPO",
    "cispo": "hfrl.core.policy_losses.cispo:CISPO",
    "surrogate": "hfrl.core.policy_losses.surrogate:Surrogate",
    "dis": "hfrl.core.policy_losses.dis:DIS",
}


def policy_loss_class(name: str) -> Any:
    """The policy loss class registered as ``name`` (or at the ``module:attr`` path ``name``); an
    unknown name fails with the known ones and the closest match."""
    from hfrl.core.policy_losses.base import PolicyLoss
    from hfrl.utils.registry import UnknownNameError, resolve

    found = resolve(name, POLICY_LOSSES, "policy loss")
    if not (isinstance(found, type) and issubclass(found, PolicyLoss)):  # never called: os:system runs nothing
        raise UnknownNameError(
            f"policy loss {name!r} is a {'class' if isinstance(found, type) else type(found).__name__}, not a policy "
            "loss class (a subclass of hfrl.core.policy_losses.base.PolicyLoss); hfrl list algs lists them"
        )
    return found


__all__ = ["policy_loss_class"]
