"""Pushing tasks and their costs (paper 000 Sec. 3, paper 001 Sec. 5), vectorised over samples and time.

One ``PushTask`` covers both tasks of the papers, because each is the other with some terms switched off by the
scene: *push around an obstacle* (one object, static obstacles: proximity, collision, smoothness, table edge,
terminal goal distance) and *multi-object* (several objects: the target into the goal without moving the
others, pushing anything off the table or a non-target object into the goal). ``kind`` names which one a scene
poses. Costs take predicted states (M, N+1, D) and controls (M, N, 2) and return (M,) totals, so one batched
prediction of all optimiser samples is scored in one call.

Weights come from ``config/costs.yaml`` (the one place their defaults live; see ``load_cost_weights``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import yaml

from ..config import finite, knob, require, yaml_problem
from ..scene.assets import shipped
from ..scene.shapes import push_distance
from ..scene.queries import TOUCH_DISTANCE, obstacle_clearance, off_table, path_to_goal
from ..scene.spec import Scene
from ..scene.state import wrap_angle

SWEEP_POINTS = 5  # clearance samples per slice (its end included) for the obstacle terms
APPROACH_GAP = 0.002  # m: the push primitive stops this short of touching before it pushes
APPROACH_CLEARANCE = 0.012  # m: clearance the push primitive keeps from the target while going round it


@dataclass(frozen=True)
class CostWeights:
    """Weights of the cost terms; meanings and units are documented in ``config/costs.yaml``."""

    terminal: float
    terminal_path: float
    path_margin: float
    terminal_yaw: float
    goal_running: float
    outside_goal: float
    goal_margin: float
    slider_obstacle: float
    pusher_obstacle: float
    clearance_floor: float
    collision: float
    collision_margin: float
    smoothness: float
    table_edge: float
    edge_margin: float
    pusher_approach: float
    other_motion: float
    other_in_goal: float
    other_on_path: float
    other_path_margin: float
    variance: float

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, data, source: str = "<dict>") -> CostWeights:
        """Validate a complete mapping of weights; errors name the source and the offending key."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: cost weights must be a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.names()))
        if unknown:
            raise ValueError(f"{source}: unknown cost weight(s) {unknown} (known: {', '.join(cls.names())})")
        missing = [n for n in cls.names() if n not in data]
        if missing:
            raise ValueError(f"{source}: missing cost weight(s) {missing}")
        return cls(**{n: _weight(data[n], f"{source}: {n}") for n in cls.names()})

    def with_overrides(self, overrides: dict | None, source: str = "overrides") -> CostWeights:
        """A copy with some weights replaced (validated like the file)."""
        if not overrides:
            return self
        unknown = sorted(set(overrides) - set(self.names()))
        if unknown:
            raise ValueError(f"{source}: unknown cost weight(s) {unknown} (known: {', '.join(self.names())})")
        return replace(self, **{k: _weight(v, f"{source}: {k}") for k, v in overrides.items()})

    def as_dict(self) -> dict:
        return {n: getattr(self, n) for n in self.names()}


def _weight(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise ValueError(f"{where}: must be finite and >= 0, got {value}")
    return value


def ranked_costs(costs) -> np.ndarray:
    """Costs to rank and weigh samples by: a non-finite one (a NaN from a model's non-finite prediction) as +inf, so
    it is never the best and weighs nothing (``np.argmin`` would pick a NaN, and no cost compares below it)."""
    costs = np.asarray(costs, dtype=float)
    return np.where(np.isfinite(costs), costs, np.inf)


def unknown_where_variance_is(costs, variance) -> np.ndarray:
    """``costs`` (M,) as NaN for every sample whose predicted ``variance`` (M, ...) is not finite, whatever weight
    the cost gives the variance (0 by default): such a prediction is never planned on, nor published."""
    costs = np.asarray(costs, dtype=float)
    if variance is None:
        return costs
    ok = np.isfinite(np.asarray(variance, dtype=float)).reshape(len(costs), -1).all(axis=1)
    return np.where(ok, costs, np.nan)


def costs_file() -> Path:
    """The shipped ``config/costs.yaml``."""
    return shipped("config/costs.yaml")


def load_cost_weights(path=None, overrides: dict | None = None) -> CostWeights:
    """Weights from a YAML file (default: the shipped ``config/costs.yaml``), optionally with overrides."""
    path = Path(path) if path else costs_file()
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ValueError(f"cost weights file {path}: cannot read it: {e}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{path.name}: not valid YAML: {yaml_problem(e)}") from None
    return CostWeights.from_mapping(data, source=path.name).with_overrides(overrides)


@dataclass(frozen=True)
class Goal:
    """Where the target object must go: a disc around ``position``; optionally a yaw (``yaw_tolerance`` >= 0)."""

    object_index: int
    position: tuple[float, float]
    radius: float
    yaw: float = 0.0
    yaw_tolerance: float = -1.0  # < 0: yaw does not matter

    @property
    def uses_yaw(self) -> bool:
        return self.yaw_tolerance >= 0.0


def goal_for(scene: Scene, object_name: str | None = None, position=None, radius: float | None = None,
             yaw: float = 0.0, yaw_tolerance: float = -1.0) -> Goal:
    """A goal for ``scene``: unspecified parts come from the scene's goal. Errors name the bad field."""
    sg = scene.goal
    name = object_name or (sg.object if sg is not None else None)
    if name is None:
        raise ValueError(f"scene {scene.name!r} has no goal: give the target object")
    index = scene.object_index(name)
    if position is None:
        if sg is None:
            raise ValueError(f"scene {scene.name!r} has no goal: give the goal position")
        position = sg.position
    position = tuple(float(v) for v in position)
    if len(position) != 2 or not all(math.isfinite(v) for v in position):
        raise ValueError(f"goal position must be two finite numbers, got {position}")
    if not scene.table.contains(np.array(position)):
        raise ValueError(f"goal position {list(position)} is off the table (half extents "
                         f"{[float(h) for h in scene.table.half]})")
    for ob in scene.obstacles:  # the target's centre can never get there
        if ob.footprint.sdf(np.array(position), np.asarray(ob.pose, dtype=float))[0] < 0.0:
            raise ValueError(f"goal position {list(position)} lies inside obstacle {ob.name!r}")
    if radius is None or radius <= 0.0:
        radius = sg.radius if sg is not None else 0.05
    if not (math.isfinite(radius) and radius > 0.0):
        raise ValueError(f"goal radius must be > 0, got {radius}")
    if not (math.isfinite(yaw) and math.isfinite(yaw_tolerance)):
        raise ValueError(f"goal yaw / yaw tolerance must be finite, got {yaw}, {yaw_tolerance}")
    return Goal(index, position, float(radius), float(yaw), float(yaw_tolerance))


def _segment_point_distance(a, b, c) -> float:
    ab = b - a
    t = float(np.clip(np.dot(c - a, ab) / max(float(np.dot(ab, ab)), 1e-18), 0.0, 1.0))
    return float(np.linalg.norm(a + t * ab - c))


# ------------------------------------------------------------------------------------------------- the task
@dataclass(frozen=True)
class ProposalConfig:
    """How a push task proposes control sequences to the optimiser (``PushTask.proposals``); the planner's
    ``PlannerConfig`` carries it, and ``mpc_planner`` declares these settings under their own names."""

    nominal_speed: float = knob(0.05, "pushing speed of the straight push toward the goal (the first proposal) and "
                                      "of the push primitive (m/s)")
    approach_speed: float = knob(0.08, "speed at which the push primitive walks the pusher round the object to its "
                                       "push point (m/s)")
    primitive: bool = knob(True, "also propose the push primitive (walk round, then push along the path) every "
                                 "plan")

    def __post_init__(self):
        for name in ("nominal_speed", "approach_speed"):
            v = getattr(self, name)
            require(finite(v) and v > 0.0, name, v, "> 0")


class PushTask:
    """Cost of pushing ``goal.object_index`` into the goal region in ``scene`` (see the module docstring), and the
    control sequences worth trying first (``proposals``)."""

    def __init__(self, scene: Scene, weights: CostWeights | None = None, goal: Goal | None = None,
                 proposal: ProposalConfig = ProposalConfig()):
        self.scene = scene
        self.proposal = proposal
        self.layout = scene.layout
        self.weights = weights if weights is not None else load_cost_weights()
        self.goal = goal if goal is not None else goal_for(scene)
        if not 0 <= self.goal.object_index < self.layout.n_objects:
            raise ValueError(f"goal.object_index {self.goal.object_index} is not an object of scene {scene.name!r}")
        self.others = np.array([i for i in range(self.layout.n_objects) if i != self.goal.object_index], dtype=int)
        self.other_radii = np.array([scene.objects[i].footprint.bounding_radius for i in self.others])
        target = scene.objects[self.goal.object_index]
        self.target_footprint = target.footprint
        # the pusher keeps this far from the target's centre to walk round it at any yaw (bounding radius +
        # pusher); where it pushes from is ``push_distance``, the outline's own extent along the push
        self.push_offset = target.footprint.bounding_radius + scene.pusher.radius

    @property
    def kind(self) -> str:
        """'multi_object' (paper 001) when other objects share the table, else 'obstacle' (paper 000)."""
        return "multi_object" if self.others.size else "obstacle"

    @property
    def target(self) -> int:
        return self.goal.object_index

    def with_goal(self, goal: Goal) -> PushTask:
        return PushTask(self.scene, self.weights, goal, self.proposal)

    def with_weights(self, weights: CostWeights) -> PushTask:
        return PushTask(self.scene, weights, self.goal, self.proposal)

    def with_proposal(self, proposal: ProposalConfig) -> PushTask:
        return PushTask(self.scene, self.weights, self.goal, proposal)

    def proposals(self, x, horizon: int, dt: float) -> list:
        """Sequences (each (horizon, 2)) the optimiser tries in its first iteration before any noise, the task's
        knowledge of pushing (judo's ``optimizer_warm_start``): the straight push at the goal (also the start when
        there is no warm start), the push primitive (``approach_and_push``) and holding still (the safe choice
        when every push is predicted to hit something)."""
        p = self.proposal
        out = [self.straight_push(x, p.nominal_speed, horizon)]
        if p.primitive:
            out.append(self.approach_and_push(x, p.nominal_speed, p.approach_speed, horizon, dt))
        out.append(np.zeros((horizon, 2)))
        return out

    # --- pieces shared with the outcome monitor and the optimisers
    def target_xy(self, states) -> np.ndarray:
        return self.layout.object_poses(np.asarray(states, dtype=float))[..., self.target, :2]

    def push_distance(self, states, direction, gap: float = 0.0) -> np.ndarray:
        """(...,) distance behind the target's centre, against the unit ``direction`` (..., 2), of the pusher that
        touches its outline (``gap`` short of it) pushing through the centre: the pusher's radius plus the
        outline's extent along the push, at the target's yaw in ``states`` (a box pushed face on: its half
        width, not its half diagonal). Why exact: a bounding radius put the push point of a box 39 mm behind the
        contact, so ``pusher_approach`` charged every state that pushed it."""
        pose = self.layout.object_poses(np.asarray(states, dtype=float))[..., self.target, :]
        return push_distance(self.target_footprint, pose, direction, self.scene.pusher.radius, gap)

    def goal_distance(self, states) -> np.ndarray:
        return np.linalg.norm(self.target_xy(states) - np.asarray(self.goal.position), axis=-1)

    def path_to_goal(self, states):
        """Obstacle-aware path length (m) of the target to the goal and its first-leg direction (see
        ``path_to_goal``); plain distance and direction when the scene has no obstacles."""
        inflate = self.scene.objects[self.target].footprint.bounding_radius + self.weights.path_margin
        return path_to_goal(self.scene, self.target_xy(states), self.goal.position, inflate)

    def on_path_depth(self, states) -> np.ndarray:
        """How deep (m, >= 0) each other object lies in the target's lane to the goal, (..., n-1): the lane is the
        straight segment from the target's centre to the goal's, as wide as the target and that object side by
        side plus ``other_path_margin``; only objects ahead of the target count (projection past its centre).

        An object in the lane is the multi-object task's known trap: pushed on, it is driven ahead of the target
        to the goal's edge, where it may not be pushed in (``other_in_goal``) and blocks the target. Depth in the
        lane costs in every predicted state, so going round it or moving it aside (paying ``other_motion``)
        is preferred to driving it along; it is continuous in every position (no side to choose)."""
        L = self.layout
        states = np.asarray(states, dtype=float)
        s = self.target_xy(states)[..., None, :]  # (..., 1, 2)
        c = L.object_poses(states)[..., self.others, :2]  # (..., n-1, 2)
        lane = np.asarray(self.goal.position) - s
        length = np.linalg.norm(lane, axis=-1)
        along = np.einsum("...d,...d->...", c - s, lane) / np.maximum(length, 1e-12)
        closest = s + lane * (np.clip(along, 0.0, length) / np.maximum(length, 1e-12))[..., None]
        distance = np.linalg.norm(c - closest, axis=-1)
        r_target = self.scene.objects[self.target].footprint.bounding_radius
        half_width = r_target + self.other_radii + self.weights.other_path_margin
        return np.where(along > 0.0, np.maximum(half_width - distance, 0.0), 0.0)

    def straight_push(self, x, speed: float, horizon: int) -> np.ndarray:
        """The first candidate of paper 000: ``horizon`` equal controls pushing the target straight at the goal
        (the direction from its centre to the goal) at ``speed``."""
        d = np.asarray(self.goal.position) - self.target_xy(x)
        n = float(np.linalg.norm(d))
        u = d / n * speed if n > 1e-9 else np.zeros(2)
        return np.repeat(u[None], horizon, axis=0)

    def approach_and_push(self, x, push_speed: float, approach_speed: float, horizon: int,
                          dt: float) -> np.ndarray:
        """A pushing primitive: move the pusher to the push point behind the target (walking round the target at
        a clearance when it is in the way), then push along the first leg of the path to the goal.

        A disc pusher cannot drag a slider sideways (pusher-object friction is low): the slider goes where the
        pusher points at its centre from. So turning a push needs the pusher to walk round the slider first, a
        move the cost only rewards once it is complete; sampling around the current sequence rarely finds it.
        Returned as ``horizon`` controls of ``dt`` seconds. The walk round is a polygon with one control per
        edge, so the pusher moves exactly along edges that keep clear of the target (a time-sampled curve
        would cut its corners through the slider).
        """
        x = np.asarray(x, dtype=float)
        s, p = self.target_xy(x), self.layout.pusher_pos(x).copy()
        _, d = self.path_to_goal(x)
        behind = float(self.push_distance(x, d, APPROACH_GAP))
        q = s - behind * d
        legs = []  # (start, end) of pusher moves that each take one slice
        # walk round when the straight move to the push point passes nearer the target's centre than the push
        # point itself (the bounding radius here would send a box's every approach from behind round it)
        if _segment_point_distance(p, q, s) < behind - 1e-6 and np.linalg.norm(p - q) > 0.01:
            r_round = self.push_offset + APPROACH_CLEARANCE
            step = 2.0 * math.atan(approach_speed * dt / (2.0 * r_round))  # edge length = approach_speed * dt
            r_c = r_round / math.cos(step / 2.0)  # polygon circumscribing the clearance circle
            a0 = math.atan2(p[1] - s[1], p[0] - s[0])
            sweep = float(wrap_angle(math.atan2(q[1] - s[1], q[0] - s[0]) - a0))
            sign = 1.0 if sweep >= 0.0 else -1.0
            # first edge from wherever the pusher is: no component toward the target (it would push it)
            first = min(step, math.acos(min(1.0, np.linalg.norm(p - s) / r_c)))
            angles = [first] if abs(sweep) > first else []
            while angles and abs(sweep) - angles[-1] > step:
                angles.append(angles[-1] + step)
            corner = p
            for a in angles:
                v = s + r_c * np.array([math.cos(a0 + sign * a), math.sin(a0 + sign * a)])
                legs.append((corner, v))
                corner = v
            legs.append((corner, q))  # the last edge ends at the push point, moving along the push
        else:
            legs.append((p, q))
        u = []
        for a, b in legs:
            length = float(np.linalg.norm(b - a))
            if length < 1e-9:
                continue
            n = max(1, int(math.ceil(length / (approach_speed * dt) - 1e-9)))  # long edges take several slices
            u += [(b - a) / (n * dt)] * n
        if legs and len(legs) == 1 and u:
            # straight to the push point: only as long as it takes, then push in the same slice
            length = float(np.linalg.norm(q - p))
            t_move = length / approach_speed
            if t_move < dt:
                u = [((q - p) + d * push_speed * (dt - t_move)) / dt]
        u += [d * push_speed] * horizon
        return np.array(u[:horizon])

    # --- costs
    def cost_terms(self, states, controls, u_prev=None, variance=None) -> dict:
        """Each weighted term, (M,) per sample. ``states`` (M, N+1, D) with ``states[:, 0]`` the start state,
        ``controls`` (M, N, 2), ``u_prev`` the control executed before (2,) (smoothness of the first control),
        ``variance`` an optional predicted variance (M, N+1, D) or (M, N+1)."""
        states = np.asarray(states, dtype=float)
        controls = np.asarray(controls, dtype=float)
        if states.ndim != 3 or states.shape[-1] != self.layout.dim:
            raise ValueError(f"cost: states must be (M, N+1, {self.layout.dim}), got {states.shape}")
        if controls.shape != (states.shape[0], states.shape[1] - 1, 2):
            raise ValueError(f"cost: controls must be (M, N, 2) = {(states.shape[0], states.shape[1] - 1, 2)}, "
                             f"got {controls.shape}")
        w, L = self.weights, self.layout
        run = states[:, 1:]  # running states x_1..x_N
        final = states[:, -1]
        goal = np.asarray(self.goal.position)
        terms = {}

        d_final = self.target_xy(final) - goal
        terms["terminal"] = w.terminal * (d_final ** 2).sum(-1)
        path_len, first_leg = self.path_to_goal(run)  # (M, N), (M, N, 2)
        terms["terminal_path"] = w.terminal_path * path_len[:, -1] ** 2
        if self.goal.uses_yaw and w.terminal_yaw > 0.0:
            yaw_err = wrap_angle(L.object_poses(final)[:, self.target, 2] - self.goal.yaw)
            terms["terminal_yaw"] = w.terminal_yaw * yaw_err ** 2
        terms["goal_running"] = w.goal_running * (path_len[:, :-1] ** 2).sum(-1)
        inside = max(self.goal.radius - w.goal_margin, 0.5 * self.goal.radius)
        dist = np.linalg.norm(self.target_xy(run) - goal, axis=-1)
        terms["outside_goal"] = w.outside_goal * (dist > inside).sum(-1)

        if self.scene.obstacles:
            # clearance along each slice, not only at its end: in 1 s an object can pass an obstacle and be
            # clear again (positions between slice ends interpolated linearly, the pusher moves straight)
            f = np.arange(1, SWEEP_POINTS + 1) / SWEEP_POINTS
            swept = states[:, :-1, None] + f[:, None] * (states[:, 1:, None] - states[:, :-1, None])
            obj_c, pus_c = obstacle_clearance(self.scene, swept)  # (M, N, S, n), (M, N, S)
            obj_c, pus_c = obj_c.min(axis=2), pus_c.min(axis=2)  # (M, N, n), (M, N)
            floor2 = w.clearance_floor ** 2
            terms["slider_obstacle"] = w.slider_obstacle * (1.0 / np.maximum(obj_c ** 2 * (obj_c > 0), floor2)
                                                             ).sum(-1).sum(-1)
            terms["pusher_obstacle"] = w.pusher_obstacle * (1.0 / np.maximum(pus_c ** 2 * (pus_c > 0), floor2)
                                                            ).sum(-1)
            margin = max(w.collision_margin, TOUCH_DISTANCE)
            touching = (obj_c.min(-1) < margin) | (pus_c < margin)
            terms["collision"] = w.collision * touching.sum(-1)

        u_before = np.concatenate([np.broadcast_to(np.zeros(2) if u_prev is None else np.asarray(u_prev, float),
                                                   (controls.shape[0], 1, 2)), controls[:, :-1]], axis=1)
        du = controls - u_before
        if u_prev is None:
            du[:, 0] = 0.0  # nothing executed yet: the first control is free
        terms["smoothness"] = w.smoothness * (du ** 2).sum(-1).sum(-1)

        terms["table_edge"] = w.table_edge * off_table(self.scene, run, w.edge_margin).any(-1).sum(-1)

        if w.pusher_approach > 0.0:
            push_point = self.target_xy(run) - self.push_distance(run, first_leg)[..., None] * first_leg
            terms["pusher_approach"] = w.pusher_approach * ((L.pusher_pos(run) - push_point) ** 2).sum(-1).sum(-1)

        if self.others.size:
            poses = L.object_poses(states)[..., self.others, :2]  # (M, N+1, n-1, 2)
            moved = ((poses[:, 1:] - poses[:, :1]) ** 2).sum(-1)
            terms["other_motion"] = w.other_motion * moved.sum(-1).sum(-1)
            in_goal = np.linalg.norm(poses[:, 1:] - goal, axis=-1) < self.goal.radius
            terms["other_in_goal"] = w.other_in_goal * in_goal.any(-1).sum(-1)
            if w.other_on_path > 0.0:
                terms["other_on_path"] = w.other_on_path * (self.on_path_depth(run) ** 2).sum(-1).sum(-1)

        if variance is not None and w.variance > 0.0:
            var = np.asarray(variance, dtype=float)
            if var.shape == states.shape:  # per-coordinate variance: positions only
                var = var[..., L.position_indices].sum(-1)
            if var.shape != states.shape[:2]:
                raise ValueError(f"cost: variance must be (M, N+1, D) or (M, N+1), got {var.shape}")
            terms["variance"] = w.variance * var[:, 1:].sum(-1)
        return terms

    def cost(self, states, controls, u_prev=None, variance=None) -> np.ndarray:
        """Total cost (M,) of each sample."""
        terms = self.cost_terms(states, controls, u_prev, variance)
        total = np.zeros(np.asarray(states).shape[0])
        for v in terms.values():
            total = total + v
        return unknown_where_variance_is(total, variance)
