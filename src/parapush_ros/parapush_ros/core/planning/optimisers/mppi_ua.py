"""Uncertainty-averse MPPI (paper 004 Algorithm 1 with the running cost of eq. 11): MPPI with exploration decay
whose cost adds ``uncertainty_weight`` times the predicted variance of the object positions summed over the
running states, for the first ``uncertainty_plans`` plans (the paper's Exp. 3 penalises uncertainty for 150
pushes and then switches the term off, so the goal is reached even when it lies in an uncertain region).

Why an optimiser of its own and not only the task's ``variance`` weight: this one *needs* a model that predicts a
variance (an ensemble) and says so instead of silently planning without the term, and it owns the schedule. Its
term replaces the task's ``variance`` term (one uncertainty term per cost, named ``uncertainty``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import finite, knob, require
from .mppi import MPPI, MPPIConfig


@dataclass(frozen=True)
class UncertaintyAverseConfig(MPPIConfig):
    # per m^2 as the task's other_motion weighs another object's squared displacement: a predicted spread of sigma
    # costs what moving another object by sigma does. (1.0 left the term at ~1e-4 of a plan's cost: mppi_ua planned
    # as mppi. Measured in clutter, docs/results/uncertainty.md "The uncertainty weight of mppi_ua".)
    uncertainty_weight: float = knob(1000.0, "eq. 11 constant: cost per m^2 of predicted object-position variance, "
                                             "summed over the running states")
    uncertainty_plans: int = knob(0, "plans after which the uncertainty term is switched off (paper 004 Exp. 3: "
                                     "150 pushes); 0 = never")

    def __post_init__(self):
        super().__post_init__()
        require(finite(self.uncertainty_weight) and self.uncertainty_weight >= 0.0, "uncertainty_weight",
                self.uncertainty_weight, "finite and >= 0")
        require(int(self.uncertainty_plans) == self.uncertainty_plans and self.uncertainty_plans >= 0,
                "uncertainty_plans", self.uncertainty_plans, "an integer >= 0")


class UncertaintyAverseMPPI(MPPI):
    Config = UncertaintyAverseConfig

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plans = 0  # optimise() calls in this push so far (the schedule of uncertainty_plans)

    def reset(self):
        """A new push: the term is on again for its first ``uncertainty_plans`` plans (the paper's schedule is per
        push to a goal, not per planner's life)."""
        self.plans = 0

    @property
    def uncertainty_on(self) -> bool:
        return self.config.uncertainty_plans == 0 or self.plans < self.config.uncertainty_plans

    def optimise(self, *args, **kwargs):
        try:
            return super().optimise(*args, **kwargs)
        finally:
            self.plans += 1

    def rollout(self, x0, controls, u_prev=None):
        X0 = np.repeat(np.asarray(x0, dtype=float)[None], controls.shape[0], axis=0)
        pred = self.predictor.predict(X0, controls, self.sampling.control_duration, model=self.model)
        if pred.variance is None:
            raise ValueError(f"optimiser mppi_ua: model {pred.model!r} predicts no variance; use a model that does "
                             f"(an ensemble) or optimiser mppi")
        terms = self.task.cost_terms(pred.states, controls, u_prev)  # without the task's own variance term
        var = np.asarray(pred.variance, dtype=float)
        if var.ndim == 3:
            var = var[..., self.task.layout.position_indices].sum(-1)
        weight = self.config.uncertainty_weight if self.uncertainty_on else 0.0
        terms["uncertainty"] = weight * var[:, 1:].sum(-1)
        costs = np.zeros(controls.shape[0])
        for v in terms.values():
            costs = costs + v
        return pred.states, costs, terms, pred
