"""A scripted demonstrator: pushes made the way a person drives the pusher, on the quasi-static model.

Paper 003's demonstrations were human pushes through a teleoperation interface. Here a push is a short list of
decisions a person makes (push this face at this offset for so long, then go round to that face) and a
velocity-servoed pusher carries them out on the quasi-static model: the pusher accelerates towards the commanded
velocity (time constant ``TAU``, acceleration limit ``A_MAX``), goes round the box in separation (clear of its
corners) to change face, and pushes. The recording (states, velocities, accelerations) is a ``Demonstration``.

``make_library`` draws random decision lists (0, 1 or 2 face switches), keeps the pushes that end in the task
space, and picks a spread-out subset (farthest-point sampling in the k-NN metric), always including one push of
each switch count; ``parapush demos`` writes it to ``config/demonstrations/<scene>/``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .demonstrations import Demonstration, pose_distance

TAU = 0.1  # s: the pusher's velocity servo time constant
A_MAX = 0.8  # m/s^2: the pusher's acceleration limit (inside DDP's soft control box)
CLEARANCE = 0.02  # m: how far outside the box (beyond the pusher radius) the pusher goes round it
SWITCH_SPEED = 0.2  # m/s


@dataclass(frozen=True)
class Push:
    face: int  # 0..3 = slider -x, -y, +x, +y
    offset: float  # contact offset along the face (m, face-frame y)
    heading: float  # push direction relative to the face normal (rad, towards face-frame +y)
    speed: float  # m/s
    duration: float  # s


@dataclass(frozen=True)
class Switch:
    face: int
    offset: float


def _rot(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s], [s, c]])


def _switch_waypoints(model, x, face_from, face_to, offset):
    """World-frame waypoints from the pusher's position round the box to touching ``face_to`` at ``offset``."""
    s, th = x[:2], x[2]
    R = _rot(th)
    half = np.asarray(model.size) / 2.0
    rel = R.T @ (x[3:5] - s)
    normal_out = -_rot(face_from * np.pi / 2) @ np.array([1.0, 0.0])  # outward normal of the current face
    pts = [rel + 0.015 * normal_out]
    ccw = (face_to - face_from) % 4
    steps = ccw if ccw <= 2 else ccw - 4
    clear = model.pusher_radius + CLEARANCE
    f = face_from
    for _ in range(abs(steps)):
        corner_face = f if steps > 0 else (f - 1) % 4  # the corner between corner_face and corner_face + 1
        alpha = np.pi + (corner_face + 0.5) * np.pi / 2
        sx, sy = np.sign(np.cos(alpha)), np.sign(np.sin(alpha))
        pts.append(np.array([sx * (half[0] + clear), sy * (half[1] + clear)]))
        f = (f + (1 if steps > 0 else -1)) % 4
    contact = model.contact_state(face_to, offset)
    n_to = -_rot(face_to * np.pi / 2) @ np.array([1.0, 0.0])
    pts += [contact + 0.012 * n_to, contact + 0.001 * n_to]
    return [s + R @ p for p in pts]


def perform(model, phases, steps: int, start_face: int = 0, start_offset: float = 0.0, x0=None):
    """Carry out ``phases`` (Push / Switch) from the slider at the origin and the pusher 1 mm off ``start_face``
    (or from state ``x0``, the pusher nearest to ``start_face``); rest after the last phase. Returns
    (X (steps+1, 7), U (steps, 2))."""
    dt = model.dt
    if x0 is None:
        x = np.zeros(7)
        x[3:5] = model.contact_state(start_face, start_offset) * (1.0 + 0.001 / 0.06)
    else:
        x = np.asarray(x0, dtype=float).copy()
    X, U = [x], []
    face = start_face
    queue = list(phases)
    phase, t_phase, waypoints = None, 0.0, []
    for _ in range(steps):
        if phase is None and queue:
            phase, t_phase = queue.pop(0), 0.0
            if isinstance(phase, Switch):
                waypoints = _switch_waypoints(model, x, face, phase.face, phase.offset)
        v_cmd = np.zeros(2)
        if isinstance(phase, Push):
            face = phase.face
            v_cmd = phase.speed * (_rot(x[2] + face * np.pi / 2 + phase.heading) @ np.array([1.0, 0.0]))
            t_phase += dt
            if t_phase >= phase.duration - 1e-9:
                phase = None
        elif isinstance(phase, Switch):
            to = waypoints[0] - x[3:5]
            dist = np.linalg.norm(to)
            last = len(waypoints) == 1
            if dist < (0.001 if last else 0.008):
                waypoints.pop(0)
                if not waypoints:
                    face, phase = phase.face, None
            else:
                speed = min(SWITCH_SPEED, dist / 0.08) if last else SWITCH_SPEED
                v_cmd = speed * to / dist
        u = np.clip((v_cmd - x[5:7]) / TAU, -A_MAX, A_MAX)
        x = model.step(x[None], u[None])[0]
        X.append(x)
        U.append(u)
    return np.array(X), np.array(U)


def random_phases(rng, model, switches: int) -> list:
    """A random push plan with ``switches`` face changes, starting on face 0 (where the pusher starts)."""
    phases = []
    face = 0
    for i in range(switches + 1):
        if i > 0:
            face = int((face + rng.choice([-1, 1, 2])) % 4)
        _, w = model.face_half(face)
        offset = float(rng.uniform(-0.6, 0.6) * w)
        if i > 0:
            phases.append(Switch(face, offset))
        phases.append(Push(face, offset, float(rng.uniform(-0.3, 0.3)), float(rng.uniform(0.05, 0.1)),
                           float(rng.uniform(0.8, 3.0) / (switches + 1))))
    return phases


def make_library(model, count: int, steps: int, seed: int = 0, region: float = 0.2, candidates: int = 300,
                 scene: str = "", command: str = "") -> list[Demonstration]:
    """``count`` spread-out demonstrations (at least one of 0, 1 and 2 face switches) ending within ``region`` m
    of the start in x and y."""
    rng = np.random.default_rng(seed)
    pool = []
    for i in range(candidates):
        switches = i % 3
        phases = random_phases(rng, model, switches)
        X, U = perform(model, phases, steps)
        if np.all(np.abs(X[-1, :2]) <= region) and model.penetration(X).max() < 1e-3 \
                and np.abs(X[-1, 5:7]).max() < 1e-3:
            pool.append((switches, phases, X, U))
    if len(pool) < count:
        raise ValueError(f"demonstrations: only {len(pool)} candidate pushes ended in the task space")
    finals = np.stack([p[2][-1, :3] for p in pool])
    chosen = []
    for sw in range(3):  # one of each switch count first: the farthest from the start
        idx = [i for i, p in enumerate(pool) if p[0] == sw]
        chosen.append(max(idx, key=lambda i: pose_distance(finals[i], np.zeros(3))))
    while len(chosen) < count:
        d = np.min(pose_distance(finals[:, None], finals[chosen][None]), axis=1)
        chosen.append(int(np.argmax(d)))
    demos = []
    for n, i in enumerate(chosen):
        sw, phases, X, U = pool[i]
        demos.append(Demonstration(name=f"demo_{n:02d}_{sw}switch", dt=model.dt, X=X, U=U, face_switches=sw,
                                   scene=scene, source=f"scripted demonstrator: {command}",
                                   meta={"phases": [{"kind": type(p).__name__.lower(), **p.__dict__}
                                                    for p in phases]}))
    return demos
