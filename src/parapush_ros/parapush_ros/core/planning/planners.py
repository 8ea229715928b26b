"""The push planners of the stack and their registry: what the planner node's ``planner`` parameter chooses.

``PLANNERS`` maps a name to a ``RegisteredPlanner``: its description, its settings (a config dataclass whose
``knob`` fields become the node's parameters ``<name>.<setting>``; None when they are declared elsewhere) and
whether its goals need a yaw. The node, ``parapush sim --planner`` and the launch argument ``planner`` read it, so
a planner is its core push loop (``PushIO`` in, ``SessionResult`` out, ``stop``/``set_goal`` from other threads,
as ``session.PushSession``) plus one ``register_planner`` line here.

* ``mpc``: the sampling MPC (papers 000, 001, 004) of ``planner.MPCPlanner`` in ``session.PushSession``; its
  settings are ``PlannerConfig``'s, declared by their own names.
* ``alg2``: paper 004's Algorithm 2: a low-uncertainty path against a Monte-Carlo heat-map of an ensemble's
  variance, tracked by the sampling MPC without the uncertainty term (``low_uncertainty.LowUncertaintySession``);
  the MPC's settings as for ``mpc``, its own ``alg2.<name>`` from ``LowUncertaintyConfig``.
* ``dgoc``: demonstration-guided optimal control (paper 003): a whole DDP plan to a goal *pose*, tracked at 100 Hz
  (``dgoc_session.DGOCSession``); settings ``dgoc.<name>`` from ``DGOCConfig``.
"""
from __future__ import annotations

from typing import NamedTuple

from ..config import ConfigError
from .dgoc_session import DGOCConfig
from .low_uncertainty import LowUncertaintyConfig


class RegisteredPlanner(NamedTuple):
    name: str
    description: str
    config: type | None  # its settings' dataclass (parameters <name>.<setting>); None: declared by the node itself
    needs_yaw: bool  # goals must give a yaw (and a yaw tolerance >= 0)


PLANNERS: dict[str, RegisteredPlanner] = {}


def register_planner(name: str, description: str, config: type | None = None, needs_yaw: bool = False):
    if not name.isidentifier() or name in PLANNERS:
        raise ValueError(f"planner name {name!r}: must be a new identifier (taken: {', '.join(PLANNERS)})")
    PLANNERS[name] = RegisteredPlanner(name, description, config, needs_yaw)


register_planner("mpc", "sampling MPC with a physics or learned model, re-planned every control (papers 000/001/004)")
register_planner("alg2", "paper 004 Algorithm 2: a low-uncertainty path (Monte-Carlo heat-map of an ensemble's "
                         "variance, workspace limits) tracked by the sampling MPC without the uncertainty term",
                 LowUncertaintyConfig)
register_planner("dgoc", "demonstration-guided DDP to a goal pose, tracked at 100 Hz (paper 003; box objects)",
                 DGOCConfig, needs_yaw=True)


def planner_entry(name: str) -> RegisteredPlanner:
    """The registered planner ``name``; ``ConfigError`` naming the setting ``planner`` otherwise."""
    try:
        return PLANNERS[name]
    except (KeyError, TypeError):
        raise ConfigError("planner", f"{name!r} is not one of {', '.join(PLANNERS)}") from None
