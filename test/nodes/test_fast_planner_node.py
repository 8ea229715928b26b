"""The fast planner (``planner: fast``, issue 29) in the real planner node through real rclpy on simulated time,
with nothing of it in the node: its settings are the parameters ``fast.<name>``, its spline is sampled by the node's
command timer, its plans are published and fed back. The world is the lock-step harness of
``test_mpc_planner_node`` (a MuJoCo world that ticks only once the planner's command for the current clock has
arrived), so the plans' deadlines are on the simulated clock whatever the host's speed."""
import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from test_mpc_planner_node import CONTROL_RATE, SCENE, Harness, fast_gil_handover  # noqa: E402, F401

from conftest import BackgroundExecutor, wait_future  # noqa: E402
from parapush_ros.core.planning.fast_mpc import FastMPCPush  # noqa: E402
from parapush_ros.core.scene.spec import load_scene  # noqa: E402
from parapush_ros.nodes.mpc_planner import MPCPlannerNode  # noqa: E402
from parapush_ros.ros.node import bring_up  # noqa: E402

PARAMETERS = dict(scene=SCENE, planner="fast", model="fine", realtime=True, state_timeout=1.0,
                  control_rate=CONTROL_RATE, use_sim_time=True, threads=1,
                  **{"fast.replan_rate": 5.0, "fast.candidates": 8})


@pytest.mark.timeout(400)
def test_the_fast_planner_pushes_to_the_goal_in_the_node(ros_context, fast_gil_handover):  # noqa: F811
    scene = load_scene(SCENE)
    with BackgroundExecutor(ros_context) as ex:
        node = ex.add(bring_up(MPCPlannerNode(parameter_overrides=[Parameter(k, value=v)
                                                                   for k, v in PARAMETERS.items()])))
        assert isinstance(node.strategy, FastMPCPush) and node.strategy.config.replan_rate == 5.0
        h = Harness(ex.add(rclpy.create_node("fast_planner_test")), scene)
        try:
            assert h.client.wait_for_server(timeout_sec=30.0)
            h.run_world()
            goal = PushObject.Goal(target_object="cylinder", goal_x=0.08, goal_y=0.0, yaw_tolerance=-1.0,
                                   position_tolerance=0.02, max_actions=150)
            handle = wait_future(h.client.send_goal_async(goal), timeout=30.0, what="goal response")
            assert handle.accepted
            res = wait_future(handle.get_result_async(), timeout=300.0, what="push result")
            assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
            assert res.result.outcome == PushObject.Result.REACHED and h.world.x[2] > 0.05
            cmds = [(m.twist.linear.x, m.twist.linear.y) for _, m in h.cmds]
            assert all(math.isfinite(vx) and math.isfinite(vy) for vx, vy in cmds)
            assert len(h.plans) >= 3 and max(np.hypot(*u) for u in cmds) <= 0.1 + 1e-9
        finally:
            h.close()
