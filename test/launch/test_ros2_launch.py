"""Both launch files run by the real ``ros2 launch`` (a ROS 2 install, or the overlay that
``../shared/ros2-launch/build.sh`` builds; ``make test`` puts it on the path), each node its own process, as a user
runs them. Read back from outside: parameters through the nodes' parameter services, the arm's input as the arm's
driver sees it, exit statuses from the launch's own report.

Skipped, with one line, where no ``ros2`` with ``launch_ros`` is on the path; ``PARAPUSH_REQUIRE_LAUNCH=1`` (set by
``make test`` when the overlay is there, so on CI) makes that a failure instead.
"""
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SIGINT_IGNORED, Recorder, wait_for, wait_future

HAVE_LAUNCH = shutil.which("ros2") is not None and importlib.util.find_spec("launch_ros") is not None
if os.environ.get("PARAPUSH_REQUIRE_LAUNCH") == "1" and not HAVE_LAUNCH:
    raise RuntimeError("PARAPUSH_REQUIRE_LAUNCH=1 but no `ros2` with launch_ros is on the path")
pytestmark = [pytest.mark.skipif(not HAVE_LAUNCH, reason="no `ros2 launch` on the path (source a ROS 2 install or "
                                                         "build ../shared/ros2-launch): real-launch tests skipped"),
              # whole stacks of processes: on a loaded host their start alone can take minutes
              pytest.mark.timeout(900)]

START_TIMEOUT = 300.0  # s of wall time for every node of a launch to be up (imports of torch/MuJoCo on a busy host)
# The simulated world at a quarter of real time where a test pushes: the stack's processes run on its clock but are
# not in lock-step with it, so this gives a loaded host four times the slack (the pushes are the same, in sim time)
# What rclpy's action server logs when Fast DDS could not deliver a goal's answer (the server had not yet discovered
# the caller's reply reader within the 100 ms rmw_fastrtps allows); the goal is dropped and never started.
LOST_ANSWER = "Failed to send goal response"
SLOW_SIM = "mujoco_sim:\n  ros__parameters:\n    real_time_factor: 0.25\n"


class Launch:
    """``ros2 launch parapush_ros <mode>.launch.py ARGS`` in its own process group (as a terminal runs it), its
    output in a file."""

    def __init__(self, tmp_path: Path, mode: str, *args: str, sigint_ignored: bool = False):
        self.log = tmp_path / f"ros2_launch_{mode}.log"
        self._out = open(self.log, "w")  # noqa: SIM115 - closed in close()
        prefix = SIGINT_IGNORED if sigint_ignored else []  # as a shell script's background job starts it
        self.proc = subprocess.Popen([*prefix, "ros2", "launch", "parapush_ros", f"{mode}.launch.py", *args],
                                     stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def output(self) -> str:
        return self.log.read_text()

    def wait_output(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match:
        return wait_for(lambda: re.search(pattern, self.output()), timeout=timeout, interval=0.1,
                        what=lambda: f"{pattern!r} in the launch output:\n{self.output()[-3000:]}")

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C in the launch's terminal: SIGINT to the whole process group."""
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.interrupt(30.0)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()

    def exits(self) -> dict:
        """Each process's exit as the launch reported it: {process name: 0 or the exit code}."""
        text = self.output()
        out = {m[1]: 0 for m in re.finditer(r"\[INFO\] \[([\w-]+)\]: process has finished cleanly", text)}
        out.update({m[1]: int(m[2]) for m in re.finditer(r"\[ERROR\] \[([\w-]+)\]: process has died \[pid \d+, "
                                                           r"exit code (-?\d+)", text)})
        return out


@pytest.fixture
def launch(tmp_path):
    started = []

    def start(mode, *args, **kw):
        started.append(Launch(tmp_path, mode, "rviz:=false", *args, **kw))
        return started[-1]
    yield start
    for lt in started:
        lt.close()


def _done_within(future, seconds: float) -> bool:
    """Whether an rclpy future (completed by a background executor) is done within ``seconds``: waits on its
    completion, not on a polling pace."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    return done.wait(seconds) or future.done()


def _read_parameters(node, target: str, names: list, timeout: float = START_TIMEOUT) -> dict:
    from rclpy.parameter import parameter_value_to_python
    from rclpy.parameter_client import AsyncParameterClient

    client = AsyncParameterClient(node, target)  # its service clients go with the node
    wait_for(lambda: client.services_are_ready(), timeout=timeout, interval=0.1,
             what=f"the parameter services of {target}")
    from rcl_interfaces.msg import ParameterType

    def complete():  # the services answer from the node's start, before its constructor has declared everything
        future = client.get_parameters(names)
        if not _done_within(future, 10.0):
            # Fast DDS drops a reply whose caller's reply reader the server has not matched yet (100 ms window; a
            # loaded host misses it, as with the goal service below): asking again is safe, a read changes nothing
            future.cancel()
            return False
        res = future.result()
        ok = len(res.values) == len(names) and all(v.type != ParameterType.PARAMETER_NOT_SET for v in res.values)
        return ok and {n: parameter_value_to_python(v) for n, v in zip(names, res.values)}
    return wait_for(complete, timeout=timeout, interval=0.2, what=f"{target} to declare {names}")


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _node_tracebacks(text: str) -> list:
    """Lines of our nodes' output that show a traceback or an RCL error (launch_ros' own shutdown races not
    included: its lifecycle service calls can meet a launch that is already ending)."""
    from parapush_ros import bringup
    names = "|".join(s.executable for s in bringup.NODES + bringup.OPTIONAL_NODES)
    return [ln for ln in text.splitlines() if re.match(rf"\[({names})-\d+\]", ln)
            and ("Traceback" in ln or "RCLError" in ln or "exception" in ln.lower())]


# ------------------------------------------------------------------------------------------------ parameters
def test_every_argument_reaches_every_node_as_parapush_sim_gives_it(launch, ros_executor, tmp_path):
    """Launch arguments, the planner's defaults and a user's params_file reach each node exactly as
    ``bringup.node_parameters`` (what ``parapush sim`` hands its nodes) says: every parameter of every node, read
    back through its parameter service."""
    import rclpy
    from parapush_ros import bringup

    extra = tmp_path / "lab.yaml"
    extra.write_text("/**:\n  ros__parameters:\n    frame_id: table\nmocap_ingest:\n  ros__parameters:\n"
                     "    rate: 40.0\nvelocity_commander:\n  ros__parameters:\n    output_frame_id: base\n")
    arguments = {"planner": "dgoc", "mocap_driver": "vrpn", "output": "ur_twist", "params_file": str(extra)}
    lt = launch("sim", *(f"{k}:={v}" for k, v in arguments.items()))
    node = ros_executor.add(rclpy.create_node("launch_param_reader"))
    for spec in bringup.nodes("sim", arguments):
        declared = set(spec.param_spec()) | {"use_sim_time"}  # a node ignores what it does not declare
        expected = {k: v for k, v in bringup.node_parameters(spec, "sim", arguments).items() if k in declared}
        got = _read_parameters(node, f"/{spec.name}", sorted(expected))
        wrong = {k: (got[k], v) for k, v in expected.items() if not _same(got[k], v)}
        assert not wrong, f"{spec.name}: (launched, parapush sim) differ: {wrong}"
        if "scene" in expected:
            assert got["scene"] == "block_003", spec.name  # dgoc's default scene reached every node
        if "mocap_driver" in expected:
            assert got["mocap_driver"] == "vrpn", spec.name
    commander = _read_parameters(node, "/velocity_commander", ["output", "max_speed"])
    assert commander == {"output": "ur_twist", "max_speed": 0.25}  # the argument; dgoc's sim limit
    assert _read_parameters(node, "/mocap_ingest", ["rate"]) == {"rate": 40.0}  # the user's file
    # the static transform mocap frame -> table frame, as tf2_ros' static_transform_publisher publishes it: what
    # parapush sim publishes itself (test_sim_runner), read from /tf_static by a late subscriber
    from parapush_ros.ros.static_tf import TF_STATIC_QOS, TF_STATIC_TOPIC
    from tf2_msgs.msg import TFMessage
    tf_static = []
    node.create_subscription(TFMessage, TF_STATIC_TOPIC, tf_static.append, TF_STATIC_QOS)
    wait_for(lambda: tf_static, timeout=60, what="the launch's latched /tf_static")
    (msg,) = tf_static[0].transforms
    t = bringup.mocap_static_transform("sim", arguments)
    assert (msg.header.frame_id, msg.child_frame_id) == (t.parent_frame, t.child_frame)
    tr, q = msg.transform.translation, msg.transform.rotation
    assert [tr.x, tr.y, tr.z, q.x, q.y, q.z, q.w] == pytest.approx(list(t.translation + t.rotation_xyzw))
    assert lt.proc.poll() is None, lt.output()[-3000:]


@pytest.mark.parametrize("argument, says", [
    ("model:=bogus", r"mpc_planner: cannot start: parameter model: unknown model 'bogus' \(expected one of: "
                     r"coarse, analytical"),
    ("mocap_driver:=bogus", r"mocap_ingest: cannot start: .*mocap_driver: unknown mocap driver 'bogus' "
                            r"\(expected natnet or vrpn\)"),
    ("rviz:=maybe", r"launch argument rviz: 'maybe' is not one of auto, true, false"),
    # ros2 launch itself takes any name:=value: a misspelt argument would leave its setting at the default
    ("ouput:=ur_twist", r"unknown launch argument\(s\) ouput \(did you mean output\?\) \(known: "),
    # so would a misspelt key in the user's file (ROS ignores it): README step 5 slows the arm this way
    ("params_file:={tmp}/typo.yaml", r"section 'velocity_commander': 'max_sped' is not a parameter of "
                                     r"velocity_commander \(did you mean max_speed\?\)"),
])
def test_a_bad_argument_stops_the_launch_naming_it(launch, argument, says, tmp_path):
    (tmp_path / "typo.yaml").write_text("velocity_commander:\n  ros__parameters:\n    max_sped: 0.03\n")
    lt = launch("sim", argument.format(tmp=tmp_path))
    assert lt.proc.wait(START_TIMEOUT) != 0
    out = lt.output()
    assert re.search(says, out), out[-3000:]
    assert not _node_tracebacks(out), out[-3000:]


# ------------------------------------------------------------------------------------------------ a push
def _arm_input(node):
    from geometry_msgs.msg import TwistStamped
    from parapush_ros.ros import qos, topics

    rec = Recorder()
    node.create_subscription(TwistStamped, topics.SERVO_TWIST, rec, qos.RELIABLE)
    return rec


def _pushing_stack(launch, ros_executor, tmp_path, watcher: str, *args: str):
    """The sim launch at a quarter of real time (``SLOW_SIM``) with ``args``, a node ``watcher`` of ours in the test
    process and the arm's input it records: (launch, node, arm)."""
    import rclpy

    slow = tmp_path / "slow_sim.yaml"
    slow.write_text(SLOW_SIM)
    lt = launch("sim", f"params_file:={slow}", *args)
    node = ros_executor.add(rclpy.create_node(watcher))
    return lt, node, _arm_input(node)


def _send_readme_goal(lt: Launch, node):
    """The README's goal through the planner's action, once the launch's planner is active; its goal handle.

    Sent again (at most twice; ``ros.actions.ResentGoal``) when its answer is lost on the way: the planner logs
    that it could not deliver it (``LOST_ANSWER``), or 30 s pass with no answer. The second was seen once on CI (two
    test workers on a loaded host): no answer in 60 s and nothing in the launch output. rmw_fastrtps answers a
    request whose caller its server has not yet paired (request writer with reply reader, in discovery) into nothing
    and returns success (ros2/rmw_fastrtps#467; holding such requests back was designed in #418, never merged).
    These tests are about what follows the goal; a planner that is stuck stays stuck for the next goal and still
    fails the test."""
    from parapush_msgs.action import PushObject
    from parapush_ros.ros import topics
    from parapush_ros.ros.actions import ActionClient, ResentGoal

    client = ActionClient(node, PushObject, topics.PUSH_ACTION)
    lt.wait_output(r"\[mpc_planner\]: active")
    wait_for(client.server_is_ready, timeout=START_TIMEOUT, interval=0.1, what="the push_object action server")
    goal = PushObject.Goal(target_object="slider", goal_x=0.25, goal_y=0.0, position_tolerance=0.05,
                           yaw_tolerance=-1.0)
    sent = ResentGoal(client, goal, timeout=30.0, attempts=3)  # s of wall time: answered in ms on a quiet host
    lost_before = [lt.output().count(LOST_ANSWER)]

    def answered():
        if lt.output().count(LOST_ANSWER) > lost_before[0]:
            print("the planner could not deliver the goal's answer: sent again", file=sys.stderr)
            lost_before[0] = lt.output().count(LOST_ANSWER)
            sent.resend()
        return sent.poll()

    try:
        return wait_for(answered, timeout=120.0, interval=0.1,
                        what=lambda: f"the goal's answer (sent {sent.sent} times):\n{lt.output()[-3000:]}")
    except TimeoutError as e:
        pytest.fail(f"{e}:\n{lt.output()[-3000:]}")


def _speed(msg) -> float:
    return abs(msg.twist.linear.x) + abs(msg.twist.linear.y) + abs(msg.twist.angular.z)


def test_ctrl_c_mid_push_leaves_the_arm_at_zero_and_every_node_exits_0(launch, ros_executor, tmp_path):
    """SIGINT to the launch's process group (Ctrl-C in its terminal) while the arm moves: the last twist on the
    arm's input is zero and every process finishes cleanly."""
    from parapush_ros import bringup

    lt, node, arm = _pushing_stack(launch, ros_executor, tmp_path, "launch_sigint_watch")
    assert _send_readme_goal(lt, node).accepted
    wait_for(lambda: arm.first_since(0, lambda m: _speed(m) > 1e-3), timeout=START_TIMEOUT, interval=0.05,
             what="the arm to move")
    assert lt.interrupt() == 0, lt.output()[-3000:]
    exits = lt.exits()
    ours = [f"{s.executable}" for s in bringup.nodes("sim")]
    for name in ours:
        codes = [c for proc, c in exits.items() if proc.rsplit("-", 1)[0] == name]
        assert codes == [0], f"{name}: {codes}\n{lt.output()[-4000:]}"
    assert not _node_tracebacks(lt.output()), lt.output()[-4000:]
    last = wait_for(arm.last, what="the arm's input")  # every publisher's process has ended: nothing more comes
    assert _speed(last) == 0.0, f"last twist on the arm's input is not zero: {last.twist}"
    assert any(_speed(m) > 1e-3 for m in arm.msgs)  # it did move before


def _trigger(node, service: str):
    """A std_srvs/Trigger call answered (asked again where Fast DDS dropped the answer: e-stop and reset are
    idempotent)."""
    from std_srvs.srv import Trigger

    client = node.create_client(Trigger, service)
    wait_for(lambda: client.service_is_ready(), timeout=START_TIMEOUT, interval=0.1, what=service)

    def answered():
        future = client.call_async(Trigger.Request())
        if not _done_within(future, 10.0):
            future.cancel()
            return False
        return future.result()
    return wait_for(answered, timeout=60.0, interval=0.1, what=f"{service}'s answer")


def _lifecycle(node, target: str, transition: str) -> bool:
    """``ros2 lifecycle set <target> <transition>``: True once ``target`` is in the transition's goal state (a
    transition whose answer Fast DDS dropped is not asked again: the state is read instead)."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    change = node.create_client(ChangeState, f"/{target}/change_state")
    get = node.create_client(GetState, f"/{target}/get_state")
    wait_for(lambda: change.service_is_ready() and get.service_is_ready(), timeout=START_TIMEOUT, interval=0.1,
             what=f"{target}'s lifecycle services")
    number, goal = {"deactivate": (Transition.TRANSITION_DEACTIVATE, "inactive"),
                    "activate": (Transition.TRANSITION_ACTIVATE, "active")}[transition]

    def state():
        future = get.call_async(GetState.Request())
        if not _done_within(future, 10.0):
            future.cancel()
            return False
        return future.result().current_state.label
    future = change.call_async(ChangeState.Request(transition=Transition(id=number)))
    if not _done_within(future, 10.0):
        future.cancel()
    return wait_for(lambda: state() == goal, timeout=60.0, interval=0.1, what=f"{target} {goal}")


@pytest.mark.parametrize("stop", ["estop", "deactivate"])
def test_an_operators_stop_at_the_commander_ends_the_push_and_its_undo_does_not_resume_it(launch, ros_executor,
                                                                                          tmp_path, stop):
    """The operator stops the arm at the commander mid-push, by its e-stop (velocity_commander/estop) or by
    deactivating it: the goal ends aborted, saying why (while e-stopped, goals are refused); after the reset or the
    activate the arm stays at zero (the push once went on to the goal 3 s after a reset) until a new goal, which is
    taken."""
    from parapush_msgs.action import PushObject
    from rosgraph_msgs.msg import Clock
    from parapush_ros.ros import qos, topics

    lt, node, arm = _pushing_stack(launch, ros_executor, tmp_path, "launch_operator_stop_watch")
    clock = Recorder()
    node.create_subscription(Clock, topics.CLOCK, clock, qos.RELIABLE)
    handle = _send_readme_goal(lt, node)
    assert handle.accepted
    wait_for(lambda: arm.first_since(0, lambda m: _speed(m) > 1e-3), timeout=START_TIMEOUT, interval=0.05,
             what="the arm to move")
    if stop == "estop":
        assert _trigger(node, "/velocity_commander/estop").success
    else:
        assert _lifecycle(node, "velocity_commander", "deactivate")
    result = wait_future(handle.get_result_async(), timeout=120.0, what="the push's result").result
    said = "e-stopped" if stop == "estop" else "deactivated"
    assert result.outcome == PushObject.Result.ABORTED and f"velocity commander is {said}" in result.message, \
        result.message
    if stop == "estop":
        assert not _send_readme_goal(lt, node).accepted
        lt.wait_output(r"goal refused: the velocity commander is e-stopped")
        assert _trigger(node, "/velocity_commander/reset").success
    else:
        assert _lifecycle(node, "velocity_commander", "activate")
    def sim_time() -> float:
        msg = wait_for(clock.last, timeout=60.0, interval=0.05, what="the simulator's /clock")
        return msg.clock.sec + msg.clock.nanosec * 1e-9
    seen, t_undo = arm.count(), sim_time()
    wait_for(lambda: sim_time() > t_undo + 2.0, timeout=120.0, interval=0.05,
             what="2 s of simulated time after the undo")
    moved = arm.first_since(seen, lambda m: _speed(m) > 0.0)
    assert moved is None, f"the arm moved after the {stop}'s undo without a new goal: {moved.twist}"
    assert _send_readme_goal(lt, node).accepted  # a new goal is the way to move again
    assert not _node_tracebacks(lt.output()), lt.output()[-3000:]


def test_an_arm_that_ignores_the_commands_ends_the_push_saying_so(launch, ros_executor, tmp_path):
    """The simulated arm drops the twists (its Servo's command timeout a microsecond: each twist is too old when
    it arrives, as with a Servo that is halted or paused the pusher stands still): within about a second of
    simulated time the commander latches its e-stop, saying the pusher does not follow, and the goal ends aborted
    with that reason (it went on to its timeout). (The sim's frame and topic follow the commander's settings.)"""
    import rclpy
    from parapush_msgs.action import PushObject

    frozen = tmp_path / "arm_ignores_twists.yaml"
    frozen.write_text(SLOW_SIM + "    command_timeout: 1.0e-6\n")
    lt = launch("sim", f"params_file:={frozen}")
    node = ros_executor.add(rclpy.create_node("launch_frozen_arm_watch"))
    handle = _send_readme_goal(lt, node)
    assert handle.accepted
    result = wait_future(handle.get_result_async(), timeout=180.0, what="the push's result").result
    assert result.outcome == PushObject.Result.ABORTED, result.message
    assert "velocity commander is e-stopped (the pusher does not follow the commands" in result.message, \
        result.message
    assert result.actions_executed < 60, result.actions_executed  # not the run to max_actions
    lt.wait_output(r"\[velocity_commander\]: state -> estop: the pusher does not follow the commands")
    assert not _node_tracebacks(lt.output()), lt.output()[-3000:]


def test_sigterm_to_the_launch_alone_mid_push_still_leaves_the_arm_at_zero(launch, ros_executor, tmp_path):
    """``kill <pid of ros2 launch>`` (a supervisor, a script): launch exits on SIGTERM and leaves its processes
    running ("using SIGTERM can result in orphaned processes"). Each of our nodes asked the kernel for SIGINT at its
    parent's death, so every one still stops as on Ctrl-C and the arm's last twist is zero. (tf2's static transform
    publisher, not ours, is left running by launch: harmless, and ended here.)"""
    import psutil
    from parapush_ros import bringup

    # planner auto: the 10 Hz planner with the fine model
    lt, node, arm = _pushing_stack(launch, ros_executor, tmp_path, "launch_sigterm_watch", "model:=fine")
    assert _send_readme_goal(lt, node).accepted
    assert re.search(r"\[mpc_planner\]: planner auto: fast \(real time, one object, model fine\)",
                     lt.output()), lt.output()[-3000:]
    wait_for(lambda: arm.first_since(0, lambda m: _speed(m) > 1e-3), timeout=START_TIMEOUT, interval=0.05,
             what="the arm to move")
    children = psutil.Process(lt.proc.pid).children(recursive=False)
    executables = [s.executable for s in bringup.nodes("sim")]
    ours = [p for p in children if any(f"/{e}" in " ".join(p.cmdline()) for e in executables)]
    others = [p for p in children if p not in ours]
    try:
        assert len(ours) == len(executables), [p.cmdline() for p in children]
        os.kill(lt.proc.pid, signal.SIGTERM)  # the launch process only, not its group
        lt.proc.wait(60.0)
        _gone, alive = psutil.wait_procs(ours, timeout=60.0)
        assert not alive, f"still running after the launch died: {[p.pid for p in alive]}\n{lt.output()[-3000:]}"
        last = wait_for(arm.last, what="the arm's input")
        assert _speed(last) == 0.0, f"last twist on the arm's input is not zero: {last.twist}"
    finally:
        for p in others:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def test_a_node_that_dies_mid_push_ends_the_launch_and_leaves_the_arm_at_zero(launch, ros_executor, tmp_path):
    """The pose_recorder of ``record:=FILE`` killed mid-push (SIGKILL: no chance to clean up, as a crash): the
    launch names it and ends with status 1, every other node stops as on Ctrl-C and exits 0, the arm's last twist
    is zero, and the bag keeps its chunks written up to there (read back without its summary)."""
    import psutil
    import rclpy
    from parapush_ros import bringup
    from parapush_ros.core.fidelity.recordings import read_recording
    from parapush_ros.core.scene.spec import load_scene

    slow = tmp_path / "slow_sim.yaml"
    slow.write_text(SLOW_SIM)
    bag = tmp_path / "push.mcap"
    lt = launch("sim", f"params_file:={slow}", f"record:={bag}")
    node = ros_executor.add(rclpy.create_node("launch_crash_watch"))
    arm = _arm_input(node)
    # the recorder writes 64 KiB chunks (what a killed one loses): one is on disk before the push
    wait_for(lambda: bag.exists() and bag.stat().st_size > 80 * 1024, timeout=START_TIMEOUT, interval=0.2,
             what=lambda: f"the first chunks of the bag:\n{lt.output()[-3000:]}")
    assert _send_readme_goal(lt, node).accepted
    wait_for(lambda: arm.first_since(0, lambda m: _speed(m) > 1e-3), timeout=START_TIMEOUT, interval=0.05,
             what="the arm to move")
    (recorder,) = [p for p in psutil.Process(lt.proc.pid).children() if "/pose_recorder" in " ".join(p.cmdline())]
    recorder.kill()
    assert lt.proc.wait(120.0) == 1, lt.output()[-3000:]
    out = lt.output()
    assert re.search(r"pose_recorder exited with status -9 .*stopping the launch", out), out[-3000:]
    exits = lt.exits()
    for name in (s.executable for s in bringup.nodes("sim", {"record": str(bag)})):
        codes = [c for proc, c in exits.items() if proc.rsplit("-", 1)[0] == name]
        assert codes == ([-9] if name == "pose_recorder" else [0]), f"{name}: {codes}\n{out[-4000:]}"
    last = wait_for(arm.last, what="the arm's input")
    assert _speed(last) == 0.0, f"last twist on the arm's input is not zero: {last.twist}"
    recording = read_recording(bag, load_scene("obstacle_push"))
    assert recording.duration > 0.0 and recording.note, recording.note  # salvaged: the writer never finished


def test_a_commander_killed_mid_push_still_leaves_a_zero_as_the_arms_last_command(launch, ros_executor, tmp_path):
    """SIGKILL to velocity_commander mid-push (out of memory, a crash: no chance to send its own zero). A UR twist
    or forward velocity controller would hold its last command; the launch process, which outlives the commander,
    sends the arm input a zero at once: the last twist the arm sees is zero, and the launch ends naming the
    commander."""
    import psutil

    lt, node, arm = _pushing_stack(launch, ros_executor, tmp_path, "launch_commander_kill_watch")
    assert _send_readme_goal(lt, node).accepted
    wait_for(lambda: arm.first_since(0, lambda m: _speed(m) > 1e-3), timeout=START_TIMEOUT, interval=0.05,
             what="the arm to move")
    (commander,) = [p for p in psutil.Process(lt.proc.pid).children()
                    if "/velocity_commander" in " ".join(p.cmdline())]
    commander.kill()
    assert lt.proc.wait(120.0) == 1, lt.output()[-3000:]
    last = wait_for(arm.last, what="the arm's input")
    assert _speed(last) == 0.0, f"last twist on the arm's input is not zero: {last.twist}"
    assert any(_speed(m) > 1e-3 for m in arm.msgs)  # it did move before
    out = lt.output()
    # repeated until every reader acknowledged it (a reader that lost it on a starved host gets a later one), which
    # it says (within 2 s of wall clock, or not: either is said, so a loaded host is not a failure here)
    assert re.search(r"velocity_commander exited with status -9: the launch sent the arm a zero command on "
                     r"/servo_node/delta_twist_cmds \(\d+x, (acknowledged by every reader after [\d.]+ s|NOT "
                     r"acknowledged by every reader within [\d.]+ s: make sure the arm is still)\)", out), out[-3000:]


def _send_goal_cli(lt: Launch, goal: str, out: Path, silence: float = 30.0) -> str:
    """``ros2 action send_goal /push_object GOAL`` to its end: "answered" once it is (the CLI's output in ``out``),
    "lost" as soon as the planner logs that it could not deliver the goal's answer, or ``silence`` s of wall time
    after the CLI sent the goal with no answer (the CLI is then stopped)."""
    lost_before = lt.output().count(LOST_ANSWER)
    sent_at = []  # when the CLI said it sent the goal (it first waits for the server, which a loaded host makes slow)

    def answer():
        text = out.read_text()
        if "Goal accepted" in text or "Goal was rejected" in text or cli.poll() is not None:
            return "answered"
        if lt.output().count(LOST_ANSWER) > lost_before:
            return "lost"
        if "Sending goal" in text and not sent_at:
            sent_at.append(time.monotonic())
        return "lost" if sent_at and time.monotonic() - sent_at[0] > silence else None

    with open(out, "w") as f:
        cli = subprocess.Popen(["ros2", "action", "send_goal", "/push_object", "parapush_msgs/action/PushObject", goal],
                               stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})  # its lines as it prints them
        try:
            answered = wait_for(answer, timeout=600.0, interval=0.2,
                                what=lambda: f"an answer to the goal:\n{out.read_text()}\n{lt.output()[-3000:]}")
            if answered == "answered":
                cli.wait(timeout=600)
            return answered
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()


def test_readme_first_push_succeeds_under_ros2_launch(launch, tmp_path):
    """The README's walkthrough, word for word: ``ros2 launch parapush_ros sim.launch.py``, then ``ros2 action
    send_goal /push_object ...``. The planner stops to plan (``realtime: false`` in a params_file) and the world runs
    at a quarter of real time, so that the outcome hangs as little as a stack of processes can on this host's speed:
    pushes and plans are on the simulator's clock.

    A goal whose answer does not come is sent again, as a user would: Fast DDS gives a service server 100 ms to
    discover the caller's reply reader, after which rclpy's action server logs "Failed to send goal response" and
    drops the goal, and the CLI waits for an answer forever (on CI's loaded host this hung the test for 600 s); and a
    goal sent from a test's own client once went unanswered for 60 s on CI with nothing logged (``_send_readme_goal``).
    A planner that does not answer at all fails all three goals."""
    stop_and_plan = tmp_path / "stop_and_plan.yaml"
    stop_and_plan.write_text("mpc_planner:\n  ros__parameters:\n    realtime: false\n" + SLOW_SIM)
    lt = launch("sim", f"params_file:={stop_and_plan}")
    lt.wait_output(r"\[mpc_planner\]: active")
    assert re.search(r"\[mpc_planner\]: planner auto: mpc \(stop and plan", lt.output()), lt.output()[-3000:]
    goal = ("{target_object: slider, goal_x: 0.25, goal_y: 0.0, position_tolerance: 0.05, yaw_tolerance: -1.0}")
    for attempt in range(3):
        out = tmp_path / f"send_goal_{attempt}.log"
        if _send_goal_cli(lt, goal, out) == "answered":
            break
    text = out.read_text()
    assert "Goal finished with status: SUCCEEDED" in text, text[-3000:] + lt.output()[-3000:]
    assert "outcome: 0" in text or "REACHED" in text or "outcome:" in text


# ------------------------------------------------------------------------------------------------ the robot
def test_robot_launch_starts_without_hardware_and_refuses_goals_saying_why(launch, ros_executor):
    import rclpy
    from parapush_msgs.action import PushObject
    from parapush_ros import bringup

    lt = launch("robot")
    node = ros_executor.add(rclpy.create_node("launch_robot_client"))
    handle = _send_readme_goal(lt, node)
    # the robot's default planner with the default model (Parareal-1): the 10 Hz planner, and the node says why
    assert re.search(r"\[mpc_planner\]: planner auto: fast \(real time, one object, model parareal1\)",
                     lt.output()), lt.output()[-3000:]
    if handle.accepted:  # (the planner had not yet heard the commander's status)
        result = wait_future(handle.get_result_async(), timeout=60.0, what="the goal's result").result
        assert result.outcome != PushObject.Result.REACHED
        assert "no scene state" in result.message, result.message
    else:  # no MoveIt Servo answers: the commander cannot know its units, and the planner says so
        lt.wait_output(r"goal refused: the velocity commander is waiting for MoveIt Servo's units|goal refused: the "
                       r"velocity commander does not know MoveIt Servo's units")
    assert lt.proc.poll() is None, lt.output()[-3000:]
    assert lt.interrupt() == 0, lt.output()[-3000:]
    ours = {s.executable for s in bringup.nodes("robot")}
    exits = {p: c for p, c in lt.exits().items() if p.rsplit("-", 1)[0] in ours}
    assert sorted(p.rsplit("-", 1)[0] for p in exits) == sorted(ours), lt.output()[-3000:]
    assert set(exits.values()) == {0}, f"{exits}\n{lt.output()[-3000:]}"
    assert not _node_tracebacks(lt.output()), lt.output()[-3000:]


def test_robot_launch_kills_a_commander_that_hangs_after_a_zero_and_not_one_deactivated(launch, ros_executor,
                                                                                          tmp_path):
    """The launch's hang watch on the robot (system clock): a commander deactivated by the operator is silent by
    design and is left alone; activated again, then stopped (SIGSTOP) while it sends zeros (without hardware: no
    pusher state), it is killed all the same, since a commander stopped while it published reaches some subscribers
    and not others (``soak --robot``: the arm had a non-zero twist, the launch's last was a zero). The arm's last
    command is zero and the launch ends naming the commander. (The UR twist output: it needs no Servo to answer
    before an activate.)"""
    import psutil
    import rclpy
    from geometry_msgs.msg import TwistStamped
    from rclpy.clock import Clock, ClockType
    from rclpy.time import Time

    from parapush_ros.bringup import COMMANDER_HANG_TIMEOUT
    from parapush_ros.ros import qos, topics

    params = tmp_path / "ur_twist.yaml"
    params.write_text("velocity_commander:\n  ros__parameters:\n    output: ur_twist\n    output_frame_id: base\n")
    lt = launch("robot", f"params_file:={params}")
    node = ros_executor.add(rclpy.create_node("launch_robot_hang_watch"))
    arm = Recorder()
    node.create_subscription(TwistStamped, topics.UR_TWIST, arm, qos.RELIABLE)
    lt.wait_output(r"\[velocity_commander\]: active")
    wait_for(lambda: arm.count() > 0, timeout=START_TIMEOUT, interval=0.05, what="the commander's first command")
    assert _lifecycle(node, "velocity_commander", "deactivate")
    inactive = Clock(clock_type=ClockType.SYSTEM_TIME).now().nanoseconds  # the commander stamps on this host's clock
    steady = Clock(clock_type=ClockType.STEADY_TIME)  # the watch's clock
    t0 = steady.now().nanoseconds * 1e-9
    wait_for(lambda: steady.now().nanoseconds * 1e-9 - t0 > 4 * COMMANDER_HANG_TIMEOUT, timeout=60.0, interval=0.05,
             what="four hang timeouts of the watch's clock")
    # by stamp, not by arrival: on a loaded host twists sent before the deactivate arrived after it (4 of them)
    late = arm.first_since(0, lambda m: Time.from_msg(m.header.stamp).nanoseconds > inactive)
    assert late is None, f"the commander sent while inactive: {late}"
    seen = arm.count()
    assert lt.proc.poll() is None and "(hung?)" not in lt.output(), lt.output()[-3000:]
    assert _lifecycle(node, "velocity_commander", "activate")
    wait_for(lambda: arm.count() > seen + 10, timeout=START_TIMEOUT, interval=0.05, what="commands again")
    (commander,) = [p for p in psutil.Process(lt.proc.pid).children()
                    if "/velocity_commander" in " ".join(p.cmdline())]
    commander.suspend()
    try:
        assert lt.proc.wait(120.0) == 1, lt.output()[-3000:]
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            commander.resume()
    out = lt.output()
    assert re.search(r"velocity_commander has sent nothing for [\d.]+ s after a zero command \(hung\?\): the launch "
                     rf"sent the arm a zero on {topics.UR_TWIST} and is killing it", out), out[-3000:]
    assert _speed(wait_for(arm.last, what="the arm's input")) == 0.0
    exits = {p.rsplit("-", 1)[0]: c for p, c in lt.exits().items()}
    assert exits["velocity_commander"] == -9, out[-3000:]
    assert all(c == 0 for n, c in exits.items() if n in ("mocap_ingest", "parareal_predictor", "mpc_planner")), \
        out[-3000:]


def test_sigint_to_the_launch_alone_stops_the_stack_even_if_its_parent_ignored_sigint(launch):
    """``ros2 launch ... &`` in a start script, stopped later with ``kill -INT <its pid>``: the job starts with
    SIGINT ignored, and ``ros2 launch`` would ignore that SIGINT for good (the stack would go on running, and a process
    that did not end by itself would never be escalated to SIGTERM). The launch takes SIGINT back, says so, passes the
    stop on to every process, and every node exits 0."""
    from parapush_ros import bringup

    lt = launch("robot", sigint_ignored=True)
    lt.wait_output(r"\[mpc_planner\]: active")
    assert "started with SIGINT ignored" in lt.output(), lt.output()[-3000:]
    os.kill(lt.proc.pid, signal.SIGINT)  # the launch alone, not its process group
    assert lt.proc.wait(60) == 0, lt.output()[-3000:]
    ours = {s.executable for s in bringup.nodes("robot")}
    exits = {p: c for p, c in lt.exits().items() if p.rsplit("-", 1)[0] in ours}
    assert sorted(p.rsplit("-", 1)[0] for p in exits) == sorted(ours), lt.output()[-3000:]
    assert set(exits.values()) == {0}, f"{exits}\n{lt.output()[-3000:]}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_node_run_alone_ends_cleanly_on_sigterm_and_sigint(sig, tmp_path):
    """A node executable (what ``ros2 run parapush_ros mocap_ingest`` starts) stopped as a service manager (SIGTERM)
    or a terminal (SIGINT) does: exit 0. (``ros2 launch`` itself answers SIGTERM by abandoning its processes, and
    ``ros2 run``'s wrapper dies of it: stop a stack with SIGINT.)"""
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([shutil.which("mocap_ingest") or "mocap_ingest"], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: "waiting for mocap bodies" in log.read_text(), timeout=START_TIMEOUT, interval=0.1,
                     what="mocap_ingest to start")
            os.killpg(proc.pid, sig)
            assert proc.wait(60) == 0, log.read_text()[-2000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert not _node_tracebacks("[mocap_ingest-1] " + log.read_text().replace("\n", "\n[mocap_ingest-1] "))


def test_a_value_of_the_wrong_type_stops_a_node_in_one_line(tmp_path):
    """``-p max_speed:=fast`` (or a string in a lab's file where a double is declared): rclpy refuses it; the node
    says so in one line naming the parameter and exits 2, no traceback."""
    r = subprocess.run([shutil.which("velocity_commander") or "velocity_commander", "--ros-args", "-p",
                        "max_speed:=fast"], capture_output=True, text=True, timeout=START_TIMEOUT)
    assert r.returncode == 2, r.stderr[-2000:]
    assert re.search(r"velocity_commander: cannot start: .*parameter 'max_speed' to 'fast'.*expecting type 'DOUBLE'",
                     r.stderr), r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_a_lab_launch_file_that_includes_ours_keeps_its_own_arguments(tmp_path):
    """Run directly, our launch file refuses a name it does not know (``ouput:=``, above). Included by a lab's
    launch file, the lab's own arguments are in the same configurations (``recording:=`` here, close to our
    ``record``): the stack starts, warning about them, as nobody but the lab's file can say whether they are typos."""
    from parapush_ros import bringup
    lab = tmp_path / "lab.launch.py"
    ours = str(bringup.share_dir() / "launch" / "sim.launch.py")
    lab.write_text(
        "import os\n"
        "from launch import LaunchDescription\n"
        "from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription\n"
        "from launch.launch_description_sources import PythonLaunchDescriptionSource\n\n\n"
        "def generate_launch_description():\n"
        "    return LaunchDescription([DeclareLaunchArgument('recording', default_value='no'),\n"
        f"        IncludeLaunchDescription(PythonLaunchDescriptionSource({ours!r}),\n"
        "                                 launch_arguments={'rviz': 'false'}.items())])\n")
    log = tmp_path / "lab_launch.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["ros2", "launch", str(lab), "recording:=yes"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: re.search(r"\[mpc_planner\]: active", log.read_text()) or proc.poll() is not None,
                     timeout=START_TIMEOUT, interval=0.1, what="the included stack to come up")
            text = log.read_text()
            assert proc.poll() is None, text[-3000:]
            assert re.search(r"WARNING: launch arguments not parapush's, left to the launch file that includes this "
                             r"one: recording \(did you mean record\?\)", text), text[-3000:]
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(60) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_launch_wedged_below_python_ends_with_its_traceback_and_its_nodes_stop(tmp_path):
    """The launch process runs a ROS node of its own (lifecycle tracking, the commander's zero and hang watch), and
    rclpy can block below Python holding the GIL: then the launch hears no signal and never ends, and its hang watch
    is deaf. Its event loop re-arms faulthandler's watchdog (``bringup._end_a_wedged_launch``): wedged here by a C
    call that holds the GIL (a lab's launch file including ours, its 30 s shortened to 3 s), it prints the
    traceback, exits 1, and every node stops (they ask for SIGINT at their parent's death)."""
    import psutil

    from parapush_ros import bringup
    lab = tmp_path / "wedging.launch.py"
    ours = str(bringup.share_dir() / "launch" / "robot.launch.py")
    lab.write_text(
        "import ctypes, signal\n"
        "from launch import LaunchDescription\n"
        "from launch.actions import IncludeLaunchDescription\n"
        "from launch.launch_description_sources import PythonLaunchDescriptionSource\n"
        "from parapush_ros.ros import node\n\n"
        "node.WEDGED_LIMIT_S = 3.0\n"
        "signal.signal(signal.SIGUSR1, lambda *_: ctypes.PyDLL(None).sleep(120))  # a C call holding the GIL\n\n\n"
        "def generate_launch_description():\n"
        f"    return LaunchDescription([IncludeLaunchDescription(PythonLaunchDescriptionSource({ours!r}),\n"
        "                                                       launch_arguments={'rviz': 'false'}.items())])\n")
    log = tmp_path / "wedging_launch.log"
    family = []
    with open(log, "w") as out:
        proc = subprocess.Popen(["ros2", "launch", str(lab)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: re.search(r"\[mpc_planner\]: active", log.read_text()) or proc.poll() is not None,
                     timeout=START_TIMEOUT, interval=0.1, what="the stack to come up")
            family = psutil.Process(proc.pid).children(recursive=True)
            ours = [p for p in family if any(f"/{s.executable}" in _command(p) for s in bringup.nodes("robot"))]
            assert len(ours) == len(bringup.nodes("robot")), log.read_text()[-3000:]
            os.kill(proc.pid, signal.SIGUSR1)
            assert proc.wait(60) == 1, log.read_text()[-3000:]
            _, alive = psutil.wait_procs(ours, timeout=60)
            assert not alive, f"{[p.pid for p in alive]}\n{log.read_text()[-3000:]}"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for p in family:  # not ours (tf2's static transform publisher) stays behind a dead launch
                with contextlib.suppress(psutil.Error):
                    p.kill()
    text = log.read_text()
    assert "Timeout (0:00:03)!" in text and "wedging.launch.py" in text, text[-3000:]  # the wedged thread's frame


def test_nodes_still_starting_when_the_launch_is_killed_stop_too(tmp_path):
    """A launch killed (or given SIGTERM) while its nodes are still importing: they were handed to another parent
    before they could ask for SIGINT at their parent's death, and would run on with nothing to stop them. Each knows
    the launch that started it (``ros.node.LAUNCH_PID_ENV``) and stops at once if it has ended."""
    import psutil

    from parapush_ros import bringup
    ours = {s.executable for s in bringup.nodes("robot")}
    log = tmp_path / "killed_launch.log"
    family = []
    with open(log, "w") as out:
        proc = subprocess.Popen(["ros2", "launch", "parapush_ros", "robot.launch.py", "rviz:=false"], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: {m for m in ours if re.search(rf"\[{m}-\d+\]: process started", log.read_text())} == ours
                     or proc.poll() is not None, timeout=START_TIMEOUT, interval=0.01, what="the nodes to be started")
            family = psutil.Process(proc.pid).children(recursive=True)
            nodes = [p for p in family if any(f"/{m}" in _command(p) for m in ours)]
            assert len(nodes) == len(ours), log.read_text()[-3000:]
            assert "active" not in log.read_text()  # still starting
            proc.kill()  # the launch alone
            proc.wait()
            _, alive = psutil.wait_procs(nodes, timeout=START_TIMEOUT)
            assert not alive, [_command(p) for p in alive]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for p in family:  # with tf2's static transform publisher, not ours: it stays behind a killed launch
                with contextlib.suppress(psutil.Error):
                    p.kill()


def _command(process) -> str:
    """The first two words of a process's command line; empty once it has gone."""
    import psutil
    try:
        return " ".join(process.cmdline()[:2])
    except psutil.Error:
        return ""
