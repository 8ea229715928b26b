"""``velocity_commander``: the planner's pusher velocity -> the robot, through a safety layer.

Subscribes: ``pusher_cmd`` (``geometry_msgs/TwistStamped``, table frame, reliable: the planner),
``pusher_cmd_teleop`` (the same, from a person: it has priority over ``pusher_cmd`` until ``teleop_timeout`` after
its last message) and ``scene_state`` (``parapush_msgs/SceneState``: the pusher position for the workspace limits).
Publishes every period (``rate``), zeros included:
  ``output: servo``          ``TwistStamped`` on ``/servo_node/delta_twist_cmds`` (MoveIt Servo), fresh stamps,
                             ``output_frame_id``; at start ``/servo_node/switch_command_type`` is called with TWIST
                             when moveit_msgs is installed and the service answers (the log says when it is not);
  ``output: ur_twist``       ``TwistStamped`` on ``/twist_controller/twist`` (UR driver; frame ``base``);
  ``output: joint_velocity`` ``std_msgs/Float64MultiArray`` on ``/forward_velocity_controller/commands``
                             (ros2_control forward velocity controller of a 2-axis stage, ``joint_matrix``);
  ``~/status`` (``std_msgs/String``, latched) on every change of state; ``/diagnostics``.
Services: ``~/estop`` (``std_srvs/Trigger``) latches zero output until ``~/reset`` (``std_srvs/Trigger``).
Gripper: at start the gripper closes on the pusher through ``control_msgs/action/GripperCommand`` when
control_msgs is installed (``stalled`` = good grasp); otherwise the log says clearly that it was skipped.

Lifecycle (``rclpy.lifecycle``): the node starts *unconfigured* and sends nothing. ``configure`` loads the scene
and creates its topics, services and timers (the output stays silent: ``~/status`` says ``inactive``);
``activate`` enables the output (and closes the gripper, the first time after configure); ``deactivate`` sends
zero at once and silences the output again; ``cleanup`` takes it all down. The waits for the Servo switch service and
the gripper server (``startup_timeout``) count from configure and activate. The launch files and ``parapush sim``
configure and activate it; by hand: ``ros2 lifecycle set /velocity_commander configure`` then ``activate``.

The safety layer also latches the e-stop when the pusher does not follow the commands (``follow_*`` settings: a
still, sideways or far too slow arm), comparing new measurements only (``scene_state``'s stamp).

Limits, watchdog and workspace clamping live in ``core.robot.command_safety`` (tested without ROS); the limits are
``SafetyConfig``'s settings, declared as parameters of the same names: they are the only writable parameters and a set
applies at once (checked by ``SafetyConfig``; a bad value is refused naming the field and the rule; so is one looser
than the node started with, ``SafetyConfig.looser_than``); every other parameter is read-only (read at start). The
e-stop latch outlives ``cleanup``/``configure``: only ``~/reset`` clears it. Ages are measured on receipt on the ROS
clock in simulation and on the steady clock otherwise (an NTP step of the system clock must not make a command look
fresh or stale); a clock that goes back stops the output.

MoveIt Servo's units: at configure the commander asks Servo's parameter service (``servo_parameters_service``) for
``moveit_servo.command_in_type`` and ``moveit_servo.scale.linear`` and sends m/s in ``speed_units``, m/s divided by
``scale.linear`` in ``unitless`` (Servo's default); until it knows, the output is zero, and a setting that leaves
the speed unknown (unitless without a scale, another type, no answer within ``startup_timeout`` on the robot)
refuses ``activate`` naming it (with no answer it keeps asking: a Servo started late is found). In simulation
(``use_sim_time``) ``servo_command_in_type`` holds until a Servo answers (none does: mujoco_sim takes m/s).
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TwistStamped
from parapush_msgs.msg import SceneState
from rcl_interfaces.srv import GetParameters
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode
from rclpy.parameter import parameter_value_to_python
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger

from ..core.robot.command_safety import (
    ESTOP,
    INACTIVE,
    SERVO_COMMAND_TYPES,
    SERVO_UNKNOWN,
    SERVO_WAITING,
    CommandSafety,
    SafetyConfig,
    SafetyConfigError,
    Workspace,
    joint_matrix,
    rotate_planar,
    servo_linear_gain,
)
from ..core.scene.spec import load_scene
from ..ros import qos, topics
from ..ros.node import ManagedEntities, config_setter, declare_config, node_main, period_clock, transition
from ..ros.params import COMMANDER_IO, declare_all

OUTPUTS = topics.COMMANDER_OUTPUTS


def output_of(p: dict) -> tuple:
    """(message type, topic) of the arm input the commander drives, from its parameters ``p``."""
    return (Float64MultiArray if p["output"] == "joint_velocity" else TwistStamped,
            p["output_topic"] or OUTPUTS[p["output"]])


def zero_output(p: dict, stamp) -> Float64MultiArray | TwistStamped:
    """The zero command of that arm input (stamped ``stamp``, in the output frame)."""
    if p["output"] == "joint_velocity":
        return Float64MultiArray(data=[0.0, 0.0])
    msg = TwistStamped()
    msg.header.stamp, msg.header.frame_id = stamp, p["output_frame_id"]
    return msg
_LEVEL = {"ok": DiagnosticStatus.OK, "limited": DiagnosticStatus.OK, "waiting for command": DiagnosticStatus.OK,
          "idle": DiagnosticStatus.OK, "inactive": DiagnosticStatus.OK,
          "watchdog": DiagnosticStatus.WARN, "clock jump": DiagnosticStatus.WARN,
          "no pusher state": DiagnosticStatus.WARN,
          "waiting for grasp": DiagnosticStatus.WARN, "waiting for servo settings": DiagnosticStatus.WARN,
          "estop": DiagnosticStatus.ERROR, "servo settings": DiagnosticStatus.ERROR}


# the joint output maps table velocities with joint_matrix, which holds the table's orientation: a yaw would be
# ignored where the parameter says the output is rotated by it
JOINT_OUTPUT_YAW = ("velocity_commander: invalid parameter table_yaw_in_output_frame: {!r} with output joint_velocity, "
                    "whose joint_matrix maps table velocities itself (rotate the matrix instead; 0 here)")

class VelocityCommanderNode(ManagedEntities, LifecycleNode):
    def __init__(self, **kwargs):
        """Declares and checks the parameters (a bad one fails here, naming it); nothing is created or sent
        before ``configure``."""
        super().__init__("velocity_commander", **kwargs)
        self.limits = declare_config(self, SafetyConfig, read_only=False)  # applied on set (_apply_limits)
        self.start_limits = self.limits  # a set at run time may tighten them or restore them, never loosen beyond
        p = self.p = {**declare_all(self, COMMANDER_IO), **asdict(self.limits)}  # every parameter's value by name
        if p["servo_command_in_type"] not in SERVO_COMMAND_TYPES:
            raise ValueError(f"velocity_commander: invalid parameter servo_command_in_type: "
                             f"{p['servo_command_in_type']!r} is not one of {', '.join(SERVO_COMMAND_TYPES)}")
        if p["output"] not in OUTPUTS:
            raise ValueError(f"velocity_commander: invalid parameter output: {p['output']!r} is not one of "
                             f"{', '.join(OUTPUTS)}")
        if not p["rate"] > 0.0:
            raise ValueError(f"velocity_commander: invalid parameter rate: must be > 0, got {p['rate']}")
        if p["output"] == "ur_twist" and not p["output_frame_id"].endswith("base"):
            # the UR driver's twist controller takes twists in its base frame (<tf_prefix>base) and drops any other
            # frame: the arm would never move, in no way the sim (which takes the commander's frame) could show
            raise ValueError(f"velocity_commander: invalid parameter output_frame_id: {p['output_frame_id']!r} with "
                             f"output ur_twist: the UR twist controller takes only its base frame (base, or "
                             f"<tf_prefix>base); set output_frame_id and table_yaw_in_output_frame (docs/robot.md, "
                             f"'Which way the arm moves')")
        if p["output"] == "joint_velocity" and p["table_yaw_in_output_frame"] != 0.0:
            raise ValueError(JOINT_OUTPUT_YAW.format(p["table_yaw_in_output_frame"]))
        try:
            self.joint_matrix = joint_matrix(p["joint_matrix"])
        except SafetyConfigError as e:
            raise ValueError(f"velocity_commander: invalid parameter {e}") from None
        self.output_type, self.output_topic = output_of(p)
        self.safety = None  # CommandSafety, from configure on
        self.out_pub = None
        self._active = False
        # a tick, an input, a transition, an e-stop and a parameter set never interleave (re-entrant: the e-stop
        # sends its zero through _tick while it holds the lock, so no tick computed before it is sent after it)
        self._output_lock = threading.RLock()
        self._latched = ""  # the reason of an e-stop latched when the node was cleaned up: configure restores it
        self._watch_clock = None  # the clock ages are measured on (from configure)
        # MoveIt Servo's units (servo output): m/s -> its twist input, None while unknown; what it is, or why not
        self.servo_gain = 1.0
        self.servo_settings = self.servo_problem = ""
        self._entities = []  # what configure created and cleanup destroys: (destroy function, entity)
        self._status = None
        self._last_out = (0.0, 0.0)
        self.grasp = "not requested" if not p["gripper_enabled"] else "pending"
        self._gripper_started = False
        # housekeeping (service / action discovery) runs on wall time: it must not wait for a sim clock
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        # when the waits for the Servo switch service (from configure) and the gripper server (from activate) began
        self._servo_wait_since = self._gripper_wait_since = None
        self.add_on_set_parameters_callback(config_setter(lambda: self.limits, self._apply_limits))

    def _apply_limits(self, limits: SafetyConfig, names):
        """A parameter set of the limits (already checked): in force from the next period on. Refused, the reason
        returned and nothing changed: a limit looser than the node started with (``SafetyConfig.looser_than``),
        and the output frame's yaw while the output moves (it would turn the arm's velocity at once, past the
        acceleration limit)."""
        looser = limits.looser_than(self.start_limits)
        if looser:
            return f"parameter {looser}"
        with self._output_lock:
            yaw_changes = limits.table_yaw_in_output_frame != self.limits.table_yaw_in_output_frame
            if yaw_changes and self.p["output"] == "joint_velocity":
                return JOINT_OUTPUT_YAW.format(limits.table_yaw_in_output_frame)
            if yaw_changes and any(self._last_out):
                vx, vy = self._last_out
                return (f"parameter table_yaw_in_output_frame: not changed while the output moves ({vx:.3f}, "
                        f"{vy:.3f}) m/s; set it while the pusher stands still")
            self.limits = limits
            self.p.update(asdict(limits))
            if self.safety is not None:
                self.safety.cfg = limits
        self.get_logger().info("limits set: " + ", ".join(f"{n} {getattr(limits, n)!r}" for n in names))

    # ------------------------------------------------------------------------------------------ lifecycle
    @transition
    def on_configure(self, state):
        p, lim = self.p, self.limits
        self.scene = load_scene(p["scene"])
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        # simulated time is the world's clock; otherwise ages are steady-clock spans (immune to system clock steps)
        self._watch_clock = period_clock(self)
        with self._output_lock:
            self.safety = CommandSafety(lim, Workspace.from_scene(self.scene), output_period=1.0 / p["rate"])
            if self._latched:
                self.safety.estop(self._latched)
                self.get_logger().error(f"e-stop still latched ({self._latched}): zero output until ~/reset")
        self.out_pub = self.create_lifecycle_publisher(self.output_type, self.output_topic, qos.RELIABLE)
        self.status_pub = self.create_publisher(String, topics.COMMANDER_STATUS, qos.LATCHED)
        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, qos.RELIABLE)
        self._entities = [
            (self.destroy_lifecycle_publisher, self.out_pub), (self.destroy_publisher, self.status_pub),
            (self.destroy_publisher, self.diag_pub),
            (self.destroy_subscription, self.create_subscription(TwistStamped, topics.PUSHER_CMD, self._on_command,
                                                                 qos.RELIABLE)),
            (self.destroy_subscription, self.create_subscription(TwistStamped, topics.PUSHER_CMD_TELEOP,
                                                                 self._on_teleop, qos.RELIABLE)),
            (self.destroy_subscription, self.create_subscription(SceneState, topics.SCENE_STATE, self._on_state,
                                                                 qos.RELIABLE)),
            (self.destroy_service, self.create_service(Trigger, topics.ESTOP_SERVICE, self._on_estop)),
            (self.destroy_service, self.create_service(Trigger, topics.ESTOP_RESET_SERVICE, self._on_reset)),
            (self.destroy_timer, self.create_timer(1.0 / p["rate"], self._tick, clock=self._watch_clock)),
            (self.destroy_timer, self.create_timer(1.0, self._publish_diagnostics, clock=self._watch_clock)),
        ]
        if p["output"] == "servo" and p["switch_command_type"]:
            self._setup_servo_switch()
        if p["output"] == "servo":
            self._setup_servo_settings()
        self.get_logger().info(
            f"configured: output {p['output']} -> {self.output_topic} at {p['rate']:g} Hz; limits "
            f"{lim.max_speed:g} m/s, {lim.max_acceleration:g} m/s^2; watchdog {lim.command_timeout:g} s; workspace "
            f"{'enforced' if lim.enforce_workspace else 'NOT enforced'} for scene {self.scene.name!r}; the output "
            f"stays silent until activate")

    @transition
    def on_activate(self, state):
        if self.servo_problem:  # the arm would move at an unknown speed
            raise RuntimeError(f"refused: {self.servo_problem}")
        with self._output_lock:
            ret = super().on_activate(state)  # enables the output publisher
            self._active = True
        if self.p["gripper_enabled"] and not self._gripper_started:
            self._gripper_started = True
            self._setup_gripper()
        self.get_logger().info("active: sending to the robot")
        return ret

    @transition
    def on_deactivate(self, state):
        with self._output_lock:
            self._send(np.zeros(2))  # the robot is left still, then the output goes silent
            self.safety.output_stopped()
            self._active = False
            ret = super().on_deactivate(state)
            self._tick()  # says inactive now, not a period later: its silence from here on is by design (the
            # launch's hang watch reads the status; a shutdown from active destroys the status publisher next)
        self.get_logger().info("inactive: zero sent, output silent")
        return ret

    def _take_down(self):
        with self._output_lock:  # no tick, input or e-stop in flight uses what cleanup destroys
            super()._take_down()

    def _forget(self):
        self._gripper_started = False  # a gripper wait cut short by cleanup starts again at the next activate
        with self._output_lock:
            if self.safety is not None and self.safety.estopped:
                self._latched = self.safety.estop_reason  # only ~/reset clears it, not cleanup
            self.safety = self.out_pub = None
        self._status = None

    def _now(self) -> float:
        """Now on the watchdog's clock (read under the output lock, so the times given to the safety layer are in
        the order it gets them: one before another means the clock went back)."""
        return self._watch_clock.now().nanoseconds * 1e-9

    # ------------------------------------------------------------------------------------------ inputs
    def _on_command(self, msg: TwistStamped, source: str = "planner"):
        topic = topics.PUSHER_CMD if source == "planner" else topics.PUSHER_CMD_TELEOP
        want = self.p["input_frame_id"]
        if want and msg.header.frame_id != want:
            self.get_logger().warning(f"{topic} rejected: frame_id {msg.header.frame_id!r} is not {want!r}",
                                      throttle_duration_sec=1.0)
            return
        with self._output_lock:
            if self.safety is None:  # cleaned up while this callback waited
                return
            reason = self.safety.command(self._now(), msg.twist.linear.x, msg.twist.linear.y, source)
        if reason:
            self.get_logger().warning(f"{topic}: {reason}", throttle_duration_sec=1.0)

    def _on_teleop(self, msg: TwistStamped):
        self._on_command(msg, "teleop")

    def _on_state(self, msg: SceneState):
        ok_frame = msg.header.frame_id == self.p["input_frame_id"] or not self.p["input_frame_id"]
        if not ok_frame:
            self.get_logger().warning(f"scene_state ignored: frame_id {msg.header.frame_id!r} is not "
                                      f"{self.p['input_frame_id']!r}", throttle_duration_sec=1.0)
        # the stamp tells the follow check a new measurement from a repeated one (the ingest stamps a state with
        # the oldest valid body's measurement time, and holds an occluded body's last pose) or one out of order
        measured_at = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self._output_lock:
            if self.safety is not None:
                self.safety.pusher_state(self._now(), msg.pusher_x, msg.pusher_y,
                                         msg.pusher_tracking_valid and ok_frame, measured_at=measured_at)

    def stop_activity(self, timeout: float = 5.0) -> bool:
        """At shutdown: latch the e-stop and send zero at once, so the robot is left still (a forward velocity
        controller would hold the last command forever); an inactive commander sends nothing. The process ends right
        after: the zero is repeated every period until every reader has acknowledged it (a reader that lost it on a
        starved host gets it: ``qos.repeat_until_acknowledged``), for at most ``qos.LAST_MESSAGE_ACK_TIMEOUT``."""
        with self._output_lock:
            if self.safety is None:
                return True
            self.safety.estop("shutdown")
            if not self._active:  # its output is silent: nothing goes out
                return True

        def send_zero():
            with self._output_lock:
                self._send(np.zeros(2))
        limit = min(timeout, qos.LAST_MESSAGE_ACK_TIMEOUT)
        readers = self.out_pub.get_subscription_count()  # as the stop begins (the arm's driver may stop too)
        acked, sent, took = qos.repeat_until_acknowledged(self.out_pub, send_zero, 1.0 / self.p["rate"], limit)
        if not readers:
            self.get_logger().info(f"stopped: zero sent on {self.output_topic}, to no reader (none was matched as "
                                   f"the stop began: the arm's driver had gone first)")
        elif acked:
            self.get_logger().info(f"stopped: zero sent on {self.output_topic} ({sent}x), acknowledged by every "
                                   f"reader ({readers} as the stop began) after {took:.2f} s")
        else:  # the arm's driver may be among the readers that have it: only it can say
            self.get_logger().warning(
                f"stopped: zero sent on {self.output_topic} ({sent}x), but not every reader ({readers} as the stop "
                f"began) acknowledged it within {limit:g} s (a reader whose process ended without leaving DDS, such "
                f"as a ros2 launch ended by SIGTERM, never does): make sure the arm is still")
        return acked

    def _on_estop(self, req, res):
        with self._output_lock:  # no tick computed before the latch can publish after it
            if self.safety is None:  # cleaned up while this call waited: nothing is sent
                res.success, res.message = False, "not configured: nothing is sent"
                return res
            self.safety.estop("e-stop service called")
            self._tick()  # zeros out now, not one period later
        res.success, res.message = True, "e-stop latched: zero velocity until ~/reset"
        self.get_logger().error(res.message)
        return res

    def _on_reset(self, req, res):
        with self._output_lock:
            if self.safety is None:
                res.success, res.message = False, "not configured"
                return res
            was = self.safety.estopped
            self.safety.reset()
            self._latched = ""
            self._tick()  # its status says so now (the planner refuses goals while it hears "estop")
        res.success = True
        res.message = "e-stop cleared; waiting for a new command" if was else "not e-stopped; nothing to reset"
        self.get_logger().warning(res.message)
        return res

    # ------------------------------------------------------------------------------------------ output
    def _tick(self):
        with self._output_lock:
            if self.safety is None:  # cleaned up while this tick waited
                return
            if self._active:
                hold = None  # zero for a reason of this node's: the limiter then ramps the next command from rest
                if self.servo_gain is None:  # unknown units: no speed is safe (said first: no grasp helps)
                    hold = (SERVO_UNKNOWN if self.servo_problem else SERVO_WAITING,
                            self.servo_problem or f"asking {self.p['servo_parameters_service']}")
                elif self.p["require_grasp"] and self.grasp != "grasped":
                    hold = ("waiting for grasp", f"gripper: {self.grasp}")
                out = self.safety.step(self._now(), hold=hold)
                status, detail, v = out.status, out.detail, np.array([out.vx, out.vy])
                self._send(v)
            else:
                status, detail, v = INACTIVE, "output silent until activate", np.zeros(2)
            self._last_out = (float(v[0]), float(v[1]))
            if status == self._status:
                return
            self._status = status
            text = f"{status}: {detail}" if detail else status
            self.status_pub.publish(String(data=text))  # under the lock: cleanup cannot destroy it meanwhile
        if status in ("watchdog", "clock jump", "no pusher state", ESTOP, "waiting for grasp", SERVO_UNKNOWN):
            self.get_logger().warning(f"state -> {text}")
        elif status.startswith("limited") or status in ("ok", "idle"):  # routine: every push ramps and ends
            self.get_logger().debug(f"state -> {text}")
        else:
            self.get_logger().info(f"state -> {text}")

    def _send(self, v_table):
        """Publish on the output (a lifecycle publisher: silent unless active); a non-finite output is sent as
        zero (never command NaN: stop instead)."""
        if self.p["output"] == "joint_velocity":
            q = self.joint_matrix @ v_table
            if not np.all(np.isfinite(q)):
                q = np.zeros(2)
            self.out_pub.publish(Float64MultiArray(data=[float(q[0]), float(q[1])]))
            return
        v = rotate_planar(v_table, self.limits.table_yaw_in_output_frame)
        if self.p["output"] == "servo":
            v = v * (self.servo_gain or 0.0)  # m/s -> Servo's input units (zero while they are unknown)
        if not np.all(np.isfinite(v)):
            v = np.zeros(2)
        msg = TwistStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.p["output_frame_id"]
        msg.twist.linear.x, msg.twist.linear.y = float(v[0]), float(v[1])
        self.out_pub.publish(msg)

    def _publish_diagnostics(self):
        safety = self.safety
        if safety is None:  # cleaned up while this callback waited
            return
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        status = self._status or "starting"
        values = {"output": self.p["output"], "topic": self.output_topic, "vx": f"{self._last_out[0]:.4f}",
                  "vy": f"{self._last_out[1]:.4f}", "estop": str(safety.estopped), "gripper": self.grasp,
                  "source": safety.source, "servo": self.servo_problem or self.servo_settings,
                  "follow check": safety.follow_state}
        arr.status.append(DiagnosticStatus(level=_LEVEL.get(status, DiagnosticStatus.OK),
                                           name="velocity_commander", hardware_id=self.p["output"],
                                           message=status, values=[KeyValue(key=k, value=v)
                                                                   for k, v in values.items()]))
        self.diag_pub.publish(arr)

    # ------------------------------------------------------------------------------------------ start-up
    def _startup_expired(self, since: float) -> bool:
        return time.monotonic() - since > self.p["startup_timeout"]

    def _setup_servo_settings(self):
        """Start finding out MoveIt Servo's units (see the module docstring)."""
        p = self.p
        fallback = (p["servo_command_in_type"], p["servo_scale_linear"] or None, "servo_command_in_type",
                    ("servo_command_in_type", "servo_scale_linear"))
        with self._output_lock:
            self.servo_gain, self.servo_settings, self.servo_problem = None, "", ""
        name = p["servo_parameters_service"]
        if not name:
            self._use_servo_settings(*fallback)
            return
        if self._sim_time:  # no Servo in the simulation: the parameter holds unless one answers
            self._use_servo_settings(*fallback)
        self._servo_params_since = time.monotonic()
        self._servo_asked = None  # (when, futures) of the call in flight
        self._servo_found = False  # its service was seen
        self._servo_params_client = self.create_client(GetParameters, name)
        self._servo_params_timer = self.create_timer(0.2, self._try_servo_parameters, clock=self._steady)
        self._entities += [(self.destroy_client, self._servo_params_client),
                           (self.destroy_timer, self._servo_params_timer)]

    def _try_servo_parameters(self):
        """Ask Servo once its parameter service is there, and again when a call goes unanswered for
        ``startup_timeout`` or fails, until it answers (the output zero, ``activate`` refused meanwhile): a Servo
        started late, or restarted, is found without a restart of the commander. A problem is logged once."""
        name, timeout = self.p["servo_parameters_service"], self.p["startup_timeout"]
        asked = self._servo_asked
        if asked is not None:  # a call in flight
            if time.monotonic() - asked[0] <= timeout:
                return
            self._servo_asked = None  # unanswered: asked again once the service is there
            self._servo_problem(f"servo_command_in_type: MoveIt Servo's parameter service ({name}) took a call and did "
                                f"not answer it within startup_timeout {timeout:g} s: asking again")
        if self._servo_params_client.service_is_ready():
            if self.servo_problem and not self._servo_found:  # (said once: a call that fails is asked again)
                self.get_logger().warning(f"{name} is there, {time.monotonic() - self._servo_params_since:.0f} s "
                                          f"after configure: asking it")
            self._servo_found = True
            # one name a request: a parameter service answers nothing at all when one name is not declared
            names = (topics.SERVO_COMMAND_IN_TYPE, topics.SERVO_SCALE_LINEAR)
            futures = [self._servo_params_client.call_async(GetParameters.Request(names=[n])) for n in names]
            self._servo_asked = (time.monotonic(), futures)
            for f in futures:
                f.add_done_callback(lambda _, fs=futures: self._servo_parameters_answered(fs))
        elif self._startup_expired(self._servo_params_since) and not self.servo_problem:
            if self._sim_time:  # the simulation runs no Servo: expected, not a fault
                self._servo_params_timer.cancel()
                self.get_logger().info(
                    f"no MoveIt Servo answered at {name} within startup_timeout {timeout:g} s (none runs in the "
                    f"simulation): sending in servo_command_in_type {self.p['servo_command_in_type']} as set")
                return
            self._servo_problem(
                f"servo_command_in_type: MoveIt Servo's parameters ({name}) did not answer within startup_timeout "
                f"{timeout:g} s, so whether it takes m/s (speed_units) or fractions of scale.linear (unitless) is "
                f"unknown: start Servo (this node keeps asking; the output stays zero until it answers), or set "
                f"servo_parameters_service to '' and servo_command_in_type (and servo_scale_linear) to say it")

    def _servo_problem(self, text: str):
        """Servo's units are unknown for this reason (output zero): said once, not at every retry."""
        with self._output_lock:
            if self.servo_gain is not None:  # known (an answer came meanwhile; the simulation's setting)
                return
            changed, self.servo_problem = text != self.servo_problem, text
        if changed:
            self.get_logger().error(text)

    def _servo_parameters_answered(self, futures):
        """Both answers in (each future's callback calls this; the last one to finish decides). A call that
        failed is asked again; an answer decides (a bad one is fixed at Servo, then configure again)."""
        if not all(f.done() for f in futures):
            return
        with self._output_lock:
            if self._servo_asked is None or self._servo_asked[1] is not futures:  # decided, or given up on
                return
            self._servo_asked = None
        name, values = self.p["servo_parameters_service"], []
        for f in futures:
            try:
                values += [parameter_value_to_python(v) for v in f.result().values] or [None]  # None: undeclared
            except Exception as e:  # noqa: BLE001 - report whatever the service call did
                self._servo_problem(f"servo_command_in_type: MoveIt Servo's parameter service ({name}) failed: {e!r}; "
                                    f"asking again")
                return
        self._servo_params_timer.cancel()
        self._use_servo_settings(*values[:2], name, (topics.SERVO_COMMAND_IN_TYPE, topics.SERVO_SCALE_LINEAR))

    def _use_servo_settings(self, in_type, scale, source: str, names):
        try:
            gain = servo_linear_gain(in_type, scale, names)
        except SafetyConfigError as e:
            with self._output_lock:
                self.servo_gain, self.servo_problem = None, f"{e} (from {source})"
            self.get_logger().error(f"MoveIt Servo's units unknown: {self.servo_problem}; the output stays zero and "
                                    f"activate is refused")
            return
        settings = in_type + (f", scale.linear {scale:g} m/s per unit" if in_type == "unitless" else "")
        with self._output_lock:
            self.servo_gain, self.servo_problem = gain, ""
            self.servo_settings = f"{settings} (from {source})"
        self.get_logger().info(f"MoveIt Servo takes {self.servo_settings}: m/s are sent x {gain:g}")
        if in_type == "unitless" and self.limits.max_speed > scale:
            self.get_logger().warning(f"max_speed {self.limits.max_speed:g} m/s is more than one unit of Servo's "
                                      f"scale.linear ({scale:g} m/s): Servo may not reach it")

    def _setup_servo_switch(self):
        name = self.p["servo_switch_service"]
        self._servo_wait_since = time.monotonic()  # the wait starts at configure, not at construction
        try:
            from moveit_msgs.srv import ServoCommandType  # noqa: PLC0415 - only on a full ROS install
        except ImportError:
            self.get_logger().warning(
                f"moveit_msgs is not installed: NOT calling {name}. MoveIt Servo (Iron and later) drops twists "
                f"until its command type is TWIST: install ros-$ROS_DISTRO-moveit-msgs, or call it by hand: "
                f"ros2 service call {name} moveit_msgs/srv/ServoCommandType \"{{command_type: 1}}\"")
            return
        self._servo_type = ServoCommandType
        self._servo_client = self.create_client(ServoCommandType, name)
        self._servo_timer = self.create_timer(0.5, self._try_servo_switch, clock=self._steady)
        self._entities += [(self.destroy_client, self._servo_client), (self.destroy_timer, self._servo_timer)]

    def _try_servo_switch(self):
        name = self.p["servo_switch_service"]
        if self._servo_client.service_is_ready():
            self._servo_timer.cancel()
            req = self._servo_type.Request(command_type=self._servo_type.Request.TWIST)
            self._servo_client.call_async(req).add_done_callback(self._servo_switched)
        elif self._startup_expired(self._servo_wait_since):
            self._servo_timer.cancel()
            self.get_logger().warning(
                f"{name} is not available after {self.p['startup_timeout']:g} s: MoveIt Servo is not running or "
                f"is Humble's (which has no command types; start it with ~/start_servo). Twists are sent anyway.")

    def _servo_switched(self, future):
        try:
            ok = future.result().success
        except Exception as e:  # noqa: BLE001 - report whatever the service call did
            ok = False
            self.get_logger().error(f"{self.p['servo_switch_service']} failed: {e!r}")
        if ok:
            self.get_logger().info("MoveIt Servo command type switched to TWIST")
        else:
            self.get_logger().error(f"{self.p['servo_switch_service']} refused the switch to TWIST: Servo will "
                                    f"drop the twists")

    def _setup_gripper(self):
        name = self.p["gripper_action"]
        self._gripper_wait_since = time.monotonic()  # the wait starts at activate, not at construction
        try:
            from control_msgs.action import GripperCommand  # noqa: PLC0415 - only on a full ROS install
            from ..ros.actions import ActionClient  # noqa: PLC0415
        except ImportError:
            self.grasp = "skipped (control_msgs not installed)"
            self.get_logger().warning(
                f"control_msgs is not installed: gripper close on the pusher SKIPPED ({name}). On a real robot "
                f"install ros-$ROS_DISTRO-control-msgs; set gripper_enabled: false where there is no gripper."
                + (" require_grasp is true: the output stays zero." if self.p["require_grasp"] else ""))
            return
        self._gripper_type = GripperCommand
        self._gripper = ActionClient(self, GripperCommand, name)
        self.grasp = "waiting for the gripper action server"
        self._gripper_timer = self.create_timer(0.5, self._try_gripper, clock=self._steady)
        self._entities += [(ActionClient.destroy, self._gripper), (self.destroy_timer, self._gripper_timer)]

    def _try_gripper(self):
        name = self.p["gripper_action"]
        if self._gripper.server_is_ready():
            self._gripper_timer.cancel()
            goal = self._gripper_type.Goal()
            goal.command.position = float(self.p["gripper_close_position"])
            goal.command.max_effort = float(self.p["gripper_max_effort"])
            self.grasp = "closing"
            self.get_logger().info(f"closing the gripper on the pusher ({name}, position "
                                   f"{goal.command.position:g})")
            self._gripper.send_goal_async(goal).add_done_callback(self._gripper_accepted)
        elif self._startup_expired(self._gripper_wait_since):
            self._gripper_timer.cancel()
            self.grasp = "failed (no gripper action server)"
            self.get_logger().error(f"gripper action server {name} not available after "
                                    f"{self.p['startup_timeout']:g} s: the pusher is NOT grasped")

    def _gripper_accepted(self, future):
        handle = future.result()
        if not handle.accepted:
            self.grasp = "failed (goal rejected)"
            self.get_logger().error("the gripper rejected the close goal: the pusher is NOT grasped")
            return
        handle.get_result_async().add_done_callback(self._gripper_done)

    def _gripper_done(self, future):
        r = future.result().result
        if r.stalled:  # closing on the pusher stops on it: that is the good grasp
            self.grasp = "grasped"
            self.get_logger().info(f"pusher grasped (gripper stalled at {r.position:.4f}, effort {r.effort:.1f})")
        elif r.reached_goal:
            self.grasp = "failed (closed fully: no pusher in the gripper?)"
            self.get_logger().error(f"gripper closed fully to {r.position:.4f} without stalling: the pusher is "
                                    f"probably not in the gripper")
        else:
            self.grasp = "failed (neither stalled nor reached the goal)"
            self.get_logger().error("gripper close ended without a grasp")


main = node_main(VelocityCommanderNode)
