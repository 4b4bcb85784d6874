"""MkDocs hook: the reference pages, generated from the code at every build (never written by hand,
so they cannot drift): the command line (each command's --help), the options (every algorithm's config
fields: hfrl.trainers.schema), the tasks (their YAML and the pinned assets of hfrl/assets.yaml), the
rewards and metrics (hfrl.rewards.catalogue) and the Python API (mkdocstrings, from the docstrings of
every module's ``__all__``). A public class or function without a docstring fails the build.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = {"hfrl": ROOT / "hfrl", "hfrl.tasks": ROOT / "tasks", "hfrl.cards": ROOT / "cards"}
API_SECTIONS = [  # (slug, title, module prefix, what it holds): one API page each, in reading order
    ("trainers", "Trainers and configs", "hfrl.trainers", "PPO, NLPO, A2C, TRPO, the A-LoL family, TRL's trainers"),
    ("tasks", "Tasks", "hfrl.tasks", "load_task, Task and the built-in tasks"),
    ("rewards", "Rewards", "hfrl.rewards", "load_reward and the reward functions"),
    ("metrics", "Metrics", "hfrl.metrics", "load_metric and the NLG metrics and classifiers"),
    ("runs", "Runs: open, evaluate, export, push, chat", "hfrl.runs", "what hfrl train, eval, export, push, chat call"),
    ("core", "Core: rollouts, advantages, losses, models", "hfrl.core", "the maths and the models"),
    ("cards", "Model cards", "hfrl.cards", "write_card and its parts"),
    ("utils", "Utilities", "hfrl.utils", "trust, folders, bounded input, secrets, registry"),
    ("testing", "Testing helpers", "hfrl.testing", "tiny models and fixtures for your own tests"),
]


# the modules a page opens with, in this order (then the others defining a trainer or config, then the rest)
FIRST_MODULES = ("hfrl.trainers.online.ppo", "hfrl.trainers.online.nlpo", "hfrl.trainers.online.a2c",
                 "hfrl.trainers.online.trpo", "hfrl.trainers.online", "hfrl.trainers.trl_adapters",
                 "hfrl.trainers.offline", "hfrl.tasks.base", "hfrl.rewards.combine", "hfrl.runs.run_dir")  # fmt: skip


def public_modules() -> list[str]:
    """Every module of hfrl (hfrl.cli aside: the command line has its own page) that declares ``__all__``."""
    names = []
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "fixtures" in parts or "hooks" in parts:
                continue
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            name = ".".join((package, *parts))
            if "__all__" in path.read_text():
                names.append(name)
    return names


def public_objects() -> dict[str, dict[str, object]]:
    """``{defining module: {name: object}}`` for every class and function some module of hfrl lists in
    its ``__all__`` (a re-export, ``hfrl.PPOTrainer``, is documented where it is defined)."""
    out: dict[str, dict[str, object]] = {}
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__.startswith("hfrl"):
                # a private function exported under a public name (vllm_generation_factory) is shown by that name
                shown = name if obj.__name__.startswith("_") else obj.__name__
                out.setdefault(obj.__module__, {})[shown] = obj
    return out


def _api_sections() -> dict[str, list[tuple[str, list[str]]]]:
    """``{prefix: [(module, public names)]}``; checks every public object's docstring. Within a section,
    the modules that define trainers or configs come first (what a user opens the page for)."""
    found = public_objects()
    undocumented = sorted(
        f"{module}.{name}" for module, objects in found.items() for name, obj in objects.items() if not obj.__doc__
    )
    if undocumented:
        raise ValueError(f"public API without a docstring: {', '.join(undocumented)}")
    sections: dict[str, list[tuple[str, list[str]]]] = {prefix: [] for _, _, prefix, _ in API_SECTIONS}
    for module_name in sorted(found):
        prefix = next((p for _, _, p, _ in API_SECTIONS if module_name == p or module_name.startswith(p + ".")), None)
        if prefix is not None:
            sections[prefix].append((module_name, list(found[module_name])))

    def first(entry: tuple[str, list[str]]) -> tuple[int, str]:
        module, names = entry
        rank = next((i for i, p in enumerate(FIRST_MODULES) if module.startswith(p)), len(FIRST_MODULES))
        defines = any(n.endswith(("Trainer", "Config")) and n != "CardTrainer" for n in names)
        return (rank if defines or rank < len(FIRST_MODULES) else rank + 1, module)

    return {prefix: sorted(entries, key=first) for prefix, entries in sections.items()}


def config_table(alg: str, title: str) -> list[str]:
    """A config's fields as a table: name, default and help (``hfrl list fields --alg ALG``)."""
    from hfrl.trainers.schema import option_rows

    escaped = [(name, text.replace("|", "\\|")) for name, text in option_rows(alg)]
    rows = [f"| `{name}` | {text} |" for name, text in escaped]
    return [f"### {title} fields", "", "| field | default and help |", "| --- | --- |", *rows, ""]


def api_pages() -> dict[str, str]:
    """``reference/api/index.md`` (what is where) and one page per section of :data:`API_SECTIONS`:
    ``::: module`` with its public members, constructor signatures merged into the class."""
    sections = _api_sections()
    index = [
        "# Python API",
        "",
        "Generated from the docstrings: every class and function a module of hfrl lists in its `__all__`,",
        "documented where it is defined (`hfrl.PPOTrainer` is `hfrl.trainers.online.ppo_trainer.PPOTrainer`).",
        "The command line has its own page; every config field with its default: [Options](../options.md).",
        "",
        "| page | what |",
        "| --- | --- |",
    ]
    pages: dict[str, str] = {}
    for slug, title, prefix, what in API_SECTIONS:
        if not sections[prefix]:
            continue
        index.append(f"| [{title}]({slug}.md) | {what} |")
        lines = [f"# {title}", ""]
        if slug == "trainers":
            lines += [
                "Every trainer takes TRL's keywords (`model`, `args`, `reward_funcs`, `train_dataset`,",
                "`peft_config`, ...); its config is a `transformers.TrainingArguments` with the algorithm's",
                "fields. `PPOConfig`'s own fields are below; every algorithm's: [Options](../options.md).",
                "",
            ]
            lines += config_table("ppo", "PPOConfig")
        for module_name, members in sections[prefix]:
            lines += [f"::: {module_name}", "    options:", "      heading_level: 2", "      members:"]
            lines += [f"        - {name}" for name in members] + [""]
        pages[f"reference/api/{slug}.md"] = "\n".join(lines)
    pages["reference/api/index.md"] = "\n".join(index) + "\n"
    return pages


def cli_page() -> str:
    from typer.testing import CliRunner

    from hfrl.cli.app import app

    runner = CliRunner()
    lines = [
        "# Command line",
        "",
        "Generated from each command's `--help` (the same text `hfrl COMMAND --help` prints).",
        "Errors print one line: exit code 2 for bad input, 1 for a failure while running;",
        "`HFRL_DEBUG=1` shows the traceback.",
        "",
    ]
    for command in ("train", "eval", "chat", "export", "push", "list", "check"):
        result = runner.invoke(app, [command, "--help"], terminal_width=100, env={"COLUMNS": "100"})
        if result.exit_code != 0:
            raise ValueError(f"hfrl {command} --help failed: {result.output}")
        lines += [f"## hfrl {command}", "", "```text", result.output.rstrip(), "```", ""]
    return "\n".join(lines)


def options_page() -> str:
    from hfrl.trainers import ALGORITHMS
    from hfrl.trainers.schema import config_schema, option_rows

    lines = [
        "# Options",
        "",
        "Every algorithm's config fields: each is a `--field value` of `hfrl train` (values read as YAML), a key",
        "of a `--config` file, and an argument of the algorithm's config class in Python. Generated from the",
        "dataclasses (`hfrl list fields --alg ALG` prints the same rows; `hfrl train --help` those of `ppo`).",
        "",
    ]
    seen: dict[str, str] = {}
    for alg in ALGORITHMS:
        name = config_schema(alg).name
        lines += [f"## {alg}", ""]
        if name in seen:
            lines += [f"The fields of `{name}`, as for [{seen[name]}](#{seen[name].replace('_', '-')}).", ""]
            continue
        seen[name] = alg
        lines += [f"Config class: `{name}`.", "", "| option | what (default) |", "| --- | --- |"]
        for flag, text in option_rows(alg):
            lines.append(f"| `{flag}` | {text.replace('|', '&#124;')} |")
        lines.append("")
    return "\n".join(lines)


def tasks_page() -> str:
    from hfrl.tasks import TASKS, describe_task
    from hfrl.tasks.base import read_task_yaml
    from hfrl.utils.registry import import_path

    lines = [
        "# Tasks",
        "",
        "Generated from each task's YAML and the asset manifest (`hfrl/assets.yaml`: every Hub dataset and model",
        "pinned to a full commit, with its size and licence). `hfrl check --task NAME` says what a task will",
        "download and what is missing before a long run.",
        "",
        "| task | what | data (pinned) | default model | rewards | settings (sections: online < ppo < nlpo) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, path in TASKS.items():
        raw = read_task_yaml(import_path(path.partition(":")[0]).__file__)
        try:
            default_model, configs = describe_task(name).default_model, describe_task(name).configs
        except ValueError:  # a task that needs an argument (reddit's safety classifier): its plain YAML
            default_model, configs = raw.get("default_model"), raw.get("configs") or {}
        dataset = raw.get("dataset") or {}
        if dataset.get("path"):
            rev = str(dataset.get("revision") or "main")
            data = f"`{dataset['path']}@{rev[:10]}`"
        else:
            data = "shipped" if not dataset else "see the task"
        rewards = ", ".join(_spec_id(r) for r in raw.get("rewards") or [])
        configs = ", ".join(k for k in (configs or {}) if k != "defaults")
        description = " ".join(str(raw.get("description", "")).split())
        lines.append(f"| `{name}` | {description} | {data} | `{default_model}` | {rewards} | {configs} |")
    return "\n".join(lines) + "\n"


def _spec_id(spec: object) -> str:
    if isinstance(spec, dict):
        return str(spec.get("id"))
    return str(spec)


def rewards_page() -> str:
    from hfrl.rewards import catalogue

    return catalogue.markdown()


def wide(page: str) -> str:
    """A page of wide tables without the right-hand table of contents (the table gets its width)."""
    return "---\nhide:\n  - toc\n---\n\n" + page


GENERATED = {
    "reference/cli.md": cli_page,
    "reference/options.md": options_page,
    "reference/tasks.md": lambda: wide(tasks_page()),
    "reference/rewards-and-metrics.md": lambda: wide(rewards_page()),
}


# ---- figures the pages quote, from the code ------------------------------------------------------
# A page writes {{ n_rewards }} where it gives how many rewards there are; the build writes the number
# (a count written by hand went stale: "30 rewards" when there were 31). An unknown name fails the build.
FIGURE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def unknown_key_count() -> int:
    """The ``N`` of ``(N known, nearest: ...)`` that ``hfrl train --task numbers --learning_rat 1e-3`` prints."""
    from hfrl.runs.experiment import resolve_run
    from hfrl.utils.registry import UnknownNameError

    try:
        resolve_run(task="numbers", model="tiny", overrides={"learning_rat": 1e-3})
    except UnknownNameError as err:
        found = re.search(r"\((\d+) known", str(err))
        if found:
            return int(found.group(1))
        raise ValueError(f"the unknown-key error no longer counts the known keys: {err}") from err
    raise ValueError("hfrl train --learning_rat no longer fails: first-run.md's example needs another typo")


@functools.cache
def figures() -> dict[str, int]:
    """``{{ name }}`` -> its value: the counts of ``hfrl list rewards|metrics|tasks`` and of the config
    keys ``hfrl train --alg ppo`` knows."""
    from hfrl.rewards import catalogue
    from hfrl.tasks import TASKS

    return {
        "n_rewards": len(catalogue.rewards()),
        "n_metrics": len(catalogue.metrics()),
        "n_tasks": len(TASKS),
        "n_ppo_keys": unknown_key_count(),
    }


def on_page_markdown(markdown, page, **kwargs):
    """``{{ name }}`` -> its figure; a link to a benchmark's figure in the repository
    (``../../benchmarks/NAME.png``, what GitHub shows) -> the copy the site serves."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in figures():
            raise ValueError(f"{page.file.src_uri}: {{{{ {name} }}}} is not a figure (known: {', '.join(figures())})")
        return str(figures()[name])

    up = "../" * page.file.src_uri.count("/")
    for name in BENCHMARK_IMAGES:
        markdown = markdown.replace(f"]({up}../benchmarks/{name})", f"]({up}assets/benchmarks/{name})")
    return FIGURE.sub(value, markdown)


SOURCE_TREE = ROOT / "build" / "griffe-src"  # mkdocs.yml: mkdocstrings' paths


@event_priority(100)  # before mkdocstrings reads its paths: on a fresh clone build/ does not exist yet
def on_config(config, **kwargs):
    """The package's source as it installs (pyproject's package-dir puts cli/, tasks/ and cards/ under
    hfrl), copied into build/griffe-src/hfrl (its .py files only) for mkdocstrings to read."""
    import shutil

    if SOURCE_TREE.exists():
        shutil.rmtree(SOURCE_TREE)
    only_python = shutil.ignore_patterns("__pycache__", "fixtures", "*.yaml", "*.json", "*.bib", "templates")
    shutil.copytree(ROOT / "hfrl", SOURCE_TREE / "hfrl", ignore=only_python)
    for name in ("tasks", "cards", "cli"):
        shutil.copytree(ROOT / name, SOURCE_TREE / "hfrl" / name, ignore=only_python)
    return config


# benchmarks/NAME served as assets/benchmarks/NAME (never copied by hand)
BENCHMARK_IMAGES = ("real_model_curves.png", "real_model_curves-refit.png", "real_model_curves-refit-settings.png")


def on_files(files, config, **kwargs):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # docs/reference/ holds a stand-in for some generated pages, so that the Markdown's links to them
    # work where it is read as it is (GitHub); the generated page takes its place
    for uri, text in [*((uri, make()) for uri, make in GENERATED.items()), *api_pages().items()]:
        stand_in = files.get_file_from_path(uri)
        if stand_in is not None:
            files.remove(stand_in)
        files.append(File.generated(config, uri, content=text))
    for name in BENCHMARK_IMAGES:  # the benchmark's own figure, as the benchmark last wrote it
        files.append(
            File.generated(config, f"assets/benchmarks/{name}", content=(ROOT / "benchmarks" / name).read_bytes())
        )
    return files
