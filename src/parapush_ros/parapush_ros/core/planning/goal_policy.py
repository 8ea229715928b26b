"""Goal policy of the planner node, without ROS: which object a push moves by default, and how a push request
(the ``PushObject`` action's goal, or RViz's /goal_pose made into one) becomes a checked ``tasks.Goal``."""
from __future__ import annotations

import math

from ..scene.spec import Scene
from .outcome import MAX_ACTIONS_LIMIT
from .tasks import Goal, goal_for

REQUEST_FIELDS = ("goal_x", "goal_y", "goal_yaw", "position_tolerance", "yaw_tolerance")


def default_target(scene: Scene, target_object: str = "") -> str:
    """The object pushed when a goal names none: ``target_object``, else the scene goal's, else the first object;
    ``KeyError`` naming the scene's objects if it has no such object."""
    name = target_object or (scene.goal.object if scene.goal else scene.objects[0].name)
    scene.object_index(name)
    return name


def default_goal_position(scene: Scene, target: str):
    """The scene's goal position, or where ``target`` stands (a scene without a goal)."""
    g = scene.goal
    return g.position if g is not None else scene.objects[scene.object_index(target)].pose[:2]


def request_goal(scene: Scene, request, default_target_name: str, default_tolerance: float = 0.0,
                 needs_yaw: bool = False, planner: str = "") -> Goal:
    """The goal of a push ``request`` (the fields of ``PushObject.Goal``: ``target_object``, ``goal_x``,
    ``goal_y``, ``goal_yaw``, ``position_tolerance``, ``yaw_tolerance``, ``max_actions``). A tolerance <= 0 takes
    ``default_tolerance`` (then the scene's); a cylinder's yaw is never asked for; a yaw tolerance of 0 cannot be met;
    a planner that ``needs_yaw`` refuses a goal without one. ``ValueError`` naming the field otherwise."""
    for name in REQUEST_FIELDS:
        if not math.isfinite(getattr(request, name)):
            raise ValueError(f"goal.{name}: not finite ({getattr(request, name)})")
    tol = request.position_tolerance if request.position_tolerance > 0.0 else (default_tolerance or None)
    if request.max_actions > MAX_ACTIONS_LIMIT:
        raise ValueError(f"goal.max_actions: {request.max_actions} is above the limit of {MAX_ACTIONS_LIMIT}")
    name = request.target_object or default_target_name
    try:
        index = scene.object_index(name)
    except KeyError as e:
        raise ValueError(f"goal.target_object: {e.args[0]}") from None
    yaw_tol = request.yaw_tolerance
    if scene.objects[index].shape == "cylinder":
        yaw_tol = -1.0  # a cylinder's yaw cannot be seen (nor planned for)
    elif yaw_tol == 0.0:
        raise ValueError("goal.yaw_tolerance: 0 rad cannot be met; give a positive tolerance, or a negative one to "
                         "ignore the yaw")
    if needs_yaw and yaw_tol < 0.0:
        raise ValueError(f"goal.yaw_tolerance: the {planner} planner pushes to a goal pose: give a yaw and a yaw "
                         f"tolerance > 0 (got {request.yaw_tolerance})")
    return goal_for(scene, name, (request.goal_x, request.goal_y), tol, request.goal_yaw, yaw_tol)
