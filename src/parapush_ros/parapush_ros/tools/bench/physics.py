"""``parapush bench physics``: cost of the fine and coarse models, and how well batches use the cores."""
from __future__ import annotations


import mujoco
import numpy as np

from ...arguments import nonnegative_int, positive_int
from ...core.models.analytical import AnalyticalCoarseModel
from ...core.models.fine import FineModel, default_threads
from ...core.scene.spec import load_scene
from .common import median_time, output_paths, print_table, write_json

GOALS = {"batch_vs_raw_per_core": 0.8, "cost_ratio": 1.0 / 500.0}


def contact_slices(scene, batch: int, seed: int = 0):
    """Contact-rich slices: the pusher starts touching the first object at random offsets and pushes it."""
    rng = np.random.default_rng(seed)
    L = scene.layout
    x = np.repeat(scene.initial_state()[None], batch, 0)
    L.pusher_pos(x)[:, 1] += rng.uniform(-0.02, 0.02, batch)
    ang = rng.uniform(-0.3, 0.3, batch)
    u = 0.025 * np.stack([np.cos(ang), np.sin(ang)], -1)
    return x, u


def run(args) -> dict:
    scene = load_scene(args.scene)
    threads = args.threads or default_threads()
    dt = 1.0
    nstep = int(round(dt / 0.001))
    x, u = contact_slices(scene, args.batch, args.seed)

    serial = FineModel(scene, threads=1)
    fine_slice_s = median_time(lambda: serial.propagate(x[:1], u[:1], dt), args.repeats)

    # raw MuJoCo: the same slice as a plain native mj_step loop, one thread, no parapush code around it
    m, d = serial.model, mujoco.MjData(serial.model)

    def raw():
        mujoco.mj_resetData(m, d)
        serial.mapping.to_mujoco(x[0], d.qpos, d.qvel, d.act)
        d.ctrl[:] = u[0]
        mujoco.mj_step(m, d, nstep=nstep)
    raw_s = median_time(raw, args.repeats)

    pooled = FineModel(scene, threads=threads)
    batch_s = median_time(lambda: pooled.propagate(x, u, dt), max(3, args.repeats // 4))
    batch_steps_per_core = args.batch * nstep / batch_s / threads

    # alternative backend, measured for the record: MuJoCo's native rollout thread pool
    rollout_steps_per_core = _rollout_throughput(serial, x, u, nstep, threads, max(3, args.repeats // 4))

    coarse = AnalyticalCoarseModel(scene)
    big = max(1000, args.batch)
    xb, ub = np.resize(x, (big, x.shape[1])), np.resize(u, (big, 2))
    coarse_batch_s = median_time(lambda: coarse.propagate(xb, ub, dt), args.repeats)
    coarse_single_s = median_time(lambda: coarse.propagate(x[:1], u[:1], dt), args.repeats)
    coarse_slice_s = coarse_batch_s / big

    res = {
        "scene": scene.name, "threads": threads, "batch": args.batch, "slice_duration_s": dt,
        "fine_slice_s": fine_slice_s,
        "raw_steps_per_s_per_core": nstep / raw_s,
        "fine_batch_steps_per_s_per_core": batch_steps_per_core,
        "rollout_batch_steps_per_s_per_core": rollout_steps_per_core,
        "batch_vs_raw_per_core": batch_steps_per_core / (nstep / raw_s),
        "coarse_slice_s": coarse_slice_s,
        "coarse_single_call_s": coarse_single_s,
        "cost_ratio": coarse_slice_s / fine_slice_s,
        "cost_ratio_single_call": coarse_single_s / fine_slice_s,
        "goals": GOALS,
    }
    res["goals_met"] = {"batch_vs_raw_per_core": res["batch_vs_raw_per_core"] >= GOALS["batch_vs_raw_per_core"],
                        "cost_ratio": res["cost_ratio"] <= GOALS["cost_ratio"]}
    print_table(["quantity", "value", "goal"], [
        ("fine slice (1 s, 1 thread) [s]", fine_slice_s, ""),
        ("raw mj_step [steps/s/core]", res["raw_steps_per_s_per_core"], ""),
        (f"fine batch of {args.batch}, {threads} threads [steps/s/core]", batch_steps_per_core, ""),
        ("  ... / raw", res["batch_vs_raw_per_core"], f">= {GOALS['batch_vs_raw_per_core']}"),
        (f"mujoco.rollout batch, {threads} threads [steps/s/core]", rollout_steps_per_core, "(for comparison)"),
        (f"coarse slice, batch of {big} [s]", coarse_slice_s, ""),
        ("coarse slice, single call [s]", coarse_single_s, ""),
        ("cost ratio coarse/fine (batched)", res["cost_ratio"], f"<= 1/{int(1 / GOALS['cost_ratio'])}"),
        ("cost ratio coarse/fine (single call)", res["cost_ratio_single_call"], ""),
    ], title=f"bench physics: scene {scene.name}, {res['threads']} threads")
    pooled.close()
    path, _ = output_paths(args, "physics")
    write_json(path, res)
    return res


def _rollout_throughput(fm: FineModel, x, u, nstep: int, threads: int, repeats: int) -> float:
    from mujoco import rollout  # noqa: PLC0415
    m = fm.model
    datas = [mujoco.MjData(m) for _ in range(threads)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((len(x), mujoco.mj_stateSize(m, spec)))
    d = datas[0]
    for i in range(len(x)):
        mujoco.mj_resetData(m, d)
        fm.mapping.to_mujoco(x[i], d.qpos, d.qvel, d.act)
        mujoco.mj_getState(m, d, init[i], spec)
    control = np.repeat(u[:, None, :], nstep, axis=1)
    with rollout.Rollout(nthread=threads) as r:
        def go():
            r.rollout(m, datas, init, control)
        t = median_time(go, repeats)
    return len(x) * nstep / t / threads


def add_parser(sub, parent):
    p = sub.add_parser("physics", parents=[parent], help="fine/coarse model cost and parallel throughput")
    p.add_argument("--scene", default="cylinder_slider")
    p.add_argument("--batch", type=positive_int, default=16, help="slices per batched fine call")
    p.add_argument("--threads", type=nonnegative_int, default=0, help="0 = all cores")
    p.add_argument("--repeats", type=positive_int, default=20)
    p.set_defaults(func=run)
    return p
