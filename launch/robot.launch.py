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
the table frame, which is RViz's fixed frame. velocity_commander is a lifecycle node: it configures and
activates itself at start (autostart: true in its config; a params_file with autostart: false makes it wait for
`ros2 lifecycle set`); `ros2 lifecycle set /velocity_commander deactivate` silences the arm (after one zero).
"""
from parapush_ros import bringup


def generate_launch_description():
    return bringup.launch_description("robot")
