"""Default topic, service and action names: the single place nodes, launch files and tests take them from.

Relative names resolve in the node's namespace, so a launch file can push the whole stack into one namespace.
Every node exposes its names as parameters too where a robot may need other ones (mocap, arm interfaces).
"""
SCENE_STATE = "scene_state"  # parapush_msgs/SceneState, mocap_ingest -> planner (reliable)
GOAL_POSE = "/goal_pose"  # geometry_msgs/PoseStamped from RViz "2D Goal Pose" (global name, as RViz publishes it)
PUSHER_CMD = "pusher_cmd"  # geometry_msgs/TwistStamped, planner -> velocity_commander, table frame
PUSHER_CMD_TELEOP = "pusher_cmd_teleop"  # TwistStamped, teleop -> velocity_commander (priority over pusher_cmd)
PLAN_PATH = "plan/path"  # nav_msgs/Path of the planned target-object path
PLAN_MARKERS = "plan/markers"  # visualization_msgs/MarkerArray of the plan, scene, goal
PLAN = "plan"  # parapush_msgs/PushPlan, the latest plan
PLANNER_STATUS = "planner/status"  # std_msgs/String, human-readable planner state
PREDICT_SERVICE = "predict_trajectory"  # parapush_msgs/srv/PredictTrajectory
PUSH_ACTION = "push_object"  # parapush_msgs/action/PushObject
SERVO_TWIST = "/servo_node/delta_twist_cmds"  # MoveIt Servo input (geometry_msgs/TwistStamped)
SERVO_SWITCH_COMMAND_TYPE = "/servo_node/switch_command_type"  # moveit_msgs/srv/ServoCommandType
SERVO_GET_PARAMETERS = "/servo_node/get_parameters"  # rcl_interfaces/srv/GetParameters of MoveIt Servo's node
SERVO_COMMAND_IN_TYPE = "moveit_servo.command_in_type"  # Servo's parameter: unitless (its default) | speed_units
SERVO_SCALE_LINEAR = "moveit_servo.scale.linear"  # Servo's parameter: m/s per unit of a unitless twist
FORWARD_VELOCITY_COMMANDS = "/forward_velocity_controller/commands"  # std_msgs/Float64MultiArray (ros2_control)
GRIPPER_ACTION = "/robotiq_gripper_controller/gripper_cmd"  # control_msgs/action/GripperCommand
DIAGNOSTICS = "/diagnostics"  # diagnostic_msgs/DiagnosticArray
CLOCK = "/clock"  # rosgraph_msgs/Clock, published by mujoco_sim for use_sim_time
UR_TWIST = "/twist_controller/twist"  # geometry_msgs/TwistStamped, UR driver's twist controller (frame "base")
# velocity_commanders output -> where it sends by default (and where mujoco_sim, the arm of the sim, listens)
COMMANDER_OUTPUTS = {"servo": SERVO_TWIST, "ur_twist": UR_TWIST, "joint_velocity": FORWARD_VELOCITY_COMMANDS}
MOCAP_MARKERS = "~/markers"  # visualization_msgs/MarkerArray of the tracked bodies (mocap_ingest/markers)
COMMANDER_STATUS = "~/status"  # std_msgs/String, velocity_commander state (ok / limited / watchdog / estop ...)
COMMANDER_STATUS_OF_PLANNER = "velocity_commander/status"  # the same topic, as the planner subscribes to it
ESTOP_SERVICE = "~/estop"  # std_srvs/Trigger on velocity_commander: latch zero output
ESTOP_RESET_SERVICE = "~/reset"  # std_srvs/Trigger on velocity_commander: clear the e-stop
SIM_RESET_SERVICE = "~/reset"  # std_srvs/Trigger on mujoco_sim: back to the scene's initial state
SIM_LOAD_SCENE_SERVICE = "~/load_scene"  # parapush_msgs/srv/LoadScene on mujoco_sim

# Frames (REP-105 style names; parameters where a robot needs others)
TABLE_FRAME = "table"  # the planar table frame all states, plans and markers are in
MOCAP_FRAME = "world"  # the frame mocap drivers stream in (natnet_ros2, vrpn_mocap)


def mocap_pose_topic(body: str, driver: str = "natnet") -> str:
    """Default PoseStamped topic of a rigid body for the common OptiTrack drivers."""
    if driver == "natnet":  # natnet_ros2: /<Motive body name>/pose
        return f"/{body}/pose"
    if driver == "vrpn":  # vrpn_mocap: /vrpn_mocap/<tracker>/pose (best effort!)
        return f"/vrpn_mocap/{body}/pose"
    raise ValueError(f"unknown mocap driver {driver!r} (expected natnet or vrpn)")
