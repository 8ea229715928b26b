"""``parapush demos``: make the demonstration library of a scene for DG-OC (paper 003).

The shipped libraries (``config/demonstrations/<scene>/``) come from exactly this command with its defaults::

    parapush demos --scene block_003
    parapush demos --scene box_slider

``parapush demos record`` records a new one from ``scene_state`` while a person drives the pusher (``demo_record.py``).

Each is a set of pushes by the scripted demonstrator (``core/planning/ddp/scripted.py``) on the quasi-static model
of the scene's box, spread over the task space, with 0, 1 and 2 face switches among them.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from ..arguments import int_at_least, output_dir
from ..core.models.quasistatic import QuasiStaticPusherSlider
from ..core.planning.ddp.dgoc import HORIZON_S, PLAN_DT
from ..core.planning.ddp.scripted import make_library
from ..core.scene.spec import load_scene


def run(args) -> None:
    if args.count < 3:
        raise ValueError(f"--count: must be >= 3 (one push of each switch count), got {args.count}")
    scene = load_scene(args.scene)
    model = QuasiStaticPusherSlider.from_scene(scene, dt=PLAN_DT)
    out = Path(args.out) if args.out else Path("config") / "demonstrations" / scene.name
    command = " ".join(["parapush"] + (sys.argv[1:] if sys.argv[1:2] == ["demos"] else ["demos", "--scene",
                                                                                          scene.name]))
    print(f"demos: {args.candidates} scripted pushes of {HORIZON_S} s on the quasi-static model of "
          f"{scene.name!r}, keeping {args.count} ...", flush=True)
    demos = make_library(model, args.count, int(round(HORIZON_S / PLAN_DT)), seed=args.seed,
                         candidates=args.candidates, scene=scene.name, command=command)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for d in demos:
        d.save(out / f"{d.name}.json")
        x, y, th = d.final_pose
        print(f"  {d.name}: {d.face_switches} switch(es), ends at x {x:+.3f} m, y {y:+.3f} m, yaw "
              f"{np.degrees(th):+.0f} deg")
    print(f"wrote {len(demos)} demonstrations to {out}")


def add_parser(sub):
    p = sub.add_parser("demos", help="make a scene's demonstration library for DG-OC (paper 003), or record one "
                                     "(demos record)", description=__doc__.split("\n\n")[0])
    p.add_argument("--scene", default="block_003", help="scene with a box slider (default block_003)")
    p.add_argument("--count", type=int_at_least(3), default=10,
                   help="demonstrations to keep, at least 3 (one push of each switch count; default 10)")
    p.add_argument("--candidates", type=int, default=300, help="scripted pushes to choose from (default 300)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=output_dir, default=None,
                   help="directory (default config/demonstrations/<scene>; replaced)")
    p.set_defaults(func=run)
    from . import demo_record  # noqa: PLC0415 (rclpy is imported only when `demos record` runs)
    demo_record.add_parser(p.add_subparsers(dest="demos_command", metavar="{record}"))
    return p
