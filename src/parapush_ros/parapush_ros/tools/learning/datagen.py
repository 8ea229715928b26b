"""``parapush datagen``: (x, u, x_next) triples from the fine model for the learned coarse model's scene family.

Why rollouts: the states a coarse model sees inside Parareal and the planner are mid-push states (pusher touching
a slider that moves with it, objects resting against each other), which are hard to sample directly with realistic
velocities. So each sample group is a short fine rollout of ``ROLLOUT_STEPS`` 1 s slices from a random start; each
slice is one sample. Between slices the state is re-centred on the objects (the physics is translation invariant;
this keeps pushes away from the table edge) and, half of the time, jittered by a few mm and projected out of
penetration like a Parareal correction, so the data also covers the neighbourhood of true trajectories.

Starts (rejection sampled: no object–object or pusher–object penetration, everything on the table with margin):
n cylinders chained at random bearings with gaps that are often touching (<= 3 mm), often close (<= 6 cm) and
sometimes far (up to 25 cm); the pusher 0–3 mm (touching, 45 %), 3–30 mm (40 %) or 3–12 cm from a random target object,
at a random bearing or, for ``--into-cluster`` (default 50 %) of the multi-object starts, within ±60° of "behind the
target" as seen from the other objects' centroid, so that the aimed push drives it into them: chain pushes
(pusher → object → neighbours), the hardest case for a coarse model and the usual one when pushing in clutter, are
rare with random bearings alone. Datasets made before the option existed used 0 (``dataset.json`` without the key).
Controls, speed uniform in 0–5 cm/s (5 % exactly zero): aimed at the target within ±40° (65 %), ±90° (20 %) or
in any direction (10 %); later slices mostly perturb the previous control (60 %: ±15° heading, ±6 mm/s), as a
smooth planner does, re-aim at a random object (30 %) or take a random one (10 %). Start velocities: pusher at rest,
near the control, or random; objects mostly at rest, 10 % with small random velocities.

Output: a directory with ``dataset.json`` (family, seed, counts, code version, command, timing) and
``chunk_NNNNN.npz`` files (x, u, x_next, step in rollout, n). Each chunk has its own seed (``[seed, chunk]``) and
object count (a fixed schedule), and the fine model is a pure function of (x, u, dt), so a chunk's content is
independent of worker count and of which chunks already exist: rerunning the same command resumes, a larger
``--samples`` extends. Each chunk is a unit of the study engine (``parapush_ros.tools.study``): a Ray task of one CPU
(``--workers N`` local, ``--ray ADDRESS`` a cluster; ``--workers 1``: one after another in this process).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ...arguments import output_dir, positive_int
from ...core.models.base import ModelDiverged
from ...core.models.fine import FineModel
from ...core.models.learned import MAX_OBJECTS, family_metadata, family_scene
from . import chunks, version_string
from ...core.scene.projection import project_feasible

FORMAT = "parapush-coarse-data/1"
SLICE_S = 1.0
ROLLOUT_STEPS = 4
CHUNK_SIZE = 256
V_MAX = 0.05  # m/s: the planner's speed range
EDGE_MARGIN = 0.06  # m: object centres stay this far (plus a radius) inside the table edge
OBJECT_WEIGHTS = {1: 0.35, 2: 0.2, 3: 0.2, 4: 0.25}  # share of chunks per object count
DEFAULT_SAMPLES = 40_000
INTO_CLUSTER = 0.5  # share of multi-object starts with the pusher behind the target, pushing into the others
LEGACY_SETTINGS = {"into_cluster": 0.0}  # datasets written before a setting existed were made with this value


def parse_objects(spec: str) -> list[int]:
    """'1..4' -> [1, 2, 3, 4]; '1,3' -> [1, 3]; '2' -> [2]."""
    try:
        if ".." in spec:
            a, b = spec.split("..")
            out = list(range(int(a), int(b) + 1))
        else:
            out = sorted({int(v) for v in spec.split(",")})
    except ValueError:
        raise ValueError(f"--objects: {spec!r} is not a range like 1..4 or a list like 1,2") from None
    if not out or min(out) < 1 or max(out) > MAX_OBJECTS:
        raise ValueError(f"--objects: {spec!r} must lie within 1..{MAX_OBJECTS}")
    return out


def chunk_schedule(objects: list[int], chunks: int) -> list[int]:
    """Object count of every chunk: the largest shortfall against ``OBJECT_WEIGHTS`` first (deterministic)."""
    w = np.array([OBJECT_WEIGHTS[n] for n in objects], dtype=float)
    w /= w.sum()
    counts = np.zeros(len(objects))
    out = []
    for c in range(chunks):
        k = int(np.argmax(w * (c + 1) - counts))
        counts[k] += 1
        out.append(objects[k])
    return out


class Sampler:
    """Random starts, controls and jitter for one family member (n objects)."""

    def __init__(self, scene, rng: np.random.Generator, into_cluster: float = INTO_CLUSTER):
        self.scene = scene
        self.into_cluster = float(into_cluster)
        self.layout = scene.layout
        self.n = len(scene.objects)
        self.R = scene.objects[0].radius
        self.rp = scene.pusher.radius
        self.rng = rng
        self.bound = scene.table.half - self.R - EDGE_MARGIN
        self.pusher_bound = scene.table.half - self.rp - 0.02

    def _dir(self, angle):
        return np.array([np.cos(angle), np.sin(angle)])

    def aimed_control(self, pusher, target):
        rng = self.rng
        aim = np.arctan2(*(target - pusher)[::-1])
        r = rng.random()
        if r < 0.05:
            return np.zeros(2)
        if r < 0.70:
            heading = aim + rng.uniform(-1, 1) * np.radians(40)
        elif r < 0.90:
            heading = aim + rng.uniform(-1, 1) * np.radians(90)
        else:
            heading = rng.uniform(-np.pi, np.pi)
        return rng.uniform(0.0, V_MAX) * self._dir(heading)

    def start(self):
        """One random valid start state and its first control."""
        rng, R, rp, n = self.rng, self.R, self.rp, self.n
        while True:
            c = np.zeros((n, 2))
            ok = True
            for j in range(1, n):
                r = rng.random()
                gap = rng.uniform(0, 0.003) if r < 0.3 else rng.uniform(0, 0.06) if r < 0.8 else rng.uniform(0.06, 0.25)
                c[j] = c[rng.integers(j)] + (2 * R + gap) * self._dir(rng.uniform(-np.pi, np.pi))
                if np.any(np.linalg.norm(c[:j] - c[j], axis=1) < 2 * R):
                    ok = False
                    break
            if not ok:
                continue
            c += rng.uniform(-0.05, 0.05, 2) - c.mean(0)
            if np.any(np.abs(c) > self.bound):
                continue
            t = rng.integers(n)
            r = rng.random()
            g = rng.uniform(0, 0.003) if r < 0.45 else rng.uniform(0.003, 0.03) if r < 0.85 else rng.uniform(0.03, 0.12)
            if n > 1 and self.into_cluster > 0.0 and rng.random() < self.into_cluster:
                # behind the target as seen from the others' centroid: the aimed push drives it into them
                others = np.delete(c, t, axis=0).mean(axis=0)
                bearing = np.arctan2(*(c[t] - others)[::-1]) + rng.uniform(-1, 1) * np.radians(60)
            else:
                bearing = rng.uniform(-np.pi, np.pi)
            p = c[t] + (R + rp + g) * self._dir(bearing)
            if np.any(np.linalg.norm(c - p, axis=1) < R + rp) or np.any(np.abs(p) > self.pusher_bound):
                continue
            break
        u = self.aimed_control(p, c[t])
        r = rng.random()
        if r < 0.4:
            vp = np.zeros(2)
        elif r < 0.8:
            vp = u + rng.normal(0, 0.005, 2)
        else:
            vp = rng.uniform(0, V_MAX) * self._dir(rng.uniform(-np.pi, np.pi))
        vo = np.zeros((n, 3))
        if rng.random() < 0.1:
            vo[:, :2] = rng.normal(0, 0.01, (n, 2))
            vo[:, 2] = rng.normal(0, 0.2, n)
        poses = np.column_stack([c, rng.uniform(-np.pi, np.pi, n)])
        return self.layout.compose(p, poses, vp, vo), u

    def next_control(self, x, u_prev):
        rng = self.rng
        r = rng.random()
        speed = np.hypot(*u_prev)
        if r < 0.60:
            heading = np.arctan2(u_prev[1], u_prev[0]) if speed > 1e-9 else rng.uniform(-np.pi, np.pi)
            heading += rng.normal(0, np.radians(15))
            return float(np.clip(speed + rng.normal(0, 0.006), 0.0, V_MAX)) * self._dir(heading)
        if r < 0.90:
            t = rng.integers(self.n)
            return self.aimed_control(x[0:2], self.layout.object_poses(x)[t, :2])
        return rng.uniform(0.0, V_MAX) * self._dir(rng.uniform(-np.pi, np.pi))

    def continue_from(self, x):
        """Re-centred (and half of the time jittered and projected) copies of states ``x`` (B, D)."""
        rng, L = self.rng, self.layout
        x = np.array(x, dtype=float, copy=True)
        shift = L.object_poses(x)[:, :, :2].mean(axis=1)
        L.pusher_pos(x)[...] -= shift
        L.object_poses(x)[..., :2] -= shift[:, None, :]
        jit = rng.random(len(x)) < 0.5
        k = int(jit.sum())
        if k:
            xj = x[jit]
            L.object_poses(xj)[..., :2] += rng.normal(0, 0.001, (k, self.n, 2))
            L.object_poses(xj)[..., 2] += rng.normal(0, 0.02, (k, self.n))
            L.pusher_pos(xj)[...] += rng.normal(0, 0.0005, (k, 2))
            vo = L.object_vels(xj)
            vo[...] = vo * (1 + rng.normal(0, 0.1, vo.shape)) + rng.normal(0, 0.002, vo.shape)
            L.pusher_vel(xj)[...] += rng.normal(0, 0.002, (k, 2))
            x[jit], _ = project_feasible(self.scene, xj)
        return x

    def in_bounds(self, x):
        c = self.layout.object_poses(x)[..., :2]
        return np.all(np.abs(c) <= self.bound, axis=(-1, -2)) & \
            np.all(np.abs(self.layout.pusher_pos(x)) <= self.pusher_bound, axis=-1)


def generate_chunk(fine: FineModel, scene, seed: int, chunk: int, size: int,
                   into_cluster: float = INTO_CLUSTER) -> dict:
    """``size`` samples (``size / ROLLOUT_STEPS`` rollouts in parallel) for chunk number ``chunk``."""
    rng = np.random.default_rng([seed, chunk])
    sampler = Sampler(scene, rng, into_cluster)
    B = size // ROLLOUT_STEPS
    starts = [sampler.start() for _ in range(B)]
    x = np.stack([s[0] for s in starts])
    u = np.stack([s[1] for s in starts])
    step = np.zeros(B, dtype=np.int8)
    xs, us, x1s, steps = [], [], [], []
    replaced = 0
    for s in range(ROLLOUT_STEPS):
        for _attempt in range(5):
            try:
                x1 = fine.propagate(x, u, SLICE_S)
                break
            except ModelDiverged as e:  # rare: replace those starts by fresh ones (deterministically)
                for i in e.indices:
                    x[i], u[i] = sampler.start()
                    step[i] = 0
                    replaced += 1
        else:
            raise RuntimeError(f"chunk {chunk}: the fine model kept diverging")
        xs.append(x.copy())
        us.append(u.copy())
        x1s.append(x1)
        steps.append(step.copy())
        if s == ROLLOUT_STEPS - 1:
            break
        x = sampler.continue_from(x1)
        ok = sampler.in_bounds(x)
        for i in range(B):
            if ok[i]:
                u[i] = sampler.next_control(x[i], u[i])
                step[i] += 1
            else:  # drifted toward the table edge: start a new rollout
                x[i], u[i] = sampler.start()
                step[i] = 0
                replaced += 1
    return {"x": np.concatenate(xs), "u": np.concatenate(us), "x_next": np.concatenate(x1s),
            "step": np.concatenate(steps), "n": len(scene.objects), "chunk": chunk, "replaced": replaced}


_FINES: dict = {}  # per worker process: the fine model of each object count, reused by its next chunks


def make_chunk(context: dict, unit) -> dict:
    """The study unit of ``datagen``: chunk ``unit["chunk"]`` (its object count from the schedule), on
    ``unit.cpus`` fine-model threads; a pure function of (seed, chunk)."""
    c = unit["chunk"]
    n = context["schedule"][c]
    if (n, unit.cpus) not in _FINES:
        _FINES[n, unit.cpus] = (FineModel(family_scene(n), threads=unit.cpus), family_scene(n))
    fine, scene = _FINES[n, unit.cpus]
    tc = time.perf_counter()
    data = generate_chunk(fine, scene, context["seed"], c, context["size"], context["into_cluster"])
    data["seconds"] = time.perf_counter() - tc
    return data


# ----------------------------------------------------------------------------------------------- dataset I/O
def read_meta(path: Path) -> dict:
    """A ``dataset.json``, with the values that datasets written before a setting existed were made with."""
    return chunks.read_meta(path, LEGACY_SETTINGS)


def load_dataset(root, max_samples: int | None = None) -> tuple[dict, list[dict]]:
    """(dataset.json contents, list of chunks in chunk order) of a dataset directory; missing or unreadable chunks
    are an error naming them (``chunks.load_chunks``)."""
    meta = chunks.open_for_reading(root, FORMAT, "parapush datagen", LEGACY_SETTINGS)
    return meta, chunks.load_chunks(root, meta["chunks"], "x_next", max_samples)


def load_datasets(roots, max_samples: int | None = None) -> tuple[list[dict], list[dict]]:
    """Several dataset directories as one: (their dataset.json contents, all chunks in the given order).
    They must share the scene family (the network is trained for one); ``max_samples`` caps the total."""
    roots = [roots] if isinstance(roots, (str, Path)) else list(roots)
    if not roots:
        raise ValueError("no dataset directory given")
    metas, loaded = [], []
    for root in roots:
        left = None if max_samples is None else max_samples - sum(len(c["x"]) for c in loaded)
        if left is not None and left <= 0:
            break
        meta, more = load_dataset(root, left)
        if metas and meta["family"] != metas[0]["family"]:
            diff = sorted(k for k in set(meta["family"]) | set(metas[0]["family"])
                          if meta["family"].get(k) != metas[0]["family"].get(k))
            raise ValueError(f"{root}: scene family differs from {roots[0]}'s in {', '.join(diff)}; "
                             f"one network is trained for one family")
        for m in metas:  # chunk c of a dataset is seeded [seed, c]: such datasets hold the same samples
            differ = [k for k in ("seed", "objects", "chunk_size", "rollout_steps", "into_cluster")
                      if m.get(k) != meta.get(k)]
            if not differ or Path(m["dir"]).resolve() == Path(root).resolve():
                raise ValueError(f"{root}: the same samples as {m['dir']} (seed, objects, chunk size and settings "
                                 f"alike): training on both would validate on training samples; give datagen "
                                 f"another --seed")
        metas.append({**meta, "dir": str(root)})
        loaded += more
    return metas, loaded


def run(args) -> dict:
    if getattr(args, "primitive", False):  # paper 004's push primitives of one box: another dataset kind
        from . import datagen_primitive  # noqa: PLC0415
        return datagen_primitive.run(args)
    args.samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    args.chunk_size = CHUNK_SIZE if args.chunk_size is None else args.chunk_size
    objects = parse_objects(args.objects)
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    size = int(args.chunk_size)
    if size < ROLLOUT_STEPS or size % ROLLOUT_STEPS:
        raise ValueError(f"--chunk-size must be a positive multiple of {ROLLOUT_STEPS}, got {size}")
    root = Path(args.out)
    n_chunks = -(-args.samples // size)
    schedule = chunk_schedule(objects, n_chunks)
    family = family_metadata(slice_s=SLICE_S)
    if not 0.0 <= args.into_cluster <= 1.0:
        raise ValueError(f"--into-cluster must lie within 0..1, got {args.into_cluster}")
    fixed = {"format": FORMAT, "seed": int(args.seed), "objects": objects, "chunk_size": size,
             "rollout_steps": ROLLOUT_STEPS, "family": family, "into_cluster": float(args.into_cluster)}
    meta_path = chunks.open_for_writing(root, fixed, LEGACY_SETTINGS)
    meta = {**fixed, "samples_requested": int(args.samples), "chunks": n_chunks,
            "code_version": version_string(), "command": " ".join(["parapush"] + sys.argv[1:]),
            "complete": False}
    chunks.write_meta(meta_path, meta)
    print(f"datagen: {n_chunks} chunks of {size} samples, objects {objects} -> {root}", file=sys.stderr)
    context = {"seed": int(args.seed), "size": size, "into_cluster": float(args.into_cluster), "schedule": schedule}
    try:
        chunks.study(root, "datagen", fixed, "x_next", LEGACY_SETTINGS).run(
            [chunks.chunk_unit(c) for c in range(n_chunks)], make_chunk, context, args, desc="datagen chunks")
    finally:
        # generation time summed from the chunks themselves: right across resumes, also after a killed run
        counts, replaced, elapsed = {}, 0, 0.0
        for c in range(n_chunks):
            p = chunks.chunk_path(root, c)
            if chunks.chunk_ok(p, "x_next"):
                with np.load(p) as z:
                    counts[str(int(z["n"]))] = counts.get(str(int(z["n"])), 0) + len(z["x"])
                    replaced += int(z["replaced"])
                    elapsed += float(z["seconds"]) if "seconds" in z.files else 0.0
        meta.update(counts=counts, samples=sum(counts.values()), restarts_near_edge_or_diverged=replaced,
                    elapsed_s=elapsed, complete=sum(counts.values()) >= n_chunks * size)
        chunks.write_meta(meta_path, meta)
    print(f"datagen: {meta['samples']} samples {counts} in {root} ({elapsed:.0f} s in total)", file=sys.stderr)
    return meta


def add_parser(sub, parent=None):
    p = sub.add_parser("datagen", help="generate (x, u, x_next) training data for the learned coarse model",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", default="1..4", help="object counts, e.g. 1..4 (default) or 1,2")
    p.add_argument("--samples", type=positive_int, default=None,
                   help=f"number of samples (default {DEFAULT_SAMPLES}: about 40 min on 2 busy cores; with "
                        f"--primitive 1024 pushes, about 2 min)")
    p.add_argument("--out", type=output_dir, required=True,
                   help="dataset directory (created; rerun the same command to resume)")
    p.add_argument("--seed", type=int, default=0)
    from ..study import add_arguments  # noqa: PLC0415
    add_arguments(p, "chunks")
    p.add_argument("--chunk-size", type=positive_int, default=None,
                   help=f"samples per chunk file (default {CHUNK_SIZE}; with --primitive 64)")
    p.add_argument("--into-cluster", type=float, default=INTO_CLUSTER,
                   help=f"share (0..1) of multi-object starts that push the target into the other objects "
                        f"(chain pushes; default {INTO_CLUSTER}; datasets made before this option used 0)")
    p.add_argument("--primitive", action="store_true",
                   help="paper 004's push primitives of one box (box_slider scene) instead of the coarse family's "
                        "rollouts (learning/datagen_primitive.py; --objects and --into-cluster do not apply)")
    p.set_defaults(func=run)
    return p
