"""Adding a planner is one file and one registry line: the example planner ``straight``
(``core/planning/example_planner.py``, registered in ``core/planning/planners.py``) runs in the real planner node
through real rclpy on simulated time, with nothing of it in the node: the action, the command timer, the published
plans, feedback, status and the outcome come from the node and the one push loop. The world is the lock-step
harness of ``test_mpc_planner_node`` (a MuJoCo world that ticks only once the planner's command for the current
clock has arrived)."""
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from test_mpc_planner_node import CONTROL_RATE, Harness  # noqa: E402

from conftest import BackgroundExecutor, wait_for, wait_future  # noqa: E402
from parapush_ros.core.planning.example_planner import StraightPush, build_straight  # noqa: E402
from parapush_ros.core.planning.planners import PLANNERS  # noqa: E402
from parapush_ros.core.scene.spec import load_scene  # noqa: E402
from parapush_ros.nodes.mpc_planner import MPCPlannerNode  # noqa: E402
from parapush_ros.ros.node import bring_up  # noqa: E402

pytestmark = pytest.mark.timeout(120)
GOAL = (0.1, 0.08)  # up and to the right of the cylinder: a line the pusher must turn onto
PARAMETERS = dict(scene="cylinder_slider", planner="straight", state_timeout=1.0, control_rate=CONTROL_RATE,
                  use_sim_time=True, **{"straight.speed": 0.05, "straight.period": 0.4})


def test_the_example_planner_pushes_to_the_goal_in_the_node(ros_context):
    assert PLANNERS["straight"].build is build_straight  # its one registry line
    scene = load_scene("cylinder_slider")
    with BackgroundExecutor(ros_context) as ex:
        node = ex.add(bring_up(MPCPlannerNode(parameter_overrides=[Parameter(k, value=v)
                                                                   for k, v in PARAMETERS.items()])))
        assert isinstance(node.strategy, StraightPush) and node.strategy.config.period == 0.4
        h = Harness(ex.add(rclpy.create_node("example_planner_test")), scene)
        try:
            assert h.client.wait_for_server(timeout_sec=30.0)
            wait_for(lambda: any("planner straight" in s for s in h.status), timeout=30.0, what="idle status")
            h.run_world()
            feedback = []
            handle = h.send(*GOAL, feedback=lambda m: feedback.append(m.feedback), position_tolerance=0.02,
                            max_actions=30)
            res = wait_future(handle.get_result_async(), timeout=90.0, what="push result")
            assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
            r = res.result
            assert r.outcome == PushObject.Result.REACHED and r.actions_executed >= 3 and r.final_distance <= 0.02
            target = scene.layout.object_poses(h.world.x)[0, :2]
            assert np.linalg.norm(target - GOAL) <= 0.02 + 0.005  # judged on received states; the world ran on
            # the node published its plans (one command each, held 0.4 s) and fed them back
            assert len(h.plans) == r.actions_executed and all(p.model == "straight line" for p in h.plans)
            assert all(len(p.controls) == 1 and abs(p.controls[0].duration - 0.4) < 1e-9 for p in h.plans)
            assert feedback and feedback[-1].latest_plan.model == "straight line"
            speeds = [np.hypot(m.twist.linear.x, m.twist.linear.y) for _, m in h.cmds]
            assert max(speeds) == pytest.approx(0.05) and any(s.startswith("pushing 'cylinder' straight")
                                                              for s in h.status)
            wait_for(lambda: h.status and h.status[-1].startswith("reached"), timeout=10.0, what="status 'reached'")
        finally:
            h.close()
