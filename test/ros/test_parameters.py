"""Parameters that say yes and do nothing (issue 28 item 4): a node's parameter is either read-only, so that a set
through the parameter services is refused naming it, or applied and checked on set (the commander's limits, see
test_velocity_commander_node; mujoco_sim's hidden_bodies). Through a real SetParameters client."""
import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.srv import DescribeParameters, ListParameters, SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from conftest import wait_future  # noqa: E402
from parapush_ros.core.config import knobs  # noqa: E402
from parapush_ros.core.robot.command_safety import SafetyConfig  # noqa: E402
from parapush_ros.nodes.mocap_ingest import MocapIngestNode  # noqa: E402
from parapush_ros.nodes.velocity_commander import VelocityCommanderNode  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ROS_OWN = {"use_sim_time"}  # settable as ROS makes it (rclpy's other own parameters are read-only already)


def described(client_node, fqn):
    """{name: read_only} of every parameter of node ``fqn``, through its parameter services."""
    lister = client_node.create_client(ListParameters, f"{fqn}/list_parameters")
    describer = client_node.create_client(DescribeParameters, f"{fqn}/describe_parameters")
    assert lister.wait_for_service(timeout_sec=10.0) and describer.wait_for_service(timeout_sec=10.0)
    names = wait_future(lister.call_async(ListParameters.Request()), what="list").result.names
    descs = wait_future(describer.call_async(DescribeParameters.Request(names=names)), what="describe").descriptors
    return {d.name: d.read_only for d in descs}


def set_param(client_node, fqn, name, value):
    client = client_node.create_client(SetParameters, f"{fqn}/set_parameters")
    assert client.wait_for_service(timeout_sec=10.0)
    req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
    return wait_future(client.call_async(req), timeout=10.0, what=f"set {name}").results[0]


def test_mocap_ingest_parameters_are_read_only_and_a_set_is_refused_naming_it(ros_context, ros_executor):
    ros_executor.add(MocapIngestNode(namespace="/params_ingest"))
    io = ros_executor.add(rclpy.create_node("params_io", namespace="/params_ingest", context=ros_context))
    read_only = described(io, "/params_ingest/mocap_ingest")
    assert {n for n, ro in read_only.items() if not ro} <= ROS_OWN
    assert read_only["timeout"] and read_only["rate"]
    r = set_param(io, "/params_ingest/mocap_ingest", "timeout", 5.0)
    assert not r.successful and r.reason == "Trying to set a read-only parameter: timeout."


def test_only_the_commanders_limits_are_writable(ros_context, ros_executor):
    ros_executor.add(VelocityCommanderNode(namespace="/params_cmd"))
    io = ros_executor.add(rclpy.create_node("params_io", namespace="/params_cmd", context=ros_context))
    read_only = described(io, "/params_cmd/velocity_commander")
    assert {n for n, ro in read_only.items() if not ro} == set(knobs(SafetyConfig)) | ROS_OWN
    r = set_param(io, "/params_cmd/velocity_commander", "command_timeout", 0.0)
    assert not r.successful and r.reason == "parameter command_timeout: must be > 0, got 0.0"
    r = set_param(io, "/params_cmd/velocity_commander", "command_timeout", 0.3)  # looser than at start: refused
    assert not r.successful and r.reason.startswith("parameter command_timeout: 0.3 is above the 0.2 the commander "
                                                    "started with")
    assert set_param(io, "/params_cmd/velocity_commander", "command_timeout", 0.1).successful  # tighter
