"""Launch files, parameter files and the RViz config without running a launch (``test/launch/`` runs them with the
real ``ros2 launch``): every executable, parameter file and RViz file they name exists and matches the package's
entry points, config files and params, and the parameter merge is rcl's own."""
import ast
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from parapush_ros import bringup, executable
from parapush_ros.ros import params, topics

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "src" / "parapush_ros" / "setup.py"
LAUNCH_FILES = {"sim": ROOT / "launch" / "sim.launch.py", "robot": ROOT / "launch" / "robot.launch.py"}
REQUIRED_ARGUMENTS = {"scene", "model", "use_sim_time", "rviz"}


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
    pytest.importorskip("rclpy")  # the node classes are rclpy Nodes (`make test` requires rclpy: fails, not skips)
    eps = entry_points()
    assert spec.executable in eps, f"{spec.executable} is not in setup.py NODE_ENTRY_POINTS"
    assert eps[spec.executable] == f"parapush_ros.executable:{spec.executable}"
    assert getattr(executable, spec.executable).module == spec.module  # the entry point runs this node
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
    assert set(bringup.LAUNCH_ARGUMENTS) >= REQUIRED_ARGUMENTS


# ------------------------------------------------------------------------------------------------ rcl's merge
SECTIONS = ("/**", "mpc_planner", "/mpc_planner", "/*", "other_node", "/**/mpc_planner", "/ns/mpc_planner")


def _rclpy_parameters(context, tmp_path, files: list, node_name: str = "mpc_planner") -> dict:
    """What rclpy itself gives a node from these ``--params-file`` files (a real rcl parse and match).

    The files are the node's own arguments in the session's one context: rcl parses and matches them as it does
    a process's, and no DDS participant is made and torn down per case (Fast DDS 2.14's participant teardown,
    ``set_listener``, can spin forever in one of some hundreds: once it hung this test)."""
    from rclpy.node import Node

    args = ["--ros-args"]
    for i, sections in enumerate(files):
        path = tmp_path / f"p{i}.yaml"
        path.write_text(yaml.safe_dump({name: {"ros__parameters": v} for name, v in sections}, sort_keys=False))
        args += ["--params-file", str(path)]
    node = Node(node_name, context=context, cli_args=args, use_global_arguments=False, enable_rosout=False,
                start_parameter_services=False, automatically_declare_parameters_from_overrides=True)
    try:
        builtin = ("use_sim_time", "start_type_description_service")
        return {k: p.value for k, p in node.get_parameters_by_prefix("").items() if k not in builtin}
    finally:
        node.destroy_node()


def test_merge_like_rcl_gives_what_rclpy_gives(ros_context, tmp_path):
    """bringup.merge_like_rcl (what ``parapush sim`` and the launch files hand the nodes) against rcl's own parse of
    the same files: 200 random sets of 1-4 files with 1-3 sections each, names with and without a slash,
    wildcards, other nodes, one parameter set in several places."""
    import random

    rng = random.Random(7)
    for case in range(200):
        files = [[(rng.choice(SECTIONS), {"a": f"{case}.{i}.{j}", "b": rng.randint(0, 9)})
                  for j in range(rng.randint(1, 3))] for i in range(rng.randint(1, 4))]
        files = [list(dict(f).items()) for f in files]  # one section name once per file, as YAML has it
        assert bringup.merge_like_rcl(files, "mpc_planner") == _rclpy_parameters(ros_context, tmp_path, files), \
            files


def test_merge_like_rcl_keeps_rcls_order_of_first_appearance(ros_context, tmp_path):
    """The case that once kept launch arguments from the nodes: a node section in a file applied after a ``/**``
    section still loses to a ``/**`` name that appeared first and a later file's ``/**`` values win over it."""
    files = [[("/**", {})], [("mpc_planner", {"scene": "a"})], [("/**", {"scene": "b"})]]
    assert bringup.merge_like_rcl(files, "mpc_planner") == {"scene": "a"} == _rclpy_parameters(ros_context, tmp_path,
                                                                                               files)
    files = [[("mpc_planner", {"scene": "a"})], [("/**", {"scene": "b"})]]
    assert bringup.merge_like_rcl(files, "mpc_planner") == {"scene": "b"} == _rclpy_parameters(ros_context, tmp_path,
                                                                                               files)


def test_a_planners_defaults_reach_the_nodes_and_lose_to_arguments():
    dgoc = {s.name: bringup.node_parameters(s, "sim", {"planner": "dgoc"}) for s in bringup.nodes("sim")}
    assert {n: p["scene"] for n, p in dgoc.items() if "scene" in p} == {n: "block_003" for n in dgoc}
    assert dgoc["velocity_commander"]["max_speed"] == 0.25  # DG-OC's speeds, in the sim only
    robot = bringup.node_parameters(bringup.spec("velocity_commander"), "robot", {"planner": "dgoc"})
    assert robot["max_speed"] == 0.1 and robot["scene"] == "block_003"
    alg2 = bringup.node_parameters(bringup.spec("mpc_planner"), "sim", {"planner": "alg2", "scene": "four_cylinders"})
    assert (alg2["scene"], alg2["model"], alg2["optimiser"]) == ("four_cylinders", "learned", "mppi")
    assert bringup.planner_defaults_in_effect("sim", {"planner": "dgoc"}).startswith(
        "planner dgoc with its default(s) scene block_003")


def test_a_users_file_wins_over_the_planners_defaults(tmp_path):
    """The documented order: the planner's stack defaults (dgoc's scene, alg2's model) come before the user's
    ``params_file`` (they were filled in as launch arguments, which come last: a lab's scene and model lost to them
    on every node, without a word under ``ros2 launch``)."""
    lab = tmp_path / "lab.yaml"
    lab.write_text("/**:\n  ros__parameters:\n    scene: box_slider\nmpc_planner:\n  ros__parameters:\n"
                   "    model: parareal2\n    optimiser: stochastic\n")
    dgoc = {s.name: bringup.node_parameters(s, "sim", {"planner": "dgoc", "params_file": str(lab)})
            for s in bringup.nodes("sim")}
    assert {n: p["scene"] for n, p in dgoc.items()} == {n: "box_slider" for n in dgoc}
    alg2 = bringup.node_parameters(bringup.spec("mpc_planner"), "robot", {"planner": "alg2", "params_file": str(lab)})
    assert (alg2["scene"], alg2["model"], alg2["optimiser"]) == ("box_slider", "parareal2", "stochastic")
    assert bringup.planner_defaults_in_effect("sim", {"planner": "alg2", "params_file": str(lab)}) == ""
    # the planner named in the user's file (not by argument) is the one named
    (tmp_path / "dgoc.yaml").write_text("mpc_planner:\n  ros__parameters:\n    planner: dgoc\n")
    assert bringup.planner_defaults_in_effect("sim", {"params_file": str(tmp_path / "dgoc.yaml")}).startswith(
        "planner dgoc with its default(s) scene block_003")
    # a launch argument still wins over the file
    arg = bringup.node_parameters(bringup.spec("mocap_ingest"), "sim",
                                  {"planner": "dgoc", "params_file": str(lab), "scene": "block_003"})
    assert arg["scene"] == "block_003"


@pytest.mark.parametrize("text, says", [
    ("velocity_commander:\n  ros__parameters:\n    max_sped: 0.03\n",
     r"section 'velocity_commander': 'max_sped' is not a parameter of velocity_commander \(did you mean max_speed\?\)"),
    ("velocity_comander:\n  ros__parameters:\n    max_speed: 0.03\n",
     r"section 'velocity_comander' names none of parapush's nodes \(did you mean velocity_commander\?\)"),
    ("/**:\n  ros__parameters:\n    sceen: box_slider\n", r"section '/\*\*': 'sceen' is not a parameter .*scene"),
    ("velocity_commander:\n  ros__parameters:\n    max_speed:\n", r"parameter 'max_speed' has no value \(empty\)"),
    ("mocap_ingest:\n  ros__parameters:\n    body_map: []\n", r"parameter 'body_map' has no value \(an empty list\)"),
])
def test_a_users_file_that_would_be_ignored_in_part_is_refused_naming_it(tmp_path, text, says):
    """A misspelt key or node name in ``params_file`` (README step 5 slows the arm this way for a first push) was
    ignored, leaving the setting at its default; a key without a value failed with a traceback (``parapush sim``)
    or a message naming neither (``ros2 launch``). Both bring-ups check the file before any node starts."""
    lab = tmp_path / "lab.yaml"
    lab.write_text(text)
    with pytest.raises(ValueError, match=says):
        bringup.check_arguments("robot", {"params_file": str(lab)})


def test_another_packages_sections_and_ros_own_parameters_pass(tmp_path):
    """A lab's shared file: another package's node (also one whose name contains ours), its keys in a wildcard
    section, and ROS's own parameters pass; a near-miss of one of ours in the wildcard does not."""
    lab = tmp_path / "lab.yaml"
    lab.write_text("ur_driver:\n  ros__parameters:\n    robot_ip: 10.0.0.2\nur_velocity_commander:\n"
                   "  ros__parameters:\n    gain: 2.0\n/**:\n  ros__parameters:\n    use_sim_time: false\n"
                   "    qos_overrides./tf.publisher.depth: 10\n    max_speed: 0.05\n    robot_ip: 10.0.0.2\n")
    bringup.check_arguments("robot", {"params_file": str(lab)})
    lab.write_text("/**:\n  ros__parameters:\n    max_sped: 0.05\n")
    with pytest.raises(ValueError, match=r"'max_sped' is not a parameter .* \(did you mean max_speed\?\)"):
        bringup.check_arguments("robot", {"params_file": str(lab)})


def test_params_file_and_bad_arguments(tmp_path):
    lab = tmp_path / "lab.yaml"
    lab.write_text("/**:\n  ros__parameters:\n    scene: box_slider\nmocap_ingest:\n  ros__parameters:\n"
                   "    rate: 40.0\n")
    args = {"params_file": str(lab)}
    bringup.check_arguments("sim", args)
    ingest = bringup.node_parameters(bringup.spec("mocap_ingest"), "sim", args)
    assert (ingest["scene"], ingest["rate"]) == ("box_slider", 40.0)
    assert bringup.node_parameters(bringup.spec("mocap_ingest"), "sim", {**args, "scene": "block_003"})["scene"] == \
        "block_003"  # a launch argument wins over the user's file
    for bad, says in [({"rviz": "maybe"}, "launch argument rviz: 'maybe' is not one of auto, true, false"),
                      ({"use_sim_time": "often"}, "launch argument use_sim_time"),
                      ({"params_file": str(tmp_path / "none.yaml")}, "launch argument params_file"),
                      ({"sceen": "x"}, "unknown launch argument")]:
        with pytest.raises(ValueError, match=says):
            bringup.check_arguments("sim", bad)


def test_whole_numbers_in_a_labs_file_reach_double_parameters_as_doubles(tmp_path):
    """``rate: 50`` and ``table_origin_in_mocap: [0, 0, 0.75]`` in a lab's file: rclpy refuses an integer for a
    double parameter, so the nodes died at start; now they get 50.0 and [0.0, 0.0, 0.75]."""
    lab = tmp_path / "lab.yaml"
    lab.write_text("velocity_commander:\n  ros__parameters:\n    rate: 50\n    max_acceleration: 1\n"
                   "mocap_ingest:\n  ros__parameters:\n    table_origin_in_mocap: [0, 0, 0.75]\n")
    args = {"params_file": str(lab)}
    com = bringup.node_parameters(bringup.spec("velocity_commander"), "robot", args)
    assert (com["rate"], com["max_acceleration"]) == (50.0, 1.0) and isinstance(com["rate"], float)
    ingest = bringup.node_parameters(bringup.spec("mocap_ingest"), "robot", args)
    assert ingest["table_origin_in_mocap"] == [0.0, 0.0, 0.75]
    assert all(isinstance(v, float) for v in ingest["table_origin_in_mocap"])


@pytest.mark.parametrize("output, interface, topic", [
    ("servo", "twist", "/servo_node/delta_twist_cmds"), ("ur_twist", "twist", "/twist_controller/twist"),
    ("joint_velocity", "joint_velocity", "/forward_velocity_controller/commands")])
def test_the_simulated_arm_listens_where_the_commander_sends(tmp_path, output, interface, topic):
    """sim.launch.py output:=ur_twist (or joint_velocity): before, the commander sent on the UR topic and the sim
    still listened on Servo's, so no push ever moved. A lab's commander frame and yaw reach the sim too."""
    lab = tmp_path / "lab.yaml"
    lab.write_text("velocity_commander:\n  ros__parameters:\n    output_frame_id: base\n"
                   "    table_yaw_in_output_frame: 0.5\n    joint_matrix: [0.0, 1.0, -1.0, 0.0]\n")
    args = {"output": output, "params_file": str(lab)}
    sim = bringup.node_parameters(bringup.spec("mujoco_sim"), "sim", args)
    commander = bringup.node_parameters(bringup.spec("velocity_commander"), "sim", args)
    assert (sim["command_interface"], sim["command_topic"]) == (interface, topic)
    assert commander["output"] == output
    assert (sim["command_frame_id"], sim["table_yaw_in_command_frame"], sim["joint_matrix"]) == \
        ("base", 0.5, [0.0, 1.0, -1.0, 0.0])
    assert sim["twist_hold"] is (output == "ur_twist")  # the UR twist controller has no timeout; Servo has


@pytest.mark.parametrize("mode, node", [("robot", "pose_recorder"), ("sim", "pose_recorder"), ("sim", "mujoco_sim")])
def test_a_labs_mocap_ingest_section_reaches_the_nodes_that_inherit_it(tmp_path, mode, node):
    """The recorder records, and the sim emulates, the topics and transform the ingest reads: a lab's params_file
    that sets them in its mocap_ingest section reaches them too (before, the recorder stored the shipped transform
    in its bags and listened on the shipped topics)."""
    lab = tmp_path / "lab.yaml"
    lab.write_text("mocap_ingest:\n  ros__parameters:\n    table_origin_in_mocap: [0.1, 0.2, 0.8]\n"
                   "    body_map: slider=Slider1\n    pusher_body: Pusher7\n")
    args = {"params_file": str(lab), "record": str(tmp_path / "push.mcap")}
    ingest = bringup.node_parameters(bringup.spec("mocap_ingest"), mode, args)
    got = bringup.node_parameters(bringup.spec(node), mode, args)
    for key in ("table_origin_in_mocap", "body_map", "pusher_body"):
        assert got[key] == ingest[key], key
    assert got["table_origin_in_mocap"] == [0.1, 0.2, 0.8] and got["pusher_body"] == "Pusher7"


def test_the_shipped_clutter_settings_of_the_fast_planner_reach_it_and_build():
    """config/fast_clutter.yaml (a params_file the README names) sets fast.* of mpc_planner, and the planner builds
    from them on the clutter scene: a 4 s horizon, its first second re-scored on the planner's model."""
    from parapush_ros.core.planning.fast_mpc import build_fast
    from parapush_ros.core.scene.spec import load_scene
    args = {"scene": "clutter_push", "planner": "fast", "params_file": str(ROOT / "config" / "fast_clutter.yaml")}
    bringup.check_arguments("sim", args)
    planner = bringup.node_parameters(bringup.spec("mpc_planner"), "sim", args)
    assert {k: planner[f"fast.{k}"] for k in ("horizon", "cost_interval", "rescore_horizon")} == \
        {"horizon": 4.0, "cost_interval": 1.0, "rescore_horizon": 1.0}
    _check_parameters(ROOT / "config" / "fast_clutter.yaml", "mpc_planner", bringup.spec("mpc_planner").param_spec())
    strategy = build_fast(load_scene("clutter_push"), {**{k: v.default for k, v in params.PLANNER.items()}, **planner})
    try:
        assert strategy.planner.config.horizon == 4.0 and strategy.planner.n_fine == 4
        assert strategy.planner.screen.kind == "learned"
    finally:
        strategy.close()


def test_lifecycle_flag_matches_the_node_classes():
    pytest.importorskip("rclpy")
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


def _yaml_block_after(path: Path, heading: str) -> str:
    """The first ```yaml block after ``heading`` in a document (indentation removed)."""
    text = path.read_text()
    start = text.index("```yaml", text.index(heading)) + len("```yaml")
    return textwrap.dedent(text[start:text.index("```", start)].strip("\n"))


@pytest.mark.parametrize("doc, heading", [("README.md", "First run at reduced speed"),
                                          ("docs/robot.md", "Reduced speed for the first run")])
def test_the_documented_reduced_speed_file_is_taken_by_every_node_it_names(tmp_path, doc, heading):
    """The lab file the docs give for a robot's first pushes: a planner speed above its max_speed is refused at
    start (a README file once lowered max_speed alone), so the documented one must build the planner as written."""
    from parapush_ros.core.planning.fast_mpc import build_fast
    from parapush_ros.core.planning.mpc_push import planner_config
    from parapush_ros.core.robot.command_safety import SafetyConfig
    from parapush_ros.core.scene.spec import load_scene
    lab = tmp_path / "lab.yaml"
    lab.write_text(_yaml_block_after(ROOT / doc, heading))
    args = {"params_file": str(lab)}
    bringup.check_arguments("robot", args)
    given = yaml.safe_load(lab.read_text())
    planner = {**{k: v.default for k, v in params.PLANNER.items()},
               **bringup.node_parameters(bringup.spec("mpc_planner"), "robot", args)}
    config = planner_config(planner)
    assert config.sampling.max_speed == given["mpc_planner"]["ros__parameters"]["max_speed"] == 0.03
    strategy = build_fast(load_scene("obstacle_push"), planner)
    strategy.close()
    commander = bringup.node_parameters(bringup.spec("velocity_commander"), "robot", args)
    limits = SafetyConfig(**{k: commander[k] for k in ("max_speed", "max_acceleration") if k in commander})
    # the plans stay within what the commander will execute
    assert limits.max_speed == 0.03 and config.sampling.max_speed <= limits.max_speed
    assert strategy.planner.config.max_acceleration <= limits.max_acceleration
