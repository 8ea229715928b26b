"""A disturbance mid-push: the pushed object shoved by a hand, 2-4 cm unless set (``parapush bench mpc --shove``).

``draw_shove(seed, index)`` draws, per seed and scene index, when (``SHOVE_WINDOW`` s after the push starts), how far
(``SHOVE_DISTANCE`` m, issue 29's 2-4 cm, which leaves the target in the pusher's way; ``distance`` sets another
range, e.g. one that takes it off the pusher) and to which side of its path to the goal the target is shoved.
``apply_shove`` moves it there at once and leaves it at rest (``SimWorld.displace_object``: an impulse that ends
within a physics step), sideways off the line to the goal, rotated by the drawn angle; where that would put it inside
a body or off the table, the other side, then every 15 degrees round from the drawn direction. The displacement is
exactly the drawn distance. Where no direction is free (``ValueError``) the bench records the shove as not applied.

``recovery_time``: from the shove until the target's path length to the goal (around the obstacles, as the task
cost measures it) is ``RECOVERY_PROGRESS`` below both its value just before the shove and just after it: whatever
progress the shove took away is made good and the pusher is driving the object toward the goal again (a shove
toward the goal counts only once the pusher pushes it on). None if that never happens.

``reaction_time``: from the shove until the first plan made from a state measured at or after it starts to act: how long
the pusher runs on plans that have not seen the shove (the 1 Hz planner: one to two controls; the fast one: one to
two re-plan periods). Recovery can be shorter than it where the running plan happens to push the shoved object on.

``reach_time``: how long driving at the speed limit from the pusher's place right after the shove to the point
behind the shoved object that faces its path to the goal, by the shortest way round the object (``way_round``), and
pushing ``RECOVERY_PROGRESS`` on, takes: what is left of a recovery once a planner has reacted, for a pusher that has
to get behind the object again (not a strict bound: pushing it on from the side can be quicker; the other objects,
the obstacles and the acceleration limit make it slower). Until 2026-12-04 the way was the straight line, through
the edge of the object where that grazed it (about half the shoved runs in clutter on seed 6061; 0.00-0.03 s less
on average).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..planning.tasks import Goal
from ..scene.geometry import disc_penetration
from ..scene.projection import deepest_penetration
from ..scene.queries import path_to_goal
from ..scene.shapes import pusher_behind
from ..scene.spec import Scene

SHOVE_DISTANCE = (0.02, 0.04)  # m
SHOVE_WINDOW = (1.5, 3.5)  # s after the push started: mid-push on the benches' scenes (they take 8-20 s)
SHOVE_MAX_ANGLE = math.radians(30.0)  # off the perpendicular to the line to the goal
RECOVERY_PROGRESS = 0.005  # m of progress past the shove's that count as pushing again (0.1 s at 0.05 m/s)


@dataclass(frozen=True)
class Shove:
    time: float  # s after the push started (world time)
    distance: float  # m
    side: float  # +1: to the left of the line to the goal, -1: to the right
    angle: float  # rad off the perpendicular


def draw_shove(seed: int, index: int, distance: tuple = SHOVE_DISTANCE) -> Shove:
    """The shove of scene ``index`` of seed ``seed`` (the same for every planner and model of a run), ``distance``
    (lo, hi) m drawn uniformly; instants, sides and angles do not depend on ``distance``."""
    lo, hi = (float(v) for v in distance)
    if not 0.0 < lo <= hi:
        raise ValueError(f"shove distance: expected 0 < lo <= hi (m), got {lo:g}, {hi:g}")
    rng = np.random.default_rng([int(seed), int(index), 29])
    t = float(rng.uniform(*SHOVE_WINDOW))
    d = float(rng.uniform(lo, hi))
    side = 1.0 if rng.uniform() < 0.5 else -1.0
    angle = float(rng.uniform(-SHOVE_MAX_ANGLE, SHOVE_MAX_ANGLE))
    return Shove(t, d, side, angle)


def shove_directions(x_target, goal_xy, shove: Shove) -> list:
    """Unit directions to try, in order: the drawn side, the other side, then every 15 degrees from the drawn one
    (clutter leaves few free directions)."""
    line = np.asarray(goal_xy, dtype=float) - np.asarray(x_target, dtype=float)
    line /= max(float(np.linalg.norm(line)), 1e-9)
    base = math.atan2(line[1], line[0]) + shove.side * (math.pi / 2 + shove.angle)
    angles = [base, base + math.pi - 2 * shove.side * shove.angle]  # the other side, mirrored about the line
    angles += [base + math.radians(15.0) * k * sign for k in range(1, 12) for sign in (1, -1)]
    return [np.array([math.cos(a), math.sin(a)]) for a in angles]


def apply_shove(world, goal: Goal, shove: Shove) -> np.ndarray:
    """Shove the goal's object in ``world`` (a ``SimWorld``) now; returns the (dx, dy) applied. ``ValueError`` if
    every direction would put it inside a body or off the table."""
    scene: Scene = world.scene
    L = scene.layout
    x = world.planar_state()
    xy = L.object_poses(x)[goal.object_index, :2]
    radius = scene.objects[goal.object_index].footprint.bounding_radius
    # contacts resting in the world (the pusher on the target, objects touching) may overlap by a hair already:
    # a shove may not make any overlap deeper than that
    allowed = max(0.0, deepest_penetration(scene, x)[0])
    for direction in shove_directions(xy, goal.position, shove):
        delta = shove.distance * direction
        moved = x.copy()
        L.object_poses(moved)[goal.object_index, :2] += delta
        depth, _ = deepest_penetration(scene, moved)
        if depth <= allowed and bool(scene.table.contains(xy + delta, radius)):
            world.displace_object(goal.object_index, (delta[0], delta[1], 0.0))
            return delta
    raise ValueError(f"shove of {shove.distance * 1e3:.1f} mm: every direction puts "
                     f"{scene.objects[goal.object_index].name!r} inside a body or off the table")


def pusher_clearance(scene: Scene, goal: Goal, state) -> float:
    """Gap (m) between the pusher and the goal's object in ``state`` (< 0: overlapping): right after a shove, whether
    it took the object off the pusher (the running plan may still push it on if it is in the pusher's way)."""
    L = scene.layout
    x = np.asarray(state, dtype=float)
    depth, _ = disc_penetration(L.pusher_pos(x), scene.pusher.radius, scene.objects[goal.object_index].footprint,
                                L.object_poses(x)[goal.object_index])
    return float(-depth)


def reaction_time(plans, shove_time: float) -> float | None:
    """Seconds from the shove (at ``shove_time``, world time) until the first plan made from a state measured after
    it starts to act; ``plans``: (measured, acting) world times (s) of each plan handed over, the instant its state
    was measured (None: not known) and the instant it took over. None if no plan saw the shove."""
    # observations are world steps (1 ms) apart, and the shove happens on arriving at its step, before anything
    # is measured there: one at the shove's own instant has seen it
    acting = [a for measured, a in plans if measured is not None and measured > shove_time - 1e-6]
    return float(min(acting) - shove_time) if acting else None


def reach_time(scene: Scene, goal: Goal, state, max_speed: float, margin: float) -> float:
    """Seconds to drive at ``max_speed`` from the pusher in ``state`` (right after a shove) round the goal's object
    (``way_round``) to the point behind it that faces the first leg of its path to the goal, and push it
    ``RECOVERY_PROGRESS`` on."""
    L = scene.layout
    x = np.asarray(state, dtype=float)
    body = scene.objects[goal.object_index].footprint
    pose = L.object_poses(x)[goal.object_index]
    _, direction = path_to_goal(scene, pose[:2], goal.position, body.bounding_radius + margin)
    behind = pusher_behind(body, pose, direction, scene.pusher.radius, 0.0)
    inscribed = -float(body.sdf(pose[None, :2], pose)[0][0])  # the largest disc about its origin inside the outline
    way = way_round(L.pusher_pos(x), behind, pose[:2], inscribed + scene.pusher.radius)
    return float((way + RECOVERY_PROGRESS) / max_speed)


def way_round(start, end, centre, radius: float) -> float:
    """Length (m) of the shortest way from ``start`` to ``end`` that does not enter the disc of ``radius`` about
    ``centre`` (both ends outside it or on it): the straight line where it misses the disc, else the tangents from
    each end and the arc between them. For the pusher round an object, the disc inscribed in the outline inflated by
    the pusher's radius: exact for a disc, a lower bound for any convex outline (which contains that disc)."""
    a, b, c = (np.asarray(v, dtype=float) for v in (start, end, centre))
    ab = b - a
    t = float(np.clip(np.dot(c - a, ab) / max(float(np.dot(ab, ab)), 1e-18), 0.0, 1.0))
    if np.linalg.norm(a + t * ab - c) >= radius:
        return float(np.linalg.norm(ab))
    ra, rb = (max(float(np.linalg.norm(v - c)), radius) for v in (a, b))  # an end a hair inside: on the circle
    between = math.acos(float(np.clip(np.dot(a - c, b - c) / max(np.linalg.norm(a - c) * np.linalg.norm(b - c),
                                                                   1e-18), -1.0, 1.0)))
    arc = max(0.0, between - math.acos(radius / ra) - math.acos(radius / rb))
    return math.sqrt(ra * ra - radius * radius) + math.sqrt(rb * rb - radius * radius) + radius * arc


def goal_path_length(scene: Scene, goal: Goal, states, margin: float) -> np.ndarray:
    """Path length (m) of the goal's object to the goal around the obstacles, per state (..., D)."""
    xy = scene.layout.object_poses(np.asarray(states, dtype=float))[..., goal.object_index, :2]
    inflate = scene.objects[goal.object_index].footprint.bounding_radius + margin
    return path_to_goal(scene, xy, goal.position, inflate)[0]


def recovery_time(scene: Scene, goal: Goal, times, path, shove_time: float, before, margin: float) -> float | None:
    """Seconds from the shove (at ``shove_time``, the state ``before`` it) until the target's path length to the
    goal is ``RECOVERY_PROGRESS`` below its values before and right after the shove, on the true ``path`` (S, D)
    sampled at ``times`` (S,); None if never."""
    times = np.asarray(times, dtype=float)
    after = times > shove_time + 1e-9
    if not np.any(after):
        return None
    lengths = goal_path_length(scene, goal, np.asarray(path)[after], margin)
    ref = min(float(goal_path_length(scene, goal, np.asarray(before)[None], margin)[0]),
              float(lengths[0])) - RECOVERY_PROGRESS
    back = np.flatnonzero(lengths <= ref + 1e-9)
    return float(times[after][back[0]] - shove_time) if back.size else None
