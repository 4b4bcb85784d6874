"""Push and export: huggingface_hub's real upload code against a fake Hub at the HTTP layer (an
httpx MockTransport behind ``set_client_factory``); export --merge checked against the adapter."""

import base64
import json
import logging
import re
import shutil

import pytest
import torch
from datasets import Dataset
from huggingface_hub import ModelCard, constants
from huggingface_hub.utils import _http

from hfrl.testing import digit_reward, run_cli

httpx = getattr(_http, "httpx2", None) or _http.httpx  # huggingface_hub 2.x uses httpx2, 1.x httpx
TOKEN = "hf_pushTestToken0123456789abcdefXYZ"
MODEL = {"config.json", "generation_config.json", "model.safetensors"}
ADAPTER = {"adapter_config.json", "adapter_model.safetensors"}
TOKENIZER = {"tokenizer.json", "tokenizer_config.json"}
CARD = {"README.md", "reward_curve.png", "config.yaml"}
EVALS = {"eval/test.json", "eval/test-base.json"}  # the shared full run is evaluated after and before
CRITIC = {"value_head.safetensors"}  # a PPO run's critic goes with it (tests/unit/test_critic_artifact.py)


class FakeHub:
    """The three Hub endpoints a commit uses: create repo, preupload (every file "regular", so its
    bytes travel in the commit), commit (ndjson)."""

    def __init__(self):
        self.requests = []
        self.created = []
        self.commits = []  # {"header": ..., "files": {path: bytes}}
        self.validated = 0

    def __call__(self, request):
        self.requests.append(request)
        path = request.url.path
        if request.method == "POST" and path == "/api/repos/create":
            payload = json.loads(request.content)
            self.created.append(payload)
            return httpx.Response(
                200, json={"url": f"https://huggingface.co/{payload['organization']}/{payload['name']}"}
            )
        if request.method == "POST" and re.fullmatch(r"/api/models/[^/]+/[^/]+/preupload/[^/]+", path):
            files = json.loads(request.content)["files"]
            return httpx.Response(
                200,
                json={"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]},
            )
        if request.method == "POST" and path == "/api/validate-yaml":  # the Hub's metadata check of README.md
            try:
                ModelCard(json.loads(request.content)["content"], ignore_metadata_errors=False)
            except Exception as err:  # noqa: BLE001
                return httpx.Response(400, json={"errors": [{"message": str(err)}]})
            self.validated += 1
            return httpx.Response(200, json={"errors": [], "warnings": []})
        match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/commit/([^/]+)", path)
        if request.method == "POST" and match:
            lines = [json.loads(line) for line in request.read().decode().splitlines() if line.strip()]
            files = {v["value"]["path"]: base64.b64decode(v["value"]["content"]) for v in lines if v["key"] == "file"}
            self.commits.append(
                {"header": lines[0]["value"], "files": files, "other": [v for v in lines[1:] if v["key"] != "file"]}
            )
            url = f"https://huggingface.co/{match.group(1)}/commit/{'a' * 40}"
            return httpx.Response(200, json={"commitUrl": url, "commitOid": "a" * 40})
        return httpx.Response(404, json={"error": f"not faked: {request.method} {path}"})

    @property
    def files(self):
        assert len(self.commits) == 1, self.commits
        return self.commits[0]["files"]

    def sent_bytes(self):
        return b"".join(r.content for r in self.requests if r.content)


@pytest.fixture
def hub(monkeypatch):
    """A fake Hub behind huggingface_hub's own HTTP client, online mode, HF_TOKEN set."""
    fake = FakeHub()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _http.set_client_factory(lambda: httpx.Client(transport=httpx.MockTransport(fake)))
    yield fake
    _http.set_client_factory(_http.default_client_factory)


def copy_run(run, tmp_path):
    dest = tmp_path / run.name
    shutil.copytree(run, dest)
    return dest


def assert_no_token_anywhere(hub, *texts):
    assert TOKEN.encode() not in hub.sent_bytes()  # in no file, no request body
    for text in texts:
        assert TOKEN not in text
    for request in hub.requests:  # only ever as the Authorization header
        assert request.headers.get("authorization") in (None, f"Bearer {TOKEN}")
        assert TOKEN not in str(request.url)
        assert all(TOKEN not in v for k, v in request.headers.items() if k.lower() != "authorization")
    assert any(r.headers.get("authorization") for r in hub.requests)


def test_push_full_run_sends_exactly_model_card_image_config(full_run, hub, capsys, caplog, tmp_path):
    run = copy_run(full_run, tmp_path)
    # a token given on the command line would land in config.yaml: it must not leave the machine
    (run / "config.yaml").write_text((run / "config.yaml").read_text() + f"hub_token: {TOKEN}\n")
    with caplog.at_level(logging.DEBUG):
        code, out, err = run_cli(["push", str(run), "--repo-id", "me/numbers-ppo", "--private"], capsys)
    assert code == 0, err
    assert "pushed" in out and "https://huggingface.co/me/numbers-ppo/commit/" in out
    (created,) = hub.created
    assert (created["organization"], created["name"]) == ("me", "numbers-ppo")
    assert created.get("visibility") == "private" or created.get("private") is True
    assert set(hub.files) == MODEL | TOKENIZER | CARD | EVALS | CRITIC
    assert hub.commits[0]["other"] == []  # no LFS pointer, no deletion: every file's bytes are above
    assert hub.validated == 1  # the card passed the (fake) Hub's metadata check
    for name in MODEL | TOKENIZER | EVALS | CRITIC:
        assert hub.files[name] == (run / name).read_bytes(), name
    assert hub.files["reward_curve.png"].startswith(b"\x89PNG")
    card = ModelCard(hub.files["README.md"].decode())
    assert card.data.library_name == "transformers" and card.data.eval_results
    assert "model='me/numbers-ppo'" in card.text  # the snippet loads the pushed repo
    pushed_config = hub.files["config.yaml"].decode()
    assert "task: numbers" in pushed_config and "hub_token" not in pushed_config
    assert_no_token_anywhere(hub, out, err, caplog.text, card.text)


def test_push_adapter_sends_the_adapter_not_the_base(adapter_run, hub, capsys):
    code, out, err = run_cli(["push", str(adapter_run), "--repo-id", "me/lora-ppo"], capsys)
    assert code == 0, err
    # a Python run: no config.yaml
    assert set(hub.files) == ADAPTER | TOKENIZER | CRITIC | {"README.md", "reward_curve.png"}
    card = ModelCard(hub.files["README.md"].decode())
    assert card.data.library_name == "peft"
    assert "PeftModel.from_pretrained(base, 'me/lora-ppo')" in card.text
    assert_no_token_anywhere(hub, out, err)


def test_push_merge_sends_a_full_model_that_loads(adapter_run, hub, capsys, tmp_path):
    from transformers import AutoModelForCausalLM

    code, _, err = run_cli(["push", str(adapter_run), "--repo-id", "me/lora-merged", "--merge"], capsys)
    assert code == 0, err
    assert set(hub.files) == MODEL | TOKENIZER | CRITIC | {"README.md", "reward_curve.png"}
    for name, data in hub.files.items():
        (tmp_path / name).write_bytes(data)
    assert AutoModelForCausalLM.from_pretrained(tmp_path).config.model_type == "gpt2"
    assert ModelCard.load(tmp_path / "README.md").data.library_name == "transformers"


def test_trainer_push_to_hub_goes_through_hfrl(tiny_causal_dir, hub, tmp_path, make_config):
    from hfrl import PPOTrainer

    args = make_config(
        output_dir=str(tmp_path / "py-run"),
        num_iterations=1,
        num_ppo_epochs=1,
        max_new_tokens=4,
        hub_model_id="me/py-run",
        hub_token=TOKEN,
    )
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=args,
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1"] * 8}),
    )
    trainer.train()
    info = trainer.push_to_hub()
    assert info.commit_url.startswith("https://huggingface.co/me/py-run/commit/")
    assert set(hub.files) == MODEL | TOKENIZER | CRITIC | {"README.md", "reward_curve.png"}  # no training_args.bin
    assert "hfrl" in ModelCard(hub.files["README.md"].decode()).data.tags
    assert_no_token_anywhere(hub, (tmp_path / "py-run" / "README.md").read_text())


def test_push_to_hub_during_training_sends_checkpoints_through_hfrl(tiny_causal_dir, hub, tmp_path, make_config):
    """args.push_to_hub with hub_strategy every_save: each checkpoint and the final save_model push the
    model and card only (the Trainer's default would upload training_args.bin, optimizer state, ...)."""
    from hfrl import PPOTrainer

    args = make_config(
        output_dir=str(tmp_path / "live"),
        num_iterations=1,
        num_ppo_epochs=1,
        max_new_tokens=4,
        save_every=1,
        push_to_hub=True,
        hub_model_id="me/live",
        hub_strategy="every_save",
    )
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=args,
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1"] * 8}),
    )
    trainer.train()
    trainer.save_model()
    assert [c["header"]["summary"] for c in hub.commits] == ["Training in progress, iteration 1", "Model save"]
    for commit in hub.commits:
        assert set(commit["files"]) == MODEL | TOKENIZER | CRITIC | {"README.md", "reward_curve.png"}
    assert_no_token_anywhere(hub)


def test_push_refuses_a_file_holding_the_token(full_run, hub, capsys, tmp_path):
    run = copy_run(full_run, tmp_path)
    (run / "eval" / "test.json").write_text(json.dumps({"metrics": {}, "note": TOKEN}))
    code, _, err = run_cli(["push", str(run), "--repo-id", "me/x"], capsys)
    assert code == 2
    assert err.startswith("error: eval/test.json contains your Hugging Face token")
    assert hub.commits == [] and TOKEN not in err


@pytest.mark.parametrize(
    ("args", "setup", "message"),
    [
        (["--repo-id", "me/x"], "offline", "error: hfrl push needs the network, and HF_HUB_OFFLINE is set"),
        (["--repo-id", "me/x"], "no-token", "error: no Hugging Face token: run `hf auth login` or set HF_TOKEN"),
        (["--repo-id", "bad id!"], None, "error: Repo id must"),
        (["--repo-id", "me/x", "--merge"], None, "error: --merge: "),
    ],
)
def test_push_bad_inputs(full_run, hub, monkeypatch, capsys, tmp_path, args, setup, message):
    if setup == "offline":
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    if setup == "no-token":
        monkeypatch.delenv("HF_TOKEN")
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    code, _, err = run_cli(["push", str(full_run), *args], capsys)
    assert code == 2 and err.startswith(message), err
    assert hub.commits == []


def test_push_needs_a_run_directory(hub, capsys, tmp_path):
    code, _, err = run_cli(["push", "tiny", "--repo-id", "me/x"], capsys)
    assert code == 2 and "push needs a local run directory" in err
    code, _, err = run_cli(["push", str(tmp_path), "--repo-id", "me/x"], capsys)
    assert code == 2 and "holds no model" in err


def test_export_full_run(full_run, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "exported"
    code, stdout, err = run_cli(["export", str(full_run), "--out", str(out)], capsys)
    assert code == 0, err
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert names == MODEL | TOKENIZER | CARD | EVALS | CRITIC
    assert (out / "model.safetensors").read_bytes() == (full_run / "model.safetensors").read_bytes()
    assert AutoModelForCausalLM.from_pretrained(out).config.model_type == "gpt2"
    assert f"model={str(out.resolve())!r}" in (out / "README.md").read_text()
    code, _, err = run_cli(["export", str(full_run), "--out", str(out)], capsys)  # not over a non-empty dir
    assert code == 2 and "exists and is not empty" in err


def test_export_merge_generates_the_adapter_greedy_text(adapter_run, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfrl.runs.run_dir import open_run

    out = tmp_path / "merged"
    code, _, err = run_cli(["export", str(adapter_run), "--out", str(out), "--merge"], capsys)
    assert code == 0, err
    assert not (out / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    adapter_model, _ = open_run(adapter_run).load()
    base = AutoModelForCausalLM.from_pretrained(open_run(adapter_run).adapter_base).eval()
    inputs = tokenizer(["1 2 3", "the year"], return_tensors="pt", padding=True)
    kwargs = dict(max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        from_merged = merged.generate(**inputs, **kwargs)
        from_adapter = adapter_model.generate(**inputs, **kwargs)
        assert not torch.allclose(merged(**inputs).logits, base(**inputs).logits)  # the merge changed the model
    assert tokenizer.batch_decode(from_merged) == tokenizer.batch_decode(from_adapter)


def test_export_merge_of_a_full_model_is_an_error(full_run, tmp_path, capsys):
    code, _, err = run_cli(["export", str(full_run), "--out", str(tmp_path / "m"), "--merge"], capsys)
    assert code == 2 and "holds a full model, not a PEFT adapter" in err


@pytest.mark.parametrize("command", ["push", "export"])
def test_help_has_examples(command, capsys):
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0 and f"hfrl {command} runs/" in out


NESTED = "hf_FAKE789"  # from_pretrained's own `token` argument, inside a dict field


def test_a_token_inside_a_dict_field_reaches_no_file(hub, tmp_path, capsys):
    """`--model_init_kwargs '{token: ...}'` (a gated base model's token): in no file of the run, its
    checkpoints, an export, or a push (sent with another token)."""
    run = tmp_path / "run"
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(run), "--num_iterations", "2",
                            "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
                            "--save_every", "1", "--disable_tqdm", "true", "--model_init_kwargs",
                            f"{{token: {NESTED}, dtype: float32}}"], capsys)  # fmt: skip
    assert code == 0, err
    code, _, err = run_cli(["export", str(run), "--out", str(tmp_path / "exported")], capsys)
    assert code == 0, err
    code, _, err = run_cli(["push", str(run), "--repo-id", "me/run"], capsys)
    assert code == 0, err
    files = [p for folder in (run, tmp_path / "exported") for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in files) and any("checkpoint-" in str(p) for p in files)
    for path in files:
        assert NESTED.encode() not in path.read_bytes(), path
    assert NESTED.encode() not in hub.sent_bytes()
    assert "dtype: float32" in (run / "config.yaml").read_text()  # the rest of the mapping is kept


def test_a_file_holding_a_token_shaped_string_is_never_written_or_pushed(full_run, hub, tmp_path, capsys):
    """A token under a name hfrl cannot know is a secret: config.yaml is not written (the run does not
    start, the folder stays as it was), and a run holding one is neither exported nor pushed."""
    shaped = "hf_" + "Ab1" * 11
    out = tmp_path / "run"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--num_iterations", "1",
            "--rollout_batch_size", "4", "--mini_batch_size", "4", "--run_name", shaped]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "refusing to write" in err and "shaped like a Hugging Face token (hf_Ab1A...)" in err, err
    assert not out.exists()
    run = copy_run(full_run, tmp_path)
    (run / "eval" / "test.json").write_text(json.dumps({"note": shaped}))
    for args in (["export", str(run), "--out", str(tmp_path / "x")], ["push", str(run), "--repo-id", "me/r"]):
        code, _, err = run_cli(args, capsys)
        assert code == 2 and "refusing to write eval/test.json" in err, err
    assert not hub.commits and not (tmp_path / "x").exists()


# ---- a run folder from anywhere: export and push read only regular files inside it (issue 34) ------
@pytest.mark.parametrize(
    ("name", "target"),
    [("vocab.txt", "id_rsa"), ("eval", "credentials")],
    ids=["file", "folder"],
)
def test_export_and_push_never_read_through_a_link(name, target, full_run, hub, tmp_path, capsys):
    """`vocab.txt -> ~/.ssh/id_rsa`, `eval/ -> a folder of cloud credentials`: neither is copied or sent."""
    secret_text = b"-----BEGIN OPENSSH PRIVATE KEY----- do not send"
    outside = tmp_path / "home"
    (outside / "credentials").mkdir(parents=True)
    (outside / "id_rsa").write_bytes(secret_text)
    (outside / "credentials" / "aws.json").write_bytes(secret_text)
    run = copy_run(full_run, tmp_path)
    if (run / name).is_dir():
        shutil.rmtree(run / name)
    (run / name).symlink_to(outside / target)
    for args in (["export", str(run), "--out", str(tmp_path / "exported")], ["push", str(run), "--repo-id", "me/r"]):
        code, _, err = run_cli(args, capsys)
        assert code == 2, err
        assert f"run folder {run}: {name} is a link to {outside / target}, outside the folder" in err
    assert not (tmp_path / "exported").exists()
    assert hub.commits == [] and secret_text not in hub.sent_bytes()


def test_a_token_at_the_end_of_a_large_file_is_found(full_run, hub, tmp_path, capsys):
    """The whole of every file is read for a token, weights included (it was the first 1 MiB over 64 MiB)."""
    run = copy_run(full_run, tmp_path)
    with open(run / "model.safetensors", "ab") as fh:
        fh.write(b"\0" * (70 * 2**20) + b"hf_" + b"Zz9" * 12)
    for args in (["export", str(run), "--out", str(tmp_path / "x")], ["push", str(run), "--repo-id", "me/r"]):
        code, _, err = run_cli(args, capsys)
        assert code == 2 and "refusing to write model.safetensors: it holds a string shaped like a Hugging Face " \
            "token (hf_Zz9Z...)" in err, err  # fmt: skip
    assert not (tmp_path / "x").exists() and hub.commits == []
