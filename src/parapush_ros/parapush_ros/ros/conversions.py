"""Translation between parapush_msgs and core state arrays: the only place that knows both.

Objects in a ``SceneState`` are matched to the scene's objects by name (order does not matter); anything that
does not fit is rejected with a message that names it, so a node can answer ``success = false`` with it.
"""
from __future__ import annotations

import numpy as np
from parapush_msgs.msg import ObjectState, PushControl, SceneState, StateVariance

from ..core.scene.spec import Scene
from ..core.scene.state import wrap_angle

SHAPES = {"box": ObjectState.SHAPE_BOX, "cylinder": ObjectState.SHAPE_CYLINDER,
          "polygon": ObjectState.SHAPE_POLYGON, "ellipse": ObjectState.SHAPE_ELLIPSE,
          "mesh": ObjectState.SHAPE_POLYGON}  # a mesh's footprint is a polygon


def stamp_seconds(stamp) -> float:
    """A ``builtin_interfaces/Time`` in seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


class ConversionError(ValueError):
    """A message does not describe a valid state/control sequence for the scene."""


def scene_state_to_array(msg: SceneState, scene: Scene, require_valid: bool = True,
                         field: str = "initial_state") -> np.ndarray:
    """The planar state vector of ``msg``. Raises ConversionError naming missing, unknown, non-finite or (with
    ``require_valid``) untracked objects or an untracked pusher; ``field`` is the message's name in the errors."""
    L = scene.layout
    if require_valid and not msg.pusher_tracking_valid:
        raise ConversionError(f"{field}.pusher_tracking_valid is false (pusher tracking lost or invalid)")
    x = np.zeros(L.dim)
    x[0:2] = (msg.pusher_x, msg.pusher_y)
    L.pusher_vel(x)[:] = (msg.pusher_vx, msg.pusher_vy)
    by_name = {}
    obstacle_names = {o.name for o in scene.obstacles}
    for i, o in enumerate(msg.objects):
        if o.name in by_name:
            raise ConversionError(f"{field}.objects[{i}]: duplicate object name {o.name!r}")
        by_name[o.name] = (i, o)
    unknown = [n for n in by_name if n not in {o.name for o in scene.objects} and n not in obstacle_names]
    if unknown:
        raise ConversionError(f"{field}.objects: unknown object(s) {unknown} for scene {scene.name!r} "
                              f"(expected {[o.name for o in scene.objects]})")
    poses, vels = L.object_poses(x), L.object_vels(x)
    for k, spec in enumerate(scene.objects):
        if spec.name not in by_name:
            raise ConversionError(f"{field}.objects: object {spec.name!r} of scene {scene.name!r} is missing "
                                  f"(got {sorted(by_name)})")
        i, o = by_name[spec.name]
        if require_valid and not o.tracking_valid:
            raise ConversionError(f"{field}.objects[{i}] ({o.name!r}): tracking_valid is false")
        poses[k] = (o.x, o.y, o.yaw)
        vels[k] = (o.vx, o.vy, o.omega)
    if not np.all(np.isfinite(x)):
        bad = [f"{name}" for name, v in _fields(msg) if not np.isfinite(v)]
        raise ConversionError(f"{field}: non-finite value(s) in {', '.join(bad)}")
    return x


def _fields(msg: SceneState):
    yield "pusher_x", msg.pusher_x
    yield "pusher_y", msg.pusher_y
    yield "pusher_vx", msg.pusher_vx
    yield "pusher_vy", msg.pusher_vy
    for i, o in enumerate(msg.objects):
        for f in ("x", "y", "yaw", "vx", "vy", "omega"):
            yield f"objects[{i}].{f}", getattr(o, f)


def array_to_scene_state(x: np.ndarray, scene: Scene, header=None, valid: bool = True) -> SceneState:
    L = scene.layout
    msg = SceneState()
    if header is not None:
        msg.header = header
    msg.pusher_x, msg.pusher_y = float(x[0]), float(x[1])
    msg.pusher_vx, msg.pusher_vy = (float(v) for v in L.pusher_vel(x))
    msg.pusher_tracking_valid = bool(valid)
    poses, vels = L.object_poses(x), L.object_vels(x)
    for k, spec in enumerate(scene.objects):
        o = ObjectState(name=spec.name, shape=SHAPES[spec.shape], tracking_valid=valid)
        o.x, o.y = float(poses[k, 0]), float(poses[k, 1])
        o.yaw = float(wrap_angle(poses[k, 2]))
        o.vx, o.vy, o.omega = (float(v) for v in vels[k])
        msg.objects.append(o)
    return msg


def array_to_state_variance(var: np.ndarray, scene: Scene) -> StateVariance:
    """``StateVariance`` of a predicted state's per-coordinate variance (D,) (the state layout's order); only the
    positions and yaws travel (the velocities' variance is not planned on)."""
    L = scene.layout
    var = np.asarray(var, dtype=float)
    poses = L.object_poses(var)
    return StateVariance(pusher_x=float(var[0]), pusher_y=float(var[1]), object_names=[o.name for o in scene.objects],
                         object_x=poses[:, 0].tolist(), object_y=poses[:, 1].tolist(), object_yaw=poses[:, 2].tolist())


def state_variance_to_array(msg: StateVariance, scene: Scene, field: str = "predicted_variance") -> np.ndarray:
    """(D,) variance in the state layout from a ``StateVariance`` (velocity entries zero); objects matched by name,
    a ConversionError names what does not fit."""
    L = scene.layout
    var = np.zeros(L.dim)
    var[0:2] = (msg.pusher_x, msg.pusher_y)
    n = len(msg.object_names)
    if not len(msg.object_x) == len(msg.object_y) == len(msg.object_yaw) == n:
        raise ConversionError(f"{field}: {n} object_names but {len(msg.object_x)}, {len(msg.object_y)}, "
                              f"{len(msg.object_yaw)} object_x, object_y, object_yaw")
    by_name = {name: i for i, name in enumerate(msg.object_names)}
    poses = L.object_poses(var)
    for k, spec in enumerate(scene.objects):
        if spec.name not in by_name:
            raise ConversionError(f"{field}.object_names: object {spec.name!r} is missing (got {list(by_name)})")
        i = by_name[spec.name]
        poses[k] = (msg.object_x[i], msg.object_y[i], msg.object_yaw[i])
    if not (np.all(np.isfinite(var)) and np.all(var >= 0.0)):
        raise ConversionError(f"{field}: variances must be finite and >= 0")
    return var


def controls_to_arrays(controls, max_speed: float, max_duration: float, timestep: float = 0.001):
    """(N, 2) velocities and the common slice duration of a PushControl list; ConversionError names the bad one."""
    if len(controls) == 0:
        raise ConversionError("controls: empty (need at least one control)")
    u = np.array([(c.vx, c.vy) for c in controls], dtype=float)
    durations = np.array([c.duration for c in controls], dtype=float)
    for i, c in enumerate(controls):
        if not (np.isfinite(c.vx) and np.isfinite(c.vy) and np.isfinite(c.duration)):
            raise ConversionError(f"controls[{i}]: non-finite value (vx={c.vx}, vy={c.vy}, duration={c.duration})")
        speed = float(np.hypot(c.vx, c.vy))
        if speed > max_speed:
            raise ConversionError(f"controls[{i}]: speed {speed:.3f} m/s exceeds the limit {max_speed} m/s")
        if not 0.0 < c.duration <= max_duration:
            raise ConversionError(f"controls[{i}].duration: {c.duration} s is outside (0, {max_duration}] s")
        steps = c.duration / timestep
        if abs(steps - round(steps)) > 1e-6:
            raise ConversionError(f"controls[{i}].duration: {c.duration} s is not a multiple of the "
                                  f"{timestep} s physics step")
    if np.any(durations != durations[0]):
        i = int(np.flatnonzero(durations != durations[0])[0])
        raise ConversionError(f"controls[{i}].duration: {durations[i]} s differs from controls[0] "
                              f"({durations[0]} s); all slices must have the same duration")
    return u, float(durations[0])


def arrays_to_controls(u: np.ndarray, dt: float) -> list:
    return [PushControl(vx=float(a), vy=float(b), duration=float(dt)) for a, b in np.asarray(u).reshape(-1, 2)]
