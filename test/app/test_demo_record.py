"""Recording DG-OC demonstrations (``parapush demos record``) and the keyboard teleop's key logic.

The recorder is tested over real DDS on simulated time: the test is the robot and the person at once. It steps a
MuJoCo world of paper 003's block, publishes a scripted pusher command stream on ``pusher_cmd`` (no keyboard),
``/clock`` and the scene state, in lock-step with the recorder node (each message is published once the recorder
has the previous one), so the recording is the same on any host. The file it writes must load with the
demonstration loader and be what k-NN picks for its own final pose."""
import numpy as np
import pytest

from parapush_ros import cli
from parapush_ros.core.planning.ddp.demonstrations import load_demonstration, load_library, nearest
from parapush_ros.core.planning.ddp.recording import (DemonstrationRecorder, contact_faces, count_face_switches,
                                                      demonstration_from_samples)
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.teleop import KeyTeleop, split_keys

pytestmark = pytest.mark.timeout(120)
SCENE = load_scene("block_003")
TICK = 0.02  # s of simulated time per world step


def scene_states(demo):
    """A demonstration's model states as block_003 scene states."""
    L = SCENE.layout
    x = np.zeros((len(demo.X), L.dim))
    L.object_poses(x)[:, 0] = demo.X[:, :3]
    L.pusher_pos(x)[...] = demo.X[:, 3:5]
    return x


def test_samples_become_the_shipped_format_in_the_start_frame():
    """A shipped demonstration replayed as jittered 120 Hz scene states from another start pose comes back as
    itself: same path in the start frame, same face switches, velocities and accelerations that integrate to it."""
    shipped = next(d for d in load_library("block_003") if d.face_switches == 1)
    moved = shipped.to_start((0.05, -0.1, 0.7))
    t_demo = np.arange(len(moved.X)) * moved.dt
    rng = np.random.default_rng(0)
    t = np.sort(np.concatenate([[0.0], rng.uniform(0, t_demo[-1], int(t_demo[-1] * 120)), [t_demo[-1]]]))
    states = scene_states(moved)
    x = np.column_stack([np.interp(t, t_demo, states[:, j]) for j in range(states.shape[1])])
    demo = demonstration_from_samples(t + 12.3, x, SCENE, name="replayed")
    assert demo.dt == shipped.dt and demo.horizon == shipped.horizon and demo.face_switches == 1
    np.testing.assert_allclose(demo.X[:, :5], shipped.X[:, :5], atol=2e-3)
    np.testing.assert_allclose(demo.meta["start_pose_in_table"], [0.05, -0.1, 0.7], atol=1e-9)
    np.testing.assert_allclose(demo.X[1:, 3:5], demo.X[:-1, 3:5] + demo.dt * demo.X[1:, 5:7], atol=1e-12)
    np.testing.assert_allclose(demo.X[1:, 5:7], demo.X[:-1, 5:7] + demo.dt * demo.U, atol=1e-9)
    assert np.all(demo.X[0, 5:7] == 0.0)
    for d in load_library("block_003"):  # the geometric count agrees with the scripted demonstrator's
        faces = contact_faces(d.X, SCENE.objects[0].size, SCENE.pusher.radius)
        assert faces[0] == 0 and count_face_switches(faces) == d.face_switches, d.name
    with pytest.raises(ValueError, match="too short"):
        demonstration_from_samples([0.0, 0.01], x[:2], SCENE)


def script(t):
    """The person: rest, push +x at 5 cm/s for 1.5 s with a little sideways drift, rest."""
    return np.array([0.05, 0.004]) if 0.3 <= t < 1.8 else np.zeros(2)


def test_a_scripted_teleop_push_is_recorded_over_dds(ros_context, ros_executor, tmp_path):
    from geometry_msgs.msg import TwistStamped
    from parapush_msgs.msg import SceneState
    from rclpy.time import Time
    from rosgraph_msgs.msg import Clock

    from conftest import wait_for
    from parapush_ros.core.sim.world import SimWorld
    from parapush_ros.tools.demo_record import make_recorder_node
    from parapush_ros.ros import qos, topics
    from parapush_ros.ros.conversions import array_to_scene_state

    recorder = DemonstrationRecorder(SCENE, idle=0.5)
    node = ros_executor.add(make_recorder_node(SCENE, recorder, ros_context, use_sim_time=True))
    world_node = ros_executor.add(__import__("rclpy").create_node("test_world", context=ros_context))
    clock_pub = world_node.create_publisher(Clock, topics.CLOCK, qos.RELIABLE)
    state_pub = world_node.create_publisher(SceneState, topics.SCENE_STATE, qos.RELIABLE)
    cmd_pub = world_node.create_publisher(TwistStamped, topics.PUSHER_CMD, qos.RELIABLE)
    wait_for(lambda: state_pub.get_subscription_count() and cmd_pub.get_subscription_count(), 10.0,
             what="the recorder's subscriptions")
    world = SimWorld(SCENE)
    start_pose = SCENE.layout.object_poses(world.x)[0].copy()
    t, sent = 0.0, 0
    while not node.finished.is_set():
        assert t < 5.0, "the recorder never finished"
        stamp = Time(nanoseconds=int(round(t * 1e9))).to_msg()
        clock_pub.publish(Clock(clock=stamp))
        msg = array_to_scene_state(world.x, SCENE)
        msg.header.stamp, msg.header.frame_id = stamp, "table"
        state_pub.publish(msg)
        sent += 1
        wait_for(lambda: node.states_received >= sent, 10.0, what="the recorder to take the state")  # noqa: B023 - called within this iteration
        u = script(t)
        cmd = TwistStamped()
        cmd.header.frame_id = "table"
        cmd.twist.linear.x, cmd.twist.linear.y = float(u[0]), float(u[1])
        n = recorder.commands
        cmd_pub.publish(cmd)
        wait_for(lambda: recorder.commands > n, 10.0, what="the recorder to take the command")  # noqa: B023 - called within this iteration
        world.execute(u, TICK)
        t = round(t + TICK, 9)

    assert recorder.start == pytest.approx(0.3) and recorder.last_moving == pytest.approx(1.78)
    assert recorder.latest == pytest.approx(1.78 + 0.5)
    path = tmp_path / "pushed.json"
    recorder.demonstration("pushed", source="test").save(path)
    demo = load_demonstration(path)
    assert demo.name == "pushed" and demo.scene == "block_003" and demo.face_switches == 0
    assert demo.horizon * demo.dt == pytest.approx(0.1 + 1.5 + 0.3, abs=0.021)  # pre-roll, push, tail
    # the slider's motion in its start frame is the world's
    final = SCENE.layout.object_poses(world.x)[0] - start_pose
    assert demo.final_pose[0] > 0.04
    np.testing.assert_allclose(demo.final_pose, final, atol=3e-3)
    np.testing.assert_allclose(demo.X[0, 3:5], [-0.066, 0.0], atol=1e-6)  # the pusher where it started
    # k-NN (p = 2) picks it among the shipped library for its own final pose
    library = load_library("block_003") + [demo]
    assert nearest(library, demo.final_pose[None], 1)[0, 0] == len(library) - 1


def test_record_cli_checks_its_arguments(tmp_path):
    pytest.importorskip("rclpy")  # `demos record` imports rclpy before it reads its arguments
    with pytest.raises(ValueError, match=r"--out: the demonstration file must end in .json"):
        cli.main(["demos", "record", "--scene", "block_003", "--out", str(tmp_path / "x.txt")])
    with pytest.raises(ValueError, match="--object: DG-OC demonstrations push a box"):
        cli.main(["demos", "record", "--scene", "cylinder_slider", "--out", str(tmp_path / "x.json")])


def test_keyboard_teleop_keys():
    k = KeyTeleop(speed=0.04, max_speed=0.05, hold=0.5)
    assert split_keys("w\x1b[A\x1b[Dq") == ["w", "\x1b[A", "\x1b[D", "q"]
    k.press("\x1b[A", 0.0)  # up: +x
    np.testing.assert_allclose(k.velocity(0.1), [0.04, 0.0])
    k.press("a", 0.2)  # and left: diagonal, same speed
    np.testing.assert_allclose(k.velocity(0.3), [0.04 / np.sqrt(2)] * 2)
    np.testing.assert_allclose(k.velocity(0.6), [0.0, 0.04])  # up lapsed (no repeat within hold)
    k.press("D", 0.65)  # right cancels left at once
    np.testing.assert_allclose(k.velocity(0.65), [0.0, -0.04])
    k.press(" ", 0.7)
    np.testing.assert_array_equal(k.velocity(0.7), [0.0, 0.0])
    for _ in range(5):
        k.press("+", 1.0)
    assert k.speed == 0.05  # the speed limit
    k.press("s", 1.0)
    np.testing.assert_allclose(k.velocity(1.0), [-0.05, 0.0])
    k.press("q", 1.1)
    assert k.quit and np.all(k.velocity(1.1) == 0.0)
    with pytest.raises(ValueError, match="--speed"):
        KeyTeleop(speed=0.2, max_speed=0.1)
