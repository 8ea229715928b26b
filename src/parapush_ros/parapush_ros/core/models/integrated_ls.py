"""The integrated limit surface: a point push on a slider whose friction is summed over its support points.

The ellipsoidal limit surface of ``quasistatic.contact_twist`` has one length scale c = m_max / f_max; an elongated
footprint needs more (docs/results/fidelity.md, "Why the ellipse misses"). Here the pressure is a set of support
points r_i (object frame, relative to the centre of friction) with weights w_i (summing to 1), and the friction
wrench of a twist t = (v, omega) is the sum of the points' Coulomb forces (in units of f_max = mu_g m g)::

    v_i = v + omega x r_i,   W(t) = -sum_i w_i (v_i / |v_i|, r_i x v_i / |v_i|) = -grad D(t),
    D(t) = sum_i w_i |v_i|                              (the dissipation: convex, homogeneous of degree 1)

with |v_i| smoothed to sqrt(|v_i|^2 + eps^2), eps = ``EPS_REL`` times the pusher's speed (so the solution scales with
the pusher's velocity exactly). Quasi-static contact with a round pusher at the contact point p (contact frame: x the
inward normal, y = x turned +90 deg, origin the centre of friction), pusher velocity w = (v_n, v_t):

* **sticking**: the slider's contact point moves with the pusher, v = w - omega x p; the one unknown omega makes the
  friction wrench's moment about p zero. With d_i = z x (r_i - p), v_i = w + omega d_i and that moment is
  -dD/d omega, so omega minimises the convex h(omega) = D(t(omega)): a safeguarded Newton search in a bracket
  that holds the root (``_stick_search``). The contact force is -F = sum_i w_i v_i / |v_i| (contact frame);
  sticking holds while |f_t| <= mu_p f_n;
* **sliding** (outside the friction cone, on the side of f_t's sign s = +-1): the contact force lies on the cone's
  edge (1, s mu_p), so the friction wrench is parallel to A = (1, s mu_p, p x (1, s mu_p)). The twist is the minimiser
  of D on the plane A . t = 1 (convex: a damped 2-D Newton search in the slip c_t of the contact point along the
  face and omega, its normal velocity 1 - s mu_p c_t; ``_slide_search``), scaled so that the contact point's
  normal velocity is the pusher's v_n; the pusher slides along the slider by the rest. The masks are
  ``sliding_up`` (s = +1) and ``sliding_down`` (s = -1), as ``contact_twist``'s;
* separation: the caller's (its geometry decides).

Derivatives (for DDP): the searches run on values; the solution is then taken one Newton step further on Duals, from
the converged value held constant with the Hessian's value: at convergence that step's derivative is the implicit
function theorem's, -(dG/dtheta) / H, so ``step_jacobians`` stays exact within a contact feature and mode.

Load transfer (``reweight``): the pusher's force acts above the table, and its tipping moment moves the support's
load towards it; the caller gives the weights under a contact force, and the contact is solved again with the
weights under the force its first solution needs (``QuasiStaticConvexSlider.contact_height``).
"""
from __future__ import annotations

import numpy as np

from . import dual
from .dual import Dual

EPS_REL = 1e-3  # the smoothing of |v_i|, relative to the pusher's speed
EPS_FLOOR = 1e-9  # m/s: keeps a pusher at rest well defined
MAX_ITER = 40  # Newton iterations at most (a bracket or a line search guards every step); 3-8 are typical
TOL = 1e-8  # relative step size at which a search stops (the derivative step adds one Newton step more)


def support_grid(outline, points: int, scale: float = 1.0) -> np.ndarray:
    """(P, 2) support points in the object frame: the ``points`` x ``points`` cell centres of the outline's bounding
    rectangle that lie inside it, scaled about its centroid so that their mean distance from it is ``scale`` times
    the uniform pressure's (``ConvexOutline.mean_distance``): the fine model's grid support
    (``scene.support.support_points``) for ``scale`` = its ``spread``, equal load per point."""
    n = int(points)
    cells = (np.arange(n) + 0.5) / n
    if outline.kind == "disc":
        lo, hi = -outline.radius * np.ones(2), outline.radius * np.ones(2)
    else:
        v = outline.verts
        lo, hi = v.min(0), v.max(0)
    gx, gy = np.meshgrid(lo[0] + cells * (hi - lo)[0], lo[1] + cells * (hi - lo)[1], indexing="ij")
    pts = np.stack([gx.ravel(), gy.ravel()], -1)
    if outline.kind == "disc":
        pts = pts[np.hypot(pts[:, 0], pts[:, 1]) <= outline.radius + 1e-12]
    else:
        nrm, off = outline.edges()
        pts = pts[np.all(pts @ nrm.T <= off + 1e-12, axis=1)]
    g = outline.centroid
    mean = np.hypot(*(pts - g).T).mean()
    return g + (pts - g) * (scale * outline.mean_distance / mean)


def _cross(ax, ay, bx, by):
    return ax * by - ay * bx


def _stick_search(wn, wt, dx, dy, eps2, wts, om0):
    """omega minimising h = sum w_i |w + omega d_i| (values; rows (N,), points and weights (N, P)): (omega,
    h''(omega), the contact force (f_n, f_t)).

    Each term is a_i sqrt((omega - m_i)^2 + k_i^2), a_i = w_i |d_i|, m_i = -(w . d_i) / |d_i|^2 the omega that stops
    point i (as near as it can), k_i = sqrt((w x d_i)^2 + eps^2 |d_i|^2) / |d_i|^2 how near: h is a smoothed weighted
    median's objective, h' increasing, steep at each m_i. The bracket: the m_i's either side of the root (h' at
    every m_i); the start: where the steep term nearest to balancing the others does (its local solution), else the
    ellipsoid's omega; then Newton's steps, bisection where one leaves the bracket."""
    d2 = np.maximum(dx * dx + dy * dy, 1e-300)
    b = wn[:, None] * dx + wt[:, None] * dy
    m = -b / d2
    k = np.sqrt(_cross(wn[:, None], wt[:, None], dx, dy) ** 2 + eps2[:, None] * d2) / d2
    a = wts * np.sqrt(d2)

    def deriv(om):  # h' at omega (..., P) per row: sum_i a_i (omega - m_i) / sqrt((omega - m_i)^2 + k_i^2)
        t = om[..., None] - m[:, None, :] if om.ndim == 2 else om[:, None] - m
        return (a[:, None, :] if om.ndim == 2 else a) * t / np.sqrt(t * t + (k[:, None, :] if om.ndim == 2 else k) ** 2)

    g_at_m = deriv(m).sum(-1)  # (N, P): h' at each m_j
    big = np.hypot(wn, wt) / np.sqrt(d2.min(1)) * 1.01 + 1e-12  # |omega| beyond this: every point slips one way
    lo = np.maximum(np.where(g_at_m <= 0.0, m, -np.inf).max(1), -big)
    hi = np.minimum(np.where(g_at_m > 0.0, m, np.inf).min(1), big)
    # near a steep term j, h' ~ g(m_j) + a_j t / sqrt(t^2 + k_j^2): zero at t = -g k_j / sqrt(a_j^2 - g^2)
    ratio = np.abs(g_at_m) / a
    j = np.argmin(ratio, axis=1)
    rows = np.arange(len(j))
    gj, aj, kj = g_at_m[rows, j], a[rows, j], k[rows, j]
    local = m[rows, j] - gj * kj / np.sqrt(np.maximum(aj * aj - gj * gj, 1e-300))
    om = np.where(ratio[rows, j] < 1.0, local, om0)
    om = np.where((om > lo) & (om < hi), om, np.clip(om0, lo, hi))
    om = np.where((om > lo) & (om < hi), om, 0.5 * (lo + hi))
    scale = np.minimum(hi - lo, big)
    for _ in range(MAX_ITER):
        t = om[:, None] - m
        r = np.sqrt(t * t + k * k)
        g = (a * t / r).sum(1)
        hpp = (a * k * k / r ** 3).sum(1)
        hi = np.where(g > 0.0, om, hi)
        lo = np.where(g > 0.0, lo, om)
        newton = om - g / hpp
        new = np.where((newton >= lo) & (newton <= hi), newton, 0.5 * (lo + hi))  # (a converged row stays)
        done = np.abs(new - om) <= TOL * (scale + np.abs(om))
        om = new
        if done.all():
            break
    t = om[:, None] - m
    r = np.sqrt(t * t + k * k)
    hpp = (a * k * k / r ** 3).sum(1)
    vx, vy = wn[:, None] + om[:, None] * dx, wt[:, None] + om[:, None] * dy
    s = np.sqrt(vx * vx + vy * vy + eps2[:, None])
    return om, hpp, ((vx / s * wts).sum(1), (vy / s * wts).sum(1))


def _slide_terms(ct, om, sm, dx, dy, eps2):
    """Per point: (v_x, v_y, |v|) of the twist whose contact point moves (1 - sm c_t, c_t), turning at omega."""
    vx, vy = (1.0 - sm * ct)[:, None] + om[:, None] * dx, ct[:, None] + om[:, None] * dy
    return vx, vy, np.sqrt(vx * vx + vy * vy + eps2)


def _slide_search(sm, dx, dy, wts, ct0, om0):
    """(c_t, omega) minimising D on the plane A . t = 1 (values; ``sm`` = s mu_p per row, points and weights (N,
    P)): the solution and the Hessian's entries (h11, h12, h22) there."""
    eps2 = EPS_REL ** 2
    ex, ey = -sm[:, None], np.ones_like(dx)  # d v_i / d c_t

    def grad_hess(ct, om):
        vx, vy, s = _slide_terms(ct, om, sm, dx, dy, eps2)
        g1, g2 = ((vx * ex + vy * ey) / s * wts).sum(1), ((vx * dx + vy * dy) / s * wts).sum(1)
        ce, cd = _cross(vx, vy, ex, ey), _cross(vx, vy, dx, dy)
        s3 = s ** 3
        h11 = ((eps2 * (ex * ex + ey * ey) + ce * ce) / s3 * wts).sum(1)
        h12 = ((eps2 * (ex * dx + ey * dy) + ce * cd) / s3 * wts).sum(1)
        h22 = ((eps2 * (dx * dx + dy * dy) + cd * cd) / s3 * wts).sum(1)
        return (g1, g2), (h11, h12, h22), (s * wts).sum(1)

    # the start: the lowest D of the ellipsoid's answer and of turning about each support point j (v_j = 0: the
    # contact point moves -omega d_j, omega = -1 / (d_j . (1, s mu)); a point support's limit surface has a facet
    # for each, so the minimum is often there, where the smoothed D is too curved for Newton's steps from afar)
    den = dx - sm[:, None] * dy
    om_j = -1.0 / np.where(np.abs(den) > 1e-9, den, 1e-9)
    ct_j = -om_j * dy
    cand_ct = np.concatenate([ct0[:, None], ct_j], 1)  # (N, 1 + P)
    cand_om = np.concatenate([om0[:, None], om_j], 1)
    vx = (1.0 - sm[:, None] * cand_ct)[..., None] + cand_om[..., None] * dx[:, None, :]
    vy = cand_ct[..., None] + cand_om[..., None] * dy[:, None, :]
    cost = (np.sqrt(vx * vx + vy * vy + eps2) * wts[:, None, :]).sum(-1)
    cost = np.where((1.0 - sm[:, None] * cand_ct > 0.0) | (np.arange(cost.shape[1]) == 0), cost, np.inf)
    best = np.argmin(cost, axis=1)
    rows = np.arange(len(best))
    ct, om = cand_ct[rows, best], cand_om[rows, best]
    for _ in range(MAX_ITER):
        (g1, g2), (h11, h12, h22), f0 = grad_hess(ct, om)
        det = h11 * h22 - h12 * h12
        d1, d2 = -(h22 * g1 - h12 * g2) / det, -(h11 * g2 - h12 * g1) / det
        # backtracking (Armijo) on D: Newton's step where it decreases D enough, else halved
        step = np.ones_like(ct)
        slope = g1 * d1 + g2 * d2
        for _ in range(30):
            f1 = (_slide_terms(ct + step * d1, om + step * d2, sm, dx, dy, eps2)[2] * wts).sum(1)
            bad = f1 > f0 + 1e-4 * step * slope + 1e-13 * f0  # (the last term: rounding, near the minimum)
            if not bad.any():
                break
            step = np.where(bad, 0.5 * step, step)
        ct, om = ct + step * d1, om + step * d2
        if np.all(np.abs(step * d1) + np.abs(step * d2) * np.sqrt(dx * dx + dy * dy).max(1)
                  <= TOL * (1.0 + np.abs(ct))):
            break
    _, hess, _ = grad_hess(ct, om)
    return ct, om, hess


def integrated_contact_twist(p_x, p_y, v_n, v_t, r_x, r_y, weights, c: float, mu_p: float, ops=dual,
                             reweight=None):
    """``quasistatic.contact_twist`` with the integrated limit surface (see the module docstring): the same
    arguments, contact frame and returns ``(t_x, t_y, omega, sliding_up, sliding_down)``, with the support points
    ``(r_x, r_y)`` ((N, P), contact frame, relative to the centre of friction) and their ``weights`` (P,) in place
    of the ellipsoid (``c``: its length scale, used for the searches' starts only). Values are Duals (``ops=dual``)
    or arrays (``ops=np``); the mode is chosen on the values. Every row is taken to be in contact.

    ``reweight``: the load transfer, where given: ``reweight(f_n, f_t)`` -> the weights (N, P) (Duals or arrays)
    under the pusher's force (f_n, f_t) (contact frame, units of f_max); the contact is solved once with
    ``weights``, then again with the weights under the force that solution needs (one fixed-point pass: a third
    solve changes a step's motion by 1.3 % at most, on 200 contacts of the box, the hexagon and the ellipse)."""
    twist = _integrated_pass(p_x, p_y, v_n, v_t, r_x, r_y, np.broadcast_to(np.asarray(weights, dtype=float),
                                                                         np.shape(_val(r_x))), c, mu_p, ops)
    if reweight is None:
        return twist
    tx, ty, om, _, _ = twist
    dx, dy = dual.column(p_y) - r_y, r_x - dual.column(p_x)
    wts = np.asarray(weights, dtype=float)
    vx = dual.column(tx - om * p_y) + dual.column(om) * dx  # the points' velocities (contact frame)
    vy = dual.column(ty + om * p_x) + dual.column(om) * dy
    s = ops.sqrt(vx * vx + vy * vy + dual.column(EPS_REL ** 2 * (v_n * v_n + v_t * v_t) + EPS_FLOOR ** 2))
    f_n, f_t = dual.psum(vx / s * wts), dual.psum(vy / s * wts)
    return _integrated_pass(p_x, p_y, v_n, v_t, r_x, r_y, reweight(f_n, f_t), c, mu_p, ops)


def _val(a):
    return a.val if isinstance(a, Dual) else np.asarray(a, dtype=float)


def _integrated_pass(p_x, p_y, v_n, v_t, r_x, r_y, weights, c: float, mu_p: float, ops):
    """One solve of ``integrated_contact_twist`` with the weights (N, P) (a Dual or an array)."""
    val = _val
    wts, wv = weights, _val(weights)  # the Duals' (for the derivative steps) and their values (for the searches)
    dx, dy = dual.column(p_y) - r_y, r_x - dual.column(p_x)  # d v_i / d omega about the contact point: z x (r_i - p)
    pxv, pyv, vnv, vtv, dxv, dyv = (val(a) for a in (p_x, p_y, v_n, v_t, dx, dy))
    c2 = c * c
    inv_d = 1.0 / (c2 + pxv * pxv + pyv * pyv)
    # sticking: omega from the ellipsoid's, then the integrated search
    eps2 = EPS_REL ** 2 * (v_n * v_n + v_t * v_t) + EPS_FLOOR ** 2
    om_s, hpp, (f_n, f_t) = _stick_search(vnv, vtv, dxv, dyv, val(eps2), wv, (vtv * pxv - pyv * vnv) * inv_d)
    up = f_t > mu_p * np.abs(f_n)
    down = ~up & (f_t < -mu_p * np.abs(f_n))
    # the implicit function theorem's derivative: one Newton step on Duals from the converged omega
    vx, vy = dual.column(v_n) + om_s[:, None] * dx, dual.column(v_t) + om_s[:, None] * dy
    g = dual.psum((vx * dx + vy * dy) / ops.sqrt(vx * vx + vy * vy + dual.column(eps2)) * wts)
    om = om_s - g / hpp
    slide = up | down
    if slide.any():  # sliding on the friction cone's edge (1, s mu_p), s = +1 up, -1 down
        sign = np.where(up, 1.0, -1.0)
        sm = sign * mu_p
        # the ellipsoid's motion-cone edge as the start: contact point velocity (1, gamma) scaled to A . t = 1
        den = c2 + pyv * pyv - sm * pxv * pyv
        gamma = (sm * c2 - pyv * pxv + sm * pxv * pxv) / den
        cn0 = 1.0 / np.maximum(1.0 + sm * gamma, 1e-3)
        ct0 = gamma * cn0
        rows = np.flatnonzero(slide)
        ct, om_l, (h11, h12, h22) = _slide_search(sm[rows], dxv[rows], dyv[rows], wv[rows], ct0[rows],
                                                  ((ct0 * pxv - pyv * cn0) * inv_d)[rows])
        ct_full, om_full = np.zeros_like(pxv), np.zeros_like(pxv)
        ct_full[rows], om_full[rows] = ct, om_l
        hs = [np.ones_like(pxv), np.zeros_like(pxv), np.ones_like(pxv)]
        for h, hv in zip(hs, (h11, h12, h22)):
            h[rows] = hv
        # one Newton step on Duals (the implicit function theorem), then scaled to the pusher's normal velocity
        vx = (1.0 - sm * ct_full)[:, None] + om_full[:, None] * dx
        vy = ct_full[:, None] + om_full[:, None] * dy
        s = ops.sqrt(vx * vx + vy * vy + EPS_REL ** 2)
        g1 = dual.psum((vx * (-sm[:, None]) + vy) / s * wts)
        g2 = dual.psum((vx * dx + vy * dy) / s * wts)
        det = hs[0] * hs[2] - hs[1] * hs[1]
        ct_d = ct_full - (g1 * hs[2] - g2 * hs[1]) / det
        om_d = om_full - (g2 * hs[0] - g1 * hs[1]) / det
        k = v_n / (1.0 - sm * ct_d)
        vt_eff = ops.where(slide, k * ct_d, v_t)
        om = ops.where(slide, k * om_d, om)
    else:
        vt_eff = v_t
    tx, ty = v_n + om * p_y, vt_eff - om * p_x  # the centre of friction's velocity: the contact point's + omega x -p
    return tx, ty, om, up, down
