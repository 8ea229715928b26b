"""Launch files, parameter files and the RViz config, checked without the ``launch`` package: every executable,
parameter file and RViz file they name exists and matches the package's entry points, config files and params."""
import ast
import sys
import types
from pathlib import Path

import pytest
import yaml

from parapush_ros import bringup
from parapush_ros.ros import params, topics

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "src" / "parapush_ros" / "setup.py"
LAUNCH_FILES = {"sim": ROOT / "launch" / "sim.launch.py", "robot": ROOT / "launch" / "robot.launch.py"}
REQUIRED_ARGUMENTS = {"scene", "model", "use_sim_time", "rviz"}
EXTERNAL_EXECUTABLES = {("rviz2", "rviz2"), ("tf2_ros", "static_transform_publisher")}


def entry_points() -> dict:
    """{executable: "module:function"} of NODE_ENTRY_POINTS in setup.py, read by AST (setup() is not run)."""
    tree = ast.parse(SETUP.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "NODE_ENTRY_POINTS" for t in node.targets):
            items = ast.literal_eval(node.value)
            return {k.strip(): v.strip() for k, v in (i.split("=") for i in items)}
    raise AssertionError("setup.py has no NODE_ENTRY_POINTS")


# ------------------------------------------------------------------------------------------------ node set
@pytest.mark.parametrize("spec", bringup.NODES, ids=lambda s: s.name)
def test_every_node_has_an_entry_point_a_node_class_params_and_a_config_file(spec):
    eps = entry_points()
    assert spec.executable in eps, f"{spec.executable} is not in setup.py NODE_ENTRY_POINTS"
    assert eps[spec.executable] == f"{spec.module}:main"
    cls = spec.node_class()
    mod = sys.modules[spec.module]
    assert callable(getattr(mod, "main", None))
    assert cls.__module__ == spec.module
    assert isinstance(spec.param_spec(), dict) and spec.param_spec()
    assert (ROOT / "config" / spec.config).is_file(), f"config/{spec.config} is missing"


def _check_parameters(path: Path, node_name: str, spec: dict):
    values = bringup.read_parameters(path, node_name)
    for key, value in values.items():
        assert key in spec, f"{path.name}: {node_name}.{key} is not declared in params.py"
        default = spec[key].default
        if isinstance(default, bool):
            assert isinstance(value, bool), f"{path.name}: {node_name}.{key} must be a bool"
        elif isinstance(default, float):
            assert isinstance(value, float), f"{path.name}: {node_name}.{key} must be a float (write 1.0, not 1)"
        elif isinstance(default, int):
            assert isinstance(value, int) and not isinstance(value, bool), f"{path.name}: {node_name}.{key}: int"
        elif isinstance(default, str):
            assert isinstance(value, str), f"{path.name}: {node_name}.{key} must be a string"
        elif isinstance(default, (list, tuple)):
            assert isinstance(value, list) and value, f"{path.name}: {node_name}.{key} must be a non-empty list"
            assert {type(v) for v in value} == {type(default[0])}, f"{path.name}: {node_name}.{key} element type"
    return values


@pytest.mark.parametrize("spec", bringup.NODES, ids=lambda s: s.name)
def test_config_files_set_only_declared_parameters_with_matching_types(spec):
    path = ROOT / "config" / spec.config
    data = yaml.safe_load(path.read_text())
    assert list(data) == [spec.name], f"{path.name}: expected exactly one section '{spec.name}:'"
    values = _check_parameters(path, spec.name, spec.param_spec())
    assert values, f"{path.name} sets no parameters"


@pytest.mark.parametrize("mode", bringup.MODES)
def test_mode_overlays_name_nodes_of_the_mode_and_declared_parameters(mode):
    path = ROOT / "config" / f"{mode}.yaml"
    if not path.exists():
        pytest.skip(f"no config/{mode}.yaml")
    names = {s.name for s in bringup.nodes(mode)}
    for section in yaml.safe_load(path.read_text()):
        assert section in names, f"{path.name}: section {section!r} is not a node of the {mode} launch"
        _check_parameters(path, section, bringup.spec(section).param_spec())


def test_merged_parameters_and_launch_arguments():
    sim = bringup.node_parameters(bringup.spec("mujoco_sim"), "sim", {"scene": "box_slider", "use_sim_time": "true"})
    ingest = bringup.node_parameters(bringup.spec("mocap_ingest"), "sim", {"use_sim_time": "true"})
    # the sim simulates exactly the mocap the ingest expects: same transform and topic names
    for key in ("table_origin_in_mocap", "table_rotation_in_mocap", "up_axis", "mocap_driver", "pusher_body",
                "body_map", "mocap_frame_id", "pose_topic_template"):
        assert sim[key] == ingest[key], key
    assert sim["scene"] == "box_slider" and sim["use_sim_time"] is True
    assert ingest["rate"] == 50.0  # config/sim.yaml over config/mocap_ingest.yaml
    robot = bringup.node_parameters(bringup.spec("mocap_ingest"), "robot", {"mocap_driver": "vrpn",
                                                                            "use_sim_time": "false"})
    assert robot["mocap_driver"] == "vrpn" and robot["rate"] == 100.0 and robot["use_sim_time"] is False
    planner = bringup.node_parameters(bringup.spec("mpc_planner"), "sim", {"model": "coarse", "scene": ""})
    assert planner["model"] == "coarse" and planner["scene"] == "obstacle_push"
    # a clutter scene with Parareal on the learned coarse model: planner and predictor both take the coarse model
    for node in ("mpc_planner", "parareal_predictor"):
        p = bringup.node_parameters(bringup.spec(node), "sim", {"scene": "clutter_push", "coarse_model": "learned"})
        assert p["scene"] == "clutter_push" and p["coarse_model"] == "learned", node
    commander = bringup.node_parameters(bringup.spec("velocity_commander"), "robot", {"output": "ur_twist"})
    assert commander["output"] == "ur_twist" and "model" not in commander  # only nodes declaring a name get it
    with pytest.raises(ValueError, match="launch argument use_sim_time"):
        bringup.argument_overrides(bringup.spec("mocap_ingest"), {"use_sim_time": "maybe"})


def test_static_transform_matches_the_ingest_transform():
    from parapush_ros.core.robot.mocap import MocapToTable
    args = bringup.mocap_static_transform_arguments("robot", {})
    kv = dict(zip(args[0::2], args[1::2]))
    p = bringup.node_parameters(bringup.spec("mocap_ingest"), "robot", {})
    origin, q = MocapToTable.from_params(p["table_origin_in_mocap"], p["table_rotation_in_mocap"],
                                         p["up_axis"]).table_pose_in_mocap()
    assert [float(kv[k]) for k in ("--x", "--y", "--z")] == pytest.approx(list(origin))
    assert [float(kv[k]) for k in ("--qx", "--qy", "--qz", "--qw")] == pytest.approx(list(q))
    assert (kv["--frame-id"], kv["--child-frame-id"]) == ("world", "table")


# ------------------------------------------------------------------------------------------------ launch files
@pytest.mark.parametrize("mode", bringup.MODES)
def test_launch_file_is_the_shared_launch_description(mode):
    path = LAUNCH_FILES[mode]
    tree = ast.parse(path.read_text(), filename=str(path))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert set(funcs) == {"generate_launch_description"}
    calls = [n for n in ast.walk(funcs["generate_launch_description"]) if isinstance(n, ast.Call)]
    assert [(ast.unparse(c.func), [a.value for a in c.args]) for c in calls] == [("bringup.launch_description",
                                                                                  [mode])]
    assert REQUIRED_ARGUMENTS <= set(bringup.LAUNCH_ARGUMENTS)


class _Recorder:
    """Stand-ins for launch / launch_ros classes: they remember their arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _fake_launch_modules(monkeypatch):
    def module(name, **attrs):
        mod = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(mod, k, v)
        monkeypatch.setitem(sys.modules, name, mod)

    class LaunchConfiguration:
        def __init__(self, name):
            self.name = name

        def perform(self, context):
            return context[self.name]

    class LifecycleNode(_Recorder):
        lifecycle = True

    module("launch", LaunchDescription=_Recorder)
    module("launch.actions", DeclareLaunchArgument=_Recorder, OpaqueFunction=_Recorder, EmitEvent=_Recorder,
           RegisterEventHandler=_Recorder)
    module("launch.events", matches_action=lambda action: ("matches", action))
    module("launch.substitutions", LaunchConfiguration=LaunchConfiguration)
    module("launch_ros")
    module("launch_ros.actions", Node=_Recorder, LifecycleNode=LifecycleNode)
    module("launch_ros.event_handlers", OnStateTransition=_Recorder)
    module("launch_ros.events")
    module("launch_ros.events.lifecycle", ChangeState=_Recorder)
    module("ament_index_python")
    module("ament_index_python.packages",
           get_package_share_directory=lambda pkg: str(ROOT) if pkg == "parapush_ros" else "/nonexistent")


@pytest.mark.parametrize("mode", bringup.MODES)
def test_launch_file_runs_against_stand_in_launch_modules(monkeypatch, mode):
    """Execute generate_launch_description and the node-creating function with recording stand-ins for launch,
    launch_ros and ament_index_python: every Node it creates must be one of ours (entry point, config files that
    exist) or a known external executable, with the RViz file that exists; lifecycle nodes are configured at start
    and activated once inactive."""
    from lifecycle_msgs.msg import Transition

    _fake_launch_modules(monkeypatch)
    ns = {"__name__": f"launch_{mode}", "__file__": str(LAUNCH_FILES[mode])}
    exec(compile(LAUNCH_FILES[mode].read_text(), str(LAUNCH_FILES[mode]), "exec"), ns)
    ld = ns["generate_launch_description"]()
    declared = {a.args[0]: a.kwargs for a in ld.args[0] if a.args}
    assert REQUIRED_ARGUMENTS <= set(declared)
    opaque = [a for a in ld.args[0] if "function" in a.kwargs]
    assert len(opaque) == 1

    def run(context):
        return opaque[0].kwargs["function"](context, *opaque[0].kwargs["args"])
    context = {name: kw["default_value"] for name, kw in declared.items()}
    context.update(scene="box_slider", rviz="true")
    created = run(context)
    launched = [a for a in created if "package" in a.kwargs]
    eps = entry_points()
    ours = [n for n in launched if n.kwargs["package"] == "parapush_ros"]
    assert [n.kwargs["executable"] for n in ours] == [s.executable for s in bringup.nodes(mode)]
    for node in ours:
        n = node.kwargs
        spec = bringup.spec(n["name"])
        assert n["executable"] in eps
        files = [p for p in n["parameters"] if isinstance(p, str)]
        assert files and all(Path(p).is_file() for p in files)
        assert Path(files[0]).name == f"{n['name']}.yaml"
        overrides = n["parameters"][-1]
        assert overrides["use_sim_time"] is (mode == "sim")
        if "scene" in spec.param_spec():
            assert overrides["scene"] == "box_slider"
        assert getattr(node, "lifecycle", False) is spec.lifecycle
        if spec.lifecycle:  # configure emitted for it; activate registered on its transition to inactive
            events = [a.kwargs["event"] for a in created if "event" in a.kwargs]
            configure = [e for e in events if e.kwargs["lifecycle_node_matcher"] == ("matches", node)]
            assert [e.kwargs["transition_id"] for e in configure] == [Transition.TRANSITION_CONFIGURE]
            handlers = [a.args[0] for a in created if a.args and a.args[0].kwargs.get("target_lifecycle_node")
                        is node]
            assert len(handlers) == 1 and handlers[0].kwargs["goal_state"] == "inactive"
            activate = handlers[0].kwargs["entities"][0].kwargs["event"]
            assert activate.kwargs["transition_id"] == Transition.TRANSITION_ACTIVATE
    others = [(n.kwargs["package"], n.kwargs["executable"]) for n in launched if n.kwargs["package"] != "parapush_ros"]
    assert set(others) == EXTERNAL_EXECUTABLES
    rviz = next(n.kwargs for n in launched if n.kwargs["executable"] == "rviz2")
    assert Path(rviz["arguments"][1]).is_file() and Path(rviz["arguments"][1]).name == bringup.RVIZ_CONFIG
    context["rviz"] = "false"
    assert not any(n.kwargs.get("executable") == "rviz2" for n in run(context))


def test_lifecycle_flag_matches_the_node_classes():
    from rclpy.lifecycle import LifecycleNode

    for spec in bringup.NODES:
        assert spec.lifecycle == issubclass(spec.node_class(), LifecycleNode), spec.name


def test_installed_share_holds_launch_config_and_rviz():
    share = ROOT / "install" / "parapush_ros" / "share" / "parapush_ros"
    if not share.is_dir():
        pytest.skip("workspace not built")
    for rel in ["launch/sim.launch.py", "launch/robot.launch.py", f"rviz/{bringup.RVIZ_CONFIG}", "config/sim.yaml"] + \
            [f"config/{s.config}" for s in bringup.NODES]:
        assert (share / rel).exists(), f"{rel} is not installed (make setup)"


# ------------------------------------------------------------------------------------------------ RViz
def test_rviz_config():
    cfg = yaml.safe_load((ROOT / "rviz" / bringup.RVIZ_CONFIG).read_text())
    vm = cfg["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == topics.TABLE_FRAME
    displays = {d["Class"].split("/")[-1] + ":" + d["Topic"]["Value"]: d for d in vm["Displays"] if "Topic" in d}
    for key, latched in [("MarkerArray:/" + topics.PLAN_MARKERS, True), ("Path:/" + topics.PLAN_PATH, True),
                         ("MarkerArray:/parareal_predictor/prediction_markers", True),
                         ("Path:/parareal_predictor/predicted_path", True),
                         ("MarkerArray:/mocap_ingest/markers", False)]:
        assert key in displays, f"RViz has no display {key}"
        durability = displays[key]["Topic"]["Durability Policy"]
        assert durability == ("Transient Local" if latched else "Volatile"), key
    goal_tools = [t for t in vm["Tools"] if t["Class"] == "rviz_default_plugins/SetGoal"]
    assert len(goal_tools) == 1 and goal_tools[0]["Topic"]["Value"] == topics.GOAL_POSE


def test_params_dicts_of_this_issue_are_complete():
    for spec in (params.MOCAP_INGEST, params.VELOCITY_COMMANDER, params.MUJOCO_SIM, params.NATNET_BRIDGE):
        for name, p in spec.items():
            assert p.description and not (isinstance(p.default, (list, tuple)) and not p.default), name
