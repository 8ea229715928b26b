"""The sim's settings check themselves and keep the parameters' names and defaults."""
import pytest

from parapush_ros.core.config import ConfigError, knobs
from parapush_ros.core.sim.config import SimConfig
from parapush_ros.core.sim.mocap_emulator import EmulatedMocapConfig


def test_defaults_are_valid_and_the_joint_matrix_stays_a_tuple():
    cfg = SimConfig(joint_matrix=[0.0, 1.0, 1.0, 0.0])  # as ROS gives a double array
    assert cfg.joint_matrix == (0.0, 1.0, 1.0, 0.0) and cfg.command_matrix.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert SimConfig().real_time_factor == 1.0 and EmulatedMocapConfig().pose_rate == 120.0
    assert list(knobs(EmulatedMocapConfig)) == ["pose_rate", "position_noise", "yaw_noise", "latency",
                                                "dropout_probability", "dropout_duration", "seed", "clock_offset"]


@pytest.mark.parametrize("cls, field, value, words", [
    (SimConfig, "real_time_factor", float("nan"), "real_time_factor: must be > 0"),
    (SimConfig, "command_timeout", -0.1, "command_timeout: must be > 0"),
    (SimConfig, "joint_matrix", (1.0, 0.0), "joint_matrix: expected 4 finite numbers"),
    (EmulatedMocapConfig, "pose_rate", 0.0, "pose_rate: must be > 0"),
    (EmulatedMocapConfig, "yaw_noise", -1.0, "yaw_noise: must be >= 0"),
])
def test_bad_settings_name_their_field(cls, field, value, words):
    with pytest.raises(ConfigError, match=words):
        cls(**{field: value})
