"""The planner over real DDS (simulated time) with a model that predicts its variance (``learned_ensemble``): the
plan message carries it per predicted state, RViz gets one-sigma ellipses along the path, and ``planner/status``
says when the plan enters an uncertain region (``uncertainty_threshold``)."""
from contextlib import contextmanager

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from parapush_msgs.action import PushObject  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from test_mpc_planner_node import Harness  # noqa: E402

from conftest import BackgroundExecutor, wait_for, wait_future  # noqa: E402
from parapush_ros.core.scene.spec import load_scene  # noqa: E402
from parapush_ros.nodes.mpc_planner import MPCPlannerNode  # noqa: E402
from parapush_ros.ros.conversions import state_variance_to_array  # noqa: E402
from parapush_ros.ros.node import bring_up  # noqa: E402

pytestmark = pytest.mark.timeout(120)
SCENE = "four_cylinders"  # the learned models' scene family
PARAMETERS = dict(scene=SCENE, model="learned_ensemble", samples=6, iterations=1, control_duration=1.0,
                  uncertainty_threshold=1e-4, state_timeout=2.0, control_rate=50.0, use_sim_time=True)


@contextmanager
def pushing(ros_context, params: dict, scene, goal_xy):
    """A planner node with ``params`` pushing the target to ``goal_xy`` from the scene's start: yields the test
    harness once the first plan came; cancels the goal and waits for its result on the way out."""
    with BackgroundExecutor(ros_context) as ex:
        ex.add(bring_up(MPCPlannerNode(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])))
        h = Harness(ex.add(rclpy.create_node("mpc_planner_variance_test")), scene)
        try:
            assert h.client.wait_for_server(timeout_sec=30.0)
            h.publish_static(scene.initial_state())
            goal = PushObject.Goal(target_object="target", goal_x=goal_xy[0], goal_y=goal_xy[1], yaw_tolerance=-1.0)
            handle = wait_future(h.client.send_goal_async(goal), timeout=30.0, what="goal response")
            assert handle.accepted
            wait_for(lambda: h.plans, timeout=60.0, what="a plan")
            yield h
            wait_future(handle.cancel_goal_async(), timeout=30.0, what="cancel")
            wait_future(handle.get_result_async(), timeout=60.0, what="result after cancel")
        finally:
            h.close()


def test_plans_carry_the_variance_markers_show_it_and_status_says_uncertain(ros_context):
    scene = load_scene(SCENE)
    with pushing(ros_context, PARAMETERS, scene, (0.25, -0.05)) as h:
        plan = h.plans[0]
        assert plan.model == "learned_ensemble" and len(plan.predicted_variance) == len(plan.predicted_states) == 4
        var = np.array([state_variance_to_array(v, scene) for v in plan.predicted_variance])
        sigma = scene.layout.object_position_sigma(var)  # (4 steps, 4 objects)
        assert np.all(np.isfinite(sigma)) and sigma[-1, 0] > 1e-4  # the pushed target
        assert np.all(np.diff(sigma[:, 0]) >= 0.0)  # accumulates along the plan
        wait_for(lambda: any(m.ns == "plan/sigma" for a in h.markers for m in a.markers), timeout=30.0,
                 what="sigma markers")
        ellipses = [m for a in h.markers for m in a.markers if m.ns == "plan/sigma"][:16]
        assert len(ellipses) == 16 and max(m.scale.x for m in ellipses) > 2e-4
        wait_for(lambda: any(s.startswith("uncertain region") for s in h.status), timeout=30.0,
                 what="'uncertain region' on planner/status")
        line = next(s for s in h.status if s.startswith("uncertain region"))
        assert "'target'" in line and "uncertainty_threshold 0.1 mm" in line


def test_certain_again_is_said_only_within_the_push_that_was_uncertain():
    """A push that ended in an uncertain region must not make the next push's first (certain) plan report
    'certain again': each push starts certain (the MPC strategy's ``UncertaintyWatch``, reset at every push)."""
    from parapush_ros.core.planning.mpc_push import UncertaintyWatch
    scene = load_scene(PARAMETERS["scene"])
    watch = UncertaintyWatch(scene, PARAMETERS["uncertainty_threshold"])
    L = scene.layout
    unsure, sure = np.zeros((2, L.dim)), np.zeros((2, L.dim))
    L.object_poses(unsure)[1, 0, :2] = 1e-6  # sigma 1.4 mm > uncertainty_threshold 0.1 mm
    said = [watch.check(unsure), watch.check(sure)]  # a push ...
    assert [s[0].split(":")[0] for s in said] == ["uncertain region", "certain again"]
    assert [s[1] for s in said] == ["warning", "info"] and watch.check(sure) is None
    assert watch.check(unsure)[0].startswith("uncertain region")  # ... that ends uncertain
    watch.reset()  # the next push
    assert watch.check(sure) is None


def test_alg2_planner_tracks_a_low_uncertainty_path_and_shows_it(ros_context):
    """``planner: alg2`` (paper 004 Algorithm 2): the heat-map of learned_ensemble, a path round the clutter, the
    single network tracking it with mppi; RViz gets the way-points, the status the path."""
    scene = load_scene("clutter_push")
    params = dict(scene="clutter_push", planner="alg2", model="learned", optimiser="mppi", samples=6, iterations=1,
                  control_duration=1.0, state_timeout=2.0, control_rate=50.0, use_sim_time=True,
                  **{"alg2.cell": 0.04, "alg2.pushes": 4, "alg2.iterations": 100})
    for bad, words in (({"optimiser": "mppi_ua"}, "parameter optimiser: .*mppi_ua"),
                       ({"alg2.heat_model": "learned"}, "parameter alg2.heat_model: model 'learned' predicts no"),
                       ({"alg2.cell": 0.0}, "parameter alg2.cell: must be > 0")):
        with pytest.raises(ValueError, match=words):
            MPCPlannerNode(parameter_overrides=[Parameter(k, value=v) for k, v in {**params, **bad}.items()])
    with pushing(ros_context, params, scene, (0.2, 0.0)) as h:
        wait_for(lambda: any(m.ns == "plan/waypoints" for a in h.markers for m in a.markers), timeout=30.0,
                 what="way-point markers")
        line = next(m for a in h.markers for m in a.markers if m.ns == "plan/waypoints" and m.id == 0)
        points = np.array([[p.x, p.y] for p in line.points])
        assert len(points) == 12 and np.allclose(points[-1], [0.2, 0.0])
        assert np.linalg.norm(points - np.array(scene.objects[1].pose[:2]), axis=-1).min() > 0.09
        assert any(s.startswith("alg2: low-uncertainty path") for s in h.status)
