"""The push planners of the stack and their registry: what the planner node's ``planner`` parameter chooses.

``PLANNERS`` maps a name to a ``RegisteredPlanner``: its description, its build function, its settings (a config
dataclass whose ``knob`` fields become the node's parameters ``<name>.<setting>``; None when they are declared
elsewhere) and whether its goals need a yaw. The node, ``parapush sim --planner`` and the launch argument
``planner`` read it.

A planner is one module and one ``register_planner`` line here: its strategy (``session.PushStrategy``: plan, hand
the commands over, say what its plans are) plugged into the one push loop (``session.PushSession``: goal, stop,
pauses, judging, reporting), and a build function ``build(scene, params) -> PushStrategy`` that makes it from the
node's parameters (a plain dict: ``<name>.<setting>`` and the node's own), raising ``ValueError`` naming the
parameter. The node publishes its plans from the strategy's ``plan_view`` (``PushPlan``, Path, markers, feedback).

* ``mpc``: the sampling MPC (papers 000, 001, 004) of ``planner.MPCPlanner``: ``mpc_push.MPCPush``; its settings
  are ``PlannerConfig``'s, declared by their own names.
* ``alg2``: paper 004's Algorithm 2: a low-uncertainty path against a Monte-Carlo heat-map of an ensemble's
  variance, tracked by the sampling MPC without the uncertainty term (``low_uncertainty.LowUncertaintyPush``);
  the MPC's settings as for ``mpc``, its own ``alg2.<name>`` from ``LowUncertaintyConfig``.
* ``dgoc``: demonstration-guided optimal control (paper 003): a whole DDP plan to a goal *pose*, tracked at 100 Hz
  (``dgoc_push.DGOCPush``); settings ``dgoc.<name>`` from ``DGOCConfig``.
* ``fast``: anytime receding-horizon MPC at ``fast.replan_rate`` Hz: velocity knots of a spline,
  candidates screened on a batched coarse model, the best few re-scored with the planner's ``model`` (fine or
  Parareal-K), warm-started from the running plan shifted by the time elapsed (``fast_mpc.FastMPCPush``); the MPC's
  model, speeds and weights, its own ``fast.<name>`` from ``FastConfig``. Real time only.
* ``straight``: the example of adding a planner (``example_planner.StraightPush``): a straight line to the goal.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..config import ConfigError
from .dgoc_push import DGOCConfig, build_dgoc
from .example_planner import StraightConfig, build_straight
from .fast_mpc import FastConfig, build_fast
from .low_uncertainty import LowUncertaintyConfig, build_alg2
from .mpc_push import build_mpc


class RegisteredPlanner(NamedTuple):
    name: str
    description: str
    build: Callable  # build(scene, params: dict) -> session.PushStrategy (ValueError naming a bad parameter)
    config: type | None  # its settings' dataclass (parameters <name>.<setting>); None: declared by the node itself
    needs_yaw: bool  # goals must give a yaw (and a yaw tolerance >= 0)
    # what the stack's bring-up (``bringup.node_parameters``: the launch files and ``parapush sim``) uses with it:
    launch_defaults: dict  # launch arguments the planner fills where the user left them empty (e.g. its scene)
    node_parameters: dict  # {node: {parameter: value}} it needs on top of the config files
    sim_parameters: dict  # the same, in the simulation only (never loosens the real robot's limits)


PLANNERS: dict[str, RegisteredPlanner] = {}


def register_planner(name: str, description: str, build: Callable, config: type | None = None,
                     needs_yaw: bool = False, launch_defaults: dict | None = None,
                     node_parameters: dict | None = None, sim_parameters: dict | None = None):
    if not name.isidentifier() or name in PLANNERS:
        raise ValueError(f"planner name {name!r}: must be a new identifier (taken: {', '.join(PLANNERS)})")
    PLANNERS[name] = RegisteredPlanner(name, description, build, config, needs_yaw, dict(launch_defaults or {}),
                                       dict(node_parameters or {}), dict(sim_parameters or {}))


register_planner("mpc", "sampling MPC with a physics or learned model, re-planned every control (papers 000/001/004)",
                 build_mpc)
register_planner("alg2", "paper 004 Algorithm 2: a low-uncertainty path (Monte-Carlo heat-map of an ensemble's "
                         "variance, workspace limits) tracked by the sampling MPC without the uncertainty term",
                 build_alg2, LowUncertaintyConfig,
                 # a clutter scene of the learned models' family, the path tracked by Algorithm 1 (mppi) on the
                 # single learned network; the heat-map comes from learned_ensemble (alg2.heat_model)
                 launch_defaults={"scene": "clutter_push", "model": "learned"},
                 node_parameters={"mpc_planner": {"optimiser": "mppi"}})
register_planner("dgoc", "demonstration-guided DDP to a goal pose, tracked at 100 Hz (paper 003; box objects)",
                 build_dgoc, DGOCConfig, needs_yaw=True,
                 launch_defaults={"scene": "block_003"},  # paper 003's block: its demonstrations are shipped
                 # DG-OC's plans reach 0.15 m/s per axis and the tracker clips at 0.25 m/s, above the commander's
                 # 0.1 m/s and 0.5 m/s^2 defaults; on the robot the limits stay the user's (config/robot.yaml)
                 sim_parameters={"velocity_commander": {"max_speed": 0.25, "max_acceleration": 2.0}})
register_planner("fast", "anytime MPC re-planned at fast.replan_rate Hz: spline knots, candidates screened on a "
                         "coarse model, the best re-scored with the fine model or Parareal-K",
                 build_fast, FastConfig)
register_planner("straight", "example: the pusher aimed along the straight line to the goal (no model)",
                 build_straight, StraightConfig)


def planner_entry(name: str) -> RegisteredPlanner:
    """The registered planner ``name``; ``ConfigError`` naming the setting ``planner`` otherwise."""
    try:
        return PLANNERS[name]
    except (KeyError, TypeError):
        raise ConfigError("planner", f"{name!r} is not one of {', '.join(PLANNERS)}") from None
