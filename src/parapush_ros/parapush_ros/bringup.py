"""The node set of the parapush stack and how each node gets its parameters: the one description that
``launch/sim.launch.py``, ``launch/robot.launch.py`` (``ros2 launch``) and ``parapush sim`` (one process, no
``ros2 launch`` needed) all read, so the three cannot drift apart.

A node's parameters are one dict (``node_parameters``), handed as it is to ``ros2 launch`` and to ``parapush sim``;
it is made from, in order (later wins):
  0. inherited parameters               (``NodeSpec.inherit``) what another node's files set for a parameter this
                                       node declares too: mujoco_sim takes mocap_ingest's transform and topics;
  1. ``config/<node>.yaml``, then      merged exactly as rcl merges ``--params-file`` files (``merge_like_rcl``:
     ``config/<mode>.yaml``            per node-name section, ``/**`` included, in the order names first appear);
                                       ``sim.yaml`` holds the simulated robot's values, ``robot.yaml`` the real one's;
  2. the planner's stack defaults      (``core.planning.planners``: dgoc's scene, alg2's model and optimiser, ...);
  3. ``params_file:=FILE``             the user's own parameter file (a lab's settings), merged as rcl does;
  4. launch arguments                  ``scene``, ``model``, ``planner``, ``coarse_model``, ``mocap_driver``,
                                       ``output``, ``record`` set the parameter of that name on every node that
                                       declares it (empty = keep the values above); ``use_sim_time`` on every node.
A node that cannot take a value exits at start with one line naming the parameter and the allowed values, and the
launch then ends with a non-zero status.
"""
from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from .core.config import yaml_problem
from .core.models.registry import AUTO_COARSE_RULE, coarse_choices, spec_names
from .core.scene.spec import SceneError, shipped_scene_names
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
    lifecycle: bool = False  # an rclpy.lifecycle node: configures and activates itself (autostart) or waits

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

# Launch arguments: name -> (default per mode, description). Empty string = keep the YAML value. A node that cannot
# take a value (an unknown scene, model, planner, driver or output) exits at start naming it and its allowed values.
RVIZ_CHOICES = ("auto", "true", "false")


def _shipped_scenes() -> str:
    """The shipped scenes' names for the help (the install's config: missing, the help says where they would be)."""
    try:
        return ", ".join(shipped_scene_names())
    except SceneError as e:
        return f"none found: {e}"

LAUNCH_ARGUMENTS = {
    "scene": ({"sim": "", "robot": ""}, f"scene for every node: a name of config/scenes/ "
                                        f"({_shipped_scenes()}) or a path to a scene YAML; empty = "
                                        f"the config files' scene (or the planner's default scene: dgoc block_003, "
                                        f"alg2 clutter_push)"),
    "model": ({"sim": "", "robot": ""}, f"planner prediction model: {' | '.join(spec_names())}; empty = "
                                        "config/mpc_planner.yaml (alg2: learned)"),
    "planner": ({"sim": "", "robot": ""}, "push planner of mpc_planner, a name of its registry (all of them: ros2 "
                                          "param describe /mpc_planner planner); shipped: auto (fast where it is "
                                          "measured at least as "
                                          "good: real time, one object, model fine or parareal1; else mpc) | "
                                          "mpc (sampling MPC) | fast (the sampling MPC "
                                          "re-planned at fast.replan_rate Hz) | dgoc (paper 003: DDP "
                                          "from demonstrations to a goal pose, tracked at 100 Hz; box scenes with "
                                          "a demonstration library) | alg2 (paper 004 Algorithm 2: a "
                                          "low-uncertainty path tracked by the MPC) | straight (the example "
                                          "planner: a straight line to the goal); empty = config/mpc_planner.yaml"),
    "coarse_model": ({"sim": "", "robot": ""}, f"coarse model inside Parareal: {' | '.join(coarse_choices())} "
                                               f"({AUTO_COARSE_RULE}); empty = the config files'"),
    "use_sim_time": ({"sim": "true", "robot": "false"}, "true | false: every node runs on the /clock topic (the "
                                                        "simulator's) instead of the system clock"),
    "rviz": ({"sim": "auto", "robot": "auto"}, "auto | true | false: start RViz with rviz/parapush.rviz (auto: "
                                               "when rviz2 is installed, else say so and go on without it)"),
    "mocap_driver": ({"sim": "", "robot": ""}, "natnet (/<body>/pose) | vrpn (/vrpn_mocap/<body>/pose); empty = "
                                               "config/mocap_ingest.yaml"),
    "output": ({"sim": "", "robot": ""}, "arm interface of velocity_commander: servo | ur_twist | joint_velocity; "
                                         "empty = config/velocity_commander.yaml"),
    "record": ({"sim": "", "robot": ""}, "MCAP bag to record the mocap pose topics to (pose_recorder node; "
                                         "parapush replay / calibrate read it; an existing file is refused, never "
                                         "overwritten); empty = no recording"),
    "params_file": ({"sim": "", "robot": ""}, "a ROS 2 parameter file of your own (sections per node name or /**) "
                                              "applied after the config files and the planner's defaults, before "
                                              "the other launch arguments: a lab's settings without editing the "
                                              "installed config; empty = none"),
}
# launch arguments that are not node parameters
_NOT_PARAMETERS = ("use_sim_time", "rviz", "params_file")


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


def read_sections(path) -> list:
    """The sections of a ROS 2 parameter file in file order: ``[(node name pattern, {parameter: value})]`` with
    nested mappings flattened to dotted names. Raises ValueError naming the file and section."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {yaml_problem(e)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of node names")
    out = []
    for section, body in data.items():
        if not isinstance(body, dict) or set(body) != {"ros__parameters"} or not isinstance(
                body["ros__parameters"], dict):
            raise ValueError(f"{path}: section {section!r} must hold exactly 'ros__parameters:' with a mapping")
        values = _flatten(body["ros__parameters"])
        for key, value in values.items():  # ROS 2 types a parameter by its value: these have none
            if value is None or (isinstance(value, list) and not value):
                raise ValueError(f"{path}: section {section!r}: parameter {key!r} has no value "
                                 f"({'empty' if value is None else 'an empty list'}): give one or leave it out")
        out.append((str(section), values))
    return out


def _section_matches(key: str, node_fqn: str) -> bool:
    """rcl's node-name wildcards: ``**`` stands for any number of name tokens (none included), ``*`` for one."""
    def match(pat, name):
        if not pat:
            return not name
        if pat[0] == "**":
            return any(match(pat[1:], name[i:]) for i in range(len(name) + 1))
        return bool(name) and pat[0] in ("*", name[0]) and match(pat[1:], name[1:])
    return match(key.strip("/").split("/"), node_fqn.strip("/").split("/"))


def merge_like_rcl(files: list, node_name: str) -> dict:
    """The parameters ``--params-file`` files give node ``/node_name``, merged exactly as rcl and rclpy do:
    sections are kept per node name as written (``node`` and ``/node`` are two names) in the order each name
    *first* appears across all files, a later file overrides a name's earlier values, and the node takes every
    matching section in that order, so a later-seen name wins: ``[/**: {}] [node: {a: 1}] [/**: {a: 2}]`` gives
    1, ``[node: {a: 1}] [/**: {a: 2}]`` gives 2 (``test_launch_config`` checks this against rclpy itself).
    ``files`` are paths or lists of sections."""
    order, merged = [], {}
    for f in files:
        for section, values in (f if isinstance(f, list) else read_sections(f)):
            key = section  # rcl keeps 'node' and '/node' apart (both match the node)
            if key not in merged:
                order.append(key)
                merged[key] = {}
            merged[key].update(values)
    out = {}
    fqn = "/" + node_name.lstrip("/")
    for key in order:
        if _section_matches(key, fqn):
            out.update(merged[key])
    return out


def read_parameters(path, node_name: str) -> dict:
    """The ``ros__parameters`` that one file gives ``node_name`` (``merge_like_rcl`` of that file alone)."""
    return merge_like_rcl([path], node_name)


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
        raise ValueError(f"launch argument {name}: {value!r} is not a boolean (true or false)")
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


def check_arguments(mode: str, arguments: dict) -> None:
    """Launch arguments that no node could take stop the launch before anything starts: the booleans and ``rviz``
    here; a value of a node parameter (scene, model, planner, driver, output) is checked by the node that takes it,
    which then exits at start with one line naming it (and the launch ends non-zero)."""
    coerce(str(arguments.get("use_sim_time", "")) or "false", False, "use_sim_time")
    rviz = str(arguments.get("rviz", "auto") or "auto")
    if rviz not in RVIZ_CHOICES:
        raise ValueError(f"launch argument rviz: {rviz!r} is not one of {', '.join(RVIZ_CHOICES)}")
    extra = arguments.get("params_file") or ""
    if extra:
        if not Path(extra).is_file():
            raise ValueError(f"launch argument params_file: {extra!r} is not a file")
        check_parameter_file(extra)
    unknown = set(arguments) - set(LAUNCH_ARGUMENTS)
    if unknown:
        raise ValueError(f"unknown launch argument(s) {', '.join(sorted(unknown))} (known: "
                         f"{', '.join(LAUNCH_ARGUMENTS)})")


def _declared(spec_: NodeSpec) -> set | None:
    """The parameters a node declares, None where they are not known here (its module is missing)."""
    try:
        return set(spec_.param_spec())
    except LookupError:
        return None


ROS_PARAMETERS = ("use_sim_time", "start_type_description_service")  # every rclpy node's own (and qos_overrides.*)


def check_parameter_file(path) -> None:
    """A user's parameter file (``params_file``) whose sections name parapush's nodes sets only parameters they
    declare: a misspelt key (``max_sped: 0.03``, meant to slow the arm for a first push) or node name
    (``velocity_comander:``) would otherwise leave the setting at its default without a word, as ROS does. Sections
    of other packages' nodes (a lab's shared file) are left alone, unless the name is one of ours misspelt.
    ValueError naming the file, the section and the key, with the nearest name."""
    ours = NODES + OPTIONAL_NODES
    declared = {s.name: _declared(s) for s in ours}
    for section, values in read_sections(path):
        matching = [s.name for s in ours if _section_matches(section, "/" + s.name)]
        if not matching:
            close = _misspelt(section.strip("/").split("/")[-1], declared)
            if close:
                raise ValueError(f"{path}: section {section!r} names none of parapush's nodes (did you mean "
                                 f"{close}?); its parameters would reach no node")
            continue
        if any(declared[n] is None for n in matching):
            continue  # a node whose parameters are not known here (``--without`` it): it judges them itself
        allowed = set().union(*(declared[n] for n in matching))
        shared = "*" in section  # a wildcard reaches other packages' nodes too: their keys pass
        for key in values:
            if key in allowed or key in ROS_PARAMETERS or key.startswith("qos_overrides."):
                continue
            hint = _misspelt(key, allowed) if shared else (difflib.get_close_matches(key, sorted(allowed), n=1,
                                                                                     cutoff=0.75) or [None])[0]
            if shared and hint is None:
                continue
            raise ValueError(f"{path}: section {section!r}: {key!r} is not a parameter of "
                             f"{', '.join(matching)}" + (f" (did you mean {hint}?)" if hint else "")
                             + ": it would be ignored")


def _misspelt(name: str, known) -> str | None:
    """The one of ``known`` that ``name`` looks like a slip of the keyboard for (nearly the same, at most two
    characters longer or shorter: ``velocity_comander``, not another package's ``ur_velocity_commander``)."""
    close = [k for k in difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.8) if abs(len(k) - len(name)) <= 2]
    return close[0] if close else None


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


def inherited_parameters(spec_: NodeSpec, mode: str, share=None, arguments: dict | None = None) -> dict:
    """What the files of ``spec_.inherit`` nodes, and the user's ``params_file`` sections of them, set for
    parameters ``spec_`` declares as well (a lab's transform or body map in its ``mocap_ingest:`` section reaches
    the recorder and the sim too, so they record and emulate what the ingest reads)."""
    own = spec_.param_spec()
    out = {}
    for other in spec_.inherit:
        o = spec(other)
        values = {**merge_like_rcl(parameter_files(o, mode, share), o.name), **_user_parameters(o, arguments or {})}
        out.update({k: v for k, v in values.items() if k in own})
    return out


def _planner_entry(mode: str, arguments: dict, share=None):
    """The registry entry of the planner a launch runs: the ``planner`` argument, else what mpc_planner's files and
    ``params_file`` say; None for an unknown one (mpc_planner refuses it at start, naming it)."""
    from .core.planning.planners import planner_entry  # noqa: PLC0415
    planner = spec("mpc_planner")
    files = {**merge_like_rcl(parameter_files(planner, mode, share), planner.name),
             **_user_parameters(planner, arguments)}
    try:
        return planner_entry(arguments.get("planner") or files.get("planner", planner.param_spec()["planner"].default))
    except ValueError:
        return None


def planner_defaults(mode: str, arguments: dict, share=None) -> dict:
    """The stack defaults of the planner a launch runs (``core.planning.planners``): ``{node: {parameter: value}}``,
    its launch defaults (dgoc's scene, alg2's model) on every node that declares the parameter, its node parameters
    and, in the sim, its sim parameters (e.g. the commander limits DG-OC's plans need). Step 2 of the order: the
    config files lose to them; the user's ``params_file`` and the launch arguments win."""
    entry = _planner_entry(mode, arguments, share)
    if entry is None:
        return {}
    params = {}
    for s_ in NODES + OPTIONAL_NODES:
        declared = _declared(s_) or ()
        params[s_.name] = {k: v for k, v in entry.launch_defaults.items() if k in declared}
    for node, v in entry.node_parameters.items():
        params.setdefault(node, {}).update(v)
    if mode == "sim":
        for node, v in entry.sim_parameters.items():
            params.setdefault(node, {}).update(v)
    return params


def planner_defaults_in_effect(mode: str, arguments: dict, share=None) -> str:
    """The line both bring-ups print about the planner's launch defaults that neither a launch argument nor the
    user's ``params_file`` replaces (``planner dgoc with its default(s) scene block_003 ...``); "" where none."""
    entry = _planner_entry(mode, arguments, share)
    user = _user_parameters(spec("mpc_planner"), arguments)
    filled = {} if entry is None else {k: v for k, v in entry.launch_defaults.items()
                                       if arguments.get(k) in ("", None) and k not in user}
    return (f"planner {entry.name} with its default(s) " + ", ".join(f"{k} {v}" for k, v in filled.items())
            + " (set them by launch argument or params_file to change)") if filled else ""


def node_parameters(spec_: NodeSpec, mode: str, arguments: dict, share=None) -> dict:
    """All parameters a node gets in ``mode``: what ``ros2 launch`` hands it (the launch files pass exactly this
    dict) and ``parapush sim`` gives it. In order, later wins: inherited values, the node's files merged as rcl
    merges them (``merge_like_rcl``), the planner's stack defaults, the user's ``params_file``, the launch
    arguments; then the sim's arm settings taken from the commander's (``sim_arm_parameters``), and whole numbers
    as doubles where declared so (``as_declared``)."""
    planner_params = planner_defaults(mode, arguments, share)
    out = inherited_parameters(spec_, mode, share, arguments)
    out.update(merge_like_rcl(parameter_files(spec_, mode, share), spec_.name))
    out.update(planner_params.get(spec_.name, {}))
    out.update(_user_parameters(spec_, arguments))
    out.update(argument_overrides(spec_, arguments))
    if spec_.name == "mujoco_sim":
        out.update(sim_arm_parameters(mode, arguments, share))
    return as_declared(spec_, out)


def as_declared(spec_: NodeSpec, values: dict) -> dict:
    """Whole numbers where a parameter is declared a double (``rate: 50`` or ``[0, 0, 0.75]`` in a lab's file) as
    doubles: rclpy refuses an integer for a double parameter (the node died with a traceback in ``parapush sim``
    and under ``ros2 launch`` alike). Anything else is left to the node, which names what it cannot take."""
    pspec = spec_.param_spec()
    out = dict(values)
    for name, value in values.items():
        if name not in pspec:
            continue
        default = pspec[name].default
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            out[name] = float(value)
        elif (isinstance(default, list) and default and all(isinstance(v, float) for v in default)
              and isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                   for v in value)):
            out[name] = [float(v) for v in value]
    return out


def sim_arm_parameters(mode: str, arguments: dict, share=None) -> dict:
    """mujoco_sim is the arm the commander drives: it takes what the commander sends, where it sends it (output
    servo, ur_twist or joint_velocity, the topic, frame, yaw and joint map), and holds a twist as that controller
    does (Servo stops after its timeout, the UR twist controller holds it), so an ``output:=`` of the sim or a lab's
    commander settings cannot leave the simulated arm listening elsewhere or stopping where the real one would not."""
    from .ros import topics  # noqa: PLC0415
    c = spec("velocity_commander")
    p = {k: v.default for k, v in c.param_spec().items()}
    p.update(node_parameters(c, mode, arguments, share))
    if p["output"] not in topics.COMMANDER_OUTPUTS:
        return {}  # the commander refuses it at start, naming it
    return {"command_interface": "joint_velocity" if p["output"] == "joint_velocity" else "twist",
            "twist_hold": p["output"] == "ur_twist",  # the UR twist controller has no timeout; Servo has
            "command_topic": p["output_topic"] or topics.COMMANDER_OUTPUTS[p["output"]],
            "command_frame_id": p["output_frame_id"],
            "table_yaw_in_command_frame": float(p["table_yaw_in_output_frame"]),
            "joint_matrix": [float(v) for v in p["joint_matrix"]]}


def _user_parameters(spec_: NodeSpec, arguments: dict) -> dict:
    """What the user's ``params_file`` sets for a node ({} without one)."""
    extra = arguments.get("params_file")
    return merge_like_rcl([extra], spec_.name) if extra else {}


MOCAP_TF_NODE = "mocap_to_table_tf"  # the static_transform_publisher of mocap_static_transform


@dataclass(frozen=True)
class StaticTransform:
    """One static TF transform: ``child_frame`` in ``parent_frame``, translation (m) and rotation (x, y, z, w)."""

    parent_frame: str
    child_frame: str
    translation: tuple
    rotation_xyzw: tuple


def mocap_static_transform(mode: str, arguments: dict, share=None) -> StaticTransform:
    """The mocap frame -> table frame transform, from mocap_ingest's parameters: the same transform the ingest
    applies and the sim inverts, so TF agrees with the scene state and the table frame exists in TF for RViz. The
    launch files publish it with tf2_ros' ``static_transform_publisher``, ``parapush sim`` itself."""
    from .core.robot.mocap import MocapToTable  # noqa: PLC0415
    s = spec("mocap_ingest")
    p = {k: v.default for k, v in s.param_spec().items()}
    p.update(node_parameters(s, mode, arguments, share))
    origin, q = MocapToTable.from_params(p["table_origin_in_mocap"], p["table_rotation_in_mocap"],
                                         p["up_axis"]).table_pose_in_mocap()
    return StaticTransform(p["mocap_frame_id"] or "world", p["frame_id"], tuple(float(v) for v in origin),
                           tuple(float(v) for v in q))


def mocap_static_transform_arguments(mode: str, arguments: dict, share=None) -> list:
    """``static_transform_publisher`` arguments for ``mocap_static_transform``."""
    t = mocap_static_transform(mode, arguments, share)
    values = zip(("--x", "--y", "--z", "--qx", "--qy", "--qz", "--qw"), t.translation + t.rotation_xyzw)
    out = [a for k, v in values for a in (k, repr(v))]
    return out + ["--frame-id", t.parent_frame, "--child-frame-id", t.child_frame]


def rviz_config(share=None) -> str:
    share = Path(share) if share is not None else share_dir()
    return os.fspath(share / "rviz" / RVIZ_CONFIG)


# ------------------------------------------------------------------------------------------------ launch
def launch_description(mode: str):
    """The ``LaunchDescription`` of ``launch/<mode>.launch.py`` (a real ROS 2 install: ``launch``, ``launch_ros``).

    Every node of the mode with its parameters, the static transform mocap frame -> table (from mocap_ingest's
    parameters, so TF agrees with the scene state and the table frame exists in TF for RViz), optionally RViz.
    Lifecycle nodes (``NodeSpec.lifecycle``) configure and activate themselves as soon as they have started
    (``autostart: true`` in config/<node>.yaml), so the arm moves only after that activate."""
    from launch import LaunchDescription  # noqa: PLC0415
    from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction  # noqa: PLC0415

    from .ros.node import take_back_sigint  # noqa: PLC0415

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
    declared = [DeclareLaunchArgument(name, default_value=default, description=description)
                for name, (default, description) in launch_argument_defaults(mode).items()]
    said = []
    if take_back_sigint():  # a launch that ignores SIGINT could not be stopped by it, nor stop a hung process
        said = [LogInfo(msg="this launch was started with SIGINT ignored (a script's background job?): it takes "
                            "SIGINT back, so Ctrl-C or kill -INT stops the stack")]
    return LaunchDescription(declared + said + [OpaqueFunction(function=_launch_actions, args=[mode])])


def _launch_actions(context, mode: str) -> list:
    from launch.actions import LogInfo, RegisterEventHandler  # noqa: PLC0415
    from launch.event_handlers import OnProcessExit  # noqa: PLC0415
    from launch.substitutions import LaunchConfiguration  # noqa: PLC0415
    from launch_ros.actions import Node  # noqa: PLC0415

    from .ros.node import LAUNCH_PID_ENV  # noqa: PLC0415

    share = share_dir()
    arguments = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    check_arguments(mode, arguments)  # raises: the launch ends non-zero with the message, before anything starts
    _end_a_wedged_launch(context)
    # ros2 launch takes any name:=value without complaint: a typo (ouput:=ur_twist, param_file:=lab.yaml) would
    # silently leave a setting at its default on the robot. Run as `ros2 launch parapush_ros <mode>.launch.py`,
    # nobody else can have declared a name, so any other name stops the launch; included by a lab's launch file,
    # whose own arguments are in the same configurations, the names close to ours are only warned about
    others = sorted(k for k in context.launch_configurations if k not in LAUNCH_ARGUMENTS)
    hints = {k: difflib.get_close_matches(k, LAUNCH_ARGUMENTS, n=1, cutoff=0.8) for k in others}
    named = ", ".join(f"{k} (did you mean {hints[k][0]}?)" if hints[k] else k for k in others)
    if others and _launched_directly(mode):
        raise ValueError(f"unknown launch argument(s) {named} (known: {', '.join(LAUNCH_ARGUMENTS)})")
    use_sim_time = coerce(arguments["use_sim_time"], False, "use_sim_time")
    actions = []
    said = planner_defaults_in_effect(mode, arguments, share)
    if said:
        actions.append(LogInfo(msg=said))
    if others:
        actions.append(LogInfo(msg=f"WARNING: launch arguments not parapush's, left to the launch file that "
                                   f"includes this one: {named}; a misspelt one of ours would leave its setting at "
                                   f"the default"))
    for s in nodes(mode, arguments):
        # one dict per node, merged by node_parameters (what parapush sim gives the node too): handing ROS the
        # files and the arguments separately would let rcl's section order decide which wins (merge_like_rcl)
        kwargs = dict(package=PACKAGE, executable=s.executable, name=s.name, output="screen",
                      parameters=[node_parameters(s, mode, arguments, share)],
                      additional_env={LAUNCH_PID_ENV: str(os.getpid())})  # ros.node.stop_with_parent
        node_actions = _lifecycle_actions(kwargs) if s.lifecycle else [Node(**kwargs)]
        actions += node_actions
        node = next(a for a in node_actions if getattr(a, "node_executable", None) == s.executable)
        actions.append(RegisterEventHandler(OnProcessExit(
            target_action=node, on_exit=functools.partial(_failed_node_ends_launch, s.name))))
        if s.name == "velocity_commander":
            actions += _zero_when_the_commander_dies(context, node, kwargs["parameters"][0],
                                                     watch_hang=mode == "robot")
    actions.append(Node(package="tf2_ros", executable="static_transform_publisher", name=MOCAP_TF_NODE,
                        output="screen", arguments=mocap_static_transform_arguments(mode, arguments, share),
                        parameters=[{"use_sim_time": use_sim_time}]))
    rviz = arguments["rviz"] or "auto"
    if rviz == "auto" and not _rviz_installed():
        actions.append(LogInfo(msg="rviz:=auto: rviz2 is not installed here, starting without RViz (rviz:=false "
                                   "says so explicitly)"))
    elif rviz != "false":
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                            arguments=["-d", rviz_config(share)], parameters=[{"use_sim_time": use_sim_time}]))
    return actions


def _end_a_wedged_launch(context) -> None:
    """The launch process runs a ROS node of its own (launch_ros': lifecycle tracking, the commander's zero and
    hang watch below), and rclpy can block below Python holding the GIL (``ros/node.py``). Then nothing of the
    launch runs again: no signal is heard, no process is reported or escalated, the hang watch is deaf, and the
    launch never ends. Its event loop re-arms faulthandler's watchdog (a thread that needs no GIL) every second, so
    a launch whose loop has not run for ``WEDGED_LIMIT_S`` prints every thread's traceback and exits 1; its nodes
    then stop as on Ctrl-C (they ask for SIGINT at their parent's death: ``ros.node.stop_with_parent``). Only in
    the ``ros2 launch`` command itself: a program that runs our launch description in its own process (a
    launch_testing test) goes on after the launch has ended, and it is not ours to end."""
    import faulthandler  # noqa: PLC0415

    from .ros.node import WEDGED_LIMIT_S  # noqa: PLC0415

    if os.path.basename(sys.argv[0]) != "ros2" or sys.argv[1:2] != ["launch"]:
        return
    loop = context.asyncio_loop

    def rearm():
        faulthandler.dump_traceback_later(WEDGED_LIMIT_S, exit=True)
        loop.call_later(1.0, rearm)
    rearm()


def _launched_directly(mode: str) -> bool:
    """Whether this process is ``ros2 launch ... <mode>.launch.py`` itself (not a launch file that includes it)."""
    return any(os.path.basename(a) == f"{mode}.launch.py" for a in sys.argv[1:])


def _rviz_installed() -> bool:
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix  # noqa: PLC0415
    try:
        get_package_prefix("rviz2")
    except PackageNotFoundError:
        return False
    return True


def _failed_node_ends_launch(name, event, context):
    """A parapush node that exits with an error (a parameter it cannot take, a crash) ends the whole launch with a
    non-zero status: ``ros2 launch`` returns 1 when an action raises. A node that exits 0 (after Ctrl-C) does not."""
    from launch.actions import OpaqueFunction  # noqa: PLC0415
    if event.returncode == 0 or context.is_shutdown:
        return None

    def fail(_context):
        raise RuntimeError(f"{name} exited with status {event.returncode} (its last lines above say why); stopping "
                           f"the launch")
    return [OpaqueFunction(function=fail)]


COMMANDER_HANG_TIMEOUT = 0.5  # s of silence of an active commander: 5 cm at the default speed limit, while a
# loaded host's scheduling hiccups (tens of ms at the commander's 100 Hz) stay far below it
COMMANDER_HANG_AFTER_ZERO = 2.0  # s of silence after a zero: the arm is then at most at one ramp step of speed
# (max_acceleration x period, 5 mm/s), while a commander starting on a busy host was once silent 0.6 s


def _zero_when_the_commander_dies(context, commander, params: dict, watch_hang: bool) -> list:
    """The UR twist controller and a forward velocity controller hold the last command: a commander killed
    mid-push (SIGKILL, out of memory) would leave the arm moving. The launch process outlives it: its own ROS node
    (launch_ros') sends the arm input one zero command as soon as the commander exits with an error. The publisher
    is made now, so DDS has matched it with the arm's driver long before it is needed.

    ``watch_hang`` (the robot, on the system clock): a commander that hangs without exiting (a deadlock, a stopped
    process) is as dangerous and sends nothing at all, while an active one sends every period, zeros included; silent
    for ``COMMANDER_HANG_TIMEOUT`` while active, it is sent a zero by the launch and killed (a hung process cannot be
    asked to stop; left alone, it might wake and resume at its old speed with the arm at rest), which ends the launch
    as any failed node does. Not in simulation: there the commander's period is simulated time, and a world slower
    than real time would look like a hang."""
    from launch.actions import LogInfo, RegisterEventHandler  # noqa: PLC0415
    from launch.event_handlers import OnProcessExit  # noqa: PLC0415
    from launch_ros.ros_adapters import get_ros_node  # noqa: PLC0415

    from .nodes.velocity_commander import output_of, zero_output  # noqa: PLC0415
    from .ros import qos, topics  # noqa: PLC0415

    p = {**{k: v.default for k, v in spec("velocity_commander").param_spec().items()}, **params}
    if p["output"] not in topics.COMMANDER_OUTPUTS:
        return []  # the commander refuses the output at start, naming it
    msg_type, topic = output_of(p)
    node = get_ros_node(context)
    publisher = node.create_publisher(msg_type, topic, qos.RELIABLE)
    if watch_hang:
        _watch_for_a_hang(context, node, commander, publisher, p, msg_type, topic)

    def on_exit(event, _context):
        if event.returncode == 0:  # it stopped as asked, after sending its own zero
            return None
        try:  # repeated until acknowledged: the launch itself may end right after (blocks its loop for at most 2 s)
            acked, sent, took = qos.repeat_until_acknowledged(
                publisher, lambda: publisher.publish(zero_output(p, node.get_clock().now().to_msg())),
                1.0 / p["rate"])
        except Exception as e:  # noqa: BLE001 - the launch's ROS node may already be shutting down
            return [LogInfo(msg=f"ERROR: velocity_commander exited with status {event.returncode} and the launch "
                                f"could not send the arm a zero on {topic}: {e!r}")]
        heard = (f"acknowledged by every reader after {took:.2f} s" if acked else
                 f"NOT acknowledged by every reader within {took:.1f} s: make sure the arm is still")
        return [LogInfo(msg=f"velocity_commander exited with status {event.returncode}: the launch sent the arm a "
                            f"zero command on {topic} ({sent}x, {heard})")]
    return [RegisterEventHandler(OnProcessExit(target_action=commander, on_exit=on_exit))]


def _watch_for_a_hang(context, node, commander, publisher, p: dict, msg_type, topic: str) -> None:
    """The hang watch of ``_zero_when_the_commander_dies``: the arm input as the launch's node receives it, judged
    on the steady clock (a step of the system clock is not silence), from the commander's first command until it
    says it is inactive (its lifecycle deactivate: silent by design) or the launch shuts down (its nodes stop). It
    judges silence after a zero too: a commander stopped while it published reaches some subscribers and not others
    (seen in ``soak --robot``: the arm's input had its first non-zero twist of a push, the launch's last was a zero),
    so the launch cannot tell from what it heard that the arm is at rest."""
    from rclpy.clock import Clock, ClockType  # noqa: PLC0415
    from std_msgs.msg import String  # noqa: PLC0415

    from .core.robot.command_safety import INACTIVE, status_parts  # noqa: PLC0415
    from .nodes.velocity_commander import zero_output  # noqa: PLC0415
    from .ros import qos, topics  # noqa: PLC0415

    steady = Clock(clock_type=ClockType.STEADY_TIME)
    # "suspect": silent at the last check; fired only if still silent at the next one (the executor runs due timers
    # before waiting messages: after a stall of this node's own thread the first check has not yet seen them)
    last = {"t": None, "moving": False, "fired": False, "suspect": False, "inactive": False}

    def moving(msg) -> bool:  # a TwistStamped or (joint_velocity) a Float64MultiArray
        if hasattr(msg, "twist"):
            v = msg.twist
            return any(x != 0.0 for x in (v.linear.x, v.linear.y, v.linear.z, v.angular.x, v.angular.y, v.angular.z))
        return any(x != 0.0 for x in msg.data)

    def on_command(msg):
        last["t"], last["moving"], last["suspect"] = steady.now().nanoseconds * 1e-9, moving(msg), False

    def on_status(msg):
        was, last["inactive"] = last["inactive"], status_parts(msg.data)[0] == INACTIVE
        if was and not last["inactive"] and last["t"] is not None:  # activated again: silent until now by design
            last["t"], last["suspect"] = steady.now().nanoseconds * 1e-9, False

    def check():
        details = commander.process_details
        if last["fired"] or last["t"] is None or last["inactive"] or context.is_shutdown or details is None:
            return
        silent = steady.now().nanoseconds * 1e-9 - last["t"]
        limit = COMMANDER_HANG_TIMEOUT if last["moving"] else COMMANDER_HANG_AFTER_ZERO
        if silent < limit or not last["suspect"]:
            last["suspect"] = silent >= limit
            return
        last["fired"] = True
        publisher.publish(zero_output(p, node.get_clock().now().to_msg()))
        node.get_logger().error(f"velocity_commander has sent nothing for {silent:.2f} s after a "
                                f"{'non-zero' if last['moving'] else 'zero'} command (hung?): the launch sent the arm "
                                f"a zero on {topic} and is killing it (pid {details['pid']})")
        with contextlib.suppress(ProcessLookupError):  # it exited meanwhile: its exit handler sends a zero too
            os.kill(details["pid"], signal.SIGKILL)
    node.create_subscription(msg_type, topic, on_command, qos.RELIABLE)
    node.create_subscription(String, "/" + topics.COMMANDER_STATUS_OF_PLANNER, on_status, qos.LATCHED)
    node.create_timer(COMMANDER_HANG_TIMEOUT / 5.0, check, clock=steady)


def _lifecycle_actions(node_kwargs: dict) -> list:
    """A lifecycle node (launch_ros tracks its state; ``ros2 lifecycle`` manages it). It configures and activates
    itself (its parameter ``autostart``, see ``ros.node``), not through launch_ros' ``ChangeState`` events, whose one
    unretried service call per transition could be lost on a loaded host."""
    from launch_ros.actions import LifecycleNode  # noqa: PLC0415

    return [LifecycleNode(namespace="", **node_kwargs)]
