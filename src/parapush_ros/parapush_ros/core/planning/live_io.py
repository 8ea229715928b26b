"""The push loop's IO on a live node, without ROS: the latest scene state as received (``SceneStates``), what the
command timer sends (``Commands``) and the ``session.PushIO`` over them (``LiveIO``). The planner node gives them its
clock (integer ns), its publishers and its logger; every time here is integer ns on that clock (the simulated clock
under use_sim_time)."""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from .session import ControlSchedule, Observation

SEEN_STATES = 10_000  # received states kept for the outcome monitor between two judgements (100 s at 100 Hz)
CLOCK_STALL_S = 10.0  # s of wall time the node clock may stand still before a wait on it gives up (/clock died)


class SceneStates:
    """The latest scene state (its receive time and stamp) and every valid one received since the push loop last
    judged. Thread-safe: written by the subscription, read by the push and the command timer."""

    def __init__(self, dim: int, state_timeout: float, topic: str):
        self.dim, self.state_timeout, self.topic = dim, state_timeout, topic
        self._lock = threading.Lock()
        self._state = None  # (x or None, error message or "", receive ns, stamp ns)
        self._seen = deque(maxlen=SEEN_STATES)

    def receive(self, x, error: str, received_ns: int, stamp_ns: int):
        """A scene state arrived (``x`` None with the ``error`` that made it invalid)."""
        with self._lock:
            self._state = (x, error, received_ns, stamp_ns)
            if x is not None:
                self._seen.append(x)

    def problem(self, now_ns: int) -> str:
        """Why the latest state must not be acted on ('' when it is fine)."""
        with self._lock:
            st = self._state
        return self._problem(st, now_ns)

    def _problem(self, st, now_ns: int) -> str:
        if st is None:
            return f"no scene state received on {self.topic}"
        age = (now_ns - st[2]) * 1e-9
        if age > self.state_timeout:
            return f"stale scene state: last one {age:.2f} s ago (state_timeout {self.state_timeout} s)"
        return st[1]

    def observation(self, now_ns: int) -> Observation:
        """The latest state with its problem, both from one reading (a state arriving meanwhile is the next one's)."""
        with self._lock:
            st = self._state
        problem = self._problem(st, now_ns)
        return Observation(None, None, problem) if st is None else Observation(st[0], st[3], problem)

    def take_seen(self) -> np.ndarray:
        """Every valid state received since the last call (the newest alone if none came meanwhile)."""
        with self._lock:
            seen, latest = list(self._seen), (None if self._state is None else self._state[0])
            self._seen.clear()
        if not seen and latest is not None:
            seen = [latest]
        return np.array(seen).reshape(-1, self.dim)

    def clear_seen(self):
        with self._lock:
            self._seen.clear()


class Commands:
    """What the command timer sends: the running push's schedule for the current time, zeros while a push runs
    without one, zeros for ``stop_hold_ns`` after a stop, nothing otherwise. ``publish(u)`` sends one command.

    One lock is held while a command is chosen and published, and while a stop takes effect: a tick that read the
    schedule before a stop cannot publish after the stop's zero (a stop is final)."""

    def __init__(self, publish: Callable, now_ns: Callable[[], int], stop_hold_ns: int):
        self.publish, self.now_ns, self.stop_hold_ns = publish, now_ns, int(stop_hold_ns)
        self._lock = threading.Lock()
        self.schedule: ControlSchedule | None = None
        self._last_tick_ns: int | None = None  # the timer's previous clock reading (a clock stepped back: zero)
        self._zero_until: int | None = None  # clock ns until which zeros are sent after a stop

    def tick(self, session, state_problem: Callable[[int], str]):
        """One timer tick while ``session`` (None: none) runs; a stale or invalid state (``state_problem``), a stop
        or a clock stepped back stop the pusher here at once (the push loop then pauses or fails)."""
        with self._lock:
            now = self.now_ns()
            last, self._last_tick_ns = self._last_tick_ns, now
            schedule = self.schedule
            if session is not None:
                stepped_back = last is not None and now < last  # the push loop pauses and says why
                if schedule is not None and (session.stopping or stepped_back or state_problem(now)):
                    self.schedule = schedule = None
                self.publish(np.zeros(2) if schedule is None else schedule.at_ns(now))
            elif self._zero_until is not None and now < self._zero_until:
                self.publish(np.zeros(2))

    def set(self, schedule: ControlSchedule | None, hold: bool = False):
        """The push loop's schedule; None: zero at once (with ``hold``, and from the timer for ``stop_hold_ns``)."""
        with self._lock:
            self.schedule = schedule
            if hold:
                self._zero_until = self.now_ns() + self.stop_hold_ns
            if schedule is None:
                self.publish(np.zeros(2))


class LiveIO:
    """``session.PushIO`` on a live node: its clock (``now_ns``), ``SceneStates``, ``Commands``; plans go to
    ``report_plan`` (the strategy's ``PlanView``), the status to ``report_status(text, level)``."""

    def __init__(self, now_ns: Callable[[], int], states: SceneStates, commands: Commands, report_plan: Callable,
                 report_computing: Callable, report_status: Callable):
        self.now_ns, self.states, self.commands = now_ns, states, commands
        self.report_plan, self.report_computing, self.report_status = report_plan, report_computing, report_status

    def now(self) -> float:
        return self.now_ns() * 1e-9

    def steady_ns(self) -> int:
        return time.monotonic_ns()  # never stepped (NTP, a sim /clock reset): what the node clock's jumps differ from

    def plan_clock(self) -> float:
        return self.now()  # planning is timed on the node clock: a deadline is a time on the clock the pusher runs on

    def observe(self) -> Observation:
        return self.states.observation(self.now_ns())

    def execute(self, schedule: ControlSchedule | None):
        self.commands.set(schedule)

    def wait_ns(self, until_ns: int, wake):
        """Poll ``wake`` until it holds or ``until`` passes on the node clock. The node clock is the sim clock under
        use_sim_time, so a slow host (a simulation at any fraction of real time) never cuts a wait short; only a
        clock that stands still for ``CLOCK_STALL_S`` of wall time (a simulation whose /clock died) ends it."""
        last, last_change = self.now_ns(), time.monotonic()
        while not wake():
            now = self.now_ns()
            if now >= until_ns or now < last:  # reached, or the clock jumped back (the push loop says why)
                return
            if now != last:
                last, last_change = now, time.monotonic()
            elif time.monotonic() - last_change > CLOCK_STALL_S:
                return
            time.sleep(0.005)

    def planned(self, latency: float) -> float:
        return latency  # the node clock ran on by itself

    def judged_states(self) -> np.ndarray:
        return self.states.take_seen()
