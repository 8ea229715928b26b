"""Random clutter scenes for paper 001's multi-object task: push the target into the goal among other cylinders.

Every scene is a member of the learned coarse model's family (``four_cylinders``: table, friction, 4 cylinders of
radius 51.15 mm), so every predictive model applies. The target starts on the left of the table, the goal region
lies on the right, and the other cylinders are placed *between* them (the first one near the straight line from
target to goal, so the straight push runs into it) and *around* them (anywhere in a band around that line).
Placement is rejection sampling with these rules, all of which a generated scene satisfies:

* every body fully on the table, centres at least ``EDGE_CLEARANCE`` inside its edges (a scene must not start
  with an object about to fall);
* no two bodies (pusher included) closer than ``MIN_GAP`` (outline to outline);
* no other object within ``GOAL_CLEARANCE`` of the goal region (outline to region), so the target fits in;
* the pusher right behind the target, pointing at the goal (like the obstacle scenes).

The result goes through ``Scene.revalidated``, the scene loader's validation, like every scene file. Deterministic
given the seed: scene ``i`` of a seed depends only on (seed, i), so each scene is a unit of a study on its own.
"""
from __future__ import annotations

import numpy as np

from .spec import GoalSpec, Scene, load_scene

CLUTTER_BASE_SCENE = "clutter_push"
EDGE_CLEARANCE = 0.08  # m: centres this far inside the table edges at the start
MIN_GAP = 0.01  # m: outline-to-outline clearance between any two bodies at the start
GOAL_CLEARANCE = 0.02  # m: other objects' outlines keep this far out of the goal region at the start
TARGET_X, GOAL_X, LATERAL = (-0.25, -0.15), (0.15, 0.25), (-0.12, 0.12)  # m: sampling boxes (table frame)
AROUND_BAND = 0.22  # m: others "around" lie within this lateral distance of the target-goal line
PUSHER_GAP = 0.002  # m: the pusher starts this far behind the target


def clutter_scene(index: int, seed: int, base: Scene | None = None, max_tries: int = 10_000) -> Scene:
    """Random clutter scene number ``index`` of ``seed`` (target + the other objects of ``base``, goal region)."""
    base = base or load_scene(CLUTTER_BASE_SCENE)
    if base.goal is None or len(base.objects) < 2:
        raise ValueError(f"clutter base scene {base.name!r} needs a goal and at least two objects")
    rng = np.random.default_rng([int(seed), int(index), 19])
    t_i = base.object_index(base.goal.object)
    target, others = base.objects[t_i], [o for i, o in enumerate(base.objects) if i != t_i]
    half = base.table.half - EDGE_CLEARANCE
    r_p, goal_r = base.pusher.radius, base.goal.radius
    for _ in range(max_tries):
        s = np.array([rng.uniform(*TARGET_X), rng.uniform(*LATERAL)])
        g = np.array([rng.uniform(*GOAL_X), rng.uniform(*LATERAL)])
        d = (g - s) / np.linalg.norm(g - s)
        normal = np.array([-d[1], d[0]])
        pusher = s - d * (target.radius + r_p + PUSHER_GAP)
        discs = [(pusher, r_p), (s, target.radius)]
        placed = []
        for k, o in enumerate(others):
            for _ in range(200):
                if k == 0:  # between: on the straight push, offset sideways by less than a contact distance
                    c = s + rng.uniform(0.4, 0.6) * (g - s) + normal * rng.uniform(-1.0, 1.0) * (
                        target.radius + o.radius) * 0.8
                else:  # around: anywhere in the band around the line, from behind the target to past the goal
                    c = s + rng.uniform(-0.1, 1.2) * (g - s) + normal * rng.uniform(-AROUND_BAND, AROUND_BAND)
                if _fits(c, o.radius, discs, half, g, goal_r):
                    break
            else:
                break
            discs.append((c, o.radius))
            placed.append(c)
        else:
            if not np.all(np.abs(pusher) <= base.table.half - r_p) or not np.all(np.abs(s) <= half):
                continue
            poses = []
            it = iter(placed)
            for i in range(len(base.objects)):
                c = s if i == t_i else next(it)
                poses.append((float(c[0]), float(c[1]), 0.0))
            scene = base.with_poses(pusher_start=pusher, object_poses=poses,
                                    goal=GoalSpec(base.goal.object, (float(g[0]), float(g[1])), goal_r))
            return scene.revalidated(f"clutter scene {index} of seed {seed}", name=f"clutter_{seed}_{index}")
    raise RuntimeError(f"no valid clutter scene after {max_tries} tries (seed {seed}, index {index})")


def clutter_scenes(n: int, seed: int, first: int = 0, base: Scene | None = None) -> list[Scene]:
    """Scenes ``first`` .. ``first + n - 1`` of ``seed``'s sequence."""
    base = base or load_scene(CLUTTER_BASE_SCENE)
    return [clutter_scene(i, seed, base) for i in range(first, first + n)]


def _fits(c, r, discs, half, goal, goal_r) -> bool:
    if np.any(np.abs(c) > half):
        return False
    if np.linalg.norm(c - goal) < goal_r + r + GOAL_CLEARANCE:
        return False
    return all(np.linalg.norm(c - p) >= r + rp + MIN_GAP for p, rp in discs)
