"""The study engine: every long study and data generation of parapush runs its units here, on Ray or serially.

A *study* is a set of independent *units* (a scene x model x world of ``bench mpc``, a batch of targets of ``bench
dgoc``, a data chunk of ``datagen``, a seed of a ``--seeds N`` bench) computed by one function from the study's
settings and the unit alone. The engine keeps a *study directory*:

* ``study.json``, the manifest: the study's kind and settings. A run with other settings in the same directory is
  refused, naming the first field that differs (a changed setting is another study: give another ``--out``);
  what only selects units (how many scenes, which models) is not a setting, so a larger run extends a study.
* one result file per finished unit, written atomically (a temporary file, then a rename): a killed run leaves
  whole units only, and a re-run (the same command) skips them — it resumes.

Execution (``--workers N``, ``--ray ADDRESS``, ``--retries R``, ``add_arguments``):

* ``--workers 1`` (without ``--ray``; also a local study with one unit left to run): the units run one after
  another in this process, no Ray. Every unit is a pure function of (settings, unit), its random generators seeded
  from (study seed, unit), so the results are the same as with Ray on any number of workers (timings aside).
* otherwise each unit is a Ray task declaring its CPU need (``Unit.cpus``: 1 for most units, a real-time planner's
  cores for ``bench mpc --realtime``, so a timing study never shares the cores it measures): a local Ray with
  ``--workers`` CPUs (default: ``PARAPUSH_WORKERS`` or every core of this machine), or the cluster at ``--ray
  ADDRESS`` (or ``RAY_ADDRESS``; ``auto``: the cluster this machine belongs to).
* a unit whose worker dies (killed, out of memory, its node lost) is retried by Ray (``max_retries``), as is one
  that raises (``retry_exceptions``), up to ``--retries`` times; a unit that still fails is reported by name once
  every other unit has finished (their results are kept: fix the cause and re-run to do the failed ones only).
* results are written to the study directory as they arrive; progress (done / running / failed, time left) on
  stderr via tqdm.

Ray is imported only when a study runs on it: robot nodes never import it.

Test hook: ``PARAPUSH_STUDY_FAULT`` = ``kill:<unit id>:<marker file>`` makes that unit's worker process kill itself
(SIGKILL) the first time (the marker file records it), ``raise:<unit id>`` makes the unit raise on every attempt.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from ..arguments import nonnegative_int, positive_int

MANIFEST = "study.json"
LOG = "study.log"
FORMAT = "parapush-study/1"
MANIFEST_KEYS = ("format", "kind")  # what a manifest holds besides the settings
ENV_WORKERS = "PARAPUSH_WORKERS"
ENV_FAULT = "PARAPUSH_STUDY_FAULT"
DEFAULT_RETRIES = 2
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def cores() -> int:
    """The cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def add_arguments(p, what: str = "units") -> None:
    """``--workers``, ``--ray`` and ``--retries`` of a command that runs a study."""
    p.add_argument("--workers", type=positive_int, default=None,
                   help=f"{what} run in parallel on a local Ray (default: ${ENV_WORKERS}, else every core); 1: one "
                        f"after another in this process, without Ray (the same results)")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run on the Ray cluster at ADDRESS (head's host:port, or 'auto'); default: $RAY_ADDRESS, "
                        "else a local Ray with --workers CPUs")
    p.add_argument("--retries", type=nonnegative_int, default=DEFAULT_RETRIES,
                   help=f"times a unit whose worker died or that raised is tried again (default {DEFAULT_RETRIES})")


@dataclass(frozen=True)
class Unit:
    """One unit of a study: ``key`` (ordered (name, value) pairs) identifies it; ``cpus`` is what it needs."""

    key: tuple
    cpus: int = 1

    @classmethod
    def of(cls, cpus: int = 1, **key) -> Unit:
        return cls(tuple(key.items()), int(cpus))

    def __getitem__(self, name):
        return dict(self.key)[name]

    @property
    def id(self) -> str:
        """Stable id from the key, usable as a file name: ``scene=3.model=fine.world=nominal``."""
        return ".".join(f"{k}={_SAFE.sub('_', str(v))}" for k, v in self.key)

    def seed(self, study_seed: int) -> list:
        """Seed sequence entropy for this unit's own random generators: (study seed, unit id)."""
        return [int(study_seed), zlib.crc32(self.id.encode())]


class StudyError(RuntimeError):
    """Units that failed after their retries, by name (``failed``: {unit id: error}); the others are stored."""

    def __init__(self, kind: str, failed: dict, root: Path):
        self.failed = failed
        lines = "\n".join(f"  {u}: {e}" for u, e in failed.items())
        super().__init__(f"{kind}: {len(failed)} unit(s) failed after their retries (the other units' results are "
                         f"in {root}; re-run the same command to retry only these):\n{lines}")


def check_settings(path: Path, settings: dict, defaults: dict | None = None, what: str = "study",
                   exact: bool = False) -> dict | None:
    """The manifest at ``path`` (or None if there is none) after checking that it holds ``settings`` (compared as
    JSON); ``defaults`` stand for settings that files written before they existed lack. A difference is a
    ``ValueError`` naming the field. ``exact``: the manifest holds nothing but the settings (``Study``'s), so one
    it has and this run lacks (an option given then and not now) is a difference too."""
    if not path.exists():
        return None
    try:
        old = {**(defaults or {}), **json.loads(path.read_text())}
    except ValueError as e:
        raise ValueError(f"{path}: unreadable manifest ({e}); remove it or use another --out") from None
    extra = [k for k in old if k not in settings and k not in MANIFEST_KEYS] if exact else []
    for k, v in [*settings.items(), *((k, None) for k in extra)]:
        where = _first_difference(k, old.get(k), v)
        if where is not None:
            name, was, now = where
            raise ValueError(f"{path}: existing {what} has {name} = {was!r}, this run asks for {now!r}; use the "
                             f"same settings to resume or extend it, or another --out for a new {what}")
    return old


def _first_difference(name: str, old, new):
    """(dotted name, old, new) of the first leaf where two settings differ (compared as JSON), or None."""
    if _canon(old) == _canon(new):
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(new) + [k for k in old if k not in new]:
            d = _first_difference(f"{name}.{k}", old.get(k), new.get(k))
            if d is not None:
                return d
    return name, old, new


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _canon(v) -> str:
    return json.dumps(v, sort_keys=True, default=jsonable)


def jsonable(o):
    """``json.dumps``' ``default`` for the NumPy values results hold (one home: the benches' JSON use it too)."""
    import numpy as np  # noqa: PLC0415
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o)}")


@dataclass
class Store:
    """Where a study keeps a unit's result: ``units/<id>.json`` by default; a dataset passes its own file names
    and formats (``datagen``: ``chunk_NNNNN.npz``)."""

    path: Callable = None  # (root, unit) -> Path
    save: Callable = None  # (path, result) -> None, atomic
    load: Callable = None  # (path) -> result
    done: Callable = None  # (path) -> bool: a whole result

    def __post_init__(self):
        self.path = self.path or (lambda root, u: Path(root) / "units" / f"{u.id}.json")
        self.save = self.save or _save_json
        self.load = self.load or (lambda p: json.loads(p.read_text()))
        self.done = self.done or _json_ok


def _save_json(path: Path, result) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(result, indent=1, default=jsonable) + "\n")


def _json_ok(p: Path) -> bool:
    try:
        json.loads(p.read_text())
        return True
    except (OSError, ValueError):
        return False


@dataclass
class Study:
    """A study directory ``root`` of ``kind`` with ``settings`` (its manifest; ``defaults`` as in
    ``check_settings``). ``manifest`` names the manifest file (``study.json``; a dataset: ``dataset.json``)."""

    root: Path
    kind: str
    settings: dict
    store: Store = field(default_factory=Store)
    manifest: str = MANIFEST
    defaults: dict | None = None

    def __post_init__(self):
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / self.manifest
        old = check_settings(path, self.settings, self.defaults, f"{self.kind} study", self.manifest == MANIFEST)
        if old is None and self.manifest == MANIFEST:
            write_atomic(path, json.dumps({"format": FORMAT, "kind": self.kind, **self.settings}, indent=2,
                                          default=jsonable) + "\n")

    def path(self, unit: Unit) -> Path:
        return self.store.path(self.root, unit)

    def done(self, unit: Unit) -> bool:
        return self.store.done(self.path(unit))

    def load(self, unit: Unit):
        return self.store.load(self.path(unit))

    def finished(self, unit: Unit, result, seconds: float, where: str) -> None:
        """Store a finished unit's result, then log it in ``study.log`` (unit id, seconds, node:host:pid): the
        audit of which unit ran where, each finished unit once."""
        self.store.save(self.path(unit), result)
        with open(self.root / LOG, "a") as f:
            f.write(f"{unit.id}\t{seconds:.3f}\t{where}\n")

    def log(self) -> list[tuple[str, float, str]]:
        """``study.log``'s entries: (unit id, seconds, where), in the order the units finished."""
        path = self.root / LOG
        if not path.exists():
            return []
        return [(u, float(t), w) for u, t, w in (line.split("\t") for line in path.read_text().splitlines())]

    def run(self, units: Iterable[Unit], fn: Callable, context, args=None, desc: str | None = None) -> dict:
        """Compute every unit of ``units`` not yet in the directory with ``fn(context, unit)`` (a module-level
        function: Ray ships it by reference) and return {unit id: result} of all of them, in ``units``' order.
        ``args``: the command's ``--workers`` / ``--ray`` / ``--retries`` (``add_arguments``); None: serial."""
        units = list(units)
        ids = [u.id for u in units]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.kind}: two units share an id")
        todo = [u for u in units if not self.done(u)]
        workers, address, retries = _execution(args)
        if len(todo) == 1 and not address:
            workers = 1  # one unit: no local Ray to start for it (the same result either way)
        where = (f"on the Ray cluster {address}" if address else
                 "in this process, one unit after another" if workers == 1 else f"on a local Ray with {workers} CPUs")
        print(f"{self.kind}: {len(units)} units, {len(units) - len(todo)} done before, {len(todo)} to run {where} "
              f"-> {self.root}", file=sys.stderr, flush=True)
        failed = {}
        if todo:
            runner = _run_serial if workers == 1 and not address else _run_ray
            failed = runner(self, todo, fn, context, workers, address, retries, desc or self.kind)
        if failed:
            raise StudyError(self.kind, failed, self.root)
        return {u.id: self.load(u) for u in units}


def _execution(args) -> tuple[int, str | None, int]:
    if args is None:
        return 1, None, 0
    workers = getattr(args, "workers", None)
    asked = workers is not None  # by --workers or $PARAPUSH_WORKERS, not by the machine's cores
    if workers is None:
        env = os.environ.get(ENV_WORKERS)
        asked = bool(env)
        try:
            workers = int(env) if env else cores()
        except ValueError:
            raise ValueError(f"${ENV_WORKERS}: {env!r} is not a number of workers") from None
    if workers < 1:
        raise ValueError(f"--workers: must be >= 1, got {workers}")
    retries = getattr(args, "retries", DEFAULT_RETRIES)
    if retries < 0:
        raise ValueError(f"--retries: must be >= 0, got {retries}")
    # --workers 1 (or $PARAPUSH_WORKERS=1) means this process without Ray: a RAY_ADDRESS in the environment does not
    # override it (--ray does); a machine of one core, without either, still goes to RAY_ADDRESS's cluster
    here = asked and workers == 1
    address = getattr(args, "ray", None) or (None if here else os.environ.get("RAY_ADDRESS")) or None
    return workers, address, retries


def _progress(study: Study, total: int, desc: str):
    from tqdm import tqdm  # noqa: PLC0415
    return tqdm(total=total, desc=desc, unit="unit", file=sys.stderr, dynamic_ncols=True)


def _fault(unit_id: str):
    """The test hook (module docstring), read by the driver and applied in the worker."""
    spec = os.environ.get(ENV_FAULT, "")
    parts = spec.split(":", 2)
    return tuple(parts) if len(parts) >= 2 and parts[1] == unit_id else None


def _execute(fn, context, unit: Unit, fault=None):
    """One unit, in whichever process runs it: thread pools sized to the unit's CPUs, the test hook, then ``fn``."""
    if fault is not None:
        if fault[0] == "kill" and not os.path.exists(fault[2]):
            Path(fault[2]).write_text(f"{os.getpid()}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        if fault[0] == "raise":
            raise RuntimeError(f"unit {unit.id}: fault injected by ${ENV_FAULT}")
    t0 = time.perf_counter()
    result = fn(context, unit)
    return result, time.perf_counter() - t0, _where()


def _where() -> str:
    """Which node and process ran a unit: the Ray node id inside a Ray worker, else ``local``."""
    node = "local"
    if "ray" in sys.modules:
        import ray  # noqa: PLC0415
        if ray.is_initialized():
            node = ray.get_runtime_context().get_node_id()
    return f"{node}:{socket.gethostname()}:{os.getpid()}"


def _run_serial(study, todo, fn, context, workers, address, retries, desc) -> dict:
    failed = {}
    with _progress(study, len(todo), desc) as bar:
        for u in todo:
            bar.set_postfix_str(f"running {u.id}, failed {len(failed)}")
            for attempt in range(retries + 1):
                try:
                    result, seconds, where = _execute(fn, context, u, _fault(u.id))
                    break
                except Exception as e:  # noqa: BLE001 - retried, then reported by the unit's name
                    err = f"{type(e).__name__}: {e}"
                    print(f"{study.kind}: unit {u.id} failed (attempt {attempt + 1} of {retries + 1}): {err}",
                          file=sys.stderr, flush=True)
            else:
                failed[u.id] = err
                bar.set_postfix_str(f"failed {len(failed)}")
                bar.update()
                continue
            study.finished(u, result, seconds, where)
            bar.update()
    return failed


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """A ``host:port`` head that nothing answers on is one line naming it, at once: Ray itself retries for minutes,
    printing its own warnings. (``auto`` and ``ray://`` addresses are left to Ray.)"""
    host, sep, port = address.rpartition(":")
    if not sep or address == "auto" or "://" in address or not port.isdigit():
        return
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1]:6379
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ValueError(f"--ray (or $RAY_ADDRESS) {address}: no Ray head answers there ({e.strerror or e}); start "
                         f"one with `ray start --head` or give its address") from None


def _run_ray(study, todo, fn, context, workers, address, retries, desc) -> dict:
    import ray  # noqa: PLC0415 (only studies import Ray)
    started = not ray.is_initialized()
    if started:
        kw = dict(include_dashboard=False, configure_logging=False, log_to_driver=True)
        if address:
            _check_reachable(address)
            ray.init(address=address, **kw)
        else:  # "local": a new instance of our own, never a cluster that happens to run on this machine
            ray.init(address="local", num_cpus=workers, **kw)
    try:
        capacity = max(1, int(ray.cluster_resources().get("CPU", 1)))
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        print(f"{study.kind}: Ray with {len(nodes)} node(s), {capacity} CPUs", file=sys.stderr, flush=True)
        need = max(u.cpus for u in todo)
        largest = max(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes)
        if need > largest:  # Ray would wait for such a node forever
            raise ValueError(f"{study.kind}: a unit needs {need} CPUs on one node, the largest node of the Ray "
                             f"cluster has {largest} (--workers, --threads, or the cluster's nodes)")
        task = ray.remote(_execute)
        ctx = ray.put(context)
        pending = {}
        for u in todo:
            ref = task.options(num_cpus=u.cpus, max_retries=retries, retry_exceptions=retries > 0,
                               name=f"{study.kind}:{u.id}").remote(fn, ctx, u, _fault(u.id))
            pending[ref] = u
        failed = {}
        with _progress(study, len(todo), desc) as bar:
            while pending:
                running = min(len(pending), max(1, capacity // need))
                bar.set_postfix_str(f"running {running}, queued {len(pending) - running}, failed {len(failed)}")
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=2.0)
                for ref in ready:
                    u = pending.pop(ref)
                    try:
                        result, seconds, where = ray.get(ref)
                    except Exception as e:  # noqa: BLE001 - Ray gave up after the retries: reported by name
                        failed[u.id] = f"{type(e).__name__}: {_first_line(e)}"
                        print(f"{study.kind}: unit {u.id} failed after {retries} retries: {failed[u.id]}",
                              file=sys.stderr, flush=True)
                    else:
                        study.finished(u, result, seconds, where)
                    bar.update()
        return failed
    finally:
        if started:
            ray.shutdown()


def _first_line(e: Exception) -> str:
    cause = getattr(e, "cause", None)
    text = str(cause if cause is not None else e).strip().splitlines()
    return text[-1] if text else type(e).__name__
