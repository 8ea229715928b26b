"""``parapush bench dgoc``: paper 003 Table II, offline planning of ZS-, DS-, DP- and WS-DDP on the quasi-static model.

Targets: ``--targets`` slider poses drawn uniformly from a 0.4 x 0.4 m square centred on the slider's start and any
yaw in [-pi, pi) (the paper's task space and thresholds were lost in extraction; these are ours). The slider starts
at rest at the scene's start with the pusher at the scene's pusher start (touching the -x face). Success: the final
slider pose within 1 cm in x and in y and 0.1 rad in yaw of the target. All targets of a method are solved as one
batch; ``solve_time_s`` is the batch's wall time divided by the number of targets, ``single_solve_time_s`` the mean
wall time of ``--single`` targets planned one at a time (``single_solve_cpu_s``: their CPU time, what they take on
an otherwise idle machine). WS-DDP continues from DP-DDP's solution and its times
include DP-DDP's (WS-DDP is the DG-OC framework). ``dgoc`` (with ``--escalate-k K`` > k) is WS-DDP as DG-OC plans
in the stack (``DGOCPlanner.plan_escalating``): the targets whose WS-DDP plan misses the success thresholds are
planned again from their next nearest demonstrations, up to the K nearest; its times include the first batch.
``--methods`` restricts the run to some methods (``dgoc`` needs ``ws``).

``--track N`` then executes the DG-OC plans of the first N targets in MuJoCo (``SimWorld``, the fine model judges)
with the 100 Hz tracking controller (feedback gains, trust-region error filter, re-planning), in three cases:
``nominal``; ``perturbed``: at t = 1 s the slider is displaced by up to 4 cm in x and y and 0.117 rad (uniform,
never into the pusher), paper 003's largest disturbances; ``mismatch``: the world's slider-table friction x 1.3,
pusher-slider friction x 0.7 and slider mass x 1.3. Tracked plans are made on the model fitted to the scene's fine
model (``fine_c_scale``: the paper's uniform-pressure model where the scene rests the box on a support grid, as
block_003 does). ``tracked_success_rate`` uses the same thresholds on MuJoCo's final slider pose.

``--compare-mpc N`` pushes the first N targets (same start, same thresholds) in the nominal MuJoCo world both
ways: DG-OC (one target planned alone, DP -> WS, then tracked at 100 Hz with re-planning) and the sampling MPC
planner of paper 000 (``--mpc-model``, fine or Parareal-1; a goal disc of 1 cm and a yaw tolerance of 0.1 rad,
1 s controls, up to ``--mpc-actions`` actions). Per method: success, planning time (wall, re-plans included),
execution time (simulated), their sum, and the final pose error (JSON ``compare_mpc``).

The run is a study of the engine (``parapush_ros.tools.study``): each scene's targets are planned in units of
``--unit-targets`` targets (a batch each; ``--track``, ``--compare-mpc`` and ``--single`` count the targets from
the first of the seed's), one Ray task of one CPU per unit (``--workers``, ``--ray``), kept in ``<out>/dgoc_study``
so that a re-run resumes; the result is their union (every statistic recomputed from the per-target errors each unit
keeps; the plan time per target is the units' batch times summed over the targets).
"""
from __future__ import annotations

import json
import time

import numpy as np

from tqdm import tqdm

from ...arguments import nonnegative_int, positive_int
from ...core.config import ConfigError
from ...core.models.quasistatic import QuasiStaticPusherSlider, fine_c_scale
from ...core.models.registry import Predictor
from ...core.planning.ddp.costs import DGOCWeights
from ...core.planning.ddp.demonstrations import load_library
from ...core.planning.ddp.dgoc import HORIZON_S, METHOD_NAMES, METHODS, PLAN_DT, DGOCPlanner
from ...core.planning.ddp.solver import DDPSettings
from ...core.planning.ddp.tracking import TrackingConfig, track_in_world
from ...core.planning.planner import MPCPlanner, PlannerConfig
from ...core.planning.tasks import Goal, PushTask
from ...core.scene.spec import load_scene
from ...core.scene.state import wrap_angle
from ...core.sim.closed_loop import run_closed_loop
from ...core.sim.world import SimWorld, WorldConfig
from ..study import Study, Unit, add_arguments, jsonable
from .common import (_plain, add_seeds_argument, output_paths, print_table, pyplot, save_figure, seeded, study_settings,
                     write_json)

TASK_HALF = 0.2  # m: half side of the task-space square around the start
SUCCESS_XY, SUCCESS_YAW = 0.01, 0.1  # m, rad
PERTURB_XY, PERTURB_YAW, PERTURB_AT = 0.04, 0.117, 1.0  # m, rad, s
TRACK_CASES = {"nominal": WorldConfig(),
               "perturbed": WorldConfig(),
               "mismatch": WorldConfig(friction_scale=1.3, pusher_friction_scale=0.7, mass_scale=1.3)}
PAPER = {  # Table II of paper 003: mean / std of |final error| (cm, cm, rad), success rate
    "zs": {"x": (3.18, 8.30), "y": (4.78, 8.60), "theta": (0.04, 0.39), "success": 0.40},
    "ds": {"x": (1.70, 9.07), "y": (1.62, 9.66), "theta": (0.21, 1.82), "success": 0.58},
    "dp": {"x": (0.14, 1.54), "y": (0.57, 2.77), "theta": (0.22, 0.12), "success": 0.77},
    "ws": {"x": (0.07, 1.31), "y": (0.19, 2.90), "theta": (0.01, 0.08), "success": 0.85},
}


def draw_targets(n: int, seed: int, start=(0.0, 0.0, 0.0)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.column_stack([rng.uniform(-TASK_HALF, TASK_HALF, (n, 2)), rng.uniform(-np.pi, np.pi, n)])
    t[:, :2] += np.asarray(start[:2])
    return t


def start_state(scene) -> np.ndarray:
    """The model state of the scene's start: slider pose, pusher position, both at rest."""
    o = scene.objects[0].pose
    return np.array([o[0], o[1], o[2], scene.pusher.start[0], scene.pusher.start[1], 0.0, 0.0])


def success(err: np.ndarray) -> np.ndarray:
    return (err[:, 0] < SUCCESS_XY) & (err[:, 1] < SUCCESS_XY) & (err[:, 2] < SUCCESS_YAW)


def error_stats(err) -> dict:
    """Success rate, mean and std of the (n, 3) final errors |x|, |y| (m), |yaw| (rad), and the per-target errors
    (kept so that the study's units can be combined)."""
    err = np.asarray(err, dtype=float).reshape(-1, 3)
    ok = success(err)
    return {"success_rate": float(ok.mean()),
            "final_err_x_cm": {"mean": float(err[:, 0].mean() * 100), "std": float(err[:, 0].std() * 100)},
            "final_err_y_cm": {"mean": float(err[:, 1].mean() * 100), "std": float(err[:, 1].std() * 100)},
            "final_err_theta_rad": {"mean": float(err[:, 2].mean()), "std": float(err[:, 2].std())},
            "succeeded": ok.tolist(), "final_err": err.tolist()}


def method_stats(plan, n: int) -> dict:
    return {**error_stats(plan.final_error()), "solve_time_s": plan.solve_time / n, "batch_time_s": plan.solve_time,
            "iterations_mean": float(plan.iterations.mean()), "iterations": plan.iterations.tolist()}


def bench_scene(name: str, args) -> dict:
    scene = load_scene(name)
    model = QuasiStaticPusherSlider.from_scene(scene, dt=PLAN_DT)
    demos = load_library(name)
    settings = DDPSettings(max_iterations=args.max_iterations)
    planner = DGOCPlanner(model, demos, DGOCWeights(), settings)
    x0 = start_state(scene)
    first, last = chunk(args)
    targets = draw_targets(args.targets, args.seed, x0[:3])[first:last]
    print(f"\nbench dgoc: {name}: targets {first}..{last - 1} of {args.targets}, {len(demos)} demonstrations, "
          f"horizon {planner.horizon} steps of {PLAN_DT} s, k = {args.k} ...", flush=True)
    methods = selected_methods(args)
    x0s = np.repeat(x0[None], len(targets), 0)
    plans = planner.plan_methods(x0s, targets, [m for m in METHODS if m in methods], k=args.k)
    if "dgoc" in methods:
        plans["dgoc"] = escalated(planner, x0s, targets, args, first=plans["ws"])
    res = {"demonstrations": [d.name for d in demos], "targets": targets,
           "target_indices": list(range(first, last)), "methods": {}}
    for m in methods:
        res["methods"][m] = {"name": ALL_NAMES[m], **method_stats(plans[m], len(targets))}
        res["methods"][m]["demo_used"] = plans[m].demo.tolist()
    if args.single:
        for m in methods:
            times, cpu = [], []
            for t in targets[:args.single]:
                t0, c0 = time.perf_counter(), time.process_time()
                if m == "dgoc":
                    escalated(planner, x0[None], t[None], args)
                else:
                    planner.plan(x0[None], t[None], m, k=args.k)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            res["methods"][m]["single_solve_time_s"] = float(np.mean(times))
            res["methods"][m]["single_solve_cpu_s"] = float(np.mean(cpu))
    res["plans"] = plans
    if args.track:
        res["tracking"] = track_scene(scene, planner, x0, targets[:args.track], plans["dgoc" if "dgoc" in plans
                                                                                      else "ws"], args)
    if args.compare_mpc:
        res["compare_mpc"] = compare_mpc(scene, planner, x0, targets[:args.compare_mpc], args)
    return res


ALL_NAMES = {**METHOD_NAMES, "dgoc": "DG-OC (WS, escalated)"}


def selected_methods(args) -> list:
    """The methods of this run, in table order; ``dgoc`` (escalated WS-DDP) when ``--escalate-k`` > ``--k``."""
    asked = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else list(METHODS) + ["dgoc"]
    for m in asked:
        if m not in ALL_NAMES:
            raise ValueError(f"--methods: unknown method {m!r} (expected some of {', '.join(ALL_NAMES)})")
    if ("dgoc" in asked or args.track) and "ws" not in asked:
        asked.append("ws")  # dgoc continues from it; tracking executes it
    if args.escalate_k <= args.k:
        asked = [m for m in asked if m != "dgoc"]
    return [m for m in ALL_NAMES if m in asked]


def escalated(planner, x0s, targets, args, first=None):
    """WS-DDP from the k nearest, the misses again from the next nearest up to ``--escalate-k`` (DG-OC as the
    stack plans it); plain WS-DDP when ``--escalate-k`` <= ``--k``."""
    return planner.plan_escalating(x0s, targets, "ws", args.k, args.escalate_k, (SUCCESS_XY, SUCCESS_YAW),
                                   first=first)


def chunk(args) -> tuple[int, int]:
    """[first, last) target indices of this unit (``target_unit`` sets ``first_target`` and ``count``)."""
    return args.first_target, args.first_target + args.count


def perturbations(model, x0, n: int, seed: int) -> np.ndarray:
    """(n, 3) slider displacements within +-4 cm, +-0.117 rad that leave the pusher (where it is at ``x0``) outside
    the displaced slider (displacing a box into the pusher would be a collision, not a disturbance)."""
    rng = np.random.default_rng(seed + 1)
    out = []
    while len(out) < n:
        d = rng.uniform(-1, 1, 3) * [PERTURB_XY, PERTURB_XY, PERTURB_YAW]
        x = np.asarray(x0, dtype=float).copy()
        x[:3] += d
        if model.penetration(x) == 0.0:
            out.append(d)
    return np.array(out)


def tracking_config(args) -> TrackingConfig:
    """The tracking controller's settings; re-plans run at most ``--max-iterations`` DDP iterations too."""
    return TrackingConfig(replan_iterations=min(TrackingConfig.replan_iterations, args.max_iterations))


def track_scene(scene, planner, x0, targets, plan_nominal, args) -> dict:
    """Execute DG-OC plans of ``targets`` in MuJoCo with the tracking controller, per case."""
    scale = fine_c_scale(scene)
    if scale != planner.model.c_scale:
        model = QuasiStaticPusherSlider.from_scene(scene, dt=PLAN_DT, c_scale=scale)
        tracked = DGOCPlanner(model, planner.demos, planner.weights, planner.settings)
        plan = escalated(tracked, np.repeat(x0[None], len(targets), 0), targets, args)
    else:
        model = planner.model
        plan = plan_nominal
    cfg = tracking_config(args)
    print(f"bench dgoc: {scene.name}: tracking {len(targets)} plans (c_scale {scale}) in MuJoCo at {cfg.rate_hz:g} Hz, "
          f"cases {', '.join(TRACK_CASES)} ...", flush=True)
    out = {"c_scale": scale, "config": cfg.__dict__, "planned_success_rate": float(success(plan.final_error()[
        :len(targets)]).mean()), "cases": {}}
    first, _ = chunk(args)
    for case, world_cfg in TRACK_CASES.items():
        # drawn for all targets of the seed, so that a chunk's targets get the perturbations of a whole run
        kicks = perturbations(model, x0, args.targets, args.seed)[first:first + len(targets)] \
            if case == "perturbed" else None
        errs, replans, feedback = [], [], []
        for i, tgt in enumerate(tqdm(targets, desc=f"tracking {case}", unit="target",
                                         disable=getattr(args, "quiet", False))):
            world = SimWorld(scene, world_cfg)
            run = track_in_world(model, world, plan.X[i], plan.U[i], plan.K[i], PLAN_DT, tgt, cfg,
                                 perturb=None if kicks is None else (PERTURB_AT, kicks[i]))
            errs.append(run.error)
            replans.append(run.replans)
            feedback.append(run.feedback_share)
        err = np.array(errs)
        out["cases"][case] = tracking_case(err, replans, feedback)
        out["cases"][case].update({**({"perturbations": kicks} if kicks is not None else {}),
                                   "world": world_cfg.__dict__})
        ok = success(err)
        print(f"  {case}: tracked success {ok.mean() * 100:.0f} %, final error x {err[:, 0].mean() * 100:.2f} cm, "
              f"y {err[:, 1].mean() * 100:.2f} cm, yaw {err[:, 2].mean():.3f} rad, {np.mean(replans):.2f} re-plans",
              flush=True)
    return out


def tracking_case(err, replans, feedback) -> dict:
    stats = error_stats(err)
    return {"tracked_success_rate": stats.pop("success_rate"), **stats, "replans_mean": float(np.mean(replans)),
            "replans": [int(r) for r in replans], "feedback_share_mean": float(np.mean(feedback)),
            "feedback_share": [float(f) for f in feedback]}


def _errors(final, target) -> np.ndarray:
    e = np.abs(np.asarray(final, dtype=float)[:3] - np.asarray(target, dtype=float))
    e[2] = abs(wrap_angle(final[2] - target[2]))
    return e


def _summary(rows: list) -> dict:
    err = np.array([r["final_err"] for r in rows])
    ok = success(err)
    out = {"success_rate": float(ok.mean()), "succeeded": ok.tolist()}
    for key in ("planning_time_s", "execution_time_s", "task_time_s"):
        out[key] = {"mean": float(np.mean([r[key] for r in rows])), "median": float(np.median([r[key] for r in rows]))}
    for i, (key, scale) in enumerate((("final_err_x_cm", 100), ("final_err_y_cm", 100), ("final_err_theta_rad", 1))):
        out[key] = {"mean": float(err[:, i].mean() * scale), "median": float(np.median(err[:, i]) * scale)}
    out["runs"] = rows
    return out


def compare_mpc(scene, planner, x0, targets, args) -> dict:
    """DG-OC (planned alone, tracked) against the sampling MPC on the same targets in the nominal MuJoCo world."""
    scale = fine_c_scale(scene)
    model = QuasiStaticPusherSlider.from_scene(scene, dt=PLAN_DT, c_scale=scale)
    dgoc = DGOCPlanner(model, planner.demos, planner.weights, planner.settings)
    mpc_config = PlannerConfig(model=args.mpc_model)
    print(f"bench dgoc: {scene.name}: {len(targets)} targets, DG-OC vs the sampling MPC ({args.mpc_model}, "
          f"{mpc_config.sampling.samples} samples x {mpc_config.sampling.iterations} iterations, N = "
          f"{mpc_config.sampling.horizon} x {mpc_config.sampling.control_duration:g} s, up to {args.mpc_actions} "
          "actions) in MuJoCo ...", flush=True)
    rows = {"dgoc": [], "mpc": []}
    for tgt in tqdm(targets, desc="compare-mpc", unit="target", disable=getattr(args, "quiet", False)):
        t0 = time.perf_counter()
        plan = escalated(dgoc, x0[None], tgt[None], args)
        t_plan = time.perf_counter() - t0
        run = track_in_world(model, SimWorld(scene), plan.X[0], plan.U[0], plan.K[0], PLAN_DT, tgt,
                             tracking_config(args))
        rows["dgoc"].append({"final_err": run.error.tolist(), "planning_time_s": t_plan + run.replan_time_s,
                             "execution_time_s": run.execution_time_s,
                             "task_time_s": t_plan + run.replan_time_s + run.execution_time_s,
                             "replans": run.replans})
        goal = Goal(0, (float(tgt[0]), float(tgt[1])), SUCCESS_XY, float(tgt[2]), SUCCESS_YAW)
        predictor = Predictor(scene)
        mpc = MPCPlanner(scene, mpc_config, task=PushTask(scene, goal=goal), predictor=predictor)
        world = SimWorld(scene)
        rec = run_closed_loop(mpc, world, max_actions=args.mpc_actions)
        predictor.close()
        rows["mpc"].append({"final_err": _errors(world.x[2:5], tgt).tolist(), "planning_time_s": rec.planning_time,
                            "execution_time_s": rec.execution_time, "task_time_s": rec.task_time,
                            "outcome": rec.outcome.value, "actions": rec.actions})
    out = {"targets": np.asarray(targets), "mpc_model": args.mpc_model, "mpc_actions": args.mpc_actions,
           "mpc_sampling": mpc_config.sampling.__dict__, "dgoc": _summary(rows["dgoc"]), "mpc": _summary(rows["mpc"])}
    for name in ("dgoc", "mpc"):
        v = out[name]
        print(f"  {name}: success {v['success_rate'] * 100:.0f} %, planning {v['planning_time_s']['mean']:.1f} s, "
              f"execution {v['execution_time_s']['mean']:.1f} s, final error {v['final_err_x_cm']['mean']:.2f} / "
              f"{v['final_err_y_cm']['mean']:.2f} cm, {v['final_err_theta_rad']['mean']:.3f} rad", flush=True)
    return out


def target_unit(context: dict, unit) -> dict:
    """The study unit of ``bench dgoc``: targets ``first .. first + count - 1`` of scene ``unit["scene"]`` planned as
    one batch, then those among the first ``--track`` / ``--compare-mpc`` / ``--single`` targets of the seed tracked,
    compared and timed alone (``bench_scene``); its result as JSON (plans: the X of at most 8, for the plot)."""
    import copy  # noqa: PLC0415
    a = copy.copy(context["args"])
    first = unit["first"]
    a.first_target, a.count = first, min(a.unit_targets, a.targets - first)
    for k in ("track", "compare_mpc", "single"):
        setattr(a, k, min(max(getattr(a, k) - first, 0), a.count))
    a.quiet = context["quiet"]
    r = bench_scene(unit["scene"], a)
    plans = r.pop("plans")
    shown = next((m for m in ("dgoc", "ws") if m in plans), None)
    r["plot_X"] = [] if shown is None else np.asarray(plans[shown].X[:8]).round(5)
    return json.loads(json.dumps(r, default=jsonable))


def run(args) -> dict:
    if args.targets < 1:
        raise ValueError(f"--targets: must be >= 1, got {args.targets}")
    if args.unit_targets < 1:
        raise ValueError(f"--unit-targets: must be >= 1, got {args.unit_targets}")
    if not 0 <= args.track <= args.targets:
        raise ValueError(f"--track: must be from 0 to --targets ({args.targets}), got {args.track}")
    if not 0 <= args.compare_mpc <= args.targets:
        raise ValueError(f"--compare-mpc: must be from 0 to --targets ({args.targets}), got {args.compare_mpc}")
    selected_methods(args)  # names checked before anything runs
    if args.escalate_k < 1:
        raise ValueError(f"--escalate-k: must be >= 1, got {args.escalate_k}")
    if args.mpc_actions < 1:
        raise ValueError(f"--mpc-actions: must be >= 1, got {args.mpc_actions}")
    if args.compare_mpc:
        try:
            PlannerConfig(model=args.mpc_model)
        except ConfigError as e:
            raise ValueError(f"--mpc-model: {e}") from None
    scenes = [s.strip() for s in args.scenes.split(",") if s.strip()]
    if not scenes:
        raise ValueError("--scenes: give at least one scene")
    for name in scenes:  # a bad name, or a scene without a box, is reported before anything runs
        try:
            QuasiStaticPusherSlider.from_scene(load_scene(name))
        except ValueError as e:
            raise ValueError(f"--scenes: {e}") from None
    path, out = output_paths(args, "dgoc")
    settings = {k: v for k, v in study_settings(args).items() if k != "scenes"}  # scenes select units
    study = Study(out / "dgoc_study", "bench dgoc", settings)
    units = [Unit.of(scene=name, first=f) for name in scenes for f in range(0, args.targets, args.unit_targets)]
    parallel = _execution_is_parallel(args)
    results = study.run(units, target_unit, {"args": _plain(args), "quiet": parallel}, args,
                        desc="bench dgoc target batches")
    merged = {name: combine(name, [results[u.id] for u in units if u["scene"] == name]) for name in scenes}
    payload = {"targets": args.targets, "unit_targets": args.unit_targets, "seed": args.seed, "k": args.k,
               "escalate_k": args.escalate_k, "max_iterations": args.max_iterations, "dt": PLAN_DT,
               "horizon_s": HORIZON_S,
               "task_space": {"x_m": [-TASK_HALF, TASK_HALF], "y_m": [-TASK_HALF, TASK_HALF],
                              "yaw_rad": [-np.pi, np.pi], "relative_to": "slider start pose"},
               "success_rule": f"|dx| < {SUCCESS_XY * 100:g} cm and |dy| < {SUCCESS_XY * 100:g} cm and "
                               f"|dyaw| < {SUCCESS_YAW} rad (final slider pose)",
               "weights": DGOCWeights().__dict__, "paper": PAPER, "study": str(study.root),
               "scenes": {n: {k: v for k, v in r.items() if k != "plot_X"} for n, r in merged.items()}}
    print_tables(payload)
    write_json(path, payload)
    _plot(merged, out / "dgoc.png")
    return payload


def _execution_is_parallel(args) -> bool:
    """Whether the units run on Ray (their inner progress bars would interleave: they stay quiet)."""
    from ..study import _execution  # noqa: PLC0415
    workers, address, _ = _execution(args)
    return workers > 1 or bool(address)


def print_tables(payload: dict):
    for name, r in payload["scenes"].items():
        if "compare_mpc" in r:
            c = r["compare_mpc"]
            print_table(["method", "success", "plan s", "execution s", "task s", "x cm", "y cm", "theta rad"],
                        [[label, f"{c[m]['success_rate'] * 100:.0f} %", f"{c[m]['planning_time_s']['mean']:.1f}",
                          f"{c[m]['execution_time_s']['mean']:.1f}", f"{c[m]['task_time_s']['mean']:.1f}",
                          f"{c[m]['final_err_x_cm']['mean']:.2f}", f"{c[m]['final_err_y_cm']['mean']:.2f}",
                          f"{c[m]['final_err_theta_rad']['mean']:.3f}"]
                         for m, label in (("dgoc", "DG-OC + tracking"), ("mpc", f"sampling MPC ({c['mpc_model']})"))],
                        title=f"{name}: DG-OC vs the sampling MPC in MuJoCo ({len(c['targets'])} targets, means)")
        if "tracking" in r:
            print_table(["case", "tracked success", "x cm", "y cm", "theta rad", "re-plans"],
                        [[c, f"{v['tracked_success_rate'] * 100:.0f} %", f"{v['final_err_x_cm']['mean']:.2f}",
                          f"{v['final_err_y_cm']['mean']:.2f}", f"{v['final_err_theta_rad']['mean']:.3f}",
                          f"{v['replans_mean']:.2f}"] for c, v in r["tracking"]["cases"].items()],
                        title=f"{name}: DG-OC plans tracked in MuJoCo "
                              f"({len(r['tracking']['cases']['nominal']['succeeded'])} targets)")
        rows = []
        for m in (m for m in ALL_NAMES if m in r["methods"]):
            s = r["methods"][m]
            p = PAPER["ws" if m == "dgoc" else m]
            rows.append([ALL_NAMES[m], f"{s['success_rate'] * 100:.0f} %", f"{p['success'] * 100:.0f} %",
                         f"{s['final_err_x_cm']['mean']:.2f} / {s['final_err_x_cm']['std']:.2f}",
                         f"{s['final_err_y_cm']['mean']:.2f} / {s['final_err_y_cm']['std']:.2f}",
                         f"{s['final_err_theta_rad']['mean']:.3f} / {s['final_err_theta_rad']['std']:.3f}",
                         f"{s['solve_time_s']:.2f}", f"{s.get('single_solve_time_s', float('nan')):.1f}"])
        print_table(["method", "success", "paper", "x cm (mean/std)", "y cm", "theta rad", "s/target (batch)",
                     "s single"], rows, title=f"{name}: paper 003 Table II on the quasi-static model "
                                          f"({len(r['target_indices'])} targets)")


def combine(name: str, rs: list) -> dict:
    """The result of scene ``name`` from its units' results ``rs`` (in target order): every statistic recomputed
    from the per-target errors each unit keeps; plan time per target: the units' batch times summed over the
    targets."""
    idx = [i for r in rs for i in r["target_indices"]]
    if len(set(idx)) != len(idx):
        raise ValueError(f"{name}: the units overlap (a target index appears twice)")
    m = {"demonstrations": rs[0]["demonstrations"], "target_indices": idx,
         "targets": [t for r in rs for t in r["targets"]], "methods": {}}
    for meth in (m for m in ALL_NAMES if all(m in r["methods"] for r in rs)):
        ms = [r["methods"][meth] for r in rs]
        n = sum(len(x["succeeded"]) for x in ms)
        it = [i for x in ms for i in x["iterations"]]
        m["methods"][meth] = {"name": ALL_NAMES[meth], **error_stats([e for x in ms for e in x["final_err"]]),
                              "solve_time_s": sum(x["batch_time_s"] for x in ms) / n,
                              "batch_time_s": [x["batch_time_s"] for x in ms],
                              "iterations_mean": float(np.mean(it)), "iterations": it,
                              "demo_used": [d for x in ms for d in x["demo_used"]]}
        for key in ("single_solve_time_s", "single_solve_cpu_s"):
            vals = [x[key] for x in ms if key in x]
            if vals:
                m["methods"][meth][key] = float(np.mean(vals))
    tracked = [r for r in rs if "tracking" in r]
    if tracked:
        m["tracking"] = {"c_scale": tracked[0]["tracking"]["c_scale"], "config": tracked[0]["tracking"]["config"],
                         "tracked_target_indices": [i for r in tracked for i in r["target_indices"][
                             :len(r["tracking"]["cases"]["nominal"]["succeeded"])]], "cases": {}}
        for case in TRACK_CASES:
            cs = [r["tracking"]["cases"][case] for r in tracked]
            m["tracking"]["cases"][case] = {
                **tracking_case([e for c in cs for e in c["final_err"]], [v for c in cs for v in c["replans"]],
                                [v for c in cs for v in c["feedback_share"]]), "world": cs[0]["world"],
                **({"perturbations": [k for c in cs for k in c["perturbations"]]} if case == "perturbed" else {})}
    compared = [r["compare_mpc"] for r in rs if "compare_mpc" in r]
    if compared:
        for k in ("mpc_model", "mpc_actions", "mpc_sampling"):  # the MPC side must be the same MPC
            if any(c[k] != compared[0][k] for c in compared):
                raise ValueError(f"{name}: the units' MPC comparisons differ in {k!r}: they are not units of "
                                 f"one study")
        m["compare_mpc"] = {**{k: compared[0][k] for k in ("mpc_model", "mpc_actions", "mpc_sampling")},
                            "targets": [t for c in compared for t in c["targets"]]}
        for w in ("dgoc", "mpc"):
            m["compare_mpc"][w] = _summary([row for c in compared for row in c[w]["runs"]])
    m["plot_X"] = rs[0]["plot_X"] if rs else []
    return m


def _plot(results, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 5), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        t = np.asarray(r["targets"])
        shown = next((m for m in ("dgoc", "ws") if m in r["methods"]), None)
        if shown is not None:
            ok = np.asarray(r["methods"][shown]["succeeded"])
            ax.scatter(t[ok, 0], t[ok, 1], c="tab:green", s=12, label=f"{ALL_NAMES[shown]} reached")
            ax.scatter(t[~ok, 0], t[~ok, 1], c="tab:red", marker="x", s=20, label=f"{ALL_NAMES[shown]} missed")
            X = np.asarray(r["plot_X"])
            for i in range(min(len(X), 8)):
                ax.plot(X[i, :, 0], X[i, :, 1], lw=0.8, alpha=0.6)
        ax.set_aspect("equal")
        ax.set_title(f"{name}: " + ", ".join(f"{ALL_NAMES[m]} {v['success_rate'] * 100:.0f}%"
                                             for m, v in r["methods"].items()), fontsize=8)
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.legend(fontsize=7)
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("dgoc", parents=[parent], help="paper 003 Table II: ZS/DS/DP/WS-DDP on the quasi-static model",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", type=positive_int, default=100, help="random target poses per scene (default 100)")
    p.add_argument("--unit-targets", type=int, default=10,
                   help="targets planned as one batch, a unit of the study (default 10)")
    p.add_argument("--scenes", default="block_003,box_slider", help="comma-separated box scenes")
    p.add_argument("--k", type=positive_int, default=1,
                   help="nearest demonstrations planned from per target (default 1)")
    p.add_argument("--escalate-k", type=int, default=3,
                   help="row dgoc: WS-DDP's misses planned again from the next nearest demonstrations, up to this "
                        "many (default 3, as the planner node; <= --k: no dgoc row)")
    p.add_argument("--methods", default="", help="comma-separated subset of zs,ds,dp,ws,dgoc (default all)")
    p.add_argument("--max-iterations", type=positive_int, default=60, help="DDP iterations per stage (default 60)")
    p.add_argument("--single", type=nonnegative_int, default=2,
                   help="targets also planned one at a time per method, for the single-target time (default 2)")
    p.add_argument("--track", type=nonnegative_int, default=0,
                   help="execute the DG-OC plans of this many targets in MuJoCo with tracking, per case (default 0)")
    p.add_argument("--compare-mpc", type=int, default=0,
                   help="push the first N targets in MuJoCo with DG-OC and with the sampling MPC (default 0)")
    p.add_argument("--mpc-model", default="fine", help="the sampling MPC's model (default fine; e.g. parareal1)")
    p.add_argument("--mpc-actions", type=int, default=20, help="the sampling MPC's action limit (1 s each)")
    add_seeds_argument(p)
    add_arguments(p, "target batches")
    p.set_defaults(func=seeded(run, name="dgoc", units=False))
    return p
