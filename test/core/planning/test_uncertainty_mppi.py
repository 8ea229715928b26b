"""Algorithm 1 (uncertainty-averse MPPI with exploration decay) and Algorithm 2 (low-uncertainty path) on a
simple analytical push primitive whose variance is high in a known disc: fast and exact, no learning."""
import numpy as np
import pytest

from parapush_ros.core.config import ConfigError
from parapush_ros.core.models.push_primitive import PrimitiveModel
from parapush_ros.core.planning.uncertainty_mppi import (PathConfig, PathTracker, PrimitiveMPPI, PrimitiveMPPIConfig,
                                                         low_uncertainty_path, uncertainty_heat_map)

HOLE = np.array([0.0, 0.0])  # centre of the uncertain disc
HOLE_R = 0.12
VAR_OUT, VAR_IN = 1e-6, 1e-4


class KinematicPrimitive(PrimitiveModel):
    """The box moves 4.5 cm along the push and turns by 0.3 (0.5 - c) rad; variance 100x inside the disc."""

    def predict_change(self, poses, actions):
        d = np.stack([np.cos(actions[:, 0]), np.sin(actions[:, 0])], -1) * 0.045
        change = np.column_stack([d, 0.3 * (0.5 - actions[:, 1])])
        inside = np.linalg.norm(poses[:, :2] - HOLE, axis=-1) < HOLE_R
        var = np.where(inside, VAR_IN, VAR_OUT)[:, None] * np.ones(3)
        return change, var


def closed_loop(mppi, start, goal, pushes, tracker=None):
    model = KinematicPrimitive()
    pose = np.asarray(start, float)
    path = [pose]
    for _ in range(pushes):
        target = goal if tracker is None else tracker.target(pose)
        plan = mppi.plan(pose, target)
        pose = model.predict(pose[None], plan.actions[:1])[0][0]
        path.append(pose)
        mppi.shift(pose, target)
        if np.linalg.norm(pose[:2] - goal[:2]) < 0.02:
            break
    return np.array(path)


def in_hole(path):
    return np.mean(np.linalg.norm(path[:, :2] - HOLE, axis=-1) < HOLE_R)


START, GOAL = np.array([0.0, -0.28, 0.0]), np.array([0.0, 0.28, 0.0])


def test_plain_mppi_reaches_the_goal_straight_through():
    mppi = PrimitiveMPPI(KinematicPrimitive(), PrimitiveMPPIConfig(seed=0), var_ref=VAR_OUT)
    path = closed_loop(mppi, START, GOAL, 30)
    assert np.linalg.norm(path[-1, :2] - GOAL[:2]) < 0.02
    assert len(path) <= 21  # 0.56 m in 4.5 cm pushes: 13 at best
    assert in_hole(path) > 0.25


def test_uncertainty_term_detours_around_the_uncertain_disc():
    mppi = PrimitiveMPPI(KinematicPrimitive(), PrimitiveMPPIConfig(seed=0, w_unc=0.05), var_ref=VAR_OUT)
    path = closed_loop(mppi, START, GOAL, 40)
    assert np.linalg.norm(path[-1, :2] - GOAL[:2]) < 0.02
    assert in_hole(path) == 0.0


def test_exploration_decay_and_config_errors():
    with pytest.raises(ValueError, match="decay"):
        PrimitiveMPPIConfig(decay=0.0)
    with pytest.raises(ValueError, match="var_ref"):
        PrimitiveMPPI(KinematicPrimitive(), var_ref=0.0)
    a = PrimitiveMPPI(KinematicPrimitive(), PrimitiveMPPIConfig(seed=3)).plan(START, GOAL)
    b = PrimitiveMPPI(KinematicPrimitive(), PrimitiveMPPIConfig(seed=3)).plan(START, GOAL)
    np.testing.assert_array_equal(a.actions, b.actions)  # seeded
    assert a.samples_evaluated == 3 * 48 + 1 and a.poses.shape == (7, 3) and a.variance.shape == (6,)


def test_algorithm_2_path_avoids_the_heat_and_is_tracked():
    model = KinematicPrimitive()
    heat = uncertainty_heat_map(model, cell=0.03, actions=4)
    assert heat(np.array([0.0, 0.0])) == pytest.approx(2 * VAR_IN)  # x and y variance
    assert heat(np.array([0.25, 0.3])) == pytest.approx(2 * VAR_OUT)
    with pytest.raises(ValueError, match=r"heat-map cell: must be > 0 and at most the half extent"):
        uncertainty_heat_map(model, cell=1.0, actions=4)  # one cell per axis: interpolation read index -1
    res = low_uncertainty_path(START[:2], GOAL[:2], heat, 2 * VAR_OUT, PathConfig(seed=0))
    assert res.cost < 0.2 * res.initial_cost
    np.testing.assert_allclose(res.path[[0, -1]], [START[:2], GOAL[:2]])
    assert np.all(np.abs(res.path) <= np.array(PathConfig().workspace) + 1e-12)
    mid = np.linspace(res.path[:-1], res.path[1:], 10).reshape(-1, 2)
    assert np.all(np.linalg.norm(mid - HOLE, axis=-1) > HOLE_R - 0.02)
    mppi = PrimitiveMPPI(model, PrimitiveMPPIConfig(seed=0), var_ref=VAR_OUT)
    tracker = PathTracker(res.path, GOAL)
    path = closed_loop(mppi, START, GOAL, 30, tracker)
    assert np.linalg.norm(path[-1, :2] - GOAL[:2]) < 0.03
    assert in_hole(path) < 0.1


@pytest.mark.parametrize("field, value, words", [
    ("waypoints", 1, "^waypoints: must be an integer >= 2"),
    ("iterations", 2.5, "^iterations: must be an integer >= 1"),
    ("temperature", 0.0, "^temperature: must be > 0, got 0.0"),
    ("std", -0.01, "^std: must be >= 0"),
    ("decay", 1.5, r"^decay: must be in \(0, 1\]"),
    ("workspace", (0.28,), "^workspace: must be"),
])
def test_path_config_names_the_bad_field(field, value, words):
    with pytest.raises(ConfigError, match=words):
        PathConfig(**{field: value})
