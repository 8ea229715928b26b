"""Parareal for contact (paper 000, eq. 3), batched over many trajectories.

    x_{n+1}^{k+1} = C(x_n^{k+1}, u_n) + F(x_n^k, u_n) - C(x_n^k, u_n)

Engineering rules (see ``parallel-mujoco.md``):

* converged prefix: after iteration k the first k slices are exact; slice ``start`` (the first one not yet
  converged) starts from an exact state, so its new value *is* its fine result, taken unchanged — computing
  ``C + F - C`` there would leave rounding noise that contact amplifies to millimetres;
* only unconverged slices are recomputed: with tolerance 0 one more slice is exact after every iteration
  (exact-prefix rule); with a tolerance, a slice whose start state moved by no more than it since the previous
  iterate is converged and takes its fine value;
* every coarse value is computed once and cached for the next iteration;
* corrected (not exact) states are projected out of penetration (``projection_tolerance`` >= 1 mm);
* the change between iterates (max-norm over positions and over yaw) is reported per iteration.

A batch of M trajectories is solved together: each fine sweep is ONE batched call of all unconverged slices of
all trajectories, spread over the fine model's threads; each coarse sweep is N batched calls. With K = N (or
after all slices are exact) the result equals the serial fine rollout bitwise.

Uncertainty-aware Parareal (paper 004's ensembles, one step further; ``variance_threshold``): with a coarse model
that predicts its variance (``learned_ensemble``), a trajectory stops iterating -- before the first fine sweep, or
after any -- as soon as the coarse variance of its slices that are not yet exact, summed, gives every object a
position sigma of at most ``variance_threshold``: where the coarse model is sure (the pusher far from every object,
an object pushed the way the training data pushed it), fine slices buy nothing. The others iterate on to
``max_iterations``. The result carries that remaining variance, accumulated along the trajectory (zero on the
exact prefix). ``parapush bench adaptive`` measures accuracy against cost.

``coarse_chain``: where a caller already rolled the coarse model out from x0 under the same controls (the fast
planner screens every candidate on the coarse model before it re-scores the best few), that chain is iteration 0
and the first coarse sweep is not done again. Its first slice is recomputed and compared, so a chain of another
model (another sub-step) is refused, not used.

``schedule="pipelined"`` (one trajectory, fixed K, tolerance 0) drops the barrier between sweeps: the fine solve
of slice n for iteration k+1 is submitted the moment its start value x_n^k is known, while earlier slices of
iteration k are still running. Same operations on the same values, so the result is bitwise the batched one;
only the order of the fine work differs. ``parapush bench speedup`` measures both.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field

import numpy as np

from ..scene.projection import DEFAULT_PROJECTION_TOLERANCE, project_feasible
from ..scene.spec import Scene
from .base import PredictionAbandoned


@dataclass
class PararealResult:
    states: np.ndarray  # (M, N+1, D), states[:, 0] = x0
    iterations: int  # fine sweeps performed (0 = coarse only)
    position_change: list = field(default_factory=list)  # per iteration: max |change| of any position (m)
    yaw_change: list = field(default_factory=list)  # per iteration: max |change| of any yaw (rad)
    converged: np.ndarray | None = None  # (M,) bool: change below tolerance (or all slices exact)
    exact_slices: np.ndarray | None = None  # (M,) number of leading slices equal to the serial fine model
    fine_slices: int = 0  # fine slices computed in total (the parallel work)
    coarse_slices: int = 0
    wall_time: float = 0.0
    history: list | None = None  # optional list of (M, N+1, D) iterates, iteration 0 first
    trajectory_iterations: np.ndarray | None = None  # (M,) fine sweeps each trajectory took part in
    variance: np.ndarray | None = None  # (M, N+1, D) with ``variance_threshold``: the coarse variance left (below)


@dataclass(frozen=True)
class CoarseChain:
    """Parareal's iteration 0 rolled out by the caller: the coarse ``model`` and its ``states`` (M, N+1, D) from
    x0 under the controls Parareal is given (``Predictor.predict``'s ``coarse_chain``)."""

    model: object
    states: np.ndarray


class Parareal:
    """Combines a coarse and a fine propagator. Both must offer ``propagate(x (B, D), u (B, 2), dt) -> (B, D)``."""

    def __init__(self, scene: Scene, coarse, fine, projection_tolerance: float = DEFAULT_PROJECTION_TOLERANCE):
        if projection_tolerance < 1e-3:
            raise ValueError(f"projection_tolerance must be >= 1 mm, got {projection_tolerance} m")
        self.scene = scene
        self.layout = scene.layout
        self.coarse = coarse
        self.fine = fine
        self.projection_tolerance = projection_tolerance

    def solve(self, x0, controls, dt: float, max_iterations: int, tolerance: float = 0.0,
              yaw_tolerance: float | None = None, keep_history: bool = False,
              schedule: str = "batched", variance_threshold: float = 0.0,
              stop: Callable[[], bool] | None = None, coarse_chain=None) -> PararealResult:
        """Solve one trajectory (x0 (D,), controls (N, 2)) or a batch (x0 (M, D), controls (M, N, 2)).

        ``tolerance`` (m) and ``yaw_tolerance`` (rad, default: tolerance / 0.05 m, i.e. the same arc length at
        the rim of a 5 cm object) bound the change between iterates below which a slice counts as converged.
        ``schedule``: "batched" (a barrier after each fine sweep) or "pipelined" (see the module docstring).
        ``variance_threshold`` (m, needs a coarse model with ``propagate_with_variance``): uncertainty-aware
        stopping, see "Uncertainty-aware Parareal" in the module docstring; 0 = off.
        ``stop`` (an anytime caller's deadline): asked between pieces of fine work once some is done (each fine
        sweep then goes as calls of as many slices as the fine model has threads, so no thread idles) and before
        each correction sweep; True raises ``PredictionAbandoned`` with the fine slices spent.
        ``coarse_chain`` (M, N+1, D) or None: this solver's coarse chain from x0 (iteration 0), see the module
        docstring; not with ``variance_threshold`` (which needs the coarse variance of every slice).
        """
        if coarse_chain is not None and (variance_threshold or schedule != "batched"):
            raise ValueError("parareal: coarse_chain needs schedule 'batched' without variance_threshold")
        if variance_threshold:
            if schedule != "batched":
                raise ValueError("parareal: variance_threshold needs schedule 'batched'")
            if not hasattr(self.coarse, "propagate_with_variance"):
                raise ValueError(f"parareal: variance_threshold needs a coarse model that predicts its variance; "
                                 f"{getattr(self.coarse, 'name', type(self.coarse).__name__)!r} does not")
            if not variance_threshold > 0.0:
                raise ValueError(f"parareal: variance_threshold must be >= 0 m, got {variance_threshold}")
        if schedule == "pipelined":
            if stop is not None:
                raise ValueError("parareal: stop needs schedule 'batched'")
            return self._solve_pipelined(x0, controls, dt, max_iterations, tolerance, yaw_tolerance, keep_history)
        if schedule != "batched":
            raise ValueError(f"parareal: schedule must be 'batched' or 'pipelined', got {schedule!r}")
        t_start = time.perf_counter()
        L = self.layout
        x0 = np.asarray(x0, dtype=float)
        controls = np.asarray(controls, dtype=float)
        single = x0.ndim == 1
        if single:
            x0, controls = x0[None], controls[None]
        if controls.ndim != 3 or controls.shape[0] != x0.shape[0] or controls.shape[2] != 2:
            raise ValueError(f"parareal: controls must be (M, N, 2) for x0 (M, D); got {controls.shape}, {x0.shape}")
        M, N = controls.shape[:2]
        if N < 1:
            raise ValueError("parareal: need at least one control")
        if not 0 <= max_iterations <= N:
            raise ValueError(f"parareal: max_iterations must be in [0, N={N}], got {max_iterations}")
        if tolerance < 0:
            raise ValueError(f"parareal: tolerance must be >= 0, got {tolerance}")
        yaw_tol = tolerance / 0.05 if yaw_tolerance is None else yaw_tolerance
        L.check(x0, "x0")

        X = np.empty((M, N + 1, L.dim))
        X[:, 0] = x0
        G = np.empty((M, N, L.dim))  # cached C(X[:, n], u_n) of the current iterate
        unsure = variance_threshold > 0.0
        GV = np.zeros((M, N, L.dim)) if unsure else None  # the coarse variance of each slice of the iterate
        coarse = self._coarse_with_variance(GV) if unsure else lambda x, u, dt, where: self.coarse.propagate(x, u, dt)
        if coarse_chain is None:
            for n in range(N):
                G[:, n] = coarse(X[:, n], controls[:, n], dt, np.s_[:, n])
                X[:, n + 1] = G[:, n]
            coarse_slices = M * N
        else:
            self._take_chain(np.asarray(coarse_chain, dtype=float), X, G, controls, dt)
            coarse_slices = M
        Fv = np.empty((M, N, L.dim))  # fine result of slice n from the current X[:, n]
        start = np.zeros(M, dtype=int)  # first slice not yet converged, per trajectory
        exact = np.zeros(M, dtype=int)  # leading slices bitwise equal to the serial fine model
        sweeps = np.zeros(M, dtype=int)
        result = PararealResult(states=X, iterations=0, coarse_slices=coarse_slices,
                                history=[X.copy()] if keep_history else None)
        sure = np.zeros(M, dtype=bool)  # stopped because the coarse model is sure of the slices left
        for k in range(1, max_iterations + 1):
            if unsure:
                sure |= self._sure(GV, start, variance_threshold)
            active = np.flatnonzero((start < N) & ~sure)
            if active.size == 0:
                break
            # one batched fine sweep over every unconverged slice of every trajectory
            mm = np.concatenate([np.full(N - start[m], m) for m in active])
            nn = np.concatenate([np.arange(start[m], N) for m in active])
            if stop is None:
                Fv[mm, nn] = self.fine.propagate(X[mm, nn], controls[mm, nn], dt)
                result.fine_slices += mm.size
            else:  # the same slices (each independent of the others), in thread-sized calls, abandonable between
                chunk = max(1, int(getattr(self.fine, "threads", 1)))
                for a in range(0, mm.size, chunk):
                    if result.fine_slices and stop():
                        raise PredictionAbandoned(result.fine_slices)
                    m_, n_ = mm[a:a + chunk], nn[a:a + chunk]
                    Fv[m_, n_] = self.fine.propagate(X[m_, n_], controls[m_, n_], dt)
                    result.fine_slices += m_.size
                if stop():
                    raise PredictionAbandoned(result.fine_slices)
            X_old = X.copy()
            # serial-in-time correction, batched across trajectories
            for n in range(N):
                first = active[start[active] == n]  # exact start state: take the fine value unchanged
                X[first, n + 1] = Fv[first, n]
                rest = active[start[active] < n]
                if rest.size:
                    g_new = coarse(X[rest, n], controls[rest, n], dt, (rest, n))
                    result.coarse_slices += rest.size
                    corrected = g_new + Fv[rest, n] - G[rest, n]
                    G[rest, n] = g_new
                    X[rest, n + 1], _ = project_feasible(self.scene, corrected, self.projection_tolerance)
            # the first unconverged slice started from an exact state only where the exact prefix reaches it: with a
            # tolerance, _advance_prefix may have skipped ahead of it over slices within the tolerance (not exact)
            grow = active[exact[active] >= start[active]]
            exact[grow] = start[grow] + 1
            sweeps[active] += 1
            dpos, dyaw = L.pose_change(X[active], X_old[active])  # (A, N+1)
            result.position_change.append(float(dpos.max()))
            result.yaw_change.append(float(dyaw.max()))
            result.iterations = k
            self._advance_prefix(X, Fv, start, active, dpos, dyaw, tolerance, yaw_tol)
            if keep_history:
                result.history.append(X.copy())
        result.converged = (start >= N) | sure
        result.exact_slices = exact
        result.trajectory_iterations = sweeps
        # what the coarse model is unsure of past the converged prefix (``start``: the exact prefix, or with a
        # tolerance the slices fine-propagated from states within it), accumulated along the trajectory: what
        # ``_sure`` judged
        if unsure:
            left = np.where(np.arange(N)[None, :, None] >= start[:, None, None], GV, 0.0)
            result.variance = np.concatenate([np.zeros((M, 1, L.dim)), np.cumsum(left, axis=1)], axis=1)
            result.variance[:, 1:, L.n_q:] = left[..., L.n_q:]  # velocities: the slice's own, not a sum
        result.wall_time = time.perf_counter() - t_start
        if single:
            result.variance = None if result.variance is None else result.variance[0]
            result.states = X[0]
            if keep_history:
                result.history = [h[0] for h in result.history]
        return result

    def _solve_pipelined(self, x0, controls, dt, max_iterations, tolerance, yaw_tolerance, keep_history):
        """One trajectory, K fixed, exact-prefix rule; fine slices run as soon as their start values exist.

        Iterate k keeps its own arrays (X[k], G[k]), so iterations can overlap: x_{n+1}^k needs x_n^k and the fine
        result of slice n from x_n^{k-1}; slice n of iteration k+1 starts from x_n^k (n >= k, the prefix before
        it is exact). The main thread does the cheap coarse corrections while the fine model's threads run.
        """
        t_start = time.perf_counter()
        L = self.layout
        x0 = np.asarray(x0, dtype=float)
        controls = np.asarray(controls, dtype=float)
        if x0.ndim != 1 or controls.ndim != 2 or controls.shape[1] != 2:
            raise ValueError(f"parareal: schedule 'pipelined' solves one trajectory: x0 (D,), controls (N, 2); "
                             f"got {x0.shape}, {controls.shape}")
        if tolerance != 0.0 or (yaw_tolerance or 0.0) != 0.0:
            raise ValueError("parareal: schedule 'pipelined' runs a fixed number of iterations: tolerance must be 0")
        if not hasattr(self.fine, "submit"):
            raise ValueError("parareal: schedule 'pipelined' needs a fine model with submit(x, u, dt)")
        N = controls.shape[0]
        K = int(max_iterations)
        if N < 1:
            raise ValueError("parareal: need at least one control")
        if not 0 <= K <= N:
            raise ValueError(f"parareal: max_iterations must be in [0, N={N}], got {K}")
        L.check(x0[None], "x0")
        X = np.empty((K + 1, N + 1, L.dim))  # X[k] = iterate k
        G = np.empty((K + 1, N, L.dim))  # G[k, n] = C(X[k, n], u_n)
        Fv = np.empty((K + 1, N, L.dim))  # Fv[k, n] = F(X[k-1, n], u_n), the fine sweep of iteration k
        X[:, 0] = x0
        pending = {}  # future -> (k, n): fine slice n of iteration k
        fine_slices = 0

        def submit(k, n):  # the fine solve of slice n for iteration k, from X[k-1, n]
            nonlocal fine_slices
            pending[self.fine.submit(X[k - 1, n], controls[n], dt)] = (k, n)
            fine_slices += 1

        for n in range(N):  # iteration 0: the coarse chain, each slice's fine solve starts at once
            if K >= 1:
                submit(1, n)
            G[0, n] = self.coarse.propagate(X[0, n][None], controls[n][None], dt)[0]
            X[0, n + 1] = G[0, n]
        done = np.zeros((K + 1, N), dtype=bool)
        frontier = [N] + [k - 1 for k in range(1, K + 1)]  # per iterate: next n whose X[k, n+1] is unknown
        try:
            while pending:
                finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for f in finished:
                    k, n = pending.pop(f)
                    Fv[k, n] = f.result()
                    done[k, n] = True
                for k in range(1, K + 1):  # advance every iterate as far as its inputs allow
                    while (n := frontier[k]) < N and done[k, n]:
                        if n == k - 1:  # first unconverged slice: its start is exact, take the fine value
                            X[k:, n + 1] = Fv[k, n]  # ... and it stays exact in every later iterate
                        elif frontier[k - 1] > n:  # G[k-1, n] = C(x_n^{k-1}) is known
                            G[k, n] = self.coarse.propagate(X[k, n][None], controls[n][None], dt)[0]
                            corrected = (G[k, n] + Fv[k, n] - G[k - 1, n])[None]
                            X[k, n + 1] = project_feasible(self.scene, corrected, self.projection_tolerance)[0][0]
                        else:
                            break
                        frontier[k] = n + 1
                        if k < K and n + 1 < N:
                            submit(k + 1, n + 1)  # slice n+1 of the next iteration starts from X[k, n+1]
        except BaseException:
            for f in pending:
                f.cancel()
            raise
        result = PararealResult(states=X[K].copy(), iterations=K, fine_slices=fine_slices,
                                coarse_slices=N + sum(N - k for k in range(1, K + 1)),
                                converged=np.array([K >= N]), exact_slices=np.array([K]),
                                history=[X[k].copy() for k in range(K + 1)] if keep_history else None)
        for k in range(1, K + 1):
            dpos, dyaw = L.pose_change(X[k][None], X[k - 1][None])
            result.position_change.append(float(dpos.max()))
            result.yaw_change.append(float(dyaw.max()))
        result.wall_time = time.perf_counter() - t_start
        return result

    def _take_chain(self, chain, X, G, controls, dt):
        """Iteration 0 (``X``, its coarse values ``G``) from a caller's coarse chain, after checking that it starts
        at x0 and that its first slice is this coarse model's (a chain of another model or sub-step is refused)."""
        if chain.shape != X.shape:
            raise ValueError(f"parareal: coarse_chain must be (M, N+1, D) = {X.shape}, got {chain.shape}")
        if not np.array_equal(chain[:, 0], X[:, 0]):
            raise ValueError("parareal: coarse_chain does not start at x0")
        G[:, 0] = self.coarse.propagate(X[:, 0], controls[:, 0], dt)
        off = float(np.max(np.abs(G[:, 0] - chain[:, 1])))
        if off > 1e-9:  # the same model from the same states: equal but for a batch's rounding
            name = getattr(self.coarse, "name", type(self.coarse).__name__)
            raise ValueError(f"parareal: coarse_chain is not the {name!r} coarse model's chain (its first slice "
                             f"differs by {off:.3g})")
        X[:, 1:] = chain[:, 1:]
        G[:, 1:] = chain[:, 2:]

    def _coarse_with_variance(self, GV):
        """A coarse call ``(x, u, dt, where)`` that also stores the slices' variance in ``GV[where]``."""
        def call(x, u, dt, where):
            states, var = self.coarse.propagate_with_variance(x, u, dt)
            GV[where] = var
            return states
        return call

    def _sure(self, GV, start, threshold) -> np.ndarray:
        """(M,) bool: the coarse variance of the slices not yet converged (from ``start`` on: not yet exact, without
        a tolerance), summed, gives every object a position sigma of at most ``threshold``."""
        N = GV.shape[1]
        left = np.where(np.arange(N)[None, :, None] >= start[:, None, None], GV, 0.0).sum(axis=1)  # (M, D)
        return self.layout.object_position_sigma(left).max(axis=-1, initial=0.0) <= threshold

    @staticmethod
    def _advance_prefix(X, Fv, start, active, dpos, dyaw, tolerance, yaw_tol):
        """Move each trajectory's first unconverged slice forward after an iteration.

        With zero tolerances this is the exact-prefix rule (one more slice is exact after every iteration), which
        keeps the prefix bitwise equal to the serial fine model. Otherwise a slice whose start state moved by no
        more than the tolerance since the previous iterate is converged: its end state becomes its fine value
        (the Parareal fixed point), and the prefix extends to the first slice whose start moved more.
        """
        N = Fv.shape[1]
        if tolerance == 0.0 and yaw_tol == 0.0:
            start[active] += 1
            return
        for j, m in enumerate(active):
            n = start[m] + 1
            while n < N and dpos[j, n] <= tolerance and dyaw[j, n] <= yaw_tol:
                X[m, n + 1] = Fv[m, n]
                n += 1
            start[m] = n
