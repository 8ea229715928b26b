"""``natnet_bridge``: OptiTrack Motive's NatNet stream -> one ``geometry_msgs/PoseStamped`` per rigid body, for
robots without a mocap ROS driver. It publishes on natnet_ros2's topics and conventions, so mocap_ingest takes it
unchanged; unlike a driver that publishes every body of every frame, it leaves untracked bodies out (below).

Receives (UDP, on a background thread that polls with a 0.1 s timeout so shutdown is prompt):
  frames of data on ``data_port``, from the multicast group ``multicast_address`` joined on ``local_address``, or
  unicast when ``multicast_address`` is empty; and, when ``server_address`` is set, the server's replies on a
  command socket of its own: NAT_SERVERINFO (its NatNet version, checked against ``natnet_version``) and NAT_MODELDEF
  (rigid-body names). Both are requested from ``server_address:command_port`` at start, the model definitions
  again while unnamed bodies stream and every ``model_refresh_period`` (a body renamed in Motive moves to its new
  name's topic, with a warning that says so; its old topic gets no more poses, so mocap_ingest sees it lost); in
  unicast mode the bridge also connects and sends keep-alives once a second.
  Model definitions arriving on the data port are used too.
Publishes:
  ``topic_template`` (``/<name>/pose``) per rigid body whose tracking-valid flag is set: frame ``frame_id``,
  position in metres and quaternion (x, y, z, w) exactly as Motive streams them (set Motive's up axis, or
  mocap_ingest's ``up_axis``), stamped with the receive time of the packet. NatNet 3 and 4 stream no latency
  field (a latency would need the frame suffix's camera timestamps and the server's clock frequency, which this
  bridge does not decode), so the receive time is the best measurement time known. Untracked bodies are not
  published, so mocap_ingest's ``timeout`` sees them as lost; nor are tracked ones whose pose is not one (a
  non-finite value, a quaternion not of unit length: counted as ``bad_poses``). Names come from ``body_names``,
  else the model definitions; a body with neither is published as ``body_<id>`` with a warning. Characters other
  than letters, digits and '_' in a name become '_' in its topic; two bodies whose names make one topic are not
  mixed on it: the first seen keeps it, the other is dropped with an error.
  ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``) once a second: packet rate, parse errors, bodies.
Unparsable packets are counted, logged (throttled) and dropped; they never stop the bridge. The decoding lives in
``core.robot.natnet`` (tested without ROS); this node only moves packets and messages.
"""
from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from dataclasses import asdict

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from ..ros import qos, topics
from ..core.robot.natnet import (
    BridgeConfig,
    Frame,
    ModelDefinitions,
    NatNetError,
    ServerInfo,
    connect_packet,
    decode,
    disconnect_packet,
    keepalive_packet,
    request_modeldef_packet,
    topic_safe_name,
)
from ..core.robot.mocap import check_pose
from ..ros.params import MOCAP_INGEST_IO, NATNET_BRIDGE_IO, declare_all
from ..ros.node import declare_config, node_main

UNIT_QUATERNION_TOLERANCE = MOCAP_INGEST_IO["quaternion_tolerance"].default  # as mocap_ingest's default
POLL_PERIOD = 0.1  # s: the receive thread checks for shutdown (and pending requests) this often
RECV_BUFFER = 65536  # bytes: larger than any UDP datagram
SOCKET_RCVBUF = 1 << 20  # bytes of kernel buffer asked for (model definitions can be large)
DIAGNOSTICS_PERIOD = 1.0  # s
NO_DATA_WARNING = 1.0  # s without packets before the bridge warns
REQUEST_PERIOD = 1.0  # s between requests to the server (connect / keep-alive / model definitions)
MODELDEF_WAIT = 2.0  # s after start during which unnamed bodies wait for the requested model definitions
MODELDEF_RETRY = 5.0  # s between repeated model definition requests once some were received (unnamed bodies)


class NatNetBridgeNode(Node):
    def __init__(self, **kwargs):
        super().__init__("natnet_bridge", **kwargs)
        p = self.p = declare_all(self, NATNET_BRIDGE_IO)
        cfg = self.config = declare_config(self, BridgeConfig)
        p.update(asdict(cfg))  # every parameter's value by name
        self.version, self.body_names = cfg.version, cfg.names
        self.server, self.local, self.group = cfg.server_address, cfg.local_address, cfg.multicast_address
        self.pose_qos = qos.POSE[cfg.qos]

        self._lock = threading.Lock()  # the state below is shared by the receive thread and the diagnostics timer
        self._model_names = {}  # id -> name from the model definitions
        self._modeldef_received = False
        self._want_modeldef = bool(self.server)
        self._modeldef_requested = -MODELDEF_RETRY  # time.monotonic() of the last request
        self._server_info = None
        self._pubs = {}  # topic -> publisher (None: the topic is invalid)
        self._topic_owner = {}  # topic -> the rigid body id it carries (one body per topic; new names: anew)
        self._clashes = set()  # (topic, id) of bodies dropped for a topic another body carries (logged once)
        self._published = {}  # body name -> poses published
        self._unnamed = set()  # ids published as body_<id>
        self._renamed = set()  # names changed to make topics
        self._packets = self._frames = self._parse_errors = self._untracked = self._missed_frames = 0
        self._bad_poses = 0  # tracked bodies whose pose is non-finite or not a unit quaternion: not published
        self._bodies_in_frames = 0  # rigid bodies (tracked or not) in all frames
        self._last_error = ""
        self._last_frame_number = None
        self._last_packet = None  # time.monotonic() of the last packet
        self._t_start = time.monotonic()
        # at the last diagnostics report: (time, packets, parse errors, frames, rigid bodies in frames)
        self._report = (self._t_start, 0, 0, 0, 0)

        self._data_sock = self._cmd_sock = None
        try:
            self._data_sock = self._open_data_socket()
            if self.server:
                self._cmd_sock = self._open_socket((self.local, 0), "the command socket", reuse=False)
        except ValueError:
            self._close_sockets()
            raise
        self.data_port = self._data_sock.getsockname()[1]

        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, qos.RELIABLE)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(DIAGNOSTICS_PERIOD, self._publish_diagnostics, clock=steady)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive_loop, name="natnet-receive", daemon=True)
        self._thread.start()

        names = ", ".join(f"{i}={n}" for i, n in sorted(self.body_names.items())) or (
            "from the model definitions" if self.server else "none (set body_names or server_address)")
        self.get_logger().info(f"NatNet {self.version} {self._where()}; server {self.server or 'not set'}; body names "
                               f"{names}; publishing {p['topic_template']} in {p['frame_id']!r} ({p['qos']})")
        if not self.group and not self.server:
            self.get_logger().info("unicast without server_address: the bridge cannot connect to Motive, so it hears "
                                   "only a sender that already streams to this address and port")

    # ------------------------------------------------------------------------------------------ sockets
    def _where(self) -> str:
        if self.group:
            return f"multicast {self.group}:{self.data_port} on interface {self.local}"
        return f"unicast on {self.local}:{self.data_port}"

    def _open_socket(self, address: tuple, what: str, reuse: bool, group: str = "") -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        try:
            if reuse:  # other NatNet clients on this machine may listen to the same group and port
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with contextlib.suppress(OSError):  # the kernel's default buffer still works
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_RCVBUF)
            sock.bind(address)
            if group:
                membership = socket.inet_aton(group) + socket.inet_aton(self.local)
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        except OSError as e:
            sock.close()
            raise ValueError(f"natnet_bridge: cannot open {what} ({address[0] or '0.0.0.0'}:{address[1]}"
                             f"{', group ' + group if group else ''}): {e}") from None
        return sock

    def _open_data_socket(self) -> socket.socket:
        if self.group:
            return self._open_socket(("", self.p["data_port"]), "the multicast data socket", True, self.group)
        return self._open_socket((self.local, self.p["data_port"]), "the unicast data socket", reuse=False)

    def _close_sockets(self):
        for sock in (self._data_sock, self._cmd_sock):
            if sock is not None:
                sock.close()

    def _send(self, packet: bytes, what: str):
        try:
            self._cmd_sock.sendto(packet, (self.server, self.p["command_port"]))
        except OSError as e:
            self.get_logger().warning(f"cannot send {what} to {self.server}:{self.p['command_port']}: {e}",
                                      throttle_duration_sec=5.0)

    def _send_requests(self):
        """Connect (unicast) / ask for the server info, keep a unicast stream alive, ask for model definitions."""
        if self._server_info is None:
            self._send(connect_packet(), "the connect request")
        elif not self.group:
            self._send(keepalive_packet(), "a keep-alive")
        since = time.monotonic() - self._modeldef_requested
        refresh = self.config.model_refresh_period
        unnamed = self._want_modeldef and since >= (MODELDEF_RETRY if self._modeldef_received else 0.0)
        if unnamed or (self._modeldef_received and 0.0 < refresh <= since):
            self._modeldef_requested = time.monotonic()
            self._send(request_modeldef_packet(), "the model definition request")

    # ------------------------------------------------------------------------------------------ receiving
    def _receive_loop(self):
        socks = [s for s in (self._data_sock, self._cmd_sock) if s is not None]
        next_request = 0.0
        while not self._stop.is_set():
            if self._cmd_sock is not None and time.monotonic() >= next_request:
                self._send_requests()
                next_request = time.monotonic() + REQUEST_PERIOD
            try:
                ready, _, _ = select.select(socks, [], [], POLL_PERIOD)
            except (OSError, ValueError):  # a socket was closed: shutting down
                return
            for sock in ready:
                try:
                    packet, _ = sock.recvfrom(RECV_BUFFER)
                except OSError as e:
                    if self._stop.is_set():
                        return
                    self.get_logger().warning(f"receive failed: {e}", throttle_duration_sec=5.0)
                    continue
                self._handle(packet, self.get_clock().now().to_msg())

    def _handle(self, packet: bytes, stamp):
        with self._lock:
            self._packets += 1
            self._last_packet = time.monotonic()
        try:
            msg = decode(packet, self.version)
        except NatNetError as e:
            with self._lock:
                self._parse_errors += 1
                self._last_error = str(e)
            self.get_logger().warning(f"dropped an unparsable NatNet packet ({len(packet)} bytes): {e}",
                                      throttle_duration_sec=1.0)
            return
        try:
            if isinstance(msg, Frame):
                self._on_frame(msg, stamp)
            elif isinstance(msg, ModelDefinitions):
                self._on_modeldef(msg)
            elif isinstance(msg, ServerInfo):
                self._on_server_info(msg)
        except Exception as e:  # noqa: BLE001 - one bad packet must not end the stream
            self.get_logger().error(f"error handling a NatNet packet: {e!r}", throttle_duration_sec=1.0)

    def _on_frame(self, frame: Frame, stamp):
        with self._lock:
            self._frames += 1
            self._bodies_in_frames += len(frame.rigid_bodies)
            last = self._last_frame_number
            if last is not None and frame.frame_number > last + 1:
                self._missed_frames += frame.frame_number - last - 1
            self._last_frame_number = frame.frame_number
        for body in frame.rigid_bodies:
            if not body.valid:
                with self._lock:
                    self._untracked += 1
                continue
            # mocap_ingest rejects these too; RViz, TF or a recorder reading the topic would take them as poses
            bad = check_pose(body.position, body.quaternion, "", "", UNIT_QUATERNION_TOLERANCE)
            if bad:
                with self._lock:
                    self._bad_poses += 1
                self.get_logger().warning(f"rigid body id {body.id}: not published: {bad}", throttle_duration_sec=1.0)
                continue
            name = self._name(body.id)
            pub = self._publisher(name, body.id) if name is not None else None
            if pub is None:
                continue
            msg = PoseStamped()
            msg.header.stamp, msg.header.frame_id = stamp, self.p["frame_id"]
            pos, ori = msg.pose.position, msg.pose.orientation
            pos.x, pos.y, pos.z = (float(v) for v in body.position)
            ori.x, ori.y, ori.z, ori.w = (float(v) for v in body.quaternion)
            pub.publish(msg)
            with self._lock:
                self._published[name] = self._published.get(name, 0) + 1

    def _name(self, rid: int) -> str | None:
        """The name of rigid body ``rid``; None while requested model definitions may still bring it."""
        name = self.body_names.get(rid) or self._model_names.get(rid)
        if name:
            return name
        if self.server:
            self._want_modeldef = True  # ask (again): the body may be new in Motive
            if not self._modeldef_received and time.monotonic() - self._t_start < MODELDEF_WAIT:
                return None
        name = f"body_{rid}"
        if rid not in self._unnamed:
            with self._lock:
                self._unnamed.add(rid)
            source = ("the model definitions do not list it" if self._modeldef_received else
                      "no model definitions were received" if self.server else "server_address is not set")
            self.get_logger().warning(
                f"rigid body id {rid} has no name ({source}): publishing it as {name}; set body_names (e.g. "
                f"'{rid}=pusher') or server_address so that the model definitions are requested")
        return name

    def _publisher(self, name: str, rid: int):
        """The publisher of body ``rid`` named ``name``; None where its topic is invalid or already carries another
        body (two names that make one topic, e.g. 'Rigid Body 1' and 'Rigid_Body_1': the second is dropped)."""
        topic = self.p["topic_template"].replace("{body}", topic_safe_name(name))
        owner = self._topic_owner.setdefault(topic, rid)
        if owner != rid:
            if (topic, rid) not in self._clashes:
                self._clashes.add((topic, rid))
                self.get_logger().error(
                    f"rigid body id {rid} ({name!r}) would be published on {topic}, which carries rigid body id "
                    f"{owner}: it is dropped; give the bodies names that make different topics (in Motive or "
                    f"body_names)")
            return None
        if topic in self._pubs:
            return self._pubs[topic]
        if topic_safe_name(name) != name and name not in self._renamed:
            self._renamed.add(name)
            self.get_logger().info(f"rigid body {name!r} is published on {topic} (a topic cannot hold its name)")
        try:
            pub = self.create_publisher(PoseStamped, topic, self.pose_qos)
        except Exception as e:  # noqa: BLE001 - rclpy raises several types for invalid names
            self.get_logger().error(f"rigid body {name!r}: cannot publish on {topic!r}: {e}; it is dropped")
            pub = None
        self._pubs[topic] = pub
        return pub

    def _on_modeldef(self, defs: ModelDefinitions):
        names = defs.names()
        with self._lock:
            old, first = self._model_names, not self._modeldef_received
            if defs.incomplete:  # bodies not read this time keep the names they had
                names = {**{i: n for i, n in old.items() if i not in names}, **names}
            if names != old:
                self._model_names = names
                self._topic_owner.clear()  # a body renamed in Motive may leave its topic to another
            self._modeldef_received = True
            self._want_modeldef = False
            self._unnamed -= set(names)  # body_<id> topics of these ids get no more poses
        if first:
            listing = ", ".join(f"{i}={n}" for i, n in sorted(names.items())) or "none"
            self.get_logger().info(f"model definitions: rigid bodies {listing}"
                                   + (f"; also {len(defs.skipped)} other description(s)" if defs.skipped else ""))
        elif names != old:
            self.get_logger().warning(f"model definitions changed in Motive: {self._changes(old, names)}")
        if defs.incomplete:
            self.get_logger().warning(f"model definitions only partly read: {defs.incomplete}",
                                      throttle_duration_sec=60.0)

    def _changes(self, old: dict, new: dict) -> str:
        """What changed between two id -> name maps, with the topics the poses move to (``body_names`` wins)."""
        def topic(name):
            return self.p["topic_template"].replace("{body}", topic_safe_name(name))

        def fixed(rid):
            return f" (body_names keeps it {self.body_names[rid]!r})" if rid in self.body_names else ""
        out = [f"rigid body id {i} renamed {old[i]!r} -> {new[i]!r}{fixed(i)}" + (
               "" if i in self.body_names else f": its poses move from {topic(old[i])} to {topic(new[i])}")
               for i in sorted(set(old) & set(new)) if old[i] != new[i]]
        out += [f"rigid body id {i} {old[i]!r} removed{fixed(i)}" for i in sorted(set(old) - set(new))]
        out += [f"rigid body id {i} {new[i]!r} added{fixed(i)}" for i in sorted(set(new) - set(old))]
        return "; ".join(out)

    def _on_server_info(self, info: ServerInfo):
        first = self._server_info is None
        self._server_info = info
        reported = tuple(info.natnet_version[:2])
        if first:
            self.get_logger().info(f"server: {info.app_name} {'.'.join(map(str, info.app_version))}, NatNet "
                                   f"{'.'.join(map(str, info.natnet_version))}")
        if reported != (self.version.major, self.version.minor):
            self.get_logger().warning(
                f"the server reports NatNet {reported[0]}.{reported[1]} but natnet_version is {self.version}: frames "
                f"will not decode unless the server streams bitstream {self.version}; set natnet_version to the "
                f"server's version", throttle_duration_sec=30.0)

    # ------------------------------------------------------------------------------------------ diagnostics
    def _publish_diagnostics(self):
        now = time.monotonic()
        with self._lock:
            t_prev, packets_prev, errors_prev, frames_prev, bodies_prev = self._report
            packets, errors, frames, bodies = self._packets, self._parse_errors, self._frames, self._bodies_in_frames
            self._report = (now, packets, errors, frames, bodies)
            silent = now - (self._last_packet if self._last_packet is not None else self._t_start)
            published = dict(self._published)
            unnamed = sorted(self._unnamed)
            values = {"mode": self._where(), "natnet_version": str(self.version),
                      "server_natnet_version": ".".join(map(str, self._server_info.natnet_version))
                      if self._server_info else "unknown",
                      "packets": str(packets), "frames": str(frames),
                      "missed_frames": str(self._missed_frames), "parse_errors": str(errors),
                      "last_parse_error": self._last_error, "untracked_samples": str(self._untracked),
                      "bad_poses": str(self._bad_poses),
                      "model_definitions": "received" if self._modeldef_received else
                      ("requested" if self.server else "not requested (no server_address)"),
                      "unnamed_ids": ", ".join(map(str, unnamed))}
        rate = (packets - packets_prev) / max(now - t_prev, 1e-9)
        new_errors = errors - errors_prev
        values["packet_rate_hz"] = f"{rate:.1f}"
        values["seconds_since_last_packet"] = f"{silent:.2f}" if self._last_packet is not None else "never"
        values["bodies"] = ", ".join(f"{n} ({c})" for n, c in sorted(published.items()))
        if silent > NO_DATA_WARNING:
            level, message = DiagnosticStatus.ERROR, f"no NatNet packets for {silent:.1f} s"
            self.get_logger().warning(f"{message} ({self._where()}): {self._no_data_hint()}",
                                      throttle_duration_sec=5.0)
        elif new_errors:
            level = DiagnosticStatus.WARN
            message = f"{new_errors} unparsable packet(s) since the last report: {values['last_parse_error']}"
        elif frames > frames_prev and bodies == bodies_prev:
            level = DiagnosticStatus.WARN
            message = (f"frames arrive but hold no rigid bodies: is rigid-body streaming on in Motive, and is "
                       f"natnet_version ({self.version}) the server's?")
            self.get_logger().warning(message, throttle_duration_sec=10.0)
        elif unnamed:
            level, message = DiagnosticStatus.WARN, f"rigid bodies without a name: {values['unnamed_ids']}"
        else:
            level, message = DiagnosticStatus.OK, f"streaming {rate:.0f} packets/s"
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status.append(DiagnosticStatus(level=level, name="natnet_bridge: stream", message=message,
                                           hardware_id=self.server or self.group or "natnet",
                                           values=[KeyValue(key=k, value=v) for k, v in values.items()]))
        self.diag_pub.publish(arr)

    def _no_data_hint(self) -> str:
        port = self.data_port
        if self.group:
            return (f"check that Motive streams (Broadcast Frame Data on) with transmission type Multicast to "
                    f"{self.group} and data port {port}, that local_address is this computer's address on the "
                    f"Motive network, and that the firewall lets UDP port {port} in")
        server = self.server or "not set, and Motive streams unicast only to clients that connect"
        return (f"check that Motive streams (Broadcast Frame Data on) with transmission type Unicast, that "
                f"server_address is the Motive PC (now: {server}), and that the firewall lets UDP port {port} in")

    def destroy_node(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        if self._cmd_sock is not None and not self.group:
            self._send(disconnect_packet(), "the disconnect")
        self._close_sockets()
        super().destroy_node()


main = node_main(NatNetBridgeNode)
