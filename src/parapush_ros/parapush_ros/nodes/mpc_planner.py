"""``mpc_planner``: closed-loop push planning (paper 000 Sec. 3) behind a ``PushObject`` action.

Inputs: the scene state (``scene_state``), goals from the ``push_object`` action or from RViz's "2D Goal Pose"
(``/goal_pose``: with ``goal_pose_starts_push`` it starts a push of ``target_object`` to that pose, pre-empting
a running push; otherwise it only moves the goal of the running push, and is ignored when idle).

Each step the planner optimises a control sequence from the latest observed state (in the action's execute
thread, off the command timer's callback group), holds the first control for ``control_duration`` on
``pusher_cmd`` (TwistStamped, table frame, at ``control_rate``), then commands zero while it re-plans from the
newest state (stop-and-plan, as on the paper's robot). Feedback follows every step; the plan is published as a
``PushPlan``, a ``nav_msgs/Path`` of the target and a ``MarkerArray``; ``planner/status`` says what it is doing.

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
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path
from parapush_msgs.action import PushObject
from parapush_msgs.msg import PushPlan, SceneState
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from std_msgs.msg import Header, String
from visualization_msgs.msg import MarkerArray

from ..ros import markers, topics
from ..ros.conversions import ConversionError, array_to_scene_state, arrays_to_controls, scene_state_to_array
from ..core.models.fine import FineModelDiverged
from ..core.planning.planner import MPCPlanner, PlannerConfig
from ..core.planning.optimisers import OPTIMISERS
from ..core.planning.outcome import MAX_ACTIONS_LIMIT, Outcome, OutcomeMonitor
from ..core.models.registry import COARSE_KINDS, Predictor, parse_model
from ..core.scene.spec import load_scene
from ..core.planning.tasks import CostWeights, PushTask, goal_for
from ..ros.params import PLANNER, declare_all
from ..ros.spinning import run_node

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
WALL_BACKSTOP_FACTOR = 10.0  # a wait bounded on the node clock also ends after this many times as long in wall time
RESULT_CODES = {Outcome.REACHED: PushObject.Result.REACHED, Outcome.HIT_OBSTACLE: PushObject.Result.HIT_OBSTACLE,
                Outcome.OFF_TABLE: PushObject.Result.OFF_TABLE, Outcome.TIMEOUT: PushObject.Result.TIMEOUT,
                Outcome.ABORTED: PushObject.Result.ABORTED, Outcome.FAILED: PushObject.Result.FAILED}


@dataclass
class PushRun:
    """One push in progress: its goal, how it is stopped from outside, and its bookkeeping."""

    request: PushObject.Goal
    goal_handle: object = None  # ServerGoalHandle for action goals; None for /goal_pose pushes
    stop_event: threading.Event = field(default_factory=threading.Event)
    stop_outcome: Outcome | None = None  # set by whoever stops it from outside (cancel, pre-emption, fault)
    stop_reason: str = ""
    new_goal: object = None  # a Goal that /goal_pose wants the running push to move to
    interrupted: threading.Event = field(default_factory=threading.Event)  # the held control was cut short
    plan_times: list = field(default_factory=list)

    def stop(self, outcome: Outcome, reason: str):
        if self.stop_outcome is None:
            self.stop_outcome, self.stop_reason = outcome, reason
        self.stop_event.set()


class MPCPlannerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("mpc_planner", **kwargs)
        self.p = declare_all(self, PLANNER)
        p = self.p
        self.scene = load_scene(p["scene"])
        self.config = self._planner_config()
        weights = CostWeights.from_mapping({k[len("weights."):]: v for k, v in p.items() if k.startswith("weights.")},
                                           source="parameters weights.*")
        for name in ("control_rate", "state_timeout"):
            if not p[name] > 0.0:
                raise ValueError(f"parameter {name}: must be > 0, got {p[name]}")
        for name in ("stop_hold", "tracking_loss_timeout"):
            if not p[name] >= 0.0:
                raise ValueError(f"parameter {name}: must be >= 0, got {p[name]}")
        if p["coarse_model"] not in COARSE_KINDS:
            raise ValueError(f"parameter coarse_model: {p['coarse_model']!r} is not one of {COARSE_KINDS}")
        self.target_name = p["target_object"] or (self.scene.goal.object if self.scene.goal else
                                                  self.scene.objects[0].name)
        self.scene.object_index(self.target_name)  # raises naming the scene's objects
        self.predictor = Predictor(self.scene, coarse=p["coarse_model"], threads=p["threads"] or None,
                                   learned_weights=p["learned_weights"] or None)
        goal = goal_for(self.scene, self.target_name, position=self._default_goal_xy())
        try:
            self.planner = MPCPlanner(self.scene, self.config, task=PushTask(self.scene, weights, goal),
                                      predictor=self.predictor)
        except ValueError as e:  # e.g. "optimiser parameter nominal_speed: must be in (0, max_speed=0.1]"
            raise ValueError(f"planner parameters: {e}") from None

        self._lock = threading.Lock()
        self._state = None  # (x or None, error message or "", receive time (rclpy Time), stamp (rclpy Time))
        self._run: PushRun | None = None
        self._run_lock = threading.Lock()  # one push at a time
        self._request_seq = 0  # goals and /goal_pose pushes in arrival order: only the newest one runs
        self._command = None  # (u (2,), until (rclpy Time)) while a planned control is being held
        self._zero_until = None  # rclpy Time until which zeros are sent after a stop

        self.cmd_pub = self.create_publisher(TwistStamped, topics.PUSHER_CMD, RELIABLE)
        self.path_pub = self.create_publisher(Path, topics.PLAN_PATH, LATCHED)
        self.marker_pub = self.create_publisher(MarkerArray, topics.PLAN_MARKERS, LATCHED)
        self.plan_pub = self.create_publisher(PushPlan, topics.PLAN, RELIABLE)
        self.status_pub = self.create_publisher(String, topics.PLANNER_STATUS, LATCHED)
        io = ReentrantCallbackGroup()
        self.state_sub = self.create_subscription(SceneState, topics.SCENE_STATE, self._on_state, RELIABLE,
                                                  callback_group=io)
        self.create_subscription(PoseStamped, topics.GOAL_POSE, self._on_goal_pose, 10, callback_group=io)
        self.timer = self.create_timer(1.0 / p["control_rate"], self._on_timer,
                                       callback_group=MutuallyExclusiveCallbackGroup())
        self.action = ActionServer(self, PushObject, topics.PUSH_ACTION, execute_callback=self._execute,
                                   goal_callback=lambda goal: GoalResponse.ACCEPT,
                                   cancel_callback=self._on_cancel, callback_group=ReentrantCallbackGroup())
        self._set_status(f"idle: scene {self.scene.name!r}, model {self.config.model}, {self.config.optimiser} "
                         f"optimiser, target {self.target_name!r}")
        self.get_logger().info(self._status)

    def _planner_config(self) -> PlannerConfig:
        p = self.p
        try:
            parse_model(p["model"])
        except ValueError as e:
            raise ValueError(f"parameter model: {e}") from None
        if p["optimiser"] not in OPTIMISERS:
            raise ValueError(f"parameter optimiser: {p['optimiser']!r} is not one of {OPTIMISERS}")
        for name in ("horizon", "samples", "iterations", "max_actions"):
            if p[name] < 1:
                raise ValueError(f"parameter {name}: must be >= 1, got {p[name]}")
        steps = p["control_duration"] / 0.001
        if not (p["control_duration"] > 0.0 and abs(steps - round(steps)) < 1e-6):
            raise ValueError(f"parameter control_duration: {p['control_duration']} s must be a positive multiple "
                             f"of the 0.001 s physics step")
        return PlannerConfig(model=p["model"], optimiser=p["optimiser"], horizon=p["horizon"],
                             dt=p["control_duration"], samples=p["samples"], iterations=p["iterations"],
                             variance=p["exploration_variance"], max_speed=p["max_speed"],
                             nominal_speed=p["nominal_speed"], approach_speed=p["approach_speed"],
                             primitive=p["primitive"], sensitivity=p["sensitivity"], temperature=p["temperature"],
                             decay=p["decay"], seed=p["seed"])

    def _default_goal_xy(self):
        g = self.scene.goal
        return g.position if g is not None else self.scene.objects[self.scene.object_index(self.target_name)].pose[:2]

    def stop_activity(self, timeout: float = 5.0) -> bool:
        """Abort a running push, send zero, and wait (bounded, wall time) until its loop has reported and left:
        nothing of this node runs after it. False if the loop is still running at ``timeout``."""
        run = self._run
        if run is not None:
            run.stop(Outcome.ABORTED, "planner shutting down")
        self._send_zero()
        if not self._run_lock.acquire(timeout=timeout):
            return False
        self._run_lock.release()
        return True

    def destroy_node(self):
        self.stop_activity()
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

    def _state_problem(self) -> str:
        """Why the latest state must not be acted on ('' when it is fine)."""
        with self._lock:
            st = self._state
        if st is None:
            return f"no scene state received on {self.state_sub.topic_name}"
        x, err, t, _ = st
        age = (self.get_clock().now() - t).nanoseconds * 1e-9
        if age > self.p["state_timeout"]:
            return f"stale scene state: last one {age:.2f} s ago (state_timeout {self.p['state_timeout']} s)"
        return err

    def _latest_state(self):
        with self._lock:
            return None if self._state is None else self._state[0]

    def _on_goal_pose(self, msg: PoseStamped):
        frame = msg.header.frame_id
        if frame not in ("", self.p["frame_id"]):
            self.get_logger().warning(f"/goal_pose in frame {frame!r} ignored: expected {self.p['frame_id']!r}")
            return
        q = msg.pose.orientation
        yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        req = PushObject.Goal(target_object=self.target_name, goal_x=float(msg.pose.position.x),
                              goal_y=float(msg.pose.position.y), goal_yaw=float(yaw), yaw_tolerance=-1.0)
        if self.p["goal_pose_starts_push"]:
            threading.Thread(target=self._run_push, args=(req, None), name="mpc-goal-pose", daemon=True).start()
            return
        run = self._run
        if run is None:
            self.get_logger().info("/goal_pose ignored: no push running (goal_pose_starts_push is false)")
            return
        try:
            run.new_goal = self._goal_of(req)
        except ValueError as e:
            self.get_logger().warning(f"/goal_pose ignored: {e}")

    def _on_cancel(self, goal_handle):
        run = self._run
        if run is not None and run.goal_handle is goal_handle:
            run.stop(Outcome.ABORTED, "cancelled by the client")
            self._send_zero()
        return CancelResponse.ACCEPT

    # ----------------------------------------------------------------------------------------------- commands
    def _on_timer(self):
        now = self.get_clock().now()
        run, cmd = self._run, self._command
        if run is not None:
            problem = self._state_problem()
            if problem and cmd is not None:  # acting on a bad state: stop now; the push loop pauses or fails
                self._command = None
                run.interrupted.set()
                self._publish_twist(np.zeros(2))
                return
            if cmd is not None and now < cmd[1] and not run.stop_event.is_set():
                self._publish_twist(cmd[0])
            else:
                self._publish_twist(np.zeros(2))
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
        self.cmd_pub.publish(msg)

    def _send_zero(self):
        """Zero velocity at once, and from the timer for ``stop_hold`` seconds."""
        self._command = None
        self._zero_until = self.get_clock().now() + Duration(seconds=self.p["stop_hold"])
        self._publish_twist(np.zeros(2))

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
        return goal_for(self.scene, name, (req.goal_x, req.goal_y), tol, req.goal_yaw, yaw_tol)

    def _execute(self, goal_handle):
        return self._run_push(goal_handle.request, goal_handle)

    def _run_push(self, req, goal_handle):
        """Run one push to the end; returns the PushObject result (and finishes the action goal, if any)."""
        run = PushRun(req, goal_handle)
        with self._lock:
            self._request_seq += 1
            seq = self._request_seq
        old = self._run
        if old is not None:
            old.stop(Outcome.ABORTED, "pre-empted by a new goal")
        with self._run_lock:  # waits for the pre-empted push to stop the pusher and report
            if seq != self._request_seq:  # an even newer goal came in while this one waited
                outcome, reason, actions, dist = Outcome.ABORTED, "pre-empted by a new goal", 0, float("nan")
            else:
                self._run = run
                try:
                    outcome, reason, actions, dist = self._push(run)
                except Exception as e:  # noqa: BLE001 - whatever happens, stop the pusher and report it
                    self.get_logger().error(f"push failed: {e!r}")
                    outcome, reason, actions, dist = Outcome.FAILED, f"internal error: {e!r}", 0, float("nan")
                finally:
                    self._send_zero()
                    self._run = None
        result = PushObject.Result(outcome=RESULT_CODES[outcome], message=f"{outcome.value}: {reason}",
                                   actions_executed=int(actions),
                                   final_distance=float(dist) if math.isfinite(dist) else -1.0,
                                   mean_planning_time=float(np.mean(run.plan_times)) if run.plan_times else 0.0)
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

    def _push(self, run: PushRun):
        """The MPC loop; returns (outcome, reason, actions executed, final distance)."""
        try:
            goal = self._goal_of(run.request)
        except ValueError as e:
            return Outcome.FAILED, f"invalid goal: {e}", 0, float("nan")
        max_actions = run.request.max_actions or self.p["max_actions"]
        self.planner.set_goal(goal)
        monitor = OutcomeMonitor(self.scene, goal, max_actions)
        clock = self.get_clock()
        # the first state may still be on its way: wait up to state_timeout for one
        self._wait_until(lambda: not self._state_problem(), clock.now(), self.p["state_timeout"], run)
        actions, dist = 0, float("nan")
        while True:
            if run.goal_handle is not None and run.goal_handle.is_cancel_requested:
                run.stop(Outcome.ABORTED, "cancelled by the client")
            if run.stop_event.is_set():
                return run.stop_outcome, run.stop_reason, actions, dist
            problem = self._wait_for_valid_state(run)
            if run.stop_event.is_set():
                continue
            if problem:
                return Outcome.FAILED, problem, actions, dist
            x = self._latest_state()
            if run.new_goal is not None:
                goal, run.new_goal = run.new_goal, None
                self.planner.set_goal(goal)
                monitor = OutcomeMonitor(self.scene, goal, max_actions)
            status = monitor.check(x, actions)
            dist = status.distance
            if status.outcome.done:
                return status.outcome, status.reason, actions, dist
            self._set_status(f"planning step {actions + 1}/{max_actions}: {status.reason}")
            try:
                plan = self.planner.plan(x)
            except (FineModelDiverged, ValueError) as e:
                return Outcome.FAILED, f"planning failed: {e}", actions, dist
            run.plan_times.append(plan.plan_time)
            if run.stop_event.is_set():
                continue
            if self._state_problem():  # the state went bad while planning: pause, then re-plan
                continue
            u = plan.controls[0]
            if not np.all(np.isfinite(u)):
                return Outcome.FAILED, f"planning failed: non-finite control {u}", actions, dist
            start = clock.now()
            until = start + Duration(seconds=self.config.dt)
            run.interrupted.clear()
            self._command = (u.copy(), until)
            self._publish_twist(u)
            self._publish_plan(plan, goal, run, actions, dist)
            self._set_status(f"pushing {self.scene.objects[goal.object_index].name!r}: step {actions + 1}/"
                             f"{max_actions}, {dist * 1e3:.0f} mm to go, u = ({u[0]:.3f}, {u[1]:.3f}) m/s, plan "
                             f"{plan.plan_time:.2f} s ({plan.model})")
            self._wait_until(run.interrupted.is_set, start, self.config.dt, run)  # the hold, on the node clock
            self._command = None
            if run.stop_event.is_set():
                continue
            self._publish_twist(np.zeros(2))  # stop-and-plan: hold still while re-planning
            self.planner.commit()
            actions += 1  # an interrupted control counts: the pusher has moved
            self._wait_for_state_measured_after(until, run)

    def _wait_for_state_measured_after(self, t: Time, run: PushRun):
        """Wait until the scene state was measured at ``t`` or later (header stamp), so that the next plan starts
        from where the control left the scene, not from a sample still in flight (on a slow host, or with mocap
        latency). Bounded by ``state_timeout`` on the node clock: after that the state is stale anyway and the
        loop pauses; a state that never catches up (stamps on another clock) is said in the log."""
        def stamp():
            with self._lock:
                return None if self._state is None else self._state[3]

        if self._wait_until(lambda: stamp() is not None and stamp() >= t, t, self.p["state_timeout"], run):
            return
        if not run.stop_event.is_set():
            newest = stamp()
            lag = "none received" if newest is None else f"newest {(t - newest).nanoseconds * 1e-9:.3f} s before it"
            self.get_logger().warning(f"no scene state measured after the control ended ({lag}); planning from the "
                                      f"newest one (are scene_state stamps on this node's clock?)",
                                      throttle_duration_sec=5.0)

    def _wait_until(self, condition, start: Time, seconds: float, run: PushRun) -> bool:
        """Poll ``condition`` until it holds (True), ``seconds`` after ``start`` pass on the node clock, or the run
        stops (False). The node clock is the sim clock under use_sim_time, so a slow host never cuts a wait short;
        a wall-time backstop (``WALL_BACKSTOP_FACTOR`` x as long) keeps a simulation whose /clock died from
        hanging the push."""
        clock = self.get_clock()
        deadline = start + Duration(seconds=seconds)
        wall_deadline = time.monotonic() + WALL_BACKSTOP_FACTOR * seconds
        while not run.stop_event.is_set():
            if condition():
                return True
            if clock.now() >= deadline or time.monotonic() >= wall_deadline:
                return False
            run.stop_event.wait(0.005)
        return False

    def _wait_for_valid_state(self, run: PushRun) -> str:
        """'' once the scene state is usable; while it is not (a mocap dropout), hold the pusher still for up to
        ``tracking_loss_timeout`` and return the problem if it does not clear (or at once when that is 0)."""
        problem = self._state_problem()
        if not problem:
            return ""
        timeout = self.p["tracking_loss_timeout"]
        if timeout <= 0.0:
            return problem
        self.get_logger().warning(f"paused: {problem}; resuming if it clears within {timeout:g} s")
        self._set_status(f"paused: {problem}")
        if self._wait_until(lambda: not self._state_problem(), self.get_clock().now(), timeout, run):
            self.get_logger().info("valid scene state again: resuming the push")
            return ""
        if run.stop_event.is_set():
            return ""
        return f"{problem} (no valid state within tracking_loss_timeout {timeout:g} s)"

    def _publish_plan(self, plan, goal, run: PushRun, step: int, dist: float):
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.p["frame_id"])
        kind, k = parse_model(plan.model)  # the model that made this plan: analytical, learned, fine, parareal<K>
        msg = PushPlan(header=header, controls=arrays_to_controls(plan.controls, self.config.dt),
                       predicted_states=[array_to_scene_state(s, self.scene, header) for s in plan.states[1:]],
                       cost=float(plan.cost), model=kind if kind != "analytical" else "coarse",
                       parareal_iterations=int(k) if kind == "parareal" else 0, solve_time=float(plan.plan_time))
        self.plan_pub.publish(msg)
        ms = [markers.delete_all(header)] + markers.scene_markers(self.scene, header, (goal.position, goal.radius))
        ms += markers.trajectory_markers(self.scene, plan.states, header, "plan")
        self.marker_pub.publish(markers.marker_array(ms))
        self.path_pub.publish(markers.object_path(self.scene, plan.states, header, goal.object_index))
        if run.goal_handle is not None:
            run.goal_handle.publish_feedback(PushObject.Feedback(distance_to_goal=float(dist), step=int(step),
                                                                 latest_plan=msg))

    def _set_status(self, text: str):
        self._status = text
        self.status_pub.publish(String(data=text))


def main(args=None):
    run_node(MPCPlannerNode, args, num_threads=4)


if __name__ == "__main__":
    main()
