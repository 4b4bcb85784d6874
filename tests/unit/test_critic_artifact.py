"""A trained critic is an artifact (hfrl.runs.critic_artifact): the files an export or a push ship of it,
the card section that says what it predicts, and an export of a run that holds it. The push of the same
files through the fake Hub: tests/cli/test_hub.py (CRITIC); loading it again: tests/cli/test_critic_from.py."""

import pytest

from hfrl.runs.critic_artifact import critic_card_section, critic_facts, critic_files
from hfrl.runs.hub import with_section


def test_the_value_head_file_name_is_the_one_the_trainers_save():
    from hfrl.trainers.online.checkpointing import VALUE_HEAD_NAME
    from hfrl.trainers.online.critic_from import VALUE_HEAD_NAME as critic_from_name

    assert critic_from_name == VALUE_HEAD_NAME == "value_head.safetensors"


def test_critic_files_are_the_head_and_the_separate_critic_safetensors_only(tmp_path):
    for name in ("value_head.safetensors", "model.safetensors", "critic/config.json", "critic/model.safetensors",
                 "critic/generation_config.json", "critic/pytorch_model.bin", "critic/notes.txt"):  # fmt: skip
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    assert set(critic_files(tmp_path)) == {
        "value_head.safetensors", "critic/config.json", "critic/model.safetensors", "critic/generation_config.json",
    }  # fmt: skip
    assert critic_files(tmp_path / "critic") == {}  # a folder without a value head: no critic


def test_the_card_says_what_the_critic_predicts():
    config = {"gamma": 1.0, "lam": 0.95, "lam_critic": 1.0, "kl_coef": 0.01, "reward_weights": [1.0, 0.1],
              "separate_critic": True}  # fmt: skip
    history = [{"iteration": i, "explained_variance": ev} for i, ev in enumerate([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.9])]
    facts = critic_facts(config, history, ["exact_answer", "answer_format"])
    assert facts["explained_variance"] == pytest.approx((0.2 + 0.3 + 0.4 + 0.5 + 0.9) / 5)  # the last 5
    text = critic_card_section(facts, "me/arith-ppo")
    assert (
        "the return of exact_answer + 0.1 x answer_format, minus the per-token KL penalty to the reference (beta "
        "0.01 at the start), discounted with gamma = 1; its targets are GAE returns at lambda = 1 (the actor's "
        "advantages use lambda = 0.95)." in text
    )
    assert "its own backbone in `critic/`" in text
    assert "Explained variance of its values against the returns: 0.460, the mean of the last 5 iterations" in text
    assert "training rollouts (not held-out rollouts); 0.900 in the last." in text
    assert "`hfrl train ... --critic_from me/arith-ppo` (same hidden size, separate_critic true" in text


def test_defaults_kl_in_the_loss_and_no_history():
    facts = critic_facts({"kl_coef": 0.05, "kl_in_loss": True}, [], ["exact_answer"])
    assert (facts["gamma"], facts["lam"], facts["lam_critic"], facts["kl_in_reward"]) == (0.99, 0.95, 0.95, False)
    text = critic_card_section(facts, "runs/x")
    assert "the return of exact_answer, discounted with gamma = 0.99" in text
    assert "the policy's last hidden state (a shared backbone" in text and "was not logged" in text


def test_with_section_goes_before_the_framework_versions():
    card = "# Run\n\ntext\n\n## Framework versions\n\n- torch\n"
    assert (
        with_section(card, "## The critic\n\nx\n")
        == "# Run\n\ntext\n\n## The critic\n\nx\n\n## Framework versions\n\n- torch\n"
    )
    assert with_section("# Run\n", "## The critic\n") == "# Run\n\n## The critic\n"
    assert with_section(card, None) == card


def test_an_export_holds_the_critic_and_its_card_section(full_run, tmp_path):
    from hfrl.runs.hub import export_run

    out = export_run(full_run, tmp_path / "exported")
    assert (out / "value_head.safetensors").read_bytes() == (full_run / "value_head.safetensors").read_bytes()
    card = (out / "README.md").read_text()
    assert card.count("## The critic") == 1 and card.index("## The critic") < card.index("## Framework versions")
    assert f"--critic_from {out.resolve()}`" in card
    assert "## The critic" in (full_run / "README.md").read_text()  # the run folder's own card too
