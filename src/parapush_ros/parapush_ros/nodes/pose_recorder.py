"""``pose_recorder``: records the mocap ``PoseStamped`` topics of the pusher and the scene objects to an MCAP bag.

The bag is a ROS 2 bag (readable by ``ros2 bag`` and Foxglove) holding exactly what the mocap driver (or the
simulator) streams, in the mocap frame, with the header stamps as sent and the receive time as log time, plus the
mocap_ingest parameters it was recorded with (the mocap -> table transform and topic names) as bag metadata, so
``parapush replay`` and ``parapush calibrate`` read it without a configuration file. Written with
``mcap-ros2-support`` (PyPI): no ROS bag tooling needed. Started by ``parapush sim --record FILE`` and by the launch
files' ``record:=FILE`` argument; the topics and transform come from mocap_ingest's parameters (inherited).
"""
from __future__ import annotations

import functools
import threading
from pathlib import Path

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node

from ..core.fidelity.recordings import McapPoseWriter
from ..core.scene.spec import load_scene
from ..ros.conversions import stamp_seconds
from ..ros.mocap import mocap_setup
from ..ros.node import node_main
from ..ros.params import POSE_RECORDER, declare_all
from ..ros.qos import RECORDING

MOCAP_KEYS = ("table_origin_in_mocap", "table_rotation_in_mocap", "up_axis", "mocap_driver", "pose_topic_template",
              "pusher_body", "body_map")


class PoseRecorderNode(Node):
    def __init__(self, **kwargs):
        super().__init__("pose_recorder", **kwargs)
        p = declare_all(self, POSE_RECORDER)
        if not p["record"]:
            raise ValueError("pose_recorder: invalid parameter record: empty (the MCAP bag to write)")
        if Path(p["record"]).exists():  # the same record:= for a second session would erase the first
            raise ValueError(f"pose_recorder: invalid parameter record: {p['record']!r} exists (a recording is never "
                             f"overwritten: give a new name, or move the old bag away)")
        scene = load_scene(p["scene"])
        _, _, self.topics = mocap_setup(self, p, scene)
        self._lock = threading.Lock()  # callbacks may run on several executor threads
        self.writer = McapPoseWriter(p["record"], mocap={k: p[k] for k in MOCAP_KEYS})
        self.subs = [self.create_subscription(PoseStamped, t, functools.partial(self._on_pose, t),
                                              RECORDING) for t in self.topics.values()]
        self.get_logger().info(f"recording {', '.join(self.topics.values())} to {p['record']}")

    def _on_pose(self, topic: str, msg: PoseStamped):
        p, q = msg.pose.position, msg.pose.orientation
        with self._lock:
            if self.writer is not None:
                self.writer.write(topic, stamp_seconds(msg.header.stamp), msg.header.frame_id, (p.x, p.y, p.z),
                                  (q.x, q.y, q.z, q.w), log_time=self.get_clock().now().nanoseconds * 1e-9)

    @property
    def count(self) -> int:
        return self.writer.count if self.writer is not None else 0

    def stop_activity(self, timeout: float = 5.0):
        """Close the bag (its summary is written then): called before the executor shuts down."""
        with self._lock:
            if self.writer is not None:
                self.writer.close()
                self.get_logger().info(f"wrote {self.writer.count} poses to {self.writer.path}")
                self.writer = None

    def destroy_node(self):
        self.stop_activity()
        super().destroy_node()


main = node_main(PoseRecorderNode)
