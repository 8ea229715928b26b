"""Shared plumbing of the benchmarks: output paths, tables, JSON, plots and machine facts (progress: tqdm)."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np


def machine_info() -> dict:
    import mujoco  # noqa: PLC0415
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"python": platform.python_version(), "mujoco": mujoco.__version__, "numpy": np.__version__,
            "cpus": cpus, "machine": platform.machine(), "processor": _cpu_model()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def output_paths(args, name: str) -> tuple[Path, Path]:
    """(json path, directory for plots). ``--json`` wins; else ``<out>/bench_<name>.json``."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = Path(args.json) if args.json else out / f"bench_{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path, out


def write_json(path: Path, payload: dict) -> None:
    payload = {"machine": machine_info(), "command": " ".join(["parapush"] + sys.argv[1:]), **payload}
    path.write_text(json.dumps(payload, indent=2, default=_jsonable) + "\n")
    print(f"wrote {path}")


def _jsonable(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o)}")


def print_table(headers, rows, title: str | None = None) -> None:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    print("  ".join(str(h).rjust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def _fmt(c) -> str:
    if isinstance(c, (float, np.floating)):
        a = abs(float(c))
        if a == 0.0:
            return "0"
        if a >= 1e4 or a < 1e-3:
            return f"{float(c):.3e}"
        return f"{float(c):.4g}" if a < 100 else f"{float(c):.1f}"
    return str(c)


def pyplot():
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


BENCH_COARSE = "analytical"  # the coarse model of the papers' benches (paper 000)


def add_model_arguments(p) -> None:
    """``--coarse`` and ``--fine``: the Parareal propagators of a bench, any registered model of the role."""
    from ..core.models.registry import DEFAULT_FINE, FINE, coarse_choices, names  # noqa: PLC0415
    # the benches reproduce the papers' tables, made with paper 000's analytical coarse model (the README's figures);
    # the stack's default is auto (registry.DEFAULT_COARSE): pass --coarse auto to measure it
    p.add_argument("--coarse", default=BENCH_COARSE, choices=coarse_choices(),
                   help=f"coarse model inside Parareal (default {BENCH_COARSE}, the papers'; auto: the stack's)")
    p.add_argument("--fine", default=DEFAULT_FINE, choices=names(FINE), help="fine model inside Parareal")


def convergence_axes(ax, legend_size: int = 8) -> None:
    """Label a Parareal convergence plot: iteration k against the trajectory RMS error (log axis, exact zeros drawn
    at 1e-4 mm)."""
    ax.set_xlabel("Parareal iteration k")
    ax.set_ylabel("trajectory RMS error (mm), 0 drawn at 1e-4")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_figure(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
    print(f"wrote {path}")


def interleaved_times(fns, repeats: int, warmup: int = 1) -> np.ndarray:
    """(repeats, len(fns)) wall times, the functions run round-robin: a slow phase of a shared machine (CPU
    frequency, a neighbour's load) then hits every function alike, so per-round ratios stay meaningful."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = np.empty((repeats, len(fns)))
    for r in range(repeats):
        for j, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            times[r, j] = time.perf_counter() - t
    return times


def median_time(fn, repeats: int, warmup: int = 1) -> float:
    return float(np.median(interleaved_times([fn], repeats, warmup)))
