"""MPPI with exploration decay (paper 004 Algorithm 1): weights exp(-(S - S_min) / lambda) with temperature
lambda; the exploration variance starts at ``exploration_variance`` and is multiplied by ``decay`` after every
iteration (the "decay steps")."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import finite, knob, require
from ..tasks import ranked_costs
from .base import SamplingOptimiser


@dataclass(frozen=True)
class MPPIConfig:
    temperature: float = knob(1.0, "temperature lambda of the weights exp(-(S - S_min) / lambda) (cost units)")
    decay: float = knob(0.7, "exploration variance factor per iteration, in (0, 1]")

    def __post_init__(self):
        require(finite(self.temperature) and self.temperature > 0.0, "temperature", self.temperature, "> 0")
        require(finite(self.decay) and 0.0 < self.decay <= 1.0, "decay", self.decay, "in (0, 1]")


def mppi_weights(costs, temperature: float) -> np.ndarray:
    """MPPI's sample weights (paper 004 eq. 8): exp(-(S - S_min) / lambda), normalised; a non-finite cost weighs
    0. Shared by this optimiser and the push-primitive MPPI (``planning.uncertainty_mppi``)."""
    s = ranked_costs(costs)
    w = np.exp(-(s - s.min()) / temperature)
    return w / w.sum()


class MPPI(SamplingOptimiser):
    Config = MPPIConfig

    def exploration_std(self, iteration: int) -> float:
        return float(np.sqrt(self.sampling.exploration_variance * self.config.decay ** iteration))

    def weights(self, costs):
        return mppi_weights(costs, self.config.temperature)
