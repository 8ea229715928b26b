"""``parapush train-ensemble``: the learned coarse model as an E-MDN ensemble (``core/models/learned/ensemble.py``).

Same data (``parapush datagen`` sets of the four_cylinders family), rows (gate, encoding, mirror augmentation,
object velocities off) and validation split (whole chunks) as ``parapush train``; the row -> output map is an
ensemble of mixture density networks (``core/models/ensemble_mdn.py``: members from different initialisations on
their own shuffles, adversarial training) whose variance is then calibrated on the validation rows. The report
(``<weights>.json``) gives held-out errors beside the shipped single network's, the 1/2-sigma coverage and NLL on
held-out rows, and single-slice errors against the fine model.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from ...arguments import output_file, positive_int

DEFAULTS = {"hidden": (128, 128, 64), "members": 5, "components": 2, "epochs": 40, "batch": 256, "lr": 2e-3}


def train_ensemble(data_dirs, out_path, seed=0, epochs=DEFAULTS["epochs"], hidden=DEFAULTS["hidden"],
                   members=DEFAULTS["members"], components=DEFAULTS["components"], batch=DEFAULTS["batch"],
                   lr=DEFAULTS["lr"], adversarial=0.005, val_fraction=0.1, max_samples=None, progress=True,
                   command=None) -> dict:
    """Train, calibrate, write the weights and ``<weights>.json``; returns the report."""
    import torch  # noqa: PLC0415
    from tqdm import tqdm  # noqa: PLC0415

    from ...core.models import learned as LM  # noqa: PLC0415
    from ...core.models.ensemble_mdn import EMDNConfig, EnsembleMDN, coverage, gaussian_nll  # noqa: PLC0415
    from ...core.models.learned.ensemble import FORMAT, LearnedEnsembleModel  # noqa: PLC0415
    from . import version_string  # noqa: PLC0415
    from .datagen import load_datasets  # noqa: PLC0415
    from .train import compare_models, output_errors, prepare  # noqa: PLC0415
    torch.set_num_threads(1)  # a shared machine; the model is small
    t_start = time.perf_counter()
    metas, chunks = load_datasets(data_dirs, max_samples)
    family = metas[0]["family"]
    rng = np.random.default_rng(seed)
    # held out: whole chunks, half of them to calibrate the variance on and half to report on (a coverage
    # measured on the rows it was calibrated on is 0.683 by construction, whatever the model)
    n_val = max(2, int(round(val_fraction * len(chunks)))) if len(chunks) > 2 else 0
    order = rng.permutation(len(chunks))
    cal_chunks = [chunks[i] for i in sorted(order[:n_val // 2])] or chunks
    val_chunks = [chunks[i] for i in sorted(order[n_val // 2:n_val])] or chunks
    train_chunks = [chunks[i] for i in sorted(order[n_val:])] if n_val else chunks
    if not n_val:
        print("train-ensemble: fewer than 3 chunks, nothing to hold out: the variance is calibrated and the "
              "errors are reported on the training data (metadata data.heldout_is_training)", file=sys.stderr)
    dtr = prepare(train_chunks, family, True, False)
    dcal = prepare(cal_chunks, family, False, False)
    dva = prepare(val_chunks, family, False, False)
    cfg = EMDNConfig(hidden=tuple(hidden), members=members, components=components, epochs=epochs, batch=batch, lr=lr,
                     adversarial=adversarial, seed=seed)
    emdn = EnsembleMDN(LM.F_IN, LM.F_OUT, cfg)
    with tqdm(total=epochs, desc="train-ensemble", unit="epoch", disable=not progress) as bar:
        def step(epoch, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        fit = emdn.fit(dtr["X"].astype(np.float64), dtr["Y"].astype(np.float64), progress=step)
    emdn.calibrate(dcal["X"].astype(np.float64), dcal["Y"].astype(np.float64))
    train_s = time.perf_counter() - t_start
    mean, var = emdn.predict(dva["X"].astype(np.float64))
    y = dva["Y"].astype(np.float64)
    meta = {"family": family, "command": command or " ".join(["parapush"] + sys.argv[1:]),
            "code_version": version_string(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "encoding": {"inputs": LM.F_IN, "outputs": LM.F_OUT, "object_velocities": False},
            "data": {"dirs": [m["dir"] for m in metas], "samples_used": int(sum(len(c["x"]) for c in chunks)),
                     "train_samples": int(sum(len(c["x"]) for c in train_chunks)),
                     "val_samples": int(sum(len(c["x"]) for c in val_chunks)), "heldout_is_training": not n_val,
                     "calibration_samples": int(sum(len(c["x"]) for c in cal_chunks)),
                     "train_rows_mirrored": int(len(dtr["X"])), "val_rows": int(len(dva["X"])),
                     "dataset_elapsed_s": float(sum(m.get("elapsed_s") or 0.0 for m in metas)),
                     "seeds": [m.get("seed") for m in metas]},
            "training": {"seed": seed, "epochs": fit.epochs, "steps": fit.steps, "final_nll": fit.final_nll,
                         "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(cfg).items()},
                         "seconds": train_s, "parameters": int(sum(p.numel() for p in emdn.net.parameters())),
                         "var_scale": emdn.var_scale.tolist()},
            "heldout": {"calibration_1sigma": coverage(y, mean, var), "calibration_2sigma": coverage(y, mean, var, 2.0),
                        "nll": gaussian_nll(y, mean, var),
                        "outputs": output_errors(lambda f: emdn.predict(f)[0], dva)}}
    meta["heldout"]["single_slice_vs_fine"] = compare_models(lambda sc: LearnedEnsembleModel(sc, emdn, meta),
                                                            val_chunks)
    try:  # the shipped single network on the same held-out rows, for comparison
        single = LM.LearnedCoarseModel.load(LM.family_scene(1))
        meta["heldout"]["shipped_single_network_outputs"] = output_errors(single.mlp, dva)
    except LM.LearnedModelError:
        pass
    meta = json.loads(json.dumps(meta, default=float))  # plain types only: torch.load(weights_only=True)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": FORMAT, "emdn": emdn.state(), "meta": meta}, out_path)
    meta["weights"] = {"file": out_path.name, "bytes": out_path.stat().st_size}
    meta["total_seconds"] = time.perf_counter() - t_start
    out_path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def run(args):
    try:
        hidden = tuple(int(h) for h in args.hidden.split(","))
    except ValueError:
        raise ValueError(f"--hidden: {args.hidden!r} is not a list of layer sizes like 128,128,64") from None
    r = train_ensemble(args.data, args.out, seed=args.seed, epochs=args.epochs, hidden=hidden, members=args.members,
                       components=args.components, batch=args.batch, lr=args.lr, adversarial=args.adversarial,
                       max_samples=args.max_samples)
    h = r["heldout"]
    print(f"train-ensemble: {r['data']['train_samples']} samples ({r['data']['train_rows_mirrored']} rows), "
          f"{r['training']['epochs']} epochs in {r['training']['seconds']:.0f} s; held-out rows: position RMS "
          f"{h['outputs']['all']['dpos_rms_mm']:.2f} mm, 1-sigma coverage {h['calibration_1sigma']:.3f}, NLL "
          f"{h['nll']:.2f}; wrote {args.out} ({r['weights']['bytes'] / 1024:.0f} KiB)", file=sys.stderr)
    return r


def add_parser(sub, parent=None):
    p = sub.add_parser("train-ensemble", help="train the learned coarse model as an E-MDN ensemble (with variance)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, nargs="+", help="one or more 'parapush datagen' directories")
    p.add_argument("--out", type=output_file, required=True,
                   help="weights file to write (.pt); the report goes next to it (.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=positive_int, default=DEFAULTS["epochs"])
    p.add_argument("--hidden", default=",".join(str(h) for h in DEFAULTS["hidden"]), help="hidden layer sizes")
    p.add_argument("--members", type=positive_int, default=DEFAULTS["members"], help="ensemble size M")
    p.add_argument("--components", type=int, default=DEFAULTS["components"], help="mixture components per member")
    p.add_argument("--batch", type=positive_int, default=DEFAULTS["batch"])
    p.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    p.add_argument("--adversarial", type=float, default=0.005, help="fast-gradient-sign step (0: none)")
    p.add_argument("--max-samples", type=positive_int, default=None,
                   help="samples to use at most, whole chunks (default: all)")
    p.set_defaults(func=run)
    return p
