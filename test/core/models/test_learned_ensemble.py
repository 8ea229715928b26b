"""The learned coarse model as an E-MDN ensemble (paper 004 on paper 001's model): registered, same prediction
machinery as the single network, a variance that is zero where nothing can move, grows along a rollout and is
larger off the training data; small shipped weights; training from a ``parapush datagen`` set."""
from argparse import Namespace

import numpy as np
import pytest
import torch  # noqa: F401  (a hard requirement of the learned model)

from parapush_ros.core.models import learned as LM
from parapush_ros.core.models.base import UncertainPropagator, rollout
from parapush_ros.core.models.learned.ensemble import LearnedEnsembleModel, default_weights_path
from parapush_ros.core.models.registry import MODELS, Predictor
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.tools.learning import datagen
from parapush_ros.tools.learning.train_ensemble import train_ensemble

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def model():
    return MODELS["learned_ensemble"].build(load_scene("four_cylinders"))


def test_registered_small_and_an_uncertain_propagator(model):
    assert isinstance(model, UncertainPropagator) and model.name == "learned_ensemble"
    assert default_weights_path().stat().st_size < 2_000_000  # shipped weights stay small
    assert MODELS["learned_ensemble"].role == "coarse"
    with pytest.raises(LM.LearnedModelError, match="does not fit scene 'box_slider'"):
        MODELS["learned_ensemble"].build(load_scene("box_slider"))


def test_variance_is_zero_where_nothing_moves_and_grows_along_a_push(model):
    scene = model.scene
    L = scene.layout
    x0 = scene.initial_state()  # pusher behind the target at (-0.2, 0), the others far from its path
    u = np.tile([[0.05, 0.0]], (4, 1))
    p = Predictor(scene).predict(x0, u, 1.0, model="learned_ensemble")
    assert p.variance.shape == p.states.shape and np.all(p.variance >= 0.0) and np.all(p.variance[0] == 0.0)
    sigma = L.object_position_sigma(p.variance)  # (5, 4)
    assert np.all(sigma[1:, 0] > 1e-5)  # the pushed target: unsure
    assert np.all(np.diff(sigma[:, 0]) > 0.0)  # slices' variances add up along the rollout
    assert np.all(sigma[:, 3] == 0.0)  # cylinder_3 is out of reach: kept exactly, no variance
    assert np.all(p.variance[:, :2] == 0.0)  # the pusher follows its servo exactly
    # the mean is what propagate returns, and the mirror image of the push gives the mirrored variance
    np.testing.assert_array_equal(p.states[1], model.propagate(x0, u[:1], 1.0)[0])
    one = LM.family_scene(1)
    m1 = LearnedEnsembleModel(one, model.emdn, model.meta)
    x = one.initial_state()
    _xs, vs = m1.propagate_with_variance(np.stack([x, x]), np.array([[0.05, 0.01], [0.05, -0.01]]), 1.0)
    vx, vy = one.layout.object_poses(vs)[:, 0, 0], one.layout.object_poses(vs)[:, 0, 1]
    np.testing.assert_allclose([vx[0], vy[0]], [vx[1], vy[1]], rtol=1e-5)
    # far from the training data (a push 3x faster than any in it, <= 5 cm/s) the ensemble is less sure
    _, v_fast = m1.propagate_with_variance(x, np.array([0.15, 0.0]), 1.0)
    _, v_slow = m1.propagate_with_variance(x, np.array([0.05, 0.0]), 1.0)
    assert one.layout.object_position_sigma(v_fast)[0, 0] > 1.4 * one.layout.object_position_sigma(v_slow)[0, 0]


def test_a_plain_prediction_beside_a_variance_prediction_on_another_thread(model):
    """The variance being collected is per thread: a planner thread's ``propagate`` beside another thread's
    ``propagate_with_variance`` on the same model gets the same states as alone, and neither sees the other's."""
    import threading
    scene = model.scene
    x0 = np.stack([scene.initial_state()] * 8)
    u = np.tile([0.05, 0.0], (8, 1)) + np.linspace(-0.01, 0.01, 8)[:, None] * [0.0, 1.0]
    plain_alone = model.propagate(x0, u, 1.0)
    mean_alone, var_alone = model.propagate_with_variance(x0, u, 1.0)
    results, errors = {"plain": [], "variance": []}, []
    start = threading.Barrier(2)

    def run(kind):
        try:
            start.wait()
            for _ in range(15):
                results[kind].append(model.propagate(x0, u, 1.0) if kind == "plain"
                                     else model.propagate_with_variance(x0, u, 1.0))
        except Exception as e:  # noqa: BLE001 (reported by the assertion below)
            errors.append(e)
    threads = [threading.Thread(target=run, args=(k,)) for k in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(isinstance(r, np.ndarray) and np.array_equal(r, plain_alone) for r in results["plain"])
    assert all(np.array_equal(m, mean_alone) and np.array_equal(v, var_alone) for m, v in results["variance"])


def test_train_ensemble_from_a_datagen_set(tmp_path):
    data = tmp_path / "data"
    datagen.run(Namespace(objects="2", samples=48, out=str(data), seed=5, workers=1, chunk_size=16,
                          into_cluster=0.5))
    weights = tmp_path / "ens.pt"
    rep = train_ensemble([data], weights, seed=2, epochs=3, hidden=(16, 16), members=3, batch=32, progress=False,
                         command="test")
    assert rep["data"]["samples_used"] == 48 and rep["training"]["epochs"] == 3
    # three chunks: one to train on, one held out to calibrate the variance on, one to report on (a coverage on
    # the rows it was calibrated on is 0.683 whatever the model)
    assert rep["data"]["heldout_is_training"] is False
    assert rep["data"]["train_samples"] == rep["data"]["calibration_samples"] == rep["data"]["val_samples"] == 16
    assert 0.0 <= rep["heldout"]["calibration_1sigma"] <= 1.0 and np.isfinite(rep["heldout"]["nll"])
    assert weights.with_suffix(".json").is_file()
    m = LearnedEnsembleModel.load(load_scene("four_cylinders"), weights)
    assert m.emdn.cfg.members == 3 and m.meta["command"] == "test"
    x = load_scene("four_cylinders").initial_state()
    states, var = m.propagate_with_variance(x, np.array([0.05, 0.0]), 1.0)
    assert np.all(np.isfinite(states)) and np.all(var >= 0.0)
    (tmp_path / "junk.pt").write_bytes(b"not torch")
    with pytest.raises(LM.LearnedModelError, match="not a readable weights file"):
        LearnedEnsembleModel.load(load_scene("four_cylinders"), tmp_path / "junk.pt")
    with pytest.raises(LM.LearnedModelError, match="format is 'parapush-learned-coarse/1'"):
        LearnedEnsembleModel.load(load_scene("four_cylinders"), LM.default_weights_path())


def test_the_planner_keeps_the_variance_of_its_plan_only_when_the_model_has_one():
    from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
    from parapush_ros.core.planning.optimisers import SamplingConfig
    scene = load_scene("four_cylinders")
    sampling = SamplingConfig(samples=4, iterations=1, control_duration=1.0)
    for model, has in (("learned_ensemble", True), ("learned", False)):
        planner = MPCPlanner(scene, PlannerConfig(model=model, sampling=sampling))
        try:
            plan = planner.plan(scene.initial_state())
        finally:
            planner.close()
        assert (plan.variance is not None) == has
        if has:
            assert plan.variance.shape == plan.states.shape and plan.variance[-1].max() > 0.0


def test_uncertainty_aware_parareal_skips_the_fine_model_where_the_coarse_one_is_sure():
    from parapush_ros.core.models.analytical import AnalyticalCoarseModel
    from parapush_ros.core.models.fine import FineModel
    from parapush_ros.core.models.parareal import Parareal
    scene = load_scene("four_cylinders")
    x = scene.initial_state()  # pusher 4 mm behind the target
    x0 = np.stack([x, x])
    U = np.zeros((2, 4, 2))
    U[0] = (-0.03, 0.0)  # away from every object: nothing can move, the coarse model is sure
    U[1] = (0.05, 0.0)  # into the target: unsure
    coarse = MODELS["learned_ensemble"].build(scene)
    fine = FineModel(scene, threads=1)
    try:
        r = Parareal(scene, coarse, fine).solve(x0, U, 1.0, 2, variance_threshold=1e-4)
        fixed = Parareal(scene, coarse, fine).solve(x0, U, 1.0, 2)
        with pytest.raises(ValueError, match="needs a coarse model that predicts its variance; 'analytical'"):
            Parareal(scene, AnalyticalCoarseModel(scene), fine).solve(x0, U, 1.0, 2, variance_threshold=1e-4)
    finally:
        fine.close()
    assert list(r.trajectory_iterations) == [0, 2] and r.fine_slices == 4 + 3 and fixed.fine_slices == 2 * 7
    np.testing.assert_array_equal(r.states[1], fixed.states[1])  # the unsure one iterated as with fixed K
    np.testing.assert_array_equal(r.states[0], rollout(coarse, x, U[0], 1.0))  # the coarse rollout, no fine slice
    assert np.all(r.variance[0] == 0.0)  # nothing left to be unsure of
    sigma = scene.layout.object_position_sigma(r.variance[1])[:, 0]
    assert np.all(sigma[:3] == 0.0) and sigma[3] > 0.0  # the exact prefix (2 slices) has none, the rest some


def test_bench_adaptive_small(tmp_path):
    import json

    from parapush_ros.cli import main
    out = tmp_path / "out"
    assert main(["bench", "adaptive", "--scenes", "1", "--samples", "2", "--starts", "0", "--contact-pushes", "1",
                 "--thresholds", "1", "--slice-thresholds", "1", "--threads", "1", "--out", str(out)]) == 0
    res = json.loads((out / "bench_adaptive.json").read_text())
    for case in ("planner", "contact"):
        r = res[case]
        assert r["fixed_K0"]["fine_slices_per_trajectory"] == 0.0 and r["fixed_K2"]["fine_slices_per_trajectory"] == 7
        assert r["adaptive_1mm"]["fine_slices_per_trajectory"] <= 7 and r["fixed_K2"]["mean_rms_mm"] >= 0.0
        assert set(res[f"{case}_verdict"]["adaptive_1mm"]) == {"cost_vs_fixed_K2", "error_vs_fixed_K2", "wins"}
        for m in ("slice_gate_1mm", "hybrid_slice_gate_1mm", "hybrid_adaptive_1mm"):
            assert r[m]["fine_slices_per_trajectory"] <= 7 and m in res[f"{case}_verdict"]
        c = r["correlation"]  # how well the ensemble's sigma tells the coarse error
        assert c["object_slices"] == r["trajectories"] * 4 * 4 and set(c["ensemble"]) >= {
            "spearman_sigma_vs_error", "auroc_error_gt_1mm", "within_1sigma"}
        assert set(c["trajectory"]) == {f"spearman_sigma_vs_fixed_K{k}_error" for k in range(3)}
    assert res["planner"]["trajectories"] == 2 and (out / "adaptive.png").stat().st_size > 1000


def test_closed_loop_bench_counts_the_fine_slices_uncertainty_aware_parareal_spends(tmp_path):
    """The predictor counts the fine slices and trajectories of its predictions; ``bench mpc`` reports them per
    plan and per trajectory, so fixed K and the variance gate can be compared in closed loop."""
    import json

    from parapush_ros.cli import main
    scene = load_scene("four_cylinders")
    x = scene.initial_state()
    U = np.zeros((2, 4, 2))
    U[0], U[1] = (-0.03, 0.0), (0.05, 0.0)  # away from every object (sure), into the target (unsure)
    counts = {}
    for t in (0.0, 1e-4):
        p = Predictor(scene, coarse="learned_ensemble", threads=1, variance_threshold=t)
        try:
            pred = p.predict(np.stack([x, x]), U, 1.0, model="parareal2")
        finally:
            p.close()
        assert p.fine_slices == pred.fine_slices and p.trajectories == 2
        counts[t] = p.fine_slices
    assert counts == {0.0: 2 * 7, 1e-4: 7}  # fixed K = 2: 4 + 3 per trajectory; the gate skips the sure one
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--task", "multi_object", "--scenes", "1", "--models", "parareal2", "--coarse",
                 "learned_ensemble", "--parareal-variance-threshold", "0.002", "--max-actions", "1", "--samples", "2",
                 "--iterations", "1", "--threads", "1", "--no-timing", "--plan-clock", "cpu", "--out", str(out),
                 "--json", str(out / "mpc.json")]) == 0
    res = json.loads((out / "mpc.json").read_text())
    run, s = res["runs"][0], res["summary"]["nominal/parareal2"]
    assert res["parareal_variance_threshold"] == 0.002 and run["trajectories"] >= 2
    assert 0 <= run["fine_slices"] <= 7 * run["trajectories"]
    assert s["fine_slices_per_plan"] == run["fine_slices"] / len(run["plan_times"])
    assert s["fine_slices_per_trajectory"] == run["fine_slices"] / run["trajectories"] <= 7
