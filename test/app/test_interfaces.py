"""parapush_msgs round trips through real rclpy entities (topics, a service, an action) in one process."""
import math
import threading

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.action import ActionServer, CancelResponse, GoalResponse  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy  # noqa: E402

from action_msgs.msg import GoalStatus  # noqa: E402
from action_msgs.srv import CancelGoal  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from parapush_msgs.msg import ObjectState, PushControl, PushPlan, SceneState  # noqa: E402
from parapush_msgs.srv import PredictTrajectory  # noqa: E402

from conftest import wait_for, wait_future  # noqa: E402
from parapush_ros.ros.actions import ActionClient  # noqa: E402

pytestmark = pytest.mark.timeout(30)

RELIABLE = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
                      durability=QoSDurabilityPolicy.VOLATILE)


# ------------------------------------------------------------------------------------------------- builders / checks
def make_object(name, shape, k):
    o = ObjectState()
    o.name = name
    o.shape = shape
    o.x, o.y, o.yaw = 0.1 * k + 0.0123, -0.2 * k + 0.0456, 0.3 * k - math.pi / 7
    o.vx, o.vy, o.omega = 0.01 * k, -0.02 * k, 0.5 * k + 1e-9
    o.tracking_valid = (k % 2 == 0)
    return o


def make_scene(k=1, stamp_sec=12, frame="table"):
    s = SceneState()
    s.header.stamp.sec = stamp_sec
    s.header.stamp.nanosec = 345678901
    s.header.frame_id = frame
    s.pusher_x, s.pusher_y = -0.05 * k, 0.0731 * k
    s.pusher_vx, s.pusher_vy = 0.02, -0.0175 * k
    s.objects = [make_object("box", ObjectState.SHAPE_BOX, k),
                 make_object("cyl_0", ObjectState.SHAPE_CYLINDER, k + 1)]
    return s


def make_control(k):
    c = PushControl()
    c.vx, c.vy, c.duration = 0.05 * k, -0.01 * k, 0.1 + 0.05 * k
    return c


def make_plan():
    p = PushPlan()
    p.header.stamp.sec = 7
    p.header.stamp.nanosec = 42
    p.header.frame_id = "table"
    p.controls = [make_control(k) for k in range(1, 4)]
    p.predicted_states = [make_scene(k, stamp_sec=7 + k) for k in range(1, 4)]
    p.cost = 0.123456789
    p.model = "parareal"
    p.parareal_iterations = 3
    p.solve_time = 0.0421
    return p


def assert_object_eq(a, b):
    assert a.name == b.name
    assert a.shape == b.shape
    for f in ("x", "y", "yaw", "vx", "vy", "omega"):
        assert getattr(a, f) == getattr(b, f), f
    assert a.tracking_valid == b.tracking_valid


def assert_scene_eq(a, b):
    assert a.header.stamp.sec == b.header.stamp.sec
    assert a.header.stamp.nanosec == b.header.stamp.nanosec
    assert a.header.frame_id == b.header.frame_id
    for f in ("pusher_x", "pusher_y", "pusher_vx", "pusher_vy"):
        assert getattr(a, f) == getattr(b, f), f
    assert len(a.objects) == len(b.objects)
    for oa, ob in zip(a.objects, b.objects):
        assert_object_eq(oa, ob)


def assert_control_eq(a, b):
    assert (a.vx, a.vy, a.duration) == (b.vx, b.vy, b.duration)


def assert_plan_eq(a, b):
    assert a.header.stamp.sec == b.header.stamp.sec
    assert a.header.stamp.nanosec == b.header.stamp.nanosec
    assert a.header.frame_id == b.header.frame_id
    assert len(a.controls) == len(b.controls)
    for ca, cb in zip(a.controls, b.controls):
        assert_control_eq(ca, cb)
    assert len(a.predicted_states) == len(b.predicted_states)
    for sa, sb in zip(a.predicted_states, b.predicted_states):
        assert_scene_eq(sa, sb)
    assert a.cost == b.cost
    assert a.model == b.model
    assert a.parareal_iterations == b.parareal_iterations
    assert a.solve_time == b.solve_time


# ------------------------------------------------------------------------------------------------- tests
def test_constants():
    assert (ObjectState.SHAPE_BOX, ObjectState.SHAPE_CYLINDER) == (0, 1)
    R = PushObject.Result
    assert tuple(range(7)) == (R.REACHED, R.HIT_OBSTACLE, R.OFF_TABLE, R.TIMEOUT, R.ABORTED, R.FAILED, R.OTHER_IN_GOAL)


@pytest.mark.parametrize("msg_type,make,check", [
    (SceneState, make_scene, assert_scene_eq),
    (PushPlan, make_plan, assert_plan_eq),
], ids=["SceneState", "PushPlan"])
def test_topic_round_trip(ros_context, ros_executor, msg_type, make, check):
    topic = f"/parapush_test/{msg_type.__name__.lower()}"
    pub_node = ros_executor.add(rclpy.create_node("test_pub", context=ros_context))
    sub_node = ros_executor.add(rclpy.create_node("test_sub", context=ros_context))
    received = []
    got = threading.Event()

    def on_msg(msg):
        received.append(msg)
        got.set()

    sub = sub_node.create_subscription(msg_type, topic, on_msg, RELIABLE)
    pub = pub_node.create_publisher(msg_type, topic, RELIABLE)
    wait_for(lambda: pub.get_subscription_count() >= 1 and sub.get_publisher_count() >= 1,
             what="topic discovery")
    sent = make()
    pub.publish(sent)
    assert got.wait(5.0), "message not received"
    assert len(received) == 1
    check(received[0], sent)


def test_predict_trajectory_service(ros_context, ros_executor):
    server = ros_executor.add(rclpy.create_node("test_predict_server", context=ros_context))
    client_node = ros_executor.add(rclpy.create_node("test_predict_client", context=ros_context))
    seen = []

    def handle(request, response):
        seen.append(request)
        # A trivial "model": every slice end is the initial state with the pusher moved by the control.
        state = request.initial_state
        x, y = state.pusher_x, state.pusher_y
        for c in request.controls:
            x += c.vx * c.duration
            y += c.vy * c.duration
            s = make_scene(1, stamp_sec=state.header.stamp.sec)
            s.pusher_x, s.pusher_y, s.pusher_vx, s.pusher_vy = x, y, c.vx, c.vy
            response.predicted_states.append(s)
        response.success = True
        response.message = f"{request.model}/{request.coarse_model}"
        response.iteration_change = [0.5, 0.01, 1e-7]
        response.iterations = 3
        response.wall_time = 0.25
        return response

    server.create_service(PredictTrajectory, "/parapush_test/predict_trajectory", handle)
    client = client_node.create_client(PredictTrajectory, "/parapush_test/predict_trajectory")
    assert client.wait_for_service(timeout_sec=5.0), "service not discovered"

    req = PredictTrajectory.Request()
    req.initial_state = make_scene(2)
    req.controls = [make_control(k) for k in range(1, 5)]
    req.model = "parareal"
    req.coarse_model = "learned"
    req.max_iterations = -1
    req.tolerance = 1e-4
    resp = wait_future(client.call_async(req), what="service response")

    assert len(seen) == 1
    got = seen[0]
    assert_scene_eq(got.initial_state, req.initial_state)
    assert len(got.controls) == 4
    for a, b in zip(got.controls, req.controls):
        assert_control_eq(a, b)
    assert (got.model, got.coarse_model, got.max_iterations, got.tolerance) == ("parareal", "learned", -1, 1e-4)

    assert resp.success is True
    assert resp.message == "parareal/learned"
    assert len(resp.predicted_states) == 4
    x, y = req.initial_state.pusher_x, req.initial_state.pusher_y
    for s, c in zip(resp.predicted_states, req.controls):
        x += c.vx * c.duration
        y += c.vy * c.duration
        assert (s.pusher_x, s.pusher_y, s.pusher_vx, s.pusher_vy) == (x, y, c.vx, c.vy)
        assert len(s.objects) == 2
        assert_object_eq(s.objects[1], make_scene(1).objects[1])
    assert list(resp.iteration_change) == [0.5, 0.01, 1e-7]
    assert resp.iterations == 3
    assert resp.wall_time == 0.25


def test_push_object_action(ros_context, ros_executor):
    server_node = ros_executor.add(rclpy.create_node("test_push_server", context=ros_context))
    client_node = ros_executor.add(rclpy.create_node("test_push_client", context=ros_context))
    goals_seen = []
    feedback_got = threading.Event()   # set by the client when it has received feedback for the current goal
    cancel_goal_started = threading.Event()

    def execute(goal_handle):
        req = goal_handle.request
        goals_seen.append(req)
        if req.target_object == "cancel_me":
            cancel_goal_started.set()
            wait_for(lambda: goal_handle.is_cancel_requested, timeout=10.0, what="cancel request")
            goal_handle.canceled()
            r = PushObject.Result()
            r.outcome = PushObject.Result.ABORTED
            r.message = "cancelled by client"
            r.actions_executed = 1
            return r
        # Feedback goes over a topic that may still be matching: republish until the client has it.
        fb = PushObject.Feedback()
        fb.distance_to_goal = 0.0875
        fb.step = 2
        fb.latest_plan = make_plan()
        while not feedback_got.is_set():
            goal_handle.publish_feedback(fb)
            feedback_got.wait(0.05)
        goal_handle.succeed()
        r = PushObject.Result()
        r.outcome = PushObject.Result.REACHED
        r.message = "reached"
        r.actions_executed = 4
        r.final_distance = 0.0042
        r.mean_planning_time = 0.031
        return r

    group = ReentrantCallbackGroup()
    server = ActionServer(  # noqa: F841 - kept alive by the node
        server_node, PushObject, "/parapush_test/push_object", execute_callback=execute,
        goal_callback=lambda goal: GoalResponse.ACCEPT,
        cancel_callback=lambda goal_handle: CancelResponse.ACCEPT,
        callback_group=group)
    client = ActionClient(client_node, PushObject, "/parapush_test/push_object", callback_group=group)
    assert client.wait_for_server(timeout_sec=5.0), "action server not discovered"

    # --- goal -> feedback -> result
    feedback = []

    def on_feedback(msg):
        feedback.append(msg.feedback)
        feedback_got.set()

    goal = PushObject.Goal()
    goal.target_object = "box"
    goal.goal_x, goal.goal_y, goal.goal_yaw = 0.35, -0.125, math.pi / 3
    goal.position_tolerance = 0.01
    goal.yaw_tolerance = -1.0
    goal.max_actions = 25
    handle = wait_future(client.send_goal_async(goal, feedback_callback=on_feedback), what="goal acceptance")
    assert handle.accepted
    res = wait_future(handle.get_result_async(), timeout=10.0, what="action result")

    g = goals_seen[0]
    assert g.target_object == "box"
    assert (g.goal_x, g.goal_y, g.goal_yaw) == (0.35, -0.125, math.pi / 3)
    assert (g.position_tolerance, g.yaw_tolerance, g.max_actions) == (0.01, -1.0, 25)

    assert feedback, "no feedback received"
    fb = feedback[0]
    assert fb.distance_to_goal == 0.0875
    assert fb.step == 2
    assert_plan_eq(fb.latest_plan, make_plan())

    assert res.status == GoalStatus.STATUS_SUCCEEDED
    r = res.result
    assert r.outcome == PushObject.Result.REACHED
    assert r.message == "reached"
    assert (r.actions_executed, r.final_distance, r.mean_planning_time) == (4, 0.0042, 0.031)

    # --- cancel
    goal2 = PushObject.Goal()
    goal2.target_object = "cancel_me"
    handle2 = wait_future(client.send_goal_async(goal2), what="second goal acceptance")
    assert handle2.accepted
    assert cancel_goal_started.wait(5.0), "second goal never started executing"
    cancel = wait_future(handle2.cancel_goal_async(), what="cancel response")
    assert cancel.return_code == CancelGoal.Response.ERROR_NONE
    assert len(cancel.goals_canceling) == 1
    res2 = wait_future(handle2.get_result_async(), timeout=10.0, what="cancelled result")
    assert res2.status == GoalStatus.STATUS_CANCELED
    assert res2.result.outcome == PushObject.Result.ABORTED
    assert res2.result.message == "cancelled by client"
    assert res2.result.actions_executed == 1

    # server and client go with their nodes, after the executor stopped (destroying them while it spins races)
