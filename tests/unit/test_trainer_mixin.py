"""What hfrl adds to every Trainer (hfrl.trainers.trainer_mixin), piece by piece: every registered trainer
mixes it in at the same place, secrets leave a config only for the block, the card takes keywords."""

from __future__ import annotations

import dataclasses
import os

import pytest


def test_every_trainer_mixes_in_what_hfrl_adds():
    """One mixin, before the Trainer's methods, in every registered trainer; an online trainer's hierarchy
    is at most 5 of hfrl's classes (issue 35: it was 11)."""
    from transformers import Trainer

    from hfrl.trainers import ALGORITHMS, algorithm_trainer
    from hfrl.trainers.trainer_mixin import TrainerMixin

    for alg in ALGORITHMS:
        mro = algorithm_trainer(alg).__mro__
        assert mro.index(TrainerMixin) < mro.index(Trainer), (alg, [c.__name__ for c in mro])
        if alg in ("ppo", "nlpo", "a2c", "trpo"):
            own = [c.__name__ for c in mro if c.__module__.startswith("hfrl.")]
            assert len(own) <= 5, (alg, own)


def test_secrets_leave_the_config_for_the_block_only():
    from hfrl.utils.secrets import secrets_removed

    @dataclasses.dataclass
    class Config:
        hub_token: str | None = "hf_" + "a" * 34
        model_init_kwargs: dict | None = None
        learning_rate: float = 1e-5

    kwargs = {"token": "hf_" + "b" * 34, "dtype": "bfloat16"}
    config = Config(model_init_kwargs=kwargs)
    with secrets_removed(config) as clean:
        assert clean is config
        assert (config.hub_token, config.model_init_kwargs) == (None, {"dtype": "bfloat16"})
        assert config.learning_rate == 1e-5
    assert config.hub_token == "hf_" + "a" * 34 and config.model_init_kwargs is kwargs


def test_secrets_are_found_by_each_config_class_own_fields():
    """The field names are read once per class (secrets_removed runs at every callback event): a subclass
    met after its base still has its own secret field removed, and a value set after the first call too."""
    from hfrl.utils.secrets import secrets_removed

    @dataclasses.dataclass
    class Base:
        learning_rate: float = 1e-5

    @dataclasses.dataclass
    class WithToken(Base):
        api_key: str | None = None

    with secrets_removed(Base()) as clean:
        assert clean.learning_rate == 1e-5
    config = WithToken()
    with secrets_removed(config):
        assert config.api_key is None
    config.api_key = "k"
    with secrets_removed(config):
        assert config.api_key is None
    assert config.api_key == "k"


def test_a_written_file_with_a_token_is_deleted(tmp_path):
    from hfrl.utils.secrets import SecretInFileError, check_written

    path = tmp_path / "training_args.bin"
    path.write_bytes(b"\x80\x04 hf_" + b"c" * 34)
    with pytest.raises(SecretInFileError, match=r"^refusing to write .*training_args\.bin: it holds a string shaped"):
        check_written(str(path))
    assert not os.path.exists(path)
    check_written(str(tmp_path / "absent"))  # nothing written: nothing to check


def test_the_card_takes_keywords_only():
    from hfrl.trainers.trainer_mixin import TrainerMixin

    with pytest.raises(TypeError, match=r"^create_model_card takes keyword arguments only"):
        TrainerMixin.create_model_card(
            object.__new__(TrainerMixin), "my-model"
        )  # transformers' first is language, TRL's model_name
