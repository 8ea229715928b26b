"""``parapush soak``: the whole simulated stack (``SimStack``) under a stream of faults and hostile requests.

For ``--minutes`` of wall-clock time (and at least until every kind of event below has happened once: a slow host
runs longer, never thinner) the soak drives the stack from a schedule that is deterministic given ``--seed``. The
schedule is in simulated time (``/clock`` from mujoco_sim); the loop only polls it. Events:

  goals        random reachable ``PushObject`` goals 4-10 cm from the object (max 16 actions), goals cancelled or
               pre-empted by a second goal 0.5-3 s later, goals of one action (they time out), ``/goal_pose``
               goals; each comes 1 s after a hostile goal (which so pre-empts nothing the goal would not);
  mocap        dropouts (0.05-0.3 s) and blackouts (0.5-2 s) of random bodies (mujoco_sim's ``hidden_bodies``);
  e-stops      ``velocity_commander/estop`` held 0.3-2 s then ``reset``; some twice, with a reset without e-stop;
  sim          ``mujoco_sim/reset`` and ``load_scene`` of the same scene in the middle of pushes;
  hostile      requests on every service and action (``hostile_catalogue``: NaN / infinite / wrongly sized
               states, unknown models, names and parameters, absurd, zero and negative durations, thousands of
               controls, path-like junk, bad goals, unknown goal ids) and messages on the input topics (NaN /
               infinite commands, scene states of the wrong size or with NaN, bad goal poses). Each request must
               be *refused*: an answer with success false (or a FAILED push) whose message names the bad field
               (``expect``); the e-stop, reset and parameter calls the soak makes itself must succeed;
  health       a valid prediction every few seconds must succeed (the stack keeps working).

What is measured (all times on the sim clock; the monitor node runs with ``use_sim_time``):

  unsafe_commands   non-zero, finite ``pusher_cmd`` twists in the planner's frame (the soak's own hostile commands
                    are non-finite or in another frame) stamped at a sim time t while the scene state was unusable
                    throughout [t - A, t + d]. Unusable: the latest scene_state received fails
                    ``scene_state_to_array(require_valid=True)`` (the planner's own test: tracking lost, NaN,
                    missing or unknown objects) or was received more than the planner's ``state_timeout``
                    earlier (a usable one counts from its stamp, when it was measured, if the monitor received it
                    later: the planner may have had it first). A = 1 / control_rate + 1 / commander rate is the
                    reaction allowance (the planner's timer notices, the zero is passed on within a commander
                    period); d = 1 / commander rate is the
                    delivery skew (the same scene_state may reach the monitor that much later than the planner,
                    and ``/clock`` moves in steps). Commands are judged once the monitor's clock is past t + d.
                    ``unsafe_outputs``: the same for the commander's output (the MoveIt Servo twist) with
                    A = 1 / control_rate + 2 / commander rate + max_speed / max_acceleration (a planner zero is
                    ramped down at the acceleration limit).
  stop times        after each e-stop call, cancel and push end (the planner goes quiet), the sim time from the
                    event until the commander's output is first zero; an event after which a new goal (or the
                    e-stop reset) came before that is "superseded" and not timed.
  exceptions        raised in the stack's callbacks (kept by its spinner), in threads (``threading.excepthook``),
                    unraisable ones (``sys.unraisablehook``), rclpy futures whose exception nobody retrieved (their
                    ``__del__`` writes "The following exception was never retrieved" to stderr: counted there), and
                    exceptions the nodes caught and reported as internal errors (``push failed:`` / ``unexpected
                    error:`` on /rosout).
  rss               VmRSS of the process each second; growth = end - value after the warm-up (max(20 s, 10 %) of
                    the run), so imports and first allocations do not count.

It prints a status line every ``--status-period`` s and a table at the end, writes JSON (``--json``, default
``<out>/soak.json``) and a PNG of RSS and the event timeline, and exits non-zero when anything above failed.
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..arguments import output_dir, output_file
from ..ros import topics

PLANNER_OVERRIDES = {"samples": 10, "iterations": 1, "horizon": 4, "control_duration": 0.5, "max_actions": 16,
                     "threads": 1}  # fast planning (a few ms a plan with the coarse model): many pushes per minute
GOAL_DISTANCE = (0.04, 0.10)  # m from the object's position
GOAL_EDGE_MARGIN = 0.12  # m: goals stay this far inside the table edges
RSS_WARMUP = (20.0, 0.1)  # s, share of the run: RSS growth is measured from max of these (wall)
COVERAGE_SETTLE = 5.0  # s of sim time after the last first-of-its-kind event before the run may end
ANSWER_TIMEOUT = 30.0  # s (wall) a request may stay unanswered before it counts as such
STALL_TIMEOUT = 60.0  # s (wall) without the sim clock advancing ends the soak as a failure
INTERNAL_ERRORS = ("push failed:", "unexpected error:")  # how the nodes log exceptions they caught
NEVER_RETRIEVED = "The following exception was never retrieved"
# PushObject.Result order
OUTCOMES = ("reached", "hit_obstacle", "off_table", "timeout", "aborted", "failed", "other_in_goal")

GOAL_TAGS = ("plain", "plain", "plain", "cancel", "preempt", "timeout", "goal_pose")


# ------------------------------------------------------------------------------------------------ hostile catalogue
@dataclass(frozen=True)
class Hostile:
    channel: str  # predict, load_scene, set_parameters, cancel_goal, get_result, action, or a topic name
    build: object  # () -> request / goal / message
    expect: str = ""  # must appear in the refusal's message (case-insensitive): the reason is named


def hostile_catalogue(scene) -> dict:
    """name -> Hostile: every service, action and input topic of the stack, fed what it must refuse."""
    h = HostileBuilder(scene)
    return {**_predictor_hostiles(h), **_sim_hostiles(h), **_planner_hostiles(h), **_input_topic_hostiles(h)}


class HostileBuilder:
    """The words the catalogue is written in: a valid request, message or goal for ``scene`` with the given fields
    made hostile."""

    def __init__(self, scene):
        self.scene = scene
        self.target = scene.goal.object if scene.goal is not None else scene.objects[0].name

    def state(self, pusher=None, obj=None, objects=None):
        """The scene's initial state as a message; ``pusher`` / ``obj`` fields set, ``objects`` maps the list."""
        from std_msgs.msg import Header  # noqa: PLC0415

        from ..ros.conversions import array_to_scene_state  # noqa: PLC0415
        s = array_to_scene_state(self.scene.initial_state(), self.scene, Header(frame_id=topics.TABLE_FRAME))
        for k, v in (pusher or {}).items():
            setattr(s, k, v)
        for k, v in (obj or {}).items():
            setattr(s.objects[0], k, v)
        if objects is not None:
            s.objects = objects(list(s.objects))
        return s

    @staticmethod
    def ghost(objects: list) -> list:
        """The objects and one the scene does not have."""
        from parapush_msgs.msg import ObjectState  # noqa: PLC0415
        return objects + [ObjectState(name="ghost")]

    @staticmethod
    def controls(n=2, duration=0.1, vx=0.02, durations=None):
        from parapush_msgs.msg import PushControl  # noqa: PLC0415
        return [PushControl(vx=vx, vy=0.0, duration=durations[i] if durations else duration) for i in range(n)]

    def predict(self, expect, **kw):
        from parapush_msgs.srv import PredictTrajectory  # noqa: PLC0415
        kw.setdefault("model", "coarse")
        kw.setdefault("controls", self.controls())
        kw.setdefault("initial_state", self.state())
        return Hostile("predict", lambda: PredictTrajectory.Request(**kw), expect)

    @staticmethod
    def load(name, expect="not loaded"):
        from parapush_msgs.srv import LoadScene  # noqa: PLC0415
        return Hostile("load_scene", lambda: LoadScene.Request(scene=name), expect)

    @staticmethod
    def param(name, value, expect):
        from rcl_interfaces.srv import SetParameters  # noqa: PLC0415
        from rclpy.parameter import Parameter  # noqa: PLC0415
        return Hostile("set_parameters", lambda: SetParameters.Request(
            parameters=[Parameter(name, value=value).to_parameter_msg()]), expect)

    def goal(self, expect, **kw):
        from parapush_msgs.action import PushObject  # noqa: PLC0415
        kw.setdefault("target_object", self.target)
        kw.setdefault("goal_x", 0.1)
        kw.setdefault("yaw_tolerance", -1.0)
        return Hostile("action", lambda: PushObject.Goal(**kw), expect)

    @staticmethod
    def twist(vx, vy=0.0, frame=topics.TABLE_FRAME):
        from geometry_msgs.msg import TwistStamped  # noqa: PLC0415

        def build():
            m = TwistStamped()
            m.header.frame_id = frame
            m.twist.linear.x, m.twist.linear.y = vx, vy
            return m
        return Hostile(topics.PUSHER_CMD, build)

    @staticmethod
    def goal_pose(x, y, frame=topics.TABLE_FRAME):
        from geometry_msgs.msg import PoseStamped  # noqa: PLC0415

        def build():
            m = PoseStamped()
            m.header.frame_id = frame
            m.pose.position.x, m.pose.position.y, m.pose.orientation.w = x, y, 1.0
            return m
        return Hostile(topics.GOAL_POSE, build)

    @staticmethod
    def unknown_goal(request_type, path):
        """A builder of ``request_type`` whose goal id (the field at ``path``) nobody sent."""
        def build():
            req = request_type()
            obj = req
            for name in path:
                obj = getattr(obj, name)
            obj.uuid = list(uuid.uuid4().bytes)
            return req
        return build


def _predictor_hostiles(h: HostileBuilder) -> dict:
    """parareal_predictor: predict_trajectory."""
    nan, inf, controls, state = math.nan, math.inf, h.controls, h.state
    return {
        "predict_state_nan": h.predict("non-finite", initial_state=state(pusher={"pusher_x": nan})),
        "predict_state_inf": h.predict("non-finite", initial_state=state(obj={"y": inf})),
        "predict_state_missing_object": h.predict("missing", initial_state=state(objects=lambda o: [])),
        "predict_state_unknown_object": h.predict("unknown object", initial_state=state(objects=h.ghost)),
        "predict_state_duplicate_object": h.predict("duplicate", initial_state=state(objects=lambda o: o + o)),
        "predict_model_unknown": h.predict("unknown model", model="teapot"),
        "predict_coarse_model_unknown": h.predict("coarse_model", model="parareal", coarse_model="teapot"),
        "predict_iterations_absurd": h.predict("max_iterations", model="parareal", max_iterations=2 ** 31 - 1),
        "predict_tolerance_nan": h.predict("tolerance", model="parareal", tolerance=nan),
        "predict_tolerance_inf": h.predict("tolerance", model="parareal", tolerance=inf),
        "predict_duration_negative": h.predict("duration", controls=controls(duration=-1.0)),
        "predict_duration_zero": h.predict("duration", controls=controls(duration=0.0)),
        "predict_duration_absurd": h.predict("duration", controls=controls(duration=1e9)),
        "predict_duration_inf": h.predict("non-finite", controls=controls(duration=inf)),
        "predict_duration_off_step": h.predict("multiple", controls=controls(duration=0.0005)),
        "predict_durations_mixed": h.predict("differs", controls=controls(durations=(0.1, 0.2))),
        "predict_control_nan": h.predict("non-finite", controls=controls(vx=nan)),
        "predict_control_absurd_speed": h.predict("speed", controls=controls(vx=1e6)),
        "predict_controls_thousands": h.predict("max_controls", controls=controls(n=5000)),
        "predict_controls_none": h.predict("empty", controls=[]),
    }


def _sim_hostiles(h: HostileBuilder) -> dict:
    """mujoco_sim: load_scene and parameters."""
    return {
        "load_scene_unknown": h.load("no_such_scene"),
        "load_scene_empty": h.load(""),
        "load_scene_path_junk": h.load("../../../../etc/passwd"),
        "load_scene_not_a_scene": h.load("/proc/self/status"),
        "load_scene_unreadable": h.load("/proc/self/mem"),
        "load_scene_name_too_long": h.load("x" * 5000),
        "load_scene_directory": h.load("/"),
        "sim_param_unknown_body": h.param("hidden_bodies", "ghost", "hidden_bodies"),
        "sim_param_frozen": h.param("real_time_factor", 1000.0, "run time"),
        "sim_param_wrong_type": h.param("hidden_bodies", 42, "wrong parameter type"),
        "sim_param_undeclared": h.param("no_such_parameter", 1.0, "undeclared"),
    }


def _planner_hostiles(h: HostileBuilder) -> dict:
    """mpc_planner: push_object (goals; the action's own services)."""
    from action_msgs.srv import CancelGoal  # noqa: PLC0415
    from parapush_msgs.action import PushObject  # noqa: PLC0415

    nan, inf = math.nan, math.inf
    return {
        "goal_x_nan": h.goal("goal_x", goal_x=nan),
        "goal_y_inf": h.goal("goal_y", goal_y=-inf),
        "goal_off_table": h.goal("off the table", goal_x=5.0, goal_y=-7.0),
        "goal_unknown_object": h.goal("target_object", target_object="ghost"),
        "goal_tolerance_nan": h.goal("position_tolerance", position_tolerance=nan),
        "goal_yaw_inf": h.goal("goal_yaw", goal_yaw=inf),
        "goal_max_actions_absurd": h.goal("max_actions", max_actions=2 ** 32 - 1),
        "action_cancel_unknown_goal": Hostile("cancel_goal", h.unknown_goal(CancelGoal.Request,
                                                                            ("goal_info", "goal_id"))),
        "action_result_unknown_goal": Hostile("get_result", h.unknown_goal(
            PushObject.Impl.GetResultService.Request, ("goal_id",))),
    }


def _input_topic_hostiles(h: HostileBuilder) -> dict:
    """Input topics: no answer; their effect is judged by the monitor, and the stack must keep working."""
    nan, inf, state = math.nan, math.inf, h.state
    return {
        "pusher_cmd_nan": h.twist(nan),
        "pusher_cmd_inf": h.twist(0.0, -inf),
        "pusher_cmd_wrong_frame": h.twist(1e6, frame="map"),
        "scene_state_nan": Hostile(topics.SCENE_STATE, lambda: state(pusher={"pusher_x": nan})),
        "scene_state_inf_object": Hostile(topics.SCENE_STATE, lambda: state(obj={"yaw": inf})),
        "scene_state_no_objects": Hostile(topics.SCENE_STATE, lambda: state(objects=lambda o: [])),
        "scene_state_unknown_object": Hostile(topics.SCENE_STATE, lambda: state(objects=h.ghost)),
        "goal_pose_nan": h.goal_pose(nan, 0.0),
        "goal_pose_off_table": h.goal_pose(3.0, 0.0),
        "goal_pose_wrong_frame": h.goal_pose(0.1, 0.0, frame="map"),
    }


GOAL_CHANNELS = ("action", topics.GOAL_POSE)  # hostile kinds that start (and so pre-empt) a push


def hostile_names(catalogue: dict) -> tuple[tuple, tuple]:
    """(request and message kinds, goal kinds): hostile goals come with the real goals (``make_schedule``), so
    that they pre-empt no push that the next real goal would not pre-empt anyway."""
    return (tuple(n for n, h in catalogue.items() if h.channel not in GOAL_CHANNELS),
            tuple(n for n, h in catalogue.items() if h.channel in GOAL_CHANNELS))


# ------------------------------------------------------------------------------------------------ schedule
@dataclass(frozen=True)
class Event:
    t: float  # s of sim time after the soak started
    kind: str  # goal, cancel, hide, estop, estop_reset, sim_reset, hostile, health
    args: dict = field(default_factory=dict)


def make_schedule(seed: int, horizon: float, bodies, hostile_requests, hostile_goals) -> tuple[list, float]:
    """(events sorted by time, coverage end): independent streams, each with its own generator seeded from
    ``seed``; variants are drawn from bags shuffled each cycle, so every variant occurs in each stream's first
    cycle. The coverage end is when every first cycle is over (+ a settling time for the answers); every stream
    goes on to ``horizon`` or the coverage end, whichever is later (a longer horizon only appends events). Each
    goal comes 1 s after a hostile goal: the hostile one pre-empts only what the real goal would pre-empt
    anyway, and is refused before the real one arrives."""
    streams = {  # name: (seconds between events (uniform), variants, second variants (drawn alongside))
        "goal": ((7.0, 11.0), GOAL_TAGS, tuple(hostile_goals)),
        "mocap": ((4.0, 10.0), ("dropout", "blackout"), ()),
        "estop": ((10.0, 20.0), ("single", "double"), ()),
        "sim": ((15.0, 30.0), ("reset", "reload"), ()),
        "hostile": ((0.4, 1.2), tuple(hostile_requests), ()),
        "health": ((4.0, 8.0), ("predict",), ()),
    }
    events, coverage = [], 0.0
    for index, (stream, ((lo, hi), *bags)) in enumerate(streams.items()):
        rng = np.random.default_rng([seed, index])
        t, n = rng.uniform(0.2, 1.0) * lo, 0
        cycles, seen = [[] for _ in bags], [set() for _ in bags]
        while t < horizon or any(len(s) < len(set(b)) for s, b in zip(seen, bags)):
            variants = []
            for bag, cycle in zip(bags, cycles):
                if bag and not cycle:
                    cycle += [bag[i] for i in rng.permutation(len(bag))]
                variants.append(cycle.pop() if bag else None)
            new = _expand(stream, *variants, t, rng, bodies, f"{stream}{n}")
            events += new
            if any(v is not None and v not in done for v, done in zip(variants, seen)):
                coverage = max(coverage, max(e.t for e in new))
            for v, done in zip(variants, seen):
                if v is not None:
                    done.add(v)
            t += rng.uniform(lo, hi)
            n += 1
    if coverage + COVERAGE_SETTLE > horizon:  # no stream may run dry before the run may end
        return make_schedule(seed, coverage + COVERAGE_SETTLE, bodies, hostile_requests, hostile_goals)
    events.sort(key=lambda e: e.t)
    return events, coverage + COVERAGE_SETTLE


def _expand(stream, variant, hostile_goal, t, rng, bodies, slot) -> list:
    """The primitive events of one scheduled variant."""
    if stream == "goal":
        def offset(distance=None):
            d = rng.uniform(*GOAL_DISTANCE) if distance is None else distance
            a = rng.uniform(-math.pi, math.pi)
            return (d * math.cos(a), d * math.sin(a))
        t_goal = t + 1.0
        first = Event(t_goal, "goal", {"tag": variant, "slot": slot, "max_actions": 1 if variant == "timeout" else 0,
                                       "offset": offset(GOAL_DISTANCE[1] if variant == "timeout" else None)})
        events = [Event(t, "hostile", {"name": hostile_goal}), first]
        if variant == "cancel":
            events.append(Event(t_goal + rng.uniform(0.5, 3.0), "cancel", {"slot": slot}))
        elif variant == "preempt":
            events.append(Event(t_goal + rng.uniform(0.5, 2.5), "goal", {"tag": "preempting", "slot": slot + "b",
                                                                         "max_actions": 0, "offset": offset()}))
        return events
    if stream == "mocap":
        k = int(rng.integers(1, len(bodies) + 1))
        hidden = sorted(str(b) for b in rng.choice(list(bodies), k, replace=False))
        duration = rng.uniform(0.05, 0.3) if variant == "dropout" else rng.uniform(0.5, 2.0)
        return [Event(t, "hide", {"variant": variant, "bodies": hidden, "duration": float(duration)})]
    if stream == "estop":
        hold = rng.uniform(0.3, 2.0)
        if variant == "single":
            return [Event(t, "estop"), Event(t + hold, "estop_reset")]
        return [Event(t, "estop"), Event(t + 0.1, "estop", {"again": True}), Event(t + hold, "estop_reset"),
                Event(t + hold + 0.2, "estop_reset", {"again": True})]
    if stream == "sim":
        return [Event(t, "sim_reset", {"reload": variant == "reload"})]
    if stream == "hostile":
        return [Event(t, "hostile", {"name": variant})]
    return [Event(t, "health")]


# ------------------------------------------------------------------------------------------------ monitor
def _stamp(msg) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


class StateTimeline:
    """When the scene state was unusable, from the receptions of scene_state (sim time, usable): from a usable
    reception at r it stays usable until the next reception or r + ``state_timeout`` (stale), whichever is first.
    A usable state counts as usable from its stamp (when it was measured) if that is earlier than its reception here:
    the planner may have received it before this monitor did (under load, by more than any fixed delivery skew), so
    a command sent after the stamp may rest on it."""

    def __init__(self, state_timeout: float, keep: int = 4096):
        self.state_timeout = state_timeout
        self.receptions = deque(maxlen=keep)  # (received, usable, usable from)
        self.changes = []  # (t, usable, measured at) whenever usability changes: the context of a verdict

    def add(self, t: float, usable: bool, stamp: float = math.nan):
        if not self.receptions or self.receptions[-1][1] != usable:
            self.changes.append((t, usable, stamp))
        self.receptions.append((t, usable, min(t, stamp) if usable and math.isfinite(stamp) else t))

    def unusable_for(self, t: float, skew: float = 0.0):
        """How long (s) the state had been unusable at ``t`` if it stayed unusable until ``t + skew``, else None."""
        bad = self.bad_since(t + skew)
        return None if bad is None or bad > t else t - bad

    def bad_since(self, t: float):
        """Sim time since which the state was unusable at ``t``; None if it was usable (-inf: never usable)."""
        after = None  # the first reception after the last usable one, up to t
        for r, usable, start in reversed(self.receptions):
            if r > t:
                if usable and start <= t:  # measured by t, received here later: the planner may have had it
                    return None
                continue
            if usable:
                end = r + self.state_timeout if after is None else min(after, r + self.state_timeout)
                return end if end <= t else None
            after = r
        return after if after is not None else -math.inf


class Monitor:
    """Subscriptions that judge what the planner and the commander send against the scene state (module docstring);
    its callbacks run on the stack's executor threads, so everything is under one lock."""

    def __init__(self, node, scene, state_timeout, allowance: dict, skew: float, frame_id, stack_nodes,
                 commander_status_topic: str):
        from geometry_msgs.msg import TwistStamped  # noqa: PLC0415
        from rcl_interfaces.msg import Log  # noqa: PLC0415
        from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: PLC0415
        from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: PLC0415
        from std_msgs.msg import String  # noqa: PLC0415

        from parapush_msgs.msg import SceneState  # noqa: PLC0415

        from ..ros import qos  # noqa: PLC0415

        self.scene, self.frame_id = scene, frame_id
        self.allowance, self.skew = allowance, skew  # s: {command, output} reaction allowances; delivery skew
        self.queue = []  # (command | output, t, (vx, vy)) non-zero, to be judged
        self.stack_nodes = set(stack_nodes)
        self.lock = threading.Lock()
        self.timeline = StateTimeline(state_timeout)
        self.last_state = None  # the latest usable SceneState
        self.commands = Counter()  # planner pusher_cmd: seen, nonzero, nonfinite
        self.outputs = Counter()  # commander output: seen, nonzero, nonfinite
        self.worst_reaction = {"command": 0.0, "output": 0.0}  # s after the state went bad, within the allowance
        self.during_bad = Counter()  # non-zero commands / outputs while the state was unusable (any lateness)
        self.unsafe = {"command": [], "output": []}  # (t, bad since, vx, vy)
        self.estop_from = None  # sim time after which the commander's output must be zero (e-stop latched)
        self.estop_leaks = []
        self.stops = []  # dicts: kind, t, stop_time_s / superseded
        self.open_stops = []  # those neither timed nor superseded yet
        self.internal_errors = []  # /rosout lines of exceptions the nodes caught
        self.commander_status = Counter()
        self.status_log = []  # (t, node, text) of status changes (not the planner's routine ones)
        self.planner_status = ""
        group = ReentrantCallbackGroup()
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)  # deeper: the monitor must see all
        node.create_subscription(SceneState, topics.SCENE_STATE, self._on_state, reliable, callback_group=group)
        node.create_subscription(TwistStamped, topics.PUSHER_CMD, self._on_command, reliable, callback_group=group)
        node.create_subscription(TwistStamped, topics.SERVO_TWIST, self._on_output, reliable, callback_group=group)
        node.create_subscription(Log, "/rosout", self._on_log, QoSProfile(depth=200,
                                 reliability=ReliabilityPolicy.RELIABLE), callback_group=group)
        node.create_subscription(String, commander_status_topic, self._on_commander_status, qos.LATCHED,
                                 callback_group=group)
        node.create_subscription(String, topics.PLANNER_STATUS, self._on_planner_status, qos.LATCHED,
                                 callback_group=group)
        self.clock = node.get_clock()

    def now(self) -> float:
        return self.clock.now().nanoseconds * 1e-9

    # --- inputs
    def _on_state(self, msg):
        from ..ros.conversions import ConversionError, scene_state_to_array  # noqa: PLC0415
        try:
            scene_state_to_array(msg, self.scene, require_valid=True, field="scene_state")
            usable = True
        except ConversionError:
            usable = False
        with self.lock:  # the clock is read under the lock: judge() sees every reception up to its own reading
            self.timeline.add(self.now(), usable, _stamp(msg))
            if usable:
                self.last_state = msg

    def judge(self, until: float = math.inf):
        """Judge the queued non-zero commands and outputs stamped up to ``until`` - ``skew`` (the rule of the
        module docstring), once every state received up to ``skew`` after them is in."""
        with self.lock:
            horizon = min(until, self.now()) - self.skew
            keep = []
            for what, t, v in self.queue:
                if t > horizon:
                    keep.append((what, t, v))
                    continue
                late = self.timeline.unusable_for(t, self.skew)
                if late is None:
                    continue
                self.during_bad[what] += 1
                if late > self.allowance[what]:
                    self.unsafe[what].append({"t": t, "bad_since": t - late, "vx": v[0], "vy": v[1]})
                else:
                    self.worst_reaction[what] = max(self.worst_reaction[what], late)
            self.queue = keep

    def _on_command(self, msg):
        if msg.header.frame_id != self.frame_id:  # not the planner's: the soak's own wrong-frame messages
            return
        v = (msg.twist.linear.x, msg.twist.linear.y)
        with self.lock:
            self.commands["seen"] += 1
            if not all(math.isfinite(c) for c in v):
                self.commands["nonfinite"] += 1
                return
            if v != (0.0, 0.0):
                self.commands["nonzero"] += 1
                self.queue.append(("command", _stamp(msg), v))

    def _on_output(self, msg):
        t, v = _stamp(msg), (msg.twist.linear.x, msg.twist.linear.y)
        with self.lock:
            self.outputs["seen"] += 1
            if not all(math.isfinite(c) for c in v):
                self.outputs["nonfinite"] += 1
                return
            if v == (0.0, 0.0):
                for s in [s for s in self.open_stops if t >= s["t"]]:
                    s["stop_time_s"] = t - s["t"]
                    self.open_stops.remove(s)
                return
            self.outputs["nonzero"] += 1
            if self.estop_from is not None and t > self.estop_from:
                self.estop_leaks.append({"t": t, "vx": v[0], "vy": v[1]})
            self.queue.append(("output", t, v))

    def _on_log(self, msg):
        if msg.name in self.stack_nodes and any(p in msg.msg for p in INTERNAL_ERRORS):
            with self.lock:
                self.internal_errors.append(f"{msg.name}: {msg.msg[:300]}")

    def _on_commander_status(self, msg):
        with self.lock:
            self.commander_status[msg.data.split(":")[0]] += 1
            self.status_log.append((self.now(), "commander", msg.data[:100]))

    def _on_planner_status(self, msg):
        with self.lock:
            self.planner_status = msg.data
            if not msg.data.startswith(("pushing", "planning")):
                self.status_log.append((self.now(), "planner", msg.data[:100]))

    def context(self, t: float, before: float = 1.5, after: float = 0.5) -> dict:
        """What happened around sim time ``t``: state usability changes and status changes (for a verdict)."""
        with self.lock:
            return {"state_changes": [c for c in self.timeline.changes if t - before <= c[0] <= t + after],
                    "status": [c for c in self.status_log if t - before <= c[0] <= t + after]}

    # --- from the soak
    def stop_event(self, kind: str, t: float) -> dict:
        """A stop asked for at sim time ``t``; the record is timed by the first zero output stamped after it."""
        with self.lock:
            self.stops.append({"kind": kind, "t": t})
            self.open_stops.append(self.stops[-1])
            return self.stops[-1]

    def stop_answered(self, stop: dict):
        """The request behind ``stop`` was answered now: its zero, sent before the answer, is judged from here."""
        with self.lock:
            stop["answer_s"] = self.now() - stop["t"]

    def supersede(self, kinds, reason: str):
        """Untimed stop events of ``kinds`` are not timed any more: something commanded motion again first."""
        with self.lock:
            for s in [s for s in self.open_stops if s["kind"] in kinds]:
                s["superseded"] = reason
                self.open_stops.remove(s)

    def last_object_xy(self, name: str):
        with self.lock:
            s = self.last_state
        if s is None:
            return None
        return next((np.array([o.x, o.y]) for o in s.objects if o.name == name), None)


# ------------------------------------------------------------------------------------------------ exceptions, RSS
class _CountingStream:
    """sys.stderr as it was, counting the writes that contain ``needle``."""

    def __init__(self, stream, needle: str, hits: list):
        self._stream, self._needle, self._hits = stream, needle, hits

    def write(self, text):
        if self._needle in text:
            self._hits.append(text.strip()[:300])
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class ExceptionCounters:
    """Exceptions that Python would only print: in threads, unraisable ones, never-retrieved rclpy futures."""

    def __init__(self):
        self.threads, self.unraisable, self.never_retrieved = [], [], []

    def install(self) -> ExceptionCounters:
        self._saved = threading.excepthook, sys.unraisablehook, sys.stderr

        def on_thread(args):
            self.threads.append(f"{args.thread.name if args.thread else '?'}: {args.exc_value!r}"[:300])
            self._saved[0](args)

        def on_unraisable(args):
            self.unraisable.append(f"{args.err_msg or ''} {args.exc_value!r}"[:300])
            self._saved[1](args)

        threading.excepthook, sys.unraisablehook = on_thread, on_unraisable
        sys.stderr = _CountingStream(sys.stderr, NEVER_RETRIEVED, self.never_retrieved)
        return self

    def uninstall(self):
        gc.collect()  # futures dropped during the run report now, while the counters listen
        threading.excepthook, sys.unraisablehook, sys.stderr = self._saved


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("/proc/self/status has no VmRSS line")


def _spin_errors(stack) -> list:
    errors = getattr(stack, "errors", None)
    return list(errors if errors is not None else getattr(getattr(stack, "_spin", None), "errors", []))


# ------------------------------------------------------------------------------------------------ the soak
class Soak:
    """Executes the schedule against a started ``SimStack`` through ``node`` (spun with the stack)."""

    def __init__(self, stack, node, scene, seed: int, minutes: float, status_period: float):
        from geometry_msgs.msg import PoseStamped, TwistStamped  # noqa: PLC0415
        from rcl_interfaces.srv import SetParameters  # noqa: PLC0415
        from ..ros.actions import ActionClient  # noqa: PLC0415
        from std_srvs.srv import Trigger  # noqa: PLC0415

        from parapush_msgs.action import PushObject  # noqa: PLC0415
        from parapush_msgs.msg import SceneState  # noqa: PLC0415
        from parapush_msgs.srv import LoadScene, PredictTrajectory  # noqa: PLC0415

        from ..core.robot.mocap import parse_body_map  # noqa: PLC0415
        from ..ros import qos  # noqa: PLC0415
        from ..ros.params import MUJOCO_SIM, PLANNER, VELOCITY_COMMANDER  # noqa: PLC0415

        self.stack, self.node, self.scene = stack, node, scene
        self.seed, self.minutes, self.status_period = seed, minutes, status_period
        self.PushObject, self.Trigger, self.LoadScene = PushObject, Trigger, LoadScene
        self.target = scene.goal.object if scene.goal is not None else scene.objects[0].name

        def param(node_name, spec, name):
            return stack.parameters[node_name].get(name, spec[name].default)

        self.planner_p = {k: param("mpc_planner", PLANNER, k) for k in ("control_rate", "state_timeout", "frame_id")}
        self.commander_p = {k: param("velocity_commander", VELOCITY_COMMANDER, k)
                            for k in ("rate", "max_speed", "max_acceleration")}
        sim_p = {k: param("mujoco_sim", MUJOCO_SIM, k) for k in ("pusher_body", "body_map")}
        self.bodies = [sim_p["pusher_body"], *parse_body_map(sim_p["body_map"], [o.name for o in scene.objects])
                       .values()]
        planner_period, commander_period = 1.0 / self.planner_p["control_rate"], 1.0 / self.commander_p["rate"]
        self.allowance = {"command": planner_period + commander_period,
                          "output": planner_period + 2.0 * commander_period
                          + self.commander_p["max_speed"] / self.commander_p["max_acceleration"]}
        def fqn(name):
            return stack.nodes[name].get_fully_qualified_name()

        stack_nodes = [n.get_name() for n in stack.nodes.values() if n is not node]
        self.monitor = Monitor(node, scene, self.planner_p["state_timeout"], self.allowance, commander_period,
                               self.planner_p["frame_id"], stack_nodes,
                               topics.COMMANDER_STATUS.replace("~", fqn("velocity_commander")))

        reliable = qos.RELIABLE
        self.action = ActionClient(node, PushObject, topics.PUSH_ACTION)
        self.clients = {
            "predict": node.create_client(PredictTrajectory, topics.PREDICT_SERVICE),
            "load_scene": node.create_client(LoadScene, topics.SIM_LOAD_SCENE_SERVICE.replace("~", fqn("mujoco_sim"))),
            "sim_reset": node.create_client(Trigger, topics.SIM_RESET_SERVICE.replace("~", fqn("mujoco_sim"))),
            "set_parameters": node.create_client(SetParameters, f"{fqn('mujoco_sim')}/set_parameters"),
            "estop": node.create_client(Trigger, topics.ESTOP_SERVICE.replace("~", fqn("velocity_commander"))),
            "estop_reset": node.create_client(Trigger,
                                              topics.ESTOP_RESET_SERVICE.replace("~", fqn("velocity_commander"))),
            "cancel_goal": node.create_client(PushObject.Impl.CancelGoalService,
                                              f"/{topics.PUSH_ACTION}/_action/cancel_goal"),
            "get_result": node.create_client(PushObject.Impl.GetResultService,
                                             f"/{topics.PUSH_ACTION}/_action/get_result"),
        }
        self.publishers = {topics.PUSHER_CMD: node.create_publisher(TwistStamped, topics.PUSHER_CMD, reliable),
                           topics.SCENE_STATE: node.create_publisher(SceneState, topics.SCENE_STATE, reliable),
                           topics.GOAL_POSE: node.create_publisher(PoseStamped, topics.GOAL_POSE, 10)}
        self.catalogue = hostile_catalogue(scene)
        requests, goals = hostile_names(self.catalogue)
        self.schedule, self.coverage_end = make_schedule(seed, minutes * 60.0, self.bodies, requests, goals)

        self.pending = []  # (future, on_done(future), what, wall deadline)
        self.goals = {}  # slot -> record dict
        self.events = Counter()
        self.outcomes = Counter()
        self.hostile = {}  # name -> {"sent", "refused", "answers": [first messages]}
        self.not_refused = []
        self.health = Counter()
        self.problems = []  # requests the stack answered wrongly (e.g. a valid reset refused) or not at all
        self._foreign_graph_reported = False
        self.hidden, self.hide_intervals = "", []  # hidden_bodies as set; (start, end, bodies) of dropouts
        self.estop_generation = 0  # e-stop resets so far: an e-stop answered after a reset latches nothing
        self.timeline = []  # (sim s, label)
        self.rss = []  # (wall s, sim s, MB)
        self.t0 = None

    # --- time
    def now(self) -> float:
        return self.monitor.now()

    # --- requests
    def _call(self, client_name: str, request, on_done, what: str):
        future = self.clients[client_name].call_async(request)
        self.pending.append((future, on_done, what, time.monotonic() + ANSWER_TIMEOUT))

    def _poll(self, final: bool = False):
        """Hand finished requests to their callbacks (which may add requests); unanswered ones are problems."""
        pending, self.pending = self.pending, []
        for item in pending:
            future, on_done, what, deadline = item
            if future.done():
                on_done(future)
            elif final or time.monotonic() > deadline:
                self.problems.append(f"no answer to {what} within {ANSWER_TIMEOUT:g} s")
            else:
                self.pending.append(item)

    def _expect_success(self, what: str):
        def on_done(future):
            res = future.result()
            if not res.success:
                self.problems.append(f"{what} refused: {res.message}")
        return on_done

    # --- events
    def execute(self, ev: Event):
        t, a = self.now(), ev.args
        label = ev.kind
        if ev.kind == "hostile":
            channel = self._hostile(a["name"])
            label = ("hostile_goal" if channel == "action" else "hostile_message" if channel in self.publishers
                     else "hostile_request")
        elif ev.kind == "goal":
            self._goal(a)
            label = f"goal_{a['tag']}"
        elif ev.kind == "cancel":
            rec = self.goals.get(a["slot"])
            if rec is None or rec.get("handle") is None or "outcome" in rec:
                label = "cancel_after_end"
            else:
                stop = self.monitor.stop_event("cancel", t)  # the planner zeroes before it accepts a cancel
                self.pending.append((rec["handle"].cancel_goal_async(),
                                     lambda f, stop=stop: self.monitor.stop_answered(stop), "cancel of a goal",
                                     time.monotonic() + ANSWER_TIMEOUT))
        elif ev.kind == "hide":
            self.hide_intervals.append((t, t + a["duration"], a["bodies"]))
            label = a["variant"]
        elif ev.kind == "estop":
            stop = None
            if a.get("again"):
                label = "estop_again"
            else:
                stop = self.monitor.stop_event("estop", t)
            generation = self.estop_generation

            def latched(future):  # the commander zeroes inside the call: every later output must be zero
                self._expect_success("e-stop")(future)
                if stop is not None:
                    self.monitor.stop_answered(stop)
                with self.monitor.lock:
                    if generation == self.estop_generation and self.monitor.estop_from is None:
                        self.monitor.estop_from = self.now() + 1.0 / self.commander_p["rate"]
            self._call("estop", self.Trigger.Request(), latched, "e-stop")
        elif ev.kind == "estop_reset":
            label = "reset_without_estop" if a.get("again") else "estop_reset"
            self.estop_generation += 1
            with self.monitor.lock:
                self.monitor.estop_from = None
            self.monitor.supersede(("estop",), "e-stop reset before the output was zero")
            self._call("estop_reset", self.Trigger.Request(), self._expect_success("e-stop reset"), "e-stop reset")
        elif ev.kind == "sim_reset" and a["reload"]:
            label = "sim_reload"
            self._call("load_scene", self.LoadScene.Request(scene=self.scene.name),
                       self._expect_success("load_scene of the running scene"), "load_scene")
        elif ev.kind == "sim_reset":
            self._call("sim_reset", self.Trigger.Request(), self._expect_success("sim reset"), "sim reset")
        elif ev.kind == "health":
            self._health()
        else:
            raise ValueError(f"schedule: unknown event kind {ev.kind!r}")
        self.events[label] += 1
        self.timeline.append((t - self.t0, label))

    def _goal(self, args: dict):
        xy = self.monitor.last_object_xy(self.target)
        if xy is None:
            xy = np.zeros(2)
        limit = self.scene.table.half - GOAL_EDGE_MARGIN
        gx, gy = np.clip(xy + np.asarray(args["offset"]), -limit, limit)
        self.monitor.supersede(("cancel", "goal_end"), "a new goal came first")
        if args["tag"] == "goal_pose":
            from geometry_msgs.msg import PoseStamped  # noqa: PLC0415
            m = PoseStamped()
            m.header.frame_id = self.planner_p["frame_id"]
            m.pose.position.x, m.pose.position.y, m.pose.orientation.w = float(gx), float(gy), 1.0
            self.publishers[topics.GOAL_POSE].publish(m)
            return
        goal = self.PushObject.Goal(target_object=self.target, goal_x=float(gx), goal_y=float(gy),
                                    yaw_tolerance=-1.0, max_actions=int(args["max_actions"]))
        self._send_goal(args["slot"], goal, hostile=None)

    def _send_goal(self, slot: str, goal, hostile):
        rec = {"slot": slot, "hostile": hostile, "sent": round(self.now() - self.t0, 3),
               "goal": [round(goal.goal_x, 3), round(goal.goal_y, 3), goal.max_actions]}
        self.goals[slot] = rec

        def on_result(future):
            r = future.result().result
            rec["outcome"] = OUTCOMES[r.outcome] if r.outcome < len(OUTCOMES) else f"code {r.outcome}"
            rec["message"], rec["ended"] = r.message[:160], round(self.now() - self.t0, 3)
            if hostile is not None:
                self._judge_hostile(hostile, rec["outcome"] == "failed", r.message)
                return
            self.outcomes[rec["outcome"]] += 1
            if rec["outcome"] != "aborted":
                self.monitor.stop_event("goal_end", self.now())

        def on_response(future):
            handle = future.result()
            rec["handle"] = handle
            if not handle.accepted:
                rec["outcome"] = "rejected"
                if hostile is not None:
                    self._judge_hostile(hostile, True, "goal rejected")
                else:
                    self.outcomes["rejected"] += 1
                return
            self.pending.append((handle.get_result_async(), on_result, f"result of goal {slot}",
                                 time.monotonic() + 10 * ANSWER_TIMEOUT))

        self.pending.append((self.action.send_goal_async(goal), on_response, f"goal {slot}",
                             time.monotonic() + ANSWER_TIMEOUT))

    def _health(self):
        from std_msgs.msg import Header  # noqa: PLC0415

        from parapush_msgs.srv import PredictTrajectory  # noqa: PLC0415

        from ..ros.conversions import array_to_scene_state, arrays_to_controls  # noqa: PLC0415
        req = PredictTrajectory.Request(
            initial_state=array_to_scene_state(self.scene.initial_state(), self.scene,
                                               Header(frame_id=topics.TABLE_FRAME)),
            controls=arrays_to_controls(np.array([[0.02, 0.0], [0.02, 0.01]]), 0.1), model="coarse")
        self.health["sent"] += 1

        def on_done(future):
            res = future.result()
            if res.success and len(res.predicted_states) == 2:
                self.health["ok"] += 1
            else:
                self.problems.append(f"health check: a valid prediction failed: {res.message}")
        self._call("predict", req, on_done, "health check prediction")

    def _hostile(self, name: str) -> str:
        """Send one hostile request or message; returns its channel."""
        h = self.catalogue[name]
        entry = self.hostile.setdefault(name, {"channel": h.channel, "sent": 0, "refused": 0, "answers": []})
        entry["sent"] += 1
        if h.channel in self.publishers:
            self.publishers[h.channel].publish(h.build())
            entry["refused"] += 1  # a message has no answer: the monitor and the health checks judge its effect
            return h.channel
        if h.channel == "action":
            self._send_goal(f"hostile{sum(e['sent'] for e in self.hostile.values())}", h.build(), name)
            return h.channel

        def on_done(future):
            res = future.result()
            if h.channel == "set_parameters":
                ok, text = not res.results[0].successful, res.results[0].reason
            elif h.channel == "cancel_goal":
                ok, text = res.return_code != res.ERROR_NONE, f"return_code {res.return_code}"
            elif h.channel == "get_result":
                from action_msgs.msg import GoalStatus  # noqa: PLC0415
                ok, text = res.status == GoalStatus.STATUS_UNKNOWN, f"status {res.status}"
            else:
                ok, text = not res.success, res.message
            self._judge_hostile(name, ok, text)
        self._call(h.channel, h.build(), on_done, f"hostile request {name}")
        return h.channel

    def _judge_hostile(self, name: str, refused: bool, message: str):
        entry = self.hostile[name]
        proper = refused and self.catalogue[name].expect.lower() in message.lower()
        entry["refused"] += int(proper)
        if len(entry["answers"]) < 2:
            entry["answers"].append(message[:240])
        if not proper:
            how = f"refused without naming {self.catalogue[name].expect!r}" if refused else "accepted"
            self.not_refused.append(f"{name}: {how}: {message[:240]}")

    def _apply_hidden(self, t: float):
        self.hide_intervals = [iv for iv in self.hide_intervals if iv[1] > t]
        text = ",".join(sorted({b for s, e, bodies in self.hide_intervals if s <= t for b in bodies}))
        if text == self.hidden:
            return
        from rcl_interfaces.srv import SetParameters  # noqa: PLC0415
        from rclpy.parameter import Parameter  # noqa: PLC0415
        self.hidden = text

        def on_done(future):
            r = future.result().results[0]
            if not r.successful:
                self.problems.append(f"hidden_bodies={text!r} refused: {r.reason}")
        self._call("set_parameters", SetParameters.Request(parameters=[
            Parameter("hidden_bodies", value=text).to_parameter_msg()]), on_done, f"hidden_bodies={text!r}")

    # --- the run
    def _wait_ready(self, timeout: float = 120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.monitor.last_state is not None and self.action.server_is_ready()
                    and all(c.service_is_ready() for c in self.clients.values())):
                return
            time.sleep(0.05)
        missing = [n for n, c in self.clients.items() if not c.service_is_ready()]
        raise SystemExit(f"parapush soak: the stack is not ready after {timeout:g} s (valid scene_state: "
                         f"{self.monitor.last_state is not None}, action server: {self.action.server_is_ready()}, "
                         f"services not ready: {missing})")

    def run(self):
        wall0 = time.monotonic()
        self._wait_ready()
        self.t0 = self.now()
        print(f"parapush soak: {self.minutes:g} min (at least {self.coverage_end:.0f} s of sim time: every kind "
              f"of event once), seed {self.seed}, scene {self.scene.name!r}, {len(self.catalogue)} kinds of "
              f"hostile requests and messages", flush=True)
        wall_run0 = time.monotonic()
        index, last_status, last_sample = 0, 0.0, -math.inf
        last_sim, last_advance = self.t0, time.monotonic()
        while True:
            time.sleep(0.01)
            now = self.now()
            sim = now - self.t0
            self._poll()
            while index < len(self.schedule) and self.schedule[index].t <= sim:
                self.execute(self.schedule[index])
                index += 1
            self._apply_hidden(now)
            self.monitor.judge()
            wall = time.monotonic() - wall_run0
            if wall - last_sample >= 1.0:
                last_sample = wall
                self.rss.append((wall, sim, rss_mb()))
            if wall - last_status >= self.status_period:
                last_status = wall
                self._check_alone()
                print(self.status_line(wall, sim), flush=True)
            if now > last_sim:
                last_sim, last_advance = now, time.monotonic()
            elif time.monotonic() - last_advance > STALL_TIMEOUT:
                self.problems.append(f"the sim clock stopped at {sim:.1f} s for {STALL_TIMEOUT:g} s of wall time")
                break
            if wall >= self.minutes * 60.0 and sim >= self.coverage_end:
                break
        self.wall_time, self.sim_time = time.monotonic() - wall_run0, self.now() - self.t0
        self.startup_wall = wall_run0 - wall0

    def _check_alone(self):
        """Another stack in the same ROS domain (a second sim, a test run) would mix its /clock, goals and answers
        into this one and make every verdict meaningless: say so, once, as a problem naming the domain."""
        clocks = self.node.count_publishers(topics.CLOCK)
        if clocks > 1 and not self._foreign_graph_reported:
            self._foreign_graph_reported = True
            domain = os.environ.get("ROS_DOMAIN_ID", "0")
            self.problems.append(f"{clocks} /clock publishers in ROS domain {domain}: another ROS graph shares it "
                                 f"(run the soak alone in its domain: ROS_DOMAIN_ID=<free id> parapush soak ...)")
            print(f"[soak] {self.problems[-1]}", flush=True)

    def finish(self):
        """End cleanly: tracking back, e-stop cleared, running goals cancelled, answers collected (bounded)."""
        self.hide_intervals = []
        self._apply_hidden(self.now())
        with self.monitor.lock:
            self.monitor.estop_from = None
        self._call("estop_reset", self.Trigger.Request(), lambda f: None, "final e-stop reset")
        for rec in self.goals.values():
            if rec.get("handle") is not None and rec["handle"].accepted and "outcome" not in rec:
                self.pending.append((rec["handle"].cancel_goal_async(), lambda f: None, "final cancel",
                                     time.monotonic() + ANSWER_TIMEOUT))
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while self.pending and time.monotonic() < deadline:
            self._poll()
            time.sleep(0.02)
        self._poll(final=True)
        self.monitor.judge()
        for rec in self.goals.values():
            if "outcome" not in rec and rec["hostile"] is None:
                self.outcomes["unfinished"] += 1

    def status_line(self, wall: float, sim: float) -> str:
        m = self.monitor
        sent = sum(e["sent"] for e in self.hostile.values())
        refused = sum(e["refused"] for e in self.hostile.values())
        goals = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())) or "none yet"
        return (f"[soak] wall {wall:6.0f}/{self.minutes * 60:.0f} s  sim {sim:6.1f} s (x{sim / max(wall, 1e-9):.2f})  "
                f"goals: {goals}  hostile {refused}/{sent} refused  unsafe {len(m.unsafe['command'])}+"
                f"{len(m.unsafe['output'])}  exceptions {len(_spin_errors(self.stack)) + len(m.internal_errors)}  "
                f"rss {self.rss[-1][2] if self.rss else rss_mb():.0f} MB  planner: {m.planner_status[:60]}")


# ------------------------------------------------------------------------------------------------ CLI
def add_parser(sub):
    p = sub.add_parser("soak", help="fault soak: the sim stack under random goals, faults and hostile requests",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, required=True, help="wall-clock minutes to run (at least until every "
                                                                "kind of event happened once)")
    p.add_argument("--seed", type=int, default=0, help="seed of the event schedule (deterministic given it)")
    p.add_argument("--scene", default="cylinder_slider", choices=("cylinder_slider", "obstacle_push"),
                   help="scene of every node (default: cylinder_slider)")
    p.add_argument("--out", type=output_dir, default="out", help="directory for the JSON and the PNG (default: ./out)")
    p.add_argument("--json", type=output_file, default=None, help="JSON result file (default: <out>/soak.json)")
    p.add_argument("--status-period", type=float, default=10.0, help="seconds of wall time between status lines")
    p.add_argument("--robot", action="store_true", help="the robot launch under the real `ros2 launch`, each node "
                   "its own process on the system clock, against a stand-in cell (soak_robot.py's docstring)")
    p.add_argument("--control-duration", type=float, default=None,
                   help=f"s per planned control (default: 0.1 with --robot, {PLANNER_OVERRIDES['control_duration']} "
                        f"otherwise)")
    p.add_argument("--planner", default=None, choices=("fast", "mpc"),
                   help="with --robot: the planner of the stack (default: fast, re-planned every control; mpc: the "
                        "sampling MPC with controls of --control-duration; see soak_robot.planner_parameters)")
    p.add_argument("--fault-free", action="store_true",
                   help="with --robot: every goal without a fault (the push loop's goal rate alone, one start)")
    from .soak_seeds import add_arguments as seeds_arguments  # noqa: PLC0415
    seeds_arguments(p)
    p.set_defaults(func=run)
    return p


def run(args, context=None) -> dict:
    """Run the soak, write JSON and PNG, print the table; SystemExit naming what failed. With ``--seeds N``: the
    seeds as units of the study engine (``soak_seeds``)."""
    if not (math.isfinite(args.minutes) and args.minutes > 0.0):
        raise ValueError(f"--minutes: must be > 0, got {args.minutes}")
    if not args.status_period > 0.0:
        raise ValueError(f"--status-period: must be > 0, got {args.status_period}")
    dt = args.control_duration
    if dt is not None and not (math.isfinite(dt) and dt > 0.0):
        raise ValueError(f"--control-duration: must be > 0, got {dt}")
    if (args.planner is not None or args.fault_free) and not args.robot:
        raise ValueError("--planner and --fault-free: only with --robot")
    if args.robot and (args.planner or "fast") == "fast" and dt is not None:  # fast re-plans every control
        from ..core.config import ConfigError  # noqa: PLC0415
        from ..core.planning.fast_mpc import FastConfig  # noqa: PLC0415
        try:
            FastConfig(replan_rate=1.0 / dt)
        except ConfigError as e:
            raise ValueError(f"--control-duration: the fast planner re-plans every control: {e}") from None
    given = [f for f, v in (("--domain-id", args.domain_id), ("--cpus-per-seed", args.cpus_per_seed))
             if v is not None]
    if given and getattr(args, "seeds", None) is None:  # one soak runs in $ROS_DOMAIN_ID on the cores it has
        raise ValueError(f"{' and '.join(given)}: only with --seeds")
    if getattr(args, "seeds", None) is not None:
        from .soak_seeds import run_seeds  # noqa: PLC0415
        return run_seeds(args)
    if args.robot:
        from .soak_robot import run_robot_soak  # noqa: PLC0415
        summary = run_robot_soak(args.minutes, args.seed, args.scene, dt or 0.1, Path(args.out),
                                 Path(args.json) if args.json else None, args.planner or "fast", args.fault_free,
                                 own_process=getattr(args, "own_process", False))
        if summary["failures"]:
            raise SystemExit("parapush soak --robot: FAILED: " + "; ".join(summary["failures"]))
        return summary
    summary = run_soak(args.minutes, args.seed, args.scene, Path(args.out),
                       Path(args.json) if args.json else None, args.status_period, context=context,
                       control_duration=dt)
    if summary["failures"]:
        raise SystemExit("parapush soak: FAILED: " + "; ".join(summary["failures"]))
    return summary


def run_soak(minutes: float, seed: int, scene_name: str, out: Path, json_path: Path | None,
             status_period: float = 10.0, context=None, control_duration: float | None = None) -> dict:
    import rclpy  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from ..core.scene.spec import load_scene  # noqa: PLC0415
    from ..sim_runner import SimStack  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    json_path = json_path or out / "soak.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    planner = dict(PLANNER_OVERRIDES, **({"control_duration": control_duration} if control_duration else {}))
    counters = ExceptionCounters().install()
    try:
        stack = SimStack({"scene": scene_name, "model": "coarse"},
                         overrides={"mpc_planner": planner, "parareal_predictor": {"threads": 1}},
                         context=context)
        try:
            node = stack.add_node("parapush_soak", rclpy.create_node(
                "parapush_soak", context=stack.context, parameter_overrides=[Parameter("use_sim_time", value=True)]))
            soak = Soak(stack, node, load_scene(scene_name), seed, minutes, status_period)
            stack.start()
            try:
                soak.run()
            finally:
                soak.finish()
        finally:
            stack.shutdown()
    finally:
        counters.uninstall()
    summary = summarise(soak, counters, minutes, seed)
    summary["png"] = str(_plot(soak, summary, out / "soak.png"))
    from .bench.common import write_json  # noqa: PLC0415
    write_json(json_path, summary)
    _print_table(summary)
    return summary


def summarise(soak: Soak, counters: ExceptionCounters, minutes: float, seed: int) -> dict:
    """The run's JSON: what happened, what the monitor saw, and ``failures`` (empty when the soak passed)."""
    planner_settings = {**{k: soak.stack.parameters["mpc_planner"][k] for k in PLANNER_OVERRIDES}, "model": "coarse"}
    m = soak.monitor
    timed = [s for s in m.stops if "stop_time_s" in s]
    by_kind = _stops_by_kind(m.stops)
    spin = [repr(e)[:300] for e in _spin_errors(soak.stack)]
    exceptions = {"callbacks": spin, "threads": counters.threads, "unraisable": counters.unraisable,
                  "never_retrieved": counters.never_retrieved, "internal_errors": m.internal_errors}
    hostile_sent = {n: e for n, e in soak.hostile.items() if e["channel"] not in soak.publishers}
    hostile_msgs = {n: e["sent"] for n, e in soak.hostile.items() if e["channel"] in soak.publishers}
    rss_after = [r for r in soak.rss if r[0] >= max(RSS_WARMUP[0], RSS_WARMUP[1] * soak.wall_time)]
    rss_start = rss_after[0][2] if rss_after else soak.rss[0][2]
    rss_end = soak.rss[-1][2]
    own_nonfinite = sum(n for k, n in hostile_msgs.items() if k in ("pusher_cmd_nan", "pusher_cmd_inf"))
    summary = {
        "minutes": minutes, "seed": seed, "scene": soak.scene.name, "planner": planner_settings,
        "wall_time_s": round(soak.wall_time, 1), "startup_wall_s": round(soak.startup_wall, 1),
        "sim_time_s": round(soak.sim_time, 2), "real_time_factor": round(soak.sim_time / soak.wall_time, 3),
        "coverage_end_sim_s": round(soak.coverage_end, 1),
        "goals": dict(sorted(soak.outcomes.items())),
        "goal_list": [{k: v for k, v in g.items() if k != "handle"} for g in soak.goals.values()
                      if g["hostile"] is None],
        "events": dict(sorted(soak.events.items())),
        "unsafe_commands": len(m.unsafe["command"]), "unsafe_outputs": len(m.unsafe["output"]),
        "unsafe_details": {k: [dict(u, context=m.context(u["t"])) for u in v[:10]] for k, v in m.unsafe.items()},
        "reaction_allowance_s": soak.allowance,
        "worst_reaction_within_allowance_s": m.worst_reaction,
        "nonzero_while_state_bad": {"command": m.during_bad["command"], "output": m.during_bad["output"]},
        "commands": dict(m.commands), "outputs": dict(m.outputs),
        "nonfinite_from_planner": max(0, m.commands["nonfinite"] - own_nonfinite),
        "nonfinite_outputs": m.outputs["nonfinite"],
        "estop_leaks": len(m.estop_leaks),
        "max_stop_time_s": round(max((s["stop_time_s"] for s in timed), default=0.0), 4),
        "stops_without_zero": len(m.open_stops),  # the commander's output never went to zero after them
        "stop_events": {"count": len(timed), "by_kind": by_kind,
                        "list": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()}
                                 for s in m.stops]},
        "commander_status_changes": dict(m.commander_status),
        "exceptions": sum(len(v) for v in exceptions.values()),
        "exception_details": exceptions,
        "hostile_requests": {"count": sum(e["sent"] for e in hostile_sent.values()),
                             "refused": sum(e["refused"] for e in hostile_sent.values()),
                             "kinds": len(hostile_sent), "kinds_in_catalogue": sum(
                                 1 for h in soak.catalogue.values() if h.channel not in soak.publishers),
                             "by_kind": hostile_sent, "not_refused": soak.not_refused},
        "hostile_messages": {"count": sum(hostile_msgs.values()), "by_kind": hostile_msgs},
        "health_checks": {"sent": soak.health["sent"], "ok": soak.health["ok"]},
        "problems": soak.problems,
        "rss_start_mb": round(rss_start, 1), "rss_end_mb": round(rss_end, 1),
        "rss_growth_mb": round(rss_end - rss_start, 1),
        "rss_warmup_s": max(RSS_WARMUP[0], RSS_WARMUP[1] * soak.wall_time),
        "timeline": [[round(t, 3), label] for t, label in soak.timeline],
        "rss_samples": [[round(w, 1), round(s, 2), round(r, 1)] for w, s, r in soak.rss],
    }
    summary["failures"] = _failures(summary, soak)
    return summary


def _stops_by_kind(stops) -> dict:
    by_kind = {}
    for s in stops:
        k = by_kind.setdefault(s["kind"], {"count": 0, "timed": 0, "superseded": 0, "max_s": 0.0})
        k["count"] += 1
        k["timed"] += int("stop_time_s" in s)
        k["superseded"] += int("superseded" in s)
        if "stop_time_s" in s:
            k["max_s"] = max(k["max_s"], s["stop_time_s"])
    return by_kind


def _failures(summary: dict, soak: Soak) -> list:
    """Why the soak failed, one line per reason (empty: it passed)."""
    failures = []
    for key, what in (("unsafe_commands", "planner command(s) on a stale or invalid state"),
                      ("unsafe_outputs", "commander output(s) on a stale or invalid state"),
                      ("estop_leaks", "non-zero output(s) while e-stopped"),
                      ("nonfinite_from_planner", "non-finite planner command(s)"),
                      ("nonfinite_outputs", "non-finite commander output(s)"),
                      ("stops_without_zero", "stop event(s) after which the output never went to zero"),
                      ("exceptions", "exception(s)")):
        if summary[key]:
            failures.append(f"{summary[key]} {what} ({key})")
    h = summary["hostile_requests"]
    if h["refused"] < h["count"]:
        failures.append(f"{h['count'] - h['refused']} of {h['count']} hostile requests not refused properly: "
                        + "; ".join(soak.not_refused[:5]))
    if soak.problems:
        failures.append(f"{len(soak.problems)} problem(s): " + "; ".join(soak.problems[:5]))
    if soak.outcomes["unfinished"]:
        failures.append(f"{soak.outcomes['unfinished']} goal(s) without a result at the end")
    return failures


def _print_table(s: dict):
    from .bench.common import print_table  # noqa: PLC0415
    h, stops = s["hostile_requests"], s["stop_events"]
    rows = [("wall / sim time", f"{s['wall_time_s']:.0f} s / {s['sim_time_s']:.0f} s (x{s['real_time_factor']:.2f})"),
            ("goals", ", ".join(f"{k} {v}" for k, v in s["goals"].items())),
            ("events", sum(s["events"].values())),
            ("hostile requests refused", f"{h['refused']} / {h['count']} ({h['kinds']} kinds)"),
            ("hostile messages", s["hostile_messages"]["count"]),
            ("health checks ok", f"{s['health_checks']['ok']} / {s['health_checks']['sent']}"),
            ("unsafe commands / outputs", f"{s['unsafe_commands']} / {s['unsafe_outputs']}"),
            ("e-stop leaks", s["estop_leaks"]),
            ("max stop time", f"{s['max_stop_time_s']:.3f} s ({stops['count']} stops: " + ", ".join(
                f"{k} {v['timed']} max {v['max_s']:.3f} s" for k, v in stops["by_kind"].items()) + ")"),
            ("exceptions", s["exceptions"]),
            ("RSS start / end / growth",
             f"{s['rss_start_mb']:.0f} / {s['rss_end_mb']:.0f} / {s['rss_growth_mb']:+.1f} MB"),
            ("result", "FAILED" if s["failures"] else "ok")]
    print_table(["quantity", "value"], rows, title=f"parapush soak: {s['minutes']:g} min, seed {s['seed']}, "
                                                   f"scene {s['scene']}")
    for f in s["failures"]:
        print(f"  FAILED: {f}")


def _plot(soak: Soak, summary: dict, path: Path) -> Path:
    from .bench.common import pyplot, save_figure  # noqa: PLC0415
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(10, 7), gridspec_kw={"height_ratios": [1, 2]})
    ax1.plot([r[1] for r in soak.rss], [r[2] for r in soak.rss], "-", color="tab:blue")
    ax1.axvline(next((r[1] for r in soak.rss if r[0] >= summary["rss_warmup_s"]), 0.0), color="0.6", ls=":",
                label="end of warm-up")
    ax1.set_ylabel("RSS (MB)")
    ax1.legend(loc="lower right")
    labels = sorted({label for _, label in soak.timeline})
    for row, label in enumerate(labels):
        ts = [t for t, lab in soak.timeline if lab == label]
        ax2.plot(ts, [row] * len(ts), "|", ms=8)
    m = soak.monitor
    for s in m.stops:
        if "stop_time_s" in s:
            ax2.plot(s["t"] - soak.t0, -1, "v", color="tab:red" if s["stop_time_s"] > 0.3 else "tab:green", ms=4)
    ax2.set_yticks(range(-1, len(labels)), ["stop (red > 0.3 s)"] + labels, fontsize=7)
    ax2.set_xlabel("sim time (s)")
    ax1.set_title(f"parapush soak: seed {summary['seed']}, {summary['sim_time_s']:.0f} s sim, "
                  f"unsafe {summary['unsafe_commands']}, exceptions {summary['exceptions']}")
    save_figure(fig, path)
    return path
