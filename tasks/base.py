"""The task interface: a dataset, rewards, metrics and default configs packaged under one name.

A task module builds its ``DatasetDict`` and calls :func:`task_from_yaml`, which reads the YAML file
beside the module: ``name``, ``description``, ``default_model`` (and ``default_base_model``, the base
model that a default model which is a bare PEFT adapter loads onto), ``dataset`` (Hub repository, pinned
revision and Parquet files per split), ``rewards``, ``metrics`` (and ``optional_metrics``, which need
extra packages or downloads), named ``reward_configs`` and per-algorithm ``configs``; optionally the
``splits`` and ``columns`` its dataset holds, so that ``hfrl eval --split`` and ``hfrl train --alg reward``
are checked before the data and torch load (:mod:`hfrl.trainers.field_rules`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# Keyword arguments every YAML-declared task accepts besides its builder's own (task_from_yaml's).
TASK_OVERRIDES = (
    "rewards",
    "metrics",
    "reward_config",
    "name",
    "default_model",
    "default_base_model",
    "description",
    "configs",
)


@dataclass
class Task:
    """What ``load_task`` returns.

    ``dataset`` has ``train`` / ``validation`` / ``test`` splits with a ``prompt`` column (str, or a
    list of chat messages), ``references`` (list[str]) and any extra columns, which rewards and
    metrics receive as keyword arguments. ``configs`` maps an algorithm to its default config
    fields (the YAML file beside the task module).
    """

    name: str
    dataset: Any  # datasets.DatasetDict
    reward_funcs: list[Callable[..., Any]]
    metrics: dict[str, Callable[..., Any]] = field(default_factory=dict)
    default_model: str = "tiny"
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""
    default_base_model: str | None = None  # the base of default_model when that is a bare PEFT adapter

    def config_for(
        self, alg: str, sections: type | Sequence[str] | None = None, chosen: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The task's settings for ``alg`` (:func:`merge_sections`, the one merge ``hfrl train`` uses too).
        ``sections``: the algorithm's config class (``task.config_for("ppo", PPOConfig)``: the sections it
        inherits, :func:`task_sections`, e.g. ``defaults``, ``online``, ``ppo``, and the ``defaults`` kept to
        its fields), or the section names. ``chosen``: the settings you give over them, which decide the
        estimator's section (``{"advantage_estimator": "rloo"}``: the task's ``critic_free`` one)."""
        if sections is None:
            raise TypeError(
                f"config_for({alg!r}) needs the algorithm's config class for the task sections it inherits: "
                f"task.config_for({alg!r}, PPOConfig) (or the section names)"
            )
        fields = None
        if isinstance(sections, type):
            fields = {f.name for f in dataclasses.fields(sections)} if dataclasses.is_dataclass(sections) else None
            sections = task_sections(sections)
        return merge_sections(self.configs, alg, sections, chosen=chosen, fields=fields)


@dataclass(frozen=True)
class TaskSpec:
    """What a task declares, read without building its dataset, rewards or metrics
    (:func:`hfrl.tasks.task_spec`): what resolving a run needs, and ``declared``, the whole YAML spec
    as the task arguments shaped it (dataset, rewards, license: the model card's)."""

    name: str
    default_model: str = "tiny"
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""
    declared: dict[str, Any] = field(default_factory=dict, repr=False)
    default_base_model: str | None = None

    @classmethod
    def of(cls, task: Task) -> TaskSpec:
        """The spec of a built task."""
        return cls(
            task.name, task.default_model, task.configs, task.description, default_base_model=task.default_base_model
        )

    @classmethod
    def from_yaml(cls, spec: dict[str, Any], overrides: dict[str, Any]) -> TaskSpec:
        """A YAML spec with ``reward_config`` and the name, model, description and configs that the
        task arguments (``overrides``) set: what :func:`task_from_yaml` builds its :class:`Task` with."""
        spec = apply_reward_config(spec, overrides.get("reward_config"))
        model = overrides.get("default_model", spec.get("default_model", "tiny"))
        base = overrides.get("default_base_model", spec.get("default_base_model"))
        if "default_model" in overrides and "default_base_model" not in overrides:
            base = None  # another default model: the declared base was the declared model's
        return cls(
            name=overrides.get("name", spec.get("name", "")),
            default_model=model,
            default_base_model=base,
            configs=_merge_configs(spec.get("configs") or {}, overrides.get("configs") or {}),
            description=overrides.get("description", spec.get("description", "")),
            declared=spec,
        )


def read_task_yaml(module_file: str) -> dict[str, Any]:
    """The YAML file beside a task module (``tasks/numbers.py`` -> ``tasks/numbers.yaml``).

    ``extends: other.yaml`` (a file in the same folder) starts from that file's spec: mappings are
    merged key by key, this file's values winning (tasks that share rewards and configs, such as
    ``reddit_pos`` and ``reddit_neg``).
    """
    from hfrl.utils.bounded import invalid_yaml, load_yaml, read_text
    from hfrl.utils.trust import check_file

    path = Path(module_file).with_suffix(".yaml")
    what = f"task file {path}"
    try:
        spec = check_file(load_yaml(read_text(path, what), what) or {}, what)  # bounded: a task file of yours too
    except yaml.YAMLError as err:
        raise ValueError(invalid_yaml(err, path)) from None
    parent = spec.pop("extends", None)
    if parent is not None:
        if Path(parent).name != parent or not parent.endswith(".yaml") or parent == path.name:
            raise ValueError(f"{path.name}: extends names another .yaml file in the same folder, got {parent!r}")
        spec = _deep_merge(read_task_yaml(str(path.with_name(parent))), spec)
    return _resolve_assets(spec)


def _resolve_assets(spec: dict[str, Any]) -> dict[str, Any]:
    """``dataset: {asset: NAME}`` (and FaithDial's ``faithdial`` section) replaced by the asset
    manifest's repository, pinned revision and files (:mod:`hfrl.utils.assets`)."""
    from hfrl.utils.assets import resolve_dataset

    return {key: resolve_dataset(value) if key in ("dataset", "faithdial") else value for key, value in spec.items()}


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def spec_id(spec: Any) -> str:
    """The id of a reward or metric spec (``"rouge"`` or ``{id: rouge, args: ...}``)."""
    return spec if isinstance(spec, str) else str(spec.get("id", "")) if isinstance(spec, dict) else repr(spec)


def with_classifiers(module_file: str, classifiers: dict[str, str], task_args: dict[str, Any]) -> dict[str, Any]:
    """The task's YAML with each classifier a task argument names swapped in: ``classifiers`` maps a
    task argument (``fluency_model``) to the reward id whose model it sets; other arguments are
    ignored. What the run trains on, and what its card lists."""
    spec = read_task_yaml(module_file)
    for arg, model in task_args.items():
        if arg in classifiers:
            spec["rewards"] = with_model(spec["rewards"], (classifiers[arg],), model)
    return spec


def with_model(specs: list[Any], ids: tuple[str, ...], model: str | None) -> list[Any]:
    """``specs`` with ``args.model`` set to ``model`` in every spec whose id is in ``ids``, nested
    ``weighted`` components included (a learned classifier swapped for another, e.g. a local one).

    >>> with_model([{"id": "weighted", "args": {"rewards": [{"id": "intent_accuracy"}, "meteor"]}}],
    ...            ("intent_accuracy",), "my/classifier")
    [{'id': 'weighted', 'args': {'rewards': [{'id': 'intent_accuracy', 'args': {'model': 'my/classifier'}}, 'meteor']}}]
    """
    if model is None:
        return specs
    out = []
    for spec in copy.deepcopy(specs):
        if isinstance(spec, dict) and spec.get("id") in ids:
            spec["args"] = {**(spec.get("args") or {}), "model": model}
        elif isinstance(spec, dict) and spec.get("id") == "weighted":
            args = spec.get("args") or {}
            spec["args"] = {**args, "rewards": with_model(list(args.get("rewards", [])), ids, model)}
        out.append(spec)
    return out


def _merge_configs(base: dict[str, dict[str, Any]], extra: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {name: dict(section or {}) for name, section in base.items()}
    for name, section in (extra or {}).items():
        out[name] = {**out.get(name, {}), **(section or {})}
    return out


def apply_reward_config(spec: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The task spec with the named entry of ``reward_configs`` applied: its ``rewards`` replace the
    task's and its ``configs`` are merged over the task's (config fields such as the KL target)."""
    if name is None:
        return spec
    named = spec.get("reward_configs") or {}
    if name not in named:
        from hfrl.utils.registry import unknown

        raise unknown(f"reward configuration of task {spec.get('name')!r}", name, named)
    chosen = named[name] or {}
    return {
        **spec,
        "rewards": chosen.get("rewards", spec.get("rewards", [])),
        "configs": _merge_configs(spec.get("configs") or {}, chosen.get("configs") or {}),
    }


def metric_specs(spec: dict[str, Any], metrics: Any = None) -> list[Any]:
    """The metrics to build: the task's, ``"all"`` (the task's and its ``optional_metrics``) or a list."""
    if metrics is None:
        return list(spec.get("metrics", []))
    if metrics == "all":
        return [*spec.get("metrics", []), *spec.get("optional_metrics", [])]
    if isinstance(metrics, (list, tuple)):
        return list(metrics)
    raise ValueError(f"metrics must be a list of metric ids or 'all', got {metrics!r}")


def task_from_yaml(
    module_file: str,
    dataset: Any,
    spec: dict[str, Any] | None = None,
    reward_config: str | None = None,
    metrics: Any = None,
    **overrides: Any,
) -> Task:
    """Build a :class:`Task` whose rewards, metrics, model and configs are declared in its YAML.

    ``spec`` replaces the YAML read from beside ``module_file`` (a task module may edit it first);
    ``reward_config`` picks a named entry of ``reward_configs``; ``metrics`` is a list of metric
    ids or ``"all"``; ``rewards`` (in ``overrides``) replaces the rewards.
    """
    from hfrl.rewards import load_reward, load_task_metric

    declared = TaskSpec.from_yaml(spec if spec is not None else read_task_yaml(module_file), {
        **{
            k: overrides.pop(k)
            for k in ("name", "default_model", "default_base_model", "description", "configs")
            if k in overrides
        },
        "reward_config": reward_config,
    })  # fmt: skip
    rewards = overrides.pop("rewards", None) or declared.declared.get("rewards", [])
    rewards = rewards if isinstance(rewards, list | tuple) else [rewards]  # one id or {id, args}: a list of one
    if overrides:
        raise TypeError(f"task_from_yaml() got unexpected keyword arguments {sorted(overrides)}")
    return Task(
        name=declared.name,
        dataset=dataset,
        reward_funcs=[load_reward(r) for r in rewards],
        metrics={spec_id(m): load_task_metric(m) for m in metric_specs(declared.declared, metrics)},
        default_model=declared.default_model,
        configs=declared.configs,
        description=declared.description,
        default_base_model=declared.default_base_model,
    )


#: the section that an online run whose estimator trains no critic reads over its algorithm's own
CRITIC_FREE_SECTION = "critic_free"


def _needs_critic(name: str) -> bool | None:
    """Whether the registered estimator ``name`` trains a critic (its class says); None for your own."""
    from hfrl.core.estimators import ESTIMATORS, estimator_class

    return bool(estimator_class(name).needs_critic) if name in ESTIMATORS else None


def merge_sections(
    configs: Mapping[str, Any],
    alg: str,
    sections: Sequence[str],
    *,
    chosen: Mapping[str, Any] | None = None,
    fields: Collection[str] | None = None,
    translate: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    read: Callable[[str], dict[str, Any]] | None = None,
    needs_critic: Callable[[str], bool | None] = _needs_critic,
) -> dict[str, Any]:
    """A task's ``configs`` sections merged for ``alg``, each over the one before: ``defaults`` (translated by
    the trainer's ``translate`` when it names things otherwise, and kept to ``fields``: it is shared by
    algorithms whose configs differ), the config class's ``sections`` (``defaults`` < ``online`` < ``ppo`` <
    ``nlpo``), ``alg``'s own when it is none of those (an A-LoL variant, TRL's ``grpo``), the
    ``critic_free`` section when the run's estimator (``chosen``'s, else the merged one, else gae) trains no
    critic, then the section of its ``policy_loss`` when the task has one. The one merge: the Python API
    (:meth:`Task.config_for`) and ``hfrl train`` (:func:`hfrl.runs.experiment.task_config`, which passes
    ``read`` to check each key and ``needs_critic`` from the schema, without torch) both call it.

    >>> configs = {"defaults": {"a": 1, "max_new_tokens": 8}, "ppo": {"ent_coef": 0.01}}
    >>> configs["critic_free"] = {"ent_coef": 0.0}
    >>> merge_sections(configs, "ppo", ("defaults", "online", "ppo"), fields={"max_new_tokens", "ent_coef"})
    {'max_new_tokens': 8, 'ent_coef': 0.01}
    >>> merge_sections(configs, "ppo", ("defaults", "ppo"), chosen={"advantage_estimator": "rloo"},
    ...                needs_critic=lambda name: name == "gae")["ent_coef"]
    0.0
    """
    read = read or (lambda name: dict(configs.get(name) or {}))
    defaults = dict(configs.get("defaults") or {})
    if translate is not None:
        defaults = translate(defaults)
    merged = {k: v for k, v in defaults.items() if fields is None or k in fields}
    chain = [name for name in sections if name != "defaults"]
    chain += [alg] if alg not in chain else []
    for name in chain:
        merged.update(read(name))
    if (fields is None or "advantage_estimator" in fields) and configs.get(CRITIC_FREE_SECTION):
        estimator = (chosen or {}).get("advantage_estimator", merged.get("advantage_estimator", "gae"))
        if needs_critic(str(estimator)) is False:
            merged.update(read(CRITIC_FREE_SECTION))
    loss = merged.get("policy_loss")
    if isinstance(loss, str) and loss not in chain and configs.get(loss):
        merged.update(read(loss))
    return merged


def task_sections(config_class: type) -> tuple[str, ...]:
    """``defaults``, then the ``task_section`` of each class along ``config_class``'s bases (base first)
    that declares one itself: the sections of a task's YAML it inherits.

    >>> class A: task_section = "online"
    >>> class B(A): task_section = "ppo"
    >>> class C(B): pass
    >>> task_sections(C), task_sections(int)
    (('defaults', 'online', 'ppo'), ('defaults',))
    """
    own = [vars(klass)["task_section"] for klass in reversed(config_class.__mro__) if "task_section" in vars(klass)]
    return ("defaults", *own)
