"""Objects of every shape for random scenes, and the placement rules that hold for any convex outline.

The benches draw random scenes (``bench mpc``'s obstacle scenes); with ``--shapes`` each scene's object is one of
``SHAPES``: the body of a shipped scene (``SHAPE_SCENES``: the authors' box, the cylinder slider, the hexagon and
the ellipse of docs/results/fidelity.md) renamed, with the pushed object's mass and a start pose. Placement uses the
outline itself, never a bounding circle: the pusher starts ``gap`` behind the outline along the push
(``pusher_behind``, the exact ray entry of the pusher disc), the width an obstacle must be within to block the
straight push is the outline's extent across it (``half_width``), and clearances are outline-to-outline
(``clearance``: a lower bound of the true distance, so a margin it reports holds).
"""
from __future__ import annotations

import copy
from functools import cache

import numpy as np

from .geometry import Footprint, pair_penetration, ray_entry

SHAPES = ("box", "cylinder", "polygon", "ellipse")
# the object of each shape: the first object of this shipped scene (its outline, height; not its mass or pose)
SHAPE_SCENES = {"box": "box_slider", "cylinder": "cylinder_slider", "polygon": "hexagon_slider",
                "ellipse": "ellipse_slider"}
_SHAPE_KEYS = ("shape", "size", "radius", "radii", "vertices", "height", "file")


def parse_shapes(text: str | None, option: str = "--shapes") -> tuple[str, ...] | None:
    """``"box,ellipse"`` -> ("box", "ellipse"); None or "" -> None (the bench's own object); a ValueError naming
    ``option`` for an unknown shape."""
    if not text:
        return None
    shapes = tuple(s.strip() for s in text.split(",") if s.strip())
    for s in shapes:
        if s not in SHAPES:
            raise ValueError(f"{option}: unknown shape {s!r} (expected any of {', '.join(SHAPES)})")
    if not shapes:
        raise ValueError(f"{option}: no shape given (expected any of {', '.join(SHAPES)})")
    return shapes


@cache
def _shape_fields(shape: str) -> tuple:
    """(key, value) pairs of the outline and height of ``SHAPE_SCENES[shape]``'s object: read once per shape."""
    from .spec import load_scene  # noqa: PLC0415 (spec imports geometry, as this module does)
    body = load_scene(SHAPE_SCENES[shape]).to_dict()["objects"][0]
    return tuple((k, v) for k, v in body.items() if k in _SHAPE_KEYS)


def shaped_object(shape: str, like: dict) -> dict:
    """The scene-file mapping of an object of ``shape`` (``SHAPE_SCENES``' outline and height) that keeps ``like``'s
    name, mass and start (a mapping of ``Scene.to_dict()['objects']``)."""
    out = {k: v for k, v in like.items() if k not in _SHAPE_KEYS}
    out.update(copy.deepcopy(dict(_shape_fields(shape))))  # the cached lists stay the cache's
    return out


def support(footprint: Footprint, pose, direction) -> float:
    """How far the outline at ``pose`` reaches from its pose's origin along the unit ``direction`` (m)."""
    pose = np.asarray(pose, dtype=float)
    if footprint.shape == "cylinder":
        return footprint.radius
    return float(((footprint.corners(pose) - pose[:2]) @ np.asarray(direction, dtype=float)).max())


def half_width(footprint: Footprint, pose, direction) -> float:
    """The outline's smaller extent to either side of the line through its origin along ``direction``: an obstacle
    disc whose centre is within this plus its radius of that line is hit by the outline moving along it."""
    d = np.asarray(direction, dtype=float)
    normal = np.array([-d[1], d[0]])
    return min(support(footprint, pose, normal), support(footprint, pose, -normal))


def pusher_behind(footprint: Footprint, pose, direction, radius: float, gap: float) -> np.ndarray:
    """The pusher centre on the line through the outline's origin along ``direction``, behind it, its disc of
    ``radius`` ``gap`` from the outline (the exact entry of the inflated disc: right for any convex outline)."""
    pose = np.asarray(pose, dtype=float)
    d = np.asarray(direction, dtype=float)
    return pose[:2] - float(push_distance(footprint, pose, d, radius, gap)) * d


def push_distance(footprint: Footprint, pose, direction, radius: float, gap: float = 0.0) -> np.ndarray:
    """(...,) distance behind the outline's origin, against the unit ``direction`` (..., 2), of a pusher disc of
    ``radius`` that pushes through the origin ``gap`` short of touching the outline at ``pose`` (..., 3): the exact
    entry of the inflated disc along that line (a disc's radius + ``radius``; a box pushed face on its half width)."""
    d = np.asarray(direction, dtype=float)
    if footprint.shape == "cylinder":  # rotation invariant: no ray needed
        return np.full(d.shape[:-1], footprint.radius + radius + gap)
    pose = np.asarray(pose, dtype=float)
    far = 1.0 + footprint.bounding_radius + radius + gap
    entry = ray_entry(pose[..., :2] - far * d, d, far, footprint, pose, radius + gap)
    if not np.all(np.isfinite(entry)):
        raise ValueError("the pusher's ray misses the outline")  # cannot happen: the ray runs through the origin
    return far - entry


def clearance(fa: Footprint, pa, fb: Footprint, pb) -> float:
    """A lower bound (exact for discs and for a disc against an outline) of the distance between two outlines (m;
    negative when they overlap)."""
    depth, _ = pair_penetration(fa, np.asarray(pa, dtype=float), fb, np.asarray(pb, dtype=float))
    return -float(depth)


def outline_points(footprint: Footprint, pose, n: int = 32) -> np.ndarray:
    """(K, 2) world points of the outline at ``pose``: a polygon's corners, ``n`` points of a disc's rim."""
    pose = np.asarray(pose, dtype=float)
    if footprint.shape != "cylinder":
        return footprint.corners(pose)
    a = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    return pose[:2] + np.stack([np.cos(a), np.sin(a)], -1) * footprint.radius
