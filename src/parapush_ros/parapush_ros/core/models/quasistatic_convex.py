"""Quasi-static pushing of one object of any convex footprint (a disc or a convex polygon) by a round pusher.

The generalisation of paper 003's box model (``quasistatic.QuasiStaticPusherSlider``) to any convex outline
(``core/scene/convex.ConvexOutline``), with the same state, control, integration and the same twist function
(``quasistatic.contact_twist``: ellipsoidal limit surface, motion cone, sticking / sliding):

* limit surface: uniform support pressure over the footprint; f_max = mu_g m g, m_max = f_max c with c the exact
  mean distance of the footprint from its centroid (``ConvexOutline.mean_distance``, the friction moment at pure
  rotation, integrated exactly), times ``c_scale`` (the fit to a fine model whose support is not uniform);
  ``limit_surface="integrated"`` replaces that ellipsoid by the friction summed over ``support_points`` x
  ``support_points`` grid points of the footprint (the fine model's support grid, scaled by ``c_scale``), solved per
  contact (``integrated_ls``: sticking, sliding on the friction cone's edge; no single c);
* centre of friction: the footprint's centroid (the object frame's origin need not be it; the origin's velocity
  follows from the twist about the centroid);
* contact: the point of the outline nearest the pusher centre and the outline's inward normal there — for a disc
  the radial direction, for a polygon an edge's normal or, when the pusher is past the edge's ends, the direction
  from the vertex to the pusher (vertex contacts: the box model of paper 003 has none, its pusher separates
  there);
* mode: in contact when the gap between the pusher's surface and the outline is <= ``contact_tol`` and the pusher
  moves into the outline (v_n >= 0); sticking, sliding up or down from the motion cone; otherwise separation (the
  object stays: quasi-static). A gap within ``contact_tol`` is closed, not kept (``close_gap``): the object
  moves only for the share of a step after the pusher has crossed it (paper 003's box model keeps the gap, and so
  carried every measured start's millimetre on through Parareal: docs/results/fidelity.md).

State ``x = [s_x, s_y, s_theta, p_x, p_y, v_x, v_y]``, control ``u = [a_x, a_y]`` (pusher acceleration), one step
of ``dt`` as in ``quasistatic`` (semi-implicit Euler). ``step_info``'s *feature*: the polygon edge i (0..V-1) or
vertex i (V..2V-1) in contact, 0 for a disc. Derivatives for DDP (``step_jacobians``) are exact within a feature
and mode, like the box model's.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..scene.convex import ConvexOutline
from . import dual
from .dual import Dual
from .integrated_ls import integrated_contact_twist, support_grid
from .quasistatic import (SEPARATION, SLIDE_DOWN, SLIDE_UP, STATE_DIM, STICK, LimitSurfaceLoads,
                          QuasiStaticPusherSlider, contact_twist, pusher_in_object_frame)


LIMIT_SURFACES = ("ellipsoid", "integrated")
DEFAULT_LIMIT_SURFACE = "integrated"  # chosen by measurement: docs/results/fidelity.md
DEFAULT_CONTACT_HEIGHT = -1.0  # negative: where the fine model's pusher touches (mjcf.pusher_contact_height)
# the integrated limit surface's twist table (``_twist_table``): contact positions round the outline and pusher
# directions across the contact's half plane; its error against the direct solve: test_quasistatic_convex.py
TABLE_POSITIONS = 512
TABLE_DIRECTIONS = 49


def _value(a):
    return a.val if isinstance(a, Dual) else a


def _take(a, rows):
    """Rows of a batch (a Dual, an array or a constant)."""
    if isinstance(a, Dual):
        return Dual(a.val[rows], a.der[rows])
    a = np.asarray(a, dtype=float)
    return a[rows] if a.ndim else np.full(len(rows), float(a))


def _put(a, rows, size):
    """The batch of ``size`` rows holding ``a`` at ``rows``, zero elsewhere (a Dual or an array)."""
    if isinstance(a, Dual):
        val, der = np.zeros(size), np.zeros((size,) + a.der.shape[1:])
        val[rows], der[rows] = a.val, a.der
        return Dual(val, der)
    out = np.zeros(size)
    out[rows] = a
    return out


@dataclass(frozen=True)
class QuasiStaticConvexSlider(LimitSurfaceLoads):
    """One convex slider and a round pusher; all methods take batches: ``x`` (..., 7), ``u`` (..., 2)."""

    outline: ConvexOutline  # the footprint in the object frame
    mass: float  # kg
    mu_g: float  # slider-table friction
    mu_p: float  # pusher-slider friction
    pusher_radius: float  # m
    dt: float = 0.01  # s
    contact_tol: float = 0.005  # m
    c_scale: float = 1.0  # c relative to uniform pressure (``quasistatic.fine_c_scale``)
    # "ellipsoid": one c (``quasistatic.contact_twist``); "integrated": the friction of ``support_points`` x
    # ``support_points`` grid points over the footprint, scaled by c_scale (``integrated_ls``)
    limit_surface: str = DEFAULT_LIMIT_SURFACE
    support_points: int = 3
    # integrated only: the twist read from a table solved once per slider (``_twist_table``), 7-11x cheaper per
    # step than solving every contact; False: the direct solve (the reference the table is built from)
    tabulated: bool = True
    # integrated only: the height (m) above the table at which the pusher's force acts; its tipping moment shifts
    # the support's load towards the force, by contact_height x force / (m g) (0: no load transfer)
    contact_height: float = 0.0
    # True: a gap within contact_tol is closed (the object moves only after the pusher has crossed it); False:
    # kept, as paper 003's box model does
    close_gap: bool = True

    def __post_init__(self):
        for name in ("mass", "mu_g", "mu_p", "pusher_radius", "dt", "contact_tol", "c_scale"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"quasi-static model: {name} must be > 0, got {getattr(self, name)}")
        if self.limit_surface not in LIMIT_SURFACES:
            raise ValueError(f"quasi-static model: limit_surface must be one of {', '.join(LIMIT_SURFACES)}, got "
                             f"{self.limit_surface!r}")
        if not (np.isfinite(self.contact_height) and self.contact_height >= 0.0):
            raise ValueError(f"quasi-static model: contact_height must be finite and >= 0, got {self.contact_height}")
        if not (isinstance(self.support_points, int | np.integer) and 2 <= self.support_points <= 9):
            raise ValueError(f"quasi-static model: support_points must be an integer in 2..9, got "
                             f"{self.support_points!r}")
        # cache the geometry (frozen dataclass: object.__setattr__)
        object.__setattr__(self, "_g", self.outline.centroid)
        object.__setattr__(self, "_c", self.c_scale * self.outline.mean_distance)
        if self.limit_surface == "integrated":
            pts = support_grid(self.outline, self.support_points, self.c_scale) - self._g
            object.__setattr__(self, "_support", pts)
            object.__setattr__(self, "_weights", np.full(len(pts), 1.0 / len(pts)))
            centred = pts - pts.mean(0)
            object.__setattr__(self, "_centred", centred)
            object.__setattr__(self, "_inv_second_moment", np.linalg.inv(centred.T @ centred / len(pts)))
        if self.outline.kind == "polygon":
            n, off = self.outline.edges()
            object.__setattr__(self, "_n", n)
            object.__setattr__(self, "_off", off)
            object.__setattr__(self, "_v", self.outline.verts)
            e = np.roll(self.outline.verts, -1, axis=0) - self.outline.verts  # edge k: vertex k -> k + 1
            object.__setattr__(self, "_e", e)
            object.__setattr__(self, "_e2", (e ** 2).sum(1))
            object.__setattr__(self, "_inward", -n)
            object.__setattr__(self, "_inward_next", np.roll(-n, -1, axis=0))
        if self.limit_surface == "integrated" and self.tabulated:
            object.__setattr__(self, "_table", _twist_table(self.outline, self.support_points, self.c_scale,
                                                            self.mu_g, self.mu_p, self.contact_height))
            psi = np.linspace(-0.5 * np.pi, 0.5 * np.pi, self._table.shape[1])  # the table's pusher directions
            object.__setattr__(self, "_table_sin", np.sin(psi))
            object.__setattr__(self, "_table_rows", self._table.reshape(-1, self._table.shape[2]))
            object.__setattr__(self, "_table_step", psi[1] - psi[0])
        # the motion cone's edges must stay on the pushing side for every contact the outline allows
        pts, nrm = self.outline.contact_samples()
        p = pts - self._g
        p_x = (p * nrm).sum(1)
        p_y = p[:, 1] * nrm[:, 0] - p[:, 0] * nrm[:, 1]
        if np.any(self._c ** 2 + p_y ** 2 - self.mu_p * np.abs(p_x * p_y) <= 0.0):
            raise ValueError(f"quasi-static model: mu_p = {self.mu_p} is too large for this outline (the motion "
                             "cone's edges pass through v_n = 0)")

    @classmethod
    def from_scene(cls, scene, obj: int | str = 0, **kw) -> QuasiStaticConvexSlider:
        """The model of one object of a scene (outline, mass, table and pusher friction, pusher radius)."""
        o = scene.objects[scene.object_index(obj) if isinstance(obj, str) else obj]
        return cls(outline=ConvexOutline.of(o.shape, o.size, o.vertices), mass=o.mass,
                   mu_g=scene.friction["object_table"], mu_p=scene.friction["pusher_object"],
                   pusher_radius=scene.pusher.radius, **kw)

    @property
    def c(self) -> float:
        """m_max / f_max of the limit surface (m)."""
        return self._c

    # ------------------------------------------------------------------------------------ contact geometry
    def _contact(self, rx, ry, ops):
        """Nearest outline point to the pusher centre (rx, ry) (object frame): (contact point, inward normal,
        gap between the pusher's surface and the outline, feature index)."""
        if self.outline.kind == "disc":
            d = ops.sqrt(rx * rx + ry * ry + 1e-18)
            nx, ny = -rx / d, -ry / d
            R = self.outline.radius
            return (-R * nx, -R * ny), (nx, ny), d - (R + self.pusher_radius), np.zeros(len(_value(rx)), int)
        n, off, v, e = self._n, self._off, self._v, self._e
        V = len(v)
        x, y = _value(rx)[:, None], _value(ry)[:, None]
        signed = x * n[:, 0] + y * n[:, 1] - off  # (N, V) signed distance to each edge line
        t = ((x - v[:, 0]) * e[:, 0] + (y - v[:, 1]) * e[:, 1]) / self._e2
        tc = np.minimum(np.maximum(t, 0.0), 1.0)
        dist = np.hypot(x - (v[:, 0] + tc * e[:, 0]), y - (v[:, 1] + tc * e[:, 1]))
        inside = (signed <= 0.0).all(1)
        k = np.where(inside, signed.argmax(1), dist.argmin(1))
        tk = t[np.arange(len(k)), k]
        # past an edge's ends (outside only): the nearest feature is a vertex, the edge's start or end
        at_vertex = ~inside & ((tk < 0.0) | (tk > 1.0))
        vi = np.where(tk > 1.0, (k + 1) % V, k)
        feature = np.where(at_vertex, V + vi, k)
        # edge contact: the pusher centre projected onto the edge line, the edge's inward normal
        enx, eny, eo = n[k, 0], n[k, 1], off[k]
        s = rx * enx + ry * eny - eo
        ex, ey = rx - s * enx, ry - s * eny
        # vertex contact: the vertex, the direction from the pusher centre to it
        vx, vy = v[vi, 0], v[vi, 1]
        dx, dy = rx - vx, ry - vy
        dn = ops.sqrt(dx * dx + dy * dy + 1e-18)
        cx, cy = ops.where(at_vertex, vx, ex), ops.where(at_vertex, vy, ey)
        nx, ny = ops.where(at_vertex, -dx / dn, -enx), ops.where(at_vertex, -dy / dn, -eny)
        gap = ops.where(at_vertex, dn, s) - self.pusher_radius
        return (cx, cy), (nx, ny), gap, feature

    # ------------------------------------------------------------------------------------ dynamics
    def _step(self, z: list, ops=dual):
        """One step on ``z`` = 7 state + 2 control components (Duals with ``ops=dual``, arrays with ``ops=np``):
        (next state components, feature, mode)."""
        dt = self.dt
        (sx, sy, th, px, py, vx1, vy1), (c, s), (rx, ry), (wx, wy) = pusher_in_object_frame(z, dt, ops)
        (cx, cy), (nx, ny), gap, feature = self._contact(rx, ry, ops)
        gx0, gy0 = self._g
        vn, vt = wx * nx + wy * ny, wy * nx - wx * ny  # contact frame: x = inward normal, y = x turned +90 deg
        contact = (_value(gap) <= self.contact_tol) & (_value(vn) >= 0.0)
        if self.limit_surface == "integrated" and self.tabulated:
            tx, ty, om, up, down = self._table_twist(feature, (cx, cy), (nx, ny), (vn, vt), ops)
        else:
            qx, qy = cx - gx0, cy - gy0  # contact point relative to the centre of friction
            p = (qx * nx + qy * ny, qy * nx - qx * ny)
            if self.limit_surface == "integrated":
                tx, ty, om, up, down = self._integrated_twist(contact, p, (vn, vt), (nx, ny), ops)
            else:
                tx, ty, om, up, down = contact_twist(*p, vn, vt, self.c, self.mu_p, ops)
        if self.close_gap:
            # a pusher short of the outline pushes only for the part of the step after it has crossed the gap: the
            # gap closes instead of being carried along (a kept gap is free travel that the fine model, started
            # from this state, spends not pushing). The twist is linear in the speed, so that is a share of it.
            g, closing = _value(gap), _value(vn) * dt
            partial = contact & (g > 0.0) & (g < closing)
            share = ops.where(partial, 1.0 - gap / ops.where(partial, vn * dt, 1.0), np.where(g <= 0.0, 1.0, 0.0))
            tx, ty, om = (t * share for t in (tx, ty, om))
        tx, ty, om = (ops.where(contact, t, 0.0) for t in (tx, ty, om))
        bx, by = tx * nx - ty * ny + om * gy0, tx * ny + ty * nx - om * gx0  # the origin's velocity, object frame
        gx, gy = c * bx - s * by, s * bx + c * by  # object frame -> table frame
        nxt = [sx + dt * gx, sy + dt * gy, th + dt * om, px + dt * vx1, py + dt * vy1, vx1, vy1]
        mode = np.where(~contact, SEPARATION, np.where(up, SLIDE_UP, np.where(down, SLIDE_DOWN, STICK)))
        return nxt, feature, mode

    def _table_position(self, feature, cpt, n, ops):
        """Where the contact lies on the table's closed curve of contact positions (``table_contacts``), in table
        nodes (a Dual or an array): a disc by its normal's angle; a polygon by unit: edge k is unit 2k (the contact
        point's fraction along it), the vertex after it unit 2k + 1 (the normal's fraction between the two edges'
        normals)."""
        count = self._table.shape[0]
        if self.outline.kind == "disc":
            return ops.arctan2(n[1], n[0]) * (count / (2.0 * np.pi))
        verts = self._v
        V = len(verts)
        per_unit = count // (2 * V)
        edge = feature < V
        k = np.where(edge, feature, (feature - V - 1) % V)  # the edge that ends at the vertex
        e = self._e
        t = ((cpt[0] - verts[k, 0]) * e[k, 0] + (cpt[1] - verts[k, 1]) * e[k, 1]) / self._e2[k]
        tv = _value(t)
        t = ops.where(tv < 0.0, 0.0, ops.where(tv > 1.0, 1.0, t))
        a, b = self._inward[k], self._inward_next[k]  # the inward normals of edge k and of the edge after it
        c1, c2 = a[:, 0] * n[1] - a[:, 1] * n[0], n[0] * b[:, 1] - n[1] * b[:, 0]
        f = c1 / (c1 + c2 + 1e-300)
        fv = _value(f)
        f = ops.where(fv < 0.0, 0.0, ops.where(fv > 1.0, 1.0, f))
        return ops.where(edge, t + 2.0 * k, f + (2.0 * k + 1.0)) * float(per_unit)

    def _table_twist(self, feature, cpt, n, v, ops):
        """The integrated limit surface's twist (``contact_twist``'s returns) read from the slider's table:
        bilinear in the contact position and in the sine of the pusher's direction, times the pusher's speed (the
        twist is homogeneous of degree 1 in the pusher's velocity; the load transfer of degree 0)."""
        table = self._table
        count, directions = table.shape[0], table.shape[1]
        pos = self._table_position(feature, cpt, n, ops)
        base = np.floor(_value(pos))
        fu = pos - base
        i0 = base.astype(int) % count
        i1 = (i0 + 1) % count
        vn, vt = v
        speed = ops.sqrt(vn * vn + vt * vt + 1e-30)
        sine = vt / speed
        sv = np.minimum(np.maximum(_value(sine), -1.0), 1.0)
        j0 = np.minimum(np.maximum(np.floor((np.arcsin(sv) + 0.5 * np.pi) / self._table_step).astype(int), 0),
                        directions - 2)
        s0, s1 = self._table_sin[j0], self._table_sin[j0 + 1]
        fs = (sine - s0) / (s1 - s0)
        # the four corners' (t_x, t_y, omega, up, down) at once: (N, 5) each, weights as columns
        flat, r0, r1 = self._table_rows, i0 * directions + j0, i1 * directions + j0  # one row per (position, direction)
        t00, t10, t01, t11 = flat[r0], flat[r1], flat[r0 + 1], flat[r1 + 1]
        fu, fs = dual.column(fu), dual.column(fs)
        lo = t00 + fu * (t10 - t00)
        hi = t01 + fu * (t11 - t01)
        both = lo + fs * (hi - lo)
        out = [Dual(both.val[:, q], both.der[:, q]) if isinstance(both, Dual) else both[:, q] for q in range(5)]
        up, down = _value(out[3]) > 0.5, _value(out[4]) > 0.5
        return out[0] * speed, out[1] * speed, out[2] * speed, up, down

    def table_contacts(self, per_unit: int):
        """The table's contact positions (``_table_position`` of them: 0, 1, 2, ...): contact points and inward
        normals (object frame), per_unit per edge and per vertex of a polygon, per_unit in all for a disc."""
        if self.outline.kind == "disc":
            a = 2.0 * np.pi * np.arange(per_unit) / per_unit
            n = np.stack([np.cos(a), np.sin(a)], -1)
            return -self.outline.radius * n, n
        verts, out = self._v, self._n
        V = len(verts)
        frac = np.arange(per_unit) / per_unit
        pts, nrm = [], []
        for k in range(V):
            a, b = -out[k], -out[(k + 1) % V]
            end = verts[(k + 1) % V]
            pts.append(verts[k] + frac[:, None] * (end - verts[k]))
            nrm.append(np.tile(a, (per_unit, 1)))
            m = (1.0 - frac)[:, None] * a + frac[:, None] * b
            pts.append(np.tile(end, (per_unit, 1)))
            nrm.append(m / np.linalg.norm(m, axis=1, keepdims=True))
        return np.concatenate(pts), np.concatenate(nrm)

    def _integrated_twist(self, contact, p, v, n, ops):
        """``integrated_contact_twist`` on the rows in contact (the others: no motion, no sliding)."""
        rows = np.flatnonzero(contact)
        size = len(contact)
        zero = np.zeros(size, dtype=bool)
        if len(rows) == 0:
            return 0.0 * p[0], 0.0 * p[0], 0.0 * p[0], zero, zero
        (p_x, p_y), (vn, vt), (nx, ny) = ([_take(a, rows) for a in pair] for pair in (p, v, n))
        sx, sy = self._support[:, 0], self._support[:, 1]
        nxc, nyc = dual.column(nx), dual.column(ny)
        r_x, r_y = nxc * sx + nyc * sy, nxc * sy - nyc * sx  # support points in the contact frame
        reweight = None
        if self.contact_height > 0.0:
            shift = self.contact_height * self.mu_g  # the load's centre moves by this times the force / f_max
            (jxx, jxy), (_, jyy) = self._inv_second_moment
            cx, cy = self._centred[:, 0], self._centred[:, 1]
            uniform = 1.0 / len(cx)

            def reweight(f_n, f_t):
                """Weights under the pusher's force (f_n, f_t) (contact frame): pressure linear over the support
                (an elastic foundation tilted by the force's tipping moment), its centre moved by ``shift`` f;
                none below zero (the support lifts off there)."""
                fx, fy = f_n * nx - f_t * ny, f_n * ny + f_t * nx  # object frame
                ax, ay = shift * (jxx * fx + jxy * fy), shift * (jxy * fx + jyy * fy)
                w = (1.0 + dual.column(ax) * cx + dual.column(ay) * cy) * uniform
                w = ops.where(_value(w) > 0.0, w, 0.0)
                return w / dual.column(dual.psum(w))

        tx, ty, om, up, down = integrated_contact_twist(p_x, p_y, vn, vt, r_x, r_y, self._weights, self.c,
                                                        self.mu_p, ops, reweight)
        up_full, down_full = zero.copy(), zero.copy()
        up_full[rows], down_full[rows] = up, down
        return (*(_put(a, rows, size) for a in (tx, ty, om)), up_full, down_full)

    _flatten = staticmethod(QuasiStaticPusherSlider._flatten)
    # the batch interface is the box model's, on this model's ``_step``
    step = QuasiStaticPusherSlider.step
    step_info = QuasiStaticPusherSlider.step_info
    step_jacobians = QuasiStaticPusherSlider.step_jacobians
    rollout = QuasiStaticPusherSlider.rollout
    rollout_info = QuasiStaticPusherSlider.rollout_info

    def penetration(self, x) -> np.ndarray:
        """How deep the pusher disc overlaps the outline (m, >= 0)."""
        x = np.asarray(x, dtype=float)
        flat = x.reshape(-1, STATE_DIM)
        c, s = np.cos(flat[:, 2]), np.sin(flat[:, 2])
        dx, dy = flat[:, 3] - flat[:, 0], flat[:, 4] - flat[:, 1]
        _, _, gap, _ = self._contact(c * dx + s * dy, c * dy - s * dx, np)
        return np.maximum(-np.asarray(gap), 0.0).reshape(x.shape[:-1])


@lru_cache(maxsize=32)
def _twist_table(outline: ConvexOutline, support_points: int, c_scale: float, mu_g: float, mu_p: float,
                 contact_height: float) -> np.ndarray:
    """(positions, directions, 5): the integrated limit surface's twist (t_x, t_y, omega per unit pusher speed, contact
    frame) and its sliding masks (up, down as 0/1) at ``TABLE_POSITIONS`` contact positions round the outline and
    ``TABLE_DIRECTIONS`` pusher directions (angle from the normal, -90..90 deg), by the direct solve. A contact's twist
    depends on nothing else: its position, the pusher's direction, and the slider's outline, support and friction
    (not its mass, not the step length), so one table serves every step, and sliders that share them share it."""
    direct = QuasiStaticConvexSlider(outline, mass=1.0, mu_g=mu_g, mu_p=mu_p, pusher_radius=1e-3,
                                     c_scale=c_scale, limit_surface="integrated", support_points=support_points,
                                     tabulated=False, contact_height=contact_height)
    units = 1 if outline.kind == "disc" else 2 * len(outline.vertices)
    per_unit = max(1, -(-TABLE_POSITIONS // units))
    pts, nrm = direct.table_contacts(per_unit * units if outline.kind == "disc" else per_unit)
    psi = np.linspace(-0.5 * np.pi, 0.5 * np.pi, TABLE_DIRECTIONS)[1:-1]  # the ends (v_n = 0): no motion
    P, D = len(pts), len(psi)
    q = np.repeat(pts - direct._g, D, axis=0)
    nx, ny = np.repeat(nrm[:, 0], D), np.repeat(nrm[:, 1], D)
    vn, vt = np.tile(np.cos(psi), P), np.tile(np.sin(psi), P)
    p_x, p_y = q[:, 0] * nx + q[:, 1] * ny, q[:, 1] * nx - q[:, 0] * ny
    tx, ty, om, up, down = direct._integrated_twist(np.ones(P * D, dtype=bool), (p_x, p_y), (vn, vt), (nx, ny), np)
    table = np.zeros((P, D + 2, 5))
    table[:, 1:-1] = np.stack([tx, ty, om, up, down], -1).reshape(P, D, 5)
    table.setflags(write=False)
    return table
