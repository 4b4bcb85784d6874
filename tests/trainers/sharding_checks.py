"""What the DeepSpeed test modules share: the launch lock (two processes on accelerate's default port,
one module at a time across pytest-xdist workers), the skips, and the DDP comparison."""

import shutil

import pytest
from conftest import one_launch_at_a_time


@pytest.fixture(scope="module", autouse=True)
def one_launch_per_module(tmp_path_factory):
    """Two processes on accelerate's default port (29500): no other module launches meanwhile (pytest-xdist)."""
    with one_launch_at_a_time(tmp_path_factory):
        yield


needs_launcher = pytest.mark.skipif(shutil.which("accelerate") is None, reason="the accelerate CLI is not on PATH")
needs_deepspeed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("deepspeed") is None, reason="deepspeed is not installed (hfrl[deepspeed])"
)


def assert_sharded_like_ddp(rows, moved=1e-4):
    by_config = {row["config"]: row for row in rows}
    assert by_config["multi_cpu"]["type"] == "MULTI_CPU" and by_config["multi_cpu"]["parameter_share"] == 1.0
    for config, row in by_config.items():
        assert row["moved_from_start"] > moved, row  # it trained: equal weights are not a no-op
        assert row["max_abs_diff_vs_ddp"] <= 1e-5, row  # measured 0 to 2.4e-6
        if config != "multi_cpu":
            assert row["type"] == "DEEPSPEED" and row["optimizer_share"] <= 0.55, row
    if "deepspeed_zero3" in by_config:
        assert by_config["deepspeed_zero3"]["parameter_share"] <= 0.55
