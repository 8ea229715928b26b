"""Closed-loop MPC in a MuJoCo world with the fine model as the planner's predictive model (paper 000 Sec. 4.3),
at small optimiser sizes so the file stays fast; plus the world's mismatch knobs and the ``bench mpc`` command.
"""
import json
import math
import re

import numpy as np
import pytest

from parapush_ros import bringup
from parapush_ros.cli import main
from parapush_ros.core.config import ConfigError
from parapush_ros.core.planning.fast_mpc import FastConfig
from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
from parapush_ros.core.sim.closed_loop import run_closed_loop
from parapush_ros.core.sim.world import SimWorld, WorldConfig, perturbed_scene
from parapush_ros.core.planning.outcome import Outcome
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.core.scene.queries import obstacle_clearance
from parapush_ros.tools.bench.mpc import predicted_cycles

pytestmark = pytest.mark.timeout(120)
SMALL = dict(model="fine", samples=6, iterations=1)


def closed_loop(scene_name, **config):
    scene = load_scene(scene_name)
    planner = MPCPlanner(scene, PlannerConfig.from_values(config))
    try:
        return scene, run_closed_loop(planner, SimWorld(scene), keep_plans=True)
    finally:
        planner.close()


def test_fine_mpc_reaches_the_goal_without_obstacles():
    scene, rec = closed_loop("cylinder_slider", **SMALL)
    assert rec.outcome is Outcome.REACHED, rec.reason
    assert rec.final_distance <= scene.goal.radius and 1 <= rec.actions <= 10
    assert len(rec.plan_times) == rec.actions == len(rec.controls) == len(rec.predicted)
    assert rec.states.shape == (rec.actions + 1, scene.layout.dim) and len(rec.path) > rec.actions
    assert rec.task_time == pytest.approx(rec.planning_time + rec.actions * 1.0)


def test_fine_mpc_pushes_around_the_obstacle():
    scene, rec = closed_loop("obstacle_push", **SMALL)
    assert rec.outcome is Outcome.REACHED, rec.reason
    obj_c, pusher_c = obstacle_clearance(scene, rec.path)
    assert obj_c.min() > 1e-3 and pusher_c.min() > 1e-3  # never touched the obstacle, checked densely
    assert np.abs(rec.path[:, 3]).max() > 0.09  # went round it, not through it
    assert rec.actions <= 20


def test_world_mismatch_and_observation_noise():
    scene = load_scene("cylinder_slider")
    other = perturbed_scene(scene, friction_scale=1.2, pusher_friction_scale=0.5, mass_scale=2.0)
    assert other.friction["object_table"] == pytest.approx(1.2 * scene.friction["object_table"])
    assert other.friction["pusher_object"] == pytest.approx(0.5 * scene.friction["pusher_object"])
    assert other.objects[0].mass == pytest.approx(2.0 * scene.objects[0].mass)
    with pytest.raises(ValueError, match="mass_scale"):
        perturbed_scene(scene, mass_scale=0.0)
    world = SimWorld(scene, WorldConfig(position_noise=0.002, yaw_noise=0.01, seed=4))
    obs = np.array([world.observe() for _ in range(400)])
    err = obs - world.x
    assert err[:, 0:4].std() == pytest.approx(0.002, rel=0.15) and err[:, 4].std() == pytest.approx(0.01, rel=0.15)
    assert not WorldConfig().mismatched and WorldConfig(mass_scale=1.1).mismatched
    # more table friction: the slider moves less under the same push
    u = np.array([0.05, 0.0])
    light, heavy = SimWorld(scene), SimWorld(scene, WorldConfig(friction_scale=1.5))
    path = light.execute(u, 1.0)
    heavy.execute(u, 1.0)
    assert path.shape == (20, scene.layout.dim)
    assert heavy.x[2] < light.x[2]
    with pytest.raises(ValueError, match="control must be 2 finite numbers"):
        light.execute([np.nan, 0.0], 1.0)


def test_bench_mpc_command_small(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--scenes", "2", "--models", "coarse", "--mismatch", "--max-actions", "2",
                 "--samples", "4", "--iterations", "1", "--timing-repeats", "1", "--out", str(out),
                 "--json", str(out / "mpc.json")]) == 0
    res = json.loads((out / "mpc.json").read_text())
    assert set(res["summary"]) == {"nominal/coarse", "mismatch/coarse"}
    for s in res["summary"].values():
        assert s["runs"] == 2 and 0.0 <= s["success_rate"] <= 1.0
        assert set(s["failures"]) == {"hit_obstacle", "off_table", "timeout", "failed"}
        assert s["plan_time_per_step_s"] > 0.0 and s["task_time_s"] > 0.0
    assert len(res["runs"]) == 4 and all(r["actions"] <= 2 for r in res["runs"])
    assert res["runs"][2]["world_config"]["position_noise"] == 0.001  # the mismatch world
    t = res["timing"]["models"]["coarse"]["seconds"]
    assert len(t) == 4 and all(v > 0.0 for v in t.values())
    for world in ("nominal", "mismatch"):
        assert (out / f"mpc_{world}_coarse.png").stat().st_size > 1000
    # scenes are deterministic given the seed and put the obstacle across the straight push
    from parapush_ros.tools.bench.mpc import random_scenes
    a, b = random_scenes(3, 5), random_scenes(3, 5)
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b]
    for s in a:
        slider, goal, ob = np.array(s.objects[0].pose[:2]), np.array(s.goal.position), np.array(s.obstacles[0].pose[:2])
        d = (goal - slider) / np.linalg.norm(goal - slider)
        off = abs(d[0] * (ob - slider)[1] - d[1] * (ob - slider)[0])
        assert off < s.objects[0].radius + s.obstacles[0].radius  # the straight push would hit it


def test_bench_mpc_study_extends_resumes_and_refuses_another_setting(tmp_path, capsys):
    """A study grows in the same --out: the units already in <out>/mpc_study are read back, not run again, and the
    result equals one whole run; another setting in the same --out is refused by name (issue 32)."""
    common = ["bench", "mpc", "--models", "coarse", "--mismatch", "--max-actions", "2", "--samples", "4",
              "--iterations", "1", "--no-timing", "--seed", "3"]
    assert main(common + ["--scenes", "2", "--out", str(tmp_path / "whole")]) == 0
    assert main(common + ["--scenes", "1", "--out", str(tmp_path / "grown")]) == 0
    capsys.readouterr()
    assert main(common + ["--scenes", "2", "--out", str(tmp_path / "grown")]) == 0
    assert "4 units, 2 done before, 2 to run" in capsys.readouterr().err
    whole = json.loads((tmp_path / "whole" / "bench_mpc.json").read_text())
    grown = json.loads((tmp_path / "grown" / "bench_mpc.json").read_text())
    assert grown["scene_defs"] == whole["scene_defs"]
    assert [(r["scene"], r["world"], r["world_config"], r["outcome"], r["actions"], r["path"]) for r in grown["runs"]] \
        == [(r["scene"], r["world"], r["world_config"], r["outcome"], r["actions"], r["path"]) for r in whole["runs"]]
    with pytest.raises(ValueError, match=r"planner.sampling.samples = 4, this run asks for 8"):
        main(common[:8] + ["8"] + common[9:] + ["--scenes", "2", "--out", str(tmp_path / "grown")])
    with pytest.raises(ValueError, match=r"parareal_variance_threshold = 0.0, this run asks for 0.002"):
        main(common + ["--scenes", "2", "--parareal-variance-threshold", "0.002", "--out", str(tmp_path / "grown")])


def test_bench_mpc_realtime_small(tmp_path):
    """``--realtime``: the same scenes pushed by the real-time loop, planning charged in simulated time."""
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--realtime", "--scenes", "2", "--models", "coarse", "--max-actions", "3",
                 "--samples", "4", "--iterations", "2", "--dt", "0.5", "--no-timing", "--out", str(out)]) == 0
    res = json.loads((out / "bench_mpc.json").read_text())
    sampling = res["planner"]["sampling"]
    assert res["realtime"] and sampling["control_duration"] == 0.5 and sampling["samples"] == 4
    # what is not given is the planner node's setting (config/mpc_planner.yaml), read from its files
    node = bringup.node_parameters(bringup.spec("mpc_planner"), "sim", {})
    assert sampling["horizon"] == node["horizon"] == 4
    s = res["summary"]["nominal/coarse"]
    for key in ("success_rate", "failures", "actions", "task_time_s", "motion_time_s", "idle_fraction",
                "plan_latency_p95_s", "plan_latency_max_s", "late_plans", "first_plan_s"):
        assert key in s, key
    assert 0.0 <= s["idle_fraction"] <= 1.0 and s["plan_latency_max_s"] >= s["plan_latency_p95_s"] > 0.0
    for r in res["runs"]:
        assert r["realtime"] and r["actions"] <= 3 and r["motion_time"] <= r["task_time"] + 1e-9
        assert len(r["plan_times"]) >= r["actions"]  # a plan for every switch (the last may not have run)
        # anytime: every plan ran at least one optimiser iteration and at most --iterations
        assert len(r["plan_iterations"]) == len(r["plan_times"]) and all(1 <= i <= 2 for i in r["plan_iterations"])
    assert 1.0 <= s["iterations_per_plan"] <= 2.0


@pytest.mark.parametrize("field, value, words", [
    ("position_noise", -0.001, "position_noise: must be >= 0, got -0.001"),
    ("yaw_noise", float("nan"), "yaw_noise: must be >= 0, got nan"),
    ("friction_scale", 0.0, "friction_scale: must be > 0, got 0.0"),
    ("mass_scale", float("inf"), "mass_scale: must be > 0, got inf"),
    ("samples_per_action", 0, "samples_per_action: must be an integer >= 1, got 0"),
    ("seed", -1, "seed: must be an integer >= 0, got -1"),
])
def test_world_config_refuses_bad_values_naming_the_field(field, value, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        WorldConfig(**{field: value})


def test_bench_mpc_replan_rate_and_shove_small(tmp_path):
    """``--replan-rate HZ --shove``: the 1 Hz planner and the fast one on the same scenes in one run, the pushed
    object shoved mid-push (seeded, the same shove for both), issue 29's keys in the summary."""
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--realtime", "--replan-rate", "10", "--shove", "--scenes", "1", "--models", "fine",
                 "--max-actions", "8", "--samples", "4", "--iterations", "1", "--dt", "0.5", "--no-timing",
                 "--shove-distance", "0.03,0.05", "--out", str(out)]) == 0
    res = json.loads((out / "bench_mpc.json").read_text())
    assert res["replan_rate"] == 10.0 and res["shove"] and set(res["summary"]) == {"nominal/fine", "nominal/fine@10Hz"}
    assert res["shove_distance_m"] == [0.03, 0.05]
    for key, s in res["summary"].items():
        for name in ("replan_rate_hz", "cycle_time_p95_s", "fine_fraction", "time_to_goal_s",
                     "disturbance_success_rate", "recovery_time_s", "reaction_time_s", "cycles_abandoned",
                     "recovered_before_reaction", "shove_clearance_median_m", "recovery_reach_time_s",
                     "recovery_over_reach_median"):
            assert name in s, (key, name)
        assert s["replan_rate_hz"] > 0.0 and s["cycle_time_p95_s"] > 0.0  # their values depend on the host's speed
        assert 0 <= s["recovered_before_reaction"] <= s["recovered"]
    assert res["summary"]["nominal/fine@10Hz"]["fine_fraction"] < res["summary"]["nominal/fine"]["fine_fraction"]
    shoves = [r["shove"] for r in res["runs"]]
    # the same shove for both planners, at the same instant: the drawn one, on the world's next 1 ms step
    assert len(shoves) == 2 and shoves[0]["time_s"] == shoves[1]["time_s"]
    assert all(0.0 <= s["time_s"] - s["drawn_time_s"] < 1e-3 + 1e-9 for s in shoves)
    assert res["fast"]["seed"] == res["seed"]  # the fast planner's knot noise follows --seed as the 1 Hz sampling does
    assert all(0.03 <= s["distance_m"] <= 0.05 for s in shoves)
    for s in shoves:
        if s["applied"]:
            assert np.linalg.norm(s["delta_m"]) == pytest.approx(s["distance_m"])
            assert -1e-3 < s["clearance_m"] < s["distance_m"] + 0.1  # the pusher's gap to the shoved object
            # straight back behind it at 0.1 m/s takes at least the gap's time and no more than 2 s more
            assert (max(s["clearance_m"], 0.0) + 0.005) / 0.1 - 1e-9 <= s["reach_time_s"] < s["clearance_m"] / 0.1 + 2.0
    # a plan acts on the shove no sooner than one control (1 Hz: 0.5 s here) or one re-plan period (fast) after it
    for r in res["runs"]:
        if r["shove"]["applied"] and r["reaction_time_s"] is not None:
            assert r["reaction_time_s"] >= (0.1 if r["model"].endswith("Hz") else 0.5) - 1e-6, r["model"]
    assert "reaction_time_s" in res["summary"]["nominal/fine@10Hz"]
    # --planners fast: the fast planner's units alone, resumed from the same study (one planner's runs at a time)
    assert main(["bench", "mpc", "--realtime", "--replan-rate", "10", "--shove", "--scenes", "1", "--models", "fine",
                 "--max-actions", "8", "--samples", "4", "--iterations", "1", "--dt", "0.5", "--no-timing",
                 "--shove-distance", "0.03,0.05", "--planners", "fast", "--out", str(out),
                 "--json", str(tmp_path / "fast.json")]) == 0
    fast = json.loads((tmp_path / "fast.json").read_text())
    assert fast["planners"] == ["fast"] and set(fast["summary"]) == {"nominal/fine@10Hz"}
    assert fast["summary"]["nominal/fine@10Hz"] == res["summary"]["nominal/fine@10Hz"]
    # another shove distance is another study: refused in the same --out, naming the setting
    with pytest.raises(ValueError, match="shove_distance_m"):
        main(["bench", "mpc", "--realtime", "--replan-rate", "10", "--shove", "--scenes", "1", "--models", "fine",
              "--max-actions", "8", "--samples", "4", "--iterations", "1", "--dt", "0.5", "--no-timing",
              "--planners", "fast", "--out", str(out)])
    for extra, words in ((["--shove", "--shove-distance", "0.03"], "--shove-distance: expected LO,HI"),
                         (["--shove", "--shove-distance", "0.05,0.03"], "--shove-distance: expected 0 < LO <= HI"),
                         (["--shove-distance", "0.03,0.05"], "add --shove")):
        with pytest.raises(ValueError, match=words):
            main(["bench", "mpc", "--realtime", "--scenes", "1", "--no-timing", *extra, "--out", str(tmp_path / "bad")])
    for planners, words in (("fast", "--planners: fast needs --replan-rate"), ("mpc,mpc", "names a planner twice"),
                            ("judo", "'judo' is not a planner")):
        with pytest.raises(ValueError, match=words):
            main(["bench", "mpc", "--realtime", "--scenes", "1", "--no-timing", "--planners", planners,
                  "--out", str(out)])
    with pytest.raises(ValueError, match="name fast among the planners"):
        main(["bench", "mpc", "--realtime", "--replan-rate", "10", "--scenes", "1", "--models", "fine", "--no-timing",
              "--planners", "mpc", "--out", str(out)])
    with pytest.raises(ValueError, match=r"--replan-rate: .* add --realtime"):
        main(["bench", "mpc", "--replan-rate", "10", "--scenes", "1", "--no-timing", "--out", str(out)])
    with pytest.raises(ValueError, match=r"--replan-rate: must be in \[0\.1, 100\] Hz"):
        main(["bench", "mpc", "--realtime", "--replan-rate", "0", "--scenes", "1", "--no-timing", "--out", str(out)])


def test_bench_mpc_fast_parareal_in_clutter_with_coarse_auto(tmp_path):
    """``--coarse auto`` gives the fast planner's Parareal the coarse model that predicts its 0.25 s slices, as the
    planner node does (the bench once asked auto for no slice length, got the learned model's 1 s slices and refused
    ``parareal1`` in clutter)."""
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--task", "multi_object", "--coarse", "auto", "--realtime", "--replan-rate", "10",
                 "--planners", "fast", "--scenes", "1", "--models", "parareal1", "--max-actions", "1", "--dt", "0.5",
                 "--samples", "4", "--iterations", "1", "--no-timing", "--out", str(out)]) == 0
    res = json.loads((out / "bench_mpc.json").read_text())
    assert set(res["summary"]) == {"nominal/parareal1@10Hz"}
    (run,) = res["runs"]
    assert run["cycle_times_s"] and run["outcome"] != "failed"
    # every cycle re-scored with Parareal-1, or gave it up at the budget for the best screened candidate (a slow or
    # loaded host: the plan clock here is the wall clock)
    assert all(k == 1 or gone for k, gone in zip(run["parareal_iterations"], run["abandoned"], strict=True))


def test_bench_mpc_fast_settings_reach_the_planner_and_bad_ones_are_named(tmp_path):
    """``--fast NAME=VALUE`` sets the fast planner as its node parameter ``fast.NAME`` would: the run plans with it
    (a 1 s horizon: 4 re-scored slices of 0.25 s, not the default 2 s's 8), and a bad name or value is named."""
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--realtime", "--replan-rate", "10", "--planners", "fast", "--scenes", "1",
                 "--models", "fine", "--max-actions", "1", "--dt", "0.5", "--no-timing", "--fast", "horizon=1.0",
                 "--fast", "cost_interval=0.5", "--out", str(out)]) == 0
    res = json.loads((out / "bench_mpc.json").read_text())
    assert res["fast"]["horizon"] == 1.0 and res["fast"]["cost_interval"] == 0.5
    assert res["fast"]["candidates"] == FastConfig.candidates  # the rest keep their defaults
    assert res["runs"][0]["rescore_slices"] == 4
    for setting, words in (("horizon=-1", r"--fast horizon: must be a positive multiple"),
                           ("horizn=4", r"--fast: 'horizn=4' is not NAME=VALUE"),
                           ("replan_rate=5", r"--fast: replan_rate is --replan-rate's")):
        with pytest.raises(ValueError, match=words):
            main(["bench", "mpc", "--realtime", "--replan-rate", "10", "--planners", "fast", "--scenes", "1",
                  "--no-timing", "--fast", setting, "--out", str(out)])
    with pytest.raises(ValueError, match="--fast: sets the fast planner"):
        main(["bench", "mpc", "--scenes", "1", "--no-timing", "--fast", "horizon=4.0", "--out", str(out)])


@pytest.mark.parametrize("K", [0, 1])
def test_predicted_cycles_reproduce_the_cycle_on_the_cores_it_ran_on(K):
    """``predicted_cycle_s`` rescales a run's re-scoring from the cores it ran on (its records' ``threads``): at that
    core count it gives back the measured cycle (it once assumed 2 cores whatever the run's)."""
    records = [{"threads": 4, "rescore_slices": 8, "cycle_times_s": [0.05] * 5, "rescore_times_s": [0.03] * 5,
                "rescored": [4] * 5, "parareal_iterations": [K] * 5}]
    pred = predicted_cycles(records, measured_cores=records[0]["threads"], cores=(2, 4, 16))["predicted_cycle_s"]
    assert pred["P4"] == pytest.approx(0.05)
    assert pred["P2"] > pred["P4"] >= pred["P16"]


@pytest.mark.parametrize("instant", [0.3004, 0.3006])
def test_an_event_happens_at_its_instant_and_a_plan_from_then_has_seen_it(instant):
    """A world event (the bench's shove) happens on the first 1 ms step at or after its instant, also in the middle
    of one long wait (a 1 s control, a charged latency): rounded down to the wait's own step it waited for the next
    stop, up to a whole control, so two planners got the same shove at different instants. An observation at the
    event's step shows it, so a plan made from it has seen the shove (``reaction_time``)."""
    from parapush_ros.core.sim.closed_loop import WorldIO
    from parapush_ros.core.sim.shove import reaction_time
    scene = load_scene("obstacle_push")
    world = SimWorld(scene, WorldConfig())
    fired = []

    def shove():
        fired.append(world.time)
        world.displace_object(0, (0.0, 0.03, 0.0))
    io = WorldIO(world, events=[(instant, shove)])
    io.wait(1.0)
    assert len(fired) == 1 and instant <= fired[0] + 1e-9 < instant + 1e-3
    # stopped exactly at the event's step, the observation there is the shoved world's
    world2 = SimWorld(scene, WorldConfig())
    y0 = scene.layout.object_poses(world2.planar_state())[0, 1]
    io2 = WorldIO(world2, events=[(instant, lambda: world2.displace_object(0, (0.0, 0.03, 0.0)))])
    step = math.ceil(instant * 1000.0) / 1000.0
    io2.wait(step)
    obs = io2.observe()
    assert obs.stamp_ns * 1e-9 == pytest.approx(step)
    assert scene.layout.object_poses(obs.x)[0, 1] - y0 == pytest.approx(0.03, abs=2e-3)
    at = fired[0]
    assert reaction_time([(at, at + 0.1)], at) == pytest.approx(0.1)  # a plan from the shove's own step has seen it
    assert reaction_time([(at - 1e-3, at + 0.05)], at) is None  # from the step before, it has not


def test_shove_figures_count_the_runs_shoved_and_recoveries_of_runs_that_reached_the_goal():
    """``disturbance_success_rate`` is over the runs that were shoved (a run whose shove found no free direction,
    or that ended before it, is not a success under a disturbance); ``recovery_time_s`` over the runs that recovered
    and reached the goal: one that went on to hit the obstacle was never back on a path that reaches it."""
    from parapush_ros.tools.bench.mpc import cycle_summary

    def run(outcome, applied, recovery, reaction):
        return {"cycle_starts_s": [0.0, 1.0, 2.0], "cycle_times_s": [0.5] * 3, "cycles_late": 0, "outcome": outcome,
                "task_time": 10.0, "fine_fraction": 1.0, "recovery_time_s": recovery, "reaction_time_s": reaction,
                "shove": {"applied": applied, "clearance_m": 0.01}}
    s = cycle_summary([run("reached", True, 0.3, 1.0), run("hit_obstacle", True, 0.2, 1.0),
                       run("reached", False, None, None)], shove=True)
    assert s["disturbance_success_rate"] == 0.5 and s["shoves_applied"] == 2
    assert s["recovery_time_s"] == pytest.approx(0.3) and s["recovered"] == 1 and s["recovered_before_reaction"] == 1
    assert cycle_summary([run("reached", False, None, None)], shove=True)["disturbance_success_rate"] is None


def test_a_bad_seed_of_the_fast_planner_is_named_as_the_user_gave_it():
    from parapush_ros.tools.bench.mpc import fast_config
    with pytest.raises(ValueError, match=r"^--seed: "):
        fast_config(10.0, [], -1)
    with pytest.raises(ValueError, match=r"^--fast seed: "):
        fast_config(10.0, ["seed=-2"], 5)
