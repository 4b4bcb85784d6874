"""`hfrl eval` and hfrl.runs.run_eval: the task's eval settings, saved metrics and predictions, the
before/after table, the training-time callback, and clear errors."""

import json
import os

import pytest
import torch
from datasets import Dataset

from hfrl.cli.app import main
from hfrl.testing import run_cli

FAST = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--disable_tqdm", "true"]
METRICS = {"reward", "rewards/increasing_numbers", "mean_length", "distinct_1", "distinct_2"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One PPO iteration on numbers; evaluation limited to 5 new tokens in the run's config."""
    out = tmp_path_factory.mktemp("eval") / "numbers-ppo"
    args = ["train", "--task", "numbers", "--model", "tiny", "--output-dir", str(out), "--num_iterations", "1"]
    with pytest.raises(SystemExit) as exc:
        main([*args, *FAST, "--eval_max_new_tokens", "5"])
    assert exc.value.code in (0, None)
    return out


def test_eval_run_uses_task_settings_and_saves_results(run_dir, capsys):
    from hfrl.rewards.synthetic import IncreasingNumbers
    from hfrl.runs.run_dir import open_run

    code, out, err = run_cli(["eval", str(run_dir), "--split", "test", "--max-samples", "6"], capsys)
    assert code == 0, err
    report = json.loads((run_dir / "eval" / "test.json").read_text())
    assert report["task"] == "numbers" and report["split"] == "test" and report["num_samples"] == 6
    assert report["generation_kwargs"] == {"max_new_tokens": 5, "do_sample": False}  # run config > task > defaults
    assert set(report["metrics"]) == METRICS
    rows = [json.loads(line) for line in (run_dir / "predictions" / "test.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {"prompt", "completion", "reward", "references"} <= set(rows[0])
    # the completions are the model's greedy 5-token continuations of the (empty -> BOS) prompt
    lm, tokenizer = open_run(run_dir).load()
    bos = torch.tensor([[tokenizer.bos_token_id]])
    greedy = lm.generate(bos, attention_mask=torch.ones_like(bos), max_new_tokens=5, do_sample=False)
    assert {r["completion"] for r in rows} == {tokenizer.decode(greedy[0, 1:], skip_special_tokens=True)}
    # and the reward is the task's reward of those completions
    expected = IncreasingNumbers(min_tokens=20)(prompts=[""] * 6, completions=[r["completion"] for r in rows])
    assert report["metrics"]["reward"] == pytest.approx(sum(expected) / 6)
    assert out.splitlines()[1].split() == ["metric", "after"]
    assert "reward" in out and f"saved {run_dir / 'eval' / 'test.json'}" in out


def test_eval_base_gives_the_before_column(run_dir, capsys):
    run_cli(["eval", str(run_dir), "-n", "4"], capsys)
    code, out, err = run_cli(["eval", str(run_dir), "-n", "4", "--base"], capsys)
    assert code == 0, err
    base = json.loads((run_dir / "eval" / "test-base.json").read_text())
    assert base["model"] == "tiny"  # config.yaml's model: the run's starting point
    assert (run_dir / "predictions" / "test-base.jsonl").is_file()
    assert out.splitlines()[1].split() == ["metric", "before", "after", "change"]


def test_eval_a_model_name_with_a_task(tmp_path, capsys):
    out_dir = tmp_path / "tiny-eval"
    code, out, err = run_cli(["eval", "tiny", "--task", "dates", "-n", "3", "-b", "2", "-o", str(out_dir)], capsys)
    assert code == 0, err
    report = json.loads((out_dir / "eval" / "test.json").read_text())
    assert report["model"] == "tiny" and report["num_samples"] == 3
    assert report["generation_kwargs"] == {"max_new_tokens": 30, "do_sample": False}  # the dates task: 30 tokens
    assert "rewards/contains_date" in report["metrics"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tiny"], "error: no task for tiny: pass --task NAME"),
        (["tiny", "--task", "numbrs"], "error: unknown task 'numbrs'; did you mean 'numbers'?"),
        (["tiny", "--task", "numbers", "--split", "dev"], "error: task 'numbers' has no split 'dev'; its splits:"),
        (["tiny", "--task", "numbers", "-n", "0"], "error: --max-samples must be >= 1, got 0"),
        (["tiny", "--task", "numbers", "-b", "0"], "error: --batch-size must be >= 1, got 0"),
        (["./no/such/run", "--task", "numbers"], "error: no run or model at './no/such/run'"),
        (["tiny", "--task", "numbers", "--base"], "error: --base: tiny does not say which model it started from"),
    ],
)
def test_bad_inputs_fail_with_one_line(args, message, capsys, tmp_path):
    code, _, err = run_cli(["eval", *args, "-o", str(tmp_path)], capsys)
    assert code == 2
    assert err.startswith(message), err
    assert "Traceback" not in err


def test_batching_and_padding_do_not_change_greedy_completions(tiny_causal_dir, tiny_seq2seq_dir):
    from hfrl.runs.run_dir import open_run
    from hfrl.runs.run_eval import eval_settings, evaluate_model

    data = Dataset.from_dict({"prompt": ["1 2 3 4 5 6", "the", "", "a b c"], "references": [[]] * 4})
    settings = eval_settings({"max_new_tokens": 6})

    def reward(prompts, completions, **kwargs):
        return [float(len(c)) for c in completions]

    for path in (tiny_causal_dir, tiny_seq2seq_dir):
        lm, tokenizer = open_run(path).load()
        one = evaluate_model(lm, tokenizer, data, [reward], {}, settings, batch_size=1)
        four = evaluate_model(lm, tokenizer, data, [reward], {}, settings, batch_size=4)
        assert [r["completion"] for r in one[1]] == [r["completion"] for r in four[1]]
        assert one[0] == four[0]


def test_eval_before_after_callback_in_training(tiny_causal_dir, make_config):
    from hfrl import PPOTrainer
    from hfrl.runs.run_eval import EvalBeforeAfter
    from hfrl.tasks import load_task

    task = load_task("numbers")
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(num_iterations=1),
        reward_funcs=task.reward_funcs,
        train_dataset=task.dataset["train"],
        callbacks=[EvalBeforeAfter("numbers", split="test", max_samples=4)],
    )
    trainer.train()
    trainer.save_model()
    out = trainer.args.output_dir
    with open(f"{out}/eval/test-base.json") as fh:
        before = json.load(fh)
    with open(f"{out}/eval/test.json") as fh:
        after = json.load(fh)
    assert before["model"] == "base" and after["model"] == "iteration 1"
    assert before["num_samples"] == after["num_samples"] == 4
    assert before["generation_kwargs"] == {"max_new_tokens": 8, "do_sample": False}  # the trainer's own settings
    with open(f"{out}/README.md") as fh:
        card = fh.read()
    assert "| split | metric | before | after | change |" in card


def test_a_failed_final_evaluation_never_loses_the_model(tiny_causal_dir, make_config, caplog):
    from hfrl import PPOTrainer
    from hfrl.runs.run_eval import EvalBeforeAfter
    from hfrl.tasks import load_task

    task = load_task("numbers")
    evaluator = EvalBeforeAfter("numbers", split="test", max_samples=2)
    calls = []

    def metric_that_breaks_after_training(prompts, completions, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("metric model unavailable")
        return 0.0

    evaluator.task.metrics = {"fragile": metric_that_breaks_after_training}
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(num_iterations=1),
        reward_funcs=task.reward_funcs,
        train_dataset=task.dataset["train"],
        callbacks=[evaluator],
    )
    trainer.train()  # the base evaluation ran; the final one without the metric that failed
    trainer.save_model()
    out = trainer.args.output_dir
    assert os.path.isfile(f"{out}/model.safetensors") and os.path.isfile(f"{out}/eval/test-base.json")
    assert "metric 'fragile' failed and is skipped: metric model unavailable" in caplog.text
    with open(f"{out}/eval/test.json") as fh:
        after = json.load(fh)["metrics"]
    assert "fragile" not in after and "reward" in after
    # a whole evaluation that fails after training is reported too: the model is saved regardless
    evaluator.dataset = None
    evaluator.on_train_end(trainer.args, trainer.state, trainer.control, model=trainer.model)
    assert "after training failed" in caplog.text and f"hfrl eval {out} --split test" in caplog.text


def test_python_api(run_dir, tmp_path):
    from hfrl.runs.run_eval import evaluate

    report = evaluate(str(run_dir), split="validation", max_samples=2, output_dir=tmp_path)
    assert report.metrics_path == tmp_path / "eval" / "validation.json"
    assert set(report.metrics) == METRICS and report.report["num_samples"] == 2


def test_help_has_examples(capsys):
    code, out, _ = run_cli(["eval", "--help"], capsys)
    assert code == 0 and "hfrl eval runs/numbers-ppo --split test --base" in out


def test_a_reward_model_run_is_not_evaluated_by_generating(tmp_path, tiny_causal_dir, capsys, monkeypatch):
    """hfrl eval on a reward model generated with it as a causal LM and scored with the task's Hub
    classifier: now one line (exit 2), before any model loads, naming its held-out results and the
    command that uses it (from the SFT run it started from). A plain classifier folder is said as one."""
    import shutil

    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    sft, rm = tmp_path / "sft", tmp_path / "rm"
    shutil.copytree(tiny_causal_dir, sft)
    save_sequence_classifier(rm, "gpt2", ["LABEL_0"])
    (rm / "config.yaml").write_text(f"task: hh\nalg: reward\nmodel: {sft}\ntask_args:\n  pairs: true\n")
    (rm / "eval").mkdir()
    (rm / "eval" / "test.json").write_text(json.dumps({"metrics": {"pair_accuracy": 1.0}}))
    capsys.readouterr()
    monkeypatch.setattr("hfrl.runs.run_dir.Run.load", lambda *a, **k: pytest.fail("a model was loaded"))
    code, out, err = run_cli(["eval", str(rm), "--split", "test"], capsys)
    assert (code, out) == (2, "") and err.splitlines()[0] == (
        f"error: {rm} is a reward model (hfrl train --alg reward): it scores, it does not generate text to evaluate "
        f"(its held-out accuracy: {rm / 'eval' / 'test.json'}); use it as a policy's reward: hfrl train --task hh "
        f"--alg ppo --model {sft} --reward_model {rm}, then hfrl eval that run"
    )
    classifier = save_sequence_classifier(tmp_path / "classifier", "roberta", ["NEG", "POS"])
    capsys.readouterr()
    code, _, err = run_cli(["eval", classifier, "--task", "numbers"], capsys)
    assert code == 2 and err.startswith(
        f"error: {classifier} is a sequence classifier (RobertaForSequenceClassification): it scores, it does not "
        f"generate text to evaluate; use it as a policy's reward: hfrl train --task numbers --alg ppo --reward_model"
    )
