"""``parapush bench learned``: the learned against the analytical coarse model inside Parareal (paper 001 Fig. 2–4).

Same random pushes for both coarse models; error = RMS over the trajectory (all N+1 states) of an object's xy
distance to the fine model, in mm, averaged over the pushes (as ``bench convergence``). Cases:

* 1 cylinder (``cylinder_slider``), N = 4 and N = 8: ``convergence.random_pushes`` drawn in the same order from
  the same seed, so the analytical rows equal ``bench convergence``'s;
* 4 cylinders (``four_cylinders``), N = 4 and N = 8, error per object: random clusters (gaps 0–5 cm between
  neighbours), the pusher 0–10 mm from a random object on the side away from the cluster centre, controls
  10–40 mm/s within ±30° of the direction to that object, so the pushed object runs into the others;
* cost of one slice: fine (one thread), both coarse models for one sample and per sample in a batch of 100.
"""
from __future__ import annotations

import time

import numpy as np

from ...arguments import nonnegative_int, positive_int
from ...core.models.analytical import AnalyticalCoarseModel
from ...core.models.base import rollout
from ...core.models.fine import FineModel
from ...core.models.learned import LearnedCoarseModel
from ...core.models.parareal import Parareal
from ...core.scene.spec import load_scene
from ..study import add_arguments
from .common import (add_seeds_argument, convergence_axes, median_time, output_paths, print_table,
                     pyplot, save_figure, seeded, write_json)
from .convergence import AUTHORS_ANALYTICAL_N4, random_pushes, trajectory_rms_mm

AUTHORS_LEARNED_N4 = [10.8, 4.1, 1.3, 0.8, 0.0]  # mm at k = 0..4, 1 cylinder, N = 4 (reference-implementation.md)
COST_GOAL = 200.0  # fine slice / coarse slice per sample


def random_cluster_pushes(scene, pushes: int, n_controls: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random contact-rich pushes into a random cluster of all the scene's cylinders (see the module docstring)."""
    L = scene.layout
    n = len(scene.objects)
    R = scene.objects[0].radius
    rp = scene.pusher.radius
    bound = scene.table.half - R - 0.05
    x0 = np.zeros((pushes, L.dim))
    U = np.zeros((pushes, n_controls, 2))
    for m in range(pushes):
        while True:
            c = np.zeros((n, 2))
            for j in range(1, n):
                while True:
                    a = rng.uniform(-np.pi, np.pi)
                    cand = c[rng.integers(j)] + (2 * R + rng.uniform(0.0, 0.05)) * np.array([np.cos(a), np.sin(a)])
                    if np.all(np.linalg.norm(c[:j] - cand, axis=1) >= 2 * R):
                        c[j] = cand
                        break
            c -= c.mean(axis=0)
            if np.all(np.abs(c) <= bound - 0.1):
                break
        t = rng.integers(n)
        away = np.arctan2(c[t, 1], c[t, 0]) if np.linalg.norm(c[t]) > 1e-9 else rng.uniform(-np.pi, np.pi)
        while True:
            bearing = away + rng.uniform(-np.pi / 3, np.pi / 3)
            p = c[t] + (R + rp + rng.uniform(0.0, 0.01)) * np.array([np.cos(bearing), np.sin(bearing)])
            if np.all(np.linalg.norm(c - p, axis=1) >= R + rp):
                break
        poses = np.column_stack([c, rng.uniform(-np.pi, np.pi, n)])
        x0[m] = L.compose(p, poses)
        heading = bearing + np.pi + rng.uniform(-np.pi / 6, np.pi / 6, n_controls)
        speed = rng.uniform(0.01, 0.04, n_controls)
        U[m] = speed[:, None] * np.stack([np.cos(heading), np.sin(heading)], -1)
    return x0, U


def parareal_errors(scene, coarse, fine, x0, U, ref, dt=1.0):
    """(n_objects, N+1, M) trajectory RMS error per object and iteration against ``ref`` (the fine model's serial
    rollout), and the K = N iterate (equal to ``ref`` when Parareal is exact at K = N: the error's last column is 0)."""
    N = U.shape[1]
    r = Parareal(scene, coarse, fine).solve(x0, U, dt, max_iterations=N, keep_history=True)
    err = np.stack([np.stack([trajectory_rms_mm(h, ref, i) for h in r.history]) for i in range(len(scene.objects))])
    return err, r.history[N]


def _displacement(scene, ref):
    """Mean and std (m) of the objects' start-to-end displacement in the fine trajectories."""
    L = scene.layout
    d = np.linalg.norm(L.object_poses(ref[:, -1])[..., :2] - L.object_poses(ref[:, 0])[..., :2], axis=-1)
    return float(d.mean()), float(d.std())


def _case(scene, models, fine, x0, U) -> dict:
    res, last = {}, []
    ref = rollout(fine, x0, U, 1.0)  # the fine model alone: the reference every iterate is measured against
    for name, model in models.items():
        t = time.perf_counter()
        err, x_n = parareal_errors(scene, model, fine, x0, U, ref)
        last.append(x_n)
        res[name] = {"mean_rms_mm": err.mean(axis=2).tolist(), "median_rms_mm": np.median(err, axis=2).tolist(),
                     "mean_over_objects_rms_mm": err.mean(axis=(0, 2)).tolist(), "seconds": time.perf_counter() - t}
    res["exact_at_K_equals_N"] = bool(all(np.array_equal(ref, x_n) for x_n in last))
    res["pushes"] = int(len(x0))
    res["N"] = int(U.shape[1])
    res["object_displacement_m"] = _displacement(scene, ref)
    return res


def _goals(case: dict, obj: int | None = 0) -> dict:
    """Goal checks for one object, or (``obj=None``) for the mean over the objects."""
    key = "mean_over_objects_rms_mm" if obj is None else "mean_rms_mm"
    le = np.array(case["learned"][key] if obj is None else case["learned"][key][obj])
    an = np.array(case["analytical"][key] if obj is None else case["analytical"][key][obj])
    N = case["N"]
    return {"learned_below_analytical_every_k_lt_N": bool(np.all(le[:N] < an[:N])),
            "analytical_over_learned_k1": float(an[1] / le[1]) if le[1] > 0 else float("inf"),
            "at_least_2x_at_k1": bool(an[1] >= 2.0 * le[1])}


def cost_per_slice(scene, learned, analytical, x0, u, repeats: int) -> dict:
    fine1 = FineModel(scene, threads=1)
    c_f = median_time(lambda: fine1.propagate(x0[None], u[None], 1.0), repeats)
    fine1.close()
    out = {"fine_s": c_f}
    for name, model in (("learned", learned), ("analytical", analytical)):
        for B in (1, 100):
            xb, ub = np.repeat(x0[None], B, 0), np.repeat(u[None], B, 0)
            c = median_time(lambda: model.propagate(xb, ub, 1.0),  # noqa: B023 - timed within this iteration
                            repeats * (5 if B == 1 else 1)) / B
            out[f"{name}_batch{B}_s"] = c
            out[f"{name}_batch{B}_fine_over_coarse"] = c_f / c
    return out


def run(args) -> dict:
    rng = np.random.default_rng(args.seed)
    threads = args.threads or None
    res = {"seed": args.seed, "slice_s": 1.0, "weights": args.weights or "shipped", "single": {}, "multi": {},
           "authors_learned_N4": AUTHORS_LEARNED_N4, "authors_analytical_N4": AUTHORS_ANALYTICAL_N4}
    rows, plots = [], {}

    sc = load_scene("cylinder_slider")
    fine = FineModel(sc, threads=threads)
    learned = LearnedCoarseModel.load(sc, args.weights)
    res["weights_meta"] = {k: learned.meta.get(k) for k in ("command", "code_version", "created")}
    models = {"learned": learned, "analytical": AnalyticalCoarseModel(sc)}
    for N in args.actions:
        x0, U = random_pushes(sc, args.pushes, N, rng)
        case = _case(sc, models, fine, x0, U)
        case["goals"] = _goals(case)
        res["single"][f"N{N}"] = case
        for name in models:
            rows.append((f"1 cylinder N={N}", name, *[f"{v:.2f}" for v in case[name]["mean_rms_mm"][0]]))
        plots[f"1 cylinder, N={N}"] = {name: [case[name]["mean_rms_mm"][0]] for name in models}
    x_cost = sc.initial_state()
    x_cost[1] = 0.02
    res["cost"] = {"cylinder_slider": cost_per_slice(sc, learned, models["analytical"], x_cost,
                                                     np.array([0.025, 0.0]), args.repeats)}
    fine.close()
    n4 = res["single"].get("N4")
    if n4:
        le = n4["learned"]["mean_rms_mm"][0]
        res["beats_authors_learned_N4"] = bool(all(le[k] < AUTHORS_LEARNED_N4[k] for k in range(4)))
    rows.append(("1 cylinder N=4", "authors' learned", *AUTHORS_LEARNED_N4))
    rows.append(("1 cylinder N=4", "authors' analytical", *AUTHORS_ANALYTICAL_N4))

    sc = load_scene("four_cylinders")
    fine = FineModel(sc, threads=threads)
    learned = LearnedCoarseModel.load(sc, args.weights)
    models = {"learned": learned, "analytical": AnalyticalCoarseModel(sc)}
    for N in args.multi_actions:
        x0, U = random_cluster_pushes(sc, args.multi_pushes, N, rng)
        case = _case(sc, models, fine, x0, U)
        case["goals_per_object"] = [_goals(case, i) for i in range(len(sc.objects))]
        case["goals_mean_over_objects"] = _goals(case, None)
        res["multi"][f"N{N}"] = case
        for name in models:
            for i, o in enumerate(sc.objects):
                rows.append((f"4 cylinders N={N}, {o.name}", name, *[f"{v:.2f}" for v in case[name]["mean_rms_mm"][i]]))
            rows.append((f"4 cylinders N={N}, mean of 4", name,
                         *[f"{v:.2f}" for v in case[name]["mean_over_objects_rms_mm"]]))
        plots[f"4 cylinders, N={N} (per object)"] = {name: case[name]["mean_rms_mm"] for name in models}
    x_cost, _ = random_cluster_pushes(sc, 1, 1, np.random.default_rng(args.seed + 1))
    res["cost"]["four_cylinders"] = cost_per_slice(sc, learned, models["analytical"], x_cost[0],
                                                   np.array([0.025, 0.0]), args.repeats)
    fine.close()

    width = max(list(args.actions) + list(args.multi_actions)) + 1
    print_table(["case", "coarse model"] + [f"k={k}" for k in range(width)],
                [r + ("",) * (width + 2 - len(r)) for r in rows],
                title=f"bench learned: Parareal trajectory RMS error (mm) vs the fine model, mean over "
                      f"{args.pushes} (1 cylinder) / {args.multi_pushes} (4 cylinders) random pushes")
    crow = []
    for scene_name, c in res["cost"].items():
        for name in ("learned", "analytical"):
            for B in (1, 100):
                crow.append((scene_name, name, B, c[f"{name}_batch{B}_s"] * 1e6, c["fine_s"] * 1e3,
                             c[f"{name}_batch{B}_fine_over_coarse"]))
    print_table(["scene", "coarse model", "batch", "coarse us/sample", "fine ms (1 thread)", "fine/coarse"], crow,
                title="bench learned: cost of one 1 s slice")
    res["goals_summary"] = _summary(res)
    for k, v in res["goals_summary"].items():
        print(f"  {k}: {v}")
    path, out = output_paths(args, "learned")
    write_json(path, res)
    _plot(plots, out / "learned.png")
    return res


def _summary(res) -> dict:
    s = {}
    for key, case in res["single"].items():
        s[f"1 cylinder {key}: learned < analytical at every k < N"] = \
            case["goals"]["learned_below_analytical_every_k_lt_N"]
        s[f"1 cylinder {key}: analytical / learned at k = 1"] = round(case["goals"]["analytical_over_learned_k1"], 2)
    for key, case in res["multi"].items():
        gm = case["goals_mean_over_objects"]
        s[f"4 cylinders {key}: learned < analytical at every k < N, mean over objects"] = \
            gm["learned_below_analytical_every_k_lt_N"]
        s[f"4 cylinders {key}: analytical / learned at k = 1, mean over objects"] = \
            round(gm["analytical_over_learned_k1"], 2)
        g = case["goals_per_object"]
        s[f"4 cylinders {key}: learned < analytical at every k < N, every object"] = \
            all(x["learned_below_analytical_every_k_lt_N"] for x in g)
        s[f"4 cylinders {key}: analytical / learned at k = 1 (min over objects)"] = \
            round(min(x["analytical_over_learned_k1"] for x in g), 2)
    if "beats_authors_learned_N4" in res:
        s["1 cylinder N4: below the authors' learned model at k = 0..3"] = res["beats_authors_learned_N4"]
    for scene_name, c in res["cost"].items():
        s[f"{scene_name}: fine / learned cost, batch 1 | batch 100 (goal >= {COST_GOAL:.0f})"] = \
            f"{c['learned_batch1_fine_over_coarse']:.0f} | {c['learned_batch100_fine_over_coarse']:.0f}"
    return s


def _plot(plots, path):
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415
    k = len(plots)
    fig, axes = plt.subplots(1, k, figsize=(4.6 * k, 4), squeeze=False)
    floor = 1e-4
    colors = {"learned": "tab:red", "analytical": "tab:blue"}
    for ax, (title, models) in zip(axes[0], plots.items()):
        for name, per_obj in models.items():
            for i, e in enumerate(per_obj):
                ls = ["-", "--", ":", "-."][i % 4]
                label = f"{name}" + (f", object {i}" if len(per_obj) > 1 else "")
                ax.semilogy(range(len(e)), np.maximum(e, floor), marker="o", ms=3, ls=ls, color=colors[name],
                            label=label)
        if title.startswith("1 cylinder, N=4"):
            ax.semilogy(range(5), np.maximum(AUTHORS_LEARNED_N4, floor), "k--", lw=0.8, label="authors' learned")
            ax.semilogy(range(5), np.maximum(AUTHORS_ANALYTICAL_N4, floor), "k:", lw=0.8, label="authors' analytical")
        ax.set_title(title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        convergence_axes(ax, legend_size=7)
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("learned", parents=[parent], help="learned vs analytical coarse model in Parareal")
    p.add_argument("--weights", default=None, help="weights file (default: the shipped ones)")
    p.add_argument("--pushes", type=positive_int, default=20, help="random 1-cylinder pushes per horizon")
    p.add_argument("--actions", type=positive_int, nargs="+", default=[4, 8], help="1-cylinder horizons N")
    p.add_argument("--multi-pushes", type=int, default=20, help="random 4-cylinder pushes per horizon")
    p.add_argument("--multi-actions", type=int, nargs="+", default=[4, 8], help="4-cylinder horizons N")
    p.add_argument("--repeats", type=positive_int, default=20, help="timing repeats for the cost per slice")
    p.add_argument("--threads", type=nonnegative_int, default=0, help="fine-model threads; 0 = all cores")
    add_seeds_argument(p)
    add_arguments(p, "seeds")
    p.set_defaults(func=seeded(run, name="learned"))
    return p
