"""The 100 Hz tracking controller of DG-OC plans: the trust-region error filter, and plans executed in MuJoCo."""
import numpy as np
import pytest

from parapush_ros.core.config import ConfigError
from parapush_ros.core.models.quasistatic import (QuasiStaticPusherSlider, fine_c_scale, from_scene_state,
                                                  to_scene_states)
from parapush_ros.core.planning.ddp.demonstrations import load_library
from parapush_ros.core.planning.ddp.dgoc import PLAN_DT, DGOCPlanner
from parapush_ros.core.planning.ddp.solver import DDPSettings
from parapush_ros.core.planning.ddp.tracking import PlanTracker, TrackingConfig, replan, track_in_world
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.core.sim.world import SimWorld, WorldConfig


def test_error_filter_uses_the_gains_only_outside_the_trust_region():
    rng = np.random.default_rng(0)
    T = 10
    X = rng.normal(0, 0.01, (T + 1, 7))
    U = rng.normal(0, 0.5, (T, 2))
    K = rng.normal(0, 5.0, (T, 2, 7))
    cfg = TrackingConfig(trust_radius=0.005)
    inside, outside = PlanTracker(X, U, K, 0.02, cfg), PlanTracker(X, U, K, 0.02, cfg)
    t = 0.03  # step 1, half way to step 2
    ref = 0.5 * (X[1] + X[2])
    small = ref + [0.002, 0, 0, 0, 0, 0, 0]
    big = ref + [0.01, 0, 0, 0, 0, 0.05, 0]
    np.testing.assert_allclose(inside.command(t, small), X[0, 5:7] + 0.01 * U[1])
    np.testing.assert_allclose(outside.command(t, big), X[0, 5:7] + 0.01 * (U[1] + K[1] @ (big - ref)))
    assert inside.feedback_ticks == 0 and outside.feedback_ticks == 1
    np.testing.assert_array_equal(inside.command(T * 0.02 + 0.01, small), 0.0)  # after the plan: stop


@pytest.mark.parametrize("field, value, words", [
    ("rate_hz", 0.0, "^rate_hz: must be > 0, got 0.0"),
    ("trust_radius", -0.001, "^trust_radius: must be >= 0"),
    ("v_max", float("nan"), "^v_max: must be > 0"),
    ("max_replans", 1.5, "^max_replans: must be an integer >= 0"),
    ("replan_iterations", 0, "^replan_iterations: must be an integer >= 1"),
    ("correction_guesses", "yes", "^correction_guesses: must be true or false"),
    ("goal_tolerance", (0.005,), "^goal_tolerance: must be"),
])
def test_tracking_config_names_the_bad_field(field, value, words):
    with pytest.raises(ConfigError, match=words):
        TrackingConfig(**{field: value})


def test_world_state_maps_to_the_model_state_and_a_hand_can_displace_the_slider():
    scene = load_scene("block_003")
    world = SimWorld(scene, WorldConfig())
    x = from_scene_state(world.layout, world.x)
    np.testing.assert_allclose(x, [0, 0, 0, -0.066, 0, 0, 0], atol=1e-12)
    np.testing.assert_array_equal(to_scene_states(world.layout, x[None], world.x)[0], world.x)  # and back
    with pytest.raises(ValueError, match="scene state: expected last dimension 10"):
        from_scene_state(world.layout, x)
    world.displace_object(0, (0.01, -0.02, 0.1))
    np.testing.assert_allclose(from_scene_state(world.layout, world.x)[:5], [0.01, -0.02, 0.1, -0.066, 0.0], atol=1e-12)
    world.execute(np.zeros(2), 0.05)
    np.testing.assert_allclose(from_scene_state(world.layout, world.x)[:3], [0.01, -0.02, 0.1], atol=1e-3)


@pytest.fixture(scope="module")
def block_plan():
    scene = load_scene("block_003")
    model = QuasiStaticPusherSlider.from_scene(scene, dt=PLAN_DT, c_scale=fine_c_scale(scene))
    assert model.c_scale == 1.0  # block_003 rests on a support grid: the paper's uniform-pressure model fits
    planner = DGOCPlanner(model, load_library("block_003"), settings=DDPSettings(max_iterations=30))
    target = np.array([0.12, 0.04, 0.4])
    plan = planner.plan(np.array([[0, 0, 0, -0.066, 0, 0, 0.0]]), target[None], "ws")
    assert np.all(plan.final_error()[0] < [0.005, 0.005, 0.05])
    return scene, model, plan, target


def test_a_plan_tracked_in_mujoco_reaches_the_target(block_plan):
    scene, model, plan, target = block_plan
    run = track_in_world(model, SimWorld(scene, WorldConfig()), plan.X[0], plan.U[0], plan.K[0], PLAN_DT, target)
    assert np.all(run.error < [0.01, 0.01, 0.1]), run.error
    assert run.replans == 0 and 0.0 < run.feedback_share < 1.0
    assert len(run.path) == int(round((plan.U.shape[1] * PLAN_DT + TrackingConfig().settle_s) * 100)) + 1


def test_tracking_recovers_from_a_push_by_hand(block_plan):
    """A 3 cm sideways displacement of the slider a second into the push: the error leaves the re-plan radius, the
    controller re-plans from where the slider is and still gets within the thresholds."""
    scene, model, plan, target = block_plan
    run = track_in_world(model, SimWorld(scene, WorldConfig()), plan.X[0], plan.U[0], plan.K[0], PLAN_DT, target,
                         perturb=(1.0, (0.0, 0.03, 0.0)))
    assert run.replans >= 1
    assert np.all(run.error < [0.01, 0.01, 0.1]), run.error


def test_a_missed_plan_end_is_re_planned_from_a_new_contact():
    """The plan has ended (the pusher at rest 2 cm behind the box) with the slider 1.5 cm short and 0.1 rad off:
    the current plan's policy has no contact to offer, so the re-plan starts from the guesses that go round to a
    face and push; on the model it reaches the target."""
    scene = load_scene("block_003")
    model = QuasiStaticPusherSlider.from_scene(scene, dt=PLAN_DT)
    x = np.array([0.0, 0.0, 0.0, -0.085, 0.0, 0.0, 0.0])
    X = np.repeat(x[None], 11, 0)
    tracker = PlanTracker(X, np.zeros((10, 2)), np.zeros((10, 2, 7)), PLAN_DT)
    target = np.array([0.015, 0.0, 0.1])
    new = replan(model, x, tracker, tracker.duration, target, TrackingConfig(replan_iterations=20))
    assert len(new.U) == int(round(TrackingConfig().min_replan_s / PLAN_DT))
    final = new.X[-1, :3]
    assert np.all(np.abs(final - target) < [0.005, 0.005, 0.05]), final
    assert model.penetration(new.X).max() < 1e-3
