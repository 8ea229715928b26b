"""``parapush bench calibrate``: fit the analytical model's K_omega to the fine model for a scene's shape.

K_omega scales the turning rate of a pushed slider. What matters for Parareal is not the coarse model's own
error but how well it transports corrections, so the criterion is the final slider error after ONE Parareal
iteration (mm + deg) on random multi-slice pushes (``bench convergence``'s generator, not the Table 1 states).
The defaults in ``core/models/analytical.py`` came from this command with its default arguments. The fits are
units of the study engine (``parapush_ros.tools.study``): the fine reference first, then one Ray task per K_omega.
"""
from __future__ import annotations

import numpy as np

from ...arguments import positive_float, positive_int
from ...core.models.analytical import AnalyticalCoarseModel
from ...core.models.base import rollout
from ...core.models.fine import FineModel
from ...core.models.parareal import Parareal
from ...core.scene.spec import load_scene
from ...core.scene.state import wrap_angle
from ..study import Study, Unit, add_arguments
from .common import _plain, output_paths, print_table, study_settings, write_json
from .convergence import random_pushes


GRID = np.round(np.arange(0.1, 1.01, 0.075), 3)


def _pushes(args):
    scene = load_scene(args.scene)
    x0, U = random_pushes(scene, args.pushes, args.actions, np.random.default_rng(args.seed))
    return scene, x0, U


def fit_unit(context: dict, unit) -> dict:
    """The study units of ``bench calibrate``: ``reference``, the fine model's final states of the seed's random
    pushes; then one per grid value of K_omega, the final slider error after one Parareal iteration against them."""
    args = context["args"]
    scene, x0, U = _pushes(args)
    fine = FineModel(scene, threads=unit.cpus)
    try:
        if unit["fit"] == "reference":
            return {"final": rollout(fine, x0, U, args.dt)[:, -1].tolist()}
        ref = np.asarray(context["reference"])
        coarse = AnalyticalCoarseModel(scene, k_omega=float(unit["fit"]))
        final = Parareal(scene, coarse, fine).solve(x0, U, args.dt, max_iterations=1).states[:, -1]
        pos = np.linalg.norm(final[:, 2:4] - ref[:, 2:4], axis=-1).mean() * 1e3
        yaw = np.degrees(np.abs(wrap_angle(final[:, 4] - ref[:, 4]))).mean()
        return {"k_omega": float(unit["fit"]), "p1_pos_mm": float(pos), "p1_yaw_deg": float(yaw),
                "score": float(pos + yaw)}
    finally:
        fine.close()


def run(args) -> dict:
    scene = load_scene(args.scene)
    path, out = output_paths(args, f"calibrate_{scene.name}")
    study = Study(out / f"calibrate_{scene.name}_study", "bench calibrate", study_settings(args))
    reference = Unit.of(fit="reference")
    context = {"args": _plain(args)}
    context["reference"] = study.run([reference], fit_unit, context, args, desc="calibrate reference")[
        reference.id]["final"]
    units = [Unit.of(fit=float(k)) for k in GRID]
    done = study.run(units, fit_unit, context, args, desc="calibrate K_omega")
    grid = [done[u.id] for u in units]
    scores = [g["score"] for g in grid]
    best = float(GRID[int(np.argmin(scores))])
    print_table(["K_omega", "P1 pos err mm", "P1 yaw err deg", "score"],
                [(g["k_omega"], g["p1_pos_mm"], g["p1_yaw_deg"], g["score"]) for g in grid],
                title=f"bench calibrate: {scene.name}, {args.pushes} random pushes of {args.actions} x {args.dt} s")
    print(f"best K_omega for {scene.objects[0].shape}: {best:.3f}")
    res = {"scene": scene.name, "shape": scene.objects[0].shape, "best_k_omega": best, "seed": args.seed,
           "grid": grid, "study": str(study.root)}
    write_json(path, res)
    return res


def add_parser(sub, parent):
    p = sub.add_parser("calibrate", parents=[parent], help="fit the analytical model's K_omega to MuJoCo")
    p.add_argument("--scene", default="cylinder_slider")
    p.add_argument("--pushes", type=positive_int, default=20)
    p.add_argument("--actions", type=positive_int, default=4)
    p.add_argument("--dt", type=positive_float, default=1.0)
    add_arguments(p, "fits")
    p.set_defaults(func=run)
    return p
