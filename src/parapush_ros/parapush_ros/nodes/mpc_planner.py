"""``mpc_planner``: closed-loop push planning (paper 000 Sec. 3) behind a ``PushObject`` action.

Inputs: the scene state (``scene_state``), goals from the ``push_object`` action or from RViz's "2D Goal Pose"
(``/goal_pose``: with ``goal_pose_starts_push`` it starts a push of ``target_object`` to that pose, pre-empting
a running push; otherwise it only moves the goal of the running push, and is ignored when idle).

The push itself is the core's one push loop (``core.planning.session.PushSession``, run in the action's execute
thread, off the command timer's callback group); this node gives it its clock, the latest scene state and the
command timer (``NodeIO``). With ``realtime`` the planner plans while the pusher moves: during each control it
optimises the sequence that starts at the next switch, from the state predicted for it, until a deadline
``plan_margin`` before it; the timer sends the executing plan's control for the current time on ``pusher_cmd``
(TwistStamped, table frame, at ``control_rate``) without a gap, and a late plan takes over when it arrives (the
previous plan's next control runs meanwhile). Without it (stop and plan, as on the paper's robot) each control is
held for ``control_duration``, then zero is commanded while the planner re-plans from the newest state. Every plan
is published as a ``PushPlan`` stamped with the time its first control starts, a ``nav_msgs/Path`` of the target
and a ``MarkerArray`` (with ``realtime`` also the predicted start of the plan being computed, ns ``computing``);
feedback carries it with its latency and the late plans so far; ``planner/status`` says what it is doing. With a
model that predicts its variance (``learned_ensemble``) the plan carries it (``predicted_variance``), the markers
show it as ellipses of one sigma (ns ``plan/sigma``) and ``planner/status`` says when the plan enters a region where
an object's predicted position sigma exceeds ``uncertainty_threshold`` (and when it leaves it).

Planners (``planner``, the registry ``core.planning.planners``): ``mpc`` is the sampling MPC above; ``dgoc`` (paper
003) plans a goal *pose* (a yaw is required) once with DG-OC and tracks it at 100 Hz (``core.planning.dgoc_session``:
the same action, arbiter, pauses and outcomes; the command timer runs at 100 Hz), publishing the plan as
``PushPlan``, Path and markers of the pushed faces and face switches; its settings are ``dgoc.<name>``; ``alg2``
(paper 004 Algorithm 2, ``core.planning.low_uncertainty``) first plans a low-uncertainty path against a heat-map of
``alg2.heat_model``'s variance, then the MPC above tracks it way-point by way-point (without an uncertainty term),
the path shown as markers (ns ``plan/waypoints``); its settings are ``alg2.<name>``.

Lifecycle (``rclpy.lifecycle``): constructed, it only checks its parameters; ``configure`` creates its topics,
timer and action server, ``activate`` lets it publish and accept goals (the launch files and ``parapush sim`` do
both); unconfigured or inactive it publishes nothing and refuses goals; ``deactivate`` ends a running push (zero
sent) first.

Safety: a stale (older than ``state_timeout`` since reception) or invalid (tracking lost, NaN, unknown objects)
scene state makes it publish a zero twist at once and pause: the push resumes, re-planned from the fresh state,
when a valid state comes back within ``tracking_loss_timeout`` (a mocap dropout), and fails otherwise. A planning
failure, a cancel, a pre-emption or the end of the task publish a zero twist at once and report the outcome;
zeros keep coming for ``stop_hold`` seconds. A non-finite command is never sent.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from collections import deque

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path
from parapush_msgs.action import PushObject
from parapush_msgs.msg import PushPlan, SceneState
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode
from rclpy.time import Time
from std_msgs.msg import Header, String
from visualization_msgs.msg import MarkerArray

from ..ros import markers, qos, topics
from ..ros.conversions import (ConversionError, array_to_scene_state, array_to_state_variance, arrays_to_controls,
                               scene_state_to_array)
from ..core.planning.planner import MPCPlanner, PlannerConfig
from ..core.planning.planners import planner_entry
from ..core.planning.low_uncertainty import LowUncertaintyConfig, LowUncertaintySession
from ..core.planning.dgoc_session import DGOCConfig, DGOCPlanReport, DGOCPushPlanner, DGOCSession, DGOCSessionConfig
from ..core.planning.ddp.tracking import TrackingConfig
from ..core.config import ConfigError, from_values
from ..core.planning.outcome import MAX_ACTIONS_LIMIT, Outcome
from ..core.planning.session import (ControlSchedule, Observation, PlanReport, PushArbiter, PushSession,
                                     SessionConfig, SessionResult)
from ..core.models.base import UncertainPropagator
from ..core.models.registry import ModelSpec, Predictor
from ..core.scene.spec import load_scene
from ..core.scene.state import yaw_from_quaternion
from ..core.planning.tasks import CostWeights, PushTask, goal_for
from ..ros.params import PLANNER, declare_all
from ..ros.node import ManagedEntities, node_main, transition

DGOC_MARKER_STRIDE = 25  # a DG-OC plan (one state per 20 ms) shows the slider every 0.5 s
SEEN_STATES = 10_000  # received states kept for the outcome monitor between two judgements (100 s at 100 Hz)
CLOCK_STALL_S = 10.0  # s of wall time the node clock may stand still before a wait on it gives up (/clock died)
RESULT_CODES = {Outcome.REACHED: PushObject.Result.REACHED, Outcome.HIT_OBSTACLE: PushObject.Result.HIT_OBSTACLE,
                Outcome.OFF_TABLE: PushObject.Result.OFF_TABLE, Outcome.TIMEOUT: PushObject.Result.TIMEOUT,
                Outcome.OTHER_IN_GOAL: PushObject.Result.OTHER_IN_GOAL,
                Outcome.ABORTED: PushObject.Result.ABORTED, Outcome.FAILED: PushObject.Result.FAILED}


class NodeIO:
    """The push loop's world on this node (``core.planning.session.PushIO``): the node clock (simulated time under
    use_sim_time), the latest ``scene_state``, the command timer, and the plan and status publishers."""

    def __init__(self, node: MPCPlannerNode):
        self.node = node

    def now_ns(self) -> int:
        return self.node.get_clock().now().nanoseconds

    def now(self) -> float:
        return self.now_ns() * 1e-9

    plan_clock = now  # planning is timed on the node clock: a deadline is a time on the clock the pusher runs on

    def observe(self) -> Observation:
        return self.node._observation()

    def execute(self, schedule: ControlSchedule | None):
        self.node._set_schedule(schedule)

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
        return self.node._take_seen_states()

    def report_plan(self, report: PlanReport):
        self.node._publish_plan(report)

    def report_computing(self, start: float, x_start: np.ndarray):
        self.node._publish_computing(start, x_start)

    def report_status(self, text: str, level: str = "info"):
        self.node._set_status(text)
        if level == "warning":
            self.node.get_logger().warning(text, throttle_duration_sec=1.0)


class MPCPlannerNode(ManagedEntities, LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("mpc_planner", **kwargs)
        self.p = declare_all(self, PLANNER)
        p = self.p
        self.scene = load_scene(p["scene"])
        self.config = self._planner_config()
        weights = CostWeights.from_mapping({k[len("weights."):]: v for k, v in p.items() if k.startswith("weights.")},
                                           source="parameters weights.*")
        if not (math.isfinite(p["control_rate"]) and p["control_rate"] > 0.0):
            raise ValueError(f"parameter control_rate: must be finite and > 0, got {p['control_rate']}")
        for name in ("stop_hold", "position_tolerance", "uncertainty_threshold"):
            if not (math.isfinite(p[name]) and p[name] >= 0.0):
                raise ValueError(f"parameter {name}: must be finite and >= 0, got {p[name]}")
        try:  # the push loop's settings, checked once here: a goal never finds a bad one
            self.session_config = from_values(SessionConfig, p)
        except ConfigError as e:
            raise ValueError(f"parameter {e}") from None
        self._sessions = {}  # goal id -> its push, from acceptance (it may wait for its turn) to its end
        self.target_name = p["target_object"] or (self.scene.goal.object if self.scene.goal else
                                                  self.scene.objects[0].name)
        self.scene.object_index(self.target_name)  # raises naming the scene's objects
        try:
            self.kind = planner_entry(p["planner"])
        except ConfigError as e:
            raise ValueError(f"parameter {e}") from None
        self.predictor = self.planner = self.dgoc = None
        self.control_rate = p["control_rate"]
        if self.kind.name == "dgoc":  # DG-OC (paper 003): its own planner and settings; no predictor
            try:
                self.dgoc_config = from_values(DGOCConfig, p, "dgoc.")
                self.dgoc = DGOCPushPlanner(self.scene, self.dgoc_config)
            except ConfigError as e:
                raise ValueError(f"parameter {e if e.name.startswith('dgoc.') else e.within('dgoc.')}") from None
            self.dgoc.planner(self.scene.object_index(self.target_name))  # a box (ValueError naming it otherwise)
            self.control_rate = max(self.control_rate, TrackingConfig().rate_hz)  # the tracker's commands go out
        else:
            self.predictor = Predictor.from_parameters(self.scene, p)
            goal = goal_for(self.scene, self.target_name, position=self._default_goal_xy())
            self.planner = MPCPlanner(self.scene, self.config, task=PushTask(self.scene, weights, goal),
                                      predictor=self.predictor)
        self.alg2_config = None
        if self.kind.name == "alg2":  # Algorithm 2 (paper 004): the MPC above tracks a low-uncertainty path
            try:
                self.alg2_config = from_values(LowUncertaintyConfig, p, "alg2.")
            except ConfigError as e:
                raise ValueError(f"parameter {e if e.name.startswith('alg2.') else e.within('alg2.')}") from None
            if self.config.optimiser == "mppi_ua":
                raise ValueError("parameter optimiser: the alg2 planner tracks its path without the uncertainty "
                                 "term: use mppi (Algorithm 1), not mppi_ua")
            heat = self.alg2_config.heat_model
            try:
                heat_model = self.predictor.model(heat)
            except (KeyError, ValueError) as e:
                raise ValueError(f"parameter alg2.heat_model: {e}") from None
            if not isinstance(heat_model, UncertainPropagator):
                raise ValueError(f"parameter alg2.heat_model: model {heat!r} predicts no variance; use one that "
                                 f"does (learned_ensemble)")

        self._lock = threading.Lock()
        self._state = None  # (x or None, error message or "", receive time (rclpy Time), stamp (rclpy Time))
        self._seen = deque(maxlen=SEEN_STATES)  # valid states received since the push loop last judged
        self.io = NodeIO(self)
        self.arbiter = PushArbiter()  # one push at a time, the newest wins
        self._schedule: ControlSchedule | None = None  # what the command timer sends while a push runs
        # held while a command is chosen and published, and while a stop takes effect: a timer tick that read the
        # schedule before a stop cannot publish after the stop's zero (a stop is final)
        self._cmd_lock = threading.Lock()
        self._last_tick_ns: int | None = None  # the timer's previous clock reading (a clock stepped back: zero)
        self._zero_until = None  # rclpy Time until which zeros are sent after a stop
        self._uncertain_in = None  # the push whose last plan's predicted sigma exceeded uncertainty_threshold

        self._active = False
        self._entities = []  # what configure created and cleanup destroys: (destroy function, entity)
        self.cmd_pub = self.path_pub = self.marker_pub = self.plan_pub = self.status_pub = None
        self._status = ""

    # ----------------------------------------------------------------------------------------------- lifecycle
    @transition
    def on_configure(self, state):
        """Topics, timer and action server; every publisher is a lifecycle one, silent until activate."""
        pubs = [(TwistStamped, topics.PUSHER_CMD, qos.RELIABLE), (Path, topics.PLAN_PATH, qos.LATCHED),
                (MarkerArray, topics.PLAN_MARKERS, qos.LATCHED), (PushPlan, topics.PLAN, qos.RELIABLE),
                (String, topics.PLANNER_STATUS, qos.LATCHED)]
        self.cmd_pub, self.path_pub, self.marker_pub, self.plan_pub, self.status_pub = [
            self.create_lifecycle_publisher(*args) for args in pubs]
        io = ReentrantCallbackGroup()
        self.state_sub = self.create_subscription(SceneState, topics.SCENE_STATE, self._on_state, qos.RELIABLE,
                                                  callback_group=io)
        self.action = ActionServer(self, PushObject, topics.PUSH_ACTION, execute_callback=self._execute,
                                   goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                                   callback_group=ReentrantCallbackGroup())
        self._entities = [(self.destroy_lifecycle_publisher, pub) for pub in (
            self.cmd_pub, self.path_pub, self.marker_pub, self.plan_pub, self.status_pub)] + [
            (self.destroy_subscription, self.state_sub),
            (self.destroy_subscription, self.create_subscription(PoseStamped, topics.GOAL_POSE, self._on_goal_pose,
                                                                 10, callback_group=io)),
            (self.destroy_timer, self.create_timer(1.0 / self.control_rate, self._on_timer,
                                                   callback_group=MutuallyExclusiveCallbackGroup())),
            (lambda action: action.destroy(), self.action)]
        self.get_logger().info("configured: silent until activate")

    @transition
    def on_activate(self, state):
        ret = super().on_activate(state)  # enables the publishers
        self._active = True
        self._set_status(f"idle: scene {self.scene.name!r}, " + (
            f"model {self.config.model}, {self.config.optimiser} optimiser" if self.dgoc is None else
            f"planner dgoc ({self.dgoc_config.method}-DDP from {len(self.dgoc.demos)} demonstrations, tracked at "
            f"{TrackingConfig().rate_hz:g} Hz)") + f", target {self.target_name!r}")
        self.get_logger().info(f"active: {self._status}")
        return ret

    @transition
    def on_deactivate(self, state):
        """End a running push (the pusher stopped, zero sent), then go silent; goals are refused until activate."""
        self._active = False
        if not self.stop_activity(5.0, "planner deactivated"):
            self.get_logger().error("deactivate: the running push did not end within 5 s")
        ret = super().on_deactivate(state)
        self.get_logger().info("inactive: zero sent, silent")
        return ret

    def _forget(self):
        self.cmd_pub = self.path_pub = self.marker_pub = self.plan_pub = self.status_pub = None

    def _on_goal(self, goal):
        if not self._active:
            self.get_logger().warning("push_object goal refused: the planner is not active")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _planner_config(self) -> PlannerConfig:
        """The planner's settings, checked by ``PlannerConfig`` itself (errors name the parameter); the model is
        parsed once, with the coarse and fine models it uses, and travels as a ``ModelSpec``."""
        p = self.p
        try:
            model = ModelSpec.parse(p["model"], coarse=p["coarse_model"], fine=p["fine_model"])
        except ValueError as e:
            raise ValueError(f"parameter {e}" if str(e).startswith(("coarse_model", "fine_model"))
                             else f"parameter model: {e}") from None
        try:
            return PlannerConfig.from_values({**p, "model": model})
        except ConfigError as e:
            raise ValueError(f"parameter {e}") from None

    def _default_goal_xy(self):
        g = self.scene.goal
        return g.position if g is not None else self.scene.objects[self.scene.object_index(self.target_name)].pose[:2]

    def stop_activity(self, timeout: float = 5.0, reason: str = "planner shutting down") -> bool:
        """Abort a running push, send zero, and wait (bounded, wall time) until its loop has reported and left:
        nothing of this node runs after it. False if the loop is still running at ``timeout``."""
        self.arbiter.stop_all(Outcome.ABORTED, reason)
        self._send_zero()
        return self.arbiter.wait_idle(timeout)

    def destroy_node(self):
        self.stop_activity()
        if self.predictor is not None:
            self.predictor.close()
        super().destroy_node()

    # ----------------------------------------------------------------------------------------------- inputs
    def _on_state(self, msg: SceneState):
        now = self.get_clock().now()
        try:
            x, err = scene_state_to_array(msg, self.scene, require_valid=True, field="scene_state"), ""
        except ConversionError as e:
            x, err = None, f"invalid scene state: {e}"
        with self._lock:
            self._state = (x, err, now, Time.from_msg(msg.header.stamp, clock_type=now.clock_type))
            if x is not None:
                self._seen.append(x)

    def _state_problem(self) -> str:
        """Why the latest state must not be acted on ('' when it is fine)."""
        with self._lock:
            st = self._state
        if st is None:
            return f"no scene state received on {self.state_sub.topic_name}"
        _x, err, t, _ = st
        age = (self.get_clock().now() - t).nanoseconds * 1e-9
        if age > self.p["state_timeout"]:
            return f"stale scene state: last one {age:.2f} s ago (state_timeout {self.p['state_timeout']} s)"
        return err

    def _observation(self) -> Observation:
        problem = self._state_problem()
        with self._lock:
            st = self._state
        if st is None:
            return Observation(None, None, problem)
        return Observation(st[0], st[3].nanoseconds, problem)

    def _take_seen_states(self) -> np.ndarray:
        """Every valid state received since the last call (the newest alone if none came meanwhile)."""
        with self._lock:
            seen, latest = list(self._seen), (None if self._state is None else self._state[0])
            self._seen.clear()
        if not seen and latest is not None:
            seen = [latest]
        return np.array(seen).reshape(-1, self.scene.layout.dim)

    def _on_goal_pose(self, msg: PoseStamped):
        if not self._active:
            return
        frame = msg.header.frame_id
        if frame not in ("", self.p["frame_id"]):
            self.get_logger().warning(f"/goal_pose in frame {frame!r} ignored: expected {self.p['frame_id']!r}")
            return
        q = msg.pose.orientation
        yaw = yaw_from_quaternion((q.x, q.y, q.z, q.w))
        req = PushObject.Goal(target_object=self.target_name, goal_x=float(msg.pose.position.x),
                              goal_y=float(msg.pose.position.y), goal_yaw=float(yaw),
                              yaw_tolerance=-1.0 if self.dgoc is None else self.dgoc_config.yaw_tolerance)
        if self.p["goal_pose_starts_push"]:
            threading.Thread(target=self._run_push, args=(req, None), name="mpc-goal-pose", daemon=True).start()
            return
        session = self.arbiter.current
        if session is None:
            self.get_logger().info("/goal_pose ignored: no push running (goal_pose_starts_push is false)")
            return
        try:
            session.set_goal(self._goal_of(req))
        except ValueError as e:
            self.get_logger().warning(f"/goal_pose ignored: {e}")

    def _on_cancel(self, goal_handle):
        """Stop the goal's push, whether it runs or still waits for the one it pre-empts to end."""
        session = self._sessions.get(bytes(goal_handle.goal_id.uuid))
        if session is not None:
            session.stop(Outcome.ABORTED, "cancelled by the client")
            if session is self.arbiter.current:
                self._send_zero()
        return CancelResponse.ACCEPT

    # ----------------------------------------------------------------------------------------------- commands
    def _on_timer(self):
        """The pusher command: what the push loop's schedule says now, zeros while a push runs without one, and
        zeros for ``stop_hold`` after a stop. A stale or invalid state stops the pusher here at once (the push
        loop then pauses or fails)."""
        with self._cmd_lock:
            now = self.get_clock().now()
            last, self._last_tick_ns = self._last_tick_ns, now.nanoseconds
            session, schedule = self.arbiter.current, self._schedule
            if session is not None:
                stepped_back = last is not None and now.nanoseconds < last  # the push loop pauses and says why
                if schedule is not None and (session.stopping or stepped_back or self._state_problem()):
                    self._schedule = schedule = None
                self._publish_twist(np.zeros(2) if schedule is None else schedule.at_ns(now.nanoseconds))
                return
            if self._zero_until is not None and now < self._zero_until:
                self._publish_twist(np.zeros(2))

    def _publish_twist(self, u):
        u = np.asarray(u, dtype=float)
        if not np.all(np.isfinite(u)):  # never command NaN: stop instead
            u = np.zeros(2)
        msg = TwistStamped()
        msg.header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.p["frame_id"])
        msg.twist.linear.x, msg.twist.linear.y = float(u[0]), float(u[1])
        self._publish(self.cmd_pub, msg)

    @staticmethod
    def _publish(pub, msg):
        """Publish on a lifecycle publisher: silent unless configured and active."""
        if pub is not None:
            pub.publish(msg)

    def _set_schedule(self, schedule: ControlSchedule | None, hold: bool = False):
        """The push loop's schedule for the timer; None: zero at once (with ``hold``, and from the timer for
        ``stop_hold`` seconds). Under the command lock, so that the zero of a stop is published after any tick
        that read the schedule before it."""
        with self._cmd_lock:
            self._schedule = schedule
            if hold:
                self._zero_until = self.get_clock().now() + Duration(seconds=self.p["stop_hold"])
            if schedule is None:
                self._publish_twist(np.zeros(2))

    def _send_zero(self):
        """Zero velocity at once, and from the timer for ``stop_hold`` seconds; no tick publishes after it what it
        read before."""
        self._set_schedule(None, hold=True)

    # ----------------------------------------------------------------------------------------------- the push
    def _goal_of(self, req):
        tol = req.position_tolerance if req.position_tolerance > 0.0 else (self.p["position_tolerance"] or None)
        for name in ("goal_x", "goal_y", "goal_yaw", "position_tolerance", "yaw_tolerance"):
            if not math.isfinite(getattr(req, name)):
                raise ValueError(f"goal.{name}: not finite ({getattr(req, name)})")
        if req.max_actions > MAX_ACTIONS_LIMIT:
            raise ValueError(f"goal.max_actions: {req.max_actions} is above the limit of {MAX_ACTIONS_LIMIT}")
        name = req.target_object or self.target_name
        try:
            index = self.scene.object_index(name)
        except KeyError as e:
            raise ValueError(f"goal.target_object: {e.args[0]}") from None
        yaw_tol = req.yaw_tolerance
        if self.scene.objects[index].shape == "cylinder":
            yaw_tol = -1.0  # a cylinder's yaw cannot be seen (nor planned for)
        elif yaw_tol == 0.0:
            raise ValueError("goal.yaw_tolerance: 0 rad cannot be met; give a positive tolerance, or a negative "
                             "one to ignore the yaw")
        if self.kind.needs_yaw and yaw_tol < 0.0:
            raise ValueError(f"goal.yaw_tolerance: the {self.kind.name} planner pushes to a goal pose: give a yaw "
                             f"and a yaw tolerance > 0 (got {req.yaw_tolerance})")
        return goal_for(self.scene, name, (req.goal_x, req.goal_y), tol, req.goal_yaw, yaw_tol)

    def _execute(self, goal_handle):
        return self._run_push(goal_handle.request, goal_handle)

    def _run_push(self, req, goal_handle):
        """Run one push to the end; returns the PushObject result (and finishes the action goal, if any)."""
        try:
            goal = self._goal_of(req)
            if self.dgoc is not None:
                self.dgoc.planner(goal.object_index)  # DG-OC pushes boxes: ValueError naming the object
        except ValueError as e:
            self.arbiter.preempt()  # a new goal, even a bad one, ends the running push
            res = SessionResult(Outcome.FAILED, f"invalid goal: {e}", 0, float("nan"))
        else:
            try:
                session = self._session(goal, req)
                session.tag = goal_handle
                if goal_handle is not None:
                    self._sessions[bytes(goal_handle.goal_id.uuid)] = session
                run = self.arbiter.enter(session)  # pre-empts the running push; waits for it to stop the pusher
                with self._lock:
                    self._seen.clear()
                res = run()
            except Exception as e:  # noqa: BLE001 - whatever happens, stop the pusher and report it
                self.get_logger().error(f"push failed: {e!r}")
                res = SessionResult(Outcome.FAILED, f"internal error: {e!r}", 0, float("nan"))
            finally:
                if goal_handle is not None:
                    self._sessions.pop(bytes(goal_handle.goal_id.uuid), None)
                self._send_zero()
        outcome, dist = res.outcome, res.distance
        result = PushObject.Result(outcome=RESULT_CODES[outcome], message=f"{outcome.value}: {res.reason}",
                                   actions_executed=int(res.actions),
                                   final_distance=float(dist) if math.isfinite(dist) else -1.0,
                                   mean_planning_time=float(np.mean([_plan_time(r) for r in res.plans]))
                                   if res.plans else 0.0)
        if goal_handle is not None:
            if outcome is Outcome.REACHED:
                goal_handle.succeed()
            elif outcome is Outcome.ABORTED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
        self._set_status(result.message)
        if outcome is Outcome.REACHED:
            self.get_logger().info(result.message)
        else:
            self.get_logger().warning(result.message)
        return result

    def _session(self, goal, req):
        """The push loop of the chosen planner (``planner`` parameter) for one goal."""
        p = self.p
        if self.dgoc is not None:
            c = self.dgoc_config
            return DGOCSession(self.dgoc, self.io, goal, DGOCSessionConfig(
                max_plans=req.max_actions or c.max_plans, state_timeout=p["state_timeout"],
                tracking_loss_timeout=p["tracking_loss_timeout"], rest_s=c.rest_s, hold=c.hold, max_speed=c.max_speed))
        config = replace(self.session_config, max_actions=req.max_actions or self.session_config.max_actions)
        if self.alg2_config is not None:
            return LowUncertaintySession(self.planner, self.io, goal, config, self.alg2_config)
        return PushSession(self.planner, self.io, goal, config)

    def _publish_plan(self, report: PlanReport):
        """The plan handed to the pusher: ``PushPlan`` stamped with the time its first control starts, feedback,
        and the predicted path and markers for RViz."""
        if isinstance(report, DGOCPlanReport):
            return self._publish_dgoc_plan(report)
        plan, goal = report.plan, report.goal
        header = Header(stamp=Time(nanoseconds=report.start_ns).to_msg(), frame_id=self.p["frame_id"])
        spec = plan.spec  # the model that made this plan, resolved
        dt = self.config.sampling.control_duration
        variance = plan.variance  # None unless the model predicts one: then the message's list stays empty
        msg = PushPlan(header=header, controls=arrays_to_controls(plan.controls, dt),
                       predicted_states=[array_to_scene_state(s, self.scene, header) for s in plan.states[1:]],
                       predicted_variance=[] if variance is None else
                       [array_to_state_variance(v, self.scene) for v in variance[1:]],
                       cost=float(plan.cost), model=spec.message_name,
                       parareal_iterations=int(spec.iterations or 0), solve_time=float(plan.plan_time))
        self._publish(self.plan_pub, msg)
        ms = [markers.delete_all(header)] + markers.scene_markers(self.scene, header, (goal.position, goal.radius))
        ms += markers.trajectory_markers(self.scene, plan.states, header, "plan")
        if variance is not None:
            ms += markers.uncertainty_markers(self.scene, plan.states, variance, header, "plan")
            self._report_uncertainty(plan)
        session = self.arbiter.current
        if isinstance(session, LowUncertaintySession) and session.tracker is not None:
            ms += markers.waypoint_markers(session.tracker.path, header, "plan/waypoints", session.tracker.index)
        self._publish(self.marker_pub, markers.marker_array(ms))
        self._publish(self.path_pub, markers.object_path(self.scene, plan.states, header, goal.object_index))
        handle = None if session is None else session.tag
        if handle is not None:
            dist = report.distance if math.isfinite(report.distance) else -1.0
            handle.publish_feedback(PushObject.Feedback(distance_to_goal=float(dist), step=int(report.step),
                                                        latest_plan=msg, plan_latency=float(report.latency),
                                                        late_plans=int(report.late_plans)))

    def _publish_dgoc_plan(self, report: DGOCPlanReport):
        """A DG-OC plan: ``PushPlan`` (the pusher velocities at the plan's step and the model's states), the slider's
        path, and markers of the slider along it, the pushed faces and the face switches."""
        plan, goal = report.plan, report.goal
        header = Header(stamp=Time(nanoseconds=int(round(report.start * 1e9))).to_msg(), frame_id=self.p["frame_id"])
        msg = PushPlan(header=header, controls=arrays_to_controls(plan.X[1:, 5:7], plan.dt),
                       predicted_states=[array_to_scene_state(s, self.scene, header) for s in report.states[1:]],
                       cost=float(np.sum(plan.final_error)), model=f"quasistatic ({plan.kind}, {plan.method}-DDP)",
                       parareal_iterations=0, solve_time=float(plan.solve_time))
        self._publish(self.plan_pub, msg)
        shown = report.states[::DGOC_MARKER_STRIDE]
        ms = [markers.delete_all(header)] + markers.scene_markers(self.scene, header, (goal.position, goal.radius))
        ms += markers.trajectory_markers(self.scene, np.vstack([shown, report.states[-1:]]), header, "plan")
        ms += markers.contact_face_markers(self.scene, report.states, plan.faces, header, goal.object_index,
                                           dt=plan.dt)
        self._publish(self.marker_pub, markers.marker_array(ms))
        self._publish(self.path_pub, markers.object_path(self.scene, report.states, header, goal.object_index))
        session = self.arbiter.current
        handle = None if session is None else session.tag
        if handle is not None:
            dist = report.distance if math.isfinite(report.distance) else -1.0
            handle.publish_feedback(PushObject.Feedback(distance_to_goal=float(dist), step=int(report.step),
                                                        latest_plan=msg, plan_latency=float(report.latency),
                                                        late_plans=0))

    def _report_uncertainty(self, plan):
        """``planner/status`` (and a warning) when the plan's predicted position sigma of an object exceeds
        ``uncertainty_threshold``, and again when the planner leaves the uncertain region (within the same push:
        a new push starts certain). Called on the push's own thread."""
        threshold = self.p["uncertainty_threshold"]
        session = self.arbiter.current
        sigma = self.scene.layout.object_position_sigma(plan.variance)  # (N+1, n_objects)
        step, k = np.unravel_index(int(np.argmax(sigma)), sigma.shape)
        uncertain = threshold > 0.0 and sigma[step, k] > threshold
        if uncertain:
            text = (f"uncertain region: predicted position sigma {1e3 * sigma[step, k]:.1f} mm of "
                    f"{self.scene.objects[k].name!r} at step {step} > uncertainty_threshold {1e3 * threshold:.1f} mm")
            self._set_status(text)
            self.get_logger().warning(text, throttle_duration_sec=1.0)
        elif session is not None and self._uncertain_in is session:
            self._set_status(f"certain again: predicted position sigma <= {1e3 * sigma.max():.1f} mm "
                             f"(uncertainty_threshold {1e3 * threshold:.1f} mm)")
        self._uncertain_in = session if uncertain else None

    def _publish_computing(self, start: float, x_start: np.ndarray):
        """Real time: where the plan being computed starts (the state predicted for the next switch), faint, beside
        the plan being executed."""
        header = Header(stamp=Time(nanoseconds=int(round(start * 1e9))).to_msg(), frame_id=self.p["frame_id"])
        ms = markers.trajectory_markers(self.scene, np.stack([x_start, x_start]), header, "computing", alpha=0.35)
        self._publish(self.marker_pub, markers.marker_array(ms))

    def _set_status(self, text: str):
        self._status = text
        self._publish(self.status_pub, String(data=text))


def _plan_time(report) -> float:
    """Planning time of a reported plan (s): the MPC's optimiser time, DG-OC's solve time."""
    return report.plan.solve_time if isinstance(report, DGOCPlanReport) else report.plan.plan_time


main = node_main(MPCPlannerNode, num_threads=4)
