"""What every sampling optimiser shares: the settings (``SamplingConfig``), the result, and the loop.

An optimiser searches pusher velocity sequences u_0..u_{N-1} (held ``control_duration`` each) around a current
sequence:

* every iteration draws noisy copies of the current sequence, rolls ALL of them out in ONE batched
  ``Predictor.predict`` call (so the fine or Parareal work of samples x slices is spread over the cores), scores
  them with the task cost and moves the sequence toward the cheap ones;
* sample 0 is always the current sequence itself (no noise); in the first iteration the next samples are the
  task's proposals (``PushTask.proposals``: the straight push at the goal, paper 000's first candidate, the push
  primitive and holding still), so the warm start and these never get lost to noise; the first proposal is also
  the start when there is no warm start;
* controls are clipped to the speed limit (by norm, keeping the direction);
* the result is the cheapest sequence evaluated in any iteration, with the states the model predicted for it, so
  the plan that is executed and shown is always one the model actually rolled out;
* when the prediction carries a ``variance`` (an ensemble coarse model, paper 004) the cost adds the
  uncertainty-averse term; models without one are scored without it.

A subclass defines only its weights (and, if it wants, its exploration schedule) and has its own frozen config
dataclass; ``__init__.py`` registers the pair under a name (see "Adding an optimiser" in docs/extending.md).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ...config import finite, knob, require
from ...models.mjcf import TIMESTEP
from ...models.registry import DEFAULT_MODEL, ModelSpec
from ..tasks import ranked_costs, unknown_where_variance_is


@dataclass(frozen=True)
class SamplingConfig:
    """Settings of every sampling optimiser; defaults follow paper 000 Sec. 4.3 (N = 4 controls of 1 s, 20 samples,
    variance 1e-4)."""

    horizon: int = knob(4, "controls per plan, N")
    control_duration: float = knob(1.0, "seconds each planned control is held (a multiple of the 1 ms physics "
                                        "step)")
    samples: int = knob(20, "control sequences per optimiser iteration (the current one and noisy copies, rolled "
                            "out in one batched prediction)")
    iterations: int = knob(2, "optimiser iterations per plan (MPPI: exploration decay steps)")
    exploration_variance: float = knob(1e-4, "variance of the sampling noise per velocity component ((m/s)^2)")
    max_speed: float = knob(0.1, "pusher speed limit of planned controls (m/s)")
    seed: int = knob(0, "seed of the optimiser's sampling noise")

    def __post_init__(self):
        require(self.horizon >= 1, "horizon", self.horizon, ">= 1")
        require(self.samples >= 2, "samples", self.samples, ">= 2 (the current sequence and at least one noisy copy)")
        require(self.iterations >= 1, "iterations", self.iterations, ">= 1")
        steps = self.control_duration / TIMESTEP if finite(self.control_duration) else float("nan")
        require(self.control_duration > 0.0 and abs(steps - round(steps)) < 1e-6, "control_duration",
                self.control_duration, f"a positive multiple of the {TIMESTEP} s physics step")
        require(finite(self.exploration_variance) and self.exploration_variance >= 0.0, "exploration_variance",
                self.exploration_variance, "finite and >= 0")
        require(finite(self.max_speed) and self.max_speed > 0.0, "max_speed", self.max_speed, "> 0")


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
    variance: np.ndarray | None = None  # (N+1, D) predicted variance of ``states`` (None: the model gives none)


class SamplingOptimiser(ABC):
    """The shared loop; a subclass sets ``Config`` (its settings dataclass) and defines ``weights``."""

    Config = None  # the optimiser's own frozen config dataclass

    def __init__(self, predictor, task, sampling: SamplingConfig = SamplingConfig(), config=None,
                 model: ModelSpec | str = DEFAULT_MODEL):
        """``predictor``: a ``Predictor``; ``task``: scores states and proposes sequences (``PushTask``);
        ``config``: an instance of ``Config`` (None = its defaults); ``model``: the predictor's model (a
        ``ModelSpec`` or its text)."""
        if config is None:
            config = self.Config()
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} takes a {self.Config.__name__}, got {type(config).__name__}")
        self.predictor = predictor
        self.task = task
        self.sampling = sampling
        self.config = config
        self.model = ModelSpec.parse(model)
        self.rng = np.random.default_rng(sampling.seed)

    # --- hooks
    def reset(self):  # noqa: B027 - a hook that most optimisers leave empty: they keep nothing between pushes
        """A new push (``MPCPlanner.reset``): forget what belongs to the previous one (e.g. a schedule of plans)."""

    def exploration_std(self, iteration: int) -> float:
        return float(np.sqrt(self.sampling.exploration_variance))

    @abstractmethod
    def weights(self, costs: np.ndarray) -> np.ndarray:
        """Non-negative weights of the samples from their costs (each optimiser's own rule)."""

    # --- helpers
    def clip(self, u: np.ndarray) -> np.ndarray:
        """Limit every control's speed to ``max_speed`` (by norm, keeping its direction)."""
        speed = np.linalg.norm(u, axis=-1, keepdims=True)
        return u * np.minimum(1.0, self.sampling.max_speed / np.maximum(speed, 1e-12))

    def rollout(self, x0, controls, u_prev=None):
        """ONE batched prediction of all sequences ``controls`` (M, N, 2) from ``x0``; returns (states, costs,
        terms, prediction)."""
        X0 = np.repeat(np.asarray(x0, dtype=float)[None], controls.shape[0], axis=0)
        pred = self.predictor.predict(X0, controls, self.sampling.control_duration, model=self.model)
        terms = self.task.cost_terms(pred.states, controls, u_prev, pred.variance)
        costs = np.zeros(controls.shape[0])
        for v in terms.values():
            costs = costs + v
        return pred.states, costs, terms, pred

    def optimise(self, x0, initial=None, u_prev=None, deadline: float | None = None,
                 clock=time.perf_counter) -> OptimiserResult:
        """Optimise from state ``x0`` (D,), starting at ``initial`` (N, 2) (default: the task's first proposal);
        ``u_prev`` is the control executed just before (smoothness of the first control). Anytime with a
        ``deadline`` (s on ``clock``): after the first iteration, one more starts only if it is expected to end
        by then (at the mean duration of those so far); the best sequence so far is the result either way."""
        t_start = time.perf_counter()
        c_start = clock() if deadline is not None else 0.0
        s = self.sampling
        x0 = self.task.layout.check(x0, "x0")
        proposals = self.task.proposals(x0, s.horizon, s.control_duration)
        mean = np.array(proposals[0] if initial is None else initial, dtype=float)
        if mean.shape != (s.horizon, 2) or not np.all(np.isfinite(mean)):
            raise ValueError(f"initial controls must be finite with shape ({s.horizon}, 2), got {mean.shape}")
        mean = self.clip(mean)
        best = None  # (cost, controls, states, terms, variance)
        result = OptimiserResult(controls=mean, states=np.empty(0), cost=np.inf, terms={}, initial_cost=np.nan)
        for it in range(s.iterations):
            if deadline is not None and it > 0:
                now = clock()
                if now >= deadline or now + (now - c_start) / it > deadline:  # (a stopping push's clock: inf)
                    break
            std = self.exploration_std(it)
            U = np.repeat(mean[None], s.samples, axis=0)
            first_noisy = 1
            if it == 0:
                for c in proposals:
                    if first_noisy < s.samples and not np.allclose(c, mean):
                        U[first_noisy] = c
                        first_noisy += 1
            U[first_noisy:] += self.rng.normal(0.0, std, size=U[first_noisy:].shape)
            U = self.clip(U)
            t0 = time.perf_counter()
            states, costs, terms, pred = self.rollout(x0, U, u_prev)
            costs = unknown_where_variance_is(costs, pred.variance)
            result.predict_time += time.perf_counter() - t0
            result.predict_calls += 1
            result.samples_evaluated += len(U)
            result.model, result.spec = pred.model, pred.spec
            if not np.any(np.isfinite(costs)):  # no sample to weigh: say why instead of failing inside weights()
                raise ValueError(f"the {pred.model} model gave none of the {len(U)} samples a finite cost "
                                 f"(non-finite predicted states or variance)")
            if it == 0:
                result.initial_cost = float(costs[0])
            k = int(np.argmin(ranked_costs(costs)))  # a NaN cost is never the best
            if best is None or costs[k] < best[0]:
                best = (float(costs[k]), U[k].copy(), states[k].copy(), {n: float(v[k]) for n, v in terms.items()},
                        None if pred.variance is None else pred.variance[k].copy())
            result.costs.append(best[0])
            w = self.weights(costs)
            mean = self.clip(mean + np.einsum("k,knd->nd", w, U - mean[None]))
            result.iterations = it + 1
        result.cost, result.controls, result.states, result.terms, result.variance = best
        result.mean = mean
        result.wall_time = time.perf_counter() - t_start
        return result
