"""The static transforms ``parapush sim`` publishes itself, as tf2_ros' ``static_transform_publisher`` does under
``ros2 launch``: one ``tf2_msgs/TFMessage`` on ``/tf_static``, reliable and transient local (a late subscriber such
as RViz or tf2's buffer still gets it).

Why not tf2_ros' ``StaticTransformBroadcaster``: tf2_ros is not among ROS 2's PyPI wheels, and on a full install its
broadcaster publishes exactly this message with this QoS. tf2_msgs is not among the wheels either (it comes with a
ROS install or the launch overlay): without it ``TF_AVAILABLE`` is false and the caller says so.
"""
from __future__ import annotations

import importlib.util

from ..bringup import StaticTransform
from .qos import LATCHED

TF_AVAILABLE = importlib.util.find_spec("tf2_msgs") is not None
TF_STATIC_TOPIC = "/tf_static"
TF_STATIC_QOS = LATCHED  # tf2's static QoS: depth 1, reliable, transient local


def static_transform_node(name: str, transforms: list[StaticTransform], use_sim_time: bool, context=None):
    """A node that has published ``transforms`` once on /tf_static (latched); it lives as long as it is spun.
    Raises ImportError naming tf2_msgs where it is not installed."""
    import rclpy  # noqa: PLC0415
    from geometry_msgs.msg import TransformStamped  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415
    from tf2_msgs.msg import TFMessage  # noqa: PLC0415

    node = rclpy.create_node(name, context=context,
                             parameter_overrides=[Parameter("use_sim_time", value=bool(use_sim_time))])
    publisher = node.create_publisher(TFMessage, TF_STATIC_TOPIC, TF_STATIC_QOS)
    stamp = node.get_clock().now().to_msg()
    messages = []
    for t in transforms:
        msg = TransformStamped()
        msg.header.stamp = stamp
        msg.header.frame_id, msg.child_frame_id = t.parent_frame, t.child_frame
        tr, q = msg.transform.translation, msg.transform.rotation
        tr.x, tr.y, tr.z = (float(v) for v in t.translation)
        q.x, q.y, q.z, q.w = (float(v) for v in t.rotation_xyzw)
        messages.append(msg)
    publisher.publish(TFMessage(transforms=messages))
    return node
