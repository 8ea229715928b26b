"""Sim-made recordings: random pushes simulated continuously and sampled like a mocap system.

A push is simulated by ``SimWorld`` (the fine model's MuJoCo world with the state carried across steps, as the
``mujoco_sim`` node runs it; no slicing at all), from a pusher 1 mm behind a random point of a random face of the
first object, along the face normal turned by up to 20 deg, at a random speed, for a set length; half of the pushes
end with a short fast stroke (0.25 m/s for 0.1 s) after which the object slides on by itself (the only place the
object–table friction shows: a quasi-static push does not depend on it). Poses are
sampled at ``rate`` with Gaussian noise, like mocap. Such recordings made in a world with known, perturbed physics
are the test of ``parapush replay`` and ``parapush calibrate``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..scene.convex import OUTLINE_SHAPES
from ..scene.spec import Scene
from ..sim.world import SimWorld
from .recordings import Recording

STROKE_SPEED = 0.25  # m/s: the final fast stroke of a sliding push
STROKE_TIME = 0.1  # s
SETTLE_TIME = 0.4  # s of recording after the pusher stops


@dataclass
class PushPlan:
    start: np.ndarray  # (D,) planar state
    segments: list  # [(duration s, vx, vy)], pusher velocity held for each


def random_push_plans(scene: Scene, count: int, seed: int = 0, speed=(0.02, 0.07), length: float = 0.05,
                      slide_share: float = 0.5) -> list:
    """``count`` random pushes of the scene's first object from its start position (random yaw); a polygon or an
    ellipse is pushed at a random point of a random edge of its outline, along the edge's normal."""
    rng = np.random.default_rng(seed)
    obj = scene.objects[0]
    L = scene.layout
    plans = []
    for _ in range(count):
        yaw = rng.uniform(-math.pi, math.pi)
        if obj.shape in OUTLINE_SHAPES:  # a random edge (for an ellipse: of its polygon)
            edge = int(rng.integers(len(obj.vertices)))
        else:
            bearing = rng.integers(4) * math.pi / 2 if obj.shape == "box" else rng.uniform(-math.pi, math.pi)
        offset = rng.uniform(-0.7, 0.7)
        if obj.shape in OUTLINE_SHAPES:  # at a random point of the edge, 1 mm off it along its normal
            fp = obj.footprint
            a, b = fp.vertices[edge], fp.vertices[(edge + 1) % len(fp.vertices)]
            n = fp.normals[edge]
            bearing = math.atan2(n[1], n[0])
            local = (a + b) / 2 + (b - a) / 2 * offset + n * (scene.pusher.radius + 1e-3)
        elif obj.shape == "box":  # the face whose outward normal points along ``bearing`` (object frame)
            half_depth = obj.size[0] / 2 if int(round(bearing / (math.pi / 2))) % 2 == 0 else obj.size[1] / 2
            half_width = obj.size[1] / 2 if int(round(bearing / (math.pi / 2))) % 2 == 0 else obj.size[0] / 2
            lateral = offset * half_width
            contact_dist = half_depth + scene.pusher.radius + 1e-3
            local = np.array([math.cos(bearing), math.sin(bearing)]) * contact_dist + \
                np.array([-math.sin(bearing), math.cos(bearing)]) * lateral
        else:
            lateral = offset * obj.radius
            reach = obj.radius + scene.pusher.radius + 1e-3
            local = np.array([math.cos(bearing), math.sin(bearing)]) * math.sqrt(reach ** 2 - lateral ** 2) + \
                np.array([-math.sin(bearing), math.cos(bearing)]) * lateral
        c, s = math.cos(yaw), math.sin(yaw)
        rot = np.array([[c, -s], [s, c]])
        pusher = np.asarray(obj.pose[:2]) + rot @ local
        heading = yaw + bearing + math.pi + rng.uniform(-1.0, 1.0) * math.radians(20.0)  # towards the object
        direction = np.array([math.cos(heading), math.sin(heading)])
        v = rng.uniform(*speed)
        duration = round(length / v, 2)
        segments = [(duration, *(v * direction))]
        if rng.uniform() < slide_share:
            segments.append((STROKE_TIME, *(STROKE_SPEED * direction)))
        segments.append((SETTLE_TIME, 0.0, 0.0))
        poses = np.array([o.pose for o in scene.objects], dtype=float)
        poses[0, 2] = yaw
        plans.append(PushPlan(L.compose(pusher, poses), segments))
    return plans


def simulate(scene: Scene, plan: PushPlan, name: str, rate: float = 100.0, position_noise: float = 0.0,
             yaw_noise: float = 0.0, seed: int = 0) -> Recording:
    """Run one plan continuously and sample the poses at ``rate`` (Hz) with Gaussian noise (m, rad)."""
    sim = SimWorld(scene)
    try:
        sim.reset(plan.start)
        L = scene.layout
        steps_per_sample = int(round(1.0 / rate / 0.001))
        if steps_per_sample < 1 or abs(steps_per_sample * 0.001 * rate - 1.0) > 1e-9:
            raise ValueError(f"rate {rate} Hz must divide the 1 kHz physics rate")
        samples = []

        def sample():
            x = sim.planar_state()
            samples.append((sim.time, *L.pusher_pos(x), *L.object_poses(x).ravel()))
        t0 = sim.time
        sample()
        for duration, vx, vy in plan.segments:
            sim.set_velocity(vx, vy)
            for _ in range(int(round(duration * rate))):
                sim.step(steps_per_sample)
                sample()
        data = np.array(samples)
    finally:
        sim.close()
    rng = np.random.default_rng(seed)
    n = len(scene.objects)
    objects = data[:, 3:].reshape(len(data), n, 3)
    pusher = data[:, 1:3] + rng.normal(0.0, position_noise, (len(data), 2))
    objects[..., :2] += rng.normal(0.0, position_noise, objects[..., :2].shape)
    objects[..., 2] += rng.normal(0.0, yaw_noise, objects[..., 2].shape)
    return Recording(name=name, times=data[:, 0] - t0, pusher=pusher, objects=objects)


def session(pushes: list, rate: float = 100.0, noise: float = 1e-4, seed: int = 0,
            rest=(0.25, 0.3)) -> tuple[Recording, np.ndarray]:
    """``pushes`` (recordings at ``rate``) back to back as a person records a session in one bag, the test of
    ``recordings.split_pushes``: after each push the pusher backs off to ``rest`` (table frame, 1 s), a hand sets
    the objects to the next push's start (0.6 s; the middle 0.3 s with their markers covered) and the pusher goes
    to the next start (1 s). Between pushes the motion is drawn, not simulated. Returns (the session, (T,) True
    where the objects' markers are covered)."""
    rng = np.random.default_rng(seed)
    rest = np.asarray(rest, dtype=float)
    pusher, objects, covered = [], [], []

    def add(p, o, hidden=False):
        pusher.append(p + rng.normal(0.0, noise, 2))
        objects.append(o + np.concatenate([rng.normal(0.0, noise, (len(o), 2)), np.zeros((len(o), 1))], 1))
        covered.append(hidden)
    for i, rec in enumerate(pushes):
        for k in range(len(rec.times)):
            add(rec.pusher[k], rec.objects[k])
        if i + 1 == len(pushes):
            break
        end, nxt = rec.objects[-1], pushes[i + 1]
        for f in np.linspace(0.0, 1.0, int(rate)):
            add(rec.pusher[-1] + f * (rest - rec.pusher[-1]), end)
        for f in np.linspace(0.0, 1.0, int(0.6 * rate)):
            add(rest, end + f * (nxt.objects[0] - end), 0.15 < f < 0.65)
        for f in np.linspace(0.0, 1.0, int(rate)):
            add(rest + f * (nxt.pusher[0] - rest), nxt.objects[0])
    return (Recording("session", np.arange(len(pusher)) / rate, np.array(pusher), np.array(objects)),
            np.array(covered))
