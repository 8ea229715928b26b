"""Questions about states in a scene that the cost, the outcome monitor and the benchmarks all ask: how far every
body is from the obstacles, what has left the table, how far the target has to go round the obstacles.
"""
from __future__ import annotations

import numpy as np

from .geometry import disc_penetration, pair_penetration
from .spec import Scene
from .state import wrap_angle

# m: outlines closer than this touch (MuJoCo keeps ~0.7 mm of penetration in contact): an obstacle hit for the
# outcome monitor, a collision for the cost
TOUCH_DISTANCE = 1.0e-3


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


def path_to_goal(scene: Scene, xy, goal, inflate: float, discs=(), disc_weight: float = 1.0):
    """Length of the shortest planar path from points ``xy`` (..., 2) to ``goal`` (2,) around the obstacles, each
    grown to a disc (bounding radius + ``inflate``), and the unit direction of its first leg.

    A blocked straight line becomes tangent - arc - tangent around the disc, on the shorter side; several
    blocking obstacles add their detours. Points inside a grown disc count as on its rim for the length, and
    their first leg also turns outward, the more the deeper they are. Without this the squared goal distance of
    paper 000 has a local minimum in front of an obstacle that lies on the line to the goal: every push toward
    the goal ends closer to the obstacle, every detour first increases the distance.

    ``discs``: more discs in the way, each ``(centres, radius)`` with ``centres`` (..., 2) broadcastable to ``xy``
    (already grown): the other objects of the multi-object task where each state has them, which the target can
    push aside but should rather go round. Their detours count ``disc_weight`` times (0: not at all). Grown discs
    that overlap leave the target no way between them: such a group counts as one disc enclosing them all
    (``merge_overlapping``), else the path would lead round one into the next.
    """
    xy = np.asarray(xy, dtype=float)
    g = np.asarray(goal, dtype=float)
    to_goal = g - xy
    straight = np.linalg.norm(to_goal, axis=-1)
    direction = to_goal / np.maximum(straight, 1e-12)[..., None]
    length = straight.copy()
    best_detour = np.zeros(straight.shape)
    around = [(np.asarray(ob.pose[:2], dtype=float), ob.footprint.bounding_radius + inflate, 1.0)
              for ob in scene.obstacles]
    if disc_weight > 0.0 and len(discs):
        centres, radii, alive = merge_overlapping(
            [np.broadcast_to(np.asarray(c, dtype=float), xy.shape) for c, _ in discs],
            [np.full(xy.shape[:-1], float(r)) for _, r in discs])
        around += [(c, R, disc_weight * a) for c, R, a in zip(centres, radii, alive)]
    for c, R, weight in around:
        pc = c - xy
        dp = np.maximum(np.linalg.norm(pc, axis=-1), R)
        dg = np.maximum(np.linalg.norm(c - g, axis=-1), R)
        # blocked when the segment xy -> goal passes closer than R to the centre (and the centre lies between)
        s = np.clip(np.einsum("...d,...d->...", pc, direction), 0.0, straight)
        closest = xy + direction * s[..., None]
        ahead = np.einsum("...d,...d->...", pc, direction) > 0.0  # inside a disc and moving away: free
        blocked = (np.linalg.norm(closest - c, axis=-1) < R) & ahead
        # angle at the centre between the point and the goal, minus the parts covered by the tangents
        a_p = np.arctan2(xy[..., 1] - c[..., 1], xy[..., 0] - c[..., 0])
        a_g = np.arctan2(g[1] - c[..., 1], g[0] - c[..., 0])
        sweep = np.abs(wrap_angle(a_g - a_p))
        arc = np.maximum(sweep - np.arccos(np.minimum(R / dp, 1.0)) - np.arccos(np.minimum(R / dg, 1.0)), 0.0)
        path_round = np.sqrt(np.maximum(dp ** 2 - R ** 2, 0.0)) + np.sqrt(np.maximum(dg ** 2 - R ** 2, 0.0)) + R * arc
        detour = weight * np.where(blocked, np.maximum(path_round - straight, 0.0), 0.0)
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
        use = blocked & (detour > best_detour)
        direction = np.where(use[..., None], tangent, direction)
        best_detour = np.where(use, detour, best_detour)
    return length, direction


def enclosing_disc(c1, r1, c2, r2):
    """Centre and radius of the smallest disc holding the discs (c1, r1) and (c2, r2), elementwise."""
    d = np.linalg.norm(c2 - c1, axis=-1)
    r = np.maximum((d + r1 + r2) / 2.0, np.maximum(r1, r2))
    unit = (c2 - c1) / np.maximum(d, 1e-12)[..., None]
    centre = c1 + unit * (r - r1)[..., None]  # r - r1 along the line from c1 to c2 (0 when disc 1 holds disc 2)
    centre = np.where(((r2 > r1) & (r2 >= d + r1))[..., None], c2, centre)  # disc 2 holds disc 1
    return centre, r


def merge_overlapping(centres, radii):
    """Discs (lists of (..., 2) centres and (...) radii, per state) with every group of overlapping ones replaced by
    one disc enclosing the group: ``(centres, radii, alive)``, where a merged group lives on in its first disc and
    ``alive`` is 1.0 for the discs that remain and 0.0 for those merged away."""
    centres, radii = [np.array(c) for c in centres], [np.array(r) for r in radii]
    alive = [np.ones(r.shape, dtype=bool) for r in radii]
    k = len(radii)
    for _ in range(max(k - 1, 0)):  # a merged disc may reach a third: as many passes as merges can chain
        for i in range(k):
            for j in range(i + 1, k):
                touch = alive[i] & alive[j] & (np.linalg.norm(centres[j] - centres[i], axis=-1) < radii[i] + radii[j])
                if touch.any():
                    c, r = enclosing_disc(centres[i], radii[i], centres[j], radii[j])
                    centres[i] = np.where(touch[..., None], c, centres[i])
                    radii[i] = np.where(touch, r, radii[i])
                    alive[j] = alive[j] & ~touch
    return centres, radii, [a.astype(float) for a in alive]
