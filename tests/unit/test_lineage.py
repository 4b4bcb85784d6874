"""The two-stage recipe's model cards: a model trained from earlier hfrl runs (``nll`` gives the
reference policy, ``a_lol`` starts from it) names them, and its Hub metadata names the first base."""

from __future__ import annotations

import pytest
import yaml

from hfrl.cards.lineage import lineage, lineage_text, parent_run, root_model


def make_run(path, task, alg, model):
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump({"task": task, "alg": alg, "model": str(model)}))
    return path


def test_lineage_of_a_two_stage_run(tmp_path):
    nll = make_run(tmp_path / "nll", "reddit_pos", "nll", "microsoft/DialoGPT-medium")
    alol = make_run(tmp_path / "alol", "reddit_pos", "a_lol", nll)
    assert [run["alg"] for run in lineage(str(alol))] == ["a_lol", "nll"]
    assert root_model(str(alol)) == root_model(str(nll)) == "microsoft/DialoGPT-medium"
    assert lineage_text(str(nll)) == (
        f" (the reference policy: hfrl run `{nll}`, NLL (behaviour cloning) on the task `reddit_pos`, "
        "from microsoft/DialoGPT-medium)"
    )
    assert "A-LoL on the task `reddit_pos`; which started from hfrl run" in lineage_text(str(alol))
    assert lineage_text("microsoft/DialoGPT-medium") == "" and root_model("gpt2") == "gpt2"
    assert parent_run(str(tmp_path)) is None  # a folder without config.yaml


def test_cycles_stop(tmp_path):
    loop = make_run(tmp_path / "loop", "numbers", "ppo", tmp_path / "loop")
    assert len(lineage(str(loop))) == 8


def test_card_names_the_reference_run_and_the_hub_base(tmp_path, tiny_causal_dir):
    import shutil

    from hfrl.cards.render import render_card

    nll = make_run(tmp_path / "nll", "reddit_pos", "nll", "microsoft/DialoGPT-medium")
    alol = tmp_path / "alol"
    shutil.copytree(tiny_causal_dir, alol)
    (alol / "config.yaml").write_text(yaml.safe_dump({"task": "reddit_pos", "alg": "a_lol", "model": str(nll)}))
    card = render_card(alol)
    assert card.data.base_model == "microsoft/DialoGPT-medium"  # the chain's Hub model, not the local folder
    assert f"A fine-tuned version of `{nll}` (the reference policy: hfrl run `{nll}`, NLL" in card.content


def test_only_reward_objectives_say_they_maximise_the_reward(tmp_path, tiny_causal_dir):
    """nll (and TRL's DPO) learn from the data alone: their cards name the task's rewards as what
    evaluates the run; A-LoL maximises them."""
    import shutil

    from hfrl.cards.render import render_card

    texts = {}
    for alg in ("nll", "a_lol"):
        shutil.copytree(tiny_causal_dir, tmp_path / alg)
        (tmp_path / alg / "config.yaml").write_text(yaml.safe_dump({"task": "reddit_pos", "alg": alg, "model": "gpt2"}))
        texts[alg] = render_card(tmp_path / alg).content
    assert "on the hfrl task `reddit_pos`, evaluated with " in texts["nll"] and "maximise" not in texts["nll"]
    assert "on the hfrl task `reddit_pos` to maximise " in texts["a_lol"]


def test_the_card_lists_the_classifiers_the_task_arguments_swapped_in(tmp_path, tiny_causal_dir):
    """``--task-arg fluency_model=...`` trains on that classifier; the card used to list the YAML's."""
    import shutil

    from hfrl.cards.render import render_card

    shutil.copytree(tiny_causal_dir, tmp_path / "run")
    task_args = {"fluency_model": "my/cola", "safety_model": "none", "data_dir": "reddit"}
    config = {"task": "reddit_pos", "alg": "a_lol", "model": "gpt2", "task_args": task_args}
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    card = render_card(tmp_path / "run").content
    assert "`cola_fluency(model='my/cola')`" in card and "offensive_safety" not in card
    assert "`dialogrpt_depth(model='microsoft/DialogRPT-depth', context='prompt')`" in card  # the task's own


PAYLOADS = ["# Heading", "[x](http://evil)", "<script>alert(1)</script>", "a` <b>bold</b> `b", "x\n# Heading"]


@pytest.mark.parametrize("field", ["task", "alg", "model"])
def test_another_runs_values_never_reach_the_card_as_markdown(field, tmp_path, tiny_causal_dir):
    """A reward model's or a parent run's config.yaml is data: a value that is not a plain name (a heading,
    a link, a <script> tag) is left out of the next run's card, never pasted into its Markdown."""
    import shutil

    from hfrl.cards.render import write_card

    for i, payload in enumerate(PAYLOADS):
        values = {"task": "hh", "alg": "reward", "model": "tiny", field: payload}
        rm = make_run(tmp_path / f"rm{i}", values["task"], values["alg"], values["model"])
        parent = make_run(tmp_path / f"sft{i}", values["task"], values["alg"].replace("reward", "sft"), values["model"])
        run = tmp_path / f"ppo{i}"
        shutil.copytree(tiny_causal_dir, run)
        rewards = [{"id": "reward_model", "args": {"model": str(rm)}}]
        (run / "config.yaml").write_text(yaml.safe_dump({"task": "numbers", "alg": "ppo", "model": str(parent),
                                                         "rewards": rewards}))  # fmt: skip
        card = write_card(run).read_text()
        assert f"rewarded by the reward model hfrl run `{rm}`" not in card or field == "task", card
        for raw in ("# Heading", "[x](http://evil)", "<script>", "<b>", "http://evil"):
            assert raw not in card, (payload, card)
