"""hfrl's own transformers architectures, registered with transformers' Auto classes, so that a model
folder or Hub id of such a type loads through the ordinary ``from_pretrained`` of every library
(hfrl's classifier rewards, TRL, your code) without remote code:

    model_type               AutoConfig                  AutoModelForSequenceClassification
    gpt_neox_reward_model    GPTNeoXRewardModelConfig    GPTNeoXRewardModel (OpenAssistant's reward models)

OpenAssistant's own package registers its classes when it is imported; ``import hfrl`` does the same,
under two constraints: ``import hfrl`` (and ``hfrl --help``) never imports torch, which transformers'
Auto modules do; and nothing may be imported from transformers while transformers is itself half-way
through an import. The second rules out the obvious "register right after ``configuration_auto`` is
imported": that module is first imported from inside a model's own config module (the
``@auto_docstring`` decorator on its config class), so importing ``GPTNeoXConfig`` at that moment
can meet ``configuration_gpt_neox`` half-initialised. So the registration is lazy, in three steps:

1. ``import hfrl`` calls :func:`install`. When ``configuration_auto`` is already imported it goes
   straight to step 2; otherwise it puts a small finder on ``sys.meta_path`` that waits for that
   module, runs step 2 right after the module has executed, and removes itself. Nothing is imported.
2. Step 2 imports nothing either: it makes ``CONFIG_MAPPING`` (the table ``AutoConfig`` looks model
   types up in) answer for ``gpt_neox_reward_model`` by name, the class to be imported on the first
   lookup. Its extra-entries dict (``CONFIG_MAPPING._extra_content``, where ``AutoConfig.register``
   writes) is replaced by a ``dict`` subclass holding the same entries plus the names of hfrl's.
3. The first lookup (``AutoConfig.from_pretrained`` of such a folder: a call, never an import)
   imports the config class; the first config of the type created registers the model class with
   ``AutoModelForSequenceClassification`` (:mod:`hfrl.core.gpt_neox_reward_config`), before any Auto
   model class looks it up.

A type that someone else registered (OpenAssistant's own package, before or after hfrl) is theirs.
:func:`register_models` does everything at once and may be called any time (idempotent). The names
live in :data:`ARCHITECTURES`, a dict literal of dotted paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, cast

# model_type -> (config class, {Auto class: model class}), as "module:attr" paths
ARCHITECTURES: dict[str, tuple[str, dict[str, str]]] = {
    "gpt_neox_reward_model": (
        "hfrl.core.gpt_neox_reward_config:GPTNeoXRewardModelConfig",
        {"AutoModelForSequenceClassification": "hfrl.core.gpt_neox_reward:GPTNeoXRewardModel"},
    ),
}
CONFIG_AUTO = "transformers.models.auto.configuration_auto"

_lock = threading.RLock()
_models_registered: set[str] = set()  # model types whose model classes are registered


def _attr(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class _LazyTypes(dict[str, Any]):
    """``CONFIG_MAPPING._extra_content`` with hfrl's entries known by name and imported on the first
    lookup. Stored entries are plain dict items (what ``dict(self)`` and pickling see); the pending
    ones are only in ``pending``: found by ``in`` and ``keys()``, imported by ``[]`` and ``get``.
    Whoever registers a pending type (OpenAssistant's package) replaces it."""

    def __init__(self, entries: dict[str, Any], pending: dict[str, str]) -> None:
        super().__init__(entries)
        self.pending = {k: v for k, v in pending.items() if k not in entries}

    def resolve(self, key: str) -> None:
        with _lock:
            path = self.pending.get(key)
            if path is not None:
                dict.__setitem__(self, key, _attr(path))
                self.pending.pop(key, None)

    def __getitem__(self, key: str) -> Any:
        if key in self.pending:
            self.resolve(key)
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: str, value: Any) -> None:
        self.pending.pop(key, None)
        dict.__setitem__(self, key, value)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.pending

    def keys(self) -> list[str]:  # type: ignore[override]  # the pending names too, as a list
        return [*dict.keys(self), *self.pending]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())


def _config_mapping() -> Any:
    return sys.modules[CONFIG_AUTO].CONFIG_MAPPING


def make_lookup_lazy() -> bool:
    """Step 2: ``CONFIG_MAPPING`` knows hfrl's model types by name (nothing imported). False when
    transformers' mapping has no ``_extra_content`` dict (then :func:`register_models` still works)."""
    with _lock:
        mapping = _config_mapping()
        extra = getattr(mapping, "_extra_content", None)
        if isinstance(extra, _LazyTypes) or not isinstance(extra, dict):
            return isinstance(extra, _LazyTypes)
        ours = {t: config for t, (config, _) in ARCHITECTURES.items() if t not in mapping}
        mapping._extra_content = _LazyTypes(extra, ours)
        return True


def register_configs() -> None:
    """Every config class of :data:`ARCHITECTURES` in ``CONFIG_MAPPING``, imported now (idempotent;
    a type someone else registered is left to them)."""
    from transformers import AutoConfig

    with _lock:
        make_lookup_lazy()
        mapping = _config_mapping()
        extra = mapping._extra_content
        for model_type, (config_path, _) in ARCHITECTURES.items():
            if isinstance(extra, _LazyTypes) and model_type in extra.pending:
                extra.resolve(model_type)
            elif model_type not in mapping:
                AutoConfig.register(model_type, _attr(config_path))


def register_models() -> None:
    """The config classes, then each model class with its Auto classes, for the types whose config
    in ``CONFIG_MAPPING`` is hfrl's (idempotent)."""
    with _lock:
        register_configs()
        mapping = _config_mapping()
        for model_type, (config_path, models) in ARCHITECTURES.items():
            config_class = _attr(config_path)
            if model_type in _models_registered or mapping[model_type] is not config_class:
                continue
            _models_registered.add(model_type)
            modeling_auto = importlib.import_module("transformers.models.auto.modeling_auto")
            for auto_name, model_path in models.items():
                getattr(modeling_auto, auto_name).register(config_class, _attr(model_path), exist_ok=True)


class _Loader(importlib.abc.Loader):
    """The module's own loader, then ``after()`` once the module has executed."""

    def __init__(self, loader: Any, after: Any) -> None:
        self._loader, self._after = loader, after

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return cast(ModuleType | None, self._loader.create_module(spec))

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        try:
            self._after()
        except Exception as err:  # noqa: BLE001 - never break the user's import of transformers
            warnings.warn(
                f"hfrl could not register its model types with transformers ({type(err).__name__}: {err}); "
                "OpenAssistant's GPT-NeoX reward models will not load by name",
                stacklevel=2,
            )

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package...: the real loader's
        return getattr(self._loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the one watched module, wraps the spec that the other finders
    return so that ``after()`` runs once the module has executed; then leaves ``sys.meta_path``."""

    def __init__(self, name: str, after: Any) -> None:
        self.name, self.after = name, after

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec: ModuleSpec | None = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, self.after)
                return spec
        return None


def install() -> None:
    """Step 1 (``import hfrl``): make the lookup lazy now if transformers' config Auto module is
    loaded, else as soon as it is. Imports nothing."""
    if CONFIG_AUTO in sys.modules:
        make_lookup_lazy()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(CONFIG_AUTO, make_lookup_lazy))


__all__ = ["ARCHITECTURES", "install", "make_lookup_lazy", "register_configs", "register_models"]
