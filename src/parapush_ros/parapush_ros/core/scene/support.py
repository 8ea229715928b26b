"""How an object rests on the table: the support points of the fine model.

The friction an object meets when it turns depends on where its weight presses on the table. The quasi-static
limit surface (``docs/background.md``, "Quasi-static pushing") has f_max = mu m g and m_max = mu m g (1/A) int |r| dA
for uniform pressure: the turning resistance is set by the mean distance of the pressure from the centre. MuJoCo's
own box-on-box and cylinder-on-box contacts put a resting object on 4 points at its corners or rim, the largest
mean distance the footprint allows (0.71 a for a square of side a, R for a disc, against 0.38 a and 2 R / 3 for
uniform pressure), so such an object turns about half as much as a real one for the same push.

``pattern: grid`` spreads the support over the footprint instead: ``points`` x ``points`` cell centres of the
footprint's bounding rectangle (those inside the disc for a cylinder), each a small sphere that touches the table
and nothing else. Equal points carry equal load (soft contacts, equal penetration), so the grid is a uniform
pressure; its points are scaled radially so that their mean distance from the centre is ``spread`` times the
uniform-pressure value exactly (1 = uniform; below 1 the pressure sits nearer the centre, as under a slightly
convex base; above 1 nearer the rim). ``pattern: native`` keeps MuJoCo's own contacts (the former physics).
The default is ``grid`` with 3 points per side (DEFAULT_SUPPORT).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .convex import OUTLINE_SHAPES, ConvexOutline

SUPPORT_PATTERNS = ("native", "grid")
SUPPORT_POINTS_RANGE = (2, 9)  # points per side of a grid: 4 to 81 contacts per object
SUPPORT_SPHERE_RADIUS = 1.0e-3  # m: the support points' spheres (small against any object; their bottom is the base)
# Support contacts are compliant: MuJoCo impedance rising from 0 at first touch to 0.95 at 0.5 mm, so an object sinks
# ~0.2 mm under its weight and its load spreads over all support points by their penetration (an elastic
# foundation). With the default stiff contacts (3 um of sink) the load was decided by micrometre tilts: on a pushed
# 5 x 5 grid only 10-14 of the 25 points carried load at a time, up to 4 times their share, and the object chattered;
# soft, every point is loaded within -25 %/+70 % of its share and the turning rate no longer depends on the setting
# (measured: experiments summarised in docs/architecture.md, "Support pressure").
SUPPORT_SOLIMP = "0 0.95 0.0005"


@dataclass(frozen=True)
class SupportSpec:
    pattern: str = "grid"
    points: int = 3
    spread: float = 1.0

    def to_dict(self) -> dict:
        return {"pattern": self.pattern, "points": self.points, "spread": self.spread}


# The default is uniform pressure, the standard assumption of quasi-static pushing (Lynch et al. 1992; the limit
# surface in docs/background.md), on 3 x 3 points: scaled to the uniform mean radius they
# reproduce the exact uniform-pressure quasi-static turning within 2 % (``parapush bench support``), at the cost of
# MuJoCo's native 4 contacts. ``native`` is the physics before uniform support.
DEFAULT_SUPPORT = SupportSpec()


def uniform_mean_radius(shape: str, size, vertices=()) -> float:
    """(1/A) int |r - g| dA over the footprint about its centroid g: m_max / (mu m g) of the limit surface under
    uniform pressure (``vertices``: a polygon's or an ellipse's outline, ``convex.ConvexOutline``)."""
    if shape == "cylinder":
        return size[0] / 3.0  # 2 R / 3
    if shape in OUTLINE_SHAPES:
        return ConvexOutline.of(shape, size, vertices).mean_distance
    p, q = size[0] / 2.0, size[1] / 2.0
    d = math.hypot(p, q)
    # int_0^p int_0^q sqrt(x^2 + y^2) dy dx, divided by the quarter's area p q
    integral = (2.0 * p * q * d + p ** 3 * math.log((q + d) / p) + q ** 3 * math.log((p + d) / q)) / 6.0
    return integral / (p * q)


def _inside(shape: str, size, vertices, pts, margin: float = 0.0) -> np.ndarray:
    """Which object-frame points lie within the footprint, at least ``margin`` inside its outline."""
    if shape == "cylinder":
        return np.hypot(pts[:, 0], pts[:, 1]) <= size[0] / 2.0 - margin + 1e-12
    if shape in OUTLINE_SHAPES:
        n, off = ConvexOutline.of(shape, size, vertices).edges()
        return np.all(pts @ n.T <= off - margin + 1e-12, axis=1)
    return np.all(np.abs(pts) <= np.array(size[:2]) / 2.0 - margin + 1e-12, axis=1)


def support_points(shape: str, size, support: SupportSpec, vertices=()) -> np.ndarray:
    """(P, 2) support points in the object frame for ``pattern: grid`` (see the module docstring). A polygon's or an
    ellipse's: the cell centres of its bounding rectangle that lie inside it, scaled about its centroid."""
    if support.pattern != "grid":
        raise ValueError(f"support points exist for pattern 'grid' only, not {support.pattern!r}")
    n = int(support.points)
    cells = (np.arange(n) + 0.5) / n - 0.5  # cell centres of [-1/2, 1/2]
    centre = np.zeros(2)
    if shape in OUTLINE_SHAPES:
        v = np.asarray(vertices, dtype=float)
        lo, hi = v.min(0), v.max(0)
        gx, gy = np.meshgrid(lo[0] + (cells + 0.5) * (hi - lo)[0], lo[1] + (cells + 0.5) * (hi - lo)[1],
                             indexing="ij")
        centre = ConvexOutline.of(shape, size, vertices).centroid
    else:
        gx, gy = np.meshgrid(cells * size[0], cells * size[1], indexing="ij")
    pts = np.stack([gx.ravel(), gy.ravel()], axis=-1)
    if shape != "box":
        pts = pts[_inside(shape, size, vertices, pts)]
    mean = np.hypot(*(pts - centre).T).mean()
    return centre + (pts - centre) * (support.spread * uniform_mean_radius(shape, size, vertices) / mean)


def support_fits(shape: str, size, support: SupportSpec, vertices=()) -> bool:
    """True when every support sphere lies within the footprint (a spread too large pushes them outside)."""
    if support.pattern != "grid":
        return True
    pts = support_points(shape, size, support, vertices)
    return bool(np.all(_inside(shape, size, vertices, pts, SUPPORT_SPHERE_RADIUS)))


def mean_support_radius(shape: str, size, support: SupportSpec, vertices=()) -> float:
    """Mean distance of the support from the centroid: m_max / (mu m g) of this support's limit surface. For
    ``native`` the corners of a box and the rim of a cylinder (MuJoCo's 4 contacts); a polygon's vertices."""
    if support.pattern == "grid":
        centre = ConvexOutline.of(shape, size, vertices).centroid
        return float(np.hypot(*(support_points(shape, size, support, vertices) - centre).T).mean())
    if shape == "cylinder":
        return size[0] / 2.0
    if shape in OUTLINE_SHAPES:
        o = ConvexOutline.of(shape, size, vertices)
        return float(np.hypot(*(o.verts - o.centroid).T).mean())
    return math.hypot(size[0], size[1]) / 2.0
