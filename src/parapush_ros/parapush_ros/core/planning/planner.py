"""The re-planning MPC planner (paper 000 Sec. 3).

``MPCPlanner`` owns a predictor, a task and an optimiser. Each ``plan(x)`` optimises from the observed state,
warm-started from the previous solution shifted by one control (the last control repeated); the very first plan
starts from the straight push at the goal. ``commit()`` records that the first control was executed. A plan may be
given a deadline (anytime: optimiser iterations until then, the best so far kept), and ``roll_forward`` predicts
where the scene will be when a plan made now starts (the real-time loop of ``planning.session``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..models.mjcf import TIMESTEP
from ..models.registry import ModelSpec, Predictor
from .optimisers import OptimiserResult, make_optimiser
from ..scene.projection import project_feasible
from ..scene.spec import Scene
from .tasks import CostWeights, Goal, PushTask


@dataclass(frozen=True)
class PlannerConfig:
    """Planner settings; defaults follow paper 000 Sec. 4.3 (N = 4 controls of 1 s, 20 samples, variance 1e-4)."""

    model: ModelSpec = ModelSpec("parareal", 1)  # predictive model (text such as "parareal1" is parsed)
    optimiser: str = "stochastic"  # stochastic (paper 000) | mppi (paper 004)
    horizon: int = 4  # controls per plan, N
    dt: float = 1.0  # s each control is held
    samples: int = 20  # sequences per optimiser iteration (current + noisy copies)
    iterations: int = 2  # optimiser iterations per plan (MPPI: decay steps); each is one batched prediction
    variance: float = 1e-4  # exploration variance per velocity component ((m/s)^2)
    max_speed: float = 0.1  # m/s, pusher speed limit
    nominal_speed: float = 0.05  # m/s, pushing speed of the straight-push and push-primitive candidates
    approach_speed: float = 0.08  # m/s, speed at which the push primitive walks the pusher round the target
    primitive: bool = True  # try the push primitive (tasks.PushTask.approach_and_push) as a candidate
    sensitivity: float = 10.0  # stochastic optimiser: h in exp(-h * normalised cost)
    temperature: float = 1.0  # MPPI lambda (cost units)
    decay: float = 0.7  # MPPI exploration variance factor per iteration
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "model", ModelSpec.parse(self.model))

    def optimiser_kwargs(self) -> dict:
        return dict(model=self.model, dt=self.dt, horizon=self.horizon, samples=self.samples,
                    iterations=self.iterations, variance=self.variance, max_speed=self.max_speed,
                    nominal_speed=self.nominal_speed, approach_speed=self.approach_speed,
                    primitive=self.primitive, sensitivity=self.sensitivity, temperature=self.temperature,
                    decay=self.decay, seed=self.seed)


@dataclass
class Plan:
    controls: np.ndarray  # (N, 2)
    states: np.ndarray  # (N+1, D) predicted, states[0] = the (projected) observed state
    cost: float
    terms: dict
    plan_time: float  # wall-clock seconds of this plan
    model: str  # the model that predicted, as text (e.g. "parareal1")
    result: OptimiserResult

    @property
    def spec(self) -> ModelSpec:
        """The model that predicted this plan, resolved (what ``PushPlan.model`` reports)."""
        return self.result.spec


class MPCPlanner:
    """Plans from observed states, re-planning after every executed control."""

    def __init__(self, scene: Scene, config: PlannerConfig = PlannerConfig(), task: PushTask | None = None,
                 predictor: Predictor | None = None, weights: CostWeights | None = None):
        self.scene = scene
        self.config = config
        self.task = task if task is not None else PushTask(scene, weights)
        self._own_predictor = predictor is None
        self.predictor = predictor if predictor is not None else Predictor(scene)
        self.optimiser = make_optimiser(config.optimiser, self.predictor, self.task, **config.optimiser_kwargs())
        self._warm = None
        self._u_prev = None
        self.last_plan: Plan | None = None

    def close(self):
        if self._own_predictor:
            self.predictor.close()

    def set_goal(self, goal: Goal):
        """Change the goal; the next plan starts from the straight push again."""
        self.task = self.task.with_goal(goal)
        self.optimiser.task = self.task
        self.reset()

    def reset(self):
        """Forget the warm start and the previous control (a new push)."""
        self._warm = None
        self._u_prev = None
        self.last_plan = None

    def plan(self, x, deadline: float | None = None, clock=time.perf_counter) -> Plan:
        """Optimise from the observed state ``x``; penetration from measurement noise is projected away first
        (the fine model would otherwise start with a violent separation). With a ``deadline`` (on ``clock``, s)
        the optimiser runs up to ``config.iterations`` iterations but starts none that would end after it."""
        t0 = time.perf_counter()
        x = self.scene.layout.check(x, "observed state")
        x, _ = project_feasible(self.scene, x)
        r = self.optimiser.optimise(x, initial=self._warm, u_prev=self._u_prev, deadline=deadline, clock=clock)
        self.last_plan = Plan(r.controls, r.states, r.cost, r.terms, time.perf_counter() - t0, r.model, r)
        return self.last_plan

    def commit(self):
        """The first control of the last plan was executed: warm-start the next plan from the rest."""
        if self.last_plan is None:
            raise RuntimeError("commit() without a plan")
        u = self.last_plan.controls
        self._warm = np.concatenate([u[1:], u[-1:]], axis=0)
        self._u_prev = u[0].copy()

    def warm_start(self, controls, u_prev):
        """Start the next plan from ``controls`` (N, 2), with ``u_prev`` the control running before it."""
        controls = np.array(controls, dtype=float)
        if controls.shape != (self.config.horizon, 2):
            raise ValueError(f"warm start must have shape ({self.config.horizon}, 2), got {controls.shape}")
        self._warm, self._u_prev = controls, np.array(u_prev, dtype=float)

    def roll_forward(self, x, segments) -> np.ndarray:
        """The state after holding each (from, to, u) of ``segments`` in turn from ``x``, predicted with the
        planner's model (durations rounded to the physics step; the observed ``x`` projected feasible first)."""
        x = self.scene.layout.check(x, "observed state")
        x, _ = project_feasible(self.scene, x)
        for a, b, u in segments:
            steps = int(round((b - a) / TIMESTEP))
            if steps >= 1:
                x = self.predictor.predict(x, np.asarray(u, dtype=float)[None], steps * TIMESTEP,
                                           model=self.config.model).states[-1]
        return x
