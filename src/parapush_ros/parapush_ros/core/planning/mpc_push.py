"""The sampling MPC as a strategy of the one push loop (planner ``mpc``; papers 000, 001, 004).

``MPCPush`` drives an ``MPCPlanner`` inside ``session.PushSession``, which owns the goal, stop, pauses, judging and
reporting. Two ways to push (``SessionConfig.realtime``):

* **stop and plan** (paper 000): plan from the observed state, hold the first control for one period, stop,
  observe, re-plan. The pusher stands still while the planner thinks.
* **real time**: while control n runs, plan the sequence that starts when it ends, from the state predicted for
  that moment (the latest observation rolled forward through the rest of control n with the planner's model, with
  the plan's own warm start), iterating until a deadline just before the switch (anytime, best-so-far kept). At the
  switch the new plan takes over without a stop. A late plan does not stop the pusher: the previous plan's next
  control keeps running, the late plan takes over when it arrives, and the lateness is reported; after a plan only
  a little late (``LATE_TOLERANCE``) the next one is made at once for the next switch. A planner that needs longer
  than a control (one iteration on a busy machine) plans for a later switch instead (the lead follows the latest
  plan's latency, up to horizon - 1 controls), so its plans arrive in time.

With a model that predicts its variance, the status says when a plan enters a region where an object's predicted
position sigma exceeds ``uncertainty_threshold`` and when a later plan of the same push leaves it
(``UncertaintyWatch``).
"""
from __future__ import annotations

import math

import numpy as np

from ..config import ConfigError
from ..models.base import ModelDiverged
from ..models.registry import ModelSpec, Predictor
from ..scene.spec import Scene
from .goal_policy import default_goal_position, default_target
from .planner import MPCPlanner, Plan, PlannerConfig
from .session import (LATE_TOLERANCE, ControlSchedule, Observation, PlanReport, PlanView, PushSession, PushStop,
                      PushStrategy, ceil_div, seconds_to_ns)
from .tasks import CostWeights, Goal, PushTask, goal_for
from .outcome import Outcome


class UncertaintyWatch:
    """Says when a plan's predicted position sigma of an object exceeds ``threshold`` (m; 0: never), and when a
    later plan of the same push is certain again (``reset`` at every push: a push starts certain)."""

    def __init__(self, scene: Scene, threshold: float = 0.0):
        self.scene, self.threshold = scene, float(threshold)
        self.uncertain = False

    def reset(self):
        self.uncertain = False

    def check(self, variance) -> tuple[str, str] | None:
        """(text, level) to report for a plan's predicted variance (N+1, D), or None."""
        sigma = self.scene.layout.object_position_sigma(variance)  # (N+1, n_objects)
        step, k = np.unravel_index(int(np.argmax(sigma)), sigma.shape)
        threshold = self.threshold
        uncertain = threshold > 0.0 and sigma[step, k] > threshold
        was, self.uncertain = self.uncertain, uncertain
        if uncertain:
            return (f"uncertain region: predicted position sigma {1e3 * sigma[step, k]:.1f} mm of "
                    f"{self.scene.objects[k].name!r} at step {step} > uncertainty_threshold {1e3 * threshold:.1f} mm",
                    "warning")
        if was:
            return (f"certain again: predicted position sigma <= {1e3 * sigma.max():.1f} mm (uncertainty_threshold "
                    f"{1e3 * threshold:.1f} mm)", "info")
        return None


class MPCPush(PushStrategy):
    """The sampling MPC in the push loop: stop and plan, or real time (see the module docstring)."""

    def __init__(self, planner: MPCPlanner, uncertainty_threshold: float = 0.0):
        self.planner, self.scene = planner, planner.scene
        self.dt = planner.config.sampling.control_duration
        self.dt_ns = seconds_to_ns(self.dt)  # periods are counted in integer ns: exact at any epoch
        self.watch = UncertaintyWatch(planner.scene, uncertainty_threshold)

    # ------------------------------------------------------------------------------------------ the strategy
    def start(self, session: PushSession):
        self.planner.set_goal(session.goal)
        self.watch.reset()

    def goal_changed(self, session: PushSession, goal: Goal):
        self.planner.set_goal(goal)

    def push(self, session: PushSession):
        if session.config.realtime:
            self._push_realtime(session)
        else:
            self._push_stop_and_plan(session)

    def describe(self) -> str:
        c = self.planner.config
        return f"planner mpc (model {c.model}, {c.optimiser} optimiser)"

    def close(self):
        if self.planner.predictor is not None:
            self.planner.predictor.close()

    def plan_view(self, report: PlanReport) -> PlanView:
        plan = report.plan
        spec = plan.spec  # the model that made this plan, resolved
        return PlanView(report.start_ns, report.goal, report.step, report.distance, report.latency, plan.controls,
                        self.dt, plan.states, float(plan.cost), spec.message_name, float(plan.plan_time),
                        iterations=int(spec.iterations or 0), late_plans=report.late_plans, variance=plan.variance)

    # ------------------------------------------------------------------------------------------ the loops
    def _push_stop_and_plan(self, s: PushSession):
        io, dt_ns = s.io, self.dt_ns
        while True:
            obs = s.usable_observation()
            plan, latency = self.plan(s, obs.x)
            latency = io.planned(latency)
            s.check_stop()
            if s.observe().problem:  # the state went bad while planning: pause, then re-plan
                continue
            start = s.now_ns()
            self._hand_over(s, s.schedule(start, self.dt, plan.controls[:1]), plan, start, latency, 0.0)
            s.hold(start + dt_ns)
            self.planner.commit()  # an interrupted control counts: the pusher has moved
            if not s.observe().problem:
                s.wait_for(lambda: s.jumped or (io.observe().stamp_ns or 0) >= start + dt_ns,  # noqa: B023 - called within this iteration
                           s.config.state_timeout,
                           "no scene state measured after the control ended; planning from the newest one "
                           "(are scene_state stamps on the planner's clock?)")
            s.judge(s.result.actions + 1)

    def _push_realtime(self, s: PushSession):
        io, dt, dt_ns = s.io, self.dt, self.dt_ns
        horizon = self.planner.config.sampling.horizon
        while True:  # from rest: the first push, and again after every pause
            obs = s.usable_observation()
            plan, latency = self.plan(s, obs.x, budget=dt - s.config.plan_margin)
            latency = io.planned(latency)
            s.check_stop()
            if s.observe().problem:
                continue
            # every time below is integer ns on the session clock, every period counted from t0 in integers
            t0 = s.now_ns()
            active = s.schedule(t0, dt, plan.controls)
            self._hand_over(s, active, plan, t0, latency, 0.0, obs.stamp_ns)
            base, done = s.result.actions, 0  # actions executed before t0, and since
            lead = 1  # plan for the switch this many controls ahead
            while True:
                # never before the switch of the plan already made (with a lead it may not have started yet)
                cycle = t0 + done * dt_ns
                switch = max(t0 + (done + lead) * dt_ns, s.abs_ns(active.start))
                obs = s.observe()
                if obs.problem or s.stopping:
                    break
                c0 = io.plan_clock()
                x_start = self._roll_forward(s, obs, active, switch)
                io.report_computing(switch * 1e-9, x_start)
                warm, u_prev = active.controls_from(s.rel(switch), horizon)
                self.planner.warm_start(warm, u_prev)
                # the budget is one control whatever the lead: the optimiser fills what it is given
                due = min(switch, cycle + dt_ns)
                plan, _ = self.plan(s, x_start, deadline=c0 + (due - s.now_ns()) * 1e-9 - s.config.plan_margin)
                latency = io.planned(io.plan_clock() - c0)
                # a planner slower than one control plans further ahead, so that its plans arrive in time (the
                # executing plan covers horizon - 1 controls past this one). An anytime plan that overran its
                # deadline by a little (an iteration longer than the ones before) is late once and takes over on
                # arrival: raising the lead for it would run the previous plan's next control open loop for a whole
                # period, and for Parareal-K that control was planned on a prediction exact only for K slices.
                lead = min(max(1, math.ceil(latency / dt - LATE_TOLERANCE)), max(1, horizon - 1))
                arrival = s.now_ns()
                if s.jumped:  # the clock jumped while planning: this plan's times are on the old one
                    break
                late_ns = max(0, arrival - switch)
                previous = active.settled() if arrival >= s.abs_ns(active.takeover) else active
                schedule = s.schedule(switch, dt, plan.controls, previous, takeover=max(switch, arrival))
                self._hand_over(s, schedule, plan, switch, latency, late_ns * 1e-9, obs.stamp_ns)
                if late_ns > 0:
                    s.status(f"plan late by {late_ns * 1e-9:.3f} s: the previous plan's next control ran meanwhile",
                             "warning")
                # the next plan starts at the first switch after this one arrived; a plan only a little late
                # (it took over within LATE_TOLERANCE of its switch) is followed at once by the plan for the next
                # switch, with the rest of the control as budget, so that the late plan's own second control (again
                # an open-loop guess) does not run for a whole period
                next_k = max(done + 1, ceil_div(arrival - t0, dt_ns))
                if 0 < late_ns <= LATE_TOLERANCE * dt_ns and lead == 1:
                    next_k = (switch - t0) // dt_ns
                s.hold(t0 + next_k * dt_ns)
                active = schedule
                # controls begun by now (one begun less than a millionth of a period ago does not count), at most
                # up to the switch held for; never fewer than before (a clock that jumped back pauses the push)
                executed = max(done, min(ceil_div(s.now_ns() - t0 - dt_ns // 10**6, dt_ns), next_k))
                self._record_controls(s, active, t0, done, executed)
                done = executed
                s.judge(base + done)
            io.execute(None)  # a bad state: stop at once; usable_observation pauses

    # ------------------------------------------------------------------------------------------ planning
    def plan(self, s: PushSession, x, budget: float | None = None, deadline: float | None = None) -> tuple[Plan, float]:
        """Plan from ``x`` (anytime when given a ``budget`` in s or a ``deadline`` on the plan clock)."""
        s.apply_goal_change()
        io = s.io
        c0 = io.plan_clock()
        if budget is not None:
            deadline = c0 + budget
        s.status(f"planning step {s.result.actions + 1}/{s.monitor.max_actions}: "
                 f"{s.monitor.distance(x) * 1e3:.0f} mm to go")

        def clock() -> float:
            """The plan clock, at infinity once the push is stopping: a cancel, pre-emption or shutdown ends the
            anytime optimiser after its current iteration (on a frozen simulated clock its deadline never comes)."""
            return math.inf if s.stopping else io.plan_clock()

        try:
            plan = self.planner.plan(x, deadline=deadline, clock=clock)
        except (ModelDiverged, ValueError) as e:
            raise PushStop(Outcome.FAILED, f"planning failed: {e}") from None
        if not np.all(np.isfinite(plan.controls)):
            raise PushStop(Outcome.FAILED, f"planning failed: non-finite controls {plan.controls.tolist()}")
        if not (np.all(np.isfinite(plan.states)) and math.isfinite(plan.cost)):  # published as the predicted path
            raise PushStop(Outcome.FAILED, f"planning failed: the {plan.model} model predicted non-finite states "
                                           f"or cost (cost {plan.cost})")
        if plan.variance is not None and not np.all(np.isfinite(plan.variance)):  # published, and judged uncertain
            raise PushStop(Outcome.FAILED, f"planning failed: the {plan.model} model predicted a non-finite variance")
        return plan, io.plan_clock() - c0

    def _roll_forward(self, s: PushSession, obs: Observation, schedule: ControlSchedule, until_ns: int) -> np.ndarray:
        """The state predicted for ``until_ns``: ``obs`` rolled forward through what ``schedule`` executes
        meanwhile, with the planner's model."""
        try:
            return self.planner.roll_forward(obs.x, schedule.segments(s.rel(obs.stamp_ns), s.rel(until_ns)))
        except (ModelDiverged, ValueError) as e:
            raise PushStop(Outcome.FAILED, f"planning failed: predicting the start state: {e}") from None

    def _hand_over(self, s: PushSession, schedule: ControlSchedule, plan: Plan, start_ns: int, latency: float,
                   late: float, observed_ns: int | None = None):
        res = s.result
        if not s.config.realtime:
            res.controls.append(plan.controls[0].copy())
        report = PlanReport(plan, res.actions, start_ns * 1e-9, latency, late, res.distance, s.goal,
                            res.late_plans + (late > 0.0), start_ns=start_ns, observed_ns=observed_ns)
        s.hand_over(report, schedule)
        if plan.variance is not None:
            said = self.watch.check(plan.variance)
            if said is not None:
                s.status(*said)
        u = plan.controls[0]
        s.status(f"pushing {s.target_name()!r}: step {res.actions + 1}/{s.monitor.max_actions}, "
                 f"{res.distance * 1e3:.0f} mm to go, u = ({u[0]:.3f}, {u[1]:.3f}) m/s, plan {latency:.2f} s "
                 f"({plan.model})" + (f", {report.late_plans} late plan(s)" if s.config.realtime else ""))

    def _record_controls(self, s: PushSession, schedule: ControlSchedule, t0_ns: int, first: int, last: int):
        for k in range(first, last):
            s.result.controls.append(schedule.at(s.rel(t0_ns + k * self.dt_ns) + 1e-6))


def planner_config(params: dict) -> PlannerConfig:
    """The MPC's settings from the node's parameters, checked by ``PlannerConfig`` itself (errors name the
    parameter); the model is parsed once, with the coarse and fine models it uses, and travels as a ``ModelSpec``."""
    try:
        model = ModelSpec.parse(params["model"], coarse=params["coarse_model"], fine=params["fine_model"])
    except ValueError as e:
        raise ValueError(f"parameter {e}" if str(e).startswith(("coarse_model", "fine_model"))
                         else f"parameter model: {e}") from None
    try:
        return PlannerConfig.from_values({**params, "model": model})
    except ConfigError as e:
        raise ValueError(f"parameter {e}") from None


def mpc_planner(scene: Scene, params: dict, slice_s: float | None = None) -> MPCPlanner:
    """The sampling MPC of the node's parameters (settings, ``weights.*``, the models), aimed at the target object's
    default goal. ``slice_s``: the slices its models will predict where they are not its controls (the fast
    planner's), so that ``coarse_model: auto`` picks a coarse model that can predict them."""
    config = planner_config(params)
    weights = CostWeights.from_mapping({k[len("weights."):]: v for k, v in params.items()
                                        if k.startswith("weights.")}, source="parameters weights.*")
    target = default_target(scene, params.get("target_object", ""))
    goal = goal_for(scene, target, position=default_goal_position(scene, target))
    return MPCPlanner(scene, config, task=PushTask(scene, weights, goal),
                      predictor=Predictor.from_parameters(
                          scene, params, slice_s=config.sampling.control_duration if slice_s is None else slice_s))


def build_mpc(scene: Scene, params: dict) -> MPCPush:
    """Registry build of ``mpc``: the sampling MPC from the node's parameters."""
    return MPCPush(mpc_planner(scene, params), params.get("uncertainty_threshold", 0.0))
