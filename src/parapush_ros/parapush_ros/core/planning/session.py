"""The push loop: plan -> execute -> observe -> judge, ONE implementation for the planner node and the simulated
experiment (``core.sim.closed_loop.run_closed_loop``, ``parapush bench mpc``).

A ``PushSession`` drives an ``MPCPlanner`` toward one goal through a ``PushIO``, the only thing that differs
between the robot and the simulation: the IO tells the time and the latest observation, executes the pusher
velocities it is given (a ``ControlSchedule``), lets time pass, and hands over the states seen meanwhile to be
judged. The planner node's IO is its ROS clock, its ``scene_state`` subscription and its ``pusher_cmd`` timer;
the simulation's IO steps a MuJoCo world (``core.sim.closed_loop.WorldIO``).

Two ways to push (``SessionConfig.realtime``):

* **stop and plan** (paper 000): plan from the observed state, hold the first control for one period, stop,
  observe, re-plan. The pusher stands still while the planner thinks.
* **real time** (issue 16): while control n runs, plan the sequence that starts when it ends, from the state
  predicted for that moment (the latest observation rolled forward through the rest of control n with the
  planner's model, with the plan's own warm start), iterating until a deadline just before the switch (anytime,
  best-so-far kept). At the switch the new plan takes over without a stop. A late plan does not stop the pusher:
  the previous plan's next control keeps running, the late plan takes over when it arrives, and the lateness is
  reported; after a plan only a little late (``LATE_TOLERANCE``) the next one is made at once for the next switch.
  A planner that needs longer than a control (one iteration on a busy machine) plans for a later switch instead
  (the lead follows the latest plan's latency, up to horizon - 1 controls), so its plans arrive in time.

Either way the pusher stops only for safety: a stale or invalid state (the push pauses, and resumes re-planned
from rest if a valid state comes back within ``tracking_loss_timeout``, else it fails), a stop from outside
(cancel, pre-emption: ``PushSession.stop``, ``PushArbiter``), a planning failure, or the end of the task.

Outcomes are judged by the one ``OutcomeMonitor`` on every state the IO saw during each action: the dense true
path in simulation, every received scene state on the robot, so grazing an obstacle between plans counts.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from ..config import finite, knob, require
from ..models.base import ModelDiverged
from .outcome import DEFAULT_MAX_ACTIONS, MAX_ACTIONS_LIMIT, Outcome, OutcomeMonitor, Status
from .planner import MPCPlanner, Plan
from .tasks import Goal

EPS = 1e-9  # s: times closer than this are the same instant
# real time: a plan up to this share of a control late is handled as late (it takes over when it arrives) rather
# than as a planner slower than a control (which plans for a later switch); anytime plans overrun by jitter only
# (measured: at most 8 % of a 1 s control over 50 plans on 2 loaded cores)
LATE_TOLERANCE = 0.25


@dataclass(frozen=True)
class Observation:
    """The latest observed state and whether it may be used."""

    x: np.ndarray | None  # (D,) or None when nothing was received
    stamp: float  # s on the session clock: when it was measured
    problem: str = ""  # why it cannot be used (stale, tracking lost, ...); '' = usable


class ControlSchedule:
    """Pusher velocities over time: ``controls[k]`` is held over [start + k dt, start + (k+1) dt), zero outside.
    Until ``takeover`` the ``previous`` schedule runs instead: the plan being replaced keeps the pusher moving
    until the new one takes over at the switch, or when it arrives if it is late."""

    def __init__(self, start: float, dt: float, controls, previous: ControlSchedule | None = None,
                 takeover: float | None = None):
        controls = np.array(controls, dtype=float).reshape(-1, 2)
        if not np.all(np.isfinite(controls)):
            raise ValueError(f"schedule controls must be finite, got {controls.tolist()}")
        if not (math.isfinite(dt) and dt > 0.0):
            raise ValueError(f"schedule dt must be > 0, got {dt}")
        self.start, self.dt, self.controls = float(start), float(dt), controls
        self.previous = previous
        self.takeover = self.start if takeover is None else float(takeover)

    @property
    def end(self) -> float:
        """When the last control ends (the pusher stops there unless a newer plan takes over)."""
        return self.start + len(self.controls) * self.dt

    def index(self, t: float) -> int:
        return int(math.floor((t - self.start) / self.dt + EPS))

    def at(self, t: float) -> np.ndarray:
        """The commanded velocity at time ``t`` (2,)."""
        if self.previous is not None and t < self.takeover - EPS:
            return self.previous.at(t)
        k = self.index(t)
        return self.controls[k].copy() if 0 <= k < len(self.controls) else np.zeros(2)

    def breakpoints(self, t0: float, t1: float) -> list:
        """The times in (t0, t1) where the command may change."""
        own = [self.start + k * self.dt for k in range(len(self.controls) + 1)]
        points = [t for t in own if t >= self.takeover - EPS]
        if self.previous is not None:
            points += [t for t in self.previous.breakpoints(t0, t1) if t < self.takeover] + [self.takeover]
        return sorted(t for t in set(points) if t0 + EPS < t < t1 - EPS)

    def segments(self, t0: float, t1: float) -> list:
        """(from, to, u) pieces of constant command covering [t0, t1]."""
        edges = [t0, *self.breakpoints(t0, t1), t1]
        return [(a, b, self.at(0.5 * (a + b))) for a, b in zip(edges[:-1], edges[1:]) if b > a + EPS]

    def controls_from(self, t: float, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Warm start of a plan that starts at ``t``: the ``n`` controls this schedule holds from ``t`` on (the
        last one repeated past its end), and the control running just before ``t``."""
        own = self if self.previous is None or t >= self.takeover - EPS else self.previous
        k = max(0, own.index(t))
        rest = own.controls[min(k, len(own.controls) - 1):]
        warm = np.concatenate([rest, np.repeat(own.controls[-1:], max(0, n - len(rest)), axis=0)])[:n]
        return warm, self.at(t - 10 * EPS - 1e-6)

    def settled(self) -> ControlSchedule:
        """This schedule without the one it replaced (once it has taken over)."""
        return ControlSchedule(self.start, self.dt, self.controls)

    def __repr__(self):
        return f"ControlSchedule(start={self.start:.3f}, dt={self.dt:g}, {len(self.controls)} controls)"


class PushIO(Protocol):
    """What a push needs from the world it runs in (the robot through ROS, or a simulated world)."""

    def now(self) -> float:
        """The session clock (s): the node's clock (simulated time under use_sim_time), the world's time."""

    def plan_clock(self) -> float:
        """The clock planning time is measured on (s); the anytime optimiser's deadline is on it too."""

    def observe(self) -> Observation:
        """The latest observation (cheap: called often)."""

    def execute(self, schedule: ControlSchedule | None) -> None:
        """From now on the pusher follows ``schedule``; None: stop at once."""

    def wait(self, until: float, wake: Callable[[], bool]) -> None:
        """Let time pass until ``until`` on the session clock, or until ``wake()`` is true."""

    def planned(self, latency: float) -> float:
        """A plan took ``latency`` s on the plan clock; returns the latency as this world counts it. A simulated
        world runs on meanwhile (real time) or stays frozen (stop and plan: the world waits for the planner); a
        robot's clock ran by itself."""

    def judged_states(self) -> np.ndarray:
        """The states seen since the last call ((T, D), the last = now), for the outcome monitor."""

    def report_plan(self, report: PlanReport) -> None:
        """A plan was handed to the pusher (to publish, record or show)."""

    def report_computing(self, start: float, x_start: np.ndarray) -> None:
        """Real time: a plan for the switch at ``start`` is being made from the predicted state ``x_start``."""

    def report_status(self, text: str, level: str = "info") -> None:
        """What the push is doing now (level 'info' or 'warning')."""


@dataclass(frozen=True)
class SessionConfig:
    """The push loop's settings (the planner node's parameters of the same names: ``ros/params.py``)."""

    realtime: bool = knob(False, "plan while the pusher moves: each plan is made during the control before it, "
                                 "from the state predicted for the switch, and a late plan never stops the pusher; "
                                 "false = stop and plan (paper 000)")
    max_actions: int = knob(DEFAULT_MAX_ACTIONS, "default limit of executed actions per push (goals may set their "
                                                 "own)")
    state_timeout: float = knob(0.5, "a scene state older than this (since reception) is stale: stop (s); also how "
                                     "long a push waits for a first usable state")
    tracking_loss_timeout: float = knob(3.0, "a stale or invalid scene state stops the pusher at once; the push "
                                             "resumes (re-planned from the fresh state) if a valid one comes back "
                                             "within this long, else it fails (s; 0 = fail at once)")
    plan_margin: float = knob(0.0, "realtime: seconds before the switch by which a plan must be done (the anytime "
                                   "optimiser runs up to 'iterations' iterations until then); negative = plans run "
                                   "late by design (tests)")

    def __post_init__(self):
        require(finite(self.state_timeout) and self.state_timeout > 0.0, "state_timeout", self.state_timeout,
                "finite and > 0")
        require(finite(self.tracking_loss_timeout) and self.tracking_loss_timeout >= 0.0, "tracking_loss_timeout",
                self.tracking_loss_timeout, "finite and >= 0")
        require(finite(self.plan_margin), "plan_margin", self.plan_margin, "finite")
        require(1 <= self.max_actions <= MAX_ACTIONS_LIMIT, "max_actions", self.max_actions,
                f"in [1, {MAX_ACTIONS_LIMIT}]")


@dataclass(frozen=True)
class PlanReport:
    """A plan as it was handed to the pusher."""

    plan: Plan
    step: int  # actions executed when it was made
    start: float  # session time its first control starts (its time stamp)
    latency: float  # s it took, on the plan clock
    late: float  # s it arrived after its start (0 = on time)
    distance: float  # target to goal when it was made (m)
    goal: Goal
    late_plans: int = 0  # plans of this push so far that were late, this one included


@dataclass
class SessionResult:
    outcome: Outcome
    reason: str
    actions: int
    distance: float  # target to goal at the end (m; nan if never observed)
    plans: list = field(default_factory=list)  # PlanReport of every plan executed
    controls: list = field(default_factory=list)  # (2,) command at the start of each action
    started: float = 0.0  # session clock at the start
    ended: float = 0.0
    first_plan_done: float | None = None  # session clock when the first plan was handed over

    @property
    def plan_latencies(self) -> list:
        return [r.latency for r in self.plans]

    @property
    def late_plans(self) -> int:
        return sum(r.late > 0.0 for r in self.plans)


class _Stop(Exception):
    """The push ends: raised inside the loop, caught by ``run``."""

    def __init__(self, outcome: Outcome, reason: str):
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason


class PushSession:
    """One push toward ``goal``: run it with ``run()`` (blocking); ``stop()`` and ``set_goal()`` may be called from
    other threads meanwhile."""

    def __init__(self, planner: MPCPlanner, io: PushIO, goal: Goal, config: SessionConfig = SessionConfig(),
                 monitor: OutcomeMonitor | None = None):
        self.planner, self.io, self.config = planner, io, config
        self.goal = goal
        self.monitor = monitor or OutcomeMonitor(planner.scene, goal, config.max_actions)
        self.dt = planner.config.sampling.control_duration
        self._stop_event = threading.Event()
        self._stop: tuple | None = None
        self._new_goal: Goal | None = None
        self._lock = threading.Lock()
        self.result = SessionResult(Outcome.RUNNING, "", 0, float("nan"))
        self.tag = None  # whoever asked for this push (the planner node keeps its action goal handle here)

    # ------------------------------------------------------------------------------------------ from outside
    def stop(self, outcome: Outcome, reason: str):
        """End the push (cancel, pre-emption, a fault found elsewhere): the first reason given wins."""
        with self._lock:
            if self._stop is None:
                self._stop = (outcome, reason)
        self._stop_event.set()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def set_goal(self, goal: Goal):
        """Move the goal of the running push; the next plan aims at it."""
        with self._lock:
            self._new_goal = goal

    # ------------------------------------------------------------------------------------------ the loop
    def run(self) -> SessionResult:
        """Push until the outcome is decided; the pusher is stopped when this returns."""
        res, io = self.result, self.io
        res.started = io.now()
        self.planner.set_goal(self.goal)
        try:
            self._check_stop()  # stopped while it waited for its turn (a cancel, a newer goal)
            self._wait_for(lambda: not io.observe().problem, self.config.state_timeout)
            self._usable_observation()
            self._judge(0)
            if self.config.realtime:
                self._push_realtime()
            else:
                self._push_stop_and_plan()
        except _Stop as s:
            res.outcome, res.reason = s.outcome, s.reason
        except ModelDiverged as e:
            res.outcome, res.reason = Outcome.FAILED, str(e)
        finally:
            io.execute(None)
            res.ended = io.now()
        return res

    def _push_stop_and_plan(self):
        io, dt = self.io, self.dt
        while True:
            obs = self._usable_observation()
            plan, latency = self._plan(obs.x)
            latency = io.planned(latency)
            self._check_stop()
            if io.observe().problem:  # the state went bad while planning: pause, then re-plan
                continue
            start = io.now()
            self._hand_over(ControlSchedule(start, dt, plan.controls[:1]), plan, start, latency, 0.0)
            self._hold(start + dt)
            self.planner.commit()  # an interrupted control counts: the pusher has moved
            if not io.observe().problem:
                self._wait_for(lambda: io.observe().stamp >= start + dt - EPS, self.config.state_timeout,
                               "no scene state measured after the control ended; planning from the newest one "
                               "(are scene_state stamps on the planner's clock?)")
            self._judge(self.result.actions + 1)

    def _push_realtime(self):
        io, dt = self.io, self.dt
        while True:  # from rest: the first push, and again after every pause
            obs = self._usable_observation()
            plan, latency = self._plan(obs.x, budget=dt - self.config.plan_margin)
            latency = io.planned(latency)
            self._check_stop()
            if io.observe().problem:
                continue
            t0 = io.now()
            active = ControlSchedule(t0, dt, plan.controls)
            self._hand_over(active, plan, t0, latency, 0.0)
            base, done = self.result.actions, 0  # actions executed before t0, and since
            lead = 1  # plan for the switch this many controls ahead
            while True:
                # never before the switch of the plan already made (with a lead it may not have started yet)
                cycle, switch = t0 + done * dt, max(t0 + (done + lead) * dt, active.start)
                obs = io.observe()
                if obs.problem or self.stopping:
                    break
                c0 = io.plan_clock()
                x_start = self._roll_forward(obs, active, switch)
                io.report_computing(switch, x_start)
                warm, u_prev = active.controls_from(switch, self.planner.config.sampling.horizon)
                self.planner.warm_start(warm, u_prev)
                # the budget is one control whatever the lead: the optimiser fills what it is given
                due = min(switch, cycle + dt) - self.config.plan_margin
                plan, _ = self._plan(x_start, deadline=c0 + (due - io.now()))
                latency = io.planned(io.plan_clock() - c0)
                # a planner slower than one control plans further ahead, so that its plans arrive in time (the
                # executing plan covers horizon - 1 controls past this one). An anytime plan that overran its
                # deadline by a little (an iteration longer than the ones before) is late once and takes over on
                # arrival: raising the lead for it would run the previous plan's next control open loop for a whole
                # period, and for Parareal-K that control was planned on a prediction exact only for K slices.
                lead = min(max(1, math.ceil(latency / dt - LATE_TOLERANCE)),
                           max(1, self.planner.config.sampling.horizon - 1))
                arrival = io.now()
                late = max(0.0, arrival - switch)
                previous = active.settled() if arrival >= active.takeover - EPS else active
                schedule = ControlSchedule(switch, dt, plan.controls, previous=previous, takeover=max(switch, arrival))
                self._hand_over(schedule, plan, switch, latency, late)
                if late > EPS:
                    self._status(f"plan late by {late:.3f} s: the previous plan's next control ran meanwhile",
                                 "warning")
                # the next plan starts at the first switch after this one arrived; a plan only a little late
                # (it took over within LATE_TOLERANCE of its switch) is followed at once by the plan for the next
                # switch, with the rest of the control as budget, so that the late plan's own second control (again
                # an open-loop guess) does not run for a whole period
                next_cycle = t0 + max(done + 1, math.ceil((arrival - t0) / dt - EPS)) * dt
                if EPS < late <= LATE_TOLERANCE * dt and lead == 1:
                    next_cycle = switch
                self._hold(next_cycle)
                active = schedule
                now = io.now()
                executed = min(math.ceil((now - t0) / dt - 1e-6), math.ceil((next_cycle - t0) / dt - EPS))
                self._record_controls(active, t0, done, executed)
                done = executed
                self._judge(base + done)
            io.execute(None)  # a bad state: stop at once; _usable_observation pauses

    # ------------------------------------------------------------------------------------------ helpers
    def _hold(self, until: float):
        """Let the pusher run its schedule until ``until``; a stop or a bad state ends the wait, and the pusher
        stops at once."""
        io = self.io
        io.wait(until, lambda: self.stopping or bool(io.observe().problem))
        self._check_stop()
        if io.observe().problem:
            io.execute(None)

    def _plan(self, x, budget: float | None = None, deadline: float | None = None) -> tuple[Plan, float]:
        """Plan from ``x`` (anytime when given a ``budget`` in s or a ``deadline`` on the plan clock)."""
        self._apply_goal_change()
        io = self.io
        c0 = io.plan_clock()
        if budget is not None:
            deadline = c0 + budget
        self._status(f"planning step {self.result.actions + 1}/{self.monitor.max_actions}: "
                     f"{self.monitor.distance(x) * 1e3:.0f} mm to go")
        def clock() -> float:
            """The plan clock, at infinity once the push is stopping: a cancel, pre-emption or shutdown ends the
            anytime optimiser after its current iteration (on a frozen simulated clock its deadline never comes)."""
            return math.inf if self.stopping else io.plan_clock()

        try:
            plan = self.planner.plan(x, deadline=deadline, clock=clock)
        except (ModelDiverged, ValueError) as e:
            raise _Stop(Outcome.FAILED, f"planning failed: {e}") from None
        if not np.all(np.isfinite(plan.controls)):
            raise _Stop(Outcome.FAILED, f"planning failed: non-finite controls {plan.controls.tolist()}")
        if not (np.all(np.isfinite(plan.states)) and math.isfinite(plan.cost)):  # published as the predicted path
            raise _Stop(Outcome.FAILED, f"planning failed: the {plan.model} model predicted non-finite states "
                                        f"or cost (cost {plan.cost})")
        if plan.variance is not None and not np.all(np.isfinite(plan.variance)):  # published, and judged uncertain
            raise _Stop(Outcome.FAILED, f"planning failed: the {plan.model} model predicted a non-finite variance")
        return plan, io.plan_clock() - c0

    def _roll_forward(self, obs: Observation, schedule: ControlSchedule, until: float) -> np.ndarray:
        """The state predicted for ``until``: ``obs`` rolled forward through what ``schedule`` executes
        meanwhile, with the planner's model."""
        try:
            return self.planner.roll_forward(obs.x, schedule.segments(obs.stamp, until))
        except (ModelDiverged, ValueError) as e:
            raise _Stop(Outcome.FAILED, f"planning failed: predicting the start state: {e}") from None

    def _hand_over(self, schedule: ControlSchedule, plan: Plan, start: float, latency: float, late: float):
        res = self.result
        self.io.execute(schedule)
        if res.first_plan_done is None:
            res.first_plan_done = self.io.now()
        if not self.config.realtime:
            res.controls.append(plan.controls[0].copy())
        report = PlanReport(plan, res.actions, start, latency, late, res.distance, self.goal,
                            res.late_plans + (late > 0.0))
        res.plans.append(report)
        self.io.report_plan(report)
        u = plan.controls[0]
        self._status(f"pushing {self._target_name()!r}: step {res.actions + 1}/{self.monitor.max_actions}, "
                     f"{res.distance * 1e3:.0f} mm to go, u = ({u[0]:.3f}, {u[1]:.3f}) m/s, plan {latency:.2f} s "
                     f"({plan.model})" + (f", {report.late_plans} late plan(s)" if self.config.realtime else ""))

    def _record_controls(self, schedule: ControlSchedule, t0: float, first: int, last: int):
        for k in range(first, last):
            self.result.controls.append(schedule.at(t0 + k * self.dt + 1e-6))

    def _judge(self, actions: int):
        """Judge the states seen since the last judgement after ``actions`` actions; raise _Stop when done."""
        states = self.io.judged_states()
        res = self.result
        res.actions = actions
        if len(states) == 0:
            return
        status: Status = self.monitor.check_path(states, actions)
        res.distance = status.distance
        if status.outcome.done:
            raise _Stop(status.outcome, status.reason)

    def _check_stop(self):
        if self.stopping:
            with self._lock:
                outcome, reason = self._stop
            raise _Stop(outcome, reason)

    def _apply_goal_change(self):
        with self._lock:
            goal, self._new_goal = self._new_goal, None
        if goal is not None:
            self.goal = goal
            self.planner.set_goal(goal)
            self.monitor = OutcomeMonitor(self.planner.scene, goal, self.monitor.max_actions)

    def _wait_for(self, condition, seconds: float, warning: str = "") -> bool:
        """Let up to ``seconds`` pass until ``condition()``; stops end the wait (and the push)."""
        io = self.io
        if not condition():
            io.wait(io.now() + seconds, lambda: self.stopping or condition())
        self._check_stop()
        ok = bool(condition())
        if not ok and warning:
            self._status(warning, "warning")
        return ok

    def _usable_observation(self) -> Observation:
        """The latest observation once it is usable. While it is not (a mocap dropout, a stale state) the pusher
        is held still for up to ``tracking_loss_timeout``; the push fails if the problem does not clear."""
        self._check_stop()
        io = self.io
        obs = io.observe()
        if not obs.problem:
            return obs
        io.execute(None)
        timeout = self.config.tracking_loss_timeout
        if timeout <= 0.0:
            raise _Stop(Outcome.FAILED, obs.problem)
        self._status(f"paused: {obs.problem}; resuming if it clears within {timeout:g} s", "warning")
        if not self._wait_for(lambda: not io.observe().problem, timeout):
            raise _Stop(Outcome.FAILED, f"{obs.problem} (no valid state within tracking_loss_timeout {timeout:g} s)")
        self._status("valid scene state again: resuming the push")
        return io.observe()

    def _status(self, text: str, level: str = "info"):
        self.io.report_status(text, level)

    def _target_name(self) -> str:
        return self.planner.scene.objects[self.goal.object_index].name


class PushArbiter:
    """One push at a time, the newest wins: ``enter`` stops the running push at once (pre-empted) and returns the
    new push's ``run``, which waits for the old one to end (the pusher stopped, its outcome reported) before it
    starts, or ends at once, pre-empted, when an even newer push came meanwhile."""

    PRE_EMPTED = "pre-empted by a new goal"

    def __init__(self):
        self._running = threading.Lock()  # held while a push runs
        self._lock = threading.Lock()
        self._newest = 0
        self.current: PushSession | None = None

    def preempt(self, outcome: Outcome = Outcome.ABORTED, reason: str = PRE_EMPTED) -> int:
        """Stop the running push and every one still waiting; returns the number the next push gets."""
        with self._lock:
            self._newest += 1
            seq, old = self._newest, self.current
        if old is not None:
            old.stop(outcome, reason)
        return seq

    stop_all = preempt

    def enter(self, session: PushSession) -> Callable[[], SessionResult]:
        seq = self.preempt()
        return lambda: self._run(session, seq)

    def _run(self, session: PushSession, seq: int) -> SessionResult:
        with self._running:
            with self._lock:
                if seq != self._newest:
                    session.result.outcome, session.result.reason = Outcome.ABORTED, self.PRE_EMPTED
                    return session.result
                self.current = session
            try:
                return session.run()
            finally:
                with self._lock:
                    self.current = None

    def wait_idle(self, timeout: float) -> bool:
        """True once no push runs (within ``timeout`` s of wall time)."""
        if not self._running.acquire(timeout=timeout):
            return False
        self._running.release()
        return True
