"""``parapush train``: fit the learned coarse model (``core/models/learned/``) to ``parapush datagen`` datasets.

Several datasets of the same scene family train together (``--data A B``: e.g. a general set and a later one of
chain pushes); the report lists each one's command, seed, code version and counts.

Loss (paper 001 eq. 5): MSE of the normalised network outputs over all gated object rows, plus
W_F * sum of squared penetration depths of the predicted end positions, slider–slider and pusher–slider, per
sample. Depths are divided by the standard deviation of the position outputs so that both terms are in the same
(normalised) units, and only penetration beyond ``--penetration-slack`` (default 1 mm, the projection tolerance:
MuJoCo itself keeps ~0.7 mm in a resting contact, and the data shows it) is penalised.

Inputs: by default the network is blind to the objects' start velocities and its gate ignores them (see
``core/models/learned/model.py``, "Object velocities"); ``--object-velocities`` trains the first shipped encoding
instead.

Split: whole chunks go to validation (rollouts never straddle the split). Augmentation: every training sample is
also used mirrored about the x axis (the physics is symmetric). Optimiser: NAdam (lr 5e-4, batches of 512
samples, as the paper), learning rate halved when the validation loss stalls, early stopping, best epoch kept.
Outputs: the weights file, ``<weights>.json`` (metadata, exact command, data size and seeds, loss curves,
held-out errors, learned vs analytical on the held-out samples) and ``<weights>.png`` (loss curves).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from ...arguments import comma_list, output_file, positive_int, share
from ...core.models import learned as LM
from ...core.models.analytical import AnalyticalCoarseModel
from . import version_string
from .datagen import load_datasets

PAIRS = [(i, j) for i in range(LM.MAX_OBJECTS) for j in range(i + 1, LM.MAX_OBJECTS)]


def build_net(torch):
    nn = torch.nn
    sizes = [LM.F_IN, *LM.HIDDEN, LM.F_OUT]
    layers = []
    for k in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def prepare(chunks, family: dict, mirror_aug: bool, object_velocities: bool) -> dict:
    """Network rows plus what the penetration term needs, for a list of chunks (flattened, rows by sample)."""
    slice_s, lag = family["slice_s"], family["pusher_lag_s"]
    feats, ys, row_s, row_slot, cos, sin, base, present, pend, n_of = [], [], [], [], [], [], [], [], [], []
    offset = 0
    for ch in chunks:
        versions = [(ch["x"], ch["u"], ch["x_next"])]
        if mirror_aug:
            xm, um = LM.mirror(ch["x"], ch["u"])
            versions.append((xm, um, LM.mirror(ch["x_next"], ch["u"])[0]))
        for x, u, x1 in versions:
            n = (x.shape[1] - 4) // 6
            S = len(x)
            mask = LM.gate(x, u, slice_s, family["pusher_radius"], family["object_radius"],
                           object_velocities=object_velocities)
            rows = LM.encode(x, u, mask, object_velocities)
            feats.append(rows.features.astype(np.float32))
            ys.append(LM.targets(rows, x, x1).astype(np.float32))
            row_s.append(rows.b + offset)
            row_slot.append(rows.i)
            cos.append(rows.cos.astype(np.float32))
            sin.append(rows.sin.astype(np.float32))
            b = np.zeros((S, LM.MAX_OBJECTS, 2), dtype=np.float32)
            b[:] = 10.0 * np.arange(1, LM.MAX_OBJECTS + 1)[None, :, None]  # absent: far apart, masked anyway
            c = x[:, 2:2 + 3 * n].reshape(S, n, 3)[..., :2]
            b[:, :n] = c - x[:, None, 0:2]
            base.append(b)
            pr = np.zeros((S, LM.MAX_OBJECTS), dtype=bool)
            pr[:, :n] = True
            present.append(pr)
            pend.append((u * (slice_s - lag)).astype(np.float32))
            n_of.append(np.full(S, n, dtype=np.int8))
            offset += S
    d = {"X": np.concatenate(feats), "Y": np.concatenate(ys), "row_sample": np.concatenate(row_s),
         "row_slot": np.concatenate(row_slot), "cos": np.concatenate(cos), "sin": np.concatenate(sin),
         "base": np.concatenate(base), "present": np.concatenate(present), "pusher_end": np.concatenate(pend),
         "n": np.concatenate(n_of)}
    counts = np.bincount(d["row_sample"], minlength=offset)
    d["row_start"] = np.concatenate([[0], np.cumsum(counts)])
    d["samples_with_rows"] = np.flatnonzero(counts > 0)
    return d


def _rows_of(d, samples):
    """Row indices (sorted) and their batch-local sample index for a set of samples."""
    start, stop = d["row_start"][samples], d["row_start"][samples + 1]
    counts = stop - start
    local = np.repeat(np.arange(len(samples)), counts)
    idx = np.repeat(start, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    return idx, local


class Trainer:
    def __init__(self, torch, family, norm, w_f: float, slack: float):
        self.torch = torch
        self.family = family
        t = torch.as_tensor
        self.x_mean, self.x_std = t(norm["x_mean"]), t(norm["x_std"])
        self.y_mean, self.y_std = t(norm["y_mean"]), t(norm["y_std"])
        self.sigma = float(np.mean(norm["y_std"][0:2]))
        self.w_f, self.slack = float(w_f), float(slack)
        self.R, self.rp = float(family["object_radius"]), float(family["pusher_radius"])

    def batch(self, d, samples):
        t = self.torch
        idx, local = _rows_of(d, samples)
        return {"X": (t.from_numpy(d["X"][idx]) - self.x_mean) / self.x_std,
                "Y": (t.from_numpy(d["Y"][idx]) - self.y_mean) / self.y_std,
                "cos": t.from_numpy(d["cos"][idx]), "sin": t.from_numpy(d["sin"][idx]),
                "local": t.from_numpy(local), "slot": t.from_numpy(d["row_slot"][idx]),
                "base": t.from_numpy(d["base"][samples]), "present": t.from_numpy(d["present"][samples]),
                "pusher_end": t.from_numpy(d["pusher_end"][samples])}

    def losses(self, net, b):
        """(total, mse, penetration) for one batch."""
        t = self.torch
        pn = net(b["X"])
        mse = ((pn - b["Y"]) ** 2).mean()
        dxy = pn[:, 0:2] * self.y_std[0:2] + self.y_mean[0:2]
        dw = t.stack([b["cos"] * dxy[:, 0] - b["sin"] * dxy[:, 1], b["sin"] * dxy[:, 0] + b["cos"] * dxy[:, 1]], -1)
        base = b["base"]
        pos = base.index_put((b["local"], b["slot"]), base[b["local"], b["slot"]] + dw)
        pres = b["present"]
        pen = t.zeros(pos.shape[0])
        for i, j in PAIRS:
            depth = 2 * self.R - t.linalg.norm(pos[:, i] - pos[:, j], dim=-1) - self.slack
            pen = pen + t.where(pres[:, i] & pres[:, j], t.relu(depth) ** 2, t.zeros_like(depth))
        depth = self.R + self.rp - t.linalg.norm(pos - b["pusher_end"][:, None, :], dim=-1) - self.slack
        pen = pen + t.where(pres, t.relu(depth) ** 2, t.zeros_like(depth)).sum(-1)
        pen = pen.mean() / self.sigma ** 2
        return mse + self.w_f * pen, mse, pen

    def evaluate(self, net, d, batch=4096):
        t = self.torch
        samples = d["samples_with_rows"]
        tot = np.zeros(3)
        with t.inference_mode():
            for k in range(0, len(samples), batch):
                s = samples[k:k + batch]
                vals = self.losses(net, self.batch(d, s))
                tot += np.array([float(v) for v in vals]) * len(s)
        return tot / max(1, len(samples))


def norm_stats(d) -> dict:
    def stats(a):
        m = a.mean(0, dtype=np.float64)
        s = a.std(0, dtype=np.float64)
        return m.astype(np.float32), np.where(s > 1e-8, s, 1.0).astype(np.float32)
    x_mean, x_std = stats(d["X"])
    y_mean, y_std = stats(d["Y"])
    return {"x_mean": x_mean, "x_std": x_std, "y_mean": y_mean, "y_std": y_std}


def output_errors(net_fn, d) -> dict:
    """Held-out RMS errors of the network outputs in physical units, over all rows and per object count."""
    pred = net_fn(d["X"].astype(np.float64))
    err = pred - d["Y"]
    n_row = d["n"][d["row_sample"]]

    def summary(e):
        return {"rows": int(len(e)),
                "dpos_rms_mm": float(np.sqrt(np.mean(np.sum(e[:, 0:2] ** 2, -1))) * 1e3),
                "dyaw_rms_deg": float(np.degrees(np.sqrt(np.mean(e[:, 2] ** 2)))),
                "vel_rms_mm_s": float(np.sqrt(np.mean(np.sum(e[:, 3:5] ** 2, -1))) * 1e3),
                "omega_rms_deg_s": float(np.degrees(np.sqrt(np.mean(e[:, 5] ** 2))))}
    out = {"all": summary(err)}
    for n in np.unique(n_row):
        out[f"n{int(n)}"] = summary(err[n_row == n])
    return out


def compare_models(model_factory, chunks) -> dict:
    """Single-slice errors of the learned model (with gate, pusher model and projection) and of the analytical
    model on held-out samples: RMS object position error (mm) over all objects, and over the objects that moved."""
    from ...core.models.learned import family_scene  # noqa: PLC0415
    per_n = {}
    for ch in chunks:
        n = int(ch["n"])
        per_n.setdefault(n, []).append(ch)
    out = {}
    for n, chs in sorted(per_n.items()):
        x = np.concatenate([c["x"] for c in chs])
        u = np.concatenate([c["u"] for c in chs])
        x1 = np.concatenate([c["x_next"] for c in chs])
        scene = family_scene(n)
        L = scene.layout
        ref = L.object_poses(x1)[..., :2]
        moved = np.linalg.norm(ref - L.object_poses(x)[..., :2], axis=-1) > 1e-3
        res = {"samples": int(len(x)), "moved_objects": int(moved.sum())}
        for name, model in (("learned", model_factory(scene)), ("analytical", AnalyticalCoarseModel(scene))):
            pred = model.propagate(x, u, 1.0)
            if name == "learned":  # objects the gate left alone keep their pose bitwise: did they stay in F?
                kept = np.all(L.object_poses(pred) == L.object_poses(x), axis=-1)
                fd = np.linalg.norm(ref - L.object_poses(x)[..., :2], axis=-1)[kept]
                res["gated_out_objects"] = int(kept.sum())
                res["gated_out_fine_motion_max_mm"] = float(fd.max() * 1e3) if fd.size else 0.0
                res["gated_out_fine_motion_p99_mm"] = float(np.percentile(fd, 99) * 1e3) if fd.size else 0.0
            e = np.linalg.norm(L.object_poses(pred)[..., :2] - ref, axis=-1)
            res[f"{name}_pos_rms_mm"] = float(np.sqrt(np.mean(e ** 2)) * 1e3)
            res[f"{name}_pos_rms_moved_mm"] = float(np.sqrt(np.mean(e[moved] ** 2)) * 1e3) if moved.any() else 0.0
            res[f"{name}_pusher_rms_mm"] = float(np.sqrt(np.mean(np.sum((pred[:, :2] - x1[:, :2]) ** 2, -1))) * 1e3)
        out[f"n{n}"] = res
    return out


def _fit(torch, trainer, dtr, dva, rng, epochs, batch, lr, weight_decay, patience, say):
    """The training loop: NAdam, learning rate halved on a validation plateau, early stopping.
    Returns (best state dict, loss log, best epoch)."""
    net = build_net(torch)
    opt = torch.optim.NAdam(net.parameters(), lr=lr, weight_decay=weight_decay, decoupled_weight_decay=True)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=max(1, patience // 3))
    samples = dtr["samples_with_rows"]
    log = {"epoch": [], "train_loss": [], "train_mse": [], "train_penetration": [], "val_loss": [], "val_mse": [],
           "val_penetration": [], "lr": [], "seconds": []}
    best, best_state, best_epoch, stale = np.inf, None, 0, 0
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        net.train()
        perm = rng.permutation(samples)
        tot, cnt = np.zeros(3), 0
        for k in range(0, len(perm), batch):
            s = np.sort(perm[k:k + batch])
            loss, mse, pen = trainer.losses(net, trainer.batch(dtr, s))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += np.array([loss.item(), mse.item(), pen.item()]) * len(s)
            cnt += len(s)
        net.eval()
        tr = tot / max(1, cnt)
        va = trainer.evaluate(net, dva)
        sched.step(va[0])
        for key, v in zip(("train_loss", "train_mse", "train_penetration"), tr):
            log[key].append(float(v))
        for key, v in zip(("val_loss", "val_mse", "val_penetration"), va):
            log[key].append(float(v))
        log["epoch"].append(epoch)
        log["lr"].append(opt.param_groups[0]["lr"])
        log["seconds"].append(time.perf_counter() - t0)
        improved = va[0] < best * (1 - 1e-4)
        if improved:
            best, best_epoch, stale = va[0], epoch, 0
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        else:
            stale += 1
        say(f"epoch {epoch}/{epochs}: train {tr[0]:.5f} (pen {tr[2]:.2e})  val {va[0]:.5f} (mse {va[1]:.5f}, "
            f"pen {va[2]:.2e})  lr {log['lr'][-1]:.1e}  {log['seconds'][-1]:.1f} s{'  *' if improved else ''}")
        if stale >= patience:
            say(f"early stop: no improvement for {patience} epochs, best epoch {best_epoch}")
            break
    return best_state, log, best_epoch


def train(data_dir, out_path, seed=0, epochs=150, batch=512, lr=5e-4, w_f=2.0, slack=1e-3, val_fraction=0.1,
          patience=12, threads=1, max_samples=None, mirror_aug=True, weight_decay=0.0, learning_curve=(),
          quiet=False, command=None, object_velocities=False) -> dict:
    """Train, write weights + report + plot, return the report. ``learning_curve``: fractions of the training
    chunks on which extra models are trained and scored on the same validation set (what more data buys)."""
    import torch  # noqa: PLC0415
    from ...core.models.fine import default_threads  # noqa: PLC0415
    torch.set_num_threads(max(1, min(int(threads) or 1, default_threads())))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    t_start = time.perf_counter()
    metas, chunks = load_datasets(data_dir, max_samples)
    family = metas[0]["family"]
    n_val = min(max(1, int(round(val_fraction * len(chunks)))), len(chunks) - 1) if len(chunks) > 1 else 0
    order = rng.permutation(len(chunks))
    val_chunks = [chunks[i] for i in sorted(order[:n_val])]
    train_chunks = [chunks[i] for i in sorted(order[n_val:])] if n_val else chunks
    if not val_chunks:
        val_chunks = chunks  # a one-chunk dataset (tests): validate on the training data
    dtr = prepare(train_chunks, family, mirror_aug, object_velocities)
    dva = prepare(val_chunks, family, False, object_velocities)
    for what, d in (("training", dtr), ("validation", dva)):
        if not len(d["X"]):  # no sample moved an object the gate passes: nothing to fit or to judge
            raise ValueError(f"--data: the {what} samples have no object rows (no push in them moves an object); "
                             f"generate more samples (datagen --samples)")
    norm = norm_stats(dtr)
    trainer = Trainer(torch, family, norm, w_f, slack)
    say = (lambda *a: None) if quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    n_train_samples = sum(len(c["x"]) for c in train_chunks)
    say(f"train: {n_train_samples} training samples ({len(dtr['X'])} rows with mirroring), "
        f"{sum(len(c['x']) for c in val_chunks)} validation samples ({len(dva['X'])} rows), "
        f"{torch.get_num_threads()} torch threads")
    best_state, log, best_epoch = _fit(torch, trainer, dtr, dva, rng, epochs, batch, lr, weight_decay, patience,
                                       say)
    if best_state is None:  # no epoch ended with a finite validation loss
        raise ValueError(f"training diverged: no epoch of {epochs} reached a finite validation loss (--lr {lr:g} "
                         f"too large?)")
    mlp = LM.mlp_from_state_dict(best_state, norm)
    train_s = time.perf_counter() - t_start
    report = {
        "format": LM.FORMAT,
        "family": family,
        "command": command or " ".join(["parapush"] + sys.argv[1:]),
        "code_version": version_string(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "data": {"dirs": [m["dir"] for m in metas], "samples_used": int(sum(len(c["x"]) for c in chunks)),
                 "train_samples": int(n_train_samples), "val_samples": int(sum(len(c["x"]) for c in val_chunks)),
                 "train_rows_mirrored": int(len(dtr["X"])), "val_rows": int(len(dva["X"])),
                 "datasets": [{"dir": m["dir"], "seed": m.get("seed"), "command": m.get("command"),
                               "code_version": m.get("code_version"), "into_cluster": m.get("into_cluster"),
                               "counts": m.get("counts"), "elapsed_s": m.get("elapsed_s")} for m in metas],
                 "dataset_elapsed_s": sum(m.get("elapsed_s") or 0.0 for m in metas)},
        "training": {"seed": seed, "epochs_run": len(log["epoch"]), "max_epochs": epochs, "best_epoch": best_epoch,
                     "batch_samples": batch, "lr": lr, "optimiser": "NAdam", "weight_decay": weight_decay, "w_f": w_f,
                     "penetration_slack_m": slack, "val_fraction": val_fraction, "patience": patience,
                     "mirror_augmentation": mirror_aug, "torch_threads": torch.get_num_threads(),
                     "torch": str(torch.__version__), "seconds": train_s,
                     "parameters": int(sum(v.numel() for v in best_state.values()))},
        "encoding": {"inputs": LM.F_IN, "outputs": LM.F_OUT, "hidden": list(LM.HIDDEN),
                     "object_velocities": bool(object_velocities),
                     "context_radius_m": LM.CONTEXT_RADIUS, "parked": list(LM.PARKED),
                     "gate_margin_m": LM.GATE_MARGIN, "chain_margin_m": LM.CHAIN_MARGIN},
        "curves": log,
    }
    report["heldout"] = {"outputs": output_errors(mlp, dva),
                         "single_slice_vs_fine": compare_models(
                             lambda sc: LM.LearnedCoarseModel(sc, mlp, report), val_chunks),
                         "train_outputs": output_errors(mlp, _subsample(dtr, 50_000, rng))}
    if learning_curve:
        report["learning_curve"] = _learning_curve(torch, learning_curve, train_chunks, val_chunks, dva, report,
                                                   seed, epochs, batch, lr, weight_decay, patience, w_f, slack,
                                                   mirror_aug, object_velocities, say)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    blob_meta = {k: report[k] for k in ("family", "command", "code_version", "created", "data", "training",
                                        "encoding")}
    blob_meta["heldout_single_slice_vs_fine"] = report["heldout"]["single_slice_vs_fine"]
    blob_meta = json.loads(json.dumps(blob_meta, default=str))  # plain types only: torch.load(weights_only=True)
    torch.save({"format": LM.FORMAT, "state_dict": best_state,
                "norm": {k: torch.from_numpy(np.asarray(v)) for k, v in norm.items()}, "meta": blob_meta}, out_path)
    report["weights"] = {"file": out_path.name, "bytes": out_path.stat().st_size}
    report["total_seconds"] = time.perf_counter() - t_start
    out_path.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    _plot(log, best_epoch, out_path.with_suffix(".png"))
    say(f"wrote {out_path} ({out_path.stat().st_size / 1e6:.2f} MB), {out_path.with_suffix('.json')}, "
        f"{out_path.with_suffix('.png')} in {report['total_seconds']:.0f} s")
    return report


def _learning_curve(torch, fractions, train_chunks, val_chunks, dva, report, seed, epochs, batch, lr,
                    weight_decay, patience, w_f, slack, mirror_aug, object_velocities, say) -> dict:
    """Held-out errors of models trained on the first fractions of the training chunks (same validation set),
    next to the full model's: the trend says what more data would buy."""
    def summary(outputs, single):
        return {"train_samples": None, "val_dpos_rms_mm": outputs["all"]["dpos_rms_mm"],
                **{f"{k}_learned_pos_rms_mm": v["learned_pos_rms_mm"] for k, v in single.items()}}
    points = []
    for f in sorted(float(v) for v in fractions):
        if not 0.0 < f < 1.0:
            raise ValueError(f"--learning-curve fractions must lie in (0, 1), got {f}")
        sub = train_chunks[:max(1, int(round(f * len(train_chunks))))]
        family = report["family"]
        d = prepare(sub, family, mirror_aug, object_velocities)
        norm = norm_stats(d)
        say(f"learning curve: {f:.2f} of the training data ({sum(len(c['x']) for c in sub)} samples)")
        state, _, _ = _fit(torch, Trainer(torch, family, norm, w_f, slack), d,
                           prepare(val_chunks, family, False, object_velocities),
                           np.random.default_rng(seed), epochs, batch, lr, weight_decay, patience, lambda s: None)
        mlp = LM.mlp_from_state_dict(state, norm)
        p = summary(output_errors(mlp, dva),
                    compare_models(lambda sc, m=mlp: LM.LearnedCoarseModel(sc, m, report), val_chunks))
        p["train_samples"] = int(sum(len(c["x"]) for c in sub))
        points.append(p)
    full = summary(report["heldout"]["outputs"], report["heldout"]["single_slice_vs_fine"])
    full["train_samples"] = report["data"]["train_samples"]
    points.append(full)
    out = {"points": points}
    if len(points) >= 2:  # power law e ~ N^-a through the last two points, for the doubling estimate
        a, b = points[-2], points[-1]
        ratio = b["train_samples"] / a["train_samples"]
        slope = np.log(a["val_dpos_rms_mm"] / b["val_dpos_rms_mm"]) / np.log(ratio)
        out["error_exponent"] = float(slope)
        out["doubling_the_data_would_scale_the_position_error_by"] = float(2.0 ** -slope)
        gen = report["data"].get("dataset_elapsed_s")
        out["what_more_data_would_buy"] = (
            f"held-out object position error per slice fell from {points[0]['val_dpos_rms_mm']:.2f} mm "
            f"({points[0]['train_samples']} samples) to {b['val_dpos_rms_mm']:.2f} mm ({b['train_samples']}), "
            f"~N^-{slope:.2f}: doubling the data"
            + (f" (another ~{gen / 60:.0f} min of datagen at the pace of this dataset)" if gen else "")
            + f" should bring it to ~{b['val_dpos_rms_mm'] * 2.0 ** -slope:.2f} mm (per object count: see "
              f"points), and the paper's 2 M samples would extrapolate to "
              f"~{b['val_dpos_rms_mm'] * (2e6 / b['train_samples']) ** -slope:.2f} mm if the trend held")
    return out


def _subsample(d, k, rng):
    """A view of ``d`` restricted to at most ``k`` rows (for the training-error summary)."""
    if len(d["X"]) <= k:
        return d
    idx = np.sort(rng.choice(len(d["X"]), k, replace=False))
    return {"X": d["X"][idx], "Y": d["Y"][idx], "row_sample": d["row_sample"][idx], "n": d["n"]}


def _plot(log, best_epoch, path):
    from ..bench.common import pyplot  # noqa: PLC0415
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    e = log["epoch"]
    axes[0].semilogy(e, log["train_loss"], label="train loss")
    axes[0].semilogy(e, log["val_loss"], label="validation loss")
    axes[0].semilogy(e, log["val_mse"], "--", label="validation MSE")
    axes[0].axvline(best_epoch, color="k", lw=0.8, ls=":", label=f"best epoch {best_epoch}")
    axes[0].set_xlabel("epoch")
    axes[0].set_ylabel("loss (normalised units)")
    axes[0].legend()
    axes[0].grid(True, which="both", alpha=0.3)
    axes[1].semilogy(e, np.maximum(log["train_penetration"], 1e-12), label="train")
    axes[1].semilogy(e, np.maximum(log["val_penetration"], 1e-12), label="validation")
    axes[1].set_xlabel("epoch")
    axes[1].set_ylabel("penetration term (eq. 5, before W_F)")
    axes[1].legend()
    axes[1].grid(True, which="both", alpha=0.3)
    fig.suptitle("learned coarse model: training curves")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args):
    if args.epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {args.epochs}")
    if not 0.0 <= args.val_fraction < 1.0:
        raise ValueError(f"--val-fraction must be in [0, 1), got {args.val_fraction}")
    return train(args.data, args.out, seed=args.seed, epochs=args.epochs, batch=args.batch, lr=args.lr,
                 w_f=args.w_f, slack=args.penetration_slack, val_fraction=args.val_fraction,
                 patience=args.patience, threads=args.threads, max_samples=args.max_samples,
                 mirror_aug=not args.no_mirror, weight_decay=args.weight_decay,
                 object_velocities=args.object_velocities,
                 learning_curve=tuple(args.learning_curve))


def add_parser(sub, parent=None):
    p = sub.add_parser("train", help="train the learned coarse model on a datagen dataset",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, nargs="+",
                   help="dataset directories written by 'parapush datagen' (one or more, same scene family)")
    p.add_argument("--out", type=output_file, required=True,
                   help="weights file to write (.pt); .json and .png go next to it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=positive_int, default=150,
                   help="maximum epochs (early stopping usually ends sooner)")
    p.add_argument("--batch", type=positive_int, default=512, help="samples per batch")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--w-f", type=float, default=2.0, help="weight W_F of the penetration term (eq. 5)")
    p.add_argument("--penetration-slack", type=float, default=1e-3, help="penetration (m) not penalised")
    p.add_argument("--val-fraction", type=float, default=0.1, help="share of chunks held out for validation")
    p.add_argument("--patience", type=int, default=12, help="early stopping: epochs without improvement")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="torch threads (default 1: on a busy 2-core machine 2 threads ran an epoch 9x slower)")
    p.add_argument("--max-samples", type=positive_int, default=None,
                   help="use only the first chunks (in --data order), up to this many samples")
    p.add_argument("--no-mirror", action="store_true", help="no mirror augmentation")
    p.add_argument("--object-velocities", action="store_true",
                   help="feed the objects' start velocities to the network (the first shipped encoding); by default "
                        "it is blind to them (core/models/learned/model.py, 'Object velocities')")
    p.add_argument("--weight-decay", type=float, default=0.0, help="decoupled weight decay of NAdam")
    p.add_argument("--learning-curve", type=comma_list(share), default="",
                   help="also train on these fractions of the training data (e.g. 0.25,0.5) and report the trend")
    p.set_defaults(func=run)
    return p
