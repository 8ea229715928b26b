"""ament_python package parapush_ros.

Installs the Python package, the ament resource marker and package.xml, and the repository-root directories
launch/, config/ (recursively, e.g. config/scenes/*.yaml) and rviz/ into share/parapush_ros/.

Paths are relative to this file's directory, which is where colcon runs setup.py: src/parapush_ros in a plain
build, build/parapush_ros (holding a symlink to this file) with --symlink-install. Both lie two levels below the
repository root, so ../../launch names the same directory either way.
"""
import os

from setuptools import find_packages, setup

package_name = "parapush_ros"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT_REL = os.path.join("..", "..")  # the repository root, relative to this file's directory


def _tree(root_dir, share_subdir):
    """data_files entries for every file below REPO_ROOT/root_dir (recursive; .gitkeep skipped; empty dirs ok)."""
    entries = []
    base = os.path.join(HERE, REPO_ROOT_REL, root_dir)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        files = sorted(
            f for f in filenames
            if not f.startswith(".") and not f.endswith((".pyc", "~"))
        )
        if not files:
            continue
        rel_dir = os.path.relpath(dirpath, base)
        dest = os.path.normpath(os.path.join("share", package_name, share_subdir, rel_dir))
        src_rel = os.path.relpath(dirpath, HERE)
        entries.append((dest, [os.path.join(src_rel, f) for f in files]))
    return entries


data_files = [
    ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
    ("share/" + package_name, ["package.xml"]),
]
data_files += _tree("launch", "launch")
data_files += _tree("config", "config")
data_files += _tree("rviz", "rviz")

# Console scripts. `parapush` is the command line; ROS 2 node executables are added to NODE_ENTRY_POINTS.
CLI_ENTRY_POINTS = [
    "parapush = parapush_ros.cli:console_main",
]
# ---- NODE ENTRY POINTS: one "executable_name = parapush_ros.executable:executable_name" per ROS 2 node (that
# ---- module hears a stop before it imports the node; launch files refer to these executable names).
NODE_ENTRY_POINTS = [
    "parareal_predictor = parapush_ros.executable:parareal_predictor",
    "mpc_planner = parapush_ros.executable:mpc_planner",
    "mocap_ingest = parapush_ros.executable:mocap_ingest",
    "velocity_commander = parapush_ros.executable:velocity_commander",
    "mujoco_sim = parapush_ros.executable:mujoco_sim",
    "natnet_bridge = parapush_ros.executable:natnet_bridge",
    "pose_recorder = parapush_ros.executable:pose_recorder",
]

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=data_files,
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="parapush maintainers",
    maintainer_email="parapush@example.com",
    description="Physics-based robotic pushing with Parareal-accelerated prediction (ROS 2).",
    license="MIT",
    entry_points={
        "console_scripts": CLI_ENTRY_POINTS + NODE_ENTRY_POINTS,
    },
)
