"""DG-OC as a strategy of the one push loop (planner ``dgoc``, paper 003): plan once -> track at 100 Hz -> re-plan
when needed, in the planner node and the simulated world (``core.sim.closed_loop.WorldIO``) alike.

``DGOCPush`` runs inside ``session.PushSession``, which owns the goal, stop, pauses, judging and reporting, and talks
to the world through the session's ``PushIO``. Unlike the sampling MPC, DG-OC
plans the whole push at once (the DP -> WS framework of ``ddp/dgoc.py`` from the k nearest demonstrations, a goal
*pose*: position and yaw), and a feedback controller (``ddp/tracking.PlanTracker``: the plan's DDP gains behind the
trust-region error filter) turns every observation into a pusher velocity at ``rate_hz``. Each tick the command is
handed over as a one-control ``ControlSchedule`` held for ``hold`` s: a loop that stalls stops the pusher.

The pusher stops while the planner thinks (a plan takes seconds): before every plan the loop commands zero, lets
``rest_s`` pass and plans from the state then observed. It re-plans

* from where the slider is when the tracking error stays outside the re-plan radius (``TrackingConfig``:
  WS-DDP warm-started from the rest of the plan, at most ``max_replans`` times per plan);
* with the whole DG-OC framework when a plan (and its settling time) ends without the goal reached, when the
  goal moves (``set_goal``) and after a pause; at most ``max_plans`` plans per push (one plan = one action of
  the outcome monitor: the push times out after ``max_plans`` of them).

A stale or invalid state (or a clock jump, a mocap clock offset, a deep penetration: the session's checks) stops the
pusher at once and pauses the push; it resumes (re-planned from rest) if a valid state comes back within
``tracking_loss_timeout``, else it fails. ``stop`` (cancel, pre-emption through
``session.PushArbiter``, a node's deactivation or shutdown) ends it at once, also while a plan is being solved (the
DDP asks ``stopping`` before every iteration: seconds of planning end within one iteration). Outcomes come from the
one ``OutcomeMonitor``, on every state the IO saw.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..config import ConfigError, finite, from_values, knob, require
from ..models.base import ModelDiverged
from ..models.quasistatic import (PUSHER_VEL, SEPARATION, QuasiStaticPusherSlider, fine_c_scale, from_scene_state,
                                  to_scene_states)
from ..scene.spec import Scene
from .ddp.costs import DGOCWeights
from .ddp.demonstrations import DemonstrationError, load_library
from .ddp.dgoc import METHODS, PLAN_DT, DGOCPlanner
from .ddp.solver import DDPSettings, SolveStopped
from .ddp.tracking import PlanTracker, TrackingConfig, replan
from .goal_policy import default_target
from .outcome import Outcome
from .session import (ControlSchedule, Observation, PlanView, PushSession, PushStop, PushStrategy, SessionResult,
                      seconds_to_ns)
from .tasks import Goal

MARKER_STRIDE = 25  # a plan (one state per 20 ms) is shown with the slider every 0.5 s


@dataclass(frozen=True)
class DGOCConfig:
    """Settings of the DG-OC planner (ROS parameters ``dgoc.<name>`` of the planner node)."""

    demonstrations: str = knob("", "demonstration library: a directory of *.json or a shipped scene's name; empty "
                                   "= config/demonstrations/<scene name>")
    method: str = knob("ws", "DDP variant: ws (the DP -> WS framework, DG-OC) | dp | ds | zs")
    k: int = knob(1, "nearest demonstrations planned from per goal (the cheapest plan wins)")
    escalate_k: int = knob(3, "a plan that misses the goal's tolerances is planned again "
                              "from the next nearest demonstrations, "
                              "up to this many in all (<= k: never)")
    max_iterations: int = knob(40, "DDP iterations per stage")
    max_plans: int = knob(3, "default limit of whole DG-OC plans per push "
                             "(goals may set their own in max_actions)")
    yaw_tolerance: float = knob(0.1, "yaw tolerance of goals that give none "
                                     "(RViz /goal_pose) (rad)")
    c_scale: float = knob(
        0.0, "limit-surface scale of the quasi-static model; 0 = the fit to the scene's fine model (1 on a support "
             "grid, 1.45 on MuJoCo's native box contact)")
    max_speed: float = knob(
        0.25, "the norm of every pusher command is clipped to this (m/s). DG-OC's plans move at up to 0.15 m/s per "
              "axis (the demonstrations go round the box at 0.2 m/s): the velocity_commander's max_speed must allow it")
    rest_s: float = knob(0.2, "the pusher is stopped this long before every plan, so plans start from rest (s)")
    hold: float = knob(0.05, "a tick's command is held this long when no newer one follows (s)")

    def __post_init__(self):
        require(self.method in METHODS, "method", self.method, f"one of {', '.join(METHODS)}")
        for name in ("k", "escalate_k", "max_iterations", "max_plans"):
            v = getattr(self, name)
            require(isinstance(v, int) and not isinstance(v, bool) and v >= 1, name, v, "an integer >= 1")
        require(finite(self.yaw_tolerance) and self.yaw_tolerance > 0.0, "yaw_tolerance", self.yaw_tolerance, "> 0")
        require(finite(self.c_scale) and self.c_scale >= 0.0, "c_scale", self.c_scale, ">= 0")
        require(finite(self.rest_s) and self.rest_s >= 0.0, "rest_s", self.rest_s, ">= 0")
        require(finite(self.max_speed) and self.max_speed > 0.0, "max_speed", self.max_speed, "> 0")
        require(finite(self.hold) and self.hold > 0.0, "hold", self.hold, "> 0")


@dataclass(frozen=True)
class DGOCPlan:
    """One plan of the quasi-static model, as handed to the tracker (and to whoever shows it)."""

    X: np.ndarray  # (T+1, 7) model states [s_x, s_y, s_theta, p_x, p_y, v_x, v_y]
    U: np.ndarray  # (T, 2) pusher accelerations
    K: np.ndarray  # (T, 2, 7) feedback gains
    dt: float
    faces: np.ndarray  # (T,) pushed face per step (0..3 = slider -x, -y, +x, +y), -1 while separated
    target: np.ndarray  # (3,) goal pose, yaw unwrapped to the plan's
    kind: str  # "dgoc" (a whole DG-OC plan) or "replan" (WS-DDP from the tracked state)
    method: str
    demonstration: str  # name of the demonstration it started from ('' for re-plans and ZS-DDP)
    solve_time: float  # s of plan clock

    @property
    def switches(self) -> np.ndarray:
        """Indices of the steps where the pusher reaches a new face (a face switch: through separation)."""
        pushing = np.flatnonzero(self.faces >= 0)
        if len(pushing) < 2:
            return np.zeros(0, dtype=int)
        f = self.faces[pushing]
        return pushing[1:][f[1:] != f[:-1]]

    @property
    def final_error(self) -> np.ndarray:
        e = self.X[-1, :3] - self.target
        e[2] = math.remainder(float(e[2]), 2 * math.pi)
        return np.abs(e)


class DGOCPushPlanner:
    """DG-OC for the box objects of a scene: each box's quasi-static model (``c_scale`` fitted to the fine model by
    default) and the scene's demonstration library, and the map between scene states and the model's."""

    def __init__(self, scene: Scene, config: DGOCConfig = DGOCConfig(), tracking: TrackingConfig = TrackingConfig()):
        self.scene, self.config, self.tracking = scene, config, tracking
        # a hold shorter than a tick expires before the next tick's command: the pusher is sent zero in between
        require(config.hold >= 1.0 / tracking.rate_hz - 1e-12, "hold", config.hold,
                f"at least one tracking tick (1 / {tracking.rate_hz:g} Hz = {1.0 / tracking.rate_hz:g} s)")
        source = config.demonstrations or scene.name
        try:
            self.demos = load_library(source)
        except DemonstrationError as e:
            raise ConfigError("demonstrations", str(e)) from None
        self.settings = DDPSettings(max_iterations=config.max_iterations)
        self.weights = DGOCWeights()
        self._planners: dict[int, DGOCPlanner] = {}

    def planner(self, index: int) -> DGOCPlanner:
        """The DG-OC planner of object ``index`` (built once)."""
        if index not in self._planners:
            obj = self.scene.objects[index]
            if obj.shape != "box":
                raise ValueError(f"DG-OC pushes boxes: object {obj.name!r} is a {obj.shape}")
            scale = self.config.c_scale or fine_c_scale(self.scene)
            model = QuasiStaticPusherSlider.from_scene(self.scene, obj=index, dt=PLAN_DT, c_scale=scale)
            self._planners[index] = DGOCPlanner(model, self.demos, self.weights, self.settings)
        return self._planners[index]

    def model_state(self, x, index: int) -> np.ndarray:
        """Scene state -> quasi-static model state [slider pose of object ``index``, pusher position, velocity]."""
        return from_scene_state(self.scene.layout, x, index)

    def scene_states(self, X, like, index: int) -> np.ndarray:
        """Model states (T+1, 7) -> scene states, the other objects where they are in ``like`` (at rest)."""
        return to_scene_states(self.scene.layout, X, like, index)

    def _faces(self, model, X, U) -> np.ndarray:
        _, faces, modes = model.rollout_info(X[0], U)
        return np.where(modes == SEPARATION, -1, faces)

    def plan(self, x, goal: Goal, clock, should_stop=None) -> DGOCPlan:
        """The whole DG-OC plan (``config.method``) from scene state ``x`` to ``goal``'s pose; ``should_stop``: see
        ``BatchedDDP.solve`` (raises ``SolveStopped``)."""
        index = goal.object_index
        p = self.planner(index)
        x0 = self.model_state(x, index)
        target = np.array([goal.position[0], goal.position[1], goal.yaw])
        t0 = clock()
        radius, yaw_tolerance = goal.radius, goal.yaw_tolerance

        def missed(err):  # as the outcome monitor judges the goal: a disc of goal.radius (not a square), the yaw
            return (np.hypot(err[:, 0], err[:, 1]) > radius) | (err[:, 2] > yaw_tolerance)

        r = p.plan_escalating(x0[None], target[None], self.config.method, k=self.config.k,
                              escalate_k=self.config.escalate_k, should_stop=should_stop, missed=missed)
        demo = p.demos[int(r.demo[0])].name if r.demo[0] >= 0 else ""
        return DGOCPlan(r.X[0], r.U[0], r.K[0], PLAN_DT, self._faces(p.model, r.X[0], r.U[0]), r.target[0],
                        "dgoc", self.config.method, demo, clock() - t0)

    def replan(self, x, goal: Goal, tracker: PlanTracker, t: float, clock, should_stop=None) -> DGOCPlan:
        """WS-DDP from the tracked state (``tracking.replan``), warm-started with the rest of the current plan."""
        p = self.planner(goal.object_index)
        target = np.array([goal.position[0], goal.position[1], goal.yaw])
        t0 = clock()
        new = replan(p.model, self.model_state(x, goal.object_index), tracker, t, target, self.tracking, self.weights,
                     should_stop)
        return DGOCPlan(new.X, new.U, new.K, PLAN_DT, self._faces(p.model, new.X, new.U), target, "replan", "ws", "",
                        clock() - t0)


@dataclass(frozen=True)
class DGOCPlanReport:
    """A DG-OC plan as it was handed to the tracker (what ``PushIO.report_plan`` gets from this loop)."""

    plan: DGOCPlan
    step: int  # plans executed before it
    start: float  # session time its tracking starts
    latency: float  # s it took, on the plan clock
    distance: float  # target to goal when it was made (m)
    goal: Goal
    x: np.ndarray  # scene state it was planned from
    states: np.ndarray  # (T+1, D) its model states as scene states (for paths and markers)
    late_plans: int = 0  # (the MPC loop's field; DG-OC plans are never late: the pusher waits for them)
    start_ns: int = 0  # ns on the session clock when its tracking starts

    @property
    def solve_time(self) -> float:
        return self.plan.solve_time


class _Replan(Exception):
    """Tracking ends early: plan again with the whole framework (a pause, a new goal)."""


@dataclass
class DGOCResult(SessionResult):
    replans: int = 0  # WS-DDP re-plans from the tracked state
    ticks: int = 0  # controller ticks executed
    feedback_ticks: int = 0  # of which outside the trust region (the gains acted)


class DGOCPush(PushStrategy):
    """DG-OC in the one push loop (``session.PushSession``): plan a goal pose from rest, track it at ``rate_hz``,
    re-plan from the tracked state or plan again (see the module docstring)."""

    result_type = DGOCResult
    judge_observed = True  # a judgement with no state seen since the last judges the latest observation

    def __init__(self, planner: DGOCPushPlanner):
        self.planner, self.scene, self.config, self.tracking = planner, planner.scene, planner.config, planner.tracking
        self.command_rate = self.tracking.rate_hz  # the tracker's commands go out at its rate
        self.goal_yaw_tolerance = self.config.yaw_tolerance  # of /goal_pose goals
        self.default_max_actions = self.config.max_plans

    # ------------------------------------------------------------------------------------------ the strategy
    def check_goal(self, goal: Goal):
        if not goal.uses_yaw:
            raise ValueError("DG-OC plans to a goal pose: the goal needs a yaw (yaw_tolerance >= 0)")
        self.planner.planner(goal.object_index)  # a box, or ValueError

    def goal_changed(self, session: PushSession, goal: Goal):
        session.status(f"DG-OC: new goal {self.goal_text(session)}")

    def describe(self) -> str:
        return (f"planner dgoc ({self.config.method}-DDP from {len(self.planner.demos)} demonstrations, tracked at "
                f"{self.tracking.rate_hz:g} Hz)")

    def plan_view(self, report: DGOCPlanReport) -> PlanView:
        plan = report.plan
        shown = np.vstack([report.states[::MARKER_STRIDE], report.states[-1:]])
        return PlanView(report.start_ns, report.goal, report.step, report.distance, report.latency, plan.X[1:, 5:7],
                        plan.dt, report.states, float(np.sum(plan.final_error)),
                        f"quasistatic ({plan.kind}, {plan.method}-DDP)", float(plan.solve_time), marker_states=shown,
                        faces=plan.faces)

    def push(self, s: PushSession):
        res = s.result
        while True:
            s.apply_goal_change()
            obs = self._rest_and_observe(s)
            tracker = self._tracker(self._plan(s, obs.x))
            try:
                self._track(s, tracker)
            except _Replan:
                continue
            res.actions += 1
            s.judge()  # after the last allowed plan: TIMEOUT unless reached

    def _track(self, s: PushSession, tracker: PlanTracker):
        """Run ``tracker`` at ``rate_hz`` until its plan and settling time are over; re-plan from the tracked state
        when it asks to (``_Replan`` ends tracking for a whole new plan)."""
        io, cfg = s.io, self.tracking
        # ticks are counted in integer ns from t0 (exact at any epoch); the tracker gets time since t0 (small, exact)
        tick, tick_ns = 1.0 / cfg.rate_hz, seconds_to_ns(1.0 / cfg.rate_hz)
        end_ns = seconds_to_ns(tracker.duration + cfg.settle_s)
        t0, replans, last_tick = s.now_ns(), 0, -1
        try:
            while True:
                now = s.now_ns()
                if now - t0 >= end_ns:
                    io.execute(None)
                    return
                obs = s.observe()
                if obs.problem:
                    io.execute(None)
                    s.usable_observation()  # pauses; fails if the problem stays
                    raise _Replan
                s.check_stop()
                if s.goal_pending:
                    raise _Replan
                x = self.planner.model_state(obs.x, s.goal.object_index)
                t = (now - t0) * 1e-9
                if tracker.wants_replan(t) and replans < cfg.max_replans:
                    self._count(s, tracker)
                    obs = self._rest_and_observe(s)
                    tracker = self._tracker(self._plan(s, obs.x, tracker=tracker, t=t))
                    replans += 1
                    s.result.replans += 1
                    t0, last_tick = s.now_ns(), -1
                    end_ns = seconds_to_ns(tracker.duration + cfg.settle_s)
                    continue
                # one controller step per tick passed: a loop woken late (a busy host) integrates the plan's
                # accelerations over the time that passed, not over fewer ticks (at most ``hold`` of them)
                k = max(0, (now - t0) // tick_ns)  # a clock stepped back counts as no tick
                steps = min(max(1, k - last_tick), max(1, round(self.config.hold / tick)))
                for j in range(steps):
                    v = tracker.command((k - steps + 1 + j) * tick, x)
                last_tick = k
                speed = float(np.hypot(*v))
                sent = v * min(1.0, self.config.max_speed / speed) if speed > 0.0 else v
                io.execute(ControlSchedule(0.0, self.config.hold, [sent], origin_ns=now))
                io.wait_ns(t0 + (k + 1) * tick_ns, lambda: s.stopping or bool(s.observe().problem))
                s.judge(reached=False)
        finally:
            self._count(s, tracker)

    # ------------------------------------------------------------------------------------------ helpers
    def _tracker(self, plan: DGOCPlan) -> PlanTracker:
        tracker = PlanTracker(plan.X, plan.U, plan.K, plan.dt, self.tracking)
        tracker.v_cmd = plan.X[0, PUSHER_VEL].copy()  # the pusher is at rest (or as observed) where the plan starts
        return tracker

    @staticmethod
    def _count(s: PushSession, tracker: PlanTracker):
        """Add a tracker's ticks to the result (once)."""
        s.result.ticks += tracker.ticks
        s.result.feedback_ticks += tracker.feedback_ticks
        tracker.ticks = tracker.feedback_ticks = 0

    def _rest_and_observe(self, s: PushSession) -> Observation:
        """Stop the pusher, let ``rest_s`` pass, and return the usable observation then."""
        io = s.io
        io.execute(None)
        if self.config.rest_s > 0.0:
            io.wait_ns(s.now_ns() + seconds_to_ns(self.config.rest_s), lambda: s.stopping)
        s.judge(reached=False)
        return s.usable_observation()

    def _plan(self, s: PushSession, x, tracker: PlanTracker | None = None, t: float = 0.0) -> DGOCPlan:
        io, res = s.io, s.result
        if res.actions >= s.monitor.max_actions:  # cannot happen: judge times out first; kept as a guard
            raise PushStop(Outcome.TIMEOUT, f"{res.actions} plan(s) executed")
        what = "re-planning from the tracked state" if tracker is not None else \
            f"planning {self.goal_text(s)} (plan {res.actions + 1}/{s.monitor.max_actions})"
        s.status(f"DG-OC: {what}, {s.monitor.distance(x) * 1e3:.0f} mm to go")
        c0 = io.plan_clock()
        stopping = lambda: s.stopping  # noqa: E731 - asked by the DDP before every iteration
        try:
            plan = (self.planner.plan(x, s.goal, io.plan_clock, stopping) if tracker is None else
                    self.planner.replan(x, s.goal, tracker, t, io.plan_clock, stopping))
        except SolveStopped as e:  # only a stop request stops a solve
            outcome, reason = s.stopped_as()
            raise PushStop(outcome, f"{reason} (while planning: the solve stopped after {e.iterations} DDP "
                                    f"iteration(s) of its stage, {io.plan_clock() - c0:.2f} s into it)") from None
        except (ModelDiverged, ValueError, np.linalg.LinAlgError) as e:
            raise PushStop(Outcome.FAILED, f"planning failed: {e}") from None
        if not (np.all(np.isfinite(plan.U)) and np.all(np.isfinite(plan.K))):
            raise PushStop(Outcome.FAILED, "planning failed: non-finite controls or gains")
        latency = io.planned(io.plan_clock() - c0)
        s.check_stop()
        states = self.planner.scene_states(plan.X, x, s.goal.object_index)
        start_ns = s.now_ns()
        s.hand_over(DGOCPlanReport(plan, res.actions, start_ns * 1e-9, latency, res.distance, s.goal,
                                   np.asarray(x).copy(), states, start_ns=start_ns))
        e = plan.final_error
        source = f", from {plan.demonstration}" if plan.demonstration else ""
        s.status(f"DG-OC: tracking a {plan.kind} plan ({plan.method}{source}) of {len(plan.U) * plan.dt:.1f} s "
                 f"with {len(plan.switches)} face switch(es), planned in {latency:.2f} s, planned final error "
                 f"{e[0] * 1e3:.1f} mm, {e[1] * 1e3:.1f} mm, {e[2]:.3f} rad")
        return plan

    def goal_text(self, s: PushSession) -> str:
        g = s.goal
        return f"{s.target_name()!r} to ({g.position[0]:+.3f}, {g.position[1]:+.3f}) m, {g.yaw:+.2f} rad"


def build_dgoc(scene: Scene, params: dict) -> DGOCPush:
    """Registry build of ``dgoc``: the settings ``dgoc.<name>``, the scene's demonstrations, the target a box."""
    try:
        planner = DGOCPushPlanner(scene, from_values(DGOCConfig, params, "dgoc."))
    except ConfigError as e:
        raise ValueError(f"parameter {e if e.name.startswith('dgoc.') else e.within('dgoc.')}") from None
    planner.planner(scene.object_index(default_target(scene, params.get("target_object", ""))))  # a box
    return DGOCPush(planner)
