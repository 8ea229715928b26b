"""An example planner (``planner: straight``), the whole of what adding a planner takes besides its one
``register_planner`` line in ``planners.py``: push the target straight toward its goal.

Every ``period`` it aims the pusher at a point ``depth`` inside the target on the line from the goal through the
target's centre, at ``speed``: from behind the target that pushes it along the line, and it corrects the line as the
target turns away. It has no model and no look-ahead (obstacles are not avoided): the session
(``session.PushSession``) does the rest, as for every planner: pauses on a stale or invalid state, a clock jump, a
mocap clock offset or a deep penetration, the stop, goal changes, judging and the status."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import ConfigError, finite, from_values, knob, require
from ..scene.spec import Scene
from .session import PlanView, PushSession, PushStrategy


@dataclass(frozen=True)
class StraightConfig:
    """Settings of the ``straight`` planner (ROS parameters ``straight.<name>`` of the planner node)."""

    speed: float = knob(0.05, "pusher speed (m/s)")
    period: float = knob(0.5, "each command is held this long, then the pusher is aimed again (s)")
    depth: float = knob(0.01, "the pusher aims this far inside the target, past the contact point (m)")

    def __post_init__(self):
        for name in ("speed", "period", "depth"):
            v = getattr(self, name)
            require(finite(v) and v > 0.0, name, v, "finite and > 0")


class StraightPush(PushStrategy):
    def __init__(self, scene: Scene, config: StraightConfig = StraightConfig()):
        self.scene, self.config = scene, config

    def describe(self) -> str:
        return f"planner straight (a straight line at {self.config.speed:g} m/s)"

    def command(self, x, goal) -> np.ndarray:
        """The pusher velocity (2,) that pushes the target of ``goal`` from state ``x`` along the line to it."""
        L, k = self.scene.layout, goal.object_index
        target = L.object_poses(x)[k, :2]
        line = np.asarray(goal.position) - target
        line /= max(float(np.linalg.norm(line)), 1e-9)
        reach = self.scene.objects[k].footprint.bounding_radius + self.scene.pusher.radius - self.config.depth
        way = target - reach * line - L.pusher_pos(x)
        return self.config.speed * way / max(float(np.linalg.norm(way)), 1e-9)

    def push(self, s: PushSession):
        cfg = self.config
        period_ns = int(round(cfg.period * 1e9))
        while True:
            obs = s.usable_observation()
            s.apply_goal_change()
            u = self.command(obs.x, s.goal)
            start = s.now_ns()
            report = PlanView(start, s.goal, s.result.actions, s.result.distance, 0.0, u[None], cfg.period,
                              np.stack([obs.x, obs.x]), 0.0, "straight line", 0.0)
            s.hand_over(report, s.schedule(start, cfg.period, [u]))
            s.status(f"pushing {s.target_name()!r} straight: step {s.result.actions + 1}/{s.monitor.max_actions}, "
                     f"{s.result.distance * 1e3:.0f} mm to go")
            s.hold(start + period_ns)
            s.judge(s.result.actions + 1)


def build_straight(scene: Scene, params: dict) -> StraightPush:
    """Registry build of ``straight``: its settings ``straight.<name>``."""
    try:
        return StraightPush(scene, from_values(StraightConfig, params, "straight."))
    except ConfigError as e:
        raise ValueError(f"parameter {e}") from None
