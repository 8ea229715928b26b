"""The analytical coarse model and the projection of infeasible states."""
import numpy as np
import pytest

from parapush_ros.core.models.analytical import AnalyticalCoarseModel
from parapush_ros.core.models.fine import FineModel
from parapush_ros.core.scene.projection import max_penetration, project_feasible
from parapush_ros.core.scene.spec import load_scene

SHAPES = ["box_slider", "cylinder_slider"]


@pytest.fixture(scope="module", params=SHAPES)
def scene(request):
    return load_scene(request.param)


def test_no_contact_slider_stays(scene):
    c = AnalyticalCoarseModel(scene)
    x0 = scene.initial_state()
    for u in ([-0.025, 0.0], [0.0, 0.05], [0.0, -0.05]):  # away from / alongside the slider
        x1 = c.propagate(x0[None], np.array([u]), 1.0)[0]
        assert np.array_equal(x1[2:5], x0[2:5])
        assert x1[0:2] == pytest.approx(x0[0:2] + np.array(u))
        assert np.all(scene.layout.object_vels(x1) == 0.0)


def test_central_push_moves_slider_with_pusher(scene):
    c = AnalyticalCoarseModel(scene)
    x0 = scene.initial_state()  # pusher just behind the slider, touching within 1 mm
    x1 = c.propagate(x0[None], np.array([[0.025, 0.0]]), 1.0)[0]
    assert x1[2] == pytest.approx(0.025, abs=2e-3)
    assert x1[3] == pytest.approx(0.0, abs=1e-12) and x1[4] == pytest.approx(0.0, abs=1e-12)
    assert scene.layout.object_vels(x1)[0].tolist() == pytest.approx([0.025, 0.0, 0.0])


@pytest.mark.parametrize("offset", [0.03, -0.03])
def test_offset_push_turns_the_same_way_as_mujoco(scene, offset):
    c, f = AnalyticalCoarseModel(scene), FineModel(scene, threads=1)
    x0 = scene.initial_state()
    x0[1] = offset
    u = np.array([[0.025, 0.0]])
    yc = c.propagate(x0[None], u, 1.0)[0, 4]
    yf = f.propagate(x0[None], u, 1.0)[0, 4]
    assert np.sign(yc) == np.sign(yf) == -np.sign(offset)  # pushing +x above the centre turns it clockwise


def test_zero_control_is_safe(scene):
    c = AnalyticalCoarseModel(scene)
    x0 = scene.initial_state()
    x1 = c.propagate(x0[None], np.zeros((1, 2)), 1.0)[0]
    assert np.all(np.isfinite(x1)) and np.array_equal(scene.layout.object_poses(x1), scene.layout.object_poses(x0))


def test_no_penetration_after_a_step(scene):
    """Random pushes from all around, including ones that rotate a box into the pusher."""
    c = AnalyticalCoarseModel(scene)
    rng = np.random.default_rng(3)
    n = 500
    ang = rng.uniform(-np.pi, np.pi, n)
    x = np.repeat(scene.initial_state()[None], n, 0)
    dist = rng.uniform(0.06, 0.12, n)
    x[:, 0:2] = np.stack([np.cos(ang), np.sin(ang)], -1) * dist[:, None]
    x[:, 4] = rng.uniform(-np.pi, np.pi, n)
    x, _ = project_feasible(scene, x)
    heading = ang + np.pi + rng.uniform(-0.6, 0.6, n)
    u = 0.05 * np.stack([np.cos(heading), np.sin(heading)], -1)
    for _ in range(4):
        x = c.propagate(x, u, 1.0)
        assert np.all(np.isfinite(x))
        assert max_penetration(scene, x).max() <= 1e-3 + 1e-9
    moved = np.linalg.norm(x[:, 2:4], axis=-1) > 1e-3
    assert moved.mean() > 0.5  # most pushes hit the slider


def test_projection_separates_and_respects_tolerance():
    scene = load_scene("four_cylinders")
    L = scene.layout
    x = scene.initial_state()
    L.object_poses(x)[1, :2] = L.object_poses(x)[0, :2] + [0.09, 0.0]  # 12 mm overlap of two cylinders
    L.pusher_pos(x)[:] = L.object_poses(x)[0, :2] - [0.06, 0.0]  # 5.6 mm inside the target
    shallow = scene.initial_state()
    L.pusher_pos(shallow)[:] = L.object_poses(shallow)[0, :2] - [0.0660, 0.0]  # 0.65 mm: within tolerance
    both = np.stack([x, shallow])
    out, changed = project_feasible(scene, both)
    assert changed.tolist() == [True, False]
    assert np.array_equal(out[1], shallow)
    assert max_penetration(scene, out[0]) <= 1e-3 + 1e-12
    with pytest.raises(ValueError, match="below 1 mm"):
        project_feasible(scene, x, tolerance=1e-4)


@pytest.mark.parametrize("name", ["four_cylinders", "obstacle_push", "hexagon_slider", "box_slider"])
def test_a_batch_moves_each_state_as_it_would_alone(name):
    """The model skips objects out of every row's reach and the projection pairs whose bounding circles no row
    overlaps (their cost in clutter): decided for the whole batch, so a state among others far from it must come out
    as it does alone, penetrating or not (to rounding: a polygon's matrix products round by batch size)."""
    scene = load_scene(name)
    L, rng = scene.layout, np.random.default_rng(21)
    x = np.repeat(scene.initial_state()[None], 40, 0)
    poses = L.object_poses(x)
    poses[..., :2] += rng.normal(0.0, 0.03, poses[..., :2].shape)
    poses[..., 2] += rng.normal(0.0, 1.0, poses[..., 2].shape)
    target = rng.integers(0, L.n_objects, len(x))
    L.pusher_pos(x)[...] = poses[np.arange(len(x)), target, :2] + rng.normal(0.0, 0.05, (len(x), 2))
    projected, changed = project_feasible(scene, x)
    assert changed.any() and not changed.all()
    u = rng.normal(0.0, 0.08, (len(x), 2))
    model = AnalyticalCoarseModel(scene)
    pushed = model.propagate(projected, u, 0.5)
    for i in range(len(x)):
        alone, was_changed = project_feasible(scene, x[i])
        assert was_changed == changed[i]
        np.testing.assert_allclose(alone, projected[i], rtol=0.0, atol=1e-12)
        np.testing.assert_allclose(model.propagate(projected[i], u[i], 0.5)[0], pushed[i], rtol=0.0, atol=1e-12)


def test_k_omega_comes_from_the_scene_file_everywhere():
    """Issue 15: K_omega is a scene parameter (``coarse: {k_omega: ...}``), validated, and every entry point that
    builds the analytical model from the scene (Predictor, benches, nodes) uses it."""
    import yaml

    from parapush_ros.core.models.registry import Predictor
    from parapush_ros.core.scene.spec import SceneError, scene_from_dict, scenes_dir
    data = yaml.safe_load((scenes_dir() / "box_slider.yaml").read_text())
    data["coarse"] = {"k_omega": {"box": 0.9}}
    scene = scene_from_dict(data)
    assert AnalyticalCoarseModel(scene).k_omega.tolist() == [0.9]
    assert Predictor(scene).coarse_model("analytical").k_omega.tolist() == [0.9]
    assert scene_from_dict(scene.to_dict()).coarse == scene.coarse  # round trip
    assert AnalyticalCoarseModel(load_scene("box_slider")).k_omega.tolist() == [0.55]
    # a larger gain turns the box more for the same off-centre push
    x0 = scene.initial_state()
    x0[1] = 0.04
    turn = [abs(AnalyticalCoarseModel(s).propagate(x0[None], np.array([[0.03, 0.0]]), 1.0)[0, 4])
            for s in (load_scene("box_slider"), scene)]
    assert turn[1] == pytest.approx(turn[0] * 0.9 / 0.55, rel=0.05)
    for bad, field in (({"k_omega": -1.0}, "coarse.k_omega: must be > 0"),
                       ({"k_omega": {"sphere": 1.0}}, "coarse.k_omega.sphere: unknown shape"),
                       ({"gain": 1.0}, "coarse.gain: unknown key")):
        data["coarse"] = bad
        with pytest.raises(SceneError, match=f"box.yaml: {field}"):
            scene_from_dict(data, source="box.yaml")
