"""``parapush synth-pushes``, ``parapush split-pushes``, ``parapush replay`` and ``parapush calibrate``: parapush's
models against recorded pushes (core/fidelity/)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml

from ..arguments import fraction, nonnegative_float, output_dir, output_file, positive_float, positive_int
from ..core.config import ConfigError
from ..core.models.registry import DEFAULT_COARSE, coarse_choices
from ..core.scene.spec import load_scene


def scene_with_overrides(scene_arg: str, overrides) -> object:
    """Load a scene and apply ``key.path=value`` overrides (YAML values) to its dict; validated like a file."""
    scene = load_scene(scene_arg)
    if not overrides:
        return scene

    def edit(data):
        for item in overrides:
            if "=" not in item:
                raise ValueError(f"--set: {item!r} is not of the form key.path=value (e.g. friction.object_table=0.8)")
            key, value = item.split("=", 1)
            node = data
            parts = key.strip().split(".")
            for p in parts[:-1]:
                node = node.setdefault(p, {})
                if not isinstance(node, dict):
                    raise ValueError(f"--set: {key!r}: {p!r} is not a mapping in the scene")
            node[parts[-1]] = yaml.safe_load(value)
    return scene.revalidated(f"{scene.source} with {', '.join(overrides)}", edit)


# ------------------------------------------------------------------------------------------------ synth-pushes
def run_synth(args) -> None:
    from ..core.fidelity.recordings import write_csv  # noqa: PLC0415
    from ..core.fidelity.synthetic import random_push_plans, simulate  # noqa: PLC0415
    scene = scene_with_overrides(args.scene, args.set)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plans = random_push_plans(scene, args.count, args.seed, slide_share=args.slide_share)
    from tqdm import tqdm  # noqa: PLC0415
    for i, plan in enumerate(tqdm(plans, desc="simulating pushes", unit="push", file=sys.stderr)):
        rec = simulate(scene, plan, f"push_{i:03d}", rate=args.rate, position_noise=args.noise_mm * 1e-3,
                       yaw_noise=np.radians(args.noise_deg), seed=args.seed * 100003 + i)
        write_csv(out / f"push_{i:03d}.csv", scene, rec)
    (out / "world.yaml").write_text(yaml.safe_dump(scene.to_dict(), sort_keys=False))
    print(f"wrote {len(plans)} recordings and the world they were made in (world.yaml) to {out}")


# ------------------------------------------------------------------------------------------------ split-pushes
def run_split(args) -> dict:
    """Each session recording cut into pushes (``core.fidelity.recordings.split_pushes``), written as one CSV per
    push, with a table, JSON and a timeline plot per session that shows where it was cut and why."""
    from .bench.common import print_table, pyplot, save_figure, write_json  # noqa: PLC0415
    from ..core.fidelity.recordings import (UNPUSHED_REACH, MocapTopics, expand_paths, pusher_distance,  # noqa: PLC0415
                                            read_session, write_csv)
    scene = scene_with_overrides(args.scene, args.set)
    topics = MocapTopics.from_config(args.mocap_config) if args.mocap_config else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, sessions, plt = [], [], pyplot()
    paths = expand_paths(args.recordings)
    stems = [p.stem for p in paths]
    twice = sorted({st for st in stems if stems.count(st) > 1})
    if twice:  # their pushes and plots would overwrite each other's files in --out
        raise ValueError(f"--recordings: several recordings named {', '.join(twice)} "
                         f"({', '.join(str(p) for p in paths if p.stem in twice)}): split them into different --out "
                         f"directories or rename them")
    for path in paths:
        session = read_session(path, scene, topics)
        if session.note:
            print(f"warning: {session.note}", file=sys.stderr)
        t0 = session.start
        entry = {"recording": str(path), "pushes": [], "breaks": [list(b) for b in session.breaks],
                 "left_out": [list(b) for b in session.left_out]}
        for push in session.pushes:
            file = out / f"{push.name}.csv"
            write_csv(file, scene, push)
            moved = {o.name: 1e3 * float(np.linalg.norm(push.objects[-1, i, :2] - push.objects[0, i, :2]))
                     for i, o in enumerate(scene.objects)}
            entry["pushes"].append({"file": str(file), "start_s": push.times[0] - t0, "end_s": push.times[-1] - t0,
                                    "duration_s": push.duration, "moved_mm": moved})
            rows.append([file.name, push.times[0] - t0, push.times[-1] - t0, push.duration,
                         ", ".join(f"{k} {v:.0f}" for k, v in moved.items())])
        for a, b, why in session.breaks + session.left_out:
            print(f"{path.name}: {a:.2f}-{b:.2f} s not written as a push: {why}")
        sessions.append(entry)
        rec = session.recording
        fig, ax = plt.subplots(figsize=(10, 3.5))
        t, distance = rec.times - t0, 1e3 * pusher_distance(rec, scene)
        for i, o in enumerate(scene.objects):
            ax.plot(t, distance[:, i], lw=1, label=f"pusher to {o.name}'s bounding circle (mm)")
        ax.axhline(1e3 * UNPUSHED_REACH, color="0.5", ls=":", lw=1, label="near (a push)")
        for k, push in enumerate(session.pushes):
            ax.axvspan(push.times[0] - t0, push.times[-1] - t0, color="tab:green", alpha=0.2,
                       label="push (written)" if k == 0 else None)
        for k, (a, b, _) in enumerate(session.breaks):
            ax.axvspan(a, b, color="tab:red", alpha=0.15, label="not a push (hand, dropout)" if k == 0 else None)
        ax.set_ylim(min(-20.0, distance.min() - 5.0), 300)  # far off: clipped
        ax.set_xlabel("time since the first sample (s)")
        ax.set_title(f"{path.name}: {len(session.pushes)} push(es)")
        ax.legend(fontsize=7, loc="upper right")
        save_figure(fig, out / f"split_{path.stem}.png")
    print_table(["push", "start s", "end s", "duration s", "object moved mm"], rows,
                title=f"split-pushes: {len(rows)} push(es) of scene {scene.name!r} written to {out}")
    payload = {"scene": scene.name, "sessions": sessions}
    write_json(out / "split_pushes.json", payload)
    return payload


# ------------------------------------------------------------------------------------------------------ replay
def run_replay(args) -> dict:
    from .bench.common import output_paths, print_table, pyplot, save_figure, write_json  # noqa: PLC0415
    from ..core.fidelity.recordings import MocapTopics  # noqa: PLC0415
    from ..core.fidelity.replay import NO_MOTION, no_motion_states, pose_errors, prepare, replay, summarise  # noqa: PLC0415
    from ..core.models.registry import ModelSpec, Predictor, parse_model_options  # noqa: PLC0415
    scene = scene_with_overrides(args.scene, args.set)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    try:
        for m in models:
            ModelSpec.parse(m, coarse=args.coarse)  # a bad name fails before any work
    except ValueError as e:
        raise ValueError(f"--models/--coarse: {e}") from None
    options = parse_model_options(args.model_option)
    if not args.slice > 0:
        raise ValueError(f"--slice: must be > 0, got {args.slice}")
    topics = MocapTopics.from_config(args.mocap_config) if args.mocap_config else None
    recordings = _read_all(args.recordings, scene, topics)
    cases = [prepare(scene, r, args.slice) for r in recordings]
    for c in cases:
        if c.start_warning:
            print(f"warning: {c.start_warning}", file=sys.stderr)
    predictor = Predictor(scene, coarse=args.coarse, options=options)
    from tqdm import tqdm  # noqa: PLC0415
    with tqdm(total=len(cases) * len(models), desc="replaying", unit="run", file=sys.stderr) as bar:
        results = replay(predictor, scene, cases, models, on_done=bar.update)
    predictor.close()
    if predictor.auto_reason:
        print(f"coarse_model auto: {predictor.default_coarse} ({predictor.auto_reason})", file=sys.stderr)
    models = [*models, NO_MOTION]  # the baseline a model must beat: the objects stay where they start
    results[NO_MOTION] = [{**pose_errors(scene.layout, c, no_motion_states(c)), "states": no_motion_states(c)}
                          for c in cases]
    summary = {m: summarise(results[m]) for m in models}
    per_recording = [{"name": c.recording.name, "slices": len(c.controls), "duration_s": c.recording.duration,
                      "start_warning": c.start_warning,
                      **{m: {k: v for k, v in results[m][i].items() if k != "states"} for m in models}}
                     for i, c in enumerate(cases)]
    rows = [[m] + [f"{summary[m][k]['mean']:.2f} / {summary[m][k]['median']:.2f} / {summary[m][k]['max']:.2f}"
                   for k in ("final_trans_mm", "final_rot_deg", "path_trans_mm", "path_rot_deg")] for m in models]
    print_table(["model", "final mm (mean/median/max)", "final deg", "path mm", "path deg"], rows,
                title=f"replay: {len(cases)} recording(s) of scene {scene.name!r}, {args.slice} s slices")
    payload = {"scene": scene.name, "slice_s": args.slice, "models": summary, "recordings": per_recording}
    args.out = args.out or "out"
    path, out = output_paths(args, "replay")
    write_json(path, payload)
    plt = pyplot()
    L = scene.layout
    for i, c in enumerate(cases):
        fig, ax = plt.subplots(figsize=(5, 5))
        rec = c.recording
        ax.plot(rec.pusher[:, 0] * 1e3, rec.pusher[:, 1] * 1e3, color="0.6", lw=1, label="pusher (recorded)")
        for j, o in enumerate(scene.objects):
            ax.plot(rec.objects[:, j, 0] * 1e3, rec.objects[:, j, 1] * 1e3, "k-", lw=2,
                    label=f"{o.name} (recorded)" if j == 0 else None)
            for m in models:
                poses = L.object_poses(results[m][i]["states"])
                ax.plot(poses[:, j, 0] * 1e3, poses[:, j, 1] * 1e3, "o-", ms=3, label=m if j == 0 else None)
        ax.set_aspect("equal")
        ax.set_xlabel("x (mm)")
        ax.set_ylabel("y (mm)")
        ax.set_title(rec.name)
        ax.legend(fontsize=7)
        save_figure(fig, out / f"replay_{rec.name.replace('/', '_')}.png")
    return payload


# --------------------------------------------------------------------------------------------------- calibrate
def run_calibrate(args) -> dict:
    from .bench.common import print_table, write_json  # noqa: PLC0415
    from ..core.fidelity import calibrate as cal  # noqa: PLC0415
    from ..core.fidelity.recordings import MocapTopics  # noqa: PLC0415
    from ..core.fidelity.replay import prepare, summarise  # noqa: PLC0415
    scene = scene_with_overrides(args.scene, args.set)
    names = cal.check_names(scene, [n.strip() for n in args.fit.split(",") if n.strip()])
    if not args.control > 0:
        raise ValueError(f"--control: must be > 0, got {args.control}")
    topics = MocapTopics.from_config(args.mocap_config) if args.mocap_config else None
    recordings = _read_all(args.recordings, scene, topics)
    train, held = cal.split(recordings, args.holdout, args.seed)
    train_cases = [prepare(scene, r, args.control, invert_servo=True) for r in train]
    print(f"calibrate: fitting {', '.join(names)} of scene {scene.name!r} on {len(train)} recording(s), "
          f"{len(held)} held out; the physics run continuously, the pusher commanded every {args.control} s",
          file=sys.stderr)
    from tqdm import tqdm  # noqa: PLC0415
    bar = tqdm(total=args.max_evaluations, desc="fitting", unit="eval", file=sys.stderr)

    def progress(n, rms, values):
        bar.update(1)
        bar.set_postfix_str(f"rms {rms:.3f} mm, " + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))
    try:
        result = cal.fit(scene, train_cases, names, args.max_evaluations, on_evaluation=progress)
    except ConfigError as e:  # the budget, named as the option
        raise ValueError(f"--max-evaluations: {str(e).partition(': ')[2]}") from None
    bar.close()
    fitted = cal.scene_with(scene, names, result.values)

    def held_out(s):  # the replay error (sliced fine model, as `parapush replay`) on the held-out pushes
        if not held:
            return None
        return summarise(cal.replay_errors(s, [prepare(s, r, args.slice) for r in held]))
    before, after = held_out(scene), held_out(fitted)
    rows = [[n, f"{s0:.4g}", f"{v:.4g}", f"{sd:.2g}", f"{100 * sd / v:.1f} %"]
            for n, s0, v, sd in zip(names, result.start, result.values, result.sigma)]
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print_table(["parameter", "start", "fitted", "std error", "relative"], rows,
                title=f"calibrate: {result.evaluations} evaluations, training residual RMS {result.rms_start:.3f} -> "
                      f"{result.rms:.3f} mm (1 deg counted as {cal.YAW_WEIGHT_MM_PER_DEG} mm)")
    if held:
        print_table(["held-out fine replay", "final mm", "final deg", "path mm", "path deg"],
                    [[label] + [f"{e[k]['mean']:.2f}" for k in ("final_trans_mm", "final_rot_deg", "path_trans_mm",
                                                                "path_rot_deg")]
                     for label, e in (("scene as given", before), ("fitted", after))],
                    title=f"held-out: {len(held)} recording(s), {args.slice} s slices (mean)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# {fitted.name}: calibrated by `parapush calibrate` on {len(train)} recording(s) "
              f"({', '.join(r.name for r in train)}); fitted "
              + ", ".join(f"{n} = {v:.4g} +- {sd:.2g}" for n, v, sd in zip(names, result.values, result.sigma))
              + (f"; held-out final error {after['final_trans_mm']['mean']:.2f} mm / "
                 f"{after['final_rot_deg']['mean']:.2f} deg (was {before['final_trans_mm']['mean']:.2f} / "
                 f"{before['final_rot_deg']['mean']:.2f})" if held else "") + "\n")
    data = fitted.to_dict()
    out.write_text(header + yaml.safe_dump(data, sort_keys=False))
    print(f"wrote {out}")
    payload = {"scene": scene.name, "fit": names, "start": dict(zip(names, result.start)),
               "fitted": dict(zip(names, result.values)), "std_error": dict(zip(names, result.sigma)),
               "training": {"recordings": [r.name for r in train], "rms_start_mm": result.rms_start,
                            "rms_mm": result.rms, "evaluations": result.evaluations},
               "warnings": result.warnings,
               "held_out": {"recordings": [r.name for r in held], "before": before, "after": after},
               "scene_out": str(out)}
    if args.json:
        write_json(Path(args.json), payload)
    return payload


def add_parser(sub) -> None:
    p = sub.add_parser("synth-pushes", help="simulate random pushes (optionally in a perturbed world) and write "
                                            "them as CSV recordings")
    p.add_argument("--scene", default="box_slider", help="scene name or file of the pushed object (default box_slider)")
    p.add_argument("--count", type=positive_int, default=13, help="pushes to simulate (default 13)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pushes and of the mocap noise")
    p.add_argument("--rate", type=positive_float, default=100.0, help="samples per second (default 100)")
    p.add_argument("--noise-mm", type=nonnegative_float, default=0.1,
                   help="mocap position noise, 1 sigma (default 0.1 mm)")
    p.add_argument("--noise-deg", type=nonnegative_float, default=0.1,
                   help="mocap yaw noise, 1 sigma (default 0.1 deg)")
    p.add_argument("--slide-share", type=fraction, default=0.5,
                   help="share of pushes that end with a fast stroke and a free slide (default 0.5)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="scene override, e.g. --set friction.object_table=0.8 --set support.spread=0.9")
    p.add_argument("--out", type=output_dir, required=True, help="directory for the CSV files")
    p.set_defaults(func=run_synth)

    recorded = argparse.ArgumentParser(add_help=False)  # what replay and calibrate read: a scene and recordings
    recorded.add_argument("--scene", required=True)
    recorded.add_argument("--recordings", nargs="+", required=True, help="CSV or MCAP files, or directories of them")
    recorded.add_argument("--mocap-config", default=None,
                          help="mocap_ingest YAML for MCAP bags, used instead of what each bag says it was recorded "
                               "with (default: the bag's own mocap_ingest parameters, which parapush's recorder "
                               "stores; for a bag without them the shipped config/mocap_ingest.yaml)")
    recorded.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scene override")

    p = sub.add_parser("split-pushes", parents=[recorded],
                       help="cut session recordings (several pushes, objects set back by hand between them) into one "
                            "CSV recording per push, for replay and calibrate; a table, JSON and a timeline plot")
    p.add_argument("--out", type=output_dir, required=True, help="directory for the CSV files and the plots")
    p.set_defaults(func=run_split)

    p = sub.add_parser("replay", parents=[recorded], help="replay recorded pushes through the models; errors along "
                                                          "the path and at the end (JSON, table, a plot per push)")
    p.add_argument("--slice", type=positive_float, default=0.25, help="slice duration (s, default 0.25)")
    p.add_argument("--models", default="fine,parareal2,coarse",
                   help="models (default fine,parareal2,coarse); the no-motion baseline (objects stay at their "
                        "start) is always reported too, as 'no_motion'")
    p.add_argument("--coarse", default=DEFAULT_COARSE,
                   help=f"coarse model of 'coarse' and inside Parareal (default {DEFAULT_COARSE}; "
                        f"{' | '.join(coarse_choices())})")
    from .bench.common import add_model_option_argument  # noqa: PLC0415
    add_model_option_argument(p)
    p.add_argument("--out", type=output_dir, default="out", help="directory for the plots (default ./out)")
    p.add_argument("--json", type=output_file, default=None, help="JSON result file (default <out>/bench_replay.json)")
    p.set_defaults(func=run_replay)

    p = sub.add_parser("calibrate", parents=[recorded], help="fit the fine model's friction and support (optionally "
                                                             "mass) to recorded pushes; writes a scene file with the "
                                                             "fitted values")
    p.add_argument("--out", type=output_file, required=True, help="the scene file to write (YAML)")
    p.add_argument("--fit", default="pusher_object,spread",
                   help="parameters (default pusher_object,spread; also object_table, seen only in free slides "
                        "after fast strokes, and mass, which recordings do not constrain: see "
                        "core/fidelity/calibrate.py)")
    p.add_argument("--holdout", type=float, default=0.3, help="share of recordings held out (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the held-out split")
    p.add_argument("--control", type=positive_float, default=0.01,
                   help="control period of the continuous fit rollouts (s, default 0.01; the pusher's commands are "
                        "rebuilt from its recorded path at this period)")
    p.add_argument("--slice", type=positive_float, default=0.25,
                   help="slice of the held-out replay (s, default 0.25)")
    p.add_argument("--max-evaluations", type=positive_int, default=40,
                   help="fine-model evaluations of the training pushes at most, the finite-difference Jacobian's "
                        "included (default 40; at least 2 x the --fit parameters + 3)")
    p.add_argument("--json", type=output_file, default=None, help="also write the result as JSON")
    p.set_defaults(func=run_calibrate)


def _read_all(paths, scene, topics) -> list:
    """The recordings of ``--recordings``; what a reader should know about one (a bag that was not closed) is said
    on stderr."""
    from ..core.fidelity.recordings import read_recordings  # noqa: PLC0415
    recordings = read_recordings(paths, scene, topics)
    for r in recordings:
        if r.note:
            print(f"warning: {r.note}", file=sys.stderr)
    return recordings
