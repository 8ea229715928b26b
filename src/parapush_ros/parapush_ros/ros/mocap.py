"""The mocap bodies and topics of a scene from a node's mocap parameters (``_MOCAP_COMMON`` in ``ros/params.py``):
shared by ``mocap_ingest``, ``mujoco_sim`` and ``pose_recorder``."""
from __future__ import annotations

from ..core.robot.mocap import MocapConfigError, MocapToTable, parse_body_map, pose_topic

PUSHER_KEY = "pusher"  # tracker key of the pusher (objects are keyed by their scene names)


def mocap_setup(node, p: dict, scene):
    """(transform, {scene body key: mocap body name}, {key: topic})."""
    try:
        transform = MocapToTable.from_params(p["table_origin_in_mocap"], p["table_rotation_in_mocap"], p["up_axis"])
        objects = [o.name for o in scene.objects]
        if PUSHER_KEY in objects:
            raise MocapConfigError(f"scene object name {PUSHER_KEY!r} is reserved for the pusher")
        bodies = {PUSHER_KEY: p["pusher_body"], **parse_body_map(p["body_map"], objects)}
        if not p["pusher_body"] or list(bodies.values()).count(p["pusher_body"]) > 1:
            raise MocapConfigError(f"pusher_body: {p['pusher_body']!r} is empty or also names an object's body")
        topics_ = {k: pose_topic(b, p["mocap_driver"], p["pose_topic_template"]) for k, b in bodies.items()}
    except MocapConfigError as e:
        raise ValueError(f"{node.get_name()}: invalid parameter {e}") from None
    return transform, bodies, topics_
