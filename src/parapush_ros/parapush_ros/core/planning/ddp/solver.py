"""A batched DDP (iLQR with Gauss-Newton cost Hessians) in NumPy: B independent problems solved in lock-step.

Why this solver: the DS/DP/WS problems of paper 003 (and many targets in a benchmark) batch naturally, and a
vectorised backward pass over B problems costs little more than one (the reference file measured 11 ms for one and
16.5 ms for eight at T = 300 on 2 cores). Crocoddyl's FDDP, which the paper used, pulls pinocchio/eigenpy/Boost
wheels and gives Python action models none of its threading. Controls are unconstrained; bounds are soft penalties
in the cost (paper 003's soft-thresholding).

Each problem keeps its own Levenberg-Marquardt damping ``mu``, line-search step and convergence flag; all line-search
step sizes are tried in one batched rollout. The result carries the local policy u = u* + K (x - x*) that the
tracking controller uses.

A solve of a long horizon takes seconds; ``solve(should_stop=...)`` asks the callback before every iteration and
raises ``SolveStopped`` when it says so (a cancel, a pre-emption, an e-stop or a shutdown ends a plan within one
iteration instead of after the whole solve).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DDPResult:
    X: np.ndarray  # (B, T+1, n) states
    U: np.ndarray  # (B, T, m) controls
    K: np.ndarray  # (B, T, m, n) feedback gains
    cost: np.ndarray  # (B,)
    iterations: np.ndarray  # (B,) iterations each problem took
    converged: np.ndarray  # (B,) bool


class SolveStopped(Exception):
    """A solve ended early because its ``should_stop`` callback asked for it (its result is thrown away)."""

    def __init__(self, iterations: int):
        super().__init__(f"DDP stopped after {iterations} iteration(s)")
        self.iterations = iterations


@dataclass(frozen=True)
class DDPSettings:
    max_iterations: int = 100
    tolerance: float = 1e-5  # stop when the relative cost reduction of an accepted step is below this
    mu_init: float = 1e-6
    mu_min: float = 1e-9
    mu_max: float = 1e8
    armijo: float = 1e-4  # accept a step when actual reduction >= armijo * expected reduction
    alphas: tuple = (1.0, 0.5, 0.25, 0.1, 0.03, 0.01)


class BatchedDDP:
    """``dynamics`` has ``step(x, u)`` and ``step_jacobians(x, u) -> (x', A, B)`` on batches; ``cost`` has
    ``value(X, U) -> (B,)`` and ``derivatives(X, U) -> (lx, lu, lxx, luu, lux)`` (shapes (B, T+1, n), (B, T, m),
    (B, T+1, n, n), (B, T, m, m), (B, T, m, n))."""

    def __init__(self, dynamics, cost, settings: DDPSettings = DDPSettings()):
        self.dynamics = dynamics
        self.cost = cost
        self.settings = settings

    def rollout(self, x0, U):
        x = np.asarray(x0, dtype=float)
        X = np.empty(U.shape[:-1][:1] + (U.shape[1] + 1, x.shape[-1]))
        X[:, 0] = x
        for t in range(U.shape[1]):
            X[:, t + 1] = self.dynamics.step(X[:, t], U[:, t])
        return X

    def _closed_loop(self, X, U, k, K, alphas):
        """Rollouts for every step size at once: (A, B, T+1, n), (A, B, T, m)."""
        na, (b, t_len, m) = len(alphas), U.shape
        n = X.shape[-1]
        xs = np.empty((na, b, t_len + 1, n))
        us = np.empty((na, b, t_len, m))
        xs[:, :, 0] = X[None, :, 0]
        a = np.asarray(alphas)[:, None, None]
        for t in range(t_len):
            dx = xs[:, :, t] - X[None, :, t]
            us[:, :, t] = U[None, :, t] + a * k[None, :, t] + np.einsum("bij,abj->abi", K[:, t], dx)
            xs[:, :, t + 1] = self.dynamics.step(xs[:, :, t].reshape(-1, n), us[:, :, t].reshape(-1, m)).reshape(
                na, b, n)
        return xs, us

    def _backward(self, A, Bm, lx, lu, lxx, luu, lux, mu):
        b, t_len, n, m = Bm.shape[0], Bm.shape[1], A.shape[-1], Bm.shape[-1]
        k = np.zeros((b, t_len, m))
        K = np.zeros((b, t_len, m, n))
        dv1, dv2 = np.zeros(b), np.zeros(b)
        vx, vxx = lx[:, -1].copy(), lxx[:, -1].copy()
        ok = np.ones(b, dtype=bool)
        eye = np.eye(m)
        for t in range(t_len - 1, -1, -1):
            at, bt = A[:, t], Bm[:, t]
            att, btt = at.transpose(0, 2, 1), bt.transpose(0, 2, 1)
            qx = lx[:, t] + np.einsum("bji,bj->bi", at, vx)
            qu = lu[:, t] + np.einsum("bji,bj->bi", bt, vx)
            va = vxx @ at
            qxx = lxx[:, t] + att @ va
            qux = lux[:, t] + btt @ va
            quu = luu[:, t] + btt @ vxx @ bt
            qreg = quu + mu[:, None, None] * eye
            det = qreg[:, 0, 0] * qreg[:, 1, 1] - qreg[:, 0, 1] * qreg[:, 1, 0]
            ok &= (qreg[:, 0, 0] > 0.0) & (det > 0.0)
            det = np.where(det > 0.0, det, 1.0)
            inv = np.stack([np.stack([qreg[:, 1, 1], -qreg[:, 0, 1]], -1),
                            np.stack([-qreg[:, 1, 0], qreg[:, 0, 0]], -1)], -2) / det[:, None, None]
            kt = -np.einsum("bij,bj->bi", inv, qu)
            Kt = -inv @ qux
            k[:, t], K[:, t] = kt, Kt
            dv1 += np.einsum("bi,bi->b", kt, qu)
            dv2 += 0.5 * np.einsum("bi,bij,bj->b", kt, quu, kt)
            Ktt = Kt.transpose(0, 2, 1)
            vx = qx + np.einsum("bji,bj->bi", Kt, np.einsum("bij,bj->bi", quu, kt) + qu) + np.einsum(
                "bji,bj->bi", qux, kt)
            vxx = qxx + Ktt @ quu @ Kt + Ktt @ qux + qux.transpose(0, 2, 1) @ Kt
            vxx = 0.5 * (vxx + vxx.transpose(0, 2, 1))
        return k, K, dv1, dv2, ok

    def solve(self, x0, U0, X0=None, active=None, should_stop=None) -> DDPResult:
        """Solve B problems from ``x0`` (B, n) with initial controls ``U0`` (B, T, m). ``X0``, if given, must be the
        rollout of ``U0`` (it saves one rollout). ``should_stop()``, if given, is asked before every iteration; when
        it returns true the solve raises ``SolveStopped``."""
        s = self.settings
        U = np.array(U0, dtype=float)
        X = self.rollout(x0, U) if X0 is None else np.array(X0, dtype=float)
        b = U.shape[0]
        J = self.cost.value(X, U)
        mu = np.full(b, s.mu_init)
        done = np.zeros(b, dtype=bool) if active is None else ~np.asarray(active, dtype=bool)
        converged = np.zeros(b, dtype=bool)
        iterations = np.zeros(b, dtype=int)
        K = np.zeros(U.shape + (X.shape[-1],))
        alphas = np.asarray(s.alphas)
        for it in range(s.max_iterations):
            if should_stop is not None and should_stop():
                raise SolveStopped(it)
            idx = np.flatnonzero(~done)
            if len(idx) == 0:
                break
            Xi, Ui = X[idx], U[idx]
            _, A, Bm = self.dynamics.step_jacobians(Xi[:, :-1], Ui)
            lx, lu, lxx, luu, lux = self.cost.derivatives(Xi, Ui, idx)
            k, Ki, dv1, dv2, ok = self._backward(A, Bm, lx, lu, lxx, luu, lux, mu[idx])
            iterations[idx] += 1
            # a problem whose Quu was not positive definite only raises its damping and tries again
            bad = idx[~ok]
            mu[bad] = np.minimum(mu[bad] * 10.0, s.mu_max)
            K[idx[ok]] = Ki[ok]
            with np.errstate(over="ignore", invalid="ignore"):  # a too long step may blow up: its cost is inf
                xs, us = self._closed_loop(Xi, Ui, k, Ki, alphas)
                na = len(alphas)
                jn = self.cost.value(xs.reshape((-1,) + xs.shape[2:]), us.reshape((-1,) + us.shape[2:]),
                                     np.tile(idx, na)).reshape(na, len(idx))
            jn = np.where(np.isfinite(jn), jn, np.inf)
            expected = -(alphas[:, None] * dv1[None] + alphas[:, None] ** 2 * dv2[None])  # > 0
            accept = ((J[idx][None] - jn) >= s.armijo * np.maximum(expected, 0.0)) & (jn < J[idx][None]) & ok[None]
            any_ok = accept.any(0)
            first = np.argmax(accept, 0)  # the largest accepted step
            for j, i in enumerate(idx):
                if any_ok[j]:
                    a = first[j]
                    rel = (J[i] - jn[a, j]) / max(abs(J[i]), 1e-12)
                    X[i], U[i], J[i] = xs[a, j], us[a, j], jn[a, j]
                    mu[i] = max(mu[i] / 3.0, s.mu_min)
                    if rel < s.tolerance:
                        converged[i] = done[i] = True
                elif ok[j]:
                    if expected[0, j] < s.tolerance * max(abs(J[i]), 1e-12):
                        converged[i] = done[i] = True  # no descent left: a (local) minimum
                    else:
                        mu[i] = mu[i] * 10.0
                if mu[i] >= s.mu_max:
                    done[i] = True
        return DDPResult(X=X, U=U, K=K, cost=J, iterations=iterations, converged=converged)
