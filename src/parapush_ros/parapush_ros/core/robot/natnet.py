"""NatNet (OptiTrack Motive streaming) packets, ROS-free: what a rigid-body bridge needs and no more.

Decodes the frame of data up to and including the rigid bodies, the model definitions (rigid-body names), the
server info, and encodes the same subset (``pack_frame``, ``pack_modeldef``, ``pack_server_info``) so tests can
synthesise packets. Written from the NatNet protocol as the NatNet SDK documents it (PacketClient sample, SDK
headers, and the SDK's current sample client); versions 3.0, 3.1, 4.0, 4.1 and 4.2 (Motive 2.0 streams 3.0, Motive
2.1-2.3 3.1, Motive 3.0 4.0, Motive 3.1 4.1, newer Motive releases 4.2 and later; later 4.x minor versions are read
like 4.2). Every malformed or truncated packet raises ``NatNetError`` (a ``ValueError``) that says what was
being read and at which byte offset from the start of the packet; nothing else escapes the decoders.

Byte layout (all little-endian; ``i32``/``i16`` signed, ``u16`` unsigned, ``f32`` IEEE float, ``str`` a
NUL-terminated UTF-8 string; ``[4.1]`` marks a field present from NatNet 4.1 on)::

  packet        u16 message id, u16 payload byte count, payload
                NAT_CONNECT 0, NAT_SERVERINFO 1, NAT_REQUEST_MODELDEF 4, NAT_MODELDEF 5, NAT_FRAMEOFDATA 7,
                NAT_DISCONNECT 9, NAT_KEEPALIVE 10; requests (connect, request modeldef, keep-alive, disconnect)
                are the header alone (count 0),
                sent to the server's command port (1510)

  frame of data (NAT_FRAMEOFDATA payload), decoded up to the rigid bodies; what follows is not read
                i32 frame number
                i32 marker set count, [4.1] i32 section bytes, then per marker set:
                    str name, i32 marker count, marker count * (f32 x, y, z)
                i32 legacy unlabeled marker count, [4.1] i32 section bytes, then count * (f32 x, y, z)
                i32 rigid body count, [4.1] i32 section bytes, then per rigid body (38 bytes):
                    i32 id, f32 x, y, z (position, m), f32 qx, qy, qz, qw, f32 mean marker error (m),
                    i16 params (bit 0: tracking valid in this frame)
                (then skeletons, [4.1] assets, labeled markers, force plates, devices and the frame suffix with
                the timestamps: not needed for rigid bodies and not decoded)
                [4.1] section bytes count the section's entries after the size field; they are checked against
                the entries read, which catches a natnet_version that does not match the server's stream

  model definitions (NAT_MODELDEF payload)
                i32 description count, then per description:
                    i32 type, [4.1] i32 description bytes (after this field), description:
                type 0 marker set   str name, i32 marker count, count * str marker name
                type 1 rigid body   str name, i32 id, i32 parent id, f32 offset x, y, z,
                                    [4.2] f32 orientation offset qx, qy, qz, qw, i32 marker count,
                                    count * (f32 x, y, z) marker offsets, count * i32 marker labels,
                                    [4.0+] count * str marker names
                type 2 skeleton     str name, i32 id, i32 bone count, bone count * rigid body description
                type 3 force plate  i32 id, str serial, f32 width, length, f32 origin x, y, z, 12 * 12 f32
                                    calibration matrix, 4 * 3 f32 corners, i32 plate type, i32 channel data type,
                                    i32 channel count, count * str channel name
                type 4 device       i32 id, str name, str serial, i32 device type, i32 channel data type,
                                    i32 channel count, count * str channel name
                type 5 camera       str name, f32 x, y, z, f32 qx, qy, qz, qw
                type 6 asset        [4.1 only] skipped by its byte count
                4.1: every description except rigid bodies is skipped by its byte count, so any type can be
                skipped, and a rigid body whose markers do not decode keeps its name and id (they come first;
                ``ModelDefinitions.incomplete`` says so); before 4.1 an unknown type cannot be skipped and
                decoding stops there, keeping the rigid bodies read so far (``incomplete`` says why)

  server info (NAT_SERVERINFO payload, the reply to NAT_CONNECT)
                char[256] application name (NUL padded), u8[4] application version, u8[4] NatNet version, then
                server details that are not decoded

Not verified against a running Motive server (none was available): the layouts follow the SDK's documentation
and sample decoders.
"""
from __future__ import annotations

import ipaddress
import math
import re
import struct
from dataclasses import dataclass

from ..config import ConfigError, knob, require
from .mocap import POSE_RELIABILITIES

NAT_CONNECT = 0
NAT_SERVERINFO = 1
NAT_REQUEST_MODELDEF = 4
NAT_MODELDEF = 5
NAT_FRAMEOFDATA = 7
NAT_DISCONNECT = 9
NAT_KEEPALIVE = 10
MESSAGE_NAMES = {NAT_CONNECT: "connect", NAT_SERVERINFO: "server info", 2: "request", 3: "response",
                 NAT_REQUEST_MODELDEF: "request model definitions", NAT_MODELDEF: "model definitions",
                 6: "request frame of data", NAT_FRAMEOFDATA: "frame of data", 8: "message string",
                 NAT_DISCONNECT: "disconnect", NAT_KEEPALIVE: "keep-alive", 100: "unrecognized request"}

DEFAULT_MULTICAST_ADDRESS = "239.255.42.99"
DEFAULT_COMMAND_PORT = 1510
DEFAULT_DATA_PORT = 1511
MAX_PAYLOAD = 0xFFFF  # the header's byte count is a u16

DESC_MARKER_SET, DESC_RIGID_BODY, DESC_SKELETON, DESC_FORCE_PLATE, DESC_DEVICE, DESC_CAMERA, DESC_ASSET = range(7)
DESCRIPTION_NAMES = {DESC_MARKER_SET: "marker set", DESC_RIGID_BODY: "rigid body", DESC_SKELETON: "skeleton",
                     DESC_FORCE_PLATE: "force plate", DESC_DEVICE: "device", DESC_CAMERA: "camera",
                     DESC_ASSET: "asset"}

_HEADER = struct.Struct("<HH")
_I32 = struct.Struct("<i")
_RIGID_BODY = struct.Struct("<i3f4ffh")  # id, position, quaternion, mean error, params: 38 bytes
_RB_DESC_FIXED = struct.Struct("<ii3f")  # id, parent id, offset
_VEC3 = struct.Struct("<3f")
_SERVER_NAME_BYTES = 256
_SERVER_INFO = struct.Struct("<256s4B4B")
_QUAT = struct.Struct("<4f")
SUPPORTED_VERSIONS = "3.0, 3.1, 4.0, 4.1, 4.2; later 3.x / 4.x minor versions are read like 3.1 / 4.2"


class NatNetError(ValueError):
    """A malformed or truncated NatNet packet; ``offset`` is the byte offset (from the packet start) where
    decoding failed."""

    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at byte {offset}")
        self.offset = offset


# ------------------------------------------------------------------------------------------------ data
@dataclass(frozen=True, order=True)
class Version:
    """NatNet bitstream version major.minor (build and revision do not change the layout)."""
    major: int
    minor: int

    @classmethod
    def parse(cls, value) -> Version:
        """``"4.1"``, ``"4.1.0.0"``, ``(4, 1)`` or a Version; ValueError naming the value if malformed or not
        3.x / 4.x."""
        if isinstance(value, Version):
            return value
        if isinstance(value, str):
            parts = value.strip().split(".")
            if not 2 <= len(parts) <= 4 or not all(p.isdigit() for p in parts):
                raise ValueError(f"NatNet version {value!r} is not of the form major.minor (e.g. 4.1)")
            nums = [int(p) for p in parts]
        else:
            try:
                nums = [int(p) for p in value]
            except (TypeError, ValueError):
                raise ValueError(f"NatNet version {value!r} is not of the form major.minor (e.g. 4.1)") from None
            if len(nums) < 2:
                raise ValueError(f"NatNet version {value!r} is not of the form major.minor (e.g. 4.1)")
        version = cls(nums[0], nums[1])
        if version.major not in (3, 4):
            raise ValueError(f"NatNet version {version} is not supported (supported: {SUPPORTED_VERSIONS})")
        return version

    @property
    def section_sizes(self) -> bool:
        """Frame sections and model descriptions carry byte counts (NatNet 4.1 and later)."""
        return (self.major, self.minor) >= (4, 1)

    @property
    def marker_names(self) -> bool:
        """Rigid-body descriptions list their markers' names (NatNet 4.0 and later)."""
        return self.major >= 4

    @property
    def description_orientation(self) -> bool:
        """Rigid-body descriptions carry an orientation offset after the position offset (NatNet 4.2 and
        later)."""
        return (self.major, self.minor) >= (4, 2)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class RigidBody:
    """One rigid body of a frame: position (m) and quaternion (x, y, z, w) in Motive's streamed frame."""
    id: int
    position: tuple = (0.0, 0.0, 0.0)
    quaternion: tuple = (0.0, 0.0, 0.0, 1.0)
    error: float = 0.0  # mean marker error (m)
    valid: bool = True  # tracking valid in this frame (params bit 0)


@dataclass(frozen=True)
class Frame:
    frame_number: int
    rigid_bodies: tuple = ()


@dataclass(frozen=True)
class RigidBodyMarker:
    position: tuple  # offset from the rigid body's origin (m)
    label: int = 0  # active label (0 = none)
    name: str = ""  # NatNet 4.0 and later


@dataclass(frozen=True)
class RigidBodyDescription:
    name: str
    id: int
    parent_id: int = -1
    offset: tuple = (0.0, 0.0, 0.0)
    markers: tuple = ()  # RigidBodyMarker, NatNet 3.0 and later
    orientation: tuple = (0.0, 0.0, 0.0, 1.0)  # the pivot's orientation offset (x, y, z, w), NatNet 4.2 and later


@dataclass(frozen=True)
class ModelDefinitions:
    rigid_bodies: tuple = ()  # top-level RigidBodyDescription (skeleton bones are not listed)
    skipped: tuple = ()  # type names of the other descriptions, in order
    incomplete: str = ""  # what was not read, and why ("" = all read)

    def names(self) -> dict:
        """{rigid body id: name}."""
        return {d.id: d.name for d in self.rigid_bodies}


@dataclass(frozen=True)
class ServerInfo:
    app_name: str
    app_version: tuple
    natnet_version: tuple  # (major, minor, build, revision) as the server reports it


@dataclass(frozen=True)
class OtherMessage:
    """A packet of a message type this module does not decode."""
    message_id: int
    payload_size: int


# ------------------------------------------------------------------------------------------------ reading
class _Reader:
    """Bounds-checked cursor over ``buf[pos:end]``; offsets in errors are from the packet start."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int, end: int):
        self.buf, self.pos, self.end = buf, pos, end

    def left(self) -> int:
        return self.end - self.pos

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        if fmt.size > self.left():
            raise NatNetError(f"truncated {what}: needs {fmt.size} bytes, {self.left()} left", self.pos)
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values

    def int32(self, what: str) -> int:
        return self.unpack(_I32, what)[0]

    def count(self, what: str, min_item_bytes: int) -> int:
        """A non-negative i32 count of items of at least ``min_item_bytes`` each that fit in what is left."""
        at = self.pos
        n = self.int32(what)
        if n < 0:
            raise NatNetError(f"negative {what} {n}", at)
        if n * min_item_bytes > self.left():
            raise NatNetError(f"{what} {n} needs at least {n * min_item_bytes} bytes, {self.left()} left", at)
        return n

    def skip(self, n: int, what: str):
        if n > self.left():
            raise NatNetError(f"truncated {what}: needs {n} bytes, {self.left()} left", self.pos)
        self.pos += n

    def string(self, what: str) -> str:
        nul = self.buf.find(b"\0", self.pos, self.end)
        if nul < 0:
            raise NatNetError(f"unterminated {what} (no NUL before the end of its data)", self.pos)
        text = self.buf[self.pos:nul].decode("utf-8", errors="replace")
        self.pos = nul + 1
        return text

    def section(self, what: str, version: Version) -> tuple:
        """Read a 4.1 byte count; return (first byte of the section, its end)."""
        at = self.pos
        size = self.int32(f"{what} byte count")
        if size < 0 or size > self.left():
            raise NatNetError(f"{what} byte count {size} does not fit the {self.left()} bytes left"
                              f"{_version_hint(version)}", at)
        return self.pos, self.pos + size

    def end_section(self, section: tuple, what: str, version: Version):
        start, end = section
        if self.pos != end:
            raise NatNetError(f"{what} section declares {end - start} bytes but its entries take "
                              f"{self.pos - start}{_version_hint(version)}", start - 4)


def _version_hint(version: Version) -> str:
    return f" (is natnet_version {version} what the server streams?)"


def _payload(packet: bytes, expected_id: int | None = None) -> tuple:
    """(message id, reader over the payload) after checking the header."""
    if not isinstance(packet, (bytes, bytearray, memoryview)):
        raise TypeError(f"a NatNet packet must be bytes, got {type(packet).__name__}")
    packet = bytes(packet)
    if len(packet) < _HEADER.size:
        raise NatNetError(f"packet of {len(packet)} bytes is shorter than the 4-byte header", 0)
    message_id, size = _HEADER.unpack_from(packet, 0)
    if expected_id is not None and message_id != expected_id:
        raise NatNetError(f"message id {message_id} ({MESSAGE_NAMES.get(message_id, 'unknown')}) is not "
                          f"{expected_id} ({MESSAGE_NAMES[expected_id]})", 0)
    if size > len(packet) - _HEADER.size:
        raise NatNetError(f"header declares a {size}-byte payload but the packet holds {len(packet) - 4}", 2)
    return message_id, _Reader(packet, _HEADER.size, _HEADER.size + size)


def decode_header(packet: bytes) -> tuple:
    """(message id, payload byte count) of a packet; NatNetError if the header is short or the payload missing."""
    message_id, r = _payload(packet)
    return message_id, r.left()


def decode_frame(packet: bytes, version) -> Frame:
    """A NAT_FRAMEOFDATA packet (header included) -> Frame with every rigid body, tracked or not."""
    v = Version.parse(version)
    _, r = _payload(packet, NAT_FRAMEOFDATA)
    frame_number = r.int32("frame number")

    n = r.count("marker set count", 5)  # empty name + marker count
    section = r.section("marker set", v) if v.section_sizes else None
    for i in range(n):
        r.string(f"marker set {i} name")
        markers = r.count(f"marker set {i} marker count", _VEC3.size)
        r.skip(markers * _VEC3.size, f"marker set {i} markers")
    if section:
        r.end_section(section, "marker set", v)

    n = r.count("unlabeled marker count", _VEC3.size)
    section = r.section("unlabeled marker", v) if v.section_sizes else None
    r.skip(n * _VEC3.size, "unlabeled markers")
    if section:
        r.end_section(section, "unlabeled marker", v)

    n = r.count("rigid body count", _RIGID_BODY.size)
    section = r.section("rigid body", v) if v.section_sizes else None
    bodies = []
    for i in range(n):
        rid, x, y, z, qx, qy, qz, qw, error, params = r.unpack(_RIGID_BODY, f"rigid body {i}")
        bodies.append(RigidBody(rid, (x, y, z), (qx, qy, qz, qw), error, bool(params & 0x01)))
    if section:
        r.end_section(section, "rigid body", v)
    return Frame(frame_number, tuple(bodies))


def _rigid_body_description(r: _Reader, v: Version, what: str) -> RigidBodyDescription:
    name = r.string(f"{what} name")
    rid, parent, ox, oy, oz = r.unpack(_RB_DESC_FIXED, f"{what} id, parent and offset")
    orientation = r.unpack(_QUAT, f"{what} orientation offset") if v.description_orientation else (0.0, 0.0, 0.0, 1.0)
    n = r.count(f"{what} marker count", _VEC3.size + 4 + (1 if v.marker_names else 0))
    positions = [r.unpack(_VEC3, f"{what} marker {k} offset") for k in range(n)]
    labels = [r.int32(f"{what} marker {k} label") for k in range(n)]
    names = [r.string(f"{what} marker {k} name") for k in range(n)] if v.marker_names else [""] * n
    markers = tuple(RigidBodyMarker(p, lab, nm) for p, lab, nm in zip(positions, labels, names))
    return RigidBodyDescription(name, rid, parent, (ox, oy, oz), markers, tuple(orientation))


def _strings(r: _Reader, what: str):
    n = r.count(f"{what} count", 1)
    for k in range(n):
        r.string(f"{what} {k}")


_SKIPPABLE = (DESC_MARKER_SET, DESC_SKELETON, DESC_FORCE_PLATE, DESC_DEVICE, DESC_CAMERA)


def _skip_description(r: _Reader, v: Version, kind: int, what: str):
    """Read past a description of a ``_SKIPPABLE`` type (layouts before NatNet 4.1)."""
    if kind == DESC_MARKER_SET:
        r.string(f"{what} name")
        _strings(r, f"{what} marker name")
    elif kind == DESC_SKELETON:
        r.string(f"{what} name")
        r.int32(f"{what} id")
        bones = r.count(f"{what} bone count", 1 + _RB_DESC_FIXED.size + 4)
        for k in range(bones):
            _rigid_body_description(r, v, f"{what} bone {k}")
    elif kind == DESC_FORCE_PLATE:
        r.int32(f"{what} id")
        r.string(f"{what} serial number")
        r.skip(4 * (2 + 3 + 144 + 12), f"{what} dimensions, origin, calibration matrix and corners")
        r.skip(8, f"{what} plate and channel data types")
        _strings(r, f"{what} channel name")
    elif kind == DESC_DEVICE:
        r.int32(f"{what} id")
        r.string(f"{what} name")
        r.string(f"{what} serial number")
        r.skip(8, f"{what} device and channel data types")
        _strings(r, f"{what} channel name")
    elif kind == DESC_CAMERA:
        r.string(f"{what} name")
        r.skip(4 * 7, f"{what} position and orientation")


def decode_modeldef(packet: bytes, version) -> ModelDefinitions:
    """A NAT_MODELDEF packet (header included) -> the rigid-body descriptions (other types are skipped)."""
    v = Version.parse(version)
    _, r = _payload(packet, NAT_MODELDEF)
    n = r.count("description count", 4)
    bodies, skipped, partial = [], [], []
    for i in range(n):
        at = r.pos
        kind = r.int32(f"description {i} type")
        label = DESCRIPTION_NAMES.get(kind, f"type {kind}")
        what = f"description {i} ({label})"
        if v.section_sizes:
            _, end = r.section(what, v)
            if kind == DESC_RIGID_BODY:
                outer_end, r.end, start = r.end, end, r.pos
                try:
                    bodies.append(_rigid_body_description(r, v, what))
                except NatNetError as e:  # a layout this version does not know: name and id come first
                    r.pos = start
                    name = r.string(f"{what} name")
                    rid, parent, ox, oy, oz = r.unpack(_RB_DESC_FIXED, f"{what} id, parent and offset")
                    bodies.append(RigidBodyDescription(name, rid, parent, (ox, oy, oz)))
                    partial.append(f"rigid body {rid} ({name!r}): only its name and id read ({e})")
                finally:
                    r.end = outer_end
            else:
                skipped.append(label)
            r.pos = end  # later versions may append fields: the byte count is authoritative
        elif kind == DESC_RIGID_BODY:
            bodies.append(_rigid_body_description(r, v, what))
        elif kind in _SKIPPABLE:
            _skip_description(r, v, kind, what)
            skipped.append(label)
        else:
            reason = (f"description {i} at byte {at} has unknown type {kind}, which NatNet {v} descriptions "
                      f"(no byte counts) do not allow skipping; {n - i} of {n} descriptions not read")
            return ModelDefinitions(tuple(bodies), tuple(skipped), "; ".join([*partial, reason]))
    return ModelDefinitions(tuple(bodies), tuple(skipped), "; ".join(partial))


def decode_server_info(packet: bytes) -> ServerInfo:
    """A NAT_SERVERINFO packet (the reply to NAT_CONNECT) -> application name and versions."""
    _, r = _payload(packet, NAT_SERVERINFO)
    raw, *versions = r.unpack(_SERVER_INFO, "server name and versions")
    name = raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return ServerInfo(name, tuple(versions[:4]), tuple(versions[4:]))


def decode(packet: bytes, version):
    """Frame, ModelDefinitions, ServerInfo, or OtherMessage for message types not decoded here."""
    message_id, size = decode_header(packet)
    if message_id == NAT_FRAMEOFDATA:
        return decode_frame(packet, version)
    if message_id == NAT_MODELDEF:
        return decode_modeldef(packet, version)
    if message_id == NAT_SERVERINFO:
        return decode_server_info(packet)
    return OtherMessage(message_id, size)


# ------------------------------------------------------------------------------------------------ writing
def pack_packet(message_id: int, payload: bytes = b"") -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"NatNet payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    return _HEADER.pack(message_id, len(payload)) + payload


def connect_packet() -> bytes:
    """NAT_CONNECT (to the command port): the server answers with NAT_SERVERINFO; in unicast mode it also
    starts streaming to the sender."""
    return pack_packet(NAT_CONNECT)


def request_modeldef_packet() -> bytes:
    """NAT_REQUEST_MODELDEF (to the command port): the server answers with NAT_MODELDEF to the sender."""
    return pack_packet(NAT_REQUEST_MODELDEF)


def keepalive_packet() -> bytes:
    """NAT_KEEPALIVE (to the command port): keeps a unicast stream alive."""
    return pack_packet(NAT_KEEPALIVE)


def disconnect_packet() -> bytes:
    """NAT_DISCONNECT (to the command port): ends a unicast stream."""
    return pack_packet(NAT_DISCONNECT)


def _cstr(text: str) -> bytes:
    raw = text.encode("utf-8")
    if b"\0" in raw:
        raise ValueError(f"NatNet string {text!r} contains a NUL")
    return raw + b"\0"


def _sized(count: int, body: bytes, v: Version) -> bytes:
    return _I32.pack(count) + (_I32.pack(len(body)) if v.section_sizes else b"") + body


def pack_frame(frame_number: int, rigid_bodies, version) -> bytes:
    """A NAT_FRAMEOFDATA packet with no marker sets, no unlabeled markers and ``rigid_bodies`` (RigidBody), cut
    after the rigid bodies (the sections that follow are not encoded: enough for ``decode_frame``)."""
    v = Version.parse(version)
    bodies = b"".join(_RIGID_BODY.pack(b.id, *b.position, *b.quaternion, b.error, 1 if b.valid else 0)
                      for b in rigid_bodies)
    payload = (_I32.pack(frame_number) + _sized(0, b"", v) + _sized(0, b"", v)
               + _sized(len(rigid_bodies), bodies, v))
    return pack_packet(NAT_FRAMEOFDATA, payload)


def pack_modeldef(descriptions, version) -> bytes:
    """A NAT_MODELDEF packet of rigid-body descriptions (RigidBodyDescription) only."""
    v = Version.parse(version)
    payload = _I32.pack(len(descriptions))
    for d in descriptions:
        markers = tuple(d.markers)
        body = (_cstr(d.name) + _RB_DESC_FIXED.pack(d.id, d.parent_id, *d.offset)
                + (_QUAT.pack(*d.orientation) if v.description_orientation else b"") + _I32.pack(len(markers))
                + b"".join(_VEC3.pack(*m.position) for m in markers)
                + b"".join(_I32.pack(m.label) for m in markers)
                + (b"".join(_cstr(m.name) for m in markers) if v.marker_names else b""))
        payload += _sized(DESC_RIGID_BODY, body, v)
    return pack_packet(NAT_MODELDEF, payload)


def pack_server_info(app_name: str, app_version, natnet_version) -> bytes:
    """A NAT_SERVERINFO packet with the fields ``decode_server_info`` reads."""
    return pack_packet(NAT_SERVERINFO, _SERVER_INFO.pack(app_name.encode("utf-8")[:_SERVER_NAME_BYTES - 1],
                                                         *app_version, *natnet_version))


# ------------------------------------------------------------------------------------------------ names
def parse_body_names(text: str) -> dict:
    """``"1=pusher, 2=Slider1"`` (comma or whitespace separated) -> {1: "pusher", 2: "Slider1"}; ValueError
    naming the bad entry."""
    names = {}
    for item in (t for t in text.replace(",", " ").split() if t):
        key, sep, name = item.partition("=")
        if not sep or not name or "=" in name:
            raise ValueError(f"body_names: entry {item!r} is not of the form id=name")
        try:
            rid = int(key)
        except ValueError:
            raise ValueError(f"body_names: entry {item!r}: {key!r} is not an integer rigid-body id") from None
        if rid in names:
            raise ValueError(f"body_names: rigid-body id {rid} is named twice")
        if name in names.values():
            raise ValueError(f"body_names: name {name!r} is given to more than one id")
        names[rid] = name
    return names


_NOT_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9_]")


def topic_safe_name(name: str) -> str:
    """A Motive rigid-body name as a ROS topic token: characters other than letters, digits and '_' (Motive
    allows spaces, e.g. 'Rigid Body 1') become '_'."""
    return _NOT_TOPIC_CHARS.sub("_", name)


# ------------------------------------------------------------------------------------------------ bridge settings
def _ipv4(text: str, name: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise ConfigError(name, f"{text!r} is not an IPv4 address") from None


@dataclass(frozen=True)
class BridgeConfig:
    """Where ``natnet_bridge`` receives the stream and how it publishes it (the node declares these settings as its
    parameters of the same names); checked here, so a bad one fails before any socket is opened."""

    server_address: str = knob("", "IPv4 address of the Motive PC: the bridge asks its command port for the model "
                                   "definitions (rigid-body names) and server info at start, and in unicast mode "
                                   "connects and sends keep-alives; empty = no requests (names from body_names)")
    local_address: str = knob("0.0.0.0", "local IPv4 address to receive on: the interface on the Motive network "
                                         "(multicast: the interface that joins the group); 0.0.0.0 = any")
    multicast_address: str = knob("239.255.42.99", "Motive's multicast group (Streaming: Multicast Interface); "
                                                   "empty = unicast (Motive transmission type Unicast)")
    data_port: int = knob(1511, "UDP port of the frame data (Motive: Data Port); 0 = any free port (tests)")
    command_port: int = knob(1510, "Motive's command port, where requests are sent (Motive: Command Port)")
    natnet_version: str = knob("4.1", "NatNet bitstream version the server streams, major.minor: 3.0, 3.1, 4.0, "
                                      "4.1 or 4.2 (Motive 2.0: 3.0, Motive 2.1-2.3: 3.1, Motive 3.0: 4.0, Motive "
                                      "3.1: 4.1, newer: 4.2 or later, as the server info reports)")
    topic_template: str = knob("/{body}/pose", "PoseStamped topic per rigid body, '{body}' = its name (natnet_ros2 "
                                               "convention, mocap_ingest's default)")
    body_names: str = knob("", "rigid-body id -> name pairs 'id=name', comma separated (e.g. "
                               "'1=pusher,2=Slider1'); they override the model-definition names; empty = names from "
                               "the model definitions (needs server_address); bodies without a name are published "
                               "as body_<id>")
    qos: str = knob("reliable", "reliability of the pose publishers: reliable (as natnet_ros2) | best_effort "
                                "(sensor data); mocap_ingest subscribes best effort and takes both")
    model_refresh_period: float = knob(10.0, "s between model definition requests once some were received, so "
                                             "that a rigid body renamed, added or removed in Motive is published "
                                             "under its new name (logged); 0 = ask again only while unnamed bodies "
                                             "stream (needs server_address)")

    def __post_init__(self):
        try:
            Version.parse(self.natnet_version)
        except ValueError as e:
            raise ConfigError("natnet_version", str(e)) from None
        try:
            parse_body_names(self.body_names)
        except ValueError as e:  # the message starts with "body_names: "
            raise ConfigError(str(e)) from None
        for name in ("server_address", "local_address", "multicast_address"):
            text = getattr(self, name)
            if text or name == "local_address":
                object.__setattr__(self, name, _ipv4(text, name))
        if self.multicast_address and not ipaddress.IPv4Address(self.multicast_address).is_multicast:
            raise ConfigError("multicast_address", f"{self.multicast_address} is not a multicast address "
                                                   f"(224.0.0.0/4); empty = unicast")
        require(0 <= self.data_port <= 65535, "data_port", self.data_port, "a UDP port (0 = any free port)")
        require(1 <= self.command_port <= 65535, "command_port", self.command_port, "a UDP port")
        require("{body}" in self.topic_template, "topic_template", self.topic_template, "a template with '{body}'")
        require(self.qos in POSE_RELIABILITIES, "qos", self.qos, f"one of {', '.join(POSE_RELIABILITIES)}")
        require(math.isfinite(self.model_refresh_period) and self.model_refresh_period >= 0.0,
                "model_refresh_period", self.model_refresh_period, "a period >= 0 s (0 = no refresh)")

    @property
    def version(self) -> Version:
        return Version.parse(self.natnet_version)

    @property
    def names(self) -> dict:
        """``body_names`` parsed: {rigid-body id: name}."""
        return parse_body_names(self.body_names)
