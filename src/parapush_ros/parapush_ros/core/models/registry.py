"""One entry point for predictions with any model: coarse, learned, fine or Parareal-K.

The predictor service, the MPC planner and the benchmarks all call ``Predictor.predict`` so that a model name
means the same thing everywhere. Model specs: ``coarse`` (the default coarse model), ``analytical``,
``learned``, ``fine``, ``parareal`` (default K) or ``pararealK`` (e.g. ``parareal2``).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np

from .analytical import AnalyticalCoarseModel
from .base import rollout
from .fine import FineModel
from .parareal import Parareal
from ..scene.spec import Scene

MODEL_KINDS = ("coarse", "analytical", "learned", "fine", "parareal")
COARSE_KINDS = ("analytical", "learned")


@dataclass
class Prediction:
    states: np.ndarray  # (M, N+1, D) or (N+1, D) for a single trajectory
    model: str
    iterations: int = 0
    position_change: list = field(default_factory=list)
    yaw_change: list = field(default_factory=list)
    wall_time: float = 0.0
    fine_slices: int = 0


def parse_model(spec: str, default_iterations: int = 1) -> tuple[str, int]:
    """'parareal2' -> ('parareal', 2); 'fine' -> ('fine', 0). Raises ValueError naming the bad spec."""
    m = re.fullmatch(r"(coarse|analytical|learned|fine|parareal)(\d*)", str(spec).strip().lower())
    if not m or (m.group(2) and m.group(1) != "parareal"):
        raise ValueError(f"unknown model {spec!r} (expected one of: coarse, analytical, learned, fine, "
                         f"parareal, parareal<K>)")
    kind, k = m.group(1), m.group(2)
    return kind, (int(k) if k else (default_iterations if kind == "parareal" else 0))


class Predictor:
    """Holds one fine model and the coarse models of a scene, built on first use and reused."""

    def __init__(self, scene: Scene, coarse: str = "analytical", iterations: int = 1, tolerance: float = 0.0,
                 threads: int | None = None, learned_weights=None):
        if coarse not in COARSE_KINDS:
            raise ValueError(f"coarse model must be one of {COARSE_KINDS}, got {coarse!r}")
        self.scene = scene
        self.default_coarse = coarse
        self.default_iterations = int(iterations)
        self.tolerance = float(tolerance)
        self.threads = threads
        self.learned_weights = learned_weights
        self._fine = None
        self._coarse = {}

    @property
    def fine(self) -> FineModel:
        if self._fine is None:
            self._fine = FineModel(self.scene, threads=self.threads)
        return self._fine

    def coarse_model(self, kind: str | None = None):
        kind = kind or self.default_coarse
        if kind not in self._coarse:
            if kind == "analytical":
                self._coarse[kind] = AnalyticalCoarseModel(self.scene)
            elif kind == "learned":
                from .learned import LearnedCoarseModel  # noqa: PLC0415 (torch is imported only when asked for)
                self._coarse[kind] = LearnedCoarseModel.load(self.scene, self.learned_weights)
            else:
                raise ValueError(f"unknown coarse model {kind!r} (expected one of {COARSE_KINDS})")
        return self._coarse[kind]

    def close(self):
        if self._fine is not None:
            self._fine.close()

    def predict(self, x0, controls, dt: float, model: str = "parareal", iterations: int | None = None,
                tolerance: float | None = None, coarse: str | None = None) -> Prediction:
        """Predict the states after each control. ``x0`` (D,) or (M, D); ``controls`` (N, 2) or (M, N, 2)."""
        # an explicit K in the name ("parareal2") wins over ``iterations``, which wins over the default
        kind, k = parse_model(model, self.default_iterations if iterations is None else iterations)
        x0 = np.asarray(x0, dtype=float)
        controls = np.asarray(controls, dtype=float)
        single = x0.ndim == 1
        if single:
            x0, controls = x0[None], controls[None]
        if controls.ndim != 3 or controls.shape[-1] != 2 or controls.shape[0] != x0.shape[0]:
            raise ValueError(f"controls must be (N, 2) (or (M, N, 2) for a batch), got {controls.shape}")
        self.scene.layout.check(x0, "initial state")
        if not np.all(np.isfinite(controls)):
            raise ValueError("controls contain NaN or infinite values")
        t0 = time.perf_counter()
        if kind == "parareal":
            solver = Parareal(self.scene, self.coarse_model(coarse), self.fine)
            tol = self.tolerance if tolerance is None else tolerance
            r = solver.solve(x0, controls, dt, min(k, controls.shape[1]), tol)
            pred = Prediction(r.states, f"parareal{r.iterations}", r.iterations, r.position_change, r.yaw_change,
                              fine_slices=r.fine_slices)
        elif kind == "fine":
            pred = Prediction(rollout(self.fine, x0, controls, dt), "fine",
                              fine_slices=controls.shape[0] * controls.shape[1])
        else:
            cm = self.coarse_model(None if kind == "coarse" else kind)
            pred = Prediction(rollout(cm, x0, controls, dt), cm.name)
        pred.wall_time = time.perf_counter() - t0
        if single:
            pred.states = pred.states[0]
        return pred
