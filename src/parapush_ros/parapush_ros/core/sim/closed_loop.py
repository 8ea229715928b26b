"""The simulated closed-loop experiment around the MPC planner (paper 000 Sec. 4.3).

``run_closed_loop``: the world is the continuously stepped MuJoCo simulation of the scene (``world.SimWorld``: one
``MjData`` that is never rebuilt, unlike the fine model's slices), optionally with other friction and masses than
the planner's scene and with noisy observations (``world.WorldConfig``), because on a real robot the model is never
exact.
The push itself is the one push loop of ``planning.session`` (the planner node runs it too) with ``WorldIO`` as
its world: plan -> execute in the world -> observe -> check the outcome -> re-plan, either stopping to plan (paper
000; the world waits for the planner) or planning while the pusher moves (``realtime``; the world runs on for as
long as each plan took). The outcome is judged on the world's true states, sampled densely along each action, so
grazing the obstacle between two observations counts as a hit.
"""
from __future__ import annotations

import math

import time
from dataclasses import dataclass, field

import numpy as np

from ..planning.outcome import DEFAULT_MAX_ACTIONS, Outcome, OutcomeMonitor
from ..planning.mpc_push import MPCPush
from ..planning.session import (EPS, ControlSchedule, Observation, PlanReport, PushSession, PushStrategy,
                                SessionConfig)
from ..scene.state import wrap_angle
from .world import SimWorld


class WorldIO:
    """The push session's IO in a ``SimWorld``, on simulated time: nothing here waits for real time.

    ``charge_planning``: the world runs on while the planner thinks, for as long as the plan took on
    ``plan_clock`` (wall time by default), under whatever the pusher was executing; without it the world waits
    for the planner (the stop-and-plan experiment of paper 000, which charges planning time only in the task
    time). ``extra_latency(k)``: seconds added to the k-th plan's charged latency (lateness injected by tests, or a
    slower computer). ``dropouts``: (from, to) windows of simulated time in which tracking is lost. ``events``:
    (time, fn) called once the world's time reaches ``time`` (a cancel, a pre-emption). ``epoch_ns``: the session
    clock's reading at world time 0 (e.g. 1.75e18 ns, a Unix-epoch clock); dropouts, events, ``executed`` and
    ``statuses`` are in world time (s since it), ``now()``, ``now_ns()`` and observation stamps on the session clock.
    ``clock_jumps``: (world time, ns) steps of the session clock (a /clock reset, a system-clock step): a wait ends
    at a jump (its end was on the old clock); the waiting side is asked to wake one world step before and after it.
    ``stamp_offset_ns``: added to every observation stamp (a mocap host whose clock is off the planner's).
    ``observation_bias``: (D,) added to every observation (a mocap calibration error). ``wrap_yaw``: observed yaws
    wrapped to [-pi, pi), as a ``scene_state`` message carries them (the world's own yaw is continuous)."""

    def __init__(self, world: SimWorld, charge_planning: bool = False, plan_clock=time.perf_counter,
                 extra_latency=None, dropouts=(), events=(), epoch_ns: int = 0, clock_jumps=(),
                 stamp_offset_ns: int = 0, observation_bias=None, wrap_yaw: bool = False):
        self.world = world
        self.wrap_yaw = wrap_yaw
        self.stamp_offset_ns = int(stamp_offset_ns)
        self.observation_bias = None if observation_bias is None else np.asarray(observation_bias, dtype=float)
        self.epoch_ns = int(epoch_ns)
        self.clock_jumps = [(float(t), int(ns)) for t, ns in clock_jumps]
        self.charge_planning = charge_planning
        self.plan_clock = plan_clock
        self.extra_latency = extra_latency
        self.plans_charged = 0
        self.ts = float(world.model.opt.timestep)
        self.ts_ns = int(round(self.ts * 1e9))
        self.step = int(round(world.time / self.ts))
        self.schedule: ControlSchedule | None = None
        self.dropouts = [(float(a), float(b)) for a, b in dropouts]
        self.events = sorted(((float(t), fn) for t, fn in events), key=lambda e: e[0])
        self._seen = [world.x.copy()]  # true states since the last judgement
        self._obs, self._obs_step = None, None
        self.path = [world.x.copy()]  # every true state sampled (states[0] = start)
        self.path_times = [self.time()]  # world time (s) of each ``path`` state
        self.states = []  # true state at each judgement
        self.observed = []  # every observation drawn
        self.executed = []  # (from, to, u) of every constant command executed
        self.plans: list[PlanReport] = []
        self.statuses = []  # (time, level, text)

    def time(self) -> float:
        """World time (s since ``epoch_ns``)."""
        return self.step * self.ts

    def now_ns(self) -> int:
        return self._clock_ns(self.step)

    def now(self) -> float:
        return self.now_ns() * 1e-9

    def steady_ns(self) -> int:
        """The world's time without the clock's jumps (``session.PushIO.steady_ns``)."""
        return self.step * self.ts_ns

    def _clock_ns(self, step: int) -> int:
        """The session clock at a world step: the epoch, the steps, and every clock jump passed by then."""
        jumped = sum(ns for t, ns in self.clock_jumps if int(round(t / self.ts)) <= step)
        return self.epoch_ns + step * self.ts_ns + jumped

    def _step_of(self, t_ns: int) -> int:
        """The world step at which the session clock (after the jumps passed so far) reads ``t_ns``."""
        return int(round((t_ns - self._clock_ns(self.step) + self.step * self.ts_ns) / self.ts_ns))

    def _ahead_ns(self, step: int) -> int:
        """The session clock at a later ``step`` as it runs now, without the jumps on the way: a jump takes
        effect at its step, so the time up to it is on the clock before it."""
        return self.now_ns() + (step - self.step) * self.ts_ns

    def observe(self) -> Observation:
        if self._obs_step != self.step:  # drawn once per world instant: the noise sequence follows the pushes
            self._obs, self._obs_step = self.world.observe(), self.step
            if self.observation_bias is not None:
                self._obs = self._obs + self.observation_bias
            if self.wrap_yaw:
                self._obs = self._obs.copy()
                poses = self.world.layout.object_poses(self._obs)
                poses[..., 2] = wrap_angle(poses[..., 2])
            self.observed.append(self._obs)
        t = self.time()
        lost = any(a - EPS <= t < b - EPS for a, b in self.dropouts)
        return Observation(self._obs, self._clock_ns(self._obs_step) + self.stamp_offset_ns,
                           "tracking lost (simulated dropout)" if lost else "")

    def execute(self, schedule: ControlSchedule | None):
        self.schedule = schedule

    def wait(self, until: float, wake=lambda: False):
        """``wait_ns`` in world time (s)."""
        self._wait_steps(int(round(until / self.ts)), wake)

    def wait_ns(self, until_ns: int, wake=lambda: False):
        self._wait_steps(self._step_of(until_ns), wake)

    def _wait_steps(self, target: int, wake):
        """Run the world up to step ``target``, or until ``wake()``, or up to a clock jump (the wait's end was on
        the clock before it: the caller reads the new one)."""
        while self.step < target and not wake():
            marks = [t for w in self.dropouts for t in w] + [t for t, _ in self.clock_jumps]
            steps = [int(round(m / self.ts)) for m in marks]
            # an event at the first step at or after its instant: a step rounded down to this one would be passed
            # over, and the event would wait for the next stop (a whole control, for the 1 Hz planner)
            steps += [math.ceil(e[0] / self.ts - 1e-9) for e in self.events]
            # the last instant before a jump (a robot's loop reads its clock every few ms) and the first state
            # measured after it
            steps += [int(round(t / self.ts)) + d for t, _ in self.clock_jumps for d in (-1, 1)]
            if self.schedule is not None:
                sched = self.schedule
                steps += [self._step_of(sched.origin_ns + round(b * 1e9)) for b in sched.breakpoints(
                    sched.relative(self.now_ns()), sched.relative(self._ahead_ns(target)))]
            jumps = self._jumps_passed()
            self._advance(min([target] + [s for s in steps if s > self.step]))
            while self.events and self.events[0][0] <= self.time() + EPS:
                self.events.pop(0)[1]()
            if self._jumps_passed() != jumps:
                return

    def _jumps_passed(self) -> int:
        return sum(int(round(t / self.ts)) <= self.step for t, _ in self.clock_jumps)

    def planned(self, latency: float) -> float:
        if self.extra_latency is not None:
            latency += float(self.extra_latency(self.plans_charged))
        self.plans_charged += 1
        if self.charge_planning:
            self.wait_ns(self.now_ns() + int(round(latency * 1e9)))
        return latency

    def _advance(self, target: int):
        if self.schedule is not None:
            sched = self.schedule
            # on the clock as it runs now: a jump at ``target`` (the wait stops there) does not move this stretch
            rel = [sched.relative(self._ahead_ns(s)) for s in (self.step, target)]
            pieces = [(self._step_of(sched.origin_ns + round(a * 1e9)), self._step_of(sched.origin_ns + round(b * 1e9)),
                       u) for a, b, u in sched.segments(*rel)]
        else:
            pieces = []
        pieces.append((self.step, target, np.zeros(2) if self.schedule is None else self.schedule.at_ns(
            self._ahead_ns(target - 1))))  # whatever rounding left uncovered: the world always reaches ``target``
        for _, b, u in pieces:
            n = min(b, target) - self.step
            if n < 1:
                continue
            seg = self.world.execute(u, n * self.ts)
            self.executed.append((self.time(), self.time() + n * self.ts, u))
            # the world samples a segment at its own bounds (``SimWorld.execute``)
            bounds = np.linspace(0, n, len(seg) + 1).round().astype(int)[1:]
            self.path_times.extend(self.time() + bounds * self.ts)
            self.step += n
            self._seen.extend(seg)
            self.path.extend(seg)

    def judged_states(self) -> np.ndarray:
        out, self._seen = np.array(self._seen), []
        self.states.append(self.world.x.copy())
        return out

    def report_plan(self, report: PlanReport):
        self.plans.append(report)

    def report_computing(self, start: float, x_start: np.ndarray):
        pass

    def report_status(self, text: str, level: str = "info"):
        self.statuses.append((self.time(), level, text))

    def motion_time(self, since: float = 0.0) -> tuple[float, float]:
        """(moving, still): seconds after ``since`` with a non-zero and a zero command."""
        moving = still = 0.0
        for a, b, u in self.executed:
            d = max(0.0, b - max(a, since))
            if np.any(u != 0.0):
                moving += d
            else:
                still += d
        return moving, still


@dataclass
class ClosedLoopRecord:
    outcome: Outcome
    reason: str
    actions: int
    final_distance: float  # m, true target centre to goal
    states: np.ndarray  # (actions+1, D) true states after each action (states[0] = start)
    observed: np.ndarray  # (.., D) every observation the planner could see
    path: np.ndarray  # (S, D) true states sampled densely along the execution
    controls: np.ndarray  # (actions, 2) command at the start of every action
    plan_times: list = field(default_factory=list)  # s per plan (real time: including the start-state prediction)
    plan_costs: list = field(default_factory=list)
    plan_iterations: list = field(default_factory=list)  # optimiser iterations per plan (anytime: as many as fit)
    predicted: list = field(default_factory=list)  # (N+1, D) predicted states of every plan
    execution_time: float = 0.0  # simulated seconds of pushing
    realtime: bool = False  # planned while the pusher moved, planning time charged in simulated time
    late_plans: int = 0  # real time: plans that arrived after their switch
    lateness: list = field(default_factory=list)  # s after its switch, per late plan
    simulated_time: float = 0.0  # s of simulated time from the goal to the outcome (planning included if charged)
    motion_time: float = 0.0  # s the pusher was commanded to move
    first_plan_time: float = 0.0  # s from the goal to the first plan handed over
    idle_after_first_plan: float = 0.0  # s with a zero command after the first plan

    @property
    def success(self) -> bool:
        return self.outcome is Outcome.REACHED

    @property
    def planning_time(self) -> float:
        return float(np.sum(self.plan_times))

    @property
    def task_time(self) -> float:
        """From the goal to the outcome. Stop and plan: planning plus execution (what a robot that plans between
        pushes would take); real time: the simulated time, planning charged as it was measured."""
        return self.simulated_time if self.realtime else self.planning_time + self.execution_time

    @property
    def idle_fraction(self) -> float:
        """Share of the task after the first plan with a zero command."""
        span = self.task_time - self.first_plan_time
        return self.idle_after_first_plan / span if span > 0.0 else 0.0


def run_closed_loop(planner, world: SimWorld, max_actions: int = DEFAULT_MAX_ACTIONS,
                    monitor: OutcomeMonitor | None = None, keep_plans: bool = False, realtime: bool = False,
                    plan_margin: float = 0.0, io: WorldIO | None = None) -> ClosedLoopRecord:
    """Push in ``world`` with the one push loop (``PushSession``) until the outcome is decided.

    ``planner``: an ``MPCPlanner`` (run by ``MPCPush``) or any ``PushStrategy`` whose ``planner`` has a ``task``
    (e.g. ``fast_mpc.FastMPCPush``). Stop and plan (default): plan, execute the first control, observe, re-plan;
    the world waits while the planner thinks. ``realtime``: plan while the pusher moves, the world running on for
    as long as each plan took (``io.plan_clock``, wall time by default)."""
    strategy = planner if isinstance(planner, PushStrategy) else MPCPush(planner)
    io = io or WorldIO(world, charge_planning=realtime)
    monitor = monitor or OutcomeMonitor(strategy.scene, strategy.planner.task.goal, max_actions)
    config = SessionConfig(realtime=realtime, max_actions=monitor.max_actions, plan_margin=plan_margin)
    res = PushSession(strategy, io, monitor.goal, config, monitor).run()
    io.observe()  # the observation after the last action, as the robot would see it
    first = (res.first_plan_done if res.first_plan_done is not None else res.ended) - res.started
    dt = strategy.dt if isinstance(strategy, MPCPush) else 0.0
    _moving, still = io.motion_time(since=res.started - io.epoch_ns * 1e-9 + first)
    return ClosedLoopRecord(
        outcome=res.outcome, reason=res.reason, actions=res.actions, final_distance=monitor.distance(world.x),
        states=np.array(io.states), observed=np.array(io.observed), path=np.array(io.path),
        controls=np.array(res.controls).reshape(-1, 2), plan_times=res.plan_latencies,
        plan_costs=[r.plan.cost for r in res.plans], plan_iterations=[r.plan.result.iterations for r in res.plans],
        predicted=[r.plan.states for r in res.plans] if keep_plans else [],
        execution_time=res.actions * dt if not realtime else res.ended - res.started - first,
        realtime=realtime, late_plans=res.late_plans, lateness=[r.late for r in res.plans if r.late > 0.0],
        simulated_time=res.ended - res.started, motion_time=io.motion_time(since=res.started - io.epoch_ns * 1e-9)[0],
        first_plan_time=first, idle_after_first_plan=still)
