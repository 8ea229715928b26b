"""Chunked datasets on disk, the one format of every ``parapush datagen`` kind: a directory with ``dataset.json``
(settings, counts, provenance) and ``chunk_NNNNN.npz`` files.

Why chunks: each chunk is computed from its own seed and written atomically (a temporary file, then a rename), as
``dataset.json`` is, so an interrupted run leaves only whole files; rerunning the same command makes the missing
or truncated chunks only (it resumes), and a larger ``--samples`` extends. A dataset is a study of the engine
(``parapush_ros.tools.study``, ``study()`` here): each chunk is a unit, run as a Ray task (``--workers``, ``--ray``).
Loading refuses a dataset whose chunks
are missing or unreadable, naming them: training on a silently smaller dataset is not an option.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

META_NAME = "dataset.json"


def chunk_path(root, chunk: int) -> Path:
    return Path(root) / f"chunk_{chunk:05d}.npz"


def chunk_ok(path: Path, key: str) -> bool:
    """Whether ``path`` is a whole chunk: a readable ``.npz`` holding the array ``key`` (written last)."""
    if not path.is_file():
        return False
    try:
        with np.load(path) as z:
            return key in z.files
    except Exception:  # noqa: BLE001 - truncated by an interrupted run: made again by the next run
        return False


def read_meta(path, defaults: dict | None = None) -> dict:
    """A ``dataset.json``; ``defaults`` fills settings that datasets written before they existed lack."""
    return {**(defaults or {}), **json.loads(Path(path).read_text())}


def write_meta(path: Path, meta: dict) -> None:
    """Write ``dataset.json`` atomically (a killed run leaves the old file or the new one, never half of one)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, path)


def open_for_writing(root, fixed: dict, defaults: dict | None = None) -> Path:
    """Create the dataset directory ``root``, or check that the dataset in it was made with the same ``fixed``
    settings (resuming or extending with others would mix two datasets; ``study.check_settings`` names the
    field); returns the ``dataset.json`` path."""
    from ..study import check_settings  # noqa: PLC0415
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    meta_path = root / META_NAME
    check_settings(meta_path, fixed, defaults, "dataset")
    return meta_path


def study(root, kind: str, fixed: dict, key: str, defaults: dict | None = None):
    """The dataset in ``root`` as a study of the engine (``parapush_ros.tools.study``): one unit per chunk
    (``chunk_unit``), its result the chunk's arrays, stored as ``chunk_NNNNN.npz`` (whole when it holds ``key``);
    the manifest is ``dataset.json``, checked against ``fixed`` (written by the caller)."""
    from ..study import Store, Study  # noqa: PLC0415
    store = Store(path=lambda r, u: chunk_path(r, u["chunk"]), save=save_chunk, load=_load_chunk,
                  done=lambda p: chunk_ok(p, key))
    return Study(root, kind, fixed, store=store, manifest=META_NAME, defaults=defaults)


def chunk_unit(c: int):
    from ..study import Unit  # noqa: PLC0415
    return Unit.of(chunk=int(c))


def save_chunk(path: Path, arrays: dict) -> None:
    """Save a chunk's arrays atomically (a temporary file, then a rename)."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def _load_chunk(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def missing_chunks(root, n_chunks: int, key: str) -> list[int]:
    """The chunks of ``0 .. n_chunks - 1`` that are not whole (``chunk_ok``): what a run has to make."""
    return [c for c in range(n_chunks) if not chunk_ok(chunk_path(root, c), key)]


def write_chunks(root, todo, make, done=None) -> None:
    """Make and save each chunk of ``todo`` in order, in this process: ``make(chunk)`` returns its arrays by name,
    saved atomically; ``done(chunk)`` after each (progress)."""
    for c in todo:
        save_chunk(chunk_path(root, c), make(c))
        if done is not None:
            done(c)


def open_for_reading(root, fmt: str, what: str, defaults: dict | None = None) -> dict:
    """The ``dataset.json`` of the dataset in ``root``, checked to be of format ``fmt``; ``what`` names the command
    that writes such datasets (for the error when there is none)."""
    root = Path(root)
    meta_path = root / META_NAME
    if not meta_path.is_file():
        raise FileNotFoundError(f"{root}: no {META_NAME} (is this a '{what}' output directory?)")
    meta = read_meta(meta_path, defaults)
    if meta.get("format") != fmt:
        raise ValueError(f"{meta_path}: format {meta.get('format')!r}, expected {fmt!r}")
    return meta


def load_chunks(root, n_chunks: int, key: str, max_samples: int | None = None) -> list[dict]:
    """Chunks ``0, 1, ...`` of ``root`` as {array name: array}, in order, until ``max_samples`` samples (the length
    of ``key``) or all ``n_chunks``. A missing or unreadable chunk among them is a ``ValueError`` naming every such
    chunk of the dataset."""
    root = Path(root)
    chunks, total = [], 0
    for c in range(n_chunks):
        p = chunk_path(root, c)
        if not chunk_ok(p, key):
            bad = [chunk_path(root, b).name for b in missing_chunks(root, n_chunks, key)]
            listed = ", ".join(bad[:8]) + (f", ... ({len(bad) - 8} more)" if len(bad) > 8 else "")
            raise ValueError(f"{root}: {len(bad)} of its {n_chunks} chunks missing or unreadable ({listed}); "
                             f"rerun the command that made it to complete it (it resumes)"
                             + (", or load fewer samples" if c > 0 else ""))
        with np.load(p) as z:
            chunks.append({k: z[k] for k in z.files})
        total += len(chunks[-1][key])
        if max_samples is not None and total >= max_samples:
            break
    return chunks
