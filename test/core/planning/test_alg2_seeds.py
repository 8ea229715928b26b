"""Issue 33: Algorithm 2's planned path keeps out of a region without training data, whatever the seed of the
data and of the ensemble's training (on some seeds the lesioned ensemble agrees along a channel through the
lesion; the distance-to-data term of ``planning_heat_map`` and the multi-start path optimiser keep the path out).

Fast: the pushes come from a kinematic primitive (no MuJoCo), a small E-MDN (3 members, 30 epochs) per seed."""
import numpy as np
import pytest

from parapush_ros.core.models.emdn_config import EMDNConfig
from parapush_ros.core.models.push_primitive import (WORKSPACE, EMDNPrimitive, Lesion, features, random_pushes,
                                                     uncertainty)
from parapush_ros.core.planning.uncertainty_mppi import (HeatMap, PathConfig, distance_to_data, low_uncertainty_path,
                                                         path_terms, planning_heat_map, start_paths,
                                                         uncertainty_heat_map)

LESION = Lesion(-0.2, -0.2, 0.2, 0.2)
START, GOAL = np.array([0.0, -0.3]), np.array([0.0, 0.3])


def kinematic_change(poses, actions):
    """The box moves 4.5 cm along the push (object frame) and turns by 0.3 (0.5 - c) rad: the object-frame change."""
    d = np.stack([np.cos(actions[:, 0]), np.sin(actions[:, 0])], -1) * 0.045
    return np.column_stack([d, 0.3 * (0.5 - actions[:, 1])])


def lesioned_model(seed: int, n: int = 768):
    from parapush_ros.core.models.ensemble_mdn import EnsembleMDN
    from parapush_ros.core.models.push_primitive import N_FEATURES, N_OUT, N_PLACE, PLACE_INIT
    rng = np.random.default_rng(seed)
    poses, actions = random_pushes(rng, n)
    keep = ~LESION.contains(poses[:, :2])
    poses, actions = poses[keep], actions[keep]
    y = kinematic_change(poses, actions) + rng.normal(0.0, [1e-3, 1e-3, 1e-2], (len(poses), 3))
    cfg = EMDNConfig(members=3, epochs=30, seed=seed, unscaled_inputs=N_PLACE, unscaled_init=PLACE_INIT)
    emdn = EnsembleMDN(N_FEATURES, N_OUT, cfg)
    x = features(poses, actions)
    emdn.fit(x, y)
    var_ref = float(np.median(uncertainty(emdn.predict(x)[1])))
    return EMDNPrimitive(emdn, LESION, var_ref), poses[:, :2], var_ref


def in_lesion(path, step: float = 0.002) -> float:
    from parapush_ros.tools.bench.uncertainty import path_in_region
    return path_in_region(path, LESION, step)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alg2_path_avoids_the_region_without_data(seed):
    import torch
    torch.set_num_threads(1)
    model, data_xy, var_ref = lesioned_model(seed)
    heat = planning_heat_map(uncertainty_heat_map(model, cell=0.04, actions=8, seed=seed), var_ref, data_xy,
                             clearance=0.03)
    res = low_uncertainty_path(START, GOAL, heat, var_ref, PathConfig(seed=seed))
    straight = np.linspace(START, GOAL, 12)
    assert in_lesion(straight) > 0.6
    assert in_lesion(res.path) < 0.1, (seed, res.path.round(3).tolist())
    assert res.cost < 0.5 * res.initial_cost
    np.testing.assert_allclose(res.path[[0, -1]], [START, GOAL])
    assert res.terms["uncertainty"] + res.terms["smoothness"] == pytest.approx(res.cost)


def test_distance_term_is_high_far_from_data_and_zero_on_it():
    xs, ys = np.linspace(-0.3, 0.3, 7), np.linspace(-0.3, 0.3, 7)
    flat = HeatMap(xs, ys, np.full((7, 7), 2e-6))
    data = np.array([[-0.3, -0.3], [0.3, 0.3]])
    heat = planning_heat_map(flat, 2e-6, data, w_data=10.0, scale=0.05)
    assert heat(np.array([-0.3, -0.3])) == pytest.approx(2e-6)  # on a data point: the model's variance alone
    assert heat(np.array([0.0, 0.0])) == pytest.approx(2e-6 + 10 * 2e-6, rel=1e-6)  # far: + w_data var_in_data
    assert distance_to_data(np.array([[0.0, 0.0]]), data)[0] == pytest.approx(np.hypot(0.3, 0.3))
    np.testing.assert_array_equal(planning_heat_map(flat, 2e-6, None).values, flat.values)  # no data: no term
    with pytest.raises(ValueError, match="var_in_data"):
        planning_heat_map(flat, 0.0, data)


def test_clearance_is_the_worst_heat_within_it():
    """``clearance``: the heat at p is the worst within that distance of p (the tracker cuts corners by its reach)."""
    xs, ys = np.linspace(-0.3, 0.3, 21), np.linspace(-0.3, 0.3, 21)  # 3 cm cells
    values = np.full((21, 21), 1e-6)
    values[10, 10] = 5e-5  # one hot cell at (0, 0)
    flat = HeatMap(xs, ys, values)
    heat = planning_heat_map(flat, 1e-6, None, clearance=0.03)
    assert heat(np.array([0.0, 0.0])) == pytest.approx(5e-5)
    assert heat(np.array([0.029, 0.0])) == pytest.approx(5e-5)  # within the clearance: the hot cell's heat
    assert heat(np.array([0.0, -0.02])) == pytest.approx(5e-5)
    assert heat(np.array([0.08, 0.0])) == pytest.approx(1e-6)  # beyond it (and the cell it blurs into): unchanged
    assert flat(np.array([0.029, 0.0])) < 1e-5  # without: the bilinear heat has fallen off
    assert np.min(np.diff(heat.xs)) <= 0.01 + 1e-12  # a grid fine enough for the disc
    np.testing.assert_array_equal(planning_heat_map(flat, 1e-6, None, clearance=0.0).values, values)
    with pytest.raises(ValueError, match="clearance"):
        planning_heat_map(flat, 1e-6, None, clearance=-0.01)


def test_clearance_leaves_hard_cells_as_they_are():
    """``hard`` cells (the stack's occupied ones) are not grown: a gap of one cell between two stays open."""
    xs, ys = np.linspace(-0.3, 0.3, 21), np.linspace(-0.3, 0.3, 21)
    values = np.full((21, 21), 1e-6)
    values[5, 7] = 2e-6  # the most uncertain free cell
    hard = np.zeros((21, 21), dtype=bool)
    hard[10, 9] = hard[10, 11] = True  # (-0.03, 0) and (0.03, 0): the gap at (0, 0)
    values[hard] = 1e-4
    heat = planning_heat_map(HeatMap(xs, ys, values), 1e-6, None, clearance=0.05, hard=hard)
    assert heat(np.array([0.03, 0.0])) == pytest.approx(1e-4)  # the hard cell itself
    assert heat(np.array([0.0, 0.0])) == pytest.approx(2e-6)  # the gap: the most uncertain free heat, not 1e-4
    grown = planning_heat_map(HeatMap(xs, ys, values), 1e-6, None, clearance=0.05)
    assert grown(np.array([0.0, 0.0])) == pytest.approx(1e-4)  # without ``hard``: closed
    with pytest.raises(ValueError, match="hard"):
        planning_heat_map(HeatMap(xs, ys, values), 1e-6, None, clearance=0.05, hard=hard[:-1])


def test_path_cost_is_scale_free():
    """The same geometry at twice the size and a heat-map in other units costs the same."""
    xs, ys = np.linspace(-0.6, 0.6, 25), np.linspace(-0.6, 0.6, 25)
    gx, gy = np.meshgrid(xs, ys)
    values = 1.0 + 50.0 * (np.hypot(gx, gy) < 0.2)
    cfg = PathConfig(workspace=tuple(np.asarray(WORKSPACE) * 2))
    small = start_paths(START / 2, GOAL / 2, cfg)[1]
    a = path_terms(small[None], HeatMap(xs, ys, values), 1.0, 0.3)
    b = path_terms(2 * small[None], HeatMap(2 * xs, 2 * ys, 1e-6 * values), 1e-6, 0.3)
    np.testing.assert_allclose(a, b, rtol=1e-9)
    straight = np.linspace(START, GOAL, 12)[None]
    assert path_terms(straight, HeatMap(xs, ys, np.ones_like(values)), 1.0, 0.3) == pytest.approx((1.0, 0.3))
