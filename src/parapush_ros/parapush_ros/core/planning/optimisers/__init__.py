"""Sampling trajectory optimisers for pushing, one file each, and their registry.

``OPTIMISERS`` maps a name to ``(class, Config)``. The planner, the ``mpc_planner`` node's parameters
(``<name>.<setting>``, generated from ``Config``), ``parapush bench mpc --optimiser`` and the checks of the
``optimiser`` setting all read it, so an optimiser is one file plus one ``register_optimiser`` line here.
"""
from __future__ import annotations

from typing import NamedTuple

from ...config import ConfigError
from ...models.registry import DEFAULT_MODEL
from .base import OptimiserResult, SamplingConfig, SamplingOptimiser
from .mppi import MPPI, MPPIConfig
from .mppi_ua import UncertaintyAverseConfig, UncertaintyAverseMPPI
from .stochastic import StochasticConfig, StochasticOptimiser


class Registered(NamedTuple):
    cls: type  # a SamplingOptimiser subclass
    config: type  # its frozen config dataclass (cls.Config)


OPTIMISERS: dict[str, Registered] = {}


def register_optimiser(name: str, cls: type):
    """Make ``cls`` (a ``SamplingOptimiser`` with its ``Config``) available as ``name``."""
    if not name.isidentifier() or name in OPTIMISERS:
        raise ValueError(f"optimiser name {name!r}: must be a new identifier (taken: {', '.join(OPTIMISERS)})")
    if not (isinstance(cls, type) and issubclass(cls, SamplingOptimiser) and cls.Config is not None):
        raise TypeError(f"optimiser {name!r}: {cls!r} is not a SamplingOptimiser with a Config")
    OPTIMISERS[name] = Registered(cls, cls.Config)


register_optimiser("stochastic", StochasticOptimiser)  # paper 000
register_optimiser("mppi", MPPI)  # paper 004, with exploration decay
register_optimiser("mppi_ua", UncertaintyAverseMPPI)  # paper 004 Algorithm 1 with eq. 11 (needs a variance)


def optimiser(name: str) -> Registered:
    """The registered optimiser ``name``; ``ConfigError`` naming the setting ``optimiser`` otherwise."""
    try:
        return OPTIMISERS[name]
    except (KeyError, TypeError):
        raise ConfigError("optimiser", f"{name!r} is not one of {', '.join(OPTIMISERS)}") from None


def make_optimiser(name: str, predictor, task, sampling: SamplingConfig = SamplingConfig(), config=None,
                   model: str = DEFAULT_MODEL) -> SamplingOptimiser:
    return optimiser(name).cls(predictor, task, sampling, config, model=model)


__all__ = [
    "MPPI",
    "OPTIMISERS",
    "MPPIConfig",
    "OptimiserResult",
    "SamplingConfig",
    "SamplingOptimiser",
    "StochasticConfig",
    "StochasticOptimiser",
    "UncertaintyAverseConfig",
    "UncertaintyAverseMPPI",
    "make_optimiser",
    "optimiser",
    "register_optimiser",
]
