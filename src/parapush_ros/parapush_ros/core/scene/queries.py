"""Questions about states in a scene that the cost, the outcome monitor and the benchmarks all ask: how far every
body is from the obstacles, what has left the table, how far the target has to go round the obstacles.
"""
from __future__ import annotations

import numpy as np

from .geometry import TOUCH_DISTANCE, disc_penetration, pair_penetration  # noqa: F401 (TOUCH_DISTANCE: re-exported)
from .spec import Scene
from .state import wrap_angle


def obstacle_clearance(scene: Scene, states) -> tuple[np.ndarray, np.ndarray]:
    """Smallest outline clearance (m, < 0 when overlapping) to any obstacle of (objects (..., n), pusher (...)).

    ``inf`` where the scene has no obstacles.
    """
    L = scene.layout
    states = np.asarray(states, dtype=float)
    poses, pusher = L.object_poses(states), L.pusher_pos(states)
    objects = np.full(states.shape[:-1] + (L.n_objects,), np.inf)
    pusher_c = np.full(states.shape[:-1], np.inf)
    for ob in scene.obstacles:
        ob_pose = np.asarray(ob.pose, dtype=float)
        depth, _ = disc_penetration(pusher, scene.pusher.radius, ob.footprint, ob_pose)
        pusher_c = np.minimum(pusher_c, -depth)
        for i, o in enumerate(scene.objects):
            depth, _ = pair_penetration(ob.footprint, ob_pose, o.footprint, poses[..., i, :])
            objects[..., i] = np.minimum(objects[..., i], -depth)
    return objects, pusher_c


def off_table(scene: Scene, states, margin: float = 0.0) -> np.ndarray:
    """(..., n_objects) True where an object's centre lies outside the table shrunk by ``margin`` (the centre
    of mass past the edge is when a flat object tips over it)."""
    xy = scene.layout.object_poses(np.asarray(states, dtype=float))[..., :2]
    return np.any(np.abs(xy) > scene.table.half - margin, axis=-1)


def path_to_goal(scene: Scene, xy, goal, inflate: float):
    """Length of the shortest planar path from points ``xy`` (..., 2) to ``goal`` (2,) around the obstacles, each
    grown to a disc (bounding radius + ``inflate``), and the unit direction of its first leg.

    A blocked straight line becomes tangent - arc - tangent around the disc, on the shorter side; several
    blocking obstacles add their detours, and the first leg goes round the one the straight line meets first. A
    disc that would hold the goal is shrunk to pass through it. Points inside a grown disc count as on its rim for
    the length, and their first leg also turns outward, the more the deeper they are. Without this the squared goal
    distance of paper 000 has a local minimum in front of an obstacle that lies on the line to the goal: every push
    toward the goal ends closer to the obstacle, every detour first increases the distance.
    """
    xy = np.asarray(xy, dtype=float)
    g = np.asarray(goal, dtype=float)
    to_goal = g - xy
    straight = np.linalg.norm(to_goal, axis=-1)
    direction = to_goal / np.maximum(straight, 1e-12)[..., None]
    straight_dir = direction
    length = straight.copy()
    first_met = np.full(straight.shape, np.inf)  # along the straight line: the blocking obstacle met first
    for ob in scene.obstacles:
        c = np.asarray(ob.pose[:2], dtype=float)
        # a goal inside the grown disc shrinks it to pass through the goal: the target has to get that close to
        # reach it, and a disc round the goal would count every path to it as blocked (and jump with the side)
        R = min(ob.footprint.bounding_radius + inflate, max(float(np.linalg.norm(c - g)), 1e-9))
        pc = c - xy
        dp = np.maximum(np.linalg.norm(pc, axis=-1), R)
        dg = max(float(np.linalg.norm(c - g)), R)
        # blocked when the segment xy -> goal passes closer than R to the centre (and the centre lies between)
        along = np.einsum("...d,...d->...", pc, straight_dir)
        s = np.clip(along, 0.0, straight)
        closest = xy + straight_dir * s[..., None]
        ahead = along > 0.0  # inside a disc and moving away: free
        blocked = (np.linalg.norm(closest - c, axis=-1) < R - 1e-12) & ahead
        # angle at the centre between the point and the goal, minus the parts covered by the tangents
        a_p = np.arctan2(xy[..., 1] - c[1], xy[..., 0] - c[0])
        a_g = np.arctan2(g[1] - c[1], g[0] - c[0])
        sweep = np.abs(wrap_angle(a_g - a_p))
        arc = np.maximum(sweep - np.arccos(np.minimum(R / dp, 1.0)) - np.arccos(min(R / dg, 1.0)), 0.0)
        around = np.sqrt(np.maximum(dp ** 2 - R ** 2, 0.0)) + np.sqrt(max(dg ** 2 - R ** 2, 0.0)) + R * arc
        detour = np.where(blocked, np.maximum(around - straight, 0.0), 0.0)
        length = length + detour
        # first leg: tangent to the disc on the goal's side of the line point -> centre
        side = np.sign(pc[..., 0] * (g[1] - xy[..., 1]) - pc[..., 1] * (g[0] - xy[..., 0]))
        side = np.where(side == 0.0, 1.0, side)
        half = np.arcsin(np.minimum(R / dp, 1.0))
        # inside the grown disc the tangent would keep the point as close as it is: turn it outward as well
        deficit = np.maximum(R - np.linalg.norm(pc, axis=-1), 0.0)
        half = half + np.minimum(np.pi / 3, 2.0 * np.pi * deficit / R)
        ang = np.arctan2(pc[..., 1], pc[..., 0]) + side * half
        tangent = np.stack([np.cos(ang), np.sin(ang)], axis=-1)
        # the first leg goes round the obstacle the straight line meets first (the largest detour's tangent could
        # lead through a nearer one)
        use = blocked & (detour > 0.0) & (along < first_met)
        direction = np.where(use[..., None], tangent, direction)
        first_met = np.where(use, along, first_met)
    return length, direction
