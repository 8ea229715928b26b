"""``parapush soak --robot``: the robot launch as the robot runs it, under faults of the robot's own kinds.

``ros2 launch parapush_ros robot.launch.py`` starts mocap_ingest, parareal_predictor, mpc_planner and
velocity_commander, each its own process, on the **system clock** (no ``/clock``: epoch-scale stamps). A stand-in
for the cell runs beside it as a process of its own: ``mujoco_sim`` with ``clock: system`` is the arm behind MoveIt
Servo's interface (twists on ``/servo_node/delta_twist_cmds``, halted when older than Servo's
``incoming_command_timeout``; ``moveit_servo.command_in_type`` alternating between ``unitless``, Servo's default,
and ``speed_units`` from one start of the stack to the next, which the commander reads at configure from the
stand-in's parameter service as it reads a real Servo's) and the mocap system (``PoseStamped`` per body as the
configured driver publishes it, stamped on the mocap host's clock: ``clock_offset``). The soak itself is a third
process: a node that sends goals, injects faults, and watches the arm's input. The planner is ``--planner``
(``planner_parameters``): ``fast`` by default, re-planned every ``--control-duration``; ``mpc``, the sampling MPC
with controls that long.

Episodes follow one another, each a ``PushObject`` goal 4-10 cm from the object with one fault 0.3-1 s into it
(every kind once first, in an order drawn from ``--seed``, then drawn at random; a push that ended before its
fault still gets it, on an idle arm, and ``faults_during_push`` counts those that met a push; ``--fault-free``:
every goal without a fault, the push loop's yardstick alone):

  none                 a plain goal (the yardstick for goals_reached)
  cancel               the goal cancelled
  estop                ``velocity_commander/estop`` held 0.5-1.5 s, then ``reset`` (the push ends aborted at the
                       e-stop: a reset does not resume it, since 2026-12-03)
  mocap_offset_10ms    the mocap host's clock steps 10 ms / 200 ms / 2 s ahead of ours for 2 s (2 s is beyond
  mocap_offset_200ms   the planner's ``max_clock_offset``: it must refuse those states and say to check clock
  mocap_offset_2s      sync), then back
  mocap_clock_back     the mocap host's clock jumps back by 1 s for 2 s
  max_speed_set        ``ros2 param set /velocity_commander max_speed 0.05`` for 2 s, then back to its value
  teleop               a person's twist on ``pusher_cmd_teleop`` for 1.5 s mid-push (it has priority)
  sigint, sigterm      the whole stack's process group gets SIGINT (Ctrl-C) / SIGTERM (systemd, docker stop)
                       mid-push; every node must exit 0 and leave a zero twist last; then a fresh start
  commander_hang       velocity_commander stopped (SIGSTOP: a hang, not an exit) mid-push (or idle, where the push
                       ended first); the launch must send the arm a zero, say so and kill it
                       (``bringup.COMMANDER_HANG_TIMEOUT``), and end; the last twist
                       must be zero, every other node exit 0; then a fresh start

and, once per start, hostile parameter sets (a read-only parameter, a negative speed limit, a non-finite one, a
non-finite mocap offset) that must be refused naming the parameter.

Measured (on the arm's input; twists are converted to m/s with the stand-in's Servo units; a twist is placed in time
by its stamp, which the commander takes from the system clock the soak reads too):

  unsafe_commands      twists faster than the commander's max_speed in force when they were stamped
  nonzero_after_stop   non-zero twists stamped after a stop had taken the arm to zero and before anything allowed
                       motion again: after an e-stop's answer (until reset), after the first zero that follows a
                       cancel or the end of a push (the commander ramps a planner's zero down at max_acceleration:
                       that ramp is the stop) until the next goal or teleop; a SIGINT / SIGTERM whose last twist
                       on the arm's input was not zero counts one
  param_sets_ignored   max_speed sets that were answered successful but twists stamped after the answer exceeded
                       the new limit
  clock_faults         per kind: injected, during a push, and how many of those the planner answered with a clock
                       complaint on planner/status (it must, beyond its max_clock_offset)
  goals_reached        per fault kind: goals sent, reached
  exceptions           tracebacks and RCL errors in any node's output
  estops_unasked       e-stops the stack latched by itself (the commander's follow check, ...), which the soak
                       resets as an operator before its next goal: one of the follow check in a goal where the
                       stand-in world stood still for FOLLOW_STALL (its host stalled: the simulated arm did not
                       move) is explained; any other is a failure (an arm that worked was stopped)
  memory               each node's RSS (psutil): growth from the end of a start's warm-up (20 s) to its end
  fault_free           goals without a fault (the yardstick of the push loop): sent, reached, and the same over
                       the goals in which the stand-in world stood still (its host stalled, ``skipped_total_s`` of
                       its diagnostics) for less than STANDIN_STALL: a cell's arm and mocap never wait
  episodes             per goal: fault, outcome, actions, final distance, the goal's and the pusher's distance from
                       the object, the planner's pauses (and why) and late plans, the stand-in's stall, the load
  exits                per stop: each node's exit status, parapush's processes still running EXIT_TIMEOUT after
                       it (``left_running``: a failure) and other packages' (``others_left_running``: reported),
                       what each was doing then (``left_running_where``: its threads' states and wait channels),
                       and the nodes whose middleware cleanup hung after a clean stop (``teardown_hangs``: rclpy's
                       destroy_node, ``ros/node.py``; they exit with their stop's status; counted, not a failure)

Figures are wall-clock behaviour of real processes on this host: a busy host reaches fewer goals, but every safety
figure above holds at any speed (stamps, not arrival times, decide). Exit status non-zero when a safety figure,
a hostile set or a node's exit failed. ``--minutes`` runs at least until every kind of episode happened once (without
``--fault-free``).
"""
from __future__ import annotations

import collections
import contextlib
import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ..core.robot.command_safety import ESTOP, NOT_READY, RESET_HEARD, SafetyConfig, status_parts
from ..ros import topics

FAULTS = ("none", "cancel", "estop", "mocap_offset_10ms", "mocap_offset_200ms", "mocap_offset_2s",
          "mocap_clock_back", "max_speed_set", "teleop", "commander_hang", "sigint", "sigterm")
MOCAP_OFFSETS = {"mocap_offset_10ms": 0.01, "mocap_offset_200ms": 0.2, "mocap_offset_2s": 2.0,
                 "mocap_clock_back": -1.0}
CLOCK_FAULT_HOLD = 2.0  # s a mocap clock fault lasts
SERVO_UNITS = ("unitless", "speed_units")  # alternating per start: Servo's default first
SERVO_SCALE_LINEAR = 0.4  # m/s per unit (MoveIt Servo's default scale.linear)
GOAL_DISTANCE = (0.04, 0.10)  # m from the object
GOAL_TOLERANCE = 0.02  # m: pushes long enough to meet their fault
FAULT_AFTER = (0.3, 1.0)  # s after a goal is accepted
GOAL_EDGE_MARGIN = 0.12  # m inside the table's edges
GOAL_SECONDS = 8.0  # s of pushing a goal may take (max_actions = this / control_duration)
START_TIMEOUT = 300.0  # s (wall) for a start of the stack to be ready: imports of torch and MuJoCo on a busy host
EXIT_TIMEOUT = 60.0  # s for the stack to exit after SIGINT / SIGTERM
ANSWER_TIMEOUT, ANSWER_ATTEMPTS = 10.0, 3  # s for a service's answer, and how often a request is sent
RSS_WARMUP = 20.0  # s after a start before its RSS baseline
SPEED_TOL = 1e-6  # m/s of rounding on a speed limit
ZERO = 1e-9  # m/s: a twist below this is zero
HOSTILE_SETS = (  # (node, parameter, value, what the refusal must name)
    ("velocity_commander", "scene", "clutter_push", "scene"),
    ("velocity_commander", "max_speed", -1.0, "max_speed"),
    ("velocity_commander", "max_acceleration", math.inf, "max_acceleration"),
    # looser than the node started with: a restart's change, not a set's
    ("velocity_commander", "max_speed", 5.0, "max_speed: 5.0 is above"),
    ("velocity_commander", "enforce_workspace", False, "enforce_workspace: False is looser"),
    ("mujoco_sim", "clock_offset", math.nan, "clock_offset"),
)
PLANNERS = ("fast", "mpc")  # the soak's planners (``planner_parameters``): the first is the default
STANDIN_STALL = 0.1  # s the stand-in world may stand still in a goal (its host stalled) and the goal still count
# as one the stack alone decided: mocap_ingest's default timeout (a longer hole in the poses is a dropout)
FOLLOW_STALL = 0.5 * SafetyConfig().follow_window  # s: a stand-in world that stood still this long in a goal
# explains the commander's follow check e-stopping it (the simulated arm did not move while the commander sent)
OUR_NODES = ("mocap_ingest", "parareal_predictor", "mpc_planner", "velocity_commander", "mujoco_sim")


def launch_available() -> str:
    """Empty when ``ros2 launch`` with launch_ros can run here, else why not (one line)."""
    if shutil.which("ros2") is None or importlib.util.find_spec("launch_ros") is None:
        return ("needs the real `ros2 launch` (a ROS 2 install, or the overlay ../shared/ros2-launch/build.sh builds: "
                "source build/ros2-launch/setup.bash)")
    return ""


class Process:
    """A command in its own process group (as a terminal or a service manager runs it), output in a file."""

    def __init__(self, argv: list, log: Path, env: dict | None = None):
        self.argv, self.log = argv, log
        self._out = open(log, "w")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=None if env is None else {**os.environ, **env})

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def send(self, sig: int):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGINT, timeout: float = EXIT_TIMEOUT) -> int:
        """Signal the whole group and wait; SIGKILL after ``timeout`` (then the status is the kill's)."""
        self.send(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        self._out.close()
        return code

    def exits(self) -> dict:
        """ros2 launch's report of each process: {name: exit code}."""
        text = self.output()
        out = {m[1]: 0 for m in re.finditer(r"\[INFO\] \[([\w-]+)\]: process has finished cleanly", text)}
        out.update({m[1]: int(m[2]) for m in re.finditer(
            r"\[ERROR\] \[([\w-]+)\]: process has died \[pid \d+, exit code (-?\d+)", text)})
        return {name.rsplit("-", 1)[0]: code for name, code in out.items()}


def where_stuck(pid: int) -> str:
    """What a process left running was doing, from /proc (readable without ptrace): its CPU time and each thread's
    state and kernel wait channel, the main thread first and the others counted ("main S futex_do_wait; 14 others:
    11 S futex_do_wait, ..."), so that a deadlock (every thread asleep on a futex) can be told from a busy loop (R)
    or a full pipe (pipe_write) in a run that cannot be repeated."""
    def thread(tid) -> str:
        try:
            state = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"/proc/{pid}/task/{tid}/wchan").read_text().strip()
            return f"{state} {wchan if wchan not in ('', '0') else '-'}"  # (0: running)
        except OSError:
            return "gone"
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        ticks = [int(v) for v in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]]
    except (OSError, ValueError):
        return "gone"
    counts = collections.Counter(thread(t) for t in tids if t != pid)
    others = ", ".join(f"{n} {what}" for what, n in counts.most_common())
    cpu = sum(ticks) / os.sysconf("SC_CLK_TCK")
    return f"main {thread(pid)}; {sum(counts.values())} others: {others or '-'}; cpu {cpu:.1f} s"


def teardown_hangs(text: str) -> list:
    """Our nodes whose middleware cleanup hung after a clean stop (``ros/node.py``: faulthandler's traceback after
    ``DESTROY_LIMIT_S``, then exit with the stop's status): rclpy's, not the node's; counted, not failed."""
    names = {m[1].rsplit("-", 1)[0] for m in re.finditer(r"^\[([\w-]+)\] Timeout \(", text, re.MULTILINE)}
    return sorted(names & set(OUR_NODES))


def node_errors(text: str) -> list:
    """Lines of our nodes' output that show a traceback or an RCL error."""
    names = "|".join(OUR_NODES)
    return [ln for ln in text.splitlines()
            if (re.match(rf"\[({names})-\d+\]", ln) or not ln.startswith("["))
            and ("Traceback" in ln or "RCLError" in ln or "exception" in ln.lower())]


@dataclass
class Twist:
    stamp: float  # s, system clock (the commander's)
    v: np.ndarray  # m/s of the pusher (Servo units converted)


@dataclass
class Window:
    """A stretch of time in which the arm's input must be zero: from ``start`` (or from the first zero twist at or
    after ``after``, where ``start`` is None) to ``end``."""
    kind: str
    after: float
    start: float | None = None
    end: float = math.inf


@dataclass
class Results:
    unsafe: list = field(default_factory=list)
    nonzero_after_stop: list = field(default_factory=list)
    param_sets: list = field(default_factory=list)  # (accepted at, limit, fault end)
    param_sets_ignored: int = 0
    clock_faults: dict = field(default_factory=dict)
    goals: dict = field(default_factory=dict)
    hostile: list = field(default_factory=list)
    exits: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    exceptions: list = field(default_factory=list)
    rss: dict = field(default_factory=dict)
    teleop: dict = field(default_factory=lambda: {"episodes": 0, "twists": 0, "followed": 0})
    starts: list = field(default_factory=list)
    exits_last_zero: list = field(default_factory=list)
    hangs: list = field(default_factory=list)  # per commander_hang: moving when stopped, said, silence seen (s)
    faults_during_push: dict = field(default_factory=dict)
    episodes: list = field(default_factory=list)  # one record per goal (``RobotSoak._record``)
    estops_unasked: list = field(default_factory=list)  # e-stops the soak did not ask for, reset as an operator
    goal_answers_lost: int = 0  # goals sent again because their answer never came (``Monitor.send_goal``)


class Monitor:
    """The soak's rclpy nodes (system clock): one spun on a thread of its own watches the arm's input and the
    statuses; the clients (action, services, parameters) are on a second node spun only by the soak's main thread,
    which also sends their requests: rclpy's (Jazzy) ActionClient registers a request's future after sending it,
    so an executor thread that takes the answer first drops it (seen here: a goal never answered)."""

    def __init__(self, scene):
        import rclpy  # noqa: PLC0415
        from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415
        from geometry_msgs.msg import TwistStamped  # noqa: PLC0415
        from parapush_msgs.action import PushObject  # noqa: PLC0415
        from parapush_msgs.msg import SceneState  # noqa: PLC0415
        from ..ros.actions import ActionClient  # noqa: PLC0415
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: PLC0415
        from std_msgs.msg import String  # noqa: PLC0415
        from std_srvs.srv import Trigger  # noqa: PLC0415

        from ..ros import qos  # noqa: PLC0415

        self.rclpy, self.PushObject, self.Trigger, self.TwistStamped = rclpy, PushObject, Trigger, TwistStamped
        # a context of its own (not rclpy's default, which initialises once per process): a process may run several
        # soaks one after another (``--seeds`` units), each in its own ROS domain
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("parapush_robot_soak", context=self.context)
        self.lock = threading.Lock()
        self.twists: list[Twist] = []
        self.last_state = None
        self.planner_status: list = []  # (receipt time, text)
        self.commander_status = ""  # the velocity commander's latest ~/status
        self.standin_skipped = 0.0  # s the stand-in world skipped ahead since its start (its host stalled)
        n = self.node
        # every twist, even when this process is starved for a while: a deep queue (the arm's input is judged whole)
        n.create_subscription(TwistStamped, topics.SERVO_TWIST, self._on_twist,
                              QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE))
        n.create_subscription(SceneState, topics.SCENE_STATE, self._on_state, qos.RELIABLE)
        n.create_subscription(String, topics.PLANNER_STATUS, self._on_status, qos.RELIABLE)
        n.create_subscription(String, topics.COMMANDER_STATUS_OF_PLANNER, self._on_commander_status, qos.LATCHED)
        n.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, qos.RELIABLE)
        self.teleop = n.create_publisher(TwistStamped, topics.PUSHER_CMD_TELEOP, qos.RELIABLE)
        c = self.client_node = rclpy.create_node("parapush_robot_soak_client", context=self.context)
        self.action = ActionClient(c, PushObject, topics.PUSH_ACTION)
        self.client_executor = SingleThreadedExecutor(context=self.context)
        self.client_executor.add_node(c)
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(n)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True, name="soak-monitor")
        self.thread.start()

    @staticmethod
    def now() -> float:
        return time.time()

    def _on_twist(self, msg):
        """Raw, in the Servo's units: converted by stamp in ``RobotSoak.twists`` (a twist of the stack that is
        stopping can arrive after the next start changed the units)."""
        with self.lock:
            self.twists.append(Twist(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
                                     np.array([msg.twist.linear.x, msg.twist.linear.y])))

    def _on_state(self, msg):
        self.last_state = msg

    def _on_status(self, msg):
        with self.lock:
            self.planner_status.append((self.now(), msg.data))

    def _on_commander_status(self, msg):
        self.commander_status = msg.data

    def said_since(self, t: float, words: str) -> bool:
        """Whether planner/status has said ``words`` since ``t`` (the monitor's clock)."""
        with self.lock:
            return any(when >= t and words in text for when, text in self.planner_status)

    def _on_diagnostics(self, msg):
        for st in msg.status:
            if st.name == "mujoco_sim":
                value = next((kv.value for kv in st.values if kv.key == "skipped_total_s"), None)
                if value is not None:
                    self.standin_skipped = float(value)

    def pusher_xy(self):
        s = self.last_state
        return None if s is None else np.array([s.pusher_x, s.pusher_y])

    def object_xy(self, name: str):
        s = self.last_state
        return None if s is None else next((np.array([o.x, o.y]) for o in s.objects if o.name == name), None)

    def pause(self, seconds: float, until=None):
        """Spin the clients' node for ``seconds`` (or until ``until()``): the main thread's only way to wait."""
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end and not (until is not None and until()):
            self.client_executor.spin_once(timeout_sec=min(0.01, max(0.0, t_end - time.monotonic())))

    def wait(self, future, timeout: float, what: str):
        self.pause(timeout, future.done)
        if not future.done():
            raise TimeoutError(f"{what}: no answer within {timeout:g} s")
        return future.result()

    def send_goal(self, goal, timeout: float = 30.0):
        """A PushObject goal, sent again when its answer does not come within ``timeout`` (``ros.actions.ResentGoal``:
        a lost answer would otherwise stop the soak). Returns (goal handle, answers lost)."""
        from ..ros.actions import ResentGoal  # noqa: PLC0415

        sent = ResentGoal(self.action, goal, timeout=timeout, attempts=ANSWER_ATTEMPTS)
        while (handle := sent.poll()) is None:
            self.pause(1.0, lambda: sent.future.done())
        return handle, sent.lost

    def request(self, srv_type, service: str, request, what: str):
        """One service request, sent again when its answer does not come: with Fast DDS a request sent as soon as
        a service is discovered can be lost (the server has not matched the client yet). Each attempt has a client
        of its own, as each ``ros2 service call`` or ``ros2 param set`` does: a client kept across the stack's
        restarts once went unanswered three times in a row (a new commander's parameter service, after a start).
        Every request the soak makes is idempotent (the same set, e-stop or reset again). Returns the response."""
        for attempt in range(ANSWER_ATTEMPTS):
            client = self.client_node.create_client(srv_type, service)
            try:
                if not client.wait_for_service(timeout_sec=60.0):
                    raise TimeoutError(f"{what}: service {service} not available within 60 s")
                return self.wait(client.call_async(request), ANSWER_TIMEOUT, what)
            except TimeoutError:
                if attempt == ANSWER_ATTEMPTS - 1:
                    raise
            finally:
                self.client_node.destroy_client(client)
        raise AssertionError("unreachable")

    def set_parameter(self, node: str, name: str, value):
        """Set one parameter through the node's parameter service: (successful, reason, answer time)."""
        from rcl_interfaces.srv import SetParameters  # noqa: PLC0415
        from rclpy.parameter import Parameter  # noqa: PLC0415
        request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        r = self.request(SetParameters, f"/{node}/set_parameters", request, f"set {node} {name}").results[0]
        return r.successful, r.reason, self.now()

    def call(self, service: str, what: str):
        """A Trigger service: (response, answer time)."""
        return self.request(self.Trigger, service, self.Trigger.Request(), what), self.now()

    def close(self):
        self.context.try_shutdown()  # wakes the monitor's executor; then nothing is in flight on the nodes
        self.thread.join(timeout=5.0)
        self.executor.shutdown(timeout_sec=5.0)
        self.client_executor.shutdown(timeout_sec=5.0)


def planner_parameters(planner: str, control_duration: float, max_actions: int) -> dict:
    """mpc_planner's parameters in the soak for ``planner`` with controls of ``control_duration`` s.

    ``fast`` (the default): the anytime MPC re-planned every control (``fast.replan_rate`` = 1 / control_duration),
    its velocity knots and 2 s horizon independent of the control, candidates screened on the coarse model and the
    best re-scored with the fine one; one action is one cycle. ``mpc``: the sampling MPC with controls of
    ``control_duration`` over a horizon of 1 s (at least 4 controls) on the coarse model, 10 samples, 1 iteration
    (what fits a 0.1 s control). Measured with 0.1 s controls (docs/robot.md): the sampling MPC's 1 s horizon is
    too short to walk the pusher round the slider within a goal's time, so it misses goals even in a simulation
    that waits for it, where ``fast`` reaches them."""
    if planner == "fast":
        return {"planner": "fast", "fast.replan_rate": 1.0 / control_duration, "model": "fine",
                "max_actions": max_actions, "threads": 1}
    if planner == "mpc":
        return {"planner": "mpc", "model": "coarse", "samples": 10, "iterations": 1,
                "horizon": max(4, round(1.0 / control_duration)), "control_duration": control_duration,
                "max_actions": max_actions, "threads": 1}
    raise ValueError(f"planner: {planner!r} is not one of {', '.join(PLANNERS)}")


class RobotSoak:
    def __init__(self, scene_name: str, seed: int, minutes: float, control_duration: float, out: Path,
                 planner: str = "fast", fault_free_only: bool = False):
        from ..core.scene.spec import load_scene  # noqa: PLC0415

        self.scene = load_scene(scene_name)
        self.target = self.scene.objects[0].name
        self.seed, self.minutes, self.dt, self.out = seed, minutes, control_duration, out
        self.rng = np.random.default_rng(seed)
        self.max_actions = max(1, math.ceil(GOAL_SECONDS / control_duration))
        self.planner, self.fault_free_only = planner, fault_free_only
        self.planner_parameters = planner_parameters(planner, control_duration, self.max_actions)
        self.results = Results(clock_faults={k: {"injected": 0, "during_push": 0, "said": 0} for k in MOCAP_OFFSETS},
                               goals={k: {"sent": 0, "reached": 0, "outcomes": {}} for k in FAULTS})
        self.windows: list[Window] = []
        self.limits: list = []  # (from stamp, max_speed m/s)
        self.teleop_windows: list = []  # (start, end, v)
        self.max_speed = 0.1
        self.launch = self.standin = None
        self.starts = 0
        self.gains: list = []  # (from stamp, m/s per unit of the arm's input): the stand-in Servo's units per start
        self.signals: list = []  # (stamp, kind) of each SIGINT / SIGTERM / commander hang of the stack
        self.monitor = Monitor(self.scene)

    # ------------------------------------------------------------------------------------------ the stack
    def _files(self, units: str) -> tuple[Path, Path]:
        from .. import bringup  # noqa: PLC0415
        args = {"scene": self.scene.name}
        sim = bringup.node_parameters(bringup.spec("mujoco_sim"), "robot", args)
        sim.update({"use_sim_time": False, "publish_clock": False, "clock": "system", "real_time_factor": 1.0,
                    "scene": self.scene.name, topics.SERVO_COMMAND_IN_TYPE: units,
                    topics.SERVO_SCALE_LINEAR: SERVO_SCALE_LINEAR, "seed": self.seed + self.starts})
        standin = self.out / f"standin_{self.starts}.yaml"
        standin.write_text(yaml.safe_dump({"mujoco_sim": {"ros__parameters": sim}}))
        stack = self.out / "robot_soak_params.yaml"
        stack.write_text(yaml.safe_dump({
            "mpc_planner": {"ros__parameters": self.planner_parameters},
            "parareal_predictor": {"ros__parameters": {"threads": 1}},
            "velocity_commander": {"ros__parameters": {
                # the stand-in has no gripper; its Servo answers for its parameters at the sim node's service
                "gripper_enabled": False, "require_grasp": False,
                "servo_parameters_service": "/mujoco_sim/get_parameters"}}}))
        return standin, stack

    def start(self):
        units = SERVO_UNITS[self.starts % len(SERVO_UNITS)]
        standin, stack = self._files(units)
        self.gains.append((self.monitor.now(), SERVO_SCALE_LINEAR if units == "unitless" else 1.0))
        t0 = time.monotonic()
        self.monitor.commander_status = ""  # (the last start's is stale)
        self.standin = Process(["ros2", "run", "parapush_ros", "mujoco_sim", "--ros-args", "--params-file",
                                str(standin)], self.out / f"standin_{self.starts}.log")
        # each node's ROS log file in the soak's output: what a node said after its launch was gone (SIGTERM) is
        # only there (``ros.node.log_failure``)
        self.launch = Process(["ros2", "launch", "parapush_ros", "robot.launch.py", "rviz:=false",
                               f"scene:={self.scene.name}", f"params_file:={stack}"],
                              self.out / f"ros2_launch_{self.starts}.log",
                              env={"ROS_LOG_DIR": str(self.out / f"ros_log_{self.starts}")})
        self.starts += 1
        m = self.monitor
        ready = {"planner active": lambda: "[mpc_planner]: active" in self.launch.output(),
                 "commander active": lambda: "[velocity_commander]: active" in self.launch.output(),
                 # the planner refuses goals until the commander knows the stand-in Servo's units
                 "commander knows Servo's units": lambda: m.commander_status != "" and status_parts(
                     m.commander_status)[0] not in NOT_READY,
                 "scene state": lambda: m.object_xy(self.target) is not None,
                 "push_object action": m.action.server_is_ready}
        while not all(f() for f in ready.values()):
            m.pause(0.1)
            if self.launch.proc.poll() is not None or self.standin.proc.poll() is not None:
                raise RuntimeError(f"the stack ended while starting:\n{self.launch.output()[-3000:]}")
            if time.monotonic() - t0 > START_TIMEOUT:
                missing = [k for k, f in ready.items() if not f()]
                raise RuntimeError(f"the stack was not ready within {START_TIMEOUT:g} s (missing: {missing}):\n"
                                   f"{self.launch.output()[-3000:]}")
        self.started_at = m.now()
        self.max_speed = 0.1
        self.limits.append((m.now(), self.max_speed))
        self.results.starts.append({"servo_units": units, "ready_s": round(time.monotonic() - t0, 1)})
        print(f"[soak --robot] start {self.starts}: ready in {time.monotonic() - t0:.0f} s (Servo {units})",
              flush=True)
        self._hostile_sets()

    def stop(self, sig: int, kind: str = "", family: list | None = None) -> dict:
        """Stop the stack's process group with ``sig``, then the stand-in. Each node's exit as ``ros2 launch``
        reports it (after SIGTERM it reports none: it ends at once, leaving its processes to their own SIGTERM), and
        the nodes still running ``EXIT_TIMEOUT`` later (killed then)."""
        import psutil  # noqa: PLC0415
        if family is None:  # (``family``: the launch's processes taken before it ended on its own)
            try:
                family = psutil.Process(self.launch.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                family = []
        code = self.launch.stop(sig)
        _, alive = psutil.wait_procs(family, timeout=EXIT_TIMEOUT)
        left, others, where = [], [], {}
        for p in alive:
            try:
                cmd = " ".join(p.cmdline()[:2])
                where[cmd] = where_stuck(p.pid)
                p.kill()
            except psutil.Error:
                continue
            # ours fail the soak; another package's process (here the launch overlay's Python stand-in for tf2_ros'
            # static_transform_publisher: the real one is C++) is reported beside them
            (left if any(cmd.endswith(f"/{name}") for name in OUR_NODES) else others).append(cmd)
        exits = {k: v for k, v in self.launch.exits().items() if k in OUR_NODES}
        self.standin.stop(signal.SIGINT)
        self.results.exceptions += node_errors(self.launch.output()) + node_errors(self.standin.output())
        rec = {"signal": kind or signal.Signals(sig).name, "launch": code, "nodes": exits, "left_running": left,
               "others_left_running": others, "left_running_where": where,
               "teardown_hangs": teardown_hangs(self.launch.output())}
        for cmd, stuck in where.items():
            print(f"[soak --robot] after {rec['signal']}: {cmd} still running {EXIT_TIMEOUT:g} s later: {stuck}",
                  flush=True)
        self.results.exits.append(rec)
        return rec

    def _rss(self):
        import psutil  # noqa: PLC0415
        for proc in (self.launch, self.standin):
            try:
                family = [psutil.Process(proc.proc.pid), *psutil.Process(proc.proc.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for p in family:
                try:
                    cmd = " ".join(p.cmdline())
                    name = next((n for n in OUR_NODES if f"/{n} " in f"{cmd} "), None)  # the executable
                    if name is not None:
                        rec = self.results.rss.setdefault(name, {})
                        key = f"start_{self.starts}"
                        mb = p.memory_info().rss / 2**20
                        warm = self.monitor.now() - self.started_at >= RSS_WARMUP
                        if warm and key not in rec:
                            rec[key] = mb
                        rec[f"end_{self.starts}"] = mb
                except psutil.Error:
                    continue

    # ------------------------------------------------------------------------------------------ episodes
    def _hostile_sets(self):
        for node, name, value, names in HOSTILE_SETS:
            ok, reason, _ = self.monitor.set_parameter(node, name, value)
            refused = not ok and names in reason
            self.results.hostile.append({"node": node, "parameter": name, "value": repr(value), "refused": refused,
                                         "reason": reason[:200]})

    def _goal(self):
        m = self.monitor
        xy = m.object_xy(self.target)
        angle, dist = self.rng.uniform(-math.pi, math.pi), self.rng.uniform(*GOAL_DISTANCE)
        limit = self.scene.table.half - GOAL_EDGE_MARGIN
        gx, gy = np.clip(xy + dist * np.array([math.cos(angle), math.sin(angle)]), -limit, limit)
        return self.monitor.PushObject.Goal(target_object=self.target, goal_x=float(gx), goal_y=float(gy),
                                            position_tolerance=GOAL_TOLERANCE, yaw_tolerance=-1.0,
                                            max_actions=self.max_actions)

    def _record(self, fault: str, sent: float, at_send: dict, skipped_at_send: float, during: bool, outcome: str,
                result=None):
        """One episode in the JSON: where it started, how it ended, what the planner said meanwhile (pauses and
        why, late plans) and how long the stand-in world stood still meanwhile (its host stalled: a real cell never
        waits), so that a missed goal can be told from a stalled stand-in."""
        m = self.monitor
        now = m.now()
        with m.lock:
            said = [text for t, text in m.planner_status if sent <= t <= now]
        pauses = [text[len("paused: "):].split(";")[0] for text in said if text.startswith("paused: ")]
        rec = {"fault": fault, "during_push": during, "outcome": outcome, "wall_s": round(now - sent, 2),
               **at_send, "load1": round(os.getloadavg()[0], 2),
               "standin_skipped_s": round(max(0.0, m.standin_skipped - skipped_at_send), 3),
               "pauses": len(pauses), "pause_reasons": sorted({re.sub(r"[-\d.]+", "#", p)[:90] for p in pauses}),
               "late_plans": sum(text.startswith(("plan late", "cycle late")) for text in said)}
        if result is not None:
            rec.update(actions=int(result.actions_executed), final_distance_m=round(float(result.final_distance), 4),
                       mean_planning_s=round(float(result.mean_planning_time), 4), message=result.message[:200])
        self.results.episodes.append(rec)

    def _reset_unasked_estop(self):
        """An e-stop latched by the stack itself (the commander's checks: the pusher does not follow, a clock
        jump) refuses every later goal: as an operator, note why, then reset it. One the follow check latched while
        the stand-in world stood still for ``FOLLOW_STALL`` in that goal is the check doing its job (the simulated arm
        did not move); any other is a problem: an e-stop of an arm that worked."""
        m = self.monitor
        state, detail = status_parts(m.commander_status)
        if state != ESTOP:
            return
        last = self.results.episodes[-1] if self.results.episodes else {}
        rec = {"after_fault": last.get("fault"), "reason": detail[:240],
               "standin_skipped_s": last.get("standin_skipped_s", 0.0)}
        rec["explained"] = "does not follow" in detail and rec["standin_skipped_s"] >= FOLLOW_STALL
        self.results.estops_unasked.append(rec)
        if not rec["explained"]:
            self.results.problems.append(f"the commander e-stopped itself after a {rec['after_fault']!r} goal in "
                                         f"which the stand-in stood still {rec['standin_skipped_s']:g} s "
                                         f"(< {FOLLOW_STALL:g} s): {detail[:200]}")
        self._reset_estop("an e-stop the soak did not ask for")

    def _reset_estop(self, what: str) -> bool:
        """``velocity_commander/reset``, then wait, as an operator, until planner/status says the reset was heard
        (goals are refused until then); whether it said so within ``ANSWER_TIMEOUT``."""
        m = self.monitor
        t_reset = m.now()
        res, _ = m.call("/velocity_commander/reset", "e-stop reset")
        if not res.success:
            self.results.problems.append(f"reset of {what} refused: {res.message}")
        m.pause(ANSWER_TIMEOUT, lambda: m.said_since(t_reset, RESET_HEARD))
        return m.said_since(t_reset, RESET_HEARD)

    def episode(self, fault: str) -> bool:
        """One goal with ``fault`` in it; False when the stack was stopped (a start must follow)."""
        m = self.monitor
        self._reset_unasked_estop()
        g = self.results.goals[fault]
        goal = self._goal()
        obj, pusher = m.object_xy(self.target), m.pusher_xy()
        at_send = {"goal_from_object_m": round(float(np.hypot(goal.goal_x - obj[0], goal.goal_y - obj[1])), 4),
                   "pusher_from_object_m": None if pusher is None else round(float(np.linalg.norm(pusher - obj)), 4)}
        skipped = m.standin_skipped
        sent = m.now()
        self._end_windows(sent)  # a new goal allows motion again
        handle, lost = m.send_goal(goal)
        self.results.goal_answers_lost += lost
        g["sent"] += 1
        if not handle.accepted:
            g["outcomes"]["rejected"] = g["outcomes"].get("rejected", 0) + 1
            self._record(fault, sent, at_send, skipped, False, "rejected")
            return True
        result = handle.get_result_async()
        m.pause(self.rng.uniform(*FAULT_AFTER), result.done)
        during = not result.done()  # a push that ended already still gets its fault (on an idle arm)
        self.results.faults_during_push[fault] = self.results.faults_during_push.get(fault, 0) + during
        if self._inject(fault, handle, during):
            g["outcomes"]["stack stopped"] = g["outcomes"].get("stack stopped", 0) + 1
            self._record(fault, sent, at_send, skipped, during, "stack stopped")
            return False
        r = m.wait(result, GOAL_SECONDS * 4 + 60.0, "the goal's result").result
        from .soak import OUTCOMES  # noqa: PLC0415
        outcome = OUTCOMES[r.outcome] if r.outcome < len(OUTCOMES) else f"code {r.outcome}"
        g["outcomes"][outcome] = g["outcomes"].get(outcome, 0) + 1
        g["reached"] += outcome == "reached"
        self._record(fault, sent, at_send, skipped, during, outcome, r)
        self.windows.append(Window("push end", m.now()))
        self._rss()
        return True

    def _inject(self, fault: str, handle, during: bool) -> bool:
        """Apply ``fault`` (and undo it where it is undone); True when the stack was stopped."""
        m = self.monitor
        if fault == "cancel":
            m.wait(handle.cancel_goal_async(), 30.0, "the cancel's answer")
            self.windows.append(Window("cancel", m.now()))
        elif fault == "estop":
            res, t = m.call("/velocity_commander/estop", "e-stop")
            if not res.success:
                self.results.problems.append(f"e-stop refused: {res.message}")
            window = Window("estop", t, start=t)
            self.windows.append(window)
            m.pause(self.rng.uniform(0.5, 1.5))
            window.end = m.now()  # stamps after the reset was asked may be the reset's motion
            if not self._reset_estop("the e-stop"):
                self.results.problems.append(f"planner/status did not say {RESET_HEARD!r} within "
                                             f"{ANSWER_TIMEOUT:g} s of the e-stop's reset")
        elif fault in MOCAP_OFFSETS:
            rec = self.results.clock_faults[fault]
            rec["injected"] += 1
            rec["during_push"] += during
            t0 = m.now()
            ok, reason, _ = m.set_parameter("mujoco_sim", "clock_offset", MOCAP_OFFSETS[fault])
            if not ok:
                self.results.problems.append(f"clock_offset {MOCAP_OFFSETS[fault]} refused: {reason}")
            m.pause(CLOCK_FAULT_HOLD)
            m.set_parameter("mujoco_sim", "clock_offset", 0.0)
            with m.lock:
                said = [s for t, s in m.planner_status if t >= t0 and "clock" in s]
            rec["said"] += bool(said) and during
            if said:
                rec["example"] = said[0][:200]
        elif fault == "max_speed_set":
            new = 0.5 * self.max_speed
            ok, reason, t = m.set_parameter("velocity_commander", "max_speed", new)
            if not ok:
                self.results.problems.append(f"max_speed {new} refused: {reason}")
            m.pause(CLOCK_FAULT_HOLD)
            t_restore = m.now()  # the lower limit holds from the set's answer until the restore is asked
            if ok:
                self.limits += [(t, new), (t_restore, self.max_speed)]
                self.results.param_sets.append((t, new, t_restore))
            ok, reason, _ = m.set_parameter("velocity_commander", "max_speed", self.max_speed)
            if not ok:
                self.results.problems.append(f"max_speed {self.max_speed} refused: {reason}")
        elif fault == "teleop":
            self._teleop()
        elif fault in ("sigint", "sigterm"):
            self.signals.append((m.now(), fault))
            self.stop(signal.SIGINT if fault == "sigint" else signal.SIGTERM)
            return True
        elif fault == "commander_hang":
            self._hang_commander()
            return True
        return False

    def _hang_commander(self):
        """SIGSTOP to velocity_commander, mid-push where the push lasts: the launch must notice its silence (after
        a zero too: the launch may not have heard the last twist the arm did), send the arm a zero, kill it and
        end."""
        import psutil  # noqa: PLC0415

        from ..bringup import COMMANDER_HANG_TIMEOUT  # noqa: PLC0415
        m = self.monitor
        family, found = [], []
        with contextlib.suppress(psutil.NoSuchProcess):
            family = psutil.Process(self.launch.proc.pid).children(recursive=True)
        for p in family:
            try:
                if any(a.endswith("/velocity_commander") for a in p.cmdline()[:2]):
                    found.append(p)
            except psutil.Error:  # a process that ended meanwhile
                continue
        if len(found) != 1:
            self.results.problems.append(f"commander_hang: {len(found)} velocity_commander processes found, not 1")
            self.stop(signal.SIGINT, kind="commander_hang")
            return
        commander = found[0]
        def arm_moving() -> bool:
            with m.lock:
                return bool(m.twists) and float(np.linalg.norm(m.twists[-1].v)) > ZERO
        m.pause(5.0, until=arm_moving)  # a hang mid-motion, where it matters (unless the push ends first)
        moving = arm_moving()
        t = m.now()
        self.signals.append((t, "commander_hang"))
        commander.suspend()
        try:
            self.launch.proc.wait(COMMANDER_HANG_TIMEOUT + EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.results.problems.append(f"the launch did not end after the commander hung "
                                         f"{'mid-push' if moving else 'idle'}")
            commander.resume()
        said = re.search(r"velocity_commander has sent nothing for ([\d.]+) s after a (?:non-zero|zero) command "
                         r"\(hung\?\)", self.launch.output())
        self.results.hangs.append({"moving": moving, "said": bool(said),
                                   "silent_s": float(said[1]) if said else None})
        if not said:
            self.results.problems.append("the launch did not say it stopped a hung commander")
        self.stop(signal.SIGINT, kind="commander_hang", family=family)

    def _teleop(self):
        """A person's twist for 1.5 s at 50 Hz on pusher_cmd_teleop, stamped now (the commander checks age)."""
        m = self.monitor
        v = np.array([0.03, 0.0]) * (1 if self.rng.random() < 0.5 else -1)
        t0 = m.now()
        self._end_windows(t0)
        while m.now() - t0 < 1.5:
            msg = m.TwistStamped()
            msg.header.stamp = m.node.get_clock().now().to_msg()
            msg.header.frame_id = topics.TABLE_FRAME
            msg.twist.linear.x = float(v[0])
            m.teleop.publish(msg)
            m.pause(0.02)
        self.teleop_windows.append((t0, m.now(), v))
        self.results.teleop["episodes"] += 1

    def _end_windows(self, t: float):
        for w in self.windows:
            w.end = min(w.end, t)

    # ------------------------------------------------------------------------------------------ judging
    def twists(self) -> list:
        """The arm's input in m/s, by stamp (each twist in the units of the start it was stamped in)."""
        with self.monitor.lock:
            raw = sorted(self.monitor.twists, key=lambda tw: tw.stamp)
        starts = [t for t, _ in self.gains]
        out = []
        for tw in raw:
            i = max(0, int(np.searchsorted(starts, tw.stamp, side="right")) - 1)
            out.append(Twist(tw.stamp, tw.v * self.gains[i][1]))
        return out

    def judge(self):
        twists = self.twists()
        stamps = np.array([tw.stamp for tw in twists])
        speeds = np.array([float(np.linalg.norm(tw.v)) for tw in twists])
        limit_t = np.array([t for t, _ in self.limits])
        limit_v = np.array([v for _, v in self.limits])
        if len(stamps):  # the limit in force at each stamp: the lowest of those set in the last change
            idx = np.searchsorted(limit_t, stamps, side="right") - 1
            allowed = np.where(idx >= 0, limit_v[np.clip(idx, 0, None)], 0.1)
            bad = speeds > allowed + SPEED_TOL
            self.results.unsafe = [{"stamp": float(s), "speed": float(v), "limit": float(a)}
                                   for s, v, a in zip(stamps[bad], speeds[bad], allowed[bad])][:20]
            self.results.unsafe_count = int(bad.sum())
        else:
            self.results.unsafe_count = 0
        counted = set()
        for w in self.windows:
            start = w.start
            if start is None:
                zeros = np.nonzero((stamps >= w.after) & (speeds <= ZERO))[0]
                if not len(zeros):
                    continue  # never reached zero: another check (the stack's end) reports it
                start = stamps[zeros[0]]
            inside = (stamps > start) & (stamps < w.end) & (speeds > ZERO)
            for s, v in zip(stamps[inside], speeds[inside]):
                if float(s) not in counted:  # windows may overlap (a cancel, then its push's end)
                    counted.add(float(s))
                    self.results.nonzero_after_stop.append({"kind": w.kind, "stamp": float(s), "speed": float(v)})
        starts = [t for t, _ in self.gains]
        for t, kind in self.signals:  # the stack's last twist after the signal (before the next start) is zero
            after = [tw for tw in twists if tw.stamp >= t and all(not (t < s <= tw.stamp) for s in starts)]
            last = after[-1] if after else None
            zero = last is None or float(np.linalg.norm(last.v)) <= ZERO
            self.results.exits_last_zero.append({"signal": kind, "last_twist_zero": zero})
            if not zero:
                self.results.nonzero_after_stop.append({"kind": kind, "stamp": last.stamp,
                                                        "speed": float(np.linalg.norm(last.v))})
        ignored = 0
        for t, limit, end in self.results.param_sets:
            after = (stamps > t) & (stamps < end)
            ignored += bool(np.any(speeds[after] > limit + SPEED_TOL))
        self.results.param_sets_ignored = ignored
        for t0, t1, v in self.teleop_windows:  # settled (0.5 s for the acceleration limit) until the end
            inside = (stamps > t0 + 0.5) & (stamps < t1)
            vs = np.array([tw.v for tw, keep in zip(twists, inside) if keep]).reshape(-1, 2)
            self.results.teleop["twists"] += len(vs)
            self.results.teleop["followed"] += int(np.sum(np.linalg.norm(vs - v, axis=1) < 1e-3))

    # ------------------------------------------------------------------------------------------ run
    def run(self):
        t_start = time.monotonic()
        order = list(self.rng.permutation([f for f in FAULTS if f not in ("sigint", "sigterm")]))
        order[len(order) // 3:len(order) // 3] = ["sigint"]
        order[2 * len(order) // 3:2 * len(order) // 3] = ["sigterm"]
        kinds = FAULTS
        if self.fault_free_only:  # the push loop's yardstick alone: one start, every goal without a fault
            order, kinds = [], ("none",)
        i, last_status = 0, time.monotonic()
        try:
            self.start()
            while True:
                if i < len(order):
                    fault = order[i]
                elif time.monotonic() - t_start >= self.minutes * 60.0:
                    break
                else:
                    fault = kinds[int(self.rng.integers(len(kinds)))]
                i += 1
                if not self.episode(fault):
                    self.start()
                if time.monotonic() - last_status >= 30.0:
                    last_status = time.monotonic()
                    done = sum(g["sent"] for g in self.results.goals.values())
                    print(f"[soak --robot] {time.monotonic() - t_start:.0f} s: {done} episodes, {self.starts} "
                          f"start(s)", flush=True)
        finally:
            if self.launch is not None and self.launch.proc.poll() is None:
                self.stop(signal.SIGINT)
            elif self.standin is not None and self.standin.proc.poll() is None:
                self.standin.stop(signal.SIGINT)
        self.wall_s = time.monotonic() - t_start

    def summary(self) -> dict:
        r = self.results
        self.judge()
        twists = self.twists()
        span = twists[-1].stamp - twists[0].stamp if twists else 0.0  # (the stack's restarts included)
        rss_growth = {}
        for name, rec in r.rss.items():
            growth = [rec[f"end_{k}"] - rec[f"start_{k}"] for k in range(1, self.starts + 1)
                      if f"start_{k}" in rec and f"end_{k}" in rec]
            rss_growth[name] = round(max(growth), 1) if growth else None
        stack = {"mocap_ingest", "parareal_predictor", "mpc_planner", "velocity_commander"}
        # after a hang the launch kills the commander (-9, or the SIGINT of the soak's stop where it was at rest)
        bad_exits = [e for e in r.exits if e["left_running"]
                     or any(c != 0 for n, c in e["nodes"].items()
                            if not (e["signal"] == "commander_hang" and n == "velocity_commander"))
                     or (e["signal"] in ("SIGINT", "commander_hang") and set(e["nodes"]) != stack)]
        hostile_failed = [h for h in r.hostile if not h["refused"]]
        s = {
            "mode": "robot", "seed": self.seed, "minutes": self.minutes, "wall_time_s": round(self.wall_s, 1),
            "scene": self.scene.name, "control_duration": self.dt, "planner": self.planner, "starts": r.starts,
            "fault_free": fault_free(r.episodes),
            "unsafe_commands": r.unsafe_count, "unsafe_examples": r.unsafe,
            "nonzero_after_stop": len(r.nonzero_after_stop), "nonzero_after_stop_examples": r.nonzero_after_stop[:20],
            "param_sets_ignored": r.param_sets_ignored, "param_sets": len(r.param_sets),
            "clock_faults": r.clock_faults, "faults_during_push": r.faults_during_push,
            "goals_reached": {k: {"sent": v["sent"], "reached": v["reached"], "outcomes": v["outcomes"]}
                              for k, v in r.goals.items()},
            "hostile": {"count": len(r.hostile), "refused": len(r.hostile) - len(hostile_failed),
                        "not_refused": hostile_failed},
            "teleop": r.teleop, "goal_answers_lost": r.goal_answers_lost,
            "exits": r.exits, "commander_hangs": r.hangs, "exceptions": len(r.exceptions),
            "teardown_hangs": sum(len(e.get("teardown_hangs", [])) for e in r.exits),
            "twists_received": len(twists), "twist_rate_hz": round(len(twists) / span, 1) if span > 0 else 0.0,
            "exception_lines": r.exceptions[:20], "rss_growth_mb": rss_growth, "problems": r.problems,
            "estops_unasked": {"count": len(r.estops_unasked),
                               "explained": sum(e["explained"] for e in r.estops_unasked), "events": r.estops_unasked},
            "episodes": r.episodes,
        }
        failures = []
        for key, what in (("unsafe_commands", "twist(s) above the speed limit"),
                          ("nonzero_after_stop", "non-zero twist(s) after a stop"),
                          ("param_sets_ignored", "parameter set(s) answered but not applied"),
                          ("exceptions", "exception(s) in the nodes")):
            if s[key]:
                failures.append(f"{s[key]} {what} ({key})")
        if hostile_failed:
            failures.append(f"{len(hostile_failed)} hostile parameter set(s) not refused by name: "
                            + "; ".join(f"{h['node']} {h['parameter']}={h['value']}: {h['reason']!r}"
                                        for h in hostile_failed))
        if bad_exits:
            failures.append(f"{len(bad_exits)} stop(s) where a node did not exit 0: {bad_exits}")
        failures += r.problems
        grown = {k: v for k, v in rss_growth.items() if v is not None and v > 50.0}
        if grown:
            failures.append(f"memory grew by more than 50 MB: {grown}")
        s["failures"] = failures
        return s


def fault_free(episodes: list) -> dict:
    """The yardstick of the push loop: fault-free goals sent and reached, and the same counted only over the goals in
    which the stand-in world stood still for less than ``STANDIN_STALL`` (a stall of the stand-in's host: the arm
    and the mocap of a cell never wait, so a goal missed while the stand-in stood still is not the stack's)."""
    plain = [e for e in episodes if e["fault"] == "none"]
    ran = [e for e in plain if e["standin_skipped_s"] < STANDIN_STALL]
    reached = [e for e in plain if e["outcome"] == "reached"]
    return {"sent": len(plain), "reached": len(reached),
            "standin_ran": len(ran), "reached_standin_ran": sum(e["outcome"] == "reached" for e in ran),
            "actions_reached": sorted(e.get("actions", 0) for e in reached),
            "missed": [{k: e.get(k) for k in ("outcome", "actions", "final_distance_m", "goal_from_object_m",
                                              "standin_skipped_s", "pauses", "late_plans", "load1")}
                       for e in plain if e["outcome"] != "reached"]}


MONITOR_CLOSE_LIMIT_S = 20.0  # s the monitor's rclpy teardown may take in the CLI's own process


def run_robot_soak(minutes: float, seed: int, scene: str, control_duration: float, out: Path,
                   json_path: Path | None, planner: str = PLANNERS[0], fault_free_only: bool = False,
                   own_process: bool = False) -> dict:
    """The soak; its results are written before the monitor's ROS context is shut down. ``own_process`` (the CLI's
    single soak): rclpy's context shutdown can block for ever below Python holding the GIL (seen once: the main
    thread in ``rclpy_logging_fini`` after every launch had exited), so the process then ends after
    ``MONITOR_CLOSE_LIMIT_S`` with the status its results earned (``ros.node.exit_after``), as a node's does."""
    why = launch_available()
    if why:
        raise SystemExit(f"parapush soak --robot: {why}")
    out.mkdir(parents=True, exist_ok=True)
    # the stand-in cell must never meet a real one on the network: this host only (the soak and its processes)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    soak = RobotSoak(scene, seed, minutes, control_duration, out, planner, fault_free_only)
    status = 1  # until the results say otherwise
    try:
        soak.run()
        summary = soak.summary()
        from .bench.common import write_json  # noqa: PLC0415
        write_json(json_path or out / "soak_robot.json", summary)
        _print_table(summary)
        summary["png"] = str(_plot(soak, summary, out / "soak_robot.png"))
        status = 1 if summary["failures"] else 0
    finally:
        if own_process:
            from ..ros.node import exit_after  # noqa: PLC0415
            exit_after(MONITOR_CLOSE_LIMIT_S, status)
        soak.monitor.close()
    return summary


def _print_table(s: dict):
    from .bench.common import print_table  # noqa: PLC0415
    ff = s["fault_free"]
    rows = [("wall time", f"{s['wall_time_s']:.0f} s, {len(s['starts'])} start(s), control "
                          f"{s['control_duration']:g} s, planner {s['planner']}"),
            ("fault-free goals reached", f"{ff['reached']} / {ff['sent']} ({ff['reached_standin_ran']} / "
                                         f"{ff['standin_ran']} where the stand-in stood still < {STANDIN_STALL:g} s)"),
            *((f"goals reached: {k}", f"{v['reached']} / {v['sent']}") for k, v in s["goals_reached"].items()),
            ("clock faults said", ", ".join(f"{k} {v['said']}/{v['injected']}" for k, v in s["clock_faults"].items())),
            ("hostile sets refused", f"{s['hostile']['refused']} / {s['hostile']['count']}"),
            ("unsafe commands", s["unsafe_commands"]), ("non-zero after stop", s["nonzero_after_stop"]),
            ("param sets ignored", f"{s['param_sets_ignored']} of {s['param_sets']}"),
            ("teleop twists followed", f"{s['teleop']['followed']} / {s['teleop']['twists']}"),
            ("e-stops not asked for (explained)", f"{s['estops_unasked']['count']} "
                                                  f"({s['estops_unasked']['explained']})"),
            ("exceptions", s["exceptions"]),
            ("RSS growth (MB)", ", ".join(f"{k} {v}" for k, v in s["rss_growth_mb"].items())),
            ("result", "FAILED" if s["failures"] else "ok")]
    print_table(["quantity", "value"], rows, title=f"parapush soak --robot: {s['minutes']:g} min, seed {s['seed']}")
    for f in s["failures"]:
        print(f"  FAILED: {f}")


def _plot(soak: RobotSoak, summary: dict, path: Path) -> Path:
    """The pusher's speed on the arm's input over time, the limit in force, and the stop windows."""
    from .bench.common import pyplot, save_figure  # noqa: PLC0415
    plt = pyplot()
    tw = soak.twists()
    fig, ax = plt.subplots(figsize=(11, 4))
    if tw:
        t0 = tw[0].stamp
        ax.plot([t.stamp - t0 for t in tw], [float(np.linalg.norm(t.v)) for t in tw], ",", color="tab:blue",
                label="pusher speed on the arm's input")
        ax.step([t - t0 for t, _ in soak.limits], [v for _, v in soak.limits], where="post", color="tab:red",
                lw=0.8, label="max_speed")
        for w in soak.windows:
            if w.end < math.inf:
                ax.axvspan(w.after - t0, w.end - t0, color="0.85", lw=0)
    ax.set_xlabel("system time since the first twist (s)")
    ax.set_ylabel("m/s")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(f"parapush soak --robot: seed {summary['seed']}, unsafe {summary['unsafe_commands']}, non-zero "
                 f"after stop {summary['nonzero_after_stop']} (grey: must be zero once zero)")
    save_figure(fig, path)
    return path


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: parapush soak --robot --minutes M")
