"""Parareal: exactness, converged prefix, convergence on the paper's cases, projection, batching."""
import numpy as np
import pytest

from parapush_ros.core.models.analytical import AnalyticalCoarseModel
from parapush_ros.core.models.base import PredictionAbandoned, rollout
from parapush_ros.core.models.fine import FineModel
from parapush_ros.core.models.parareal import Parareal
from parapush_ros.core.scene.projection import max_penetration
from parapush_ros.core.scene.spec import load_scene

FIG5_U = np.array([[0.025, 0.0]] * 4)  # paper 000 Fig. 5: 4 x 25 mm/s for 1 s


@pytest.fixture(scope="module")
def models():
    out = {}
    for name in ("box_slider", "cylinder_slider"):
        scene = load_scene(name)
        fine = FineModel(scene, threads=2)
        out[name] = (scene, Parareal(scene, AnalyticalCoarseModel(scene), fine), fine)
    yield out
    for _, _, f in out.values():
        f.close()


def start(scene, offset):
    x0 = scene.initial_state()
    x0[1] = offset
    return x0


@pytest.mark.parametrize("name", ["box_slider", "cylinder_slider"])
def test_exact_prefix_and_exact_at_K_equals_N(models, name):
    scene, pr, fine = models[name]
    x0 = start(scene, 0.02)
    ref = rollout(fine, x0, FIG5_U, 1.0)
    for k in range(0, 5):
        r = pr.solve(x0, FIG5_U, 1.0, max_iterations=k)
        for n in range(k + 1):
            assert np.array_equal(r.states[n], ref[n]), (k, n)
        assert r.exact_slices[0] == k
    assert r.iterations == 4 and len(r.position_change) == 4


def test_with_a_tolerance_the_exact_prefix_counts_only_exact_states(models):
    """A tolerance lets a sweep skip ahead over slices that changed less than it: their states are within the
    tolerance, not exact, so ``exact_slices`` (where the variance starts, what the tests read) must not count them.
    (Before: 4 slices claimed exact after 3 iterations, slice 3 off by 0.2 mm.)"""
    scene, pr, fine = models["cylinder_slider"]
    rng = np.random.default_rng(0)
    x0 = start(scene, rng.uniform(-0.04, 0.04))
    U = rng.uniform(-0.01, 0.04, (6, 2))
    U[:, 0] += 0.01
    ref = rollout(fine, x0, U, 1.0)
    for k in range(1, 4):
        r = pr.solve(x0, U, 1.0, max_iterations=k, tolerance=5e-4)
        e = int(r.exact_slices[0])
        assert e <= r.iterations, (k, e)
        assert np.array_equal(r.states[:e + 1], ref[:e + 1]), (k, e)


@pytest.mark.parametrize("name, offset", [("cylinder_slider", 0.0), ("cylinder_slider", 0.03),
                                          ("box_slider", 0.0), ("box_slider", 0.05)])
def test_fig5_cases_converge(models, name, offset):
    scene, pr, fine = models[name]
    x0 = start(scene, offset)
    ref = rollout(fine, x0, FIG5_U, 1.0)
    r = pr.solve(x0, FIG5_U, 1.0, max_iterations=2, keep_history=True)

    def rms(states):
        return np.sqrt(np.mean(np.sum((states[:, 2:4] - ref[:, 2:4]) ** 2, -1)))
    coarse_err, k2_err = rms(r.history[0]), rms(r.history[2])
    assert k2_err < 0.25 * coarse_err + 1e-4, (coarse_err, k2_err)
    assert k2_err < 3e-3


def test_tolerance_stops_early_and_reports_changes(models):
    scene, pr, _fine = models["cylinder_slider"]
    x0 = start(scene, 0.02)
    r = pr.solve(x0, FIG5_U, 1.0, max_iterations=4, tolerance=0.05)  # 5 cm: everything counts as converged
    assert r.iterations == 1 and bool(r.converged[0]) and r.fine_slices == 4
    r = pr.solve(x0, FIG5_U, 1.0, max_iterations=4, tolerance=0.0)
    assert r.fine_slices == 4 + 3 + 2 + 1  # converged-prefix rule: only unconverged slices recomputed
    assert all(c >= 0 for c in r.position_change) and r.position_change[-1] < r.position_change[0]


def sideways_starts(scene, rng, M, half_width):
    """M copies of the scene's start with the pusher moved sideways by up to ``half_width`` (m)."""
    x0 = np.repeat(scene.initial_state()[None], M, 0)
    x0[:, 1] = rng.uniform(-half_width, half_width, M)
    return x0


def test_projection_never_leaves_penetration_and_never_touches_exact_slices(models):
    scene, pr, fine = models["box_slider"]
    rng = np.random.default_rng(7)
    M = 12
    x0 = sideways_starts(scene, rng, M, 0.077)
    ang = rng.choice(np.radians([0.0, 15.0, -15.0]), M)
    U = 0.025 * np.stack([np.cos(ang), np.sin(ang)], -1)[:, None, :].repeat(4, 1)
    r = pr.solve(x0, U, 1.5, max_iterations=2, keep_history=True)
    ref = rollout(fine, x0, U, 1.5)
    for k, X in enumerate(r.history[1:], start=1):
        assert max_penetration(scene, X[:, k + 1:]).max() <= 1e-3 + 1e-9  # corrected states: projected
        assert np.array_equal(X[:, :k + 1], ref[:, :k + 1])  # exact slices: untouched


def test_batch_equals_single_solves(models):
    scene, pr, _fine = models["cylinder_slider"]
    rng = np.random.default_rng(11)
    M = 5
    x0 = sideways_starts(scene, rng, M, 0.05)
    U = rng.uniform(-0.01, 0.04, (M, 4, 2))
    batch = pr.solve(x0, U, 1.0, max_iterations=2)
    for m in range(M):
        single = pr.solve(x0[m], U[m], 1.0, max_iterations=2)
        assert np.array_equal(batch.states[m], single.states)


@pytest.mark.parametrize("name", ["box_slider", "cylinder_slider"])
def test_pipelined_schedule_equals_batched_bitwise(models, name):
    """No barrier between sweeps, same arithmetic: every iterate equals the batched schedule's, at every K."""
    scene, pr, _fine = models[name]
    rng = np.random.default_rng(5)
    x0 = start(scene, 0.03)
    U = np.vstack([FIG5_U, rng.uniform(-0.01, 0.04, (2, 2))])  # N = 6: iterations overlap on 2 threads
    for k in range(0, 7):
        a = pr.solve(x0, U, 1.0, max_iterations=k, keep_history=True)
        b = pr.solve(x0, U, 1.0, max_iterations=k, keep_history=True, schedule="pipelined")
        assert len(b.history) == k + 1 and all(np.array_equal(h, g) for h, g in zip(a.history, b.history)), k
        assert np.array_equal(a.states, b.states)
        assert (b.iterations, b.fine_slices, b.coarse_slices) == (a.iterations, a.fine_slices, a.coarse_slices)
        assert b.position_change == a.position_change and b.yaw_change == a.yaw_change
        assert b.exact_slices[0] == k and bool(b.converged[0]) == (k == 6)


def test_a_stop_abandons_between_pieces_of_fine_work_and_changes_nothing_else(models):
    """An anytime caller's ``stop`` (issue 29: the fast planner's deadline): the fine sweep goes in pieces of as
    many slices as the fine model has threads, asked between them once some work is done and again before the
    correction; never asked to stop, the result is the one-call sweep's, bitwise."""
    scene, pr, fine = models["cylinder_slider"]
    rng = np.random.default_rng(3)
    x0 = sideways_starts(scene, rng, 3, 0.04)
    U = rng.uniform(-0.01, 0.04, (3, 4, 2))
    for k in (1, 2):
        a = pr.solve(x0, U, 0.5, max_iterations=k)
        b = pr.solve(x0, U, 0.5, max_iterations=k, stop=lambda: False)
        assert np.array_equal(a.states, b.states) and (a.fine_slices, a.iterations) == (b.fine_slices, b.iterations)
    with pytest.raises(PredictionAbandoned) as now:
        pr.solve(x0, U, 0.5, max_iterations=1, stop=lambda: True)
    assert now.value.slices == fine.threads == 2  # the first piece is always done: the work has a measured cost
    asked = []

    def after_the_sweep():  # true once every piece of the first sweep (3 x 4 slices in pieces of 2) has run
        asked.append(1)
        return len(asked) > 5

    with pytest.raises(PredictionAbandoned) as late:
        pr.solve(x0, U, 0.5, max_iterations=1, stop=after_the_sweep)
    assert late.value.slices == 12 and len(asked) == 6  # asked before pieces 2-6 and before the correction
    with pytest.raises(ValueError, match="stop needs schedule 'batched'"):
        pr.solve(x0[0], U[0], 0.5, max_iterations=1, schedule="pipelined", stop=lambda: False)


def test_a_coarse_chain_rolled_out_by_the_caller_is_iteration_0_and_one_of_another_model_is_refused(models):
    """The fast planner screens every candidate on the coarse model, then re-scores the best few with Parareal-K:
    their screened chain is Parareal's iteration 0 (one coarse sweep less, same result); a chain of another model
    (here the quasi-static model at another sub-step) would silently change the result, so it is refused."""
    from parapush_ros.core.models.quasistatic_coarse import QuasiStaticConvexCoarseModel

    scene, _, fine = models["cylinder_slider"]
    coarse = QuasiStaticConvexCoarseModel(scene, max_substep=0.025)
    pr = Parareal(scene, coarse, fine)
    rng = np.random.default_rng(8)
    x0 = sideways_starts(scene, rng, 5, 0.04)
    U = rng.uniform(-0.01, 0.04, (5, 4, 2))
    screened = rollout(coarse, x0, U, 0.5)  # all five, as the screen does; Parareal re-scores two of them
    pick = [3, 1]
    for k in (0, 1, 2):
        a = pr.solve(x0[pick], U[pick], 0.5, max_iterations=k)
        b = pr.solve(x0[pick], U[pick], 0.5, max_iterations=k, coarse_chain=screened[pick])
        assert np.array_equal(a.states, b.states), k
        assert b.fine_slices == a.fine_slices and b.coarse_slices == a.coarse_slices - 2 * 3
    other = rollout(QuasiStaticConvexCoarseModel(scene), x0, U, 0.5)  # the model's own 5 ms sub-step
    with pytest.raises(ValueError, match="not the 'quasistatic_convex' coarse model's chain"):
        pr.solve(x0, U, 0.5, max_iterations=1, coarse_chain=other)
    with pytest.raises(ValueError, match="does not start at x0"):
        pr.solve(x0[::-1], U, 0.5, max_iterations=1, coarse_chain=screened)
    with pytest.raises(ValueError, match="coarse_chain must be"):
        pr.solve(x0, U, 0.5, max_iterations=1, coarse_chain=screened[:, :3])


def test_bad_arguments_are_named(models):
    scene, pr, _ = models["cylinder_slider"]
    x0 = scene.initial_state()
    with pytest.raises(ValueError, match="max_iterations"):
        pr.solve(x0, FIG5_U, 1.0, max_iterations=5)
    with pytest.raises(ValueError, match="at least one control"):
        pr.solve(x0, np.zeros((0, 2)), 1.0, max_iterations=0)
    with pytest.raises(ValueError, match="projection_tolerance"):
        Parareal(scene, pr.coarse, pr.fine, projection_tolerance=1e-4)
    with pytest.raises(ValueError, match="schedule must be 'batched' or 'pipelined', got 'eager'"):
        pr.solve(x0, FIG5_U, 1.0, max_iterations=1, schedule="eager")
    with pytest.raises(ValueError, match="'pipelined' solves one trajectory"):
        pr.solve(x0[None], FIG5_U[None], 1.0, max_iterations=1, schedule="pipelined")
    with pytest.raises(ValueError, match="tolerance must be 0"):
        pr.solve(x0, FIG5_U, 1.0, max_iterations=1, tolerance=1e-3, schedule="pipelined")
    with pytest.raises(ValueError, match="max_iterations"):
        pr.solve(x0, FIG5_U, 1.0, max_iterations=5, schedule="pipelined")
