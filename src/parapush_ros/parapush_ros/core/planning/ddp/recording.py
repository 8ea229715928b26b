"""Recording a demonstration for DG-OC from observed scene states while a person drives the pusher (paper 003's
demonstrations were human pushes through teleoperation).

``DemonstrationRecorder`` takes scene states (stamped, any rate) and the commanded pusher velocity as they come; it
starts recording at the first non-zero command (keeping ``pre_roll`` s of the rest before it) and is ``done`` when
the command has been zero (or silent) for ``idle`` s, or after ``max_time`` s. Times are the scene states' stamps
only: a command is placed at the stamp of the newest state when it arrived, so the teleop may run on any clock.

``demonstration_from_samples`` turns the samples into the shipped file format (``demonstrations.Demonstration``):
resampled onto the planner's step ``dt`` (linear interpolation, the yaw unwrapped), moved into the frame of the
slider's start pose, the pusher velocity and acceleration derived by finite differences consistent with the
quasi-static model's integration (p[k+1] = p[k] + dt v[k+1], v[k+1] = v[k] + dt a[k], starting from rest), and the
face switches counted from where the pusher touches the box.
"""
from __future__ import annotations

import numpy as np

from ...scene.spec import Scene
from .demonstrations import Demonstration
from .dgoc import HORIZON_S, PLAN_DT

CONTACT_GAP = 0.006  # m: touching within this gap (the quasi-static model's 5 mm contact tolerance + 1 mm of noise)


def contact_faces(X: np.ndarray, size, pusher_radius: float, gap: float = CONTACT_GAP) -> np.ndarray:
    """(N,) face the pusher touches in model states ``X`` (N, 7): 0..3 = slider -x, -y, +x, +y; -1 = no contact."""
    X = np.asarray(X, dtype=float)
    c, s = np.cos(X[:, 2]), np.sin(X[:, 2])
    dx, dy = X[:, 3] - X[:, 0], X[:, 4] - X[:, 1]
    rx, ry = c * dx + s * dy, -s * dx + c * dy
    a, b = size[0] / 2.0, size[1] / 2.0
    outside = np.stack([-rx - a, -ry - b, rx - a, ry - b], -1)  # how far beyond each face's plane
    dist = np.hypot(np.maximum(np.abs(rx) - a, 0.0), np.maximum(np.abs(ry) - b, 0.0))
    touching = dist - pusher_radius <= gap
    return np.where(touching, np.argmax(outside, -1), -1)


def count_face_switches(faces: np.ndarray) -> int:
    f = faces[faces >= 0]
    return int(np.count_nonzero(f[1:] != f[:-1])) if len(f) > 1 else 0


def demonstration_from_samples(times, states, scene: Scene, object_index: int = 0, dt: float = PLAN_DT,
                               name: str = "recorded", source: str = "", meta: dict | None = None) -> Demonstration:
    """A demonstration from scene states ``states`` (N, D) observed at ``times`` (N,) s (see the module docstring)."""
    times, states = np.asarray(times, dtype=float), np.asarray(states, dtype=float)
    L = scene.layout
    if states.ndim != 2 or states.shape[1] != L.dim or len(times) != len(states):
        raise ValueError(f"recording: expected times (N,) and scene states (N, {L.dim}), got {times.shape}, "
                         f"{states.shape}")
    order = np.argsort(times, kind="stable")
    times, states = times[order], states[order]
    keep = np.concatenate([[True], np.diff(times) > 1e-9])
    times, states = times[keep], states[keep]
    if len(times) < 2 or times[-1] - times[0] < 2 * dt:
        raise ValueError(f"recording: too short ({len(times)} states over {times[-1] - times[0]:.3f} s); push for "
                         f"longer")
    pose = L.object_poses(states)[:, object_index].copy()
    pose[:, 2] = np.unwrap(pose[:, 2])
    pusher = L.pusher_pos(states)
    grid = times[0] + dt * np.arange(int(np.floor((times[-1] - times[0]) / dt + 1e-9)) + 1)
    raw = np.column_stack([pose, pusher])
    res = np.column_stack([np.interp(grid, times, raw[:, j]) for j in range(5)])
    # into the slider's start frame
    x0, y0, th0 = res[0, :3]
    c, s = np.cos(th0), np.sin(th0)
    R = np.array([[c, s], [-s, c]])  # table -> start frame
    X = np.zeros((len(grid), 7))
    X[:, 0:2] = (res[:, 0:2] - (x0, y0)) @ R.T
    X[:, 2] = res[:, 2] - th0
    X[:, 3:5] = (res[:, 3:5] - (x0, y0)) @ R.T
    X[1:, 5:7] = np.diff(X[:, 3:5], axis=0) / dt  # from rest: the model's p[k+1] = p[k] + dt v[k+1]
    U = np.diff(X[:, 5:7], axis=0) / dt
    obj = scene.objects[object_index]
    switches = count_face_switches(contact_faces(X, obj.size, scene.pusher.radius))
    info = {"start_pose_in_table": [float(x0), float(y0), float(th0)], "samples": int(len(times)),
            "object": obj.name, **(meta or {})}
    return Demonstration(name, dt, X, U, switches, scene.name, source, info)


class DemonstrationRecorder:
    """Collects stamped scene states and pusher commands into one demonstration (see the module docstring)."""

    def __init__(self, scene: Scene, object_index: int = 0, idle: float = 1.0, max_time: float = HORIZON_S,
                 pre_roll: float = 0.1, tail: float = 0.3):
        if not idle > 0.0 or not max_time > 0.0 or pre_roll < 0.0:
            raise ValueError(f"recorder: idle and max_time must be > 0 and pre_roll >= 0, got {idle}, {max_time}, "
                             f"{pre_roll}")
        self.scene, self.object_index = scene, object_index
        self.idle, self.max_time, self.pre_roll, self.tail = idle, max_time, pre_roll, tail
        self.times, self.states = [], []
        self.start: float | None = None  # state time of the first non-zero command
        self.last_moving: float | None = None  # state time of the newest non-zero command
        self.latest: float | None = None  # newest state time
        self.commands = 0

    def on_state(self, t: float, x) -> None:
        if self.latest is not None and t <= self.latest:
            return  # out of order or repeated
        self.latest = float(t)
        self.times.append(float(t))
        self.states.append(np.asarray(x, dtype=float).copy())
        if self.start is None:  # keep only the pre-roll while waiting for the first push
            while self.times and self.times[0] < t - self.pre_roll - 1e-9:
                self.times.pop(0)
                self.states.pop(0)

    def on_command(self, u) -> None:
        """The commanded pusher velocity (m/s), placed at the newest state's time."""
        self.commands += 1
        if self.latest is None or not np.any(np.asarray(u, dtype=float) != 0.0):
            return
        if self.start is None:
            self.start = self.latest
        self.last_moving = self.latest

    @property
    def started(self) -> bool:
        return self.start is not None

    @property
    def done(self) -> bool:
        if self.start is None or self.latest is None:
            return False
        return self.latest - self.last_moving >= self.idle - 1e-9 or self.latest - self.start >= self.max_time - 1e-9

    def demonstration(self, name: str = "recorded", source: str = "", meta: dict | None = None) -> Demonstration:
        """The recording so far: from ``pre_roll`` before the first push to ``tail`` after the last command to move
        (the rest after it would only lengthen every DG-OC plan), at most ``max_time``."""
        if self.start is None:
            raise ValueError("recording: the pusher was never commanded to move (nothing to record)")
        t = np.array(self.times)
        end = min(self.start + self.max_time, self.last_moving + self.tail)
        keep = t <= end + 1e-9
        return demonstration_from_samples(t[keep], np.array(self.states)[keep], self.scene, self.object_index,
                                          name=name, source=source, meta=meta)
