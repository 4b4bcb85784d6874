"""Export a run as a plain transformers directory, or push it to the Hugging Face Hub, each with
its model card.

    hfrl export runs/numbers-ppo --out exported/numbers-ppo [--merge]
    hfrl push runs/numbers-ppo --repo-id me/numbers-ppo [--private] [--merge]

    from hfrl.runs.hub import export_run, push_run

What goes out, and nothing else: the model (config, generation config, weights) or the PEFT adapter
(or, with ``merge``, the adapter merged into its base), the tokenizer, the critic of a run that has one
(``value_head.safetensors`` and, for ``separate_critic``, ``critic/``: :mod:`hfrl.runs.critic_artifact`;
``--critic_from`` starts a new run's critic from it), ``README.md`` (the card, rendered for the
destination, with a section on what the critic predicts), ``reward_curve.png``, ``config.yaml``
(without secrets) and the evaluation results ``eval/*.json``. Not optimizer state,
``training_args.bin`` (a pickle that may hold ``hub_token``) or checkpoints. Push needs the network
and a token from the usual huggingface_hub sources (``HF_TOKEN``, ``hf auth login``); no file is sent
that contains the token.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrl.runs.critic_artifact import critic_files, run_critic_section
from hfrl.runs.run_config import CONFIG_NAME, EVAL_DIR, config_text
from hfrl.runs.run_dir import Run, open_run
from hfrl.utils.folders import regular_file

if TYPE_CHECKING:
    from huggingface_hub import CommitInfo


def _local_run(run_dir: str | os.PathLike[str], merge: bool, what: str) -> Run:
    run = open_run(run_dir)
    if run.path is None:
        raise ValueError(f"{what} needs a local run directory (from hfrl train); {run_dir!r} is a model name")
    if merge and not run.is_adapter:
        raise ValueError(f"--merge: {run_dir} holds a full model, not a PEFT adapter; {what} it without --merge")
    return run


def collect_files(
    run: Run,
    workdir: str | os.PathLike[str],
    merge: bool = False,
    base_model: str | None = None,
    repo_id: str | None = None,
    model_ref: str | None = None,
    card_kwargs: dict[str, Any] | None = None,
) -> dict[str, Path | bytes]:
    """``{path in the destination: source file or content}`` for an export or a push. Files that
    must be made (the merged model, the card, the curve) are made in ``workdir``."""
    from hfrl.cards import CURVE_NAME, plot_reward_curve, render_card

    workdir = Path(workdir)
    files: dict[str, Path | bytes] = {}
    if merge:
        merged_dir = workdir / "merged"
        lm, tokenizer = run.load(base_model=base_model)
        lm.merge_and_unload().save_pretrained(merged_dir)
        tokenizer.save_pretrained(merged_dir)
        files.update({p.name: p for p in sorted(merged_dir.iterdir()) if p.is_file()})
    else:
        assert run.path is not None  # _local_run
        files.update({p.name: regular_file(p, run.path) for p in run.model_files() + run.tokenizer_files()})
    assert run.path is not None
    files.update(critic_files(run.path))  # the value head (and a separate critic's backbone), as trained
    card_kwargs = dict(card_kwargs or {})
    history = card_kwargs.get("log_history")
    history = history if history is not None else run.log_history()
    curve = plot_reward_curve(history, workdir / CURVE_NAME)
    if curve is not None:
        files[CURVE_NAME] = curve
    card = render_card(
        run,
        **{
            **card_kwargs,
            "repo_id": repo_id,
            "model_ref": model_ref,
            "merged": merge,
            "base_model": base_model or card_kwargs.get("base_model"),
            "log_history": history,
            "curve": CURVE_NAME if curve is not None else None,
        },
    )
    section = run_critic_section(run.path, repo_id or model_ref or str(run.path), history, card_kwargs.get("rewards"))
    files["README.md"] = with_section(str(card), section).encode()
    if run.has_config_file:
        files[CONFIG_NAME] = config_text(run.config).encode()
    eval_dir = run.path / EVAL_DIR if run.path is not None else None
    if eval_dir is not None and eval_dir.is_dir():
        assert run.path is not None
        files.update({f"{EVAL_DIR}/{p.name}": regular_file(p, run.path) for p in sorted(eval_dir.glob("*.json"))})
    return files


def with_section(card: str, section: str | None, before: str = "\n## Framework versions") -> str:
    """The card's text with ``section`` (Markdown) inserted before its ``before`` heading (at the end
    when it has none); the card unchanged for None."""
    if not section:
        return card
    at = card.find(before)
    if at < 0:
        return card.rstrip("\n") + "\n\n" + section
    return card[:at].rstrip("\n") + "\n\n" + section + card[at:]


def write_critic_section(
    run_dir: str | os.PathLike[str], history: list[dict[str, Any]] | None = None, rewards: list[str] | None = None
) -> None:
    """The end of a run with a critic: on a task of worked solutions (``arith_chains``), the critic's
    value at each step against final correctness (:mod:`hfrl.runs.value_at_step`, saved as
    ``value_at_step.json``), then the critic's section in the run folder's ``README.md``. Nothing for
    a run without a critic; a table that cannot be made is reported, never a lost card."""
    import logging

    from hfrl.runs.value_at_step import TASKS, write_value_at_step
    from hfrl.trainers.online.critic_from import VALUE_HEAD_NAME

    folder = Path(run_dir)
    if not (folder / VALUE_HEAD_NAME).is_file() or not (folder / "README.md").is_file():
        return
    if open_run(folder, names_as_text=True).task in TASKS:
        try:
            write_value_at_step(folder)
        except Exception as err:  # noqa: BLE001 - the model and its card are saved; the table is secondary
            logging.getLogger(__name__).warning(f"the value-at-step table of {folder} could not be made: {err}")
    add_critic_section(folder, history, rewards)


def add_critic_section(
    run_dir: str | os.PathLike[str], history: list[dict[str, Any]] | None = None, rewards: list[str] | None = None
) -> None:
    """The critic's section (:func:`hfrl.runs.critic_artifact.run_critic_section`, with the saved
    value-at-step table) in the run folder's ``README.md``, as just rendered (``hfrl eval`` renders it
    again); nothing for a run without a critic or a card."""
    from hfrl.cards.render import local_ref

    folder = Path(run_dir)
    card = folder / "README.md"
    ref = local_ref(str(folder))  # as the card's usage snippet names the run: no path of this machine
    section = run_critic_section(folder, ref, history, rewards) if card.is_file() else None
    if section:
        card.write_text(with_section(card.read_text(encoding="utf-8"), section), encoding="utf-8")


def assert_no_secret(files: dict[str, Path | bytes], secret: str | None = None) -> None:
    """Refuse to send or write anything that contains ``secret`` (the Hub token used), or any string
    shaped like a Hub token (:func:`hfrl.utils.secrets.refuse_tokens`), in any file, read whole
    (:func:`hfrl.utils.folders.find_token_in_file`: weights included)."""
    from hfrl.utils.folders import file_contains, refuse_token_in_file
    from hfrl.utils.secrets import refuse_tokens

    needle = secret.encode() if secret else b""
    for name, source in files.items():
        if needle and (needle in source if isinstance(source, bytes) else file_contains(source, needle)):
            raise ValueError(f"{name} contains your Hugging Face token; remove it from the run before pushing")
        refuse_tokens(source, name) if isinstance(source, bytes) else refuse_token_in_file(source, name)


def export_run(
    run_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    merge: bool = False,
    base_model: str | None = None,
    card_kwargs: dict[str, Any] | None = None,
) -> Path:
    """Write the run as a plain transformers directory ``out`` that ``AutoModel*.from_pretrained``
    (or, for an adapter without ``merge``, PEFT) loads, with its card. Returns ``out``."""
    run = _local_run(run_dir, merge, "export")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out} exists and is not empty; choose a new directory")
    with tempfile.TemporaryDirectory(prefix="hfrl-export-") as workdir:
        files = collect_files(run, workdir, merge, base_model, model_ref=str(out.resolve()), card_kwargs=card_kwargs)
        assert_no_secret(files)
        out.mkdir(parents=True, exist_ok=True)
        for name, source in files.items():
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(source, bytes):
                target.write_bytes(source)
            else:
                shutil.copyfile(source, target)
    return out


def push_run(
    run_dir: str | os.PathLike[str],
    repo_id: str,
    private: bool | None = None,
    merge: bool = False,
    token: str | None = None,
    commit_message: str | None = None,
    revision: str | None = None,
    base_model: str | None = None,
    card_kwargs: dict[str, Any] | None = None,
) -> CommitInfo:
    """Create (or reuse) the model repo ``repo_id`` and commit the run's files to it in one commit.
    Returns huggingface_hub's ``CommitInfo`` (``.commit_url``). Needs the network."""
    from huggingface_hub import CommitOperationAdd, HfApi, constants, get_token
    from huggingface_hub.utils import validate_repo_id

    run = _local_run(run_dir, merge, "push")
    validate_repo_id(repo_id)
    if constants.is_offline_mode():
        raise ValueError("hfrl push needs the network, and HF_HUB_OFFLINE is set: unset it to push")
    token = token or get_token()
    if not token:
        raise ValueError("no Hugging Face token: run `hf auth login` or set HF_TOKEN to a token with write access")
    api = HfApi(token=token)
    try:
        repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
        with tempfile.TemporaryDirectory(prefix="hfrl-push-") as workdir:
            files = collect_files(run, workdir, merge, base_model, repo_id=repo_id, card_kwargs=card_kwargs)
            assert_no_secret(files, token)
            operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=src) for name, src in files.items()]
            what = "merged model" if merge else ("adapter" if run.is_adapter else "model")
            return api.create_commit(
                repo_id,
                operations,
                commit_message=commit_message or f"Upload {what} trained with hfrl",
                revision=revision,
            )
    except Exception as err:
        if type(err).__module__.split(".")[0] in ("httpx", "httpx2", "requests", "urllib3"):
            raise ConnectionError(f"cannot reach the Hugging Face Hub ({err}); hfrl push needs the network") from err
        raise


__all__ = [
    "assert_no_secret",
    "collect_files",
    "export_run",
    "push_run",
    "add_critic_section",
    "with_section",
    "write_critic_section",
]
