"""Simulated parapush: mujoco_sim (robot + mocap) + mocap_ingest + parareal_predictor + mpc_planner +
velocity_commander, optionally RViz.

    ros2 launch parapush_ros sim.launch.py [scene:=obstacle_push] [model:=parareal2] [use_sim_time:=true]
                                           [rviz:=true] [record:=pushes.mcap]

The node set and each node's parameter files come from parapush_ros.bringup, which `parapush sim` (one process,
for machines without `ros2 launch`) reads too: config/<node>.yaml, then config/sim.yaml, then the launch
arguments. The simulator publishes /clock; every node runs on it with use_sim_time:=true (the default here).
RViz's fixed frame is the table frame, in which every marker is published; a static transform mocap frame ->
table (from config/mocap_ingest.yaml, as on the robot) puts the table frame into TF. The lifecycle nodes
(mpc_planner, velocity_commander) configure and activate themselves at start (autostart: true in their config).
"""
from parapush_ros import bringup


def generate_launch_description():
    return bringup.launch_description("sim")
