"""Algorithm 2 of paper 004 in the stack (planner ``alg2``): push along a low-uncertainty path.

On its first plan (and after a goal change) the push loop estimates where the planner's variance model is unsure
about the target object -- a Monte-Carlo heat-map (``uncertainty_mppi.grid_heat_map``): the target put at every
cell of a grid over the table (the other objects where they are observed), pushed ``pushes`` times from a random
side, about at its centre, at the nominal speed for one control; the mean predicted position variance of the
target per cell, with ``alg2.heat_model`` (an ensemble: ``learned_ensemble``) -- and optimises a way-point path
from the target to the goal against it under the table's limits (``uncertainty_mppi.low_uncertainty_path``:
path-integral updates from several start paths, the ends fixed, the way-points clipped ``margin`` inside the table
edges; the same scale-free cost and ``planning_heat_map`` rule as ``bench uncertainty``, the heat-map's median as
the variance unit, no distance-to-data term as the models see relative positions only, max-filtered over
``reach``: the clearance the path keeps from high heat, the occupied cells below left out of it). Cells where the
target would overlap another object or an obstacle (no model can tell what happens there) count as ``OCCUPIED``
times the most uncertain free cell: the path keeps clear of them. The learned models see only relative positions,
so on a free table their heat-map is flat (measured: within 0.8-1.15 of its median on ``clutter_push``) and the
path bends round the other objects and where the ensemble is unsure of their interactions.

Then the sampling MPC tracks the path: every plan aims at the first way-point farther than ``reach`` from the
target (``uncertainty_mppi.PathTracker``), the last being the goal; the outcome is judged against the goal itself.
The tracker is the node's optimiser *without* an uncertainty term (``mppi``: Algorithm 1; ``mppi_ua`` is refused)
with any model (the single ``learned`` network tracks more accurately than the ensemble).

It is ``mpc_push.MPCPush`` with two hooks (``plan`` and ``goal_changed``) in the one push loop
(``session.PushSession``): the same IO, pauses, outcome monitor, real-time or stop-and-plan pushing, cancel and
pre-emption.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from ..config import ConfigError, finite, from_values, knob, require
from ..models.base import UncertainPropagator
from ..scene.spec import Scene
from .mpc_push import MPCPush, mpc_planner
from .uncertainty_mppi import (HeatMap, PathConfig, PathResult, PathTracker, grid_heat_map, low_uncertainty_path,
                               planning_heat_map)


HEAT_MAP_BATCH = 256  # pushes per prediction of the heat-map; a stop is noticed between batches
OCCUPIED = 10.0  # heat of a cell where the target would overlap something, relative to the most uncertain free one


@dataclass(frozen=True)
class LowUncertaintyConfig:
    """Settings of the ``alg2`` planner (ROS parameters ``alg2.<name>`` of the planner node)."""

    heat_model: str = knob("learned_ensemble", "model whose predicted variance makes the uncertainty heat-map (it "
                                               "must predict one: an ensemble)")
    cell: float = knob(0.03, "heat-map cell size (m)")
    pushes: int = knob(8, "Monte-Carlo pushes per heat-map cell "
                          "(random side and direction)")
    waypoints: int = knob(12, "way-points of the path, start and goal included")
    iterations: int = knob(150, "path-integral iterations at most")
    w_smooth: float = knob(1.0, "smoothness weight of (path length / straight-line distance)^2 (scale-free; larger: "
                                "straighter paths; 0.3, bench uncertainty's, loops 2.5x the straight line round "
                                "clutter_push's cylinders on the retrained ensemble's map, more than a push's 30 "
                                "actions cover)")
    margin: float = knob(0.08, "the path and the heat-map stay this far inside the table edges (m)")
    reach: float = knob(0.05, "each plan aims at the first way-point farther than this "
                              "from the target (m)")
    seed: int = knob(0, "seed of the heat-map's pushes and of the path's samples")

    def __post_init__(self):
        for name in ("cell", "reach"):
            require(finite(getattr(self, name)) and getattr(self, name) > 0.0, name, getattr(self, name), "> 0")
        require(finite(self.margin) and self.margin >= 0.0, "margin", self.margin, ">= 0")
        require(finite(self.w_smooth) and self.w_smooth >= 0.0, "w_smooth", self.w_smooth, ">= 0")
        for name, least in (("pushes", 1), ("waypoints", 2), ("iterations", 1), ("seed", 0)):
            v = getattr(self, name)
            require(isinstance(v, int) and not isinstance(v, bool) and v >= least, name, v, f"an integer >= {least}")


@dataclass
class LowUncertaintyPath:
    """A planned path and what it was planned on."""

    path: PathResult
    heat: HeatMap
    var_ref: float  # m^2: the heat-map's median, the unit of the path's uncertainty cost (var_in_data)
    seconds: float  # wall time of heat-map + path


def _occupied(scene: Scene, x, object_index: int, xy) -> np.ndarray:
    """(B,) the target at ``xy`` (B, 2) would overlap another object (as observed in ``x``) or an obstacle."""
    r = scene.objects[object_index].footprint.bounding_radius
    others = [(p[:2], scene.objects[j].footprint.bounding_radius)
              for j, p in enumerate(scene.layout.object_poses(x)) if j != object_index]
    others += [(np.asarray(o.pose[:2]), o.footprint.bounding_radius) for o in scene.obstacles]
    hit = np.zeros(len(xy), dtype=bool)
    for centre, radius in others:
        hit |= np.linalg.norm(xy - centre, axis=-1) < r + radius
    return hit


def scene_heat_map(predictor, scene: Scene, x, object_index: int, cfg: LowUncertaintyConfig, dt: float,
                   speed: float, should_stop=None) -> HeatMap | None:
    """The Monte-Carlo uncertainty heat-map of the target (m^2, see the module docstring); None as soon as
    ``should_stop()`` says so (asked before every ``HEAT_MAP_BATCH`` pushes: a cancel ends seconds of work within a
    fraction of a second)."""
    L = scene.layout
    x = L.check(x, "observed state")
    rng = np.random.default_rng(cfg.seed)
    contact = scene.objects[object_index].footprint.bounding_radius + scene.pusher.radius + 0.002
    extent = np.maximum(scene.table.half - cfg.margin, cfg.cell)

    def uncertainty_of(xy):
        B = len(xy)
        X = np.repeat(x[None], B, axis=0)
        L.pusher_vel(X)[...] = 0.0
        L.object_vels(X)[...] = 0.0
        L.object_poses(X)[:, object_index, :2] = xy
        side = rng.uniform(-np.pi, np.pi, B)
        L.pusher_pos(X)[...] = xy + contact * np.stack([np.cos(side), np.sin(side)], -1)
        heading = side + np.pi + rng.uniform(-0.5, 0.5, B)  # at the centre, +-0.5 rad
        U = speed * np.stack([np.cos(heading), np.sin(heading)], -1)[:, None]
        var = np.empty(B)
        for i in range(0, B, HEAT_MAP_BATCH):
            if should_stop is not None and should_stop():
                raise _HeatMapStopped
            pred = predictor.predict(X[i:i + HEAT_MAP_BATCH], U[i:i + HEAT_MAP_BATCH], dt, model=cfg.heat_model)
            if pred.variance is None:
                raise ValueError(f"alg2.heat_model: model {pred.model!r} predicts no variance; use one that does "
                                 f"(learned_ensemble)")
            var[i:i + HEAT_MAP_BATCH] = L.object_position_sigma(pred.variance[:, -1])[:, object_index] ** 2
        return np.where(_occupied(scene, x, object_index, xy), np.inf, var)

    try:
        heat = grid_heat_map(extent, cfg.cell, cfg.pushes, uncertainty_of)
    except _HeatMapStopped:
        return None
    finite_values = heat.values[np.isfinite(heat.values)]
    top = float(finite_values.max()) if finite_values.size else 1.0
    heat.values = np.where(np.isfinite(heat.values), heat.values, OCCUPIED * top)
    return heat


def plan_low_uncertainty_path(predictor, scene: Scene, x, goal, cfg: LowUncertaintyConfig, dt: float,
                              speed: float, should_stop=None) -> LowUncertaintyPath | None:
    """Algorithm 2 from the observed state ``x`` to ``goal`` (a ``tasks.Goal``); None if ``should_stop()`` ended
    the heat-map (``scene_heat_map``)."""
    t0 = time.perf_counter()
    heat = scene_heat_map(predictor, scene, x, goal.object_index, cfg, dt, speed, should_stop)
    if heat is None:
        return None
    var_ref = float(np.median(heat.values))
    if not (math.isfinite(var_ref) and var_ref > 0.0):
        var_ref = max(float(heat.values.max()), 1e-12)
    # the same rule as ``bench uncertainty``'s (``planning_heat_map``); no distance-to-data term: the stack's
    # models see relative positions only, so every table position is as near their data as any other, and the
    # heat-map's median stands for the variance on their own data; the path keeps the tracker's reach clear of high
    # heat (the tracker cuts corners by up to it), the occupied cells not grown by it (``hard``: the gaps between
    # the objects stay open)
    gx, gy = np.meshgrid(heat.xs, heat.ys)
    occupied = _occupied(scene, x, goal.object_index, np.stack([gx.ravel(), gy.ravel()], -1)).reshape(gx.shape)
    heat = planning_heat_map(heat, var_ref, data_xy=None, clearance=cfg.reach, hard=occupied)
    lim = np.maximum(scene.table.half - cfg.margin, 0.0)
    start = scene.layout.object_poses(np.asarray(x, dtype=float))[goal.object_index, :2]
    end = np.clip(np.asarray(goal.position, dtype=float), -lim, lim)
    path = low_uncertainty_path(np.clip(start, -lim, lim), end, heat, var_ref,
                                PathConfig(waypoints=cfg.waypoints, iterations=cfg.iterations, w_smooth=cfg.w_smooth,
                                           workspace=tuple(lim), seed=cfg.seed))
    path.path[0], path.path[-1] = start, goal.position  # the true ends (clipping only kept the interior inside)
    return LowUncertaintyPath(path, heat, var_ref, time.perf_counter() - t0)


class _HeatMapStopped(Exception):
    """The heat-map was asked to stop (internal to ``scene_heat_map``)."""


class LowUncertaintyPush(MPCPush):
    """The sampling MPC in the push loop, planning Algorithm 2's path first and aiming every plan at its next
    way-point."""

    def __init__(self, planner, path_config: LowUncertaintyConfig = LowUncertaintyConfig(),
                 uncertainty_threshold: float = 0.0):
        if getattr(planner.optimiser, "uncertainty_on", False):
            raise ValueError("optimiser: the alg2 planner tracks its path without the uncertainty term: use mppi "
                             "(Algorithm 1), not mppi_ua")
        super().__init__(planner, uncertainty_threshold)
        self.path_config = path_config
        self.planned: LowUncertaintyPath | None = None
        self.tracker: PathTracker | None = None

    def start(self, session):
        super().start(session)
        self.planned = self.tracker = None

    def goal_changed(self, session, goal):
        super().goal_changed(session, goal)
        self.tracker = None  # a new goal: a new path

    def describe(self) -> str:
        return f"planner alg2 (heat-map of {self.path_config.heat_model}) tracked by {super().describe()}"

    def plan_view(self, report):
        view = super().plan_view(report)
        if self.tracker is None:
            return view
        return replace(view, waypoints=self.tracker.path, waypoint_index=self.tracker.index)

    def plan(self, s, x, budget=None, deadline=None):
        s.apply_goal_change()
        k = s.goal.object_index
        if self.tracker is None:
            sampling, proposals = self.planner.config.sampling, self.planner.config.proposals
            self.planned = plan_low_uncertainty_path(self.planner.predictor, self.planner.scene, x, s.goal,
                                                     self.path_config, sampling.control_duration,
                                                     proposals.nominal_speed, lambda: s.stopping)
            if self.planned is None:  # stopped while it mapped the uncertainty: end the push now
                s.check_stop()
            p = self.planned.path
            self.tracker = PathTracker(p.path, np.array(s.goal.position), self.path_config.reach)
            s.status(f"alg2: low-uncertainty path of {len(p.path)} way-points "
                     f"({np.sum(np.linalg.norm(np.diff(p.path, axis=0), axis=-1)):.2f} m, uncertainty cost "
                     f"{p.initial_cost:.3g} -> {p.cost:.3g} of the straight line) in {self.planned.seconds:.1f} s")
        target = self.tracker.target(self.planner.scene.layout.object_poses(np.asarray(x, dtype=float))[k])
        self.planner.aim(replace(s.goal, position=(float(target[0]), float(target[1]))))
        return super().plan(s, x, budget, deadline)


def build_alg2(scene: Scene, params: dict) -> LowUncertaintyPush:
    """Registry build of ``alg2``: the sampling MPC of the node's parameters (without the uncertainty term) and the
    path's settings ``alg2.<name>``; the heat-map's model must predict a variance."""
    try:
        config = from_values(LowUncertaintyConfig, params, "alg2.")
    except ConfigError as e:
        raise ValueError(f"parameter {e if e.name.startswith('alg2.') else e.within('alg2.')}") from None
    if params.get("optimiser") == "mppi_ua":
        raise ValueError("parameter optimiser: the alg2 planner tracks its path without the uncertainty term: use "
                         "mppi (Algorithm 1), not mppi_ua")
    planner = mpc_planner(scene, params)
    try:
        heat_model = planner.predictor.model(config.heat_model)
    except (KeyError, ValueError) as e:
        planner.predictor.close()
        raise ValueError(f"parameter alg2.heat_model: {e}") from None
    if not isinstance(heat_model, UncertainPropagator):
        planner.predictor.close()
        raise ValueError(f"parameter alg2.heat_model: model {config.heat_model!r} predicts no variance; use one "
                         f"that does (learned_ensemble)")
    return LowUncertaintyPush(planner, config, params.get("uncertainty_threshold", 0.0))
