"""The node set of the parapush stack and how each node gets its parameters: the one description that
``launch/sim.launch.py``, ``launch/robot.launch.py`` (real ROS 2 installs) and ``parapush sim`` (one process, no
``ros2 launch`` needed) all read, so the three cannot drift apart.

Parameters of a node come from, in order (later wins):
  0. inherited parameters               (``NodeSpec.inherit``) what another node's files set for a parameter this
                                       node declares too: mujoco_sim takes mocap_ingest's transform and topics;
  1. ``config/<node>.yaml``            the node's parameters (``<node>: ros__parameters:``), shared by sim and robot;
  2. ``config/<mode>.yaml``            per-mode overrides for several nodes (``sim.yaml``: the simulated robot;
                                       ``robot.yaml``: the real one), sections named after the nodes;
  3. launch arguments                  ``scene``, ``model``, ``coarse_model``, ``mocap_driver``, ``output`` set the
                                       parameter of that name on every node that declares it (empty = keep the
                                       YAML value);
                                       ``use_sim_time`` is set on every node.
"""
from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from .core.models.registry import COARSE, names, spec_names
from .core.scene.assets import PACKAGE, share_dir

RVIZ_CONFIG = "parapush.rviz"
MODES = ("sim", "robot")


@dataclass(frozen=True)
class NodeSpec:
    name: str  # node name, and the section name in the YAML files
    executable: str  # console script (setup.py NODE_ENTRY_POINTS)
    module: str  # Python module defining the rclpy Node subclass and main()
    params: str  # name of the node's parameter dict in parapush_ros.ros.params
    modes: tuple = MODES  # launch files / runners that start it
    inherit: tuple = ()  # nodes whose parameters this node takes too where it declares the same name
    when: str = ""  # a launch argument that starts this node when it is set (OPTIONAL_NODES)
    lifecycle: bool = False  # an rclpy.lifecycle node: started unconfigured, then configured and activated

    @property
    def config(self) -> str:
        return f"{self.name}.yaml"

    def param_spec(self) -> dict:
        from .ros import params  # noqa: PLC0415
        spec = getattr(params, self.params, None)
        if spec is None:
            raise LookupError(f"parapush_ros.ros.params has no {self.params} (parameters of node {self.name!r})")
        return spec

    def node_class(self):
        """The rclpy Node subclass defined in ``module`` (exactly one)."""
        from rclpy.node import Node  # noqa: PLC0415
        mod = importlib.import_module(self.module)
        found = [c for _, c in inspect.getmembers(mod, inspect.isclass)
                 if issubclass(c, Node) and c is not Node and c.__module__ == mod.__name__]
        if len(found) != 1:
            raise LookupError(f"{self.module}: expected exactly one rclpy Node subclass, found "
                              f"{[c.__name__ for c in found]}")
        return found[0]


NODES = (
    # the sim publishes mocap poses through the inverse of mocap_ingest's transform, with its topic names: it
    # takes those parameters from mocap_ingest's files, so the two cannot disagree
    NodeSpec("mujoco_sim", "mujoco_sim", "parapush_ros.nodes.mujoco_sim", "MUJOCO_SIM", modes=("sim",),
             inherit=("mocap_ingest",)),
    NodeSpec("mocap_ingest", "mocap_ingest", "parapush_ros.nodes.mocap_ingest", "MOCAP_INGEST"),
    NodeSpec("parareal_predictor", "parareal_predictor", "parapush_ros.nodes.parareal_predictor", "PREDICTOR"),
    NodeSpec("mpc_planner", "mpc_planner", "parapush_ros.nodes.mpc_planner", "PLANNER", lifecycle=True),
    NodeSpec("velocity_commander", "velocity_commander", "parapush_ros.nodes.velocity_commander",
             "VELOCITY_COMMANDER", lifecycle=True),
)

# Nodes started only when their launch argument is set: the recorder of the mocap pose topics (record:=FILE,
# `parapush sim --record FILE`), with mocap_ingest's topic names and transform
OPTIONAL_NODES = (
    NodeSpec("pose_recorder", "pose_recorder", "parapush_ros.nodes.pose_recorder", "POSE_RECORDER",
             inherit=("mocap_ingest",), when="record"),
)

# Launch arguments: name -> (default per mode, description). Empty string = keep the YAML value.
LAUNCH_ARGUMENTS = {
    "scene": ({"sim": "", "robot": ""}, "scene name (config/scenes/<name>.yaml) or path, for every node; empty = "
                                        "the config files' scene"),
    "model": ({"sim": "", "robot": ""}, f"planner prediction model ({', '.join(spec_names())}); empty = "
                                        "config/mpc_planner.yaml"),
    "planner": ({"sim": "", "robot": ""}, "push planner of mpc_planner: mpc (sampling MPC) | dgoc (paper 003: DDP "
                                          "from demonstrations to a goal pose, tracked at 100 Hz; box scenes with "
                                          "a demonstration library); empty = config/mpc_planner.yaml"),
    "coarse_model": ({"sim": "", "robot": ""}, f"coarse model inside Parareal ({', '.join(names(COARSE))}; learned "
                                               f"for several objects, paper 001); empty = the config files'"),
    "use_sim_time": ({"sim": "true", "robot": "false"}, "use the /clock topic (the simulator's) on every node"),
    "rviz": ({"sim": "true", "robot": "true"}, "start RViz with rviz/parapush.rviz"),
    "mocap_driver": ({"sim": "", "robot": ""}, "natnet (/<body>/pose) or vrpn (/vrpn_mocap/<body>/pose); empty = "
                                               "config/mocap_ingest.yaml"),
    "output": ({"sim": "", "robot": ""}, "arm interface of velocity_commander: servo, ur_twist or joint_velocity; "
                                         "empty = config/velocity_commander.yaml"),
    "record": ({"sim": "", "robot": ""}, "MCAP bag to record the mocap pose topics to (pose_recorder node; "
                                         "parapush replay / calibrate read it); empty = no recording"),
}
# launch arguments that are not node parameters
_NOT_PARAMETERS = ("use_sim_time", "rviz")


def nodes(mode: str, arguments: dict | None = None) -> list:
    """The nodes a mode starts: NODES, and the OPTIONAL_NODES whose launch argument is set in ``arguments``."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
    arguments = arguments or {}
    return [n for n in NODES if mode in n.modes] + [
        n for n in OPTIONAL_NODES if mode in n.modes and arguments.get(n.when) not in ("", None)]


def spec(name: str) -> NodeSpec:
    for n in NODES + OPTIONAL_NODES:
        if n.name == name:
            return n
    raise KeyError(f"no node named {name!r} (nodes: {', '.join(n.name for n in NODES + OPTIONAL_NODES)})")


def launch_argument_defaults(mode: str) -> dict:
    return {name: (d[mode], desc) for name, (d, desc) in LAUNCH_ARGUMENTS.items()}


# ------------------------------------------------------------------------------------------------ files
def parameter_files(spec_: NodeSpec, mode: str, share=None) -> list:
    """The YAML files of a node in a mode, in the order they apply (missing mode overlay skipped)."""
    share = Path(share) if share is not None else share_dir()
    files = [share / "config" / spec_.config]
    overlay = share / "config" / f"{mode}.yaml"
    if overlay.exists():
        files.append(overlay)
    return files


def read_parameters(path, node_name: str) -> dict:
    """The ``ros__parameters`` of ``node_name`` in a ROS 2 parameter file (sections ``/**``, ``node`` or
    ``/node``; later sections override earlier ones as in rcl). Raises ValueError naming the file and section."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of node names")
    out = {}
    for section, body in data.items():
        if str(section).lstrip("/") not in ("**", node_name):
            continue
        if not isinstance(body, dict) or set(body) != {"ros__parameters"} or not isinstance(
                body["ros__parameters"], dict):
            raise ValueError(f"{path}: section {section!r} must hold exactly 'ros__parameters:' with a mapping")
        out.update(_flatten(body["ros__parameters"]))
    return out


def _flatten(d: dict, prefix: str = "") -> dict:
    """Nested mappings are dotted parameter names in ROS 2 (``weights: {a: 1.0}`` is ``weights.a``)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def coerce(value: str, default, name: str):
    """A launch-argument string as the type of a parameter's default."""
    if isinstance(default, bool):
        if value.lower() in ("true", "1", "yes"):
            return True
        if value.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"launch argument {name}: {value!r} is not a boolean")
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


def argument_overrides(spec_: NodeSpec, arguments: dict) -> dict:
    """Parameter overrides of a node from launch arguments (see the module docstring)."""
    pspec = spec_.param_spec()
    out = {}
    for name, value in arguments.items():
        if name in _NOT_PARAMETERS or value in ("", None) or name not in pspec:
            continue
        out[name] = coerce(str(value), pspec[name].default, name)
    if "use_sim_time" in arguments and arguments["use_sim_time"] not in ("", None):
        out["use_sim_time"] = coerce(str(arguments["use_sim_time"]), False, "use_sim_time")
    return out


def inherited_parameters(spec_: NodeSpec, mode: str, share=None) -> dict:
    """What the files of ``spec_.inherit`` nodes set for parameters ``spec_`` declares as well."""
    own = spec_.param_spec()
    out = {}
    for other in spec_.inherit:
        o = spec(other)
        for f in parameter_files(o, mode, share):
            out.update({k: v for k, v in read_parameters(f, o.name).items() if k in own})
    return out


def launch_parameters(spec_: NodeSpec, mode: str, arguments: dict, share=None) -> list:
    """``parameters=`` of a launch_ros Node: inherited values, the YAML file paths, launch-argument overrides."""
    return ([inherited_parameters(spec_, mode, share)] + [str(f) for f in parameter_files(spec_, mode, share)]
            + [argument_overrides(spec_, arguments)])


def node_parameters(spec_: NodeSpec, mode: str, arguments: dict, share=None) -> dict:
    """All parameters a node gets in ``mode``, merged as ROS would (for starting it without ``ros2 launch``)."""
    out = inherited_parameters(spec_, mode, share)
    for f in parameter_files(spec_, mode, share):
        out.update(read_parameters(f, spec_.name))
    out.update(argument_overrides(spec_, arguments))
    return out


def mocap_static_transform_arguments(mode: str, arguments: dict, share=None) -> list:
    """``static_transform_publisher`` arguments for the mocap frame -> table frame, from mocap_ingest's parameters
    (the same transform the ingest applies and the sim inverts, so TF agrees with the scene state and the table
    frame exists in TF for RViz)."""
    from .core.robot.mocap import MocapToTable  # noqa: PLC0415
    s = spec("mocap_ingest")
    p = {k: v.default for k, v in s.param_spec().items()}
    p.update(node_parameters(s, mode, arguments, share))
    origin, q = MocapToTable.from_params(p["table_origin_in_mocap"], p["table_rotation_in_mocap"],
                                         p["up_axis"]).table_pose_in_mocap()
    values = [("--x", origin[0]), ("--y", origin[1]), ("--z", origin[2]),
              ("--qx", q[0]), ("--qy", q[1]), ("--qz", q[2]), ("--qw", q[3])]
    out = [a for k, v in values for a in (k, repr(float(v)))]
    return out + ["--frame-id", p["mocap_frame_id"] or "world", "--child-frame-id", p["frame_id"]]


def rviz_config(share=None) -> str:
    share = Path(share) if share is not None else share_dir()
    return os.fspath(share / "rviz" / RVIZ_CONFIG)


# ------------------------------------------------------------------------------------------------ launch
def launch_description(mode: str):
    """The ``LaunchDescription`` of ``launch/<mode>.launch.py`` (a real ROS 2 install: ``launch``, ``launch_ros``).

    Every node of the mode with its parameters, the static transform mocap frame -> table (from mocap_ingest's
    parameters, so TF agrees with the scene state and the table frame exists in TF for RViz), optionally RViz.
    Lifecycle nodes (``NodeSpec.lifecycle``) are configured as soon as they start and activated once inactive,
    so the arm moves only after that explicit activate."""
    from launch import LaunchDescription  # noqa: PLC0415
    from launch.actions import DeclareLaunchArgument, OpaqueFunction  # noqa: PLC0415

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
    declared = [DeclareLaunchArgument(name, default_value=default, description=description)
                for name, (default, description) in launch_argument_defaults(mode).items()]
    return LaunchDescription(declared + [OpaqueFunction(function=_launch_actions, args=[mode])])


def _launch_actions(context, mode: str) -> list:
    from launch.substitutions import LaunchConfiguration  # noqa: PLC0415
    from launch_ros.actions import Node  # noqa: PLC0415

    share = share_dir()
    arguments = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    use_sim_time = coerce(arguments["use_sim_time"], False, "use_sim_time")
    actions = []
    for s in nodes(mode, arguments):
        kwargs = dict(package=PACKAGE, executable=s.executable, name=s.name, output="screen",
                      parameters=launch_parameters(s, mode, arguments, share))
        actions += _lifecycle_actions(kwargs) if s.lifecycle else [Node(**kwargs)]
    actions.append(Node(package="tf2_ros", executable="static_transform_publisher", name="mocap_to_table_tf",
                        output="screen", arguments=mocap_static_transform_arguments(mode, arguments, share),
                        parameters=[{"use_sim_time": use_sim_time}]))
    if coerce(arguments["rviz"], False, "rviz"):
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                            arguments=["-d", rviz_config(share)], parameters=[{"use_sim_time": use_sim_time}]))
    return actions


def _lifecycle_actions(node_kwargs: dict) -> list:
    """A lifecycle node, the event that configures it at start, and the handler that activates it once it is
    inactive (launch_ros' lifecycle events)."""
    from launch.actions import EmitEvent, RegisterEventHandler  # noqa: PLC0415
    from launch.events import matches_action  # noqa: PLC0415
    from launch_ros.actions import LifecycleNode  # noqa: PLC0415
    from launch_ros.event_handlers import OnStateTransition  # noqa: PLC0415
    from launch_ros.events.lifecycle import ChangeState  # noqa: PLC0415
    from lifecycle_msgs.msg import Transition  # noqa: PLC0415

    node = LifecycleNode(namespace="", **node_kwargs)

    def change(transition_id):
        return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition_id))

    activate = RegisterEventHandler(OnStateTransition(target_lifecycle_node=node, goal_state="inactive",
                                                      entities=[change(Transition.TRANSITION_ACTIVATE)]))
    return [activate, node, change(Transition.TRANSITION_CONFIGURE)]
