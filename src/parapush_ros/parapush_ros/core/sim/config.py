"""How ``mujoco_sim`` runs the world: its clock and the simulated arm's command interface (the node declares these
settings as its parameters of the same names; the emulated mocap's are ``mocap_emulator.EmulatedMocapConfig``)."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import finite, knob, require
from ..robot.command_safety import joint_matrix
from ..robot.mocap import POSE_RELIABILITIES

CLOCKS = ("sim", "system")
COMMAND_INTERFACES = ("twist", "joint_velocity")  # TwistStamped (MoveIt Servo, UR) | Float64MultiArray (ros2_control)


@dataclass(frozen=True)
class SimConfig:
    """The sim's clock and the arm interface it emulates (what the real arm's driver would be configured with)."""

    real_time_factor: float = knob(1.0, "simulated seconds per wall-clock second")
    step_period: float = knob(0.005, "wall-clock period of the simulation loop (s)")
    command_interface: str = knob("twist", "what the simulated arm consumes: twist (TwistStamped, as MoveIt Servo / "
                                           "UR) | joint_velocity (Float64MultiArray, as a forward velocity "
                                           "controller)")
    table_yaw_in_command_frame: float = knob(0.0, "yaw of the table frame in the twist command frame (rad)")
    joint_matrix: tuple = knob((1.0, 0.0, 0.0, 1.0), "joint_velocity interface: row-major 2x2 map from table-frame "
                                                     "(vx, vy) to the joint velocities (inverted to move the pusher)")
    command_timeout: float = knob(0.1, "twist interface: twists older than this on the sim clock stop the pusher, "
                                       "as MoveIt Servo does (s); joint_velocity holds the last command forever")
    twist_hold: bool = knob(False, "twist interface: hold the last twist until the next one, as the UR twist "
                                   "controller does (it has no timeout), instead of stopping after command_timeout as "
                                   "MoveIt Servo does")
    pose_reliability: str = knob("best_effort", "QoS reliability of the pose topics: best_effort (as vrpn_mocap) | "
                                                "reliable (as natnet_ros2)")
    publish_clock: bool = knob(True, "publish /clock (simulated time) for use_sim_time")
    clock: str = knob("sim", "sim: the world's own time from 0 (published on /clock when publish_clock) | system: "
                             "the system clock, as a real arm and mocap system live on (epoch-scale stamps; the world "
                             "runs at real time and skips ahead rather than lag when the host stalls; "
                             "real_time_factor 1, publish_clock false)")

    def __post_init__(self):
        require(self.command_interface in COMMAND_INTERFACES, "command_interface", self.command_interface,
                f"one of {', '.join(COMMAND_INTERFACES)}")
        require(self.pose_reliability in POSE_RELIABILITIES, "pose_reliability", self.pose_reliability,
                f"one of {', '.join(POSE_RELIABILITIES)}")
        require(self.clock in CLOCKS, "clock", self.clock, f"one of {', '.join(CLOCKS)}")
        if self.clock == "system":  # the world cannot run faster or slower than the clock it is stamped with
            require(self.real_time_factor == 1.0, "real_time_factor", self.real_time_factor, "1 with clock system")
            require(not self.publish_clock, "publish_clock", self.publish_clock, "false with clock system")
        for name in ("real_time_factor", "step_period", "command_timeout"):
            v = getattr(self, name)
            require(finite(v) and v > 0.0, name, v, "> 0")
        m = joint_matrix(self.joint_matrix)  # 4 finite numbers, invertible (a ConfigError naming joint_matrix)
        object.__setattr__(self, "joint_matrix", tuple(m.ravel().tolist()))  # ROS gives a list: kept immutable

    @property
    def command_matrix(self):
        """``joint_matrix`` as the 2x2 array (table-frame velocity -> joint velocities)."""
        return joint_matrix(self.joint_matrix)
