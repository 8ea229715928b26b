"""``parapush sim``'s stack: the launch file's nodes and parameter files in one process, over real ROS."""
import re

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from parapush_msgs.msg import SceneState  # noqa: E402
from parapush_ros.ros.actions import ActionClient  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from conftest import (SIGINT_IGNORED, BackgroundExecutor, lifecycle_state, wait_for, wait_future,  # noqa: E402
                      wait_sim)
from parapush_ros import bringup  # noqa: E402
from parapush_ros.core.robot.command_safety import stop_travel_bound  # noqa: E402
from parapush_ros.core.models.mjcf import PUSHER_BANDWIDTH_HZ  # noqa: E402
from parapush_ros.sim_runner import SimStack  # noqa: E402
from parapush_ros.ros.qos import LATCHED, RELIABLE  # noqa: E402

pytestmark = pytest.mark.timeout(90)


CALLBACK_LATENCY = 0.25  # s of sim time allowed for callbacks delayed in the one-process stack (a busy host)


def dropout_stop_bound(stack) -> tuple[float, float]:
    """(travel bound (m), settle time (s)) after an object's marker is hidden in the sim stack: mocap_ingest marks
    it lost ``timeout`` after its last sample (+ one ingest period + one mocap period), the planner zeros on its
    next timer tick, the commander ramps down at ``max_acceleration`` on its next period, the servo coasts."""
    ing, plan, com, sim = (stack.nodes[n].p
                           for n in ("mocap_ingest", "mpc_planner", "velocity_commander", "mujoco_sim"))
    reaction = (ing["timeout"] + 1.0 / ing["rate"] + 1.0 / sim["pose_rate"]
                + 1.0 / plan["control_rate"] + CALLBACK_LATENCY)
    bound = stop_travel_bound(speed=com["max_speed"], reaction_time=reaction, output_period=1.0 / com["rate"],
                              deceleration=com["max_acceleration"], servo_bandwidth_hz=PUSHER_BANDWIDTH_HZ)
    settle = reaction + com["max_speed"] / com["max_acceleration"] + 5.0 / PUSHER_BANDWIDTH_HZ
    return bound, settle


def test_stack_runs_the_launch_file_nodes_with_their_parameter_files(ros_context):
    """End to end over real topics: sim -> mocap_ingest -> mpc_planner -> velocity_commander -> sim. A PushObject
    goal reaches the goal; a mocap dropout on the way stops the pusher and the push resumes once tracking is back."""
    stack = SimStack({"scene": "cylinder_slider", "model": "coarse"},
                     overrides={"mujoco_sim": {"real_time_factor": 2.0}}, context=ros_context)
    try:
        assert list(stack.nodes) == [s.name for s in bringup.nodes("sim")]
        # the same merged parameters the launch file gives ROS: YAML, sim overlay, launch arguments
        com = stack.nodes["velocity_commander"]
        assert com.p["rate"] == 50.0 and com.p["gripper_enabled"] is False  # config/sim.yaml
        assert com.limits.max_speed == 0.1  # config/velocity_commander.yaml
        assert lifecycle_state(com) == "active"  # configured and activated, as the launch files do
        planner = stack.nodes["mpc_planner"]
        assert planner.p["model"] == "coarse" and planner.p["tracking_loss_timeout"] == 3.0
        assert lifecycle_state(planner) == "active"
        assert all(n.get_parameter("use_sim_time").value for k, n in stack.nodes.items() if k != "mujoco_sim")
        assert {n.scene.name for k, n in stack.nodes.items() if hasattr(n, "scene")} == {"cylinder_slider"}
        sim_node = stack.nodes["mujoco_sim"]
        sim = sim_node.sim
        assert sim.scene.name == "cylinder_slider"
        stack.start()
        with BackgroundExecutor(ros_context) as ex:
            io = ex.add(rclpy.create_node("runner_test_io", context=ros_context))
            states, status = [], []
            io.create_subscription(SceneState, "/scene_state", states.append,
                                   RELIABLE)
            io.create_subscription(String, "/planner/status", lambda m: status.append(m.data),
                                   LATCHED)
            wait_for(lambda: states and states[-1].pusher_tracking_valid and states[-1].objects[0].tracking_valid,
                     timeout=15, what="a valid scene_state from the simulated mocap")
            assert states[-1].header.frame_id == "table"
            # the planner's action takes a goal and drives the pusher through commander and sim
            client = ActionClient(io, PushObject, "/push_object")
            assert client.wait_for_server(timeout_sec=10)
            feedback = []
            goal = PushObject.Goal(target_object="cylinder", goal_x=0.12, goal_y=0.0, position_tolerance=0.03,
                                   yaw_tolerance=-1.0, max_actions=20)
            handle = wait_future(client.send_goal_async(goal, feedback_callback=feedback.append), timeout=10,
                                 what="goal acceptance")
            assert handle.accepted
            x0 = sim.planar_state()[0]
            wait_for(lambda: sim.planar_state()[0] > x0 + 0.01, timeout=20, what="the simulated pusher moving")

            # mocap dropout: the slider's marker is occluded; the planner pauses and the pusher stops within the
            # stated bound (simulated time throughout: a slow host makes this slower, not different)
            p_hide = sim.planar_state()[:2].copy()
            sim_node.set_parameters([Parameter("hidden_bodies", value="cylinder")])
            wait_for(lambda: status and status[-1].startswith("paused"), timeout=30, what="planner status 'paused'")
            bound, settle = dropout_stop_bound(stack)
            wait_sim(lambda: sim_node.time, settle)  # the commander's ramp down and the sim's servo are over
            p_stop = sim.planar_state()[:2].copy()
            travel = float(np.linalg.norm(p_stop - p_hide))
            assert travel <= bound, \
                f"pusher travelled {travel * 1e3:.1f} mm after the occlusion (bound {bound * 1e3:.1f} mm)"
            wait_sim(lambda: sim_node.time, 0.5)
            assert np.linalg.norm(sim.planar_state()[:2] - p_stop) < 1e-3  # held still while tracking is lost
            assert not handle.get_result_async().done()
            sim_node.set_parameters([Parameter("hidden_bodies", value="")])  # tracking is back: it resumes

            res = wait_future(handle.get_result_async(), timeout=60, what="push result")
            assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
            assert res.result.outcome == PushObject.Result.REACHED, res.result.message
            assert res.result.actions_executed >= 2 and feedback
            assert abs(sim.planar_state()[2] - 0.12) < 0.03  # the simulated slider really is at the goal
    finally:
        stack.shutdown()


def test_missing_nodes_are_an_error_unless_left_out_explicitly(ros_context, monkeypatch):
    ghost = bringup.NodeSpec("ghost_node", "ghost_node", "parapush_ros.nodes.ghost_node", "GHOST")
    monkeypatch.setattr(bringup, "NODES", (ghost,) + bringup.NODES)
    with pytest.raises(RuntimeError, match=r"ghost_node.*--without ghost_node"):
        SimStack({}, context=ros_context)
    with pytest.raises(ValueError, match="not nodes of the sim"):
        SimStack({}, without=["teapot"], context=ros_context)
    stack = SimStack({}, without=["ghost_node", "mpc_planner", "parareal_predictor"], context=ros_context)
    try:
        assert list(stack.nodes) == ["mujoco_sim", "mocap_ingest", "velocity_commander"]
    finally:
        stack.shutdown()


def test_stack_tracks_every_object_of_a_clutter_scene(ros_context):
    """Paper 001's multi-object scene over ROS: the sim publishes, and mocap_ingest tracks, four cylinders plus the
    pusher; RViz markers show every object and the goal region; planner and predictor run Parareal on the learned
    coarse model (launch argument coarse_model)."""
    from visualization_msgs.msg import MarkerArray
    stack = SimStack({"scene": "clutter_push", "model": "parareal1", "coarse_model": "learned"}, context=ros_context)
    try:
        planner = stack.nodes["mpc_planner"]
        scene = planner.scene
        assert scene.name == "clutter_push" and len(scene.objects) == 4
        mpc = planner.strategy.planner
        assert mpc.predictor.default_coarse == "learned" and mpc.task.kind == "multi_object"
        assert stack.nodes["parareal_predictor"].p["coarse_model"] == "learned"
        assert set(stack.nodes["mocap_ingest"].bodies) == {"pusher"} | {o.name for o in scene.objects}
        stack.start()
        with BackgroundExecutor(ros_context) as ex:
            io = ex.add(rclpy.create_node("clutter_test_io", context=ros_context))
            states, marks = [], []
            reliable = RELIABLE
            io.create_subscription(SceneState, "/scene_state", states.append, reliable)
            io.create_subscription(MarkerArray, "/mocap_ingest/markers", marks.append, reliable)
            wait_for(lambda: states and states[-1].pusher_tracking_valid
                     and len(states[-1].objects) == 4 and all(o.tracking_valid for o in states[-1].objects),
                     timeout=15, what="a valid scene_state with four objects")
            s = states[-1]
            assert [o.name for o in s.objects] == [o.name for o in scene.objects]
            for o, spec in zip(s.objects, scene.objects):
                assert np.hypot(o.x - spec.pose[0], o.y - spec.pose[1]) < 0.005, o.name
            wait_for(lambda: marks, timeout=15, what="mocap_ingest markers")
            tracked = [m for m in marks[-1].markers if m.ns == "tracked"]
            assert len(tracked) == 5  # the pusher and every object
            goal = [m for m in marks[-1].markers if m.ns == "goal"]
            assert len(goal) == 1 and goal[0].scale.x == pytest.approx(2 * scene.goal.radius)
            assert (goal[0].pose.position.x, goal[0].pose.position.y) == pytest.approx(scene.goal.position)
    finally:
        stack.shutdown()


def test_stack_publishes_the_launch_files_static_transform(ros_context, tmp_path):
    """The launch files' static_transform_publisher (mocap frame -> table frame on /tf_static, latched): parapush
    sim publishes the same transform itself, where tf2_msgs is installed (a ROS install, the launch overlay)."""
    from parapush_ros.ros.static_tf import TF_AVAILABLE, TF_STATIC_QOS, TF_STATIC_TOPIC
    lab = tmp_path / "lab.yaml"
    lab.write_text("mocap_ingest:\n  ros__parameters:\n    table_origin_in_mocap: [0.1, -0.2, 0.8]\n"
                   "    table_rotation_in_mocap: [0.5]\n")
    arguments = {"scene": "cylinder_slider", "params_file": str(lab)}
    stack = SimStack(arguments, without=["mpc_planner", "parareal_predictor"], context=ros_context)
    try:
        t = stack.static_transform
        assert (t.parent_frame, t.child_frame) == ("world", "table")
        assert t.translation == pytest.approx((0.1, -0.2, 0.8))
        assert t.rotation_xyzw == pytest.approx((0.0, 0.0, np.sin(0.25), np.cos(0.25)))  # yaw 0.5 rad about z
        if not TF_AVAILABLE:
            assert stack.static_tf_node is None
            pytest.skip("tf2_msgs is not installed: parapush sim publishes no TF (it says so)")
        from tf2_msgs.msg import TFMessage
        stack.start()
        with BackgroundExecutor(ros_context) as ex:
            io = ex.add(rclpy.create_node("tf_reader", context=ros_context))
            got = []
            io.create_subscription(TFMessage, TF_STATIC_TOPIC, got.append, TF_STATIC_QOS)  # joins late: latched
            wait_for(lambda: got, timeout=15, what="the latched /tf_static")
        (msg,) = got[0].transforms
        # exactly what ros2 launch hands tf2_ros' static_transform_publisher for the same arguments
        kv = dict(zip(*[iter(bringup.mocap_static_transform_arguments("sim", arguments))] * 2))
        assert (msg.header.frame_id, msg.child_frame_id) == (kv["--frame-id"], kv["--child-frame-id"])
        tr, q = msg.transform.translation, msg.transform.rotation
        assert [tr.x, tr.y, tr.z, q.x, q.y, q.z, q.w] == pytest.approx(
            [float(kv[k]) for k in ("--x", "--y", "--z", "--qx", "--qy", "--qz", "--qw")])
    finally:
        stack.shutdown()


@pytest.mark.timeout(400)
def test_parapush_sim_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    """``parapush sim &`` in a shell script starts with SIGINT ignored; ``kill -INT`` must still stop it (and the
    stack's shutdown send its zeros), as it stops ``ros2 launch`` (``ros.node.take_back_sigint``)."""
    import os
    import signal
    import subprocess
    import sys

    log = tmp_path / "sim.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*SIGINT_IGNORED, sys.executable, "-m", "parapush_ros.cli", "sim", "--duration", "0"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: "\nt=" in log.read_text() or proc.poll() is not None, timeout=300.0, interval=0.1,
                     what="parapush sim to run")
            assert "takes SIGINT back" in log.read_text(), log.read_text()[-3000:]
            os.kill(proc.pid, signal.SIGINT)
            assert proc.wait(60) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert "parapush sim: interrupted" in log.read_text(), log.read_text()[-3000:]


@pytest.mark.timeout(400)
def test_parapush_sim_push_sends_the_goal_and_reports_the_result_and_its_plot(tmp_path):
    """``parapush sim --push`` (``make demo``'s command) end to end in its own process: the goal through the
    planner's action (``ros.actions.ResentGoal``), the result printed, the executed path's PNG written, exit 0."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "parapush_ros.cli", "sim", "--push", "--scene", "cylinder_slider", "--model",
            "coarse", "--goal", "0.12", "0.0", "--tolerance", "0.03", "--real-time-factor", "2", "--out",
            str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=360, stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "parapush sim: pushing 'cylinder' to (+0.120, +0.000)" in out, out[-3000:]
    assert re.search(r"outcome\s+REACHED", out), out[-3000:]
    assert (tmp_path / "sim_push_cylinder_slider.png").stat().st_size > 1000
