"""KL controllers."""

import pytest

from hfrl.core.kl import AdaptiveKLController, FixedKLController, make_kl_controller


def test_fixed_controller_never_moves():
    ctl = make_kl_controller(0.2, None)
    assert isinstance(ctl, FixedKLController)
    assert ctl.step(100.0) == 0.2


def test_adaptive_controller_steps_and_clips():
    ctl = make_kl_controller(0.1, 0.5)
    assert isinstance(ctl, AdaptiveKLController)
    # KL 0.6: e = (0.6 - 0.5) / 0.5 = 0.2 -> beta = 0.1 * 1.02
    assert ctl.step(0.6) == pytest.approx(0.102)
    # KL 5.0: e = 9 clipped to 0.2 -> beta *= 1.02
    assert ctl.step(5.0) == pytest.approx(0.102 * 1.02)
    # KL 0.45: e = -0.1 -> beta *= 0.99
    assert ctl.step(0.45) == pytest.approx(0.102 * 1.02 * 0.99)


def test_controller_state_round_trip():
    ctl = AdaptiveKLController(0.1, 0.5)
    ctl.step(1.0)
    other = AdaptiveKLController(0.1, 0.5)
    other.load_state_dict(ctl.state_dict())
    assert other.value == ctl.value


def test_bad_target():
    with pytest.raises(ValueError, match="kl_target must be > 0"):
        AdaptiveKLController(0.1, 0.0)
