"""``parapush bench mpc``: closed-loop pushing MPC with every predictive model, for both tasks of the papers.

``--task obstacle`` (default, paper 000 Sec. 4.3): push around an obstacle. ``--task multi_object`` (paper 001):
push the target into the goal among three other cylinders (random scenes of ``core.scene.clutter``), touching them is
allowed; the push fails when another object leaves the table or enters the goal region. Its models default to
the learned coarse model alone, Parareal-1 with the learned coarse model (``--coarse``) and fine; besides success
and failures by reason it reports how far the other objects were moved (final displacement, mean and max).

Obstacle task:

N random scenes like ``config/scenes/obstacle_push.yaml``: the cylinder slider on the left of the table, the goal
on the right, the obstacle near the middle ON the straight line between them (so the straight push, the first
candidate, hits it), the pusher right behind the slider. For every model the same scenes are solved by the MPC
loop of ``core.sim.closed_loop`` (plan -> execute the first control in a MuJoCo world -> observe -> re-plan) and
scored by the shared outcome monitor: success rate, failures by reason, mean actions, planning wall time per step and
total task time (planning + the pushes themselves). ``--mismatch`` adds a second world whose friction and masses
differ randomly from the planner's scene, observed with noise.

``--realtime``: the same scenes and outcome rules, pushed by the real-time loop (``planning.session``: plan while
the pusher moves, anytime plans due at the next switch, a late plan never stops the pusher) in simulated time, each
plan's latency charged to the world as measured (wall time on this machine). Per world/model it reports task time,
motion time, the idle fraction after the first plan, plan latency (p95, max) and late plans. Unless given, the
optimiser settings are the planner node's (``realtime_settings``: ``config/mpc_planner.yaml``, chosen by measurement
on 2 cores, see docs/results/parareal.md), so the bench measures what the node runs.

The runs are a study of the engine (``parapush_ros.tools.study``): one unit per scene x model x world, a Ray task of one
CPU (``--realtime``: of the planner's cores, ``--threads`` or every core, so that no other unit shares the cores a
real-time plan is timed on), kept in ``<out>/mpc_study``: the same command again resumes, a larger ``--scenes`` (or
more ``--models`` / ``--worlds``) extends the study, another setting in the same ``--out`` is refused by name.
Scene ``i`` of a seed and its mismatch world depend on (seed, i) only.

Timing study (``--timing``, on by default, in this process after the runs): one optimiser iteration (all samples x N
slices) of each model timed as samples one after another (how paper 000 ran, with Parareal parallel across time
only) and as ONE batch of samples x slices, each on 1 thread and on all cores.
"""
from __future__ import annotations

import argparse
import os
import threading
import time
from dataclasses import asdict, replace

import numpy as np
import yaml

from ...arguments import nonnegative_int, positive_int, relative_spread
from ...core.models.fine import default_threads
from ...core.config import ConfigError, from_values, knobs
from ...core.planning.optimisers import OPTIMISERS, SamplingConfig
from ...core.planning.planner import MPCPlanner, PlannerConfig
from ...core.sim.closed_loop import WorldIO, run_closed_loop
from ...core.sim.shove import (SHOVE_DISTANCE, apply_shove, draw_shove, pusher_clearance, reach_time, reaction_time,
                               recovery_time)
from ...core.sim.world import SimWorld, WorldConfig
from ...core.planning.fast_mpc import FastConfig, FastMPCPush, FastPlanner
from ...core.planning.outcome import Outcome
from ...core.models.registry import ModelSpec, Predictor, coarse_choices, spec_names
from ...core.scene.clutter import clutter_scenes
from ...core.scene.geometry import Footprint, disc_penetration
from ...core.scene.shapes import (SHAPES, clearance, half_width, outline_points, parse_shapes, pusher_behind,
                                  shaped_object)
from ...core.scene.spec import GoalSpec, load_scene
from ...core.planning.tasks import ProposalConfig, PushTask, load_cost_weights
from ..study import Study, Unit, add_arguments, cores
from .common import _plain, add_seeds_argument, output_paths, print_table, pyplot, save_figure, seeded, write_json
from .speedup import batched_fine_time, batched_parareal_time

ALL_MODELS = "coarse,parareal1,parareal2,parareal3,fine"
DEFAULT_MODELS = "coarse,parareal1,fine"  # the default run finishes in minutes; pass ALL_MODELS for the paper's set
# per task (``--task``): what its scenes are called, its seeded scene generator (n, seed, shapes) -> scenes, whether
# it takes --shapes, whether other objects share the table (their displacement is measured), default models, default
# coarse model inside Parareal, the failures it can end in
TASKS = {
    "obstacle": dict(label="obstacle", scenes=lambda n, seed, shapes: random_scenes(n, seed, shapes=shapes),
                     shapes=True, others=False, models=DEFAULT_MODELS, coarse="analytical",
                     failures=(Outcome.HIT_OBSTACLE, Outcome.OFF_TABLE, Outcome.TIMEOUT, Outcome.FAILED)),
    # the analytical model does not handle object-object contact (paper 001: the learned one does)
    "multi_object": dict(label="clutter", scenes=lambda n, seed, shapes: clutter_scenes(n, seed),
                         shapes=False, others=True, models="learned,parareal1,fine", coarse="learned",
                         failures=(Outcome.OTHER_IN_GOAL, Outcome.OFF_TABLE, Outcome.TIMEOUT, Outcome.FAILED)),
}
FAILURES = TASKS["obstacle"]["failures"]
TASK_TIME_LIMIT = 20.0  # s of pushing before a timeout (paper 000: 20 actions of 1 s) unless --max-actions is given
# how planning time is measured: wall time, or this process's CPU time spread over the cores (what the plans would
# take on an otherwise idle machine: on a shared one, wall time also counts everyone else's jobs)
def critical_path_clock() -> float:
    """CPU time of the calling (planning) thread plus that of the busiest fine-model worker: what a plan takes on an
    otherwise idle machine with a core per thread, whatever else shares the cores, where the planning thread waits
    while the workers run (a batched prediction) and the workers share a batch evenly."""
    workers = [time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threading.enumerate()
               if t.name.startswith("parapush-fine") and t.ident is not None]
    return time.thread_time() + max(workers, default=0.0)


PLAN_CLOCKS = {"wall": time.perf_counter, "cpu": lambda: time.process_time() / default_threads(),
               "critical": critical_path_clock}
# --realtime: the optimiser settings the planner node runs with (planning fits the control period on 2 cores, see
# docs/results/parareal.md "Real-time MPC"); iterations is a cap, the anytime deadline decides how many run
REALTIME_KEYS = ("samples", "iterations", "horizon", "control_duration")


def realtime_settings() -> dict:
    """The mpc_planner node's ``REALTIME_KEYS`` in simulation (``config/mpc_planner.yaml`` and the sim overlay over
    ``ros/params.py``'s defaults): read from the node's own files, so the bench and the node cannot drift apart."""
    from ... import bringup  # noqa: PLC0415 (reads YAML: only when --realtime needs it)
    node = bringup.spec("mpc_planner")
    values = {k: v.default for k, v in node.param_spec().items()}
    values.update(bringup.node_parameters(node, "sim", {}))
    return {k: values[k] for k in REALTIME_KEYS}


def random_scenes(n: int, seed: int, base: str = "obstacle_push", shapes=None) -> list:
    """``n`` valid random obstacle scenes (validated by the scene loader); deterministic given ``seed``. With
    ``shapes`` (names of ``core.scene.shapes.SHAPES``) scene ``i``'s object is of shape ``shapes[i % len(shapes)]``
    (``shaped_scene``); without, the base scene's cylinder, drawn as always."""
    if shapes:
        template = load_scene(base)
        return [shaped_scene(i, seed, shapes[i % len(shapes)], template) for i in range(n)]
    rng = np.random.default_rng(seed)
    template = load_scene(base)
    slider, obstacle = template.objects[0], template.obstacles[0]
    blocking = slider.radius + obstacle.footprint.bounding_radius
    scenes = []
    while len(scenes) < n:
        s = np.array([rng.uniform(-0.30, -0.20), rng.uniform(-0.12, 0.12)])
        g = np.array([rng.uniform(0.20, 0.30), rng.uniform(-0.12, 0.12)])
        d = (g - s) / np.linalg.norm(g - s)
        normal = np.array([-d[1], d[0]])
        # obstacle on the segment, offset sideways by at most half the blocking distance: the straight push hits
        o = s + rng.uniform(0.45, 0.55) * (g - s) + normal * rng.uniform(-0.5, 0.5) * blocking
        pusher = s - d * (slider.radius + template.pusher.radius + 0.002)
        scene = template.with_poses(pusher_start=pusher, object_poses=[(s[0], s[1], 0.0)],
                                    obstacle_poses=[(o[0], o[1], 0.0)],
                                    goal=GoalSpec(template.goal.object, (float(g[0]), float(g[1])),
                                                  template.goal.radius))
        scenes.append(scene.revalidated(f"bench mpc scene {len(scenes)}", name=f"random_obstacle_{seed}_{len(scenes)}"))
    return scenes


# --shapes scenes: the rules every drawn scene satisfies (checked on the outlines, any convex shape)
PUSHER_GAP = 0.002  # m: the pusher starts this far behind the object's outline, on the line to the goal
OBSTACLE_GAP = 0.03  # m: outline-to-outline clearance of the object and of the pusher from the obstacle at the start
GOAL_GAP = 0.02  # m: the obstacle's outline keeps this far out of the goal region
EDGE_GAP = 0.03  # m: the object's outline this far inside the table edges at the start


def shaped_scene(index: int, seed: int, shape: str, template=None, max_tries: int = 1000):
    """Random obstacle scene ``index`` of ``seed`` whose object is of ``shape`` (``core.scene.shapes``: the body of
    a shipped scene, the template's mass and name) at a random yaw (a cylinder: 0). Like ``random_scenes``' scenes
    the obstacle lies on the straight push, offset sideways by at most half the distance at which the object's
    outline (its extent across the push, ``half_width``) still hits it, and the pusher starts ``PUSHER_GAP`` behind
    the outline on the line to the goal (``pusher_behind``); every rule is checked on the outlines (``clearance``:
    a lower bound of the distance, so the gaps hold): ``OBSTACLE_GAP``, ``GOAL_GAP``, ``EDGE_GAP``. Depends on
    (seed, index, shape) only; validated by the scene loader."""
    template = template or load_scene("obstacle_push")
    rng = np.random.default_rng([int(seed), int(index), SHAPES.index(shape), 41])

    base_half_x = float(template.table.half[0])

    def edit(data):  # the shape at the template's start, the pusher clear of any of them (placed below)
        data["objects"][0] = shaped_object(shape, data["objects"][0])
        data["pusher"]["start"] = [-base_half_x + data["pusher"]["radius"], 0.0]
    base = template.revalidated(f"bench mpc: a {shape} in {template.name}", edit=edit)
    body, obstacle, r_p = base.objects[0], base.obstacles[0], base.pusher.radius
    fp, ofp = body.footprint, obstacle.footprint
    half, goal_disc = base.table.half, Footprint("cylinder", radius=base.goal.radius)
    for _ in range(max_tries):
        s = np.array([rng.uniform(-0.30, -0.20), rng.uniform(-0.12, 0.12)])
        g = np.array([rng.uniform(0.20, 0.30), rng.uniform(-0.12, 0.12)])
        yaw = 0.0 if shape == "cylinder" else float(rng.uniform(-np.pi, np.pi))
        pose = np.array([s[0], s[1], yaw])
        d = (g - s) / np.linalg.norm(g - s)
        normal = np.array([-d[1], d[0]])
        blocking = half_width(fp, pose, d) + ofp.bounding_radius
        o = np.array([*(s + rng.uniform(0.45, 0.55) * (g - s) + normal * rng.uniform(-0.5, 0.5) * blocking), 0.0])
        pusher = pusher_behind(fp, pose, d, r_p, PUSHER_GAP)
        ok = (clearance(fp, pose, ofp, o) >= OBSTACLE_GAP
              and -disc_penetration(pusher, r_p, ofp, o)[0] >= OBSTACLE_GAP
              and clearance(goal_disc, np.array([*g, 0.0]), ofp, o) >= GOAL_GAP
              and bool(np.all(np.abs(outline_points(fp, pose)) <= half - EDGE_GAP))
              and bool(np.all(np.abs(outline_points(ofp, o)) <= half)))
        if not ok:
            continue
        scene = base.with_poses(pusher_start=pusher, object_poses=[tuple(pose)], obstacle_poses=[tuple(o)],
                                goal=GoalSpec(base.goal.object, (float(g[0]), float(g[1])), base.goal.radius))
        return scene.revalidated(f"bench mpc scene {index} ({shape})", name=f"random_obstacle_{shape}_{seed}_{index}")
    raise RuntimeError(f"no valid {shape} obstacle scene after {max_tries} tries (seed {seed}, index {index})")


def mismatch_world(index: int, seed: int, spread: float, position_noise: float, yaw_noise: float) -> WorldConfig:
    """Per scene, friction and masses off by up to +-``spread`` (uniform), plus observation noise."""
    rng = np.random.default_rng([seed, index, 7])
    f, pf, m = rng.uniform(1.0 - spread, 1.0 + spread, 3)
    return WorldConfig(friction_scale=float(f), pusher_friction_scale=float(pf), mass_scale=float(m),
                       position_noise=position_noise, yaw_noise=yaw_noise, seed=seed * 1000 + index)


def others_displacement(scene, path) -> list:
    """Final planar displacement (m) of every non-target object over a run (``path`` (S, D), true states)."""
    L, t = scene.layout, scene.object_index(scene.goal.object)
    xy = L.object_poses(np.asarray(path))[..., :2]
    return [float(np.linalg.norm(xy[-1, i] - xy[0, i])) for i in range(L.n_objects) if i != t]


def summarise(records: list, failures=FAILURES) -> dict:
    n = len(records)
    ok = [r for r in records if r["outcome"] == Outcome.REACHED.value]
    steps = [t for r in records for t in r["plan_times"]]
    moved = [d for r in records for d in r.get("others_displacement_m", [])]
    return {
        "runs": n,
        "success_rate": len(ok) / n if n else 0.0,
        "failures": {o.value: sum(r["outcome"] == o.value for r in records) for o in failures},
        "mean_actions_success": float(np.mean([r["actions"] for r in ok])) if ok else None,
        "mean_actions": float(np.mean([r["actions"] for r in records])) if records else None,
        "plan_time_per_step_s": float(np.mean(steps)) if steps else None,
        "plan_time_per_task_s": float(np.mean([r["planning_time"] for r in records])) if records else None,
        "task_time_s": float(np.mean([r["task_time"] for r in records])) if records else None,
        "task_time_success_s": float(np.mean([r["task_time"] for r in ok])) if ok else None,
        **fine_slice_summary(records),
        **({"others_displacement_mean_m": float(np.mean(moved)), "others_displacement_max_m": float(np.max(moved))}
           if moved else {}),
        **(realtime_summary(records) if records and records[0]["realtime"] else {}),
        **(cycle_summary(records, "shove" in records[0]) if records and "cycle_starts_s" in records[0] else {}),
    }


def fine_slice_summary(records: list) -> dict:
    """The fine model's work: fine slices per plan and per predicted trajectory (the cost uncertainty-aware
    Parareal saves; runs of older results without the counts are left out)."""
    rs = [r for r in records if "fine_slices" in r]
    plans, trajectories = sum(len(r["plan_times"]) for r in rs), sum(r["trajectories"] for r in rs)
    if not rs:
        return {}
    return {"fine_slices_per_plan": sum(r["fine_slices"] for r in rs) / plans if plans else None,
            "fine_slices_per_trajectory": sum(r["fine_slices"] for r in rs) / trajectories if trajectories else None}


def realtime_summary(records: list) -> dict:
    """What the real-time loop adds: motion and idle time, plan latency and lateness."""
    lat = [t for r in records for t in r["plan_times"]]
    late = sum(r["late_plans"] for r in records)
    return {
        "actions": float(np.mean([r["actions"] for r in records])),
        "motion_time_s": float(np.mean([r["motion_time"] for r in records])),
        "first_plan_s": float(np.mean([r["first_plan_time"] for r in records])),
        "idle_fraction": float(np.mean([r["idle_fraction"] for r in records])),
        "idle_fraction_max": float(np.max([r["idle_fraction"] for r in records])),
        "plan_latency_p95_s": float(np.percentile(lat, 95)) if lat else None,
        "plan_latency_max_s": float(np.max(lat)) if lat else None,
        "plans": len(lat),
        "iterations_per_plan": float(np.mean([i for r in records for i in r["plan_iterations"]] or [0.0])),
        "late_plans": int(late),
        "late_plan_rate": late / len(lat) if lat else 0.0,
        "lateness_max_s": float(max((x for r in records for x in r["lateness"]), default=0.0)),
        # the goal: task time <= 1.1 x motion time + the first plan
        "task_time_over_motion_and_first_plan": float(np.mean([r["task_time"] / (1.1 * r["motion_time"] +
                                                                                r["first_plan_time"])
                                                               for r in records if r["motion_time"] > 0.0] or [0.0])),
    }


def run_scene(scene, index: int, model: str, world_kind: str, config: PlannerConfig, weights, args,
              threads: int, fast: FastConfig | None = None) -> dict:
    """One closed-loop run: scene ``index`` of the seed's sequence, pushed by ``model`` in ``world_kind`` (``fast``:
    by the fast planner with these settings, re-scoring with ``model``); a pure function of them (the mismatch world
    and the shove are seeded by (seed, index), the planner by the seed), wall times aside."""
    wc = WorldConfig() if world_kind == "nominal" else mismatch_world(
        index, args.seed, args.spread, args.obs_noise, np.radians(args.obs_noise_yaw_deg))
    predictor = Predictor(scene, coarse=args.coarse, threads=threads,
                          variance_threshold=args.parareal_variance_threshold,
                          slice_s=fast.slice_duration if fast is not None else config.sampling.control_duration)
    task = PushTask(scene, weights)
    if fast is not None:
        planner = FastMPCPush(FastPlanner(scene, fast, task, predictor, config.model, config.sampling.max_speed))
        max_actions = max(1, int(round(args.max_actions * config.sampling.control_duration * fast.replan_rate)))
    else:
        planner, max_actions = MPCPlanner(scene, config, predictor=predictor, task=task), args.max_actions
    world = SimWorld(scene, wc)
    t0 = time.perf_counter()
    shove, shoved = draw_shove(args.seed, index, args.shove_distance) if args.shove else None, {}
    events = () if shove is None else [(shove.time, lambda w=world, sh=shove, out=shoved, g=task.goal:
                                         _shove(w, g, sh, out, config.sampling.max_speed, weights.path_margin))]
    # the cpu clock spreads this process's CPU time over the unit's threads (the cores it declared)
    clock = {"wall": PLAN_CLOCKS["wall"], "cpu": lambda: time.process_time() / threads,
             "critical": PLAN_CLOCKS["critical"]}[args.plan_clock]
    io = WorldIO(world, charge_planning=args.realtime, plan_clock=clock, events=events)
    rec = run_closed_loop(planner, world, max_actions=max_actions, realtime=args.realtime,
                          plan_margin=args.plan_margin, io=io)
    predictor.close()
    cycles = _cycles(planner, io, config, threads) if args.realtime else {}
    if shove is not None:
        applied = "delta" in shoved
        why_not = shoved.get("why", "") if "time" in shoved else f"the push ended before the shove's {shove.time:.2f} s"
        # when it happened (the drawn instant, on the world's next step), the same for every planner
        cycles["shove"] = {"time_s": shoved.get("time", shove.time), "drawn_time_s": shove.time,
                           "distance_m": shove.distance, "applied": applied,
                           "delta_m": np.asarray(shoved.get("delta", [])).tolist(), "why_not": why_not,
                           "clearance_m": shoved.get("clearance"),  # pusher to object right after it
                           "reach_time_s": shoved.get("reach")}  # back behind it, round it, at the speed limit
        if shoved.get("why"):
            print(f"\n  bench mpc: scene {index} {world_kind}/{model}: {shoved['why']}: not shoved", flush=True)
        cycles["recovery_time_s"] = None if not applied else recovery_time(
            scene, task.goal, io.path_times, io.path, shoved["time"], shoved["before"], weights.path_margin)
        handed = [(None if r.observed_ns is None else (r.observed_ns - io.epoch_ns) * 1e-9,
                   (r.start_ns - io.epoch_ns) * 1e-9 + r.late) for r in io.plans]
        cycles["reaction_time_s"] = None if not applied else reaction_time(handed, shoved["time"])
    record = {**cycles,
        "scene": index, "model": model if fast is None else fast_key(model, fast.replan_rate), "world": world_kind,
        "shape": _shape_name(scene.objects[0]),
        "outcome": rec.outcome.value, "reason": rec.reason,
        "actions": rec.actions, "final_distance_m": rec.final_distance, "plan_times": rec.plan_times,
        "plan_iterations": rec.plan_iterations,
        "planning_time": rec.planning_time, "execution_time": rec.execution_time, "task_time": rec.task_time,
        "wall_time": time.perf_counter() - t0, "world_config": asdict(wc), "realtime": rec.realtime,
        "late_plans": rec.late_plans, "lateness": rec.lateness, "motion_time": rec.motion_time,
        "first_plan_time": rec.first_plan_time, "idle_fraction": rec.idle_fraction,
        "fine_slices": predictor.fine_slices, "trajectories": predictor.trajectories,
        "path": rec.path[:, :scene.layout.n_q].round(5).tolist(),  # pusher xy + object poses, for the plots
    }
    if isinstance(planner, FastMPCPush):  # its plans are its cycles: a late one is dropped, never handed over
        log = planner.log
        record.update(plan_times=list(log.latencies), late_plans=int(sum(log.late)),
                      lateness=[x for x in log.lateness if x > 0.0])
    if TASKS[args.task]["others"]:
        record["others_displacement_m"] = others_displacement(scene, rec.path)
    if args.verbose:
        print(f"\n  {world_kind}/{record['model']} scene {index}: {rec.outcome.value} after {rec.actions} action(s), "
              f"{rec.planning_time:.1f} s planning: {rec.reason}", flush=True)
    return record


def _shape_name(body) -> str:
    """The ``--shapes`` name of a scene's object (a polygon or a mesh: "polygon")."""
    return "polygon" if body.shape == "mesh" else body.shape


def scene_unit(context: dict, unit) -> dict:
    """The study unit of ``bench mpc``: one scene x model x world (``run_scene``) on ``unit.cpus`` threads; a model
    named ``<model>@<HZ>Hz`` is the fast planner re-scoring with ``<model>`` (``--replan-rate``)."""
    model, _, rate = unit["model"].partition("@")
    fast = context["fast"] if rate else None
    return run_scene(context["scenes"][unit["scene"]], unit["scene"], model, unit["world"],
                     replace(context["config"], model=model), context["weights"], context["args"], unit.cpus,
                     fast=fast)


# what makes two runs one study (the study directory's manifest): everything but the units' selection (how many
# scenes, which models and worlds) and what only reports (--verbose, the timing study)
STUDY_SETTINGS = ("task", "seed", "realtime", "coarse", "parareal_variance_threshold", "plan_clock", "plan_margin_s",
                  "max_actions", "mismatch", "weights", "shove", "fast")


def parse_shove_distance(text) -> tuple:
    """``--shove-distance LO,HI`` (m) as (lo, hi); the issue's 2-4 cm when not given."""
    if text is None:
        return SHOVE_DISTANCE
    try:
        lo, hi = (float(v) for v in (text if isinstance(text, (tuple, list)) else str(text).split(",")))
    except ValueError:
        raise ValueError(f"--shove-distance: expected LO,HI in metres (e.g. 0.02,0.04), got {text!r}") from None
    if not 0.0 < lo <= hi <= 0.2:
        raise ValueError(f"--shove-distance: expected 0 < LO <= HI <= 0.2 m, got {text!r}")
    return (lo, hi)


def _shove(world: SimWorld, goal, shove, out: dict, max_speed: float, margin: float) -> None:
    """The ``--shove`` event: shove the target now, recording when, the state before and the displacement (or why
    no direction was free: the run goes on unshoved, and the summary counts ``shoves_applied``), and how far it put
    the object from the pusher: the clearance and the ``reach_time`` back behind it at ``max_speed``."""
    out.update(time=world.time, before=world.planar_state())
    try:
        out["delta"] = apply_shove(world, goal, shove)
        out["clearance"] = pusher_clearance(world.scene, goal, world.planar_state())
        out["reach"] = reach_time(world.scene, goal, world.planar_state(), max_speed, margin)
    except ValueError as e:
        out["why"] = str(e)


def fast_config(rate: float, settings: list, seed: int = 0) -> FastConfig:
    """The fast planner's settings: ``rate`` (``--replan-rate``), its knot noise seeded by ``seed`` (``--seed``,
    as the 1 Hz planner's sampling is) and ``settings`` (``--fast NAME=VALUE``, each VALUE read as YAML, as a ROS
    parameter file would give it: ``--fast seed=S`` wins); a bad one is named as the user spelt it."""
    values = {"replan_rate": rate, "seed": seed}
    for item in settings:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in knobs(FastConfig):
            raise ValueError(f"--fast: {item!r} is not NAME=VALUE with NAME one of {', '.join(knobs(FastConfig))}")
        if name == "replan_rate":
            raise ValueError("--fast: replan_rate is --replan-rate's")
        values[name] = yaml.safe_load(text)
    try:
        return from_values(FastConfig, values)
    except ConfigError as e:
        given = {item.partition("=")[0].strip() for item in settings}
        flag = {"replan_rate": "--replan-rate", "seed": "--fast seed" if "seed" in given else "--seed"}.get(
            e.name, f"--fast {e.name}")
        raise ValueError(f"{flag}: {str(e)[len(e.name) + 2:]}") from None


def fast_key(model: str, rate: float) -> str:
    """The summary's model name of the fast planner re-scoring with ``model`` at ``rate`` Hz."""
    return f"{model}@{rate:g}Hz"


def _cycles(planner, io: WorldIO, config: PlannerConfig, threads: int) -> dict:
    """A run's planning cycles: their starts (s of world time), durations on the plan clock, whether each was
    dropped as late, its fine fraction, and the hand-over velocity jumps and the planner's ``threads`` (the fast
    planner)."""
    if isinstance(planner, FastMPCPush):
        log = planner.log
        return {"cycle_starts_s": [(t - io.epoch_ns) * 1e-9 for t in log.starts_ns],
                "cycle_times_s": log.latencies, "cycles_late": int(sum(log.late)),
                "fine_fraction": float(np.mean(log.fine_fraction)) if log.fine_fraction else None,
                "handover_jump_max": float(max(log.handover_jumps, default=0.0)),
                "rescore_times_s": log.rescore_times, "rescored": log.rescored, "parareal_iterations": log.iterations,
                "abandoned": log.abandoned, "cycles_abandoned": int(sum(log.abandoned)),
                "rescore_slices": planner.planner.n_fine,  # on the planner's model (rescore_horizon)
                "threads": threads}
    # the 1 Hz MPC: a cycle per plan (its switch), all of its predictions made by the planner's model
    pr, N = planner.predictor, config.sampling.horizon
    return {"cycle_starts_s": [(r.start_ns - io.epoch_ns) * 1e-9 for r in io.plans],
            "cycle_times_s": [r.latency for r in io.plans], "cycles_late": int(sum(r.late > 0 for r in io.plans)),
            "fine_fraction": min(1.0, pr.fine_slices / (pr.trajectories * N)) if pr.trajectories else None}


def cycle_summary(records: list, shove: bool) -> dict:
    """Issue 29's figures of a world/model: the median achieved re-plan rate (cycles per second of each run, the
    median of the runs' medians of 1 / cycle spacing), cycle time p95, fine fraction, time to goal (mean over the
    runs that reached it), and with shoves the success rate of the runs shoved and the mean recovery time of those
    that recovered and reached the goal (a run that went on to fail was never back on a path that reaches it)."""
    rates = []
    for r in records:
        gaps = np.diff(r["cycle_starts_s"])
        gaps = gaps[gaps > 0]
        if gaps.size:
            rates.append(float(np.median(1.0 / gaps)))
    times = [t for r in records for t in r["cycle_times_s"]]
    ok = [r for r in records if r["outcome"] == Outcome.REACHED.value]
    fine = [r["fine_fraction"] for r in records if r.get("fine_fraction") is not None]
    out = {"replan_rate_hz": float(np.median(rates)) if rates else None,
           "cycle_time_p95_s": float(np.percentile(times, 95)) if times else None,
           "cycle_time_median_s": float(np.median(times)) if times else None,
           "cycles_late": int(sum(r["cycles_late"] for r in records)), "cycles": len(times),
           "cycles_abandoned": int(sum(r.get("cycles_abandoned", 0) for r in records)),
           "fine_fraction": float(np.mean(fine)) if fine else None,
           "time_to_goal_s": float(np.mean([r["task_time"] for r in ok])) if ok else None}
    if any("handover_jump_max" in r for r in records):
        out["handover_jump_max_mps"] = float(max(r.get("handover_jump_max", 0.0) for r in records))
        out.update(predicted_cycles(records, measured_cores=records[0]["threads"]))
    if shove:
        shoved = [r for r in records if r["shove"]["applied"]]
        # recovered: back on a path that reaches the goal, so only in runs that reached it
        recovered = [r for r in shoved
                     if r.get("recovery_time_s") is not None and r["outcome"] == Outcome.REACHED.value]
        rec = [r["recovery_time_s"] for r in recovered]
        out["disturbance_success_rate"] = (sum(r["outcome"] == Outcome.REACHED.value for r in shoved) / len(shoved)
                                           if shoved else None)
        out["recovery_time_s"] = float(np.mean(rec)) if rec else None
        # the part of it the speed limit sets where the pusher has to get back behind the object (core.sim.shove)
        reach = [(r["recovery_time_s"], r["shove"]["reach_time_s"]) for r in recovered
                 if r["shove"].get("reach_time_s") is not None]
        out["recovery_reach_time_s"] = float(np.mean([b for _, b in reach])) if reach else None
        out["recovery_over_reach_median"] = float(np.median([a / b for a, b in reach])) if reach else None
        out["recovery_time_median_s"] = float(np.median(rec)) if rec else None
        out["recovered"] = len(rec)
        react = [r["reaction_time_s"] for r in records if r.get("reaction_time_s") is not None]
        out["reaction_time_s"] = float(np.mean(react)) if react else None  # (records made before it: none)
        out["reaction_time_median_s"] = float(np.median(react)) if react else None
        out["shoves_applied"] = int(sum(r["shove"]["applied"] for r in records))
        # recovered before any plan that had seen the shove acted: the running plan pushed the object on
        out["recovered_before_reaction"] = int(sum(
            r.get("recovery_time_s") is not None and r.get("reaction_time_s") is not None
            and r["outcome"] == Outcome.REACHED.value and r["recovery_time_s"] < r["reaction_time_s"]
            for r in records))
        gaps = [r["shove"]["clearance_m"] for r in records if r["shove"].get("clearance_m") is not None]
        out["shove_clearance_median_m"] = float(np.median(gaps)) if gaps else None  # pusher to object after it
    return out


def predicted_cycles(records: list, measured_cores: int, cores=(2, 4, 16)) -> dict:
    """The fast planner's median cycle time on more cores by ``bench speedup``'s model: the cycle's re-scoring
    (M candidates x N slices, fine: ``batched_fine_time``; Parareal-K: ``batched_parareal_time``, its coarse sweeps
    left out) rescaled from the ``measured_cores`` it ran on, the rest of the cycle (roll forward, screening,
    scoring: one thread) as measured. c_f per fine slice is solved from each cycle's measured re-scoring time."""
    rest, c_f, last = [], [], None
    for r in records:
        N = r["rescore_slices"]
        for total, t, M, K, gone in zip(r["cycle_times_s"], r["rescore_times_s"], r["rescored"],
                                        r["parareal_iterations"], r.get("abandoned") or [False] * len(r["rescored"])):
            if gone:  # a re-scoring abandoned at the budget's end did not roll the whole horizon out
                continue
            rounds = (batched_fine_time(M, N, measured_cores, 1.0) if K == 0 else
                      batched_parareal_time(M, N, K, measured_cores, 0.0, 1.0))
            rest.append(max(0.0, total - t))
            c_f.append(t / rounds)
            last = (M, N, K)
    if last is None:
        return {}
    M, N, K = last
    other, cf = float(np.median(rest)), float(np.median(c_f))
    pred = {f"P{P}": other + (batched_fine_time(M, N, P, cf) if K == 0 else batched_parareal_time(M, N, K, P, 0.0, cf))
            for P in cores}
    return {"predicted_cycle_s": pred, "predicted_max_rate_hz": {k: 1.0 / v for k, v in pred.items()},
            "cycle_rest_median_s": other, "c_f_slice_s": cf}


def _thread_cpu_times() -> dict:
    """CPU time (s) of every live Python thread of this process (the caller and the fine model's pool workers)."""
    return {t.ident: time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threading.enumerate()}


def _time_job(job, repeats: int) -> tuple[float, float]:
    """Median wall time and median busiest-thread CPU time of ``job`` (after one warm-up call, which also starts
    the pool's threads). On a machine shared with other jobs the wall time also counts their share of the cores;
    the CPU time of the busiest thread is what the job takes on an idle machine with a core per thread, as long as
    its threads do not wait for each other (a lower bound where they do)."""
    job()
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t = _thread_cpu_times(), time.perf_counter()
        job()
        wall.append(time.perf_counter() - t)
        c1 = _thread_cpu_times()
        cpu.append(max(c1[k] - c0.get(k, 0.0) for k in c1))
    return float(np.median(wall)), float(np.median(cpu))


def timing_study(scene, models, config: PlannerConfig, weights, repeats: int, coarse: str = "analytical",
                 clock: str = "wall") -> dict:
    """Time of one optimiser iteration's rollouts (samples x N slices) per model and execution mode, on ``clock``
    (``wall``, or ``cpu``: the busiest thread's CPU time, see ``_time_job``); both are kept in the result."""
    P = default_threads()
    task = PushTask(scene, weights)
    rng = np.random.default_rng(0)
    x0 = scene.initial_state()
    s = config.sampling
    base = task.straight_push(x0, config.proposals.nominal_speed, s.horizon)
    U = base[None] + rng.normal(0.0, np.sqrt(s.exploration_variance), (s.samples, s.horizon, 2))
    X0 = np.repeat(x0[None], s.samples, 0)
    out = {"cores": P, "samples": s.samples, "horizon": s.horizon, "repeats": repeats, "clock": clock, "models": {}}
    predictors = {1: Predictor(scene, coarse=coarse, threads=1), P: Predictor(scene, coarse=coarse, threads=P)}
    modes = [("one after another, 1 thread", 1, False), (f"one after another, {P} threads", P, False),
             ("batched, 1 thread", 1, True), (f"batched, {P} threads", P, True)]
    for model in models:
        wall, cpu = {}, {}
        for label, threads, batched in modes:
            pr = predictors[threads]
            if batched:
                def job():
                    pr.predict(X0, U, s.control_duration, model=model)  # noqa: B023 - timed within this iteration
            else:
                def job():
                    for m in range(s.samples):
                        pr.predict(x0, U[m], s.control_duration, model=model)  # noqa: B023 - timed in this iteration
            wall[label], cpu[label] = _time_job(job, repeats)
        entry = cpu if clock == "cpu" else wall
        serial = entry["one after another, 1 thread"]
        out["models"][model] = {"seconds": entry,
                                "speedup_vs_serial": {k: serial / max(v, 1e-9) for k, v in entry.items()},
                                "wall_seconds": wall, "cpu_seconds_busiest_thread": cpu}
    out["modes"] = [m[0] for m in modes]
    out["speedup_model"] = speedup_model(predictors[1], X0, U, config, repeats, out)
    for pr in predictors.values():
        pr.close()
    return out


def speedup_model(pr: Predictor, X0, U, config: PlannerConfig, repeats: int, measured: dict,
                  cores=(1, 2, 4, 16)) -> dict:
    """What ``bench speedup``'s model predicts for one optimiser iteration (M samples x N slices, batched) on more
    cores than this machine has: the fine model's N chained sweeps of M parallel samples against Parareal-K's
    (1+K) coarse sweeps and K fine sweeps of all unconverged slices (``batched_parareal_time``). c_f = this
    iteration's own fine slice cost (its samples one after another on 1 thread / (M N)), c_c = one batched call
    of the coarse model on the M samples; both on the study's clock."""
    M, N, dt = U.shape[0], U.shape[1], config.sampling.control_duration
    cpu = measured.get("clock") == "cpu"
    if "fine" in measured["models"]:
        serial_fine = measured["models"]["fine"]["seconds"]["one after another, 1 thread"]
    else:
        serial_fine = _time_job(lambda: [pr.predict(X0[m], U[m], dt, model="fine") for m in range(M)],
                                repeats)[int(cpu)]
    c_f = serial_fine / (M * N)
    coarse = pr.coarse_model()
    c_c = _time_job(lambda: coarse.propagate(X0, U[:, 0], dt), max(3, repeats))[int(cpu)]
    out = {"c_f_s": c_f, "c_c_batch_s": c_c, "coarse": coarse.name, "predicted_s": {}}
    for P in cores:
        row = {"fine": batched_fine_time(M, N, P, c_f)}
        for K in (1, 2):
            row[f"parareal{K}"] = batched_parareal_time(M, N, K, P, c_c, c_f)
        row["parareal1_speedup_over_fine"] = row["fine"] / row["parareal1"]
        out["predicted_s"][f"P{P}"] = row
    return out


def planner_config(args) -> PlannerConfig:
    """The planner's settings from the command line; a bad one is named as its option."""
    try:
        sampling = SamplingConfig(horizon=args.horizon, control_duration=args.control_duration,
                                  samples=args.samples, iterations=args.iterations, seed=args.seed)
        proposals = ProposalConfig(nominal_speed=args.nominal_speed, approach_speed=args.approach_speed,
                                   primitive=args.primitive)
        return PlannerConfig(optimiser=args.optimiser, sampling=sampling, proposals=proposals)
    except ConfigError as e:
        raise ValueError(f"--{e.name.replace('_', '-')}: {str(e)[len(e.name) + 2:]}") from None


def run(args) -> dict:
    if args.task not in TASKS:
        raise ValueError(f"--task: unknown task {args.task!r} (expected one of {', '.join(TASKS)})")
    task = TASKS[args.task]
    if args.models is None:  # the task's; with --replan-rate those the fast planner re-scores with
        args.models = ",".join(m for m in task["models"].split(",") if args.replan_rate is None
                               or ModelSpec.parse(m).kind in ("fine", "parareal"))
    args.coarse = args.coarse or task["coarse"]
    try:  # fail early, naming a bad model
        models = [ModelSpec.parse(m).name for m in args.models.split(",") if m.strip()]
    except ValueError as e:
        raise ValueError(f"--models: {e}") from None
    worlds = [w.strip() for w in (args.worlds or ("nominal,mismatch" if args.mismatch else "nominal")).split(",")]
    for w in worlds:
        if w not in ("nominal", "mismatch"):
            raise ValueError(f"--worlds: unknown world {w!r} (expected nominal and/or mismatch)")
    defaults = realtime_settings() if args.realtime else {k: getattr(SamplingConfig, k) for k in REALTIME_KEYS}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.max_actions is None:
        args.max_actions = max(1, int(round(TASK_TIME_LIMIT / args.control_duration)))
    config = planner_config(args)
    weights = load_cost_weights(args.costs)
    fast = None
    if args.replan_rate is not None:
        if not args.realtime:
            raise ValueError("--replan-rate: the fast planner plans while the pusher moves; add --realtime")
        fast = fast_config(args.replan_rate, args.fast, args.seed)
        for m in models:
            kind = ModelSpec.parse(m).kind
            if kind not in ("fine", "parareal"):
                raise ValueError(f"--models: the fast planner re-scores with fine or parareal<K>, not {m!r} "
                                 f"(with --replan-rate)")
    elif args.fast:
        raise ValueError("--fast: sets the fast planner, which runs with --replan-rate HZ")
    planners = [p.strip() for p in (args.planners or ("mpc,fast" if fast is not None else "mpc")).split(",")]
    for name in planners:
        if name not in ("mpc", "fast"):
            raise ValueError(f"--planners: {name!r} is not a planner of this bench (mpc, fast)")
    if "fast" in planners and fast is None:
        raise ValueError("--planners: fast needs --replan-rate HZ (the rate it re-plans at)")
    if fast is not None and "fast" not in planners:
        raise ValueError("--planners: --replan-rate runs the fast planner; name fast among the planners")
    if len(set(planners)) != len(planners):
        raise ValueError(f"--planners: {args.planners!r} names a planner twice")
    if args.shove and not args.realtime:
        raise ValueError("--shove: the disturbance benchmark runs in real time; add --realtime")
    if args.shove_distance is not None and not args.shove:
        raise ValueError("--shove-distance: sets how far --shove moves the object; add --shove")
    args.shove_distance = parse_shove_distance(args.shove_distance)
    if args.scenes < 0:
        raise ValueError(f"--scenes: must be >= 0 (0 = only the timing study), got {args.scenes}")
    if args.scenes == 0 and not args.timing:
        raise ValueError("--scenes 0 runs only the timing study, and --no-timing turns that off: nothing to do")
    shapes = parse_shapes(args.shapes)
    if shapes and not task["shapes"]:
        raise ValueError(f"--shapes: the {args.task} task draws its own objects; --shapes draws the obstacle task's "
                         f"object")
    scenes = task["scenes"](args.scenes, args.seed, shapes)
    timing_scene = scenes[0] if scenes else task["scenes"](1, args.seed, shapes)[0]  # --scenes 0: the same first
    if fast is not None and scenes:  # a model the fast planner cannot re-score with is named before any run
        for m in models:
            pr = Predictor(scenes[0], coarse=args.coarse, threads=1, slice_s=fast.slice_duration)  # as run_scene
            try:
                FastPlanner(scenes[0], fast, PushTask(scenes[0], weights), pr, m, config.sampling.max_speed)
            except ConfigError as e:
                raise ValueError(f"--models: {m} with --replan-rate: {str(e)[len(e.name) + 2:]}") from None
            finally:
                pr.close()
    kind = task["label"]
    if shapes:
        kind += f" ({', '.join(shapes)})"
    described = []  # each planner that runs, as configured
    if "mpc" in planners:
        described.append(
            f"1 Hz planner: {config.optimiser} optimiser, {config.sampling.samples} samples x "
            f"{config.sampling.iterations} iterations, N = {config.sampling.horizon} x "
            f"{config.sampling.control_duration:g} s"
            + (f", real time: up to {config.sampling.iterations} iterations until the switch (margin "
               f"{args.plan_margin:g} s)" if args.realtime else ""))
    if "fast" in planners:
        described.append(f"fast planner at {fast.replan_rate:g} Hz: {fast.candidates} candidates on the "
                         f"{fast.screen_model} screen, best {fast.rescore} re-scored, horizon {fast.horizon:g} s, "
                         f"knots every {fast.knot_interval:g} s")
    print(f"bench mpc: {len(scenes)} random {kind} scenes x {len(models)} models x {len(worlds)} world(s), max "
          f"{args.max_actions} actions{'; latency charged as measured' if args.realtime else ''}; "
          + "; ".join(described), flush=True)
    res = {"task": args.task, "seed": args.seed, "scenes": len(scenes), "shapes": list(shapes) if shapes else None,
           "models": models, "coarse": args.coarse, "parareal_variance_threshold": args.parareal_variance_threshold,
           "worlds": worlds, "realtime": args.realtime, "replan_rate": args.replan_rate, "planners": planners,
           "shove": args.shove, "shove_distance_m": list(args.shove_distance) if args.shove else None,
           "fast": None if fast is None else asdict(fast),
           "plan_margin_s": args.plan_margin,
           "plan_clock": args.plan_clock, "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
           "planner": {**asdict(config), "model": config.model.name}, "weights": weights.as_dict(),
           "max_actions": args.max_actions,
           "mismatch": {"spread": args.spread, "position_noise_m": args.obs_noise,
                        "yaw_noise_deg": args.obs_noise_yaw_deg},
           "scene_defs": [s.to_dict() for s in scenes], "summary": {}, "runs": []}
    path, out = output_paths(args, "mpc")
    # the study: one unit per scene x model x world, a real-time one on the planner's cores (a timing study shares
    # no core with another unit), else on one; its directory <out>/mpc_study resumes and extends
    cpus = (args.threads or cores()) if args.realtime else (args.threads or 1)
    settings = {k: res[k] for k in STUDY_SETTINGS}
    settings["planner"] = {k: v for k, v in res["planner"].items() if k != "model"}
    if shapes:  # (only then: studies made before --shapes existed resume as they were)
        settings["shapes"] = list(shapes)
    # a manifest written before --shove-distance existed shoved 2-4 cm
    settings["shove_distance_m"] = res["shove_distance_m"]
    before_distance = {"shove_distance_m": list(SHOVE_DISTANCE) if args.shove else None}
    if args.realtime:
        settings["threads"] = cpus  # the planner's cores: they decide how far an anytime plan gets
    study = Study(out / "mpc_study", "bench mpc", settings, defaults=before_distance)
    # the fast planner's runs (--replan-rate) are units of their own, named <model>@<HZ>Hz
    keys = [k for m in models for k in (([m] if "mpc" in planners else [])
                                        + ([fast_key(m, fast.replan_rate)] if fast is not None else []))]
    units = [Unit.of(cpus, world=w, model=m, scene=i) for w in worlds for m in keys for i in range(len(scenes))]
    context = {"scenes": scenes, "config": config, "weights": weights, "args": _plain(args), "fast": fast}
    results = study.run(units, scene_unit, context, args, desc="bench mpc runs")
    res["study"] = str(study.root)
    for world in (worlds if scenes else []):
        for model in keys:
            records = [results[u.id] for u in units if (u["world"], u["model"]) == (world, model)]
            res["summary"][f"{world}/{model}"] = summarise(records, task["failures"])
            for shape in shapes or ():
                of_shape = [r for r in records if r["shape"] == shape]
                if of_shape:  # a shape the seed drew no scene of has no figures (printed below)
                    res.setdefault("summary_by_shape", {}).setdefault(shape, {})[f"{world}/{model}"] = summarise(
                        of_shape, task["failures"])
            res["runs"] += records
            _plot_runs(scenes, records, out / f"mpc_{world}_{model}.png", f"{world} world, {model}")
    if res["summary"]:
        print_summary(res, f"bench mpc: {len(scenes)} random {kind} scenes (seed {args.seed})")
        for shape, summary in res.get("summary_by_shape", {}).items():
            print_summary({**res, "summary": summary}, f"bench mpc: the {shape} scenes "
                          f"({sum(_shape_name(sc.objects[0]) == shape for sc in scenes)} of them)")
        missing = [s for s in shapes or () if s not in res.get("summary_by_shape", {})]
        if missing:
            print(f"bench mpc: no scene of shape {', '.join(missing)} among the {len(scenes)} (more --scenes draws "
                  f"every shape)")
        for r in res["runs"]:
            if r["outcome"] != Outcome.REACHED.value:
                print(f"  {r['world']}/{r['model']} scene {r['scene']}: {r['outcome']}: {r['reason']}")
    if args.timing:
        print("bench mpc: timing one optimiser iteration ...", flush=True)
        t = timing_study(timing_scene, [m for m in models if m != "coarse"] or models,
                         config, weights, args.timing_repeats, args.coarse, args.plan_clock)
        res["timing"] = t
        trows = [(m, *[v["seconds"][k] * 1e3 for k in t["modes"]], v["speedup_vs_serial"][t["modes"][-1]])
                 for m, v in t["models"].items()]
        print_table(["model"] + [f"{k} (ms)" for k in t["modes"]] + ["batched speedup"], trows,
                    title=f"bench mpc: one optimiser iteration = {t['samples']} samples x {t['horizon']} slices "
                          f"(median of {t['repeats']}, {t['cores']} cores, {t['clock']} clock"
                          + (": the busiest thread's CPU time" if t["clock"] == "cpu" else "") + ")")
        sm = t["speedup_model"]
        print_table(["cores", "fine (ms)", "parareal1 (ms)", "parareal2 (ms)", "parareal1 speedup over fine"],
                    [(k[1:], v["fine"] * 1e3, v["parareal1"] * 1e3, v["parareal2"] * 1e3,
                      v["parareal1_speedup_over_fine"]) for k, v in sm["predicted_s"].items()],
                    title=f"bench mpc: speedup model (bench speedup's, batched, perfect scaling) for the same "
                          f"iteration: c_f = {sm['c_f_s'] * 1e3:.1f} ms per fine slice, c_c = "
                          f"{sm['c_c_batch_s'] * 1e3:.2f} ms per {sm['coarse']} call on {t['samples']} samples")
    write_json(path, res)
    return res


def print_summary(res: dict, title: str) -> None:
    """The table of a result's ``summary``: one row per world/model."""
    task, realtime, rows = TASKS[res["task"]], res["realtime"], []
    for key, s in res["summary"].items():
        row = (*key.split("/"), f"{100 * s['success_rate']:.0f}%", *s["failures"].values(),
               s["mean_actions_success"] or "-")
        if realtime:
            row += (s["task_time_s"], s["motion_time_s"], s["first_plan_s"], s["idle_fraction"],
                    s["plan_latency_p95_s"], s["plan_latency_max_s"], f"{s['late_plans']}/{s['plans']}",
                    s["iterations_per_plan"])
        else:
            row += (s["plan_time_per_step_s"], s["task_time_s"], s.get("fine_slices_per_plan", "-"))
        if task["others"]:
            row += (1e3 * s.get("others_displacement_mean_m", 0.0), 1e3 * s.get("others_displacement_max_m", 0.0))
        rows.append(row)
    short = {"hit_obstacle": "hit", "off_table": "off table", "other_in_goal": "other in goal"}
    columns = ["world", "model", "success", *[short.get(o.value, o.value) for o in task["failures"]], "actions (ok)"]
    columns += (["task s", "motion s", "first plan s", "idle", "latency p95 s", "latency max s", "late",
                 "iterations/plan"] if realtime else ["plan s/step", "task s", "fine slices/plan"])
    columns += ["others moved mean mm", "max mm"] if task["others"] else []
    print_table(columns, rows, title=title)
    cycles = [(*key.split("/"), s["replan_rate_hz"], s["cycle_time_p95_s"], f"{s['cycles_late']}/{s['cycles']}",
               s["cycles_abandoned"], s["fine_fraction"], s["time_to_goal_s"] or "-", *(
                   ("-" if s["disturbance_success_rate"] is None else f"{100 * s['disturbance_success_rate']:.0f}%",
                    s["recovery_time_s"] or "-", s.get("recovery_reach_time_s") or "-",
                    f"{s['recovered']}/{s['shoves_applied']}",
                    s.get("reaction_time_s") or "-",
                    s.get("recovered_before_reaction", "-"),
                    "-" if s.get("shove_clearance_median_m") is None else s["shove_clearance_median_m"] * 1e3)
                   if "recovery_time_s" in s else ()))
              for key, s in res["summary"].items() if "replan_rate_hz" in s]
    if cycles:
        print_table(["world", "model", "re-plan Hz", "cycle p95 s", "late", "abandoned", "fine fraction",
                     "time to goal s",
                     *(["shove success", "recovery s", "reach s", "recovered/shoved", "reaction s", "recovered first",
                        "clearance mm"] if len(cycles[0]) > 8 else [])],
                    cycles,
                    title=f"{title}: planning cycles")


def _plot_runs(scenes, records, path, title):
    from matplotlib.patches import Circle, Polygon  # noqa: PLC0415

    def outline(body, pose, **kw):
        if body.shape == "cylinder":
            return Circle(pose[:2], body.radius, **kw)
        return Polygon(body.footprint.corners(np.asarray(pose, dtype=float)), closed=True, **kw)
    plt = pyplot()
    n = len(scenes)
    cols = min(n, 5)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    colors = {"reached": "tab:green", "hit_obstacle": "tab:red", "off_table": "tab:orange",
              "other_in_goal": "tab:red", "timeout": "tab:purple", "failed": "k"}
    for ax, scene, rec in zip(axes.flat, scenes, records):
        p = np.asarray(rec["path"])
        g = scene.goal
        target = scene.object_index(g.object)
        for ob in scene.obstacles:
            ax.add_patch(outline(ob, ob.pose, color="0.3"))
        ax.add_patch(Circle(g.position, g.radius, color="tab:green", alpha=0.25))
        ax.plot(p[:, 0], p[:, 1], color="0.5", lw=0.8, label="pusher")
        c = colors.get(rec["outcome"], "k")
        for i, o in enumerate(scene.objects):  # every object: start dashed, path, end solid
            xy = p[:, 2 + 3 * i:4 + 3 * i]
            oc = c if i == target else "tab:blue"
            ax.add_patch(outline(o, o.pose, fill=False, ec="0.5", ls="--"))
            ax.plot(xy[:, 0], xy[:, 1], color=oc, lw=1.6 if i == target else 1.0)
            ax.add_patch(outline(o, p[-1, 2 + 3 * i:5 + 3 * i], fill=False, ec=oc))
        hx, hy = scene.table.half
        ax.set_xlim(-hx, hx)
        ylim = 0.3 if len(scene.objects) == 1 else hy  # one slider: the band it moves in; clutter: the table
        ax.set_ylim(-ylim, ylim)
        ax.set_aspect("equal")
        ax.set_title(f"scene {rec['scene']}: {rec['outcome']} ({rec['actions']})", fontsize=8)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(f"bench mpc: {title} (target path coloured by outcome, other objects blue, pusher grey)",
                 fontsize=9)
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("mpc", parents=[parent], help="closed-loop MPC: around an obstacle (paper 000 Sec. 4.3) or "
                                                     "through clutter (--task multi_object, paper 001)")
    p.add_argument("--task", default="obstacle", choices=list(TASKS),
                   help="obstacle: push around a static obstacle; multi_object: push the target into the goal among "
                        "three other cylinders without pushing them off the table or into the goal")
    p.add_argument("--scenes", type=nonnegative_int, default=3,
                   help="random scenes of the task (paper goal: 50; 0 = only the timing study)")
    p.add_argument("--shapes", default=None, metavar="SHAPE,...",
                   help=f"obstacle task: scene i's object is the i-th of these shapes, cyclically (any of "
                        f"{', '.join(SHAPES)}: the objects of box_slider, cylinder_slider, hexagon_slider, "
                        f"ellipse_slider) at a random yaw, placed by its outline; default: the cylinder of "
                        f"obstacle_push, as before")
    p.add_argument("--models", default=None,
                   help=f"comma-separated models (default: obstacle {DEFAULT_MODELS}, paper 000: {ALL_MODELS}; "
                        f"multi_object {TASKS['multi_object']['models']}; with --replan-rate the fine and "
                        f"parareal<K> among them; any of {', '.join(spec_names())})")
    p.add_argument("--coarse", default=None, choices=coarse_choices(),
                   help="coarse model of 'coarse' and of Parareal (default: obstacle analytical, multi_object "
                        "learned)")
    p.add_argument("--parareal-variance-threshold", type=float, default=0.0,
                   help="uncertainty-aware Parareal (m of position sigma; needs --coarse learned_ensemble): a "
                        "trajectory stops iterating once the coarse model is that sure of its slices left; 0 = off")
    p.add_argument("--mismatch", action="store_true",
                   help="also run in a world with other friction/masses and observation noise")
    p.add_argument("--worlds", default=None, help="comma-separated worlds to run: nominal, mismatch (overrides "
                                                  "--mismatch)")
    p.add_argument("--spread", type=relative_spread, default=0.25, help="mismatch: friction and masses x U(1-s, 1+s)")
    p.add_argument("--obs-noise", type=float, default=0.001, help="mismatch: observed position noise std (m)")
    p.add_argument("--obs-noise-yaw-deg", type=float, default=1.0, help="mismatch: observed yaw noise std (deg)")
    p.add_argument("--optimiser", default=PlannerConfig.optimiser, choices=list(OPTIMISERS),
                   help="sampling optimiser (the registry core/planning/optimisers)")
    p.add_argument("--realtime", action="store_true",
                   help="plan while the pusher moves (real time), planning time charged in simulated time as measured")
    p.add_argument("--plan-clock", choices=sorted(PLAN_CLOCKS), default="wall",
                   help="how planning is timed: wall time, or this process's CPU time / cores (an idle machine's "
                        "wall time, for a machine shared with other jobs; the timing study: the busiest thread's "
                        "CPU time), or critical: the planning thread's CPU time plus the busiest fine worker's (an "
                        "idle machine's wall time where work is not spread evenly over the cores); --realtime "
                        "charges it to the world")
    p.add_argument("--plan-margin", type=float, default=0.0,
                   help="--realtime: seconds before the switch by which a plan is due")
    p.add_argument("--samples", type=positive_int, default=None,
                   help=f"default {SamplingConfig.samples}; --realtime: the planner node's (config/mpc_planner.yaml)")
    p.add_argument("--iterations", type=positive_int, default=None,
                   help=f"default {SamplingConfig.iterations}; --realtime: at most the planner node's "
                        f"(config/mpc_planner.yaml), as many as fit before the switch")
    p.add_argument("--horizon", type=int, default=None,
                   help=f"default {SamplingConfig.horizon}; --realtime: the planner node's (config/mpc_planner.yaml)")
    p.add_argument("--control-duration", "--dt", type=float, default=None,
                   help=f"seconds each planned control is held, default {SamplingConfig.control_duration}; "
                        f"--realtime: the planner node's (config/mpc_planner.yaml)")
    p.add_argument("--nominal-speed", type=float, default=ProposalConfig.nominal_speed)
    p.add_argument("--approach-speed", type=float, default=ProposalConfig.approach_speed)
    p.add_argument("--primitive", action=argparse.BooleanOptionalAction, default=ProposalConfig.primitive,
                   help="propose the push primitive every plan")
    p.add_argument("--max-actions", type=positive_int, default=None,
                   help=f"actions before a timeout (default: {TASK_TIME_LIMIT:g} s of them, 20 at 1 s); the fast "
                        f"planner (--replan-rate) gets the same time in its cycles (20 at 1 s = 200 at 10 Hz)")
    p.add_argument("--costs", default=None, help="cost weights YAML (default: config/costs.yaml)")
    p.add_argument("--threads", type=nonnegative_int, default=0,
                   help="threads for the fine model, the CPUs of a unit; 0 = 1 "
                   "(--realtime: all cores)")
    p.add_argument("--timing", action=argparse.BooleanOptionalAction, default=True,
                   help="time one optimiser iteration per model and execution mode")
    p.add_argument("--timing-repeats", type=positive_int, default=1)
    p.add_argument("--replan-rate", type=float, default=None, metavar="HZ",
                   help="--realtime: also run the fast planner (planner 'fast': anytime re-planning at HZ, the "
                        "candidates screened on a coarse model, the best re-scored with each model) on the same "
                        "scenes, side by side with the 1 Hz planner; summary keys <world>/<model>@<HZ>Hz")
    p.add_argument("--fast", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting of the fast planner (its node parameter fast.NAME, e.g. --fast horizon=4.0 "
                        "--fast screen_substep=0.05; VALUE read as YAML); default: FastConfig's")
    p.add_argument("--planners", default=None, metavar="NAME,...",
                   help="which planners run: mpc (the 1 Hz planner), fast (needs --replan-rate); default mpc, and "
                        "with --replan-rate both, side by side (a study run with one resumes with the other)")
    p.add_argument("--shove", action="store_true",
                   help="shove the pushed object sideways (2-4 cm, --shove-distance) at a random instant 1.5-3.5 s "
                        "into the push (seeded per scene, the same for every planner); adds disturbance_success_rate, "
                        "recovery_time_s, reaction_time_s, recovered_before_reaction, shove_clearance_median_m, "
                        "recovery_reach_time_s and recovery_over_reach_median")
    p.add_argument("--shove-distance", default=None, metavar="LO,HI",
                   help="--shove: how far (m), drawn uniformly per scene; default 0.02,0.04 (issue 29's: the "
                        "object stays in the pusher's way; further off, the running plan no longer pushes it)")
    p.add_argument("--verbose", action="store_true", help="print every run's outcome as it finishes")
    add_seeds_argument(p)
    add_arguments(p, "scene x model x world runs")
    p.set_defaults(func=seeded(run, name="mpc", units=False))
    return p
