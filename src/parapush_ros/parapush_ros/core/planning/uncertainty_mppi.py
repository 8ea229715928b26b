"""Uncertainty-averse push planning with push primitives (paper 004 Sec. V-B and V-C).

``PrimitiveMPPI`` (settings ``PrimitiveMPPIConfig``) is Algorithm 1: MPPI over sequences of T push primitives
a_t = (phi_t, c_t) (object frame, see ``core/models/push_primitive.py``), rolled out with a ``PrimitiveModel``'s
mean (eq. 5), each step's predicted variance (eq. 6) entering the running cost (eq. 11):

    q(s_t, a_t, var_t) = |p_t - g| + w_rot |yaw_t - yaw_g| + w_unc var_t / var_ref   (+ a workspace penalty)
    phi(s_T) = w_final (|p_T - g| + w_rot |yaw_T - yaw_g|)                               (eq. 12)

where var_t is the position variance of the step (``push_primitive.uncertainty``) and ``var_ref`` the model's
typical variance on its own training data (so ``w_unc`` is dimensionless: 1 means "one reference variance costs
as much as a metre of distance"). Samples: N perturbed copies of the current sequence, the perturbation std
starting at ``std`` and multiplied by ``decay`` after each of the L inner iterations (exploration decay, eq. 10);
weights exp(-(S - S_min) / lambda) (eq. 8, ``optimisers.mppi.mppi_weights``: the same as the scene-state MPPI
optimiser's, which plans pusher velocities instead of primitives); update = weighted mean of the perturbations
(eq. 9). The first action is executed, the sequence shifted, the new last action initialised to the straight push
at the goal.

``uncertainty_heat_map`` is the Monte-Carlo map of Algorithm 2: the mean predicted variance over random yaws and
pushes at each cell of a grid of box positions. ``planning_heat_map`` adds a
distance-to-data term to it (what Algorithm 2 plans on). ``low_uncertainty_path`` is Algorithm 2: way-point paths
from start to goal (several starts: the straight line and detours to either side) improved by path-integral
updates (STOMP-like: noisy copies of the interior way-points, weights exp(-S' / lambda) with S' the costs
normalised to [0, 1] per iteration, as STOMP and paper 000's optimiser do, so lambda is scale-free; weighted mean)
against a scale-free cost (``path_terms``: the heat in units of the model's variance on its own data per straight-line
distance, plus w_smooth (length / straight-line distance)^2), under the workspace limits (way-points clipped into
them); the ends stay fixed; the cheapest path wins. ``PathTracker`` follows the way-points
with Algorithm 1 without the uncertainty term, aiming at the first way-point not yet reached.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import finite, require, require_each, whole
from ..models.push_primitive import (PATH_LIMITS, PLANNING_LIMITS, PrimitiveModel, random_pushes, uncertainty,
                                     valid_action)
from .optimisers.mppi import mppi_weights
from ..scene.state import wrap_angle


@dataclass
class PrimitiveMPPIConfig:
    """Algorithm 1 settings (defaults: tuned on the box_slider pushes of ``parapush bench uncertainty``)."""
    samples: int = 48  # N
    horizon: int = 6  # T pushes
    decay_steps: int = 3  # L inner iterations per executed push
    decay: float = 0.6  # gamma: exploration std factor per inner iteration
    std: tuple = (0.7, 0.3)  # initial perturbation std of (phi rad, c)
    temperature: float = 0.02  # lambda, in cost units (m)
    w_rot: float = 0.05  # m per rad of yaw error (0.05: 10 deg weigh like 9 mm)
    w_final: float = 2.0  # terminal cost weight
    w_unc: float = 0.0  # uncertainty weight of eq. 11 (0: plain MPPI)
    workspace: tuple = PLANNING_LIMITS  # |x|, |y| limits of the box centre (m); outside costs w_out per m
    w_out: float = 20.0
    seed: int = 0

    def __post_init__(self):
        self.std = tuple(float(v) for v in self.std)
        self.workspace = tuple(float(v) for v in self.workspace)
        for name, ok in (("samples", self.samples >= 2), ("horizon", self.horizon >= 1),
                         ("decay_steps", self.decay_steps >= 1), ("decay", 0.0 < self.decay <= 1.0),
                         ("std", len(self.std) == 2 and min(self.std) >= 0.0),
                         ("temperature", self.temperature > 0.0), ("w_rot", self.w_rot >= 0.0),
                         ("w_final", self.w_final >= 0.0), ("w_unc", self.w_unc >= 0.0),
                         ("workspace", len(self.workspace) == 2 and min(self.workspace) > 0.0)):
            if not ok:
                raise ValueError(f"MPPI config {name}: invalid value {getattr(self, name)!r}")


def straight_push(pose, goal_xy) -> np.ndarray:
    """The push (phi, c = 0.5) whose direction points from the box centre at the goal, in the object frame."""
    d = np.asarray(goal_xy, dtype=float) - np.asarray(pose[:2], dtype=float)
    phi = np.arctan2(d[1], d[0]) - pose[2]
    return valid_action(np.array([phi, 0.5]))


@dataclass
class PlanResult:
    actions: np.ndarray  # (T, 2) the updated mean sequence (its first action is the one to execute)
    poses: np.ndarray  # (T+1, 3) its predicted poses
    variance: np.ndarray  # (T,) its predicted step uncertainties (m^2)
    cost: float
    samples_evaluated: int = 0


class PrimitiveMPPI:
    """Algorithm 1 on a ``PrimitiveModel``; ``plan(pose, goal)`` -> PlanResult; keeps its sequence between calls
    (receding horizon) until ``reset``."""

    def __init__(self, model: PrimitiveModel, cfg: PrimitiveMPPIConfig | None = None, var_ref: float = 1.0):
        if not (np.isfinite(var_ref) and var_ref > 0.0):
            raise ValueError(f"MPPI var_ref: must be > 0, got {var_ref!r}")
        self.model = model
        self.cfg = cfg or PrimitiveMPPIConfig()
        self.var_ref = float(var_ref)
        self.rng = np.random.default_rng(self.cfg.seed)
        self.mean = None

    def reset(self):
        self.mean = None

    def rollout(self, pose, U):
        """Poses (K, T+1, 3) and step uncertainties (K, T) of sequences U (K, T, 2) from ``pose``."""
        K, T = U.shape[:2]
        poses = np.empty((K, T + 1, 3))
        poses[:, 0] = pose
        unc = np.empty((K, T))
        for t in range(T):
            poses[:, t + 1], var = self.model.predict(poses[:, t], U[:, t])
            unc[:, t] = uncertainty(var)
        return poses, unc

    def costs(self, poses, unc, goal, w_unc=None):
        """Cost-to-go S (K,) of rolled-out sequences (eqs. 7, 11, 12)."""
        c = self.cfg
        w_unc = c.w_unc if w_unc is None else w_unc
        err = np.linalg.norm(poses[..., :2] - goal[:2], axis=-1) + c.w_rot * np.abs(wrap_angle(poses[..., 2] - goal[2]))
        out = np.maximum(np.abs(poses[..., :2]) - np.asarray(c.workspace), 0.0).sum(-1)
        running = err[:, 1:-1].sum(-1) + c.w_out * out[:, 1:].sum(-1) + w_unc * (unc / self.var_ref).sum(-1)
        return running + c.w_final * err[:, -1]

    def plan(self, pose, goal, w_unc=None) -> PlanResult:
        c = self.cfg
        pose = np.asarray(pose, dtype=float)
        goal = np.asarray(goal, dtype=float)
        if self.mean is None:
            self.mean = np.repeat(straight_push(pose, goal[:2])[None], c.horizon, axis=0)
        std = np.asarray(c.std)
        evaluated = 0
        for _ in range(c.decay_steps):
            eps = self.rng.normal(0.0, 1.0, (c.samples, c.horizon, 2)) * std
            eps[0] = 0.0  # the current sequence itself
            U = valid_action(self.mean[None] + eps)
            U[1] = straight_push(pose, goal[:2])  # the straight push at the goal, held: never lost to noise
            poses, unc = self.rollout(pose, U)
            S = self.costs(poses, unc, goal, w_unc)
            evaluated += len(U)
            w = mppi_weights(S, c.temperature)
            delta = U - self.mean[None]  # the perturbations as applied (after making the actions valid)
            delta[..., 0] = wrap_angle(delta[..., 0])
            self.mean = valid_action(self.mean + np.einsum("k,ktd->td", w, delta))
            std = std * c.decay
        poses, unc = self.rollout(pose, self.mean[None])
        result = PlanResult(self.mean.copy(), poses[0], unc[0], float(self.costs(poses, unc, goal, w_unc)[0]),
                            evaluated + 1)
        return result

    def shift(self, pose, goal):
        """Drop the executed first action; the new last one is the straight push at the goal (from ``pose``)."""
        if self.mean is not None:
            self.mean = np.concatenate([self.mean[1:], straight_push(pose, goal[:2])[None]])


# ------------------------------------------------------------------------------------------------ Algorithm 2
@dataclass
class HeatMap:
    xs: np.ndarray  # (nx,) cell centres (m)
    ys: np.ndarray  # (ny,)
    values: np.ndarray  # (ny, nx) mean predicted uncertainty (m^2)

    def __call__(self, xy) -> np.ndarray:
        """Bilinear interpolation at positions (..., 2) (clamped at the border)."""
        xy = np.asarray(xy, dtype=float)
        fx = np.clip(np.interp(xy[..., 0], self.xs, np.arange(len(self.xs))), 0, len(self.xs) - 1)
        fy = np.clip(np.interp(xy[..., 1], self.ys, np.arange(len(self.ys))), 0, len(self.ys) - 1)
        x0 = np.minimum(np.floor(fx).astype(int), len(self.xs) - 2)
        y0 = np.minimum(np.floor(fy).astype(int), len(self.ys) - 2)
        tx, ty = fx - x0, fy - y0
        v = self.values
        return ((1 - ty) * ((1 - tx) * v[y0, x0] + tx * v[y0, x0 + 1]) +
                ty * ((1 - tx) * v[y0 + 1, x0] + tx * v[y0 + 1, x0 + 1]))


def grid_heat_map(extent, cell: float, samples: int, uncertainty_of) -> HeatMap:
    """The Monte-Carlo heat-map of Algorithm 2 for any model: the mean of ``uncertainty_of(xy)`` ((B, 2) positions,
    each cell centre repeated ``samples`` times -> (B,) predicted uncertainties, the random part being the
    caller's: yaws, pushes) per cell of a grid over [-extent, extent]."""
    if not (np.isfinite(cell) and 0.0 < cell <= min(extent)):  # bilinear interpolation needs 2 cells per axis
        raise ValueError(f"heat-map cell: must be > 0 and at most the half extent {min(extent):g} m (two cells per "
                         f"axis at least), got {cell}")
    xs = np.arange(-extent[0], extent[0] + 1e-9, cell)
    ys = np.arange(-extent[1], extent[1] + 1e-9, cell)
    gx, gy = np.meshgrid(xs, ys)
    xy = np.repeat(np.stack([gx.ravel(), gy.ravel()], -1), samples, axis=0)
    values = np.asarray(uncertainty_of(xy), dtype=float).reshape(gx.size, samples).mean(1)
    return HeatMap(xs, ys, values.reshape(gx.shape))


def uncertainty_heat_map(model: PrimitiveModel, extent=PLANNING_LIMITS, cell: float = 0.03, actions: int = 32,
                         seed: int = 0) -> HeatMap:
    """Monte-Carlo mean predicted uncertainty (m^2) over ``actions`` random (yaw, push) pairs per grid cell."""
    rng = np.random.default_rng(seed)

    def uncertainty_of(xy):
        poses, acts = random_pushes(rng, len(xy))
        poses[:, :2] = xy
        return uncertainty(model.predict(poses, acts)[1])

    return grid_heat_map(extent, cell, actions, uncertainty_of)


DATA_SCALE = 0.05  # m: the length scale of the distance-to-data term (``planning_heat_map``)
W_DATA = 10.0  # its height far from the data, in units of the model's variance on its own data


def distance_to_data(xy, data_xy) -> np.ndarray:
    """(...,) distance (m) from positions ``xy`` (..., 2) to the nearest of ``data_xy`` (N, 2) (a k-d tree)."""
    from scipy.spatial import cKDTree  # noqa: PLC0415
    xy = np.asarray(xy, dtype=float)
    d, _ = cKDTree(np.asarray(data_xy, dtype=float)[:, :2]).query(xy.reshape(-1, 2))
    return d.reshape(xy.shape[:-1])


def _split_cells(v, cell: float) -> np.ndarray:
    """Evenly spaced nodes ``v`` with each interval split in k parts of at most ``cell`` (the nodes kept: a
    bilinear map interpolated onto them is the same map)."""
    if len(v) < 2:
        return v
    k = max(1, int(np.ceil((v[-1] - v[0]) / (len(v) - 1) / cell - 1e-9)))
    return np.linspace(v[0], v[-1], (len(v) - 1) * k + 1)


def planning_heat_map(heat: HeatMap, var_in_data: float, data_xy=None, w_data: float = W_DATA,
                      scale: float = DATA_SCALE, clearance: float = 0.0, hard=None) -> HeatMap:
    """The heat-map Algorithm 2 plans on (the bench's and the stack's ``alg2`` alike): the model's own Monte-Carlo
    variance ``heat`` plus a distance-to-data term,

        h(p) = heat(p) + w_data var_in_data (1 - exp(-d(p)^2 / (2 scale^2)))

    with d(p) the distance from p to the nearest training position ``data_xy`` (N, 2) and ``var_in_data`` the
    model's variance on its own training data (the path cost's unit). A deep ensemble can agree while it
    extrapolates between two data regions (measured: a low-variance channel across the lesion of ``bench
    uncertainty`` on some seeds); the term is high wherever there are no data, as a GP's variance is by
    construction. ``data_xy`` None: no term (a model that sees only relative positions has data everywhere on the
    table).

    ``clearance`` > 0 (m): the planned heat at p is the worst of h within ``clearance`` of p (a max-filter over a
    disc, on ``heat``'s grid split to cells of at most ``clearance`` / 3): the box is not held to the way-points'
    polyline -- its tracker (``PathTracker``) counts a way-point reached anywhere within its reach and turns to the
    next, so the executed path cuts the planned one's corners by up to the reach. Passing the tracker's reach
    makes the path keep that clearance from high heat, instead of running just outside it (measured on ``bench
    uncertainty``'s seed 0 without it: way-points 1-4 cm outside the lesion, segments cutting its corners, the box
    further inside: 0.36 of plain MPPI's path in the lesion; with it 0.15). ``hard`` (bool, ``heat``'s shape): cells
    that are a constraint, not heat (the stack's occupied cells): left out of the max-filter and laid back over the
    result as they are, so that a gap between two of them narrower than twice the clearance is not closed."""
    if not (np.isfinite(var_in_data) and var_in_data > 0.0):
        raise ValueError(f"planning_heat_map var_in_data: must be > 0, got {var_in_data!r}")
    if not (np.isfinite(clearance) and clearance >= 0.0):
        raise ValueError(f"planning_heat_map clearance: must be finite and >= 0, got {clearance!r}")
    xs, ys = np.asarray(heat.xs, dtype=float), np.asarray(heat.ys, dtype=float)
    if clearance > 0.0:  # a grid fine enough for the disc
        xs, ys = _split_cells(xs, clearance / 3.0), _split_cells(ys, clearance / 3.0)
    gx, gy = np.meshgrid(xs, ys)
    grid = np.stack([gx, gy], -1)
    hard_heat = None
    if hard is not None and np.shape(hard) != np.shape(heat.values):
        raise ValueError(f"planning_heat_map hard: must have the heat-map's shape {np.shape(heat.values)}, got "
                         f"{np.shape(hard)}")
    if clearance > 0.0 and hard is not None and np.any(hard) and not np.all(hard):
        hard = np.asarray(hard, dtype=bool)
        hard_heat = HeatMap(heat.xs, heat.ys, np.asarray(heat.values, dtype=float))
        heat = HeatMap(heat.xs, heat.ys, np.where(hard, float(np.max(heat.values[~hard])), heat.values))
    values = np.array(heat.values, dtype=float) if clearance == 0.0 else heat(grid)
    if data_xy is not None and len(data_xy) and w_data > 0.0:
        d = distance_to_data(grid, data_xy)
        values = values + w_data * var_in_data * (1.0 - np.exp(-d ** 2 / (2.0 * scale ** 2)))
    if clearance > 0.0:
        from scipy.ndimage import maximum_filter  # noqa: PLC0415
        dx = float(xs[1] - xs[0]) if len(xs) > 1 else np.inf
        dy = float(ys[1] - ys[0]) if len(ys) > 1 else np.inf
        kx, ky = int(np.floor(clearance / dx + 1e-9)), int(np.floor(clearance / dy + 1e-9))
        oy, ox = np.meshgrid(np.arange(-ky, ky + 1) * (dy if ky else 0.0), np.arange(-kx, kx + 1) * (dx if kx else 0.0),
                             indexing="ij")
        disc = ox ** 2 + oy ** 2 <= clearance ** 2 + 1e-12
        values = maximum_filter(values, footprint=disc, mode="nearest")
        if hard_heat is not None:
            values = np.maximum(values, hard_heat(grid))
    return HeatMap(xs, ys, values)


@dataclass
class PathConfig:
    """Algorithm 2 settings (the cost is scale-free: see ``path_cost``)."""
    waypoints: int = 12  # way-points of the path, ends included
    samples: int = 64
    iterations: int = 200  # per start path
    std: float = 0.04  # m, perturbation of interior way-points
    decay: float = 0.99  # std factor per iteration
    temperature: float = 0.05  # of the normalised cost
    w_smooth: float = 0.3  # weight of (length / straight-line distance)^2 (evenly spaced way-points)
    detours: tuple = (0.25, 0.5)  # start paths besides the straight line: bulges of these x the start-goal distance
    workspace: tuple = PATH_LIMITS  # |x|, |y| limits of the way-points (m)
    tolerance: float = 1e-4  # stop a start when its best cost improved by less than this share over 20 iterations
    seed: int = 0

    def __post_init__(self):
        require_each(self, ("samples", "iterations"), lambda v: whole(v) and v >= 1, "an integer >= 1")
        require_each(self, ("waypoints",), lambda v: whole(v) and v >= 2, "an integer >= 2 (the ends included)")
        require_each(self, ("seed",), whole, "an integer")
        require_each(self, ("temperature",), lambda v: finite(v) and v > 0.0, "> 0")
        require_each(self, ("std", "w_smooth", "tolerance"), lambda v: finite(v) and v >= 0.0, ">= 0")
        require_each(self, ("decay",), lambda v: finite(v) and 0.0 < v <= 1.0, "in (0, 1]")
        ws = self.workspace
        require(isinstance(ws, (tuple, list)) and len(ws) == 2 and all(finite(v) and v > 0.0 for v in ws),
                "workspace", ws, "(|x|, |y|) limits in m, both > 0")
        dt = self.detours
        require(isinstance(dt, (tuple, list)) and all(finite(v) and v > 0.0 for v in dt), "detours", dt,
                "bulges (x the start-goal distance), each > 0")


@dataclass
class PathResult:
    path: np.ndarray  # (W, 2) way-points, start and goal included
    cost: float
    initial_cost: float  # the straight line's
    costs: list = field(default_factory=list)  # the chosen start's cost per iteration
    start_costs: list = field(default_factory=list)  # the best cost of each start path (straight, detours)
    terms: dict = field(default_factory=dict)  # the chosen path's uncertainty and smoothness terms


MIN_STRAIGHT = 0.01  # m: the start-goal distance the cost divides by at least


def path_terms(paths, heat: HeatMap, var_ref: float, w_smooth: float, samples_per_segment: int = 5):
    """(uncertainty, smoothness) terms (K,) each of paths (K, W, 2), both scale-free:

    * uncertainty = integral of heat / var_ref along the path / straight-line distance (1 for the straight line
      through the data where heat = var_ref, the model's variance on its own data);
    * smoothness = w_smooth (W - 1) sum of squared segment lengths / straight-line distance^2 (= w_smooth
      (length / straight)^2 for evenly spaced way-points, more otherwise)."""
    a, b = paths[:, :-1], paths[:, 1:]
    t = np.linspace(0.0, 1.0, samples_per_segment, endpoint=False)
    pts = a[:, :, None] + (b - a)[:, :, None] * t[None, None, :, None]  # (K, W-1, s, 2)
    seg = np.linalg.norm(b - a, axis=-1)  # (K, W-1)
    straight = np.maximum(np.linalg.norm(paths[:, -1] - paths[:, 0], axis=-1), MIN_STRAIGHT)
    unc = ((heat(pts) / var_ref).mean(-1) * seg).sum(-1) / straight
    return unc, w_smooth * seg.shape[1] * (seg ** 2).sum(-1) / straight ** 2


def path_cost(paths, heat: HeatMap, var_ref: float, w_smooth: float, samples_per_segment: int = 5):
    """Algorithm 2's path cost (K,): the sum of ``path_terms``."""
    unc, smooth = path_terms(paths, heat, var_ref, w_smooth, samples_per_segment)
    return unc + smooth


def start_paths(start_xy, goal_xy, cfg: PathConfig) -> list:
    """The straight line and, for each of ``cfg.detours``, a bulge to either side (offset = detour x start-goal
    distance, reached a sixth of the way along), way-points clipped to the workspace."""
    a, b = np.asarray(start_xy, float), np.asarray(goal_xy, float)
    t = np.linspace(0.0, 1.0, cfg.waypoints)
    straight = a + (b - a) * t[:, None]
    d = b - a
    n = np.array([-d[1], d[0]])
    profile = np.minimum(1.0, 2.0 * np.sin(np.pi * t))[:, None]
    paths = [straight]
    lim = np.asarray(cfg.workspace)
    for off in cfg.detours:
        for side in (1.0, -1.0):
            p = straight + side * off * profile * n
            p[1:-1] = np.clip(p[1:-1], -lim, lim)
            p[0], p[-1] = a, b  # the ends exactly (sin(pi) is not 0 in floating point)
            paths.append(p)
    return paths


def _improve(path, heat, var_ref, cfg: PathConfig, rng):
    """Path-integral updates of one start path; (best path, best cost, cost per iteration)."""
    lim = np.asarray(cfg.workspace)
    best = float(path_cost(path[None], heat, var_ref, cfg.w_smooth)[0])
    best_path, costs, bests = path.copy(), [], []
    std = cfg.std
    for it in range(cfg.iterations):
        eps = rng.normal(0.0, std, (cfg.samples, cfg.waypoints, 2))
        eps[:, [0, -1]] = 0.0
        eps[0] = 0.0
        P = path[None] + eps
        P[:, 1:-1] = np.clip(P[:, 1:-1], -lim, lim)  # Enforce_state_constraints
        S = path_cost(P, heat, var_ref, cfg.w_smooth)
        Sn = (S - S.min()) / max(S.max() - S.min(), 1e-12)
        w = np.exp(-Sn / cfg.temperature)
        w /= w.sum()
        path = path + np.einsum("k,kwd->wd", w, P - path[None])
        path[1:-1] = np.clip(path[1:-1], -lim, lim)
        cost = float(path_cost(path[None], heat, var_ref, cfg.w_smooth)[0])
        costs.append(cost)
        if cost < best:
            best, best_path = cost, path.copy()
        bests.append(best)
        std *= cfg.decay
        # the best cost, not the last (noisy) one, decides: stop when it has stalled for 20 iterations
        if it >= 20 and bests[-21] - best <= cfg.tolerance * abs(best):
            break
    return best_path, best, costs


def low_uncertainty_path(start_xy, goal_xy, heat: HeatMap, var_ref: float,
                         cfg: PathConfig | None = None) -> PathResult:
    """Algorithm 2: way-point paths from several starts (``start_paths``: the straight line and detours to either
    side; a single start stays near the straight line when the heat is symmetric about it) improved against
    ``heat`` (in units of ``var_ref``) by path-integral updates; the cheapest."""
    cfg = cfg or PathConfig()
    starts = start_paths(start_xy, goal_xy, cfg)
    initial = float(path_cost(starts[0][None], heat, var_ref, cfg.w_smooth)[0])
    result = None
    for i, p0 in enumerate(starts):
        path, cost, costs = _improve(p0.copy(), heat, var_ref, cfg, np.random.default_rng([cfg.seed, i]))
        if result is None or cost < result.cost:
            start_costs = result.start_costs if result else []
            result = PathResult(path, cost, initial, costs, start_costs)
        result.start_costs.append(cost)
    unc, smooth = path_terms(result.path[None], heat, var_ref, cfg.w_smooth)
    result.terms = {"uncertainty": float(unc[0]), "smoothness": float(smooth[0])}
    return result


class PathTracker:
    """Follows way-points with Algorithm 1 (no uncertainty term): the target is the first way-point farther than
    ``reach`` from the box, the last one being the goal pose itself."""

    def __init__(self, path: np.ndarray, goal, reach: float = 0.06):
        self.path = np.asarray(path, dtype=float)
        self.goal = np.asarray(goal, dtype=float)
        self.reach = float(reach)
        self.index = 1

    def target(self, pose) -> np.ndarray:
        while self.index < len(self.path) - 1 and \
                np.linalg.norm(self.path[self.index] - pose[:2]) < self.reach:
            self.index += 1
        if self.index >= len(self.path) - 1:
            return self.goal
        return np.array([*self.path[self.index], *self.goal[2:]])
