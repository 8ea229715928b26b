"""Planar contact geometry of the pusher (a disc), objects (discs and rectangles) and obstacles.

Shared by scene validation, the analytical coarse model and the projection of infeasible (penetrating) states,
so every part of parapush agrees on what "touching" means. All functions are vectorised over leading batch axes.
"""
from __future__ import annotations

import numpy as np

_EPS = 1e-12


def rotate(v, yaw):
    """Rotate planar vectors ``v`` (..., 2) by ``yaw`` (...) counter-clockwise."""
    c, s = np.cos(yaw), np.sin(yaw)
    x, y = v[..., 0], v[..., 1]
    out = np.empty(np.broadcast_shapes(x.shape, np.shape(c)) + (2,))  # (np.stack costs more than the maths)
    out[..., 0] = c * x - s * y
    out[..., 1] = s * x + c * y
    return out


def to_local(points, pose):
    """Express world points (..., 2) in the frame of ``pose`` (..., 3) = [x, y, yaw]."""
    return rotate(points - pose[..., :2], -pose[..., 2])


def box_sdf(p_local, half):
    """Signed distance from local points to a rectangle with half extents ``half`` = (hx, hy), and its gradient.

    The gradient is the outward unit normal of the closest boundary point (well defined inside and outside).
    """
    q = np.abs(p_local) - half
    outside = np.maximum(q, 0.0)
    out_norm = np.linalg.norm(outside, axis=-1)
    inside = np.minimum(np.maximum(q[..., 0], q[..., 1]), 0.0)
    sdf = out_norm + inside
    # gradient: outside -> direction of the clamped excess; inside -> axis of the nearest face
    sign = np.where(p_local < 0.0, -1.0, 1.0)
    grad_out = outside / np.maximum(out_norm, _EPS)[..., None]
    face_x = (q[..., 0] >= q[..., 1])[..., None]
    grad_in = np.where(face_x, np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    grad = np.where((out_norm > 0.0)[..., None], grad_out, grad_in) * sign
    return sdf, grad


def circle_sdf(p_local, radius):
    norm = np.linalg.norm(p_local, axis=-1)
    grad = np.where((norm > _EPS)[..., None], p_local / np.maximum(norm, _EPS)[..., None], np.array([1.0, 0.0]))
    return norm - radius, grad


def polygon_sdf(p_local, vertices, normals, offsets):
    """Signed distance from local points to a convex counter-clockwise polygon and its gradient (the outward unit
    normal of the closest boundary point; an edge's normal inside)."""
    v = vertices
    e = np.roll(v, -1, axis=0) - v
    rel = p_local[..., None, :] - v  # (..., V, 2)
    t = np.clip((rel * e).sum(-1) / (e * e).sum(-1), 0.0, 1.0)
    diff = rel - t[..., None] * e  # from the closest point of each edge to the point
    dist = np.linalg.norm(diff, axis=-1)
    k = np.argmin(dist, axis=-1)
    d_out = np.take_along_axis(dist, k[..., None], -1)[..., 0]
    g_out = np.take_along_axis(diff, k[..., None, None].repeat(2, -1), -2)[..., 0, :] / np.maximum(d_out, _EPS)[
        ..., None]
    signed = p_local @ normals.T - offsets  # (..., V)
    j = np.argmax(signed, axis=-1)
    d_in = np.take_along_axis(signed, j[..., None], -1)[..., 0]
    inside = d_in <= 0.0
    return np.where(inside, d_in, d_out), np.where(inside[..., None], normals[j], g_out)


class Footprint:
    """The planar outline of a body: a disc (``radius``), a rectangle (``half_extents`` = (hx, hy)) or a convex
    polygon (``vertices``, counter-clockwise, body frame: polygons and ellipses)."""

    def __init__(self, shape: str, radius: float = 0.0, half_extents=(0.0, 0.0), vertices=()):
        if shape not in ("box", "cylinder", "polygon"):
            raise ValueError(f"unknown footprint shape {shape!r}")
        self.shape = shape
        self.radius = float(radius)
        self.half_extents = np.asarray(half_extents, dtype=float)
        if shape == "polygon":
            self.vertices = np.asarray(vertices, dtype=float)
            e = np.roll(self.vertices, -1, axis=0) - self.vertices
            self.normals = np.stack([e[:, 1], -e[:, 0]], -1) / np.linalg.norm(e, axis=1)[:, None]
            self.offsets = (self.normals * self.vertices).sum(1)
        else:
            hx, hy = self.half_extents
            self.vertices = np.array([[hx, hy], [-hx, hy], [-hx, -hy], [hx, -hy]])

    @property
    def bounding_radius(self) -> float:
        if self.shape == "cylinder":
            return self.radius
        return float(np.linalg.norm(self.vertices, axis=1).max())

    def sdf(self, points, pose):
        """Signed distance (m) from world ``points`` to the outline at ``pose`` and the outward world normal."""
        if self.shape == "cylinder":  # rotation invariant: no round trip through the body frame
            return circle_sdf(points - pose[..., :2], self.radius)
        if self.shape == "polygon":
            d, g = polygon_sdf(to_local(points, pose), self.vertices, self.normals, self.offsets)
        else:
            d, g = box_sdf(to_local(points, pose), self.half_extents)
        return d, rotate(g, pose[..., 2])

    def corners(self, pose):
        """(..., V, 2) world corners of a rectangle (4) or a polygon (its vertices)."""
        n = len(self.vertices)
        return rotate(np.broadcast_to(self.vertices, pose.shape[:-1] + (n, 2)), pose[..., None, 2]) + \
            pose[..., None, :2]

    def axes(self, pose):
        """(..., K, 2) world unit normals of the edges (a rectangle's two axes) for separating-axis tests."""
        local = self.normals if self.shape == "polygon" else np.eye(2)
        return rotate(np.broadcast_to(local, pose.shape[:-1] + local.shape), pose[..., None, 2])


def disc_penetration(center, radius, footprint: Footprint, pose):
    """Penetration depth (> 0 when overlapping) of a disc into an outline and the unit normal pointing from the
    outline toward the disc (the direction that separates them)."""
    d, n = footprint.sdf(center, pose)
    return radius - d, n


# m: outlines closer than this touch (MuJoCo keeps ~0.7 mm of penetration in contact): an obstacle hit for the
# outcome monitor, a collision for the cost, a start the scene file may not give
TOUCH_DISTANCE = 1.0e-3
EXACT_GAP = 0.02  # m: separations closer than this between outlines are computed exactly (_box_box_penetration)


def _box_box_penetration(fa: Footprint, pa, fb: Footprint, pb):
    """Separating-axis test for two rectangles or convex polygons: penetration depth and unit normal from a toward
    b. Either pose may be one pose (an obstacle's) against a batch of the other's."""
    pa, pb = np.broadcast_arrays(np.asarray(pa, dtype=float), np.asarray(pb, dtype=float))
    axes = np.concatenate([fa.axes(pa), fb.axes(pb)], axis=-2)  # (..., K, 2)
    ca, cb = fa.corners(pa), fb.corners(pb)  # (..., 4, 2)
    proj_a = np.einsum("...kd,...cd->...kc", axes, ca)
    proj_b = np.einsum("...kd,...cd->...kc", axes, cb)
    # along each axis, b must move forward by max a - min b or back by max b - min a to clear a: the lesser is the
    # depth along it (the overlap of the two intervals is not, where one contains the other: a deep overlap)
    forward = proj_a.max(-1) - proj_b.min(-1)
    back = proj_b.max(-1) - proj_a.min(-1)
    overlap = np.minimum(forward, back)
    k = np.argmin(overlap, axis=-1)
    depth = np.take_along_axis(overlap, k[..., None], -1)[..., 0]
    axis = np.take_along_axis(axes, k[..., None, None].repeat(2, -1), -2)[..., 0, :]
    direction = np.where(np.take_along_axis(forward <= back, k[..., None], -1)[..., 0], 1.0, -1.0)
    # separated: the best axis's gap only bounds the distance from below (a corner facing a corner reads closer than
    # it is, e.g. 0.92 mm for 1.30 mm: a "hit" of the 1 mm contact tolerance); the exact gap between two disjoint
    # convex outlines is the least distance of a corner of one to the other outline. Computed where the bound is
    # within EXACT_GAP (what contact and collision margins judge; farther, the bound is close enough for the cost
    # and an ellipse's 64 corners cost 20x the test)
    near = (depth < 0.0) & (depth > -EXACT_GAP)
    if np.any(near):
        depth = np.array(depth, dtype=float)
        depth[near] = -np.minimum(fb.sdf(ca[near], pb[near][..., None, :])[0].min(-1),
                                  fa.sdf(cb[near], pa[near][..., None, :])[0].min(-1))
    return depth, axis * direction[..., None]


def pair_penetration(fa: Footprint, pa, fb: Footprint, pb):
    """Penetration depth (> 0 when overlapping) between two outlines and the unit normal from a toward b."""
    if fa.shape == "cylinder" and fb.shape == "cylinder":
        delta = pb[..., :2] - pa[..., :2]
        dist = np.linalg.norm(delta, axis=-1)
        n = np.where((dist > _EPS)[..., None], delta / np.maximum(dist, _EPS)[..., None], np.array([1.0, 0.0]))
        return fa.radius + fb.radius - dist, n
    if fa.shape == "cylinder":  # disc a against outline b: normal from b toward a, flip it
        depth, n = disc_penetration(pa[..., :2], fa.radius, fb, pb)
        return depth, -n
    if fb.shape == "cylinder":
        return disc_penetration(pb[..., :2], fb.radius, fa, pa)
    return _box_box_penetration(fa, pa, fb, pb)


def ray_entry(origin, direction, length, footprint: Footprint, pose, inflate: float):
    """Distance along a planar ray at which a disc of radius ``inflate`` moving from ``origin`` along the unit
    ``direction`` first touches the outline; ``inf`` where it does not within ``length``.

    A disc that starts touching or overlapping returns 0 when it moves inward (contact from the start) and
    ``inf`` when it moves away. Exact for discs and for rectangles (the Minkowski sum of a rectangle and a
    disc is a rounded rectangle: two slabs and four corner circles).
    """
    if footprint.shape == "cylinder":  # rotation invariant: stay in the world frame
        entry = _ray_circle(origin - pose[..., :2], direction, 0.0, footprint.radius + inflate)
    elif footprint.shape == "polygon":  # the Minkowski sum: each edge swept outward by inflate, vertex circles
        o = to_local(origin, pose)
        d = rotate(direction, -pose[..., 2])
        v, n, off = footprint.vertices, footprint.normals, footprint.offsets
        w = np.roll(v, -1, axis=0)
        t = np.stack([-n[:, 1], n[:, 0]], -1)  # (V, 2) each edge's direction: its outward normal turned +90 deg
        # all edges at once (an ellipse has 64: a loop over them cost 7 ms a call): edge k's slab, swept outward by
        # inflate and bounded by the lines through its ends, is normals . x <= offsets over its 4 planes
        planes = np.stack([n, -n, t, -t], axis=1)  # (V, 4, 2)
        offsets = np.stack([off + inflate, -off, (t * w).sum(-1), -(t * v).sum(-1)], axis=1)  # (V, 4)
        o_, d_ = o[..., None, :], d[..., None, :]  # against each edge / vertex: (..., V)
        entry = np.minimum(_ray_convex(o_, d_, planes, offsets).min(-1), _ray_circle(o_, d_, v, inflate).min(-1))
    else:
        o = to_local(origin, pose)
        d = rotate(direction, -pose[..., 2])
        hx, hy = footprint.half_extents
        entry = np.minimum(_ray_aabb(o, d, np.array([hx + inflate, hy])),
                           _ray_aabb(o, d, np.array([hx, hy + inflate])))
        for cx, cy in ((hx, hy), (-hx, hy), (-hx, -hy), (hx, -hy)):
            entry = np.minimum(entry, _ray_circle(o, d, np.array([cx, cy]), inflate))
    # discs that start in contact: contact iff moving into the outline
    sdf, normal = footprint.sdf(origin, pose)
    starts_inside = sdf <= inflate
    moving_in = np.einsum("...d,...d->...", direction, normal) < 0.0
    entry = np.where(starts_inside, np.where(moving_in, 0.0, np.inf), entry)
    return np.where(entry <= length, entry, np.inf)


def _ray_circle(o, d, c, r):
    """Entry distance (>= 0) of the ray o + s d into the circle (c, r); inf if missed (o assumed outside)."""
    oc = o - c
    b = np.einsum("...d,...d->...", oc, d)
    cc = np.einsum("...d,...d->...", oc, oc) - r * r
    disc = b * b - cc
    s = -b - np.sqrt(np.maximum(disc, 0.0))
    return np.where((disc >= 0.0) & (s >= 0.0), s, np.inf)


def _ray_aabb(o, d, half):
    """Entry distance (>= 0) of the ray into the centred box with half extents ``half``; inf if missed."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d
        t1 = (-half - o) * inv
        t2 = (half - o) * inv
    # a zero direction component: inside the slab -> (-inf, inf), outside -> empty
    parallel = np.abs(d) < _EPS
    inside_slab = np.abs(o) <= half
    tmin = np.where(parallel, np.where(inside_slab, -np.inf, np.inf), np.minimum(t1, t2))
    tmax = np.where(parallel, np.where(inside_slab, np.inf, -np.inf), np.maximum(t1, t2))
    t_enter = tmin.max(axis=-1)
    t_exit = tmax.min(axis=-1)
    return np.where((t_enter <= t_exit) & (t_enter >= 0.0), t_enter, np.inf)


def _ray_convex(o, d, normals, offsets):
    """Entry distance (>= 0) of the ray o + s d into the convex region normals . x <= offsets; inf if missed."""
    num = offsets - np.einsum("...d,...kd->...k", o, normals)  # (..., K): >= 0 where o is inside that half-plane
    den = np.einsum("...d,...kd->...k", d, normals)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = num / den
    parallel = np.abs(den) < _EPS
    enter = np.where(parallel, np.where(num >= 0.0, -np.inf, np.inf), np.where(den < 0.0, s, -np.inf))
    leave = np.where(parallel, np.inf, np.where(den > 0.0, s, np.inf))
    t_enter, t_exit = enter.max(-1), leave.min(-1)
    return np.where((t_enter <= t_exit) & (t_enter >= 0.0), t_enter, np.inf)
