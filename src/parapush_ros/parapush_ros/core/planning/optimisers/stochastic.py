"""Paper 000's stochastic trajectory optimiser (STOMP-like, Agboh and Dogar): costs normalised to [0, 1] per
iteration and turned into weights exp(-h c); update = weighted mean of the samples; fixed exploration variance."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import finite, knob, require
from ..tasks import ranked_costs
from .base import SamplingOptimiser


@dataclass(frozen=True)
class StochasticConfig:
    sensitivity: float = knob(10.0, "h in the weights exp(-h * normalised cost)")

    def __post_init__(self):
        require(finite(self.sensitivity) and self.sensitivity > 0.0, "sensitivity", self.sensitivity, "> 0")


class StochasticOptimiser(SamplingOptimiser):
    Config = StochasticConfig

    def weights(self, costs):
        finite_costs = ranked_costs(costs)
        lo, hi = finite_costs.min(), finite_costs[np.isfinite(finite_costs)].max()
        # all finite costs equal: they weigh alike, and a sample the model could not predict (ranked +inf) nothing
        c = (finite_costs - lo) / (hi - lo) if hi > lo else np.where(np.isfinite(finite_costs), 0.0, np.inf)
        w = np.exp(-self.config.sensitivity * c)
        return w / w.sum()
