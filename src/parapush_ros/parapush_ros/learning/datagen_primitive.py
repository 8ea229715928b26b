"""``parapush datagen --primitive``: random push primitives of the box (paper 004) from MuJoCo.

Each sample: a box pose drawn uniformly over the workspace (|x| <= 0.25 m, |y| <= 0.35 m, any yaw), a push
(a face drawn uniformly, the direction within +-40 deg of its inward normal, the contact location c uniform in
[0, 1]) and the pose after the 1 s, 5 cm push (``core/models/push_primitive.py``). Poses are independent (not
chained as on a robot), so the workspace is covered evenly and any region can be lesioned out later (training and
the bench take ``--lesion``; the data stay whole, so the held-out pushes inside the lesion exist).

Output: a directory with ``dataset.json`` (format, seed, counts, code version, command) and ``chunk_NNNNN.npz``
files (poses, actions, poses_next). Each chunk is seeded with ``[seed, chunk]`` and MuJoCo is a pure function of
its inputs, so rerunning the same command resumes and a larger ``--samples`` extends.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

FORMAT = "parapush-push-primitive-data/1"
CHUNK_SIZE = 64
DEFAULT_SAMPLES = 1024


def chunk_path(root: Path, chunk: int) -> Path:
    return root / f"chunk_{chunk:05d}.npz"


def _chunk_ok(p: Path) -> bool:
    try:
        with np.load(p) as z:
            return "poses_next" in z.files
    except Exception:  # missing, or truncated by an interrupted run: (re)generate it
        return False


def load(root, max_samples: int | None = None) -> tuple[dict, dict]:
    """(dataset.json contents, {"poses", "actions", "poses_next"} concatenated in chunk order)."""
    root = Path(root)
    meta_path = root / "dataset.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{root}: no dataset.json (is this a 'parapush datagen --primitive' directory?)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    parts = {"poses": [], "actions": [], "poses_next": []}
    total = 0
    for c in range(meta["chunks"]):
        p = chunk_path(root, c)
        if not _chunk_ok(p):
            continue
        with np.load(p) as z:
            for k in parts:
                parts[k].append(z[k])
        total += len(parts["poses"][-1])
        if max_samples is not None and total >= max_samples:
            break
    if not parts["poses"]:
        raise ValueError(f"{root}: dataset has no chunk files yet")
    data = {k: np.concatenate(v)[:max_samples] for k, v in parts.items()}
    return meta, data


def generate(root, samples: int, seed: int = 0, chunk_size: int = CHUNK_SIZE, threads: int | None = None,
             progress: bool = True) -> dict:
    """Generate (or resume) a dataset in ``root``; returns the dataset.json contents."""
    from . import version_string  # noqa: PLC0415
    from ..core.models.push_primitive import (PUSH_DURATION, PUSH_SPEED, SCENE, WORKSPACE,  # noqa: PLC0415
                                              FinePrimitive, random_pushes)
    if samples < 1:
        raise ValueError(f"--samples must be >= 1, got {samples}")
    if chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {chunk_size}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    n_chunks = -(-samples // chunk_size)
    fixed = {"format": FORMAT, "seed": int(seed), "chunk_size": int(chunk_size), "scene": SCENE,
             "push_speed": PUSH_SPEED, "push_duration": PUSH_DURATION, "workspace": list(WORKSPACE)}
    meta_path = root / "dataset.json"
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        for k, v in fixed.items():
            if json.dumps(old.get(k)) != json.dumps(v):
                raise ValueError(f"{meta_path}: existing dataset has {k} = {old.get(k)!r}, this run asks for {v!r}; "
                                 f"use the same settings to resume or extend, or another --out")
    meta = {**fixed, "samples_requested": int(samples), "chunks": n_chunks, "code_version": version_string(),
            "command": " ".join(["parapush"] + sys.argv[1:]), "complete": False}
    _write(meta_path, meta)
    todo = [c for c in range(n_chunks) if not _chunk_ok(chunk_path(root, c))]
    if progress:
        print(f"datagen --primitive: {n_chunks} chunks of {chunk_size} pushes ({n_chunks - len(todo)} present) "
              f"-> {root}", file=sys.stderr)
    fine = FinePrimitive(threads=threads) if todo else None
    from tqdm import tqdm  # noqa: PLC0415
    bar = tqdm(total=len(todo) * chunk_size, desc="datagen pushes", unit="push", disable=not progress)
    try:
        for c in todo:
            rng = np.random.default_rng([int(seed), c])
            poses, actions = random_pushes(rng, chunk_size)
            t0 = time.perf_counter()
            nxt = fine.push(poses, actions)
            tmp = root / f".chunk_{c:05d}.tmp.npz"
            np.savez_compressed(tmp, poses=poses, actions=actions, poses_next=nxt,
                                seconds=time.perf_counter() - t0)
            os.replace(tmp, chunk_path(root, c))
            bar.update(chunk_size)
    finally:
        bar.close()
        if fine is not None:
            fine.close()
        done = [c for c in range(n_chunks) if _chunk_ok(chunk_path(root, c))]
        elapsed = 0.0
        for c in done:
            with np.load(chunk_path(root, c)) as z:
                elapsed += float(z["seconds"])
        meta.update(samples=len(done) * chunk_size, elapsed_s=elapsed, complete=len(done) == n_chunks)
        _write(meta_path, meta)
    return meta


def _write(path: Path, meta: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, path)


def run(args) -> dict:
    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    chunk = CHUNK_SIZE if args.chunk_size is None else args.chunk_size
    meta = generate(args.out, samples, args.seed, chunk, args.workers or None)
    print(f"datagen --primitive: {meta['samples']} pushes in {args.out} ({meta['elapsed_s']:.0f} s in total)",
          file=sys.stderr)
    return meta
