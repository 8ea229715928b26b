"""Demonstration-guided optimal control (paper 003): ZS-, DS-, DP- and WS-DDP, and the DP -> WS framework.

- ZS-DDP: zero controls as the initial guess, the reaching cost (``DGOCCost`` without demonstration terms).
- DS-DDP: the k-NN-selected demonstration as the initial guess, the same cost.
- DP-DDP: the demonstration as the initial guess and, in the cost, soft constraints to follow its pusher velocity,
  acceleration and choice of face around its face switches.
- WS-DDP: DS-DDP's cost, warm-started from the DP-DDP solution. DG-OC is DP-DDP followed by WS-DDP.

A demonstration is recorded from its own start; from another start its states are not a rollout of its controls
(paper 003 used Crocoddyl's FDDP, which accepts such an infeasible guess). Here the initial guess is the rollout of
the demonstration's accelerations plus a PD term that makes the pusher follow the demonstrated pusher path
(the pusher is fully actuated, so it follows it exactly when it starts where the demonstration did); the slider's
states are whatever the model makes of that push.

All problems of a call are solved as one batch; with ``k > 1`` every target is planned from its k nearest
demonstrations at once and the cheapest plan wins. ``plan_escalating`` plans from the k nearest and then, for the
targets whose plan misses the goal tolerance only, from the next nearest demonstrations (measured on box_slider at
k = 1: the misses were large turns, 1.9-3.1 rad, whose nearest demonstration's way of turning did not suit them;
planning every target from 3 demonstrations costs 3 x, this costs only for the misses).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...scene.state import unwrap_near, wrap_angle
from .costs import DGOCCost, DGOCWeights
from .demonstrations import Demonstration, nearest
from .solver import BatchedDDP, DDPResult, DDPSettings

PLAN_DT = 0.02  # s: DDP's time step (the tracking controller runs at 100 Hz and holds each step's gains)
HORIZON_S = 7.0  # s: the demonstrations' (and so the plans') length: two face switches and 30 cm of pushing
METHODS = ("zs", "ds", "dp", "ws")
METHOD_NAMES = {"zs": "ZS-DDP", "ds": "DS-DDP", "dp": "DP-DDP", "ws": "WS-DDP"}
TRACK_KP, TRACK_KD = 100.0, 20.0  # 1/s^2, 1/s: the PD term of the demonstration rollout (critically damped)


@dataclass
class Plan:
    X: np.ndarray  # (B, T+1, 7)
    U: np.ndarray  # (B, T, 2)
    K: np.ndarray  # (B, T, 2, 7) feedback gains
    cost: np.ndarray  # (B,)
    target: np.ndarray  # (B, 3), yaw unwrapped to the plan's
    demo: np.ndarray  # (B,) index of the demonstration used (-1 for ZS)
    iterations: np.ndarray  # (B,)
    solve_time: float  # wall time of the whole batch (s)

    def final_error(self) -> np.ndarray:
        """(B, 3) |x|, |y| (m), |yaw| (rad, wrapped) errors of the final slider pose."""
        e = self.X[:, -1, :3] - self.target
        e[:, 2] = wrap_angle(e[:, 2])
        return np.abs(e)


def face_switch_mask(model, demo_X, demo_U, window: int) -> np.ndarray:
    """(T+1,) 1 within ``window`` steps of each change of pushed face in a demonstration (else 0); the pusher's
    position relative to the slider there encodes where it leaves one face and reaches the next."""
    _, faces, modes = model.rollout_info(demo_X[0], demo_U)
    pushing = modes != 3
    mask = np.zeros(len(demo_X))
    last_face, last_t = None, None
    for t in np.flatnonzero(pushing):
        if last_face is not None and faces[t] != last_face:
            mask[max(0, last_t - window + 1):last_t + 2] = 1.0  # where it left the old face
            mask[t:t + window + 1] = 1.0  # where it reached the new one
        last_face, last_t = faces[t], t
    return mask


class DGOCPlanner:
    """Plans pushes of one box to goal poses with the four DDP variants. ``demos`` are in the slider's start frame
    (the shipped library); every demonstration is padded to the longest one's horizon with rest."""

    def __init__(self, model, demos: list[Demonstration], weights: DGOCWeights = DGOCWeights(),
                 settings: DDPSettings = DDPSettings()):
        if not demos:
            raise ValueError("DG-OC: at least one demonstration is needed")
        for d in demos:
            if abs(d.dt - model.dt) > 1e-9:
                raise ValueError(f"DG-OC: demonstration {d.name!r} has dt {d.dt}, the model {model.dt}")
        self.model = model
        self.demos = demos
        self.weights = weights
        self.settings = settings
        self.horizon = max(d.horizon for d in demos)
        self.demo_X = np.stack([_pad(d.X, self.horizon + 1) for d in demos])
        self.demo_U = np.stack([np.vstack([d.U, np.zeros((self.horizon - d.horizon, 2))]) for d in demos])
        self.face_masks = np.stack([face_switch_mask(model, X, U, weights.face_window)
                                    for X, U in zip(self.demo_X, self.demo_U)])

    # ------------------------------------------------------------------------------------ pieces
    def demo_in_frame(self, idx, start_pose):
        """Demonstration states and accelerations (B, T+1, 7), (B, T, 2) moved to each start pose (B, 3)."""
        start_pose = np.asarray(start_pose, dtype=float)
        c, s = np.cos(start_pose[:, 2]), np.sin(start_pose[:, 2])
        R = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)  # (B, 2, 2)
        X = self.demo_X[idx].copy()
        U = np.einsum("bij,btj->bti", R, self.demo_U[idx])
        for a, b in ((0, 2), (3, 5)):
            X[..., a:b] = np.einsum("bij,btj->bti", R, X[..., a:b]) + start_pose[:, None, :2]
        X[..., 2] += start_pose[:, None, 2]
        X[..., 5:7] = np.einsum("bij,btj->bti", R, X[..., 5:7])
        return X, U

    def follow(self, x0, ref_X, ref_U):
        """Roll out the demonstrated accelerations with a PD term tracking the demonstrated pusher path."""
        X = np.empty(ref_X.shape)
        U = np.empty(ref_U.shape)
        X[:, 0] = x0
        for t in range(ref_U.shape[1]):
            u = ref_U[:, t] + TRACK_KP * (ref_X[:, t, 3:5] - X[:, t, 3:5]) + TRACK_KD * (ref_X[:, t, 5:7]
                                                                                           - X[:, t, 5:7])
            U[:, t] = u
            X[:, t + 1] = self.model.step(X[:, t], u)
        return X, U

    def _solve(self, x0, U0, target, demo=None, X0=None, should_stop=None) -> DDPResult:
        cost = DGOCCost(self.model, target, self.weights, *(demo or (None, None, None)))
        return BatchedDDP(self.model, cost, self.settings).solve(x0, U0, X0=X0, should_stop=should_stop)

    # ------------------------------------------------------------------------------------ methods
    def plan(self, x0, targets, method: str = "ws", k: int = 1, should_stop=None) -> Plan:
        """Plan from states ``x0`` (B, 7) to slider poses ``targets`` (B, 3) with ``method`` in zs/ds/dp/ws (ws =
        the DP -> WS framework); ``k`` nearest demonstrations per target (not for zs). ``should_stop``: see
        ``BatchedDDP.solve`` (``SolveStopped`` within one DDP iteration)."""
        return self.plan_methods(x0, targets, (method,), k, should_stop)[method]

    def plan_escalating(self, x0, targets, method: str = "ws", k: int = 1, escalate_k: int = 3,
                        tolerance=(0.01, 0.1), should_stop=None, first: Plan | None = None, missed=None) -> Plan:
        """``plan`` from the k nearest demonstrations; the targets whose plan ends further than ``tolerance`` (m per
        axis, rad) from them are planned again from their next nearest demonstrations, up to the ``escalate_k``
        nearest, and keep the better plan (within tolerance first, then the cheaper). ``missed``, if given, replaces
        the per-axis test: final errors (B, 3) -> (B,) bool, true where the plan misses (e.g. a goal disc). ``first``:
        the k-nearest plan if already made. Its ``solve_time`` and ``iterations`` include the second batch."""
        if missed is None:
            def missed(err):
                return _misses(err, tolerance)
        x0 = np.atleast_2d(np.asarray(x0, dtype=float))
        targets = np.atleast_2d(np.asarray(targets, dtype=float))
        plan = first if first is not None else self.plan(x0, targets, method, k, should_stop)
        k = max(1, min(int(k), len(self.demos)))
        more = min(int(escalate_k), len(self.demos)) - k
        miss = np.flatnonzero(missed(plan.final_error()))
        if method == "zs" or more <= 0 or len(miss) == 0:
            return plan
        t0 = time.perf_counter()
        alt = self.plan_methods(x0[miss], targets[miss], (method,), should_stop=should_stop,
                                ranks=range(k, k + more))[method]
        out = Plan(*(np.array(a, copy=True) for a in (plan.X, plan.U, plan.K, plan.cost, plan.target, plan.demo,
                                                      plan.iterations)), plan.solve_time)
        out.iterations[miss] += alt.iterations
        old_key = np.stack([missed(plan.final_error()[miss]), plan.cost[miss]], -1)
        new_key = np.stack([missed(alt.final_error()), alt.cost], -1)
        better = (new_key[:, 0] < old_key[:, 0]) | ((new_key[:, 0] == old_key[:, 0]) & (new_key[:, 1] < old_key[:, 1]))
        rows, src = miss[better], np.flatnonzero(better)
        for name in ("X", "U", "K", "cost", "target", "demo"):
            getattr(out, name)[rows] = getattr(alt, name)[src]
        out.solve_time = plan.solve_time + time.perf_counter() - t0
        return out

    def plan_methods(self, x0, targets, methods=METHODS, k: int = 1, should_stop=None, ranks=None) -> dict:
        """Several methods on the same problems: {method: Plan}. WS continues from DP's solution (DP is solved
        once if both are asked for); WS's ``solve_time`` and ``iterations`` include DP's (the framework's).
        ``ranks``: plan from these neighbours (0 = the nearest demonstration) instead of the k nearest."""
        for m in methods:
            if m not in METHODS:
                raise ValueError(f"DG-OC: unknown method {m!r} (expected one of {', '.join(METHODS)})")
        x0 = np.atleast_2d(np.asarray(x0, dtype=float))
        targets = np.atleast_2d(np.asarray(targets, dtype=float)).copy()
        b = len(x0)
        out = {}
        if "zs" in methods:
            t0 = time.perf_counter()
            tz = targets.copy()
            tz[:, 2] = unwrap_near(tz[:, 2], x0[:, 2])
            r = self._solve(x0, np.zeros((b, self.horizon, 2)), tz, should_stop=should_stop)
            out["zs"] = Plan(r.X, r.U, r.K, r.cost, tz, np.full(b, -1), r.iterations, time.perf_counter() - t0)
        if not set(methods) & {"ds", "dp", "ws"}:
            return out
        t0 = time.perf_counter()
        # targets relative to each start pose pick the demonstrations
        start = x0[:, :3]
        c, s = np.cos(start[:, 2]), np.sin(start[:, 2])
        d = targets[:, :2] - start[:, :2]
        rel = np.stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1], targets[:, 2] - start[:, 2]], -1)
        ranks = list(range(max(1, min(int(k), len(self.demos))))) if ranks is None else list(ranks)
        if not ranks or min(ranks) < 0 or max(ranks) >= len(self.demos):
            raise ValueError(f"DG-OC: neighbour ranks {ranks} outside the {len(self.demos)} demonstrations")
        k = len(ranks)
        idx = nearest(self.demos, rel, max(ranks) + 1)[:, ranks].reshape(-1)  # (B k,)
        xb = np.repeat(x0, k, 0)
        tb = np.repeat(targets, k, 0)
        ref_X, ref_U = self.demo_in_frame(idx, np.repeat(start, k, 0))
        tb[:, 2] = unwrap_near(tb[:, 2], ref_X[:, -1, 2])
        X0, U0 = self.follow(xb, ref_X, ref_U)
        t_init = time.perf_counter() - t0

        def best_of_k(r, elapsed):
            """The cheapest of each target's k plans, by the demonstration-free cost."""
            final_cost = DGOCCost(self.model, tb, self.weights).value(r.X, r.U).reshape(b, k)
            best = np.arange(b) * k + np.argmin(final_cost, 1)
            return Plan(r.X[best], r.U[best], r.K[best], final_cost.reshape(-1)[best], tb[best], idx[best],
                        r.iterations.reshape(b, k).sum(1), elapsed)

        if "ds" in methods:
            t0 = time.perf_counter()
            rds = self._solve(xb, U0, tb, X0=X0, should_stop=should_stop)
            out["ds"] = best_of_k(rds, t_init + time.perf_counter() - t0)
        if "dp" in methods or "ws" in methods:
            t0 = time.perf_counter()
            rdp = self._solve(xb, U0, tb, demo=(ref_X, ref_U, self.face_masks[idx]), X0=X0, should_stop=should_stop)
            t_dp = t_init + time.perf_counter() - t0
            if "dp" in methods:
                out["dp"] = best_of_k(rdp, t_dp)
            if "ws" in methods:
                t0 = time.perf_counter()
                rws = self._solve(xb, rdp.U, tb, X0=rdp.X, should_stop=should_stop)
                rws.iterations = rws.iterations + rdp.iterations
                out["ws"] = best_of_k(rws, t_dp + time.perf_counter() - t0)
        return {m: out[m] for m in methods}


def _misses(err, tolerance) -> np.ndarray:
    """(B,) whether final errors (B, 3) exceed ``tolerance`` = (m per axis, rad)."""
    return (err[:, 0] > tolerance[0]) | (err[:, 1] > tolerance[0]) | (err[:, 2] > tolerance[1])


def _pad(X, n):
    """Repeat the last state (at rest) up to n rows."""
    if len(X) >= n:
        return X
    last = X[-1].copy()
    last[5:7] = 0.0
    return np.vstack([X, np.repeat(last[None], n - len(X), 0)])
