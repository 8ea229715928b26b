"""``parapush bench table1``: paper 000 Table 1, open-loop accuracy of coarse and Parareal-K vs the fine model.

Box slider; N random initial states with the pusher offset uniformly across the box face; three control
sequences u = v_c [cos a, sin a] x 4, a in {0, 15, -15} deg, v_c = 25 mm/s, 1.5 s each (150 mm push). For every
model: mean translation (mm) and rotation (deg) difference of the final slider pose to the fine model.
The trajectories are solved as Parareal batches of ``--unit-states`` states (x 3), each a unit of the study engine
(``tools.study``: a Ray task of one CPU with ``--workers`` / ``--ray``, kept in ``<out>/table1_study``); the
iterate after k iterations is exactly what a solve with K = k returns, and the K = 4 iterate is the serial fine model
(checked bitwise on a sample of each batch).
"""
from __future__ import annotations

import numpy as np

from ...arguments import positive_int
from ...core.models.base import rollout
from ...core.models.parareal import Parareal
from ...core.models.registry import Predictor
from ...core.scene.spec import load_scene
from ...core.scene.state import wrap_angle
from ..study import Study, Unit, add_arguments
from .common import (_plain, add_model_arguments, output_paths, print_table, pyplot, save_figure, study_settings,
                     write_json)

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


def states_unit(context: dict, unit) -> dict:
    """The study unit of ``bench table1``: initial states ``first .. first + n - 1`` of the seed's (x 3 control
    sequences) as one Parareal batch on ``unit.cpus`` threads; per iterate k, every trajectory's final translation
    (mm) and rotation (deg) difference to the fine model."""
    args = context["args"]
    first = unit["first"]
    n = min(args.unit_states, args.states - first)
    scene = load_scene("box_slider")
    x = initial_states(scene, first + n, args.seed)[first:]  # the seed's states: drawn in sequence
    ang = np.radians(ANGLES_DEG)
    x0 = np.repeat(x, len(ang), axis=0)
    a = np.tile(ang, len(x))
    U = (V_C * np.stack([np.cos(a), np.sin(a)], -1))[:, None, :].repeat(N_CONTROLS, 1)
    predictor = Predictor(scene, coarse=args.coarse, fine=args.fine, threads=unit.cpus)
    fine = predictor.fine
    solver = Parareal(scene, predictor.coarse_model(), fine)
    r = solver.solve(x0, U, DT, max_iterations=N_CONTROLS, keep_history=True)
    ref = r.history[N_CONTROLS]
    sample = rollout(fine, x0[:3], U[:3], DT)
    assert np.array_equal(sample, ref[:3]), "Parareal at K = N must equal the serial fine model bitwise"
    predictor.close()
    out = {"trans_mm": [], "rot_deg": [], "fine_slices": r.fine_slices, "wall_time_s": r.wall_time}
    for k in range(N_CONTROLS + 1):
        fin, rf = r.history[k][:, -1], ref[:, -1]
        out["trans_mm"].append((np.linalg.norm(fin[:, 2:4] - rf[:, 2:4], axis=-1) * 1e3).tolist())
        out["rot_deg"].append(np.degrees(np.abs(wrap_angle(fin[:, 4] - rf[:, 4]))).tolist())
    return out


def run(args) -> dict:
    if args.states < 1:
        raise ValueError(f"--states: must be >= 1, got {args.states}")
    if args.unit_states < 1:
        raise ValueError(f"--unit-states: must be >= 1, got {args.unit_states}")
    path, out = output_paths(args, "table1")
    n_traj = args.states * len(ANGLES_DEG)
    print(f"bench table1: {n_traj} trajectories ({args.states} states x {len(ANGLES_DEG)} sequences), "
          f"Parareal K = 0..{N_CONTROLS}, in batches of {args.unit_states} states ...", flush=True)
    study = Study(out / "table1_study", "bench table1", study_settings(args))
    units = [Unit.of(first=f) for f in range(0, args.states, args.unit_states)]
    parts = [study.run(units, states_unit, {"args": _plain(args)}, args, desc="bench table1 batches")[u.id]
             for u in units]
    rows, res = [], {"coarse_model": args.coarse, "fine_model": args.fine, "states": args.states,
                     "trajectories": n_traj, "seed": args.seed, "slice_s": DT,
                     "controls": N_CONTROLS, "v_c": V_C, "angles_deg": list(ANGLES_DEG), "models": {}}
    for k in range(N_CONTROLS + 1):
        name = "coarse" if k == 0 else f"parareal{k}"
        trans = np.concatenate([p["trans_mm"][k] for p in parts])
        rot = np.concatenate([p["rot_deg"][k] for p in parts])
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
    res["fine_slices"] = sum(p["fine_slices"] for p in parts)
    res["wall_time_s"] = sum(p["wall_time_s"] for p in parts)
    res["study"] = str(study.root)
    print_table(["model", "trans mm", "paper", "rot deg", "paper", "<= paper"], rows,
                title=f"bench table1: final slider pose vs fine model, {n_traj} trajectories")
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
    p.add_argument("--states", type=positive_int, default=100, help="random initial states (x 3 control sequences)")
    p.add_argument("--unit-states", type=int, default=10, help="states per Parareal batch, a unit of the study")
    add_model_arguments(p)
    add_arguments(p, "batches")
    p.set_defaults(func=run)
    return p
