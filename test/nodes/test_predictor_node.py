"""The parareal_predictor node through a real rclpy service client (same process, real DDS)."""
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from parapush_msgs.msg import PushControl  # noqa: E402
from parapush_msgs.srv import PredictTrajectory  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from conftest import wait_for, wait_future  # noqa: E402
from parapush_ros.ros.conversions import array_to_scene_state, scene_state_to_array  # noqa: E402
from parapush_ros.core.scene.spec import load_scene  # noqa: E402
from parapush_ros.nodes.parareal_predictor import PararealPredictorNode  # noqa: E402
from parapush_ros.ros.qos import LATCHED  # noqa: E402

pytestmark = pytest.mark.timeout(60)
SCENE = "cylinder_slider"


@pytest.fixture(scope="module")
def served(ros_context):
    from conftest import BackgroundExecutor
    ex = BackgroundExecutor(ros_context).start()
    node = ex.add(PararealPredictorNode(parameter_overrides=[Parameter("scene", value=SCENE),
                                                             Parameter("max_iterations", value=2)]))
    client_node = ex.add(rclpy.create_node("predictor_test_client"))
    client = client_node.create_client(PredictTrajectory, "predict_trajectory")
    assert client.wait_for_service(timeout_sec=10.0)
    yield node, client_node, client
    ex.shutdown()


def request(scene, model="parareal", n=4, speed=0.025, duration=1.0, K=0, offset=0.02):
    req = PredictTrajectory.Request()
    x0 = scene.initial_state()
    x0[1] = offset
    req.initial_state = array_to_scene_state(x0, scene)
    req.controls = [PushControl(vx=speed, vy=0.0, duration=duration) for _ in range(n)]
    req.model = model
    req.max_iterations = K
    return req


def call(client, req):
    return wait_future(client.call_async(req), timeout=30.0, what="PredictTrajectory response")


def states_of(res, scene):
    return np.stack([scene_state_to_array(s, scene) for s in res.predicted_states])


def test_models_answer_and_parareal_K_equals_N_is_the_fine_model(served):
    _node, _, client = served
    scene = load_scene(SCENE)
    fine = call(client, request(scene, "fine"))
    coarse = call(client, request(scene, "coarse"))
    par = call(client, request(scene, "parareal", K=4))
    par1 = call(client, request(scene, "parareal1"))
    for r in (fine, coarse, par, par1):
        assert r.success, r.message
        assert len(r.predicted_states) == 4 and r.wall_time > 0.0
    assert par.iterations == 4 and len(par.iteration_change) == 4 and par1.iterations == 1
    # yaw goes through (-pi, pi] in messages; compare poses
    np.testing.assert_allclose(states_of(par, scene), states_of(fine, scene), atol=1e-12)
    assert np.allclose(states_of(par1, scene)[0], states_of(fine, scene)[0], atol=1e-12)  # exact first slice
    assert states_of(fine, scene)[-1, 2] > 0.05  # the slider was pushed
    assert par.predicted_states[0].header.frame_id == "table"


@pytest.mark.parametrize("mutate, words", [
    (lambda r: setattr(r, "controls", []), "controls: empty"),
    (lambda r: setattr(r.controls[1], "vx", float("nan")), "controls[1]: non-finite"),
    (lambda r: setattr(r.initial_state, "pusher_y", float("inf")), "non-finite value(s) in pusher_y"),
    (lambda r: setattr(r, "model", "magic"), "unknown model 'magic'"),
    (lambda r: setattr(r, "max_iterations", 7), "max_iterations: 7 is out of range 1..4"),
    (lambda r: setattr(r.controls[0], "duration", 1e6), "controls[0].duration"),
    (lambda r: setattr(r.controls[2], "duration", 0.5), "controls[2].duration: 0.5 s differs"),
    (lambda r: setattr(r.controls[0], "duration", 0.0005), "not a multiple"),
    (lambda r: setattr(r.controls[3], "vx", 30.0), "controls[3]: speed 30.000 m/s exceeds"),
    (lambda r: r.initial_state.objects.pop(), "object 'cylinder' of scene 'cylinder_slider' is missing"),
    (lambda r: setattr(r.initial_state.objects[0], "name", "teapot"), "unknown object(s) ['teapot']"),
    (lambda r: setattr(r.initial_state.objects[0], "tracking_valid", False), "tracking_valid is false"),
    (lambda r: setattr(r, "coarse_model", "oracle"), "coarse_model: 'oracle'"),
    (lambda r: setattr(r, "tolerance", float("nan")), "tolerance: nan is not finite"),
    (lambda r: setattr(r, "tolerance", float("inf")), "tolerance: inf is not finite"),
])
def test_bad_requests_are_refused_with_a_named_reason_and_the_node_keeps_serving(served, mutate, words):
    _, _, client = served
    scene = load_scene(SCENE)
    req = request(scene, "parareal")
    mutate(req)
    res = call(client, req)
    assert not res.success and words in res.message, res.message
    ok = call(client, request(scene, "coarse"))
    assert ok.success, ok.message


def test_fine_divergence_is_reported(served):
    _, _, client = served
    scene = load_scene(SCENE)
    req = request(scene, "fine")
    req.initial_state.objects[0].vx = 1e9  # finite but absurd: MuJoCo blows up
    res = call(client, req)
    assert not res.success and "diverged" in res.message, res.message


def test_prediction_markers_are_latched_for_rviz(served):
    _node, client_node, client = served
    scene = load_scene(SCENE)
    assert call(client, request(scene, "parareal", K=2)).success
    got = []
    sub = client_node.create_subscription(MarkerArray, "/parareal_predictor/prediction_markers",
                                          got.append, LATCHED)
    wait_for(lambda: got, timeout=10.0, what="latched prediction markers")
    namespaces = {m.ns for m in got[-1].markers}
    assert {"prediction/paths", "prediction/objects", "iteration_0/paths", "table"} <= namespaces
    client_node.destroy_subscription(sub)
