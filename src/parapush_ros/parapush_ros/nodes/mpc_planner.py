"""``mpc_planner``: closed-loop push planning behind a ``PushObject`` action, with the planner chosen by ``planner``
(the registry ``core.planning.planners``: ``mpc``, ``alg2``, ``dgoc``, ``straight``, ...).

Inputs: ``scene_state``; goals from the ``push_object`` action or RViz's "2D Goal Pose" (``/goal_pose``: with
``goal_pose_starts_push`` it starts a push of ``target_object``, pre-empting a running push; otherwise it only moves
the running push's goal). The push is the core's one push loop (``core.planning.session.PushSession``, in the
action's execute thread) with the strategy the registry entry built; the node gives it its clock, the latest scene
state and the command timer (``core.planning.live_io``), and knows no planner in particular. The timer sends the
push's schedule on ``pusher_cmd`` (TwistStamped, table frame, at ``control_rate`` or what the planner needs). Each
plan is published from the strategy's ``PlanView`` (``ros.plan_messages``): ``PushPlan`` stamped with the time its
first command starts, the target's Path, markers (``plan``, ``plan/sigma``, faces, ``plan/waypoints``, real time's
``computing``) and the action's feedback; ``planner/status`` says what the push is doing.

Lifecycle: constructed, it checks its parameters and builds its planner; ``configure`` creates topics, timer and
action server, ``activate`` lets it publish and accept goals; ``deactivate`` ends a running push (zero sent) first.
Safety (the push loop's, for every planner): a stale or invalid scene state, a clock jump, a stamp further than
``max_clock_offset`` from the node's clock or a start deeper than ``max_start_penetration`` sends zero at once and
pauses (resumed re-planned within ``tracking_loss_timeout``, else failed); a failure, cancel, pre-emption or the end
sends zero at once, and zeros for ``stop_hold`` s. A non-finite command is never sent. The velocity commander's
``~/status`` is watched: its e-stop, or its deactivation while it was active, ends the running push (aborted, zero
sent), so that a reset or an activate never resumes a push by itself; while it is e-stopped, or does not know
MoveIt Servo's units yet, goals are refused.
"""
from __future__ import annotations

import math
import threading
from dataclasses import replace

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path
from parapush_msgs.action import PushObject
from parapush_msgs.msg import PushPlan, SceneState
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode
from std_msgs.msg import Header, String
from visualization_msgs.msg import MarkerArray

from ..ros import qos, topics
from ..ros.conversions import ConversionError, scene_state_to_array
from ..ros.plan_messages import computing_markers, plan_feedback, plan_messages, push_result
from ..core.config import ConfigError, from_values
from ..core.planning.goal_policy import default_target, request_goal
from ..core.planning.live_io import Commands, LiveIO, SceneStates
from ..core.planning.outcome import Outcome
from ..core.planning.planners import build_planner, planner_entry
from ..core.planning.session import PushArbiter, PushSession, SessionConfig, SessionResult, seconds_to_ns
from ..core.robot.command_safety import ESTOP, INACTIVE, NOT_READY, RESET_HEARD, STOPPED_BY_OPERATOR, status_parts
from ..core.scene.spec import load_scene
from ..core.scene.state import yaw_from_quaternion
from ..ros.params import PLANNER, declare_all
from ..ros.node import ManagedEntities, node_main, period_clock, transition



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
            planner_entry(p["planner"])
        except ConfigError as e:
            raise ValueError(f"parameter {e}") from None
        self._sessions = {}  # goal id -> its push, from acceptance (it may wait for its turn) to its end
        self.target_name = default_target(self.scene, p["target_object"])  # raises naming the scene's objects
        # the planner (planner auto: the one it chose, and why): ValueError naming a bad parameter
        self.kind, self.strategy, why = build_planner(p["planner"], self.scene, p)
        if why:
            self.get_logger().info(f"planner {p['planner']}: {self.kind.name} ({why})")
        self.control_rate = max(p["control_rate"], self.strategy.command_rate)

        self.states = SceneStates(self.scene.layout.dim, p["state_timeout"], topics.SCENE_STATE)
        self.commands = Commands(self._publish_twist, self._now_ns, seconds_to_ns(p["stop_hold"]))
        self.io = LiveIO(self._now_ns, self.states, self.commands, self._publish_plan, self._publish_computing,
                         self._report_status)
        self.arbiter = PushArbiter()  # one push at a time, the newest wins

        self._active = False
        self._entities = []  # what configure created and cleanup destroys: (destroy function, entity)
        self.cmd_pub = self.path_pub = self.marker_pub = self.plan_pub = self.status_pub = None
        self._status = ""
        self._commander = ("", "")  # the velocity commander's last (state, detail) heard; ("", "") before any

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
        self.states.topic = self.state_sub.topic_name
        self.action = ActionServer(self, PushObject, topics.PUSH_ACTION, execute_callback=self._execute,
                                   goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                                   callback_group=ReentrantCallbackGroup())
        self._entities = [(self.destroy_lifecycle_publisher, pub) for pub in (
            self.cmd_pub, self.path_pub, self.marker_pub, self.plan_pub, self.status_pub)] + [
            (self.destroy_subscription, self.state_sub),
            (self.destroy_subscription, self.create_subscription(PoseStamped, topics.GOAL_POSE, self._on_goal_pose,
                                                                 10, callback_group=io)),
            (self.destroy_subscription, self.create_subscription(String, topics.COMMANDER_STATUS_OF_PLANNER,
                                                                 self._on_commander_status, qos.LATCHED,
                                                                 callback_group=io)),
            (self.destroy_timer, self.create_timer(1.0 / self.control_rate, self._on_timer,  # on through a clock step
                                                   callback_group=MutuallyExclusiveCallbackGroup(),
                                                   clock=period_clock(self))),
            (lambda action: action.destroy(), self.action)]
        self.get_logger().info("configured: silent until activate")

    @transition
    def on_activate(self, state):
        ret = super().on_activate(state)  # enables the publishers
        self._active = True
        self._set_status(self._idle())
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
        """Refuse a goal the planner cannot run now. A ROS 2 goal refusal carries no reason, so a goal that is itself
        invalid is accepted in any active state and fails at once naming its bad field (as it would when the arm is
        ready): its sender learns what to mend, not only that the commander is stopped."""
        if not self._active:
            self.get_logger().warning("push_object goal refused: the planner is not active")
            return GoalResponse.REJECT
        try:
            self.strategy.check_goal(self._goal_of(goal))
        except ValueError:
            return GoalResponse.ACCEPT  # _run_push fails it with the reason (and ends the running push, if any)
        state, detail = self._commander
        if state == ESTOP:
            self.get_logger().warning(f"push_object goal refused: the velocity commander is e-stopped ({detail}): "
                                      f"reset it first (velocity_commander/reset)")
            return GoalResponse.REJECT
        if state in NOT_READY:
            self.get_logger().warning(f"push_object goal refused: the velocity commander {NOT_READY[state]} "
                                      f"({detail})")
            return GoalResponse.REJECT
        yaw = f", yaw {goal.goal_yaw:.3f} rad" if goal.yaw_tolerance >= 0.0 else ""
        self.get_logger().info(f"push_object goal accepted: '{goal.target_object or self.target_name}' to "
                               f"({goal.goal_x:.3f}, {goal.goal_y:.3f}) m{yaw}")
        return GoalResponse.ACCEPT

    def _on_commander_status(self, msg: String):
        """An operator's stop at the commander (its e-stop, or its deactivation while it was active) ends the
        running push: after the reset or activate the arm stays still until a new goal."""
        was, _ = self._commander
        state, detail = self._commander = status_parts(msg.data)
        if was == ESTOP and state != ESTOP:  # planner/status says when goals are taken again
            self._set_status(f"{self._idle()}; {RESET_HEARD}")
        if state not in STOPPED_BY_OPERATOR or (state == INACTIVE and was in ("", INACTIVE)):
            return  # (the commander is inactive before its first activate: nothing was stopped)
        if self.arbiter.current is not None or self._sessions:
            reason = (f"the velocity commander is {STOPPED_BY_OPERATOR[state]} ({detail}); send a new goal once it "
                      f"{'is reset' if state == ESTOP else 'is active again'}")
            self.get_logger().warning(f"push ended: {reason}")
            self.arbiter.stop_all(Outcome.ABORTED, reason)
            self._send_zero()
        if state == ESTOP and was != ESTOP:
            self._set_status(f"e-stopped: the velocity commander is e-stopped ({detail}); goals are refused until "
                             f"it is reset")

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
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_state(self, msg: SceneState):
        now = self._now_ns()
        try:
            x, err = scene_state_to_array(msg, self.scene, require_valid=True, field="scene_state"), ""
        except ConversionError as e:
            x, err = None, f"invalid scene state: {e}"
        self.states.receive(x, err, now, msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)

    def _state_problem(self) -> str:
        """Why the latest state must not be acted on ('' when it is fine)."""
        return self.states.problem(self._now_ns())

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
        """The pusher command (``live_io.Commands``): the running push's schedule now, zeros after a stop."""
        self.commands.tick(self.arbiter.current, self.states.problem)

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

    def _send_zero(self):
        """Zero velocity at once, and from the timer for ``stop_hold`` seconds; no tick publishes after it what it
        read before."""
        self.commands.set(None, hold=True)

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
                self.states.clear_seen()
                res = run()
            except Exception as e:  # noqa: BLE001 - whatever happens, stop the pusher and report it
                self.get_logger().error(f"push failed: {e!r}")
                res = SessionResult(Outcome.FAILED, f"internal error: {e!r}", 0, float("nan"))
            finally:
                if goal_handle is not None:
                    self._sessions.pop(bytes(goal_handle.goal_id.uuid), None)
                self._send_zero()
        result, outcome = push_result(res), res.outcome
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

    def _publish_plan(self, report):
        """A plan handed to the pusher, as its strategy shows it (``PlanView``): ``PushPlan``, markers and the
        target's path for RViz, and the action's feedback."""
        view = self.strategy.plan_view(report)
        msg, marks, path = plan_messages(view, self.scene, self.p["frame_id"])
        for pub, m in ((self.plan_pub, msg), (self.marker_pub, marks), (self.path_pub, path)):
            self._publish(pub, m)
        session = self.arbiter.current
        if session is not None and session.tag is not None:
            session.tag.publish_feedback(plan_feedback(view, msg))

    def _publish_computing(self, start: float, x_start: np.ndarray):
        self._publish(self.marker_pub, computing_markers(self.scene, start, x_start, self.p["frame_id"]))

    def _report_status(self, text: str, level: str = "info"):
        self._set_status(text)
        if level == "warning":
            self.get_logger().warning(text, throttle_duration_sec=1.0)

    def _idle(self) -> str:
        return f"idle: scene {self.scene.name!r}, {self.strategy.describe()}, target {self.target_name!r}"

    def _set_status(self, text: str):
        self._status = text
        self._publish(self.status_pub, String(data=text))

main = node_main(MPCPlannerNode, num_threads=4)
