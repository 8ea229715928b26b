"""velocity_commander through real rclpy entities: output formats, watchdog, e-stop, limits and the workspace.

The harness stands in for the planner and mocap_ingest and owns the simulated clock (the commander runs with
``use_sim_time``): each tick of one commander period it publishes the scene state and the command, then ``/clock``,
and waits for the commander's output for that period before the next tick (lock-step). A slow host makes the
test slower, never different, so the watchdog is checked against its exact bound in simulated time.
"""
import math
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import TwistStamped  # noqa: E402
from parapush_msgs.msg import SceneState  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402
from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from rclpy.time import Time  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402

from conftest import BackgroundExecutor, lifecycle_state, wait_for, wait_future, wait_sim  # noqa: E402
from parapush_ros.nodes.velocity_commander import VelocityCommanderNode  # noqa: E402
from parapush_ros.ros.node import autostart, bring_up  # noqa: E402
from parapush_ros.ros.qos import LATCHED, RELIABLE  # noqa: E402

pytestmark = pytest.mark.timeout(60)
RATE = 20.0  # Hz: a period (50 ms) well above scheduling jitter
TIMEOUT = 0.2


class Harness:
    """The commander in its own namespace, a fake planner (pusher_cmd) and fake mocap_ingest (scene_state)."""

    def __init__(self, ctx, ex, ns, activate=True, **params):
        self.ns = ns
        overrides = {"scene": "obstacle_push", "rate": RATE, "command_timeout": TIMEOUT, "gripper_enabled": False,
                     "max_acceleration": 100.0, "use_sim_time": True,
                     "follow_fraction": 0.0,  # (the pusher stands still unless arm_follows: the check's test sets it)
                     **params}
        node = VelocityCommanderNode(namespace=ns, parameter_overrides=[
            Parameter(k, value=v) for k, v in overrides.items()])
        self.node = ex.add(bring_up(node) if activate else node)
        self.expect_output = activate  # lock-step on the commander's output (else the feed paces itself)
        self.feeding = threading.Event()
        self.feeding.set()
        self.step = threading.Lock()  # held by the feeder for one whole period (state, command, clock, output)
        self.io = ex.add(rclpy.create_node("commander_io", namespace=ns, context=ctx))
        self.out = []
        self.out_times = []
        self.lock = threading.Lock()
        self.clock_pub = self.io.create_publisher(Clock, "/clock", RELIABLE)
        self.cmd_pub = self.io.create_publisher(TwistStamped, "pusher_cmd", RELIABLE)
        self.teleop_pub = self.io.create_publisher(TwistStamped, "pusher_cmd_teleop", RELIABLE)
        self.state_pub = self.io.create_publisher(SceneState, "scene_state", RELIABLE)
        self.status = []
        self.io.create_subscription(String, "velocity_commander/status", self.status.append, LATCHED)
        self.estop = self.io.create_client(Trigger, "velocity_commander/estop")
        self.reset = self.io.create_client(Trigger, "velocity_commander/reset")
        self.change_state = self.io.create_client(ChangeState, "velocity_commander/change_state")
        self.pusher = (-0.2, 0.0)
        self.arm_follows = False  # the pusher moves, each period, by the last twist the commander sent (servo)
        self.valid = True
        self.t = 0.0  # the simulated clock (s)
        self.cmd_frame = "table"
        self._stop = threading.Event()
        self._cmd = None
        self._teleop = None  # a teleop command published every tick too (pusher_cmd_teleop)
        self._thread = threading.Thread(target=self._feed, daemon=True)

    def subscribe(self, msg_type, topic):
        self.io.create_subscription(msg_type, topic, self._on_out, RELIABLE)
        if not self.expect_output:  # an unconfigured commander has no subscriptions yet
            self._thread.start()
            return self
        wait_for(lambda: self.cmd_pub.get_subscription_count() >= 1 and self.state_pub.get_subscription_count() >= 1,
                 what="commander subscriptions")
        self._thread.start()
        wait_for(lambda: self.out, timeout=30.0, what=f"output on {topic}")
        return self

    def transition(self, label) -> float:
        """Ask for a lifecycle transition through the node's ``change_state`` service (as ``ros2 lifecycle set``
        and the launch files do), with the simulated clock held still; returns the sim time it happened at."""
        self.feeding.clear()
        with self.step:  # no period in flight: the clock cannot move during the transition
            with self.lock:
                t = self.t
            # /clock and change_state are separate DDS channels: wait until the node has this period's clock, else
            # on a loaded host it could serve the transition stamped one period early
            t_ns = int(round(t * 1e9))
            wait_for(lambda: self.node.get_clock().now().nanoseconds == t_ns, timeout=30.0,
                     what=f"the commander's clock at {t:.3f} s before '{label}'")
            req = ChangeState.Request(transition=Transition(label=label))
            assert wait_future(self.change_state.call_async(req), timeout=10.0, what=label).success, label
        self.feeding.set()
        return t

    def _on_out(self, msg):
        with self.lock:
            self.out.append(msg)
            self.out_times.append(self.t)

    def _feed(self):
        """One commander period per tick: state and command (like mocap_ingest and the planner), then the clock;
        then wait for the commander's output of that period (generous wall bound: a hung node)."""
        while not self._stop.is_set():
            self.feeding.wait()
            with self.step:
                self._period()

    def _period(self):
        stamp = Time(nanoseconds=int(round(self.t * 1e9))).to_msg()
        s = SceneState()
        s.header.frame_id, s.header.stamp = "table", stamp
        s.pusher_x, s.pusher_y = self.pusher
        s.pusher_tracking_valid = self.valid
        self.state_pub.publish(s)
        if self._cmd is not None:
            self.cmd_pub.publish(self._twist(*self._cmd, frame=self.cmd_frame, stamp=stamp))
        if self._teleop is not None:
            self.teleop_pub.publish(self._twist(*self._teleop, stamp=stamp))
        with self.lock:
            n = len(self.out)
            self.t = round(self.t + 1.0 / RATE, 9)
        self.clock_pub.publish(Clock(clock=Time(nanoseconds=int(round(self.t * 1e9))).to_msg()))
        if self.expect_output and (self.out or self.t > 1.0):  # once outputs flow: lock-step on them
            wait_for(lambda: self._stop.is_set() or len(self.out) > n, timeout=30.0, interval=0.001,
                     what="the commander's output for the period")
            if self.arm_follows and len(self.out) > n:
                vx, vy = vel(self.out[-1])
                self.pusher = (self.pusher[0] + vx / RATE, self.pusher[1] + vy / RATE)
        else:
            self._stop.wait(1.0 / RATE)

    @staticmethod
    def _twist(vx, vy, frame="table", stamp=None):
        m = TwistStamped()
        m.header.frame_id = frame
        if stamp is not None:
            m.header.stamp = stamp
        m.twist.linear.x, m.twist.linear.y = vx, vy
        return m

    def command(self, v):
        self._cmd = v

    def teleop(self, v):
        self._teleop = v

    def outputs_since(self, t):
        with self.lock:
            return [m for m, tm in zip(self.out, self.out_times) if tm >= t]

    def wait_output(self, pred, what, timeout=30.0, since=None):
        t = self.t if since is None else since
        return wait_for(lambda: next((m for m in self.outputs_since(t) if pred(m)), None), timeout=timeout, what=what)

    def received_at(self, msg) -> float:
        with self.lock:
            return next(t for m, t in zip(self.out, self.out_times) if m is msg)

    def wait_sim(self, seconds):
        wait_sim(lambda: self.t, seconds)

    def close(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2.0)


@pytest.fixture
def harness(ros_context, ros_executor, request):
    made = []

    def make(servo_params=None, **params):
        """``servo_params``: a stand-in MoveIt Servo node in the namespace declaring these parameters."""
        ns = f"/cmd_{request.node.name.split('[')[0][-18:]}_{len(made)}"
        if servo_params is not None:
            ros_executor.add(rclpy.create_node("servo_node", namespace=ns, context=ros_context, parameter_overrides=[
                Parameter(k, value=v) for k, v in servo_params.items()],
                automatically_declare_parameters_from_overrides=True))
            params["servo_parameters_service"] = ns + "/servo_node/get_parameters"
        h = Harness(ros_context, ros_executor, ns, **params)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()


def vel(m):
    return (m.twist.linear.x, m.twist.linear.y)


def msg_seconds(t) -> float:
    return t.sec + t.nanosec * 1e-9


def stamp(m) -> float:
    return msg_seconds(m.header.stamp)


def test_the_arm_moves_only_after_an_explicit_activate(harness):
    """Unconfigured, then configured but inactive, the commander sends nothing although commands keep coming;
    activate lets them through; deactivate sends one zero and silences it again. The proof is order, not time: the
    output is reliable and in order, so a message sent while silent would arrive before the first one sent after
    the activation, stamped before it (the sim clock is held still during each transition)."""
    h = harness(output="servo", output_topic="servo_twist", activate=False)
    assert lifecycle_state(h.node) == "unconfigured"
    h.command((0.03, 0.0))
    h.subscribe(TwistStamped, "servo_twist")
    h.wait_sim(0.3)
    h.transition("configure")
    assert lifecycle_state(h.node) == "inactive"
    wait_for(lambda: h.cmd_pub.get_subscription_count() >= 1, what="commander subscriptions")
    wait_for(lambda: any(m.data.startswith("inactive") for m in h.status), what="status 'inactive'")
    h.wait_sim(0.5)  # commands and ticks while inactive
    t_active = h.transition("activate")
    h.expect_output = True
    h.wait_output(lambda m: vel(m) == pytest.approx((0.03, 0.0)), "the command passed through once active")
    with h.lock:
        first = h.out[0]
    assert stamp(first) >= t_active  # nothing sent before the activation (one tick may land at its instant)

    t_off = h.transition("deactivate")
    h.expect_output = False
    zero = h.wait_output(lambda m: vel(m) == (0.0, 0.0) and stamp(m) == pytest.approx(t_off), "the zero at deactivate",
                         since=t_off)
    assert lifecycle_state(h.node) == "inactive"
    h.wait_sim(0.5)  # commands and ticks while inactive again
    t_on = h.transition("activate")
    h.expect_output = True
    h.command((0.0, 0.02))  # the command held before deactivate was dropped: motion needs a new one
    h.wait_output(lambda m: vel(m) == pytest.approx((0.0, 0.02)), "motion after re-activation")
    with h.lock:
        after = h.out[h.out.index(zero) + 1:]
    assert after and stamp(after[0]) >= t_on  # silent between deactivate and activate


def test_servo_output_watchdog_estop_and_reset(harness):
    h = harness(output="servo", output_topic="servo_twist", output_frame_id="panda_link0")
    h.subscribe(TwistStamped, "servo_twist")
    wait_for(lambda: h.status and h.status[-1].data.startswith("waiting for command"),
             what="status 'waiting for command'")  # latched: it may arrive after the first output
    h.command((0.03, 0.01))
    m = h.wait_output(lambda m: vel(m) == pytest.approx((0.03, 0.01)), "the command passed through")
    assert m.header.frame_id == "panda_link0"
    stamp = m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
    assert stamp == pytest.approx(h.received_at(m), abs=1e-6)  # stamped with the clock it was sent at (Servo drops
    #                                                             twists older than 0.1 s)

    # watchdog: the planner goes silent -> zeros within the timeout and one period (plus one period for the
    # order in which the last command and the clock reach the commander), then zeros every period
    with h.lock:
        h.command(None)
        last_cmd = h.t - 1.0 / RATE  # the last command went out with the previous tick
    zero = h.wait_output(lambda m: vel(m) == (0.0, 0.0), "watchdog zeros")
    t_zero = zero.header.stamp.sec + zero.header.stamp.nanosec * 1e-9
    assert t_zero - last_cmd <= TIMEOUT + 2.0 / RATE + 1e-9
    t = h.t
    h.wait_sim(0.5)
    after = h.outputs_since(t)
    assert len(after) >= 3 and all(vel(m) == (0.0, 0.0) for m in after)
    assert any(s.data.startswith("watchdog") for s in h.status)

    # e-stop latches zeros while commands keep coming, until reset
    h.command((0.03, 0.0))
    h.wait_output(lambda m: vel(m)[0] > 0.0, "motion again")
    assert wait_future(h.estop.call_async(Trigger.Request()), what="estop").success
    t = h.t  # the commander's clock is never ahead of the world's
    h.wait_sim(0.4)
    # judged by stamps, not by arrival: a period's output sent just before the e-stop may arrive after its answer
    with h.lock:
        after = [m for m in h.out if msg_seconds(m.header.stamp) > t + 1e-9]  # (`stamp` is a float here)
    assert len(after) >= 3 and all(vel(m) == (0.0, 0.0) for m in after)
    assert any(s.data.startswith("estop") for s in h.status)
    res = wait_future(h.reset.call_async(Trigger.Request()), what="reset")
    assert res.success and "cleared" in res.message
    h.wait_output(lambda m: vel(m)[0] > 0.0, "motion after reset")


def test_a_pusher_that_does_not_follow_the_commands_latches_the_estop_saying_why(harness):
    """An arm that does not move (MoveIt Servo halted, a protective stop): within one follow_window of commands the
    commander latches its e-stop, sends zeros and says why on ~/status (the planner then ends the push); after
    ~/reset an arm that follows moves on and is not stopped again."""
    h = harness(output="servo", output_topic="servo_twist", max_acceleration=0.5, follow_fraction=0.25,
                follow_window=1.0, follow_min_travel=0.01)
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.04, 0.0))
    moving = h.wait_output(lambda m: vel(m)[0] > 0.0, "motion")
    t_first = stamp(moving)
    stopped = h.wait_output(lambda m: vel(m) == (0.0, 0.0), "the follow check's zero", since=t_first)
    # the first full window of positions: 1 s after the pusher state began, at most one window after the motion
    assert stamp(stopped) <= t_first + 1.0 + 2.0 / RATE + 1e-9
    status = wait_for(lambda: next((m.data for m in h.status if m.data.startswith("estop")), None), what="estop")
    assert "the pusher does not follow the commands" in status and "mm sent over the last 1 s" in status, status
    t = stamp(stopped)
    h.wait_sim(0.5)
    with h.lock:
        assert all(vel(m) == (0.0, 0.0) for m in h.out if stamp(m) > t + 1e-9)  # latched while commands come
    h.arm_follows = True  # the arm's controller runs again
    assert wait_future(h.reset.call_async(Trigger.Request()), what="reset").success
    t = h.t
    h.wait_output(lambda m: vel(m)[0] == pytest.approx(0.04), "full speed after the reset", since=t)
    h.wait_sim(2.0)  # two windows of an arm that follows
    with h.lock:
        assert all(vel(m)[0] > 0.0 for m in h.out if stamp(m) > h.t - 1.0)
    assert h.pusher[0] > -0.2 + 0.04  # it moved


def test_limits_and_workspace(harness):
    h = harness(output="servo", output_topic="servo_twist", max_speed=0.05, workspace_margin=0.01)
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.3, 0.4))
    m = h.wait_output(lambda m: vel(m) != (0.0, 0.0), "limited motion")
    assert math.hypot(*vel(m)) == pytest.approx(0.05)
    # at the +y table edge, moving outward and forward: the outward component is removed
    h.pusher = (-0.2, 0.5 - 0.0145 - 0.005)
    h.command((0.02, 0.04))
    h.wait_output(lambda m: vel(m) == pytest.approx((0.02, 0.0)), "clamped at the table edge")
    # next to the obstacle (radius 0.04 at the origin), moving into it: stopped
    h.pusher = (-0.04 - 0.0145 - 0.005, 0.0)
    h.command((0.03, 0.0))
    h.wait_output(lambda m: vel(m) == (0.0, 0.0), "stopped at the obstacle")
    # tracking of the pusher lost: zeros
    h.pusher = (-0.2, 0.0)
    h.command((0.03, 0.0))
    h.wait_output(lambda m: vel(m) == pytest.approx((0.03, 0.0)), "free motion")
    h.valid = False
    h.wait_output(lambda m: vel(m) == (0.0, 0.0), "zeros without a valid pusher state")


def test_joint_velocity_output(harness):
    h = harness(output="joint_velocity", output_topic="stage_commands", joint_matrix=[0.0, 1.0, -1.0, 0.0])
    h.subscribe(Float64MultiArray, "stage_commands")
    h.command((0.02, 0.03))
    h.wait_output(lambda m: list(m.data) == pytest.approx([0.03, -0.02]), "joint velocities")
    h.command(None)
    h.wait_output(lambda m: list(m.data) == [0.0, 0.0], "joint zeros from the watchdog")
    # the joint matrix maps table velocities itself: a yaw would be ignored where the parameter says it rotates
    res = h.node.set_parameters([Parameter("table_yaw_in_output_frame", value=0.3)])[0]
    assert not res.successful and "with output joint_velocity" in res.reason
    with pytest.raises(ValueError, match=r"table_yaw_in_output_frame: 0\.3 with output joint_velocity"):
        VelocityCommanderNode(parameter_overrides=[Parameter("output", value="joint_velocity"),
                                                   Parameter("table_yaw_in_output_frame", value=0.3)])


def test_ur_twist_output_rotated_into_the_base_frame(harness):
    h = harness(output="ur_twist", output_topic="ur_twist", output_frame_id="base",
                table_yaw_in_output_frame=math.pi / 2)
    h.subscribe(TwistStamped, "ur_twist")
    h.command((0.02, 0.0))
    m = h.wait_output(lambda m: vel(m) != (0.0, 0.0), "rotated twist")
    assert vel(m) == pytest.approx((0.0, 0.02)) and m.header.frame_id == "base"


def test_wrong_frame_commands_are_ignored_and_bad_params_are_named(harness, ros_executor):
    h = harness(output="servo", output_topic="servo_twist")
    h.subscribe(TwistStamped, "servo_twist")
    h.cmd_frame = "world"
    h.command((0.02, 0.0))
    h.wait_sim(0.5)
    assert all(vel(m) == (0.0, 0.0) for m in h.outputs_since(0.0))
    with pytest.raises(ValueError, match="output: 'teleport'"):
        VelocityCommanderNode(parameter_overrides=[Parameter("output", value="teleport")])
    with pytest.raises(ValueError, match="max_speed"):
        VelocityCommanderNode(parameter_overrides=[Parameter("max_speed", value=-1.0)])
    # the UR twist controller drops twists in any frame but its base: the default 'table' would never move the arm
    with pytest.raises(ValueError, match=r"output_frame_id: 'table' with output ur_twist: the UR twist controller "
                                         r"takes only its base frame"):
        VelocityCommanderNode(parameter_overrides=[Parameter("output", value="ur_twist")])


def test_gripper_without_control_msgs_is_skipped_and_said(harness):
    h = harness(output="servo", output_topic="servo_twist", gripper_enabled=True)
    try:
        import control_msgs  # noqa: F401
        pytest.skip("control_msgs is installed here: the skip path is not taken")
    except ImportError:
        pass
    assert h.node.grasp.startswith("skipped (control_msgs not installed)")


def test_a_non_finite_table_yaw_is_refused_at_start_naming_it(ros_executor):
    """A NaN yaw would rotate every output twist into NaN: the node refuses to start."""
    with pytest.raises(ValueError, match="table_yaw_in_output_frame: must be finite"):
        VelocityCommanderNode(parameter_overrides=[Parameter("table_yaw_in_output_frame", value=float("nan"))])


def test_startup_waits_count_from_configure_and_activate_and_cleanup_takes_them_down(ros_executor):
    """The waits for the Servo switch service and the gripper server begin at configure and activate (not at
    construction: a late activate must not find its gripper wait already expired), and cleanup destroys what the
    transitions created; the next activate starts the gripper wait again."""
    node = ros_executor.add(VelocityCommanderNode(namespace="/cmd_startup_waits", parameter_overrides=[
        Parameter("output", value="servo"), Parameter("gripper_enabled", value=True)]))
    assert node._servo_wait_since is None and node._gripper_wait_since is None
    t_built = time.monotonic()
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node._servo_wait_since >= t_built and node._gripper_wait_since is None
    t_configured = time.monotonic()
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    first_wait = node._gripper_wait_since
    assert first_wait >= t_configured
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert node._entities == [] and list(node.timers) == [] and list(node.clients) == []
    bring_up(node)
    assert node._gripper_wait_since >= first_wait and lifecycle_state(node) == "active"


@pytest.mark.parametrize("transition", ["deactivate", "shutdown"])
def test_leaving_active_says_inactive_at_once(ros_executor, transition):
    """Its status says ``inactive`` as the output goes silent, not a period later (a shutdown from active destroys
    the status publisher right after): the launch's hang watch reads the status to tell a deactivated commander's
    silence, by design, from a hung one's. The commander is spun by nothing here, so no tick can say it."""
    ns = f"/cmd_leaves_active_{transition}"
    node = VelocityCommanderNode(namespace=ns, parameter_overrides=[
        Parameter("output", value="joint_velocity"), Parameter("gripper_enabled", value=False)])
    try:
        watcher = ros_executor.add(rclpy.create_node(f"status_watch_{transition}", namespace=ns))
        said = []
        watcher.create_subscription(String, f"{ns}/velocity_commander/status", lambda m: said.append(m.data),
                                    LATCHED)
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        wait_for(lambda: node.status_pub.get_subscription_count() >= 1, what="the status subscription")
        assert getattr(node, f"trigger_{transition}")() == TransitionCallbackReturn.SUCCESS
        wait_for(lambda: any(text.startswith("inactive") for text in said), timeout=30.0,
                 what=f"status 'inactive' at the {transition}")
    finally:
        node.destroy_node()


@pytest.mark.parametrize("value, state", [(True, "active"), (False, "unconfigured")])
def test_autostart_configures_and_activates_the_node_itself_or_leaves_it_waiting(ros_executor, value, state):
    """What each node's main() does before it spins (and parapush sim with the same parameters): no service call
    that a loaded host's DDS discovery could lose."""
    node = ros_executor.add(VelocityCommanderNode(namespace=f"/cmd_autostart_{value}", parameter_overrides=[
        Parameter("autostart", value=value), Parameter("gripper_enabled", value=False)]))
    assert autostart(node) is value
    assert lifecycle_state(node) == state


def test_autostart_that_fails_leaves_the_node_up_and_says_how_to_retry(ros_executor):
    """Activate refused (Servo's units unknown): the node stays inactive and running, the log names the
    transition; the stack is not taken down by one node that cannot activate."""
    node = ros_executor.add(VelocityCommanderNode(namespace="/cmd_autostart_refused", parameter_overrides=[
        Parameter("autostart", value=True), Parameter("gripper_enabled", value=False),
        Parameter("servo_parameters_service", value=""), Parameter("servo_command_in_type", value="unitless"),
        Parameter("servo_scale_linear", value=0.0)]))
    assert autostart(node) is False
    assert lifecycle_state(node) == "inactive"


def speed(m):
    return math.hypot(*vel(m))


def test_a_clock_that_jumps_back_stops_the_output_and_says_why(harness):
    """A /clock restart: what the commander received on the old timeline is stale (a negative age never counts as
    fresh). The first output on the new timeline is a zero and the status says the clock jumped back; motion
    resumes from rest on the commands received after the jump."""
    h = harness(output="servo", output_topic="servo_twist", max_acceleration=0.5)
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.03, 0.0))
    h.wait_output(lambda m: vel(m) == pytest.approx((0.03, 0.0)), "full speed")
    wait_sim(lambda: h.t, max(0.0, 2.0 - h.t))
    # the timer waits one period after a jump back: lock-step is off over the jump (the feed paces itself)
    h.expect_output = False
    with h.lock:
        n, t_before = len(h.out), h.t
        h.t = 0.2

    def on_new_timeline():
        with h.lock:
            return [m for m in h.out[n:] if stamp(m) < t_before - 1e-6]
    first = wait_for(on_new_timeline, timeout=30.0, what="an output after the jump")[0]
    h.expect_output = True  # ticks follow the clock again: back to lock-step
    assert vel(first) == (0.0, 0.0)  # the first output after the jump stops the arm
    wait_for(lambda: any(vel(m)[0] > 0.0 for m in on_new_timeline()), timeout=30.0, what="motion after the jump")
    moving = next(m for m in on_new_timeline() if vel(m)[0] > 0.0)
    assert vel(moving)[0] <= 0.5 / RATE + 1e-9  # motion ramps up again from rest
    assert any(m.data.startswith("clock jump: clock jumped back") for m in h.status)


def test_on_the_system_clock_the_watchdog_runs_on_the_steady_clock(ros_context, ros_executor):
    """Without simulated time, ages are steady-clock spans (an NTP step of the system clock changes no age)."""
    from rclpy.clock import ClockType
    ns = "/cmd_steady"
    node = ros_executor.add(bring_up(VelocityCommanderNode(namespace=ns, parameter_overrides=[
        Parameter(k, value=v) for k, v in dict(output="servo", output_topic="servo_twist", gripper_enabled=False,
                                               rate=RATE, servo_parameters_service="", enforce_workspace=False,
                                               max_acceleration=100.0).items()])))
    assert node._watch_clock.clock_type == ClockType.STEADY_TIME
    assert [t.clock.clock_type for t in node.timers if t.callback == node._tick] == [ClockType.STEADY_TIME]
    io = ros_executor.add(rclpy.create_node("steady_io", namespace=ns, context=ros_context))
    out = []
    io.create_subscription(TwistStamped, "servo_twist", out.append, RELIABLE)
    pub = io.create_publisher(TwistStamped, "pusher_cmd", RELIABLE)
    wait_for(lambda: pub.get_subscription_count() >= 1, what="commander subscription")
    pub.publish(Harness._twist(0.02, 0.0))
    wait_for(lambda: any(vel(m) == pytest.approx((0.02, 0.0)) for m in out), what="the command passed through")
    n = len(out)
    wait_for(lambda: any(vel(m) == (0.0, 0.0) for m in out[n:]), what="watchdog zeros on the steady clock")


def test_a_servo_that_answers_after_startup_timeout_is_found_and_its_problem_is_said_first(ros_context,
                                                                                             ros_executor):
    """On the robot clock, with MoveIt Servo not yet running: after startup_timeout the status names the Servo
    problem (before the grasp it also waits for: no grasp makes unknown units safe); the commander keeps asking,
    and a Servo started later is found without a restart (it once asked only until the timeout, and said
    'waiting for grasp')."""
    ns = "/cmd_late_servo"
    node = ros_executor.add(bring_up(VelocityCommanderNode(namespace=ns, parameter_overrides=[
        Parameter(k, value=v) for k, v in dict(
            output="servo", output_topic="servo_twist", gripper_enabled=False, require_grasp=True, rate=RATE,
            servo_parameters_service=f"{ns}/servo_node/get_parameters", startup_timeout=0.5,
            enforce_workspace=False).items()])))
    io = ros_executor.add(rclpy.create_node("late_servo_io", namespace=ns, context=ros_context))
    status = []
    io.create_subscription(String, "velocity_commander/status", lambda m: status.append(m.data), LATCHED)
    wait_for(lambda: status and status[-1].startswith("servo settings: servo_command_in_type: MoveIt Servo's "
                                                      "parameters"), what="the Servo problem on ~/status")
    assert "keeps asking" in status[-1]
    ros_executor.add(rclpy.create_node("servo_node", namespace=ns, context=ros_context, parameter_overrides=[
        Parameter(k, value=v) for k, v in {"moveit_servo.command_in_type": "speed_units",
                                           "moveit_servo.scale.linear": 0.4}.items()],
        automatically_declare_parameters_from_overrides=True))
    wait_for(lambda: node.servo_gain == 1.0 and not node.servo_problem, what="the late Servo's settings")
    assert node.servo_settings.startswith("speed_units")
    wait_for(lambda: status[-1].startswith("waiting for grasp"), what="the next thing it waits for")


def test_a_servo_that_takes_the_call_and_never_answers_is_asked_again(ros_context):
    """A Servo whose parameter service takes the call and then hangs (its executor blocked): after startup_timeout
    the commander says so on ~/status, once, and asks again; when Servo answers again, its units are taken (an
    answer to the abandoned call is not)."""
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters
    from rclpy.executors import SingleThreadedExecutor

    ns, release, calls = "/cmd_hung_servo", threading.Event(), []
    servo = rclpy.create_node("servo_node", namespace=ns, context=ros_context, start_parameter_services=False)

    def hangs(req, res):
        calls.append(req.names[0])
        release.wait(60.0)  # hung: this executor serves nothing else meanwhile
        value = {"moveit_servo.command_in_type": ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                                string_value="speed_units"),
                 "moveit_servo.scale.linear": ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=0.4)}
        res.values = [value[req.names[0]]]
        return res
    servo.create_service(GetParameters, "servo_node/get_parameters", hangs)
    servo_executor = SingleThreadedExecutor(context=ros_context)
    servo_executor.add_node(servo)
    spin = threading.Thread(target=servo_executor.spin, daemon=True)
    spin.start()
    ex = SingleThreadedExecutor(context=ros_context)
    node = bring_up(VelocityCommanderNode(namespace=ns, parameter_overrides=[
        Parameter(k, value=v) for k, v in dict(
            output="servo", output_topic="servo_twist", gripper_enabled=False, rate=RATE,
            servo_parameters_service=f"{ns}/servo_node/get_parameters", startup_timeout=0.5,
            enforce_workspace=False).items()]))
    ex.add_node(node)
    commander = threading.Thread(target=ex.spin, daemon=True)
    commander.start()
    try:
        wait_for(lambda: "did not answer it within startup_timeout" in node.servo_problem, timeout=30.0,
                 what="the hung call reported")
        assert node.servo_gain is None and calls
        release.set()  # Servo answers again: the queued calls of the retries are served
        wait_for(lambda: node.servo_gain == 1.0 and not node.servo_problem, timeout=30.0, what="Servo's units")
        assert node.servo_settings.startswith("speed_units")
    finally:
        release.set()
        ex.shutdown()
        servo_executor.shutdown()
        node.destroy_node()
        servo.destroy_node()


def test_parameters_are_read_only_or_applied_at_once_through_a_parameter_client(harness):
    """``ros2 param set`` through the SetParameters service: an interface parameter is refused naming it; a limit
    applies from the next output on; a bad limit is refused naming the field and its rule."""
    from rcl_interfaces.srv import SetParameters
    h = harness(output="servo", output_topic="servo_twist")
    h.subscribe(TwistStamped, "servo_twist")
    client = h.io.create_client(SetParameters, "velocity_commander/set_parameters")
    assert client.wait_for_service(timeout_sec=10.0)

    def set_param(name, value):
        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return wait_future(client.call_async(req), timeout=10.0, what=f"set {name}").results[0]

    h.command((0.3, 0.0))
    h.wait_output(lambda m: speed(m) == pytest.approx(0.1), "clipped to the default max_speed")
    r = set_param("rate", 5.0)
    assert not r.successful and "read-only" in r.reason and "rate" in r.reason
    r = set_param("max_speed", 0.02)
    assert r.successful
    with h.lock:
        t_set = h.t  # outputs of later periods were computed after the set
    h.wait_output(lambda m: speed(m) == pytest.approx(0.02), "clipped to the new max_speed", since=t_set + 0.5 / RATE)
    h.wait_sim(0.3)
    later = h.outputs_since(t_set + 0.5 / RATE)
    assert later and all(speed(m) == pytest.approx(0.02) for m in later)
    r = set_param("max_speed", -1.0)
    assert not r.successful and r.reason == "parameter max_speed: must be > 0, got -1.0"
    assert h.node.get_parameter("max_speed").value == 0.02 and h.node.limits.max_speed == 0.02
    # at run time a limit may be tightened or restored, never loosened beyond what the node started with: anyone on
    # the ROS domain can set parameters (a 5 m/s limit, a 100 s watchdog, the workspace off were once taken)
    for name, value, rule in [("max_speed", 5.0, "above the 0.1"), ("command_timeout", 100.0, "above the 0.2"),
                              ("enforce_workspace", False, "looser than the True"),
                              ("workspace_margin", 0.0, "below the 0.01")]:
        r = set_param(name, value)
        assert not r.successful and r.reason.startswith(f"parameter {name}: {value!r} is {rule} the commander "
                                                        f"started with"), r.reason
    assert h.node.limits.max_speed == 0.02 and h.node.limits.enforce_workspace
    assert set_param("max_speed", 0.1).successful  # restored to its start value
    h.wait_output(lambda m: speed(m) == pytest.approx(0.1), "clipped to the restored max_speed")
    assert set_param("max_speed", 0.02).successful
    with h.lock:
        t_set = h.t
    # (the refusal below names the last output: wait for the period that took the new limit, as a slow host may
    # answer the set before it)
    h.wait_output(lambda m: speed(m) == pytest.approx(0.02), "clipped to max_speed again", since=t_set + 0.5 / RATE)
    # the output frame's yaw turns the arm's velocity at once: refused while it moves, applied once it stands still
    r = set_param("table_yaw_in_output_frame", 0.5)
    assert not r.successful and r.reason.startswith("parameter table_yaw_in_output_frame: not changed while the "
                                                    "output moves (0.020, 0.000) m/s")
    assert h.node.get_parameter("table_yaw_in_output_frame").value == 0.0
    assert set_param("table_yaw_in_output_frame", 0.0).successful  # no change: nothing to refuse
    h.command((0.0, 0.0))
    h.wait_output(lambda m: speed(m) == 0.0, "standing still")
    r = set_param("table_yaw_in_output_frame", 0.5)
    assert r.successful and h.node.limits.table_yaw_in_output_frame == 0.5


def test_the_estop_latch_survives_cleanup_and_configure(harness):
    """Only ~/reset clears an e-stop: cleanup then configure and activate keep the output at zero."""
    h = harness(output="servo", output_topic="servo_twist")
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.03, 0.0))
    h.wait_output(lambda m: vel(m)[0] > 0.0, "motion")
    assert wait_future(h.estop.call_async(Trigger.Request()), what="estop").success
    h.expect_output = False
    for label in ("deactivate", "cleanup", "configure", "activate"):
        h.transition(label)
    wait_for(lambda: h.node.out_pub.get_subscription_count() >= 1, what="the new output publisher matched")
    t_on = h.t
    h.expect_output = True
    h.wait_sim(0.5)  # commands keep coming
    after = h.outputs_since(t_on)
    assert after and all(vel(m) == (0.0, 0.0) for m in after)
    assert h.status[-1].data.startswith("estop: e-stop service called")
    assert wait_future(h.reset.call_async(Trigger.Request()), what="reset").success
    h.wait_output(lambda m: vel(m)[0] > 0.0, "motion after reset")


def test_teleop_has_priority_over_the_planner_until_its_timeout(harness):
    h = harness(output="servo", output_topic="servo_twist", teleop_timeout=0.5)
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.03, 0.0))  # the planner keeps publishing throughout
    h.wait_output(lambda m: vel(m) == pytest.approx((0.03, 0.0)), "the planner's command")
    h.teleop((0.0, 0.02))
    t = stamp(h.wait_output(lambda m: vel(m) == pytest.approx((0.0, 0.02)), "teleop's command"))
    h.wait_sim(0.5)
    assert all(vel(m) == pytest.approx((0.0, 0.02)) for m in h.outputs_since(t + 2.0 / RATE))
    with h.lock:
        h.teleop(None)
        t_last = h.t - 1.0 / RATE  # teleop's last command went out with the previous tick
    back = h.wait_output(lambda m: vel(m) == pytest.approx((0.03, 0.0)), "the planner again")
    assert stamp(back) >= t_last + 0.5 - 1.0 / RATE - 1e-9  # not before teleop_timeout (one period of delivery)
    assert any(vel(m) == (0.0, 0.0) for m in h.outputs_since(t_last))  # the watchdog stopped it in between


def test_servo_unitless_gets_the_fraction_of_scale_linear(harness):
    """A stock MoveIt Servo takes twists as fractions of scale.linear: the commander reads its parameters at
    configure and sends v / scale."""
    h = harness(output="servo", output_topic="servo_twist",
                servo_params={"moveit_servo.command_in_type": "unitless", "moveit_servo.scale.linear": 0.4})
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.03, 0.0))
    m = h.wait_output(lambda m: vel(m) == pytest.approx((0.03 / 0.4, 0.0)), "the unitless fraction")
    h.wait_sim(0.3)
    with h.lock:
        later = h.out[h.out.index(m):]
    assert all(vel(x) == pytest.approx((0.075, 0.0)) for x in later)
    assert h.node.servo_settings.startswith("unitless, scale.linear 0.4")


def test_servo_unitless_without_a_scale_refuses_to_activate_naming_it(harness):
    h = harness(output="servo", output_topic="servo_twist", activate=False,
                servo_params={"moveit_servo.command_in_type": "unitless"})
    assert h.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    wait_for(lambda: h.node.servo_problem, timeout=10.0, what="Servo's answer")
    assert h.node.servo_problem.startswith("moveit_servo.scale.linear: must be > 0")
    assert h.node.trigger_activate() == TransitionCallbackReturn.FAILURE
    assert lifecycle_state(h.node) == "inactive"


def test_transitions_from_another_thread_never_let_a_non_zero_out_after_the_stop(harness):
    """Deactivate, cleanup, configure and activate called from a thread of their own (as ``bring_up`` and a
    shutdown do) while the ticks run: each deactivate's zero is the last output until the next activate, and no
    tick in flight uses what cleanup destroys (a callback that raised fails the teardown)."""
    h = harness(output="servo", output_topic="servo_twist")
    h.subscribe(TwistStamped, "servo_twist")
    h.command((0.03, 0.0))
    h.wait_output(lambda m: vel(m)[0] > 0.0, "motion")
    h.expect_output = False  # the feed paces itself: the transitions here do not wait for it
    node = h.node
    now = node.get_clock().now
    for i in range(8):
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        t_off = msg_seconds(now().to_msg())  # as stamp() reads a message (ns * 1e-9 can differ in the last bit)
        if i % 2:
            assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            wait_for(lambda: node.out_pub.get_subscription_count() >= 1, what="the new output publisher matched")
        h.wait_sim(0.2)
        t_on = msg_seconds(now().to_msg())
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        h.wait_output(lambda m: vel(m)[0] > 0.0 and stamp(m) >= t_on, "motion after activate", since=0.0)  # noqa: B023 - called within this iteration
        with h.lock:
            out = list(h.out)
        last_off = max(k for k, m in enumerate(out) if stamp(m) <= t_off)
        assert vel(out[last_off]) == (0.0, 0.0)  # deactivate's zero ...
        assert all(stamp(m) >= t_on for m in out[last_off + 1:])  # ... then nothing until the activation


# A reader of the arm's input in a process of its own: prints each twist's x as it takes it, and "flood" once it
# is matched to the flood topic's publisher (by then to the commander's output too: both are asked for at start).
STARVED_READER = """
import sys, rclpy
from geometry_msgs.msg import TwistStamped
from std_msgs.msg import String
from rclpy.qos import QoSProfile, ReliabilityPolicy
rclpy.init()
node = rclpy.create_node("starved_reader")
qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
node.create_subscription(TwistStamped, sys.argv[1], lambda m: print("x", m.twist.linear.x, flush=True), qos)
node.create_subscription(String, sys.argv[2], lambda m: None, qos)
try:
    rclpy.spin(node)
except BaseException:
    pass
"""


def test_a_stopping_commander_repeats_its_zero_until_a_reader_that_missed_it_has_it(ros_context):
    """The robot soak once saw a non-zero twist last after a stop under load. A reader starved of the CPU (here
    stopped outright) while samples pile up has its queue overrun and loses the stop's zero; DDS repairs a lost sample
    only while its writer lives and only after the writer's next heartbeat (Fast DDS: every 3 s), and the commander's
    process ends right after its stop. The commander repeats the zero until every reader has acknowledged it, so the
    reader that lost the first one, running again, gets a zero before the commander is gone (on the old single zero
    and a 1 s acknowledgement wait, the reader's last twist stayed non-zero)."""
    ns = "/cmd_starved_reader"
    reader = subprocess.Popen([sys.executable, "-c", STARVED_READER, f"{ns}/servo_twist", f"{ns}/flood"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(iter(reader.stdout.readline, "")), daemon=True).start()
    watch_ex, commander_ex = BackgroundExecutor(ros_context).start(), BackgroundExecutor(ros_context).start()
    h = stopper = None
    try:
        watch = watch_ex.add(rclpy.create_node("stop_watch", namespace=ns, context=ros_context))
        flood = watch.create_publisher(String, "flood", RELIABLE)
        seen = []
        watch.create_subscription(TwistStamped, "servo_twist", lambda m: seen.append(vel(m)), RELIABLE)
        h = Harness(ros_context, commander_ex, ns, output="servo", output_topic="servo_twist")
        h.subscribe(TwistStamped, "servo_twist")
        h.command((0.03, 0.0))
        wait_for(lambda: flood.get_subscription_count() >= 1 and any(
            ln.startswith("x ") and float(ln.split()[1]) > 0.0 for ln in lines), timeout=60.0,
            what="the reader process taking the commander's motion")
        os.kill(reader.pid, signal.SIGSTOP)  # starved: its queue fills, and what comes next is lost
        for k in range(3000):
            flood.publish(String(data=str(k)))
        h.wait_sim(0.2)  # motion goes on into the full queue
        h.close()  # the simulated clock stands still: the commander's last tick sent motion
        n_seen = len(seen)
        # what a node's process does on SIGINT: stop_activity (the zero), then destroy the node (its writer goes)
        stopper = threading.Thread(target=commander_ex.shutdown)
        stopper.start()
        wait_for(lambda: any(v == (0.0, 0.0) for v in seen[n_seen:]), timeout=30.0, what="the stop's first zero")
        os.kill(reader.pid, signal.SIGCONT)  # the reader runs again, having lost that zero
        stopper.join(30.0)
        assert not stopper.is_alive()
        wait_for(lambda: [ln for ln in lines if ln.startswith("x ")][-1].split()[1] == "0.0", timeout=20.0,
                 what="a zero as the reader's last twist")
    finally:
        os.kill(reader.pid, signal.SIGCONT)
        if h is not None:
            h.close()
        if stopper is None:
            commander_ex.shutdown(check=False)
        watch_ex.shutdown(check=False)
        reader.send_signal(signal.SIGINT)
        try:
            reader.wait(10.0)
        except subprocess.TimeoutExpired:
            reader.kill()
            reader.wait()
        reader.stdout.close()
