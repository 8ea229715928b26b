"""``parapush soak --seeds N`` and ``parapush soak --robot --seeds N``: the soak's seeds S .. S+N-1 (S = ``--seed``)
as one study of the engine (``parapush_ros.tools.study``), each seed one unit.

A unit is one whole soak (``soak.run_soak``, or ``soak_robot.run_robot_soak`` with ``--robot``: its own ``ros2
launch`` and stand-in cell) for its seed, with

* its own output directory ``<out>/seed_<s>/``: the soak's JSON and PNG as a single run writes them (``soak.json`` /
  ``soak_robot.json``, the robot soak's launch logs), kept;
* its own ROS domain: ``ROS_DOMAIN_ID`` = B + (s - S), wrapped into 1..101 (the ids whose Fast DDS ports are valid),
  with B = ``--domain-id``, else the caller's ``ROS_DOMAIN_ID`` (else 0), and discovery on this host only
  (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` unless set): units running at once never meet on DDS. While it runs
  the unit holds ``/tmp/parapush-ros-domain-<id>.lock``, the lock a test run holds on its domain (test/conftest.py);
  when another process on this host holds that id's lock, the unit takes the next id free of one and its result
  says which (``domain_id``);
* its CPU need declared: a soak is real time and load-sensitive (stop times, the real-time factor and goals reached
  depend on the cores it gets when it needs them), so a unit claims ``CPUS`` = 2 cores, at most this machine's
  (``--cpus-per-seed`` overrides). The sim soak's process averages about 0.6 of a core, but its world, planner and
  executor threads wake at once, in bursts; the robot soak is six processes doing the same. On a 2-core node a soak
  has the node to itself: no two soaks share the cores they are measured on.

The study directory is ``<out>/seeds_study`` (manifest ``study.json``: the soak's settings, so a changed one in the
same ``--out`` is refused by name; ``units/seed=<s>.json``: each seed's whole JSON, written as it finishes;
``study.log``). A re-run resumes: finished seeds are read back, not run again; more seeds extend the study. A soak
that fails its criteria is a finished unit (its failures are its result); a unit whose soak could not run (the stack
never ready, a crash) is retried (``--retries``) and otherwise reported by name.

Then ``<out>/soak.json`` (``--robot``: ``soak_robot.json``; or ``--json``) holds the soak over all seeds, figures
named as in one soak's JSON: counts are totals over the seeds (unsafe commands, exceptions, goals per outcome or per
fault kind, hostile requests refused, ...), the worst of maxima under ``worst`` (stop times, RSS growth),
``spread`` has mean / std / min / max and the per-seed values of the run's measured quantities (wall and sim time,
real-time factor, stop time, RSS growth, twist rate), ``per_seed`` each seed's headline figures and its JSON, and
``failures`` each failed seed's failures, prefixed by its seed. A PNG of the figures per seed beside it. Exit status
non-zero when any seed failed.
"""
from __future__ import annotations

import errno
import fcntl
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from ..arguments import positive_int

CPUS = {"sim": 2, "robot": 2}  # cores a soak claims (module docstring)
DOMAIN_IDS = (1, 101)  # ROS domain ids a unit may take: Fast DDS's ports are valid up to 101; 0 is everyone's default
STUDY_DIR = "seeds_study"

# figures of the combined JSON, by mode: summed over seeds; the worst (max) over seeds; spread (mean, std, ...)
TOTALS = {
    "sim": ("unsafe_commands", "unsafe_outputs", "estop_leaks", "nonfinite_from_planner", "nonfinite_outputs",
            "stops_without_zero", "exceptions", "goals", "events", "commands", "outputs", "nonzero_while_state_bad",
            "commander_status_changes", "hostile_requests.count", "hostile_requests.refused",
            "hostile_messages.count", "health_checks", "stop_events.count", "stop_events.by_kind.*.count",
            "stop_events.by_kind.*.timed", "stop_events.by_kind.*.superseded"),
    "robot": ("unsafe_commands", "nonzero_after_stop", "param_sets_ignored", "param_sets", "clock_faults",
              "faults_during_push", "goals_reached", "hostile.count", "hostile.refused", "teleop", "exceptions",
              "twists_received", "fault_free.sent", "fault_free.reached", "fault_free.standin_ran",
              "fault_free.reached_standin_ran", "estops_unasked.count", "estops_unasked.explained",
              "goal_answers_lost"),
}
WORST = {
    "sim": ("max_stop_time_s", "stop_events.by_kind.*.max_s", "worst_reaction_within_allowance_s", "rss_growth_mb"),
    "robot": ("rss_growth_mb",),
}
SPREAD = {
    "sim": ("wall_time_s", "startup_wall_s", "sim_time_s", "real_time_factor", "max_stop_time_s", "rss_growth_mb"),
    "robot": ("wall_time_s", "twist_rate_hz"),
}
SAFETY = {  # the counts a clean soak has at zero (its failures), per seed in the PNG
    "sim": ("unsafe_commands", "unsafe_outputs", "estop_leaks", "nonfinite_from_planner", "nonfinite_outputs",
            "stops_without_zero", "exceptions"),
    "robot": ("unsafe_commands", "nonzero_after_stop", "param_sets_ignored", "exceptions"),
}
HEADLINE = {  # per_seed: each seed's figures that the table prints
    "sim": ("unsafe_commands", "unsafe_outputs", "estop_leaks", "exceptions", "max_stop_time_s", "rss_growth_mb",
            "real_time_factor", "goals"),
    "robot": ("unsafe_commands", "nonzero_after_stop", "param_sets_ignored", "exceptions", "wall_time_s"),
}


def add_arguments(p) -> None:
    """``--seeds``, ``--domain-id``, ``--cpus-per-seed`` and the engine's ``--workers`` / ``--ray`` / ``--retries``."""
    from .study import add_arguments as study_arguments  # noqa: PLC0415
    p.add_argument("--seeds", type=positive_int, default=None, metavar="N",
                   help="run seeds S..S+N-1 (S = --seed) as units of the study engine, each soak in its own ROS domain "
                        "and <out>/seed_<s>; <out>/soak.json (--robot: soak_robot.json) then holds totals, worst "
                        "values and mean/std over the seeds; a re-run resumes (default: one soak, as before)")
    p.add_argument("--domain-id", type=int, default=None, metavar="B",
                   help="with --seeds: seed S+k runs in ROS domain B+k (wrapped into 1..101; default B: "
                        "$ROS_DOMAIN_ID)")
    p.add_argument("--cpus-per-seed", type=int, default=None, metavar="C",
                   help=f"with --seeds: cores a seed's soak claims (default: {CPUS['sim']}, --robot "
                        f"{CPUS['robot']}, at most this machine's)")
    study_arguments(p, "with --seeds: seeds")


def settings(args) -> dict:
    """What decides a soak's result (the study's manifest): not the seeds, nor where and how the units run."""
    from .soak import PLANNER_OVERRIDES  # noqa: PLC0415
    mode = "robot" if args.robot else "sim"
    dt = args.control_duration or (0.1 if args.robot else PLANNER_OVERRIDES["control_duration"])
    cfg = {"mode": mode, "minutes": args.minutes, "scene": args.scene, "control_duration": dt}
    if args.robot:  # the stack's planner and the fault mix decide a robot soak's result too
        cfg.update(planner=args.planner or "fast", fault_free=bool(args.fault_free))
    return cfg


def domain_id(base: int, k: int) -> int:
    """The ROS domain of the k-th seed (k = s - S): ``base + k`` wrapped into ``DOMAIN_IDS``."""
    lo, hi = DOMAIN_IDS
    return lo + (base - lo + k) % (hi - lo + 1)


@contextmanager
def claimed_domain(preferred: int):
    """Hold ``/tmp/parapush-ros-domain-<id>.lock`` for ``preferred`` (or, when another process holds it, the next id
    whose lock is free) while the block runs; yields the id."""
    lo, hi = DOMAIN_IDS
    for k in range(hi - lo + 1):
        domain = lo + (preferred - lo + k) % (hi - lo + 1)
        fd = os.open(os.path.join(tempfile.gettempdir(), f"parapush-ros-domain-{domain}.lock"),
                     os.O_CREAT | os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                continue
            raise
        try:
            yield domain
        finally:
            os.close(fd)  # releases the lock
        return
    raise RuntimeError(f"every ROS domain id {lo}..{hi} is locked by another process on this host")


@contextmanager
def _environment(**values):
    """``os.environ`` with ``values`` set (None: unset) for the block, then as it was (a Ray worker runs many units)."""
    def apply(env: dict):
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    saved = {k: os.environ.get(k) for k in values}
    try:
        apply(values)
        yield
    finally:
        apply(saved)


def soak_unit(context: dict, unit) -> dict:
    """The study unit: the soak for seed ``unit["seed"]`` in ``<out>/seed_<s>``, in its own ROS domain. A soak that
    could not run (SystemExit: the stack never became ready, ``ros2 launch`` missing) raises RuntimeError, which the
    engine retries and reports by the seed's name."""
    s, cfg = unit["seed"], context["settings"]
    out = Path(context["out"]) / f"seed_{s}"
    with claimed_domain(context["domains"][str(s)]) as domain:
        discovery = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or "LOCALHOST"
        with _environment(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE=discovery):
            print(f"parapush soak --seeds: seed {s} in ROS domain {domain} -> {out}", flush=True)
            try:
                if cfg["mode"] == "robot":
                    from .soak_robot import run_robot_soak  # noqa: PLC0415
                    summary = run_robot_soak(cfg["minutes"], s, cfg["scene"], cfg["control_duration"], out, None,
                                             cfg["planner"], cfg["fault_free"])
                else:
                    from .soak import run_soak  # noqa: PLC0415
                    summary = run_soak(cfg["minutes"], s, cfg["scene"], out, None, context["status_period"],
                                       control_duration=cfg["control_duration"])
            except SystemExit as e:  # BaseException: the engine must see it as the unit's failure, named by seed
                raise RuntimeError(f"seed {s}: {e}") from None
    name = "soak_robot.json" if cfg["mode"] == "robot" else "soak.json"
    return {**summary, "domain_id": domain, "json": str(out / name)}


def run_seeds(args) -> dict:
    """``parapush soak [--robot] --seeds N``: the seeds as a study, then the soak over them (module docstring);
    SystemExit naming each failed seed's failures."""
    from .bench.common import write_json  # noqa: PLC0415
    from .study import Study, Unit, cores  # noqa: PLC0415
    n = args.seeds
    if n < 1:
        raise ValueError(f"--seeds: must be >= 1, got {n}")
    cfg = settings(args)
    mode = cfg["mode"]
    if mode == "robot":
        from .soak_robot import launch_available  # noqa: PLC0415
        why = launch_available()
        if why:
            raise SystemExit(f"parapush soak --robot: {why}")
    cpus = args.cpus_per_seed if args.cpus_per_seed is not None else min(CPUS[mode], cores())
    if cpus < 1:
        raise ValueError(f"--cpus-per-seed: must be >= 1, got {cpus}")
    base = args.domain_id
    if base is None:
        env = os.environ.get("ROS_DOMAIN_ID", "") or "0"
        try:
            base = int(env)
        except ValueError:
            raise ValueError(f"$ROS_DOMAIN_ID: {env!r} is not a domain id (or give --domain-id)") from None
    if base < 0:
        raise ValueError(f"--domain-id: must be >= 0, got {base}")
    out = Path(args.out)
    seeds = list(range(args.seed, args.seed + n))
    context = {"settings": cfg, "out": str(out), "status_period": args.status_period,
               "domains": {str(s): domain_id(base, k) for k, s in enumerate(seeds)}}
    units = [Unit.of(cpus, seed=s) for s in seeds]
    kind = "soak --robot --seeds" if mode == "robot" else "soak --seeds"
    done = Study(out / STUDY_DIR, kind, cfg).run(units, soak_unit, context, args, desc=f"{kind} {n}")
    results = {u["seed"]: done[u.id] for u in units}
    summary = combine(results, mode)
    summary.update(cfg, study=str(out / STUDY_DIR))
    name = "soak_robot" if mode == "robot" else "soak"
    path = Path(args.json) if args.json else out / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    summary["png"] = str(plot(results, summary, out / f"{name}.png"))
    write_json(path, summary)
    print_table(summary)
    if summary["failures"]:
        raise SystemExit(f"parapush {kind}: FAILED: " + "; ".join(summary["failures"]))
    return summary


# ------------------------------------------------------------------------------------------------ over seeds
def _get(tree, path: str) -> dict:
    """{concrete path: value} of ``path`` (dotted; ``*``: every key at that level) in ``tree``."""
    found = {"": tree}
    for part in path.split("."):
        nxt = {}
        for prefix, node in found.items():
            if not isinstance(node, dict):
                continue
            for k in (node if part == "*" else [part]):
                if k in node:
                    nxt[f"{prefix}.{k}" if prefix else k] = node[k]
        found = nxt
    return found


def _set(tree: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for p in parents:
        tree = tree.setdefault(p, {})
    tree[last] = value


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _total(values: list):
    """Sum of numbers, or of nested dicts key by key (a key missing in a seed counts 0; texts left out)."""
    if values and all(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values for k in v))
        totals = {k: _total([v[k] for v in values if k in v]) for k in keys}
        return {k: v for k, v in totals.items() if v is not None}  # (a text, as a clock fault's example: left out)
    numbers = [v for v in values if _number(v) or isinstance(v, bool)]
    return sum(int(v) if isinstance(v, bool) else v for v in numbers) if numbers else None


def _worst(values: list):
    """Max of numbers (None and non-finite left out), or of nested dicts key by key."""
    if values and all(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values for k in v))
        return {k: _worst([v[k] for v in values if k in v]) for k in keys}
    numbers = [v for v in values if _number(v)]
    return max(numbers) if numbers else None


def combine(results: dict, mode: str) -> dict:
    """The soak over seeds from each seed's JSON ({seed: summary}): ``TOTALS`` summed (at the keys one soak's JSON
    has), ``worst`` (``WORST``: max), ``spread`` (``SPREAD``: ``bench.common.summarise_seeds``), ``per_seed`` and
    ``failures`` (each prefixed by its seed)."""
    seeds = list(results)
    out = {"seeds": seeds, "failed_seeds": [s for s in seeds if results[s]["failures"]]}
    for path in TOTALS[mode]:
        for where in dict.fromkeys(w for r in results.values() for w in _get(r, path)):
            _set(out, where, _total([_get(r, where)[where] for r in results.values() if where in _get(r, where)]))
    out["worst"] = {}
    for path in WORST[mode]:
        for where in dict.fromkeys(w for r in results.values() for w in _get(r, path)):
            _set(out["worst"], where, _worst([_get(r, where)[where] for r in results.values()
                                              if where in _get(r, where)]))
    from .bench.common import summarise_seeds  # noqa: PLC0415 - the benches' mean / std / min / max / per seed
    spread = summarise_seeds({s: {k: r[k] for k in SPREAD[mode] if _number(r.get(k))} for s, r in results.items()})
    out["spread"] = {k: spread[k] for k in SPREAD[mode] if k in spread}
    out["per_seed"] = {str(s): {**{k: r[k] for k in HEADLINE[mode] if k in r}, "failures": r["failures"],
                                "domain_id": r.get("domain_id"), "json": r.get("json")} for s, r in results.items()}
    out["failures"] = [f"seed {s}: {f}" for s, r in results.items() for f in r["failures"]]
    return out


def print_table(s: dict) -> None:
    from .bench.common import print_table as table  # noqa: PLC0415
    mode, seeds = s["mode"], s["seeds"]
    rows = [(k, s[k]) for k in TOTALS[mode] if "." not in k and k in s and not isinstance(s[k], dict)]
    if mode == "sim":
        rows += [("goals", ", ".join(f"{k} {v}" for k, v in s.get("goals", {}).items())),
                 ("hostile requests refused", f"{s['hostile_requests']['refused']} / {s['hostile_requests']['count']}"),
                 ("health checks ok", f"{s['health_checks'].get('ok', 0)} / {s['health_checks'].get('sent', 0)}"),
                 ("max stop time (worst)", f"{s['worst'].get('max_stop_time_s', 0.0):.3f} s"),
                 ("RSS growth (worst)", f"{s['worst'].get('rss_growth_mb', 0.0):+.1f} MB")]
    else:
        rows += [(f"goals reached: {k}", f"{v['reached']} / {v['sent']}") for k, v in s["goals_reached"].items()]
        rows += [("hostile sets refused", f"{s['hostile']['refused']} / {s['hostile']['count']}"),
                 ("RSS growth (worst, MB)", ", ".join(f"{k} {v}" for k, v in s["worst"]["rss_growth_mb"].items()))]
    rows += [(f"{k} (mean +- std)", f"{v['mean']:.3g} +- {v['std']:.2g}") for k, v in s["spread"].items()]
    rows.append(("result", f"FAILED (seeds {', '.join(map(str, s['failed_seeds']))})" if s["failed_seeds"] else "ok"))
    title = f"parapush soak{' --robot' if mode == 'robot' else ''}: {s['minutes']:g} min, seeds {seeds[0]}..{seeds[-1]}"
    table(["quantity (totals over seeds unless said)", "value"], rows, title=title)
    for f in s["failures"]:
        print(f"  FAILED: {f}")


def plot(results: dict, summary: dict, path: Path) -> Path:
    """Per seed: the safety counts (stacked: all zero on a clean soak), the goals (per outcome, or reached / sent
    per fault kind summed over seeds), and the measured quantities."""
    import numpy as np  # noqa: PLC0415

    from .bench.common import pyplot, save_figure  # noqa: PLC0415
    plt = pyplot()
    mode, seeds = summary["mode"], [str(s) for s in results]
    x = np.arange(len(seeds))
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.5))
    safety = [k for k in SAFETY[mode] if all(_number(r.get(k)) for r in results.values())]
    bottom = np.zeros(len(seeds))
    for k in safety:
        v = np.array([r[k] for r in results.values()], dtype=float)
        if v.any():
            ax1.bar(x, v, bottom=bottom, label=k)
            bottom += v
    ax1.set_xticks(x, seeds)
    ax1.set_xlabel("seed")
    ax1.set_ylim(0, max(1.0, bottom.max() * 1.1))
    ax1.set_title("safety counts per seed (0 everywhere: clean)", fontsize=9)
    if bottom.any():
        ax1.legend(fontsize=7)
    if mode == "sim":
        outcomes = list(dict.fromkeys(k for r in results.values() for k in r["goals"]))
        bottom = np.zeros(len(seeds))
        for k in outcomes:
            v = np.array([r["goals"].get(k, 0) for r in results.values()], dtype=float)
            ax2.bar(x, v, bottom=bottom, label=k)
            bottom += v
        ax2.set_xticks(x, seeds)
        ax2.set_xlabel("seed")
        ax2.set_title("goal outcomes per seed", fontsize=9)
    else:
        kinds = list(summary["goals_reached"])
        k = np.arange(len(kinds))
        ax2.bar(k - 0.2, [summary["goals_reached"][f]["sent"] for f in kinds], 0.4, label="sent")
        ax2.bar(k + 0.2, [summary["goals_reached"][f]["reached"] for f in kinds], 0.4, label="reached")
        ax2.set_xticks(k, kinds, rotation=60, ha="right", fontsize=7)
        ax2.set_title("goals per fault kind, summed over seeds", fontsize=9)
    ax2.legend(fontsize=7)
    for key, spread in summary["spread"].items():
        values = [spread["per_seed"].get(s, np.nan) for s in seeds]
        scale = max(abs(v) for v in values if np.isfinite(v)) or 1.0
        ax3.plot(x, np.array(values) / scale, "o-", label=f"{key} (/ {scale:.3g})")
    ax3.set_xticks(x, seeds)
    ax3.set_xlabel("seed")
    ax3.set_title("measured per seed (each scaled by its max)", fontsize=9)
    ax3.legend(fontsize=7)
    failed = summary["failed_seeds"]
    fig.suptitle(f"parapush soak{' --robot' if mode == 'robot' else ''}: {len(seeds)} seeds, "
                 f"{summary['minutes']:g} min each, " + (f"FAILED seeds {failed}" if failed else "every seed clean"))
    fig.tight_layout()
    save_figure(fig, path)
    return path
