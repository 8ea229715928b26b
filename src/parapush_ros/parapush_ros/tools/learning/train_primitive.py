"""``parapush train-primitive``: the E-MDN push-primitive model (paper 004) from a ``datagen --primitive`` set.

Splits (seeded): ``--test-fraction`` of the pushes held out for evaluation (never trained on), ``--val-fraction``
of the rest for the variance calibration (``EnsembleMDN.calibrate``); ``--lesion x0,y0,x1,y1`` removes the
training and validation pushes whose box position lies in that rectangle (the test set keeps them, so the bench
can see the model there). The weights file holds the E-MDN, the lesion, ``var_ref`` (the median predicted
uncertainty on the training pushes: the unit of the planner's uncertainty weight) and the data's provenance.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...arguments import output_file, positive_int
from ...core.models.emdn_config import EMDNConfig

DEFAULT_EPOCHS = 150  # on 4096 pushes (the bench's default set): 2x the steps of 300 epochs on 1024


@dataclass
class Split:
    x: np.ndarray  # E-MDN features (N, N_FEATURES)
    y: np.ndarray  # object-frame pose changes (N, 3)
    poses: np.ndarray  # (N, 3)
    actions: np.ndarray  # (N, 2)
    raw: np.ndarray  # the paper's 7 raw features (N, 7) (the GP's inputs)

    def take(self, idx) -> Split:
        return Split(self.x[idx], self.y[idx], self.poses[idx], self.actions[idx], self.raw[idx])

    def __len__(self):
        return len(self.x)


def load_split(root, max_samples=None, test_fraction: float = 0.2, val_fraction: float = 0.15, lesion=None,
               seed: int = 0) -> tuple[dict, Split, Split, Split]:
    """(dataset meta, train, val, test) of a primitive dataset; the lesion is removed from train and val."""
    from ...core.models.push_primitive import features, pose_change, raw_features  # noqa: PLC0415
    from .datagen_primitive import load  # noqa: PLC0415
    for name, v in (("--test-fraction", test_fraction), ("--val-fraction", val_fraction)):
        if not 0.0 < v < 1.0:
            raise ValueError(f"{name} must lie in (0, 1), got {v}")
    meta, d = load(root, max_samples)
    every = Split(features(d["poses"], d["actions"]), pose_change(d["poses"], d["poses_next"]), d["poses"],
                  d["actions"], raw_features(d["poses"], d["actions"]))
    rng = np.random.default_rng([seed, 18])
    perm = rng.permutation(len(every))
    n_test = max(1, int(round(test_fraction * len(every))))
    test, rest = perm[:n_test], perm[n_test:]
    if lesion is not None:
        rest = rest[~lesion.contains(every.poses[rest, :2])]
    n_val = max(1, int(round(val_fraction * len(rest))))
    if len(rest) - n_val < 2:
        raise ValueError(f"{root}: too few pushes ({len(every)}) to train on after the test and validation splits")
    return meta, every.take(rest[n_val:]), every.take(rest[:n_val]), every.take(test)


def fit_emdn(train: Split, val: Split, cfg, progress: bool = False, label: str = "E-MDN"):
    """An E-MDN trained on ``train`` and calibrated on ``val``; returns (model, report, var_ref). The place
    features' settings (unscaled, first-layer init ``PLACE_INIT``) are the primitive's, whatever ``cfg`` says."""
    from dataclasses import replace  # noqa: PLC0415

    from ...core.models.ensemble_mdn import EnsembleMDN  # noqa: PLC0415
    from ...core.models.push_primitive import N_FEATURES, N_OUT, N_PLACE, PLACE_INIT, uncertainty  # noqa: PLC0415
    from tqdm import tqdm  # noqa: PLC0415
    cfg = replace(cfg, unscaled_inputs=N_PLACE, unscaled_init=PLACE_INIT)
    model = EnsembleMDN(N_FEATURES, N_OUT, cfg)
    with tqdm(total=cfg.epochs, desc=f"train {label}", unit="epoch", disable=not progress) as bar:
        def step(epoch, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        report = model.fit(train.x, train.y, progress=step)
    model.calibrate(val.x, val.y)
    var_ref = float(np.median(uncertainty(model.predict(train.x)[1])))
    return model, report, var_ref


def run(args):
    from ...core.models.push_primitive import EMDNPrimitive, Lesion  # noqa: PLC0415
    lesion = Lesion.parse(args.lesion) if args.lesion else None
    given = {k: getattr(args, k) for k in ("epochs", "members", "components", "batch", "lr", "adversarial")
             if getattr(args, k) is not None}
    if args.hidden:
        try:
            given["hidden"] = tuple(int(h) for h in args.hidden.split(","))
        except ValueError:
            raise ValueError(f"--hidden: {args.hidden!r} is not a list of layer sizes like 20,20,20") from None
    cfg = EMDNConfig(seed=args.seed, **given)
    meta, train, val, test = load_split(args.data, args.max_samples, args.test_fraction, args.val_fraction, lesion,
                                        args.seed)
    t0 = time.perf_counter()
    model, report, var_ref = fit_emdn(train, val, cfg, progress=True)
    elapsed = time.perf_counter() - t0
    from ...core.models.ensemble_mdn import coverage, gaussian_nll  # noqa: PLC0415
    mean, var = model.predict(test.x)
    info = {"data": str(args.data), "data_seed": meta["seed"], "train_pushes": len(train), "val_pushes": len(val),
            "test_pushes": len(test), "train_s": elapsed, "command": " ".join(["parapush"] + sys.argv[1:]),
            "test_calibration_1sigma": coverage(test.y, mean, var), "test_nll": gaussian_nll(test.y, mean, var)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    EMDNPrimitive(model, lesion, var_ref, info).save(out)
    print(f"train-primitive: {len(train)} pushes, {report.epochs} epochs in {elapsed:.0f} s; held-out 1-sigma "
          f"coverage {info['test_calibration_1sigma']:.3f}, NLL {info['test_nll']:.2f}; wrote {out} "
          f"({out.stat().st_size / 1024:.0f} KiB)", file=sys.stderr)
    return info


def add_parser(sub, parent=None):
    p = sub.add_parser("train-primitive", help="train the E-MDN push-primitive model (paper 004)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a 'parapush datagen --primitive' directory")
    p.add_argument("--out", type=output_file, required=True, help="weights file to write (.pt)")
    p.add_argument("--lesion", default="", help="x0,y0,x1,y1: box positions (m) left out of the training data "
                   "(write --lesion=-0.2,... when x0 is negative)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=positive_int, default=DEFAULT_EPOCHS,
                   help=f"training epochs (default {DEFAULT_EPOCHS})")
    # None: EMDNConfig's default (one source of truth, shown in the help texts)
    d = EMDNConfig
    p.add_argument("--members", type=positive_int, default=None, help=f"ensemble size M (default {d.members})")
    p.add_argument("--components", type=int, default=None,
                   help=f"mixture components K per member (default {d.components})")
    p.add_argument("--hidden", default=None,
                   help=f"hidden layer sizes (default {','.join(map(str, d.hidden))})")
    p.add_argument("--batch", type=positive_int, default=None, help=f"batch size (default {d.batch})")
    p.add_argument("--lr", type=float, default=None, help=f"Adam learning rate (default {d.lr:g})")
    p.add_argument("--adversarial", type=float, default=None,
                   help=f"fast-gradient-sign step as a share of the standardised input range (default "
                        f"{d.adversarial:g}; 0: none)")
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--val-fraction", type=float, default=0.15)
    p.add_argument("--max-samples", type=int, default=None)
    p.set_defaults(func=run)
    return p
