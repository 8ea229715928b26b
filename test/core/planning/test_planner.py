"""Planner core: cost terms on hand-made states, the outcome monitor, and both optimisers on a fixed problem.

Real models only (the analytical coarse model keeps this file fast); the predictor spy below subclasses the real
``Predictor`` to count and inspect its calls, it does not replace any of its work.
"""
import numpy as np
import pytest

from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
from parapush_ros.core.planning.optimisers import MPPI, StochasticOptimiser, make_optimiser
from parapush_ros.core.planning.outcome import MAX_ACTIONS_LIMIT, Outcome, OutcomeMonitor
from parapush_ros.core.models.registry import Predictor
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.core.planning.tasks import CostWeights, Goal, PushTask, goal_for, load_cost_weights
from parapush_ros.core.scene.queries import path_to_goal

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def obstacle_scene():
    return load_scene("obstacle_push")


@pytest.fixture(scope="module")
def weights():
    return load_cost_weights()


def state(scene, pusher, *poses):
    return scene.layout.compose(np.asarray(pusher, float), np.asarray(poses, float))


def traj(*states):
    """(1, N+1, D) trajectory from states."""
    return np.stack(states)[None]


def zero_controls(n, m=1):
    return np.zeros((m, n, 2))


# ------------------------------------------------------------------------------------------------ weights
def test_shipped_weights_are_complete_and_validated(weights):
    assert set(weights.as_dict()) == set(CostWeights.names())
    with pytest.raises(ValueError, match="unknown cost weight"):
        weights.with_overrides({"termnial": 1.0})
    with pytest.raises(ValueError, match="collision: must be finite and >= 0"):
        weights.with_overrides({"collision": -1.0})
    d = weights.as_dict()
    del d["smoothness"]
    with pytest.raises(ValueError, match=r"missing cost weight\(s\) \['smoothness'\]"):
        CostWeights.from_mapping(d, "mine.yaml")
    assert weights.with_overrides({"terminal": 3.0}).terminal == 3.0


def test_goal_for_names_bad_fields(obstacle_scene):
    with pytest.raises(ValueError, match="off the table"):
        goal_for(obstacle_scene, "slider", (2.0, 0.0))
    with pytest.raises(KeyError, match="no object named 'teapot'"):
        goal_for(obstacle_scene, "teapot")
    g = goal_for(obstacle_scene)
    assert g.position == (0.25, 0.0) and g.radius == 0.05 and not g.uses_yaw


# ------------------------------------------------------------------------------------------------ cost terms
def test_terminal_cost_is_the_path_length_around_the_obstacle(obstacle_scene, weights):
    w = weights.with_overrides({"terminal": 1.0, "terminal_path": 1.0})
    task = PushTask(obstacle_scene, w)
    s0 = state(obstacle_scene, (-0.35, 0.2), (-0.3, 0.2, 0.0))
    at_goal = state(obstacle_scene, (-0.35, 0.2), (0.25, 0.0, 0.0))
    t = task.cost_terms(traj(s0, at_goal), zero_controls(1))
    assert t["terminal"][0] == pytest.approx(0.0) and t["terminal_path"][0] == pytest.approx(0.0)
    # clear line of sight: path = straight distance
    side = state(obstacle_scene, (-0.35, 0.3), (0.05, 0.3, 0.0))
    t = task.cost_terms(traj(s0, side), zero_controls(1))
    d2 = 0.2 ** 2 + 0.3 ** 2
    assert t["terminal"][0] == pytest.approx(d2) and t["terminal_path"][0] == pytest.approx(d2)
    # obstacle on the line: the path around is longer, and its first leg turns away from the obstacle
    behind = state(obstacle_scene, (-0.35, 0.0), (-0.25, 0.01, 0.0))
    t = task.cost_terms(traj(s0, behind), zero_controls(1))
    assert t["terminal_path"][0] > t["terminal"][0] * 1.05
    length, first = path_to_goal(obstacle_scene, np.array([[-0.25, 0.01], [-0.25, -0.01]]), (0.25, 0.0), 0.07)
    assert length[0] == pytest.approx(length[1]) and length[0] > 0.5
    assert first[0, 1] > 0.2 and first[1, 1] < -0.2  # goes round on the side it is already on


def test_obstacle_proximity_collision_edge_and_smoothness_terms(obstacle_scene, weights):
    task = PushTask(obstacle_scene, weights)
    s0 = obstacle_scene.initial_state()
    r = obstacle_scene.objects[0].radius + obstacle_scene.obstacles[0].radius  # centre distance at contact
    far = state(obstacle_scene, (-0.35, 0.3), (-0.25 + 0.0, 0.3, 0.0))
    near = state(obstacle_scene, (-0.35, 0.3), (-(r + 0.02), 0.0, 0.0))
    touching = state(obstacle_scene, (-0.35, 0.3), (-(r + 0.0005), 0.0, 0.0))
    costs = {name: task.cost_terms(traj(s0, x), zero_controls(1)) for name, x in
             (("far", far), ("near", near), ("touching", touching))}
    assert costs["far"]["slider_obstacle"][0] < costs["near"]["slider_obstacle"][0] \
        < costs["touching"]["slider_obstacle"][0]
    assert costs["near"]["slider_obstacle"][0] == pytest.approx(weights.slider_obstacle / 0.02 ** 2, rel=1e-6)
    # below the floor the term saturates instead of blowing up
    assert costs["touching"]["slider_obstacle"][0] == pytest.approx(weights.slider_obstacle
                                                                    / weights.clearance_floor ** 2)
    assert costs["touching"]["collision"][0] == weights.collision and costs["near"]["collision"][0] == 0.0
    # a slice that starts and ends clear of the obstacle but passes through it in between is a collision
    before = state(obstacle_scene, (-0.35, 0.3), (-0.15, 0.0, 0.0))
    after = state(obstacle_scene, (-0.35, 0.3), (0.15, 0.0, 0.0))
    t = task.cost_terms(traj(before, after), zero_controls(1))
    assert t["collision"][0] == weights.collision
    pusher_hit = state(obstacle_scene, (-0.04 - 0.0145, 0.0), (-0.25, 0.3, 0.0))
    assert task.cost_terms(traj(s0, pusher_hit), zero_controls(1))["collision"][0] == weights.collision
    # table edge: once per state with an object centre within edge_margin of the edge
    edge = state(obstacle_scene, (0.0, 0.45), (0.0, 0.5 - weights.edge_margin / 2, 0.0))
    assert task.cost_terms(traj(s0, edge, edge), zero_controls(2))["table_edge"][0] == 2 * weights.table_edge
    assert costs["far"]["table_edge"][0] == 0.0
    # smoothness: consecutive changes, and the change from the control executed before
    u = np.array([[[0.05, 0.0], [0.05, 0.0], [0.03, 0.02]]])
    xs = traj(s0, s0, s0, s0)
    assert task.cost_terms(xs, u)["smoothness"][0] == pytest.approx(weights.smoothness * 0.02 ** 2 * 2)
    assert task.cost_terms(xs, u, u_prev=[0.0, 0.0])["smoothness"][0] == pytest.approx(
        weights.smoothness * (0.05 ** 2 + 2 * 0.02 ** 2))


def test_pusher_approach_prefers_the_push_point_behind_the_target():
    scene = load_scene("cylinder_slider")  # goal at +x: the push point is on the -x side
    task = PushTask(scene)
    s0 = scene.initial_state()
    behind = state(scene, (-0.066, 0.0), (0.0, 0.0, 0.0))
    ahead = state(scene, (0.066, 0.0), (0.0, 0.0, 0.0))
    c = [task.cost_terms(traj(s0, x, x), zero_controls(2))["pusher_approach"][0] for x in (behind, ahead)]
    assert c[0] < 1e-4 < c[1]


def test_push_primitive_walks_round_the_target_then_pushes_along_the_path(obstacle_scene):
    task = PushTask(obstacle_scene)
    x = obstacle_scene.initial_state()
    slider = np.array(x[2:4])
    x[0:2] = slider + (0.08, 0.0)  # the pusher in front of the slider, between it and the goal
    dt, speed, approach = 0.25, 0.05, 0.08
    u = task.approach_and_push(x, speed, approach, 16, dt)
    assert u.shape == (16, 2) and np.linalg.norm(u, axis=-1).max() <= approach + 1e-9
    path = x[0:2] + np.concatenate([[np.zeros(2)], np.cumsum(u * dt, axis=0)])
    reach = task.push_offset  # pusher centre to slider centre at contact
    _, d = task.path_to_goal(x)
    q = slider - (reach + 0.002) * d  # the push point
    # on the way to the push point (straight pieces sampled finely) the pusher never cuts through the slider
    fine = np.concatenate([a + np.linspace(0, 1, 20)[:, None] * (b - a) for a, b in zip(path[:-1], path[1:])])
    arrive = int(np.argmin(np.linalg.norm(fine - q, axis=-1)))
    assert np.linalg.norm(fine[arrive] - q) < 0.01 and arrive > 20
    assert np.linalg.norm(fine[:arrive + 1] - slider, axis=-1).min() > reach - 1e-3
    np.testing.assert_allclose(u[-1] / np.linalg.norm(u[-1]), d, atol=1e-9)  # ends pushing along the path
    behind = path[-1] - slider
    assert np.dot(behind, d) < 0  # from behind the slider


def test_multi_object_terms():
    scene = load_scene("four_cylinders")
    task = PushTask(scene)
    assert task.kind == "multi_object" and PushTask(load_scene("obstacle_push")).kind == "obstacle"
    w = task.weights
    x0 = scene.initial_state()
    L = scene.layout
    moved = x0.copy()
    L.object_poses(moved)[1, :2] += (0.03, -0.04)  # an other object pushed by 5 cm
    t = task.cost_terms(traj(x0, moved), zero_controls(1))
    assert t["other_motion"][0] == pytest.approx(w.other_motion * 0.05 ** 2)
    assert t["other_in_goal"][0] == 0.0
    target_moved = x0.copy()
    L.object_poses(target_moved)[0, :2] = scene.goal.position  # the target in the goal: no multi-object penalty
    t = task.cost_terms(traj(x0, target_moved), zero_controls(1))
    assert t["other_motion"][0] == 0.0 and t["other_in_goal"][0] == 0.0
    intruder = x0.copy()
    L.object_poses(intruder)[3, :2] = scene.goal.position  # a non-target in the goal
    t = task.cost_terms(traj(x0, intruder), zero_controls(1))
    assert t["other_in_goal"][0] == w.other_in_goal
    fallen = x0.copy()
    L.object_poses(fallen)[2, :2] = (0.0, -0.6)  # a non-target off the table
    assert task.cost_terms(traj(x0, fallen), zero_controls(1))["table_edge"][0] == w.table_edge


def test_variance_term_only_when_the_model_reports_one(obstacle_scene, weights):
    task = PushTask(obstacle_scene, weights)
    xs = traj(obstacle_scene.initial_state(), obstacle_scene.initial_state())
    assert "variance" not in task.cost_terms(xs, zero_controls(1))
    var = np.full(xs.shape, 0.001)
    t = task.cost_terms(xs, zero_controls(1), variance=var)
    n_pos = len(obstacle_scene.layout.position_indices)
    assert t["variance"][0] == pytest.approx(weights.variance * 0.001 * n_pos)
    with pytest.raises(ValueError, match="variance must be"):
        task.cost_terms(xs, zero_controls(1), variance=np.ones((1, 5)))


# ------------------------------------------------------------------------------------------------ outcome
def test_outcome_monitor(obstacle_scene):
    goal = goal_for(obstacle_scene)
    mon = OutcomeMonitor(obstacle_scene, goal, max_actions=20)
    s = obstacle_scene
    st = mon.check(s.initial_state(), 0)
    assert st.outcome is Outcome.RUNNING and not st.outcome.done and st.distance == pytest.approx(0.5)
    st = mon.check(state(s, (0.1, 0.0), (0.23, 0.02, 0.0)), 7)
    assert st.outcome is Outcome.REACHED and st.outcome.success and "after 7 action(s)" in st.reason
    st = mon.check(state(s, (-0.3, 0.0), (-0.0915, 0.0, 0.0)), 3)
    assert st.outcome is Outcome.HIT_OBSTACLE and "'slider' touched an obstacle" in st.reason
    st = mon.check(state(s, (0.0, -0.0545), (-0.25, 0.2, 0.0)), 3)
    assert st.outcome is Outcome.HIT_OBSTACLE and "pusher" in st.reason
    st = mon.check(state(s, (0.0, 0.3), (0.0, 0.51, 0.0)), 3)
    assert st.outcome is Outcome.OFF_TABLE and "left the table" in st.reason
    st = mon.check(s.initial_state(), 20)
    assert st.outcome is Outcome.TIMEOUT and "limit 20" in st.reason
    # a hit anywhere along the executed path counts, even if the end state is in the goal
    path = np.stack([state(s, (-0.3, 0.0), (-0.0915, 0.0, 0.0)), state(s, (0.1, 0.0), (0.25, 0.0, 0.0))])
    assert mon.check_path(path, 5).outcome is Outcome.HIT_OBSTACLE
    # yaw goals: in the disc but turned too far is not reached
    yaw_goal = Goal(0, (0.25, 0.0), 0.05, yaw=0.0, yaw_tolerance=0.1)
    mon_yaw = OutcomeMonitor(s, yaw_goal, max_actions=20)
    assert mon_yaw.check(state(s, (0.1, 0.0), (0.25, 0.0, 0.5)), 2).outcome is Outcome.RUNNING
    assert mon_yaw.check(state(s, (0.1, 0.0), (0.25, 0.0, 0.05)), 2).outcome is Outcome.REACHED
    for absurd in (0, MAX_ACTIONS_LIMIT + 1, 2 ** 32 - 1):
        with pytest.raises(ValueError, match="max_actions"):
            OutcomeMonitor(s, goal, max_actions=absurd)


# ------------------------------------------------------------------------------------------------ optimisers
class SpyPredictor(Predictor):
    """The real predictor, recording the shape of every batch it is asked for (and optionally a variance)."""

    def __init__(self, scene, variance=None, **kw):
        super().__init__(scene, **kw)
        self.calls = []
        self.variance = variance

    def predict(self, x0, controls, dt, model="parareal", **kw):
        self.calls.append(np.array(controls))
        pred = super().predict(x0, controls, dt, model=model, **kw)
        if self.variance is not None:
            pred.variance = self.variance(pred.states)
        return pred


@pytest.fixture(scope="module")
def side_problem():
    """Cylinder slider, pusher behind it, goal 20 cm ahead and 10 cm to the left."""
    scene = load_scene("cylinder_slider")
    goal = goal_for(scene, "cylinder", (0.2, 0.1), 0.02)
    return scene, PushTask(scene, goal=goal), scene.initial_state()


@pytest.mark.parametrize("cls, extra", [(StochasticOptimiser, {}), (MPPI, {"temperature": 0.5})])
def test_each_optimiser_lowers_the_cost_with_one_batched_prediction_per_iteration(side_problem, cls, extra):
    scene, task, x0 = side_problem
    spy = SpyPredictor(scene)
    opt = cls(spy, task, model="coarse", samples=16, iterations=6, seed=3, **extra)
    bad_start = np.tile([0.05, -0.03], (4, 1))  # pushes away from the goal's side
    r = opt.optimise(x0, initial=bad_start)
    assert r.cost < 0.8 * r.initial_cost
    assert r.costs == sorted(r.costs, reverse=True) and r.costs[-1] == r.cost
    assert len(spy.calls) == r.predict_calls == 6 and r.samples_evaluated == 6 * 16
    assert all(c.shape == (16, 4, 2) for c in spy.calls)
    speeds = np.linalg.norm(np.concatenate(spy.calls), axis=-1)
    assert speeds.max() <= opt.max_speed + 1e-12
    np.testing.assert_allclose(spy.calls[0][0], bad_start)  # the warm start itself is sample 0
    straight = task.straight_push(x0, opt.nominal_speed, 4)
    assert np.allclose(spy.calls[0][1], straight)  # the straight push at the goal is a candidate
    primitive = task.approach_and_push(x0, opt.nominal_speed, opt.approach_speed, 4, 1.0)
    assert np.allclose(spy.calls[0][2], primitive)  # and so is the push primitive
    assert np.allclose(spy.calls[0][3], 0.0)  # and holding still
    assert r.states.shape == (5, scene.layout.dim) and np.all(np.isfinite(r.controls))
    again = cls(SpyPredictor(scene), task, model="coarse", samples=16, iterations=6, seed=3, **extra)
    np.testing.assert_array_equal(again.optimise(x0, initial=bad_start).controls, r.controls)  # seeded


def test_without_warm_start_the_straight_push_comes_first(side_problem):
    scene, task, x0 = side_problem
    spy = SpyPredictor(scene)
    make_optimiser("stochastic", spy, task, model="coarse", samples=4, iterations=1).optimise(x0)
    np.testing.assert_allclose(spy.calls[0][0], task.straight_push(x0, 0.05, 4))


def test_mppi_exploration_decays_and_parameters_are_checked(side_problem):
    scene, task, _ = side_problem
    opt = MPPI(Predictor(scene), task, variance=1e-4, decay=0.5)
    assert opt.exploration_std(0) == pytest.approx(0.01) and opt.exploration_std(2) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="optimiser parameter decay"):
        MPPI(Predictor(scene), task, decay=1.5)
    with pytest.raises(ValueError, match="optimiser parameter samples"):
        StochasticOptimiser(Predictor(scene), task, samples=1)
    with pytest.raises(ValueError, match="unknown optimiser 'adam'"):
        make_optimiser("adam", Predictor(scene), task)


def test_uncertainty_averse_cost_steers_away_from_uncertain_states(side_problem):
    """A model that is unsure wherever the slider goes left of y = 0.02 makes the plan keep it right of that,
    although the goal lies further left; without the variance the plan goes straight for the goal."""
    scene, task, x0 = side_problem
    L = scene.layout
    averse_task = task.with_weights(task.weights.with_overrides({"variance": 100.0}))

    def var(states):
        return np.where(L.object_poses(states)[..., 0, 1] > 0.02, 1.0, 0.0)

    kw = dict(model="coarse", samples=16, iterations=5, variance=1e-3, seed=1)
    plain = make_optimiser("stochastic", Predictor(scene), averse_task, **kw).optimise(x0)
    averse = make_optimiser("stochastic", SpyPredictor(scene, variance=var), averse_task, **kw).optimise(x0)
    assert "variance" in averse.terms and "variance" not in plain.terms
    assert L.object_poses(plain.states)[-1, 0, 1] > 0.03
    assert averse.terms["variance"] == 0.0
    assert np.all(L.object_poses(averse.states)[:, 0, 1] <= 0.02)


def test_planner_warm_starts_from_the_shifted_solution(side_problem):
    scene, task, x0 = side_problem
    spy = SpyPredictor(scene)
    planner = MPCPlanner(scene, PlannerConfig(model="coarse", samples=6, iterations=1), task=task, predictor=spy)
    p1 = planner.plan(x0)
    planner.commit()
    planner.plan(x0)
    np.testing.assert_allclose(spy.calls[-1][0], np.concatenate([p1.controls[1:], p1.controls[-1:]]))
    planner.reset()
    planner.plan(x0)
    np.testing.assert_allclose(spy.calls[-1][0], task.straight_push(x0, 0.05, 4))


def test_outcome_rules_of_the_multi_object_task():
    """Paper 001: touching the other objects is allowed; one of them off the table or in the goal is a failure."""
    s = load_scene("clutter_push")
    mon = OutcomeMonitor(s, goal_for(s), max_actions=20)
    poses = [list(o.pose) for o in s.objects]

    def with_poses(pusher, changes):
        p = [list(q) for q in poses]
        for i, q in changes.items():
            p[i] = q
        return s.layout.compose(np.array(pusher), np.array(p))

    assert mon.check(s.initial_state(), 0).outcome is Outcome.RUNNING
    # pushing the target into another object (touching, even moving it) is fine
    st = mon.check(with_poses((-0.11, 0.0), {0: (-0.0, -0.06, 0.0), 1: (0.06, 0.04, 0.0)}), 3)
    assert st.outcome is Outcome.RUNNING
    st = mon.check(with_poses((0.1, 0.0), {0: (0.2, 0.02, 0.0)}), 6)
    assert st.outcome is Outcome.REACHED and "'target'" in st.reason
    st = mon.check(with_poses((0.0, 0.3), {3: (0.12, 0.51, 0.0)}), 4)
    assert st.outcome is Outcome.OFF_TABLE and "'cylinder_3' left the table" in st.reason
    st = mon.check(with_poses((0.1, 0.0), {1: (0.19, -0.03, 0.0)}), 4)
    assert st.outcome is Outcome.OTHER_IN_GOAL and "'cylinder_1' entered the goal region" in st.reason
    assert not st.outcome.success and st.outcome.done
    # just outside the goal disc (centre 1 mm beyond its radius) is not in it
    st = mon.check(with_poses((0.1, 0.0), {1: (0.2, 0.051, 0.0)}), 4)
    assert st.outcome is Outcome.RUNNING
    # target and another object both in the goal: a failure, whatever the order along the path
    both = with_poses((0.1, 0.0), {0: (0.2, 0.0, 0.0), 1: (0.2, -0.04, 0.0)})
    assert mon.check(both, 5).outcome is Outcome.OTHER_IN_GOAL
    # an other object that passes through the goal during the action counts even if it has left it at the end
    path = np.stack([with_poses((0.0, 0.0), {1: (0.2, 0.0, 0.0)}), with_poses((0.1, 0.0), {0: (0.2, 0.0, 0.0),
                                                                                            1: (0.3, 0.0, 0.0)})])
    assert mon.check_path(path, 5).outcome is Outcome.OTHER_IN_GOAL
    assert mon.check(s.initial_state(), 20).outcome is Outcome.TIMEOUT
