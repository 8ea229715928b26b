"""``parapush bench speedup``: measured Parareal wall time against the serial fine model, next to the model.

Each single prediction is also timed with the pipelined schedule (``Parareal.solve(schedule="pipelined")``:
no barrier between fine sweeps): JSON ``pipelined_s`` and ``pipelined_speedup`` (over the serial fine model);
the table's "pipelined gain" is batched / pipelined wall time.

Model (paper 000 eq. 4 with P cores): S = 1 / ((1+K) c_c/c_f + K ceil(N/P)/N), from the measured cost of one
coarse call (c_c, batch of one, as Parareal makes it for a single trajectory) and one fine slice (c_f, one thread).
Our solver recomputes only unconverged slices, so it does less fine work than that model assumes; the JSON also
gives ``model_speedup_prefix``, the same model with the work actually done (sweep k has N-k+1 slices).
The batched case solves M trajectories together (one fine call of up to M x N slices per sweep) and compares with
M serial fine rollouts one after another, and with the sample-parallel fine rollout (M slices per call).
"""
from __future__ import annotations

import math

import numpy as np

from ..core.fine import FineModel, default_threads
from ..core.parareal import Parareal
from ..core.predict import COARSE_KINDS, Predictor
from ..core.scene import load_scene
from .common import median_time, output_paths, print_table, pyplot, save_figure, write_json
from .convergence import random_pushes

GOAL = 0.9  # measured >= 0.9 x model


def run(args) -> dict:
    scene = load_scene(args.scene)
    P = args.threads or default_threads()
    serial_fine = FineModel(scene, threads=1)
    fine = FineModel(scene, threads=P)
    coarse = Predictor(scene, coarse=args.coarse).coarse_model()
    solver = Parareal(scene, coarse, fine)
    rng = np.random.default_rng(args.seed)
    dt = 1.0
    x0 = scene.initial_state()
    x0[1] = 0.02  # a side push, in contact all along
    u1 = np.array([[0.025, 0.0]])
    c_f = median_time(lambda: serial_fine.propagate(x0[None], u1, dt), args.repeats)
    c_c = median_time(lambda: coarse.propagate(x0[None], u1, dt), args.repeats * 10)
    res = {"scene": scene.name, "coarse_model": args.coarse, "cores_used": P, "repeats": args.repeats,
           "c_f_s": c_f, "c_c_s": c_c,
           "alpha": c_c / c_f, "single": {}, "batched": {}, "goal_measured_over_model": GOAL}
    print(f"bench speedup: c_f = {c_f * 1e3:.2f} ms, c_c = {c_c * 1e6:.1f} us ({args.coarse}), P = {P} ...",
          flush=True)
    rows = []
    for N in args.horizons:
        U = np.array([[0.025, 0.0]] * N)
        t_fine = median_time(lambda: serial_fine.rollout(x0, U, dt), args.repeats)
        for K in range(1, N + 1):
            t_par = median_time(lambda: solver.solve(x0, U, dt, max_iterations=K), args.repeats)
            t_pipe = median_time(lambda: solver.solve(x0, U, dt, max_iterations=K, schedule="pipelined"),
                                 args.repeats)
            model = 1.0 / ((1 + K) * c_c / c_f + K * math.ceil(N / P) / N)
            work = sum(math.ceil((N - k + 1) / P) for k in range(1, K + 1))
            model_prefix = N * c_f / ((1 + K) * N * c_c + work * c_f)
            entry = {"serial_fine_s": t_fine, "parareal_s": t_par, "measured_speedup": t_fine / t_par,
                     "model_speedup": model, "model_speedup_prefix": model_prefix,
                     "pipelined_s": t_pipe, "pipelined_speedup": t_fine / t_pipe}
            entry["measured_over_model"] = entry["measured_speedup"] / model
            res["single"][f"N{N}_K{K}"] = entry
            rows.append((N, K, t_fine * 1e3, t_par * 1e3, entry["measured_speedup"], model, model_prefix,
                         entry["measured_over_model"], t_pipe * 1e3, t_par / t_pipe))
    print_table(["N", "K", "fine ms", "parareal ms", "measured S", "model S", "model S (prefix)", "meas/model",
                 "pipelined ms", "pipelined gain"],
                rows, title=f"bench speedup: single prediction, {P} cores (median of {args.repeats})")

    # batched: M trajectories solved together
    M, N = args.batch, 4
    xb, Ub = random_pushes(scene, M, N, rng)
    reps = max(3, args.repeats // 4)
    t_serial = median_time(lambda: [serial_fine.rollout(xb[m], Ub[m], dt) for m in range(M)], reps)
    t_sample_par = median_time(lambda: fine.rollout_batch(xb, Ub, dt), reps)
    brows = [("fine, one after another", "", t_serial * 1e3, 1.0, ""),
             ("fine, samples in parallel", "", t_sample_par * 1e3, t_serial / t_sample_par, "")]
    res["batched"] = {"M": M, "N": N, "serial_fine_s": t_serial, "sample_parallel_fine_s": t_sample_par}
    c_c_batch = median_time(lambda: coarse.propagate(xb, Ub[:, 0], dt), args.repeats * 10)  # one call, M rows
    res["batched"]["c_c_batch_s"] = c_c_batch
    for K in range(1, N + 1):
        t = median_time(lambda: solver.solve(xb, Ub, dt, max_iterations=K), reps)
        work = sum(math.ceil(M * (N - k + 1) / P) for k in range(1, K + 1))  # fine rounds on P cores
        model = M * N * c_f / ((1 + K) * N * c_c_batch + work * c_f)
        res["batched"][f"K{K}"] = {"parareal_s": t, "measured_speedup": t_serial / t, "model_speedup": model,
                                   "vs_sample_parallel_fine": t_sample_par / t}
        brows.append((f"parareal K={K}", "", t * 1e3, t_serial / t, model))
    print_table(["method", "", "wall ms", "speedup vs serial", "model"], brows,
                title=f"bench speedup: batch of M = {M} trajectories, N = {N}")
    path, out = output_paths(args, "speedup")
    write_json(path, res)
    _plot(res, args.horizons, out / "speedup.png")
    fine.close()
    return res


def _plot(res, horizons, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for N in horizons:
        ks = list(range(1, N + 1))
        ax.plot(ks, [res["single"][f"N{N}_K{k}"]["measured_speedup"] for k in ks], "o-", label=f"measured, N={N}")
        ax.plot(ks, [res["single"][f"N{N}_K{k}"]["model_speedup"] for k in ks], "--", label=f"model, N={N}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("Parareal iterations K")
    ax.set_ylabel("speedup over serial fine model")
    ax.set_title(f"Parareal speedup on {res['cores_used']} cores")
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("speedup", parents=[parent], help="measured Parareal speedup vs the model")
    p.add_argument("--scene", default="cylinder_slider")
    p.add_argument("--coarse", default="analytical", choices=COARSE_KINDS, help="coarse model inside Parareal")
    p.add_argument("--horizons", type=int, nargs="+", default=[4, 8])
    p.add_argument("--batch", type=int, default=20, help="trajectories M in the batched case")
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--repeats", type=int, default=20)
    p.set_defaults(func=run)
    return p
