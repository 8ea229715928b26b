"""Batched DDP and the DG-OC costs: derivatives against finite differences, the LQ optimum, convergence on the
quasi-static pusher-slider."""
import numpy as np
import pytest

from parapush_ros.core.models.quasistatic import QuasiStaticPusherSlider
from parapush_ros.core.planning.ddp.costs import DGOCCost, DGOCWeights
from parapush_ros.core.planning.ddp.solver import BatchedDDP, DDPSettings, SolveStopped

MODEL = QuasiStaticPusherSlider(size=(0.12, 0.12), mass=0.11, mu_g=0.35, mu_p=0.3, pusher_radius=0.005, dt=0.02)


def _random_trajectories(rng, b, t):
    X = np.zeros((b, t + 1, 7))
    X[..., :2] = rng.uniform(-0.1, 0.1, (b, t + 1, 2))
    X[..., 2] = rng.uniform(-2, 2, (b, t + 1))
    X[..., 3:5] = X[..., :2] + rng.uniform(-0.08, 0.08, (b, t + 1, 2))  # some inside the box: penetration on
    X[..., 5:7] = rng.normal(0, 0.15, (b, t + 1, 2))  # some beyond the velocity box
    U = rng.normal(0, 1.0, (b, t, 2))  # some beyond the control box
    return X, U


def test_cost_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    b, t = 3, 6
    X, U = _random_trajectories(rng, b, t)
    demo_X, demo_U = _random_trajectories(rng, b, t)
    mask = (rng.uniform(size=(b, t + 1)) < 0.5).astype(float)
    target = rng.uniform(-0.2, 0.2, (b, 3))
    for cost in (DGOCCost(MODEL, target, DGOCWeights(goal_running=0.3)),
                 DGOCCost(MODEL, target, DGOCWeights(), demo_X, demo_U, mask)):
        lx, lu, lxx, luu, lux = cost.derivatives(X, U)
        eps = 1e-7
        for i in range(b):
            for tt in (0, 3, t):
                for j in range(7):
                    Xp, Xm = X.copy(), X.copy()
                    Xp[i, tt, j] += eps
                    Xm[i, tt, j] -= eps
                    fd = (cost.value(Xp, U)[i] - cost.value(Xm, U)[i]) / (2 * eps)
                    assert lx[i, tt, j] == pytest.approx(fd, rel=1e-5, abs=1e-4)
            for tt in (0, t - 1):
                for j in range(2):
                    Up, Um = U.copy(), U.copy()
                    Up[i, tt, j] += eps
                    Um[i, tt, j] -= eps
                    fd = (cost.value(X, Up)[i] - cost.value(X, Um)[i]) / (2 * eps)
                    assert lu[i, tt, j] == pytest.approx(fd, rel=1e-5, abs=1e-4)
        # Gauss-Newton Hessians are symmetric positive semi-definite
        assert np.all(np.linalg.eigvalsh(lxx) > -1e-9) and np.all(np.linalg.eigvalsh(luu) > -1e-9)
        assert np.abs(lux).max() == 0.0


class _DoubleIntegrator:
    """x = [p, v] in 1-D, u = acceleration: linear, so DDP must reach the LQ optimum in one step."""

    dt = 0.1

    def step(self, x, u):
        return np.stack([x[..., 0] + self.dt * x[..., 1] + self.dt ** 2 * u[..., 0], x[..., 1] + self.dt * u[..., 0]],
                        -1)

    def step_jacobians(self, x, u):
        A = np.broadcast_to(np.array([[1.0, self.dt], [0.0, 1.0]]), x.shape[:-1] + (2, 2))
        B = np.broadcast_to(np.array([[self.dt ** 2, 0.0], [self.dt, 0.0]]), x.shape[:-1] + (2, 2))
        return self.step(x, u), A, B


class _QuadCost:
    """Terminal (p - goal)^2 * 100 + v^2 * 100, controls 0.01 |u|^2 (the second control is a dummy)."""

    def __init__(self, goal):
        self.goal = goal

    def value(self, X, U, idx=None):
        g = self.goal if idx is None else self.goal[idx]
        return 100 * (X[:, -1, 0] - g) ** 2 + 100 * X[:, -1, 1] ** 2 + 0.01 * (U ** 2).sum((1, 2))

    def derivatives(self, X, U, idx=None):
        g = self.goal if idx is None else self.goal[idx]
        b, t1 = X.shape[:2]
        lx, lxx = np.zeros((b, t1, 2)), np.zeros((b, t1, 2, 2))
        lx[:, -1, 0], lx[:, -1, 1] = 200 * (X[:, -1, 0] - g), 200 * X[:, -1, 1]
        lxx[:, -1] = np.diag([200.0, 200.0])
        return lx, 0.02 * U, lxx, np.broadcast_to(0.02 * np.eye(2), U.shape + (2,)).copy(), np.zeros(U.shape + (2,))


def test_ddp_reaches_the_linear_quadratic_optimum():
    goal = np.array([1.0, -0.5, 0.2])
    T = 20
    dyn = _DoubleIntegrator()
    r = BatchedDDP(dyn, _QuadCost(goal), DDPSettings(max_iterations=5)).solve(np.zeros((3, 2)), np.zeros((3, T, 2)))
    # the optimum by least squares: final state is linear in the controls
    G = np.zeros((2, T))
    for t in range(T):
        G[:, t] = np.linalg.matrix_power(np.array([[1.0, dyn.dt], [0.0, 1.0]]), T - 1 - t) @ [dyn.dt ** 2, dyn.dt]
    for i, g in enumerate(goal):
        A = np.vstack([10 * G, 0.1 * np.eye(T)])
        y = np.concatenate([[10 * g, 0.0], np.zeros(T)])
        u_opt = np.linalg.lstsq(A, y, rcond=None)[0]
        np.testing.assert_allclose(r.U[i, :, 0], u_opt, atol=1e-6)
        np.testing.assert_allclose(r.U[i, :, 1], 0.0, atol=1e-9)
    assert np.all(r.converged) and np.all(r.iterations <= 3)


def test_ddp_pushes_the_block_to_a_pose_and_its_gains_stabilise_the_plan():
    """A one-face push from rest at the -x face: every problem of the batch reaches its target; the feedback gains
    bring a perturbed start back better than the feed-forward controls alone."""
    targets = np.array([[0.12, 0.0, 0.0], [0.12, 0.03, 0.3], [0.1, -0.03, -0.4]])
    x0 = np.tile([0, 0, 0, -0.066, 0, 0, 0.0], (3, 1))
    cost = DGOCCost(MODEL, targets, DGOCWeights())
    r = BatchedDDP(MODEL, cost, DDPSettings(max_iterations=60)).solve(x0, np.zeros((3, 150, 2)))
    err = np.abs(r.X[:, -1, :3] - targets)
    assert np.all(err[:, :2] < 0.005) and np.all(err[:, 2] < 0.05), err
    assert MODEL.penetration(r.X).max() < 1.5e-3
    # closed loop from a start 5 mm off: x_{t+1} = f(x_t, u*_t + K_t (x_t - x*_t))
    xp = x0 + [0, 0, 0, 0, 0.005, 0, 0]
    xf = xp.copy()
    for t in range(r.U.shape[1]):
        xp = MODEL.step(xp, r.U[:, t] + np.einsum("bij,bj->bi", r.K[:, t], xp - r.X[:, t]))
        xf = MODEL.step(xf, r.U[:, t])
    assert np.linalg.norm(xp[:, :2] - targets[:, :2], axis=1).mean() < np.linalg.norm(
        xf[:, :2] - targets[:, :2], axis=1).mean()


def test_the_corner_keep_out_holds_the_pusher_off_the_corners():
    """A pusher touching the box within ``corner_margin`` of a corner costs (MuJoCo's round pusher slips off a
    corner there); one at the middle of a face or clear of the corner does not."""
    w = DGOCWeights()
    cost = DGOCCost(MODEL, np.zeros((1, 3)), w)
    r = MODEL.pusher_radius
    along = np.array([0.0, 0.035, 0.05, 0.059])  # pusher centre along the -x face (half width 0.06)
    X = np.zeros((1, len(along), 7))
    X[0, :, 3], X[0, :, 4] = -0.06 - r, along
    res, _J = cost._corners(X)
    d = np.hypot(r, 0.06 - along)
    np.testing.assert_allclose(res[0].max(-1), np.maximum(r + w.corner_margin - d, 0.0), atol=1e-12)
    assert res[0, 0].max() == 0.0 and res[0, 1].max() == 0.0 and res[0, 3].max() > res[0, 2].max() > 0.0
    # its gradient moves the pusher back towards the middle of the face
    lx = cost.derivatives(X, np.zeros((1, len(along) - 1, 2)))[0]
    assert lx[0, 3, 4] > 0.0 and lx[0, 0, 4] == 0.0


def test_a_solve_asked_to_stop_ends_within_one_iteration():
    """``should_stop`` is asked before every iteration: a stop requested after the 3rd ends the solve with
    ``SolveStopped`` before a 4th (a cancel or shutdown does not wait for the whole solve); never asked to, the same
    problem runs on (it needs more than 3 iterations)."""
    targets = np.array([[0.12, 0.03, 0.3], [0.1, -0.03, -0.4]])
    x0 = np.tile([0, 0, 0, -0.066, 0, 0, 0.0], (2, 1))
    ddp = BatchedDDP(MODEL, DGOCCost(MODEL, targets, DGOCWeights()), DDPSettings(max_iterations=8))
    asked = []

    def should_stop():
        asked.append(len(asked))
        return len(asked) > 3

    with pytest.raises(SolveStopped, match="after 3 iteration") as stopped:
        ddp.solve(x0, np.zeros((2, 40, 2)), should_stop=should_stop)
    assert stopped.value.iterations == 3 and len(asked) == 4
    r = ddp.solve(x0, np.zeros((2, 40, 2)), should_stop=lambda: False)
    assert r.iterations.max() > 3
