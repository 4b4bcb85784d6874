"""``critic_from`` (hfrl.trainers.online.critic_from): a new run's critic starts from a trained one, with
values identical to the source's on the same inputs, and a critic that does not fit is refused in one line.
Sources: tiny ``numbers`` runs of 2 iterations (a separate critic here; the shared ``full_run`` and the
LoRA ``adapter_run`` of conftest)."""

import shutil

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file, save_file

from hfrl.testing import digit_reward, run_cli

FAST = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--disable_tqdm", "true"]
TRAIN = ["train", "--task", "numbers", "--alg", "ppo", "--model", "tiny", "--num_iterations", "1", *FAST]


@pytest.fixture(scope="module")
def separate_run(tmp_path_factory):
    """`hfrl train` on numbers with a separate critic (2 iterations)."""
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("runs") / "numbers-ppo-separate"
    with pytest.raises(SystemExit) as exc:
        main([*TRAIN, "--num_iterations", "2", "--separate_critic", "true", "--output-dir", str(out)])
    assert exc.value.code in (0, None)
    assert (out / "critic" / "model.safetensors").is_file() and (out / "value_head.safetensors").is_file()
    return out


def batch(tokenizer):
    """The same inputs for both critics: two left-padded prompts, two completions (one padded)."""
    from hfrl.core.rollout import pad

    query_ids, query_mask = pad([tokenizer("1 2 3").input_ids, tokenizer("the year").input_ids], tokenizer.pad_token_id)
    response_ids = torch.tensor([[5, 9, 11, 4], [7, 3, tokenizer.pad_token_id, tokenizer.pad_token_id]])
    response_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    return query_ids, query_mask, response_ids, response_mask


def new_trainer(model, make_config, **fields):
    from hfrl import PPOTrainer

    return PPOTrainer(
        model=model,
        args=make_config(**fields),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the year"] * 4}),
    )


def source_values(folder, separate: bool, inputs):
    """The source run's own critic, built independently of critic_from: its policy (and critic/) loaded
    with transformers, its head's state dict loaded as saved; values through ActorCritic's forward."""
    from transformers import AutoModelForCausalLM

    from hfrl.core.policies import ActorCritic

    wrapped = ActorCritic(AutoModelForCausalLM.from_pretrained(folder), separate_critic=separate)
    if separate:
        wrapped.critic = AutoModelForCausalLM.from_pretrained(folder / "critic")
    wrapped.value_head.load_state_dict(load_file(folder / "value_head.safetensors"))
    with torch.no_grad():
        return wrapped.eval()(*inputs, values_only=True)[1]


def test_a_separate_critic_starts_with_the_source_values(separate_run, tiny_causal_dir, make_config):
    trainer = new_trainer(tiny_causal_dir, make_config, separate_critic=True, critic_from=str(separate_run))
    inputs = batch(trainer.tokenizer)
    with torch.no_grad():
        values = trainer.model.eval()(*inputs, values_only=True)[1]
    expected = source_values(separate_run, True, inputs)
    assert torch.equal(values, expected)  # the same weights through the same forward: bit for bit
    fresh = new_trainer(tiny_causal_dir, make_config, separate_critic=True)  # a cold critic: zeros
    with torch.no_grad():
        assert not torch.equal(fresh.model.eval()(*inputs, values_only=True)[1], expected)


def test_a_shared_critic_is_its_head_on_the_same_policy(full_run, make_config):
    """A shared critic's values equal the source's where the new run's policy is the source's."""
    trainer = new_trainer(str(full_run), make_config, critic_from=str(full_run))
    inputs = batch(trainer.tokenizer)
    with torch.no_grad():
        values = trainer.model.eval()(*inputs, values_only=True)[1]
    assert torch.equal(values, source_values(full_run, False, inputs))
    assert torch.equal(
        trainer.model.value_head.summary.weight, load_file(full_run / "value_head.safetensors")["summary.weight"]
    )


def test_hfrl_train_critic_from_an_export(separate_run, tmp_path, capsys):
    exported = tmp_path / "exported"
    code, _, err = run_cli(["export", str(separate_run), "--out", str(exported)], capsys)
    assert code == 0, err
    out = tmp_path / "warm"
    code, _, err = run_cli(
        [*TRAIN, "--separate_critic", "true", "--critic_from", str(exported), "-o", str(out)], capsys
    )
    assert code == 0, err
    assert f"critic_from: {exported}" in (out / "config.yaml").read_text()
    assert f"It started from the critic of `{exported}`." in (out / "README.md").read_text()


def test_hfrl_train_refuses_a_separate_critic_for_a_shared_one_in_one_line(separate_run, tmp_path, capsys):
    code, _, err = run_cli([*TRAIN, "--critic_from", str(separate_run), "-o", str(tmp_path / "x")], capsys)
    assert code == 2
    assert err.splitlines()[0] == (
        f"error: critic_from {separate_run}: it holds a separate critic (critic/); set separate_critic true to "
        "start from it"
    )


# ---- refusals, on the trainer's ActorCritic directly -------------------------------------------------
@pytest.fixture
def tiny_actor_critic(tiny_causal_dir):
    from hfrl.core.models import load_model
    from hfrl.core.policies import ActorCritic

    def make(separate=False, critic=True, lora=False):
        lm = load_model(tiny_causal_dir)
        if lora:
            from peft import LoraConfig, get_peft_model

            lm = get_peft_model(lm, LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
        return ActorCritic(lm, separate_critic=separate, critic=critic)

    return make


def head_folder(path, hidden=64):
    path.mkdir()
    save_file(
        {"summary.weight": torch.ones(1, hidden), "summary.bias": torch.zeros(1)}, path / "value_head.safetensors"
    )
    return path


def test_refusals_name_what_to_change(full_run, separate_run, adapter_run, tiny_actor_critic, tmp_path):
    from hfrl.trainers.online.critic_from import load_critic

    cases = [
        (tiny_actor_critic(), str(head_folder(tmp_path / "wide", hidden=32)),
         "its value head reads hidden size 32, this run's model has 64; start from a run of the same model"),
        (tiny_actor_critic(separate=True), str(full_run),
         r"it holds a shared critic \(no critic/\); set separate_critic false"),
        (tiny_actor_critic(), str(separate_run), r"it holds a separate critic \(critic/\); set separate_critic true"),
        (tiny_actor_critic(), str(adapter_run), "its critic was trained with a LoRA adapter; add --use_peft"),
        (tiny_actor_critic(lora=True), str(full_run),
         r"its critic was trained without LoRA \(full fine-tuning\); drop --use_peft"),
        (tiny_actor_critic(critic=False), str(full_run),
         r"this run trains no critic \(a critic-free estimator\); drop critic_from"),
        (tiny_actor_critic(), str(tmp_path), "no value_head.safetensors in it; it was trained without a critic"),
        (tiny_actor_critic(), "no/such/folder", r"no such folder, and not a Hub id \(namespace/name\)"),
        (tiny_actor_critic(), str(full_run / "config.yaml"), "a file, not a folder"),
    ]  # fmt: skip
    for model, ref, message in cases:
        with pytest.raises(ValueError, match=message) as err:
            load_critic(model, ref)
        assert "\n" not in str(err.value)


def test_a_pickled_critic_is_refused_and_no_code_runs(separate_run, tiny_actor_critic, tmp_path):
    from hfrl.trainers.online.critic_from import load_critic

    folder = tmp_path / "pickled"
    shutil.copytree(separate_run, folder)
    marker = tmp_path / "code-ran"
    (folder / "critic" / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    config = (folder / "critic" / "config.json").read_text()
    (folder / "critic" / "config.json").write_text(
        config.replace("{", '{"auto_map": {"AutoModelForCausalLM": "modeling_evil.Evil"},', 1)
    )
    load_critic(tiny_actor_critic(separate=True), str(folder))  # loads: its weights only, the config is not read
    assert not marker.exists()
    (folder / "critic" / "model.safetensors").rename(folder / "critic" / "pytorch_model.bin")
    with pytest.raises(
        ValueError, match=r"critic/ holds no model.safetensors \(hfrl loads critics from safetensors only"
    ):
        load_critic(tiny_actor_critic(separate=True), str(folder))
    assert not marker.exists()


def test_a_critic_whose_backbone_does_not_fit_is_refused(separate_run, tiny_actor_critic, tmp_path):
    from hfrl.trainers.online.critic_from import load_critic

    folder = tmp_path / "cut"
    shutil.copytree(separate_run, folder)
    weights = load_file(folder / "critic" / "model.safetensors")
    weights["transformer.wpe.weight"] = weights["transformer.wpe.weight"][:8]
    save_file(weights, folder / "critic" / "model.safetensors")
    with pytest.raises(
        ValueError, match=r"critic/ does not fit this run's critic \(transformer.wpe.weight has shape \[8, 64\]"
    ):
        load_critic(tiny_actor_critic(separate=True), str(folder))


def test_a_hub_id_downloads_the_critic_pinned(full_run, tiny_actor_critic, monkeypatch):
    """A Hub id is fetched with huggingface_hub's snapshot_download at the manifest's pin (as --model's
    Hub ids are: hfrl.utils.assets.hub_kwargs), the critic's files only; offline it is one line."""
    import huggingface_hub

    from hfrl.trainers.online.critic_from import CRITIC_PATTERNS, load_critic
    from hfrl.utils.assets import model_revision

    asked = {}

    def fake_download(repo_id, **kwargs):
        asked.update(repo_id=repo_id, **kwargs)
        return str(full_run)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    model = tiny_actor_critic()
    load_critic(model, "openai-community/gpt2")  # a manifest id: pinned
    assert asked["revision"] == model_revision("openai-community/gpt2") and len(asked["revision"]) == 40
    assert set(asked["allow_patterns"]) == {*CRITIC_PATTERNS, "adapter_config.json"}
    assert torch.equal(
        model.value_head.summary.weight, load_file(full_run / "value_head.safetensors")["summary.weight"]
    )
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"^critic_from me/no-such-critic: cannot download it from the Hub \("):
        load_critic(tiny_actor_critic(), "me/no-such-critic")
