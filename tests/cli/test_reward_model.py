"""The RLHF pipeline in one tool: ``--alg reward`` (TRL's RewardTrainer) fits a reward model on preference
pairs (a task's or the user's own), says its held-out pair accuracy and writes it into the card; ``--reward_model
RUN`` rewards an online run with it, and that run's card names the lineage (base -> SFT -> RM -> PPO)."""

import json

import pytest
import torch
import yaml
from safetensors.torch import load_file

from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES
from hfrl.testing import run_cli

FAST_RM = ["--max_steps", "40", "--learning_rate", "1e-3", "--per_device_train_batch_size", "4",
           "--gradient_accumulation_steps", "1", "--warmup_steps", "0", "--logging_steps", "10", "--report_to", "none",
           "--disable_tqdm", "true", "--save_strategy", "no"]  # fmt: skip
FAST_PPO = [
    "--num_iterations",
    "2",
    "--rollout_batch_size",
    "4",
    "--mini_batch_size",
    "2",
    "--num_ppo_epochs",
    "1",
    "--max_new_tokens",
    "6",
    "--eval_every",
    "null",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
]


@pytest.fixture
def hh_fixtures(monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))


def heldout(out, split="test"):
    return json.loads((out / "eval" / f"{split}.json").read_text())["metrics"]


def test_reward_model_on_hh_pairs_then_ppo_with_it_names_the_lineage(hh_fixtures, tmp_path, capsys):
    sft, rm, ppo = tmp_path / "sft", tmp_path / "rm", tmp_path / "ppo"
    common = ["--task", "hh", "--task-arg", "pairs=true"]
    quiet = ["--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no"]
    code, _, err = run_cli(["train", *common, "--alg", "sft", "--model", "tiny", "-o", str(sft), "--max_steps", "2",
                            *quiet], capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(
        ["train", *common, "--alg", "reward", "--model", str(sft), "-o", str(rm), *FAST_RM], capsys
    )
    assert code == 0, err
    # 7 held-out pairs: above chance by a margin (1.0 measured; 5 of 7 is the bar)
    metrics = heldout(rm)
    assert metrics["pair_accuracy"] >= 5 / 7 and metrics["margin"] > 0
    assert "held-out pairs (test, 7): the chosen text scores higher in" in out
    assert f"next: hfrl train --task hh --alg ppo --model {sft} --reward_model {rm}" in out
    card = (rm / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card and "type: pair_accuracy" in card
    assert (
        "A reward model (one score per text: higher is preferred)" in card
        and "AutoModelForSequenceClassification" in card
    )
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(rm)
    assert config.architectures == ["GPT2ForSequenceClassification"] and config.num_labels == 1

    code, out, err = run_cli(["train", "--task", "hh", "--alg", "ppo", "--model", str(sft), "--reward_model", str(rm),
                              "-o", str(ppo), *FAST_PPO], capsys)  # fmt: skip
    assert code == 0, err
    saved = yaml.safe_load((ppo / "config.yaml").read_text())
    assert saved["rewards"] == [{"id": "reward_model", "args": {"model": str(rm)}}]  # in place of the task's
    logged = [h for h in json.loads((ppo / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logged) == 2 and all("rewards/reward_model" in h for h in logged)
    summary = next(line for line in (ppo / "README.md").read_text().splitlines() if line.startswith("A fine-tuned"))
    assert f"hfrl run `{sft}`, SFT on the task `hh`" in summary  # base -> SFT
    assert f"rewarded by the reward model hfrl run `{rm}` (Reward on the task `hh`, from {sft}" in summary  # -> RM


def test_reward_model_scores_as_trl_trained_it(hh_fixtures, tmp_path, capsys):
    """The reward_model reward reads prompt + completion + EOS, as TRL's RewardTrainer tokenizes a pair."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hfrl.rewards import load_reward

    rm = tmp_path / "rm"
    code, _, err = run_cli(["train", "--task", "hh", "--task-arg", "pairs=true", "--alg", "reward", "--model", "tiny",
                            "-o", str(rm), "--max_steps", "4", *FAST_RM[2:]], capsys)  # fmt: skip
    assert code == 0, err
    tokenizer = AutoTokenizer.from_pretrained(rm)
    model = AutoModelForSequenceClassification.from_pretrained(rm).eval()
    prompt, completion = "\n\nHuman: Hi?\n\nAssistant:", " Hello, how can I help?"
    with torch.no_grad():
        expected = model(**tokenizer(prompt + completion + tokenizer.eos_token, return_tensors="pt")).logits[0, 0]
    got = load_reward({"id": "reward_model", "args": {"model": str(rm)}})(prompts=[prompt], completions=[completion])
    assert got == pytest.approx([expected.item()], abs=1e-5)


def test_reward_model_on_own_jsonl_pairs(tmp_path, capsys):
    """A user's own pairs: prompt, chosen, rejected in JSONL files (train and test); the chosen replies
    carry digits, the rejected ones none: a pattern the tiny model learns."""
    data = tmp_path / "pairs"
    data.mkdir()
    for split, n, offset in (("train", 48, 0), ("test", 16, 100)):
        rows = [{"prompt": f"Question {i + offset}:", "chosen": f" {i + offset} {i + offset + 1} {i * 7 % 10}",
                 "rejected": " " + "abcdefghij"[i % 10] * (1 + i % 3)} for i in range(n)]  # fmt: skip
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rm"
    code, stdout, err = run_cli(["train", "--task", str(data), "--alg", "reward", "--model", "tiny", "-o", str(out),
                                 *FAST_RM], capsys)  # fmt: skip
    assert code == 0, err
    assert heldout(out)["pair_accuracy"] >= 0.75  # 16 held-out pairs, chance 0.5 (1.0 measured)


def test_reward_model_run_resumes_exactly(hh_fixtures, tmp_path, capsys):
    args = ["train", "--task", "hh", "--task-arg", "pairs=true", "--alg", "reward", "--model", "tiny",
            "--learning_rate", "1e-3", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
            "--warmup_steps", "0", "--lr_scheduler_type", "constant", "--report_to", "none", "--disable_tqdm", "true",
            "--save_steps", "3"]  # fmt: skip
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert run_cli([*args, "-o", str(whole), "--max_steps", "6"], capsys)[0] == 0
    assert run_cli([*args, "-o", str(parts), "--max_steps", "3"], capsys)[0] == 0
    code, _, err = run_cli([*args, "-o", str(parts), "--max_steps", "6", "--resume"], capsys)
    assert code == 0, err
    a, b = load_file(whole / "model.safetensors"), load_file(parts / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_reward_model_errors_are_one_line(tmp_path, capsys):
    code, _, err = run_cli(["train", "--task", "numbers", "--alg", "reward", "--model", "tiny", "-o",
                            str(tmp_path / "x"), "--max_steps", "1"], capsys)  # fmt: skip
    assert code != 0 and "a reward model trains on preference pairs: 'chosen' and 'rejected' columns" in err
    assert "or on scored texts: 'text' and 'score' in [0, 1]" in err
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--reward_model", "", "-o",
                            str(tmp_path / "y")], capsys)  # fmt: skip
    assert code != 0 and "--reward_model takes a reward model" in err


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_reward_model_fitted_to_scored_texts(tmp_path, capsys):
    """Scored texts (``text`` and ``score`` in [0, 1], no prompt column): binary cross-entropy to the
    scores; texts with digits score high, the rest low; held out: scored texts again."""
    data = tmp_path / "scores"
    data.mkdir()
    for split, n, offset in (("train", 48, 0), ("test", 16, 100)):
        rows = [{"text": f"Answer {i + offset}: {i * 7 % 10} {i + 1}" if i % 2 else "Answer: " + "xyzw"[i % 4] * 3,
                 "score": 0.9 if i % 2 else 0.1} for i in range(n)]  # fmt: skip
        write_jsonl(data / f"{split}.jsonl", rows)
    out = tmp_path / "rm"
    code, stdout, err = run_cli(["train", "--task", str(data), "--alg", "reward", "--model", "tiny", "-o", str(out),
                                 *FAST_RM], capsys)  # fmt: skip
    assert code == 0, err
    metrics = heldout(out)
    # 16 held-out texts, chance 0.5 (1.0 and r 0.99 measured)
    assert metrics["score_accuracy"] >= 0.75 and metrics["pearson"] >= 0.5, metrics
    assert "held-out scored texts (test, 16): the reward is on the score's side of 0.5 in" in stdout
    card = (out / "README.md").read_text()
    assert (
        f"on the scored texts of the hfrl task `{data}` with TRL's RewardTrainer (binary cross-entropy to the scores)"
        in card
        and "type: score_accuracy" in card
    )


def tiny_bert(folder):
    """A 2-layer BERT encoder (no head, as a sentence encoder ships) and a word-level vocabulary: a
    tokenizer without an EOS token."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir()
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"0123456789", *"abcdefghijklmnopqrstuvwxyz", "answer", ":"]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert tokenizer.eos_token is None
    return folder


def test_reward_model_from_an_encoder_on_pairs_without_prompt(tmp_path, capsys):
    """A BERT-style encoder (no EOS token: TRL would append None) on pairs of whole texts (no prompt
    column); it reads ``[CLS] text [SEP]`` in training and as a reward."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hfrl.rewards import load_reward

    bert = tiny_bert(tmp_path / "bert")
    data = tmp_path / "pairs"
    data.mkdir()
    for split, n, offset in (("train", 48, 0), ("test", 16, 100)):
        rows = [{"chosen": f"answer : {(i + offset) % 10} {i * 7 % 10}", "rejected": "answer : " + "abcd"[i % 4] * 2}
                for i in range(n)]  # fmt: skip
        write_jsonl(data / f"{split}.jsonl", rows)
    out = tmp_path / "rm"
    code, stdout, err = run_cli(["train", "--task", str(data), "--alg", "reward", "--model", str(bert), "-o", str(out),
                                 *FAST_RM], capsys)  # fmt: skip
    assert code == 0, err
    assert heldout(out)["pair_accuracy"] >= 0.75  # 16 held-out pairs, chance 0.5 (1.0 measured)
    assert f"next: hfrl train --task {data} --alg ppo --reward_model {out}" in stdout  # no encoder as the policy
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    text = "answer : 4 2"
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert ids.count(tokenizer.sep_token_id) == 1  # no EOS appended: [CLS] text [SEP]
    with torch.no_grad():
        expected = model(**tokenizer(text, return_tensors="pt")).logits[0, 0].item()
    got = load_reward({"id": "reward_model", "args": {"model": str(out)}})(prompts=["answer :"], completions=[" 4 2"])
    assert got == pytest.approx([expected], abs=1e-5)


def test_scores_outside_zero_one_are_one_line(tmp_path, capsys):
    data = tmp_path / "likert.jsonl"
    write_jsonl(data, [{"text": f"t{i}", "score": s} for i, s in enumerate([0.5, 1.0, 4.0, 5.0])])
    code, _, err = run_cli(["train", "--task", str(data), "--alg", "reward", "--model", "tiny", "-o",
                            str(tmp_path / "x"), "--max_steps", "1"], capsys)  # fmt: skip
    assert code != 0
    assert ("row 2: score 4.0 is not in [0, 1] (2 such rows): a reward model fitted to scores reads each as the "
            "probability of a good text; rescale them first, e.g. (x - min) / (max - min)") in err  # fmt: skip


def test_reward_model_from_a_two_label_classifier_gets_a_new_head(tmp_path, capsys, caplog):
    """A sentiment classifier (two labels) as the start: its head is replaced by a one-output head,
    said once; transformers would refuse the checkpoint's head of another shape."""
    from transformers import BertConfig, BertForSequenceClassification

    bert = tiny_bert(tmp_path / "bert")
    classifier = tmp_path / "classifier"
    config = BertConfig.from_pretrained(bert, num_labels=2)
    BertForSequenceClassification(config).save_pretrained(classifier)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        if (bert / name).is_file():
            (classifier / name).write_bytes((bert / name).read_bytes())
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, [{"chosen": f"answer : {i % 10}", "rejected": "answer : ab"} for i in range(16)])
    code, _, err = run_cli(["train", "--task", str(data), "--alg", "reward", "--model", str(classifier), "-o",
                            str(tmp_path / "rm"), *FAST_RM[2:], "--max_steps", "2"], capsys)  # fmt: skip
    assert code == 0, err
    said = f"{classifier} is a 2-label classifier (BertForSequenceClassification): a reward model has one output"
    assert caplog.text.count(said) == 1
    assert json.loads((tmp_path / "rm" / "config.json").read_text())["id2label"] == {"0": "LABEL_0"}


# ---- what --reward_model takes: a reward model, checked before the policy loads (issue 52, item 4) ----
def reward_folder(folder):
    """A reward model folder as --alg reward saves one (a one-output GPT-2 classifier), made in a second."""
    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    save_sequence_classifier(folder, "gpt2", ["LABEL_0"])
    return folder


def ppo_run(folder, source):
    """A run folder as --alg ppo saves one: a causal LM and config.yaml."""
    import shutil

    shutil.copytree(source, folder)
    (folder / "config.yaml").write_text("task: numbers\nalg: ppo\nmodel: tiny\n")
    return folder


def test_a_ppo_run_as_reward_model_is_refused_before_the_policy_loads(tmp_path, tiny_causal_dir, capsys):
    """AutoModelForSequenceClassification loads a causal LM with a fresh score head: PPO trained on random
    scores and exited 0. Now one line, exit 2, before the run's folder is made or the policy loads."""
    ppo, out = ppo_run(tmp_path / "ppo", tiny_causal_dir), tmp_path / "out"
    code, stdout, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--reward_model", str(ppo), "-o",
                                 str(out), *FAST_PPO], capsys)  # fmt: skip
    assert code == 2 and err.splitlines()[0] == (
        f"error: {ppo} is an hfrl ppo run (its config.yaml: alg: ppo), not a reward model: it would score with a "
        "freshly initialised head; give an `hfrl train --alg reward` run folder, a reward model's folder or its Hub "
        f"id (hfrl train --task TASK --alg reward --model {ppo} fits one)"
    )
    assert stdout == "" and not out.exists()  # no start line: the trainer (and its policy) was never built


def _causal_lm(folder, source):
    import shutil

    shutil.copytree(source, folder)


def _classifier_config_on_lm_weights(folder, source):
    _causal_lm(folder, source)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["GPT2ForSequenceClassification"]}))


def _edit_config(**changes):
    def make(folder, source):
        reward_folder(folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **changes}))

    return make


def _link_out(folder, source):
    reward_folder(folder)
    outside = folder.parent / "secret.txt"
    outside.write_text("not yours")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to(outside)


def _no_weights(folder, source):
    reward_folder(folder)
    (folder / "model.safetensors").unlink()


def _damaged_weights(folder, source):
    reward_folder(folder)
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)


def _sft_run(folder, source):
    _causal_lm(folder, source)
    (folder / "config.yaml").write_text("task: hh\nalg: sft\nmodel: tiny\n")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_causal_lm, "is not a reward model: its config.json names GPT2LMHeadModel, not a sequence classifier"),
        (_sft_run, "is an hfrl sft run (its config.yaml: alg: sft), not a reward model"),
        (
            _classifier_config_on_lm_weights,
            "is not a reward model: its weights hold no classification head (only transformer.*)",
        ),  # fmt: skip
        (
            _edit_config(auto_map={"AutoModelForSequenceClassification": "x.X"}),
            "config.json names code to load (auto_map",
        ),  # fmt: skip
        (_edit_config(attn_implementation="someone/kernel"), "config.json names code to load (attn_implementation"),
        (_link_out, "tokenizer.json is a link to"),
        (_edit_config(model_type="no_such_type"), "its model type 'no_such_type' is not one that transformers"),
        (_no_weights, "holds no weights"),
        (_damaged_weights, "are damaged (no safetensors header)"),
    ],
    ids=[
        "causal-lm",
        "sft-run",
        "lm-weights-under-a-classifier-config",
        "auto-map",
        "hub-kernel",
        "link-out",
        "unknown-model-type",
        "no-weights",
        "damaged-weights",
    ],  # fmt: skip
)
def test_a_folder_that_is_no_loadable_reward_model_is_one_line_when_the_reward_is_made(
    make, said, tmp_path, tiny_causal_dir
):
    """Each was found at the first reward call (after the policy had loaded and generated) or never (a
    random head, a link out read): now when the reward is made, as bad input (exit code 2)."""
    from hfrl.cli.app import exit_code
    from hfrl.rewards import load_reward

    folder = tmp_path / "rm"
    make(folder, tiny_causal_dir)
    with pytest.raises(ValueError) as err:
        load_reward({"id": "reward_model", "args": {"model": str(folder)}})
    assert said in str(err.value) and "\n" not in str(err.value) and exit_code(err.value) == 2


def test_reward_model_missing_folder_and_built_in_name_are_one_line(capsys, tmp_path):
    code, stdout, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--reward_model", "./nope", "-o",
                                 str(tmp_path / "out")], capsys)  # fmt: skip
    assert code == 2 and err.startswith("error: no such folder: ./nope (the reward model); give an `hfrl train")
    from hfrl.metrics.reward_folder import check_reward_model

    with pytest.raises(ValueError, match="reward model tiny: a built-in language model, not a reward model"):
        check_reward_model("tiny")


def test_reward_models_of_every_shape_hfrl_loads_pass(tmp_path):
    """A one-output classifier (what --alg reward saves), a two-label one, OpenAssistant's GPT-NeoX reward
    model (a pickle, architecture GPTNeoXRewardModel) and a checkpoint inside a reward run."""
    from hfrl.metrics.reward_folder import check_reward_model
    from hfrl.testing.tiny_classifiers import save_oasst_reward_model, save_sequence_classifier

    run = reward_folder(tmp_path / "rm")
    (run / "config.yaml").write_text("task: hh\nalg: reward\nmodel: tiny\n")
    checkpoint = reward_folder(run / "checkpoint-2")
    for folder in (run, checkpoint, save_sequence_classifier(tmp_path / "two", "roberta", ["NEG", "POS"]),
                   save_oasst_reward_model(tmp_path / "oasst")):  # fmt: skip
        check_reward_model(str(folder))
    check_reward_model("OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5")  # a Hub id: the Hub's to answer


def test_a_classifier_folder_with_a_link_out_is_refused_where_it_loads(tmp_path):
    """learned_classifier, intent_accuracy and the judges load their folders as the reward model does:
    a link out of it (vocab.txt -> ~/.ssh/id_rsa) is refused in one line, not read."""
    from hfrl.metrics.learned import load_classifier
    from hfrl.utils.folders import FolderLinkError

    folder = reward_folder(tmp_path / "classifier")
    (tmp_path / "secret.txt").write_text("not yours")
    (folder / "vocab.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(FolderLinkError, match="classifier folder .*: vocab.txt is a link to .*secret.txt, outside"):
        load_classifier(str(folder), "cpu")
