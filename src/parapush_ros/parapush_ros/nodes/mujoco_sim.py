"""``mujoco_sim``: the robot and the mocap system in simulation, for CI and for trying the stack without hardware.

Consumes exactly what the real arm gets from ``velocity_commander``:
  ``command_interface: twist``          ``TwistStamped`` on ``/servo_node/delta_twist_cmds`` (frame
                                        ``command_frame_id``); like MoveIt Servo, a twist whose stamp is older than
                                        ``command_timeout`` on the sim clock stops the pusher; with ``twist_hold``
                                        (output ur_twist) the last twist is held, as the UR twist controller does;
  ``command_interface: joint_velocity`` ``Float64MultiArray`` on ``/forward_velocity_controller/commands``; like
                                        ros2_control, the last command is held forever.
Publishes what a mocap driver would: ``PoseStamped`` per rigid body on ``/<body>/pose`` (natnet_ros2 names;
``mocap_driver`` / ``pose_topic_template`` as for mocap_ingest) in ``mocap_frame_id`` through the inverse of the
same mocap -> table transform parameters, at ``pose_rate`` on the sim clock with noise, latency and dropouts
(seeded), and bodies listed in ``hidden_bodies`` (settable at run time) not at all; ``/clock``
(``rosgraph_msgs/Clock``) for ``use_sim_time``; ``/diagnostics``.
Services: ``~/reset`` (``std_srvs/Trigger``), ``~/load_scene`` (``parapush_msgs/srv/LoadScene``).

As a stand-in for the real cell (``parapush soak --robot``): ``clock: system`` runs the world on the system clock
(epoch-scale stamps, no ``/clock``); ``clock_offset`` adds the mocap host's clock offset to every pose stamp (settable
at run time); the emulated Servo reads twists per ``moveit_servo.command_in_type`` (``unitless``: fractions of
``moveit_servo.scale.linear``), parameters a commander can read from this node as it reads them from Servo's. A
stall of its host skips the world ahead to the system clock (standing still meanwhile: a real cell never waits)
with a warning, and ``/diagnostics`` counts the seconds skipped since the start (``skipped_total_s``).

The physics is the fine model's MuJoCo model (``core.sim.world.SimWorld``), stepped at
``real_time_factor`` times wall-clock speed, or slower when the host cannot keep up: then the sim clock slows
down (every other node runs on it), it never skips ahead, and the node says so (a warning and ``/diagnostics``
WARN with the achieved factor). One loop tick advances the clock by at most ``MAX_TICK_PERIODS`` nominal ticks: when
the host is busy and a tick comes late, the sim slows down instead of jumping ahead, so every node still gets its
turn every few milliseconds of sim time (a jump of 0.1 s in one tick let a starved node answer an e-stop 0.2 s of
sim time late under heavy load). The loop runs on a steady (wall) timer, never on the sim clock it
publishes, so the node works with ``use_sim_time`` set like every other node.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, TwistStamped
from parapush_msgs.srv import LoadScene
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.time import Time
from rosgraph_msgs.msg import Clock as ClockMsg
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from ..ros import qos, topics
from ..core.robot.command_safety import rotate_planar
from ..core.models.mjcf import TIMESTEP
from ..core.robot.mocap import parse_name_list
from ..core.scene.spec import SceneError, load_scene
from ..core.models.base import ModelDiverged
from ..core.sim.config import COMMAND_INTERFACES, SimConfig
from ..core.sim.mocap_emulator import EmulatedMocapConfig, MocapEmulator
from ..core.sim.world import SimWorld
from ..ros.params import MUJOCO_SIM_IO, declare_all
from ..ros.node import declare_config, node_main
from ..ros.mocap import mocap_setup

COMMANDS = dict(zip(COMMAND_INTERFACES, (topics.SERVO_TWIST, topics.FORWARD_VELOCITY_COMMANDS)))
MAX_SIM_STEP_PER_TICK = 0.1  # s of sim time per loop iteration at most: a stalled process does not spiral
MAX_TICK_PERIODS = 4.0  # and at most this many nominal ticks (step_period x real_time_factor) in one iteration
STEP_NS = round(TIMESTEP * 1e9)  # one physics step (ns): the clock counts whole steps
LAG_WARNING_FRACTION = 0.9  # below this share of real_time_factor over a second, falling behind is reported
# wall seconds after the start in which falling behind is only in the diagnostics, not a logged warning: the other
# nodes load their models then (parapush sim: in this process), which every start would report as a fault
STARTUP_GRACE_S = 5.0


def _sec(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class MujocoSimNode(Node):
    def __init__(self, **kwargs):
        super().__init__("mujoco_sim", **kwargs)
        if self.get_parameter("use_sim_time").value:
            # the sim is the clock: it never waits on the /clock it publishes (launch files set use_sim_time on all)
            self.set_parameters([Parameter("use_sim_time", value=False)])
        # writable in ROS' eyes because hidden_bodies is applied on set; _on_parameters refuses every other set,
        # naming the parameter
        p = self.p = declare_all(self, MUJOCO_SIM_IO, read_only=False)
        self.config = declare_config(self, SimConfig, read_only=False)
        self.mocap_config = declare_config(self, EmulatedMocapConfig, read_only=False)
        p.update({**asdict(self.config), **asdict(self.mocap_config)})  # every parameter's value by name
        if self.mocap_config.position_noise == 0.0 and self.mocap_config.yaw_noise == 0.0:
            self.get_logger().info("noise-free mocap: a body at rest repeats its pose to the bit, which mocap_ingest "
                                   "takes for a driver republishing a lost body after its frozen_timeout (set that "
                                   "to 0 for an ideal sensor)")
        self.joint_matrix = self.config.command_matrix
        self.twist_gain = self._servo_gain(p[topics.SERVO_COMMAND_IN_TYPE], p[topics.SERVO_SCALE_LINEAR])
        self._clock_offset = self.mocap_config.clock_offset
        # clock system: the world's time is the system clock's (ns, a whole number of physics steps from the start)
        self._origin_ns = 0
        if self.config.clock == "system":
            now_ns = Clock(clock_type=ClockType.SYSTEM_TIME).now().nanoseconds
            self._origin_ns = now_ns - now_ns % STEP_NS
        self.pose_qos = qos.POSE[p["pose_reliability"]]
        self.sim = None
        self.pose_pubs = {}  # mocap body key -> publisher of the current scene
        self._pose_pub_by_topic = {}
        # The loop timer has a callback group of its own so that it cannot starve commands and services under load
        # (a group runs one callback at a time); the lock keeps services and the loop off the simulation together.
        self._lock = threading.RLock()
        self._closing = False  # set under the lock by destroy_node: callbacks still in flight then do nothing
        loop_group, command_group, service_group = (MutuallyExclusiveCallbackGroup() for _ in range(3))
        self._steps_offset = 0  # sim clock steps carried over from previous scenes (the clock never jumps back)
        self._load(load_scene(p["scene"]))
        self._cmd = None  # (stamp s, v_table)
        self._cmd_note = "no command yet"
        self.clock_pub = self.create_publisher(ClockMsg, topics.CLOCK, qos.RELIABLE) if p["publish_clock"] else None
        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, qos.RELIABLE)
        self.command_topic = p["command_topic"] or COMMANDS[p["command_interface"]]
        if p["command_interface"] == "twist":
            self.create_subscription(TwistStamped, self.command_topic, self._on_twist, qos.RELIABLE,
                                     callback_group=command_group)
        else:
            self.create_subscription(Float64MultiArray, self.command_topic, self._on_joint_velocity, qos.RELIABLE,
                                     callback_group=command_group)
        self.create_service(Trigger, topics.SIM_RESET_SERVICE, self._on_reset, callback_group=service_group)
        self.create_service(LoadScene, topics.SIM_LOAD_SCENE_SERVICE, self._on_load_scene,
                            callback_group=service_group)
        self.add_on_set_parameters_callback(self._on_parameters)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._last_wall = time.monotonic()
        self._carry = 0.0
        self._behind = 0.0  # s of sim time not simulated since the last diagnostics (the host fell behind)
        self._skipped_total = 0.0  # s the world skipped ahead since the start (clock system: the host stalled)
        self._wall_start, self._sim_start = self._last_wall, self.time
        self._started_wall = self._last_wall
        self.create_timer(p["step_period"], self._tick, callback_group=loop_group, clock=steady)
        self.create_timer(1.0, self._publish_diagnostics, callback_group=service_group, clock=steady)
        self.get_logger().info(
            f"simulating scene {self.sim.scene.name!r} at {p['real_time_factor']:g}x real time; commands: "
            f"{p['command_interface']} on {self.command_topic}; mocap: "
            f"{', '.join(self.topics.values())} at {p['pose_rate']:g} Hz in {p['mocap_frame_id']!r}")

    @property
    def time(self) -> float:
        """The sim clock (s): monotonic across resets and scene loads; epoch-scale with ``clock: system``."""
        return self.time_ns * 1e-9

    @property
    def time_ns(self) -> int:
        return self._origin_ns + (self._steps_offset + self.sim.steps) * STEP_NS

    @staticmethod
    def _servo_gain(in_type: str, scale: float) -> float:
        """m/s of the pusher per unit of an incoming twist, as MoveIt Servo reads it."""
        if in_type == "speed_units":
            return 1.0
        if in_type != "unitless":
            raise ValueError(f"parameter {topics.SERVO_COMMAND_IN_TYPE}: must be speed_units or unitless, got "
                             f"{in_type!r}")
        if not (math.isfinite(scale) and scale > 0.0):
            raise ValueError(f"parameter {topics.SERVO_SCALE_LINEAR}: must be > 0 with unitless, got {scale!r}")
        return float(scale)

    # ------------------------------------------------------------------------------------------ scene
    def _load(self, scene):
        """Build the simulation of ``scene`` and its mocap publishers; raises ValueError on bad parameters."""
        p = self.p
        transform, bodies, topics_ = mocap_setup(self, p, scene)
        hidden = self._hidden_keys(p["hidden_bodies"], bodies)
        sim = SimWorld(scene)
        emulator = MocapEmulator(list(bodies), self.mocap_config)
        if self.sim is not None:
            self._steps_offset += self.sim.steps
            self.sim.close()
        self.sim, self.emulator, self.transform, self.bodies, self.topics = sim, emulator, transform, bodies, topics_
        self.emulator.hidden = hidden
        self.emulator.next_sample = self.time
        # publishers are kept for the node's life, one per topic ever used: destroying one while the executor
        # builds its wait set (another thread) fails that spin with InvalidHandle (its QoS event handler is in it)
        for t in topics_.values():
            if t not in self._pose_pub_by_topic:
                self._pose_pub_by_topic[t] = self.create_publisher(PoseStamped, t, self.pose_qos)
        self.pose_pubs = {k: self._pose_pub_by_topic[t] for k, t in topics_.items()}

    @staticmethod
    def _hidden_keys(text: str, bodies: dict) -> set:
        names = parse_name_list(text)
        by_mocap = {b: k for k, b in bodies.items()}
        unknown = [n for n in names if n not in by_mocap]
        if unknown:
            raise ValueError(f"hidden_bodies: {unknown} are not mocap bodies of the scene "
                             f"({', '.join(by_mocap)})")
        return {by_mocap[n] for n in names}

    def _on_parameters(self, params):
        for prm in params:
            if prm.name == "hidden_bodies":
                try:
                    hidden = self._hidden_keys(prm.value, self.bodies)
                except (ValueError, TypeError) as e:
                    return SetParametersResult(successful=False, reason=str(e))
                self.emulator.hidden = hidden
                self.get_logger().info(f"hidden bodies: {sorted(hidden) or 'none'}")
            elif prm.name == "clock_offset":  # the mocap host's clock steps (a soak's fault)
                if not (isinstance(prm.value, float) and math.isfinite(prm.value)):
                    return SetParametersResult(successful=False,
                                               reason=f"clock_offset: must be a finite float, got {prm.value!r}")
                self._clock_offset = prm.value
                self.get_logger().info(f"mocap clock offset: {prm.value:+.3f} s")
            elif prm.name in self.p and prm.name != "use_sim_time":
                return SetParametersResult(successful=False,
                                           reason=f"{prm.name} cannot be changed at run time (only hidden_bodies, "
                                                  f"clock_offset)")
        return SetParametersResult(successful=True)

    def _on_reset(self, req, res):
        with self._lock:
            self.sim.reset()
            self.emulator.clear()
            self._cmd = None
        res.success, res.message = True, f"scene {self.sim.scene.name!r} reset to its initial state"
        self.get_logger().info(res.message)
        return res

    def _on_load_scene(self, req, res):
        try:
            scene = load_scene(req.scene)
            with self._lock:
                self._load(scene)
                self._cmd = None
        except (SceneError, ValueError) as e:
            res.success, res.message = False, f"scene {req.scene!r} not loaded: {e}"
            self.get_logger().error(res.message)
            return res
        res.success = True
        res.message = (f"scene {self.sim.scene.name!r} loaded ({len(self.sim.scene.objects)} object(s)); mocap "
                       f"topics: {', '.join(self.topics.values())}")
        self.get_logger().info(res.message)
        return res

    # ------------------------------------------------------------------------------------------ commands
    def _on_twist(self, msg: TwistStamped):
        if msg.header.frame_id != self.p["command_frame_id"]:
            self.get_logger().warning(f"twist rejected: frame_id {msg.header.frame_id!r} is not "
                                      f"{self.p['command_frame_id']!r}", throttle_duration_sec=1.0)
            return
        v = np.array([msg.twist.linear.x, msg.twist.linear.y])
        if not np.all(np.isfinite(v)):
            self.get_logger().warning("twist rejected: non-finite velocity", throttle_duration_sec=1.0)
            return
        stamp = _sec(msg.header.stamp)
        skew = self.time - stamp
        if abs(skew) > 1.0:
            self.get_logger().warning(
                f"twist stamp {stamp:.3f} s is {skew:+.3f} s off the sim clock ({self.time:.3f} s): is use_sim_time "
                f"set on the sender? Servo would drop it.", throttle_duration_sec=2.0)
        # held (no stamp to age) where the arm's controller has no timeout (twist_hold: the UR twist controller)
        self._cmd = (None if self.p["twist_hold"] else stamp,
                     rotate_planar(v * self.twist_gain, -self.p["table_yaw_in_command_frame"]))

    def _on_joint_velocity(self, msg: Float64MultiArray):
        q = np.asarray(msg.data, dtype=float)
        if q.shape != (2,) or not np.all(np.isfinite(q)):
            self.get_logger().warning(f"joint velocity command rejected: expected 2 finite values, got "
                                      f"{list(msg.data)}", throttle_duration_sec=1.0)
            return
        self._cmd = (None, np.linalg.solve(self.joint_matrix, q))  # held forever, like ros2_control

    def _command_now(self) -> np.ndarray:
        if self._cmd is None:
            return np.zeros(2)
        stamp, v = self._cmd
        if stamp is None:
            return v
        age = self.time - stamp
        if -self.p["command_timeout"] <= age <= self.p["command_timeout"]:
            self._cmd_note = "fresh"
            return v
        self._cmd_note = f"stale twist ({age:+.3f} s): halted, as Servo does"
        return np.zeros(2)

    # ------------------------------------------------------------------------------------------ loop
    def _tick(self):
        with self._lock:
            if not self._closing:
                self._advance()

    def _advance(self):
        now = time.monotonic()
        cap = min(MAX_SIM_STEP_PER_TICK, MAX_TICK_PERIODS * self.p["step_period"] * self.p["real_time_factor"])
        em = self.emulator
        if self._origin_ns:  # clock system: catch up with the system clock; a stall skips the world ahead (a real
            # one does not wait for us), so every stamp stays on the clock the robot's nodes read
            lag_ns = Clock(clock_type=ClockType.SYSTEM_TIME).now().nanoseconds - self.time_ns
            cap_ns = int(cap * 1e9)
            if lag_ns > cap_ns:
                skipped = (lag_ns - cap_ns) // STEP_NS
                self._origin_ns += skipped * STEP_NS
                self._behind += skipped * TIMESTEP
                self._skipped_total += skipped * TIMESTEP
                em.next_sample = max(em.next_sample, self.time)
                lag_ns -= skipped * STEP_NS
            nsteps = max(0, lag_ns // STEP_NS)
            self._last_wall = now
        else:
            wanted = (now - self._last_wall) * self.p["real_time_factor"]
            budget = min(wanted, cap) + self._carry
            self._behind += max(0.0, wanted - cap)  # sim time given up: the host could not keep up
            self._last_wall = now
            nsteps = int(budget / TIMESTEP + 1e-9)
            self._carry = budget - nsteps * TIMESTEP
        while nsteps > 0:
            to_sample = max(1, int(math.ceil((em.next_sample - self.time) / TIMESTEP - 1e-9)))
            n = min(nsteps, to_sample)
            self.sim.set_velocity(*self._command_now())
            try:
                self.sim.step(n)
            except ModelDiverged as e:
                self.sim.reset()
                self.get_logger().error(f"{e}; the scene was reset")
                self._cmd = None
            nsteps -= n
            t = self.time
            if t >= em.next_sample - 1e-9:
                em.sample(t, self.sim.body_poses())
                em.next_sample += em.period
            self._publish_poses(em.due(t))
        for name in self.sim.newly_fallen():
            self.get_logger().warning(f"object {name!r} fell off the table (sim time {self.time:.3f} s)")
        if self.clock_pub is not None:
            msg = ClockMsg()
            msg.clock = Time(nanoseconds=self.time_ns).to_msg()
            self.clock_pub.publish(msg)

    def _publish_poses(self, samples):
        for key, stamp, p_table, q_table in samples:
            p, q = self.transform.to_mocap(p_table, q_table)
            msg = PoseStamped()
            msg.header.stamp = Time(nanoseconds=int(round((stamp + self._clock_offset) * 1e9))).to_msg()
            msg.header.frame_id = self.p["mocap_frame_id"]
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in p)
            (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
             msg.pose.orientation.w) = (float(v) for v in q)
            self.pose_pubs[key].publish(msg)

    def _publish_diagnostics(self):
        """Once a second (wall): achieved real-time factor over the last second; falling behind is a warning."""
        now_wall, now_sim = time.monotonic(), self.time
        wall = now_wall - self._wall_start
        rtf = (now_sim - self._sim_start) / wall if wall > 0 else 0.0
        self._wall_start, self._sim_start = now_wall, now_sim
        behind, self._behind = self._behind, 0.0
        lagging = behind > 0.0 and rtf < LAG_WARNING_FRACTION * self.p["real_time_factor"]
        if behind > 0.0 and self._origin_ns:
            lagging = True
            self.get_logger().warning(f"the host stalled: the world skipped {behind:.3f} s ahead (clock system: it "
                                      f"keeps to the system clock)", throttle_duration_sec=10.0)
        elif lagging and now_wall - self._started_wall > STARTUP_GRACE_S:
            self.get_logger().warning(
                f"falling behind: {rtf:.2f}x real time achieved, {self.p['real_time_factor']:g}x asked (the host is "
                f"too slow or busy; every node runs on the sim clock, so the simulation slows down rather than "
                f"skipping time)", throttle_duration_sec=10.0)
        with self._lock:
            if self._closing:
                return
            x = self.sim.planar_state()
            fallen = sorted(self.sim.fallen)
        values = {"scene": self.sim.scene.name, "sim_time": f"{self.time:.3f}", "achieved_rtf": f"{rtf:.2f}",
                  "command": self._cmd_note, "fallen_objects": ", ".join(fallen) or "none",
                  "hidden_bodies": ", ".join(sorted(self.emulator.hidden)) or "none",
                  "pusher": f"({x[0]:.4f}, {x[1]:.4f})", "skipped_total_s": f"{self._skipped_total:.3f}"}
        problems = ([f"objects off the table: {', '.join(fallen)}"] if fallen else []) + (
            [f"falling behind real time ({rtf:.2f}x of {self.p['real_time_factor']:g}x)"] if lagging else [])
        level = DiagnosticStatus.WARN if problems else DiagnosticStatus.OK
        message = "; ".join(problems) or "running"
        arr = DiagnosticArray()
        arr.header.stamp = Time(nanoseconds=self.time_ns).to_msg()
        arr.status.append(DiagnosticStatus(level=level, name="mujoco_sim", hardware_id=self.sim.scene.name,
                                           message=message,
                                           values=[KeyValue(key=k, value=v) for k, v in values.items()]))
        self.diag_pub.publish(arr)

    def destroy_node(self):
        """Waits for a loop tick in flight (it holds the lock), so no callback publishes on a destroyed node."""
        with self._lock:
            self._closing = True
            if self.sim is not None:
                self.sim.close()
        # what a real arm would be left doing: a stack that stops must have left it a zero
        if self._cmd is None:
            self.get_logger().info("last command taken: none")
        else:
            stamp, v = self._cmd
            when = "" if stamp is None else f" stamped {stamp:.3f} s"
            self.get_logger().info(f"last command taken: {np.array2string(v, precision=4)} m/s in the table{when} "
                                   f"({'zero' if not np.any(v) else 'not zero: its sender had not stopped yet'})")
        super().destroy_node()


main = node_main(MujocoSimNode)
