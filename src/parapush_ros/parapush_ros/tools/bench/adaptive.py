"""``parapush bench adaptive``: uncertainty-aware Parareal against fixed K (paper 004's variance used where it pays).

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

Two more variants (``--slice-thresholds``; measurement only, none has won, see docs/results/): a per-slice gate (a fine
sweep computes only the slices whose own sigma exceeds t, ``SliceGatedFine``) and ``hybrid`` coarse values (the
single network's prediction with the ensemble's variance as the gate, ``HybridCoarse``; judged against fixed K = 2
on the single network). ``correlation``: how well the ensemble's predicted sigma of one slice (from the fine state)
ranks the actual one-slice error of the ensemble mean and of the single network (Spearman, AUROC for > 1 mm, share
within 1 sigma), what a slice gate at 0.5-4 mm would skip, and per trajectory the accumulated sigma against the
fixed-K errors: the premise of every variance gate.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ...arguments import nonnegative_int, positive_int
from ...core.models.base import rollout, rollout_with_variance
from ...core.models.fine import FineModel
from ...core.models.learned import LearnedCoarseModel
from ...core.models.learned.ensemble import LearnedEnsembleModel
from ...core.models.parareal import Parareal
from ...core.planning.tasks import PushTask
from ...core.scene.clutter import clutter_scenes
from ...core.scene.spec import load_scene
from ..study import add_arguments
from .common import add_seeds_argument, output_paths, print_table, pyplot, save_figure, seeded, write_json
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


def methods(thresholds, slice_thresholds=()):
    """name -> (coarse, K, variance threshold, gate): coarse ``learned_ensemble`` (the ensemble mean), ``learned``
    (the shipped single network) or ``hybrid`` (the single network's prediction with the ensemble's variance);
    gate ``trajectory`` (Parareal's variance_threshold: a trajectory stops iterating), ``slice`` (a fine sweep
    computes only the slices whose own predicted sigma exceeds the threshold; the others keep the coarse value)."""
    out = {f"fixed_K{k}": ("learned_ensemble", k, 0.0, "") for k in range(K_MAX + 1)}
    out["single_network_fixed_K2"] = ("learned", K_MAX, 0.0, "")
    for t in thresholds:
        out[f"adaptive_{t * 1e3:g}mm"] = ("learned_ensemble", K_MAX, t, "trajectory")
        out[f"hybrid_adaptive_{t * 1e3:g}mm"] = ("hybrid", K_MAX, t, "trajectory")
    for t in slice_thresholds:
        out[f"slice_gate_{t * 1e3:g}mm"] = ("learned_ensemble", K_MAX, t, "slice")
        out[f"hybrid_slice_gate_{t * 1e3:g}mm"] = ("hybrid", K_MAX, t, "slice")
    return out


class HybridCoarse:
    """The single network's prediction (the more accurate coarse model) with the ensemble's variance (the one
    that knows where it is unsure): the gate and the coarse value each from the better model."""

    def __init__(self, single, ensemble):
        self.single, self.ensemble, self.name = single, ensemble, "hybrid"

    def propagate(self, x, u, dt):
        return self.single.propagate(x, u, dt)

    def propagate_with_variance(self, x, u, dt):
        return self.single.propagate(x, u, dt), self.ensemble.propagate_with_variance(x, u, dt)[1]


class SliceGatedFine:
    """A fine propagator that runs MuJoCo only on the slices whose own coarse sigma (the largest object position
    sigma of the slice alone, from the ensemble) exceeds ``threshold`` and returns the coarse value elsewhere:
    inside Parareal that slice's correction vanishes (C_new + C_old - C_old), the coarse model is trusted there."""

    def __init__(self, scene, fine, coarse, threshold: float):
        self.layout, self.fine, self.coarse, self.threshold = scene.layout, fine, coarse, threshold
        self.slices = 0

    def propagate(self, x, u, dt):
        out, var = self.coarse.propagate_with_variance(x, u, dt)
        unsure = self.layout.object_position_sigma(var).max(axis=-1, initial=0.0) > self.threshold
        if unsure.any():
            out[unsure] = self.fine.propagate(x[unsure], u[unsure], dt)
            self.slices += int(unsure.sum())
        return out


def _rank_corr(a, b) -> float:
    from scipy.stats import spearmanr  # noqa: PLC0415
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.ptp(a) == 0.0 or np.ptp(b) == 0.0:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def _auroc(score, positive) -> float:
    from sklearn.metrics import roc_auc_score  # noqa: PLC0415
    positive = np.asarray(positive, bool)
    if positive.all() or not positive.any():
        return float("nan")
    return float(roc_auc_score(positive, score))


def slice_statistics(scene, U, ref, ensemble, single) -> dict:
    """Per (trajectory, slice, object): the ensemble's predicted position sigma of one slice started from the fine
    state, and the actual position error of the ensemble mean and of the single network against the fine slice."""
    L = scene.layout
    sig, err_e, err_s = [], [], []
    for n in range(U.shape[1]):
        ce, var = ensemble.propagate_with_variance(ref[:, n], U[:, n], DT)
        cs = single.propagate(ref[:, n], U[:, n], DT)
        truth = L.object_poses(ref[:, n + 1])[..., :2]
        sig.append(L.object_position_sigma(var))
        err_e.append(np.linalg.norm(L.object_poses(ce)[..., :2] - truth, axis=-1))
        err_s.append(np.linalg.norm(L.object_poses(cs)[..., :2] - truth, axis=-1))
    return {"sigma": np.stack(sig, 1), "err_ensemble": np.stack(err_e, 1), "err_single": np.stack(err_s, 1)}


def correlation_summary(stats: list, trajectory: dict) -> dict:
    """How much the ensemble's sigma says about the coarse error: the premise of every variance gate."""
    sig = np.concatenate([s["sigma"].ravel() for s in stats])
    ee = np.concatenate([s["err_ensemble"].ravel() for s in stats])
    es = np.concatenate([s["err_single"].ravel() for s in stats])
    moved = (sig > 0.0) | (ee > 1e-4)  # object-slices the gate sent through the network, or that moved
    out = {"object_slices": int(sig.size), "object_slices_considered": int(moved.sum())}
    sig, ee, es = sig[moved], ee[moved], es[moved]
    for name, err in (("ensemble", ee), ("single", es)):
        out[name] = {"spearman_sigma_vs_error": _rank_corr(sig, err),
                     "pearson_log_sigma_vs_log_error": float(np.corrcoef(np.log(sig + 1e-5), np.log(err + 1e-5))[0, 1])
                     if len(sig) > 2 else float("nan"),
                     "auroc_error_gt_1mm": _auroc(sig, err > 1e-3),
                     "within_1sigma": float(np.mean(err <= sig)) if len(sig) else float("nan"),
                     "mean_error_mm": 1e3 * float(err.mean()) if len(err) else float("nan"),
                     "share_error_gt_1mm": float(np.mean(err > 1e-3)) if len(err) else float("nan")}
    big = ee > 1e-3
    for t in (0.5e-3, 1e-3, 2e-3, 4e-3):  # a slice gate at t: the slices it would skip, and the big errors among them
        skip = sig <= t
        out[f"gate_{t * 1e3:g}mm"] = {
            "share_skipped": float(skip.mean()) if len(skip) else None,
            "share_of_ensemble_errors_gt_1mm_skipped": float(skip[big].mean()) if big.any() else None,
            "mean_ensemble_error_skipped_mm": 1e3 * float(ee[skip].mean()) if skip.any() else None,
            "mean_ensemble_error_kept_mm": 1e3 * float(ee[~skip].mean()) if (~skip).any() else None}
    tsig = np.concatenate(trajectory["sigma"])
    out["trajectory"] = {f"spearman_sigma_vs_{m}_error": _rank_corr(tsig, np.concatenate(trajectory[m]))
                         for m in trajectory if m != "sigma" and trajectory[m]}
    return out


def evaluate(batches, thresholds, weights=None, threads=None, label="bench adaptive", slice_thresholds=()) -> dict:
    """Error and cost per method over the batches ((scene, x0, U) triples), and how well the ensemble's sigma
    tells the coarse error (``correlation``)."""
    ms = methods(thresholds, slice_thresholds)
    from tqdm import tqdm  # noqa: PLC0415
    progress = tqdm(total=len(batches) * (len(ms) + 1), desc=f"{label} (fine reference + methods)", unit="run",
                    file=sys.stderr)
    err = {m: [] for m in ms}
    fine_slices = {m: 0 for m in ms}
    seconds = {m: 0.0 for m in ms}
    stats, traj = [], {"sigma": [], "fixed_K0": [], "fixed_K1": [], "fixed_K2": []}
    trajectories = 0
    for scene, x0, U in batches:
        fine = FineModel(scene, threads=threads)
        ensemble, single = LearnedEnsembleModel.load(scene, weights), LearnedCoarseModel.load(scene)
        coarse = {"learned_ensemble": ensemble, "learned": single, "hybrid": HybridCoarse(single, ensemble)}
        try:
            ref = rollout(fine, x0, U, DT)
            progress.update()
            trajectories += len(x0)
            stats.append(slice_statistics(scene, U, ref, ensemble, single))
            _, var = rollout_with_variance(ensemble, x0, U, DT)
            traj["sigma"].append(scene.layout.object_position_sigma(var[:, -1]).max(axis=-1))
            for m, (c, k, t, gate) in ms.items():
                t0 = time.perf_counter()
                if gate == "slice":
                    gated = SliceGatedFine(scene, fine, coarse[c], t)
                    r = Parareal(scene, coarse[c], gated).solve(x0, U, DT, k)
                    fine_slices[m] += gated.slices
                else:
                    r = Parareal(scene, coarse[c], fine).solve(x0, U, DT, k, variance_threshold=t)
                    fine_slices[m] += r.fine_slices
                seconds[m] += time.perf_counter() - t0
                err[m].append(_errors_mm(scene, r.states, ref))
                if m in traj:
                    traj[m].append(err[m][-1])
                progress.update()
        finally:
            fine.close()
    progress.close()
    res = {}
    for m in ms:
        e = np.concatenate(err[m])
        res[m] = {"mean_rms_mm": float(e.mean()), "p95_rms_mm": float(np.percentile(e, 95)),
                  "max_rms_mm": float(e.max()), "fine_slices_per_trajectory": fine_slices[m] / trajectories,
                  "seconds": seconds[m]}
    res["trajectories"] = trajectories
    res["correlation"] = correlation_summary(stats, traj)
    return res


def _verdict(case: dict) -> dict:
    """Does a variance-gated setting reach fixed K = 2's accuracy (mean error within 5 %) for fewer fine slices?
    Judged against fixed K = 2 on the same coarse model (``fixed_K2`` for the ensemble, ``single_network_fixed_K2``
    for the hybrids, whose coarse value is the single network's)."""
    out = {}
    for m, r in case.items():
        if not isinstance(r, dict) or not ("adaptive_" in m or "slice_gate_" in m):
            continue
        ref = case["single_network_fixed_K2" if m.startswith("hybrid_") else "fixed_K2"]
        out[m] = {"cost_vs_fixed_K2": r["fine_slices_per_trajectory"] / ref["fine_slices_per_trajectory"],
                  "error_vs_fixed_K2": r["mean_rms_mm"] / ref["mean_rms_mm"] if ref["mean_rms_mm"] > 0 else 1.0,
                  "wins": bool(r["mean_rms_mm"] <= 1.05 * ref["mean_rms_mm"]
                               and r["fine_slices_per_trajectory"] < ref["fine_slices_per_trajectory"])}
    return out


def run(args) -> dict:
    rng = np.random.default_rng(args.seed)
    thresholds = [float(t) * 1e-3 for t in args.thresholds]
    slice_thresholds = [float(t) * 1e-3 for t in args.slice_thresholds]
    threads = args.threads or None
    res = {"seed": args.seed, "N": N, "K_max": K_MAX, "thresholds_m": thresholds,
           "slice_thresholds_m": slice_thresholds, "weights": args.weights or "shipped"}
    scenes = clutter_scenes(args.scenes, args.seed)
    res["starts_s"] = list(args.starts)
    path, out = output_paths(args, "adaptive")
    res["planner"] = evaluate(planner_pushes(scenes, args.samples, rng, threads, tuple(args.starts)), thresholds,
                              args.weights, threads, "planner pushes", slice_thresholds)
    write_json(path, res)  # a partial result is usable
    sc = load_scene("four_cylinders")
    x0, U = random_cluster_pushes(sc, args.contact_pushes, N, rng)
    res["contact"] = evaluate([(sc, x0, U)], thresholds, args.weights, threads, "contact pushes", slice_thresholds)
    rows = []
    for case in ("planner", "contact"):
        res[f"{case}_verdict"] = _verdict(res[case])
        for m in methods(thresholds, slice_thresholds):
            r = res[case][m]
            rows.append((case, m, f"{r['mean_rms_mm']:.3f}", f"{r['p95_rms_mm']:.3f}",
                         f"{r['fine_slices_per_trajectory']:.2f}", f"{r['seconds']:.1f}"))
    print_table(["case", "method", "mean RMS mm", "p95 mm", "fine slices/traj", "s"], rows,
                title=f"bench adaptive: uncertainty-aware Parareal vs fixed K (N = {N}; "
                      f"{res['planner']['trajectories']} planner, {res['contact']['trajectories']} contact "
                      f"trajectories)")
    for case in ("planner", "contact"):
        c = res[case]["correlation"]
        print(f"  {case}: ensemble sigma vs actual one-slice error over {c['object_slices_considered']} object-slices: "
              f"Spearman {c['ensemble']['spearman_sigma_vs_error']:.2f} (ensemble mean), "
              f"{c['single']['spearman_sigma_vs_error']:.2f} (single network); AUROC for > 1 mm "
              f"{c['ensemble']['auroc_error_gt_1mm']:.2f}; trajectories: "
              + ", ".join(f"{k.replace('spearman_sigma_vs_', '')} {v:.2f}" for k, v in c["trajectory"].items()))
        for m, v in res[f"{case}_verdict"].items():
            print(f"  {case} {m}: cost {v['cost_vs_fixed_K2']:.2f} x fixed K=2, error {v['error_vs_fixed_K2']:.2f} x, "
                  f"{'wins' if v['wins'] else 'does not win'}")
    write_json(path, res)
    _plot(res, out / "adaptive.png", slice_thresholds)
    return res


def _plot(res, path, slice_thresholds=()):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, case in zip(axes, ("planner", "contact")):
        for m in methods(res["thresholds_m"], slice_thresholds):
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
    p.add_argument("--scenes", type=positive_int, default=4, help="random clutter scenes")
    p.add_argument("--samples", type=positive_int, default=12, help="planner samples per start")
    p.add_argument("--starts", type=int, nargs="+", default=[0, 2, 4],
                   help="planner starts: seconds into the straight push (fine model)")
    p.add_argument("--contact-pushes", type=int, default=20, help="contact-rich 4-cylinder pushes")
    p.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 1.0, 2.0],
                   help="per-trajectory variance thresholds: position sigma (mm)")
    p.add_argument("--slice-thresholds", type=float, nargs="*", default=[2.0],
                   help="per-slice gate thresholds: a slice's own position sigma (mm)")
    p.add_argument("--weights", default=None, help="learned ensemble weights (default: the shipped ones)")
    p.add_argument("--threads", type=nonnegative_int, default=0, help="fine-model threads; 0 = all cores")
    add_seeds_argument(p)
    add_arguments(p, "seeds")
    p.set_defaults(func=seeded(run, name="adaptive"))
    return p
