"""``pose_recorder`` in the sim stack (``parapush sim --record FILE``, launch argument ``record:=FILE``): the
simulated mocap topics go into an MCAP bag that ``parapush replay`` reads back in the table frame."""
import numpy as np
import pytest

pytest.importorskip("rclpy")

from conftest import wait_for
from parapush_ros import bringup
from parapush_ros.core.fidelity.recordings import MocapTopics, read_recording
from parapush_ros.sim_runner import SimStack

pytestmark = pytest.mark.timeout(90)


def test_sim_stack_records_the_mocap_topics_to_a_bag(ros_context, tmp_path):
    bag = tmp_path / "sim.mcap"
    assert "pose_recorder" not in [s.name for s in bringup.nodes("sim")]  # only when asked for
    stack = SimStack({"scene": "cylinder_slider", "record": str(bag)}, context=ros_context,
                     without=["mpc_planner", "parareal_predictor", "velocity_commander"])
    try:
        assert list(stack.nodes) == ["mujoco_sim", "mocap_ingest", "pose_recorder"]
        recorder, sim = stack.nodes["pose_recorder"], stack.nodes["mujoco_sim"].sim
        expected = sim.planar_state()
        stack.start()
        wait_for(lambda: recorder.count >= 200, timeout=60, what="200 recorded poses")
    finally:
        stack.shutdown()
    topics = MocapTopics.from_bag(bag)  # the bag carries the transform and topic names it was recorded with
    assert topics is not None and topics.topic(topics.pusher_body) == "/pusher/pose"
    rec = read_recording(bag, sim.scene)
    assert len(rec.times) >= 90 and np.all(np.diff(rec.times) > 0)
    L = sim.scene.layout
    np.testing.assert_allclose(rec.pusher.mean(0), L.pusher_pos(expected), atol=2e-3)
    np.testing.assert_allclose(rec.objects[:, 0, :2].mean(0), L.object_poses(expected)[0, :2], atol=2e-3)


def test_an_existing_bag_is_never_overwritten(ros_context, tmp_path):
    """record:=pushes.mcap given again for the next session: the node refuses to start, naming the file, and the
    first session's bag is intact."""
    from parapush_ros.nodes.pose_recorder import PoseRecorderNode
    from rclpy.parameter import Parameter
    bag = tmp_path / "pushes.mcap"
    bag.write_bytes(b"the first session")
    with pytest.raises(ValueError, match=r"parameter record: '.*pushes.mcap' exists \(a recording is never "
                                         r"overwritten"):
        PoseRecorderNode(parameter_overrides=[Parameter("record", value=str(bag))])
    assert bag.read_bytes() == b"the first session"
