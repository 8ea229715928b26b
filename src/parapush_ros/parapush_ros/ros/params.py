"""Node parameters: the single source of their names, defaults and meanings.

Nodes declare exactly these (``declare_all``, or ``ros.node.declare_config`` for the parts that are a core config
dataclass); the YAML files in ``config/`` set a subset of them and a test checks that every key there is declared
here with a matching type. Settings of a core config dataclass (``core.config.knob`` fields: the commander's
``SafetyConfig``, mocap_ingest's ``TrackingConfig``, mujoco_sim's ``SimConfig`` and ``EmulatedMocapConfig``,
natnet_bridge's ``BridgeConfig``, the planner's ``PlannerConfig`` and its optimisers' configs) are not written here
but generated from the dataclass (``config_params``), so their defaults, descriptions and checks live in core once;
what stays here are a node's interfaces (topics, frames, scene), checked where they are used.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.config import knobs
from ..core.robot.command_safety import SafetyConfig
from ..core.robot.mocap import TrackingConfig
from ..core.robot.natnet import BridgeConfig
from ..core.sim.config import SimConfig
from ..core.sim.mocap_emulator import EmulatedMocapConfig
from . import topics


@dataclass(frozen=True)
class Param:
    default: object
    description: str


def config_params(config_class, ns: str = "") -> dict:
    """The settings of a core config dataclass as parameters ``<ns><name>``."""
    return {ns + name: Param(default, description) for name, (default, description) in knobs(config_class).items()}


def _model_params() -> dict:
    """Which coarse and fine model a node that predicts uses, and every model's options (``learned_weights``,
    ``threads``, ...): generated from the model registry, so a model registered there appears here by itself."""
    from ..core.models.registry import parameter_descriptions  # noqa: PLC0415
    return {name: Param(default, text) for name, (default, text) in parameter_descriptions().items()}


PREDICTOR = {
    "scene": Param("obstacle_push", "scene name (config/scenes/<name>.yaml) or path to a scene YAML"),
    **_model_params(),
    "max_iterations": Param(2, "default Parareal iterations K (requests may override, 1..N)"),
    "tolerance": Param(0.0, "default Parareal tolerance on the change between iterates (m); 0 = run K iterations"),
    "frame_id": Param("table", "frame of all states (REP-103 table frame)"),
    "max_speed": Param(0.5, "reject controls faster than this (m/s)"),
    "max_slice_duration": Param(10.0, "reject control durations above this (s)"),
    "max_controls": Param(64, "reject requests with more controls than this"),
    "publish_iterations": Param(True, "publish every Parareal iterate as markers (not only the last)"),
}


_MOCAP_COMMON = {
    "scene": Param("obstacle_push", "scene name (config/scenes/<name>.yaml) or path to a scene YAML"),
    "mocap_driver": Param("natnet", "mocap driver whose topic names to use: natnet (/<body>/pose) | vrpn "
                                    "(/vrpn_mocap/<body>/pose)"),
    "pose_topic_template": Param("", "PoseStamped topic per rigid body with '{body}' for the body name, e.g. "
                                     "'/mocap/{body}/pose'; empty = the mocap_driver default"),
    "pusher_body": Param("pusher", "mocap rigid-body name of the pusher"),
    "body_map": Param("", "scene object -> mocap rigid-body names, 'object=Body' pairs separated by commas "
                          "(e.g. 'slider=Slider1'); objects not listed use their scene name"),
    "mocap_frame_id": Param("world", "frame_id of the mocap poses (natnet_ros2 and vrpn_mocap: world); other "
                                     "frames are rejected; empty = accept any"),
    "up_axis": Param("z", "axis the mocap system streams as up: z (ROS convention; set Motive's up axis to Z) | "
                          "y (Motive's default)"),
    "table_origin_in_mocap": Param([0.0, 0.0, 0.0], "position of the table frame origin (centre of the table top) "
                                                    "in the streamed mocap coordinates [x, y, z] (m)"),
    "table_rotation_in_mocap": Param([0.0], "table frame orientation in the (Z-up) mocap frame: [yaw] (rad, about "
                                            "up, counter-clockwise) or a quaternion [qx, qy, qz, qw]"),
}

MOCAP_INGEST_IO = {  # mocap_ingest's interfaces; how it tracks bodies is TrackingConfig's settings
    **_MOCAP_COMMON,
    "frame_id": Param("table", "frame_id of the published scene state (the table frame)"),
    "rate": Param(100.0, "scene_state publish rate (Hz)"),
    "quaternion_tolerance": Param(0.01, "reject orientations whose quaternion norm differs from 1 by more"),
    "diagnostics_period": Param(1.0, "period of the /diagnostics report (s)"),
    "markers_period": Param(0.1, "period of the tracked-body markers (s); 0 = off"),
}
MOCAP_INGEST = {**MOCAP_INGEST_IO, **config_params(TrackingConfig)}

POSE_RECORDER = {
    **_MOCAP_COMMON,
    "record": Param("", "MCAP bag to record the mocap PoseStamped topics of the pusher and the scene objects to "
                        "(the node starts only when the launch argument record:=FILE or `parapush sim --record "
                        "FILE` sets it)"),
}

MANAGED = {  # every lifecycle node's
    "autostart": Param(False, "configure and activate this managed node as soon as it has started, in its own "
                              "process (the launch files and parapush sim: config/<node>.yaml sets true); false = "
                              "it waits unconfigured and silent for `ros2 lifecycle set <node> configure`"),
}

COMMANDER_IO = {  # the commander's interfaces; its limits are SafetyConfig's settings
    **MANAGED,
    "scene": Param("obstacle_push", "scene name or path: the table and obstacles the pusher must stay clear of"),
    "output": Param("servo", "output interface: servo (MoveIt Servo TwistStamped) | ur_twist (UR twist "
                             "controller) | joint_velocity (Float64MultiArray for a 2-axis stage)"),
    "output_topic": Param("", "output topic; empty = /servo_node/delta_twist_cmds, /twist_controller/twist or "
                              "/forward_velocity_controller/commands by output"),
    "output_frame_id": Param("table", "header.frame_id of output twists (a frame the robot's TF knows; UR: base)"),
    "joint_matrix": Param([1.0, 0.0, 0.0, 1.0], "joint_velocity output: row-major 2x2 map from table-frame "
                                                "(vx, vy) to the two joint velocities"),
    "input_frame_id": Param("table", "required frame_id of incoming pusher_cmd twists; empty = accept any"),
    "rate": Param(100.0, "output rate (Hz): the command (or zeros) is sent every period"),
    "switch_command_type": Param(True, "servo output: call the Servo switch_command_type service (TWIST) at "
                                       "start"),
    "servo_switch_service": Param("/servo_node/switch_command_type", "MoveIt Servo's ServoCommandType service"),
    "servo_parameters_service": Param("/servo_node/get_parameters", "servo output: MoveIt Servo's GetParameters "
                                      "service, asked at configure for moveit_servo.command_in_type and "
                                      "moveit_servo.scale.linear; empty = do not ask, servo_command_in_type says it"),
    "servo_command_in_type": Param("speed_units", "servo output where Servo's parameters do not answer (the "
                                                  "simulation) or are not asked: speed_units (m/s; what mujoco_sim "
                                                  "takes) | unitless (fractions of servo_scale_linear)"),
    "servo_scale_linear": Param(0.0, "servo output, servo_command_in_type unitless: Servo's scale.linear (m/s per "
                                     "unit); 0 = unknown (activate is refused)"),
    "gripper_enabled": Param(True, "close the gripper on the pusher at start (control_msgs GripperCommand)"),
    "gripper_action": Param("/robotiq_gripper_controller/gripper_cmd", "GripperCommand action name"),
    "gripper_close_position": Param(0.7929, "gripper command position to close on the pusher (Robotiq: knuckle "
                                            "angle, rad)"),
    "gripper_max_effort": Param(50.0, "gripper max effort"),
    "startup_timeout": Param(10.0, "how long to wait for the Servo switch service and the gripper action server "
                                   "(s)"),
    "require_grasp": Param(False, "send zeros until the gripper reports a good grasp"),
}
VELOCITY_COMMANDER = {**COMMANDER_IO, **config_params(SafetyConfig)}

MUJOCO_SIM_IO = {  # mujoco_sim's interfaces; its clock, arm and mocap emulation are SimConfig's and
    # EmulatedMocapConfig's settings
    **_MOCAP_COMMON,
    "mocap_frame_id": Param("world", "frame_id of the published mocap poses"),
    "command_topic": Param("", "command topic; empty = /servo_node/delta_twist_cmds (twist) or "
                               "/forward_velocity_controller/commands (joint_velocity)"),
    "command_frame_id": Param("table", "required frame_id of twist commands"),
    "hidden_bodies": Param("", "mocap bodies not published (occluded), comma separated; may be changed at run "
                               "time"),
    # the emulated arm reads twists as MoveIt Servo does, under Servo's own parameter names, so that the commander
    # can ask this node's parameter service what a real Servo's would answer (servo_parameters_service)
    topics.SERVO_COMMAND_IN_TYPE: Param("speed_units", "twist interface: how the emulated MoveIt Servo reads a "
                                                       "twist: speed_units (m/s) | unitless (fractions of "
                                                       "moveit_servo.scale.linear)"),
    topics.SERVO_SCALE_LINEAR: Param(0.4, "twist interface, unitless: m/s per unit (MoveIt Servo's default 0.4)"),
}
MUJOCO_SIM = {**MUJOCO_SIM_IO, **config_params(SimConfig), **config_params(EmulatedMocapConfig)}


NATNET_BRIDGE_IO = {  # natnet_bridge's output frame; where it listens and what it publishes are BridgeConfig's
    "frame_id": Param("world", "frame_id of the published poses (= mocap_ingest's mocap_frame_id)"),
}
NATNET_BRIDGE = {**NATNET_BRIDGE_IO, **config_params(BridgeConfig)}


def _planner_params() -> dict:
    """mpc_planner parameters. ``planner`` picks the push planner from the registry ``core.planning.planners``
    (a planner with settings of its own has them as ``<planner>.<setting>``, e.g. ``dgoc.method``). The MPC's
    settings are generated from ``core.planning.planner.PlannerConfig`` (its sampling and proposal settings by
    their own names, each registered optimiser's as ``<optimiser>.<name>``) and cost weights from
    ``config/costs.yaml`` (as ``weights.<name>``), so each default lives in one place."""
    # deferred: core.planning imports MuJoCo, and only the planner's users pay for it
    from ..core.planning.planner import PlannerConfig  # noqa: PLC0415
    from ..core.planning.session import SessionConfig  # noqa: PLC0415
    from ..core.planning.planners import PLANNERS  # noqa: PLC0415
    from ..core.planning.tasks import load_cost_weights  # noqa: PLC0415
    spec = {
        **MANAGED,
        "scene": Param("obstacle_push", "scene name (config/scenes/<name>.yaml) or path to a scene YAML: table, "
                                        "objects, obstacles and the default goal"),
        "planner": Param("auto", "push planner (core/planning/planners.py): "
                                + "; ".join(f"{e.name}: {e.description}" for e in PLANNERS.values())),
        "target_object": Param("", "object that /goal_pose goals move; empty = the scene goal's object"),
        **{name: Param(default, description) for name, (default, description) in PlannerConfig.settings().items()},
        **_model_params(),
        **config_params(SessionConfig),
        "position_tolerance": Param(0.0, "default success radius around the goal (m); 0 = the scene goal's "
                                         "radius (0.05 m if the scene has no goal)"),
        "control_rate": Param(20.0, "rate of pusher_cmd while pushing (Hz)"),
        "stop_hold": Param(0.5, "after a push ends, zero commands keep being sent for this long (s)"),
        "frame_id": Param("table", "frame of commands, plans and markers (REP-103 table frame); incoming "
                                   "goal poses must be in it (or have an empty frame_id)"),
        "uncertainty_threshold": Param(0.01, "predicted position sigma of an object (m) above which planner/status "
                                              "reports an uncertain region (models with a variance, e.g. "
                                              "learned_ensemble); 0 = never"),
        "goal_pose_starts_push": Param(True, "a /goal_pose message starts a push to it (pre-empting a running "
                                             "one); false = it only moves the goal of a running push"),
    }
    for name, value in load_cost_weights().as_dict().items():
        spec[f"weights.{name}"] = Param(value, f"cost weight {name!r} (see config/costs.yaml)")
    for entry in PLANNERS.values():  # each planner's own settings, <planner>.<setting>
        if entry.config is not None:
            spec.update(config_params(entry.config, f"{entry.name}."))
    return spec


PLANNER = _planner_params()


def declare_all(node, spec: dict, read_only: bool = True) -> dict:
    """Declare every parameter of ``spec`` on ``node`` and return their current values by name. Read-only by
    default: a node reads its parameters once, so a set at run time would report success and change nothing;
    ROS refuses it instead ("Trying to set a read-only parameter: <name>"). A node that applies sets passes
    ``read_only=False`` and checks them in its own set callback."""
    from rcl_interfaces.msg import ParameterDescriptor  # noqa: PLC0415
    values = {}
    for name, p in spec.items():
        node.declare_parameter(name, p.default, ParameterDescriptor(description=p.description, read_only=read_only))
        values[name] = node.get_parameter(name).value
    return values
