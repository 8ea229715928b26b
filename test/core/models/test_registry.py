"""The model registry and model specs: one list of models, specs parsed once, a new model usable everywhere by
registering it (shown with a throw-away constant-velocity model, real MuJoCo underneath Parareal)."""
import numpy as np
import pytest

from parapush_ros.core.models import registry
from parapush_ros.core.models.base import Propagator, UncertainPropagator, rollout
from parapush_ros.core.models.registry import (COARSE, FINE, MODELS, ModelSpec, Predictor, model_description,
                                               names, parameter_descriptions, register_model)
from parapush_ros.core.scene.spec import load_scene


class ConstantVelocity:
    """Every object keeps its velocity, the pusher moves at u: the simplest coarse model there is."""

    name = "constant_velocity"

    def __init__(self, scene, damping: float = 1.0):
        self.layout = scene.layout
        self.damping = damping

    def propagate(self, x, u, dt):
        x = np.array(x, dtype=float)
        L = self.layout
        L.pusher_pos(x)[...] += u * dt
        L.pusher_vel(x)[...] = u
        L.object_poses(x)[...] += L.object_vels(x) * dt * self.damping
        return x


class Unsure(ConstantVelocity):
    name = "unsure"

    def propagate_with_variance(self, x, u, dt):
        return self.propagate(x, u, dt), np.full(np.shape(x), 1e-6)


@pytest.fixture
def extra_models():
    """Register the test models for one test only."""
    register_model("constant_velocity", f"{__name__}:ConstantVelocity", COARSE, "test: constant velocity",
                   {"damping": registry.ModelOption(1.0, "test: velocity factor")})
    register_model("unsure", f"{__name__}:Unsure", COARSE, "test: with a variance")
    yield
    for name in ("constant_velocity", "unsure"):
        MODELS.pop(name)


def test_specs_parse_once_into_objects_and_name_what_is_wrong():
    assert ModelSpec.parse("parareal2", coarse="learned") == ModelSpec("parareal", 2, "learned")
    assert ModelSpec.parse(" Fine ") == ModelSpec("fine")
    assert ModelSpec.parse("coarse", coarse="learned").coarse == "learned"
    assert ModelSpec.parse("learned", coarse="analytical").coarse is None  # not used by this kind
    spec = ModelSpec.parse("parareal")
    assert ModelSpec.parse(spec) == spec and spec.name == "parareal" and str(ModelSpec("parareal", 3)) == "parareal3"
    assert ModelSpec("analytical").message_name == "coarse" and ModelSpec("parareal", 1).message_name == "parareal"
    for bad, words in (("oracle", "unknown model 'oracle'"), ("fine2", "unknown model 'fine2'"),
                       ("parareal-1", "unknown model")):
        with pytest.raises(ValueError, match=words):
            ModelSpec.parse(bad)
    with pytest.raises(ValueError, match="coarse_model: 'fine' is not one of"):
        ModelSpec.parse("parareal", coarse="fine")
    with pytest.raises(ValueError, match="fine_model: 'analytical' is not one of"):
        ModelSpec.parse("parareal", fine="analytical")


def test_the_registry_is_the_one_list_of_models():
    """The shipped models and their parameters, in the registry's order; a model a user registers (one file and
    one line, docs/extending.md) comes after them, its options as ``<model>_<option>``, with no edit here."""
    shipped = ("analytical", "learned", "learned_ensemble", "quasistatic", "quasistatic_convex")
    assert names(COARSE)[:len(shipped)] == shipped
    assert names(FINE)[:1] == ("fine",)
    params = parameter_descriptions()
    shipped_params = {"coarse_model", "fine_model", "learned_weights", "learned_ensemble_weights", "threads",
                      "parareal_variance_threshold", "quasistatic_convex_limit_surface",
                      "quasistatic_convex_support_points", "quasistatic_convex_contact_height",
                      "quasistatic_convex_close_gap"}
    added = {e.parameter(o) for e in MODELS.values() if e.name not in (*shipped, "fine") for o in e.options}
    assert set(params) == shipped_params | added
    assert "analytical | learned | learned_ensemble" in params["coarse_model"][1]
    assert "parareal<K>" in model_description()
    with pytest.raises(ValueError, match="not a free model name"):
        register_model("fine", ".fine:FineModel", FINE, "again")


def test_a_registered_model_is_usable_everywhere_by_name(extra_models):
    from parapush_ros.ros.params import _model_params
    scene = load_scene("cylinder_slider")
    x0 = scene.initial_state()
    u = np.array([[0.05, 0.0]] * 3)
    pred = Predictor(scene, coarse="constant_velocity", options={"constant_velocity": {"damping": 0.5}}, threads=1)
    try:
        assert isinstance(pred.coarse_model(), Propagator) and pred.coarse_model().damping == 0.5
        p = pred.predict(x0, u, 1.0, model="constant_velocity")
        assert p.model == "constant_velocity" and p.variance is None and p.spec == ModelSpec("constant_velocity")
        np.testing.assert_allclose(p.states[-1, 0], x0[0] + 0.15)
        # as Parareal's coarse propagator, K = N: the serial fine rollout, bitwise
        par = pred.predict(x0, u, 1.0, model="parareal3")
        assert par.spec == ModelSpec("parareal", 3, "constant_velocity", "fine")
        np.testing.assert_array_equal(par.states, rollout(pred.fine, x0, u, 1.0))
        # a model with a variance: the prediction carries it
        var = pred.predict(x0, u, 1.0, model="unsure").variance
        assert var.shape == (4, scene.layout.dim) and var[0].max() == 0.0 and var[1:].min() == 1e-6
    finally:
        pred.close()
    # its option is a node parameter, its name a choice of the coarse_model parameter
    params = _model_params()
    assert params["constant_velocity_damping"].default == 1.0
    assert "constant_velocity" in params["coarse_model"].description
    assert isinstance(MODELS["unsure"].build(scene), UncertainPropagator)


def test_predictor_from_node_parameters_builds_the_named_models():
    scene = load_scene("cylinder_slider")
    p = {"coarse_model": "analytical", "fine_model": "fine", "learned_weights": "", "threads": 1}
    pred = Predictor.from_parameters(scene, p, iterations=2)
    try:
        assert pred.fine.threads == 1 and pred.coarse_model().name == "analytical"
        assert pred.resolve("parareal") == ModelSpec("parareal", 2, "analytical", "fine")
        assert pred.resolve("coarse") == ModelSpec("analytical")
    finally:
        pred.close()
    with pytest.raises(ValueError, match="coarse_model: 'teapot'"):
        Predictor.from_parameters(scene, {**p, "coarse_model": "teapot"})


def test_a_coarse_chain_is_taken_only_by_parareal_over_a_coarse_model_of_its_kind():
    """``coarse_chain`` replaces Parareal's coarse model: one of another kind, or given to a model that is not
    Parareal, would be ignored or wrong, so it is refused naming both."""
    from parapush_ros.core.models.parareal import CoarseChain
    scene = load_scene("cylinder_slider")
    pred = Predictor(scene, coarse="analytical", threads=1)
    try:
        x0, u = scene.initial_state()[None], np.full((1, 2, 2), 0.02)
        chain = CoarseChain(pred.coarse_model(), rollout(pred.coarse_model(), x0, u, 0.5))
        direct = pred.predict(x0, u, 0.5, model="parareal1")
        assert np.array_equal(pred.predict(x0, u, 0.5, model="parareal1", coarse_chain=chain).states, direct.states)
        with pytest.raises(ValueError, match="coarse_chain of the 'analytical' model given for fine"):
            pred.predict(x0, u, 0.5, model="fine", coarse_chain=chain)
        with pytest.raises(ValueError, match="coarse_chain of the 'analytical' model given for parareal1"):
            pred.predict(x0, u, 0.5, model="parareal1", coarse="quasistatic_convex", coarse_chain=chain)
    finally:
        pred.close()


def test_a_variance_threshold_is_refused_without_a_coarse_variance_or_when_not_finite():
    """parareal_variance_threshold > 0 with a coarse model that predicts no variance would fail every Parareal
    prediction (every plan of the planner node); it is refused when the predictor is made, as an infinite one is
    (it would silently turn Parareal-K into the coarse model)."""
    scene = load_scene("four_cylinders")
    with pytest.raises(ValueError, match=r"parareal_variance_threshold: .* coarse_model 'analytical' does not"):
        Predictor(scene, coarse="analytical", variance_threshold=1e-3)
    for bad in (float("inf"), float("nan"), -1e-3):
        with pytest.raises(ValueError, match="parareal_variance_threshold: must be >= 0 m"):
            Predictor(scene, coarse="learned_ensemble", variance_threshold=bad)
    pred = Predictor(scene, coarse="learned_ensemble", variance_threshold=1e-3)
    assert pred.variance_threshold == 1e-3
    pred.close()
    Predictor(scene, coarse="analytical", variance_threshold=0.0).close()  # off: any coarse model
