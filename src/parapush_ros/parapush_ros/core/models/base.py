"""The contract every predictive model keeps, and what is built on it once: the serial rollout.

A predictive model (coarse, learned, fine, or one you add) is a *propagator*: ``propagate(x (B, D), u (B, 2), dt)
-> (B, D)`` maps a batch of planar states and pusher velocities held for ``dt`` seconds to the states after the
slice (the layout is ``core.scene.state.StateLayout``). That is all Parareal, the predictor and the planner need.
A model that also knows how uncertain it is offers ``propagate_with_variance`` (same arguments, returns the states
and their per-coordinate variance (B, D)); predictions made with it carry that variance and the planner's cost
adds its uncertainty term (``costs.yaml``: ``variance``).

Register a model in ``core/models/registry.py`` (one line) and every part of parapush can use it by name.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from ..scene.state import StateLayout


@runtime_checkable
class Propagator(Protocol):
    """One slice of pushing for a batch: ``propagate(x (B, D), u (B, 2), dt) -> (B, D)``."""

    name: str

    def propagate(self, x: np.ndarray, u: np.ndarray, dt: float) -> np.ndarray: ...


@runtime_checkable
class UncertainPropagator(Propagator, Protocol):
    """A propagator that also predicts the variance of its answer (e.g. an ensemble, paper 004)."""

    def propagate_with_variance(self, x: np.ndarray, u: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(B, D) states after the slice and the variance of each of their coordinates (B, D)."""


class UnsupportedScene(ValueError):
    """A model cannot predict this scene (e.g. the quasi-static model and a cylinder); raised when the model is
    built, the message naming the scene and why, so a caller can say which model and scene do not fit."""


class ModelDiverged(RuntimeError):
    """A simulation became unusable (MuJoCo reported instability, or the state is not finite): the fine model
    for some slices of a batch (``indices``), or the simulated world. Raised instead of ever returning a silently
    reset or wrong state."""

    def __init__(self, reason: str, indices=(), what: str = "fine model"):
        self.reason = reason
        self.indices = list(indices)
        where = f" for slice(s) {self.indices}" if self.indices else ""
        super().__init__(f"{what} diverged{where}: {reason}")


class PredictionAbandoned(RuntimeError):
    """A prediction given up because its caller's ``stop`` said so (an anytime planner's deadline), checked between
    slices: ``slices`` of the propagator (Parareal: of the fine model) done before it stopped, the work spent."""

    def __init__(self, slices: int):
        self.slices = int(slices)
        super().__init__(f"prediction abandoned after {self.slices} slice(s)")


def batch_arguments(x, u, dim: int, who: str) -> tuple[np.ndarray, np.ndarray]:
    """A propagator's arguments as float copies: states (B, D) and controls (B, 2) (one state and control may come
    without the batch axis); a ValueError naming ``who`` if the shapes do not fit."""
    x = np.array(np.atleast_2d(x), dtype=float)
    u = np.array(np.atleast_2d(u), dtype=float)
    if x.ndim != 2 or u.ndim != 2 or x.shape[0] != u.shape[0] or u.shape[1] != 2 or x.shape[1] != dim:
        raise ValueError(f"{who}: expected x (B, {dim}) and u (B, 2), got {x.shape}, {u.shape}")
    return x, u


def rollout(model: Propagator, x0, controls, dt: float, stop: Callable[[], bool] | None = None) -> np.ndarray:
    """Chain ``model`` over the controls: ``x0`` (D,) with ``controls`` (N, 2) -> (N+1, D) states, or a batch,
    ``x0`` (M, D) with ``controls`` (M, N, 2) -> (M, N+1, D); each time step is one batched call of M slices.
    ``stop``: asked before every time step but the first; True raises ``PredictionAbandoned``."""
    states, _ = _rollout(model, x0, controls, dt, with_variance=False, stop=stop)
    return states


def rollout_with_variance(model: UncertainPropagator, x0, controls, dt: float,
                          stop: Callable[[], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``rollout`` plus the predicted variance of every state (same shape; zero at the start state). Along the
    rollout the slices' pose variances add up (independent slice errors, first order: the spread a slice's error
    causes downstream is not propagated); velocity variances are the last slice's."""
    return _rollout(model, x0, controls, dt, with_variance=True, stop=stop)


def _rollout(model, x0, controls, dt, with_variance, stop=None):
    x0 = np.asarray(x0, dtype=float)
    controls = np.asarray(controls, dtype=float)
    single = x0.ndim == 1
    if single:
        x0, controls = x0[None], np.atleast_2d(controls)[None]
    if controls.ndim != 3 or controls.shape[0] != x0.shape[0] or controls.shape[-1] != 2:
        raise ValueError(f"rollout: controls must be (N, 2) for x0 (D,) or (M, N, 2) for x0 (M, D); "
                         f"got {controls.shape}, {x0.shape}")
    states = np.empty((x0.shape[0], controls.shape[1] + 1, x0.shape[1]))
    states[:, 0] = x0
    variance = np.zeros_like(states) if with_variance else None
    nq = StateLayout((x0.shape[1] - 4) // 6).n_q  # the pose coordinates, whose variance accumulates
    for n in range(controls.shape[1]):
        if n and stop is not None and stop():
            raise PredictionAbandoned(n * x0.shape[0])
        if with_variance:
            states[:, n + 1], slice_var = model.propagate_with_variance(states[:, n], controls[:, n], dt)
            variance[:, n + 1] = slice_var
            variance[:, n + 1, :nq] += variance[:, n, :nq]
        else:
            states[:, n + 1] = model.propagate(states[:, n], controls[:, n], dt)
    if single:
        return states[0], (variance[0] if with_variance else None)
    return states, variance
