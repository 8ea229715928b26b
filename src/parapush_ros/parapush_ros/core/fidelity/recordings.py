"""Recorded pushes: the two file formats parapush reads (and writes), as one ``Recording`` type.

CSV, one file per push::

    time,pusher_x,pusher_y,<object>_x,<object>_y,<object>_yaw[,...]

one ``x, y, yaw`` triple per scene object, named and ordered as in the scene; seconds, metres, radians, table frame
(REP-103, origin at the centre of the table top); rows in strictly increasing time, sampled at 50 Hz or faster.
Every problem is an error naming the file, the row (1 = the header) and the column.

MCAP (a ROS 2 bag, readable by ``ros2 bag`` and Foxglove): the mocap ``geometry_msgs/PoseStamped`` topics of the
pusher and the scene objects (natnet_ros2 or vrpn_mocap names, as ``config/mocap_ingest.yaml`` sets them), in the
mocap frame; ``MocapToTable`` (core/robot/mocap.py, the one place of that transform) maps them to the table. Read
with ``mcap-ros2-support`` (PyPI, no ROS install needed). ``parapush sim --record FILE`` writes such bags. As in
mocap_ingest, a pose that is not one (non-finite, a quaternion not of unit length) is not a sample, and every
body's samples go through mocap_ingest's tracking checks (``BodyTracker``: a pose repeated to the bit, a position
or yaw jump, off the table, tilted), the dropped ones said in the recording's note; every body, not only the
pusher, must be sampled at 50 Hz or faster without a dropout (a gap over 0.1 s) while the push is read, since the
objects are interpolated to the pusher's stamps and a gap would be filled with invented poses. The stamps are
checked against the bag's log (receive) times: a clock that stepped while recording, or bodies stamped by clocks
that disagree (hosts not synchronised; one driver without stamps, read at its log times, beside one with them), is
refused naming the topics (``_check_clocks``).

A file is one push, scored from its first sample to its last (``check_only_pushed``: an object moved with nothing
near it, a hand between two pushes of a session bag, is refused).
"""
from __future__ import annotations

import csv
import itertools
import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..robot.mocap import (BodyTracker, MocapToTable, PlanarPose, TrackingConfig, check_pose, parse_body_map,
                           pose_topic)
from ..scene.spec import Scene

MIN_RATE_HZ = 50.0  # rows per second at least (mean), and ...
MAX_GAP_S = 0.1  # ... no gap between two rows longer than this (a tracking dropout, not a push)
# a bag's header stamps against its log (receive) times (``_check_clocks``): a stamp further than CLOCK_BACK_S before
# one logged earlier on its topic, or stamps that move CLOCK_STEP_S ahead of their log times and stay there (the least
# lag after below the least lag before), are a step of the stamping clock ...
CLOCK_BACK_S = 0.001
CLOCK_STEP_S = 0.02
# ... and topics whose stamps lag their log times by medians this far apart were stamped by different clocks
CLOCK_OFFSET_S = 0.05


class RecordingError(ValueError):
    """A recording is invalid; the message names the file and, for a CSV, the row and column."""


@dataclass
class Recording:
    """One recorded push in the table frame: ``times`` (T,), ``pusher`` (T, 2), ``objects`` (T, n, 3) with yaw
    unwrapped along the push (continuous, as the planar state wants it)."""

    name: str
    times: np.ndarray
    pusher: np.ndarray
    objects: np.ndarray
    note: str = ""  # what a reader should know (a bag that was not closed, read up to where its writer stopped)

    @property
    def duration(self) -> float:
        return float(self.times[-1] - self.times[0])

    def at(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(pusher (..., 2), objects (..., n, 3)) linearly interpolated at times ``t`` (s since the first row)."""
        t = np.asarray(t, dtype=float) + self.times[0]
        p = np.stack([np.interp(t, self.times, self.pusher[:, k]) for k in range(2)], axis=-1)
        o = np.stack([np.stack([np.interp(t, self.times, self.objects[:, i, k]) for k in range(3)], axis=-1)
                      for i in range(self.objects.shape[1])], axis=-2)
        return p, o


def csv_header(scene: Scene) -> list:
    return ["time", "pusher_x", "pusher_y"] + [f"{o.name}_{k}" for o in scene.objects for k in ("x", "y", "yaw")]


def read_csv(path, scene: Scene) -> Recording:
    """Read and validate one CSV recording for ``scene`` (see the module docstring)."""
    path = Path(path)
    name = path.name
    try:
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise RecordingError(f"{name}: cannot read: {e.strerror or e}") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise RecordingError(f"{name}: not a CSV file: {e}") from None
    expected = csv_header(scene)
    if not rows:
        raise RecordingError(f"{name}: row 1: empty file (expected the header {','.join(expected)})")
    header = [h.strip() for h in rows[0]]
    for col, want in enumerate(expected):
        got = header[col] if col < len(header) else None
        if got != want:
            raise RecordingError(f"{name}: row 1, column {col + 1}: expected {want!r}, got {got!r} (the header "
                                 f"for scene {scene.name!r} is {','.join(expected)})")
    if len(header) > len(expected):
        raise RecordingError(f"{name}: row 1, column {len(expected) + 1}: unexpected column {header[len(expected)]!r}"
                             f" (scene {scene.name!r} has {len(scene.objects)} object(s))")
    data = np.empty((len(rows) - 1, len(expected)))
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(expected):
            raise RecordingError(f"{name}: row {r}: expected {len(expected)} values, got {len(row)}")
        for c, cell in enumerate(row):
            try:
                v = float(cell)
            except ValueError:
                raise RecordingError(f"{name}: row {r}, column {c + 1} ({expected[c]}): not a number: "
                                     f"{cell!r}") from None
            if not math.isfinite(v):
                raise RecordingError(f"{name}: row {r}, column {c + 1} ({expected[c]}): not finite: {cell!r}")
            data[r - 2, c] = v
    rec = Recording(name=path.stem, times=data[:, 0], pusher=data[:, 1:3],
                    objects=data[:, 3:].reshape(len(data), len(scene.objects), 3))
    _check_samples(rec, name, row_offset=2)
    rec.objects[..., 2] = np.unwrap(rec.objects[..., 2], axis=0)
    return rec


def write_csv(path, scene: Scene, rec: Recording) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(csv_header(scene))
        for t, p, o in zip(rec.times, rec.pusher, rec.objects):
            w.writerow([f"{t:.6f}", f"{p[0]:.6f}", f"{p[1]:.6f}"] + [f"{v:.6f}" for v in o.ravel()])


def _check_samples(rec: Recording, name: str, row_offset: int, unit: str = "row",
                   column: str = "column 1 (time)") -> None:
    """Time order and sampling rate; ``row_offset`` turns a sample index into the file's row number. The messages
    call a sample ``unit`` (a CSV file's "row", a bag's "sample") and the times ``column`` ("" where the file has
    no columns)."""
    _check_times(rec.times, name, row_offset, unit, column)


def _check_times(t, name: str, row_offset: int, unit: str, column: str) -> None:
    at = f", {column}" if column else ""
    if len(t) < 2:
        raise RecordingError(f"{name}: needs at least 2 samples, got {len(t)}")
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0.0)
    if bad.size:
        i = int(bad[0]) + 1
        raise RecordingError(f"{name}: {unit} {i + row_offset}{at}: {t[i]} is not after the previous "
                             f"{unit}'s {t[i - 1]} ({unit}s must be in increasing time)")
    gap = int(np.argmax(dt))
    if dt[gap] > MAX_GAP_S:
        raise RecordingError(f"{name}: {unit} {gap + 1 + row_offset}{at}: {dt[gap]:.3f} s since the "
                             f"previous {unit} (at most {MAX_GAP_S} s: a tracking dropout)")
    rate = (len(t) - 1) / (t[-1] - t[0])
    if rate < MIN_RATE_HZ:
        raise RecordingError(f"{name}{': ' + column if column else ''}: {rate:.1f} {unit}s per second, at least "
                             f"{MIN_RATE_HZ:.0f} needed")


# ------------------------------------------------------------------------------------------------------ MCAP
POSE_DATATYPE = "geometry_msgs/msg/PoseStamped"
MOCAP_METADATA = "parapush.mocap_ingest"  # bag metadata: the mocap_ingest parameters it was recorded with (JSON values)
_MOCAP_KEYS = ("table_origin_in_mocap", "table_rotation_in_mocap", "up_axis", "mocap_driver", "pose_topic_template",
               "pusher_body", "body_map")
# the message definition a bag carries for its schema (ROS 2 .msg text, dependencies after '=' lines)
POSE_MSGDEF = """std_msgs/Header header
geometry_msgs/Pose pose
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
================================================================================
MSG: geometry_msgs/Pose
Point position
Quaternion orientation
================================================================================
MSG: geometry_msgs/Point
float64 x
float64 y
float64 z
================================================================================
MSG: geometry_msgs/Quaternion
float64 x 0
float64 y 0
float64 z 0
float64 w 1
"""


@dataclass(frozen=True)
class MocapTopics:
    """Where a bag's poses are and how to bring them to the table: from ``config/mocap_ingest.yaml``."""

    transform: MocapToTable
    driver: str = "natnet"
    template: str = ""
    pusher_body: str = "pusher"
    body_map: str = ""  # "object=MocapBody, ..." (mocap_ingest's body_map); objects not listed use their own name
    from_shipped_config: bool = False  # the shipped config/mocap_ingest.yaml's, for a bag that says nothing

    @classmethod
    def from_values(cls, values: dict) -> MocapTopics:
        transform = MocapToTable.from_params(values["table_origin_in_mocap"], values["table_rotation_in_mocap"],
                                             values["up_axis"])
        return cls(transform=transform, driver=values["mocap_driver"], template=values["pose_topic_template"],
                   pusher_body=values["pusher_body"], body_map=values.get("body_map") or "")

    @classmethod
    def from_bag(cls, path) -> MocapTopics | None:
        """The parameters stored in a bag by ``McapPoseWriter`` (``parapush sim --record``), or None."""
        from mcap.reader import make_reader  # noqa: PLC0415
        try:
            with Path(path).open("rb") as f:
                found = [m.metadata for m in make_reader(f).iter_metadata() if m.name == MOCAP_METADATA]
        except OSError:
            raise
        except Exception:  # noqa: BLE001 - no summary: a bag whose writer was killed; its records up to there
            found = [m for name, m in _salvage(Path(path))[0] if name == MOCAP_METADATA]
        for metadata in found:
            values = {k: json.loads(v) for k, v in metadata.items()}
            if all(k in values for k in _MOCAP_KEYS):
                return cls.from_values(values)
        return None

    @classmethod
    def from_config(cls, path=None) -> MocapTopics:
        """The mocap_ingest parameters of a YAML file (default: the shipped ``config/mocap_ingest.yaml``)."""
        import yaml  # noqa: PLC0415

        from ...ros.params import MOCAP_INGEST  # noqa: PLC0415
        from ..config import yaml_problem  # noqa: PLC0415
        p = MOCAP_INGEST
        values = {k: v.default for k, v in p.items()} if isinstance(p, dict) else {}
        if path is None:
            from ..scene.spec import scenes_dir  # noqa: PLC0415
            path = scenes_dir().parent / "mocap_ingest.yaml"
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not valid YAML: {yaml_problem(e)}") from None
        section = data.get("mocap_ingest") if isinstance(data, dict) else None
        if not isinstance(section, dict) or not isinstance(section.get("ros__parameters") or {}, dict):
            raise ValueError(f"{path}: not a mocap_ingest parameter file (expected mocap_ingest: ros__parameters: "
                             f"...)")
        values.update(section.get("ros__parameters") or {})
        return cls.from_values(values)

    def topic(self, body: str) -> str:
        return pose_topic(body, self.driver, self.template)

    def object_topics(self, scene: Scene) -> list:
        m = parse_body_map(self.body_map, [o.name for o in scene.objects])
        return [self.topic(m[o.name]) for o in scene.objects]


def read_mcap(path, scene: Scene, topics: MocapTopics) -> Recording:
    """A push from a bag of mocap PoseStamped topics: every body sampled at the pusher's stamps (linear
    interpolation; yaw unwrapped first), transformed to the table frame. Errors name the file and the topic."""
    path = Path(path)
    rec, samples, said = _read_bodies(path, scene, topics)
    wanted, times = list(samples), rec.times
    try:
        _check_samples(rec, f"{path.name}: topic {wanted[0]}", row_offset=0, unit="sample", column="")
        for t in wanted[1:]:  # each object's own samples over the push (and the one each side of it)
            st = samples[t]
            # the samples the interpolation uses: from the last at or before the first time to the first at or
            # after the last (bodies of one frame share a stamp: no sample beyond those, whose gap nothing was read
            # across)
            lo = max(0, int(np.searchsorted(st, times[0], side="right")) - 1)
            hi = int(np.searchsorted(st, times[-1], side="left")) + 1
            _check_times(st[lo:hi], f"{path.name}: topic {t}", row_offset=lo, unit="sample", column="")
    except RecordingError as e:  # a gap may be samples the tracking checks dropped: say which and why
        raise RecordingError(f"{e}" + (f"; dropped by mocap_ingest's tracking checks: {said}" if said else "")) \
            from None
    return rec


def _read_bodies(path: Path, scene: Scene, topics: MocapTopics) -> tuple[Recording, dict, str]:
    """Every body of a bag at the pusher's stamps where every body has been seen (gaps not judged): (the recording
    with its notes, each topic's own sample stamps (pusher first), what the tracking checks dropped, as text)."""
    from mcap.reader import make_reader  # noqa: PLC0415
    from mcap_ros2.decoder import DecoderFactory  # noqa: PLC0415
    wanted = [topics.topic(topics.pusher_body)] + topics.object_topics(scene)
    series = {t: [] for t in wanted}
    note = ""
    try:
        with path.open("rb") as f:
            messages = [(channel.topic, schema.name if schema else "", message.log_time, msg)
                        for schema, channel, message, msg in
                        make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages(topics=wanted)]
    except OSError as e:
        raise RecordingError(f"{path.name}: cannot read: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - only the mcap reader runs here: its errors mean a truncated or foreign file
        _metadata, messages, end = _salvage(path, wanted)
        if not messages:
            raise RecordingError(f"{path.name}: not a readable MCAP bag: {e}") from None
        note = (f"{path.name}: the bag was not closed (its recorder was killed?): read up to byte {end} of "
                f"{path.stat().st_size}, where its writer stopped")
    from ...ros.params import MOCAP_INGEST_IO  # noqa: PLC0415
    tolerance = MOCAP_INGEST_IO["quaternion_tolerance"].default
    unstamped = dict.fromkeys(wanted, 0)
    clocks = {t: [] for t in wanted}  # (log time, stamp) of every message
    for topic, schema, log_time_ns, msg in messages:
        if schema != POSE_DATATYPE:
            raise RecordingError(f"{path.name}: topic {topic}: messages of type {schema or 'unknown'!r}, expected "
                                 f"{POSE_DATATYPE!r}")
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if stamp == 0.0:  # a driver without stamps: the receive (log) time is the best measurement time known, as
            stamp = log_time_ns * 1e-9  # in mocap_ingest
            unstamped[topic] += 1
        clocks[topic].append((log_time_ns * 1e-9, stamp))
        pos = (msg.pose.position.x, msg.pose.position.y, msg.pose.position.z)
        quat = (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z, msg.pose.orientation.w)
        if check_pose(pos, quat, "", "", tolerance):  # not a pose: no sample (a gap it leaves is judged below)
            continue
        series[topic].append((stamp, *topics.transform.to_table(pos, quat)))
    arrays, dropped = {}, {}
    for t in wanted:
        if not series[t]:
            raise RecordingError(f"{path.name}: topic {t}: no PoseStamped messages (topics wanted: "
                                 f"{', '.join(wanted)})")
    _check_clocks(path.name, clocks, unstamped)
    for t in wanted:
        try:
            arrays[t], dropped[t] = _tracked(series[t], scene)
        except RecordingError as e:
            raise RecordingError(f"{path.name}: topic {t}: {e}") from None
    pusher = arrays[wanted[0]]
    times = pusher[:, 0]
    for t in wanted[1:]:  # only where every body has been seen
        times = times[(times >= arrays[t][0, 0]) & (times <= arrays[t][-1, 0])]
    objects = np.stack([np.stack([np.interp(times, arrays[t][:, 0], arrays[t][:, k]) for k in (1, 2, 3)], -1)
                        for t in wanted[1:]], axis=1)
    rec = Recording(name=path.stem, times=times,
                    pusher=np.stack([np.interp(times, pusher[:, 0], pusher[:, k]) for k in (1, 2)], -1),
                    objects=objects, note=note)
    said = "; ".join(f"{t}: {len(d)} sample(s), the first at {d[0][0]:.3f} s ({d[0][1]})"
                     for t, d in dropped.items() if d)
    notes = [rec.note]
    if said:  # interpolated over, or the push read only where every body passed (a trimmed start or end)
        notes.append(f"{path.name}: samples dropped by mocap_ingest's tracking checks: {said}; read from "
                     f"{times[0]:.3f} to {times[-1]:.3f} s")
    if any(unstamped.values()):
        notes.append(f"{path.name}: samples without a header stamp, read at their log (receive) time as mocap_ingest "
                     f"does: " + ", ".join(f"{t} {n}" for t, n in unstamped.items() if n))
    if topics.from_shipped_config:
        notes.append(f"{path.name}: no parapush metadata in the bag: its topics and mocap -> table transform are "
                     f"taken from config/mocap_ingest.yaml (--mocap-config for another)")
    rec.note = "; ".join(filter(None, notes))
    return rec, {t: arrays[t][:, 0] for t in wanted}, said


def _check_clocks(name: str, clocks: dict, unstamped: dict) -> None:
    """Refuse a bag whose header stamps cannot be put on one time line: on a topic, a stamp before one logged
    earlier (the stamping clock stepped back: sorted by stamp, the two stretches would interleave), or a step of the
    stamps the log times do not show (stepped forward: an invented gap); across topics, stamps that lag the log times
    by medians ``CLOCK_OFFSET_S`` or more apart (clocks that differ between hosts: the bodies would be paired with
    each other's past). ``clocks``: per topic, (log time, stamp) of each message. Why against the log times: they are
    one clock, the recorder's, for every topic; a receive delay only makes a stamp lag more, never run ahead."""
    lags = {}
    for topic, pairs in clocks.items():
        if not pairs:
            continue
        log, stamp = np.asarray(sorted(pairs)).T  # in log order (samples logged at once: in stamp order)
        back = np.maximum.accumulate(stamp) - stamp
        if back.max() > CLOCK_BACK_S:
            i = int(np.argmax(back > CLOCK_BACK_S))
            raise RecordingError(f"{name}: topic {topic}: sample {i} (logged at {log[i]:.3f} s) is stamped "
                                 f"{back[i]:.3f} s before one logged earlier: the clock that stamps it stepped back "
                                 "while recording (synchronise the driver's clock without steps, e.g. chrony's "
                                 "slewing, and record again)")
        lag = log - stamp
        # a forward step: the stamps run ahead of the log times, for good. A late receive only ever makes a sample lag
        # more (a burst after a stall: the log times bunched, the stamps, and any frames missing among them, not),
        # so the lower envelopes tell them apart: the least lag after the step below the least lag before it. (A
        # recording that starts inside a stall has no undelayed samples before such a gap: it may be refused.)
        least_before = np.minimum.accumulate(lag)
        least_after = np.minimum.accumulate(lag[::-1])[::-1]
        for i in np.flatnonzero(np.diff(stamp) - np.diff(log) > CLOCK_STEP_S) + 1:
            drop = least_before[i - 1] - least_after[i]
            if drop > CLOCK_STEP_S:
                raise RecordingError(f"{name}: topic {topic}: from sample {i} (logged at {log[i]:.3f} s) the stamps "
                                     f"run {drop:.3f} s further ahead of the log times than before: the clock that "
                                     "stamps it stepped forward while recording (synchronise the driver's clock "
                                     "without steps, e.g. chrony's slewing, and record again)")
        lags[topic] = float(np.median(lag))
    if len(lags) > 1 and max(lags.values()) - min(lags.values()) >= CLOCK_OFFSET_S:
        said = ", ".join(f"{t} {t_lag:+.3f} s" + (" (no stamps: read at its log times)" if unstamped.get(t) else "")
                         for t, t_lag in lags.items())
        raise RecordingError(f"{name}: the topics' stamps lag their log times by different amounts ({said}; "
                             f"{CLOCK_OFFSET_S} s apart at most): they were stamped by clocks that disagree, and "
                             "the bodies cannot be paired in time (synchronise the hosts' clocks, e.g. chrony or PTP, "
                             "or stream every body from one driver)")


def _tracked(samples, scene: Scene) -> tuple[np.ndarray, list]:
    """One body's samples (stamp, table position (3,), table quaternion (4,)) through mocap_ingest's tracking
    checks (``BodyTracker``: off the table, tilted, jumps, a pose repeated to the bit), in stamp order, one per
    stamp: ((S, 4) array of stamp, x, y, unwrapped yaw of the samples kept, [(stamp, why) of those dropped]). A
    recording is the ground truth of the replay: a flipped marker set or a driver's frozen pose must not be."""
    tracker = BodyTracker("recorded", TrackingConfig(table_half=tuple(float(h) for h in scene.table.half)))
    kept, dropped, last = [], [], None
    for stamp, p, q in sorted(samples, key=lambda s: s[0]):
        if last is not None and stamp <= last:
            continue  # one sample per stamp
        last = stamp
        pose = PlanarPose.from_table_pose(p, q)
        why = tracker.update(stamp, stamp, pose)
        if why is None:
            kept.append((stamp, pose.x, pose.y, pose.yaw))
        else:
            dropped.append((stamp, why))
    if len(kept) < 2:
        raise RecordingError(f"fewer than 2 samples pass the tracking checks (first dropped at "
                             f"{dropped[0][0]:.3f} s: {dropped[0][1]})" if dropped else "fewer than 2 samples")
    a = np.array(kept)
    a[:, 3] = np.unwrap(a[:, 3])
    return a, dropped


def _salvage(path: Path, topics=()) -> tuple[list, list, int]:
    """The records of a bag that has no summary (its writer was killed before closing it), read in order up to
    where they stop: ([(metadata name, dict)], [(topic, schema name, log time ns, decoded message)] of ``topics``,
    the byte where reading ended). Why not mcap's readers: the seeking one needs the summary, the non-seeking one
    yields nothing from a file cut short."""
    from mcap.records import Channel, Message, Metadata, Schema  # noqa: PLC0415
    from mcap.stream_reader import StreamReader  # noqa: PLC0415
    from mcap_ros2.decoder import DecoderFactory  # noqa: PLC0415
    factory, schemas, channels, decoders = DecoderFactory(), {}, {}, {}
    metadata, messages = [], []
    with path.open("rb") as f:
        try:
            for r in StreamReader(f).records:
                if isinstance(r, Schema):
                    schemas[r.id] = r
                elif isinstance(r, Channel):
                    channels[r.id] = r
                elif isinstance(r, Metadata):
                    metadata.append((r.name, r.metadata))
                elif isinstance(r, Message) and r.channel_id in channels and channels[r.channel_id].topic in topics:
                    ch = channels[r.channel_id]
                    if ch.id not in decoders:
                        decoders[ch.id] = factory.decoder_for(ch.message_encoding, schemas.get(ch.schema_id))
                    if decoders[ch.id] is not None:  # another encoding: not a pose of ours
                        schema = schemas.get(ch.schema_id)
                        messages.append((ch.topic, schema.name if schema else "", r.log_time,
                                         decoders[ch.id](r.data)))
        except Exception:  # noqa: BLE001 - the end of what was written (a record cut short, or nothing more)
            pass
        end = f.tell()
    return metadata, messages, end


def read_recording(path, scene: Scene, topics: MocapTopics | None = None) -> Recording:
    """A CSV (``.csv``) or MCAP (``.mcap``) recording of one push (``check_only_pushed``)."""
    path = Path(path)
    # (_bag_topics refuses a suffix that is neither)
    rec = read_csv(path, scene) if path.suffix.lower() == ".csv" else read_mcap(path, scene, _bag_topics(path, topics))
    check_only_pushed(rec, scene, path.name)
    return rec


def _bag_topics(path: Path, topics: MocapTopics | None) -> MocapTopics:
    """``topics`` if given, else what the bag says it was recorded with, else the shipped mocap_ingest
    configuration; a path that is not an MCAP bag is refused."""
    if path.suffix.lower() != ".mcap":
        raise RecordingError(f"{path.name}: unknown recording format {path.suffix!r} (expected .csv or .mcap)")
    if topics is None:
        try:
            topics = MocapTopics.from_bag(path)
        except Exception as e:  # noqa: BLE001 - the mcap library's errors: a truncated or foreign file
            raise RecordingError(f"{path.name}: not a readable MCAP bag: {e}") from None
    return topics or replace(MocapTopics.from_config(), from_shipped_config=True)


UNPUSHED_REACH = 0.05  # m beyond touching: a pusher (or a moving object) this near may have moved an object
UNPUSHED_MOTION = 0.005  # m an object may move with nothing that near (mocap noise, the end of a free slide)


def check_only_pushed(rec: Recording, scene: Scene, name: str) -> None:
    """A recording is scored as one push: every motion of an object in it must have a cause the models know, the
    pusher or (through a chain) another object within ``UNPUSHED_REACH`` of touching it. An object moved further
    than ``UNPUSHED_MOTION`` with nothing that near (a hand setting it back between pushes of one session bag, a
    person bumping the table) would be scored as the models' error: ``RecordingError`` naming the object, the
    times and how far the pusher was."""
    runs = _unpushed_runs(rec, scene)
    if runs:
        run, t0 = runs[0], rec.times[0]
        raise RecordingError(
            f"{name}: object {run.name!r} moved {1e3 * run.moved:.0f} mm between {rec.times[run.a] - t0:.2f} and "
            f"{rec.times[run.b - 1] - t0:.2f} s (past {1e3 * UNPUSHED_MOTION:.0f} mm at {rec.times[run.k] - t0:.2f} s) "
            f"with the pusher at least {run.pusher_mm:.0f} mm from touching it and no moving object "
            f"near: not a push (a hand? a bump?). A recording is scored as one push: record one bag per push "
            f"(record:= starts a new one per launch), or cut the session's bag into pushes (parapush split-pushes)")


@dataclass
class _UnpushedRun:
    """Samples [a, b) in which object ``name`` moved ``moved`` m (past ``UNPUSHED_MOTION`` first at sample k) with
    the pusher at least ``pusher_mm`` from touching it and no moving object near."""

    name: str
    a: int
    b: int
    k: int
    moved: float
    pusher_mm: float


def pusher_distance(rec: Recording, scene: Scene) -> np.ndarray:
    """(T, n): how far the pusher's surface is from each object's bounding circle (m; <= 0: they may touch)."""
    reach = np.array([o.footprint.bounding_radius for o in scene.objects])
    return np.linalg.norm(rec.objects[..., :2] - rec.pusher[:, None], axis=-1) - reach - scene.pusher.radius


def _unpushed_runs(rec: Recording, scene: Scene) -> list:
    """Every run of samples in which an object moved with no cause the models know (``check_only_pushed``)."""
    xy = rec.objects[..., :2]  # (T, n, 2)
    reach = np.array([o.footprint.bounding_radius for o in scene.objects])
    to_pusher = pusher_distance(rec, scene)
    explained = to_pusher <= UNPUSHED_REACH
    between = np.linalg.norm(xy[:, :, None] - xy[:, None], axis=-1) - reach[:, None] - reach[None]
    near = (between <= UNPUSHED_REACH) & ~np.eye(len(reach), dtype=bool)
    for _ in range(len(reach) - 1):  # chains: pushed by an object that is itself pushed
        explained |= np.any(near & explained[:, None, :], axis=-1)
    runs = []
    for i, o in enumerate(scene.objects):
        free = ~explained[:, i]
        starts = np.flatnonzero(free & ~np.concatenate([[False], free[:-1]]))
        for a in starts:  # each run of samples with nothing near: its motion from the run's first sample
            b = a + int(np.argmin(free[a:])) if not free[a:].all() else len(free)
            moved = np.linalg.norm(xy[a:b, i] - xy[a, i], axis=-1)
            if moved.max() > UNPUSHED_MOTION:
                runs.append(_UnpushedRun(o.name, int(a), int(b), int(a + np.argmax(moved > UNPUSHED_MOTION)),
                                         float(moved.max()), float(1e3 * to_pusher[a:b, i].min())))
    return sorted(runs, key=lambda r: r.a)


# ------------------------------------------------------------------------------------------ session bags
PUSH_MARGIN_S = 0.4  # s of a session kept before a push's first approach and after it (its approach, the free slide)
PUSH_IDLE_S = 1.0  # s with no object near the pusher that separate two pushes of one session


@dataclass
class Session:
    """A session's ``recording`` cut into pushes (``split_pushes``): ``pushes`` (``Recording`` each, named
    ``<session>_push_000``, ...), ``breaks`` and ``left_out`` ((start s, end s, why), since the session's first
    sample): the stretches no push may span (an object moved with nothing near it, a body not tracked), and those
    near the pusher not written as a push (no object moved; one not accepted as a push)."""

    recording: Recording
    pushes: list
    breaks: list
    left_out: list

    @property
    def start(self) -> float:
        """The session's first sample time (s): ``breaks`` and ``idle`` count from it."""
        return float(self.recording.times[0])

    @property
    def note(self) -> str:
        return self.recording.note


def split_pushes(rec: Recording, scene: Scene, tracked: np.ndarray | None = None,
                 object_samples: dict | None = None) -> Session:
    """Cut a session (several pushes, the objects set back by hand between them) into recordings of one push
    each, every one of which ``check_only_pushed`` accepts: a push is a stretch with an object within
    ``UNPUSHED_REACH`` of the pusher (stretches less than ``PUSH_IDLE_S`` apart are one push), with
    ``PUSH_MARGIN_S`` before and after, in which an object moved more than ``UNPUSHED_MOTION``; none spans an
    object moved with nothing near (a hand), a gap of the samples, or a sample where ``tracked`` (T,) is False (a
    body not seen within ``MAX_GAP_S``: occluded by the hand). ``object_samples`` ({topic: sample stamps}, a bag's
    objects) are held to a push's rate as ``read_mcap`` holds them; a push that fails it, or ``check_only_pushed``,
    is left out, said why. A hand near the pusher is not told from the pusher: keep the pusher away while setting
    objects back."""
    t, T = rec.times, len(rec.times)
    t0 = t[0]
    free = np.ones(T, dtype=bool) if tracked is None else np.asarray(tracked, dtype=bool).copy()
    breaks = []
    for a, b in _runs(~free):
        breaks.append((t[a] - t0, t[b - 1] - t0, f"a body not tracked (no sample within {MAX_GAP_S:g} s: occluded?)"))
    for run in _unpushed_runs(rec, scene):
        free[run.a:run.b] = False
        breaks.append((t[run.a] - t0, t[run.b - 1] - t0, f"object {run.name!r} moved {1e3 * run.moved:.0f} mm with "
                                                         f"the pusher {run.pusher_mm:.0f} mm or more away (a hand?)"))
    cut = np.concatenate([[False], np.diff(t) > MAX_GAP_S])  # a gap of the samples: a new stretch after it
    for k in np.flatnonzero(cut):
        breaks.append((t[k - 1] - t0, t[k] - t0, f"no sample for {t[k] - t[k - 1]:.2f} s"))
    engaged = (pusher_distance(rec, scene) <= UNPUSHED_REACH).any(axis=1)
    stretches = [(s, e) for a, b in _runs(free)
                 for s, e in itertools.pairwise([a, *(np.flatnonzero(cut[a + 1:b]) + a + 1), b])]
    pushes, left_out = [], []
    for s, e in stretches:
        near = np.flatnonzero(engaged[s:e]) + s
        for g in np.split(near, np.flatnonzero(np.diff(t[near]) > PUSH_IDLE_S) + 1) if near.size else []:
            lo = int(np.searchsorted(t, max(t[s], t[g[0]] - PUSH_MARGIN_S), side="left"))
            hi = int(np.searchsorted(t, min(t[e - 1], t[g[-1]] + PUSH_MARGIN_S), side="right"))
            moved = np.linalg.norm(rec.objects[lo:hi, :, :2] - rec.objects[lo, :, :2], axis=-1).max()
            if moved <= UNPUSHED_MOTION:
                left_out.append((t[lo] - t0, t[hi - 1] - t0, f"the pusher came near, no object moved more than "
                                                             f"{1e3 * UNPUSHED_MOTION:.0f} mm"))
                continue
            name = f"{rec.name}_push_{len(pushes):03d}"
            push = Recording(name, t[lo:hi].copy(), rec.pusher[lo:hi].copy(), rec.objects[lo:hi].copy())
            try:
                _check_samples(push, name, row_offset=lo, unit="sample", column="")
                for topic, st in (object_samples or {}).items():  # each object's own samples over the push
                    a, b = np.searchsorted(st, t[lo], side="right") - 1, np.searchsorted(st, t[hi - 1]) + 1
                    _check_times(st[max(0, a):b], f"{name}: topic {topic}", row_offset=0, unit="sample", column="")
                # measured from the push's own start, a slow drift may add up past UNPUSHED_MOTION
                check_only_pushed(push, scene, name)
            except RecordingError as e:
                left_out.append((t[lo] - t0, t[hi - 1] - t0, str(e).split(" A recording is scored")[0]))
                continue
            pushes.append(push)
    return Session(rec, pushes, sorted(breaks), left_out)


def _runs(mask: np.ndarray) -> list:
    """[(a, b)] of the runs of True in ``mask`` (samples a .. b - 1)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def read_session(path, scene: Scene, topics: MocapTopics | None = None) -> Session:
    """A session's CSV or MCAP recording cut into pushes (``split_pushes``); in a bag, a body may drop out
    between pushes (a hand over its markers): no push spans that."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return split_pushes(read_csv(path, scene), scene)  # (a CSV file has no gap: read_csv refuses one)
    rec, samples, _ = _read_bodies(path, scene, _bag_topics(path, topics))
    objects = dict(list(samples.items())[1:])
    tracked = np.ones(len(rec.times), dtype=bool)
    for st in objects.values():  # each object: a sample within MAX_GAP_S on both sides of the time
        i = np.clip(np.searchsorted(st, rec.times), 1, len(st) - 1)
        tracked &= (st[i] - st[i - 1] <= MAX_GAP_S) | np.isin(rec.times, st)
    return split_pushes(rec, scene, tracked, objects)


def expand_paths(paths) -> list:
    """Files and directories (their *.csv and *.mcap, sorted) -> a list of files; a missing path is an error."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted([*p.glob("*.csv"), *p.glob("*.mcap")])
            if not found:
                raise RecordingError(f"{p}: no .csv or .mcap recordings in this directory")
            out += found
        elif p.exists():
            out.append(p)
        else:
            raise RecordingError(f"{p}: no such file or directory")
    return out


def read_recordings(paths, scene: Scene, topics: MocapTopics | None = None) -> list:
    """Every recording of files and directories (``expand_paths``), each named by its file's stem, or where two
    share a stem (``rec/S_0/push_000.csv`` and ``rec/S_1/push_000.csv``) by its path below their common folder
    (``S_0/push_000.csv``), so that results, plots and a calibrated scene's header tell them apart."""
    files = expand_paths(paths)
    recordings = [read_recording(p, scene, topics) for p in files]
    stems = [p.stem for p in files]
    if len(set(stems)) < len(stems):
        resolved = [p.resolve() for p in files]
        common = Path(os.path.commonpath([r.parent for r in resolved]))
        for rec, p, r in zip(recordings, files, resolved):
            if stems.count(p.stem) > 1:
                rec.name = str(r.relative_to(common))
    return recordings


class McapPoseWriter:
    """Writes PoseStamped messages (as dicts or ROS messages) to an MCAP bag ``ros2 bag`` and Foxglove read."""

    def __init__(self, path, mocap: dict | None = None):
        """``mocap``: the mocap_ingest parameters (transform and topic names) to store in the bag's metadata
        (``MOCAP_METADATA``), so that reading it later needs no configuration file."""
        from mcap_ros2.writer import Writer  # noqa: PLC0415
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("wb")
        # 64 KiB chunks (about 2 s of three bodies at 100 Hz): what a killed recorder loses, unwritten
        self._writer = Writer(self._file, chunk_size=64 * 1024)
        self._schema = self._writer.register_msgdef(POSE_DATATYPE, POSE_MSGDEF)
        if mocap:
            self._writer.add_metadata(MOCAP_METADATA, {k: json.dumps(v) for k, v in mocap.items()})
        self.count = 0

    def write(self, topic: str, stamp: float, frame_id: str, position, quaternion, log_time: float | None = None):
        """One PoseStamped; ``stamp`` (s) is its header stamp, ``log_time`` (s) when it was received (default:
        the stamp)."""
        sec = int(math.floor(stamp))
        msg = {"header": {"stamp": {"sec": sec, "nanosec": int(round((stamp - sec) * 1e9)) % 1_000_000_000},
                          "frame_id": frame_id},
               "pose": {"position": {"x": float(position[0]), "y": float(position[1]), "z": float(position[2])},
                        "orientation": {"x": float(quaternion[0]), "y": float(quaternion[1]),
                                        "z": float(quaternion[2]), "w": float(quaternion[3])}}}
        t_ns = int(round((stamp if log_time is None else log_time) * 1e9))
        self._writer.write_message(topic, self._schema, msg, log_time=t_ns, publish_time=t_ns)
        self.count += 1

    def close(self):
        if self._file is not None:
            self._writer.finish()
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
