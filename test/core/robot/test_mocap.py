"""Mocap ingestion math without ROS: transform, up axis, yaw, pose checks, velocity filter, tracking states."""
import math

import numpy as np
import pytest

from parapush_ros.core.robot.mocap import (
    INVALID,
    LOST,
    NEVER_SEEN,
    TRACKING,
    BodyTracker,
    MocapConfigError,
    MocapToTable,
    PlanarPose,
    PlanarVelocityFilter,
    TrackingConfig,
    check_pose,
    parse_body_map,
    pose_topic,
    quat_from_yaw,
    quat_multiply,
    quat_rotate,
    tilt_from_quaternion,
)
from parapush_ros.core.scene.state import yaw_from_quaternion

S45 = math.sqrt(0.5)


def quat_axis_angle(axis, angle):
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    return np.array([*(axis * math.sin(angle / 2)), math.cos(angle / 2)])


# ------------------------------------------------------------------------------------------------ transform
def test_identity_transform_keeps_z_up_poses():
    t = MocapToTable()
    p, q = t.to_table([0.1, -0.2, 0.03], quat_from_yaw(0.4))
    np.testing.assert_allclose(p, [0.1, -0.2, 0.03], atol=1e-12)
    assert yaw_from_quaternion(q) == pytest.approx(0.4)


def test_z_up_translation_and_yaw():
    # table origin at (1, 2, 0.75) in the mocap frame, table x axis pointing along mocap +y (yaw 90 deg)
    t = MocapToTable.from_params([1.0, 2.0, 0.75], [math.pi / 2], "z")
    # a point 0.1 m along the table's x axis sits at mocap (1, 2.1, 0.75)
    p, q = t.to_table([1.0, 2.1, 0.76], quat_from_yaw(math.pi / 2 + 0.3))
    np.testing.assert_allclose(p, [0.1, 0.0, 0.01], atol=1e-12)
    assert yaw_from_quaternion(q) == pytest.approx(0.3)
    # a point along mocap -x lies along table +y
    p, _ = t.to_table([0.8, 2.0, 0.75], [0, 0, 0, 1])
    np.testing.assert_allclose(p, [0.0, 0.2, 0.0], atol=1e-12)


def test_y_up_streaming_is_converted_to_z_up():
    # Motive's default Y-up: x right, y up, z toward the viewer -> z-up coordinates (x, -z, y)
    t = MocapToTable.from_params([0.0, 0.75, 0.0], [0.0], "y")  # table top 0.75 m up (along streamed y)
    p, q = t.to_table([0.2, 0.80, -0.1], [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(p, [0.2, 0.1, 0.05], atol=1e-12)
    assert yaw_from_quaternion(q) == pytest.approx(0.0, abs=1e-12)
    assert tilt_from_quaternion(q) == pytest.approx(0.0, abs=1e-7)  # the body's up (local y) maps to table z
    # turning the body about the streamed up axis (y) by +theta is a counter-clockwise yaw in the table frame
    theta = 0.7
    _, q = t.to_table([0.0, 0.75, 0.0], quat_axis_angle([0, 1, 0], theta))
    assert yaw_from_quaternion(q) == pytest.approx(theta)


def test_quaternion_rotation_parameter_matches_yaw():
    a = MocapToTable.from_params([0.3, 0.1, 0.0], [0.5], "z")
    b = MocapToTable.from_params([0.3, 0.1, 0.0], list(quat_from_yaw(0.5)), "z")
    pa, qa = a.to_table([0.5, 0.4, 0.2], quat_from_yaw(1.0))
    pb, qb = b.to_table([0.5, 0.4, 0.2], quat_from_yaw(1.0))
    np.testing.assert_allclose(pa, pb, atol=1e-12)
    assert yaw_from_quaternion(qa) == pytest.approx(yaw_from_quaternion(qb))


@pytest.mark.parametrize("up", ["z", "y"])
def test_to_mocap_inverts_to_table_and_static_transform_is_consistent(up):
    t = MocapToTable.from_params([0.4, -1.2, 0.3], list(quat_axis_angle([0.2, 0.1, 1.0], 0.9)), up)
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.normal(size=3)
        q = quat_axis_angle(rng.normal(size=3), rng.uniform(-3, 3))
        pm, qm = t.to_mocap(p, q)
        p2, q2 = t.to_table(pm, qm)
        np.testing.assert_allclose(p2, p, atol=1e-12)
        assert abs(abs(float(q2 @ q)) - 1.0) < 1e-12
    # the static transform: table origin and axes expressed in the streamed frame
    origin, rot = t.table_pose_in_mocap()
    np.testing.assert_allclose(origin, t.to_mocap([0, 0, 0], [0, 0, 0, 1])[0], atol=1e-12)
    for axis in np.eye(3):
        np.testing.assert_allclose(quat_rotate(rot, axis), t.to_mocap(axis, [0, 0, 0, 1])[0] - origin, atol=1e-12)
    np.testing.assert_allclose(quat_rotate(rot, [0, 0, 1]) @ (np.eye(3)[2 if up == "z" else 1]),
                               quat_rotate(t.rotation, [0, 0, 1])[2], atol=1e-12)  # table z along streamed up


@pytest.mark.parametrize("kwargs, words", [
    (dict(origin=[0, 0], rotation=[0.0], up_axis="z"), "table_origin_in_mocap"),
    (dict(origin=[0, 0, 0], rotation=[0.0, 1.0], up_axis="z"), "table_rotation_in_mocap"),
    (dict(origin=[0, 0, 0], rotation=[0.0, 0.0, 0.0, 2.0], up_axis="z"), "not unit length"),
    (dict(origin=[0, 0, 0], rotation=[0.0], up_axis="x"), "up_axis"),
    (dict(origin=[0, 0, float("nan")], rotation=[0.0], up_axis="z"), "table_origin_in_mocap"),
])
def test_bad_transform_parameters_are_named(kwargs, words):
    with pytest.raises(MocapConfigError, match=words):
        MocapToTable.from_params(**kwargs)


def test_yaw_and_tilt():
    for yaw in (-3.0, -1.0, 0.0, 0.5, 3.1):
        assert yaw_from_quaternion(quat_from_yaw(yaw)) == pytest.approx(yaw)
    assert yaw_from_quaternion(-quat_from_yaw(1.0)) == pytest.approx(1.0)  # q and -q are the same rotation
    q = quat_multiply(quat_from_yaw(0.8), quat_axis_angle([1, 0, 0], 0.2))  # yawed, then rolled 0.2 rad
    assert yaw_from_quaternion(q) == pytest.approx(0.8)
    assert tilt_from_quaternion(q) == pytest.approx(0.2)


# ------------------------------------------------------------------------------------------------ pose checks
@pytest.mark.parametrize("pos, quat, frame, words", [
    ([float("nan"), 0, 0], [0, 0, 0, 1], "world", "non-finite position"),
    ([0, 0, 0], [0, 0, float("inf"), 1], "world", "non-finite orientation"),
    ([0, 0, 0], [0, 0, 0, 0], "world", "quaternion norm 0"),
    ([0, 0, 0], [0, 0, 0.5, 0.5], "world", "quaternion norm 0.7071 is not 1"),
    ([0, 0, 0], [0, 0, 0, 1], "map", "frame_id 'map' is not the mocap frame 'world'"),
])
def test_bad_poses_are_rejected_with_a_reason(pos, quat, frame, words):
    reason = check_pose(pos, quat, frame, "world", 0.01)
    assert reason is not None and words in reason


def test_good_pose_and_any_frame():
    assert check_pose([0, 0, 0], [0, 0, 0.006, 1], "world", "world", 0.01) is None  # within tolerance
    assert check_pose([0, 0, 0], [0, 0, 0, 1], "anything", "", 0.01) is None


def test_body_map_and_topics():
    assert parse_body_map("", ["pusher", "slider"]) == {"pusher": "pusher", "slider": "slider"}
    assert parse_body_map("slider=Slider1, pusher=Tool", ["pusher", "slider"]) == {"pusher": "Tool",
                                                                                    "slider": "Slider1"}
    with pytest.raises(MocapConfigError, match="'teapot' is not a body of the scene"):
        parse_body_map("teapot=A", ["pusher", "slider"])
    with pytest.raises(MocapConfigError, match="not of the form"):
        parse_body_map("slider", ["pusher", "slider"])
    with pytest.raises(MocapConfigError, match="more than one"):
        parse_body_map("slider=pusher", ["pusher", "slider"])
    assert pose_topic("Slider1", "natnet") == "/Slider1/pose"
    assert pose_topic("Slider1", "vrpn") == "/vrpn_mocap/Slider1/pose"
    assert pose_topic("Slider1", "natnet", "/mocap/{body}/pose") == "/mocap/Slider1/pose"
    with pytest.raises(MocapConfigError, match="mocap_driver"):
        pose_topic("a", "vicon")


# ------------------------------------------------------------------------------------------------ velocity filter
def test_velocity_filter_converges_on_constant_velocity_with_irregular_samples():
    f = PlanarVelocityFilter(0.02)
    rng = np.random.default_rng(1)
    t = 0.0
    for _ in range(200):
        t += rng.uniform(0.005, 0.012)
        v = f.update(t, 0.1 + 0.05 * t, -0.02 * t, 3.1 + 0.5 * t)  # yaw wraps past pi on the way
    np.testing.assert_allclose(v, [0.05, -0.02, 0.5], atol=1e-9)


def test_velocity_filter_attenuates_noise_and_ignores_duplicates():
    rng = np.random.default_rng(2)
    raw, smooth = PlanarVelocityFilter(0.0), PlanarVelocityFilter(0.05)
    err_raw, err_smooth = [], []
    for k in range(1, 400):
        t = k * 0.01
        x = 0.03 * t + rng.normal(0, 0.0005)
        err_raw.append(raw.update(t, x, 0.0, 0.0)[0] - 0.03)
        err_smooth.append(smooth.update(t, x, 0.0, 0.0)[0] - 0.03)
    assert np.std(err_smooth[50:]) < 0.3 * np.std(err_raw[50:])
    before = smooth.velocity.copy()
    np.testing.assert_array_equal(smooth.update(3.99, 5.0, 5.0, 0.0), before)  # same/older stamp: ignored
    with pytest.raises(MocapConfigError, match="velocity_time_constant"):
        PlanarVelocityFilter(-1.0)


# ------------------------------------------------------------------------------------------------ tracking
def flat(x, y, yaw=0.0, z=0.01):
    return PlanarPose(x, y, z, yaw, 0.0)


def feed(tracker, t0, n, dt=0.01, x0=0.0, vx=0.02, y=0.0, latency=0.0):
    for k in range(n):
        t = t0 + k * dt
        r = tracker.update(t + latency, t, flat(x0 + vx * k * dt, y))
    return r


def test_tracking_valid_with_velocity_and_honest_stamp():
    tr = BodyTracker("slider", TrackingConfig(timeout=0.1, velocity_time_constant=0.0))
    assert tr.estimate(0.0).state == NEVER_SEEN and not tr.estimate(0.0).valid
    assert feed(tr, 1.0, 20, latency=0.004) is None
    e = tr.estimate(1.2)
    assert e.valid and e.state == TRACKING and e.reason == ""
    assert e.stamp == pytest.approx(1.19)  # the measurement time, not the receive / publish time
    assert e.x == pytest.approx(0.02 * 0.19) and e.vx == pytest.approx(0.02)
    assert tr.stats.latency == pytest.approx(0.004)
    assert tr.rate(1.2) == pytest.approx(20.0)  # 20 samples within the 1 s window


def test_dropout_marks_the_body_invalid_and_recovery_restores_it():
    tr = BodyTracker("slider", TrackingConfig(timeout=0.1))
    feed(tr, 0.0, 10)
    last = tr.estimate(0.09)
    assert last.valid
    e = tr.estimate(0.09 + 0.15)
    assert e.state == LOST and not e.valid and "lost" in e.reason
    assert (e.x, e.y, e.stamp) == (last.x, last.y, last.stamp)  # last known pose, honestly stamped and flagged
    assert (e.vx, e.vy, e.omega) == (0.0, 0.0, 0.0)
    assert all(math.isfinite(v) for v in (e.x, e.y, e.yaw, e.vx, e.vy, e.omega))
    # tracking returns somewhere else (the body moved while hidden): accepted at once, no jump flagged
    assert tr.update(1.0, 1.0, flat(0.2, 0.1)) is None
    e = tr.estimate(1.0)
    assert e.valid and (e.x, e.y) == (0.2, 0.1) and e.vx == 0.0


def test_off_table_below_table_and_tilted_poses_are_flagged():
    cfg = TrackingConfig(table_half=(0.4, 0.5), table_margin=0.0, min_height=-0.05, max_tilt=0.5)
    tr = BodyTracker("slider", cfg)
    feed(tr, 0.0, 5)
    reason = tr.update(0.05, 0.05, flat(0.45, 0.0))
    assert reason and "off the table" in reason
    e = tr.estimate(0.05)
    assert not e.valid and e.state == INVALID and e.x == 0.45  # where it really is, flagged
    assert "below the table top" in tr.update(0.06, 0.06, flat(0.3, 0.0, z=-0.3))
    assert "tilted" in tr.update(0.07, 0.07, PlanarPose(0.0, 0.0, 0.01, 0.0, 1.2))
    assert tr.stats.rejected == 3 and "tilted" in tr.stats.last_rejection
    assert tr.update(0.08, 0.08, flat(0.0, 0.0)) is None and tr.estimate(0.08).valid


def test_jump_is_flagged_until_confirmed():
    cfg = TrackingConfig(max_speed=1.0, jump_tolerance=0.01, jump_confirm_samples=3, timeout=0.5)
    tr = BodyTracker("slider", cfg)
    feed(tr, 0.0, 5, vx=0.0)
    # a one-sample glitch: flagged, last good pose reported as invalid, then the next good sample clears it
    assert "jump" in tr.update(0.05, 0.05, flat(0.3, 0.0))
    e = tr.estimate(0.05)
    assert not e.valid and e.x == 0.0 and "jump" in e.reason
    assert tr.update(0.06, 0.06, flat(0.0, 0.0)) is None and tr.estimate(0.06).valid
    # a persistent move (e.g. bodies swapped): confirmed after jump_confirm_samples consistent samples
    assert tr.update(0.07, 0.07, flat(0.3, 0.1)) is not None
    assert tr.update(0.08, 0.08, flat(0.3, 0.1)) is not None
    assert tr.update(0.09, 0.09, flat(0.3, 0.1)) is None
    e = tr.estimate(0.09)
    assert e.valid and (e.x, e.y) == (0.3, 0.1) and e.vx == 0.0  # velocity restarted, no spike


def test_a_flipped_marker_set_is_a_yaw_jump_until_confirmed():
    """A symmetric marker set that Motive flips by 180 deg in one frame: the position is where it was, the yaw is
    not a turn any pushed object makes in 10 ms (flagged like a position jump, confirmed after as many samples)."""
    tr = BodyTracker("slider", TrackingConfig(jump_confirm_samples=3, timeout=0.5))
    for k in range(5):  # turning at 2 rad/s: no jump
        assert tr.update(0.01 * k, 0.01 * k, flat(0.1, 0.0, yaw=0.02 * k)) is None
    assert "yaw jump of 180 deg" in tr.update(0.05, 0.05, flat(0.1, 0.0, yaw=0.08 + math.pi))
    assert not tr.estimate(0.05).valid and tr.estimate(0.05).yaw == pytest.approx(0.08)
    assert tr.update(0.06, 0.06, flat(0.1, 0.0, yaw=0.1)) is None  # a one-frame glitch
    assert tr.update(0.07, 0.07, flat(0.1, 0.0, yaw=0.12 - math.pi)) is not None
    assert tr.update(0.08, 0.08, flat(0.1, 0.0, yaw=0.14 - math.pi)) is not None
    assert tr.update(0.09, 0.09, flat(0.1, 0.0, yaw=0.16 - math.pi)) is None  # confirmed: the flip stays


def test_rejected_samples_never_refresh_a_body():
    tr = BodyTracker("slider", TrackingConfig(timeout=0.1))
    feed(tr, 0.0, 3)
    for k in range(30):  # a stream of off-table samples
        tr.update(0.03 + 0.01 * k, 0.03 + 0.01 * k, flat(2.0, 0.0))
        tr.reject(0.03 + 0.01 * k, "non-finite position")
    e = tr.estimate(0.33)
    assert e.state == LOST and not e.valid and "off the table" in e.reason


def test_out_of_order_samples_are_dropped_without_invalidating():
    tr = BodyTracker("slider", TrackingConfig())
    feed(tr, 0.0, 5)
    assert "out-of-order" in tr.update(0.05, 0.02, flat(0.0, 0.0))
    assert tr.estimate(0.05).valid


def test_a_receive_clock_that_steps_back_loses_the_body_until_a_sample_on_the_new_timeline():
    """The system clock stepped back 2 s (an NTP step) on a robot whose mocap driver stamps with that clock: the
    last pose must not count as fresh for the 2 s, and the samples of the new timeline (stamps stepped back too)
    start the track anew instead of being dropped as out of order."""
    tr = BodyTracker("pusher", TrackingConfig(timeout=0.1, velocity_time_constant=0.0))
    feed(tr, 100.0, 20, vx=0.2)  # moving at 0.2 m/s until 100.19 s
    assert tr.estimate(100.19).valid
    e = tr.estimate(98.2)  # the clock is now 2 s earlier, no sample yet
    assert e.state == LOST and not e.valid and "receive clock went back 1.990 s" in e.reason
    assert tr.update(98.21, 98.21, flat(0.3, 0.0)) is None  # the body moved meanwhile: accepted, not out of order
    e = tr.estimate(98.21)
    assert e.valid and e.x == 0.3 and e.vx == 0.0  # a new track: no velocity across the step
    assert tr.update(98.22, 98.22, flat(0.302, 0.0)) is None
    e = tr.estimate(98.22)
    assert e.valid and e.vx == pytest.approx(0.2)
    assert tr.rate(98.22) == pytest.approx(2.0)  # samples of the old timeline no longer count


def test_a_pose_repeated_to_the_bit_is_a_body_the_driver_no_longer_sees():
    """natnet_ros2 republishes an occluded body's last pose with fresh stamps: after frozen_timeout of one pose to the
    bit the body is invalid, then lost, and stays so while the repeats go on; a pose that changes is tracked again.
    A resting body's measured pose is never bit-identical (camera noise), so a still body is not affected."""
    tr = BodyTracker("slider", TrackingConfig(timeout=0.1, frozen_timeout=0.1))
    feed(tr, 0.0, 10)  # tracked, moving
    still = flat(0.0181, 0.0)
    for k in range(10, 60):  # 0.5 s of the same pose, fresh stamps
        t = 0.01 * k
        reason = tr.update(t, t, still)
        assert (reason is None) == (t - 0.1 <= 0.1 + 1e-9), (t, reason)
        assert tr.estimate(t).valid == (reason is None)
    e = tr.estimate(0.59)
    assert e.state == LOST and "unchanged to the bit" in e.reason
    assert tr.update(0.6, 0.6, flat(0.0182, 0.0)) is None and tr.estimate(0.6).valid  # seen again
    rng = np.random.default_rng(0)
    for k in range(61, 200):  # a resting body as a camera measures it: 20 um of noise
        assert tr.update(0.01 * k, 0.01 * k, flat(*(0.0182 + rng.normal(0.0, 2e-5, 2)))) is None
    off = BodyTracker("slider", TrackingConfig(frozen_timeout=0.0))  # 0: off
    assert all(off.update(0.01 * k, 0.01 * k, still) is None for k in range(100))


def test_tracking_config_is_validated():
    with pytest.raises(MocapConfigError, match="timeout"):
        TrackingConfig(timeout=0.0)
    with pytest.raises(MocapConfigError, match="jump_confirm_samples"):
        TrackingConfig(jump_confirm_samples=0)
