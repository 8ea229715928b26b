"""The re-planning MPC planner (paper 000 Sec. 3).

``MPCPlanner`` owns a predictor, a task and an optimiser (any of ``optimisers.OPTIMISERS``, with the task's
proposals set from the config). Each ``plan(x)`` optimises from the observed state,
warm-started from the previous solution shifted by one control (the last control repeated); the very first plan
starts from the straight push at the goal. ``commit()`` records that the first control was executed. A plan may be
given a deadline (anytime: optimiser iterations until then, the best so far kept), and ``roll_forward`` predicts
where the scene will be when a plan made now starts (the real-time loop of ``planning.session``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..config import ConfigError, from_values, knob, knobs, require
from ..models.mjcf import TIMESTEP
from ..models.registry import DEFAULT_MODEL, PARAREAL, ModelSpec, Predictor, model_description, predicts_slices
from ..scene.projection import project_feasible
from ..scene.spec import Scene
from .optimisers import OPTIMISERS, OptimiserResult, SamplingConfig, make_optimiser, optimiser
from .tasks import CostWeights, Goal, ProposalConfig, PushTask


@dataclass(frozen=True)
class PlannerConfig:
    """Planner settings: the model, the optimiser and its own settings, the sampling settings every optimiser shares
    and the task's proposals. Defaults follow paper 000 Sec. 4.3 (N = 4 controls of 1 s, 20 samples, variance 1e-4).

    As parameters (``settings()``, ``from_values``): ``model``, ``optimiser``, the ``SamplingConfig`` and
    ``ProposalConfig`` settings by their own names, and every registered optimiser's settings as
    ``<optimiser>.<name>`` (e.g. ``mppi.temperature``); the one of the chosen optimiser is used."""

    model: ModelSpec = knob(DEFAULT_MODEL, model_description())  # text is parsed into a ModelSpec
    optimiser: str = knob("stochastic", "sampling optimiser (core/planning/optimisers): "
                                        + " | ".join(OPTIMISERS))
    sampling: SamplingConfig = SamplingConfig()
    proposals: ProposalConfig = ProposalConfig()
    optimiser_config: object = None  # the chosen optimiser's Config; None = its defaults

    def __post_init__(self):
        try:
            object.__setattr__(self, "model", ModelSpec.parse(self.model))
        except ValueError as e:
            raise ConfigError("model", str(e)) from None
        config_class = optimiser(self.optimiser).config
        if self.optimiser_config is None:
            object.__setattr__(self, "optimiser_config", config_class())
        elif not isinstance(self.optimiser_config, config_class):
            raise ConfigError("optimiser_config", f"must be a {config_class.__name__} for optimiser "
                                                  f"{self.optimiser!r}, got {type(self.optimiser_config).__name__}")
        for name in ("nominal_speed", "approach_speed"):
            v = getattr(self.proposals, name)
            require(v <= self.sampling.max_speed, name, v, f"in (0, max_speed={self.sampling.max_speed}]")

    @classmethod
    def settings(cls) -> dict:
        """Every setting by its parameter name: {name: (default, description)}."""
        out = {**knobs(cls), **knobs(SamplingConfig), **knobs(ProposalConfig)}
        for name, registered in OPTIMISERS.items():
            out.update({f"{name}.{k}": v for k, v in knobs(registered.config).items()})
        return out

    @classmethod
    def from_values(cls, values) -> PlannerConfig:
        """From a mapping of setting names as ``settings()`` spells them (ROS parameters); missing ones keep their
        defaults. Every optimiser's settings are checked, the chosen one's used. ``ConfigError`` names the
        setting."""
        name = values.get("optimiser", cls.optimiser)
        configs = {other: from_values(registered.config, values, prefix=f"{other}.")  # all checked, one used
                   for other, registered in OPTIMISERS.items()}
        return cls(model=values.get("model", cls.model), optimiser=name,
                   sampling=from_values(SamplingConfig, values), proposals=from_values(ProposalConfig, values),
                   optimiser_config=configs.get(name))


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
    def variance(self) -> np.ndarray | None:
        """(N+1, D) predicted variance of ``states`` when the model predicts one (an ensemble), else None."""
        return self.result.variance

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
        self.task = (task if task is not None else PushTask(scene, weights)).with_proposal(config.proposals)
        self._own_predictor = predictor is None
        dt = config.sampling.control_duration
        self.predictor = predictor if predictor is not None else Predictor(scene, slice_s=dt)
        self.predictor.check_slices(config.model, dt)
        self.optimiser = make_optimiser(config.optimiser, self.predictor, self.task, config.sampling,
                                        config.optimiser_config, model=config.model)
        self._warm = None
        self._u_prev = None
        self.last_plan: Plan | None = None

    def close(self):
        if self._own_predictor:
            self.predictor.close()

    def set_goal(self, goal: Goal):
        """Change the goal; the next plan starts from the straight push again."""
        self.aim(goal)
        self.reset()

    def aim(self, goal: Goal):
        """Aim the next plans at ``goal`` keeping the warm start: a way-point along a path, the push goes on."""
        self.task = self.task.with_goal(goal)
        self.optimiser.task = self.task

    def reset(self):
        """Forget the warm start, the previous control and the optimiser's state of the push (a new push)."""
        self._warm = None
        self._u_prev = None
        self.last_plan = None
        self.optimiser.reset()

    def plan(self, x, deadline: float | None = None, clock=time.perf_counter) -> Plan:
        """Optimise from the observed state ``x``; penetration from measurement noise is projected away first
        (the fine model would otherwise start with a violent separation). With a ``deadline`` (on ``clock``, s)
        the optimiser runs up to ``config.sampling.iterations`` iterations but starts none that would end after it."""
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
        if controls.shape != (self.config.sampling.horizon, 2):
            raise ValueError(f"warm start must have shape ({self.config.sampling.horizon}, 2), got {controls.shape}")
        self._warm, self._u_prev = controls, np.array(u_prev, dtype=float)

    def roll_forward(self, x, segments) -> np.ndarray:
        """The state after holding each (from, to, u) of ``segments`` in turn from ``x``, predicted with the
        planner's model (durations rounded to the physics step; the observed ``x`` projected feasible first).

        Each segment is one slice, usually a fraction of a control. One slice of Parareal-K (K >= 1) is exactly the
        fine propagator's, so Parareal predicts it with the fine model directly; a model that only predicts whole
        slices of a fixed length (the learned coarse model: 1 s) predicts a segment that is not a whole number of
        them with the fine model too (without it, Parareal on the learned model failed every start-state prediction)."""
        x = self.scene.layout.check(x, "observed state")
        x, _ = project_feasible(self.scene, x)
        spec = self.predictor.resolve(self.config.model)
        if spec.kind == PARAREAL and spec.iterations >= 1:
            spec = ModelSpec(spec.fine)
        for a, b, u in segments:
            steps = int(round((b - a) / TIMESTEP))
            if steps >= 1:
                dt = steps * TIMESTEP
                model = spec if spec.kind == PARAREAL or predicts_slices(self.predictor.model(spec.kind), dt) else \
                    ModelSpec(self.predictor.default_fine)
                x = self.predictor.predict(x, np.asarray(u, dtype=float)[None], dt, model=model).states[-1]
        return x
