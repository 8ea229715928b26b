"""The sampling optimisers on a fixed problem, their configs and their registry.

Real models only (the analytical coarse model keeps this file fast); the predictor spy below subclasses the real
``Predictor`` to count and inspect its calls, it does not replace any of its work.
"""
from dataclasses import dataclass

import numpy as np
import pytest

from parapush_ros.core.config import ConfigError, knob, knobs, require
from parapush_ros.core.models.registry import Predictor
from parapush_ros.core.planning import optimisers
from parapush_ros.core.planning.optimisers import (MPPI, OPTIMISERS, MPPIConfig, SamplingConfig, StochasticConfig,
                                                   StochasticOptimiser, make_optimiser, register_optimiser)
from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
from parapush_ros.core.planning.tasks import ProposalConfig, PushTask, goal_for
from parapush_ros.core.scene.spec import load_scene

pytestmark = pytest.mark.timeout(60)


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


@pytest.mark.parametrize("cls, config", [(StochasticOptimiser, None), (MPPI, MPPIConfig(temperature=0.5))])
def test_each_optimiser_lowers_the_cost_with_one_batched_prediction_per_iteration(side_problem, cls, config):
    scene, task, x0 = side_problem
    spy = SpyPredictor(scene)
    sampling = SamplingConfig(samples=16, iterations=6, seed=3)
    opt = cls(spy, task, sampling, config, model="coarse")
    bad_start = np.tile([0.05, -0.03], (4, 1))  # pushes away from the goal's side
    r = opt.optimise(x0, initial=bad_start)
    assert r.cost < 0.8 * r.initial_cost
    assert r.costs == sorted(r.costs, reverse=True) and r.costs[-1] == r.cost
    assert len(spy.calls) == r.predict_calls == 6 and r.samples_evaluated == 6 * 16
    assert all(c.shape == (16, 4, 2) for c in spy.calls)
    speeds = np.linalg.norm(np.concatenate(spy.calls), axis=-1)
    assert speeds.max() <= sampling.max_speed + 1e-12
    np.testing.assert_allclose(spy.calls[0][0], bad_start)  # the warm start itself is sample 0
    p = task.proposal
    straight = task.straight_push(x0, p.nominal_speed, 4)
    assert np.allclose(spy.calls[0][1], straight)  # the task's proposals follow: the straight push at the goal,
    primitive = task.approach_and_push(x0, p.nominal_speed, p.approach_speed, 4, 1.0)
    assert np.allclose(spy.calls[0][2], primitive)  # the push primitive
    assert np.allclose(spy.calls[0][3], 0.0)  # and holding still
    assert r.states.shape == (5, scene.layout.dim) and np.all(np.isfinite(r.controls))
    again = cls(SpyPredictor(scene), task, sampling, config, model="coarse")
    np.testing.assert_array_equal(again.optimise(x0, initial=bad_start).controls, r.controls)  # seeded


@pytest.mark.parametrize("cls, config", [(StochasticOptimiser, None), (MPPI, MPPIConfig(temperature=0.5))])
def test_a_sample_the_model_could_not_predict_weighs_nothing_even_when_the_others_tie(side_problem, cls, config):
    """A NaN cost (the model could not predict it) weighs nothing, also where every finite cost is the same (the
    stochastic optimiser's normalisation had no range there and gave every sample the same weight)."""
    scene, task, _ = side_problem
    opt = cls(SpyPredictor(scene), task, SamplingConfig(samples=4, iterations=1), config, model="coarse")
    for costs, want in (([1.0, np.nan, np.nan], [1.0, 0.0, 0.0]), ([1.0, 1.0, np.inf], [0.5, 0.5, 0.0]),
                        ([2.0, np.nan, 2.0, 2.0], [1 / 3, 0.0, 1 / 3, 1 / 3])):
        np.testing.assert_allclose(opt.weights(np.array(costs)), want, atol=1e-12)


def test_without_warm_start_the_first_proposal_comes_first(side_problem):
    scene, task, x0 = side_problem
    spy = SpyPredictor(scene)
    make_optimiser("stochastic", spy, task, SamplingConfig(samples=4, iterations=1), model="coarse").optimise(x0)
    np.testing.assert_allclose(spy.calls[0][0], task.straight_push(x0, 0.05, 4))
    assert [len(task.with_proposal(ProposalConfig(primitive=False)).proposals(x0, 4, 1.0)),
            len(task.proposals(x0, 4, 1.0))] == [2, 3]


def test_mppi_exploration_decays(side_problem):
    scene, task, _ = side_problem
    opt = MPPI(Predictor(scene), task, SamplingConfig(exploration_variance=1e-4), MPPIConfig(decay=0.5))
    assert opt.exploration_std(0) == pytest.approx(0.01) and opt.exploration_std(2) == pytest.approx(0.005)


@pytest.mark.parametrize("make, words", [
    (lambda: MPPIConfig(decay=1.5), r"^decay: must be in \(0, 1\], got 1.5"),
    (lambda: StochasticConfig(sensitivity=0.0), "^sensitivity: must be > 0"),
    (lambda: SamplingConfig(samples=1), "^samples: must be >= 2"),
    (lambda: SamplingConfig(control_duration=0.0005), "^control_duration: must be a positive multiple of the 0.001"),
    (lambda: ProposalConfig(approach_speed=float("nan")), "^approach_speed: must be > 0"),
    (lambda: PlannerConfig(optimiser="adam"), "^optimiser: 'adam' is not one of stochastic, mppi"),
    (lambda: PlannerConfig(model="oracle"), "^model: unknown model 'oracle'"),
    (lambda: PlannerConfig(optimiser="mppi", optimiser_config=StochasticConfig()), "^optimiser_config: must be a "
                                                                                   "MPPIConfig"),
    (lambda: PlannerConfig(proposals=ProposalConfig(nominal_speed=0.5)), r"^nominal_speed: must be in \(0, "
                                                                         r"max_speed=0.1\]"),
    (lambda: PlannerConfig.from_values({"optimiser": "mppi", "mppi.temperature": -1.0}), "^mppi.temperature: "),
])
def test_configs_validate_themselves_naming_the_setting(make, words):
    with pytest.raises(ConfigError, match=words):
        make()


def test_planner_settings_are_the_configs_fields_and_parameters_use_the_same_names():
    """The shipped settings by name; an optimiser a user registers (docs/extending.md) adds its own as
    ``<optimiser>.<setting>``, with no edit here."""
    settings = PlannerConfig.settings()
    shipped = {"stochastic", "mppi", "mppi_ua"}
    added = {f"{name}.{k}" for name, registered in OPTIMISERS.items() if name not in shipped
             for k in knobs(registered.config)}
    assert {"model", "optimiser", "horizon", "control_duration", "samples", "iterations", "exploration_variance",
            "max_speed", "seed", "nominal_speed", "approach_speed", "primitive", "stochastic.sensitivity",
            "mppi.temperature", "mppi.decay", "mppi_ua.temperature", "mppi_ua.decay", "mppi_ua.uncertainty_weight",
            "mppi_ua.uncertainty_plans"} | added == set(settings)
    assert settings["mppi.decay"][0] == MPPIConfig.decay and settings["samples"][0] == SamplingConfig.samples
    c = PlannerConfig.from_values({"optimiser": "mppi", "mppi.decay": 0.5, "stochastic.sensitivity": 3.0,
                                   "control_duration": 0.5, "primitive": False})
    assert c.optimiser_config == MPPIConfig(decay=0.5)  # only the chosen optimiser's settings are used
    assert c.sampling.control_duration == 0.5 and c.proposals.primitive is False
    assert PlannerConfig.from_values({}) == PlannerConfig()


def test_uncertainty_averse_cost_steers_away_from_uncertain_states(side_problem):
    """A model that is unsure wherever the slider goes left of y = 0.02 makes the plan keep it right of that,
    although the goal lies further left; without the variance the plan goes straight for the goal."""
    scene, task, x0 = side_problem
    L = scene.layout
    averse_task = task.with_weights(task.weights.with_overrides({"variance": 100.0}))

    def var(states):
        return np.where(L.object_poses(states)[..., 0, 1] > 0.02, 1.0, 0.0)

    sampling = SamplingConfig(samples=16, iterations=5, exploration_variance=1e-3, seed=1)
    plain = make_optimiser("stochastic", Predictor(scene), averse_task, sampling, model="coarse").optimise(x0)
    averse = make_optimiser("stochastic", SpyPredictor(scene, variance=var), averse_task, sampling,
                            model="coarse").optimise(x0)
    assert "variance" in averse.terms and "variance" not in plain.terms
    assert L.object_poses(plain.states)[-1, 0, 1] > 0.03
    assert averse.terms["variance"] == 0.0
    assert np.all(L.object_poses(averse.states)[:, 0, 1] <= 0.02)


# ------------------------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class GreedyConfig:
    keep: int = knob(1, "how many of the cheapest samples share the weight")

    def __post_init__(self):
        require(self.keep >= 1, "keep", self.keep, ">= 1")


class Greedy(optimisers.SamplingOptimiser):
    """An optimiser of one file's worth: equal weights on the ``keep`` cheapest samples."""

    Config = GreedyConfig

    def weights(self, costs):
        w = np.zeros(len(costs))
        w[np.argsort(costs)[:self.config.keep]] = 1.0
        return w / w.sum()


@pytest.fixture
def greedy_registered():
    register_optimiser("greedy", Greedy)
    yield
    del OPTIMISERS["greedy"]


def test_a_registered_optimiser_is_planned_with_and_has_its_settings(side_problem, greedy_registered):
    scene, task, x0 = side_problem
    assert PlannerConfig.settings()["greedy.keep"] == (1, "how many of the cheapest samples share the weight")
    config = PlannerConfig.from_values({"model": "coarse", "optimiser": "greedy", "greedy.keep": 3, "samples": 8,
                                        "iterations": 2})
    assert config.optimiser_config == GreedyConfig(keep=3)
    planner = MPCPlanner(scene, config, task=task, predictor=Predictor(scene))
    assert isinstance(planner.optimiser, Greedy)
    assert planner.plan(x0).result.iterations == 2
    with pytest.raises(ConfigError, match=r"^greedy.keep: must be >= 1, got 0"):
        PlannerConfig.from_values({"optimiser": "greedy", "greedy.keep": 0})
    with pytest.raises(ValueError, match="'greedy': must be a new identifier"):
        register_optimiser("greedy", Greedy)
    with pytest.raises(TypeError, match="not a SamplingOptimiser with a Config"):
        register_optimiser("plain", object)


def test_mppi_ua_needs_a_variance_penalises_it_and_switches_it_off_after_its_plans(side_problem):
    """paper 004 Algorithm 1 with eq. 11 as the registered optimiser ``mppi_ua``: the same unsure-left model keeps
    the slider right of y = 0.02 while the term is on (its weight is the optimiser's, the task's ``variance``
    weight is not used); after ``uncertainty_plans`` plans the term is off and the plan goes for the goal; a model
    without a variance is refused, naming the optimiser."""
    scene, task, x0 = side_problem
    L = scene.layout
    assert OPTIMISERS["mppi_ua"].cls is optimisers.UncertaintyAverseMPPI
    assert {"mppi_ua.uncertainty_weight", "mppi_ua.uncertainty_plans", "mppi_ua.decay"} <= set(
        PlannerConfig.settings())
    quiet_task = task.with_weights(task.weights.with_overrides({"variance": 0.0}))

    def var(states):
        return np.where(L.object_poses(states)[..., 0, 1] > 0.02, 1.0, 0.0)

    sampling = SamplingConfig(samples=16, iterations=5, exploration_variance=1e-3, seed=1)
    config = optimisers.UncertaintyAverseConfig(temperature=0.5, uncertainty_weight=100.0, uncertainty_plans=1)
    opt = make_optimiser("mppi_ua", SpyPredictor(scene, variance=var), quiet_task, sampling, config, model="coarse")
    first = opt.optimise(x0)
    assert "variance" not in first.terms and first.terms["uncertainty"] == 0.0
    assert np.all(L.object_poses(first.states)[:, 0, 1] <= 0.02)
    second = opt.optimise(x0)  # the term is off now: straight for the goal, through the unsure region
    assert second.terms["uncertainty"] == 0.0 and L.object_poses(second.states)[-1, 0, 1] > 0.03
    opt.reset()  # a new push (MPCPlanner.reset, as set_goal does): the term is on again for its first plans
    third = opt.optimise(x0)
    assert np.all(L.object_poses(third.states)[:, 0, 1] <= 0.02)
    # the default coarse model (auto) of this one-object scene: the quasi-static model, no variance either
    with pytest.raises(ValueError, match="mppi_ua: model 'quasistatic_convex' predicts no variance"):
        make_optimiser("mppi_ua", Predictor(scene), quiet_task, sampling, config, model="coarse").optimise(x0)
    with pytest.raises(ConfigError, match="uncertainty_plans"):
        optimisers.UncertaintyAverseConfig(uncertainty_plans=-1)


@pytest.mark.parametrize("name", ["stochastic", "mppi", "mppi_ua"])
def test_a_sample_with_a_nan_cost_is_never_the_plan(side_problem, name):
    """A model's non-finite prediction for some samples (here a NaN variance right of y = 0.01) gives them a NaN
    cost: they get no weight and are never the best (argmin returns a NaN's index, and no cost compares below it)."""
    scene, task, x0 = side_problem
    task = task.with_weights(task.weights.with_overrides({"variance": 1.0}))  # stochastic/mppi: off by default
    L = scene.layout

    def var(states):
        return np.where(L.object_poses(states)[..., 0, 1] > 0.01, np.nan, 0.0)

    sampling = SamplingConfig(samples=16, iterations=4, exploration_variance=1e-3, seed=1)
    opt = make_optimiser(name, SpyPredictor(scene, variance=var), task, sampling, model="coarse")
    r = opt.optimise(x0)
    assert np.isfinite(r.cost) and all(np.isfinite(r.costs)), r.costs
    assert np.all(L.object_poses(r.states)[:, 0, 1] <= 0.01)
