"""``parapush bench uncertainty``: paper 004's experiments on the box push primitive, in MuJoCo.

1. Calibration (Exp. 1): E-MDN, a single MDN (M = 1, no adversarial training) and the GP, trained on the same
   pushes (the GP on at most ``--gp-max`` of them) and calibrated on a validation split, scored on held-out
   pushes: ``calibration_1sigma`` / ``calibration_2sigma`` (share of output coordinates within 1 / 2 predicted
   sigma; 0.683 / 0.954 when calibrated), ``nll`` (nats per push, the three outputs summed) and the position RMSE.
2. Lesioning (Fig. 4): an E-MDN trained without the pushes that start inside ``--lesion``; the Monte-Carlo
   uncertainty heat-map (mean over random yaws and pushes per cell) inside vs outside the lesion (goal >= 3x),
   plotted with the lesion.
3. Exp. 2: MPPI (Algorithm 1, no uncertainty term) pushes the box from a start to goal poses with the fine model
   (MuJoCo), the E-MDN and the GP as its forward model; the world is MuJoCo. ``success_rate`` (within
   ``SUCCESS_POS`` and ``SUCCESS_ROT``), final position / orientation error, initial and final cost (position
   error + ``w_rot`` x orientation error, as Table I's weighted sum) and pushes.
4. Exp. 3/4: the lesioned E-MDN, start and goal on either side of the lesion: ``plain`` (MPPI without the
   uncertainty term), ``ua`` (with eq. 11's term, switched off after ``--ua-pushes`` pushes as in the paper) and
   ``alg2`` (Algorithm 2's low-uncertainty path tracked by plain MPPI): success and ``path_in_lesion_fraction``
   (share of the executed box path's length inside the lesion; goal: ua and alg2 <= 1/3 of plain at >= 90 %
   success). Algorithm 2 plans on ``uncertainty_mppi.planning_heat_map``: the lesioned E-MDN's heat-map plus the
   distance-to-data term (``--w-data`` x var_ref far from the training pushes' positions), max-filtered over the
   tracker's reach (``--track-reach``: the clearance the path keeps from high heat), the path cost scale-free
   (``uncertainty_mppi.path_terms``).

``--seeds N`` runs seeds S .. S+N-1 (each its own dataset, training, goals and episodes; ``common.seeded``) and
reports every figure as mean and std over them, the per-seed values in the JSON.
"""
from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import numpy as np

from ...arguments import nonnegative_int
from ...core.models.emdn_config import EMDNConfig
from ...core.models.push_primitive import WORKSPACE
from ..learning.train_primitive import DEFAULT_EPOCHS
from ..study import add_arguments
from .common import add_seeds_argument, output_paths, print_table, pyplot, save_figure, seeded, write_json

SUCCESS_POS = 0.02  # m
SUCCESS_ROT = np.radians(15.0)
DEFAULT_LESION = "-0.2,-0.2,0.2,0.2"
EXP2_START = (-0.1, -0.15, 0.0)
EXP2_GOALS = ((0.1, 0.12, 0.0), (0.05, 0.15, np.pi / 2), (-0.15, 0.1, -np.pi / 4), (0.15, -0.1, np.pi / 3))
EXP2_REACH = (0.15, 0.35)  # m: further goals (beyond the first four) lie this far from the start, in the workspace
EXP34_MARGIN = 0.1  # m: Exp. 3/4 start and goal lie this far below and above the lesion, on its centre line
# the whole-number options, declared and checked from here: name -> (default, least value, meaning)
COUNTS = {
    "samples": (4096, 1, "pushes in the dataset (4096: with 1024 the members still disagree where there are data, "
                         "lesion variance ratio 2.8 instead of 9, see docs/results/uncertainty.md)"),
    "epochs": (DEFAULT_EPOCHS, 1, "E-MDN training epochs"),
    "members": (EMDNConfig.members, 1, "E-MDN ensemble members"),
    "gp_max": (300, 1, "GP training pushes at most (exact GP: O(n^3))"),
    "goals": (10, 0, "Exp. 2 goal poses (episodes) per learned model"),
    "fine_goals": (10, 0, "Exp. 2 goal poses with the fine model (the first of the same list; slow: MuJoCo)"),
    "fine_samples": (12, 2, "MPPI samples with the fine model (horizon 3, 2 decay steps: 12 -> 75 MuJoCo pushes a "
                            "plan)"),
    "episodes": (10, 0, "Exp. 3/4 episodes per method"),
    "max_pushes": (60, 1, "pushes per episode at most"),
    "ua_pushes": (40, 0, "pushes after which the uncertainty term is off"),
}


def exp2_goals(n: int, seed: int = 0) -> list:
    """``n`` goal poses for Exp. 2: the four fixed ones (paper Fig. 3's kinds: a shift, a shift with a 90 deg
    turn, ...), then seeded random ones EXP2_REACH from the start with yaw in [-90, 90] deg, inside the data's
    workspace less 5 cm."""
    goals = [tuple(g) for g in EXP2_GOALS[:n]]
    rng = np.random.default_rng([seed, 2])
    while len(goals) < n:
        r, a = rng.uniform(*EXP2_REACH), rng.uniform(-np.pi, np.pi)
        xy = np.asarray(EXP2_START[:2]) + r * np.array([np.cos(a), np.sin(a)])
        if np.all(np.abs(xy) <= np.asarray(WORKSPACE) - 0.05):
            goals.append((float(xy[0]), float(xy[1]), float(rng.uniform(-np.pi / 2, np.pi / 2))))
    return goals


def pose_errors(pose, goal) -> tuple[float, float]:
    from ...core.scene.state import wrap_angle  # noqa: PLC0415
    return float(np.linalg.norm(pose[:2] - goal[:2])), float(abs(wrap_angle(pose[2] - goal[2])))


def reached(pose, goal) -> bool:
    pos, rot = pose_errors(pose, goal)
    return pos <= SUCCESS_POS and rot <= SUCCESS_ROT


def run_episode(world, mppi, start, goal, max_pushes: int, tracker=None, ua_pushes: int | None = None) -> dict:
    """Closed loop: plan on the model, execute the first push in MuJoCo (``world``), repeat until the goal is
    reached or ``max_pushes`` are spent. Returns the executed box poses and the outcome."""
    pose = np.asarray(start, dtype=float)
    goal = np.asarray(goal, dtype=float)
    poses = [pose.copy()]
    mppi.reset()
    t0 = time.perf_counter()
    for k in range(max_pushes):
        if reached(pose, goal):
            break
        target = goal if tracker is None else tracker.target(pose)
        w_unc = 0.0 if (ua_pushes is not None and k >= ua_pushes) else None
        plan = mppi.plan(pose, target, w_unc=w_unc)
        pose = world.push(pose[None], plan.actions[0][None])[0]
        poses.append(pose.copy())
        mppi.shift(pose, target)
    pos, rot = pose_errors(pose, goal)
    return {"poses": np.array(poses), "success": reached(pose, goal), "pos_err": pos, "rot_err": rot,
            "pushes": len(poses) - 1, "wall_s": time.perf_counter() - t0}


def path_in_region(poses, lesion, step: float = 0.002) -> float:
    """Share of the length of the polyline through the box positions that lies inside ``lesion``."""
    p = np.asarray(poses, dtype=float)[:, :2]
    inside = total = 0.0
    for a, b in pairwise(p):
        length = float(np.linalg.norm(b - a))
        if length == 0.0:
            continue
        n = max(2, int(np.ceil(length / step)))
        t = (np.arange(n) + 0.5) / n
        inside += length * float(lesion.contains(a + (b - a) * t[:, None]).mean())
        total += length
    return inside / total if total > 0.0 else 0.0


def calibration_scores(model, split, raw: bool = False) -> dict:
    from ...core.models.ensemble_mdn import coverage, gaussian_nll  # noqa: PLC0415
    mean, var = model.predict(split.raw if raw else split.x)
    scale = np.asarray(model.var_scale, dtype=float)
    return {"calibration_1sigma": coverage(split.y, mean, var), "calibration_2sigma": coverage(split.y, mean, var, 2),
            "nll": gaussian_nll(split.y, mean, var),
            "raw_calibration_1sigma": coverage(split.y, mean, var / scale),
            "pos_rmse_mm": 1000.0 * float(np.sqrt(np.mean(np.sum((split.y[:, :2] - mean[:, :2]) ** 2, -1)))),
            "var_scale": scale}


def run(args):
    """The four experiments in order (each step's seeds as before), then the goals, the plot and the JSON."""
    import torch  # noqa: PLC0415

    from ...core.models.push_primitive import FinePrimitive, Lesion  # noqa: PLC0415
    from ..learning.datagen_primitive import generate  # noqa: PLC0415

    torch.set_num_threads(1)
    path, out = output_paths(args, "uncertainty")
    lesion = Lesion.parse(args.lesion)
    _check_arguments(args)
    data = Path(args.data) if args.data else out / "primitive_data"
    generate(data, args.samples, seed=args.seed, progress=True)
    t_start = time.perf_counter()
    result = {"settings": _settings(args),
              "lesion_region": lesion.as_list(), "success_pos_m": SUCCESS_POS, "success_rot_rad": SUCCESS_ROT}
    trained = _calibration(args, data, result)
    lesioned, heat, plan_heat = _lesioning(args, data, lesion, trained, result)
    world = FinePrimitive(threads=args.threads or None)
    episodes = {}
    _exp2(args, world, trained, episodes, result)
    _exp34(args, world, lesion, lesioned, plan_heat, episodes, result)
    world.close()
    result["goals"] = _goals(args, result)
    result["wall_s"] = time.perf_counter() - t_start
    _plot(out, heat, lesion, episodes, result["exp34"])
    write_json(path, result)
    return result


def _settings(args) -> dict:
    return {k: getattr(args, k) for k in ("samples", "epochs", "members", "gp_max", "goals", "fine_goals", "episodes",
                                          "max_pushes", "ua_pushes", "w_unc", "w_smooth", "w_data", "track_reach",
                                          "seed")}


def _seed_data(args, seed: int) -> None:
    """``--seeds``: each seed its own dataset (a dataset is generated with one seed): ``--data D`` -> ``D_seed<s>``,
    else ``<out>/seed_<s>/primitive_data``."""
    if args.data:
        args.data = str(Path(args.data).with_name(f"{Path(args.data).name}_seed{seed}"))


def _check_arguments(args):
    for name, (_, least, _) in COUNTS.items():
        if getattr(args, name) < least:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {least}, got {getattr(args, name)}")
    for name in ("w_unc", "w_smooth", "w_data", "track_reach"):
        if not (np.isfinite(getattr(args, name)) and getattr(args, name) >= 0.0):
            raise ValueError(f"--{name.replace('_', '-')} must be finite and >= 0, got {getattr(args, name)}")


def _calibration(args, data, result) -> dict:
    """Exp. 1: E-MDN, single MDN and GP trained on the same pushes, scored on held-out ones (``result
    ["calibration"]``). Returns what the later steps use: the test split, the E-MDN config, the E-MDN and its
    variance reference, the GP."""
    from ...core.models.gp import GPRegressor  # noqa: PLC0415
    from ..learning.train_primitive import fit_emdn, load_split  # noqa: PLC0415

    _, train, val, test = load_split(data, args.samples, seed=args.seed)
    cfg = EMDNConfig(members=args.members, epochs=args.epochs, seed=args.seed)
    emdn, _, emdn_ref = fit_emdn(train, val, cfg, progress=True, label="E-MDN")
    single, _, _ = fit_emdn(train, val, EMDNConfig(members=1, epochs=args.epochs, adversarial=0.0, seed=args.seed),
                            progress=True, label="single MDN")
    t0 = time.perf_counter()
    gp_train = train.take(np.arange(min(len(train), args.gp_max)))
    gp = GPRegressor(seed=args.seed).fit(gp_train.raw, gp_train.y)
    gp.calibrate(val.raw, val.y)
    gp_fit_s = time.perf_counter() - t0
    calib = {"emdn": calibration_scores(emdn, test), "single": calibration_scores(single, test),
             "gp": {**calibration_scores(gp, test, raw=True), "train_pushes": len(gp_train), "fit_s": gp_fit_s}}
    result["calibration"] = {**calib, "train_pushes": len(train), "val_pushes": len(val), "test_pushes": len(test)}
    print_table(["model", "1-sigma", "2-sigma", "NLL", "pos RMSE mm", "raw 1-sigma"],
                [[k, v["calibration_1sigma"], v["calibration_2sigma"], v["nll"], v["pos_rmse_mm"],
                  v["raw_calibration_1sigma"]] for k, v in calib.items()],
                title=f"calibration on {len(test)} held-out pushes (goal: 1-sigma in 0.6-0.75)")
    return {"test": test, "config": cfg, "emdn": emdn, "emdn_ref": emdn_ref, "gp": gp}


def _lesioning(args, data, lesion, trained, result):
    """Fig. 4: an E-MDN trained without the lesion's pushes; its uncertainty inside vs outside (``result
    ["lesion"]``). Returns the lesioned model, its heat-map and the heat-map Algorithm 2 plans on (the
    distance-to-data term added, ``planning_heat_map``)."""
    from ...core.models.push_primitive import EMDNPrimitive, uncertainty  # noqa: PLC0415
    from ...core.planning.uncertainty_mppi import (distance_to_data, planning_heat_map,  # noqa: PLC0415
                                                  uncertainty_heat_map)
    from ..learning.train_primitive import fit_emdn, load_split  # noqa: PLC0415

    _, ltrain, lval, _ = load_split(data, args.samples, lesion=lesion, seed=args.seed)
    lemdn, _, lref = fit_emdn(ltrain, lval, trained["config"], progress=True, label="lesioned E-MDN")
    lesioned = EMDNPrimitive(lemdn, lesion, lref)
    heat = uncertainty_heat_map(lesioned, seed=args.seed)
    gx, gy = np.meshgrid(heat.xs, heat.ys)
    in_data = (np.abs(gx) <= WORKSPACE[0] + 1e-9) & (np.abs(gy) <= WORKSPACE[1] + 1e-9)
    inside = lesion.contains(np.stack([gx, gy], -1)) & in_data
    v_in, v_out = float(heat.values[inside].mean()), float(heat.values[~inside & in_data].mean())
    test = trained["test"]
    t_in = lesion.contains(test.poses[:, :2])
    test_unc = uncertainty(lemdn.predict(test.x)[1])
    plan_heat = planning_heat_map(heat, lref, ltrain.poses[:, :2], w_data=args.w_data,
                                  clearance=args.track_reach)
    # the lesion's centre line (where Exp. 3/4's straight path runs): the ensemble's own variance there in units of
    # var_ref, against the distance to the nearest training push (a low-variance channel far from the data is the
    # ensemble agreeing while it extrapolates)
    centre = 0.5 * (lesion.x0 + lesion.x1)
    line = np.stack([np.full(41, centre), np.linspace(lesion.y0, lesion.y1, 41)], -1)
    line_d = distance_to_data(line, ltrain.poses[:, :2])
    core = line_d >= 0.05
    result["lesion"] = {"variance_inside": v_in, "variance_outside": v_out, "ratio": v_in / v_out,
                        "test_variance_inside": float(test_unc[t_in].mean()) if t_in.any() else None,
                        "test_variance_outside": float(test_unc[~t_in].mean()) if (~t_in).any() else None,
                        "train_pushes": len(ltrain), "var_ref": lref,
                        "centre_line_heat_over_var_ref_min": float((heat(line) / lref).min()),
                        "centre_line_heat_over_var_ref_mean": float((heat(line) / lref).mean()),
                        "centre_line_core_heat_over_var_ref_min":
                            float((heat(line[core]) / lref).min()) if core.any() else None,
                        "centre_line_max_distance_to_data_m": float(line_d.max()),
                        "planning_heat_over_var_ref_centre_line_min": float((plan_heat(line) / lref).min())}
    print(f"\nlesion: mean predicted position variance inside {v_in:.3e} m^2, outside {v_out:.3e} m^2: "
          f"ratio {v_in / v_out:.1f} (goal >= 3)")
    return lesioned, heat, plan_heat


def _exp2(args, world, trained, episodes, result):
    """Exp. 2: MPPI with the fine model, the E-MDN and the GP to goal poses, in MuJoCo (``result["exp2"]``)."""
    from tqdm import tqdm  # noqa: PLC0415

    from ...core.models.push_primitive import EMDNPrimitive, GPPrimitive  # noqa: PLC0415
    from ...core.planning.uncertainty_mppi import PrimitiveMPPI, PrimitiveMPPIConfig  # noqa: PLC0415

    emdn_ref = trained["emdn_ref"]
    models = {"fine": (world, 1.0), "emdn": (EMDNPrimitive(trained["emdn"], None, emdn_ref), emdn_ref),
              "gp": (GPPrimitive(trained["gp"]), emdn_ref)}
    exp2 = {}
    for name, (model, ref) in models.items():
        n_goals = args.fine_goals if name == "fine" else args.goals
        mcfg = PrimitiveMPPIConfig(seed=args.seed)
        if name == "fine":
            mcfg = PrimitiveMPPIConfig(seed=args.seed, samples=args.fine_samples, horizon=3, decay_steps=2)
        rows = []
        goals = exp2_goals(n_goals, args.seed)
        for goal in tqdm(goals, desc=f"exp2 {name}", unit="episode"):
            goal = np.asarray(goal)
            mppi = PrimitiveMPPI(model, mcfg, var_ref=ref)
            ep = run_episode(world, mppi, EXP2_START, goal, args.max_pushes)
            rows.append(ep)
            episodes.setdefault(f"exp2_{name}", []).append(ep["poses"])
        exp2[name] = _summary(rows, EXP2_START, goals, mcfg.w_rot)
    result["exp2"] = exp2
    print_table(["model", "episodes", "success", "pos err mm", "rot err deg", "final cost", "pushes"],
                [[k, v["episodes"], v["success_rate"], v["final_pos_err_mm"], v["final_rot_err_deg"],
                  v["final_cost"], v["pushes"]] for k, v in exp2.items()],
                title="Exp. 2: MPPI to goal poses (world: MuJoCo)")


def _exp34(args, world, lesion, lesioned, heat, episodes, result):
    """Exp. 3/4: plain MPPI, uncertainty-averse MPPI and Algorithm 2 across the lesion (``result["exp34"]``)."""
    from tqdm import tqdm  # noqa: PLC0415

    from ...core.planning.uncertainty_mppi import (PathConfig, PathTracker, PrimitiveMPPI,  # noqa: PLC0415
                                                  PrimitiveMPPIConfig, low_uncertainty_path, path_terms)

    lref = result["lesion"]["var_ref"]
    rng = np.random.default_rng([args.seed, 34])
    centre = 0.5 * (lesion.x0 + lesion.x1)
    start0 = (centre, lesion.y0 - EXP34_MARGIN, 0.0)
    goal = (centre, lesion.y1 + EXP34_MARGIN, 0.0)
    exp34 = {}
    alg2 = None  # Algorithm 2's path, planned once
    for method in ("plain", "ua", "alg2"):
        rows = []
        for e in tqdm(range(args.episodes), desc=f"exp3/4 {method}", unit="episode"):
            start = np.asarray(start0) + rng.normal(0.0, [0.01, 0.01, 0.1]) * (e > 0)
            w_unc = args.w_unc if method == "ua" else 0.0
            mppi = PrimitiveMPPI(lesioned, PrimitiveMPPIConfig(seed=args.seed + e, w_unc=w_unc), var_ref=lref)
            tracker = None
            if method == "alg2":
                if alg2 is None:
                    pcfg = PathConfig(seed=args.seed, w_smooth=args.w_smooth)
                    p = low_uncertainty_path(start0[:2], goal[:2], heat, lref, pcfg)
                    line = np.linspace(start0[:2], goal[:2], pcfg.waypoints)[None]
                    unc, smooth = path_terms(line, heat, lref, pcfg.w_smooth)
                    alg2 = {"path": p.path, "initial_cost": p.initial_cost, "cost": p.cost,
                            "start_costs": p.start_costs, "terms": p.terms,
                            "straight_terms": {"uncertainty": float(unc[0]), "smoothness": float(smooth[0])}}
                tracker = PathTracker(alg2["path"], goal, reach=args.track_reach)
            ep = run_episode(world, mppi, start, goal, args.max_pushes, tracker=tracker,
                             ua_pushes=args.ua_pushes if method == "ua" else None)
            ep["in_lesion"] = path_in_region(ep["poses"], lesion)
            rows.append(ep)
            episodes.setdefault(f"exp34_{method}", []).append(ep["poses"])
        exp34[method] = {**_summary(rows, start0, [goal] * len(rows), PrimitiveMPPIConfig().w_rot),
                         "path_in_lesion_fraction": float(np.mean([r["in_lesion"] for r in rows])) if rows else None}
    if alg2:
        exp34["alg2"].update(alg2)
        exp34["alg2"]["path_in_lesion_fraction_planned"] = path_in_region(alg2["path"], lesion)
    result["exp34"] = exp34
    print_table(["method", "episodes", "success", "path in lesion", "pos err mm", "pushes"],
                [[k, v["episodes"], v["success_rate"], v["path_in_lesion_fraction"], v["final_pos_err_mm"],
                  v["pushes"]] for k, v in exp34.items()],
                title="Exp. 3/4: start and goal on either side of the lesion (lesioned E-MDN)")


def _goals(args, result) -> dict:
    """The issue's goals, judged on the results (None where an experiment did not run)."""
    calib, exp2, exp34 = result["calibration"], result["exp2"], result["exp34"]
    plain, ua, alg2 = exp34["plain"], exp34["ua"], exp34["alg2"]
    return {
        "lesion_ratio_ge_3": result["lesion"]["ratio"] >= 3.0,
        "emdn_calibration_1sigma_in_0.6_0.75": 0.6 <= calib["emdn"]["calibration_1sigma"] <= 0.75,
        "ua_path_in_lesion_le_third_of_plain": (ua["path_in_lesion_fraction"] or 0.0) <=
        (plain["path_in_lesion_fraction"] or 0.0) / 3.0 if args.episodes else None,
        "ua_success_ge_0.9": ua["success_rate"] >= 0.9 if args.episodes else None,
        "alg2_path_in_lesion_le_third_of_plain": (alg2["path_in_lesion_fraction"] or 0.0) <=
        (plain["path_in_lesion_fraction"] or 0.0) / 3.0 if args.episodes else None,
        "alg2_success_ge_0.9": alg2["success_rate"] >= 0.9 if args.episodes else None,
        "emdn_success_ge_fine": exp2["emdn"]["success_rate"] >= exp2["fine"]["success_rate"]
        if args.goals and args.fine_goals else None}


def _summary(rows, start, goals, w_rot) -> dict:
    if not rows:
        return {"episodes": 0, "success_rate": None, "final_pos_err_mm": None, "final_rot_err_deg": None,
                "initial_cost": None, "final_cost": None, "pushes": None}
    init = [pose_errors(np.asarray(start), np.asarray(g)) for g in goals]
    return {"episodes": len(rows), "success_rate": float(np.mean([r["success"] for r in rows])),
            "final_pos_err_mm": 1000.0 * float(np.mean([r["pos_err"] for r in rows])),
            "final_rot_err_deg": float(np.degrees(np.mean([r["rot_err"] for r in rows]))),
            "initial_cost": float(np.mean([p + w_rot * r for p, r in init])),
            "final_cost": float(np.mean([r["pos_err"] + w_rot * r["rot_err"] for r in rows])),
            "pushes": float(np.mean([r["pushes"] for r in rows])),
            "wall_s_per_episode": float(np.mean([r["wall_s"] for r in rows]))}


def _plot(out, heat, lesion, episodes, exp34):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 7))
    im = ax.imshow(heat.values * 1e6, origin="lower", cmap="viridis",
                   extent=(heat.xs[0], heat.xs[-1], heat.ys[0], heat.ys[-1]))
    fig.colorbar(im, ax=ax, label="mean predicted position variance (mm^2)")
    x0, y0, x1, y1 = lesion.as_list()
    ax.plot([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], "w--", label="lesion")
    colours = {"plain": "tab:red", "ua": "tab:orange", "alg2": "white"}
    for method, colour in colours.items():
        for i, p in enumerate(episodes.get(f"exp34_{method}", [])):
            ax.plot(p[:, 0], p[:, 1], "-", color=colour, lw=1, label=method if i == 0 else None)
    if "alg2" in exp34 and "path" in exp34["alg2"]:
        p = np.asarray(exp34["alg2"]["path"])
        ax.plot(p[:, 0], p[:, 1], "o", color="white", ms=3, label="Alg. 2 way-points")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title("lesioned E-MDN: uncertainty heat-map and executed paths")
    ax.legend(loc="lower right", fontsize=7)
    save_figure(fig, Path(out) / "uncertainty_lesion.png")


def add_parser(sub, outputs):
    p = sub.add_parser("uncertainty", parents=[outputs], help="paper 004: E-MDN / GP calibration, lesioning, "
                       "uncertainty-averse MPPI and Algorithm 2 on the box push primitive",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="primitive dataset directory (default <out>/primitive_data; "
                   "generated or extended with parapush datagen --primitive's code)")
    p.add_argument("--lesion", default=DEFAULT_LESION, help="x0,y0,x1,y1 (m): box positions left out of training")
    for name, (default, least, meaning) in COUNTS.items():
        p.add_argument("--" + name.replace("_", "-"), type=int, default=default, help=f"{meaning} (>= {least})")
    p.add_argument("--w-unc", type=float, default=0.5, help="uncertainty weight of eq. 11 (per var_ref; 0.05: the "
                   "box still crosses the lesion's border band, see docs/results/uncertainty.md)")
    p.add_argument("--track-reach", type=float, default=0.03, help="Algorithm 2's tracker aims at the first "
                   "way-point farther than this (m; 0.06: it cuts the path's corners into the lesion); the path "
                   "keeps this clearance from high heat (uncertainty_mppi.planning_heat_map)")
    p.add_argument("--w-smooth", type=float, default=0.3, help="Algorithm 2's smoothness weight: w_smooth x "
                   "(path length / straight-line distance)^2 beside the uncertainty per straight-line distance in "
                   "units of var_ref (uncertainty_mppi.path_terms)")
    p.add_argument("--w-data", type=float, default=10.0, help="Algorithm 2's distance-to-data term: this x var_ref "
                   "far from the training pushes (uncertainty_mppi.planning_heat_map; 0: the ensemble's variance "
                   "alone)")
    p.add_argument("--threads", type=nonnegative_int, default=0, help="MuJoCo threads; 0 = all cores")
    add_seeds_argument(p)
    add_arguments(p, "seeds")
    p.set_defaults(func=seeded(run, _seed_data, "uncertainty"))
    return p
