"""``mpc_planner``: closed-loop push planning (paper 000 Sec. 3) behind a ``PushObject`` action, with the planner
chosen by ``planner`` (the registry ``core.planning.planners``: ``mpc``, ``alg2``, ``dgoc``, ``straight``, ...).

Inputs: the scene state (``scene_state``), goals from the ``push_object`` action or from RViz's "2D Goal Pose"
(``/goal_pose``: with ``goal_pose_starts_push`` it starts a push of ``target_object`` to that pose, pre-empting
a running push; otherwise it only moves the goal of the running push, and is ignored when idle).

The push itself is the core's one push loop (``core.planning.session.PushSession``, run in the action's execute
thread, off the command timer's callback group) with the strategy the registry entry built; this node gives it its
clock, the latest scene state and the command timer (``NodeIO``), and knows no planner in particular. The timer
sends the push's schedule for the current time on ``pusher_cmd`` (TwistStamped, table frame, at ``control_rate``,
or faster where the planner needs it: DG-OC's 100 Hz tracker). Every plan is published from the strategy's
``PlanView`` as a ``PushPlan`` stamped with the time its first command starts (with the predicted variance when the
model has one), a ``nav_msgs/Path`` of the target and a ``MarkerArray`` (predicted states, one-sigma ellipses ns
``plan/sigma``, DG-OC's pushed faces, Algorithm 2's way-points ns ``plan/waypoints``; with ``realtime`` also the
predicted start of the plan being computed, ns ``computing``); feedback carries it with its latency and the late
plans so far; ``planner/status`` says what the push is doing (an uncertain region: ``uncertainty_threshold``).

Lifecycle (``rclpy.lifecycle``): constructed, it only checks its parameters and builds its planner; ``configure``
creates its topics, timer and action server, ``activate`` lets it publish and accept goals; unconfigured or inactive
it publishes nothing and refuses goals; ``deactivate`` ends a running push (zero sent) first.

Safety (the push loop's, for every planner): a stale (older than ``state_timeout`` since reception) or invalid
scene state, a clock jump, a stamp further than ``max_clock_offset`` from the node's clock or a start deeper than
``max_start_penetration`` makes it publish a zero twist at once and pause: the push resumes, re-planned, when a valid
state comes back within ``tracking_loss_timeout``, and fails otherwise. A planning failure, a cancel, a pre-emption
or the end of the task publish a zero twist at once and report the outcome; zeros keep coming for ``stop_hold``
seconds. A non-finite command is never sent.
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
from ..core.config import ConfigError, from_values
from ..core.planning.goal_policy import default_target, request_goal
from ..core.planning.outcome import Outcome
from ..core.planning.planners import planner_entry
from ..core.planning.session import (ControlSchedule, Observation, PlanView, PushArbiter, PushSession, SessionConfig,
                                     SessionResult)
from ..core.scene.spec import load_scene
from ..core.scene.state import yaw_from_quaternion
from ..ros.params import PLANNER, declare_all
from ..ros.node import ManagedEntities, node_main, transition

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

    def report_plan(self, report):
        self.node._publish_plan(self.node.strategy.plan_view(report))

    def report_computing(self, start: float, x_start: np.ndarray):
        self.node._publish_computing(start, x_start)

    def report_status(self, text: str, level: str = "info"):
        self.node._set_status(text)
        if level == "warning":
            self.node.get_logger().warning(text, throttle_duration_sec=1.0)


class MPCPlannerNode(ManagedEntities, LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("mpc_planner", **kwargs)
        self.p = p = declare_all(self, PLANNER)
        self.scene = load_scene(p["scene"])
        if not (math.isfinite(p["control_rate"]) and p["control_rate"] > 0.0):
            raise ValueError(f"parameter control_rate: must be finite and > 0, got {p['control_rate']}")
        for name in ("stop_hold", "position_tolerance", "uncertainty_threshold"):
            if not (math.isfinite(p[name]) and p[name] >= 0.0):
                raise ValueError(f"parameter {name}: must be finite and >= 0, got {p[name]}")
        try:  # the push loop's settings, checked once here: a goal never finds a bad one
            self.session_config = from_values(SessionConfig, p)
            self.kind = planner_entry(p["planner"])
        except ConfigError as e:
            raise ValueError(f"parameter {e}") from None
        self._sessions = {}  # goal id -> its push, from acceptance (it may wait for its turn) to its end
        self.target_name = default_target(self.scene, p["target_object"])  # raises naming the scene's objects
        self.strategy = self.kind.build(self.scene, p)  # the planner: ValueError naming a bad parameter
        self.control_rate = max(p["control_rate"], self.strategy.command_rate)

        self._lock = threading.Lock()
        self._state = None  # (x or None, error message or "", receive time (rclpy Time), stamp (rclpy Time))
        self._seen = deque(maxlen=SEEN_STATES)  # valid states received since the push loop last judged
        self.io = NodeIO(self)
        self.arbiter = PushArbiter()  # one push at a time, the newest wins
        self._schedule: ControlSchedule | None = None  # what the command timer sends while a push runs
        # held while a command is chosen and published, and while a stop takes effect: a timer tick that read the
        # schedule before a stop cannot publish after the stop's zero (stop is final)
        self._cmd_lock = threading.Lock()
        self._last_tick_ns: int | None = None  # the timer's previous clock reading (a clock stepped back: zero)
        self._zero_until = None  # rclpy Time until which zeros are sent after a stop

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
        self._set_status(f"idle: scene {self.scene.name!r}, {self.strategy.describe()}, target {self.target_name!r}")
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

    def stop_activity(self, timeout: float = 5.0, reason: str = "planner shutting down") -> bool:
        """Abort a running push, send zero, and wait (bounded, wall time) until its loop has reported and left:
        nothing of this node runs after it. False if the loop is still running at ``timeout``."""
        self.arbiter.stop_all(Outcome.ABORTED, reason)
        self._send_zero()
        return self.arbiter.wait_idle(timeout)

    def destroy_node(self):
        self.stop_activity()
        self.strategy.close()
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
        q, yaw_tol = msg.pose.orientation, self.strategy.goal_yaw_tolerance
        req = PushObject.Goal(target_object=self.target_name, goal_x=float(msg.pose.position.x),
                              goal_y=float(msg.pose.position.y), yaw_tolerance=yaw_tol,
                              goal_yaw=float(yaw_from_quaternion((q.x, q.y, q.z, q.w))))
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
        return request_goal(self.scene, req, self.target_name, self.p["position_tolerance"], self.kind.needs_yaw,
                            self.kind.name)

    def _execute(self, goal_handle):
        return self._run_push(goal_handle.request, goal_handle)

    def _run_push(self, req, goal_handle):
        """Run one push to the end; returns the PushObject result (and finishes the action goal, if any)."""
        try:
            goal = self._goal_of(req)
            self.strategy.check_goal(goal)  # what this planner can push (DG-OC: boxes, to a pose)
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
                                   mean_planning_time=float(np.mean([r.solve_time for r in res.plans]))
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
        """The push loop with this node's planner for one goal."""
        c = self.session_config
        return PushSession(self.strategy, self.io, goal, replace(
            c, max_actions=req.max_actions or self.strategy.default_max_actions or c.max_actions))

    def _publish_plan(self, view: PlanView):
        """The plan handed to the pusher: ``PushPlan`` stamped with the time its first command starts, feedback,
        and the predicted path and markers for RViz."""
        goal, states, variance = view.goal, view.states, view.variance
        header = Header(stamp=Time(nanoseconds=view.stamp_ns).to_msg(), frame_id=self.p["frame_id"])
        msg = PushPlan(header=header, controls=arrays_to_controls(view.controls, view.dt),
                       predicted_states=[array_to_scene_state(s, self.scene, header) for s in states[1:]],
                       predicted_variance=[] if variance is None else
                       [array_to_state_variance(v, self.scene) for v in variance[1:]],
                       cost=float(view.cost), model=view.model, parareal_iterations=int(view.iterations),
                       solve_time=float(view.solve_time))
        self._publish(self.plan_pub, msg)
        shown = states if view.marker_states is None else view.marker_states
        ms = [markers.delete_all(header)] + markers.scene_markers(self.scene, header, (goal.position, goal.radius))
        ms += markers.trajectory_markers(self.scene, shown, header, "plan")
        if variance is not None:
            ms += markers.uncertainty_markers(self.scene, states, variance, header, "plan")
        if view.faces is not None:
            ms += markers.contact_face_markers(self.scene, states, view.faces, header, goal.object_index, dt=view.dt)
        if view.waypoints is not None:
            ms += markers.waypoint_markers(view.waypoints, header, "plan/waypoints", view.waypoint_index)
        self._publish(self.marker_pub, markers.marker_array(ms))
        self._publish(self.path_pub, markers.object_path(self.scene, states, header, goal.object_index))
        session = self.arbiter.current
        handle = None if session is None else session.tag
        if handle is not None:
            dist = view.distance if math.isfinite(view.distance) else -1.0
            handle.publish_feedback(PushObject.Feedback(distance_to_goal=float(dist), step=int(view.step),
                                                        latest_plan=msg, plan_latency=float(view.latency),
                                                        late_plans=int(view.late_plans)))

    def _publish_computing(self, start: float, x_start: np.ndarray):
        """Real time: where the plan being computed starts (the state predicted for the next switch), faint, beside
        the plan being executed."""
        header = Header(stamp=Time(nanoseconds=int(round(start * 1e9))).to_msg(), frame_id=self.p["frame_id"])
        ms = markers.trajectory_markers(self.scene, np.stack([x_start, x_start]), header, "computing", alpha=0.35)
        self._publish(self.marker_pub, markers.marker_array(ms))

    def _set_status(self, text: str):
        self._status = text
        self._publish(self.status_pub, String(data=text))



main = node_main(MPCPlannerNode, num_threads=4)
