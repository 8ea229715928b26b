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
from scipy import sparse
from scipy.linalg import expm
from scipy.sparse.linalg import spsolve

from ..models.mjcf import PUSHER_OMEGA, SERVO_LEAD
from ..scene.spec import Scene, StartOverlapWarning
from ..scene.state import wrap_angle
from .recordings import Recording

STATS = ("mean", "median", "max")
SERVO_JUMP_WEIGHT = 1e-5  # m per m/s: L1 weight of a change of the reconstructed command (``servo_commands``)
SERVO_JUMP_MIN = 0.005  # m/s: a smaller change of the reconstructed command is mocap noise, not a command
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


def prepare(scene: Scene, rec: Recording, dt: float, invert_servo: bool = False) -> ReplayCase:
    """One recording as slices of ``dt``. The controls command the servo setpoint that moves the pusher along the
    recorded path (the setpoint leads the pusher by its velocity and acceleration terms), so the pusher itself
    passes through the recorded positions; ``invert_servo`` (for a continuous rollout: calibration) takes them
    from ``servo_commands`` instead, so the pusher also brakes and turns as recorded within a period."""
    n = int(math.floor(rec.duration / dt + 1e-9))
    if n < 1:
        raise ValueError(f"{rec.name}: the recording lasts {rec.duration:.3f} s, shorter than one {dt} s slice")
    times = np.arange(n + 1) * dt
    pusher, objects = rec.at(times)
    started, warning = start_scene(scene, rec)
    L = scene.layout
    if invert_servo:
        controls, v0 = servo_commands(pusher, dt)
    else:
        position, velocity, acceleration = smoothed_pusher(rec, times)
        controls = np.diff(servo_setpoint(position, velocity, acceleration), axis=0) / dt
        v0 = velocity[0]
    x0 = started.initial_state()
    L.pusher_vel(x0)[:] = v0  # objects start at rest
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


def servo_commands(position: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The piecewise-constant setpoint velocities (one per period ``dt``) under which the fine model's servo moves
    the pusher through the recorded ``position`` samples (``(N+1, 2)`` at times ``k dt``): (controls ``(N, 2)``,
    the pusher's start velocity ``(2,)``).

    Why not ``servo_setpoint``: its finite differences smear an abrupt stop over the smoothing window, so the
    replayed pusher brakes too gently, the object stays in contact and slides less afterwards; a calibration then
    reads that as a lower object–table friction (0.44 fitted for 0.8). Here the servo is inverted exactly instead:
    the free servo (``p'' = omega^2 (s - p) - 2 omega p'``, ``s' = u``) discretised exactly per period, fitted
    to the samples by least squares under the prior of a robot's command: few jumps (an L1 penalty on the changes
    of ``u`` by reweighted least squares, ``SERVO_JUMP_WEIGHT``), then refitted without shrinking the jumps it
    found (changes above ``SERVO_JUMP_MIN``), and the setpoint starting at its steady lead ``p + 2 v / omega``."""
    position = np.asarray(position, dtype=float)
    N = len(position) - 1
    if N < 2:
        raise ValueError(f"servo_commands: need at least 3 samples, got {N + 1}")
    w = PUSHER_OMEGA
    A = np.array([[0.0, 1.0, 0.0, 0.0], [-w * w, -2.0 * w, w * w, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0] * 4])
    step = expm(A * dt)  # state (p, v, s) and the held input u
    Ad, Bd = step[:3, :3], step[:3, 3]
    # Unknowns: every period's servo state x_k = (p, v, s), k = 0..N, then u_0 .. u_{N-1}; the exact dynamics
    # x_{k+1} = Ad x_k + Bd u_k as equality constraints. Sparse and banded: O(N) per solve, where eliminating the
    # states (each position a dense row of all earlier commands) made it O(N^3): minutes for a push of 10 s.
    nx = 3 * (N + 1)
    dynamics = sparse.hstack([sparse.kron(sparse.eye(N, N + 1, k=1), np.eye(3))
                              - sparse.kron(sparse.eye(N, N + 1), Ad),
                              sparse.kron(sparse.eye(N), -Bd[:, None])])
    observe = sparse.hstack([sparse.kron(sparse.eye(N + 1), np.array([[1.0, 0.0, 0.0]])),
                             sparse.csr_matrix((N + 1, N))])
    jumps = sparse.hstack([sparse.csr_matrix((N - 1, nx)), sparse.eye(N - 1, N, k=1) - sparse.eye(N - 1, N)])
    # s0 = p0 + 2 v0 / omega
    lead = sparse.csr_matrix(([-1.0, -SERVO_LEAD, 1.0], ([0, 0, 0], [0, 1, 2])), shape=(1, nx + N))
    fixed = observe.T @ observe + lead.T @ lead

    def solve(weights, y):
        """The least-squares fit (positions, weighted command changes, the start's lead) under the dynamics."""
        kkt = sparse.bmat([[fixed + jumps.T @ sparse.diags(weights) @ jumps, dynamics.T], [dynamics, None]],
                          format="csc")
        return spsolve(kkt, np.concatenate([observe.T @ y, np.zeros(3 * N)]))[:nx + N]
    controls, v0 = np.empty((N, 2)), np.empty(2)
    for axis in range(2):
        y = position[:, axis]
        weights = np.full(N - 1, SERVO_JUMP_WEIGHT)
        for _ in range(20):  # iteratively reweighted least squares: sum of weights * du^2 ~ L1 of du
            z = solve(weights, y)
            weights = SERVO_JUMP_WEIGHT / np.maximum(np.abs(jumps @ z), 1e-4)
        z = solve(np.where(np.abs(jumps @ z) > SERVO_JUMP_MIN, 0.0, 1e3), y)  # the jumps found, unshrunk
        controls[:, axis], v0[axis] = z[nx:], z[1]
    return controls, v0


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


NO_MOTION = "no_motion"  # the baseline of a replay: every object stays where it starts


def no_motion_states(case: ReplayCase) -> np.ndarray:
    """The no-motion prediction (N+1, D): the start state at every slice boundary (any model worth its cost beats
    it)."""
    return np.repeat(case.x0[None], len(case.times), 0)


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
