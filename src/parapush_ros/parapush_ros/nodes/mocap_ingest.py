"""``mocap_ingest``: mocap rigid-body poses -> the planar ``SceneState`` of the scene, with honest tracking flags.

Subscribes (best effort, so reliable and best-effort drivers both connect):
  ``/<body>/pose`` (natnet_ros2) or ``/vrpn_mocap/<body>/pose`` (vrpn_mocap) or ``pose_topic_template``:
  ``geometry_msgs/PoseStamped`` for the pusher (``pusher_body``) and every scene object (``body_map``).
Publishes:
  ``scene_state`` (``parapush_msgs/SceneState``, reliable) at ``rate`` Hz once every body has been seen, stamped
  with the measurement time (the oldest valid body's), ``tracking_valid`` / ``pusher_tracking_valid`` false for a
  body that is lost (no accepted sample within ``timeout``), off the table, tilted or jumping;
  ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``) per body: state, rate, latency, rejections and why;
  ``~/markers`` (``visualization_msgs/MarkerArray``, table frame) of the tracked bodies for RViz.

The mocap -> table transform and all tracking logic live in ``core.robot.mocap`` (tested without ROS); this node only
moves messages.
"""
from __future__ import annotations

import functools

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from parapush_msgs.msg import ObjectState, SceneState
from rclpy.node import Node
from rclpy.time import Time
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from ..ros import markers, qos, topics
from ..ros.conversions import SHAPES, stamp_seconds
from ..ros.mocap import PUSHER_KEY, mocap_setup
from ..core.robot.mocap import (
    INVALID,
    LOST,
    NEVER_SEEN,
    TRACKING,
    BodyTracker,
    PlanarPose,
    TrackingConfig,
    check_pose,
)
from ..core.config import knobs
from ..core.scene.spec import load_scene
from ..ros.params import MOCAP_INGEST_IO, declare_all
from ..ros.node import declare_config, node_main, period_clock

_LEVELS = {TRACKING: DiagnosticStatus.OK, INVALID: DiagnosticStatus.WARN, LOST: DiagnosticStatus.ERROR,
           NEVER_SEEN: DiagnosticStatus.STALE}


class MocapIngestNode(Node):
    def __init__(self, **kwargs):
        super().__init__("mocap_ingest", **kwargs)
        p = self.p = declare_all(self, MOCAP_INGEST_IO)
        self.scene = load_scene(p["scene"])
        cfg = declare_config(self, TrackingConfig, table_half=tuple(float(h) for h in self.scene.table.half))
        p.update({k: getattr(cfg, k) for k in knobs(TrackingConfig)})  # every parameter's value by name
        self.transform, self.bodies, self.topics = mocap_setup(self, p, self.scene)
        for name in ("rate", "diagnostics_period", "quaternion_tolerance"):
            if not p[name] > 0.0:
                raise ValueError(f"mocap_ingest: invalid parameter {name}: must be > 0, got {p[name]}")
        self.trackers = {k: BodyTracker(k, cfg) for k in self.bodies}
        self._zero_stamps = {k: 0 for k in self.bodies}
        self._rejected_at_report = {k: 0 for k in self.bodies}

        self.state_pub = self.create_publisher(SceneState, topics.SCENE_STATE, qos.RELIABLE)
        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, qos.RELIABLE)
        self.marker_pub = self.create_publisher(MarkerArray, topics.MOCAP_MARKERS, qos.RELIABLE)
        self.subs = [self.create_subscription(PoseStamped, self.topics[k], functools.partial(self._on_pose, k),
                                              qos.SENSOR) for k in self.bodies]
        # the receive times, ages and stamps stay on the ROS clock (a step back loses every body until a sample on
        # the new timeline); the periods run on the steady clock on a robot, so that they go on through the step
        timers = period_clock(self)
        self.create_timer(1.0 / p["rate"], self._publish_state, clock=timers)
        self.create_timer(p["diagnostics_period"], self._publish_diagnostics, clock=timers)
        if p["markers_period"] > 0.0:
            self.create_timer(p["markers_period"], self._publish_markers, clock=timers)
        self._last_estimates = {}
        listing = ", ".join(f"{k} <- {self.topics[k]}" for k in self.bodies)
        self.get_logger().info(f"scene {self.scene.name!r}: {listing}; up axis {p['up_axis']}, table origin "
                               f"{list(p['table_origin_in_mocap'])} in {p['mocap_frame_id'] or 'any frame'}; "
                               f"publishing {topics.SCENE_STATE} at {p['rate']:g} Hz")

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------------------------------ input
    def _on_pose(self, key: str, msg: PoseStamped):
        now = self._now()
        tracker = self.trackers[key]
        pos, ori = msg.pose.position, msg.pose.orientation
        position, quaternion = (pos.x, pos.y, pos.z), (ori.x, ori.y, ori.z, ori.w)
        stamp = stamp_seconds(msg.header.stamp)
        reason = check_pose(position, quaternion, msg.header.frame_id, self.p["mocap_frame_id"],
                            self.p["quaternion_tolerance"], stamp)
        if reason:
            tracker.reject(now, reason)
            self.get_logger().warning(f"{key} ({self.topics[key]}): pose rejected: {reason}",
                                      throttle_duration_sec=1.0)
            return
        if stamp == 0.0:  # a driver without stamps: the receive time is the best measurement time known
            self._zero_stamps[key] += 1
            stamp = now
        p_table, q_table = self.transform.to_table(position, quaternion)
        flag = tracker.update(now, stamp, PlanarPose.from_table_pose(p_table, q_table))
        if flag and not flag.startswith("out-of-order"):
            self.get_logger().warning(f"{key}: pose flagged invalid: {flag}", throttle_duration_sec=1.0)

    # ------------------------------------------------------------------------------------------ outputs
    def _publish_state(self):
        now = self._now()
        if not all(t.seen() for t in self.trackers.values()):
            missing = [f"{k} ({self.topics[k]})" for k, t in self.trackers.items() if not t.seen()]
            self.get_logger().info(f"waiting for mocap bodies: {', '.join(missing)}", throttle_duration_sec=5.0)
            return
        est = {k: t.estimate(now) for k, t in self.trackers.items()}
        self._last_estimates = est
        valid_stamps = [e.stamp for e in est.values() if e.valid]
        stamp = min(valid_stamps) if valid_stamps else max(e.stamp for e in est.values())
        msg = SceneState(header=Header(stamp=Time(seconds=stamp).to_msg(), frame_id=self.p["frame_id"]))
        pe = est[PUSHER_KEY]
        msg.pusher_x, msg.pusher_y, msg.pusher_vx, msg.pusher_vy = pe.x, pe.y, pe.vx, pe.vy
        msg.pusher_tracking_valid = pe.valid
        for spec in self.scene.objects:
            e = est[spec.name]
            msg.objects.append(ObjectState(name=spec.name, shape=SHAPES[spec.shape], x=e.x, y=e.y, yaw=e.yaw,
                                           vx=e.vx, vy=e.vy, omega=e.omega, tracking_valid=e.valid))
        self.state_pub.publish(msg)

    def _publish_diagnostics(self):
        now = self._now()
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        for key, tr in self.trackers.items():
            e = tr.estimate(now)
            s = tr.stats
            new_rejections = s.rejected - self._rejected_at_report[key]
            self._rejected_at_report[key] = s.rejected
            level = _LEVELS[e.state]
            message = e.state if not e.reason else f"{e.state}: {e.reason}"
            if new_rejections:
                message += f"; {new_rejections} sample(s) rejected since the last report: {s.last_rejection}"
                level = max(level, DiagnosticStatus.WARN)
            values = {
                "topic": self.topics[key], "state": e.state, "tracking_valid": str(e.valid),
                "rate_hz": f"{tr.rate(now):.1f}", "received": str(s.received), "accepted": str(s.accepted),
                "rejected": str(s.rejected), "last_rejection": s.last_rejection,
                "latency_ms": "unknown" if s.latency != s.latency else f"{s.latency * 1e3:.1f}",
                "zero_stamps": str(self._zero_stamps[key]),
                "x": f"{e.x:.4f}", "y": f"{e.y:.4f}", "yaw": f"{e.yaw:.4f}",
            }
            arr.status.append(DiagnosticStatus(
                level=level, name=f"mocap_ingest: {key}", hardware_id=self.bodies[key], message=message,
                values=[KeyValue(key=k, value=v) for k, v in values.items()]))
        self.diag_pub.publish(arr)

    def _publish_markers(self):
        """Table, obstacles and goal, and every tracked body at its reported pose: blue when valid, red when not."""
        if not self._last_estimates:
            return
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.p["frame_id"])
        pusher = self.scene.pusher
        bodies = [(PUSHER_KEY, "cylinder", (2 * pusher.radius, 2 * pusher.radius, pusher.height), ())] + \
            [(o.name, o.shape, o.size, o.vertices) for o in self.scene.objects]
        ms = markers.scene_markers(self.scene, header)
        for mid, (key, shape, size, vertices) in enumerate(bodies):
            e = self._last_estimates[key]
            ms.append(markers.body_marker(header, "tracked", mid, shape, size, (e.x, e.y, e.yaw),
                                          (0.2, 0.6, 1.0) if e.valid else (1.0, 0.1, 0.1), 0.9, float(size[2]) / 2.0,
                                          vertices))
        self.marker_pub.publish(MarkerArray(markers=ms))

main = node_main(MocapIngestNode)
