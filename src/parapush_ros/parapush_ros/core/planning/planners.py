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
* ``auto`` (the node's default): ``fast`` where it was measured at least as good as ``mpc`` (one object, real
  time, the fine model), else ``mpc`` (``auto_planner``); the node says which and why.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..config import ConfigError
from ..models.registry import FINE, MODELS, PARAREAL, ModelSpec
from ..scene.spec import Scene
from .dgoc_push import DGOCConfig, build_dgoc
from .example_planner import StraightConfig, build_straight
from .fast_mpc import FastConfig, build_fast
from .low_uncertainty import LowUncertaintyConfig, build_alg2
from .mpc_push import build_mpc
from .session import PushStrategy

AUTO = "auto"


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
register_planner(AUTO, "fast where it is measured at least as good as mpc (planning in real time, one object, the "
                       "fine model or Parareal-1), else mpc; the node says which and why",
                 lambda scene, params: build_planner(AUTO, scene, params)[1])


def auto_planner(scene: Scene, params: dict) -> tuple[str, str]:
    """``planner: auto``: (``fast`` or ``mpc``, why), by where ``fast`` was measured at least as good as ``mpc``
    (docs/results/fast_mpc.md, "planner auto"): one object pushed in real time and re-scored with the fine model
    or Parareal-1 (10 Hz on 2 cores, cycle p95 0.06 s on a disc and 0.08-0.10 s on many-sided outlines, as
    successful, sooner to the goal, a tenth of the reaction time; Parareal-1 since it starts from the screened
    chain). ``mpc`` stays for stop-and-plan (paper
    000), for several objects (there ``fast`` moves the other objects more with its defaults), for Parareal-K with
    K >= 2 (K fine sweeps per re-scoring: Parareal-2 and -3 keep the 0.1 s cycle on 2 cores, but by abandoning
    3-31 % and 22-38 % of their re-scorings on many-sided outlines, where the plan is then the screen's) and for
    the coarse,
    learned and ensemble models (papers 001 and 004), which ``fast`` does not re-score with. ``params``: the
    planner node's (``realtime``, ``model``)."""
    if not params.get("realtime", False):
        return "mpc", "stop and plan (realtime false); fast plans only while the pusher moves"
    if len(scene.objects) != 1:
        return "mpc", (f"{len(scene.objects)} objects: with its defaults fast moves the others more than mpc; "
                       f"planner fast with config/fast_clutter.yaml to choose it")
    try:
        spec = ModelSpec.parse(params.get("model", ""))
    except ValueError as e:  # named as the planners' builds name it
        raise ValueError(f"parameter model: {e}") from None
    if spec.kind == PARAREAL and (spec.iterations or 1) > 1:  # the predictor's default K is 1
        return "mpc", (f"model {spec.name}: {spec.iterations} fine sweeps per re-scoring; on 2 cores fast abandoned "
                       f"Parareal-2's in 3-31 % of its cycles on many-sided outlines, Parareal-3's in 22-38 % (the "
                       f"plan is then the screen's); model parareal1 or fine, or planner fast, to re-plan at 10 Hz")
    if spec.kind == PARAREAL:
        return "fast", f"real time, one object, model {spec.name}"
    if not (spec.kind in MODELS and MODELS[spec.kind].role == FINE):
        return "mpc", f"model {spec.name}: fast re-scores with the fine model or parareal<K> only"
    return "fast", f"real time, one object, model {spec.name}"


def build_planner(name: str, scene: Scene, params: dict) -> tuple[RegisteredPlanner, PushStrategy, str]:
    """The planner ``name`` built for ``scene`` from the node's ``params``: (the registry entry of the planner that
    plans, its strategy, why: "" unless ``name`` is ``auto``). A bad setting is an error (``ValueError`` naming
    the parameter) whichever planner ``auto`` chose, never a switch to the other."""
    chosen, why = auto_planner(scene, params) if name == AUTO else (name, "")
    entry = planner_entry(chosen)
    return entry, entry.build(scene, params), why


def planner_entry(name: str) -> RegisteredPlanner:
    """The registered planner ``name``; ``ConfigError`` naming the setting ``planner`` otherwise."""
    try:
        return PLANNERS[name]
    except (KeyError, TypeError):
        raise ConfigError("planner", f"{name!r} is not one of {', '.join(PLANNERS)}") from None
