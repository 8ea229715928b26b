"""Motion-capture ingestion without ROS: the mocap -> table transform, pose checks, planar velocity estimation and
per-body tracking (dropouts, jumps, off-table poses).

Frames. A mocap driver streams rigid-body poses in its own frame (``world`` for natnet_ros2 and vrpn_mocap), with
either Z up (what ROS expects; set Motive's up axis to Z) or Y up (Motive's default). ``MocapToTable`` maps such a
pose into the table frame (REP-103: origin at the centre of the table top, x forward, y left, z up) in three
steps, all in this one place:

1. Y-up streaming is turned into Z-up by the rotation of +90 deg about x: ``(x, y, z)_yup -> (x, -z, y)_zup``;
2. the table origin, given in the *streamed* coordinates (what a marker placed at the table centre reads), is
   subtracted;
3. the table's rotation in the Z-up mocap frame (a yaw about the up axis or a full quaternion) is undone.

Rigid bodies are assumed to be defined with their local axes aligned to the mocap axes when the body sits flat
(Motive's default when a body is created); their local axes get the same up-axis conversion, so in the table
frame a flat body has local z up, its heading (yaw) is the direction of its local x axis in the table plane and
its tilt is the angle between its local z axis and the table's z.

Quaternions are ROS-ordered (x, y, z, w) throughout.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..config import ConfigError, knob
from ..scene.state import wrap_angle, yaw_from_quaternion

UP_AXES = ("z", "y")
POSE_RELIABILITIES = ("reliable", "best_effort")  # how pose topics are published: natnet_ros2 | vrpn_mocap style
_S45 = math.sqrt(0.5)
# Rotation taking Y-up coordinates to Z-up coordinates: +90 deg about x.
_UP_CONVERSION = {"z": np.array([0.0, 0.0, 0.0, 1.0]), "y": np.array([_S45, 0.0, 0.0, _S45])}


class MocapConfigError(ConfigError):
    """A mocap parameter is invalid; the message names it."""


# ------------------------------------------------------------------------------------------------ quaternions
def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product ``a * b`` of (x, y, z, w) quaternions."""
    ax, ay, az, aw = (float(c) for c in a)
    bx, by, bz, bw = (float(c) for c in b)
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


def quat_conjugate(q) -> np.ndarray:
    return np.array([-q[0], -q[1], -q[2], q[3]])


def quat_rotate(q, v) -> np.ndarray:
    """Rotate the 3-vector ``v`` by the unit quaternion ``q`` (plain float arithmetic: called per mocap sample)."""
    qx, qy, qz, qw = (float(c) for c in q)
    vx, vy, vz = (float(c) for c in v)
    tx, ty, tz = 2.0 * (qy * vz - qz * vy), 2.0 * (qz * vx - qx * vz), 2.0 * (qx * vy - qy * vx)
    return np.array([vx + qw * tx + (qy * tz - qz * ty), vy + qw * ty + (qz * tx - qx * tz),
                     vz + qw * tz + (qx * ty - qy * tx)])


def quat_from_yaw(yaw: float) -> np.ndarray:
    return np.array([0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0)])


def tilt_from_quaternion(q) -> float:
    """Angle (rad) between the body's local z axis and the frame's z axis."""
    x, y, _, _ = (float(c) for c in q)
    cos_tilt = 1.0 - 2.0 * (x * x + y * y)
    return math.acos(max(-1.0, min(1.0, cos_tilt)))


def check_pose(position, quaternion, frame_id: str, expected_frame: str, unit_tolerance: float,
               stamp: float = 0.0) -> str | None:
    """Why a raw mocap pose must be rejected, or None if it is usable: non-finite values, a quaternion that is not
    unit length (beyond ``unit_tolerance``), a frame other than ``expected_frame`` (empty = any frame) or a
    negative ``stamp`` (s; int32 seconds allow it, no clock gives it, and a state cannot carry it)."""
    if stamp < 0.0:
        return f"negative stamp {stamp:.6f} s"
    p = np.asarray(position, dtype=float)
    q = np.asarray(quaternion, dtype=float)
    if not np.all(np.isfinite(p)):
        return f"non-finite position {p.tolist()}"
    if not np.all(np.isfinite(q)):
        return f"non-finite orientation {q.tolist()}"
    norm = float(np.linalg.norm(q))
    if abs(norm - 1.0) > unit_tolerance:
        return f"quaternion norm {norm:.4g} is not 1 (tolerance {unit_tolerance:g})"
    if expected_frame and frame_id != expected_frame:
        return f"frame_id {frame_id!r} is not the mocap frame {expected_frame!r}"
    return None


# ------------------------------------------------------------------------------------------------ the transform
@dataclass(frozen=True)
class MocapToTable:
    """The mocap -> table transform (see the module docstring for the conventions)."""

    origin: tuple = (0.0, 0.0, 0.0)  # table origin in the streamed mocap coordinates (m)
    rotation: tuple = (0.0, 0.0, 0.0, 1.0)  # table orientation in the Z-up mocap frame (x, y, z, w)
    up_axis: str = "z"  # the axis the mocap system streams as up: "z" or "y"

    def __post_init__(self):
        if self.up_axis not in UP_AXES:
            raise MocapConfigError(f"up_axis: {self.up_axis!r} is not one of {', '.join(UP_AXES)}")
        o = np.asarray(self.origin, dtype=float)
        if o.shape != (3,) or not np.all(np.isfinite(o)):
            raise MocapConfigError(f"table_origin_in_mocap: must be 3 finite numbers [x, y, z], got "
                                   f"{list(self.origin)}")
        q = np.asarray(self.rotation, dtype=float)
        if q.shape != (4,) or not np.all(np.isfinite(q)) or abs(np.linalg.norm(q) - 1.0) > 1e-6:
            raise MocapConfigError(f"table_rotation_in_mocap: must be a unit quaternion [qx, qy, qz, qw], got "
                                   f"{list(self.rotation)}")

    @classmethod
    def from_params(cls, origin, rotation, up_axis: str) -> MocapToTable:
        """From node parameters: ``rotation`` is ``[yaw]`` (rad about the up axis) or ``[qx, qy, qz, qw]``."""
        rotation = [float(r) for r in rotation]
        if len(rotation) == 1:
            if not math.isfinite(rotation[0]):
                raise MocapConfigError(f"table_rotation_in_mocap: yaw {rotation[0]} is not finite")
            q = quat_from_yaw(rotation[0])
        elif len(rotation) == 4:
            q = np.asarray(rotation)
            n = np.linalg.norm(q)
            if not np.isfinite(n) or abs(n - 1.0) > 1e-3:
                raise MocapConfigError(f"table_rotation_in_mocap: quaternion {rotation} is not unit length "
                                       f"(norm {n:.4g})")
            q = q / n
        else:
            raise MocapConfigError(f"table_rotation_in_mocap: expected [yaw] or [qx, qy, qz, qw], got {rotation}")
        return cls(origin=tuple(float(v) for v in origin), rotation=tuple(float(v) for v in q),
                   up_axis=str(up_axis).lower())

    @property
    def _conversion(self) -> np.ndarray:
        return _UP_CONVERSION[self.up_axis]

    def to_table(self, position, quaternion):
        """(position (3,), quaternion (4,)) in the table frame of a pose streamed in the mocap frame."""
        c, r = self._conversion, np.asarray(self.rotation)
        r_inv = quat_conjugate(r)
        p = quat_rotate(r_inv, quat_rotate(c, np.asarray(position, dtype=float) - np.asarray(self.origin)))
        # the body's local axes are converted like the mocap axes (a Y-up body's local y becomes its local z)
        q = quat_multiply(quat_multiply(r_inv, quat_multiply(c, np.asarray(quaternion, dtype=float))),
                          quat_conjugate(c))
        return p, q / np.linalg.norm(q)

    def to_mocap(self, position, quaternion):
        """The inverse of ``to_table``: what a mocap driver would stream for a table-frame pose."""
        c_inv, r = quat_conjugate(self._conversion), np.asarray(self.rotation)
        p = quat_rotate(c_inv, quat_rotate(r, np.asarray(position, dtype=float))) + np.asarray(self.origin)
        q = quat_multiply(quat_multiply(c_inv, quat_multiply(r, np.asarray(quaternion, dtype=float))),
                          self._conversion)
        return p, q / np.linalg.norm(q)

    def table_pose_in_mocap(self):
        """Translation and rotation of the table frame in the streamed mocap frame (a static mocap -> table
        transform for TF, e.g. ``static_transform_publisher``)."""
        q = quat_multiply(quat_conjugate(self._conversion), np.asarray(self.rotation))
        return np.asarray(self.origin, dtype=float), q / np.linalg.norm(q)


@dataclass(frozen=True)
class PlanarPose:
    """A body pose in the table frame, reduced to what the planar state needs (plus height and tilt for checks)."""

    x: float
    y: float
    z: float
    yaw: float
    tilt: float

    @classmethod
    def from_table_pose(cls, position, quaternion) -> PlanarPose:
        yaw = float(yaw_from_quaternion([float(c) for c in quaternion]))
        return cls(float(position[0]), float(position[1]), float(position[2]), yaw, tilt_from_quaternion(quaternion))


def parse_body_map(text: str, names) -> dict:
    """Map scene body names to mocap rigid-body names from ``"object=Body, other=Body2"`` (comma or whitespace
    separated pairs); names not listed map to themselves. Raises MocapConfigError naming a bad entry."""
    names = list(names)
    mapping = {n: n for n in names}
    for item in (t for t in text.replace(",", " ").split() if t):
        if item.count("=") != 1:
            raise MocapConfigError(f"body_map: entry {item!r} is not of the form scene_name=mocap_body")
        key, value = (s.strip() for s in item.split("="))
        if key not in mapping:
            raise MocapConfigError(f"body_map: {key!r} is not a body of the scene (bodies: {', '.join(names)})")
        if not value:
            raise MocapConfigError(f"body_map: entry {item!r} has an empty mocap body name")
        mapping[key] = value
    bodies = list(mapping.values())
    dup = sorted({b for b in bodies if bodies.count(b) > 1})
    if dup:
        raise MocapConfigError(f"body_map: mocap body name(s) {dup} used for more than one scene body")
    return mapping


def parse_name_list(text: str) -> list:
    return [t for t in text.replace(",", " ").split() if t]


def pose_topic(body: str, driver: str, template: str = "") -> str:
    """The PoseStamped topic of a mocap rigid body: ``template`` with ``{body}`` replaced, else the driver
    default (natnet_ros2 ``/<body>/pose``, vrpn_mocap ``/vrpn_mocap/<body>/pose``)."""
    if template:
        if "{body}" not in template:
            raise MocapConfigError(f"pose_topic_template: {template!r} does not contain '{{body}}'")
        return template.replace("{body}", body)
    from ...ros.topics import mocap_pose_topic  # noqa: PLC0415
    try:
        return mocap_pose_topic(body, driver)
    except ValueError as e:
        raise MocapConfigError(f"mocap_driver: {e}") from None


# ------------------------------------------------------------------------------------------------ velocity
class PlanarVelocityFilter:
    """Planar velocity (vx, vy, omega) from timestamped poses: finite differences of consecutive samples (yaw
    unwrapped) smoothed by a first-order low-pass of time constant ``time_constant`` (0 = raw differences).
    Irregular sample spacing is handled exactly (the smoothing factor uses each interval)."""

    def __init__(self, time_constant: float):
        if not (time_constant >= 0.0 and math.isfinite(time_constant)):
            raise MocapConfigError(f"velocity_time_constant: must be >= 0, got {time_constant}")
        self.time_constant = float(time_constant)
        self.reset()

    def reset(self):
        self._last = None  # (t, x, y, yaw)
        self.velocity = np.zeros(3)
        self.samples = 0

    def update(self, t: float, x: float, y: float, yaw: float) -> np.ndarray:
        if self._last is not None:
            t0, x0, y0, yaw0 = self._last
            dt = t - t0
            if dt <= 0.0:
                return self.velocity  # duplicate or out-of-order sample: no new information
            raw = np.array([(x - x0) / dt, (y - y0) / dt, float(wrap_angle(yaw - yaw0)) / dt])
            if self.samples == 1 or self.time_constant == 0.0:
                self.velocity = raw
            else:
                alpha = 1.0 - math.exp(-dt / self.time_constant)
                self.velocity = self.velocity + alpha * (raw - self.velocity)
        self._last = (t, x, y, yaw)
        self.samples += 1
        return self.velocity


# ------------------------------------------------------------------------------------------------ tracking
NEVER_SEEN, TRACKING, INVALID, LOST = "never_seen", "tracking", "invalid", "lost"
YAW_JUMP_TOLERANCE = 0.2  # rad: turns below max_angular_speed * dt + this are never jumps (mocap yaw noise: ~0.002)


@dataclass(frozen=True)
class TrackingConfig:
    """How bodies are tracked (``mocap_ingest`` declares the settings as its parameters of the same names)."""

    table_half: tuple = (0.4, 0.5)  # half extents of the table top (m): from the scene, not a setting
    timeout: float = knob(0.1, "a body without an accepted sample for this long is lost: tracking_valid = false (s)")
    table_margin: float = knob(0.0, "a body origin may lie this far beyond the table edge before it is off the table "
                                    "(m)")
    min_height: float = knob(-0.05, "a body origin lower than this in the table frame has fallen off the table (m)")
    max_speed: float = knob(3.0, "a displacement between samples faster than this is a jump (m/s)")
    jump_tolerance: float = knob(0.01, "displacements below max_speed * dt + this are never jumps (m)")
    max_angular_speed: float = knob(30.0, "a turn between samples faster than this (beyond a 0.2 rad tolerance) is a "
                                          "jump: a marker set that flips (rad/s)")
    jump_confirm_samples: int = knob(5, "consecutive consistent samples that confirm a jumped-to position")
    max_tilt: float = knob(0.5, "a body tilted further than this from upright is invalid (rad)")
    frozen_timeout: float = knob(0.1, "a body whose pose has not changed by one bit for this long is lost, like one "
                                      "without samples: a driver that republishes an occluded body's last pose "
                                      "(natnet_ros2 does) with fresh stamps (s; 0 = off)")
    velocity_time_constant: float = knob(0.05, "time constant of the low-pass on finite-difference velocities (s); "
                                               "0 = raw differences")
    rate_window: float = 1.0  # s: window of the rate estimate

    def __post_init__(self):
        for name in ("timeout", "max_speed", "max_angular_speed", "rate_window"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise MocapConfigError(f"{name}: must be > 0, got {v}")
        for name in ("table_margin", "jump_tolerance", "max_tilt", "velocity_time_constant", "frozen_timeout"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0.0):
                raise MocapConfigError(f"{name}: must be >= 0, got {v}")
        if not math.isfinite(self.min_height):
            raise MocapConfigError(f"min_height: must be finite, got {self.min_height}")
        if int(self.jump_confirm_samples) < 1:
            raise MocapConfigError(f"jump_confirm_samples: must be >= 1, got {self.jump_confirm_samples}")


@dataclass
class BodyEstimate:
    """What a consumer may know about a body at a given time."""

    x: float
    y: float
    yaw: float
    vx: float
    vy: float
    omega: float
    stamp: float  # measurement time of the pose (s)
    valid: bool
    state: str  # NEVER_SEEN | TRACKING | INVALID | LOST
    reason: str  # why it is not valid ("" when valid)


@dataclass
class BodyStats:
    received: int = 0
    accepted: int = 0
    rejected: int = 0
    last_rejection: str = ""
    latency: float = float("nan")  # receive time - measurement time of the last sample (s); nan = unknown
    accept_times: deque = field(default_factory=deque)


class BodyTracker:
    """The tracking state of one rigid body. ``update`` takes table-frame poses (already transformed), ``reject``
    records malformed messages, ``estimate`` says what may be published at a given time.

    Times: ``receive_time`` (the consumer's clock at reception) drives the dropout timeout and the rate; ``stamp``
    (the driver's measurement time) drives velocities and jump detection and is what a published state carries.
    A rejected sample never refreshes a body: a body whose samples are all rejected goes LOST after the timeout.
    A receive clock that steps back (an NTP step of the system clock, a /clock restart) makes the ages measured on
    it meaningless: the body is LOST until a sample comes on the new timeline, which starts the track afresh (its
    stamp too will usually have stepped back, and a sample older than the last would otherwise be dropped as out
    of order while the last pose counted as fresh).
    A pose that repeats to the bit for ``frozen_timeout`` is not a measurement: a tracked body's pose carries the
    cameras' noise (OptiTrack: tens of micrometres, thousands of float steps), and natnet_ros2 republishes an
    occluded body's last pose with fresh stamps (it does not read Motive's tracking-valid bit). Such samples are
    flagged, so the body goes LOST after ``timeout`` as if nothing came.
    """

    def __init__(self, name: str, config: TrackingConfig):
        self.name = name
        self.cfg = config
        self.filter = PlanarVelocityFilter(config.velocity_time_constant)
        self.stats = BodyStats()
        self._pose: PlanarPose | None = None  # last accepted pose
        self._stamp = 0.0
        self._received = None  # receive time of the last accepted sample
        self._flag: str = ""  # why the latest sample was not accepted ("" = latest accepted)
        self._flag_pose: PlanarPose | None = None  # pose to report while flagged (off-table: where it really is)
        self._flag_stamp = 0.0
        self._candidate: list = []  # (stamp, pose) after a jump, waiting for confirmation
        self._unchanged_since = None  # receive time of the first accepted sample of the last pose

    # --- inputs
    def reject(self, receive_time: float, reason: str):
        self.stats.received += 1
        self.stats.rejected += 1
        self.stats.last_rejection = reason

    def update(self, receive_time: float, stamp: float, pose: PlanarPose) -> str | None:
        """Feed one table-frame sample; returns None when accepted, else the reason it is flagged."""
        s = self.stats
        s.received += 1
        s.latency = receive_time - stamp
        if self._received is not None and receive_time < self._received:  # the receive clock stepped back
            self._restart()
        lost = self._received is None or receive_time - self._received > self.cfg.timeout
        last_stamp = self._candidate[-1][0] if self._candidate else self._stamp
        if self._pose is not None and stamp <= last_stamp and not lost:
            reason = f"out-of-order stamp {stamp:.6f} s (last {last_stamp:.6f} s)"
            self.stats.rejected += 1  # dropped (a duplicate carries no news) without flagging the body
            self.stats.last_rejection = reason
            return reason
        problem = self._placement_problem(pose) or self._frozen(receive_time, pose)
        if problem:
            self._candidate.clear()
            return self._flagged(problem, pose, stamp)
        if self._pose is not None and not lost:
            jump = self._jump(self._stamp, self._pose, stamp, pose)
            if jump:
                if self._candidate and not self._jump(*self._candidate[-1], stamp, pose):
                    self._candidate.append((stamp, pose))
                else:
                    self._candidate = [(stamp, pose)]
                if len(self._candidate) < self.cfg.jump_confirm_samples:
                    return self._flagged(jump, None, stamp)
                self.filter.reset()  # the new position is confirmed: start over from it
        if lost:
            self.filter.reset()
        self._candidate.clear()
        self._accept(receive_time, stamp, pose)
        return None

    def _restart(self):
        """Forget the track (kept: the last pose, for reporting, and the counts): the next sample starts it anew."""
        self.filter.reset()
        self._received = None
        self._candidate.clear()
        self.stats.accept_times.clear()

    def _flagged(self, reason, pose, stamp):
        self._flag = reason
        self._flag_pose = pose
        self._flag_stamp = stamp
        self.stats.rejected += 1
        self.stats.last_rejection = reason
        return reason

    def _frozen(self, receive_time, pose: PlanarPose) -> str:
        """Why ``pose`` is a repeat, not a measurement ('' if it is fine); a frozen body stays frozen through the
        loss it causes, until its pose changes."""
        if self.cfg.frozen_timeout <= 0.0 or pose != self._pose or self._unchanged_since is None:
            return ""
        unchanged = receive_time - self._unchanged_since
        if unchanged <= self.cfg.frozen_timeout:
            return ""
        return (f"pose unchanged to the bit for {unchanged:.3f} s (frozen_timeout {self.cfg.frozen_timeout:g} s): "
                f"a driver republishing an occluded body's last pose?")

    def _accept(self, receive_time, stamp, pose):
        if pose != self._pose or self._received is None:
            self._unchanged_since = receive_time
        self.filter.update(stamp, pose.x, pose.y, pose.yaw)
        self._pose, self._stamp, self._received = pose, stamp, receive_time
        self._flag, self._flag_pose = "", None
        self.stats.accepted += 1
        self.stats.accept_times.append(receive_time)

    def _placement_problem(self, p: PlanarPose) -> str:
        hx, hy = self.cfg.table_half
        m = self.cfg.table_margin
        if abs(p.x) > hx + m or abs(p.y) > hy + m:
            return f"off the table at ({p.x:.3f}, {p.y:.3f}) m (table +-{hx:.3f} x +-{hy:.3f} m, margin {m:g} m)"
        if p.z < self.cfg.min_height:
            return f"below the table top (z = {p.z:.3f} m < min_height {self.cfg.min_height:g} m): fell off?"
        if p.tilt > self.cfg.max_tilt:
            return f"tilted {math.degrees(p.tilt):.0f} deg (max_tilt {math.degrees(self.cfg.max_tilt):.0f} deg)"
        return ""

    def _jump(self, t0, p0: PlanarPose, t1, p1: PlanarPose) -> str:
        d = math.hypot(p1.x - p0.x, p1.y - p0.y)
        dt = max(t1 - t0, 0.0)
        if d > self.cfg.max_speed * dt + self.cfg.jump_tolerance:
            return f"jump of {d:.3f} m in {dt:.3f} s (max_speed {self.cfg.max_speed:g} m/s)"
        turn = abs(math.remainder(p1.yaw - p0.yaw, 2.0 * math.pi))
        if turn > self.cfg.max_angular_speed * dt + YAW_JUMP_TOLERANCE:
            return (f"yaw jump of {math.degrees(turn):.0f} deg in {dt:.3f} s (max_angular_speed "
                    f"{self.cfg.max_angular_speed:g} rad/s): a marker set that flipped?")
        return ""

    # --- outputs
    def state(self, now: float) -> str:
        if self._pose is None and self._flag_pose is None:
            return NEVER_SEEN
        if self._received is None or not 0.0 <= now - self._received <= self.cfg.timeout:  # < 0: clock went back
            return LOST
        return INVALID if self._flag else TRACKING

    def seen(self) -> bool:
        return self._pose is not None or self._flag_pose is not None

    def estimate(self, now: float) -> BodyEstimate:
        """The body at time ``now`` (receive clock). Valid only for a fresh, accepted sample; otherwise the last
        known pose (the measured one for an off-table body) with zero velocity and the reason."""
        state = self.state(now)
        if state == NEVER_SEEN:
            return BodyEstimate(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False, state, "never seen")
        if state == TRACKING:
            vx, vy, om = (float(v) for v in self.filter.velocity)
            p = self._pose
            return BodyEstimate(p.x, p.y, p.yaw, vx, vy, om, self._stamp, True, state, "")
        if self._flag_pose is not None and (self._pose is None or self._flag_stamp >= self._stamp):
            p, stamp = self._flag_pose, self._flag_stamp
        else:
            p, stamp = self._pose, self._stamp
        if state == LOST:
            if self._received is not None and now < self._received:
                reason = (f"lost: the receive clock went back {self._received - now:.3f} s past the last sample; "
                          f"no sample since")
            else:
                age = "never accepted" if self._received is None else f"{now - self._received:.3f} s"
                reason = f"lost: no valid sample for {age} (timeout {self.cfg.timeout:g} s)"
            if self._flag:
                reason += f"; last sample: {self._flag}"
        else:
            reason = self._flag
        return BodyEstimate(p.x, p.y, p.yaw, 0.0, 0.0, 0.0, stamp, False, state, reason)

    def rate(self, now: float) -> float:
        """Accepted samples per second over the last ``rate_window`` seconds."""
        q = self.stats.accept_times
        while q and q[0] < now - self.cfg.rate_window:
            q.popleft()
        return len(q) / self.cfg.rate_window
