"""The mpc_planner node end to end through real rclpy (same process, real DDS): PushObject goal -> feedback ->
result against a MuJoCo world stepped in the test, plan outputs, cancel / stale / invalid state -> zero command.

The world stands in for the robot and mocap and owns the simulated clock: each tick it advances the MuJoCo scene
(``core.sim.closed_loop.SimWorld``)
by ``TICK`` under the latest received command, publishes ``/clock`` and then the scene state
stamped with the new time. The planner runs with ``use_sim_time``, so its holds, timeouts and pauses are measured
on the world's clock. While the planner commands a non-zero velocity the world moves in lock-step with it: it
advances a tick only once the planner's command for the current clock has arrived, so a slow or busy host makes
the test slower, never different (otherwise, with the pusher commanded still, it ticks at about real time).
"""
import math
import sys
import threading

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from geometry_msgs.msg import PoseStamped, TwistStamped  # noqa: E402
from nav_msgs.msg import Path  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from parapush_msgs.msg import PushPlan, SceneState  # noqa: E402
from parapush_ros.ros.actions import ActionClient  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.time import Time  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from conftest import BackgroundExecutor, lifecycle_state, wait_for, wait_future, wait_sim  # noqa: E402
from parapush_ros.ros import topics  # noqa: E402
from parapush_ros.ros.conversions import array_to_scene_state  # noqa: E402
from parapush_ros.core.robot.command_safety import stop_travel_bound  # noqa: E402
from parapush_ros.core.models.mjcf import PUSHER_BANDWIDTH_HZ  # noqa: E402
from parapush_ros.core.sim.world import SimWorld  # noqa: E402
from parapush_ros.core.scene.spec import load_scene  # noqa: E402
from parapush_ros.nodes.mpc_planner import MPCPlannerNode  # noqa: E402
from parapush_ros.ros.node import bring_up  # noqa: E402
from parapush_ros.ros.qos import LATCHED, RELIABLE  # noqa: E402

STATUS_LOG = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)

pytestmark = pytest.mark.timeout(120)
SCENE = "cylinder_slider"
DT = 0.2  # short holds keep the test quick
CONTROL_RATE = 50.0  # Hz: the planner's command timer
TICK = 0.02  # s of simulated time per world step (one planner timer period: fewer messages per simulated second)
LOCKSTEP_WAIT = 30.0  # s of wall time the world waits for the planner's command at most (a hung planner)


def sec(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class Harness:
    """The test's side of the wire: the world (clock, scene state), command/plan/status sinks, the action client.

    The world publishes one of: the simulated scene (``run_world``), a fixed state (``publish_static``), or no
    state at all (``stop_state``: the clock goes on, so the last state goes stale)."""

    def __init__(self, node, scene):
        self.node, self.scene = node, scene
        self.clock_pub = node.create_publisher(Clock, topics.CLOCK, RELIABLE)
        self.state_pub = node.create_publisher(SceneState, topics.SCENE_STATE, RELIABLE)
        self.goal_pub = node.create_publisher(PoseStamped, topics.GOAL_POSE, 10)
        self.cmds, self.plans, self.paths, self.markers, self.status = [], [], [], [], []
        node.create_subscription(TwistStamped, topics.PUSHER_CMD, self._on_cmd, RELIABLE)
        node.create_subscription(PushPlan, topics.PLAN, self.plans.append, RELIABLE)
        node.create_subscription(Path, topics.PLAN_PATH, self.paths.append, LATCHED)
        node.create_subscription(MarkerArray, topics.PLAN_MARKERS, self.markers.append, LATCHED)
        # every status line, not only the newest: a depth-1 reader drops a line that the next one follows closely
        node.create_subscription(String, topics.PLANNER_STATUS, lambda m: self.status.append(m.data), STATUS_LOG)
        self.client = ActionClient(node, PushObject, topics.PUSH_ACTION)
        self.world = None
        self.static, self.valid, self.source = None, True, "none"
        self.t = 0.0  # the simulated clock (s)
        self.pusher_path = []  # (t, pusher x, y) of the world after every tick
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="test-world", daemon=True)
        self._thread.start()

    def close(self):
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(10.0)

    # --- commands
    def _on_cmd(self, msg):
        with self._cond:
            self.cmds.append((sec(msg.header.stamp), msg))
            self._cond.notify_all()

    def last_u(self):
        if not self.cmds:
            return np.zeros(2)
        t = self.cmds[-1][1].twist.linear
        return np.array([t.x, t.y])

    def _await_command(self):
        """Lock-step while the pusher is commanded to move: wait for the command the planner's timer sends for the
        current clock (stamped within one timer period); otherwise tick at about real time."""
        period = 1.0 / CONTROL_RATE
        with self._cond:
            if np.any(self.last_u() != 0.0):
                self._cond.wait_for(lambda: self._stop.is_set() or self.cmds[-1][0] > self.t - period + 1e-9,
                                    timeout=LOCKSTEP_WAIT)
                return
        self._stop.wait(TICK)

    # --- the world
    def run_world(self):
        with self._cond:
            self.world, self.valid, self.source = SimWorld(self.scene), True, "world"

    def lose_tracking(self) -> float:
        """From the next tick on, the world's states say tracking is lost; returns the sim time of the first."""
        with self._cond:
            self.valid = False
            return round(self.t + TICK, 9)

    def publish_static(self, x, valid=True):
        with self._cond:
            self.static, self.valid, self.source = np.array(x, float), valid, "static"

    def stop_state(self):
        with self._cond:
            self.source = "none"

    def _loop(self):
        while not self._stop.is_set():
            self._await_command()
            with self._cond:
                source = self.source
                if source == "world":
                    self.world.execute(self.last_u(), TICK)
                    x, valid = self.world.x.copy(), self.valid
                    self.pusher_path.append((self.t + TICK, x[0], x[1]))
                else:
                    x, valid = self.static, self.valid
                self.t = round(self.t + TICK, 9)
                stamp = Time(nanoseconds=int(round(self.t * 1e9))).to_msg()
            self.clock_pub.publish(Clock(clock=stamp))
            if source != "none":
                msg = array_to_scene_state(x, self.scene, valid=valid)
                msg.header.stamp, msg.header.frame_id = stamp, "table"
                self.state_pub.publish(msg)

    def wait_sim(self, seconds):
        wait_sim(lambda: self.t, seconds)

    # --- action
    def send(self, x, y, feedback=None, **fields):
        goal = PushObject.Goal(target_object="cylinder", goal_x=x, goal_y=y, yaw_tolerance=-1.0, **fields)
        handle = wait_future(self.client.send_goal_async(goal, feedback_callback=feedback), what="goal response")
        assert handle.accepted
        return handle


PLANNER_PARAMETERS = dict(scene=SCENE, model="coarse", samples=8, iterations=2, control_duration=DT,
                          state_timeout=1.0, control_rate=CONTROL_RATE, stop_hold=0.5, tracking_loss_timeout=2.0,
                          use_sim_time=True)


@pytest.fixture
def harness(ros_context, request):
    """A planner on the world's clock and the harness, new for every test: a test that fails leaves no goal, no
    busy thread and no node to the next (teardown aborts a running push and waits for it). Parametrised
    indirectly, a dict overrides planner parameters."""
    scene = load_scene(SCENE)
    params = {**PLANNER_PARAMETERS, **getattr(request, "param", {})}
    with BackgroundExecutor(ros_context) as ex:
        planner = ex.add(bring_up(MPCPlannerNode(parameter_overrides=[Parameter(k, value=v)
                                                                      for k, v in params.items()])))
        h = Harness(ex.add(rclpy.create_node("mpc_planner_test")), scene)
        try:
            assert h.client.wait_for_server(timeout_sec=30.0)
            yield h, planner
        finally:
            h.close()


def zero(msg):
    return msg.twist.linear.x == 0.0 and msg.twist.linear.y == 0.0


def test_goal_feedback_result_against_a_simulated_world(harness):
    h, _ = harness
    h.cmds.clear()
    h.run_world()
    feedback = []
    handle = h.send(0.08, 0.0, feedback=lambda m: feedback.append(m.feedback), position_tolerance=0.02,
                    max_actions=40)
    res = wait_future(handle.get_result_async(), timeout=90.0, what="push result")
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    r = res.result
    assert r.outcome == PushObject.Result.REACHED and r.message.startswith("reached")
    assert r.actions_executed >= 2 and 0.0 <= r.final_distance <= 0.02 and r.mean_planning_time > 0.0
    assert h.world.x[2] > 0.05  # the slider really moved in the world
    # feedback each step, carrying the plan being executed
    assert feedback, "no feedback received"
    assert [f.step for f in feedback] == sorted(f.step for f in feedback)
    fb = feedback[-1]
    assert len(fb.latest_plan.controls) == 4 and len(fb.latest_plan.predicted_states) == 4
    # model 'coarse' is the default coarse model, auto: the quasi-static model of this one-cylinder scene (issue 30)
    assert fb.latest_plan.model == "quasistatic_convex" and fb.latest_plan.controls[0].duration == pytest.approx(DT)
    assert fb.distance_to_goal > 0.0
    # commands: table frame, finite, within the speed limit, pushing forward; zero once the push is over
    cmds = [m for _, m in h.cmds]
    assert cmds and all(m.header.frame_id == "table" for m in cmds)
    speeds = [math.hypot(m.twist.linear.x, m.twist.linear.y) for m in cmds]
    assert all(math.isfinite(s) for s in speeds) and max(speeds) <= 0.1 + 1e-9
    assert max(m.twist.linear.x for m in cmds) > 0.02
    wait_for(lambda: zero(h.cmds[-1][1]), timeout=30.0, what="zero command after the result")
    # plan outputs for RViz and the status line
    wait_for(lambda: h.plans and h.paths and h.markers, timeout=30.0, what="plan, path and markers")
    assert len(h.paths[-1].poses) == 5 and h.paths[-1].header.frame_id == "table"
    ns = {m.ns for m in h.markers[-1].markers}
    assert {"plan/paths", "plan/objects", "goal", "table"} <= ns
    wait_for(lambda: h.status and h.status[-1].startswith("reached"), timeout=30.0, what="status 'reached'")


def test_cancel_sends_a_zero_command_at_once(harness):
    h, _ = harness
    x = h.scene.initial_state()
    h.publish_static(x)
    h.cmds.clear()
    handle = h.send(0.3, 0.2, max_actions=100)
    wait_for(lambda: any(not zero(m) for _, m in h.cmds), timeout=30.0, what="a non-zero push command")
    n_before = len(h.cmds)
    cancel = wait_future(handle.cancel_goal_async(), what="cancel response")
    assert len(cancel.goals_canceling) == 1
    res = wait_future(handle.get_result_async(), timeout=30.0, what="cancelled result")
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.outcome == PushObject.Result.ABORTED and "cancelled" in res.result.message
    wait_for(lambda: len(h.cmds) > n_before and zero(h.cmds[-1][1]), timeout=30.0, what="zero command after cancel")
    # counted from the push's last command, not from when this thread looked: the stop_hold's zeros come on the
    # planner's timer in sim time, however long the round trips above took
    last_push = max(i for i, (_, m) in enumerate(h.cmds) if not zero(m))
    wait_for(lambda: len(h.cmds) >= last_push + 4, timeout=30.0, what="the zeros that follow a stop")
    assert all(zero(m) for _, m in h.cmds[last_push + 1:])  # the pusher is never set moving again


def test_a_new_goal_pre_empts_the_running_one(harness):
    h, _ = harness
    h.publish_static(h.scene.initial_state())
    h.cmds.clear()
    first = h.send(0.3, 0.2, max_actions=100)
    wait_for(lambda: any(not zero(m) for _, m in h.cmds), timeout=30.0, what="a non-zero push command")
    second = h.send(0.3, -0.2, max_actions=100)
    res = wait_future(first.get_result_async(), timeout=30.0, what="pre-empted result")
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.outcome == PushObject.Result.ABORTED and "pre-empted" in res.result.message
    n = len(h.cmds)
    wait_for(lambda: any(not zero(m) and m.twist.linear.y < 0.0 for _, m in h.cmds[n:]), timeout=30.0,
             what="the second goal's push (toward -y)")
    wait_future(second.cancel_goal_async(), what="cancel response")
    res = wait_future(second.get_result_async(), timeout=30.0, what="cancelled result")
    assert res.status == GoalStatus.STATUS_CANCELED


@pytest.mark.parametrize("fault, words", [("stale", "stale scene state"), ("invalid", "tracking_valid is false")])
def test_a_stale_or_invalid_state_that_lasts_fails_the_push(harness, fault, words):
    h, _ = harness
    x = h.scene.initial_state()
    h.publish_static(x)
    h.cmds.clear()
    handle = h.send(0.3, 0.2, max_actions=100)
    wait_for(lambda: any(not zero(m) for _, m in h.cmds), timeout=30.0, what="a non-zero push command")
    if fault == "stale":
        h.stop_state()
    else:
        h.publish_static(x, valid=False)
    res = wait_future(handle.get_result_async(), timeout=60.0, what="failed result")
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.outcome == PushObject.Result.FAILED and words in res.result.message, res.result.message
    assert "tracking_loss_timeout" in res.result.message  # it waited for tracking to come back, in vain
    wait_for(lambda: zero(h.cmds[-1][1]), timeout=30.0, what="zero command after the fault")


# the world ticks at about real time while the pusher stands still: a long tracking_loss_timeout keeps the push
# waiting however long this test's round trips take on a busy host (the timeout's expiry is the test above)
@pytest.mark.parametrize("harness", [{"tracking_loss_timeout": 60.0}], indirect=True)
def test_a_tracking_dropout_pauses_the_push_and_it_resumes(harness):
    h, _planner = harness
    x = h.scene.initial_state()
    h.publish_static(x)
    h.cmds.clear()
    handle = h.send(0.3, 0.2, max_actions=100)
    wait_for(lambda: any(not zero(m) for _, m in h.cmds), timeout=30.0, what="a non-zero push command")
    h.publish_static(x, valid=False)  # tracking lost for less than tracking_loss_timeout
    wait_for(lambda: h.cmds and zero(h.cmds[-1][1]), timeout=30.0, what="a zero command after the dropout")
    n = len(h.cmds)
    wait_for(lambda: h.status and h.status[-1].startswith("paused") and "tracking_valid is false" in h.status[-1],
             timeout=30.0, what="status 'paused'")
    h.wait_sim(0.2)
    assert len(h.cmds) > n and all(zero(m) for _, m in h.cmds[n:])  # held still while tracking is lost
    h.publish_static(x)  # tracking is back: the push goes on
    n = len(h.cmds)
    wait_for(lambda: any(not zero(m) for _, m in h.cmds[n:]), timeout=30.0, what="the push resuming")
    assert not handle.get_result_async().done()
    wait_future(handle.cancel_goal_async(), what="cancel response")
    res = wait_future(handle.get_result_async(), timeout=30.0, what="cancelled result")
    assert res.status == GoalStatus.STATUS_CANCELED


def test_tracking_lost_mid_push_stops_the_pusher_within_the_stated_bound(harness):
    """From the first invalid state on, the pusher travels at most ``stop_travel_bound``: the planner reacts on
    its next timer tick (allowing ``ORDERING_TICKS`` of the world for the state's callback to be served before
    that tick's), the world applies the zero from its next tick, and its servo coasts 2 v / omega."""
    ordering_ticks = 3
    h, planner = harness
    h.run_world()
    h.send(0.3, 0.0, max_actions=100)
    wait_for(lambda: len(h.pusher_path) > 2 and h.pusher_path[-1][1] - h.pusher_path[-3][1] > 0.5 * 0.05 * 2 * TICK,
             timeout=30.0, what="the pusher moving in the world")
    t_bad = h.lose_tracking()
    wait_for(lambda: h.status and h.status[-1].startswith("paused"), timeout=30.0, what="status 'paused'")
    h.wait_sim(0.5)  # long past any stop
    path = np.array([(px, py) for t, px, py in h.pusher_path if t >= t_bad - 1e-9])
    travel = float(np.sum(np.linalg.norm(np.diff(path, axis=0), axis=1)))
    bound = stop_travel_bound(speed=planner.p["max_speed"], reaction_time=1.0 / CONTROL_RATE + ordering_ticks * TICK,
                              output_period=TICK, deceleration=math.inf, servo_bandwidth_hz=PUSHER_BANDWIDTH_HZ)
    assert 0.0 < travel <= bound, \
        f"pusher travelled {travel * 1e3:.2f} mm after tracking was lost (bound {bound * 1e3:.2f} mm)"
    assert np.linalg.norm(path[-1] - path[-10]) < 1e-4  # and it is still now


def test_bad_goals_fail_with_a_named_reason(harness):
    h, _ = harness
    h.publish_static(h.scene.initial_state())
    res = wait_future(h.send(5.0, 0.0).get_result_async(), timeout=30.0, what="result")
    assert res.result.outcome == PushObject.Result.FAILED and "off the table" in res.result.message
    goal = PushObject.Goal(target_object="teapot", goal_x=0.1, goal_y=0.0)
    handle = wait_future(h.client.send_goal_async(goal), what="goal response")
    res = wait_future(handle.get_result_async(), timeout=30.0, what="result")
    h.stop_state()
    assert res.result.outcome == PushObject.Result.FAILED and "teapot" in res.result.message
    # no state at all
    res = wait_future(h.send(0.1, 0.0).get_result_async(), timeout=30.0, what="result")
    assert res.result.outcome == PushObject.Result.FAILED


def test_goal_pose_starts_a_push(harness):
    h, _ = harness
    x = h.scene.initial_state()
    h.publish_static(x)
    h.status.clear()
    pose = PoseStamped()
    pose.header.frame_id = "map"  # not the table frame: ignored
    pose.pose.position.x = 0.0
    pose.pose.orientation.w = 1.0
    h.goal_pub.publish(pose)
    pose.header.frame_id = "table"  # the slider is already there: reached at once, without an action
    wait_for(lambda: h.node.count_subscribers(topics.GOAL_POSE) > 0, timeout=30.0, what="goal_pose subscriber")
    h.goal_pub.publish(pose)
    wait_for(lambda: h.status and h.status[-1].startswith("reached"), timeout=30.0, what="status 'reached'")


def test_while_the_commander_is_e_stopped_a_valid_goal_is_refused_and_an_invalid_one_fails_naming_its_field(harness):
    """A refused ROS 2 goal carries no reason: an invalid goal sent while the commander is e-stopped must still be
    told which field is wrong (the soak's hostile goals were once refused mutely when they met an e-stop), while a
    valid one is refused until the reset."""
    h, _ = harness
    h.publish_static(h.scene.initial_state())
    commander = h.node.create_publisher(String, topics.COMMANDER_STATUS_OF_PLANNER, LATCHED)
    commander.publish(String(data="estop: e-stop service called"))
    wait_for(lambda: h.status and h.status[-1].startswith("e-stopped"), timeout=30.0, what="status 'e-stopped'")
    goal = PushObject.Goal(target_object="cylinder", goal_x=0.1, goal_y=0.0, yaw_tolerance=-1.0)
    assert not wait_future(h.client.send_goal_async(goal), what="goal response").accepted
    res = wait_future(h.send(0.1, 0.0, position_tolerance=float("nan")).get_result_async(), timeout=30.0,
                      what="result")
    assert res.result.outcome == PushObject.Result.FAILED and "position_tolerance" in res.result.message, \
        res.result.message
    assert all(zero(m) for _, m in h.cmds)
    commander.publish(String(data="waiting for command"))
    wait_for(lambda: h.status and "reset" in h.status[-1], timeout=30.0, what="status '... reset'")
    assert h.send(0.1, 0.0).accepted


@pytest.mark.parametrize("name, value, words", [
    ("optimiser", "adam", "parameter optimiser: 'adam'"),
    ("model", "oracle", "parameter model: unknown model 'oracle'"),
    ("nominal_speed", 0.5, r"parameter nominal_speed: must be in \(0, max_speed=0.1\]"),
    ("mppi.decay", 1.5, r"parameter mppi.decay: must be in \(0, 1\], got 1.5"),
    ("samples", 1, "parameter samples: must be >= 2"),
    ("control_duration", 0.0005, "parameter control_duration"),
    ("weights.collision", -1.0, "collision: must be finite and >= 0"),
    ("target_object", "teapot", "no object named 'teapot'"),
    # the push loop's settings are checked at start-up, not by the first goal
    ("tracking_loss_timeout", float("inf"), "parameter tracking_loss_timeout: must be finite and >= 0"),
    ("plan_margin", float("nan"), "parameter plan_margin: must be finite"),
    ("max_actions", 20_000, r"parameter max_actions: must be in \[1, 10000\]"),
    ("state_timeout", float("inf"), "parameter state_timeout: must be finite and > 0"),
    ("position_tolerance", -0.01, "parameter position_tolerance: must be finite and >= 0"),
    ("uncertainty_threshold", -0.01, "parameter uncertainty_threshold: must be finite and >= 0"),
    ("parareal_variance_threshold", -1.0, "parareal_variance_threshold: must be >= 0 m"),
])
def test_bad_parameters_are_refused_with_their_name(ros_context, name, value, words):
    with pytest.raises((ValueError, KeyError), match=words):
        MPCPlannerNode(parameter_overrides=[Parameter("scene", value=SCENE), Parameter(name, value=value)])


# plans due 0.3 s (1.5 controls) after their switch: every plan is late by design, on the simulated clock (the
# anytime optimiser iterates until that deadline; the iteration cap is never reached); 8 controls of 0.2 s keep the
# previous plan running well past the late one's arrival
REALTIME_PARAMETERS = {**PLANNER_PARAMETERS, "realtime": True, "iterations": 1_000_000, "plan_margin": -0.3,
                       "horizon": 8}


@pytest.fixture
def fast_gil_handover():
    """The planner below iterates without pause until its simulated deadline, holding the GIL, while the world
    advances only once the planner's command timer has run: at Python's default 5 ms switch interval every world
    tick waits for several hand-overs (tens of seconds, minutes on a busy host). A 0.2 ms interval keeps the
    test quick. How many iterations fit before a simulated deadline depends on the host, so the plans do: the test
    asserts what holds for any plan."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.timeout(400)  # the planner iterates until its (simulated) deadline: a busy host makes this slow
def test_realtime_late_plans_neither_stop_the_pusher_nor_send_nan(ros_context, fast_gil_handover):
    scene = load_scene(SCENE)
    with BackgroundExecutor(ros_context) as ex:
        ex.add(bring_up(MPCPlannerNode(parameter_overrides=[Parameter(k, value=v)
                                                            for k, v in REALTIME_PARAMETERS.items()])))
        h = Harness(ex.add(rclpy.create_node("mpc_planner_realtime_test")), scene)
        try:
            assert h.client.wait_for_server(timeout_sec=30.0)
            h.run_world()
            feedback = []
            goal = PushObject.Goal(target_object="cylinder", goal_x=0.08, goal_y=0.0, yaw_tolerance=-1.0,
                                   position_tolerance=0.02, max_actions=60)
            sent = h.client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback))
            handle = wait_future(sent, timeout=30.0, what="goal response")
            assert handle.accepted
            res = wait_future(handle.get_result_async(), timeout=300.0, what="push result")
            assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
            assert h.world.x[2] > 0.05
            # plans were late, and said so
            assert feedback and max(f.late_plans for f in feedback) >= 1
            assert all(f.plan_latency > 0.0 for f in feedback)
            # time-stamped plans, one per switch: starts DT apart after the first
            starts = [sec(f.latest_plan.header.stamp) for f in feedback]
            assert np.allclose(np.diff(starts[1:]) / DT, np.round(np.diff(starts[1:]) / DT), atol=1e-3)
            # nothing was NaN, and between the first and the last moving command every command is the control of
            # the plan in force or, while a late plan had not arrived, of the one before it: never a gap. A zero is
            # sent only where a plan holds the pusher still (the optimiser's 'hold still' proposal may win; how many
            # iterations fit before a simulated deadline depends on the host, so the plans do too).
            cmds = [(t, np.array([m.twist.linear.x, m.twist.linear.y])) for t, m in h.cmds]
            assert all(np.all(np.isfinite(u)) for _, u in cmds)
            moving = [i for i, (_, u) in enumerate(cmds) if np.any(u != 0.0)]
            assert moving
            plans = sorted(((sec(p.header.stamp), np.array([[c.vx, c.vy] for c in p.controls])) for p in h.plans),
                           key=lambda p: p[0])

            def control(plan, t):
                k = int(math.floor((t - plan[0]) / DT + 1e-6))
                return plan[1][k] if 0 <= k < len(plan[1]) else np.zeros(2)

            for t, u in cmds[moving[0]:moving[-1] + 1]:
                in_force = [p for p in plans if p[0] <= t + 1e-9][-2:]
                expected = [control(p, t) for p in in_force]
                assert any(np.array_equal(u, c) for c in expected), (t, u, expected)
        finally:
            h.close()


def test_an_unconfigured_or_inactive_planner_publishes_nothing_and_refuses_goals(ros_context):
    """In a namespace of its own (relative topic and action names), so that no other planner of this module that
    DDS may still know of is the one seen or served."""
    scene = load_scene(SCENE)
    ns = "lifecycle_test"
    with BackgroundExecutor(ros_context) as ex:
        planner = ex.add(MPCPlannerNode(namespace=ns, parameter_overrides=[Parameter(k, value=v)
                                                                           for k, v in PLANNER_PARAMETERS.items()]))
        h = Harness(ex.add(rclpy.create_node("mpc_planner_lifecycle_test", namespace=ns)), scene)
        try:
            h.publish_static(scene.initial_state())
            assert lifecycle_state(planner) == "unconfigured"
            h.wait_sim(0.5)
            assert not h.cmds and not h.status and not h.client.server_is_ready()
            assert planner.trigger_configure().to_label() == "transition_success"
            assert lifecycle_state(planner) == "inactive"
            assert h.client.wait_for_server(timeout_sec=30.0)
            goal = PushObject.Goal(target_object="cylinder", goal_x=0.3, goal_y=0.2, yaw_tolerance=-1.0)
            handle = wait_future(h.client.send_goal_async(goal), timeout=30.0, what="goal response")
            assert not handle.accepted  # inactive: refused
            h.wait_sim(0.5)
            assert not h.cmds and not h.status
            # active: it pushes; deactivated mid-push: the push ends, one zero, then silence
            assert planner.trigger_activate().to_label() == "transition_success"
            wait_for(lambda: h.status and h.status[-1].startswith("idle"), timeout=30.0, what="status 'idle'")
            handle = h.send(0.3, 0.2, max_actions=100)
            wait_for(lambda: any(not zero(m) for _, m in h.cmds), timeout=30.0, what="a non-zero push command")
            assert planner.trigger_deactivate().to_label() == "transition_success"
            deactivated = h.t  # the world's clock is never behind the planner's
            res = wait_future(handle.get_result_async(), timeout=30.0, what="deactivated result")
            assert res.result.outcome == PushObject.Result.ABORTED and "deactivated" in res.result.message
            h.wait_sim(0.5)
            # judged by stamps, not by arrival: commands still in flight at the deactivation may arrive after it
            # (one publisher, reliable: messages of the same stamp arrive in the order they were sent)
            last_stamp = max(t for t, _ in h.cmds)
            last = [m for t, m in h.cmds if t == last_stamp][-1]
            assert zero(last) and last_stamp <= deactivated + 1e-9  # one zero, then silent (no stop_hold zeros)
        finally:
            h.close()


def test_a_destroyed_planner_leaves_no_action_server_behind(ros_context):
    """Destroyed without a shutdown transition (``parapush sim`` at exit, a test's teardown), the planner takes its
    push_object server with it: rclpy's destroy_node leaves action servers alive while the node object lives, and a
    client in the same process once sent its goal to such a server, which never answered."""
    ns = "destroy_test"
    with BackgroundExecutor(ros_context) as ex:
        client = ActionClient(ex.add(rclpy.create_node("destroy_test_client", namespace=ns)), PushObject,
                              topics.PUSH_ACTION)
        spinner = BackgroundExecutor(ros_context).start()
        planner = spinner.add(bring_up(MPCPlannerNode(namespace=ns, parameter_overrides=[  # noqa: F841 - kept
            Parameter(k, value=v) for k, v in PLANNER_PARAMETERS.items()])))  # referenced, as by a frame or a cycle
        assert client.wait_for_server(timeout_sec=30.0)
        spinner.shutdown()  # stop spinning, destroy the node (no lifecycle shutdown)
        wait_for(lambda: not client.server_is_ready(), timeout=30.0, what="the destroyed planner's server to go")


def test_stop_is_final_no_command_tick_publishes_after_the_stops_zero(harness):
    """Issue 28: the command timer runs in its own callback group while cancels, pre-emptions and deactivation run
    on other threads; a tick that read the moving schedule just before a stop must not publish it after the stop's
    zero. Each of many rounds runs a tick whose publication of the moving command starts the stop (a cancel, as
    ``_on_cancel`` does it) on another thread and lets it run first if it can (a bounded join: before the fix it
    always can, and its zero went out before the tick's command; with the fix the stop waits for the tick, whatever
    the host's speed). The last command published must always be the stop's zero."""
    from parapush_ros.core.planning.outcome import Outcome
    from parapush_ros.core.planning.session import ControlSchedule, PushSession

    h, planner = harness
    h.publish_static(h.scene.initial_state())  # a valid state: the timer sends the schedule
    wait_for(lambda: not planner._state_problem(), timeout=30.0, what="a valid scene state")
    if True:
        published, lock, stops = [], threading.Lock(), []
        publish = planner.cmd_pub.publish

        def recorded(msg):  # the order of publication, as the publisher saw it
            u = (msg.twist.linear.x, msg.twist.linear.y)
            if u != (0.0, 0.0) and stops:
                stop = stops.pop()
                stop.start()
                stop.join(0.2)  # the stop runs now, unless the tick holds what it needs
            with lock:
                published.append(u)
            publish(msg)

        planner.cmd_pub.publish = recorded
        late = 0
        try:
            for _ in range(30):
                session = PushSession(planner.strategy, planner.io, planner.strategy.planner.task.goal)
                planner.arbiter.current = session  # a push running: the timer sends its schedule
                planner.io.execute(ControlSchedule(0.0, 1e6, [[0.05, 0.0]],
                                                   origin_ns=planner.get_clock().now().nanoseconds))

                def cancel():
                    session.stop(Outcome.ABORTED, "cancelled by the client")  # noqa: B023 - called within this iteration
                    planner._send_zero()

                stop = threading.Thread(target=cancel)
                stops.append(stop)
                tick = threading.Thread(target=planner._on_timer)
                tick.start()
                tick.join()
                if stops:  # the tick sent zero (the state went stale meanwhile): no race this round
                    stops.clear()
                    cancel()
                else:
                    stop.join()
                with lock:
                    late += published[-1] != (0.0, 0.0)
                planner.arbiter.current = None
        finally:
            planner.cmd_pub.publish = publish
        assert late == 0, f"{late} of 30 stops were followed by a non-zero command"
