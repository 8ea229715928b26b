"""``parapush bench table1``: paper 000 Table 1, open-loop accuracy of coarse and Parareal-K vs the fine model.

Box slider; N random initial states with the pusher offset uniformly across the box face; three control
sequences u = v_c [cos a, sin a] x 4, a in {0, 15, -15} deg, v_c = 25 mm/s, 1.5 s each (150 mm push). For every
model: mean translation (mm) and rotation (deg) difference of the final slider pose to the fine model.
All 3N trajectories are solved as ONE Parareal batch; the iterate after k iterations is exactly what a solve with
K = k returns, and the K = 4 iterate is the serial fine model (checked bitwise on a sample).
"""
from __future__ import annotations

import numpy as np

from ...core.models.base import rollout
from ...core.models.parareal import Parareal
from ...core.models.registry import Predictor
from ...core.scene.spec import load_scene
from ...core.scene.state import wrap_angle
from .common import add_model_arguments, output_paths, print_table, pyplot, save_figure, write_json

PAPER = {"coarse": (62.67, 17.63), "parareal1": (28.43, 6.30), "parareal2": (6.39, 3.82),
         "parareal3": (2.47, 0.79), "parareal4": (0.0, 0.0)}
ANGLES_DEG = (0.0, 15.0, -15.0)
V_C, DT, N_CONTROLS = 0.025, 1.5, 4


def initial_states(scene, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    box = scene.objects[0]
    hy = box.size[1] / 2.0
    x = np.repeat(scene.initial_state()[None], n, 0)
    x[:, 1] = rng.uniform(-hy, hy, n)  # pusher offset perpendicular to the push, within the box face
    return x


def run(args) -> dict:
    scene = load_scene("box_slider")
    x = initial_states(scene, args.states, args.seed)
    ang = np.radians(ANGLES_DEG)
    x0 = np.repeat(x, len(ang), axis=0)
    a = np.tile(ang, len(x))
    U = (V_C * np.stack([np.cos(a), np.sin(a)], -1))[:, None, :].repeat(N_CONTROLS, 1)
    predictor = Predictor(scene, coarse=args.coarse, fine=args.fine, threads=args.threads or None)
    fine = predictor.fine
    solver = Parareal(scene, predictor.coarse_model(), fine)
    print(f"bench table1: {len(x0)} trajectories ({args.states} states x {len(ang)} sequences), "
          f"Parareal K = 0..{N_CONTROLS} in one batch on {fine.threads} threads ...", flush=True)
    r = solver.solve(x0, U, DT, max_iterations=N_CONTROLS, keep_history=True)
    ref = r.history[N_CONTROLS]
    sample = rollout(fine, x0[:3], U[:3], DT)
    assert np.array_equal(sample, ref[:3]), "Parareal at K = N must equal the serial fine model bitwise"
    predictor.close()

    rows, res = [], {"coarse_model": args.coarse, "fine_model": args.fine, "states": args.states,
                     "trajectories": len(x0), "seed": args.seed, "slice_s": DT,
                     "controls": N_CONTROLS, "v_c": V_C, "angles_deg": list(ANGLES_DEG), "models": {}}
    for k in range(N_CONTROLS + 1):
        name = "coarse" if k == 0 else f"parareal{k}"
        fin, rf = r.history[k][:, -1], ref[:, -1]
        trans = np.linalg.norm(fin[:, 2:4] - rf[:, 2:4], axis=-1) * 1e3
        rot = np.degrees(np.abs(wrap_angle(fin[:, 4] - rf[:, 4])))
        entry = {"mean_trans_mm": float(trans.mean()), "mean_rot_deg": float(rot.mean()),
                 "std_trans_mm": float(trans.std()), "std_rot_deg": float(rot.std()),
                 "max_trans_mm": float(trans.max()), "max_rot_deg": float(rot.max()),
                 "paper_trans_mm": PAPER[name][0], "paper_rot_deg": PAPER[name][1]}
        entry["at_or_below_paper"] = bool(entry["mean_trans_mm"] <= PAPER[name][0] + 1e-9 and
                                          entry["mean_rot_deg"] <= PAPER[name][1] + 1e-9)
        res["models"][name] = entry
        rows.append((name, entry["mean_trans_mm"], PAPER[name][0], entry["mean_rot_deg"], PAPER[name][1],
                     "yes" if entry["at_or_below_paper"] else "NO"))
    res["all_at_or_below_paper"] = all(e["at_or_below_paper"] for e in res["models"].values())
    res["fine_slices"] = r.fine_slices
    res["wall_time_s"] = r.wall_time
    print_table(["model", "trans mm", "paper", "rot deg", "paper", "<= paper"], rows,
                title=f"bench table1: final slider pose vs fine model, {len(x0)} trajectories")
    path, out = output_paths(args, "table1")
    write_json(path, res)
    _plot(res, out / "table1.png")
    return res


def _plot(res, path):
    plt = pyplot()
    names = list(res["models"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, pkey, unit in ((axes[0], "mean_trans_mm", "paper_trans_mm", "mm"),
                                (axes[1], "mean_rot_deg", "paper_rot_deg", "deg")):
        idx = np.arange(len(names))
        ax.bar(idx - 0.2, [res["models"][n][key] for n in names], 0.4, label="parapush")
        ax.bar(idx + 0.2, [res["models"][n][pkey] for n in names], 0.4, label="paper 000 Table 1")
        ax.set_xticks(idx, names, rotation=20)
        ax.set_ylabel(f"mean final {'translation' if unit == 'mm' else 'rotation'} error ({unit})")
        ax.legend()
    fig.suptitle(f"Open-loop accuracy vs MuJoCo, box slider, {res['trajectories']} trajectories")
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("table1", parents=[parent], help="paper 000 Table 1 (open-loop accuracy, box slider)")
    p.add_argument("--states", type=int, default=100, help="random initial states (x 3 control sequences)")
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    add_model_arguments(p)
    p.set_defaults(func=run)
    return p
