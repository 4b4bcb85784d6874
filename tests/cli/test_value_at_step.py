"""The critic's value at each step boundary against final correctness (hfrl.runs.value_at_step), from the
run folder of a tiny 2-iteration ``arith_chains`` run: written at the end of the run and shown in its card;
the boundaries' token positions checked on hand-built cases."""

import json
import shutil

import pytest
import torch

from hfrl.runs.value_at_step import boundary_positions, step_boundaries, token_ends, value_at_step

EVAL_SIZE = 4
TASK_ARGS = ["--task-arg", "train_size=16", "--task-arg", f"eval_size={EVAL_SIZE}", "--task-arg", "steps=2"]
FAST = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--disable_tqdm", "true"]


@pytest.fixture(scope="module")
def arith_run(tmp_path_factory):
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("runs") / "arith-ppo"
    args = ["train", "--task", "arith_chains", "--alg", "ppo", "--model", "tiny", "--num_iterations", "2"]
    with pytest.raises(SystemExit) as exc:
        main([*args, *TASK_ARGS, *FAST, "--max_new_tokens", "16", "--output-dir", str(out)])
    assert exc.value.code in (0, None)
    return out


# ---- boundaries -> token positions, by hand ------------------------------------------------------------
def test_step_boundaries_are_character_offsets():
    text = " 13 - 1 = 12. 12 - 9 = 3.\nAnswer: 3"
    # " 13 - 1 = 12." is 13 characters, " 12 - 9 = 3." 12 more (25), then "\n" (26) and "Answer:"
    assert step_boundaries(text) == [("start", 0), ("after step 1", 13), ("after step 2", 25), ("before Answer:", 26)]
    assert step_boundaries(" 13 - 1 = 12. 12 -") == [("start", 0), ("after step 1", 13)]  # no Answer: yet
    assert step_boundaries("Answer: 3. 4 = 4.") == [("start", 0), ("before Answer:", 0)]  # steps after it: none


def test_a_boundary_inside_a_token_moves_to_its_start():
    # tokens " 1", " +", " 2", " =", " 3", ".\n", "Answer:", " 3" end at 2, 4, 6, 8, 10, 12, 19, 21: step 1 ends
    # at 11, inside ".\n" (10-12): 5 tokens end before it; Answer: starts at 12, after 6 tokens
    text = " 1 + 2 = 3.\nAnswer: 3"
    assert boundary_positions(text, [2, 4, 6, 8, 10, 12, 19, 21]) == [
        ("start", 0), ("after step 1", 5), ("before Answer:", 6),
    ]  # fmt: skip
    assert boundary_positions(" 1 + 2 = 3.", [2, 4, 6, 8, 10, 11]) == [("start", 0)]  # at the end: no value there


def test_token_positions_with_the_tiny_tokenizer():
    from hfrl.core.models import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    text = " 13 - 1 = 12. 12 - 9 = 3.\nAnswer: 3"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    positions = dict(boundary_positions(text, token_ends(tokenizer, ids)))
    # the state after a boundary is read before the token that follows it: the prefix decodes to the text before it
    for label, offset in step_boundaries(text):
        assert tokenizer.decode(ids[: positions[label]]) == text[:offset], label
    assert positions == {"start": 0, "after step 1": 9, "after step 2": 17, "before Answer:": 18}  # 23 tokens


# ---- the table from a run folder -----------------------------------------------------------------------
def test_the_end_of_an_arith_chains_run_writes_the_table_and_the_card_shows_it(arith_run):
    table = json.loads((arith_run / "value_at_step.json").read_text())
    assert (table["task"], table["split"], table["num_prompts"]) == ("arith_chains", "test", EVAL_SIZE)
    counted = {row["boundary"]: row["right"]["count"] + row["wrong"]["count"] for row in table["rows"]}
    assert counted["start"] == EVAL_SIZE  # every completion has a start
    assert sum(row["right"]["count"] for row in table["rows"] if row["boundary"] == "start") == table["right"]
    card = (arith_run / "README.md").read_text()
    assert "## The critic" in card and "### Value at each step" in card
    assert card.index("### Value at each step") < card.index("## Framework versions")
    assert f"| start | {table['right']} |" in card


def test_values_at_steps_against_correctness(arith_run, monkeypatch, tmp_path):
    """Completions given in place of generation (two right worked solutions, two wrong ones): rows start,
    after step 1 and 2, before Answer:, with 2 right and 2 wrong each, and each value the critic's value of
    the prompt and the completion's tokens before the boundary, computed on that prefix alone."""
    from safetensors.torch import save_file

    import hfrl.core.rollout as rollout
    from hfrl.core.models import load_tokenizer
    from hfrl.core.policies import ActorCritic
    from hfrl.core.rollout import Completions, pad
    from hfrl.runs.run_dir import open_run
    from hfrl.tasks import load_task
    from hfrl.trainers.evaluation import encode_prompt
    from hfrl.trainers.online.critic_from import load_critic

    run = tmp_path / "run"
    shutil.copytree(arith_run, run)
    torch.manual_seed(0)  # a head whose values are O(1), not the near-zero of 2 iterations from zero
    save_file({"summary.weight": torch.randn(1, 64), "summary.bias": torch.randn(1)}, run / "value_head.safetensors")
    tokenizer = load_tokenizer(str(run))
    test = load_task("arith_chains", train_size=16, eval_size=EVAL_SIZE, steps=2).dataset["test"]
    texts = [
        row["references"][0] if i % 2 == 0 else row["references"][0].rsplit(" ", 1)[0] + f" {int(row['answer']) + 1}"
        for i, row in enumerate(test)
    ]  # right, wrong (the last step's answer off by one), right, wrong
    responses = [tokenizer(t, add_special_tokens=False).input_ids + [tokenizer.eos_token_id] for t in texts]

    def given(lm, query_ids, query_mask, kwargs, pad_token_id, **_):
        ids, mask = pad(responses[: len(query_ids)], pad_token_id, "right")
        return Completions(query_ids, query_mask, ids, mask)

    monkeypatch.setattr(rollout, "generate_completions", given)
    table = value_at_step(run, batch_size=EVAL_SIZE)
    assert (table["num_prompts"], table["right"]) == (EVAL_SIZE, 2)
    rows = {row["boundary"]: (row["right"]["count"], row["wrong"]["count"]) for row in table["rows"]}
    assert list(rows) == ["start", "after step 1", "after step 2", "before Answer:"]
    assert set(rows.values()) == {(2, 2)}

    # by hand: the value at a boundary is V(prompt + the tokens before it), the last value of that prefix + 1 token
    lm, _ = open_run(run).load()
    critic = ActorCritic(lm)
    load_critic(critic, str(run))
    sums: dict[tuple[str, bool], float] = {}
    for row, text, response in zip(test, texts, responses, strict=True):
        query = torch.tensor([encode_prompt(tokenizer, row["prompt"], 128)])  # the task's max_prompt_length
        for label, k in boundary_positions(text, token_ends(tokenizer, response[:-1])):
            part = torch.tensor([response[: k + 1]])
            with torch.no_grad():
                value = critic.eval()(query, torch.ones_like(query), part, torch.ones_like(part), values_only=True)[1]
            key = (label, text.endswith(f" {row['answer']}"))
            sums[key] = sums.get(key, 0.0) + float(value[0, k]) / 2
    for row in table["rows"]:
        for name, right in (("right", True), ("wrong", False)):
            # float32 rounding: a padded batch and a shorter sequence reduce in another order
            assert row[name]["mean_value"] == pytest.approx(sums[(row["boundary"], right)], rel=1e-5, abs=1e-6)


def test_a_run_of_another_task_or_without_a_critic_is_refused(full_run, arith_run, tmp_path):
    with pytest.raises(
        ValueError, match=r"is a run of task 'numbers'; the table reads worked solutions of arith_chains"
    ):
        value_at_step(full_run)
    run = shutil.copytree(arith_run, tmp_path / "no-critic")
    (run / "value_head.safetensors").unlink()  # as a critic-free estimator's run
    with pytest.raises(ValueError, match=r"holds no critic \(value_head.safetensors\); give a run trained with one"):
        value_at_step(run)
