"""When a push ends, and why: the one outcome monitor used by the MPC loop, the benchmark and the planner node.

Paper 000 Sec. 4.3: success when the target reaches the goal region; failure when an object hits the obstacle,
falls off the table, or 20 actions (5x the horizon) pass without reaching the goal. Paper 001 (several objects):
the pusher may touch the other objects, but the push fails when one of them leaves the table or enters the goal
region (its centre inside the goal disc, the same test as the target's success). Failures are checked before
success, so a state that is both in the goal and touching the obstacle counts as a hit.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..scene.spec import Scene
from ..scene.state import wrap_angle
from ..scene.queries import TOUCH_DISTANCE, obstacle_clearance, off_table
from .tasks import Goal

DEFAULT_MAX_ACTIONS = 20
# A push that needs more re-plans than this is a mistake, not a push (at 1 s per action it is almost 3 hours); a
# goal asking for more is refused rather than running the pusher, unattended, for days.
MAX_ACTIONS_LIMIT = 10_000


class Outcome(str, Enum):
    RUNNING = "running"
    REACHED = "reached"
    HIT_OBSTACLE = "hit_obstacle"
    OFF_TABLE = "off_table"
    OTHER_IN_GOAL = "other_in_goal"  # multi-object task: a non-target object entered the goal region
    TIMEOUT = "timeout"
    FAILED = "failed"  # not from the monitor: planning or simulation errors, lost tracking (set by the caller)
    ABORTED = "aborted"  # not from the monitor: cancelled or pre-empted (set by the caller)

    @property
    def done(self) -> bool:
        return self is not Outcome.RUNNING

    @property
    def success(self) -> bool:
        return self is Outcome.REACHED


@dataclass(frozen=True)
class Status:
    outcome: Outcome
    reason: str
    distance: float  # target centre to goal (m)
    actions: int


class OutcomeMonitor:
    """Classifies observed states of a push toward ``goal`` in ``scene``."""

    def __init__(self, scene: Scene, goal: Goal, max_actions: int = DEFAULT_MAX_ACTIONS,
                 contact_tolerance: float = TOUCH_DISTANCE):
        if not 1 <= int(max_actions) <= MAX_ACTIONS_LIMIT:
            raise ValueError(f"max_actions must be in [1, {MAX_ACTIONS_LIMIT}], got {max_actions}")
        if not 0 <= goal.object_index < scene.layout.n_objects:
            raise ValueError(f"goal.object_index {goal.object_index} is not an object of scene {scene.name!r}")
        self.scene = scene
        self.goal = goal
        self.max_actions = int(max_actions)
        self.contact_tolerance = float(contact_tolerance)

    def distance(self, x) -> float:
        xy = self.scene.layout.object_poses(np.asarray(x, dtype=float))[self.goal.object_index, :2]
        return float(np.linalg.norm(xy - np.asarray(self.goal.position)))

    def check(self, x, actions: int) -> Status:
        """Status after ``actions`` executed actions with observed state ``x`` (D,)."""
        return self.check_path(np.asarray(x, dtype=float)[None], actions)

    def check_path(self, states, actions: int) -> Status:
        """Status after ``actions`` actions, given every state observed during the last one ((T, D), last = now):
        a hit or a fall anywhere along the path counts, success only at its end."""
        states = np.atleast_2d(np.asarray(states, dtype=float))
        scene, names = self.scene, [o.name for o in self.scene.objects]
        x = states[-1]
        dist = self.distance(x)
        if scene.obstacles:
            obj_c, pus_c = obstacle_clearance(scene, states)  # (T, n), (T,)
            hit = obj_c < self.contact_tolerance
            # a start already within the contact tolerance (a measured scene): say so, it is no hit of the push's
            when = (f" at the start, before any push (within the {self.contact_tolerance * 1e3:g} mm contact "
                    f"tolerance: move it clear)") if actions == 0 else ""
            if np.any(hit):
                t, i = np.argwhere(hit)[0]
                return Status(Outcome.HIT_OBSTACLE, f"object {names[i]!r} touched an obstacle "
                                                    f"(clearance {obj_c[t, i] * 1e3:.1f} mm){when}", dist, actions)
            if np.any(pus_c < self.contact_tolerance):
                c = float(pus_c.min())
                return Status(Outcome.HIT_OBSTACLE, f"the pusher touched an obstacle (clearance {c * 1e3:.1f} mm)"
                                                    f"{when}", dist, actions)
        off = off_table(scene, states)
        if np.any(off):
            t, i = np.argwhere(off)[0]
            xy = scene.layout.object_poses(states[t])[i, :2]
            return Status(Outcome.OFF_TABLE, f"object {names[i]!r} left the table at "
                                             f"({xy[0]:.3f}, {xy[1]:.3f}) m", dist, actions)
        others = [i for i in range(scene.layout.n_objects) if i != self.goal.object_index]
        if others:
            xy = scene.layout.object_poses(states)[:, others, :2]  # (T, n-1, 2)
            inside = np.linalg.norm(xy - np.asarray(self.goal.position), axis=-1) <= self.goal.radius
            if np.any(inside):
                t, j = np.argwhere(inside)[0]
                return Status(Outcome.OTHER_IN_GOAL, f"object {names[others[j]]!r} entered the goal region at "
                                                     f"({xy[t, j, 0]:.3f}, {xy[t, j, 1]:.3f}) m", dist, actions)
        if dist <= self.goal.radius:
            yaw_ok = True
            if self.goal.uses_yaw:
                yaw = scene.layout.object_poses(x)[self.goal.object_index, 2]
                yaw_err = abs(float(wrap_angle(yaw - self.goal.yaw)))
                yaw_ok = yaw_err <= self.goal.yaw_tolerance
            if yaw_ok:
                return Status(Outcome.REACHED, f"{names[self.goal.object_index]!r} is {dist * 1e3:.1f} mm from the "
                                               f"goal (tolerance {self.goal.radius * 1e3:.1f} mm) after "
                                               f"{actions} action(s)", dist, actions)
        if actions >= self.max_actions:
            return Status(Outcome.TIMEOUT, f"{actions} action(s) executed (limit {self.max_actions}) and "
                                           f"{names[self.goal.object_index]!r} is still {dist * 1e3:.1f} mm from "
                                           f"the goal", dist, actions)
        return Status(Outcome.RUNNING, f"{actions} action(s), {dist * 1e3:.1f} mm to go", dist, actions)
