"""The predicted variance in messages and RViz: StateVariance round trip (objects matched by name), the plan's
one-sigma ellipses along the predicted path."""
import numpy as np
import pytest

pytest.importorskip("rclpy")
from parapush_msgs.msg import PushPlan
from std_msgs.msg import Header
from visualization_msgs.msg import Marker

from parapush_ros.core.scene.spec import load_scene
from parapush_ros.ros import markers
from parapush_ros.ros.conversions import (ConversionError, array_to_state_variance,
                                          state_variance_to_array)


def test_state_variance_round_trips_and_names_what_does_not_fit():
    scene = load_scene("four_cylinders")
    L = scene.layout
    var = np.zeros(L.dim)
    var[:L.n_q] = np.arange(1, L.n_q + 1) * 1e-6
    msg = array_to_state_variance(var, scene)
    assert msg.object_names == [o.name for o in scene.objects] and msg.object_x[1] == pytest.approx(6e-6)
    np.testing.assert_allclose(state_variance_to_array(msg, scene), var)
    msg.object_names = list(reversed(msg.object_names))  # by name, not by order
    back = state_variance_to_array(msg, scene)
    np.testing.assert_allclose(L.object_poses(back)[0], L.object_poses(var)[3])
    msg.object_names[0] = "teapot"
    with pytest.raises(ConversionError, match="object 'cylinder_3' is missing"):
        state_variance_to_array(msg, scene)
    assert PushPlan().predicted_variance == []  # empty by default: models without a variance send none


def test_uncertainty_markers_are_one_sigma_ellipses_along_the_path():
    scene = load_scene("cylinder_slider")
    L = scene.layout
    states = np.repeat(scene.initial_state()[None], 3, axis=0)
    L.object_poses(states)[:, 0, 0] += [0.0, 0.01, 0.02]
    var = np.zeros_like(states)
    L.object_poses(var)[1, 0, :2] = (4e-6, 1e-6)  # sigma 2 mm along x, 1 mm along y
    L.object_poses(var)[2, 0, :2] = (16e-6, 9e-6)
    ms = markers.uncertainty_markers(scene, states, var, Header(frame_id="table"), "plan")
    assert len(ms) == 2 and {m.ns for m in ms} == {"plan/sigma"} and all(m.type == Marker.CYLINDER for m in ms)
    assert (ms[0].scale.x, ms[0].scale.y) == pytest.approx((0.004, 0.002))
    assert (ms[1].scale.x, ms[1].scale.y) == pytest.approx((0.008, 0.006))
    assert ms[1].pose.position.x == pytest.approx(L.object_poses(states)[2, 0, 0])
    assert len({m.id for m in ms}) == 2
