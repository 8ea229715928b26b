"""Planner core: cost terms on hand-made states, the outcome monitor, and the planner's warm start (the optimisers:
``test_optimisers.py``).

Real models only (the analytical coarse model keeps this file fast); the predictor spy below subclasses the real
``Predictor`` to count and inspect its calls, it does not replace any of its work.
"""
from itertools import pairwise

import numpy as np
import pytest

from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
from parapush_ros.core.planning.outcome import MAX_ACTIONS_LIMIT, Outcome, OutcomeMonitor
from test_optimisers import SpyPredictor, side_problem  # noqa: F401 (a fixture)
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


def test_path_to_a_goal_beside_an_obstacle_and_round_two_obstacles(obstacle_scene):
    """A goal inside an obstacle's grown disc (0.04 + 0.07 m round the centre here) shrinks that disc to pass
    through the goal: from the free side the path is straight (it was counted as blocked: 0.166 m for 0.100 m,
    its first leg 34 deg off). With two obstacles on the line the first leg goes round the nearer one (the larger
    detour's tangent led through it)."""
    goal = (0.10, 0.0)
    free = np.array([[0.2, 0.0], [0.1, 0.05], [0.1, -0.05], [0.15, 0.03]])
    length, first = path_to_goal(obstacle_scene, free, goal, 0.07)
    assert np.allclose(length, np.linalg.norm(free - goal, axis=1))
    assert np.allclose(first, (goal - free) / np.linalg.norm(goal - free, axis=1)[:, None])
    blocked, _ = path_to_goal(obstacle_scene, np.array([[-0.2, 0.0]]), goal, 0.07)
    assert blocked[0] > 0.3 + 0.01  # from behind the obstacle still round it
    from parapush_ros.core.scene.spec import scene_from_dict
    d = obstacle_scene.to_dict()
    d["obstacles"] = [{"name": "near", "shape": "cylinder", "radius": 0.02, "height": 0.1, "pose": [-0.1, 0.02]},
                      {"name": "far", "shape": "cylinder", "radius": 0.08, "height": 0.1, "pose": [0.15, -0.03]}]
    d["goal"]["position"] = [0.35, 0.0]
    two = scene_from_dict(d)
    xy = np.array([[-0.3, 0.0]])
    _, first = path_to_goal(two, xy, (0.35, 0.0), 0.07)
    near = np.array([-0.1, 0.02]) - xy[0]
    miss = abs(near[0] * first[0, 1] - near[1] * first[0, 0])  # distance of the near centre from the first leg
    assert miss >= 0.02 + 0.07 - 1e-9


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


@pytest.mark.parametrize("yaw", [0.0, 0.4])
def test_pusher_approach_costs_nothing_while_the_pusher_pushes_a_box(yaw):
    """The push point is where the pusher touches the target's outline pushing through its centre (a box face
    on: half its width behind), not its bounding radius behind: that charged every state that pushed a box
    (0.079 each, as much as a centimetre of progress is worth in a sixth of the horizon)."""
    scene = load_scene("box_slider")  # goal at +x
    task = PushTask(scene)
    box = scene.objects[0]
    _, d = task.path_to_goal(state(scene, (-0.2, 0.0), (0.0, 0.0, yaw)))
    x = state(scene, (0.0, 0.0), (0.0, 0.0, yaw))
    contact = task.push_distance(x, d)
    if yaw == 0.0:
        assert contact == pytest.approx(box.size[0] / 2 + scene.pusher.radius)
    scene.layout.pusher_pos(x)[:] = -contact * d
    c = task.cost_terms(traj(x, x, x), zero_controls(2))["pusher_approach"][0]
    assert c < 1e-8
    assert task.push_distance(x, d) < task.push_offset  # the walk round keeps the bounding radius


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
    fine = np.concatenate([a + np.linspace(0, 1, 20)[:, None] * (b - a) for a, b in pairwise(path)])
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


def test_other_objects_in_the_targets_lane_to_the_goal_cost_by_their_depth():
    """other_on_path: an object ahead of the target within the lane to the goal (half-width: both radii +
    other_path_margin) costs its depth squared per state; behind the target, beside the lane or past the goal, none."""
    scene = load_scene("four_cylinders")
    L, task = scene.layout, PushTask(scene)
    w = task.weights
    goal = np.asarray(scene.goal.position)
    half_width = 2 * 0.05115 + w.other_path_margin
    x = scene.initial_state()
    poses = L.object_poses(x)
    poses[0, :2] = goal + (-0.4, 0.0)
    poses[1, :2] = goal + (-0.2, 0.03)  # in the lane, 3 cm off its centre line
    poses[2, :2] = goal + (-0.5, 0.0)  # behind the target
    poses[3, :2] = goal + (0.0, half_width + 0.005)  # beside the goal, just out of the lane
    np.testing.assert_allclose(task.on_path_depth(x), [half_width - 0.03, 0.0, 0.0], atol=1e-12)
    t = task.cost_terms(traj(x, x, x), zero_controls(2))
    assert t["other_on_path"][0] == pytest.approx(2 * w.other_on_path * (half_width - 0.03) ** 2)
    # moved out of the lane (or the target gone round it: the lane turns away) it no longer costs
    aside = x.copy()
    L.object_poses(aside)[1, :2] = goal + (-0.2, half_width + 0.001)
    assert task.on_path_depth(aside)[0] == 0.0
    round_it = x.copy()
    L.object_poses(round_it)[0, :2] = goal + (-0.15, -0.15)  # past it, to one side
    assert task.on_path_depth(round_it)[0] == 0.0
    # batched over samples and states, and switched off by its weight
    assert task.on_path_depth(np.stack([np.stack([x, aside])] * 3)).shape == (3, 2, 3)
    off = task.with_weights(w.with_overrides({"other_on_path": 0.0}))
    assert "other_on_path" not in off.cost_terms(traj(x, x), zero_controls(1))
    assert "other_on_path" not in PushTask(load_scene("obstacle_push")).cost_terms(
        traj(*[load_scene("obstacle_push").initial_state()] * 2), zero_controls(1))


def test_variance_term_only_when_the_model_reports_one(obstacle_scene, weights):
    assert weights.variance == 0.0  # default: stochastic/mppi plan on the mean (paper 004's MPPI baseline)
    assert "variance" not in PushTask(obstacle_scene, weights).cost_terms(
        traj(obstacle_scene.initial_state(), obstacle_scene.initial_state()), zero_controls(1),
        variance=np.full((1, 2, obstacle_scene.layout.dim), 0.001))
    # whatever the weight, a sample whose predicted variance is not finite is unknown: never the plan
    nan_var = np.full((1, 2, obstacle_scene.layout.dim), np.nan)
    assert np.isnan(PushTask(obstacle_scene, weights).cost(
        traj(obstacle_scene.initial_state(), obstacle_scene.initial_state()), zero_controls(1), variance=nan_var)[0])
    weights = weights.with_overrides({"variance": 1.0})
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


def test_planner_warm_starts_from_the_shifted_solution(side_problem):  # noqa: F811 (the imported fixture)
    scene, task, x0 = side_problem
    spy = SpyPredictor(scene)
    config = PlannerConfig.from_values(dict(model="coarse", samples=6, iterations=1))
    planner = MPCPlanner(scene, config, task=task, predictor=spy)
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


@pytest.mark.parametrize("model", ["parareal1", "learned"])
def test_start_state_prediction_with_the_learned_coarse_model(model):
    """Issue 19: the real-time loop predicts the start state through a fraction of a control; the learned coarse
    model predicts whole 1 s slices only. One slice of Parareal-K is the fine model's, so Parareal predicts it with
    the fine model; the learned model alone does the same for a segment that is not a whole slice."""
    from parapush_ros.core.models.registry import Predictor
    s = load_scene("clutter_push")
    predictor = Predictor(s, coarse="learned", threads=1)
    planner = MPCPlanner(s, PlannerConfig(model=model), predictor=predictor)
    try:
        x0 = s.initial_state()
        u = np.array([0.05, 0.0])
        x = planner.roll_forward(x0, [(0.0, 0.117, u), (0.117, 0.3, u)])
        fine = predictor.predict(x0, np.array([u, u]), 0.1, model="fine")  # not the same slicing: close, not equal
        assert np.all(np.isfinite(x)) and abs(x[0] - x0[0] - 0.3 * 0.05) < 2e-3
        np.testing.assert_allclose(x[:2], predictor.predict(fine.states[-1], u[None], 0.1, model="fine").states[-1][:2],
                                   atol=1e-3)
        whole = planner.roll_forward(x0, [(0.0, 1.0, u)])  # a whole slice: the planner's own model
        ref = predictor.predict(x0, u[None], 1.0, model="fine" if model == "parareal1" else model).states[-1]
        np.testing.assert_array_equal(whole, ref)
    finally:
        planner.close()
