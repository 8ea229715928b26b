"""Recorded pushes (issue 15): the CSV format with its validation, and MCAP bags of mocap PoseStamped topics."""
import math

import numpy as np
import pytest

from parapush_ros.core.fidelity.recordings import (McapPoseWriter, MocapTopics, Recording, RecordingError,
                                                   expand_paths, read_csv, read_mcap, read_recording, read_recordings,
                                                   read_session, write_csv)
from parapush_ros.core.fidelity.synthetic import random_push_plans, simulate
from parapush_ros.core.fidelity.synthetic import session as synthetic_session
from parapush_ros.core.robot.mocap import MocapToTable, quat_from_yaw
from parapush_ros.core.scene.spec import load_scene

HEADER = "time,pusher_x,pusher_y,box_x,box_y,box_yaw"


def jitter(k: int) -> float:
    """A few micrometres of a camera's noise on sample k: a measured pose never repeats to the bit (a repeated one
    is a driver's frozen pose, dropped by the tracking checks)."""
    return 2e-6 * math.sin(1.7 * k)


@pytest.fixture(scope="module")
def scene():
    return load_scene("box_slider")


def recording(n=60, rate=100.0):
    t = np.arange(n) / rate
    pusher = np.stack([-0.0705 + 0.03 * t, 0.01 * t], -1)
    # yaw crosses +-pi: the reader unwraps it
    objects = np.stack([0.03 * t, 0.002 * t, math.pi - 0.02 + 0.1 * t], -1)[:, None, :]
    objects[:, 0, 2] = (objects[:, 0, 2] + math.pi) % (2 * math.pi) - math.pi
    return Recording("push", t, pusher, objects)


def test_csv_round_trip_and_yaw_unwrapped(tmp_path, scene):
    rec = recording()
    write_csv(tmp_path / "push.csv", scene, rec)
    assert (tmp_path / "push.csv").read_text().splitlines()[0] == HEADER
    back = read_csv(tmp_path / "push.csv", scene)
    np.testing.assert_allclose(back.times, rec.times, atol=1e-6)
    np.testing.assert_allclose(back.pusher, rec.pusher, atol=1e-6)
    np.testing.assert_allclose(back.objects[:, 0, :2], rec.objects[:, 0, :2], atol=1e-6)
    assert np.all(np.abs(np.diff(back.objects[:, 0, 2])) < 0.01) and back.objects[-1, 0, 2] > math.pi
    assert expand_paths([tmp_path]) == [tmp_path / "push.csv"]
    assert read_recording(tmp_path / "push.csv", scene).name == "push"


def write_rows(path, header, rows):
    path.write_text("\n".join([header] + [",".join(str(v) for v in r) for r in rows]) + "\n")
    return path


def good_rows(n=60):
    return [[k / 100, -0.07, 0.0, 0.0, 0.0, 0.0] for k in range(n)]


@pytest.mark.parametrize("mutate, words", [
    (lambda h, r: (h.replace("box_yaw", "box_theta"), r), "row 1, column 6: expected 'box_yaw', got 'box_theta'"),
    (lambda h, r: (h + ",extra", [x + [0] for x in r]), "row 1, column 7: unexpected column 'extra'"),
    (lambda h, r: (h, r[:4] + [[0.04, -0.07, "abc", 0, 0, 0]] + r[5:]), "row 6, column 3 (pusher_y): not a number"),
    (lambda h, r: (h, r[:4] + [[0.04, -0.07, 0, "nan", 0, 0]] + r[5:]), "row 6, column 4 (box_x): not finite"),
    (lambda h, r: (h, r[:4] + [[0.04, 0.0]] + r[5:]), "row 6: expected 6 values, got 2"),
    (lambda h, r: (h, r[:5] + [[0.03] + r[5][1:]] + r[6:]), "row 7, column 1 (time): 0.03 is not after"),
    (lambda h, r: (h, r[:10] + [[x[0] + 0.2] + x[1:] for x in r[10:]]), "row 12, column 1 (time): 0.210 s since"),
    (lambda h, r: (h, [[x[0] * 3] + x[1:] for x in r]), "33.3 rows per second, at least 50 needed"),
])
def test_csv_errors_name_file_row_and_column(tmp_path, scene, mutate, words):
    header, rows = mutate(HEADER, good_rows())
    with pytest.raises(RecordingError) as e:
        read_csv(write_rows(tmp_path / "bad.csv", header, rows), scene)
    assert str(e.value).startswith("bad.csv: ") and words in str(e.value), str(e.value)


def test_unknown_format_and_missing_path(tmp_path, scene):
    with pytest.raises(RecordingError, match=r"push.txt: unknown recording format '.txt'"):
        read_recording(tmp_path / "push.txt", scene)
    with pytest.raises(RecordingError, match="no such file or directory"):
        expand_paths([tmp_path / "missing.csv"])


def test_mcap_bag_of_mocap_topics_in_the_mocap_frame(tmp_path, scene):
    """A bag holds what the mocap driver streams (Y-up here, table rotated and offset); reading it applies the
    mocap -> table transform of the mocap_ingest configuration."""
    transform = MocapToTable.from_params([1.0, 0.75, -2.0], [0.3], "y")
    topics = MocapTopics(transform=transform, driver="natnet", body_map="box=Box7")
    rec = recording(80, rate=120.0)
    with McapPoseWriter(tmp_path / "push.mcap") as bag:
        for k, t in enumerate(rec.times):
            for topic, (x, y, yaw) in ((topics.topic("pusher"), (*rec.pusher[k], 0.0)),
                                       ("/Box7/pose", rec.objects[k, 0])):
                p, q = transform.to_mocap([x, y, 0.005], quat_from_yaw(yaw))
                bag.write(topic, 100.0 + t, "world", p, q)
    back = read_mcap(tmp_path / "push.mcap", scene, topics)
    np.testing.assert_allclose(back.times - back.times[0], rec.times, atol=1e-6)
    np.testing.assert_allclose(back.pusher, rec.pusher, atol=1e-9)
    np.testing.assert_allclose(back.objects[:, 0, :2], rec.objects[:, 0, :2], atol=1e-9)
    np.testing.assert_allclose(np.cos(back.objects[:, 0, 2] - rec.objects[:, 0, 2]), 1.0, atol=1e-9)
    other = MocapTopics(transform=transform)  # no body map: the box's topic is /box/pose, absent from the bag
    with pytest.raises(RecordingError, match=r"push.mcap: topic /box/pose: no PoseStamped messages"):
        read_mcap(tmp_path / "push.mcap", scene, other)


def test_mocap_topics_from_the_shipped_config():
    topics = MocapTopics.from_config()
    assert topics.topic(topics.pusher_body) == "/pusher/pose" and topics.transform.up_axis == "z"


def test_mcap_errors_say_sample_and_only_reader_failures_are_unreadable_bags(tmp_path, scene):
    """A bag's sampling errors count samples (a bag has no rows or columns); a file that the mcap reader cannot
    read is 'not a readable MCAP bag'."""
    topics = MocapTopics(transform=MocapToTable.from_params([0.0, 0.0, 0.0], [0.0], "z"), body_map="box=Box7")
    with McapPoseWriter(tmp_path / "gap.mcap") as bag:
        for k in range(40):
            t = 0.01 * k + (1.0 if k >= 20 else 0.0)  # a 1 s dropout after sample 19
            for topic in (topics.topic("pusher"), "/Box7/pose"):  # at rest, with a camera's noise
                bag.write(topic, t, "world", [jitter(k), 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    with pytest.raises(RecordingError, match=r"gap.mcap: topic /pusher/pose: sample 20: 1.010 s since the previous "
                                             r"sample \(at most"):
        read_mcap(tmp_path / "gap.mcap", scene, topics)
    (tmp_path / "foreign.mcap").write_bytes(b"not an mcap file at all")
    with pytest.raises(RecordingError, match=r"foreign.mcap: not a readable MCAP bag"):
        read_mcap(tmp_path / "foreign.mcap", scene, topics)


def test_an_object_dropout_or_a_pose_that_is_not_one_is_never_read_as_measured(tmp_path, scene):
    """natnet_ros2 publishes nothing for a body that lost tracking: a 0.6 s hole in the box's stream (the pusher
    streaming on) would be interpolated into invented poses; it is a dropout, named with its topic. A NaN or
    zero quaternion is not a sample (as in mocap_ingest): one alone leaves a gap well under the limit."""
    topics = MocapTopics(transform=MocapToTable.from_params([0.0, 0.0, 0.0], [0.0], "z"), body_map="box=Box7")

    def bag(name, box_sample):
        with McapPoseWriter(tmp_path / name) as b:
            for k in range(150):
                t = 100.0 + 0.01 * k
                b.write(topics.topic("pusher"), t, "world", [-0.1 + 0.0005 * k, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
                sample = box_sample(k)
                if sample is not None:
                    b.write("/Box7/pose", t, "world", [0.0005 * k, jitter(k), 0.0], sample)
        return tmp_path / name

    hole = bag("hole.mcap", lambda k: None if 60 <= k < 120 else [0.0, 0.0, 0.0, 1.0])
    with pytest.raises(RecordingError, match=r"hole.mcap: topic /Box7/pose: sample \d+: 0.610 s since the previous "
                                             r"sample \(at most 0.1 s: a tracking dropout\)"):
        read_mcap(hole, scene, topics)
    bad = {40: [float("nan"), 0.0, 0.0, 1.0], 80: [0.0, 0.0, 0.0, 0.0]}
    rec = read_mcap(bag("nan.mcap", lambda k: bad.get(k, [0.0, 0.0, 0.0, 1.0])), scene, topics)
    assert np.all(np.isfinite(rec.objects)) and len(rec.times) == 150
    assert rec.objects[40, 0, 0] == pytest.approx(0.0005 * 40)  # interpolated over one missing sample
    lost = {k: [0.0, 0.0, 0.0, 0.0] for k in range(30, 50)}  # 0.2 s of zero quaternions: a dropout too
    with pytest.raises(RecordingError, match=r"zeros.mcap: topic /Box7/pose: .*a tracking dropout"):
        read_mcap(bag("zeros.mcap", lambda k: lost.get(k, [0.0, 0.0, 0.0, 1.0])), scene, topics)
    # a hole in the box's stream after the pusher's last sample (same stamps: one frame) is outside the push
    with McapPoseWriter(tmp_path / "after.mcap") as b:
        for k in range(150):
            b.write(topics.topic("pusher"), 100.0 + 0.01 * k, "world", [-0.1 + jitter(k), 0.0, 0.0],
                    [0.0, 0.0, 0.0, 1.0])
        for k in [*range(150), *range(180, 200)]:
            b.write("/Box7/pose", 100.0 + 0.01 * k, "world", [jitter(k), 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    assert len(read_mcap(tmp_path / "after.mcap", scene, topics).times) == 150



def test_a_bag_whose_recorder_was_killed_is_read_up_to_where_it_stops(tmp_path, scene):
    """The recorder SIGKILLed (power cut, launch's kill escalation): the bag has no summary, and mcap's readers read
    nothing of it. Its complete chunks are read, with the transform stored at its start, and the Recording says so
    (``parapush replay`` prints it); a chunk is 64 KiB, so little is lost."""
    transform = MocapToTable.from_params([0.5, 0.0, 0.75], [0.2], "z")
    topics = MocapTopics(transform=transform, driver="natnet", body_map="box=Box7")
    mocap = {"table_origin_in_mocap": [0.5, 0.0, 0.75], "table_rotation_in_mocap": [0.2], "up_axis": "z",
             "mocap_driver": "natnet", "pose_topic_template": "", "pusher_body": "pusher", "body_map": "box=Box7"}
    path = tmp_path / "killed.mcap"
    bag = McapPoseWriter(path, mocap=mocap)
    n = 6000  # 60 s of two bodies at 100 Hz
    for k in range(n):
        t = 1000.0 + 0.01 * k
        for topic, x in ((topics.topic("pusher"), -0.1 + 0.00005 * k), ("/Box7/pose", 0.00005 * k)):  # on the table
            p, q = transform.to_mocap([x, 0.0, 0.005], quat_from_yaw(0.0))
            bag.write(topic, t, "world", p, q)
    bag._file.flush()  # the process dies here: no finish(), no summary
    rec = read_recording(path, scene)  # the transform and topics from the bag itself
    assert "killed.mcap: the bag was not closed" in rec.note
    assert 0.8 * n * 0.01 < rec.duration <= n * 0.01  # all but the last, unwritten chunk
    np.testing.assert_allclose(rec.pusher[:, 0], -0.1 + 0.00005 * np.round((rec.times - 1000.0) / 0.01), atol=1e-6)
    bag._file.close()


def _bag(path, topics, transform, rec, box=lambda k, pose: pose, mocap=None):
    """``rec`` (moving) written as the mocap driver streams it; ``box(k, (x, y, yaw))`` may alter the box's
    sample k (None: not sent)."""
    with McapPoseWriter(path, mocap=mocap) as bag:
        for k, t in enumerate(rec.times):
            for topic, pose in ((topics.topic("pusher"), (*rec.pusher[k], 0.0)),
                                (topics.object_topics(load_scene("box_slider"))[0], box(k, tuple(rec.objects[k, 0])))):
                if pose is not None:
                    p, q = transform.to_mocap([pose[0], pose[1], 0.005], quat_from_yaw(pose[2]))
                    bag.write(topic, 100.0 + t, "world", p, q)
    return path


def test_mocap_ingest_s_tracking_checks_keep_a_frozen_or_flipped_pose_out_of_the_ground_truth(tmp_path, scene):
    """A recording is what the models are scored against: natnet_ros2's frozen pose of an occluded box (0.3 s of
    one pose to the bit) is not read as the box standing still, and a marker set flipped by 180 deg for one frame is
    not read as a turn; both are dropped by mocap_ingest's own checks, the first leaving a gap that is an error
    naming why, the second interpolated over with a note."""
    transform = MocapToTable.from_params([0.0, 0.0, 0.0], [0.0], "z")
    topics = MocapTopics(transform=transform, body_map="box=Box7")
    rec = recording(80)
    frozen = _bag(tmp_path / "frozen.mcap", topics, transform, rec,
                  lambda k, pose: tuple(rec.objects[30, 0]) if 30 <= k < 60 else pose)
    with pytest.raises(RecordingError, match=r"frozen.mcap: topic /Box7/pose: sample \d+: .* a tracking dropout\); "
                                             r"dropped by mocap_ingest's tracking checks: /Box7/pose: \d+ sample\(s\), "
                                             r"the first at 100.4\d\d s \(pose unchanged to the bit"):
        read_mcap(frozen, scene, topics)
    flipped = _bag(tmp_path / "flipped.mcap", topics, transform, rec,
                   lambda k, pose: (pose[0], pose[1], pose[2] + math.pi) if k == 40 else pose)
    back = read_mcap(flipped, scene, topics)
    assert "flipped.mcap: samples dropped by mocap_ingest's tracking checks: /Box7/pose: 1 sample(s)" in back.note
    assert "yaw jump of 180 deg" in back.note
    assert np.abs(np.diff(back.objects[:, 0, 2])).max() < 0.01  # no turn read: interpolated over the one frame
    assert len(back.times) == 80


def test_a_bag_without_metadata_says_where_its_transform_came_from_and_other_types_are_named(tmp_path, scene):
    topics = MocapTopics.from_config()  # what the bag is read with when it carries no metadata
    plain = _bag(tmp_path / "plain.mcap", topics, topics.transform, recording(80))
    assert "plain.mcap: no parapush metadata in the bag" in read_recording(plain, scene).note
    from mcap_ros2.writer import Writer
    with (tmp_path / "tf.mcap").open("wb") as f:
        w = Writer(f)
        schema = w.register_msgdef("geometry_msgs/msg/Vector3", "float64 x\nfloat64 y\nfloat64 z\n")
        for k in range(10):
            for topic in ("/pusher/pose", "/box/pose"):
                w.write_message(topic, schema, {"x": 0.0, "y": 0.0, "z": 0.0}, log_time=k, publish_time=k)
        w.finish()
    with pytest.raises(RecordingError, match=r"tf.mcap: topic /pusher/pose: messages of type "
                                             r"'geometry_msgs/msg/Vector3', expected 'geometry_msgs/msg/PoseStamped'"):
        read_recording(tmp_path / "tf.mcap", scene)


def test_recordings_of_two_folders_with_the_same_file_names_are_told_apart(tmp_path, scene):
    for folder in ("S_0", "S_1"):
        write_csv(tmp_path / folder / "push_000.csv", scene, recording())
        write_csv(tmp_path / folder / f"only_{folder}.csv", scene, recording())
    names = [r.name for r in read_recordings([tmp_path / "S_0", tmp_path / "S_1"], scene)]
    assert names == ["only_S_0", "S_0/push_000.csv", "only_S_1", "S_1/push_000.csv"]  # unique stems stay short


def test_an_object_moved_with_nothing_near_it_is_not_read_as_a_push(tmp_path, scene):
    """A session bag of two pushes with the box set back by hand between them would be scored as one push, the
    hand's move counted as the models' error: an object moving with the pusher far from it is refused, naming it,
    when and how far the pusher was. Sliding on after a stroke, with the pusher still near, is a push."""
    t = np.arange(200) / 100.0
    pusher = np.stack([-0.07 + 0.05 * np.minimum(t, 1.0), np.zeros_like(t)], -1)  # pushes for 1 s, then waits
    box = np.stack([0.05 * np.minimum(t, 1.0) + 0.004 * np.clip(t - 1.0, 0.0, 0.1) / 0.1, np.zeros_like(t),
                    np.zeros_like(t)], -1)[:, None, :]  # a 4 mm slide on after the push
    write_csv(tmp_path / "push.csv", scene, Recording("push", t, pusher, box))
    assert len(read_recording(tmp_path / "push.csv", scene).times) == 200
    pusher[100:, 0] = np.linspace(pusher[99, 0], -0.35, 100)  # the pusher backs off 0.3 m ...
    box[150:, 0, 0] -= np.linspace(0.0, 0.03, 50)  # ... and a hand moves the box back 3 cm
    write_csv(tmp_path / "session.csv", scene, Recording("session", t, pusher, box))
    with pytest.raises(RecordingError, match=r"session.csv: object 'box' moved 30 mm between \d\.\d\d and 1.99 s "
                                             r"\(past 5 mm at 1.\d\d s\) with the pusher at least \d+ mm from touching "
                                             r"it and no moving object near: not a push"):
        read_recording(tmp_path / "session.csv", scene)


def test_a_bag_of_a_driver_without_stamps_is_read_at_its_log_times(tmp_path, scene):
    """A driver that leaves the header stamp 0: every sample had one stamp (refused as 'at least 2 samples, got 1');
    read at the log (receive) time, as mocap_ingest does, and said."""
    transform = MocapToTable.from_params([0.0, 0.0, 0.0], [0.0], "z")
    topics = MocapTopics(transform=transform, body_map="box=Box7")
    rec = recording(80)
    with McapPoseWriter(tmp_path / "nostamp.mcap") as bag:
        for k, t in enumerate(rec.times):
            for topic, (x, y, yaw) in ((topics.topic("pusher"), (*rec.pusher[k], 0.0)),
                                       ("/Box7/pose", rec.objects[k, 0])):
                p, q = transform.to_mocap([x, y, 0.005], quat_from_yaw(yaw))
                bag.write(topic, 0.0, "world", p, q, log_time=500.0 + t)
    back = read_mcap(tmp_path / "nostamp.mcap", scene, topics)
    np.testing.assert_allclose(back.times - back.times[0], rec.times, atol=1e-6)
    np.testing.assert_allclose(back.objects[:, 0, :2], rec.objects[:, 0, :2], atol=1e-9)
    assert "samples without a header stamp, read at their log (receive) time" in back.note


def write_clocked(path, rec, topics, transform, stamp_of, log_of, skip=()):
    """A bag of ``rec`` whose sample k of a topic has the header stamp ``stamp_of(topic, k, t)`` and the log
    (receive) time ``log_of(topic, k, t)``; the samples ``skip`` are not sent (frames the mocap dropped)."""
    with McapPoseWriter(path) as bag:
        for k, t in enumerate(rec.times):
            if k in skip:
                continue
            for topic, (x, y, yaw) in ((topics.topic("pusher"), (*rec.pusher[k], 0.0)),
                                       ("/Box7/pose", rec.objects[k, 0])):
                p, q = transform.to_mocap([x, y, 0.005], quat_from_yaw(yaw))
                bag.write(topic, stamp_of(topic, k, t), "world", p, q, log_time=log_of(topic, k, t))


def test_stamps_are_checked_against_the_log_times(tmp_path, scene):
    """The robot's clocks, not the simulator's: every topic stamped by a mocap host 5 s off the recorder's clock,
    received 2-5 ms late and for 0.3 s up to 0.3 s late, is read as recorded; a stamping clock that steps back or
    forward while recording, or bodies stamped by clocks that disagree (another host; a driver without stamps read at
    its log times beside one with them), is refused naming the topic (sorted by stamp, a step back interleaved two
    stretches of the push; bodies on different clocks were paired with each other's past)."""
    transform = MocapToTable.from_params([0.0, 0.0, 0.0], [0.0], "z")
    topics = MocapTopics(transform=transform, body_map="box=Box7")
    rec = recording(120)
    epoch = 1.7e9
    pusher = topics.topic("pusher")

    def delay(topic, k, t):  # a receive delay: 2-5 ms; the samples of 0.4-0.7 s held up, received in a burst at 0.7 s
        return 0.002 + (0.7 + 1e-5 * k - t if 0.4 <= t < 0.7 else 0.003 * (k % 3) / 2)
    write_clocked(tmp_path / "ok.mcap", rec, topics, transform, lambda tp, k, t: epoch + t,
                  lambda tp, k, t: epoch + 5.0 + t + delay(tp, k, t))
    back = read_mcap(tmp_path / "ok.mcap", scene, topics)
    np.testing.assert_allclose(back.times - back.times[0], rec.times, atol=1e-6)
    np.testing.assert_allclose(back.objects[:, 0, :2], rec.objects[:, 0, :2], atol=1e-9)
    # frames the mocap dropped during the late burst: a gap in the stamps the log times do not show, yet no step
    write_clocked(tmp_path / "burst.mcap", rec, topics, transform, lambda tp, k, t: epoch + t,
                  lambda tp, k, t: epoch + 5.0 + t + delay(tp, k, t), skip={50, 51})
    assert len(read_mcap(tmp_path / "burst.mcap", scene, topics).times) == len(rec.times) - 2

    def stepped(by):  # the pusher's stamping clock steps by ``by`` s at sample 90
        return lambda tp, k, t: epoch + t + (by if tp == pusher and k >= 90 else 0.0)
    for by, words in ((-0.5, "sample 90 .* stamped 0.490 s before one logged earlier: the clock that stamps it "
                             "stepped back"),
                      (0.5, "from sample 90 .* the stamps run 0.500 s further ahead of the log times than before: "
                            "the clock that stamps it stepped forward")):
        write_clocked(tmp_path / "step.mcap", rec, topics, transform, stepped(by),
                      lambda tp, k, t: epoch + t + delay(tp, k, t))
        with pytest.raises(RecordingError, match=f"step.mcap: topic {pusher}: .*{words}"):
            read_mcap(tmp_path / "step.mcap", scene, topics)

    write_clocked(tmp_path / "hosts.mcap", rec, topics, transform,
                  lambda tp, k, t: epoch + t + (0.2 if tp == pusher else 0.0), lambda tp, k, t: epoch + t + 0.003)
    with pytest.raises(RecordingError, match=rf"hosts.mcap: the topics' stamps lag their log times by different "
                                             rf"amounts \({pusher} -0.197 s, /Box7/pose \+0.003 s; 0.05 s apart at "
                                             rf"most\): they were stamped by clocks that disagree"):
        read_mcap(tmp_path / "hosts.mcap", scene, topics)
    write_clocked(tmp_path / "mixed.mcap", rec, topics, transform,
                  lambda tp, k, t: 0.0 if tp == pusher else epoch - 3.0 + t, lambda tp, k, t: epoch + t + 0.003)
    with pytest.raises(RecordingError, match=rf"{pusher} \+0.000 s \(no stamps: read at its log times\), /Box7/pose "
                                             rf"\+3.003 s"):
        read_mcap(tmp_path / "mixed.mcap", scene, topics)


def test_a_session_is_cut_into_its_pushes(tmp_path, scene):
    """A session bag (three pushes, the box set back by hand between them, its markers covered meanwhile) is
    refused as one push and cut into three by ``read_session``: each starts and ends where its push did (the box at
    rest there), none spans the hand's move or the dropout, and each is read as one push once written out."""
    plans = random_push_plans(scene, 3, seed=4)
    pushes = [simulate(scene, plan, f"p{i}", position_noise=1e-4, seed=i) for i, plan in enumerate(plans)]
    session, hidden = synthetic_session(pushes)
    transform = MocapToTable.from_params([0.2, -0.1, 0.0], [0.4], "z")
    topics = MocapTopics(transform=transform, body_map="box=Box7")
    path = _bag(tmp_path / "session.mcap", topics, transform, session,
                box=lambda k, pose: None if hidden[k] else pose)
    with pytest.raises(RecordingError, match=r"session.mcap: .*(not a push|a tracking dropout)"):
        read_recording(path, scene, topics)
    cut = read_session(path, scene, topics)
    assert [p.name for p in cut.pushes] == ["session_push_000", "session_push_001", "session_push_002"]
    for push, truth in zip(cut.pushes, pushes):
        # the box's motion is all in the cut, from rest to rest: the same start and end as the push alone
        np.testing.assert_allclose(push.objects[0, 0, :2], truth.objects[0, 0, :2], atol=1e-3)
        np.testing.assert_allclose(push.objects[-1, 0, :2], truth.objects[-1, 0, :2], atol=1e-3)
        write_csv(tmp_path / f"{push.name}.csv", scene, push)
    whys = " ".join(why for _, _, why in cut.breaks)
    assert "a body not tracked" in whys and "object 'box' moved" in whys and "(a hand?)" in whys
    back = read_recordings([tmp_path / f"{p.name}.csv" for p in cut.pushes], scene)
    assert [len(r.times) for r in back] == [len(p.times) for p in cut.pushes]
    # the box sampled at 25 Hz during the second push only: that push is left out, said why, the others kept
    second = (session.times >= cut.pushes[1].times[0] - 100.0) & (session.times <= cut.pushes[1].times[-1] - 100.0)
    slow = _bag(tmp_path / "slow.mcap", topics, transform, session,
                box=lambda k, pose: None if hidden[k] or (second[k] and k % 4) else pose)
    cut = read_session(slow, scene, topics)
    assert [p.name for p in cut.pushes] == ["slow_push_000", "slow_push_001"]
    assert any("topic /Box7/pose: 25.0 samples per second, at least 50 needed" in why for _, _, why in cut.left_out)
