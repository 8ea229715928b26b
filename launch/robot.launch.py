"""parapush on the real robot: mocap_ingest + parareal_predictor + mpc_planner + velocity_commander (everything
but the simulator), a static transform mocap frame -> table for TF, optionally RViz.

    ros2 launch parapush_ros robot.launch.py [scene:=obstacle_push] [model:=parareal2]
        [mocap_driver:=natnet|vrpn] [output:=servo|ur_twist|joint_velocity] [use_sim_time:=false] [rviz:=true]
        [record:=pushes.mcap]   (record the mocap pose topics for parapush replay / calibrate)

Start the mocap driver (natnet_ros2 or vrpn_mocap) and the arm's interface (MoveIt Servo, the UR twist controller
or a ros2_control forward velocity controller, plus the gripper controller) first. Parameters: config/<node>.yaml
(the mocap -> table transform lives in config/mocap_ingest.yaml), then config/robot.yaml if present, then the
launch arguments, as listed by parapush_ros.bringup. The static transform (tf2_ros static_transform_publisher)
is computed from the same mocap_ingest parameters, so TF agrees with the scene state; all parapush markers are in
the table frame, which is RViz's fixed frame.
"""
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from parapush_ros import bringup

MODE = "robot"


def _launch_nodes(context, *args, **kwargs):
    share = get_package_share_directory(bringup.PACKAGE)
    arguments = {name: LaunchConfiguration(name).perform(context) for name in bringup.LAUNCH_ARGUMENTS}
    use_sim_time = bringup.coerce(arguments["use_sim_time"], False, "use_sim_time")
    actions = [
        Node(package=bringup.PACKAGE, executable=spec.executable, name=spec.name, output="screen",
             parameters=bringup.launch_parameters(spec, MODE, arguments, share))
        for spec in bringup.nodes(MODE, arguments)
    ]
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
