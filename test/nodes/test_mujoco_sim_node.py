"""mujoco_sim through real rclpy entities, alone and closed-loop with mocap_ingest and velocity_commander."""
import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import PoseStamped, TwistStamped  # noqa: E402
from parapush_msgs.msg import SceneState  # noqa: E402
from parapush_msgs.srv import LoadScene  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from conftest import wait_for, wait_future, wait_sim  # noqa: E402
from parapush_ros.core.robot.mocap import MocapToTable  # noqa: E402
from parapush_ros.nodes.mocap_ingest import MocapIngestNode  # noqa: E402
from parapush_ros.nodes.mujoco_sim import STEP_NS, MujocoSimNode  # noqa: E402
from parapush_ros.nodes.velocity_commander import VelocityCommanderNode  # noqa: E402
from parapush_ros.ros.node import bring_up  # noqa: E402
from parapush_ros.ros.qos import CLOCK, RELIABLE, SENSOR  # noqa: E402

pytestmark = pytest.mark.timeout(90)


def params(**kw):
    return [Parameter(k, value=v) for k, v in kw.items()]


class Latest:
    def __init__(self):
        self.msg = None
        self.count = 0

    def __call__(self, msg):
        self.msg = msg
        self.count += 1


def sec(stamp):
    return stamp.sec + stamp.nanosec * 1e-9


def twist(node, vx):
    """A table-frame twist along x stamped by ``node``'s clock (the sim clock under use_sim_time)."""
    tw = TwistStamped()
    tw.header.stamp = node.get_clock().now().to_msg()
    tw.header.frame_id = "table"
    tw.twist.linear.x = vx
    return tw


def test_sim_publishes_clock_and_mocap_poses_and_moves_the_slider(ros_context, ros_executor):
    origin, yaw = [1.0, 2.0, 0.75], 0.4
    sim = ros_executor.add(MujocoSimNode(namespace="/simtest", parameter_overrides=params(
        scene="cylinder_slider", pose_topic_template="/simtest/{body}/pose", real_time_factor=2.0,
        table_origin_in_mocap=origin, table_rotation_in_mocap=[yaw], position_noise=0.0, yaw_noise=0.0,
        latency=0.01, pose_rate=100.0)))
    io = ros_executor.add(rclpy.create_node("simtest_io", namespace="/simtest", context=ros_context,
                                            parameter_overrides=[Parameter("use_sim_time", value=True)]))
    clock, slider, pusher = Latest(), Latest(), Latest()
    io.create_subscription(Clock, "/clock", clock, CLOCK)
    io.create_subscription(PoseStamped, "/simtest/cylinder/pose", slider, SENSOR)
    io.create_subscription(PoseStamped, "/simtest/pusher/pose", pusher, SENSOR)
    cmd = io.create_publisher(TwistStamped, "/servo_node/delta_twist_cmds", RELIABLE)
    wait_for(lambda: clock.msg is not None and slider.msg is not None and pusher.msg is not None, timeout=10,
             what="clock and poses")
    tf = MocapToTable.from_params(origin, [yaw], "z")
    m = slider.msg
    assert m.header.frame_id == "world"
    p0, _ = tf.to_table([m.pose.position.x, m.pose.position.y, m.pose.position.z],
                        [m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w])
    np.testing.assert_allclose(p0[:2], [0.0, 0.0], atol=1e-4)  # the scene's start, through the transform
    assert 0.0 < p0[2] < 0.03
    # latency: a pose is published (latency 0.01 s) after its stamp, a sim-time measurement time; the sim's own
    # clock, not the /clock last received here (another topic, delivered in its own order), is the reference
    assert 0.0 < sec(m.header.stamp) <= sim.time - 0.01 + 1e-9

    # push along table +x for ~1 s of sim time, stamping like a sim-time node, from a timer on the sim clock
    t_end = sim.time + 1.0
    pushing = io.create_timer(0.01, lambda: sim.time < t_end and cmd.publish(twist(io, 0.1)))
    wait_sim(lambda: sim.time, 1.1)  # and the latency queue has delivered
    io.destroy_timer(pushing)
    m = slider.msg
    p1, _ = tf.to_table([m.pose.position.x, m.pose.position.y, m.pose.position.z],
                        [m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w])
    assert p1[0] > 0.02 and abs(p1[1]) < 0.01  # pushed forward along the table's x

    # the twists stopped: like Servo, the sim halts the pusher once they are stale
    x_before = sim.sim.planar_state()[0]
    wait_sim(lambda: sim.time, 0.3)
    assert sim.sim.planar_state()[0] == pytest.approx(x_before, abs=2e-3)

    # reset service: back to the start; the clock does not jump back
    t_before = sec(clock.msg.clock)
    reset = io.create_client(Trigger, "/simtest/mujoco_sim/reset")
    assert reset.wait_for_service(timeout_sec=30.0)  # a request sent before discovery can be lost
    assert wait_future(reset.call_async(Trigger.Request()), what="reset").success
    assert sim.sim.planar_state()[2] == pytest.approx(0.0, abs=1e-4)  # the sim keeps stepping after the reset
    wait_for(lambda: sec(clock.msg.clock) > t_before, what="clock advancing after reset")

    # hidden bodies (occlusion), changed at run time
    sim.set_parameters([Parameter("hidden_bodies", value="cylinder")])

    seen = {"count": slider.count, "since": sim.time}

    def no_new_poses():  # samples taken before the change may still be in the latency queue: wait them out
        if slider.count != seen["count"]:
            seen.update(count=slider.count, since=sim.time)
        return sim.time - seen["since"] >= 0.2  # none for 0.2 s of sim time (20 samples' worth)

    wait_for(no_new_poses, timeout=30, what="no slider poses while it is hidden")
    bad = sim.set_parameters([Parameter("hidden_bodies", value="teapot")])[0]
    assert not bad.successful and "teapot" in bad.reason

    # scene load service: a bad name is refused (scene kept), a good one swaps the bodies and topics
    load = io.create_client(LoadScene, "/simtest/mujoco_sim/load_scene")
    assert load.wait_for_service(timeout_sec=30.0)
    r = wait_future(load.call_async(LoadScene.Request(scene="no_such_scene")), what="load refusal")
    assert not r.success and "no_such_scene" in r.message and sim.sim.scene.name == "cylinder_slider"
    box = Latest()
    io.create_subscription(PoseStamped, "/simtest/box/pose", box, SENSOR)
    r = wait_future(load.call_async(LoadScene.Request(scene="box_slider")), timeout=10, what="load")
    assert r.success and "/simtest/box/pose" in r.message
    wait_for(lambda: box.msg is not None, timeout=10, what="box poses")


def test_sim_objects_falling_off_the_table_are_detected(ros_context, ros_executor):
    sim = ros_executor.add(MujocoSimNode(namespace="/simfall", parameter_overrides=params(
        scene="cylinder_slider", pose_topic_template="/simfall/{body}/pose", real_time_factor=4.0,
        command_interface="joint_velocity", command_topic="/simfall/commands")))
    io = ros_executor.add(rclpy.create_node("simfall_io", context=ros_context))
    from std_msgs.msg import Float64MultiArray
    pub = io.create_publisher(Float64MultiArray, "/simfall/commands", RELIABLE)
    wait_for(lambda: pub.get_subscription_count() >= 1, timeout=20, what="sim command subscription")
    layout = sim.sim.scene.layout

    def pushed_off():
        """A pusher aimed at the slider's centre at 0.3 m/s, re-aimed at every poll: a single straight push is a
        balance on a knife's edge (it sometimes slips past the slider, which then stops at the edge), a
        re-aimed one shoves the slider on until it drops. Joint velocities = joint matrix @ table velocity."""
        x = sim.sim.planar_state()
        d = layout.object_poses(x)[0, :2] - layout.pusher_pos(x)
        v = 0.3 * d / max(float(np.linalg.norm(d)), 1e-9)
        pub.publish(Float64MultiArray(data=[float(q) for q in sim.joint_matrix @ v]))
        return "cylinder" in sim.sim.fallen

    try:
        wait_for(pushed_off, timeout=60, interval=0.01, what="the slider falling off the table")
    except pytest.fail.Exception:  # say where things are, so that a failure on a CI machine can be understood
        x, layout = sim.sim.planar_state(), sim.sim.scene.layout
        pytest.fail(f"the slider did not fall off within 60 s: sim time {sim.time:.3f} s, pusher at "
                    f"{layout.pusher_pos(x).round(4).tolist()}, slider at {layout.object_poses(x).round(4).tolist()}, "
                    f"command {sim._cmd}, "
                    f"fallen {sorted(sim.sim.fallen)}")


@pytest.mark.parametrize("up_axis", ["z", "y"])
def test_closed_loop_sim_ingest_commander_and_dropout(ros_context, ros_executor, up_axis):
    ns = f"/loop_{up_axis}"
    origin = [0.5, -0.3, 0.8] if up_axis == "z" else [0.5, 0.8, 0.3]  # the table top is 0.8 m up either way
    mocap = dict(scene="obstacle_push", pose_topic_template=ns + "/{body}/pose", up_axis=up_axis,
                 table_origin_in_mocap=origin, table_rotation_in_mocap=[0.3], body_map="slider=Slider1",
                 use_sim_time=True)
    sim = ros_executor.add(MujocoSimNode(namespace=ns, parameter_overrides=params(
        **mocap, real_time_factor=1.0, command_topic=ns + "/servo_twist", position_noise=0.0003, latency=0.005)))
    ros_executor.add(MocapIngestNode(namespace=ns, parameter_overrides=params(**mocap, timeout=0.2,
                                                                                       rate=50.0)))
    commander = ros_executor.add(bring_up(VelocityCommanderNode(namespace=ns, parameter_overrides=params(
        scene="obstacle_push", output_topic=ns + "/servo_twist", gripper_enabled=False, use_sim_time=True,
        rate=50.0))))
    io = ros_executor.add(rclpy.create_node("loop_io", namespace=ns, context=ros_context,
                                            parameter_overrides=[Parameter("use_sim_time", value=True)]))
    state = Latest()
    io.create_subscription(SceneState, "scene_state", state, RELIABLE)
    cmd = io.create_publisher(TwistStamped, "pusher_cmd", RELIABLE)
    wait_for(lambda: state.msg is not None and state.msg.pusher_tracking_valid, timeout=10, what="scene_state")
    s = state.msg
    scene = sim.sim.scene
    assert (s.pusher_x, s.pusher_y) == pytest.approx(scene.pusher.start, abs=2e-3)
    assert (s.objects[0].x, s.objects[0].y) == pytest.approx(scene.objects[0].pose[:2], abs=2e-3)
    assert s.objects[0].tracking_valid
    # stamps are sim-time measurement times (not wall time, not zero), at least the latency behind the sim's clock
    # (how far behind depends on the delivery through the ingest, i.e. on the host: not bounded here)
    assert 0.0 < sec(s.header.stamp) <= sim.time - 0.005 + 1e-9

    # planner stand-in (a 50 Hz timer on the sim clock) -> commander -> (servo twist) -> sim -> mocap -> ingest
    planner = io.create_timer(0.02, lambda: cmd.publish(twist(io, 0.05)))
    try:
        wait_for(lambda: state.msg.objects[0].x > scene.objects[0].pose[0] + 0.01, timeout=15,
                 what="the slider pushed forward through the whole loop")
        # the pusher runs at the commanded speed (a state taken right at an impact may show a transient dip)
        wait_for(lambda: abs(state.msg.pusher_vx - 0.05) < 0.02, timeout=5, what="pusher_vx = 0.05 +- 0.02 m/s")
        # occlude the slider: the ingest marks it invalid within its timeout; it recovers when visible again
        sim.set_parameters([Parameter("hidden_bodies", value="Slider1")])
        wait_for(lambda: not state.msg.objects[0].tracking_valid, timeout=5, what="slider invalid")
        sim.set_parameters([Parameter("hidden_bodies", value="")])
        wait_for(lambda: state.msg.objects[0].tracking_valid, timeout=5, what="slider valid again")
        # occlude the pusher: the commander stops (no valid pusher state), the sim pusher halts
        sim.set_parameters([Parameter("hidden_bodies", value="pusher")])
        wait_for(lambda: not state.msg.pusher_tracking_valid, timeout=5, what="pusher invalid")
        wait_for(lambda: commander._status == "no pusher state", timeout=5, what="commander stopped")
        # the commander's zero reaches the sim over DDS (wall time, at 1x real time): judge from when it has
        def halted():  # the sim's latest twist is zero, or stale (older than command_timeout: halted, as Servo)
            cmd = sim._cmd
            return cmd is None or not np.any(cmd[1]) or sim.time - cmd[0] > sim.p["command_timeout"]
        wait_for(halted, timeout=5, what="the sim holding a zero command")
        x0 = sim.sim.planar_state()[0]
        wait_sim(lambda: sim.time, 0.3)
        assert sim.sim.planar_state()[0] == pytest.approx(x0, abs=3e-3)
    finally:
        io.destroy_timer(planner)
    assert math.isfinite(state.msg.pusher_x)


def test_a_sim_that_cannot_keep_its_real_time_factor_says_so(ros_context, ros_executor):
    """Asked for 1000x real time (no host can: MAX_SIM_STEP_PER_TICK caps a loop tick), the sim slows its clock
    down rather than skipping time, and reports it on /diagnostics as a warning with the factor achieved."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    ros_executor.add(MujocoSimNode(namespace="/simlag", parameter_overrides=params(
        scene="cylinder_slider", pose_topic_template="/simlag/{body}/pose", real_time_factor=1000.0)))
    io = ros_executor.add(rclpy.create_node("simlag_io", context=ros_context))
    diags = []
    io.create_subscription(DiagnosticArray, "/diagnostics", diags.append, RELIABLE)
    status = wait_for(lambda: next((s for a in diags for s in a.status if s.name == "mujoco_sim"
                                    and s.hardware_id == "cylinder_slider" and "falling behind" in s.message), None),
                      timeout=30, what="a 'falling behind' diagnostic")
    assert status.level == DiagnosticStatus.WARN and "of 1000x" in status.message


def test_a_stand_in_for_the_real_cell_runs_on_the_system_clock_with_a_mocap_clock_offset_and_servo_units(
        ros_context, ros_executor):
    """clock system: epoch-scale stamps and no /clock; clock_offset (set at run time) moves every pose stamp by the
    mocap host's offset; unitless twists are fractions of moveit_servo.scale.linear, as MoveIt Servo reads them."""
    import time

    sim = ros_executor.add(MujocoSimNode(namespace="/simsys", parameter_overrides=params(
        scene="cylinder_slider", pose_topic_template="/simsys/{body}/pose", clock="system", publish_clock=False,
        position_noise=0.0, yaw_noise=0.0, **{"moveit_servo.command_in_type": "unitless",
                                                "moveit_servo.scale.linear": 0.4})))
    io = ros_executor.add(rclpy.create_node("simsys_io", namespace="/simsys", context=ros_context))
    clock, pose = Latest(), Latest()
    io.create_subscription(Clock, "/clock", clock, CLOCK)
    io.create_subscription(PoseStamped, "/simsys/cylinder/pose", pose, SENSOR)
    wait_for(lambda: pose.msg is not None, timeout=30, what="poses")
    assert abs(sec(pose.msg.header.stamp) - time.time()) < 30.0  # the system clock's epoch, not 0
    assert sim.time_ns % STEP_NS == 0  # whole physics steps from a step-aligned origin

    assert sim.set_parameters([Parameter("clock_offset", value=1000.0)])[0].successful
    wait_for(lambda: sec(pose.msg.header.stamp) - time.time() > 900.0, timeout=30, what="offset stamps")
    bad = sim.set_parameters([Parameter("clock_offset", value=math.nan)])[0]
    assert not bad.successful and "clock_offset" in bad.reason

    cmd = io.create_publisher(TwistStamped, "/servo_node/delta_twist_cmds", RELIABLE)
    wait_for(lambda: cmd.get_subscription_count() > 0, timeout=30, what="the sim's command subscription")
    cmd.publish(twist(io, 0.25))
    wait_for(lambda: sim._cmd is not None, timeout=30, what="the twist to arrive")
    np.testing.assert_allclose(sim._cmd[1], [0.1, 0.0])  # 0.25 of scale.linear 0.4 m/s
    assert clock.msg is None  # nothing on /clock


@pytest.mark.parametrize("name, value, words", [
    ("clock", "gps", "parameter clock: must be one of sim, system"),
    ("moveit_servo.command_in_type", "fast", "moveit_servo.command_in_type: must be speed_units or unitless"),
    ("command_interface", "torque", "parameter command_interface: must be one of twist, joint_velocity"),
    ("pose_reliability", "fast", "parameter pose_reliability: must be one of reliable, best_effort"),
    ("step_period", 0.0, r"parameter step_period: must be > 0, got 0.0"),
    ("joint_matrix", [1.0, 2.0, 2.0, 4.0], "parameter joint_matrix: .* is singular"),
    ("dropout_probability", 1.5, r"parameter dropout_probability: must be in \[0, 1\], got 1.5"),
])
def test_bad_parameters_are_refused_with_their_name(ros_context, name, value, words):
    """The settings are SimConfig's and EmulatedMocapConfig's, checked there; the node only reports them."""
    with pytest.raises(ValueError, match=words):
        MujocoSimNode(parameter_overrides=params(**{name: value}))


@pytest.mark.parametrize("overrides, words", [
    ({"clock": "system"}, "parameter publish_clock: must be false with clock system"),
    ({"clock": "system", "publish_clock": False, "real_time_factor": 2.0}, "real_time_factor: must be 1 with"),
    ({"moveit_servo.command_in_type": "unitless", "moveit_servo.scale.linear": 0.0}, "scale.linear: must be > 0"),
])
def test_settings_that_contradict_each_other_are_refused(ros_context, overrides, words):
    with pytest.raises(ValueError, match=words):
        MujocoSimNode(parameter_overrides=params(**overrides))


def test_a_stand_in_whose_host_stalls_skips_ahead_and_counts_it_on_diagnostics(ros_context, ros_executor):
    """clock system: a world that fell behind the system clock (its process did not run: a stall of the host) skips
    ahead to it, and /diagnostics says how long the world has stood still since the start (skipped_total_s), which
    the robot soak reads so that a goal missed while the stand-in stood still is not counted against the stack. The
    stall is made by moving the world's clock origin back half a second (no waiting)."""
    from diagnostic_msgs.msg import DiagnosticArray

    sim = ros_executor.add(MujocoSimNode(namespace="/simstall", parameter_overrides=params(
        scene="cylinder_slider", pose_topic_template="/simstall/{body}/pose", clock="system", publish_clock=False)))
    io = ros_executor.add(rclpy.create_node("simstall_io", context=ros_context))
    diags = []
    io.create_subscription(DiagnosticArray, "/diagnostics", diags.append, RELIABLE)

    def skipped():
        values = [{kv.key: kv.value for kv in s.values} for a in diags for s in a.status
                  if s.name == "mujoco_sim" and s.hardware_id == "cylinder_slider"]
        return [float(v["skipped_total_s"]) for v in values if "skipped_total_s" in v]

    wait_for(lambda: skipped(), timeout=30, what="a diagnostic with skipped_total_s")
    before = sim._skipped_total
    with sim._lock:  # the world 0.5 s behind the system clock, as after a stall of its process
        sim._origin_ns -= 500 * STEP_NS
    wait_for(lambda: sim._skipped_total - before >= 0.4, timeout=30, what="the world to skip ahead")
    assert sim._skipped_total - before <= 0.5 + 1e-9  # never more than it fell behind
    wait_for(lambda: skipped() and skipped()[-1] >= before + 0.4, timeout=30, what="the skip on /diagnostics")


@pytest.mark.parametrize("hold", [False, True])
def test_one_twist_then_silence_stops_as_servo_or_is_held_as_the_ur_twist_controller(ros_context, ros_executor, hold):
    """What a commander that dies without its zero (SIGKILL, out of memory) leaves the arm doing: MoveIt Servo stops
    the pusher command_timeout after the last twist's stamp; the UR twist controller (``output: ur_twist``, the sim's
    ``twist_hold``) has no timeout and holds the last twist, so the pusher keeps moving."""
    ns = f"/hold_{hold}"
    sim = ros_executor.add(MujocoSimNode(namespace=ns, parameter_overrides=params(
        scene="cylinder_slider", command_topic=ns + "/twist", twist_hold=hold, position_noise=0.0)))
    io = ros_executor.add(rclpy.create_node("hold_io", namespace=ns, context=ros_context,
                                            parameter_overrides=[Parameter("use_sim_time", value=True)]))
    pub = io.create_publisher(TwistStamped, ns + "/twist", RELIABLE)
    wait_for(lambda: sim.time > 0.1 and io.get_clock().now().nanoseconds > 0, timeout=10, what="the sim clock")
    wait_for(lambda: pub.publish(twist(io, 0.05)) or sim._cmd is not None, timeout=10, interval=0.05,
             what="the twist at the sim")
    wait_sim(lambda: sim.time, 0.5)  # silence: Servo's timeout (0.1 s) and the servo's settling are over by then
    t1, x1 = sim.time, sim.sim.planar_state()[0]
    wait_sim(lambda: sim.time, 0.5)
    travel = sim.sim.planar_state()[0] - x1
    if hold:
        assert travel > 0.05 * (sim.time - t1) * 0.7, travel  # still going at about the commanded speed
    else:
        assert abs(travel) < 1e-3, travel  # stopped
