"""Metrics with known values: the libraries' own documented examples, hand-computed diversity and PARENT,
NaN and empty-string handling, the registry and ``score_completions``."""

from __future__ import annotations

import doctest
import importlib
import math
import os

import pytest

from hfrl.metrics import METRICS, load_metric
from hfrl.metrics.base import MetricResult, nanmean
from hfrl.metrics.table import parent_scores, table_values, tokenize
from hfrl.utils.registry import UnknownNameError, describe, import_path

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "metrics")

# sacrebleu's README example: three system sentences, two reference streams.
SACRE_SYS = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
SACRE_REFS = [
    ["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
    ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
]
PER_SAMPLE_REFS = [list(refs) for refs in zip(*SACRE_REFS, strict=True)]  # hfrl's layout: refs per sample


def run(metric_id, completions, references=None, args=None, **columns):
    metric = load_metric({"id": metric_id, "args": args or {}})
    return metric(prompts=[""] * len(completions), completions=completions, references=references, **columns)


# --- sacrebleu's documented values -------------------------------------------------------------------


def test_sacrebleu_bleu_and_chrf_match_the_readme():
    # README: BLEU = 48.53 82.4/50.0/45.5/37.5 ; chrF2 = 59.73
    assert run("sacrebleu", SACRE_SYS, PER_SAMPLE_REFS)["sacrebleu"] == pytest.approx(0.4853, abs=5e-5)
    assert run("chrf", SACRE_SYS, PER_SAMPLE_REFS)["chrf"] == pytest.approx(0.5973, abs=5e-5)


def test_sacrebleu_variable_number_of_references():
    # README "Variable Number of References": the first sentence loses its first reference -> 29.44
    refs = [[PER_SAMPLE_REFS[0][1]], PER_SAMPLE_REFS[1], PER_SAMPLE_REFS[2]]
    assert run("sacrebleu", SACRE_SYS, refs)["sacrebleu"] == pytest.approx(0.2944, abs=5e-5)


def test_ter_hand_computed_and_as_reward():
    # "the cat sat" vs "the cat sat on the mat": 3 insertions / 6 reference words = 0.5
    result = run("ter", ["the cat sat", "the cat sat on the mat"], [["the cat sat on the mat"]] * 2)
    assert result.per_sample["ter"] == pytest.approx([0.5, 0.0])
    assert result["ter"] == pytest.approx(3 / 12)  # corpus TER: total edits / total reference words
    from hfrl.rewards import load_reward

    reward = load_reward("ter")  # 1 - TER
    assert reward(prompts=["", ""], completions=["the cat sat", ""], references=[["the cat sat on the mat"]] * 2) == [
        pytest.approx(0.5),
        pytest.approx(0.0),  # empty: 6 edits / 6 words
    ]


# --- NLTK and rouge-score documented values ------------------------------------------------------------

NLTK_HYP1 = "It is a guide to action which ensures that the military always obeys the commands of the party"
NLTK_REF1A = "It is a guide to action that ensures that the military will forever heed Party commands"
NLTK_REF1B = (
    "It is the guiding principle which guarantees the military forces always being under the command of the Party"
)
NLTK_REF1C = "It is the practical guide for the army always to heed the directions of the party"
NLTK_HYP2 = "he read the book because he was interested in world history"
NLTK_REF2A = "he was interested in world history because he read the book"


def test_bleu_matches_nltk_documented_corpus_bleu():
    # nltk.translate.bleu_score.corpus_bleu docstring: 0.5920...
    result = run("bleu", [NLTK_HYP1, NLTK_HYP2], [[NLTK_REF1A, NLTK_REF1B, NLTK_REF1C], [NLTK_REF2A]])
    assert result["bleu"] == pytest.approx(0.5920778868801042)


def test_rouge_matches_rouge_score_readme_example():
    # README: scorer.score('The quick brown fox jumps over the lazy dog', 'The quick brown dog jumps on the log.')
    # rouge1 (stemmed): 6 shared unigrams (the x2, quick, brown, dog, jump): P = 6/8, R = 6/9, F = 12/17
    # rougeL: LCS "the quick brown jumps the" = 5: P = 5/8, R = 5/9, F = 2*5/(8+9) = 10/17
    result = run(
        "rouge",
        ["The quick brown dog jumps on the log."],
        [["The quick brown fox jumps over the lazy dog"]],
        {"rouge_types": ["rouge1", "rougeL"]},
    )
    assert result["rouge1"] == pytest.approx(12 / 17)
    assert result["rougeL"] == pytest.approx(10 / 17)


def test_rouge_takes_the_best_reference_and_reward_picks_the_type():
    from hfrl.rewards import load_reward

    refs = [["completely different words", "the cat sat"]]
    assert run("rouge", ["the cat sat"], refs)["rouge1"] == pytest.approx(1.0)
    reward = load_reward({"id": "rouge", "args": {"rouge_type": "rouge2"}})
    # rouge2 against "the cat sat": bigrams (the cat)(cat sat) vs (the cat): P = 1/1, R = 1/2, F = 2/3
    assert reward(prompts=[""], completions=["the cat"], references=refs) == [pytest.approx(2 / 3)]


def test_unknown_rouge_type_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown rouge_types.*rouge1, rouge2, rougeL, rougeLsum"):
        load_metric({"id": "rouge", "args": {"rouge_types": ["rouge3"]}})


# --- diversity, hand-computed -------------------------------------------------------------------------


def test_diversity_hand_computed():
    completions = ["a b a", "a c", ""]
    # unigrams: a a a b c (5), unique {a, b, c}: distinct-1 = 3/5; bigrams: (a b)(b a)(a c): distinct-2 = 3/3
    distinct = run("distinct_n", completions)
    assert distinct == {"distinct_1": 0.6, "distinct_2": 1.0}
    # per sample: "a b a" 2/3 unigrams unique, bigrams 2/2; "a c" 1 and 1; "" has no n-grams -> 0
    assert distinct.per_sample == {"distinct_1": [2 / 3, 1.0, 0.0], "distinct_2": [1.0, 1.0, 0.0]}
    # unique-1: b and c occur once; unique-2: all three bigrams once
    assert run("unique_ngrams", completions) == {"unique_1": 2, "unique_2": 3}
    assert run("vocab_size", completions) == {"vocab_size": 3}
    # entropy-1: p(a) = 3/5, p(b) = p(c) = 1/5
    expected = -(0.6 * math.log2(0.6) + 2 * 0.2 * math.log2(0.2))
    assert run("entropy", completions, args={"n": 1})["entropy_1"] == pytest.approx(expected)
    lengths = run("mean_length", completions)
    assert lengths == {"mean_length": pytest.approx(5 / 3)} and lengths.per_sample["mean_length"] == [3.0, 2.0, 0.0]


def test_diversity_of_no_completions_is_defined():
    assert run("distinct_n", []) == {"distinct_1": 0.0, "distinct_2": 0.0}
    assert run("entropy", [""]) == {"entropy_1": 0.0, "entropy_2": 0.0}


# --- PARENT, hand-worked ------------------------------------------------------------------------------

TABLE = [["name", "michael dahlquist"], ["occupation", "drummer"]]  # value tokens: michael dahlquist drummer


def test_parent_hand_worked_table():
    reference = tokenize("michael dahlquist was a drummer")
    prediction = tokenize("michael dahlquist is a drummer")
    records = table_values(TABLE)
    # Precision, unigrams: michael dahlquist a drummer are in the reference (1 each); "is" is not, w = 0
    #   P1 = 4/5. Bigrams: (michael dahlquist) 1, (dahlquist is) w = 1/2, (is a) 0, (a drummer) 1 -> P2 = 2.5/4
    # Recall vs reference, weighted by w: unigrams michael, dahlquist, drummer (w = 1) all generated; was, a
    #   weigh 0 -> R1 = 1. Bigrams (michael dahlquist) w 1 found, (dahlquist was) w 1/2 missing, (was a) w 0,
    #   (a drummer) w 1/2 found -> R2 = 1.5/2
    # Table recall: both values fully in the prediction (LCS / length = 1) -> R_T = 1
    p = math.sqrt(0.8 * 0.625)
    r = math.sqrt(math.sqrt(1.0 * 0.75))  # R = R_ref^(1 - 0.5) * R_T^0.5
    f = 2 * p * r / (p + r + 1e-8)
    assert parent_scores(prediction, reference, records, lambda_weight=0.5, max_order=2) == pytest.approx((p, r, f))
    # lambda None: 1 - mean mention of the records in the reference = 1 - (1 + 1)/2 = 0 -> R = R_ref
    r0 = math.sqrt(0.75)
    assert parent_scores(prediction, reference, records, lambda_weight=None, max_order=2) == pytest.approx(
        (p, r0, 2 * p * r0 / (p + r0 + 1e-8))
    )


def test_parent_credits_table_facts_the_reference_lacks():
    # The reference omits the occupation; a generation that states it from the table loses no precision.
    reference = ["michael dahlquist was a musician"]
    table_fact = run("parent", ["michael dahlquist was a drummer"], [reference], table=[TABLE])
    made_up = run("parent", ["michael dahlquist was a dentist"], [reference], table=[TABLE])
    assert table_fact["parent_precision"] > made_up["parent_precision"]
    assert table_fact["parent_f1"] > made_up["parent_f1"]


def test_parent_table_formats_multi_reference_and_missing_values():
    pairs = run(
        "parent", ["michael dahlquist was a drummer"], [["x y", "michael dahlquist was a drummer"]], table=[TABLE]
    )
    mapping = run(
        "parent", ["michael dahlquist was a drummer"], [["michael dahlquist was a drummer"]], table=[dict(TABLE)]
    )
    assert pairs["parent_f1"] == pytest.approx(1.0, abs=1e-6) == mapping["parent_f1"]  # best reference counts
    triples = table_values([["michael dahlquist", "occupation", "drummer"]])
    assert triples == [["michael", "dahlquist", "drummer"]]
    result = run("parent", ["", "a"], [["michael dahlquist"], []], table=[TABLE, TABLE])
    assert result.per_sample["parent_f1"][0] == pytest.approx(0.0, abs=1e-4)  # empty completion: defined, ~0
    assert math.isnan(result.per_sample["parent_f1"][1])  # no reference: NaN, left out of the mean
    with pytest.raises(ValueError, match="parent needs the table.*'table' column"):
        run("parent", ["a"], [["a"]])


# --- captioning ---------------------------------------------------------------------------------------


def test_cider_per_sample_and_corpus():
    result = run("cider", ["a cat sat", "", "x"], [["a cat sat on the mat"], ["a dog ran"], []])
    assert result.per_sample["cider"][1] == 0.0  # empty completion
    assert math.isnan(result.per_sample["cider"][2])  # no reference
    assert result["cider"] == pytest.approx(nanmean(result.per_sample["cider"]))
    assert result.per_sample["cider"][0] > 0


def test_spice_without_java_jars_says_what_to_install():
    from hfrl.metrics.captioning import spice_missing

    if spice_missing() is None:
        pytest.skip("SPICE's Java and CoreNLP jars are installed here")
    with pytest.raises(RuntimeError, match="SPICE needs Java .* Stanford CoreNLP 3.6.0 jars"):
        run("spice", ["a cat"], [["a cat"]])


# --- NaN and empty strings, for every lexical metric ---------------------------------------------------


@pytest.mark.parametrize(
    "metric_id", ["rouge", "bleu", "sacrebleu", "chrf", "ter", "cider", "commongen_repeat_penalty"]
)
def test_empty_completion_and_missing_reference(metric_id):
    result = run(metric_id, ["", "the cat", "the cat"], [["the cat"], ["the cat"], []])
    for values in result.per_sample.values():
        assert len(values) == 3
        assert not math.isnan(values[0]) and not math.isnan(values[1])  # empty completion: a number
        if metric_id != "commongen_repeat_penalty":
            assert math.isnan(values[2])  # no reference: undefined
    assert all(not math.isnan(v) for v in result.values())  # corpus scores ignore the undefined sample


def test_missing_references_column_is_a_clear_error():
    with pytest.raises(ValueError, match="rouge needs reference texts: give the dataset a 'references' column"):
        run("rouge", ["a"])


# --- evaluate modules (a local module: Hub scripts cannot load offline) ---------------------------------


def test_evaluate_local_module_as_metric_and_reward():
    from hfrl.rewards import load_reward

    args = {"path": os.path.join(FIXTURES, "word_match"), "references": "first"}
    result = run("evaluate", ["a b", "x"], [["a c"], ["x"]], args)
    assert result == {"word_match": 0.75, "scores": 0.75}
    assert result.per_sample == {"scores": [0.5, 1.0]}
    reward = load_reward({"id": "evaluate", "args": args})
    assert reward(prompts=["", ""], completions=["a b", ""], references=[["a c"], ["x"]]) == [0.5, 0.0]
    wrong = load_reward({"id": "evaluate", "args": {**args, "key": "nope"}})
    with pytest.raises(ValueError, match=r"reward evaluate: reward_key 'nope' is not one of \['scores'\]"):
        wrong(prompts=[""], completions=["a"], references=[["a"]])


# --- registry, doctests, score_completions -------------------------------------------------------------


def test_registries_list_at_least_20_described_ids():
    from hfrl.rewards import REWARDS

    assert len(REWARDS) + len(METRICS) >= 20
    for registry in (REWARDS, METRICS):
        for name, entry in registry.items():
            assert describe(import_path(entry.path)), f"{name} has no one-line description"


def test_every_reward_id_is_a_metric():
    from hfrl.rewards import load_task_metric

    result = load_task_metric("contains_date")(prompts=["", ""], completions=["2020-01-01", "no"])
    assert result == {"contains_date": 0.5} and result.per_sample == {"contains_date": [1.0, 0.0]}


def test_unknown_metric_names_closest():
    with pytest.raises(UnknownNameError, match=r"unknown metric 'meteorr'; did you mean 'meteor'\?"):
        load_metric("meteorr")


@pytest.mark.parametrize(
    "module",
    ["metrics.base", "metrics.diversity", "metrics.lexical", "metrics.table", "metrics.captioning",
     "metrics.commongen", "rewards.as_metric", "metrics.learned", "metrics.hf_evaluate"],
)  # fmt: skip
def test_docstring_examples(module):
    mod = importlib.import_module(f"hfrl.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_metric_result_pickles_with_per_sample():
    import pickle

    result = pickle.loads(pickle.dumps(MetricResult({"x": 1.0}, {"x": [1.0]})))
    assert result == {"x": 1.0} and result.per_sample == {"x": [1.0]}


def test_score_completions_records_per_sample_scores():
    from hfrl.rewards.synthetic import contains_date
    from hfrl.trainers.evaluation import Scoring, score_completions

    rows = [{"references": ["the cat"]}, {"references": ["a dog"]}]
    scoring = Scoring([contains_date], [1.0], {"rouge": load_metric("rouge")})
    out, records = score_completions(["", ""], ["the cat", "2020-01-01"], rows, scoring)
    assert out["eval_reward"] == 0.5 and out["eval_rouge1"] == pytest.approx(0.5)
    assert records[0]["scores"]["rouge1"] == pytest.approx(1.0) and records[1]["scores"]["rouge1"] == 0.0
