"""Simulated parapush: mujoco_sim (robot + mocap) + mocap_ingest + parareal_predictor + mpc_planner +
velocity_commander, optionally RViz.

    ros2 launch parapush_ros sim.launch.py [scene:=obstacle_push] [model:=parareal2] [use_sim_time:=true]
                                           [rviz:=true] [record:=pushes.mcap]

The node set and each node's parameter files come from parapush_ros.bringup, which `parapush sim` (one process,
for machines without `ros2 launch`) reads too: config/<node>.yaml, then config/sim.yaml, then the launch
arguments. The simulator publishes /clock; every node runs on it with use_sim_time:=true (the default here).
RViz's fixed frame is the table frame, in which every marker is published; a static transform mocap frame ->
table (from config/mocap_ingest.yaml, as on the robot) puts the table frame into TF.
"""
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from parapush_ros import bringup

MODE = "sim"


def _launch_nodes(context, *args, **kwargs):
    share = get_package_share_directory(bringup.PACKAGE)
    arguments = {name: LaunchConfiguration(name).perform(context) for name in bringup.LAUNCH_ARGUMENTS}
    actions = [
        Node(package=bringup.PACKAGE, executable=spec.executable, name=spec.name, output="screen",
             parameters=bringup.launch_parameters(spec, MODE, arguments, share))
        for spec in bringup.nodes(MODE, arguments)
    ]
    use_sim_time = bringup.coerce(arguments["use_sim_time"], False, "use_sim_time")
    # the simulated mocap frame -> table, as on the robot: the table frame exists in TF for RViz
    actions.append(Node(package="tf2_ros", executable="static_transform_publisher", name="mocap_to_table_tf",
                        output="screen", arguments=bringup.mocap_static_transform_arguments(MODE, arguments, share),
                        parameters=[{"use_sim_time": use_sim_time}]))
    if bringup.coerce(arguments["rviz"], False, "rviz"):
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                            arguments=["-d", bringup.rviz_config(share)],
                            parameters=[{"use_sim_time": use_sim_time}]))
    return actions


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=description)
                for name, (default, description) in bringup.launch_argument_defaults(MODE).items()]
    return LaunchDescription(declared + [OpaqueFunction(function=_launch_nodes)])
