"""mocap_ingest through real rclpy entities: transform, honest stamps, dropouts, bad poses and diagnostics.

The test's mocap stream owns the simulated clock (the ingest runs with ``use_sim_time``): each sample publishes
``/clock`` at its measurement time, then the poses; once scene states flow, the stream waits at every ingest
period for that period's state (lock-step), so loss timeouts are judged in simulated time and a slow host makes
the test slower, never different.
"""
import math
import threading

import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from parapush_msgs.msg import SceneState  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.time import Time  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from conftest import Recorder, wait_for  # noqa: E402
from parapush_ros.nodes.mocap_ingest import MocapIngestNode  # noqa: E402
from parapush_ros.ros.qos import RELIABLE, SENSOR  # noqa: E402

pytestmark = pytest.mark.timeout(60)
RATE = 50.0  # Hz: the ingest's state rate


def pose(stamp, x, y, z, yaw=0.0, frame="world", q=None):
    m = PoseStamped()
    m.header.stamp = Time(seconds=stamp).to_msg()
    m.header.frame_id = frame
    m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y, z
    qx, qy, qz, qw = q if q is not None else (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
    m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w = qx, qy, qz, qw
    return m


def negative_stamp(m):
    """A pose stamped before 1970 (int32 seconds allow it; it stopped the node, which could not publish it)."""
    m.header.stamp.sec = -5
    return m


@pytest.fixture
def ingest(ros_context, ros_executor, request):
    prefix = f"/ingest_{request.node.name.split('[')[0][-20:]}"
    # the loss timeout is per test: tests that read the last state after a stream need more than a loaded CI
    # machine's scheduling delay, the dropout test needs it short
    timeout = getattr(request, "param", {}).get("timeout", 0.2)
    params = [Parameter("scene", value="obstacle_push"),
              Parameter("pose_topic_template", value=prefix + "/{body}/pose"),
              Parameter("body_map", value="slider=Slider1"), Parameter("table_origin_in_mocap", value=[1.0, 2.0, 0.75]),
              Parameter("table_rotation_in_mocap", value=[math.pi / 2]), Parameter("timeout", value=timeout),
              Parameter("rate", value=RATE), Parameter("diagnostics_period", value=0.2),
              Parameter("use_sim_time", value=True)]
    node = ros_executor.add(MocapIngestNode(parameter_overrides=params))
    io = ros_executor.add(rclpy.create_node(f"ingest_io_{prefix[8:]}", context=ros_context))
    states, diags = Recorder(), Recorder()
    io.create_subscription(SceneState, "scene_state", states, RELIABLE)
    io.create_subscription(DiagnosticArray, "/diagnostics", diags, RELIABLE)
    # natnet_ros2 publishes reliable; vrpn_mocap best effort: the ingest must take both
    pubs = {"pusher": io.create_publisher(PoseStamped, prefix + "/pusher/pose", RELIABLE),
            "slider": io.create_publisher(PoseStamped, prefix + "/Slider1/pose", SENSOR)}
    pubs["clock"] = io.create_publisher(Clock, "/clock", RELIABLE)
    pubs["states"] = states
    wait_for(lambda: all(pubs[k].get_subscription_count() >= 1 for k in ("pusher", "slider", "clock")),
             what="ingest subscriptions (its clock's too)")
    return node, pubs, states, diags


def body_status(diags, key):
    arr = diags.last()
    if arr is None:
        return None
    for s in arr.status:
        if s.name == f"mocap_ingest: {key}":
            return s
    return None


def stream(pubs, t0, n, dt=0.01, slider=True, pusher=True, vx=0.05, bad=None, frozen=False):
    """Publish n samples of a pusher moving along table +x (mocap +y: the table is yawed 90 deg) and a slider at
    rest, measured with a camera's few micrometres of noise (``frozen``: without, the same pose to the bit, as
    natnet_ros2 republishes an occluded body), each after the clock of its measurement time; in lock-step with the
    ingest's states once they flow."""
    for k in range(n):
        t = round(t0 + k * dt, 9)
        tick(pubs, t)
        if pusher:
            pubs["pusher"].publish(pose(t, 1.0, 2.0 - 0.2 + vx * k * dt, 0.75 + 0.056, yaw=math.pi / 2))
        if slider:
            noise = 0.0 if frozen else 2e-6 * math.sin(1.7 * round(t * 100))
            msg = bad(t) if bad is not None else pose(t, 1.0 - 0.1 + noise, 2.0 + 0.05 - noise, 0.76,
                                                      yaw=math.pi / 2 + 0.3)
            pubs["slider"].publish(msg)
    # on, period by period, until a state has seen the last samples (their callbacks may come after a timer's)
    t_next, states = (math.floor(round(t * RATE, 6)) + 1) / RATE, pubs["states"]
    for _ in range(3):
        tick(pubs, t_next)
        last = states.last()
        if last is None or Time.from_msg(last.header.stamp).nanoseconds >= round(t * 1e9) - 1000:
            return
        t_next = round(t_next + 1.0 / RATE, 9)


def tick(pubs, t):
    """The clock to ``t``; at the end of an ingest period wait for that period's state: without fail once states
    flow (lock-step), briefly before (the ingest publishes only once it has seen every body)."""
    states = pubs["states"]
    if t <= pubs.get("clock_time", -1.0):  # the clock never goes back, nor repeats itself
        return
    pubs["clock_time"] = t
    n_states = states.count()
    pubs["clock"].publish(Clock(clock=Time(seconds=t).to_msg()))
    if abs(t * RATE - round(t * RATE)) > 1e-6:
        return
    if n_states:
        wait_for(lambda: states.count() > n_states, timeout=30.0, interval=0.001, what=f"the state at {t} s")
    else:
        threading.Event().wait(1.0 / RATE)


@pytest.mark.parametrize("ingest", [{"timeout": 5.0}], indirect=True)
def test_scene_state_in_the_table_frame_with_measurement_stamps(ingest, ros_executor):
    _node, pubs, states, _ = ingest
    markers = Recorder()
    ros_executor.nodes[-1].create_subscription(MarkerArray, "/mocap_ingest/markers", markers, RELIABLE)
    stream(pubs, 100.0, 40)

    def stamp(m):
        return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9

    # a loaded machine may deliver the poses late: wait for the state that has seen the last one (t = 100.39)
    s = wait_for(lambda: (m := states.last()) is not None and stamp(m) > 100.385 and m, what="the last scene_state")
    assert s.header.frame_id == "table"
    assert s.pusher_tracking_valid and s.objects[0].tracking_valid
    assert stamp(s) <= 100.4  # the mocap measurement time, not the publish time (wall clock)
    assert s.objects[0].name == "slider"
    # table yawed 90 deg in the mocap frame: mocap -x is table +y, mocap +y is table +x
    assert (s.objects[0].x, s.objects[0].y) == pytest.approx((0.05, 0.1), abs=3e-6)  # (the stream's noise)
    assert s.objects[0].yaw == pytest.approx(0.3)
    assert s.pusher_vx == pytest.approx(0.05, rel=0.05) and abs(s.pusher_vy) < 1e-6
    # RViz markers of the tracked bodies, in the table frame
    ms = wait_for(lambda: markers.last(), what="tracked-body markers")
    tracked = [m for m in ms.markers if m.ns == "tracked"]
    assert len(tracked) == 2 and all(m.header.frame_id == "table" for m in ms.markers)
    assert (tracked[1].pose.position.x, tracked[1].pose.position.y) == pytest.approx((0.05, 0.1), abs=3e-6)


def test_dropout_marks_the_body_invalid_and_recovery(ingest):
    _node, pubs, states, diags = ingest
    stream(pubs, 10.0, 20)
    wait_for(lambda: states.last() is not None and states.last().objects[0].tracking_valid, what="valid slider")
    n = states.count()
    stream(pubs, 10.2, 40, slider=False)  # the slider is occluded for 0.4 s > timeout 0.2 s
    s = wait_for(lambda: states.first_since(n, lambda m: not m.objects[0].tracking_valid and m.pusher_tracking_valid),
                 what="a state with the slider lost and the pusher tracked")
    assert all(math.isfinite(v) for v in (s.objects[0].x, s.objects[0].y, s.objects[0].vx))
    st = wait_for(lambda: (b := body_status(diags, "slider")) is not None and b.level == DiagnosticStatus.ERROR and b,
                  what="lost diagnostic")
    assert "lost" in st.message and st.hardware_id == "Slider1"
    n = states.count()
    stream(pubs, 10.6, 10)
    wait_for(lambda: states.first_since(n, lambda m: m.objects[0].tracking_valid), what="slider valid again")


def test_a_body_republished_to_the_bit_is_lost_until_its_pose_changes(ingest):
    """natnet_ros2 republishes an occluded body's last pose with fresh stamps: after frozen_timeout (0.1 s) of one
    pose to the bit the slider is not valid, the diagnostic says why, and it is tracked again once measured."""
    _node, pubs, states, diags = ingest
    stream(pubs, 30.0, 20)
    wait_for(lambda: states.last() is not None and states.last().objects[0].tracking_valid, what="valid slider")
    n = states.count()
    stream(pubs, 30.2, 40, frozen=True)
    wait_for(lambda: states.first_since(n, lambda m: not m.objects[0].tracking_valid and m.pusher_tracking_valid),
             what="a state with the frozen slider not valid and the pusher tracked")
    wait_for(lambda: (b := body_status(diags, "slider")) is not None and "unchanged to the bit" in b.message,
             what="the frozen-pose diagnostic")
    n = states.count()
    stream(pubs, 30.6, 10)
    wait_for(lambda: states.first_since(n, lambda m: m.objects[0].tracking_valid), what="slider valid again")


def test_a_clock_restart_loses_the_bodies_until_samples_on_the_new_timeline(ingest):
    """/clock goes back 50 s (a simulator restarted; on the robot, an NTP step of the system clock that the
    driver's stamps follow): the poses received on the old timeline are not fresh on the new one, and the new
    samples, stamped before the old ones, start the tracks anew instead of being dropped as out of order."""
    node, pubs, states, _ = ingest
    stream(pubs, 100.0, 20)
    wait_for(lambda: (m := states.last()) is not None and m.pusher_tracking_valid and m.objects[0].tracking_valid,
             what="valid bodies")
    n = states.count()
    # the clock goes back; rcl restarts the ingest's timer one period after the jump, so its periods stay on the
    # stream's grid once the ingest has taken the jump (/clock keeps only the latest message: a later tick sent at
    # once could replace it), then it runs on without poses
    pubs["clock_time"] = 50.0
    pubs["clock"].publish(Clock(clock=Time(seconds=50.0).to_msg()))
    wait_for(lambda: node.get_clock().now().nanoseconds == 50_000_000_000, timeout=30.0,
             what="the ingest's clock back at 50 s")
    for k in range(1, 5):
        tick(pubs, round(50.0 + k / RATE, 9))
    s = wait_for(lambda: states.first_since(n, lambda m: not m.pusher_tracking_valid), what="the pusher lost")
    assert not s.objects[0].tracking_valid
    n = states.count()
    stream(pubs, 50.1, 20)
    s = wait_for(lambda: states.first_since(n, lambda m: m.pusher_tracking_valid and m.objects[0].tracking_valid),
                 what="the bodies tracked again on the new timeline")
    assert 50.1 <= s.header.stamp.sec + s.header.stamp.nanosec * 1e-9 < 50.4


@pytest.mark.parametrize("bad, words", [
    (lambda t: pose(t, float("nan"), 2.0, 0.76), "non-finite position"),
    (lambda t: pose(t, 0.9, 2.05, 0.76, q=(0.0, 0.0, 0.5, 0.5)), "quaternion norm"),
    (lambda t: pose(t, 0.9, 2.05, 0.76, frame="map"), "frame_id 'map' is not the mocap frame 'world'"),
    (lambda t: pose(t, 0.9, 3.0, 0.76), "off the table"),
    (lambda t: negative_stamp(pose(t, 0.9, 2.05, 0.76)), "negative stamp"),
], ids=["nan", "non-unit-quaternion", "wrong-frame", "off-table", "negative-stamp"])
def test_bad_poses_are_rejected_with_a_diagnostic(ingest, bad, words):
    _node, pubs, states, diags = ingest
    stream(pubs, 20.0, 15)
    wait_for(lambda: states.last() is not None and states.last().objects[0].tracking_valid, what="valid slider")
    n = states.count()
    stream(pubs, 20.15, 30, bad=bad)
    s = wait_for(lambda: states.first_since(n, lambda m: not m.objects[0].tracking_valid), what="slider invalid")
    assert all(math.isfinite(v) for v in (s.objects[0].x, s.objects[0].y, s.objects[0].yaw))
    st = wait_for(lambda: (b := body_status(diags, "slider")) is not None and words in b.message and b,
                  what=f"diagnostic naming {words!r}")
    assert st.level in (DiagnosticStatus.WARN, DiagnosticStatus.ERROR)
    assert {kv.key: kv.value for kv in st.values}["last_rejection"].find(words.split()[0]) >= 0


def test_nothing_is_published_before_every_body_was_seen(ingest):
    _node, pubs, states, diags = ingest
    stream(pubs, 30.0, 20, slider=False)
    clock = [30.2]

    def counts():
        b = body_status(diags, "pusher")
        return {} if b is None else {kv.key: int(kv.value) for kv in b.values if kv.key in ("received", "accepted")}

    def pusher_seen():
        """The ingest's diagnostics (every 0.2 s of sim time) count the pusher's samples; until they show it seen, the
        clock moves on a period at a time, so a busy host only takes longer (no states flow to lock-step on here).
        Not all 20 need arrive: the pose subscriptions keep the driver's sensor-data depth (best effort, 5), and a
        starved ingest loses the oldest of a burst, as on a robot (seen under make test-stress)."""
        if counts().get("accepted", 0) >= 1:
            return True
        clock[0] = round(clock[0] + 1 / RATE, 9)
        tick(pubs, clock[0])
        return False

    wait_for(pusher_seen, timeout=50.0, interval=0.0, what="the pusher's samples accepted")  # it has seen it...
    for _ in range(round(0.4 * RATE)):  # two more diagnostics periods, the pusher lost by now (timeout 0.2 s)
        clock[0] = round(clock[0] + 1 / RATE, 9)
        tick(pubs, clock[0])
    c = counts()
    assert 1 <= c["accepted"] == c["received"] <= 20  # every sample that arrived was taken
    assert states.last() is None  # ...and still publishes nothing: the slider was never seen
