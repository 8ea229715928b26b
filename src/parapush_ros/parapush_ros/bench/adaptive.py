"""``parapush bench adaptive``: uncertainty-aware Parareal against fixed K (issue 18, "uncertainty where it pays").

The coarse model is the learned ensemble (``learned_ensemble``); the uncertainty-aware Parareal
(``Parareal.solve(variance_threshold=t)``, at most K = 2) stops a trajectory as soon as the coarse variance of its
slices not yet exact gives every object a position sigma <= t. Compared with fixed K = 0, 1, 2 (same coarse model)
and fixed K = 2 on the shipped single network (``learned``) for:

* ``planner``: what the planner's first iteration predicts on the multi-object task: random clutter scenes
  (``core/scene/clutter.py``), from the start state and from the states 2 and 4 s into the straight push (fine
  model), the task's proposals plus Gaussian samples around the straight push (``exploration_variance`` 1e-4);
* ``contact``: ``bench learned``'s contact-rich pushes into random 4-cylinder clusters (the hard case).

Error: RMS over the trajectory of every object's xy distance to the serial fine rollout (mm), mean over the
trajectories (and the 95th percentile); cost: fine slices per trajectory (the parallel work Parareal pays for).
"""
from __future__ import annotations

import time

import numpy as np

from ..core.models.base import rollout
from ..core.models.fine import FineModel
from ..core.models.learned import LearnedCoarseModel
from ..core.models.learned.ensemble import LearnedEnsembleModel
from ..core.models.parareal import Parareal
from ..core.planning.tasks import PushTask
from ..core.scene.clutter import clutter_scenes
from ..core.scene.spec import load_scene
from .common import Progress, output_paths, print_table, pyplot, save_figure, write_json
from .learned import random_cluster_pushes

N = 4
DT = 1.0
K_MAX = 2


def planner_pushes(scenes, samples: int, rng, fine_threads=None, starts=(0, 2, 4)):
    """(scene, x0 (M, D), U (M, N, 2)) per scene and start (seconds into the straight push): the planner's
    first-iteration batch."""
    out = []
    for scene in scenes:
        task = PushTask(scene)
        x = scene.initial_state()
        fine = FineModel(scene, threads=fine_threads)
        try:
            path = rollout(fine, x, task.straight_push(x, 0.05, max(starts)), DT) if max(starts) else x[None]
        finally:
            fine.close()
        for x0 in path[list(starts)]:
            props = np.array(task.proposals(x0, N, DT)[:samples])
            U = np.repeat(props[:1], samples, axis=0)
            U[len(props):] += rng.normal(0.0, 0.01, U[len(props):].shape)
            U[:len(props)] = props
            speed = np.linalg.norm(U, axis=-1, keepdims=True)
            U *= np.minimum(1.0, 0.1 / np.maximum(speed, 1e-12))
            out.append((scene, np.repeat(x0[None], samples, axis=0), U))
    return out


def _errors_mm(scene, states, ref):
    """(M,) trajectory RMS xy error over all objects and states (mm)."""
    L = scene.layout
    d = np.linalg.norm(L.object_poses(states)[..., :2] - L.object_poses(ref)[..., :2], axis=-1)  # (M, N+1, n)
    return np.sqrt(np.mean(d ** 2, axis=(1, 2))) * 1e3


def methods(thresholds):
    out = {f"fixed_K{k}": ("learned_ensemble", k, 0.0) for k in range(K_MAX + 1)}
    out["single_network_fixed_K2"] = ("learned", K_MAX, 0.0)
    for t in thresholds:
        out[f"adaptive_{t * 1e3:g}mm"] = ("learned_ensemble", K_MAX, t)
    return out


def evaluate(batches, thresholds, weights=None, threads=None, label="bench adaptive") -> dict:
    """Error and cost per method over the batches ((scene, x0, U) triples)."""
    ms = methods(thresholds)
    progress = Progress(len(batches) * (len(ms) + 1), f"{label} (fine reference + methods)")
    err = {m: [] for m in ms}
    fine_slices = {m: 0 for m in ms}
    seconds = {m: 0.0 for m in ms}
    trajectories = 0
    for scene, x0, U in batches:
        fine = FineModel(scene, threads=threads)
        coarse = {"learned_ensemble": LearnedEnsembleModel.load(scene, weights),
                  "learned": LearnedCoarseModel.load(scene)}
        try:
            ref = rollout(fine, x0, U, DT)
            progress.update()
            trajectories += len(x0)
            for m, (c, k, t) in ms.items():
                t0 = time.perf_counter()
                r = Parareal(scene, coarse[c], fine).solve(x0, U, DT, k, variance_threshold=t)
                seconds[m] += time.perf_counter() - t0
                err[m].append(_errors_mm(scene, r.states, ref))
                fine_slices[m] += r.fine_slices
                progress.update()
        finally:
            fine.close()
    res = {}
    for m in ms:
        e = np.concatenate(err[m])
        res[m] = {"mean_rms_mm": float(e.mean()), "p95_rms_mm": float(np.percentile(e, 95)),
                  "max_rms_mm": float(e.max()), "fine_slices_per_trajectory": fine_slices[m] / trajectories,
                  "seconds": seconds[m]}
    res["trajectories"] = trajectories
    return res


def _verdict(case: dict) -> dict:
    """Does an adaptive setting reach fixed K = 2's accuracy (mean error within 5 %) for fewer fine slices?"""
    ref = case["fixed_K2"]
    out = {}
    for m, r in case.items():
        if m.startswith("adaptive_"):
            out[m] = {"cost_vs_fixed_K2": r["fine_slices_per_trajectory"] / ref["fine_slices_per_trajectory"],
                      "error_vs_fixed_K2": r["mean_rms_mm"] / ref["mean_rms_mm"] if ref["mean_rms_mm"] > 0 else 1.0,
                      "wins": bool(r["mean_rms_mm"] <= 1.05 * ref["mean_rms_mm"]
                                   and r["fine_slices_per_trajectory"] < ref["fine_slices_per_trajectory"])}
    return out


def run(args) -> dict:
    rng = np.random.default_rng(args.seed)
    thresholds = [float(t) * 1e-3 for t in args.thresholds]
    threads = args.threads or None
    res = {"seed": args.seed, "N": N, "K_max": K_MAX, "thresholds_m": thresholds, "weights": args.weights or "shipped"}
    scenes = clutter_scenes(args.scenes, args.seed)
    res["starts_s"] = list(args.starts)
    res["planner"] = evaluate(planner_pushes(scenes, args.samples, rng, threads, tuple(args.starts)), thresholds,
                              args.weights, threads, "planner pushes")
    sc = load_scene("four_cylinders")
    x0, U = random_cluster_pushes(sc, args.contact_pushes, N, rng)
    res["contact"] = evaluate([(sc, x0, U)], thresholds, args.weights, threads, "contact pushes")
    rows = []
    for case in ("planner", "contact"):
        res[f"{case}_verdict"] = _verdict(res[case])
        for m in methods(thresholds):
            r = res[case][m]
            rows.append((case, m, f"{r['mean_rms_mm']:.3f}", f"{r['p95_rms_mm']:.3f}",
                         f"{r['fine_slices_per_trajectory']:.2f}", f"{r['seconds']:.1f}"))
    print_table(["case", "method", "mean RMS mm", "p95 mm", "fine slices/traj", "s"], rows,
                title=f"bench adaptive: uncertainty-aware Parareal vs fixed K (N = {N}; "
                      f"{res['planner']['trajectories']} planner, {res['contact']['trajectories']} contact "
                      f"trajectories)")
    for case in ("planner", "contact"):
        for m, v in res[f"{case}_verdict"].items():
            print(f"  {case} {m}: cost {v['cost_vs_fixed_K2']:.2f} x fixed K=2, error {v['error_vs_fixed_K2']:.2f} x, "
                  f"{'wins' if v['wins'] else 'does not win'}")
    path, out = output_paths(args, "adaptive")
    write_json(path, res)
    _plot(res, thresholds, out / "adaptive.png")
    return res


def _plot(res, thresholds, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, case in zip(axes, ("planner", "contact")):
        for m in methods(thresholds):
            r = res[case][m]
            marker = "o" if m.startswith("fixed") else ("s" if m.startswith("single") else "^")
            ax.plot(r["fine_slices_per_trajectory"], r["mean_rms_mm"], marker, label=m)
        ax.set_xlabel("fine slices per trajectory")
        ax.set_ylabel("mean trajectory RMS error (mm)")
        ax.set_yscale("log")
        ax.set_title(case)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("adaptive", parents=[parent], help="uncertainty-aware Parareal vs fixed K (paper 004+)")
    p.add_argument("--scenes", type=int, default=4, help="random clutter scenes")
    p.add_argument("--samples", type=int, default=12, help="planner samples per start")
    p.add_argument("--starts", type=int, nargs="+", default=[0, 2, 4],
                   help="planner starts: seconds into the straight push (fine model)")
    p.add_argument("--contact-pushes", type=int, default=20, help="contact-rich 4-cylinder pushes")
    p.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 1.0, 2.0],
                   help="variance thresholds: position sigma (mm)")
    p.add_argument("--weights", default=None, help="learned ensemble weights (default: the shipped ones)")
    p.add_argument("--threads", type=int, default=0, help="fine-model threads; 0 = all cores")
    p.set_defaults(func=run)
    return p
