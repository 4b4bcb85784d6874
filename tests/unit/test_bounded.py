"""Bounded reading (hfrl.utils.bounded): YAML and JSON over a limit are refused in one line at once,
while they are read; a time budget stops a block that never ends. And the ranges and `generate`
arguments of hfrl's configs (hfrl.trainers.config_checks), checked by Python configs as on the
command line."""

from __future__ import annotations

import re
import signal
import time

import pytest

from hfrl.utils.bounded import (
    MAX_TEXT_BYTES,
    BoundedInputError,
    check_yaml,
    load_json,
    load_yaml,
    read_text,
    time_budget,
)


def billion_laughs(levels: int = 9) -> str:
    """``a: &a [x, x, ...]``, then each level a list of nine aliases of the one before: 9**levels values."""
    names = "abcdefghijklmnop"[:levels]
    lines = [f"{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{n}: &{n} [{', '.join(['*' + p] * 9)}]" for p, n in zip(names, names[1:], strict=False)]
    return "\n".join(lines) + "\n"


def timed(fn, *args):
    start = time.monotonic()
    with pytest.raises(BoundedInputError) as err:
        fn(*args)
    return str(err.value), time.monotonic() - start


def test_billion_laughs_is_refused_while_it_is_read():
    message, seconds = timed(load_yaml, billion_laughs(), "config file c.yaml")
    assert message == (
        "config file c.yaml: YAML whose aliases (*name) expand to more than 10000 values (line 5); write the values "
        "out, or use fewer aliases"
    )
    assert seconds < 1


DEEP = "c.yaml: YAML nested deeper than 100 levels (line 1); flatten it: a config nests a few levels"


def test_a_deep_list_is_refused_before_python_recurses():
    message, _ = timed(load_yaml, "x: " + "[" * 20_000 + "]" * 20_000, "c.yaml")
    assert message == DEEP


def test_libyamls_own_depth_limit_is_the_same_line(monkeypatch):
    """PyYAML 6.0.4's libyaml scanner stops at 1000 levels by itself, scanning ahead of the parser's
    events: its error becomes hfrl's line, as with PyYAML 6.0.3 (which reaches hfrl's limit first)."""
    import yaml

    mark = yaml.Mark("<unicode string>", 1002, 0, 1002, None, None)

    def parse(text, Loader):  # noqa: N803 - yaml.parse's own name
        raise yaml.scanner.ScannerError("while increasing flow level", mark, "exceeded maximum nesting depth", mark)

    monkeypatch.setattr(yaml, "parse", parse)
    with pytest.raises(BoundedInputError) as err:
        check_yaml("x: " + "[" * 2_000, "c.yaml")
    assert str(err.value) == DEEP


def test_an_alias_inside_its_own_anchor_is_refused():
    message, _ = timed(load_yaml, "a: &a [1, *a]", "c.yaml")
    assert message == "c.yaml: the alias *a is inside its own anchor (line 1); remove the loop"


def test_text_over_the_size_limits_is_refused_before_it_is_parsed(tmp_path):
    message, seconds = timed(load_yaml, "x: " + "a" * (50 << 20), "--x")
    assert message.startswith("--x is 50.0 MiB, over the limit of 1 MiB; a config holds field: value lines")
    assert seconds < 1
    message, _ = timed(load_yaml, "x: " + "a" * 70_000, "c.yaml")
    assert message == (
        "c.yaml: a value of 68.4 KiB, over the limit of 64 KiB (line 1); put long text in a file and give its path"
    )
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x: " + b"a" * (2 * MAX_TEXT_BYTES))
    message, _ = timed(read_text, big, f"config file {big}")
    assert message.startswith(f"config file {big} is 2.0 MiB, over the limit of 1 MiB")


def test_a_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"a: \xff\n")
    message, _ = timed(read_text, path, "config file c.yaml")
    assert message == "config file c.yaml is not UTF-8 text (byte 0xff at position 3); save it as UTF-8"


def test_what_a_config_holds_passes():
    text = "a: &base {lr: 1, beta: [0.9, 0.99]}\nb: *base\nc: [1, 2, {d: e}]\n"
    check_yaml(text, "c.yaml")
    assert load_yaml(text, "c.yaml")["b"] == {"lr": 1, "beta": [0.9, 0.99]}


def test_json_is_bounded(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 20_000 + "]" * 20_000)
    message, _ = timed(load_json, deep, "adapter_config.json")
    assert message.startswith("adapter_config.json: JSON nested deeper than 100 levels")
    message, _ = timed(load_json, "[" * 150 + "]" * 150, "x.json")  # deep for us, not for Python's parser
    assert message.startswith("x.json: JSON nested deeper than 100 levels")
    message, _ = timed(load_json, '{"a": 1', "x.json")
    assert message.startswith("x.json: invalid JSON at line 1, column 8: Expecting ',' delimiter")
    message, _ = timed(load_json, "[1]", "x.json", 2)
    assert message.startswith("x.json is 3 bytes, over the limit of 2 bytes")
    assert load_json("[" * 300 + "]" * 300, "x.json", limit=None, max_depth=300) is not None


def test_a_time_budget_stops_a_loop_and_gives_back_an_outer_one():
    start = time.monotonic()
    with pytest.raises(BoundedInputError, match="^too slow$"), time_budget(0.2, "too slow"):
        while True:
            pass
    assert time.monotonic() - start < 2
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # nothing left armed
    # the outer budget ends first: it stays in charge
    with pytest.raises(BoundedInputError, match="^outer$"), time_budget(0.5, "outer"), time_budget(5, "inner"):
        while True:
            pass
    with time_budget(5, "outer"):  # an inner budget that ends first gives the outer one back
        with pytest.raises(BoundedInputError, match="^inner$"), time_budget(0.1, "inner"):
            while True:
                pass
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 5
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        ("PPOConfig", {"num_iterations": 0}, "num_iterations must be >= 1, got 0"),
        ("PPOConfig", {"num_iterations": 10**8}, "num_iterations must be <= 10000000 (a larger value cannot be meant"),
        ("PPOConfig", {"per_device_eval_batch_size": 0}, "per_device_eval_batch_size must be >= 1, got 0"),
        ("PPOConfig", {"learning_rate": -1.0}, "learning_rate must be >= 0, got -1.0"),
        ("PPOConfig", {"generation_kwargs": {"top_k": -1}}, "generation_kwargs.top_k must be >= 0 (0: no top-k cut)"),
        ("PPOConfig", {"generation_kwargs": {"top_p": 0}}, "generation_kwargs.top_p must be in (0, 1], got 0"),
        ("ALoLConfig", {"eval_generation_kwargs": {"num_beams": 0}}, "eval_generation_kwargs.num_beams must be >= 1"),
        ("NLPOConfig", {"top_mask": 0.0}, "top_mask must be in (0, 1], got 0.0"),
        ("TRPOConfig", {"cg_damping": -0.1}, "cg_damping must be >= 0, got -0.1"),
        ("A2CConfig", {"seed": -1}, "seed must be in [0, 4294967295] (numpy's seeds), got -1"),
    ],
)
def test_python_configs_check_the_same_ranges(config, kwargs, message):
    import hfrl

    with pytest.raises(ValueError, match="^" + re.escape(message)):
        getattr(hfrl, config)(output_dir="x", report_to="none", **kwargs)


def test_derived_values_are_not_held_to_the_caps():
    """A run of 10^6 iterations of 16 steps has max_steps 1.6e7, over the cap on what a user gives: fine."""
    from hfrl import PPOConfig

    args = PPOConfig(output_dir="x", report_to="none", num_iterations=10**6, rollout_batch_size=64, mini_batch_size=16)
    assert args.max_steps == 16 * 10**6


def test_generate_arguments_given_as_text_become_numbers():
    from hfrl import PPOConfig

    args = PPOConfig(output_dir="x", report_to="none", generation_kwargs={"do_sample": True, "temperature": "7e-1"})
    assert args.generation_kwargs == {"do_sample": True, "temperature": 0.7}
