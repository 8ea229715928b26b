"""The planner node with ``planner: dgoc`` end to end through real rclpy (same process, real DDS): a PushObject goal
*pose* -> one DG-OC plan (published as PushPlan, Path and markers of the pushed faces) -> 100 Hz tracking on
``pusher_cmd`` against a MuJoCo world stepped in the test -> feedback -> REACHED; a goal without a yaw is refused
with a clear outcome; a cancel while a plan is being solved ends the solve at once.

The world owns the simulated clock (``/clock``) and steps paper 003's block by 10 ms ticks under the latest command.
While the pusher is commanded to move it advances a tick only once the planner's command for the current clock has
arrived (lock-step: a slow host makes the test slower, never different); otherwise it ticks at about real time. The
library is one shipped demonstration cut to its first 3 s (the push is over by then), so the plan is 3 s long."""
import threading

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402
from nav_msgs.msg import Path  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from parapush_msgs.msg import PushPlan, SceneState  # noqa: E402
from parapush_ros.ros.actions import ActionClient  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.time import Time  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from conftest import BackgroundExecutor, wait_for, wait_future  # noqa: E402
from parapush_ros.core.planning.ddp.demonstrations import Demonstration, load_library  # noqa: E402
from parapush_ros.core.scene.spec import load_scene  # noqa: E402
from parapush_ros.core.sim.world import SimWorld  # noqa: E402
from parapush_ros.nodes.mpc_planner import MPCPlannerNode  # noqa: E402
from parapush_ros.ros import topics  # noqa: E402
from parapush_ros.ros.conversions import array_to_scene_state  # noqa: E402
from parapush_ros.ros.node import bring_up  # noqa: E402
from parapush_ros.ros.qos import LATCHED, RELIABLE  # noqa: E402

pytestmark = pytest.mark.timeout(120)
SCENE = load_scene("block_003")
TICK = 0.01  # s of simulated time per world step: the tracker's 100 Hz
GOAL = (0.19, 0.03, 0.6)  # where the 3 s demonstration leaves the block (0.186, 0.030, 0.58)


def sec(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class World:
    """The test's side of the wire: the world (clock, scene state), command/plan/status sinks, the action client."""

    def __init__(self, node):
        self.node = node
        self.clock_pub = node.create_publisher(Clock, topics.CLOCK, RELIABLE)
        self.state_pub = node.create_publisher(SceneState, topics.SCENE_STATE, RELIABLE)
        self.cmds, self.plans, self.paths, self.markers, self.status = [], [], [], [], []
        node.create_subscription(TwistStamped, topics.PUSHER_CMD, self._on_cmd, RELIABLE)
        node.create_subscription(PushPlan, topics.PLAN, self.plans.append, RELIABLE)
        node.create_subscription(Path, topics.PLAN_PATH, self.paths.append, LATCHED)
        node.create_subscription(MarkerArray, topics.PLAN_MARKERS, self.markers.append, LATCHED)
        node.create_subscription(String, topics.PLANNER_STATUS, lambda m: self.status.append(m.data), LATCHED)
        self.client = ActionClient(node, PushObject, topics.PUSH_ACTION)
        self.world = SimWorld(SCENE)
        self.t = 0.0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="test-world", daemon=True)
        self._thread.start()

    def close(self):
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(10.0)

    def _on_cmd(self, msg):
        with self._cond:
            self.cmds.append((sec(msg.header.stamp), msg))
            self._cond.notify_all()

    def last_u(self):
        if not self.cmds:
            return np.zeros(2)
        t = self.cmds[-1][1].twist.linear
        return np.array([t.x, t.y])

    def _loop(self):
        while not self._stop.is_set():
            with self._cond:
                if np.any(self.last_u() != 0.0):  # lock-step: the command for the current clock first
                    self._cond.wait_for(lambda: self._stop.is_set() or self.cmds[-1][0] > self.t - TICK + 1e-9,
                                        timeout=30.0)
            if np.all(self.last_u() == 0.0):
                self._stop.wait(TICK)
            with self._cond:
                self.world.execute(self.last_u(), TICK)
                x = self.world.x.copy()
                self.t = round(self.t + TICK, 9)
                stamp = Time(nanoseconds=int(round(self.t * 1e9))).to_msg()
            self.clock_pub.publish(Clock(clock=stamp))
            msg = array_to_scene_state(x, SCENE)
            msg.header.stamp, msg.header.frame_id = stamp, "table"
            self.state_pub.publish(msg)

    def send(self, x, y, yaw, yaw_tolerance, feedback=None):
        goal = PushObject.Goal(target_object="block", goal_x=x, goal_y=y, goal_yaw=yaw, position_tolerance=0.01,
                               yaw_tolerance=yaw_tolerance)
        handle = wait_future(self.client.send_goal_async(goal, feedback_callback=feedback), what="goal response")
        assert handle.accepted
        return handle


@pytest.fixture
def world(ros_context, tmp_path_factory, request):
    """The node and the test's world; ``request.param`` (indirect parametrisation) overrides node parameters."""
    library = tmp_path_factory.mktemp("demos")
    d = next(d for d in load_library("block_003") if d.name == "demo_06_0switch")
    Demonstration("first_3_s", d.dt, d.X[:151], d.U[:150], 0, "block_003").save(library / "first_3_s.json")
    params = dict(scene="block_003", planner="dgoc", state_timeout=1.0, tracking_loss_timeout=2.0, stop_hold=0.2,
                  use_sim_time=True, **{"dgoc.demonstrations": str(library), "dgoc.max_iterations": 20})
    params.update(getattr(request, "param", {}))
    with BackgroundExecutor(ros_context) as ex:
        ex.add(bring_up(MPCPlannerNode(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])))
        w = World(ex.add(rclpy.create_node("dgoc_planner_test")))
        try:
            assert w.client.wait_for_server(timeout_sec=30.0)
            yield w
        finally:
            w.close()


def test_a_dgoc_goal_pose_is_planned_tracked_at_100_hz_and_reached(world):
    w = world
    feedback = []
    handle = w.send(*GOAL, yaw_tolerance=0.1, feedback=lambda m: feedback.append(m.feedback))
    res = wait_future(handle.get_result_async(), timeout=100.0, what="push result")
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    r = res.result
    assert r.outcome == PushObject.Result.REACHED and r.actions_executed == 1 and r.final_distance <= 0.01
    pose = SCENE.layout.object_poses(w.world.x)[0]
    assert np.linalg.norm(pose[:2] - GOAL[:2]) < 0.01 and abs(pose[2] - GOAL[2]) < 0.1, pose
    # one plan: PushPlan of the model's states and pusher velocities at 20 ms, in the feedback too
    assert len(w.plans) == 1 and feedback and len(feedback[0].latest_plan.controls) == 150
    plan = w.plans[0]
    assert plan.model.startswith("quasistatic") and plan.controls[0].duration == pytest.approx(0.02)
    assert len(plan.predicted_states) == 150 and r.mean_planning_time == pytest.approx(plan.solve_time)
    # tracked at 100 Hz: while the pusher moved, one command per 10 ms tick of the simulated clock
    moving = [t for t, m in w.cmds if m.twist.linear.x != 0.0 or m.twist.linear.y != 0.0]
    assert len(moving) > 200 and np.median(np.diff(moving)) == pytest.approx(TICK, abs=1e-6)
    assert max(np.hypot(m.twist.linear.x, m.twist.linear.y) for _, m in w.cmds) <= 0.25 + 1e-9
    # the plan for RViz: the slider's path and the pushed face (the -x face, no switch on this push)
    wait_for(lambda: w.paths and w.markers, timeout=10.0, what="path and markers")
    assert len(w.paths[-1].poses) == 151 and w.paths[-1].header.frame_id == "table"
    ns = {m.ns for m in w.markers[-1].markers}
    assert {"plan/faces/contact", "plan/paths", "goal"} <= ns and "plan/faces/switches" not in ns
    wait_for(lambda: w.status and w.status[-1].startswith("reached"), timeout=10.0, what="status 'reached'")


def test_a_goal_without_a_yaw_is_refused_with_a_clear_outcome(world):
    res = wait_future(world.send(0.1, 0.0, 0.0, yaw_tolerance=-1.0).get_result_async(), timeout=30.0,
                      what="result")
    assert res.status == GoalStatus.STATUS_ABORTED and res.result.outcome == PushObject.Result.FAILED
    assert "goal.yaw_tolerance: the dgoc planner pushes to a goal pose" in res.result.message
    assert not world.plans


@pytest.fixture
def held_solve(monkeypatch):
    """Every DDP solve that is given a stop callback runs one iteration, then is held (the event ``held`` set)
    until the test sets ``release`` (60 s of wall time at most: a bound, not a pace), so that a cancel always
    arrives while a solve runs, on any host (a long real solve would race the cancel against the host's speed)."""
    from parapush_ros.core.planning.ddp import solver
    original = solver.BatchedDDP.solve
    held, release = threading.Event(), threading.Event()

    def solve(self, x0, U0, X0=None, active=None, should_stop=None):
        if should_stop is not None:
            asked, calls = should_stop, []

            def should_stop():
                calls.append(None)
                if len(calls) >= 2:  # before the second iteration
                    held.set()
                    release.wait(60.0)
                return asked()
        return original(self, x0, U0, X0=X0, active=active, should_stop=should_stop)

    monkeypatch.setattr(solver.BatchedDDP, "solve", solve)
    yield held, release
    release.set()  # a test that failed before its release leaves no solve held


def test_a_cancel_while_planning_ends_the_solve_at_once(world, held_solve):
    w = world
    held, release = held_solve
    handle = w.send(*GOAL, yaw_tolerance=0.1)
    wait_for(held.is_set, timeout=60.0, what="a DDP solve under way")
    wait_future(handle.cancel_goal_async(), timeout=30.0, what="cancel response")  # the push is stopping now
    release.set()
    res = wait_future(handle.get_result_async(), timeout=60.0, what="push result")
    assert res.status == GoalStatus.STATUS_CANCELED and res.result.actions_executed == 0, res.result.message
    assert "cancelled by the client (while planning: the solve stopped after 1 DDP iteration" in res.result.message
    assert not w.plans  # the solve gave up: no plan was published or tracked
    assert all(m.twist.linear.x == 0.0 and m.twist.linear.y == 0.0 for _, m in w.cmds)
