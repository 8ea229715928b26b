"""Tracking a DDP plan at 100 Hz with its feedback gains and paper 003's trust-region error filter.

The plan (states X*, accelerations U*, gains K at the plan's step ``dt``) is executed by a controller that runs at
``rate_hz``: each tick it measures the state x, takes the plan step i that the time falls in, and filters the error
e = x - x*(t) (x* interpolated between plan steps): inside a ball of radius ``trust_radius`` (slider position, slider
yaw times ``YAW_LENGTH`` and pusher position, m) it applies the feed-forward u*_i, outside u*_i + K_i e. The
acceleration is integrated into the pusher velocity command (what the robot's servo takes). When the error stays
outside the trust region for ``replan_after_s``, the caller re-plans from the current state (``replan``: WS-DDP
warm-started from the rest of the current plan, no demonstration terms), at most ``max_replans`` times.

The world is MuJoCo (``core/sim/world.SimWorld``): the fine model judges, not the quasi-static model.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...config import finite, require, require_each, whole
from ...models.quasistatic import PUSHER_POS, PUSHER_VEL, SLIDER_POSE, SLIDER_YAW, from_scene_state
from ...scene.state import unwrap_near, wrap_angle
from .costs import DGOCCost, DGOCWeights
from .scripted import Push, Switch, perform
from .solver import BatchedDDP, DDPSettings

YAW_LENGTH = 0.06  # m per rad in the trust-region norm (about the half side of the boxes)
CORRECTION_OFFSETS = (-0.4, 0.0, 0.4)  # contact offsets of the re-plan guesses, fractions of the half face
CORRECTION_SPEED = 0.03  # m/s: how fast those guesses push


@dataclass(frozen=True)
class TrackingConfig:
    rate_hz: float = 100.0
    trust_radius: float = 0.002  # m (measured: 5 mm lets the error grow until late, large corrections destabilise)
    replan_radius: float = 0.02  # m: an error this large for replan_after_s re-plans
    replan_after_s: float = 0.3  # s
    max_replans: int = 5
    replan_iterations: int = 30
    correction_guesses: bool = True  # re-plans also start from a new contact on every face (``correction_guesses``)
    extra_time_s: float = 1.5  # s added to the rest of the plan when re-planning
    min_replan_s: float = 4.0  # s: the shortest re-planned horizon (a correction at the plan's end needs time)
    settle_s: float = 0.5  # s of rest after the plan's end before the outcome is judged
    v_max: float = 0.25  # m/s: the velocity command is clipped to this
    feedback_max: float = 2.0  # m/s^2: the feedback term K e is clipped to this per axis (large errors: re-plan)
    # at the plan's end, a slider pose further than this from the target (m, rad) is corrected by a re-plan
    goal_tolerance: tuple = (0.005, 0.05)

    def __post_init__(self):
        require_each(self, ("rate_hz", "replan_radius", "min_replan_s", "v_max", "feedback_max"),
                     lambda v: finite(v) and v > 0.0, "> 0")
        require_each(self, ("trust_radius", "replan_after_s", "extra_time_s", "settle_s"),
                     lambda v: finite(v) and v >= 0.0, ">= 0")
        require_each(self, ("max_replans",), lambda v: whole(v) and v >= 0, "an integer >= 0")
        require_each(self, ("replan_iterations",), lambda v: whole(v) and v >= 1, "an integer >= 1")
        require_each(self, ("correction_guesses",), lambda v: isinstance(v, bool), "true or false")
        tol = self.goal_tolerance
        require(isinstance(tol, (tuple, list)) and len(tol) == 2 and all(finite(t) and t > 0.0 for t in tol),
                "goal_tolerance", tol, "(position m, yaw rad), both > 0")


def error_norm(e: np.ndarray) -> float:
    """The trust-region norm of a model-state error: slider position, yaw times ``YAW_LENGTH``, pusher position."""
    pose, pusher = e[SLIDER_POSE], e[PUSHER_POS]
    return float(np.sqrt(pose[0] ** 2 + pose[1] ** 2 + (YAW_LENGTH * pose[2]) ** 2 + pusher @ pusher))


class PlanTracker:
    """The 100 Hz controller of one plan; ``command(t, x)`` -> pusher velocity command."""

    def __init__(self, X, U, K, dt: float, config: TrackingConfig = TrackingConfig()):
        self.X, self.U, self.K, self.dt, self.config = X, U, K, dt, config
        self.v_cmd = X[0, PUSHER_VEL].copy()
        self.outside_since = None  # when the error last went beyond the re-plan radius
        self.feedback_ticks = 0
        self.ticks = 0

    @property
    def duration(self) -> float:
        return len(self.U) * self.dt

    def reference(self, t: float) -> tuple[np.ndarray, int]:
        s = min(max(t / self.dt, 0.0), len(self.U))
        i = min(int(s), len(self.U) - 1)
        f = min(s - i, 1.0)
        return (1.0 - f) * self.X[i] + f * self.X[i + 1], i

    def command(self, t: float, x: np.ndarray) -> np.ndarray:
        dt_c = 1.0 / self.config.rate_hz
        self.ticks += 1
        if t >= self.duration:  # the plan is over: stop the pusher
            self.v_cmd = np.zeros(2)
            return self.v_cmd
        ref, i = self.reference(t)
        e = x - ref
        e[SLIDER_YAW] = wrap_angle(e[SLIDER_YAW])  # a measured yaw comes wrapped to [-pi, pi); the plan's is continuous
        u = self.U[i].copy()
        err = error_norm(e)
        if err > self.config.trust_radius:
            u += np.clip(self.K[i] @ e, -self.config.feedback_max, self.config.feedback_max)
            self.feedback_ticks += 1
        if err > self.config.replan_radius:
            self.outside_since = t if self.outside_since is None else self.outside_since
        else:
            self.outside_since = None
        self.v_cmd = np.clip(self.v_cmd + dt_c * u, -self.config.v_max, self.config.v_max)
        return self.v_cmd

    def wants_replan(self, t: float) -> bool:
        return self.outside_since is not None and t - self.outside_since >= self.config.replan_after_s \
            and t < self.duration


def nearest_face(model, x) -> int:
    """The slider face (0..3 = -x, -y, +x, +y) the pusher centre of model state ``x`` lies furthest outside of."""
    sx, sy, yaw = x[SLIDER_POSE]
    px, py = x[PUSHER_POS]
    c, s = np.cos(yaw), np.sin(yaw)
    dx, dy = px - sx, py - sy
    rx, ry = c * dx + s * dy, c * dy - s * dx
    a, b = model.size[0] / 2.0, model.size[1] / 2.0
    return int(np.argmax([-rx - a, -ry - b, rx - a, ry - b]))


def correction_guesses(model, x, steps: int, offsets=CORRECTION_OFFSETS, speed: float = CORRECTION_SPEED):
    """Initial guesses that make a new contact from state ``x``: for every face and contact offset (fractions of
    the half face), the pusher goes round the box to that face (scripted demonstrator) and pushes along its normal.
    Returns (X (G, steps+1, 7), U (G, steps, 2))."""
    start = nearest_face(model, x)
    Xs, Us = [], []
    for face in range(4):
        _, w = model.face_half(face)
        for f in offsets:
            phases = [Switch(face, float(f * w)), Push(face, float(f * w), 0.0, speed, steps * model.dt)]
            X, U = perform(model, phases, steps, start_face=start, x0=x)
            Xs.append(X)
            Us.append(U)
    return np.stack(Xs), np.stack(Us)


def replan(model, x: np.ndarray, tracker: PlanTracker, t: float, target, config: TrackingConfig,
           weights: DGOCWeights = DGOCWeights(), should_stop=None) -> PlanTracker:
    """DDP from the measured state ``x`` with the demonstration-free (WS-DDP) cost, from several initial guesses
    solved as one batch, the cheapest kept: the current plan's policy u*_j + K_j (x_j - x*_j) rolled out on the model
    from ``x`` for the rest of the plan (plus ``extra_time_s`` at rest, at least ``min_replan_s``), and
    ``correction_guesses`` (a new contact on each face). The policy alone cannot find a new contact (measured: at a
    plan's end it re-planned to standing still); returns the tracker of the new plan. ``should_stop``: see
    ``BatchedDDP.solve``."""
    ref, i = tracker.reference(t)
    i = min(i, len(tracker.U))
    # the measured yaw on the plan's branch (a scene state's is wrapped to [-pi, pi)): the plan's target yaw, and
    # so the new plan's, is unwrapped near the old plan's; from the wrapped yaw the new plan would turn 2 pi more
    x = np.asarray(x, dtype=float).copy()
    x[SLIDER_YAW] = unwrap_near(x[SLIDER_YAW], ref[SLIDER_YAW])
    extra = int(round(config.extra_time_s / tracker.dt))
    n = max(len(tracker.U) - i + extra, int(round(config.min_replan_s / tracker.dt)))
    U0 = np.zeros((1, n, 2))
    xj = x.copy()
    for j in range(n):
        if i + j < len(tracker.U):
            U0[0, j] = tracker.U[i + j] + tracker.K[i + j] @ (xj - tracker.X[i + j])
        else:
            U0[0, j] = -xj[PUSHER_VEL] / 0.2  # come to rest
        xj = model.step(xj[None], U0[:, j])[0]
    X0 = model.rollout(x, U0[0])[None]
    if config.correction_guesses:
        Xg, Ug = correction_guesses(model, x, n)
        X0, U0 = np.concatenate([X0, Xg]), np.concatenate([U0, Ug])
    tgt = np.asarray(target, dtype=float).copy()
    tgt[2] = unwrap_near(tgt[2], tracker.X[-1, SLIDER_POSE][2])  # target = slider pose (x, y, yaw)
    cost = DGOCCost(model, np.repeat(tgt[None], len(U0), 0), weights)
    r = BatchedDDP(model, cost, DDPSettings(max_iterations=config.replan_iterations)).solve(
        np.repeat(x[None], len(U0), 0), U0, X0=X0, should_stop=should_stop)
    best = int(np.argmin(r.cost))
    new = PlanTracker(r.X[best], r.U[best], r.K[best], tracker.dt, config)
    new.v_cmd = tracker.v_cmd.copy()
    return new


@dataclass
class TrackedRun:
    final_pose: np.ndarray  # true final slider pose in MuJoCo
    error: np.ndarray  # |dx|, |dy|, |dyaw| (wrapped) to the target
    replans: int
    feedback_share: float  # share of ticks outside the trust region
    path: np.ndarray  # (ticks+1, D) true world states
    replan_time_s: float = 0.0  # wall time spent re-planning (the world waited)
    tick_s: float = 0.01  # the controller's period

    @property
    def execution_time_s(self) -> float:
        """Simulated seconds from the first command to the judged end."""
        return (len(self.path) - 1) * self.tick_s


def missed(x, target, tolerance) -> bool:
    """Whether the slider pose of model state ``x`` is further than ``tolerance`` (m, rad) from ``target``."""
    d = np.abs(np.asarray(x[SLIDER_POSE], dtype=float) - np.asarray(target, dtype=float))
    return bool(d[0] > tolerance[0] or d[1] > tolerance[0] or abs(wrap_angle(x[2] - target[2])) > tolerance[1])


def track_in_world(model, world, plan_X, plan_U, plan_K, dt: float, target, config: TrackingConfig = TrackingConfig(),
                   perturb=None) -> TrackedRun:
    """Execute one plan in a ``SimWorld`` at ``rate_hz`` with the error filter and re-planning. ``perturb`` =
    (time s, (dx, dy, dyaw)) displaces the slider once, as a hand pushing it would. At the plan's end a slider
    further than ``goal_tolerance`` from the target is re-planned for too."""
    tracker = PlanTracker(plan_X, plan_U, plan_K, dt, config)
    dt_c = 1.0 / config.rate_hz
    t, replans, path, replan_time = 0.0, 0, [world.x.copy()], 0.0
    ticks_total, feedback = 0, 0
    perturbed = perturb is None
    while t < tracker.duration + config.settle_s - 1e-9:
        if not perturbed and t >= perturb[0] - 1e-9:
            world.displace_object(0, perturb[1])
            perturbed = True
        x = from_scene_state(world.layout, world.x)
        at_end = t >= tracker.duration + config.settle_s / 2 - 1e-9 and missed(x, target, config.goal_tolerance)
        if (tracker.wants_replan(t) or at_end) and replans < config.max_replans:
            ticks_total += tracker.ticks
            feedback += tracker.feedback_ticks
            t0 = time.perf_counter()
            tracker = replan(model, x, tracker, t, target, config)
            replan_time += time.perf_counter() - t0
            replans += 1
            t = 0.0  # the new plan starts now
        v = tracker.command(t, x)
        path.append(world.execute(v, dt_c)[-1])
        t += dt_c
    ticks_total += tracker.ticks
    feedback += tracker.feedback_ticks
    final = world.layout.object_poses(world.x)[0].copy()
    err = np.abs(final - np.asarray(target, dtype=float))
    err[2] = abs(wrap_angle(final[2] - target[2]))
    return TrackedRun(final, err, replans, feedback / max(ticks_total, 1), np.array(path), replan_time, dt_c)
