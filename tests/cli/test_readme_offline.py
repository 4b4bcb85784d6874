"""The README's "Offline" commands, as written (shortened to a few tiny iterations): each task trains on
its shipped fixtures with HF_HUB_OFFLINE=1 and the built-in models."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hfrl.testing import requires_wordnet, run_cli

README = Path(__file__).resolve().parents[2] / "README.md"
SHORT = {  # a few tiny iterations instead of the task's full budget
    "ppo": ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "2", "--num_ppo_epochs", "1",
            "--max_new_tokens", "4", "--eval_every", "null"],
    "a_lol": ["--max_steps", "2", "--value_epochs", "1", "--max_prompt_length", "64", "--max_completion_length", "16",
              "--max_new_tokens", "4", "--warmup_steps", "0", "--eval_strategy", "no", "--save_strategy", "no",
              "--load_best_model_at_end", "false"],
}  # fmt: skip


def offline_commands() -> list[str]:
    section = README.read_text().split("## Offline", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("hfrl train")]


def test_the_section_lists_the_tasks():
    tasks = [shlex.split(c)[shlex.split(c).index("--task") + 1] for c in offline_commands()]
    assert tasks == ["cnn_dailymail", "imdb", "daily_dialog", "hh"]


@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=requires_wordnet()) if "daily_dialog" in c else c for c in offline_commands()],
)
def test_offline_command_trains_on_the_fixtures(command, tmp_path, capsys, monkeypatch):
    from hfrl.tasks.data import FIXTURES

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))
    args = shlex.split(command)[1:]
    alg = args[args.index("--alg") + 1]
    extra = ["-o", str(tmp_path / "run"), "--disable_tqdm", "true", "--report_to", "none"]
    if alg == "a_lol":
        extra += ["--preparation_cache_dir", str(tmp_path / "cache")]
    code, stdout, err = run_cli([*args, *extra, *SHORT[alg]], capsys)
    assert code == 0, err[-2000:]
    assert "saved to" in stdout and (tmp_path / "run" / "README.md").is_file()
