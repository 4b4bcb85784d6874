"""``--rewards ID`` without brackets is one reward, not a list of its letters (it was read as
rewards 'i', 'n', ... and refused with "unknown reward 'i'")."""

from hfrl.tasks import load_task
from hfrl.testing import run_cli


def test_one_reward_id_is_a_list_of_one(tmp_path, capsys):
    assert len(load_task("numbers", rewards="increasing_numbers").reward_funcs) == 1
    out = tmp_path / "run"
    argv = ["train", "--task", "numbers", "--alg", "ppo", "--model", "tiny", "--rewards", "increasing_numbers",
            "--num_iterations", "1", "--output_dir", str(out)]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "rewards: increasing_numbers" in (out / "config.yaml").read_text()
