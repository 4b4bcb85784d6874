"""`hfrl chat`: history, prompt formats, reset and quit, --message, and a scripted stdin session."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from hfrl.cli.app import app
from hfrl.runs.chat import EOU, ChatSession, chat_loop
from hfrl.testing import run_cli


@pytest.fixture(scope="module")
def tiny(tiny_causal_dir):
    from hfrl.runs.run_dir import open_run

    return open_run(tiny_causal_dir).load()


@pytest.fixture
def canned(monkeypatch):
    """Replace generation by canned completions; record the prompts the model was given."""
    seen, replies = [], []

    def fake(lm, tokenizer, prompts, settings, batch_size):
        seen.extend(prompts)
        return [replies.pop(0)]

    monkeypatch.setattr("hfrl.runs.run_eval.generate_completions", fake)
    return seen, replies


def test_eou_format_keeps_history_and_cuts_replies(tiny, canned):
    seen, replies = canned
    session = ChatSession(*tiny, format="eou", context_size=3)
    replies += [f" fine thanks{EOU} and more", "sure \n"]
    assert session.reply("hi, how are you?") == "fine thanks"  # the reply ends at the next <EOU>
    assert session.reply("shall we go?") == "sure"
    # RL4LMs' DailyDialog context: the last `context_size` utterances joined by <EOU>, then " <EOU>"
    assert seen == [f"hi, how are you? {EOU}", f"hi, how are you?{EOU}fine thanks{EOU}shall we go? {EOU}"]
    assert session.history == ["hi, how are you?", "fine thanks", "shall we go?", "sure"]
    replies.append("ok")
    session.reply("bye")
    assert seen[-1] == f"shall we go?{EOU}sure{EOU}bye {EOU}"  # the window drops the oldest utterances
    session.reset()
    assert session.history == [] and session.prompt() == f" {EOU}"


def test_plain_and_chat_template_formats(tiny, canned):
    seen, replies = canned
    lm, tokenizer = tiny
    session = ChatSession(lm, tokenizer)  # auto: no chat template, no dialogue task -> plain
    assert session.format == "plain" and session.context_size == 0
    replies += ["\nyes\nUser: more", "no"]
    assert session.reply("a") == "yes"  # the reply ends at the first newline
    session.reply("b")
    assert seen == ["a\n", "a\nyes\nb\n"]

    tokenizer.chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    try:
        session = ChatSession(lm, tokenizer, context_size=2)
        assert session.format == "chat-template"
        replies += ["r1", "r2"]
        session.reply("q1")
        session.reply("q2")
        # the window of 2 utterances starts at the model's reply: roles stay aligned with the dialogue
        assert seen[-1] == [{"role": "assistant", "content": "r1"}, {"role": "user", "content": "q2"}]
    finally:
        tokenizer.chat_template = None


def test_dialogue_task_run_picks_eou(tiny):
    assert ChatSession(*tiny, task="daily_dialog").format == "eou"
    assert ChatSession(*tiny, task="daily_dialog").context_size == 5  # GRUE's context size


def test_loop_commands(tiny, canned):
    _, replies = canned
    replies += ["one", "two", ""]
    session = ChatSession(*tiny, format="plain")
    lines = iter(["hello", "", "RESET", "again", "and?", "quit", "never read"])
    written = []
    assert chat_loop(session, read=lambda prompt: next(lines), write=written.append) == 3
    assert written == ["bot> one", "(history cleared)", "bot> two", "bot> (empty reply)"]
    assert session.history == ["again", "two", "and?", ""]


def test_message_form_prints_one_reply_per_message(tiny_causal_dir, capsys):
    code, out, err = run_cli(["chat", tiny_causal_dir, "-m", "1 2 3", "-m", "4 5", "--max-new-tokens", "4"], capsys)
    assert code == 0, err
    lines = out.splitlines()  # labelled as in the interactive session
    assert len(lines) == 4 and lines[0] == "you> 1 2 3" and lines[2] == "you> 4 5"
    assert lines[1].startswith("bot> ") and lines[3].startswith("bot> ")


def test_message_replies_are_the_models_greedy_continuations(tiny_causal_dir, tiny, capsys):
    lm, tokenizer = tiny
    import torch

    _, out, _ = run_cli(["chat", tiny_causal_dir, "-m", "1 2 3", "--max-new-tokens", "6", "-f", "plain"], capsys)
    ids = tokenizer("1 2 3\n", return_tensors="pt")
    with torch.no_grad():
        greedy = lm.generate(**ids, max_new_tokens=6, do_sample=False)
    expected = tokenizer.decode(greedy[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert out.splitlines()[1] == "bot> " + (expected.lstrip("\n").split("\n")[0].strip() or "(empty reply)")


def test_scripted_stdin_session(tiny_causal_dir):
    """An interactive session fed from stdin (typer's test runner): two turns, reset, the first again, quit."""
    script = "1 2\n3 4\nreset\n1 2\nquit\n"
    args = ["chat", tiny_causal_dir, "--max-new-tokens", "4", "--format", "eou"]
    result = CliRunner().invoke(app, args, input=script)
    assert result.exit_code == 0, result.output
    out = result.output[result.output.index("chatting with") :]  # after the weight-loading progress bar
    assert out.startswith(f"chatting with {tiny_causal_dir} (format eou)")
    assert out.count("you> ") == 5 and "(history cleared)" in out
    replies = [line.split("bot> ", 1)[1] for line in out.splitlines() if "bot> " in line]
    assert len(replies) == 3 and replies[0] != "(empty reply)"
    assert replies[2] == replies[0]  # after reset, the same message in an empty history: the same greedy reply


def test_stdin_session_in_a_subprocess(tiny_causal_dir, tmp_path):
    """The installed entry point reading a real pipe; end of input leaves the loop."""
    proc = subprocess.run(
        [sys.executable, "-m", "hfrl.cli", "chat", tiny_causal_dir, "--max-new-tokens", "3"],
        input="1 2\n3 4\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("bot> ") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "xml"], "error: unknown chat format 'xml'; choose one of auto, chat-template, eou, plain"),
        (["--format", "chat-template"], "error: --format chat-template: this tokenizer has no chat template"),
        (["--context-size", "-1"], "error: --context-size must be >= 0"),
        (["--max-new-tokens", "0"], "error: --max-new-tokens must be >= 1"),
    ],
)
def test_bad_options(tiny_causal_dir, capsys, args, message):
    code, _, err = run_cli(["chat", tiny_causal_dir, "-m", "hi", *args], capsys)
    assert code == 2
    assert [line for line in err.splitlines() if line.startswith("error:")][0].startswith(message), err


def test_help_has_examples(capsys):
    code, out, _ = run_cli(["chat", "--help"], capsys)
    assert code == 0 and "hfrl chat tiny --message" in out


def test_a_reward_model_run_does_not_chat_and_the_command_it_gives_trains_with_it(tmp_path, capsys):
    """A reward model loaded as a causal LM got a fresh LM head and answered with replacement characters:
    now one line (exit 2) giving the command that uses it, and that command runs."""
    import shlex

    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    rm = tmp_path / "rm"
    save_sequence_classifier(rm, "gpt2", ["LABEL_0"])  # what --alg reward saves: one output
    (rm / "config.yaml").write_text("task: numbers\nalg: reward\nmodel: tiny\n")
    capsys.readouterr()
    code, out, err = run_cli(["chat", str(rm), "-m", "hi"], capsys)
    command = f"hfrl train --task numbers --alg ppo --model tiny --reward_model {rm}"
    assert (code, out) == (2, "") and err.splitlines()[0] == (
        f"error: {rm} is a reward model (hfrl train --alg reward): it scores, it does not chat; use it as a policy's "
        f"reward: {command}, then hfrl chat that run"
    )
    fast = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "2", "--max_new_tokens", "4",
            "--eval_every", "null", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
    code, _, err = run_cli([*shlex.split(command)[1:], "-o", str(tmp_path / "ppo"), *fast], capsys)
    assert code == 0, err
