"""Calibration of the fine model's physical parameters from recorded pushes.

The fit is nonlinear least squares (``scipy.optimize.least_squares``, trust region, finite-difference Jacobian) of
the fine model's residuals on the training recordings: object position (mm) and yaw (deg) against the record at
every control boundary, the physics run continuously (``continuous_rollout``), parameters in log space. The
uncertainty is the Gauss-Newton covariance at the optimum, s^2 (J^T J)^-1 with s^2 the residual variance per degree
of freedom (a standard error; it does not include the model's own bias).

What recorded pushes constrain: the pusher–object friction and the support spread shape every push (sliding at the
contact, turning); they are the default fit. The object–table friction does not enter a quasi-static push at all
(the motion is independent of it); only a free slide after a fast stroke reveals it (``--fit object_table``, with
recordings that contain such slides). That slide depends on how the pusher brakes within milliseconds, so the
rollouts command the pusher with the servo commands inverted from its recorded path (``replay.servo_commands``)
at a short control period: with setpoints rebuilt by smoothed finite differences every 50 ms, the replayed pusher
braked too gently and a fit of sim-made pushes from a world with 0.8 returned 0.44; with the inverted commands
every 10 ms it returns 0.74-0.85 on seven sets of such pushes (docs/results). The pusher–object friction is seen only in
pushes that slide at the contact; where none does, its fit is a lower bound. The mass cannot be told apart from
the table friction (inertia and friction both scale with it) and is not fitted by default.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import ConfigError
from ..models.base import rollout
from ..models.fine import FineModel
from ..models.mjcf import TIMESTEP
from ..sim.world import SimWorld
from ..scene.spec import Scene
from .replay import pose_errors

# fit name -> (scene dict section, key); "mass" scales every object's mass by one factor
PARAMETERS = {"object_table": ("friction", "object_table"), "pusher_object": ("friction", "pusher_object"),
              "spread": ("support", "spread"), "mass": ("objects", "mass")}
DIFF_STEP = 0.05  # relative step of the finite-difference Jacobian: a smaller one follows the contact noise
YAW_WEIGHT_MM_PER_DEG = 1.0  # residual weight: 1 deg of yaw counts as 1 mm of position


def parameter_values(scene: Scene, names) -> np.ndarray:
    out = []
    for n in names:
        if n == "mass":
            out.append(1.0)  # a scale of the scene's masses
        elif n == "spread":
            out.append(scene.support.spread)
        else:
            out.append(scene.friction[PARAMETERS[n][1]])
    return np.array(out, dtype=float)


def scene_with(scene: Scene, names, values) -> Scene:
    def edit(data):
        for n, v in zip(names, values):
            if n == "mass":
                for o in data["objects"]:
                    o["mass"] = float(o["mass"] * v)
            else:
                section, key = PARAMETERS[n]
                data.setdefault(section, {})[key] = float(v)
    return scene.revalidated(f"{scene.source} (calibrated)", edit)


def check_names(scene: Scene, names) -> list:
    names = list(names)
    for n in names:
        if n not in PARAMETERS:
            raise ValueError(f"--fit: unknown parameter {n!r} (one of {', '.join(PARAMETERS)})")
    if "spread" in names and scene.support.pattern == "native":
        raise ValueError("--fit: 'spread' needs the scene's support pattern 'grid' (it is 'native')")
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"--fit: a non-empty list of distinct parameters, got {names}")
    return names


def continuous_rollout(scene: Scene, case) -> np.ndarray:
    """The fine model's physics run without slicing (``SimWorld``: the MuJoCo state carried across steps), the
    pusher commanded along the recorded path one control period (``case.dt``) at a time (``replay.prepare`` with
    ``invert_servo``); (N+1, D) states at the case's times. Calibration fits physics, so it runs the physics
    continuously: a sliced rollout restarts the contacts at every slice boundary, which moves a pushed box by ~0.3
    mm per second of 0.25 s slices and by ~1.5 mm at 0.01 s slices, enough to drown the free slide that alone
    reveals the table friction."""
    sim = SimWorld(scene)
    try:
        sim.reset(case.x0)
        nstep = int(round(case.dt / TIMESTEP))
        states = [sim.planar_state()]
        for u in case.controls:
            sim.set_velocity(float(u[0]), float(u[1]))
            sim.step(nstep)
            states.append(sim.planar_state())
        out = np.stack(states)
        # unwrap yaw along the rollout and onto the recording's start (SimWorld reads it in (-pi, pi])
        L = scene.layout
        yaw = np.unwrap(L.object_poses(out)[..., 2], axis=0)
        yaw += np.round((case.recorded_objects[0, :, 2] - yaw[0]) / (2 * np.pi)) * 2 * np.pi
        L.object_poses(out)[..., 2] = yaw
        return out
    finally:
        sim.close()


def residuals(scene: Scene, cases: list, threads: int | None = None) -> np.ndarray:
    """Position (mm, x and y) and weighted yaw (deg) differences at every control boundary of every case, the
    physics run continuously (``continuous_rollout``)."""
    L = scene.layout
    out = []
    for c in cases:
        states = continuous_rollout(scene, c)
        pred = L.object_poses(states)[1:]
        rec = c.recorded_objects[1:]
        out.append(((pred[..., :2] - rec[..., :2]) * 1e3).ravel())
        d_yaw = (pred[..., 2] - rec[..., 2] + np.pi) % (2 * np.pi) - np.pi
        out.append(np.degrees(d_yaw).ravel() * YAW_WEIGHT_MM_PER_DEG)
    return np.concatenate(out)


def replay_errors(scene: Scene, cases: list, threads: int | None = None) -> list:
    """``pose_errors`` of the fine model per case."""
    fm = FineModel(scene, threads=threads)
    try:
        return [pose_errors(scene.layout, c, rollout(fm, c.x0, c.controls, c.dt)) for c in cases]
    finally:
        fm.close()


@dataclass
class FitResult:
    names: list
    start: np.ndarray
    values: np.ndarray
    sigma: np.ndarray  # standard errors (same units as values)
    rms_start: float  # residual RMS (mm-equivalent) on the training pushes
    rms: float
    evaluations: int
    trace: list = field(default_factory=list)  # (evaluation, rms, values)
    warnings: list = field(default_factory=list)  # what makes a fitted value or its std error less than it seems


def fit(scene: Scene, cases: list, names, max_evaluations: int = 60, on_evaluation=None,
        threads: int | None = None) -> FitResult:
    """Least squares in log space, at most ``max_evaluations`` fine-model evaluations of the cases (SciPy's
    ``max_nfev`` counts the function's evaluations but not its finite-difference Jacobian's, n per accepted step:
    the budget is split so that both stay within it)."""
    from scipy.optimize import least_squares  # noqa: PLC0415
    names = check_names(scene, names)
    n = len(names)
    if (max_evaluations - 1) // (n + 1) < 2:
        raise ConfigError("max_evaluations", f"at least {2 * n + 3} for {n} parameter(s) (the start, its "
                                             f"Jacobian's {n} evaluations and one step), got {max_evaluations}")
    start = parameter_values(scene, names)
    trace, walls = [], []

    def fun(log_values):
        if trace and np.array_equal(log_values, np.log(start)):  # SciPy's own first call: the start, done below
            return trace[0][3]
        values = np.exp(log_values)
        try:
            r = residuals(scene_with(scene, names, values), cases, threads)
        except ValueError as e:  # e.g. a spread that puts support points outside the footprint: a wall, not a crash
            if not trace:
                raise
            walls.append((dict(zip(names, values)), str(e)))
            r = np.full(len(trace[0][3]), 1e3)
        rms = float(np.sqrt(np.mean(r ** 2)))
        trace.append((len(trace) + 1, rms, values, r))
        if on_evaluation is not None:
            on_evaluation(len(trace), rms, dict(zip(names, values)))
        return r

    r0 = fun(np.log(start))
    res = least_squares(fun, np.log(start), method="trf", diff_step=DIFF_STEP, x_scale=1.0,
                        max_nfev=(max_evaluations - 1) // (n + 1), xtol=1e-3, ftol=1e-4)
    values = np.exp(res.x)
    dof = max(1, res.fun.size - len(names))
    s2 = float(res.fun @ res.fun) / dof
    sigma, warnings = _standard_errors(res.jac, s2, values, names)
    if walls:
        where, why = walls[-1]
        warnings.append(f"{len(walls)} evaluation(s) left the parameters' valid range (the last at "
                        + ", ".join(f"{k} {v:.4g}" for k, v in where.items()) + f": {why}); a fitted value next "
                        f"to that wall is where the fit stopped, not a free optimum, and its std error does not "
                        f"say how far the data would take it")
    if res.status == 0:
        warnings.append(f"stopped at the evaluation budget ({max_evaluations}) before converging: more "
                        f"--max-evaluations, or start nearer")
    return FitResult(names=names, start=start, values=values, sigma=sigma,
                     rms_start=float(np.sqrt(np.mean(r0 ** 2))), rms=float(np.sqrt(np.mean(res.fun ** 2))),
                     evaluations=len(trace), trace=[(e, r, v) for e, r, v, _ in trace], warnings=warnings)


UNDETERMINED = 1e-6  # a direction of the parameters whose singular value is below this x the largest: no data on it


def _standard_errors(J, s2: float, values, names) -> tuple[np.ndarray, list]:
    """Gauss-Newton standard errors from the Jacobian in log space (delta method back to values), and warnings.
    A parameter the residuals do not depend on (alone or in a combination with others) has no finite error: a
    pseudo-inverse would report it as exactly known (std error 0) at its start value; it is inf here, and said."""
    _, sv, vt = np.linalg.svd(J, full_matrices=False)
    null = sv <= UNDETERMINED * max(float(sv[0]), np.finfo(float).tiny)
    inv = np.where(null, 0.0, 1.0 / np.where(null, 1.0, sv) ** 2)
    cov_log = s2 * (vt.T * inv) @ vt
    sigma = values * np.sqrt(np.clip(np.diag(cov_log), 0.0, None))
    undetermined = np.any(np.abs(vt[null]) > 0.1, axis=0) if null.any() else np.zeros(len(names), bool)
    sigma = np.where(undetermined, np.inf, sigma)
    warnings = [f"{n}: not determined by these recordings (the residuals do not change with it"
                + (", alone or with " + ", ".join(m for m, u in zip(names, undetermined) if u and m != n)
                   if undetermined.sum() > 1 else "")
                + "): the fitted value is where it started, std error inf" for n, u in zip(names, undetermined) if u]
    return sigma, warnings


def split(cases: list, holdout: float, seed: int) -> tuple[list, list]:
    """(training, held-out): a seeded shuffle; at least one of each when holdout > 0."""
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"--holdout: a fraction in [0, 1), got {holdout}")
    if holdout > 0 and len(cases) < 2:
        raise ValueError(f"--holdout {holdout:g} needs at least 2 recordings (one to fit on, one held out), got "
                         f"{len(cases)}; --holdout 0 fits on all")
    order = np.random.default_rng(seed).permutation(len(cases))
    k = int(round(holdout * len(cases)))
    if holdout > 0:
        k = min(max(k, 1), len(cases) - 1)
    if len(cases) - k < 1:
        raise ValueError("need at least one training recording (and one held out when --holdout > 0)")
    return [cases[i] for i in order[k:]], [cases[i] for i in order[:k]]
