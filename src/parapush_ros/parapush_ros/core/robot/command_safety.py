"""Safety layer between the planner's pusher velocity and the robot, without ROS.

``CommandSafety.step(t)`` is called every control period and returns the velocity to send. In order:

1. e-stop latched -> zeros until ``reset()`` (and a command newer than the reset);
2. watchdog: no command received within ``command_timeout`` -> zeros (immediately, every period: a ros2_control
   forward velocity controller would otherwise hold the last command forever); when the last command was
   itself zero (the planner stopped the pusher and went quiet, as it does after every push) the status is
   ``idle`` rather than ``watchdog``: same zeros, but not a fault. A clock that goes back (a /clock restart, an
   NTP step of the system clock) makes every age measured before it meaningless: the command, the pusher state
   and the teleop priority held are discarded and the next period is a zero (status ``clock jump``); a jump
   forward ages them past their timeouts (stale, so zeros);
3. workspace enforcement needs the pusher position: no valid pusher state within ``state_timeout`` -> zeros;
4. the command is limited to ``max_speed`` (direction kept), then to ``max_acceleration`` relative to the last
   output (a ``max_speed`` lowered while moving holds at once: the output never exceeds it, braking is not
   ramped), then velocity components toward a table edge or an obstacle are limited so the pusher disc keeps
   ``workspace_margin`` of clearance: the speed toward a boundary may be at most
   ``(clearance - margin) / braking_horizon`` (zero inside the margin; moving away is always allowed);
5. the arm must follow: over the last ``follow_window`` the pusher has to have moved at least ``follow_fraction``
   of the way this layer sent it (the integral of its outputs, projected on their direction) once that way is
   ``follow_min_travel`` or longer; otherwise the e-stop latches, saying so. A pusher that stands still under
   commands (MoveIt Servo halted or paused, a protective stop, a controller not running, the pusher blocked) would
   otherwise leave a push running to its timeout, with twists sent to an arm that may lurch when it is freed.
   The arm may lag by up to ``follow_latency`` (each lag up to it is tried). It compares new measurements only,
   with what was sent until the last one: a briefly occluded pusher, whose last pose the mocap ingest holds, is not
   a pusher standing still (with less than half a window measured it waits); a back and forth is not judged.

The acceleration limit bounds the step between two consecutive outputs: between them the arm holds the earlier
one (a forward velocity controller), so a period that comes late (a starved host, a clock jump forward) buys no
larger speed-up than a punctual one: it counts at most ``STEP_INTERVAL_JITTER`` output periods of elapsed time.
Slowing down (a step along which the speed only falls: toward rest, not a reversal or a turn) counts the time
elapsed in full (up to ``command_timeout``), so a late period never makes a stop take longer than the ramp
``stop_travel_bound`` assumes. An output held at zero for a reason outside this layer
(``step(t, hold=...)``: the gripper has not grasped, Servo's units are unknown) is what the arm was sent, so the
command after it ramps up from rest.

Arbitration (``command(..., source=)``): a ``teleop`` command takes priority over the planner's for
``teleop_timeout`` after the last one (twist_mux style): planner commands are refused meanwhile.

All velocities are planar (vx, vy) in m/s in the table frame; times are seconds on one clock.
"""
from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

from ..config import ConfigError, finite, knob


class SafetyConfigError(ConfigError):
    """A safety parameter is invalid; the message names it."""


@dataclass(frozen=True)
class SafetyConfig:
    """The commander's limits (``velocity_commander`` declares these as its parameters of the same names)."""

    max_speed: float = knob(0.1, "pusher speed limit (m/s)")
    max_acceleration: float = knob(0.5, "pusher acceleration limit (m/s^2)")
    command_timeout: float = knob(0.2, "watchdog: no pusher_cmd for this long -> zero velocity (s)")
    state_timeout: float = knob(0.2, "no valid pusher position for this long -> zero velocity (s)")
    workspace_margin: float = knob(0.01, "clearance kept between the pusher and table edges / obstacles (m)")
    braking_horizon: float = knob(0.2, "speed toward a boundary is limited to (clearance - margin) / this (s)")
    enforce_workspace: bool = knob(True, "keep the pusher on the table and clear of obstacles (needs scene_state)")
    teleop_timeout: float = knob(0.5, "pusher_cmd_teleop has priority over the planner's pusher_cmd until this long "
                                      "after its last message (s)")
    follow_window: float = knob(1.0, "the pusher must follow the commands over this window (s): see follow_fraction")
    follow_fraction: float = knob(0.25, "e-stop when the pusher moved less than this fraction of the way it was sent "
                                        "over follow_window (0 = no check)")
    follow_min_travel: float = knob(0.01, "the follow check applies once the way sent over follow_window is this "
                                          "long (m)")
    follow_latency: float = knob(0.3, "the follow check allows the pusher to lag the commands by up to this (s): "
                                      "MoveIt Servo's, the controller's and the mocap's delays")
    table_yaw_in_output_frame: float = knob(0.0, "yaw of the table frame in the output frame (rad): output "
                                                 "twists are rotated by it (output joint_velocity: 0, its "
                                                 "joint_matrix maps table velocities)")

    def __post_init__(self):
        for name in ("max_speed", "max_acceleration", "command_timeout", "state_timeout", "braking_horizon",
                     "teleop_timeout", "follow_window", "follow_min_travel"):
            v = getattr(self, name)
            if not (finite(v) and v > 0.0):
                raise SafetyConfigError(name, f"must be > 0, got {v!r}")
        if not (finite(self.workspace_margin) and self.workspace_margin >= 0.0):
            raise SafetyConfigError("workspace_margin", f"must be >= 0, got {self.workspace_margin!r}")
        if not (finite(self.follow_latency) and 0.0 <= self.follow_latency < self.follow_window):
            raise SafetyConfigError("follow_latency", f"must be in [0, follow_window={self.follow_window!r}), got "
                                                      f"{self.follow_latency!r}")
        if not (finite(self.follow_fraction) and 0.0 <= self.follow_fraction < 1.0):
            raise SafetyConfigError("follow_fraction",
                                    f"must be in [0, 1) (0 = no check), got {self.follow_fraction!r}")
        if not finite(self.table_yaw_in_output_frame):  # NaN here would turn every output twist into NaN
            raise SafetyConfigError("table_yaw_in_output_frame",
                                    f"must be finite, got {self.table_yaw_in_output_frame!r}")

    def looser_than(self, start: SafetyConfig) -> str:
        """Why these limits, set while the commander runs, are looser than ``start``, the ones it started with
        ('' when none is): a run-time set (``ros2 param set``, by anyone on the ROS domain) may tighten a limit
        or restore it up to its start value, never raise it beyond (a 5 m/s speed limit, a 100 s watchdog, the
        workspace switched off); loosening one is a restart with it in a params_file, by the person at the cell."""
        def refused(name, rule):
            return (f"{name}: {getattr(self, name)!r} is {rule} the {getattr(start, name)!r} the commander started "
                    f"with; at run time a limit may only be tightened (or restored), loosen it by a restart with "
                    f"it in a params_file")
        for name in LOOSER_WHEN_LARGER:
            if getattr(self, name) > getattr(start, name):
                return refused(name, "above")
        for name in LOOSER_WHEN_SMALLER:
            if getattr(self, name) < getattr(start, name):
                return refused(name, "below")
        if start.enforce_workspace and not self.enforce_workspace:
            return refused("enforce_workspace", "looser than")
        return ""


# the limits that allow more the larger (speeds, timeouts) or the smaller (clearances, the braking horizon) they are
LOOSER_WHEN_LARGER = ("max_speed", "max_acceleration", "command_timeout", "state_timeout", "teleop_timeout",
                      "follow_window", "follow_min_travel", "follow_latency")
LOOSER_WHEN_SMALLER = ("workspace_margin", "braking_horizon", "follow_fraction")


class Workspace:
    """Where the pusher disc may go: on the table top, clear of the obstacles."""

    def __init__(self, table_half, pusher_radius: float, obstacles=()):
        """``obstacles``: iterable of (name, Footprint, pose (x, y, yaw))."""
        self.table_half = np.asarray(table_half, dtype=float)
        self.radius = float(pusher_radius)
        self.obstacles = [(n, f, np.asarray(p, dtype=float)) for n, f, p in obstacles]

    @classmethod
    def from_scene(cls, scene) -> Workspace:
        return cls(scene.table.half, scene.pusher.radius,
                   [(o.name, o.footprint, o.pose) for o in scene.obstacles])

    def boundaries(self, p):
        """[(name, clearance (m), unit normal pointing away from the boundary)] for pusher centre ``p``."""
        x, y = float(p[0]), float(p[1])
        hx, hy = self.table_half - self.radius
        out = [("table +x edge", hx - x, np.array([-1.0, 0.0])), ("table -x edge", hx + x, np.array([1.0, 0.0])),
               ("table +y edge", hy - y, np.array([0.0, -1.0])), ("table -y edge", hy + y, np.array([0.0, 1.0]))]
        for name, fp, pose in self.obstacles:
            d, n = fp.sdf(np.array([x, y]), pose)
            out.append((f"obstacle {name!r}", float(d) - self.radius, np.asarray(n, dtype=float)))
        return out

    def clamp(self, p, v, margin: float, horizon: float):
        """(clamped velocity, names of the boundaries that limited it). Each boundary allows at most
        ``max(0, clearance - margin) / horizon`` of speed toward it; a velocity that cannot satisfy all of them
        (e.g. wedged in a corner between constraints) becomes zero."""
        v = np.array(v, dtype=float)
        bounds = self.boundaries(p)
        active = []
        for _ in range(3):  # projections onto one constraint can disturb another: a few passes settle it
            changed = False
            for name, clearance, n in bounds:
                toward = -float(v @ n)
                allowed = max(0.0, clearance - margin) / horizon
                if toward > allowed + 1e-12:
                    v += (toward - allowed) * n
                    changed = True
                    if name not in active:
                        active.append(name)
            if not changed:
                break
        for name, clearance, n in bounds:
            if -float(v @ n) > max(0.0, clearance - margin) / horizon + 1e-9:
                return np.zeros(2), active or [name]
        return v, active


ESTOP = "estop"  # the commander's status while an e-stop is latched (``~/estop`` until ``~/reset``)
INACTIVE = "inactive"  # its status while deactivated (lifecycle): output silent
# the commander's states in which an operator stopped the arm: the running push ends, so that a reset or an
# activate never resumes motion by itself (a new goal does); while e-stopped, goals are refused
STOPPED_BY_OPERATOR = {ESTOP: "e-stopped", INACTIVE: "deactivated"}
SERVO_UNKNOWN = "servo settings"  # its status while MoveIt Servo's units are unknown for a reason it names
SERVO_WAITING = "waiting for servo settings"  # ... while it asks Servo (from configure until startup_timeout)
# the commander's states in which it holds the arm at zero for a reason of the arm's interface: the planner refuses
# goals (a push would plan for an arm that does not move, and the arm would start mid-plan once Servo answers)
NOT_READY = {SERVO_UNKNOWN: "does not know MoveIt Servo's units", SERVO_WAITING: "is waiting for MoveIt Servo's units"}
RESET_HEARD = "the velocity commander is reset"  # what planner/status adds once the planner takes goals again


def status_parts(text: str) -> tuple[str, str]:
    """(state, detail) of the commander's ``~/status`` text ``"<state>: <detail>"`` (or ``"<state>"``)."""
    state, _, detail = text.partition(":")
    return state.strip(), detail.strip()


@dataclass
class SafetyOutput:
    vx: float
    vy: float
    status: str  # "ok", "limited", "estop", "watchdog", "clock jump", "idle", "waiting for command", "no pusher state"
    detail: str = ""  # what limited the command / why it is zero

    @property
    def zero(self) -> bool:
        return self.vx == 0.0 and self.vy == 0.0


STEP_INTERVAL_JITTER = 1.5  # output periods of elapsed time the acceleration limit counts at most per output
FOLLOW_LAGS = 7  # lags the follow check tries, evenly from 0 to follow_latency


class CommandSafety:
    def __init__(self, config: SafetyConfig, workspace: Workspace | None = None, *, output_period: float):
        """``output_period``: the seconds between outputs (the commander's ``1 / rate``)."""
        if config.enforce_workspace and workspace is None:
            raise SafetyConfigError("enforce_workspace", "is true but no workspace was given")
        if not (finite(output_period) and output_period > 0.0):
            raise SafetyConfigError("output_period", f"must be > 0 (s), got {output_period!r}")
        self.max_step_interval = STEP_INTERVAL_JITTER * float(output_period)
        self.cfg = config
        self.workspace = workspace
        self._cmd = None  # (t, v)
        self._pusher = None  # (t, position)
        self._prev = np.zeros(2)
        self._prev_t = None
        self._teleop_t = None  # when the last teleop command came
        self._latest = None  # the latest time seen on any input or step (a time before it: the clock went back)
        self._jump = ""  # why the next period is a zero: the clock jumped back
        self.source = ""  # who sent the command held: planner | teleop
        self._sent = collections.deque()  # (t, displacement): the way each output was held until the next step
        self._seen = collections.deque()  # (t, position): the pusher positions over the follow window
        self._measured_at = None  # the stamp of the last pusher state (its source's clock)
        self._unconfirmed = None  # (t, position): the newest measurement, until the next one confirms its order
        self.follow_state = "waiting: no measurements yet"  # what the follow check made of its last step (diagnostics)
        self.estopped = False
        self.estop_reason = ""

    # --- inputs
    def _clock(self, t: float) -> float:
        """Every time read goes through here: a time before the latest one means the clock jumped back."""
        t = float(t)
        if self._latest is not None and t < self._latest:
            self._jump = (f"clock jumped back {self._latest - t:.3f} s (from {self._latest:.3f} to {t:.3f} s): "
                          f"the command and pusher state held were discarded")
            self._cmd = self._pusher = self._teleop_t = self._prev_t = None
            self._stop()
            self._forget_follow()
        self._latest = t
        return t

    def command(self, t: float, vx: float, vy: float, source: str = "planner") -> str | None:
        """Record a command from ``source`` (planner | teleop) received at ``t``; returns a reason when it is
        rejected (non-finite, or a planner command while teleop has priority)."""
        t = self._clock(t)
        if not (math.isfinite(vx) and math.isfinite(vy)):
            return f"non-finite command ({vx}, {vy}) rejected"
        if source == "teleop":
            self._teleop_t = t
        elif self._teleop_t is not None and t - self._teleop_t <= self.cfg.teleop_timeout:
            return (f"planner command ignored: teleop has priority (its last command {t - self._teleop_t:.3f} s "
                    f"ago, teleop_timeout {self.cfg.teleop_timeout:g} s)")
        self._cmd = (t, np.array([vx, vy], dtype=float))
        self.source = source
        return None

    def pusher_state(self, t: float, x: float, y: float, valid: bool, measured_at: float | None = None):
        """The pusher position received at ``t``, measured at ``measured_at`` (the message's stamp, on whatever
        clock its source keeps; None: a new measurement). The follow check takes a measurement once the next one
        confirms its order: the same stamp is the last one repeated (mocap_ingest holds a briefly occluded body's
        last pose, still valid, until its loss timeout: not a pusher standing still); an earlier one is out of
        order (a second publisher, the source's clock stepped back): the window starts again, without the
        measurement it contradicts (a second publisher's state stamped later is never judged)."""
        t = self._clock(t)
        ok = valid and math.isfinite(x) and math.isfinite(y)
        self._pusher = (float(t), np.array([x, y], dtype=float)) if ok else None
        last, self._measured_at = self._measured_at, measured_at
        if measured_at is None or last is None:
            new = True
        elif measured_at < last:
            self._forget_follow()
            return
        else:
            new = measured_at > last
        if not new:
            return
        if measured_at is None:  # no order to confirm
            confirmed = self._pusher
        else:  # the last one is in order before this one: a measurement of this source's
            confirmed, self._unconfirmed = self._unconfirmed, self._pusher
        if confirmed is not None:
            self._seen.append(confirmed)
            while len(self._seen) > 2 and self._seen[1][0] <= t - self.cfg.follow_window:  # (bounded while no
                self._seen.popleft()  # step runs: the commander inactive)

    def estop(self, reason: str = "e-stop"):
        self.estopped = True
        self.estop_reason = reason
        self._stop()

    def reset(self):
        """Clear the e-stop. The command held before it is discarded: motion resumes only on a new command."""
        self.estopped = False
        self.estop_reason = ""
        self._cmd = None
        self._stop()
        self._forget_follow()

    def output_stopped(self):
        """The output was stopped from outside (the commander deactivated): the command held is discarded and the
        next one ramps up from rest, as after ``reset`` (an e-stop stays latched)."""
        self._cmd = None
        self._prev_t = None
        self._stop()
        self._forget_follow()

    def _stop(self):
        self._prev = np.zeros(2)

    def _forget_follow(self):
        """Start the follow check's window again (a clock jump, a reset, a measurement out of order)."""
        self.follow_state = "waiting: its window started again (a reset, a clock jump, a state out of order)"
        self._sent.clear()
        self._seen.clear()
        self._unconfirmed = None

    def _not_following(self, t: float, dt: float) -> str:
        """Why the pusher does not follow what was sent ('' while it does, or while there is too little to
        judge); ``dt``: how long the last output was held. The measured displacement over the window (first to
        last confirmed measurement) is compared with the way sent over the same span shifted back by each lag up
        to ``follow_latency`` (Servo's, the controller's and the mocap's delays): it follows if it does at one
        of them. A lag whose way sent is short, or mostly a back and forth (the net way under half the path),
        leaves nothing to judge."""
        c = self.cfg
        if c.follow_fraction <= 0.0:
            self._forget_follow()
            self.follow_state = "off (follow_fraction 0)"
            return ""
        self._sent.append((t, self._prev * dt))
        start = t - c.follow_window
        while len(self._seen) > 1 and self._seen[1][0] <= start:
            self._seen.popleft()
        keep_from = (self._seen[0][0] if self._seen else start) - c.follow_latency
        while self._sent and self._sent[0][0] <= keep_from:
            self._sent.popleft()
        if not self._seen or self._seen[0][0] > start:  # positions cover less than the window so far
            self.follow_state = "waiting: new measurements cover less than follow_window"
            return ""
        (t0, p0), (t1, p1) = self._seen[0], self._seen[-1]
        if t1 - start < 0.5 * c.follow_window:  # measured too little of it (occluded, out of order): no judgement
            self.follow_state = "waiting: no new measurement for half of follow_window"
            return ""
        times = np.fromiter((ts for ts, _ in self._sent), float, len(self._sent))
        ways = np.array([d for _, d in self._sent]).reshape(-1, 2)
        moved, best = p1 - p0, None
        for lag in np.linspace(0.0, c.follow_latency, FOLLOW_LAGS):
            span = (times > t0 - lag) & (times <= t1 - lag)
            sent = ways[span].sum(axis=0)
            way = float(np.linalg.norm(sent))
            if way < c.follow_min_travel or way < 0.5 * float(np.linalg.norm(ways[span], axis=1).sum()):
                self.follow_state = "not judged: less than follow_min_travel sent, or a back and forth"
                return ""
            along = float(moved @ sent) / way
            if along >= c.follow_fraction * way:
                self.follow_state = f"follows: moved {along * 1e3:.0f} of {way * 1e3:.0f} mm sent (lag {lag:.2f} s)"
                return ""
            if best is None or along / way > best[1] / best[0]:
                best = (way, along)
        way, along = best
        self.follow_state = f"does not follow: moved {along * 1e3:.1f} of {way * 1e3:.0f} mm sent"
        return (f"the pusher does not follow the commands: {way * 1e3:.0f} mm sent over the last "
                f"{c.follow_window:g} s (allowing up to {c.follow_latency:g} s of lag), it moved {along * 1e3:.1f} mm "
                f"that way (follow_fraction {c.follow_fraction:g}); is the arm's controller running (MoveIt Servo "
                f"halted or paused, a protective stop, the pusher held)? ~/reset once it moves again")

    # --- output
    def step(self, t: float, hold: tuple[str, str] | None = None) -> SafetyOutput:
        """The output for the period at ``t``. ``hold`` = (status, detail): send zero for a reason outside this
        layer (an e-stop or a clock jump still says so first); the limiter counts the zero as sent."""
        t = self._clock(t)
        # a late period (a clock jump forward, a stalled host): _step counts it in full only to slow down
        dt = 0.0 if self._prev_t is None else min(max(0.0, t - self._prev_t), self.cfg.command_timeout)
        self._prev_t = t
        why = "" if self.estopped else self._not_following(t, dt)
        if why:
            self.estop(why)
        out = self._step(t, dt)
        if hold is not None and out.status not in ("estop", "clock jump"):
            out = SafetyOutput(0.0, 0.0, *hold)
        self._prev = np.array([out.vx, out.vy])
        return out

    def _step(self, t: float, dt: float) -> SafetyOutput:
        c = self.cfg
        if self.estopped:
            return SafetyOutput(0.0, 0.0, ESTOP, self.estop_reason)
        if self._jump:
            detail, self._jump = self._jump, ""
            return SafetyOutput(0.0, 0.0, "clock jump", detail)
        if self._cmd is None:
            return SafetyOutput(0.0, 0.0, "waiting for command")
        age = t - self._cmd[0]
        if not 0.0 <= age <= c.command_timeout:  # negative: cannot happen past _clock, but never counts as fresh
            if not np.any(self._cmd[1]) and not np.any(self._prev):
                return SafetyOutput(0.0, 0.0, "idle", f"last command was zero, none for {age:.3f} s")
            return SafetyOutput(0.0, 0.0, "watchdog",
                                f"no command for {age:.3f} s (command_timeout {c.command_timeout:g} s)")
        if c.enforce_workspace:
            if self._pusher is None:
                return SafetyOutput(0.0, 0.0, "no pusher state", "pusher position unknown or tracking invalid")
            state_age = t - self._pusher[0]
            if not 0.0 <= state_age <= c.state_timeout:
                return SafetyOutput(0.0, 0.0, "no pusher state",
                                    f"pusher state is {state_age:.3f} s old (state_timeout {c.state_timeout:g} s)")
        v = self._cmd[1].copy()
        limits = []
        speed = float(np.linalg.norm(v))
        if speed > c.max_speed:
            v *= c.max_speed / speed
            limits.append(f"speed {speed:.3f} > {c.max_speed:g} m/s")
        dv = v - self._prev
        dv_norm = float(np.linalg.norm(dv))
        # slowing down: every output on the way from the last to v is slower than the last (v = k * prev, 0 <= k <
        # 1, give or take a little turn); a reversal or a turn at speed is not, and gets the speed-up's cap
        slowing = float(v @ dv) <= 0.0
        max_dv = c.max_acceleration * (dt if slowing else min(dt, self.max_step_interval))
        if dv_norm > max_dv + 1e-12:
            v = self._prev + dv * (max_dv / dv_norm)
            limits.append(f"acceleration (max {c.max_acceleration:g} m/s^2)")
            ramped = float(np.linalg.norm(v))
            if ramped > c.max_speed:  # max_speed lowered while moving: it holds at once, braking is never ramped
                v *= c.max_speed / ramped
                limits.append(f"speed {ramped:.3f} > {c.max_speed:g} m/s")
        if c.enforce_workspace:
            v, active = self.workspace.clamp(self._pusher[1], v, c.workspace_margin, c.braking_horizon)
            if active:
                limits.append("workspace: " + ", ".join(active))
        return SafetyOutput(float(v[0]), float(v[1]), "limited" if limits else "ok", "; ".join(limits))


# ------------------------------------------------------------------------------------------------ stopping bound
def stop_travel_bound(speed: float, reaction_time: float, output_period: float, deceleration: float,
                      servo_bandwidth_hz: float) -> float:
    """How far (m) the pusher may travel from the moment the scene state goes bad until it stands still.

    The terms, in the order a stop happens:
      ``speed * reaction_time``   full speed until the stopping command is issued: for an invalid state the
                                  planner's timer period (plus delivery), for a stale one ``state_timeout`` more;
                                  mocap_ingest's ``timeout`` more when a body's samples stop (it is declared lost
                                  only then);
      ``speed * output_period``   the stop is applied on the next period of whatever sends it to the arm;
      ``speed**2 / (2 a)``        the commander's ramp down at ``max_acceleration`` (a planner zero is limited
                                  like any command; ``inf`` where no ramp applies: e-stop, watchdog, no state);
      ``2 speed / omega``         a critically damped position servo of bandwidth omega = 2 pi f tracking the
                                  integral of the velocity lags it by 2 v / omega, and covers that lag after the
                                  command stops (no overshoot).
    ``speed`` is the largest commanded speed (``max_speed``)."""
    for name, value in (("speed", speed), ("reaction_time", reaction_time), ("output_period", output_period),
                        ("deceleration", deceleration), ("servo_bandwidth_hz", servo_bandwidth_hz)):
        if not value >= 0.0:
            raise ValueError(f"stop_travel_bound: {name} must be >= 0, got {value}")
    ramp = 0.0 if math.isinf(deceleration) else speed ** 2 / (2.0 * deceleration)
    return speed * (reaction_time + output_period) + ramp + 2.0 * speed / (2.0 * math.pi * servo_bandwidth_hz)


# ------------------------------------------------------------------------------------------------ output mapping
def rotate_planar(v, yaw: float) -> np.ndarray:
    """Express a table-frame planar vector in a frame in which the table frame is rotated by ``yaw`` about z."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def joint_matrix(values) -> np.ndarray:
    """The 2x2 map from table-frame (vx, vy) to the joint velocities of a 2-axis Cartesian stage, from a row-major
    list of 4 numbers; it must be invertible (each joint moves the pusher in its own direction)."""
    m = np.asarray(list(values), dtype=float)
    if m.shape != (4,) or not np.all(np.isfinite(m)):
        raise SafetyConfigError("joint_matrix", f"expected 4 finite numbers (row-major 2x2), got {list(values)}")
    m = m.reshape(2, 2)
    if abs(np.linalg.det(m)) < 1e-9:
        raise SafetyConfigError("joint_matrix", f"{m.tolist()} is singular")
    return m



SERVO_COMMAND_TYPES = ("speed_units", "unitless")


def servo_linear_gain(command_in_type, scale_linear, names=("command_in_type", "scale.linear")) -> float:
    """What one m/s is in MoveIt Servo's twist input: 1 in ``speed_units``; ``1 / scale.linear`` in ``unitless``,
    where a twist component is a fraction of ``scale.linear`` m/s (Servo's default, so a stock configuration would
    move the arm at another speed than the one planned). ``names`` spell the two settings in the error, which
    names the one that leaves the speed unknown."""
    if command_in_type == "speed_units":
        return 1.0
    if command_in_type != "unitless":
        raise SafetyConfigError(names[0], f"must be one of {', '.join(SERVO_COMMAND_TYPES)}, got {command_in_type!r}")
    if not (finite(scale_linear) and scale_linear > 0.0):
        raise SafetyConfigError(names[1], f"must be > 0 (m/s per unit) when {names[0]} is unitless, got "
                                          f"{scale_linear!r}")
    return 1.0 / float(scale_linear)
