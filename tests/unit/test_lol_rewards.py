"""The Leftover-Lunch attribute rewards: which label of each published classifier counts as fluent,
faithful, safe, engaging or upvoted, checked with tiny stand-ins whose head is set by hand (every
input gets logits whose softmax or sigmoid is known), what each classifier reads, one float per
completion on a batch, and the TF-IDF diversity against scikit-learn.

Hand computation used throughout: softmax([ln 3, 0]) = [3/4, 1/4] and sigmoid(ln 3) = 3/4.
"""

from __future__ import annotations

import math

import pytest
import torch

from hfrl.rewards import load_reward
from hfrl.rewards.comet_critic import comet_prompt, critic_texts, parse_prompt
from hfrl.rewards.dialogue import EOS, TfidfDiversity, history_of, knowledge_of
from hfrl.testing.tiny_classifiers import save_comet_critic, save_sequence_classifier, save_toxichat

LN3 = math.log(3.0)
KNOWLEDGE_PROMPT = f"Knowledge: Paris is in France.{EOS}Hi!{EOS}Where is Paris?{EOS}"
PROMPTS = [KNOWLEDGE_PROMPT, f"Any plans?{EOS}", f"Cats or dogs?{EOS}", f"Hello{EOS}"]
COMPLETIONS = ["It is in France.", "A hike, join me?", "", "dogs for sure"]  # one empty: scored 0


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    """Hand-set heads, with the published label mappings (textattack/roberta-base-CoLA: LABEL_0
    unacceptable, LABEL_1 acceptable; FaithCritic: 0 Entailment, 1 Hallucination; ToxiChat: 0 safe,
    1 offensive; DialogRPT: one output). The wanted label gets 3/4, the other 1/4."""
    root = tmp_path_factory.mktemp("lol-standins")
    return {
        "cola": save_sequence_classifier(root / "cola", "roberta", ["LABEL_0", "LABEL_1"], logits=(0.0, LN3)),
        "faith": save_sequence_classifier(root / "faith", "roberta", ["Entailment", "Hallucination"], (LN3, 0.0)),
        "rpt": save_sequence_classifier(root / "rpt", "gpt2", ["LABEL_0"], logits=(LN3,)),
        "toxichat": save_toxichat(root / "toxichat", logits=(LN3, 0.0)),
        "safety": save_sequence_classifier(root / "safety", "roberta", ["not offensive", "offensive"], (LN3, 0.0)),
        "critic": save_comet_critic(root / "critic", logit=LN3),
        "random_toxichat": save_toxichat(root / "random_toxichat", seed=3),
        "random_critic": save_comet_critic(root / "random_critic", seed=3),
    }


def expected(value: float) -> list:
    """``value`` for every non-empty completion, 0 for the empty one (never shown to a classifier)."""
    return [pytest.approx(0.0 if not c else value, abs=1e-6) for c in COMPLETIONS]


@pytest.mark.parametrize(
    ("reward_id", "standin", "args"),
    [
        ("cola_fluency", "cola", {}),  # P(LABEL_1 acceptable) = 3/4 (P(LABEL_0) would be 1/4)
        ("faithcritic", "faith", {}),  # P(0 Entailment) = 3/4
        ("dialogrpt_depth", "rpt", {"context": "history"}),  # sigmoid(ln 3) = 3/4
        ("dialogrpt_updown", "rpt", {}),
        ("offensive_safety", "toxichat", {}),  # P(0 safe) = 3/4
        ("offensive_safety", "safety", {"label": "not offensive"}),  # any other sequence classifier: label named
    ],
)
def test_each_attribute_reads_its_published_label(standins, reward_id, standin, args):
    reward = load_reward({"id": reward_id, "args": {"model": standins[standin], "device": "cpu", **args}})
    scores = reward(prompts=PROMPTS, completions=COMPLETIONS)
    assert isinstance(scores, list) and all(isinstance(s, float) for s in scores)
    assert scores == expected(0.75)


def test_label_indices_follow_the_published_names(standins):
    # By name, against the stand-in's copy of the published id2label: the same label as the default index.
    fluency = load_reward({"id": "cola_fluency", "args": {"model": standins["cola"], "label": "LABEL_1"}})
    faithful = load_reward({"id": "faithcritic", "args": {"model": standins["faith"], "label": "Entailment"}})
    safe = load_reward({"id": "offensive_safety", "args": {"model": standins["toxichat"], "label": "safe"}})
    for reward in (fluency, faithful, safe):
        assert reward(prompts=PROMPTS[:1], completions=COMPLETIONS[:1]) == [pytest.approx(0.75, abs=1e-6)]
    unsafe = load_reward({"id": "offensive_safety", "args": {"model": standins["toxichat"], "label": "offensive"}})
    assert unsafe(prompts=PROMPTS[:1], completions=COMPLETIONS[:1]) == [pytest.approx(0.25, abs=1e-6)]


def test_what_each_classifier_reads():
    from hfrl.rewards.dialogue import DialogRPTDepth, FaithCritic, OffensiveSafety

    assert knowledge_of(KNOWLEDGE_PROMPT) == "Paris is in France."
    assert history_of(KNOWLEDGE_PROMPT) == f"Hi!{EOS}Where is Paris?{EOS}"
    faith = FaithCritic(model="unused")
    assert faith.inputs([KNOWLEDGE_PROMPT], ["In France."], {}) == (["Paris is in France."], ["In France."])
    assert faith.inputs([KNOWLEDGE_PROMPT], ["x"], {"knowledge": ["K"]}) == (["K"], ["x"])  # the column first
    # DialogRPT reads context + response: the prompt (Reddit) or the history after the knowledge (WoW)
    assert DialogRPTDepth().inputs([f"Any plans?{EOS}"], ["A hike."], {}) == ([f"Any plans?{EOS}A hike."], None)
    history = DialogRPTDepth(context="history").inputs([KNOWLEDGE_PROMPT], ["In France."], {})[0]
    assert history == [f"Hi!{EOS}Where is Paris?{EOS}In France."]
    # ToxiChat reads the thread, the response closed by EOS
    assert OffensiveSafety(model="m").inputs([f"Any plans?{EOS}"], ["No."], {}) == ([f"Any plans?{EOS}No.{EOS}"], None)


def test_toxichat_reads_the_closing_eos_of_the_thread(standins):
    """Against a forward written here: GPT-2 body, then ``off_classifier`` on the last token."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, GPT2Model

    folder = standins["random_toxichat"]
    reward = load_reward({"id": "offensive_safety", "args": {"model": folder, "device": "cpu", "batch_size": 2}})
    scores = reward(prompts=PROMPTS, completions=COMPLETIONS)
    state = load_file(f"{folder}/model.safetensors")
    body = GPT2Model.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for prompt, completion, score in zip(PROMPTS, COMPLETIONS, scores, strict=True):
        if not completion:
            assert score == 0.0
            continue
        ids = tokenizer(f"{prompt}{completion}{EOS}", add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            last = body(input_ids=ids).last_hidden_state[0, -1]
            logits = state["off_classifier.weight"] @ last + state["off_classifier.bias"]
        assert score == pytest.approx(torch.softmax(logits, -1)[0].item(), abs=1e-5)  # batched, padded: the same


def test_comet_critic(standins):
    prompts = [comet_prompt("PersonX buys a car", "xWant"), comet_prompt("PersonX calls PersonY", "xReact")]
    critic = load_reward({"id": "comet_critic", "args": {"model": standins["critic"], "device": "cpu"}})
    assert critic(prompts=prompts, completions=["to drive it", ""]) == [pytest.approx(0.75, abs=1e-6), 0.0]
    # the head file's shapes (published: 1024 -> 512 -> 1; the stand-in: 32 -> 16 -> 1)
    head = torch.load(f"{standins['critic']}/custom_roberta_classification_head.pt", weights_only=True)
    assert head["dense.weight"].shape == (16, 32) and head["out_proj.weight"].shape == (1, 16)
    # a random critic against sigmoid(out_proj(gelu(dense(pooler(<s> head </s> relation tail))))) written here
    from transformers import AutoTokenizer, RobertaModel

    folder = standins["random_critic"]
    random_critic = load_reward({"id": "comet_critic", "args": {"model": folder, "device": "cpu"}})
    columns = {"head": ["PersonX calls PersonY"], "relation": ["xReact"]}  # the columns win over the prompt
    score = random_critic(prompts=["ignored"], completions=["happy"], **columns)[0]
    head = torch.load(f"{folder}/custom_roberta_classification_head.pt", weights_only=True)
    body, tokenizer = RobertaModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    first, second = critic_texts("PersonX calls PersonY", "xReact", "happy", ("Alex", "Sam"))
    assert (first, second) == ("Alex calls Sam", "as a result, Alex feels happy")
    with torch.no_grad():
        pooled = body(**tokenizer(first, second, return_tensors="pt")).pooler_output[0]
        hidden = torch.nn.functional.gelu(head["dense.weight"] @ pooled + head["dense.bias"])
        expected_score = torch.sigmoid(head["out_proj.weight"] @ hidden + head["out_proj.bias"]).item()
    assert score == pytest.approx(expected_score, abs=1e-5)
    assert parse_prompt(prompts[1]) == ("PersonX calls PersonY", "xReact")
    with pytest.raises(ValueError, match="comet_critic: unknown relation 'isA'; the critic knows HinderedBy"):
        critic(prompts=[comet_prompt("a", "isA")], completions=["b"])


def test_diversity_by_hand_and_against_scikit_learn():
    documents = ["the cat sat on the mat", "the dog ran", "a cat ran off", "dogs and cats"]
    reward = TfidfDiversity(documents=documents)
    # "cat cat dog": n = 4 documents; df(cat) = 2, df(dog) = 1: idf = ln(5/3) + 1 = 1.5108, ln(5/2) + 1 = 1.9163;
    # weights (2 * 1.5108, 1.9163) = (3.0217, 1.9163), norm 3.5781, L2-normalised (0.8445, 0.5356),
    # mean 0.6900; 2 distinct words < 5: times 2 / 10 = 0.13801
    texts = ["cat cat dog", "the cat sat on the mat and the dog ran off", "zebra", ""]
    scores = reward(prompts=[""] * 4, completions=texts)
    assert scores[0] == pytest.approx(0.13801, abs=1e-5)
    assert scores[2:] == [0.0, 0.0]  # no known word
    sklearn = pytest.importorskip("sklearn.feature_extraction.text")
    counts = sklearn.CountVectorizer().fit(documents)  # LoL-RL's get_batch_tfidf_reward, as written there
    tfidf = sklearn.TfidfTransformer(smooth_idf=True, use_idf=True).fit(counts.transform(documents))
    vectors = tfidf.transform(counts.transform(texts))
    nnz = [vectors[i].nnz for i in range(len(texts))]
    lolrl = [(float(vectors[i].data.mean()) if k else 0.0) * (k / 10 if k < 5 else 1.0) for i, k in enumerate(nnz)]
    assert scores == pytest.approx(lolrl, abs=1e-9)
    with pytest.raises(ValueError, match=r"diversity is not fitted: pass documents=\[...\]"):
        TfidfDiversity()(prompts=[""], completions=["a b"])


def test_missing_classifiers_say_what_to_pass():
    with pytest.raises(ValueError, match="safety needs an offensive-language classifier: set model to its folder"):
        load_reward({"id": "offensive_safety", "args": {"model": None}})
    with pytest.raises(ValueError, match="comet_critic needs the converted COMET critic folder: set model"):
        load_reward({"id": "comet_critic", "args": {"model": ""}})
    with pytest.raises(ValueError, match="engagement: context must be 'prompt' or 'history', got 'all'"):
        load_reward({"id": "dialogrpt_depth", "args": {"context": "all"}})
