"""Shared plumbing of the benchmarks: output paths, tables, JSON, plots and machine facts (progress: tqdm)."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from ...arguments import positive_int
from ...plots import pyplot, save_figure  # noqa: F401 (the benches' plots: one home, shared with parapush sim)
from ..study import jsonable


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
    """The bench's JSON, with the machine and the command; a NaN or infinite figure is written as null (JSON has
    neither, and readers other than Python's refuse the file)."""
    payload = {"machine": machine_info(), "command": " ".join(["parapush"] + sys.argv[1:]), **payload}
    path.write_text(json.dumps(_finite_or_null(payload), indent=2, default=jsonable, allow_nan=False) + "\n")
    print(f"wrote {path}")


def _finite_or_null(tree):
    """``tree`` with every non-finite float (NumPy's too, arrays included) replaced by None."""
    if isinstance(tree, dict):
        return {k: _finite_or_null(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_finite_or_null(v) for v in tree]
    if isinstance(tree, np.ndarray):
        return _finite_or_null(tree.tolist())
    if isinstance(tree, (float, np.floating)) and not np.isfinite(tree):
        return None
    return tree


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


BENCH_COARSE = "analytical"  # the coarse model of the papers' benches (paper 000)


def add_model_arguments(p) -> None:
    """``--coarse`` and ``--fine``: the Parareal propagators of a bench, any registered model of the role."""
    from ...core.models.registry import DEFAULT_FINE, FINE, coarse_choices, names  # noqa: PLC0415
    # the benches reproduce the papers' tables, made with paper 000's analytical coarse model (the README's figures);
    # the stack's default is auto (registry.DEFAULT_COARSE): pass --coarse auto to measure it
    p.add_argument("--coarse", default=BENCH_COARSE, choices=coarse_choices(),
                   help=f"coarse model inside Parareal (default {BENCH_COARSE}, the papers'; auto: the stack's)")
    p.add_argument("--fine", default=DEFAULT_FINE, choices=names(FINE), help="fine model inside Parareal")


def add_model_option_argument(p) -> None:
    """``--model-option MODEL.OPTION=VALUE`` (repeatable), read by ``registry.parse_model_options``."""
    p.add_argument("--model-option", action="append", default=[], metavar="MODEL.OPTION=VALUE",
                   help="a model's option (`parapush models` lists them), e.g. "
                        "quasistatic_convex.limit_surface=integrated")


def convergence_axes(ax, legend_size: int = 8) -> None:
    """Label a Parareal convergence plot: iteration k against the trajectory RMS error (log axis, exact zeros drawn
    at 1e-4 mm)."""
    ax.set_xlabel("Parareal iteration k")
    ax.set_ylabel("trajectory RMS error (mm), 0 drawn at 1e-4")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)


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


# ------------------------------------------------------------------------------------------------ several seeds
SEED_KEYS = ("seed",)  # leaves that differ by construction: not summarised


def add_seeds_argument(p) -> None:
    """``--seeds N``: run the bench for seeds S .. S+N-1 (S = ``--seed``) and report every figure as mean and
    spread (``seeded``)."""
    p.add_argument("--seeds", type=positive_int, default=None, help="run seeds S..S+N-1 (S = --seed) and report each "
                   "figure as mean and std over them, the per-seed values in the JSON (default: one seed, as before)")


FIGURE_ARRAY_MAX = 64  # numbers: a larger array in a result is data (a grid, a path), not figures to summarise


def _number(v) -> bool:
    return isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating))


def _numbers_in(tree) -> int | None:
    """How many numbers a (nested) list of numbers holds; None if it holds anything else."""
    if _number(tree) or tree is None:
        return 1
    if isinstance(tree, (list, tuple)):
        counts = [_numbers_in(v) for v in tree]
        return None if None in counts else sum(counts)
    return None


def numeric_leaves(tree, prefix: str = "", lengths: dict | None = None) -> dict:
    """{"a.b.c": value} of the numbers and booleans in nested dicts, a (nested) list of at most
    ``FIGURE_ARRAY_MAX`` numbers (a figure per k, per object and k ...) as "a.b[0]", "a.b[0][1]" ...; lists of
    anything else (the runs), larger arrays and strings are left out. A non-finite number is left out too
    (``summarise_seeds`` counts the seeds that have each figure). ``lengths`` (if given) receives each expanded
    list's length by its key ("a.b": 2), so that ``summarise_seeds`` can tell a figure per k from per-run data."""
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(numeric_leaves(v, f"{prefix}{k}.", lengths))
    elif isinstance(tree, (list, tuple)) and prefix and 0 < (_numbers_in(tree) or 0) <= FIGURE_ARRAY_MAX:
        if lengths is not None:
            lengths[prefix[:-1]] = len(tree)
        for i, v in enumerate(tree):
            out.update(numeric_leaves(v, f"{prefix[:-1]}[{i}].", lengths))
    elif _number(tree) and prefix:
        key = prefix[:-1]
        if key.rsplit(".", 1)[-1] not in SEED_KEYS and np.isfinite(float(tree)):
            out[key] = float(tree)
    return out


def summarise_seeds(results: dict) -> dict:
    """{figure: {"mean", "std", "min", "max", "seeds", "per_seed": {seed: value}}} over the results by seed, for
    every numeric leaf of any seed's result (a boolean's mean: the share of seeds where it held; ``seeds``: how many
    seeds have a finite value of it, the others left out of the mean). A list whose length differs between seeds
    (one number per action, per plan ...) is per-run data whose i-th elements are not the same figure: left out."""
    lengths = {s: {} for s in results}
    leaves = {s: numeric_leaves(r, lengths=lengths[s]) for s, r in results.items()}
    varying = {k for k in set().union(*lengths.values())
               if len({n[k] for n in lengths.values() if k in n}) > 1}

    def per_run(key: str) -> bool:  # under a list that varies: "a.b[3]", "a.b[0][2]" of a varying "a.b" or "a.b[0]"
        return any(key.startswith(v + "[") for v in varying)

    keys = [k for k in dict.fromkeys(k for d in leaves.values() for k in d) if not per_run(k)]
    summary = {}
    for k in keys:
        per = {str(s): d[k] for s, d in leaves.items() if k in d}
        v = np.array(list(per.values()))
        summary[k] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                      "min": float(v.min()), "max": float(v.max()), "seeds": len(v), "per_seed": per}
    return summary


# options of a bench that only say how and where it runs, not what it computes (not part of a study's settings)
# (the seed is a setting: another seed in the same --out would reuse this one's units)
EXECUTION_KEYS = ("func", "command", "bench", "out", "json", "seeds", "workers", "ray", "retries", "verbose",
                  "own_process")


def _plain(args):
    """A copy of the command's arguments without the handler (``func``): what a study ships to its workers."""
    import argparse  # noqa: PLC0415
    return argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "func"})


def study_settings(args) -> dict:
    """What a bench's options decide about its result: every option but ``EXECUTION_KEYS`` (its manifest)."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in EXECUTION_KEYS
            and (v is None or isinstance(v, (bool, int, float, str, list, tuple)))}


def seed_unit(context: dict, unit) -> dict:
    """The study unit of ``seeded``: the bench's ``run_one`` for seed ``unit["seed"]`` in ``<out>/seed_<s>``."""
    import copy  # noqa: PLC0415
    a = copy.copy(context["args"])
    s = unit["seed"]
    a.seed, a.seeds, a.out, a.json = s, None, str(Path(context["out"]) / f"seed_{s}"), None
    if context["per_seed_args"] is not None:
        context["per_seed_args"](a, s)
    if context["unit_threads"] and getattr(a, "threads", None) == 0:  # "all cores": a unit's are the ones it declared
        a.threads = unit.cpus
    return context["run_one"](a)


def seeded(run_one, per_seed_args=None, name: str | None = None, units: bool = True):
    """``run(args)`` of a bench with ``--seeds``: without it (or 1) ``run_one(args)`` as before; with N > 1 the bench
    runs for seeds S .. S+N-1, each with its own output directory ``<out>/seed_<s>`` (its JSON and plots there;
    ``per_seed_args(args, seed)`` adjusts anything else), then ``<out>/bench_<name>.json`` (or ``--json``) holds
    ``seeds``, ``summary`` (``summarise_seeds``: mean, std, per-seed values of every figure) and ``per_seed`` (each
    seed's whole result), and a table prints mean +- std per figure.

    The seeds are a study of the engine (``parapush_ros.tools.study``): each seed a unit (a Ray task of one CPU with
    ``--workers`` / ``--ray``) whose result is kept in ``<out>/<bench>_seeds_study`` (another bench's seeds may share
    the ``--out``), so a re-run resumes (finished seeds are read back, more seeds extend) and other options in the
    same ``--out`` are refused by name. ``units=False``: the
    bench's own run is a study of smaller units (``bench mpc``, ``bench dgoc``), so the seeds run one after another,
    each seed's study resuming in its own directory."""
    from ..study import Study, Unit  # noqa: PLC0415
    bench = name or run_one.__module__.rsplit(".", 1)[-1]

    def run(args):
        n = getattr(args, "seeds", None)
        if n is None or n == 1:
            return run_one(args)
        if n < 1:
            raise ValueError(f"--seeds must be >= 1, got {n}")
        path, out = output_paths(args, bench)
        seeds = list(range(args.seed, args.seed + n))
        context = {"args": _plain(args), "out": str(out), "per_seed_args": per_seed_args, "run_one": run_one,
                   "unit_threads": units}
        todo = [Unit.of(seed=s) for s in seeds]
        if units:
            settings = {k: v for k, v in study_settings(args).items() if k != "seed"}  # its units are the seeds
            done = Study(Path(out) / f"{bench}_seeds_study", f"bench {bench} --seeds", settings).run(
                todo, seed_unit, context, args, desc=f"bench {bench} seeds")
        else:
            done = {}
            for k, u in enumerate(todo):
                print(f"\n===== seed {u['seed']} ({k + 1} of {n}) =====")
                done[u.id] = seed_unit(context, u)
        results = {u["seed"]: done[u.id] for u in todo}
        summary = summarise_seeds(results)
        print_table(["figure", "mean +- std", "per seed"],
                    [[k, f"{_fmt(v['mean'])} +- {_fmt(v['std'])}" + (f" ({v['seeds']} of {n} seeds)"
                                                                     if v["seeds"] < n else ""),
                      " ".join(_fmt(v["per_seed"].get(str(s), "-")) for s in seeds)] for k, v in summary.items()],
                    title=f"over seeds {seeds[0]}..{seeds[-1]}: mean +- std (each seed's result in {out}/seed_<s>)")
        payload = {"seeds": seeds, "summary": summary, "per_seed": {str(s): r for s, r in results.items()}}
        write_json(path, payload)
        return payload

    return run
