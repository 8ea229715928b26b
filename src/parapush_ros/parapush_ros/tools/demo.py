"""``parapush demo``: an open-loop push of a box and of a cylinder predicted by the coarse and the fine model (and
Parareal), with the final-pose differences printed and a PNG of the trajectories. (The main job, ``make demo``, is
the closed loop: ``parapush sim --push``.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..arguments import output_dir
from .bench.common import print_table, pyplot, save_figure
from ..core.models.registry import Predictor
from ..core.scene.spec import load_scene
from ..core.scene.state import wrap_angle


BATCH = 32  # candidates per planning batch (the fast planner's; the 1 Hz MPC's 12-16)


def run_open_loop(args) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    controls = np.array([[0.025, 0.0], [0.025, 0.005], [0.025, 0.01], [0.02, 0.01]])  # 4 x 1 s, curving left
    dt = 1.0
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    rows, summary = [], {}
    for ax, scene_name in zip(axes, ("box_slider", "cylinder_slider")):
        scene = load_scene(scene_name)
        x0 = scene.initial_state()
        x0[1] = 0.02  # push off-centre so the slider turns
        pred = Predictor(scene)
        models = ("coarse", "parareal1", "parareal2", "fine")
        for m in models:  # each model is built on its first use: time the second call, not the build
            pred.predict(x0, controls[:1], dt, model=m)
        results = {m: pred.predict(x0, controls, dt, model=m) for m in models}
        # the planners predict batches of candidates: the coarse models are NumPy over the batch (one trajectory
        # costs about what 32 do), the fine model steps each one
        batch = {m: pred.predict(np.repeat(x0[None], BATCH, 0), np.repeat(controls[None], BATCH, 0), dt,
                                 model=m).wall_time for m in models}
        pred.close()
        ref = results["fine"].states
        for m, p in results.items():
            d_pos = np.linalg.norm(p.states[-1, 2:4] - ref[-1, 2:4]) * 1e3
            d_yaw = np.degrees(abs(wrap_angle(p.states[-1, 4] - ref[-1, 4])))
            rows.append((scene_name, m, d_pos, d_yaw, p.wall_time * 1e3, batch[m] * 1e3 / BATCH))
            summary[f"{scene_name}/{m}"] = {"final_pos_diff_mm": d_pos, "final_yaw_diff_deg": d_yaw}
        _draw(ax, scene, results)
    print_table(["scene", "model", "final pos diff to fine (mm)", "yaw diff (deg)", "wall ms",
                 f"ms each in a batch of {BATCH}"], rows,
                title="parapush demo: open-loop 4 s push, predictions vs the fine model (MuJoCo)")
    fig.suptitle("Open-loop push: coarse vs Parareal vs fine (MuJoCo)")
    save_figure(fig, out / "demo_open_loop.png")
    return summary


def _draw(ax, scene, results):
    from matplotlib.patches import Circle, Polygon  # noqa: PLC0415
    obj = scene.objects[0]
    styles = {"coarse": ("tab:orange", "--"), "parareal1": ("tab:green", ":"), "parareal2": ("tab:purple", "-."),
              "fine": ("tab:blue", "-")}
    for m, p in results.items():
        color, ls = styles[m]
        s = p.states
        ax.plot(s[:, 2], s[:, 3], ls, color=color, marker="o", ms=3, label=f"{m} slider")
        ax.plot(s[:, 0], s[:, 1], ls, color=color, alpha=0.4, lw=1)
        for st in (s[0], s[-1]):
            pose = st[2:5]
            if obj.shape != "cylinder":
                ax.add_patch(Polygon(obj.footprint.corners(pose), fill=False, ec=color, ls=ls))
            else:
                ax.add_patch(Circle(pose[:2], obj.radius, fill=False, ec=color, ls=ls))
        ax.add_patch(Circle(s[-1, 0:2], scene.pusher.radius, fc=color, alpha=0.3))
    ax.set_aspect("equal")
    ax.set_title(f"{scene.name}: slider (thick) and pusher (thin) paths")
    ax.set_xlabel("x (m, table frame)")
    ax.set_ylabel("y (m)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.autoscale_view()


def run(args):
    return run_open_loop(args)


def add_parser(sub):
    p = sub.add_parser("demo", help="one open-loop push of a box and a cylinder predicted by the coarse, Parareal "
                                    "and fine models (a PNG); the main job, make demo, is parapush sim --push")
    p.add_argument("--out", type=output_dir, default="out", help="directory for the PNG (default: ./out)")
    p.set_defaults(func=run)
    return p
