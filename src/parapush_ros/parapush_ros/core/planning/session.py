"""The push loop: plan -> execute -> observe -> judge, ONE implementation for every planner, in the planner node
and in the simulated experiment (``core.sim.closed_loop.run_closed_loop``, ``parapush bench mpc``).

A ``PushSession`` pushes toward one goal through a ``PushIO``, the only thing that differs between the robot and the
simulation: the IO tells the time and the latest observation, executes the pusher velocities it is given (a
``ControlSchedule``), lets time pass, and hands over the states seen meanwhile to be judged. The planner node's IO is
its ROS clock, its ``scene_state`` subscription and its ``pusher_cmd`` timer; the simulation's IO steps a MuJoCo
world (``core.sim.closed_loop.WorldIO``).

The session owns what every planner shares, written once: the goal and its changes, the stop (cancel, pre-emption:
``PushSession.stop``, ``PushArbiter``), the session clock in integer ns with its jumps, the checks of every
observation (stale or invalid, a clock jump, a mocap stamp off the clock by more than ``max_clock_offset``, a state
deeper inside a body than ``max_start_penetration``), the pause on a bad state (the pusher stopped at once; the push
resumes re-planned from rest if a valid state comes back within ``tracking_loss_timeout``, else it fails), the
hand-over of plans, judging and the status. How to push is a ``PushStrategy`` plugged into it:

* ``mpc_push.MPCPush``: the sampling MPC (papers 000/001/004), stop and plan or real time (``SessionConfig.realtime``);
* ``low_uncertainty.LowUncertaintyPush``: paper 004's Algorithm 2, the MPC tracking a low-uncertainty path;
* ``dgoc_push.DGOCPush``: paper 003's DG-OC, one DDP plan tracked at 100 Hz;
* ``example_planner.StraightPush``: a straight-line pusher, the example of adding a planner.

Outcomes are judged by the one ``OutcomeMonitor`` on every state the IO saw during each action: the dense true
path in simulation, every received scene state on the robot, so grazing an obstacle between plans counts.
"""
from __future__ import annotations

import abc
import math
import threading
from itertools import pairwise
from dataclasses import dataclass, field
from typing import Protocol
from collections.abc import Callable

import numpy as np

from ..config import finite, knob, require
from ..models.base import ModelDiverged
from .outcome import DEFAULT_MAX_ACTIONS, MAX_ACTIONS_LIMIT, Outcome, OutcomeMonitor, Status
from .planner import Plan
from .tasks import Goal
from ..scene.projection import DEFAULT_PROJECTION_TOLERANCE, deepest_penetration
from ..scene.spec import Scene

EPS = 1e-9  # s: times closer than this are the same instant (session-relative times only: at epoch scale a float
# resolves 2.4e-7 s, so clocks are read in integer nanoseconds and periods counted from them, see ``PushSession``)
# real time: a plan up to this share of a control late is handled as late (it takes over when it arrives) rather
# than as a planner slower than a control (which plans for a later switch); anytime plans overrun by jitter only
# (measured: at most 8 % of a 1 s control over 50 plans on 2 loaded cores)
LATE_TOLERANCE = 0.25


def seconds_to_ns(t: float) -> int:
    """Seconds to integer nanoseconds (durations and session-relative times, never absolute epoch floats)."""
    return int(round(t * 1e9))


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for integers, exact at any magnitude."""
    return -(-a // b)


@dataclass(frozen=True)
class Observation:
    """The latest observed state and whether it may be used."""

    x: np.ndarray | None  # (D,) or None when nothing was received
    stamp_ns: int | None  # ns on the session clock: when it was measured (None: nothing received)
    problem: str = ""  # why it cannot be used (stale, tracking lost, ...); '' = usable

    @property
    def stamp(self) -> float:
        """The measurement time in s (for reports: at epoch scale it resolves only 2.4e-7 s)."""
        return -math.inf if self.stamp_ns is None else self.stamp_ns * 1e-9


class ControlSchedule:
    """Pusher velocities over time: ``controls[k]`` is held over [start + k dt, start + (k+1) dt), zero outside.
    Until ``takeover`` the ``previous`` schedule runs instead: the plan being replaced keeps the pusher moving
    until the new one takes over at the switch, or when it arrives if it is late.

    Times (``start``, ``takeover``, the arguments of ``at`` ...) are seconds after ``origin_ns`` (integer ns on
    the clock that runs it, e.g. the push's start): small floats, exact to far below a nanosecond whatever the
    epoch. A clock in absolute ns asks ``at_ns``."""

    def __init__(self, start: float, dt: float, controls, previous: ControlSchedule | None = None,
                 takeover: float | None = None, origin_ns: int = 0):
        controls = np.array(controls, dtype=float).reshape(-1, 2)
        if not np.all(np.isfinite(controls)):
            raise ValueError(f"schedule controls must be finite, got {controls.tolist()}")
        if not (math.isfinite(dt) and dt > 0.0):
            raise ValueError(f"schedule dt must be > 0, got {dt}")
        self.start, self.dt, self.controls = float(start), float(dt), controls
        self.previous = previous
        self.takeover = self.start if takeover is None else float(takeover)
        self.origin_ns = int(origin_ns)
        if previous is not None and previous.origin_ns != self.origin_ns:
            raise ValueError(f"schedule origin_ns {self.origin_ns} differs from the previous schedule's "
                             f"{previous.origin_ns}")

    def relative(self, t_ns: int) -> float:
        """Absolute ns on the running clock to this schedule's time (s after ``origin_ns``)."""
        return (int(t_ns) - self.origin_ns) * 1e-9

    def at_ns(self, t_ns: int) -> np.ndarray:
        """The commanded velocity at ``t_ns`` (absolute ns on the clock that runs the schedule)."""
        return self.at(self.relative(t_ns))

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
        return [(a, b, self.at(0.5 * (a + b))) for a, b in pairwise(edges) if b > a + EPS]

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
        return ControlSchedule(self.start, self.dt, self.controls, origin_ns=self.origin_ns)

    def __repr__(self):
        return f"ControlSchedule(start={self.start:.3f}, dt={self.dt:g}, {len(self.controls)} controls)"


class PushIO(Protocol):
    """What a push needs from the world it runs in (the robot through ROS, or a simulated world)."""

    def now(self) -> float:
        """The session clock (s; for reports only: at epoch scale a float resolves 2.4e-7 s)."""

    def now_ns(self) -> int:
        """The session clock in integer ns: the node's clock (simulated time under use_sim_time), the world's time.
        Periods are counted on it, exact at any epoch."""

    def steady_ns(self) -> int:
        """A clock that never jumps (ns; any origin): the host's monotonic clock, a simulated world's time without
        its clock's jumps. A session clock that runs ahead of it by more than ``max_clock_jump`` between two
        readings has jumped; one that ran as long as it did (a plan of many seconds) has not."""

    def plan_clock(self) -> float:
        """The clock planning time is measured on (s); the anytime optimiser's deadline is on it too."""

    def observe(self) -> Observation:
        """The latest observation (cheap: called often)."""

    def execute(self, schedule: ControlSchedule | None) -> None:
        """From now on the pusher follows ``schedule``; None: stop at once."""

    def wait_ns(self, until_ns: int, wake: Callable[[], bool]) -> None:
        """Let time pass until ``until_ns`` (integer ns) on the session clock, or until ``wake()`` is true."""

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
                                 "from the state predicted for the switch, "
                                 "and a late plan never stops the pusher; "
                                 "false = stop and plan (paper 000)")
    max_actions: int = knob(DEFAULT_MAX_ACTIONS, "default limit of executed actions per push (goals may set their "
                                                 "own)")
    # a stale or invalid state: the pause (``PushSession.usable_observation``)
    state_timeout: float = knob(0.5, "a scene state older than this (since reception) is stale: stop (s); also how "
                                     "long a push waits for a first usable state")
    tracking_loss_timeout: float = knob(3.0, "a stale or invalid scene state stops the pusher at once; the push "
                                             "resumes (re-planned from the fresh state) if a valid one comes back "
                                             "within this long, else it fails (s; 0 = fail at once)")
    plan_margin: float = knob(0.0, "realtime: seconds before the switch by which a plan must be done (the anytime "
                                   "optimiser runs up to 'iterations' iterations until then); negative = plans run "
                                   "late by design (tests)")
    # the safety checks of every observation, whatever the planner (``PushSession.observe``)
    max_clock_offset: float = knob(0.5, "a scene state stamped further than this from the planner's clock is refused "
                                        "(s): the mocap host and the planner must share a synchronised clock")
    max_clock_jump: float = knob(10.0, "the planner's clock running more than this ahead of the host's steady clock "
                                       "between two readings is a jump (s; a jump back is one at any size): the "
                                       "push pauses until a scene state measured after it")
    max_start_penetration: float = knob(0.005, "a measured state with the pusher or an object deeper than this "
                                               "inside another body pauses the push (m; a calibration error); "
                                               "shallower ones are projected out, with one warning per push")

    def __post_init__(self):
        require(finite(self.state_timeout) and self.state_timeout > 0.0, "state_timeout", self.state_timeout,
                "finite and > 0")
        require(finite(self.tracking_loss_timeout) and self.tracking_loss_timeout >= 0.0, "tracking_loss_timeout",
                self.tracking_loss_timeout, "finite and >= 0")
        require(finite(self.plan_margin), "plan_margin", self.plan_margin, "finite")
        require(finite(self.max_clock_offset) and self.max_clock_offset > 0.0, "max_clock_offset",
                self.max_clock_offset, "finite and > 0")
        require(finite(self.max_clock_jump) and self.max_clock_jump > 0.0, "max_clock_jump", self.max_clock_jump,
                "finite and > 0")
        require(finite(self.max_start_penetration) and self.max_start_penetration >= DEFAULT_PROJECTION_TOLERANCE,
                "max_start_penetration", self.max_start_penetration, f">= {DEFAULT_PROJECTION_TOLERANCE:g} m (the "
                "projection's own tolerance)")
        require(1 <= self.max_actions <= MAX_ACTIONS_LIMIT, "max_actions", self.max_actions,
                f"in [1, {MAX_ACTIONS_LIMIT}]")


@dataclass(frozen=True)
class PlanReport:
    """A plan as it was handed to the pusher."""

    plan: Plan
    step: int  # actions executed when it was made
    start: float  # s on the session clock when its first control starts (for reports; exact: start_ns)
    latency: float  # s it took, on the plan clock
    late: float  # s it arrived after its start (0 = on time)
    distance: float  # target to goal when it was made (m)
    goal: Goal
    late_plans: int = 0  # plans of this push so far that were late, this one included
    start_ns: int = 0  # ns on the session clock when its first control starts (its time stamp)
    observed_ns: int | None = None  # ns on the session clock: when the state it was planned from was measured

    @property
    def solve_time(self) -> float:
        """s of optimisation."""
        return self.plan.plan_time


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
        """Plans that arrived after their switch; a planner that drops a late plan (``fast``) counts it in the next
        report's ``late_plans``."""
        counted = sum(getattr(r, "late", 0.0) > 0.0 for r in self.plans)
        return max(counted, int(getattr(self.plans[-1], "late_plans", 0))) if self.plans else 0


_UNSET = object()


@dataclass(frozen=True)
class PlanView:
    """A plan as it is shown (the planner node's ``PushPlan``, Path, markers and action feedback), whatever the
    planner that made it: what a strategy's ``plan_view`` makes of the reports it hands to ``PushIO.report_plan``."""

    stamp_ns: int  # ns on the session clock when its first command starts
    goal: Goal
    step: int  # actions executed when it was made
    distance: float  # target to goal when it was made (m)
    latency: float  # s it took, on the plan clock
    controls: np.ndarray  # (N, 2) pusher velocities, each held for dt
    dt: float
    states: np.ndarray  # (N+1, D) the scene states it predicts, states[0] where it starts
    cost: float
    model: str  # what predicted the states
    solve_time: float  # s of optimisation (a push's mean planning time)
    iterations: int = 0  # Parareal iterations of the model (0: none)
    late_plans: int = 0  # plans of the push so far that were late
    variance: np.ndarray | None = None  # (N+1, D) predicted variance, where the model predicts one
    marker_states: np.ndarray | None = None  # the states drawn as markers (None: ``states``)
    faces: np.ndarray | None = None  # (N,) pushed face per step (-1: separated): drawn as contact markers
    waypoints: np.ndarray | None = None  # (W, 2) a path the plans follow, drawn with its next way-point
    waypoint_index: int = 0


class PushStop(Exception):
    """The push ends: raised inside the loop (by the session or its strategy), caught by ``PushSession.run``."""

    def __init__(self, outcome: Outcome, reason: str):
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason


_Stop = PushStop


class PushStrategy(abc.ABC):
    """A planner in the one push loop. ``PushSession`` owns the goal, stop, pauses (a stale or invalid state, a clock
    jump, a mocap clock offset beyond ``max_clock_offset``, a start deeper than ``max_start_penetration``), judging
    and reporting; a strategy plans and hands its commands over (``push``, using the session's services), says what
    its plans are (``plan_view``) and what it is (``describe``).

    A registry entry (``planners.register_planner``) builds one for the planner node; it serves one push at a time,
    each begun by ``start``. Class attributes tell the node what the planner needs."""

    scene: Scene
    command_rate: float = 0.0  # Hz its commands need at least (the node's command timer; 0: control_rate)
    goal_yaw_tolerance: float = -1.0  # yaw tolerance of goals given without one (RViz /goal_pose); < 0: no yaw
    default_max_actions: int | None = None  # actions per push when the goal sets none (None: SessionConfig's)
    result_type: type = SessionResult
    judge_observed: bool = False  # judge the latest observation when the IO saw no states since the last judgement

    def check_goal(self, goal: Goal) -> None:
        """Raise ``ValueError`` if this planner cannot push to ``goal``."""
        return None  # optional hook: nothing by default

    def start(self, session: PushSession) -> None:
        """A push begins (``session.goal`` is its goal)."""
        return None  # optional hook: nothing by default

    def goal_changed(self, session: PushSession, goal: Goal) -> None:
        """The goal of the running push moved to ``goal`` (on the push's thread, at ``apply_goal_change``)."""
        return None  # optional hook: nothing by default

    @abc.abstractmethod
    def push(self, session: PushSession) -> None:
        """Plan and hand the commands over until the session raises ``PushStop`` (a stop, a fault, the outcome):
        from a usable first state, judged once."""

    def plan_view(self, report) -> PlanView:
        """What a report handed to ``PushIO.report_plan`` shows."""
        return report

    def describe(self) -> str:
        """One line for the planner's status while idle."""
        return type(self).__name__

    def close(self) -> None:
        """Release what it holds (worker processes)."""
        return None  # optional hook: nothing by default


class PushSession:
    """One push toward ``goal`` by ``strategy`` (an ``MPCPlanner`` alone: the sampling MPC, ``mpc_push.MPCPush``):
    run it with ``run()`` (blocking); ``stop()`` and ``set_goal()`` may be called from other threads meanwhile.

    The session is what every planner shares, written once: the stop, the goal and its changes, the session clock
    (integer ns, jumps detected), the checks of every observation (``observe``), the pause on a bad state
    (``usable_observation``), waits, the hand-over of commands and plans, judging and the status."""

    def __init__(self, strategy, io: PushIO, goal: Goal, config: SessionConfig = SessionConfig(),
                 monitor: OutcomeMonitor | None = None):
        if not isinstance(strategy, PushStrategy):
            from .mpc_push import MPCPush  # noqa: PLC0415 - mpc_push builds on this module
            strategy = MPCPush(strategy)
        strategy.check_goal(goal)
        self.strategy, self.io, self.config = strategy, io, config
        self.goal = goal
        self.monitor = monitor or OutcomeMonitor(strategy.scene, goal, config.max_actions)
        self.origin_ns = 0  # the session clock (ns) at the start: every schedule's times are relative to it
        self._last_ns: int | None = None  # the previous clock reading (jump detection)
        self._last_steady_ns = 0  # the io's steady clock then
        self._jump: tuple | None = None  # (why, clock ns after it, stamp then) until a state measured after it
        self._jumps = 0  # clock jumps seen so far
        self._steady_ns = 0  # ns the session clock ran between readings, its jumps left out (how waits count)
        self._penetration_cache = (None, "")
        self._warned_projection = False
        self._stop_event = threading.Event()
        self._stop: tuple | None = None
        self._new_goal: Goal | None = None
        self._lock = threading.Lock()
        self.result = strategy.result_type(Outcome.RUNNING, "", 0, float("nan"))
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
        """Move the goal of the running push; the strategy aims at it from its next plan (``ValueError`` if it
        cannot push to it)."""
        self.strategy.check_goal(goal)
        with self._lock:
            self._new_goal = goal

    @property
    def goal_pending(self) -> bool:
        """A new goal was set and is not applied yet."""
        return self._new_goal is not None

    # ------------------------------------------------------------------------------------------ the loop
    def run(self) -> SessionResult:
        """Push until the outcome is decided; the pusher is stopped when this returns."""
        res, io = self.result, self.io
        res.started = io.now()
        self.origin_ns = self._last_ns = io.now_ns()
        self._last_steady_ns = io.steady_ns()
        self.strategy.start(self)
        try:
            self.check_stop()  # stopped while it waited for its turn (a cancel, a newer goal)
            self.wait_for(lambda: not self.observe().problem, self.config.state_timeout)
            self.usable_observation()
            self.judge(0)
            self.strategy.push(self)
        except PushStop as s:
            res.outcome, res.reason = s.outcome, s.reason
        except ModelDiverged as e:
            res.outcome, res.reason = Outcome.FAILED, str(e)
        finally:
            io.execute(None)
            res.ended = io.now()
        return res

    # ------------------------------------------------------------------------------------------ time
    def now_ns(self) -> int:
        """The session clock (integer ns). A reading before the previous one, or one that ran more than
        ``max_clock_jump`` ahead of the io's steady clock since the previous one, is a clock jump (a sim /clock
        reset, a system-clock step): the push pauses (``observe``). A long plan between two readings is no jump:
        the steady clock ran as long (DG-OC's plans take 5-18 s on 2 cores)."""
        now, steady = self.io.now_ns(), self.io.steady_ns()
        last, last_steady = self._last_ns, self._last_steady_ns
        self._last_ns, self._last_steady_ns = now, steady
        if last is not None:
            if now < last:
                self._jump = (f"clock jumped back by {(last - now) * 1e-9:.3f} s", now, _UNSET)
                self._jumps += 1
            elif (now - last) - (steady - last_steady) > seconds_to_ns(self.config.max_clock_jump):
                self._jump = (f"clock jumped forward by {(now - last) * 1e-9:.3f} s in "
                              f"{(steady - last_steady) * 1e-9:.3f} s of steady time (max_clock_jump "
                              f"{self.config.max_clock_jump:g} s)", now, _UNSET)
                self._jumps += 1
            else:
                self._steady_ns += now - last
        return now

    @property
    def jumped(self) -> bool:
        """A clock jump was seen and no state measured after it yet."""
        return self._jump is not None

    def rel(self, t_ns: int) -> float:
        """Session time (s since the start) of a session clock reading: small, so float-exact."""
        return (t_ns - self.origin_ns) * 1e-9

    def abs_ns(self, rel: float) -> int:
        return self.origin_ns + seconds_to_ns(rel)

    def schedule(self, start_ns: int, dt: float, controls, previous: ControlSchedule | None = None,
                 takeover: int | None = None) -> ControlSchedule:
        """A schedule of ``controls`` held ``dt`` each from ``start_ns`` (session clock), in session time."""
        return ControlSchedule(self.rel(start_ns), dt, controls, previous=previous,
                               takeover=None if takeover is None else self.rel(takeover), origin_ns=self.origin_ns)

    # ------------------------------------------------------------------------------------------ observations
    def observe(self) -> Observation:
        """The IO's observation with the session's own checks: a clock jump (until a state measured after it), a
        stamp off the session clock by more than ``max_clock_offset``, a start deeper inside a body than
        ``max_start_penetration``."""
        obs = self.io.observe()
        now = self.now_ns()
        problem = ""
        if self._jump is not None:
            why, after, stale = self._jump
            if stale is _UNSET:  # the observation in hand when the jump was seen was measured before it (even one
                stale = obs.stamp_ns  # with a problem of its own: a dropout during the jump)
                self._jump = (why, after, stale)
            if obs.problem:
                return obs
            if obs.stamp_ns is not None and obs.stamp_ns != stale and after <= obs.stamp_ns <= now:
                self._jump = None  # a state measured after the jump (not ahead of the clock): usable again
            else:
                problem = f"{why}: waiting for a scene state measured after it"
        if obs.problem:
            return obs
        if not problem and obs.stamp_ns is not None:
            offset = (now - obs.stamp_ns) * 1e-9
            if abs(offset) > self.config.max_clock_offset:
                problem = (f"scene_state stamp {abs(offset):.3f} s {'behind' if offset > 0 else 'ahead of'} the "
                           f"planner's clock (max_clock_offset {self.config.max_clock_offset:g} s): check the clock "
                           f"sync of the mocap host and the planner")
        if not problem and obs.x is not None:
            problem = self._penetration_problem(obs)
        return obs if not problem else Observation(obs.x, obs.stamp_ns, problem)

    def _penetration_problem(self, obs: Observation) -> str:
        """'' or why a measured state is too infeasible to plan from (cached per observation: asked often)."""
        key = (obs.stamp_ns, id(obs.x))
        if self._penetration_cache[0] == key:
            return self._penetration_cache[1]
        depth, what = deepest_penetration(self.strategy.scene, obs.x)
        limit = self.config.max_start_penetration
        problem = ""
        if depth > limit:
            problem = (f"infeasible measured state: {what} by {depth * 1e3:.1f} mm (max_start_penetration "
                       f"{limit * 1e3:g} mm): check the mocap calibration")
        elif depth > DEFAULT_PROJECTION_TOLERANCE and what.startswith("the pusher inside obstacle"):
            pass  # nothing projects the pusher: the outcome monitor judges it a hit, saying so
        elif depth > DEFAULT_PROJECTION_TOLERANCE and not self._warned_projection:
            self._warned_projection = True  # once per push: the planner projects it out at every plan
            self.status(f"measured state infeasible: {what} by {depth * 1e3:.1f} mm; projected out to plan (within "
                        f"max_start_penetration {limit * 1e3:g} mm; warned once per push)", "warning")
        self._penetration_cache = (key, problem)
        return problem

    def usable_observation(self) -> Observation:
        """The latest observation once it is usable. While it is not (a mocap dropout, a stale state, a clock
        jump, ...) the pusher is held still for up to ``tracking_loss_timeout``; the push fails if the problem does
        not clear."""
        self.check_stop()
        io = self.io
        obs = self.observe()
        if not obs.problem:
            return obs
        io.execute(None)
        timeout = self.config.tracking_loss_timeout
        if timeout <= 0.0:
            raise PushStop(Outcome.FAILED, obs.problem)
        self.status(f"paused: {obs.problem}; resuming if it clears within {timeout:g} s", "warning")
        usable = []  # the usable observation the wait ended on: the push resumes from it, not from a newer reading
        # that may have gone bad meanwhile (on a live node states arrive between two readings)

        def found() -> bool:
            o = self.observe()
            if not o.problem:
                usable[:] = [o]
            return not o.problem

        self.wait_for(found, timeout)
        if not usable:
            problem = self.observe().problem or obs.problem
            raise PushStop(Outcome.FAILED, f"{problem} (no valid state within tracking_loss_timeout {timeout:g} s)")
        self.status("valid scene state again: resuming the push")
        return usable[0]

    # ------------------------------------------------------------------------------------------ waiting
    def hold(self, until_ns: int):
        """Let the pusher run its schedule until ``until_ns``; a stop or a bad state ends the wait, and the pusher
        stops at once."""
        io = self.io
        io.wait_ns(until_ns, lambda: self.stopping or bool(self.observe().problem))
        self.check_stop()
        if self.observe().problem:
            io.execute(None)

    def wait_for(self, condition, seconds: float, warning: str = "") -> bool:
        """Let up to ``seconds`` pass until ``condition()``; stops end the wait (and the push). The seconds are
        counted on the session clock without its jumps: an end computed before a jump back would come that much
        later (never, after a /clock reset to 0 that stays there), one before a jump forward at once. A wait cut
        short by a jump goes on for what is left; one that ends with the clock stood still (a /clock that died:
        ``PushIO.wait_ns`` gives up) ends here too."""
        io = self.io
        self.now_ns()
        end = self._steady_ns + seconds_to_ns(seconds)
        while not self.stopping and not condition() and self._steady_ns < end:
            jumps, before = self._jumps, self._steady_ns

            def wake() -> bool:
                self.now_ns()  # notices a jump
                return self.stopping or self._jumps != jumps or condition()  # noqa: B023 - called within this iteration

            io.wait_ns(self.now_ns() + end - self._steady_ns, wake)
            self.now_ns()
            if self._jumps == jumps and self._steady_ns == before:
                break  # no time passed, no jump: the clock stands still
        self.check_stop()
        ok = bool(condition())
        if not ok and warning:
            self.status(warning, "warning")
        return ok

    # ------------------------------------------------------------------------------------------ plans, outcome
    def hand_over(self, report, schedule: ControlSchedule | None = None):
        """A plan takes over: the pusher follows ``schedule`` (None: the strategy executes its commands itself),
        and ``report`` is recorded and reported."""
        res = self.result
        if schedule is not None:
            self.io.execute(schedule)
        if res.first_plan_done is None:
            res.first_plan_done = self.io.now()
        res.plans.append(report)
        self.io.report_plan(report)

    def judge(self, actions: int | None = None, reached: bool = True):
        """Judge the states seen since the last judgement (after ``actions`` actions, if given; the latest
        observation when none were seen and the strategy's ``judge_observed`` says so); raise ``PushStop`` when the
        outcome is decided. Without ``reached`` only failures end the push (a plan being tracked: its goal counts
        where it ends, not where the object passes on the way)."""
        states = self.io.judged_states()
        res = self.result
        if actions is not None:
            res.actions = actions
        if len(states) == 0:
            x = self.io.observe().x if self.strategy.judge_observed else None
            if x is None:
                return
            states = np.asarray(x)[None]
        status: Status = self.monitor.check_path(states, res.actions)
        res.distance = status.distance
        if status.outcome.done and (reached or status.outcome is not Outcome.REACHED):
            raise PushStop(status.outcome, status.reason)

    def check_stop(self):
        """Raise the stop's ``PushStop`` once ``stop`` was called."""
        if self.stopping:
            raise PushStop(*self.stopped_as())

    def stopped_as(self) -> tuple:
        """(outcome, reason) of the stop asked for (None before)."""
        with self._lock:
            return self._stop

    def apply_goal_change(self) -> bool:
        """Take on the goal set from outside since the last call, if any (True then); the strategy is told."""
        with self._lock:
            goal, self._new_goal = self._new_goal, None
        if goal is None:
            return False
        self.goal = goal
        self.monitor = OutcomeMonitor(self.strategy.scene, goal, self.monitor.max_actions)
        self.strategy.goal_changed(self, goal)
        return True

    def status(self, text: str, level: str = "info"):
        self.io.report_status(text, level)

    def target_name(self) -> str:
        return self.strategy.scene.objects[self.goal.object_index].name


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
