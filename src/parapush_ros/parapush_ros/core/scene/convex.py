"""Convex planar outlines of objects as the quasi-static models see them: a disc or a convex polygon.

``ConvexOutline`` is the object's footprint in its own frame: its area, centroid (the centre of friction under
uniform support pressure) and the mean distance of the footprint from its centroid, ``(1/A) int |r - g| dA`` — the
friction moment at pure rotation about the centroid divided by the friction force (m_max / f_max), which is the
length scale c of the ellipsoidal limit surface fitted to the exact uniform-pressure load at pure rotation
(``../shared/reference/quasi-static-pushing.md``). For polygons it is exact (a closed form per edge: the triangle
fan from the centroid integrated in polar coordinates); for a disc 2 R / 3.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def polygon_area_centroid(vertices) -> tuple[float, np.ndarray]:
    """Signed area (> 0 counter-clockwise) and centroid of a simple polygon (V, 2)."""
    v = np.asarray(vertices, dtype=float)
    w = np.roll(v, -1, axis=0)
    cross = v[:, 0] * w[:, 1] - w[:, 0] * v[:, 1]
    area = cross.sum() / 2.0
    centroid = ((v + w) * cross[:, None]).sum(0) / (6.0 * area)
    return float(area), centroid


def polygon_moment_of_distance(vertices, about) -> float:
    """int |r - about| dA over a convex counter-clockwise polygon containing ``about``, exact.

    Each edge (v1, v2) spans a triangle with ``about``; in polar coordinates about it the triangle's integral is
    int r^2 dr dphi = (d^3 / 3) int sec^3(phi) dphi = (d^3 / 6) [sec tan + asinh(tan)] with d the edge line's distance
    and tan(phi) = s / d, s the coordinate along the edge from the foot of the perpendicular."""
    v = np.asarray(vertices, dtype=float) - np.asarray(about, dtype=float)
    w = np.roll(v, -1, axis=0)
    e = w - v
    length = np.linalg.norm(e, axis=1)
    e = e / length[:, None]
    d = np.abs(v[:, 0] * e[:, 1] - v[:, 1] * e[:, 0])  # distance of the edge line from ``about``
    total = 0.0
    for di, s1, s2 in zip(d, (v * e).sum(1), (w * e).sum(1)):
        if di < 1e-15:  # ``about`` on the edge line: a zero-area triangle
            continue

        def f(s, di=di):
            t = s / di
            return di ** 3 / 6.0 * (t * math.sqrt(1.0 + t * t) + math.asinh(t))
        total += f(s2) - f(s1)
    return float(total)


OUTLINE_SHAPES = ("polygon", "ellipse", "mesh")  # scene shapes whose footprint is a polygon (BodySpec.vertices)
MESH_VOLUME_TOLERANCE = 0.01  # a mesh whose volume differs from the prism used by more than this: a warning
ELLIPSE_SIDES = 64  # an ellipse is the polygon of this many points on it (area within 0.2 % of the ellipse's)


def ellipse_vertices(a: float, b: float, sides: int = ELLIPSE_SIDES) -> tuple:
    """Counter-clockwise vertices of the polygon inscribed in the ellipse of half axes ``a`` (x) and ``b`` (y)."""
    t = np.arange(sides) * (2.0 * math.pi / sides)
    return tuple((float(a * math.cos(x)), float(b * math.sin(x))) for x in t)


def polygon_problem(vertices) -> str:
    """What is wrong with a footprint polygon (object frame, metres), or '' when it is a valid convex
    counter-clockwise polygon: degenerate (fewer than 3 distinct vertices, repeated or collinear ones, no area),
    clockwise, self-intersecting, non-convex."""
    v = np.asarray(vertices, dtype=float)
    if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
        return "degenerate: needs at least 3 vertices [x, y]"
    w = np.roll(v, -1, axis=0)
    edges = w - v
    length = np.linalg.norm(edges, axis=1)
    scale = max(float(np.abs(v).max()), 1e-12)
    if np.any(length <= 1e-9 * scale):
        i = int(np.argmin(length))
        return f"degenerate: vertices {i} and {(i + 1) % len(v)} coincide"
    area = float((v[:, 0] * w[:, 1] - w[:, 0] * v[:, 1]).sum() / 2.0)
    if abs(area) <= 1e-12 * scale ** 2:
        crossing = _crossing(v, w)
        return f"self-intersecting: {crossing}" if crossing else "degenerate: the polygon has no area"
    turn = edges[:, 0] * np.roll(edges, -1, axis=0)[:, 1] - edges[:, 1] * np.roll(edges, -1, axis=0)[:, 0]
    tol = 1e-12 * scale ** 2
    if area < 0.0 and np.all(turn < tol):
        return "clockwise: list the vertices counter-clockwise"
    if np.any(np.abs(turn) <= tol):
        i = int(np.argmin(np.abs(turn)))
        return f"degenerate: vertex {(i + 1) % len(v)} is collinear with its neighbours (drop it)"
    if np.all(turn > 0.0) or np.all(turn < 0.0):
        # turning the same way at every vertex: convex unless it winds round more than once (a pentagram)
        angles = np.arctan2(turn, (edges * np.roll(edges, -1, axis=0)).sum(1))
        if abs(angles.sum()) > 2.0 * math.pi + 1e-6:
            return "self-intersecting: the outline winds round more than once"
        if area < 0.0:
            return "clockwise: list the vertices counter-clockwise"
        if np.any(edges[:, 0] * -v[:, 1] - edges[:, 1] * -v[:, 0] <= tol):  # the origin left of every edge
            return ("around a point outside it: the object frame's origin (0, 0), which the pose places, must lie "
                    "inside the outline (give the vertices about the object's centre)")
        return ""
    crossing = _crossing(v, w)
    if crossing:
        return f"self-intersecting: {crossing}"
    return f"non-convex: the outline turns the other way at vertex {int(np.argmin(turn * np.sign(area)) + 1) % len(v)}"


def _crossing(v, w) -> str:
    """'edges i and j cross' for the first two edges (v[k] -> w[k]) that cross without sharing a vertex, or ''."""
    for i in range(len(v)):
        for j in range(i + 2, len(v)):
            if not (i == 0 and j == len(v) - 1) and _segments_cross(v[i], w[i], v[j], w[j]):
                return f"edges {i} and {j} cross"
    return ""


def _segments_cross(a, b, c, d) -> bool:
    def side(p, q, r):
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])
    return side(a, b, c) * side(a, b, d) < 0.0 and side(c, d, a) * side(c, d, b) < 0.0


@dataclass(frozen=True)
class ConvexOutline:
    """A footprint in the object frame: ``kind`` "disc" (``radius``) or "polygon" (``vertices``, counter-clockwise,
    convex)."""

    kind: str
    radius: float = 0.0
    vertices: tuple = ()

    @classmethod
    def of(cls, shape: str, size, vertices=()) -> ConvexOutline:
        """The outline of a scene body (``BodySpec.shape``, ``size``: full extents, ``vertices`` of a polygon or an
        ellipse)."""
        if shape == "cylinder":
            return cls("disc", radius=size[0] / 2.0)
        if shape == "box":
            hx, hy = size[0] / 2.0, size[1] / 2.0
            return cls("polygon", vertices=((-hx, -hy), (hx, -hy), (hx, hy), (-hx, hy)))
        if shape in OUTLINE_SHAPES:
            return cls("polygon", vertices=tuple(tuple(map(float, p)) for p in vertices))
        raise ValueError(f"no convex outline for shape {shape!r}")

    @property
    def verts(self) -> np.ndarray:
        return np.asarray(self.vertices, dtype=float)

    @property
    def area(self) -> float:
        return math.pi * self.radius ** 2 if self.kind == "disc" else polygon_area_centroid(self.verts)[0]

    @property
    def centroid(self) -> np.ndarray:
        return np.zeros(2) if self.kind == "disc" else polygon_area_centroid(self.verts)[1]

    @property
    def mean_distance(self) -> float:
        """(1/A) int |r - g| dA about the centroid g: m_max / f_max under uniform pressure."""
        if self.kind == "disc":
            return 2.0 * self.radius / 3.0
        return polygon_moment_of_distance(self.verts, self.centroid) / self.area

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(outward unit normals (V, 2), offsets (V,)) of a polygon's edges: n . r <= offset inside."""
        v = self.verts
        e = np.roll(v, -1, axis=0) - v
        n = np.stack([e[:, 1], -e[:, 0]], -1) / np.linalg.norm(e, axis=1)[:, None]
        return n, (n * v).sum(1)

    def contact_samples(self, per_feature: int = 41) -> tuple[np.ndarray, np.ndarray]:
        """(points (K, 2), inward unit normals (K, 2)): contacts a pusher can make with the outline (edge points with
        their normal; at a polygon's vertices, every normal between the two edges')."""
        if self.kind == "disc":
            a = np.linspace(-math.pi, math.pi, 4 * per_feature, endpoint=False)
            out = np.stack([np.cos(a), np.sin(a)], -1)
            return self.radius * out, -out
        v = self.verts
        n, _ = self.edges()
        s = np.linspace(0.0, 1.0, per_feature)
        pts = [(1 - s)[:, None] * v[i] + s[:, None] * v[(i + 1) % len(v)] for i in range(len(v))]
        nrm = [np.repeat(-n[i][None], per_feature, 0) for i in range(len(v))]
        for i in range(len(v)):  # vertex i sits between edge i - 1 and edge i
            a0, a1 = math.atan2(*n[i - 1][::-1]), math.atan2(*n[i][::-1])
            a1 = a0 + (a1 - a0) % (2 * math.pi)
            a = np.linspace(a0, a1, per_feature)
            pts.append(np.repeat(v[i][None], per_feature, 0))
            nrm.append(-np.stack([np.cos(a), np.sin(a)], -1))
        return np.concatenate(pts), np.concatenate(nrm)


def read_mesh(path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (N, 3), triangles (T, 3) of vertex indices) of an STL (binary or ASCII) or OBJ file; ValueError or
    OSError with the reason when it cannot be read."""
    from pathlib import Path  # noqa: PLC0415
    path = Path(path)
    data = path.read_bytes()
    suffix = path.suffix.lower()
    if suffix == ".obj":
        verts, tris = [], []
        for line in data.decode("utf-8", "replace").splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "v":
                verts.append([float(x) for x in parts[1:4]])
            elif parts[0] == "f":
                idx = [int(p.split("/")[0]) for p in parts[1:]]
                idx = [i - 1 if i > 0 else len(verts) + i for i in idx]
                tris += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
        return np.asarray(verts, dtype=float).reshape(-1, 3), np.asarray(tris, dtype=int).reshape(-1, 3)
    if suffix != ".stl":
        raise ValueError(f"not an STL or OBJ file (suffix {path.suffix!r})")
    if len(data) >= 84:
        n = int(np.frombuffer(data[80:84], dtype="<u4")[0])
        if len(data) == 84 + 50 * n:  # binary
            rec = np.frombuffer(data[84:], dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]))
            v = rec["v"].reshape(-1, 3).astype(float)
            return v, np.arange(len(v)).reshape(-1, 3)
    text = data.decode("utf-8", "replace")
    v = [[float(x) for x in line.split()[1:4]] for line in text.splitlines() if line.strip().startswith("vertex")]
    if not v or len(v) % 3:
        raise ValueError("no triangles found (neither binary STL nor ASCII 'vertex' lines)")
    v = np.asarray(v, dtype=float)
    return v, np.arange(len(v)).reshape(-1, 3)


def mesh_footprint(path) -> tuple[tuple, float, float]:
    """A mesh as a scene object: (footprint: the convex hull of its vertices' x, y, counter-clockwise; height: its z
    extent; the volume change of using that footprint's prism instead of the mesh, relative to the mesh's volume,
    nan where the mesh is not closed)."""
    from scipy.spatial import ConvexHull, QhullError  # noqa: PLC0415
    v, tris = read_mesh(path)
    if len(v) < 4 or not np.all(np.isfinite(v)):
        raise ValueError("degenerate: fewer than 4 finite vertices")
    height = float(v[:, 2].max() - v[:, 2].min())
    if height <= 0.0:
        raise ValueError("degenerate: the mesh is flat (no height)")
    try:
        hull = ConvexHull(v[:, :2])
    except QhullError:
        raise ValueError("degenerate: the mesh's footprint has no area") from None
    footprint = tuple((float(x), float(y)) for x, y in v[hull.vertices, :2])  # counter-clockwise for 2-D hulls
    a, b, c = (v[tris[:, k]] for k in range(3))
    volume = abs(float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0) if len(tris) else 0.0
    change = abs(hull.volume * height - volume) / volume if volume > 0.0 else float("nan")
    return footprint, height, change
