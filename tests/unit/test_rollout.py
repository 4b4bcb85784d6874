"""Rollout pieces: padding, completion masks, reward assembly and one-pass scoring."""

import pytest
import torch
from trl.trainer.utils import selective_log_softmax

from hfrl.core.estimators.gae import GAE
from hfrl.core.policies import ActorCritic, ReferencePolicy, completion_forward, disable_dropout
from hfrl.core.rollout import Completions, Groups, Scores, TaskRewards, assemble, completion_mask, concat, pad, score
from hfrl.rewards.combine import compute_rewards


def test_pad_left_and_right():
    ids, mask = pad([[1, 2], [3]], pad_id=0, side="left")
    assert ids.tolist() == [[1, 2], [0, 3]] and mask.tolist() == [[1, 1], [0, 1]]
    ids, mask = pad([[1, 2], [3]], pad_id=0, side="right")
    assert ids.tolist() == [[1, 2], [3, 0]] and mask.tolist() == [[1, 1], [1, 0]]


def test_completion_mask_keeps_first_eos():
    ids = torch.tensor([[5, 6, 9, 9, 9], [5, 5, 5, 5, 5], [9, 1, 1, 1, 1]])
    assert completion_mask(ids, 9).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]
    assert completion_mask(ids, [1, 9])[2].tolist() == [1, 0, 0, 0, 0]


def completions_of(groups: Groups | None, width: int = 2) -> Completions:
    rows = len(groups) if groups is not None else 2
    ids = torch.ones(rows, width, dtype=torch.long)
    return Completions(torch.zeros(rows, 1, dtype=torch.long), torch.ones(rows, 1), ids, ids.clone(), groups=groups)


def test_groups_are_set_once_and_kept_through_concat_and_selection():
    """A rollout topped up in rounds numbers each round's prompts after the previous ones' and keeps the
    group size; a minibatch keeps it too, and says whether its rows are still whole groups."""
    both = concat([completions_of(Groups.of(2, 2)), completions_of(Groups.of(1, 2), 3)], 0,
                  torch.zeros(6, 1, dtype=torch.long), torch.ones(6, 1))  # fmt: skip
    assert both.groups.ids.tolist() == [0, 0, 1, 1, 2, 2] and both.groups.size == 2 and both.groups.whole() == 2
    assert both[torch.tensor([2, 3, 0, 1])].groups.whole() == 2  # whole groups, in any order
    assert both[torch.tensor([0, 2, 1, 3])].groups.whole() == 1  # interleaved: not whole
    assert both[1:5].groups.whole() == 1 and both[1:5].groups.size == 2
    mixed = concat([completions_of(Groups.of(1, 2)), completions_of(None)], 0,
                   torch.zeros(4, 1, dtype=torch.long), torch.ones(4, 1))  # fmt: skip
    assert mixed.groups.ids.tolist() == [0, 0, 1, 2] and mixed.groups.size == 1  # sizes differ: no sharing


def test_assemble_kl_penalty_and_terminal_score():
    mask = torch.tensor([[1, 1, 0]])
    logp = torch.tensor([[-1.0, -2.0, 0.0]])
    ref = torch.tensor([[-1.5, -1.0, 0.0]])
    completions = Completions(
        torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1), torch.zeros(1, 3, dtype=torch.long), mask
    )
    scores = Scores(
        logprobs=logp, full_logprobs=logp, ref_logprobs=ref, values=torch.zeros(1, 3), entropy=torch.zeros(1, 3)
    )
    rewards = TaskRewards(scores=torch.tensor([2.0]), token_rewards=torch.zeros(1, 3), means={})
    r = assemble(completions, scores, rewards, kl_coef=0.1, estimator=GAE(gamma=1.0, lam=1.0, whiten=False))
    # r_0 = -0.1 * (-1 + 1.5) = -0.05 ; r_1 = -0.1 * (-2 + 1) + 2 (score on the last token) = 2.1
    assert r.rewards[0].tolist() == pytest.approx([-0.05, 2.1, 0.0])
    assert r.returns[0].tolist() == pytest.approx([2.05, 2.1, 0.0])


def test_compute_rewards_weights_token_level_and_none():
    def seq(prompts, completions, **kw):
        return [1.0, None]

    def tok(prompts, completions, **kw):
        return [[0.5, 0.5, 9.0], [1.0]]

    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    scores, token, means = compute_rewards([seq, tok], [2.0, 1.0], ["a", "b"], ["x", "y"], mask, {})
    assert scores.tolist() == [2.0, 0.0]  # None counts as 0 in the sum
    assert token.tolist() == [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]  # clipped to each completion's length
    assert means["seq"] == 1.0


def test_compute_rewards_wrong_length():
    with pytest.raises(ValueError, match="returned 1 values for 2 completions"):
        compute_rewards([lambda prompts, completions, **kw: [1.0]], [1.0], ["a", "b"], ["x", "y"], torch.ones(2, 1), {})


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_one_forward_scoring_matches_per_position_logits(kind, tiny_causal_dir, tiny_seq2seq_dir):
    """The batched completion forward gives, at each completion position, the same distribution as
    running the model on the prefix alone (what RL4LMs recomputed token by token)."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    if kind == "causal":
        lm = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
        query, qmask = torch.tensor([[0, 7, 8], [9, 10, 11]]), torch.tensor([[0, 1, 1], [1, 1, 1]])
    else:
        lm = AutoModelForSeq2SeqLM.from_pretrained(tiny_seq2seq_dir)
        query, qmask = torch.tensor([[7, 8, 1], [9, 10, 11]]), torch.tensor([[1, 1, 0], [1, 1, 1]])
    lm.eval()
    response, rmask = torch.tensor([[20, 21, 22], [30, 31, 1]]), torch.tensor([[1, 1, 1], [1, 1, 0]])
    logits, _ = completion_forward(lm, query, qmask, response, rmask)
    for t in range(2):  # compare position t of row 0 with a forward on the prefix
        if kind == "causal":
            ids = torch.cat([query[0, 1:], response[0, :t]])[None]
            ref = lm(input_ids=ids).logits[0, -1]
        else:
            dec = torch.cat([torch.tensor([lm.config.decoder_start_token_id]), response[0, :t]])[None]
            ref = lm(input_ids=query[:1, :2], decoder_input_ids=dec).logits[0, -1]
        assert torch.allclose(logits[0, t], ref, atol=1e-4)


def test_rollout_logprobs_equal_update_logprobs_at_start(tiny_seq2seq_dir):
    """Dropout fully off (T5 passes a float to functional.dropout): scoring in train mode agrees."""
    from transformers import AutoModelForSeq2SeqLM

    lm = AutoModelForSeq2SeqLM.from_pretrained(tiny_seq2seq_dir)
    disable_dropout(lm)
    model = ActorCritic(lm).train()
    q, qm = torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.long)
    r, rm = torch.tensor([[9, 10, 11]]), torch.ones(1, 3, dtype=torch.long)
    scores = score(model, ReferencePolicy(lm), Completions(q, qm, r, rm), batch_size=1)
    logits, v2 = model(q, qm, r, rm)
    assert torch.allclose(selective_log_softmax(logits, r), scores.full_logprobs, atol=1e-5)
    assert torch.allclose(v2, scores.values, atol=1e-5)
    # the reference starts equal to the policy; no action mask: the action distribution is the full one
    assert torch.allclose(scores.ref_logprobs, scores.full_logprobs, atol=1e-5)
    assert torch.equal(scores.logprobs, scores.full_logprobs)


def test_peft_reference_is_the_adapter_disabled_base(tiny_causal_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_causal_dir).eval()
    q, qm = torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.long)
    r, rm = torch.tensor([[9, 10]]), torch.ones(1, 2, dtype=torch.long)
    base_logits, _ = completion_forward(base, q, qm, r, rm)
    policy = get_peft_model(
        base, LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False)
    )
    reference = ReferencePolicy(policy)
    assert reference.model is None  # no second copy of the weights
    with reference.active() as ref:
        ref_logits, _ = completion_forward(ref, q, qm, r, rm)
    policy_logits, _ = completion_forward(policy, q, qm, r, rm)
    assert torch.allclose(ref_logits, base_logits, atol=1e-6)
    assert not torch.allclose(policy_logits, base_logits, atol=1e-3)  # the adapter does change the policy


def test_sampling_the_pad_token_raises_no_attention_mask_warning(tiny_causal_dir, caplog):
    """transformers drops an all-ones mask inside generate, then warns when the latest sampled token
    is the pad id; hfrl passes its masks, so that warning asks nothing of the user and is not shown."""
    import transformers
    from transformers import AutoModelForCausalLM, LogitsProcessor

    from hfrl.core.action_space import ActionSpace
    from hfrl.core.rollout import generate_completions

    lm = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    pad_id = lm.config.pad_token_id
    assert pad_id is not None and pad_id != lm.generation_config.eos_token_id

    class PadFirst(LogitsProcessor):  # the first sampled token is the pad token
        def __call__(self, input_ids, scores):
            if input_ids.shape[1] == 2:
                scores = torch.full_like(scores, -float("inf"))
                scores[:, pad_id] = 0.0
            return scores

    import logging

    transformers.utils.logging.enable_propagation()
    logging.Logger.warning_once.cache_clear()  # transformers warns once per message and process
    lm(input_ids=torch.tensor([[pad_id]]))  # outside hfrl's generation transformers warns
    assert "strongly recommend passing in an `attention_mask`" in caplog.text
    logging.Logger.warning_once.cache_clear()
    caplog.clear()
    ids, mask = torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.long)
    kwargs = {"do_sample": True, "max_new_tokens": 3}

    class PadFirstSpace(ActionSpace):
        def processors(self, query_ids, query_mask):
            return [PadFirst()]

    response = generate_completions(
        lm, ids, mask, kwargs, pad_token_id=pad_id, action_space=PadFirstSpace()
    ).response_ids
    assert response[0, 0] == pad_id and "attention_mask" not in caplog.text


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_a_min_length_past_the_cap_is_clipped_once_without_transformers_warning(
    kind, tiny_causal_dir, tiny_seq2seq_dir, caplog, monkeypatch
):
    """min_length counts the prompt of a causal model (here 2 tokens) and the decoder start token of a
    seq2seq one: past that + max_new_tokens, generate warned "Unfeasible length constraints" each call."""
    import warnings

    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    from hfrl.core.rollout import generate as generation
    from hfrl.core.rollout import generate_completions
    from hfrl.core.rollout.generate import fit_min_length

    monkeypatch.setattr(generation, "_LOWERED", set())  # said once a process: not yet in this test

    if kind == "causal":
        lm = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    else:
        lm = AutoModelForSeq2SeqLM.from_pretrained(tiny_seq2seq_dir)
    longest = 2 + 3 if kind == "causal" else 1 + 3
    clipped = fit_min_length(lm, 2, {"min_length": 30, "max_new_tokens": 3})
    assert clipped == {"min_length": longest, "max_new_tokens": 3}
    assert fit_min_length(lm, 2, {"min_length": longest, "max_new_tokens": 3})["min_length"] == longest  # kept
    ids, mask = torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.long)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            generate_completions(lm, ids, mask, {"do_sample": True, "max_new_tokens": 3, "min_length": 31},
                                 lm.config.pad_token_id)  # fmt: skip
    assert not [w for w in seen if "Unfeasible" in str(w.message)]
    counted = "the prompt" if kind == "causal" else "the decoder start token"
    note = f"min_length 31 (generation_kwargs) is above {counted} + max_new_tokens 3 ({longest}): clipped to it"
    assert caplog.text.count(note) == 1  # once, not at every generate call


def test_a_min_new_tokens_past_the_cap_is_clipped_in_rollouts_evaluation_and_chat(tmp_path, caplog, monkeypatch):
    """The task's min_new_tokens (numbers' 20) under a smaller cap (--max_new_tokens 8): clipped, one line
    each, in the rollout's and the evaluation's settings, and in a run's settings read back by eval/chat."""
    from hfrl import PPOConfig
    from hfrl.trainers import config_checks
    from hfrl.trainers.evaluation import generation_kwargs

    monkeypatch.setattr(config_checks, "_LOWERED", set())  # said once a process: not yet in this test

    args = PPOConfig(output_dir=str(tmp_path), report_to="none", max_new_tokens=8, eval_max_new_tokens=5,
                     generation_kwargs={"do_sample": True, "min_new_tokens": 20},
                     eval_generation_kwargs={"min_new_tokens": 6})  # fmt: skip
    assert args.generation_kwargs == {"do_sample": True, "min_new_tokens": 8}
    assert args.eval_generation_kwargs == {"min_new_tokens": 5}
    assert "min_new_tokens 20 (generation_kwargs) is above max_new_tokens 8: clipped to 8" in caplog.text
    assert "min_new_tokens 6 (eval_generation_kwargs) is above eval_max_new_tokens 5: clipped to 5" in caplog.text
    chat = {"max_new_tokens": 20, "eval_max_new_tokens": 4, "eval_generation_kwargs": {"min_new_tokens": 16}}
    assert generation_kwargs(chat) == {"max_new_tokens": 4, "min_new_tokens": 4}  # hfrl chat --max-new-tokens 4
    kept = PPOConfig(output_dir=str(tmp_path), report_to="none", max_new_tokens=20,
                     generation_kwargs={"min_new_tokens": 20})  # fmt: skip
    assert kept.generation_kwargs == {"min_new_tokens": 20}
