"""Anytime receding-horizon MPC at a set re-plan rate, multi-fidelity (planner ``fast``).

The planner of ``mpc_push.MPCPush`` plans once per control (1 s) and runs every control open loop. ``FastMPCPush``
re-plans at ``replan_rate`` Hz whatever the length of a control:

* **Control parameterisation**: pusher velocity *knots* every ``knot_interval`` s over ``horizon`` s, linear in
  between (a first-order-hold spline). The knots are the decision variables; the re-plan period does not enter.
  The command timer samples the spline every ``command_period`` s (``SplineSchedule``). Consecutive knots differ
  by at most ``max_acceleration * knot_interval`` (the commander's acceleration limit), and the first knot of a new
  plan is pinned to the command of the running plan at the hand-over instant: a hand-over never jumps the velocity
  beyond the acceleration limit (between two command ticks: at most ``max_acceleration * command_period``).
* **One cycle** (``FastPlanner.plan``) starts at cycle start t_c (where the previous plan was handed over, up to
  the node's wait poll later), hands over one re-plan period after the previous hand-over, on the running plan's
  grid of command periods (the stated instant, ``FastMPCPush.handover_instant``), and spends at most
  ``budget_fraction / replan_rate`` on the plan clock, less what it started late:

  1. the latest observation is rolled forward to the hand-over instant through what the running plan executes
     meanwhile (fine model);
  2. the warm start is the running plan shifted by the time elapsed (its spline evaluated at the new knot times);
  3. ``candidates`` knot sequences (the warm start, the task's proposals, noisy copies of the warm start) are rolled
     out in ONE batch on the cheap screening model (``screen_model``: the coarse-model rule's, quasi-static at
     ``screen_substep`` for one object, learned for several) and scored with the task cost;
  4. the best ``rescore`` of them (the warm start always among them) are rolled out again with the planner's model
     (fine or Parareal-K), batched across the fine model's threads, as many as the budget still allows (at least
     one: then the best screened one, not the warm start); the cheapest on that prediction is the plan. Parareal-K
     over the screening model's kind (the default: both quasi-static) takes the screening model as its coarse
     model and the screened chain as its iteration 0 (``Parareal.solve``'s ``coarse_chain``): of its two coarse
     sweeps only the correction is left, at the screen's sub-step (measured: the same Parareal-1 error against
     fine as at the model's own 5 ms, docs/results/fast_mpc.md).
     ``fine_fraction`` = fine-model simulated seconds per candidate second evaluated in the cycle (the 1 Hz MPC
     with the fine model: 1.0). A re-scoring still running at the budget's end is **abandoned** (checked after
     each slice; Parareal-K after each thread-sized piece of its fine sweeps and before each correction sweep):
     the plan is then the best screened candidate with the screening model's prediction. Where only one
     candidate fits, that is the plan the re-scoring would have chosen anyway, so an expensive moment (a push
     into clutter) costs a cycle its fine prediction, not its deadline. With ``rescore_horizon`` shorter than
     the horizon the planner's model predicts only its first ``rescore_horizon`` s and the screening model goes
     on from there (multi-fidelity in time: the near future is executed, the far end only shapes the cost and is
     re-planned many times before it runs).

* **Late cycle**: a plan that is not done by its hand-over instant is dropped; the running plan (which covers the
  whole horizon) keeps running, so there is no gap and no jump. The next cycle starts at once. A cycle
  longer than a period makes the next one hand its plan over as many whole periods after its start as it took,
  so a host too slow for the rate (even slightly) gets its plans in before the running one ends instead of
  dropping every one (``MPCPush`` tolerates a little lateness instead: its late plans still take over); never
  after the running plan's last command period (a stall of half the horizon would otherwise leave the pusher
  without a plan), with the cycle's budget shortened to fit.

Task costs are written for a few slices of a long horizon (paper 000: 4 x 1 s), so the predicted states are
scored every ``cost_interval`` s (4 states over a 2 s horizon at 0.5 s), with the spline's mean velocity over each
scored interval as its control. In clutter the 1 Hz MPC's 4 s scored every 1 s (``horizon: 4.0``, ``cost_interval:
1.0``) moves the other objects less: their squared displacements shrink with the square of the time scored,
progress to the goal only linearly. Re-scored over the whole 4 s it doubles the cycle's fine work; with
``rescore_horizon: 1.0`` (the first second on the planner's model, the rest on the learned screen) a clutter cycle
costs no more than with the defaults: ``config/fast_clutter.yaml``. It is not the default: on one object the
quasi-static screen of 4 s costs twice that of 2 s and leaves the re-scoring no room (on a slower 2-core machine 99 %
of them abandoned; docs/results/fast_mpc.md, "A 4 s horizon with 1 s of fine re-scoring").
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..config import ConfigError, finite, from_values, knob, require, whole
from ..models.base import ModelDiverged, PredictionAbandoned, UncertainPropagator, rollout, rollout_with_variance
from ..models.fine import FINE_TIMESTEP
from ..models.mjcf import TIMESTEP
from ..models.parareal import CoarseChain
from ..models.quasistatic_coarse import QuasiStaticCoarseModel
from ..models.registry import PARAREAL, ModelSpec, Prediction, Predictor, auto_coarse, predicts_slices
from ..robot.command_safety import SafetyConfig
from ..scene.projection import project_feasible
from ..scene.spec import Scene
from .outcome import Outcome
from .session import ControlSchedule, PlanView, PushSession, PushStop, PushStrategy, seconds_to_ns
from .tasks import Goal, PushTask, ranked_costs, unknown_where_variance_is


def _multiple(value: float, unit: float) -> bool:
    if not (finite(value) and finite(unit) and value > 0.0 and unit > 0.0):  # a text or null value: not a multiple
        return False
    k = value / unit
    return abs(k - round(k)) < 1e-6


@dataclass(frozen=True)
class FastConfig:
    """Settings of the ``fast`` planner (ROS parameters ``fast.<name>`` of the planner node); the model, speeds
    and cost weights are the MPC's (``model``, ``max_speed``, ``nominal_speed``, ``weights.*``)."""

    replan_rate: float = knob(10.0, "re-plans per second (Hz): each cycle plans from the latest state and hands "
                                    "its plan over one period after it started (a whole number of command_period)")
    horizon: float = knob(2.0, "seconds planned ahead (a multiple of knot_interval)")
    knot_interval: float = knob(0.25, "seconds between the velocity knots (the decision variables, linear in "
                                      "between); independent of the re-plan period")
    slice_duration: float = knob(0.25, "seconds per rollout slice (the spline's mean velocity over it); divides "
                                       "knot_interval and cost_interval")
    cost_interval: float = knob(0.5, "seconds between the predicted states the task cost scores (its weights are "
                                     "set for a few slices per horizon)")
    command_period: float = knob(0.05, "seconds between the command timer's samples of the spline; divides "
                                       "knot_interval and the re-plan period")
    candidates: int = knob(32, "knot sequences per cycle rolled out in one batch on the screening model")
    rescore: int = knob(2, "best screened sequences re-scored per cycle with the planner's model (fine or "
                           "parareal<K>; the warm start always one of them), as many as the budget allows, >= 1")
    rescore_horizon: float = knob(0.0, "seconds of a re-scored sequence rolled out with the planner's model; the "
                                       "rest of the horizon goes on from there on the screening model (0: the "
                                       "whole horizon)")
    screen_model: str = knob("auto", "coarse model that screens the candidates: a coarse model of the registry, or "
                                     "auto (the node's coarse_model rule: quasi-static for one object, learned or "
                                     "analytical for several)")
    screen_substep: float = knob(0.05, "sub-step of a quasi-static screening model (s; the model's own is 0.005 s, "
                                       "10x the cost for the same ranking of candidates), also Parareal's coarse "
                                       "model's where it re-scores over the screening model")
    exploration_std: float = knob(0.015, "std of the knot noise around the warm start (m/s)")
    max_acceleration: float = knob(SafetyConfig.max_acceleration, "consecutive knots differ by at most this x "
                                                                  "knot_interval (m/s^2): the velocity commander's "
                                                                  "acceleration limit (its default)")
    budget_fraction: float = knob(0.8, "share of the re-plan period a cycle may spend planning")
    seed: int = knob(0, "seed of the knot noise")

    def __post_init__(self):
        require(finite(self.replan_rate) and 0.1 <= self.replan_rate <= 100.0, "replan_rate", self.replan_rate,
                "in [0.1, 100] Hz")
        require(_multiple(self.slice_duration, FINE_TIMESTEP), "slice_duration", self.slice_duration,
                f"a positive multiple of the fine model's {FINE_TIMESTEP} s step")
        require(_multiple(self.knot_interval, self.slice_duration), "knot_interval", self.knot_interval,
                f"a positive multiple of slice_duration ({self.slice_duration} s)")
        require(_multiple(self.cost_interval, self.slice_duration), "cost_interval", self.cost_interval,
                f"a positive multiple of slice_duration ({self.slice_duration} s)")
        # hand-overs fall on the command timer's samples (the command never steps by more than the acceleration
        # limit allows over one period, SplineSchedule), so its period divides the re-plan period and the knots'
        require(_multiple(self.command_period, TIMESTEP) and _multiple(self.knot_interval, self.command_period),
                "command_period", self.command_period,
                f"a positive multiple of the {TIMESTEP} s physics step that divides knot_interval "
                f"({self.knot_interval} s)")
        require(_multiple(1.0 / self.replan_rate, self.command_period), "replan_rate", self.replan_rate,
                f"a rate whose period 1/replan_rate is a whole number of command_period ({self.command_period} s): "
                f"{', '.join(f'{1.0 / (k * self.command_period):g}' for k in (1, 2, 4))} Hz, ...")
        require(_multiple(self.horizon, self.knot_interval) and _multiple(self.horizon, self.cost_interval),
                "horizon", self.horizon, f"a positive multiple of knot_interval ({self.knot_interval} s) and "
                                         f"cost_interval ({self.cost_interval} s)")
        require(self.horizon > 1.0 / self.replan_rate, "horizon", self.horizon,
                f"longer than the re-plan period 1/replan_rate = {1.0 / self.replan_rate:g} s")
        require(finite(self.rescore_horizon) and 0.0 <= self.rescore_horizon <= self.horizon
                and (self.rescore_horizon == 0.0 or _multiple(self.rescore_horizon, self.slice_duration)),
                "rescore_horizon", self.rescore_horizon,
                f"0 (the whole horizon) or a multiple of slice_duration ({self.slice_duration} s) up to horizon "
                f"({self.horizon} s)")
        require(whole(self.candidates) and self.candidates >= 4, "candidates", self.candidates, "an integer >= 4")
        require(whole(self.rescore) and 1 <= self.rescore <= self.candidates, "rescore", self.rescore,
                "an integer in [1, candidates]")
        require(finite(self.screen_substep) and self.screen_substep > 0.0, "screen_substep", self.screen_substep,
                "> 0")
        require(finite(self.exploration_std) and self.exploration_std >= 0.0, "exploration_std",
                self.exploration_std, "finite and >= 0")
        require(finite(self.max_acceleration) and self.max_acceleration > 0.0, "max_acceleration",
                self.max_acceleration, "> 0")
        require(finite(self.budget_fraction) and 0.0 < self.budget_fraction <= 1.0, "budget_fraction",
                self.budget_fraction, "in (0, 1]")
        require(whole(self.seed) and self.seed >= 0, "seed", self.seed, "an integer >= 0")

    @property
    def period(self) -> float:
        return 1.0 / self.replan_rate

    @property
    def fine_horizon(self) -> float:
        """Seconds of a re-scored sequence on the planner's model."""
        return self.rescore_horizon or self.horizon

    @property
    def n_knots(self) -> int:
        """Knots including the pinned first one."""
        return int(round(self.horizon / self.knot_interval)) + 1


# ------------------------------------------------------------------------------------------------ the spline
def spline_at(knots: np.ndarray, interval: float, t) -> np.ndarray:
    """Velocity of the knot spline ``knots`` (K, 2) (knot k at ``k * interval``) at times ``t`` (s after the first
    knot); the last knot held after the end, the first before the start."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    s = np.clip(t / interval, 0.0, len(knots) - 1)
    k = np.minimum(np.floor(s).astype(int), len(knots) - 2) if len(knots) > 1 else np.zeros_like(s, dtype=int)
    f = (s - k)[:, None]
    if len(knots) == 1:
        return np.repeat(knots[:1], len(t), axis=0)
    return knots[k] * (1.0 - f) + knots[k + 1] * f


def spline_means(knots: np.ndarray, interval: float, slice_duration: float, n: int) -> np.ndarray:
    """Mean velocity of each of ``n`` slices of ``slice_duration`` from the first knot: (..., n, 2) for knots
    (..., K, 2). Slices lie within knot intervals (slice_duration divides interval), so the mean is the value at the
    slice's middle."""
    mids = (np.arange(n) + 0.5) * slice_duration
    s = mids / interval
    k = np.minimum(np.floor(s).astype(int), knots.shape[-2] - 2)
    f = (s - k)[:, None]
    return knots[..., k, :] * (1.0 - f) + knots[..., k + 1, :] * f


def limit_knots(knots: np.ndarray, max_speed: float, max_step: float) -> np.ndarray:
    """Knots (..., K, 2) made feasible from the first one (kept as it is): each within ``max_step`` of the one
    before (by norm) and within ``max_speed``."""
    out = np.array(knots, dtype=float)
    for k in range(1, out.shape[-2]):
        d = out[..., k, :] - out[..., k - 1, :]
        n = np.linalg.norm(d, axis=-1, keepdims=True)
        out[..., k, :] = out[..., k - 1, :] + d * np.minimum(1.0, max_step / np.maximum(n, 1e-12))
        v = np.linalg.norm(out[..., k, :], axis=-1, keepdims=True)
        out[..., k, :] *= np.minimum(1.0, max_speed / np.maximum(v, 1e-12))
    return out


class SplineSchedule(ControlSchedule):
    """A knot spline as the pusher's schedule: from ``start`` the command timer's samples (every ``command_period``
    the spline's value at the middle of the period), zero after the last knot's period; until ``takeover`` the
    ``previous`` schedule runs (``ControlSchedule``). ``knots`` and ``knot_interval`` stay with it (the next plan's
    warm start and the command at the hand-over instant).

    A plan handed over at one of the running schedule's period boundaries, pinned to the running spline's value
    there, keeps its grid of command periods: the sample before the hand-over and the one after lie one period
    apart on splines that meet in between, so the command timer (whatever its phase) never sees a step larger than
    the acceleration limit x ``command_period`` (``FastMPCPush.handover_instant``). Off the grid, up to two periods
    of spline could lie between two consecutive ticks."""

    def __init__(self, start: float, knots, knot_interval: float, command_period: float,
                 previous: ControlSchedule | None = None, takeover: float | None = None, origin_ns: int = 0):
        knots = np.array(knots, dtype=float).reshape(-1, 2)
        n = int(round((len(knots) - 1) * knot_interval / command_period))
        samples = spline_at(knots, knot_interval, (np.arange(n) + 0.5) * command_period)
        super().__init__(start, command_period, samples, previous=previous, takeover=takeover, origin_ns=origin_ns)
        self.knots, self.knot_interval = knots, float(knot_interval)

    def velocity(self, t: float) -> np.ndarray:
        """The spline's own value at session time ``t`` (before its start: the previous schedule's command; from
        its end on zero, as the command timer sends: a plan pinned to it then starts from rest)."""
        if t < self.takeover - 1e-9 and self.previous is not None:
            prev = self.previous
            return prev.velocity(t) if isinstance(prev, SplineSchedule) else prev.at(t)
        if t >= self.end - 1e-9:
            return np.zeros(2)
        return spline_at(self.knots, self.knot_interval, t - self.start)[0]

    def shifted_knots(self, t: float, n: int) -> np.ndarray:
        """The warm start of a plan whose first knot is at ``t``: this spline at ``t + k * knot_interval``
        (k < n), the last knot held past its end."""
        own = self if t >= self.takeover - 1e-9 or not isinstance(self.previous, SplineSchedule) else self.previous
        return spline_at(own.knots, own.knot_interval, t - own.start + np.arange(n) * own.knot_interval)

    def settled(self) -> SplineSchedule:
        return SplineSchedule(self.start, self.knots, self.knot_interval, self.dt, origin_ns=self.origin_ns)


# ------------------------------------------------------------------------------------------------ one cycle
@dataclass
class FastPlan:
    knots: np.ndarray  # (K, 2), knots[0] pinned to the command at the hand-over instant
    controls: np.ndarray  # (S, 2) the spline's mean per rollout slice (what was predicted)
    states: np.ndarray  # (S+1, D) predicted by the re-scoring model, states[0] the start state
    cost: float
    model: str  # the re-scoring model as text
    spec: ModelSpec | None
    plan_time: float  # s on the plan clock
    fine_fraction: float  # fine-model simulated seconds per candidate second evaluated this cycle
    dt: float  # s between ``states`` (the slices'; the screening model's where the re-scoring was abandoned)
    screened: int = 0  # candidates rolled out on the screening model
    rescored: int = 0  # candidates rolled out on the re-scoring model
    screen_time: float = 0.0
    rescore_time: float = 0.0  # on the planner's model (a screened tail, rescore_horizon, not counted)
    variance: np.ndarray | None = None
    iterations: int = 1
    abandoned: bool = False  # the re-scoring ran past the budget: the screening model's best and prediction

    @property
    def result(self) -> FastPlan:
        """What ``PlanReport`` readers ask of ``plan.result`` (its iterations: one per cycle)."""
        return self


class FastPlanner:
    """One anytime cycle of the multi-fidelity sampler (see the module docstring), ROS-free."""

    def __init__(self, scene: Scene, config: FastConfig, task: PushTask, predictor: Predictor,
                 model: ModelSpec | str = "fine", max_speed: float = 0.1):
        self.scene, self.config, self.task, self.predictor = scene, config, task, predictor
        self.model = predictor.resolve(ModelSpec.parse(model))
        if self.model.kind not in (PARAREAL, predictor.default_fine):
            raise ConfigError("model", f"the fast planner re-scores with the fine model or parareal<K>, got "
                                       f"{self.model.name!r}")
        self.max_speed = float(max_speed)
        screen = config.screen_model
        if screen == "auto":
            screen = auto_coarse(scene, predictor.options)[0]
        try:
            model = predictor.coarse_model(screen)
        except ValueError as e:
            raise ConfigError("screen_model", str(e)) from None
        self.screen = ModelSpec(model.name)
        if isinstance(model, QuasiStaticCoarseModel) and model.max_substep != config.screen_substep:
            model = model.with_substep(config.screen_substep)
        self.screen_model = model
        slice_s = getattr(model, "slice_s", None)
        # a model that predicts only whole slices of its own length (the learned one: 1 s) screens on those
        self.screen_dt = float(slice_s) if slice_s else config.slice_duration
        if not (_multiple(config.horizon, self.screen_dt) and _multiple(self.screen_dt, config.slice_duration)):
            raise ConfigError("screen_model", f"{self.screen.kind} predicts {self.screen_dt} s slices, which must "
                                              f"divide horizon ({config.horizon} s) into whole slices")
        if self.screen_dt < config.cost_interval and not _multiple(config.cost_interval, self.screen_dt):
            raise ConfigError("cost_interval", f"{config.cost_interval} s must be whole slices of the screening "
                                               f"model {self.screen.kind!r} ({self.screen_dt:g} s), or at most one")
        # Parareal over the screening model's kind takes the screening model itself as its coarse model (at the
        # screen's sub-step) and the screened chain as its iteration 0: one coarse sweep less, and five times
        # cheaper correction sweeps, for the same Parareal-1 error against fine (fast_mpc.md)
        self.shares_screen = (self.model.kind == PARAREAL and self.model.coarse == self.screen.kind
                              and self.screen_dt == config.slice_duration)
        if self.model.kind == PARAREAL:
            coarse = predictor.coarse_model(self.model.coarse)
            if not predicts_slices(coarse, config.slice_duration):  # the one rule of fixed-slice models
                raise ConfigError("model", f"{self.model.name} with coarse model {coarse.name!r}, which predicts "
                                           f"only {coarse.slice_s:g} s slices, cannot re-score the fast planner's "
                                           f"{config.slice_duration:g} s slices (fast.slice_duration): re-score "
                                           f"with fine, or give Parareal a coarse model without a fixed slice")
        if config.fine_horizon < config.horizon and not _multiple(config.fine_horizon, self.screen_dt):
            raise ConfigError("rescore_horizon", f"{config.rescore_horizon} s must be whole slices of the screening "
                                                 f"model {self.screen.kind!r} ({self.screen_dt:g} s), which goes on "
                                                 f"from there")
        self.rng = np.random.default_rng(config.seed)
        self.n_slices = int(round(config.horizon / config.slice_duration))
        self.n_fine = int(round(config.fine_horizon / config.slice_duration))  # slices on the planner's model
        self._rescore_cost = None  # plan-clock seconds per re-scored candidate (running estimate)
        self._tail_cost = 0.0  # plan-clock seconds of the screened tail of the re-scored candidates (estimate)

    def set_task(self, task: PushTask):
        self.task = task

    # --- pieces
    def _rescore(self, X0, ctrl, deadline: float | None, clock, screened=None) -> tuple[Prediction | None, float]:
        """The re-scoring model's prediction of ``ctrl`` (M, S, 2) from ``X0`` and the slices done per candidate;
        (None, slices done) once ``deadline`` passes with work left (abandoned: checked between slices, Parareal-K
        between its thread-sized pieces of fine work, ``Predictor.predict``'s ``stop``). ``screened``: the
        candidates' screened states (M, S+1, D), Parareal's iteration 0 where it shares the screening model."""
        dt, S = self.config.slice_duration, ctrl.shape[1]
        stop = None if deadline is None else (lambda: clock() > deadline)
        chain = CoarseChain(self.screen_model, screened) if screened is not None else None
        try:
            return self.predictor.predict(X0, ctrl, dt, model=self.model, stop=stop, coarse_chain=chain), S
        except PredictionAbandoned as e:
            return None, e.slices / len(X0)

    def _score(self, states, controls, dt: float, u0, variance=None) -> np.ndarray:
        """Task cost (M,) of predicted ``states`` (M, n+1, D) under slice ``controls`` (M, n, 2) of ``dt`` s,
        scored every ``cost_interval``."""
        stride = int(round(self.config.cost_interval / dt))
        scored_variance = variance
        if dt < self.config.cost_interval - 1e-9:  # a whole number of slices (checked at construction)
            m, n = controls.shape[:2]
            scored = states[:, ::stride]
            ctrl = controls.reshape(m, n // stride, stride, 2).mean(axis=2)
            scored_variance = None if variance is None else variance[:, ::stride]
        else:  # the model's slices are as long as cost_interval or longer: score them as they are
            scored, ctrl = states, controls
        # a non-finite variance anywhere, scored or not, makes the candidate unknown (never the plan)
        return unknown_where_variance_is(self.task.cost(scored, ctrl, u0, scored_variance), variance)

    def _screen_tail(self, knots, pred: Prediction) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The re-scored candidates ``knots`` (M, K, 2) over the whole horizon where the planner's model predicted
        only ``fine_horizon`` (``pred``): its states every ``screen_dt``, then the screening model's from its last
        one. Returns (states (M, n+1, D), slice controls (M, n, 2), variance or None), n slices of ``screen_dt``.
        Why: the far end of the horizon matters for the cost (the other objects' motion, a detour's length) but is
        re-planned many times before it runs, so it need not be predicted with fine physics."""
        c, dt = self.config, self.screen_dt
        stride = int(round(dt / c.slice_duration))
        head = pred.states[:, ::stride]
        ctrl = spline_means(knots, c.knot_interval, dt, int(round(c.horizon / dt)))
        tail_ctrl = ctrl[:, head.shape[1] - 1:]
        tail, tail_var = self._screen_rollout(head[:, -1], tail_ctrl)
        variance = None
        if tail_var is not None:
            head_var = np.zeros_like(head) if pred.variance is None else pred.variance[:, ::stride]
            tail_var = tail_var + head_var[:, -1:]  # the tail's spread adds to where it starts from
            variance = np.concatenate([head_var, tail_var[:, 1:]], axis=1)
        return np.concatenate([head, tail[:, 1:]], axis=1), ctrl, variance

    def _screen_rollout(self, X0, ctrl) -> tuple[np.ndarray, np.ndarray | None]:
        """The screening model's states (M, n+1, D) over slices ``ctrl`` (M, n, 2) of ``screen_dt``, and their
        variance where it predicts one (else None)."""
        if isinstance(self.screen_model, UncertainPropagator):
            return rollout_with_variance(self.screen_model, X0, ctrl, self.screen_dt)
        return rollout(self.screen_model, X0, ctrl, self.screen_dt), None

    def proposals(self, x, u0, warm) -> np.ndarray:
        """Knot sequences (C, K, 2): the warm start, the task's proposals, noise around the warm start."""
        c, K = self.config, self.config.n_knots
        out = [] if warm is None else [np.asarray(warm, dtype=float)]
        for p in self.task.proposals(x, K, c.knot_interval):
            out.append(np.concatenate([np.asarray(u0)[None], p[:K - 1]], axis=0))
        base = out[0]
        n_noise = c.candidates - len(out)
        if n_noise > 0:
            noise = self.rng.normal(0.0, c.exploration_std, (n_noise, K, 2))
            noise[:, 0] = 0.0
            out.extend(base[None] + noise)
        U = np.stack(out[:c.candidates])
        U[:, 0] = u0
        return limit_knots(U, self.max_speed, c.max_acceleration * c.knot_interval)

    def plan(self, x, u0, warm=None, deadline: float | None = None, clock=time.perf_counter) -> FastPlan:
        """One cycle from the (predicted) start state ``x`` with the command ``u0`` at the hand-over instant and the
        shifted previous plan ``warm`` (K, 2) or None; anytime with a ``deadline`` on ``clock``."""
        c = self.config
        c0 = clock()
        x = self.scene.layout.check(x, "start state")
        x, _ = project_feasible(self.scene, x)
        u0 = np.asarray(u0, dtype=float)
        knots = self.proposals(x, u0, warm)
        C = len(knots)
        X0 = np.repeat(x[None], C, axis=0)
        # 1. screen every candidate on the cheap model, batched
        t = clock()
        n_screen = int(round(c.horizon / self.screen_dt))
        ctrl_screen = spline_means(knots, c.knot_interval, self.screen_dt, n_screen)
        states, variance = self._screen_rollout(X0, ctrl_screen)
        costs = self._score(states, ctrl_screen, self.screen_dt, u0, variance)
        costs = ranked_costs(costs)
        screen_time = clock() - t
        # 2. re-score the best few on the planner's model, as many as the budget still allows (at least one)
        order = [int(i) for i in np.argsort(costs, kind="stable")]
        n = c.rescore
        if deadline is not None and self._rescore_cost:
            room = (deadline - clock()) / self._rescore_cost  # candidates that still fit; -inf once stopping
            n = n if room >= n else max(1, int(max(room, 0.0)))
        # the warm start is always one of two or more (plans stay consistent cycle to cycle); where only one fits it
        # is the best screened one (re-scoring only the warm start would never change the plan)
        chosen = [0] if warm is not None and n >= 2 else []
        chosen += [i for i in order if i not in chosen][:n - len(chosen)]
        t = clock()
        ctrl = spline_means(knots[chosen], c.knot_interval, c.slice_duration, self.n_fine)
        tail = self.n_fine < self.n_slices  # the rest of the horizon goes on on the screening model
        # a re-scoring whose screened tail would not fit after it is abandoned early: the tail is not abandoned
        fine_deadline = None if deadline is None else deadline - (self._tail_cost if tail else 0.0)
        screened = states[chosen, :self.n_fine + 1] if self.shares_screen else None
        fine, done = self._rescore(X0[:len(chosen)], ctrl, fine_deadline, clock, screened)
        rescore_time = clock() - t
        dt = c.slice_duration
        if fine is not None and tail:
            t = clock()
            fine_states, ctrl, fine_variance = self._screen_tail(knots[chosen], fine)
            fine, dt = replace(fine, states=fine_states, variance=fine_variance), self.screen_dt
            tail_time = clock() - t
            if math.isfinite(tail_time):  # (a stopping push's clock reads inf: nothing was measured)
                self._tail_cost = max(tail_time, 0.5 * self._tail_cost)  # a spike is remembered, then decays
        # a whole candidate's, where abandoned: n_fine slices, K sweeps of them for Parareal-K (done counts them all)
        whole = self.n_fine * (max(1, self.model.iterations or 1) if self.model.kind == PARAREAL else 1)
        per = (rescore_time if fine is not None else rescore_time * whole / max(done, 1)) / len(chosen)
        if math.isfinite(per):  # a stopping push's clock reads inf: a NaN here once failed the next push's every plan
            self._rescore_cost = per if self._rescore_cost is None else 0.5 * (self._rescore_cost + per)
        total_s = C * c.horizon
        if fine is None:  # past the budget: the best screened candidate, on the screening model's prediction
            i = order[0]
            return FastPlan(knots=knots[i].copy(), controls=ctrl_screen[i].copy(), states=states[i].copy(),
                            cost=float(costs[i]), model=self.screen.name, spec=self.screen, plan_time=clock() - c0,
                            fine_fraction=len(chosen) * done * c.slice_duration / total_s, dt=self.screen_dt,
                            screened=C, rescored=len(chosen), screen_time=screen_time, rescore_time=rescore_time,
                            variance=None if variance is None else variance[i].copy(), abandoned=True)
        fine_costs = self._score(fine.states, ctrl, dt, u0, fine.variance)
        if not np.any(np.isfinite(fine_costs)):
            raise ValueError(f"the {fine.model} model gave none of the {len(chosen)} re-scored candidates a "
                             f"finite cost")
        b = int(np.argmin(np.where(np.isfinite(fine_costs), fine_costs, np.inf)))
        # fine work: the fine model's simulated seconds (Parareal-K: the slices its sweeps simulated, converged ones
        # not again) per candidate second evaluated (1.0: every candidate rolled out once with the fine model, as
        # the 1 Hz MPC does)
        fine_s = fine.fine_slices * c.slice_duration
        return FastPlan(knots=knots[chosen[b]].copy(), controls=ctrl[b].copy(), states=fine.states[b].copy(),
                        cost=float(fine_costs[b]), model=fine.model, spec=fine.spec, plan_time=clock() - c0,
                        fine_fraction=fine_s / total_s, dt=dt, screened=C, rescored=len(chosen),
                        screen_time=screen_time,
                        rescore_time=rescore_time,
                        variance=None if fine.variance is None else fine.variance[b].copy())


# ------------------------------------------------------------------------------------------------ the strategy
@dataclass
class FastReport:
    """A cycle as it was handed to the pusher (``PushIO.report_plan``): ``PlanReport``'s fields that readers
    use, and the cycle's own."""

    plan: FastPlan
    step: int
    start: float  # s on the session clock: the hand-over instant
    latency: float
    late: float
    distance: float
    goal: Goal
    late_plans: int = 0
    start_ns: int = 0
    observed_ns: int | None = None  # the observation the cycle planned from (its start's)

    @property
    def solve_time(self) -> float:
        return self.plan.plan_time


@dataclass
class CycleLog:
    """Every cycle of a push, handed over or not (the bench's rate, cycle time and fine fraction)."""

    starts_ns: list = field(default_factory=list)  # cycle starts on the session clock
    latencies: list = field(default_factory=list)  # s on the plan clock
    late: list = field(default_factory=list)  # bool: dropped, the running plan kept
    lateness: list = field(default_factory=list)  # s past its hand-over instant it arrived (0: on time)
    fine_fraction: list = field(default_factory=list)
    handover_jumps: list = field(default_factory=list)  # |command after - command before| at each hand-over (m/s)
    rescore_times: list = field(default_factory=list)  # s on the plan clock re-scoring, per cycle
    rescored: list = field(default_factory=list)  # candidates re-scored, per cycle
    iterations: list = field(default_factory=list)  # Parareal iterations of the re-scoring (0: the fine model)
    abandoned: list = field(default_factory=list)  # bool: the re-scoring ran past the budget (the screened best)


class FastMPCPush(PushStrategy):
    """The anytime multi-fidelity MPC in the push loop (module docstring). Real time only."""

    def __init__(self, planner: FastPlanner):
        self.planner, self.scene, self.config = planner, planner.scene, planner.config
        self.command_rate = 1.0 / planner.config.command_period
        # 30 s of pushing per goal that sets no limit (the MPC's 30 actions of 1 s); an action is one cycle
        self.default_max_actions = int(round(30.0 * planner.config.replan_rate))
        self.log = CycleLog()

    def start(self, session: PushSession):
        self.planner.set_task(self.planner.task.with_goal(session.goal))
        self.log = CycleLog()

    def goal_changed(self, session: PushSession, goal: Goal):
        self.planner.set_task(self.planner.task.with_goal(goal))

    def describe(self) -> str:
        c = self.config
        return (f"planner fast ({c.replan_rate:g} Hz, {c.horizon:g} s horizon, {c.candidates} candidates on "
                f"{self.planner.screen.name}, best {c.rescore} on {self.planner.model.name})")

    def close(self):
        self.planner.predictor.close()

    def plan_view(self, report: FastReport) -> PlanView:
        p = report.plan
        spec = p.spec
        return PlanView(report.start_ns, report.goal, report.step, report.distance, report.latency, p.controls,
                        p.dt, p.states, float(p.cost), spec.message_name if spec else p.model,
                        float(p.plan_time), iterations=int(spec.iterations or 0) if spec else 0,
                        late_plans=report.late_plans, variance=p.variance)

    # --- the loop
    def push(self, s: PushSession):
        if not s.config.realtime:
            raise PushStop(Outcome.FAILED, "realtime: the fast planner plans while the pusher moves; set realtime "
                                           "true")
        c, io = self.config, s.io
        period_ns, command_ns = seconds_to_ns(c.period), seconds_to_ns(c.command_period)
        K = c.n_knots
        while True:  # from rest: the first push, and again after every pause
            obs = s.usable_observation()
            started = s.now_ns()  # the cycle's start, as every later cycle logs its own (not its hand-over)
            c0 = io.plan_clock()
            plan = self._plan(s, obs.x, np.zeros(2), None, c0 + c.budget_fraction * c.period)
            latency = io.planned(io.plan_clock() - c0)
            s.check_stop()
            if s.observe().problem:
                continue
            t0 = s.now_ns()
            active = SplineSchedule(s.rel(t0), plan.knots, c.knot_interval, c.command_period,
                                    origin_ns=s.origin_ns)
            self._log(started, latency, False, plan)
            self._hand_over(s, active, plan, t0, latency, obs.stamp_ns)
            lead = 1  # hand over this many periods after the cycle's base
            active_ns = t0  # the running plan's start (ns), where its grid of command periods begins
            base = t0  # the previous hand-over (a cycle after a late one: its own start)
            while True:
                start = s.now_ns()
                handover = self.handover_instant(base, lead, period_ns, command_ns, active_ns,
                                                 active_ns + seconds_to_ns(active.end - active.start) - command_ns,
                                                 start)
                obs = s.observe()
                if obs.problem or s.stopping:
                    break
                c0 = io.plan_clock()
                x_h = self._roll_forward(s, obs, active, handover)
                t_h = s.rel(handover)
                u0 = active.velocity(t_h)
                warm = active.shifted_knots(t_h, K)
                # the budget, less what the cycle lost since its base (the node's wait polls) or to a hand-over
                # capped at the running plan's end: the plan must be done the same share of a period before
                # its hand-over
                room = (handover - start) * 1e-9 - (1.0 - c.budget_fraction) * c.period
                plan = self._plan(s, x_h, u0, warm, c0 + max(0.0, min(c.budget_fraction * c.period, room)))
                latency = io.planned(io.plan_clock() - c0)
                arrival = s.now_ns()
                s.check_stop()  # a plan made while the push was stopped is not handed over
                if s.jumped:
                    break
                late = arrival > handover
                self._log(start, latency, late, plan, max(0, arrival - handover) * 1e-9)
                # a cycle longer than a period hands the next plan over as many periods after its start as it
                # took (a late plan is dropped, so a host a little too slow for the rate would otherwise drop every
                # one), at most where the running plan ends (handover_instant)
                lead = max(1, -(-(arrival - start) // period_ns))
                base = arrival if late else handover  # a late cycle's successor starts at once, off the grid
                if late:  # the running plan covers the horizon: it keeps running, the next cycle starts now
                    s.status(f"cycle late by {(arrival - handover) * 1e-9:.3f} s: plan dropped, the running plan "
                             f"continues", "warning")
                else:
                    before = active.at(t_h - 1e-6)
                    schedule = SplineSchedule(t_h, plan.knots, c.knot_interval, c.command_period,
                                              previous=active.settled(),
                                              takeover=t_h, origin_ns=s.origin_ns)
                    self.log.handover_jumps.append(float(np.linalg.norm(schedule.at(t_h + 1e-6) - before)))
                    self._hand_over(s, schedule, plan, handover, latency, obs.stamp_ns)
                    active, active_ns = schedule, handover
                    s.hold(handover)
                s.judge(s.result.actions + 1)
            io.execute(None)

    @staticmethod
    def handover_instant(base: int, lead: int, period: int, command_period: int, grid: int, end: int,
                         start: int) -> int:
        """The hand-over instant (ns) of a cycle starting at ``start``: ``lead`` re-plan periods after its
        ``base`` (the previous hand-over, on the grid, so a steady cycle keeps the rate exactly; after a late cycle
        its own start), on the running plan's grid of command periods (``grid`` + k ``command_period``, the next
        one: never sooner than asked; ``SplineSchedule`` says why), never after ``end`` (the running plan's last
        period boundary before its end: a later plan would start after the pusher had stopped, a gap, then a
        step), and after ``start``."""
        h = base + lead * period
        h = grid + -(-(h - grid) // command_period) * command_period
        if end > start:
            h = min(h, end)
        while h <= start:
            h += command_period
        return h

    def _plan(self, s: PushSession, x, u0, warm, deadline) -> FastPlan:
        s.apply_goal_change()
        io = s.io

        def clock() -> float:
            return math.inf if s.stopping else io.plan_clock()

        try:
            plan = self.planner.plan(x, u0, warm, deadline=deadline, clock=clock)
        except (ModelDiverged, ValueError) as e:
            raise PushStop(Outcome.FAILED, f"planning failed: {e}") from None
        if not (np.all(np.isfinite(plan.knots)) and np.all(np.isfinite(plan.states)) and math.isfinite(plan.cost)):
            raise PushStop(Outcome.FAILED, f"planning failed: the {plan.model} model predicted non-finite states "
                                           f"or cost (cost {plan.cost})")
        return plan

    def _roll_forward(self, s: PushSession, obs, schedule: ControlSchedule, until_ns: int) -> np.ndarray:
        """The state predicted for ``until_ns``: ``obs`` rolled forward with the fine model through what
        ``schedule`` executes meanwhile (one batched call of equal-length command periods where they line up)."""
        pr = self.planner.predictor
        x = self.scene.layout.check(obs.x, "observed state")
        x, _ = project_feasible(self.scene, x)
        try:
            for a, b, u in schedule.segments(s.rel(obs.stamp_ns), s.rel(until_ns)):
                steps = int(round((b - a) / TIMESTEP))
                if steps < 1:
                    continue
                dt = steps * TIMESTEP
                model = ModelSpec(pr.default_fine)
                x = pr.predict(x, np.asarray(u, dtype=float)[None], dt, model=model).states[-1]
        except (ModelDiverged, ValueError) as e:
            raise PushStop(Outcome.FAILED, f"planning failed: predicting the start state: {e}") from None
        return x

    def _log(self, start_ns: int, latency: float, late: bool, plan: FastPlan, lateness: float = 0.0):
        self.log.starts_ns.append(int(start_ns))
        self.log.latencies.append(float(latency))
        self.log.late.append(bool(late))
        self.log.lateness.append(float(lateness))
        self.log.fine_fraction.append(float(plan.fine_fraction))
        self.log.rescore_times.append(float(plan.rescore_time))
        self.log.rescored.append(int(plan.rescored))
        self.log.iterations.append(int(plan.spec.iterations or 0) if plan.spec is not None else 0)
        self.log.abandoned.append(bool(plan.abandoned))

    def _hand_over(self, s: PushSession, schedule: SplineSchedule, plan: FastPlan, start_ns: int, latency: float,
                   observed_ns: int | None = None):
        res = s.result
        # the cycles of this push dropped as late so far (the action feedback's late_plans): a dropped plan is never
        # handed over, so no report of its own says so
        dropped = int(sum(self.log.late))
        report = FastReport(plan, res.actions, start_ns * 1e-9, latency, 0.0, res.distance, s.goal,
                            dropped, start_ns=start_ns, observed_ns=observed_ns)
        s.hand_over(report, schedule)


def build_fast(scene: Scene, params: dict) -> FastMPCPush:
    """Registry build of ``fast``: the MPC's model, speeds, cost weights and predictor from the node's parameters,
    the cycle's settings ``fast.<name>``."""
    from .mpc_push import mpc_planner  # noqa: PLC0415 - the MPC's parameters, parsed once there
    try:
        config = from_values(FastConfig, params, "fast.")
    except ConfigError as e:
        raise ValueError(f"parameter {e}") from None
    if "realtime" in params and not params["realtime"]:
        raise ValueError("parameter realtime: the fast planner plans while the pusher moves; set realtime true")
    mpc = mpc_planner(scene, params, slice_s=config.slice_duration)  # Parareal's auto coarse model predicts these
    try:
        planner = FastPlanner(scene, config, mpc.task, mpc.predictor, mpc.config.model,
                              mpc.config.sampling.max_speed)
    except ConfigError as e:
        mpc.predictor.close()
        raise ValueError(f"parameter {e.within('fast.') if e.name != 'model' else e}") from None
    return FastMPCPush(planner)
