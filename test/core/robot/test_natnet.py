"""NatNet decoding (core.robot.natnet: round trips, hand-assembled packets, malformed input) and the natnet_bridge node
over real UDP sockets and real rclpy entities."""
import random
import re
import socket
import struct
import threading
import time

import pytest

from conftest import Recorder, wait_for
from parapush_ros.core.robot import natnet
from parapush_ros.core.robot.natnet import (
    Frame,
    ModelDefinitions,
    NatNetError,
    RigidBody,
    RigidBodyDescription,
    RigidBodyMarker,
    ServerInfo,
    Version,
)

pytestmark = pytest.mark.timeout(60)
VERSIONS = ["3.0", "3.1", "4.0", "4.1", "4.2"]
BODIES = (RigidBody(1, (0.5, -0.25, 0.75), (0.0, 0.0, 0.6, 0.8), 0.0005, True),
          RigidBody(2, (1.5, 2.0, 0.125), (0.5, 0.5, 0.5, 0.5), 0.001, True),
          RigidBody(3, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), 0.0, False),  # untracked (Motive zeroes it)
          RigidBody(70000, (-3.0, 4.0, 1.0), (0.0, 1.0, 0.0, 0.0), 0.25, True))


def i32(v):
    return struct.pack("<i", v)


def f32(*vs):
    return struct.pack(f"<{len(vs)}f", *vs)


def packet(message_id, payload):
    return struct.pack("<HH", message_id, len(payload)) + payload


def assert_bodies(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert (g.id, g.valid) == (e.id, e.valid)
        assert g.position == pytest.approx(e.position, rel=1e-6, abs=1e-7)
        assert g.quaternion == pytest.approx(e.quaternion, rel=1e-6, abs=1e-7)
        assert g.error == pytest.approx(e.error, rel=1e-6, abs=1e-9)


# ------------------------------------------------------------------------------------------------ (a) round trips
@pytest.mark.parametrize("version", VERSIONS)
def test_frame_round_trip(version):
    pkt = natnet.pack_frame(123456, BODIES, version)
    assert natnet.decode_header(pkt) == (natnet.NAT_FRAMEOFDATA, len(pkt) - 4)
    frame = natnet.decode(pkt, version)
    assert isinstance(frame, Frame) and frame.frame_number == 123456
    assert_bodies(frame.rigid_bodies, BODIES)
    assert [b.valid for b in frame.rigid_bodies] == [True, True, False, True]
    # 4.1 adds a byte count to each of the three sections
    assert len(pkt) == 4 + 4 + 3 * 4 + 38 * len(BODIES) + (12 if version >= "4.1" else 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_modeldef_round_trip(version):
    markers = (RigidBodyMarker((0.01, 0.0, 0.02), 11, "pusher_1"), RigidBodyMarker((-0.01, 0.0, 0.0), 0, "pusher_2"))
    pivot = (0.0, 0.0, 0.6, 0.8)  # a rotated pivot: streamed from NatNet 4.2 on
    descs = (RigidBodyDescription("pusher", 1, -1, (0.0, 0.0, 0.05), markers, pivot),
             RigidBodyDescription("Slider 1", 2))
    defs = natnet.decode(natnet.pack_modeldef(descs, version), version)
    assert isinstance(defs, ModelDefinitions) and not defs.incomplete and defs.skipped == ()
    assert defs.names() == {1: "pusher", 2: "Slider 1"}
    d = defs.rigid_bodies[0]
    assert (d.parent_id, d.offset) == (-1, pytest.approx((0.0, 0.0, 0.05)))
    assert [m.label for m in d.markers] == [11, 0]
    assert d.markers[0].position == pytest.approx((0.01, 0.0, 0.02))
    # marker names exist from NatNet 4.0 on, the orientation offset from 4.2 on
    assert [m.name for m in d.markers] == (["pusher_1", "pusher_2"] if version >= "4.0" else ["", ""])
    assert d.orientation == (pytest.approx(pivot) if version >= "4.2" else (0.0, 0.0, 0.0, 1.0))


def test_server_info_and_requests():
    info = natnet.decode(natnet.pack_server_info("Motive", (3, 1, 2, 0), (4, 1, 0, 0)), "4.1")
    assert info == ServerInfo("Motive", (3, 1, 2, 0), (4, 1, 0, 0))
    assert natnet.request_modeldef_packet() == b"\x04\x00\x00\x00"
    assert natnet.connect_packet() == b"\x00\x00\x00\x00"
    assert natnet.keepalive_packet() == b"\x0a\x00\x00\x00"
    assert natnet.decode(natnet.keepalive_packet(), "4.1") == natnet.OtherMessage(natnet.NAT_KEEPALIVE, 0)


# ------------------------------------------------------------------------------------------------ (b) by hand
def hand_frame_4_1():
    """A NatNet 4.1 frame of data written field by field: two marker sets, one unlabeled marker, two rigid bodies
    (one untracked), then the start of the sections after the rigid bodies (not decoded)."""
    payload = b"".join([
        i32(98765),                                     # frame number
        i32(2), i32(56),                                # marker set count, section bytes: 32 + 24
        b"all\0", i32(2), f32(1, 2, 3), f32(4, 5, 6),   # 4 + 4 + 24 = 32 bytes
        b"Slider1\0", i32(1), f32(7, 8, 9),             # 8 + 4 + 12 = 24 bytes
        i32(1), i32(12), f32(-1, -2, -3),               # unlabeled markers: count 1, 12 bytes
        i32(2), i32(76),                                # rigid bodies: count 2, 2 * 38 bytes
        i32(1), f32(0.5, -0.25, 0.75), f32(0, 0, 0.6, 0.8), f32(0.0005), struct.pack("<h", 0x0005),  # bit 0 set
        i32(2), f32(1, 2, 3), f32(0, 0, 0, 1), f32(0), struct.pack("<h", 0x0004),  # bit 0 clear: untracked
        i32(0), i32(0),                                 # skeletons: count 0, 0 bytes (not decoded)
        i32(0), i32(0),                                 # assets
        i32(0), i32(0), i32(0), i32(0), i32(0), i32(0),  # labeled markers, force plates, devices
        bytes(range(40)),                               # stands in for the frame suffix
    ])
    rigid_bodies_end = 4 + 4 + 8 + 56 + 8 + 12 + 8 + 76
    return packet(7, payload), rigid_bodies_end


def test_hand_assembled_4_1_frame():
    pkt, _ = hand_frame_4_1()
    frame = natnet.decode_frame(pkt, "4.1")
    assert frame.frame_number == 98765
    assert_bodies(frame.rigid_bodies, (RigidBody(1, (0.5, -0.25, 0.75), (0, 0, 0.6, 0.8), 0.0005, True),
                                       RigidBody(2, (1, 2, 3), (0, 0, 0, 1), 0.0, False)))


def test_hand_assembled_3_1_frame():
    payload = b"".join([
        i32(7),                                         # frame number
        i32(1), b"all\0", i32(1), f32(1, 2, 3),         # one marker set with one marker, no byte counts
        i32(2), f32(1, 1, 1), f32(2, 2, 2),             # two unlabeled markers
        i32(1), i32(42), f32(0.25, 0.5, 1.0), f32(0, 0, 0, 1), f32(0.002), struct.pack("<h", 1),
        i32(0),                                         # skeletons (not decoded)
    ])
    frame = natnet.decode_frame(packet(7, payload), "3.1")
    assert frame.frame_number == 7
    assert_bodies(frame.rigid_bodies, (RigidBody(42, (0.25, 0.5, 1.0), (0, 0, 0, 1), 0.002, True),))
    with pytest.raises(NatNetError, match=r"natnet_version 4.1"):  # a 3.x stream read as 4.1
        natnet.decode_frame(packet(7, payload), "4.1")


def test_hand_assembled_modeldefs_skip_other_descriptions():
    rb_3 = b"".join([b"pusher\0", i32(1), i32(-1), f32(0, 0, 0.05), i32(2), f32(0.01, 0, 0), f32(-0.01, 0, 0),
                     i32(0), i32(0)])                   # NatNet 3.x: no marker names
    payload_3 = b"".join([
        i32(4),
        i32(0), b"all\0", i32(2), b"m1\0", b"m2\0",       # marker set: name, 2 marker names
        i32(1), rb_3,
        i32(5), b"Cam 1\0", f32(1, 2, 3), f32(0, 0, 0, 1),  # camera
        i32(2), b"Bob\0", i32(9), i32(1), b"Hip\0", i32(1), i32(-1), f32(0, 0, 0), i32(0),  # skeleton, 1 bone
    ])
    defs = natnet.decode_modeldef(packet(5, payload_3), "3.0")
    assert defs.names() == {1: "pusher"} and defs.skipped == ("marker set", "camera", "skeleton")
    assert defs.rigid_bodies[0].markers[1].position == pytest.approx((-0.01, 0, 0)) and not defs.incomplete

    # before 4.1 an unknown description type cannot be skipped: decoding stops there, keeping what was read
    defs = natnet.decode_modeldef(packet(5, i32(2) + i32(1) + rb_3 + i32(17) + b"????"), "3.1")
    assert defs.names() == {1: "pusher"} and "unknown type 17" in defs.incomplete

    rb_4 = b"".join([b"Slider1\0", i32(2), i32(-1), f32(0, 0, 0), i32(1), f32(0, 0.02, 0), i32(3), b"s1\0"])
    asset = b"Asset\0" + bytes(20)
    payload_41 = b"".join([
        i32(3),
        i32(6), i32(len(asset)), asset,                 # asset: skipped by its byte count
        i32(1), i32(len(rb_4)), rb_4,
        i32(99), i32(3), b"xyz",                        # unknown type: skipped by its byte count too
    ])
    defs = natnet.decode_modeldef(packet(5, payload_41), "4.1")
    assert defs.names() == {2: "Slider1"} and defs.skipped == ("asset", "type 99") and not defs.incomplete
    assert defs.rigid_bodies[0].markers == (RigidBodyMarker(pytest.approx((0, 0.02, 0)), 3, "s1"),)


def test_hand_assembled_4_2_rigid_body_description_and_a_newer_layout_read_as_4_1():
    """NatNet 4.2 adds the pivot's orientation offset (4 floats) after the position offset. Read as 4.2 every field
    comes out; read as 4.1 (natnet_version left lower than the stream) the first float of a rotated pivot would be
    the marker count: the description's byte count bounds it, and its name and id, which come first, are kept."""
    rb_42 = b"".join([b"pusher\0", i32(1), i32(-1), f32(0, 0, 0.05), f32(0.6, 0.0, 0.0, 0.8), i32(1),
                      f32(0.01, 0, 0), i32(7), b"p1\0"])
    payload = i32(2) + i32(1) + i32(len(rb_42)) + rb_42 + i32(5) + i32(len(b"Cam\0") + 28) + b"Cam\0" + bytes(28)
    defs = natnet.decode_modeldef(packet(5, payload), "4.2")
    d = defs.rigid_bodies[0]
    assert defs.names() == {1: "pusher"} and not defs.incomplete and defs.skipped == ("camera",)
    assert d.orientation == pytest.approx((0.6, 0.0, 0.0, 0.8)) and d.offset == pytest.approx((0, 0, 0.05))
    assert d.markers == (RigidBodyMarker(pytest.approx((0.01, 0, 0)), 7, "p1"),)
    defs = natnet.decode_modeldef(packet(5, payload), "4.1")
    assert defs.names() == {1: "pusher"} and defs.skipped == ("camera",)
    assert defs.rigid_bodies[0].markers == ()
    assert "rigid body 1 ('pusher'): only its name and id read" in defs.incomplete


# ------------------------------------------------------------------------------------------------ (c) bad input
def test_every_truncation_raises_natnet_error_with_the_offset():
    pkt, rb_end = hand_frame_4_1()
    payload = pkt[4:]
    for cut in range(rb_end - 4):
        with pytest.raises(NatNetError, match=r"at byte \d+") as e:
            natnet.decode_frame(packet(7, payload[:cut]), "4.1")
        assert 0 <= e.value.offset <= 4 + cut
        with pytest.raises(NatNetError, match="at byte 2"):  # the header promises more than arrived
            natnet.decode_frame(pkt[:4 + cut], "4.1")
    for version in VERSIONS:
        full = natnet.pack_modeldef([RigidBodyDescription("pusher", 1, -1, (0, 0, 0),
                                                          (RigidBodyMarker((0, 0, 0), 1, "a"),))], version)
        for cut in range(4, len(full)):
            with pytest.raises(NatNetError, match=r"at byte \d+"):
                natnet.decode_modeldef(packet(5, full[4:cut]), version)


def test_malformed_packets_name_what_and_where():
    with pytest.raises(NatNetError, match="shorter than the 4-byte header at byte 0"):
        natnet.decode(b"\x07\x00", "4.1")
    with pytest.raises(NatNetError, match=r"message id 5 \(model definitions\) is not 7 .* at byte 0"):
        natnet.decode_frame(natnet.pack_modeldef([], "4.1"), "4.1")
    with pytest.raises(NatNetError, match="negative marker set count -1 at byte 8"):
        natnet.decode_frame(packet(7, i32(1) + i32(-1)), "3.1")
    with pytest.raises(NatNetError, match=r"rigid body count 1000000 needs at least 38000000 bytes.* at byte 16"):
        natnet.decode_frame(packet(7, i32(1) + i32(0) + i32(0) + i32(1000000)), "3.0")
    with pytest.raises(NatNetError, match=r"unterminated marker set 0 name.* at byte 12"):
        natnet.decode_frame(packet(7, i32(1) + i32(1) + b"abcdefgh"), "3.0")
    with pytest.raises(NatNetError, match=r"rigid body section declares 40 bytes but its entries take 38.* at byte 28"):
        natnet.decode_frame(packet(7, i32(1) + i32(0) + i32(0) + i32(0) + i32(0) + i32(1) + i32(40) + bytes(40)),
                            "4.1")
    with pytest.raises(NatNetError, match="marker set byte count 999 does not fit"):
        natnet.decode_frame(packet(7, i32(1) + i32(0) + i32(999)), "4.1")
    with pytest.raises(NatNetError, match="truncated server name and versions"):
        natnet.decode(packet(1, b"Motive\0"), "4.1")


def test_random_garbage_only_ever_raises_natnet_error():
    rng = random.Random(1)
    for k in range(3000):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 120)))
        if k % 3 == 0:
            body = struct.pack("<HH", rng.choice([1, 5, 7]), len(body)) + body  # plausible header
        elif k % 3 == 1 and len(body) >= 4:
            body = struct.pack("<HH", rng.choice([1, 5, 7]), rng.randrange(0, 200)) + body[4:]
        for version in ("3.0", "4.0", "4.1"):
            try:
                natnet.decode(body, version)
            except NatNetError as e:
                assert "at byte" in str(e)


def test_versions_names_and_topics():
    assert Version.parse("4.1") == Version(4, 1) == Version.parse("4.1.0.0") == Version.parse((4, 1, 0, 0))
    assert Version.parse("4.1").section_sizes and not Version.parse("4.0").section_sizes
    for bad in ("2.10", "5.0", "4", "four", ""):
        with pytest.raises(ValueError, match="NatNet version"):
            Version.parse(bad)
    assert natnet.parse_body_names(" 1=pusher, 2=Slider1 3=Box ") == {1: "pusher", 2: "Slider1", 3: "Box"}
    assert natnet.parse_body_names("") == {}
    for bad, msg in (("1", "id=name"), ("x=pusher", "not an integer"), ("1=a,1=b", "named twice"),
                     ("1=a,2=a", "more than one id"), ("1=", "id=name")):
        with pytest.raises(ValueError, match=msg):
            natnet.parse_body_names(bad)
    assert natnet.topic_safe_name("Rigid Body 1") == "Rigid_Body_1"
    assert natnet.topic_safe_name("pusher") == "pusher"


# ------------------------------------------------------------------------------------------------ (d) the node
def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stamp(msg) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def _diag_value(diags, key):
    arr = diags.last()
    for status in arr.status if arr is not None else ():
        if status.name == "natnet_bridge: stream":
            return {kv.key: kv.value for kv in status.values}.get(key)
    return None


def test_bridge_publishes_tracked_bodies_and_survives_garbage(ros_context, ros_executor):
    rclpy = pytest.importorskip("rclpy")
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from rclpy.parameter import Parameter
    from parapush_ros.ros.qos import RELIABLE, SENSOR

    from parapush_ros.nodes.natnet_bridge import NatNetBridgeNode

    prefix, port = "/natnet_test_a", free_udp_port()
    node = ros_executor.add(NatNetBridgeNode(parameter_overrides=[
        Parameter("multicast_address", value=""), Parameter("local_address", value="127.0.0.1"),
        Parameter("data_port", value=port), Parameter("natnet_version", value="4.1"),
        Parameter("frame_id", value="mocap"), Parameter("topic_template", value=prefix + "/{body}/pose"),
        Parameter("body_names", value="1=pusher,2=Slider1,3=Hidden,70000=Far")]))
    assert node.data_port == port
    io = ros_executor.add(rclpy.create_node("natnet_test_io_a", context=ros_context))
    rec = {name: Recorder() for name in ("pusher", "Slider1", "Hidden", "Far")}
    for name, r in rec.items():  # best effort, as mocap_ingest subscribes
        io.create_subscription(PoseStamped, f"{prefix}/{name}/pose", r, SENSOR)
    diags = Recorder()
    io.create_subscription(DiagnosticArray, "/diagnostics", diags, RELIABLE)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    frame_number = [0]

    def send(bodies):
        frame_number[0] += 1
        tx.sendto(natnet.pack_frame(frame_number[0], bodies, "4.1"), ("127.0.0.1", port))

    try:
        t0 = time.time()
        # the bridge creates a body's publisher on its first pose: resend until discovery has matched them
        wait_for(lambda: send(BODIES) or all(rec[n].last() for n in ("pusher", "Slider1", "Far")), timeout=10.0,
                 interval=0.02, what="poses of the tracked bodies")
        m = rec["pusher"].last()
        assert m.header.frame_id == "mocap"
        assert t0 - 0.01 <= _stamp(m) <= time.time() + 0.01  # the receive time of the packet
        p, q = m.pose.position, m.pose.orientation
        assert (p.x, p.y, p.z) == pytest.approx((0.5, -0.25, 0.75), rel=1e-6)
        assert (q.x, q.y, q.z, q.w) == pytest.approx((0.0, 0.0, 0.6, 0.8), rel=1e-6)
        f = rec["Far"].last().pose.position
        assert (f.x, f.y, f.z) == pytest.approx((-3.0, 4.0, 1.0))
        # the untracked body is never published, not even a publisher for it exists
        assert rec["Hidden"].last() is None and io.count_publishers(f"{prefix}/Hidden/pose") == 0

        # garbage, a truncated frame and a frame of another version do not stop the bridge
        tx.sendto(b"\x07\x00\x10\x00" + b"\xff" * 16, ("127.0.0.1", port))
        tx.sendto(b"junk", ("127.0.0.1", port))
        tx.sendto(natnet.pack_frame(99, BODIES, "4.1")[:50], ("127.0.0.1", port))
        moved = (RigidBody(1, (0.125, 0.25, 0.5), (0.0, 0.0, 0.0, 1.0), 0.0, True),)
        wait_for(lambda: send(moved) or rec["pusher"].last().pose.position.x == 0.125, timeout=5.0, interval=0.02,
                 what="the pose sent after the garbage")
        assert rec["Hidden"].last() is None
        # tracked by Motive's flag but not a pose (NaN, a zero quaternion): not published, counted
        n_pusher = rec["pusher"].count()
        nan = (RigidBody(1, (0.1, 0.2, 0.3), (float("nan"), 0.0, 0.0, 1.0), 0.0, True),
               RigidBody(2, (0.1, 0.2, 0.3), (0.0, 0.0, 0.0, 0.0), 0.0, True))
        wait_for(lambda: send(nan) or int(_diag_value(diags, "bad_poses") or 0) >= 2, timeout=5.0, interval=0.02,
                 what="diagnostics counting the bad poses")
        assert rec["pusher"].first_since(n_pusher, lambda m: m.pose.position.x != 0.125) is None
        errors = wait_for(lambda: int(_diag_value(diags, "parse_errors") or 0) >= 3 and diags.last(), timeout=5.0,
                          what="diagnostics counting the parse errors")
        assert errors.status[0].hardware_id == "natnet"
        assert "at byte" in _diag_value(diags, "last_parse_error")
        assert "pusher" in _diag_value(diags, "bodies") and "Hidden" not in _diag_value(diags, "bodies")
    finally:
        tx.close()


def test_bridge_never_puts_two_bodies_on_one_topic(ros_context, ros_executor):
    """'Rigid-Body' and 'Rigid_Body' (or Motive's 'Rigid Body') make one topic token: the first body seen keeps the
    topic, the other is dropped (said once), instead of two bodies' poses interleaving on one topic."""
    rclpy = pytest.importorskip("rclpy")
    from geometry_msgs.msg import PoseStamped
    from rclpy.parameter import Parameter
    from parapush_ros.ros.qos import SENSOR

    from parapush_ros.nodes.natnet_bridge import NatNetBridgeNode

    prefix, port = "/natnet_test_c", free_udp_port()
    node = ros_executor.add(NatNetBridgeNode(parameter_overrides=[
        Parameter("multicast_address", value=""), Parameter("local_address", value="127.0.0.1"),
        Parameter("data_port", value=port), Parameter("natnet_version", value="4.1"),
        Parameter("topic_template", value=prefix + "/{body}/pose"),
        Parameter("body_names", value="1=Rigid-Body,2=Rigid_Body")]))
    io = ros_executor.add(rclpy.create_node("natnet_test_io_c", context=ros_context))
    rec = Recorder()
    io.create_subscription(PoseStamped, f"{prefix}/Rigid_Body/pose", rec, SENSOR)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bodies = (RigidBody(1, (0.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.0, True),
              RigidBody(2, (-0.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), 0.0, True))
    try:
        n = [0]

        def send():
            n[0] += 1
            tx.sendto(natnet.pack_frame(n[0], bodies, "4.1"), ("127.0.0.1", port))

        wait_for(lambda: send() or rec.count() >= 5, timeout=10.0, interval=0.02, what="poses on the shared topic")
        assert all(m.pose.position.x == 0.5 for m in rec.msgs)  # body 1's only
        assert node._clashes == {(f"{prefix}/Rigid_Body/pose", 2)}
    finally:
        tx.close()


def test_bridge_names_bodies_from_requested_model_definitions(ros_context, ros_executor):
    rclpy = pytest.importorskip("rclpy")
    from geometry_msgs.msg import PoseStamped
    from rclpy.parameter import Parameter
    from parapush_ros.ros.qos import SENSOR

    from parapush_ros.nodes.natnet_bridge import NatNetBridgeNode

    # a stand-in for Motive's command port: answers connect with server info, model requests with definitions
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.05)
    requests, stop = [], threading.Event()
    modeldef = [natnet.pack_modeldef([RigidBodyDescription("Box 5", 5), RigidBodyDescription("pusher", 6)], "3.1")]

    def serve():
        while not stop.is_set():
            try:
                data, sender = server.recvfrom(2048)
            except (TimeoutError, OSError):
                continue
            requests.append(data)
            if data[:2] == b"\x00\x00":
                server.sendto(natnet.pack_server_info("Motive", (2, 3, 0, 0), (3, 1, 0, 0)), sender)
            elif data[:2] == b"\x04\x00":
                server.sendto(modeldef[0], sender)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    prefix, port = "/natnet_test_b", free_udp_port()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ros_executor.add(NatNetBridgeNode(parameter_overrides=[
            Parameter("server_address", value="127.0.0.1"), Parameter("command_port", value=server.getsockname()[1]),
            Parameter("multicast_address", value=""), Parameter("local_address", value="127.0.0.1"),
            Parameter("data_port", value=port), Parameter("natnet_version", value="3.1"),
            Parameter("topic_template", value=prefix + "/{body}/pose"), Parameter("qos", value="best_effort"),
            Parameter("model_refresh_period", value=0.5)]))
        io = ros_executor.add(rclpy.create_node("natnet_test_io_b", context=ros_context))
        rec = {name: Recorder() for name in ("Box_5", "pusher", "body_9", "crate")}
        for name, r in rec.items():
            io.create_subscription(PoseStamped, f"{prefix}/{name}/pose", r, SENSOR)
        bodies = (RigidBody(5, (1.0, 0.0, 0.0)), RigidBody(6, (0.0, 1.0, 0.0)), RigidBody(9, (0.0, 0.0, 1.0)))
        wait_for(lambda: tx.sendto(natnet.pack_frame(1, bodies, "3.1"), ("127.0.0.1", port)) and
                 all(rec[n].last() for n in ("Box_5", "pusher", "body_9")), timeout=10.0, interval=0.02,
                 what="poses named by Motive")
        assert not rec["crate"].msgs
        assert rec["Box_5"].last().pose.position.x == 1.0 and rec["body_9"].last().pose.position.z == 1.0
        assert rec["pusher"].last().header.frame_id == "world"
        # requests are bare headers; unicast: connect first, then keep-alives once a second
        wait_for(lambda: b"\x0a\x00\x00\x00" in requests, timeout=3.0, what="a keep-alive")
        assert requests[0] == natnet.connect_packet() and natnet.request_modeldef_packet() in requests
        # renamed in Motive under the same id: the refreshed model definitions move its poses to the new topic
        modeldef[0] = natnet.pack_modeldef([RigidBodyDescription("crate", 5), RigidBodyDescription("pusher", 6)],
                                           "3.1")
        def send_until_crate(n):
            wait_for(lambda: tx.sendto(natnet.pack_frame(2, bodies, "3.1"), ("127.0.0.1", port)) and
                     rec["crate"].count() >= n, timeout=10.0, interval=0.02, what="the renamed body's poses")
        send_until_crate(5)
        old_count = rec["Box_5"].count()  # (poses sent before the rename may still have been in flight)
        send_until_crate(40)  # 35 frames more (0.7 s at 20 ms): no pose of the old name is still on its way
        assert rec["Box_5"].count() == old_count  # the old name's topic gets no more poses
        assert rec["crate"].last().pose.position.x == 1.0
    finally:
        stop.set()
        thread.join(timeout=2.0)
        server.close()
        tx.close()


def test_bridge_rejects_bad_parameters(ros_context):
    pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter

    from parapush_ros.nodes.natnet_bridge import NatNetBridgeNode

    for name, value, match in (("natnet_version", "2.5", "NatNet version 2.5 is not supported"),
                               ("multicast_address", "10.0.0.1", "not a multicast address"),
                               ("body_names", "pusher", "entry 'pusher' is not of the form id=name"),
                               ("topic_template", "/pose", "{body}"), ("qos", "fast", "one of reliable"),
                               ("server_address", "motive.local", "not an IPv4 address"),
                               ("data_port", 70000, "must be a UDP port"),
                               ("model_refresh_period", -1.0, "a period >= 0 s")):
        with pytest.raises(ValueError, match=f"^parameter {name}: .*{re.escape(match)}"):
            NatNetBridgeNode(parameter_overrides=[Parameter(name, value=value)])
