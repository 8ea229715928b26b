"""The one push loop (``session.PushSession``) with every registered planner's strategy: the safety-relevant pauses
are the session's, written once, so each planner pauses on a clock jump, refuses scene states stamped further from
its clock than ``max_clock_offset`` and refuses a start deeper inside a body than ``max_start_penetration``. Real
MuJoCo worlds on simulated time (``WorldIO``), a plan clock that does not move: the same on any host."""
from dataclasses import replace

import numpy as np
import pytest

from parapush_ros.core.planning.dgoc_push import DGOCConfig, DGOCPush, DGOCPushPlanner
from parapush_ros.core.models.registry import Predictor
from parapush_ros.core.planning.example_planner import StraightPush
from parapush_ros.core.planning.fast_mpc import FastConfig, FastMPCPush, FastPlanner
from parapush_ros.core.planning.low_uncertainty import LowUncertaintyConfig, LowUncertaintyPush
from parapush_ros.core.planning.mpc_push import MPCPush
from parapush_ros.core.planning.outcome import Outcome
from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
from parapush_ros.core.planning.planners import AUTO, PLANNERS
from parapush_ros.core.planning.session import PushSession, SessionConfig
from parapush_ros.core.planning.tasks import PushTask, goal_for
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.core.sim.closed_loop import WorldIO
from parapush_ros.core.sim.world import SimWorld

pytestmark = pytest.mark.timeout(180)


def mpc():
    scene = load_scene("cylinder_slider")
    planner = MPCPlanner(scene, PlannerConfig.from_values(dict(model="coarse", samples=8, iterations=2,
                                                               control_duration=0.5)))
    return MPCPush(planner), goal_for(scene)


def alg2():
    scene = load_scene("clutter_push")
    planner = MPCPlanner(scene, PlannerConfig.from_values(dict(model="learned", optimiser="mppi", samples=6,
                                                               iterations=1, control_duration=1.0)))
    return LowUncertaintyPush(planner, LowUncertaintyConfig(cell=0.06, pushes=2, iterations=20)), goal_for(scene)


def dgoc():
    scene = load_scene("block_003")
    push = DGOCPush(DGOCPushPlanner(scene, DGOCConfig(max_iterations=3)))
    return push, goal_for(scene, "block", (0.12, 0.04), 0.01, 0.4, 0.1)


def straight():
    scene = load_scene("cylinder_slider")
    return StraightPush(scene), goal_for(scene)


def fast():
    scene = load_scene("cylinder_slider")
    planner = FastPlanner(scene, FastConfig(replan_rate=5.0, candidates=8), PushTask(scene),
                          Predictor(scene, threads=1), "fine")
    return FastMPCPush(planner), goal_for(scene)


STRATEGIES = {"mpc": mpc, "alg2": alg2, "dgoc": dgoc, "straight": straight, "fast": fast}
REALTIME_ONLY = {"fast"}  # pushed in real time (the others: stop and plan)
JUMP = 1.2  # s of world time: the session clock steps 2 s back while the pusher moves


def test_every_registered_planner_is_tested_here():
    assert set(STRATEGIES) | {AUTO} == set(PLANNERS)  # auto builds fast or mpc (test_fast_mpc.py)


CONFIG = SessionConfig(tracking_loss_timeout=0.5)


def run(name, stop_at=None, **io_kwargs):
    strategy, goal = STRATEGIES[name]()
    io = WorldIO(SimWorld(strategy.scene), plan_clock=lambda: 0.0, **io_kwargs)
    session = PushSession(strategy, io, goal, replace(CONFIG, realtime=name in REALTIME_ONLY))
    if stop_at is not None:
        io.events = [(stop_at, lambda: session.stop(Outcome.ABORTED, "seen enough"))]
    return session.run(), io


def commands_between(io, t0, t1):
    return [u for a, b, u in io.executed if b > t0 + 1e-9 and a < t1 - 1e-9]


def texts(io, level=None):
    return [text for _, lv, text in io.statuses if level in (None, lv)]


def world_time_of(io, prefix):
    return next(t for t, _, text in io.statuses if text.startswith(prefix))


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_clock_jump_pauses_every_planner_until_a_state_measured_after_it(name):
    res, io = run(name, stop_at=JUMP + 0.8, clock_jumps=[(JUMP, -2_000_000_000)],
                  epoch_ns=1_750_000_000_000_000_000)
    assert res.outcome is Outcome.ABORTED and res.reason == "seen enough", res.reason
    paused = "paused: clock jumped back by 1.999 s: waiting for a scene state measured after it"  # 2 s - a step
    assert world_time_of(io, paused) == pytest.approx(JUMP), texts(io)
    assert world_time_of(io, "valid scene state again") == pytest.approx(JUMP + 0.001)
    assert any(np.any(u != 0.0) for u in commands_between(io, JUMP - 0.3, JUMP))  # it was pushing ...
    assert all(np.all(u == 0.0) for u in commands_between(io, JUMP, JUMP + 0.001))  # ... stopped at the jump ...
    assert any(np.any(u != 0.0) for u in commands_between(io, JUMP + 0.001, JUMP + 0.8))  # ... and pushed again


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_planner_refuses_scene_states_off_its_clock_by_more_than_max_clock_offset(name):
    res, io = run(name, stamp_offset_ns=2_000_000_000)
    problem = ("scene_state stamp 2.000 s ahead of the planner's clock (max_clock_offset 0.5 s): check the clock sync "
               "of the mocap host and the planner")
    assert f"paused: {problem}; resuming if it clears within 0.5 s" in texts(io, "warning")
    assert (res.outcome, res.reason) == (Outcome.FAILED, f"{problem} (no valid state within tracking_loss_timeout "
                                                         f"0.5 s)")
    assert res.plans == [] and all(np.all(u == 0.0) for _, _, u in io.executed)  # it never pushed


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_planner_refuses_a_start_deeper_than_max_start_penetration(name):
    strategy, goal = STRATEGIES[name]()
    L, x = strategy.scene.layout, strategy.scene.initial_state()
    bias = np.zeros_like(x)
    L.pusher_pos(bias)[...] = L.object_poses(x)[goal.object_index, :2] - L.pusher_pos(x)  # the pusher seen inside
    res, io = run(name, observation_bias=bias)
    assert res.outcome is Outcome.FAILED and res.reason.startswith("infeasible measured state: the pusher inside ")
    assert "(max_start_penetration 5 mm): check the mocap calibration (no valid state within" in res.reason
    assert any(t.startswith("paused: infeasible measured state") for t in texts(io, "warning"))
    assert res.plans == [] and all(np.all(u == 0.0) for _, _, u in io.executed)
