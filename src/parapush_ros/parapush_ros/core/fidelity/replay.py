"""Replay recorded pushes through parapush's models and measure how far each model's prediction is from the record.

A replay starts every model from the recording's first row (a measured start: overlaps within the scene's start
tolerance are projected out, with a warning) and drives the model's pusher along the recorded pusher path: slice n
commands the displacement of the servo setpoint over that slice divided by the slice duration, the setpoint being
the recorded path (smoothed over +-10 ms against mocap noise) plus the servo's lead (its velocity and acceleration
terms). The fine model's
pusher is slice-independent (core/models/fine.py), so it passes through the recorded pusher positions at every
slice boundary, not merely with the push's mean velocity. Object poses are compared with the record at every slice
boundary (the path error: mean over the boundaries) and at the last one (the final error); for several objects,
the mean over the objects.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..models.mjcf import PUSHER_OMEGA, SERVO_LEAD
from ..scene.spec import Scene, StartOverlapWarning
from ..scene.state import wrap_angle
from .recordings import Recording

STATS = ("mean", "median", "max")
PUSHER_SMOOTHING = 0.01  # s: half window of the moving average over the recorded pusher path


@dataclass
class ReplayCase:
    """One recording prepared for the models: the start state, the slice controls and the recorded poses."""

    recording: Recording
    dt: float
    times: np.ndarray  # (N+1,) s since the first row
    x0: np.ndarray  # (D,)
    controls: np.ndarray  # (N, 2) pusher velocities
    recorded_objects: np.ndarray  # (N+1, n, 3) at ``times``
    start_warning: str = ""


def start_scene(scene: Scene, rec: Recording) -> tuple[Scene, str]:
    """The scene with the recording's first row as its start, validated as a measured start: (scene, the text of a
    start-overlap warning or '')."""
    moved = scene.with_poses(pusher_start=rec.pusher[0], object_poses=rec.objects[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StartOverlapWarning)
        started = moved.revalidated(f"{rec.name} (first row)")
    text = "; ".join(str(w.message) for w in caught if issubclass(w.category, StartOverlapWarning))
    return started, text


def prepare(scene: Scene, rec: Recording, dt: float) -> ReplayCase:
    n = int(math.floor(rec.duration / dt + 1e-9))
    if n < 1:
        raise ValueError(f"{rec.name}: the recording lasts {rec.duration:.3f} s, shorter than one {dt} s slice")
    times = np.arange(n + 1) * dt
    _, objects = rec.at(times)
    started, warning = start_scene(scene, rec)
    L = scene.layout
    # command the servo setpoint that moves the pusher along the recorded path (the setpoint leads the pusher by
    # its velocity and acceleration terms), so the pusher itself passes through the recorded positions
    position, velocity, acceleration = smoothed_pusher(rec, times)
    controls = np.diff(servo_setpoint(position, velocity, acceleration), axis=0) / dt
    x0 = started.initial_state()
    L.pusher_vel(x0)[:] = velocity[0]  # objects start at rest
    objects = objects.copy()
    objects[0] = L.object_poses(x0)  # the projected start is the reference at t = 0
    return ReplayCase(rec, dt, times, x0, controls, objects, warning)


def smoothed_pusher(rec: Recording, t, half_window: float = PUSHER_SMOOTHING):
    """Recorded pusher (position, velocity, acceleration) at times ``t``: a moving average over +-``half_window``
    (mocap noise of 0.1 mm would otherwise be 10 mm/s of velocity noise at 10 ms control periods) and its central
    differences over the same window."""
    t = np.asarray(t, dtype=float)
    h = half_window

    def average(tc):
        window = np.clip(tc[:, None] + np.linspace(-h, h, 9), 0.0, rec.duration)
        return rec.at(window)[0].mean(axis=1)
    lo, hi = np.clip(t - h, 0.0, rec.duration), np.clip(t + h, 0.0, rec.duration)
    p_lo, p_mid, p_hi = average(lo), average(t), average(hi)
    velocity = (p_hi - p_lo) / np.maximum(hi - lo, 1e-9)[:, None]
    width = ((hi - t) * (t - lo))[:, None]
    acceleration = np.where(width > 0, 2.0 * ((p_hi - p_mid) * (t - lo)[:, None] - (p_mid - p_lo) *
                                            (hi - t)[:, None]) / np.maximum(width * (hi - lo)[:, None], 1e-12), 0.0)
    return p_mid, velocity, acceleration


def servo_setpoint(position, velocity, acceleration):
    """The setpoint that makes the fine model's critically damped servo (``m a + kv v = kp (s - p)`` in free
    motion) move the pusher along ``position``: ``p + 2 v / omega + a / omega^2``."""
    return position + SERVO_LEAD * velocity + acceleration / PUSHER_OMEGA ** 2


def pose_errors(layout, case: ReplayCase, states: np.ndarray) -> dict:
    """Translation (mm) and rotation (deg) errors along the path and at the end, mean over the objects."""
    pred = layout.object_poses(np.asarray(states))  # (N+1, n, 3)
    trans = np.linalg.norm(pred[..., :2] - case.recorded_objects[..., :2], axis=-1).mean(-1) * 1e3
    rot = np.degrees(np.abs(wrap_angle(pred[..., 2] - case.recorded_objects[..., 2]))).mean(-1)
    return {"final_trans_mm": float(trans[-1]), "final_rot_deg": float(rot[-1]),
            "path_trans_mm": float(trans[1:].mean()), "path_rot_deg": float(rot[1:].mean())}


def summarise(per_recording: list) -> dict:
    """{metric: {mean, median, max}} over recordings, for each metric of ``pose_errors``."""
    out = {}
    for key in ("final_trans_mm", "final_rot_deg", "path_trans_mm", "path_rot_deg"):
        v = np.array([r[key] for r in per_recording])
        out[key] = {"mean": float(v.mean()), "median": float(np.median(v)), "max": float(v.max())}
    return out


def replay(predictor, scene: Scene, cases: list, models, on_done=None) -> dict:
    """Run every model on every case: {model: [ {errors..., "states": (N+1, D)} per case ]}."""
    out = {m: [] for m in models}
    for case in cases:
        for m in models:
            pred = predictor.predict(case.x0, case.controls, case.dt, model=m)
            errors = pose_errors(scene.layout, case, pred.states)
            out[m].append({**errors, "states": pred.states})
            if on_done is not None:
                on_done()
    return out
