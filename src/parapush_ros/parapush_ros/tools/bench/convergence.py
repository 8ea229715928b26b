"""``parapush bench convergence``: Parareal error per iteration (paper 000 Fig. 5 and random single-cylinder pushes).

Cases whose scene the coarse model cannot predict (the quasi-static model and a cylinder) are skipped and listed
under ``skipped``; ``--random-scene box_slider`` draws the random pushes on the box instead.

Error = RMS over the trajectory (all N+1 states) of the slider's xy distance to the fine model, in mm; for the
random pushes, the mean of that over the pushes (the authors' protocol in ``reference-implementation.md``).

Each Fig. 5 case and each horizon's random pushes is a unit of the study engine (``tools.study``: a Ray task
of one CPU with ``--workers`` / ``--ray``, kept in ``<out>/convergence_study``).
"""
from __future__ import annotations

import numpy as np

from ...arguments import positive_int
from ...core.models.base import UnsupportedScene
from ...core.models.parareal import Parareal
from ...core.models.registry import Predictor, parse_model_options
from ...core.scene.spec import load_scene
from ..study import Study, Unit, add_arguments
from .common import (_plain, add_model_arguments, add_model_option_argument, convergence_axes, output_paths,
                     print_table, pyplot, save_figure, study_settings, write_json)

AUTHORS_ANALYTICAL_N4 = [28.2, 22.7, 5.4, 2.0, 0.0]  # mm at k = 0..4, 1 cylinder, N = 4
FIG5_CASES = {  # name: (scene, pusher offset across the push (m))
    "cylinder_centre": ("cylinder_slider", 0.0),
    "cylinder_side": ("cylinder_slider", 0.03),
    "box_centre": ("box_slider", 0.0),
    "box_side": ("box_slider", 0.05),
}


def random_pushes(scene, pushes: int, n_controls: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random contact-rich pushes of the first object: the pusher starts 0-10 mm from it at a random bearing,
    each control has a speed of 10-40 mm/s and a heading within 30 deg of the direction to the slider centre."""
    obj = scene.objects[0]
    L = scene.layout
    x0 = np.repeat(scene.initial_state()[None], pushes, 0)
    bearing = rng.uniform(-np.pi, np.pi, pushes)
    dist = obj.footprint.bounding_radius + scene.pusher.radius + rng.uniform(0.0, 0.01, pushes)
    centre = np.asarray(obj.pose[:2])
    L.pusher_pos(x0)[:] = centre + dist[:, None] * np.stack([np.cos(bearing), np.sin(bearing)], -1)
    heading = (bearing + np.pi)[:, None] + rng.uniform(-np.pi / 6, np.pi / 6, (pushes, n_controls))
    speed = rng.uniform(0.01, 0.04, (pushes, n_controls))
    U = speed[..., None] * np.stack([np.cos(heading), np.sin(heading)], -1)
    return x0, U


def trajectory_rms_mm(states, ref, obj_index: int = 0) -> np.ndarray:
    """(M,) RMS over the trajectory of the object's xy error (mm)."""
    sl = slice(2 + 3 * obj_index, 4 + 3 * obj_index)
    err = np.linalg.norm(states[..., sl] - ref[..., sl], axis=-1)
    return np.sqrt(np.mean(err ** 2, axis=-1)) * 1e3


def errors_per_iteration(solver: Parareal, x0, U, dt) -> np.ndarray:
    """(K+1, M) trajectory RMS error at k = 0..N (one batched solve; the K = N iterate is the fine model)."""
    N = U.shape[1]
    r = solver.solve(x0, U, dt, max_iterations=N, keep_history=True)
    ref = r.history[N]
    return np.stack([trajectory_rms_mm(h, ref) for h in r.history])


def _solver(scene_name: str, args, threads: int):
    """(scene, Parareal) of a scene; ``UnsupportedScene`` where the coarse model refuses it."""
    sc = load_scene(scene_name)
    predictor = Predictor(sc, coarse=args.coarse, fine=args.fine, threads=threads,
                          options=parse_model_options(getattr(args, "model_option", [])))
    try:
        return sc, Parareal(sc, predictor.coarse_model(), predictor.fine)
    except UnsupportedScene:
        predictor.close()
        raise


def case_unit(context: dict, unit) -> dict:
    """The study unit of ``bench convergence``: one Fig. 5 case (``fig5``) or the random pushes of one horizon
    (``random``, N = ``unit["n"]``; the seed's generator advanced past the shorter horizons' pushes first, as one
    run draws them); ``{"skipped": why}`` where the coarse model refuses the scene."""
    args = context["args"]
    scene_name = FIG5_CASES[unit["case"]][0] if unit["kind"] == "fig5" else args.random_scene
    try:
        sc, solver = _solver(scene_name, args, unit.cpus)
    except UnsupportedScene as e:
        return {"skipped": str(e), "scene": scene_name}
    try:
        if unit["kind"] == "fig5":
            x0 = sc.initial_state()
            x0[1] = FIG5_CASES[unit["case"]][1]
            U = np.array([[0.025, 0.0]] * 4)
            return {"rms_mm": errors_per_iteration(solver, x0[None], U[None], 1.0)[:, 0].tolist()}
        rng = np.random.default_rng(args.seed)
        for n in args.actions[:args.actions.index(unit["n"])]:
            random_pushes(sc, args.pushes, n, rng)
        x0, U = random_pushes(sc, args.pushes, unit["n"], rng)
        err = errors_per_iteration(solver, x0, U, 1.0)
        return {"pushes": args.pushes, "mean_rms_mm": err.mean(axis=1).tolist(),
                "median_rms_mm": np.median(err, axis=1).tolist()}
    finally:
        solver.fine.close()


def run(args) -> dict:
    if len(set(args.actions)) != len(args.actions):
        raise ValueError(f"--actions: each horizon once, got {args.actions}")
    path, out = output_paths(args, "convergence")
    res = {"seed": args.seed, "coarse_model": args.coarse, "fine_model": args.fine, "slice_s": 1.0, "fig5": {},
           "random": {}}
    study = Study(out / "convergence_study", "bench convergence", study_settings(args))
    units = [Unit.of(kind="fig5", case=name) for name in FIG5_CASES]
    units += [Unit.of(kind="random", n=n) for n in args.actions]
    done = study.run(units, case_unit, {"args": _plain(args)}, args, desc="bench convergence cases")
    for u in units:
        r = done[u.id]
        if "skipped" in r:
            res.setdefault("skipped", {})[r["scene"]] = r["skipped"]
            continue
        if u["kind"] == "fig5":
            res["fig5"][u["case"]] = r
        else:
            res["random"][f"N{u['n']}"] = r
    for scene_name, why in res.get("skipped", {}).items():
        print(f"bench convergence: skipping scene {scene_name}: {why}", flush=True)
    print_table(["case"] + [f"k={k}" for k in range(5)],
                [(n, *v["rms_mm"]) for n, v in res["fig5"].items()],
                title="bench convergence: paper 000 Fig. 5 cases, trajectory RMS error (mm)")
    res["random_scene"] = args.random_scene
    rows = [(f"random {k[0]}={k[1:]}", *[f"{v:.2f}" for v in r["mean_rms_mm"]]) for k, r in res["random"].items()]
    rows.append(("authors N=4 (analytical)", *AUTHORS_ANALYTICAL_N4))
    n4 = res["random"].get("N4", {}).get("mean_rms_mm")
    if n4:
        res["beats_authors_N4"] = bool(all(n4[k] < AUTHORS_ANALYTICAL_N4[k] for k in (1, 2, 3)))
    width = max(args.actions) + 1
    print_table(["case"] + [f"k={k}" for k in range(width)], [r + ("",) * (width + 1 - len(r)) for r in rows],
                title=f"bench convergence: random pushes ({args.random_scene}), mean trajectory RMS error (mm), "
                      f"{args.pushes} pushes")
    res["study"] = str(study.root)
    write_json(path, res)
    _plot(res, out / "convergence.png")
    return res


def _plot(res, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    floor = 1e-4  # exact zeros at k = N cannot be drawn on a log axis
    for name, v in res["fig5"].items():
        e = np.maximum(v["rms_mm"], floor)
        axes[0].semilogy(range(len(e)), e, "o-", label=name)
    axes[0].set_title("Fig. 5 cases (4 x 25 mm/s, 1 s)")
    for name, v in res["random"].items():
        e = np.maximum(v["mean_rms_mm"], floor)
        axes[1].semilogy(range(len(e)), e, "o-", label=f"parapush, {name}")
    axes[1].semilogy(range(5), np.maximum(AUTHORS_ANALYTICAL_N4, floor), "k--", label="authors' code, N4")
    axes[1].set_title("random single-cylinder pushes (mean)")
    for ax in axes:
        convergence_axes(ax)
    save_figure(fig, path)


def add_parser(sub, parent):
    p = sub.add_parser("convergence", parents=[parent], help="Parareal convergence (paper 000 Fig. 5)")
    p.add_argument("--pushes", type=positive_int, default=20, help="random pushes per horizon")
    p.add_argument("--actions", type=positive_int, nargs="+", default=[4, 8], help="horizons N of the random pushes")
    p.add_argument("--random-scene", default="cylinder_slider",
                   help="scene of the random pushes (box_slider for a coarse model of boxes only)")
    add_model_arguments(p)
    add_model_option_argument(p)
    add_arguments(p, "cases")
    p.set_defaults(func=run)
    return p
