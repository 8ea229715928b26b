"""``parapush datagen --primitive``: random push primitives of the box (paper 004) from MuJoCo.

Each sample: a box pose drawn uniformly over the workspace (``push_primitive.WORKSPACE``, any yaw), a push
(a face drawn uniformly, the direction within +-40 deg of its inward normal, the contact location c uniform in
[0, 1]) and the pose after the 1 s, 5 cm push (``core/models/push_primitive.py``). Poses are independent (not
chained as on a robot), so the workspace is covered evenly and any region can be lesioned out later (training and
the bench take ``--lesion``; the data stay whole, so the held-out pushes inside the lesion exist).

Output: a directory with ``dataset.json`` (format, seed, counts, code version, command) and ``chunk_NNNNN.npz``
files (poses, actions, poses_next). Each chunk is seeded with ``[seed, chunk]`` and MuJoCo is a pure function of
its inputs, so rerunning the same command resumes and a larger ``--samples`` extends. Each chunk is a unit of the
study engine (``parapush_ros.tools.study``): a Ray task of one CPU, or ``--workers 1`` one after another here.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from . import chunks

FORMAT = "parapush-push-primitive-data/1"
CHUNK_SIZE = 64
DEFAULT_SAMPLES = 1024


def load(root, max_samples: int | None = None) -> tuple[dict, dict]:
    """(dataset.json contents, {"poses", "actions", "poses_next"} concatenated in chunk order); missing or
    unreadable chunks are an error naming them (``chunks.load_chunks``)."""
    meta = chunks.open_for_reading(root, FORMAT, "parapush datagen --primitive")
    loaded = chunks.load_chunks(root, meta["chunks"], "poses_next", max_samples)
    data = {k: np.concatenate([c[k] for c in loaded])[:max_samples] for k in ("poses", "actions", "poses_next")}
    return meta, data


_FINES: dict = {}  # per worker process: the MuJoCo push primitive, by threads


def make_chunk(context: dict, unit) -> dict:
    """The study unit of ``datagen --primitive``: chunk ``unit["chunk"]``, a pure function of (seed, chunk)."""
    from ...core.models.push_primitive import FinePrimitive, random_pushes  # noqa: PLC0415
    if unit.cpus not in _FINES:
        _FINES[unit.cpus] = FinePrimitive(threads=unit.cpus)
    rng = np.random.default_rng([context["seed"], unit["chunk"]])
    poses, actions = random_pushes(rng, context["chunk_size"])
    t0 = time.perf_counter()
    nxt = _FINES[unit.cpus].push(poses, actions)
    return dict(poses=poses, actions=actions, poses_next=nxt, seconds=time.perf_counter() - t0)


def generate(root, samples: int, seed: int = 0, chunk_size: int = CHUNK_SIZE, study_args=None,
             progress: bool = True) -> dict:
    """Generate (or resume) a dataset in ``root``; returns the dataset.json contents. ``study_args``: the
    ``--workers`` / ``--ray`` / ``--retries`` of the study engine (None: one chunk after another here)."""
    from . import version_string  # noqa: PLC0415
    from ...core.models.push_primitive import PUSH_DURATION, PUSH_SPEED, SCENE, WORKSPACE  # noqa: PLC0415
    if samples < 1:
        raise ValueError(f"--samples must be >= 1, got {samples}")
    if chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {chunk_size}")
    root = Path(root)
    n_chunks = -(-samples // chunk_size)
    fixed = {"format": FORMAT, "seed": int(seed), "chunk_size": int(chunk_size), "scene": SCENE,
             "push_speed": PUSH_SPEED, "push_duration": PUSH_DURATION, "workspace": list(WORKSPACE)}
    meta_path = chunks.open_for_writing(root, fixed)
    meta = {**fixed, "samples_requested": int(samples), "chunks": n_chunks, "code_version": version_string(),
            "command": " ".join(["parapush"] + sys.argv[1:]), "complete": False}
    chunks.write_meta(meta_path, meta)
    if progress:
        print(f"datagen --primitive: {n_chunks} chunks of {chunk_size} pushes -> {root}", file=sys.stderr)
    try:
        chunks.study(root, "datagen --primitive", fixed, "poses_next").run(
            [chunks.chunk_unit(c) for c in range(n_chunks)], make_chunk, {"seed": int(seed), "chunk_size": chunk_size},
            study_args, desc="datagen --primitive chunks")
    finally:
        missing = set(chunks.missing_chunks(root, n_chunks, "poses_next"))
        done = [c for c in range(n_chunks) if c not in missing]
        elapsed = 0.0
        for c in done:
            with np.load(chunks.chunk_path(root, c)) as z:
                elapsed += float(z["seconds"])
        meta.update(samples=len(done) * chunk_size, elapsed_s=elapsed, complete=len(done) == n_chunks)
        chunks.write_meta(meta_path, meta)
    return meta


def run(args) -> dict:
    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    chunk = CHUNK_SIZE if args.chunk_size is None else args.chunk_size
    meta = generate(args.out, samples, args.seed, chunk, args)
    print(f"datagen --primitive: {meta['samples']} pushes in {args.out} ({meta['elapsed_s']:.0f} s in total)",
          file=sys.stderr)
    return meta
