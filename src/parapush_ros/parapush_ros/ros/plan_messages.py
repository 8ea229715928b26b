"""The planner node's messages of a push, from the core's planner-neutral views: a plan (``session.PlanView``) as
``PushPlan``, RViz markers, the target's Path and the action's feedback; a push's end (``SessionResult``) as the
``PushObject`` result."""
from __future__ import annotations

import math

import numpy as np
from parapush_msgs.action import PushObject
from parapush_msgs.msg import PushPlan
from rclpy.time import Time
from std_msgs.msg import Header

from ..core.planning.outcome import Outcome
from ..core.planning.session import PlanView, SessionResult
from ..core.scene.spec import Scene
from . import markers
from .conversions import array_to_scene_state, array_to_state_variance, arrays_to_controls

RESULT_CODES = {Outcome.REACHED: PushObject.Result.REACHED, Outcome.HIT_OBSTACLE: PushObject.Result.HIT_OBSTACLE,
                Outcome.OFF_TABLE: PushObject.Result.OFF_TABLE, Outcome.TIMEOUT: PushObject.Result.TIMEOUT,
                Outcome.OTHER_IN_GOAL: PushObject.Result.OTHER_IN_GOAL,
                Outcome.ABORTED: PushObject.Result.ABORTED, Outcome.FAILED: PushObject.Result.FAILED}


def header_at(t_ns: int, frame_id: str) -> Header:
    return Header(stamp=Time(nanoseconds=int(t_ns)).to_msg(), frame_id=frame_id)


def plan_messages(view: PlanView, scene: Scene, frame_id: str):
    """(``PushPlan`` stamped with the time its first command starts, ``MarkerArray``, the target's ``Path``)."""
    goal, states, variance = view.goal, view.states, view.variance
    header = header_at(view.stamp_ns, frame_id)
    msg = PushPlan(header=header, controls=arrays_to_controls(view.controls, view.dt),
                   predicted_states=[array_to_scene_state(s, scene, header) for s in states[1:]],
                   predicted_variance=[] if variance is None else
                   [array_to_state_variance(v, scene) for v in variance[1:]],
                   cost=float(view.cost), model=view.model, parareal_iterations=int(view.iterations),
                   solve_time=float(view.solve_time))
    shown = states if view.marker_states is None else view.marker_states
    ms = [markers.delete_all(header)] + markers.scene_markers(scene, header, (goal.position, goal.radius))
    ms += markers.trajectory_markers(scene, shown, header, "plan")
    if variance is not None:
        ms += markers.uncertainty_markers(scene, states, variance, header, "plan")
    if view.faces is not None:
        ms += markers.contact_face_markers(scene, states, view.faces, header, goal.object_index, dt=view.dt)
    if view.waypoints is not None:
        ms += markers.waypoint_markers(view.waypoints, header, "plan/waypoints", view.waypoint_index)
    return msg, markers.marker_array(ms), markers.object_path(scene, states, header, goal.object_index)


def plan_feedback(view: PlanView, msg: PushPlan) -> PushObject.Feedback:
    dist = view.distance if math.isfinite(view.distance) else -1.0
    return PushObject.Feedback(distance_to_goal=float(dist), step=int(view.step), latest_plan=msg,
                               plan_latency=float(view.latency), late_plans=int(view.late_plans))


def computing_markers(scene: Scene, start: float, x_start: np.ndarray, frame_id: str):
    """Real time: where the plan being computed starts (the state predicted for the next switch), faint."""
    header = header_at(int(round(start * 1e9)), frame_id)
    return markers.marker_array(markers.trajectory_markers(scene, np.stack([x_start, x_start]), header, "computing",
                                                           alpha=0.35))


def push_result(res: SessionResult) -> PushObject.Result:
    outcome, dist = res.outcome, res.distance
    return PushObject.Result(outcome=RESULT_CODES[outcome], message=f"{outcome.value}: {res.reason}",
                             actions_executed=int(res.actions),
                             final_distance=float(dist) if math.isfinite(dist) else -1.0,
                             mean_planning_time=float(np.mean([r.solve_time for r in res.plans]))
                             if res.plans else 0.0)
