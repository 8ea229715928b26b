"""Chunked datasets (learning/chunks.py), as both datagen kinds load them: whole chunks load in order, a missing
or truncated chunk is an error naming it (never a silently smaller dataset), and it is what a rerun makes again."""
import json

import numpy as np
import pytest

from parapush_ros.tools.learning import chunks, datagen, datagen_primitive


def dataset(root, fmt, key, n_chunks=4, size=3):
    root.mkdir()
    chunks.write_meta(root / "dataset.json", {"format": fmt, "chunks": n_chunks})
    chunks.write_chunks(root, range(n_chunks), lambda c: {"x": np.full((size, 2), c), key: np.full((size, 2), c),
                                                          "poses": np.full((size, 3), c),
                                                          "actions": np.full((size, 2), c)})
    return root


def test_whole_chunks_load_in_order_and_bad_ones_are_named(tmp_path):
    root = dataset(tmp_path / "coarse", datagen.FORMAT, "x_next")
    meta, loaded = datagen.load_dataset(root)
    assert meta["chunks"] == 4 and [int(c["x"][0, 0]) for c in loaded] == [0, 1, 2, 3]
    (root / "chunk_00001.npz").unlink()
    (root / "chunk_00003.npz").write_bytes(b"truncated")
    assert chunks.missing_chunks(root, 4, "x_next") == [1, 3]  # what a rerun makes again
    with pytest.raises(ValueError, match=r"2 of its 4 chunks missing or unreadable \(chunk_00001.npz, "
                                         r"chunk_00003.npz\)"):
        datagen.load_dataset(root)
    _, first = datagen.load_dataset(root, max_samples=3)  # only chunk 0 needed: whole
    assert len(first) == 1 and len(first[0]["x"]) == 3


def test_primitive_datasets_load_through_the_same_chunks(tmp_path):
    root = dataset(tmp_path / "prim", datagen_primitive.FORMAT, "poses_next", n_chunks=2)
    _meta, data = datagen_primitive.load(root, max_samples=5)
    assert data["poses"].shape == (5, 3) and data["poses_next"][4, 0] == 1
    (root / "chunk_00000.npz").unlink()
    with pytest.raises(ValueError, match=r"1 of its 2 chunks missing or unreadable \(chunk_00000.npz\)"):
        datagen_primitive.load(root)
    (root / "dataset.json").write_text(json.dumps({"format": "other", "chunks": 2}))
    with pytest.raises(ValueError, match="format 'other'"):
        datagen_primitive.load(root)
