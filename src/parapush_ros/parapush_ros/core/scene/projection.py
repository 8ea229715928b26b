"""Projection of infeasible (interpenetrating) states to the nearest feasible pose (paper 000, eq. 9).

Parareal corrections and coarse models can leave the pusher inside an object, or two objects overlapping.
Contact dynamics is undefined there, and the fine model would start with a violent, unphysical separation.
Each penetrating object is moved along the contact normal by the penetration depth, which is the minimum-norm
translation for a disc against a convex outline (and for two rectangles along the separating axis). The pusher
is commanded, so it never moves; obstacles are fixed; two objects are separated by half the depth each.
Penetrations up to ``tolerance`` are left alone: MuJoCo itself keeps ~0.7 mm of steady penetration while pushing,
and contact amplifies sub-millimetre nudges into centimetres of difference.
"""
from __future__ import annotations

import numpy as np

from .geometry import TOUCH_DISTANCE, disc_penetration, pair_penetration
from .spec import Scene

DEFAULT_PROJECTION_TOLERANCE = 1.0e-3  # m; see the module docstring


def project_feasible(scene: Scene, x, tolerance: float = DEFAULT_PROJECTION_TOLERANCE, sweeps: int = 12):
    """Return (projected copy of the states ``x`` (..., D), boolean mask (...) of states that were changed)."""
    if tolerance < 1.0e-3:
        raise ValueError(f"projection tolerance {tolerance} m is below 1 mm: contact makes that meaningless")
    return _separate(scene, x, tolerance, sweeps)


def separate_completely(scene: Scene, x, sweeps: int = 12):
    """Project *every* penetration out (tolerance 0): for a measured start state, whose sub-millimetre overlaps are
    mocap noise that would otherwise start the fine model with a spurious shove (``load_scene``). Objects end at
    least the contact tolerance from obstacles (closer, the outcome monitor judges the start itself a hit)."""
    return _separate(scene, x, 0.0, sweeps, obstacle_gap=TOUCH_DISTANCE * (1.0 + 1e-6))


def _separate(scene: Scene, x, tolerance: float, sweeps: int, obstacle_gap: float = 0.0):
    L = scene.layout
    x = np.array(x, dtype=float, copy=True)
    changed = np.zeros(x.shape[:-1], dtype=bool)
    poses = L.object_poses(x)  # view into x
    pusher = L.pusher_pos(x)
    feet = [o.footprint for o in scene.objects]
    bounds = np.array([f.bounding_radius for f in feet])
    obstacles = [(ob.footprint, np.asarray(ob.pose), ob.footprint.bounding_radius) for ob in scene.obstacles]
    pairs = [(i, j) for i in range(len(feet)) for j in range(i + 1, len(feet))]

    def centres():
        return poses[..., :2].reshape(-1, len(feet), 2)

    def near_pairs():
        c = centres()
        apart = np.linalg.norm(c[:, :, None] - c[:, None, :], axis=-1)  # (B, n, n)
        return np.any(apart <= bounds[:, None] + bounds[None, :] + tolerance + 1e-9, axis=0)

    for _ in range(sweeps):
        moved_any = False
        # broad phase: bounding circles that no state overlaps cannot penetrate (most pairs, most of the time);
        # the narrow tests run for every state of the pairs left, on the poses as they are then, so the result
        # is the same as testing every pair
        near_pusher = np.any(np.linalg.norm(centres() - pusher.reshape(-1, 1, 2), axis=-1)
                             <= bounds + scene.pusher.radius + tolerance + 1e-9, axis=0)
        for i, f in enumerate(feet):
            if near_pusher[i]:
                depth, n = disc_penetration(pusher, scene.pusher.radius, f, poses[..., i, :])
                hit = depth > tolerance
                if np.any(hit):
                    poses[..., i, :2] -= np.where(hit[..., None], n * depth[..., None], 0.0)
                    changed |= hit
                    moved_any = True
            for of, op, ob_bound in obstacles:
                if not np.any(np.linalg.norm(poses[..., i, :2] - op[:2], axis=-1)
                              <= ob_bound + bounds[i] + tolerance + obstacle_gap + 1e-9):
                    continue
                depth, n = pair_penetration(of, op, f, poses[..., i, :])
                depth = depth + obstacle_gap
                hit = depth > tolerance
                if np.any(hit):
                    poses[..., i, :2] += np.where(hit[..., None], n * depth[..., None], 0.0)
                    changed |= hit
                    moved_any = True
        near = near_pairs() if pairs else None
        for i, j in pairs:
            if not near[i, j]:
                continue
            depth, n = pair_penetration(feet[i], poses[..., i, :], feet[j], poses[..., j, :])
            hit = depth > tolerance
            if np.any(hit):
                shift = np.where(hit[..., None], 0.5 * n * depth[..., None], 0.0)
                poses[..., i, :2] -= shift
                poses[..., j, :2] += shift
                changed |= hit
                moved_any = True
                near = near_pairs()  # the shift may bring i or j near an object further on
        if not moved_any:
            break
    return x, changed


def max_penetration(scene: Scene, x) -> np.ndarray:
    """Deepest pusher–object or object–object penetration (m) per state; <= 0 means feasible."""
    L = scene.layout
    x = np.asarray(x, dtype=float)
    poses, pusher = L.object_poses(x), L.pusher_pos(x)
    feet = [o.footprint for o in scene.objects]
    worst = np.full(x.shape[:-1], -np.inf)
    for i, f in enumerate(feet):
        worst = np.maximum(worst, disc_penetration(pusher, scene.pusher.radius, f, poses[..., i, :])[0])
        for j in range(i + 1, len(feet)):
            worst = np.maximum(worst, pair_penetration(f, poses[..., i, :], feet[j], poses[..., j, :])[0])
    return worst


def deepest_penetration(scene: Scene, x) -> tuple[float, str]:
    """The deepest penetration of one state (m; <= 0 feasible) and what it is, naming the bodies ("the pusher inside
    'slider'"): a measured state that deep is a calibration error to report, not noise to project away."""
    L = scene.layout
    x = np.asarray(x, dtype=float)
    poses, pusher = L.object_poses(x), L.pusher_pos(x)
    worst, what = -np.inf, ""
    for i, ob in enumerate(scene.objects):
        f = ob.footprint
        pairs = [(disc_penetration(pusher, scene.pusher.radius, f, poses[i])[0], f"the pusher inside {ob.name!r}")]
        pairs += [(pair_penetration(o.footprint, np.asarray(o.pose), f, poses[i])[0],
                   f"{ob.name!r} inside obstacle {o.name!r}") for o in scene.obstacles]
        pairs += [(pair_penetration(f, poses[i], other.footprint, poses[j])[0], f"{ob.name!r} inside {other.name!r}")
                  for j, other in enumerate(scene.objects) if j > i]
        for depth, text in pairs:
            if float(depth) > worst:
                worst, what = float(depth), text
    for o in scene.obstacles:  # the pusher inside an obstacle is as much a calibration error
        depth = float(disc_penetration(pusher, scene.pusher.radius, o.footprint, np.asarray(o.pose))[0])
        if depth > worst:
            worst, what = depth, f"the pusher inside obstacle {o.name!r}"
    return worst, what
