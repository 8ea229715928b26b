"""``parapush bench calibrate``: fit the analytical model's K_omega to the fine model for a scene's shape.

K_omega scales the turning rate of a pushed slider. What matters for Parareal is not the coarse model's own
error but how well it transports corrections, so the criterion is the final slider error after ONE Parareal
iteration (mm + deg) on random multi-slice pushes (``bench convergence``'s generator, not the Table 1 states).
The defaults in ``core/models/analytical.py`` came from this command with its default arguments.
"""
from __future__ import annotations

import sys

import numpy as np

from ...core.models.analytical import AnalyticalCoarseModel
from ...core.models.base import rollout
from ...core.models.fine import FineModel
from ...core.models.parareal import Parareal
from ...core.scene.spec import load_scene
from ...core.scene.state import wrap_angle
from .common import output_paths, print_table, write_json
from .convergence import random_pushes


def run(args) -> dict:
    scene = load_scene(args.scene)
    rng = np.random.default_rng(args.seed)
    x0, U = random_pushes(scene, args.pushes, args.actions, rng)
    fine = FineModel(scene)
    ref = rollout(fine, x0, U, args.dt)[:, -1]
    grid = np.round(np.arange(0.1, 1.01, 0.075), 3)
    rows, scores = [], []
    from tqdm import tqdm  # noqa: PLC0415
    progress = tqdm(total=len(grid), desc="calibrate", unit="K_omega", file=sys.stderr)
    for k in grid:
        coarse = AnalyticalCoarseModel(scene, k_omega=float(k))
        c_end = rollout(coarse, x0[0], U[0], args.dt)  # warm the caches; cheap
        del c_end
        final = Parareal(scene, coarse, fine).solve(x0, U, args.dt, max_iterations=1).states[:, -1]
        pos = np.linalg.norm(final[:, 2:4] - ref[:, 2:4], axis=-1).mean() * 1e3
        yaw = np.degrees(np.abs(wrap_angle(final[:, 4] - ref[:, 4]))).mean()
        scores.append(pos + yaw)
        rows.append((float(k), pos, yaw, pos + yaw))
        progress.update()
    progress.close()
    fine.close()
    best = float(grid[int(np.argmin(scores))])
    print_table(["K_omega", "P1 pos err mm", "P1 yaw err deg", "score"], rows,
                title=f"bench calibrate: {scene.name}, {args.pushes} random pushes of {args.actions} x {args.dt} s")
    print(f"best K_omega for {scene.objects[0].shape}: {best:.3f}")
    res = {"scene": scene.name, "shape": scene.objects[0].shape, "best_k_omega": best, "seed": args.seed,
           "grid": [{"k_omega": r[0], "p1_pos_mm": r[1], "p1_yaw_deg": r[2], "score": r[3]} for r in rows]}
    path, _ = output_paths(args, f"calibrate_{scene.name}")
    write_json(path, res)
    return res


def add_parser(sub, parent):
    p = sub.add_parser("calibrate", parents=[parent], help="fit the analytical model's K_omega to MuJoCo")
    p.add_argument("--scene", default="cylinder_slider")
    p.add_argument("--pushes", type=int, default=20)
    p.add_argument("--actions", type=int, default=4)
    p.add_argument("--dt", type=float, default=1.0)
    p.set_defaults(func=run)
    return p
