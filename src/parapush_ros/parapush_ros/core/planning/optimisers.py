"""Sampling trajectory optimisers for pushing: the stochastic optimiser of paper 000 and MPPI of paper 004.

Both search pusher velocity sequences u_0..u_{N-1} (held ``dt`` each) around a current sequence:

* every iteration draws noisy copies of the current sequence, rolls ALL of them out in ONE batched
  ``Predictor.predict`` call (so the fine or Parareal work of samples x slices is spread over the cores), scores
  them with the task cost and moves the sequence toward the cheap ones;
* sample 0 is always the current sequence itself (no noise); in the first iteration the next samples are the
  straight push at the goal (paper 000's first candidate), with ``primitive`` the push primitive of
  ``PushTask.approach_and_push`` (walk round to the push point, then push along the path), and holding still,
  so the warm start and these never get lost to noise;
* controls are clipped to the speed limit (by norm, keeping the direction);
* the result is the cheapest sequence evaluated in any iteration, with the states the model predicted for it, so
  the plan that is executed and shown is always one the model actually rolled out;
* when the prediction carries a ``variance`` (an ensemble coarse model, paper 004) the cost adds the
  uncertainty-averse term; models without one are scored without it.

``StochasticOptimiser`` (paper 000 / Agboh and Dogar): Gaussian noise of fixed variance, costs normalised to
[0, 1] per iteration and turned into weights exp(-h c), update = weighted mean of the samples.
``MPPI`` (paper 004 Algorithm 1): weights exp(-(S - S_min) / lambda) with temperature lambda, exploration
variance decaying geometrically over the iterations (the "decay steps").
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..models.registry import ModelSpec, Predictor
from .tasks import PushTask

OPTIMISERS = ("stochastic", "mppi")


@dataclass
class OptimiserResult:
    controls: np.ndarray  # (N, 2) the cheapest sequence evaluated
    states: np.ndarray  # (N+1, D) its predicted states
    cost: float
    terms: dict  # its cost terms by name
    initial_cost: float  # cost of the sequence the optimiser started from
    costs: list = field(default_factory=list)  # best cost so far after each iteration
    mean: np.ndarray | None = None  # (N, 2) the optimiser's updated sequence after the last iteration
    iterations: int = 0
    predict_calls: int = 0
    samples_evaluated: int = 0
    model: str = ""  # model name reported by the predictor (e.g. "parareal1")
    spec: ModelSpec | None = None  # the same, resolved (Prediction.spec)
    wall_time: float = 0.0
    predict_time: float = 0.0


class SamplingOptimiser(ABC):
    """Shared machinery; subclasses define the weights and the exploration schedule."""

    name = "base"

    def __init__(self, predictor: Predictor, task: PushTask, model: ModelSpec | str = "parareal1", dt: float = 1.0,
                 horizon: int = 4, samples: int = 20, iterations: int = 2, variance: float = 1e-4,
                 max_speed: float = 0.1, nominal_speed: float = 0.05, approach_speed: float = 0.08,
                 primitive: bool = True, seed: int | None = 0):
        _check(horizon >= 1, "horizon", horizon, ">= 1")
        _check(samples >= 2, "samples", samples, ">= 2 (the current sequence and at least one noisy copy)")
        _check(iterations >= 1, "iterations", iterations, ">= 1")
        _check(np.isfinite(variance) and variance >= 0.0, "variance", variance, "finite and >= 0")
        _check(np.isfinite(max_speed) and max_speed > 0.0, "max_speed", max_speed, "> 0")
        _check(0.0 < nominal_speed <= max_speed, "nominal_speed", nominal_speed, f"in (0, max_speed={max_speed}]")
        _check(0.0 < approach_speed <= max_speed, "approach_speed", approach_speed, f"in (0, max_speed={max_speed}]")
        _check(np.isfinite(dt) and dt > 0.0, "dt", dt, "> 0")
        self.predictor = predictor
        self.task = task
        self.model = ModelSpec.parse(model)
        self.dt = float(dt)
        self.horizon = int(horizon)
        self.samples = int(samples)
        self.iterations = int(iterations)
        self.variance = float(variance)
        self.max_speed = float(max_speed)
        self.nominal_speed = float(nominal_speed)
        self.approach_speed = float(approach_speed)
        self.primitive = bool(primitive)
        self.rng = np.random.default_rng(seed)

    # --- hooks
    def exploration_std(self, iteration: int) -> float:
        return float(np.sqrt(self.variance))

    @abstractmethod
    def weights(self, costs: np.ndarray) -> np.ndarray:
        """Non-negative weights of the samples from their costs (each optimiser's own rule)."""

    # --- helpers
    def clip(self, u: np.ndarray) -> np.ndarray:
        """Limit every control's speed to ``max_speed`` (by norm, keeping its direction)."""
        speed = np.linalg.norm(u, axis=-1, keepdims=True)
        return u * np.minimum(1.0, self.max_speed / np.maximum(speed, 1e-12))

    def straight_push(self, x0) -> np.ndarray:
        return self.task.straight_push(x0, self.nominal_speed, self.horizon)

    def candidates(self, x0) -> list:
        """Fixed candidates tried in the first iteration: the straight push, the push primitive, and holding
        still (the safe choice when every push is predicted to hit something)."""
        out = [self.straight_push(x0)]
        if self.primitive:
            out.append(self.task.approach_and_push(x0, self.nominal_speed, self.approach_speed, self.horizon,
                                                   self.dt))
        out.append(np.zeros((self.horizon, 2)))
        return out

    def rollout(self, x0, controls, u_prev=None):
        """ONE batched prediction of all sequences ``controls`` (M, N, 2) from ``x0``; returns (states, costs,
        terms, prediction)."""
        X0 = np.repeat(np.asarray(x0, dtype=float)[None], controls.shape[0], axis=0)
        pred = self.predictor.predict(X0, controls, self.dt, model=self.model)
        terms = self.task.cost_terms(pred.states, controls, u_prev, pred.variance)
        costs = np.zeros(controls.shape[0])
        for v in terms.values():
            costs = costs + v
        return pred.states, costs, terms, pred

    def optimise(self, x0, initial=None, u_prev=None, deadline: float | None = None,
                 clock=time.perf_counter) -> OptimiserResult:
        """Optimise from state ``x0`` (D,), starting at ``initial`` (N, 2) (default: the straight push);
        ``u_prev`` is the control executed just before (smoothness of the first control). Anytime with a
        ``deadline`` (s on ``clock``): after the first iteration, one more starts only if it is expected to end
        by then (at the mean duration of those so far); the best sequence so far is the result either way."""
        t_start = time.perf_counter()
        c_start = clock() if deadline is not None else 0.0
        x0 = self.task.layout.check(x0, "x0")
        mean = self.straight_push(x0) if initial is None else np.array(initial, dtype=float)
        if mean.shape != (self.horizon, 2) or not np.all(np.isfinite(mean)):
            raise ValueError(f"initial controls must be finite with shape ({self.horizon}, 2), got {mean.shape}")
        mean = self.clip(mean)
        fixed = self.candidates(x0)
        best = None  # (cost, controls, states, terms)
        result = OptimiserResult(controls=mean, states=np.empty(0), cost=np.inf, terms={}, initial_cost=np.nan)
        for it in range(self.iterations):
            if deadline is not None and it > 0:
                now = clock()
                if now + (now - c_start) / it > deadline:
                    break
            std = self.exploration_std(it)
            U = np.repeat(mean[None], self.samples, axis=0)
            first_noisy = 1
            if it == 0:
                for c in fixed:
                    if first_noisy < self.samples and not np.allclose(c, mean):
                        U[first_noisy] = c
                        first_noisy += 1
            U[first_noisy:] += self.rng.normal(0.0, std, size=U[first_noisy:].shape)
            U = self.clip(U)
            t0 = time.perf_counter()
            states, costs, terms, pred = self.rollout(x0, U, u_prev)
            result.predict_time += time.perf_counter() - t0
            result.predict_calls += 1
            result.samples_evaluated += len(U)
            result.model, result.spec = pred.model, pred.spec
            if it == 0:
                result.initial_cost = float(costs[0])
            k = int(np.argmin(costs))
            if best is None or costs[k] < best[0]:
                best = (float(costs[k]), U[k].copy(), states[k].copy(), {n: float(v[k]) for n, v in terms.items()})
            result.costs.append(best[0])
            w = self.weights(costs)
            mean = self.clip(mean + np.einsum("k,knd->nd", w, U - mean[None]))
            result.iterations = it + 1
        result.cost, result.controls, result.states, result.terms = best
        result.mean = mean
        result.wall_time = time.perf_counter() - t_start
        return result


class StochasticOptimiser(SamplingOptimiser):
    """Paper 000's stochastic trajectory optimiser (STOMP-like, Agboh and Dogar): costs normalised per iteration,
    weights exp(-h c), fixed exploration variance (default 1e-4, i.e. 1 cm/s per velocity component)."""

    name = "stochastic"

    def __init__(self, *args, sensitivity: float = 10.0, **kwargs):
        super().__init__(*args, **kwargs)
        _check(np.isfinite(sensitivity) and sensitivity > 0.0, "sensitivity", sensitivity, "> 0")
        self.sensitivity = float(sensitivity)

    def weights(self, costs):
        finite = np.where(np.isfinite(costs), costs, np.inf)
        lo, hi = finite.min(), finite[np.isfinite(finite)].max()
        c = (finite - lo) / (hi - lo) if hi > lo else np.zeros_like(finite)
        w = np.exp(-self.sensitivity * c)
        return w / w.sum()


class MPPI(SamplingOptimiser):
    """MPPI with exploration decay (paper 004 Algorithm 1): weights exp(-(S - S_min) / temperature); the
    exploration variance starts at ``variance`` and is multiplied by ``decay`` after every iteration."""

    name = "mppi"

    def __init__(self, *args, temperature: float = 1.0, decay: float = 0.7, **kwargs):
        super().__init__(*args, **kwargs)
        _check(np.isfinite(temperature) and temperature > 0.0, "temperature", temperature, "> 0")
        _check(0.0 < decay <= 1.0, "decay", decay, "in (0, 1]")
        self.temperature = float(temperature)
        self.decay = float(decay)

    def exploration_std(self, iteration: int) -> float:
        return float(np.sqrt(self.variance * self.decay ** iteration))

    def weights(self, costs):
        s = np.where(np.isfinite(costs), costs, np.inf)
        w = np.exp(-(s - s.min()) / self.temperature)
        return w / w.sum()


def make_optimiser(kind: str, predictor: Predictor, task: PushTask, **kwargs) -> SamplingOptimiser:
    """``kind`` = 'stochastic' | 'mppi'; MPPI-only options (temperature, decay) are dropped for the other."""
    if kind == "stochastic":
        kwargs.pop("temperature", None)
        kwargs.pop("decay", None)
        return StochasticOptimiser(predictor, task, **kwargs)
    if kind == "mppi":
        kwargs.pop("sensitivity", None)
        return MPPI(predictor, task, **kwargs)
    raise ValueError(f"unknown optimiser {kind!r} (expected one of {', '.join(OPTIMISERS)})")


def _check(ok, name, value, what):
    if not ok:
        raise ValueError(f"optimiser parameter {name}: must be {what}, got {value!r}")
