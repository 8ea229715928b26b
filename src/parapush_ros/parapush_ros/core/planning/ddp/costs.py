"""The costs of paper 003's DDP variants, as weighted least squares (Gauss-Newton Hessians), batched.

Every term is ``w * ||r||^2`` of a residual r with an exact Jacobian, so DDP gets gradients and positive
semi-definite Hessians. The terms (state x = [s_x, s_y, s_theta, p_x, p_y, v_x, v_y], control u = pusher
acceleration):

- reaching (ZS/DS/DP/WS): the final slider pose to the target (and, lightly, every step's, ``goal_running``), the
  final pusher velocity to zero (a plan that ends at rest can be tracked);
- control regulariser ``control * ||u||^2`` and soft-thresholding outside the control box ``|u_i| <= u_max`` (paper
  003), and the same on the pusher velocity box ``|v_i| <= v_max`` (a real arm's servo limit);
- no penetration: the pusher disc must stay ``clearance`` outside the box (the quasi-static model lets a separated
  pusher pass through the slider, a plan must not);
- corner keep-out: the pusher centre stays ``pusher_radius + corner_margin`` away from the box's corners. The model
  lets the pusher push anywhere on a face, up to the corner, and slide round a corner while in contact; plans
  exploited both (pushing 2 mm from a corner for the largest lever arm) and in MuJoCo the round pusher slipped off
  the corner there, so such plans could not be tracked (measured in ``bench dgoc --track``);
- demonstration penalties (DP-DDP only): the pusher velocity and acceleration to the demonstration's, and, in a
  window around each of the demonstration's face switches, the pusher's position in the slider frame to the
  demonstration's (follow its choice of face).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_X, N_U = 7, 2


@dataclass(frozen=True)
class DGOCWeights:
    goal_xy: float = 1.0e4  # per m^2 of final slider position error (1 cm costs 1)
    goal_theta: float = 100.0  # per rad^2 of final slider yaw error (0.1 rad costs 1)
    goal_running: float = 0.0  # the same reaching cost at every step, times this factor / T
    final_velocity: float = 100.0  # per (m/s)^2 of pusher speed at the end
    control: float = 1.0e-3  # per (m/s^2)^2 per step
    u_max: float = 1.0  # m/s^2, pusher acceleration box (soft)
    control_bound: float = 10.0  # per (m/s^2)^2 outside the box, per step
    v_max: float = 0.15  # m/s, pusher velocity box (soft)
    velocity_bound: float = 1.0e3  # per (m/s)^2 outside the box, per step
    clearance: float = 0.001  # m the pusher keeps outside the box's outline
    penetration: float = 1.0e5  # per m^2 of clearance violated, per step
    corner_margin: float = 0.015  # m beyond the pusher radius that the pusher centre keeps from each box corner
    corner: float = 1.0e5  # per m^2 of corner keep-out violated, per step
    demo_velocity: float = 10.0  # per (m/s)^2 per step (DP-DDP)
    demo_acceleration: float = 0.01  # per (m/s^2)^2 per step (DP-DDP)
    demo_face: float = 1.0e3  # per m^2 of relative pusher position error per step in a switch window (DP-DDP)
    face_window: int = 5  # steps on either side of a demonstrated face switch



def _rot_t(theta):
    c, s = np.cos(theta), np.sin(theta)
    return c, s


class DGOCCost:
    """The cost of B problems over a horizon T. ``target`` (B, 3). With ``demo_X`` (B, T+1, 7) states,
    ``demo_U`` (B, T, 2) accelerations and ``face_mask`` (B, T+1) marking switch-window steps, the demonstration
    penalties are on (DP-DDP); without, they are off (ZS/DS/WS-DDP)."""

    def __init__(self, model, target, weights: DGOCWeights, demo_X=None, demo_U=None, face_mask=None):
        self.model = model
        self.w = weights
        self.target = np.asarray(target, dtype=float)
        self.demo = demo_X is not None
        if self.demo and (demo_U is None or face_mask is None):
            raise ValueError("DP-DDP cost: demonstration penalties need demo_X, demo_U and face_mask")
        self.demo_X = demo_X
        self.demo_U = demo_U
        self.face_mask = face_mask
        self.half = np.asarray(model.size) / 2.0

    # ------------------------------------------------------------------------------------ residuals
    def _pusher_relative(self, X):
        """Pusher centre in the slider frame (..., 2) and its Jacobian w.r.t. the state (..., 2, 7)."""
        c, s = _rot_t(X[..., 2])
        dx, dy = X[..., 3] - X[..., 0], X[..., 4] - X[..., 1]
        rx, ry = c * dx + s * dy, c * dy - s * dx
        J = np.zeros(X.shape[:-1] + (2, N_X))
        J[..., 0, 0], J[..., 0, 1], J[..., 0, 2], J[..., 0, 3], J[..., 0, 4] = -c, -s, ry, c, s
        J[..., 1, 0], J[..., 1, 1], J[..., 1, 2], J[..., 1, 3], J[..., 1, 4] = s, -c, -rx, -s, c
        return np.stack([rx, ry], -1), J

    def _penetration(self, X):
        """Residual max(0, r_p + clearance - signed distance of the pusher centre to the box) and its Jacobian."""
        r, Jr = self._pusher_relative(X)
        q = np.abs(r) - self.half
        sgn = np.where(r >= 0.0, 1.0, -1.0)
        qp = np.maximum(q, 0.0)
        out = np.sqrt((qp ** 2).sum(-1))
        outside = out > 0.0
        j = np.argmax(q, -1)
        grad_in = np.where(np.arange(2) == j[..., None], sgn, 0.0)
        grad_out = sgn * qp / np.where(outside, out, 1.0)[..., None]
        sd = np.where(outside, out, q.max(-1))
        grad = np.where(outside[..., None], grad_out, grad_in)  # d sd / d r
        res = self.model.pusher_radius + self.w.clearance - sd
        active = res > 0.0
        res = np.where(active, res, 0.0)
        J = -np.einsum("...i,...ij->...j", grad, Jr) * active[..., None]
        return res, J

    def _corners(self, X):
        """Residuals max(0, R - |r - corner_k|) for the 4 corners (..., 4), R = pusher radius + corner margin, and
        their Jacobians (..., 4, 7)."""
        r, Jr = self._pusher_relative(X)
        corners = self.half * np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
        d = r[..., None, :] - corners  # (..., 4, 2)
        n = np.linalg.norm(d, axis=-1)
        res = self.model.pusher_radius + self.w.corner_margin - n
        active = res > 0.0
        unit = d / np.maximum(n, 1e-9)[..., None]
        J = -np.einsum("...ki,...ij->...kj", unit, Jr) * active[..., None]
        return np.where(active, res, 0.0), J

    # ------------------------------------------------------------------------------------ interface
    def _terms(self, X, U, idx, with_derivatives: bool):
        """Yield (weight per step (B, T'), residual (B, T', r), Jacobian w.r.t. x or u (B, T', r, n), on_x)."""
        w = self.w
        b, t1 = X.shape[0], X.shape[1]
        tgt = self.target[idx]
        pose_scale = np.array([np.sqrt(w.goal_xy), np.sqrt(w.goal_xy), np.sqrt(w.goal_theta)])
        # reaching: terminal (weight 1 at T), optional running
        wt = np.zeros((b, t1))
        wt[:, -1] = 1.0
        if w.goal_running:
            wt[:, :-1] += w.goal_running / (t1 - 1)
        res = (X[..., :3] - tgt[:, None]) * pose_scale
        J = np.zeros((b, t1, 3, N_X))
        J[..., [0, 1, 2], [0, 1, 2]] = pose_scale
        yield wt, res, J, True
        wv = np.zeros((b, t1))
        wv[:, -1] = w.final_velocity
        Jv = np.zeros((b, t1, 2, N_X))
        Jv[..., [0, 1], [5, 6]] = 1.0
        yield wv, X[..., 5:7], Jv, True
        # velocity box, penetration
        v = X[..., 5:7]
        over = v - np.clip(v, -w.v_max, w.v_max)
        yield np.full((b, t1), w.velocity_bound), over, Jv * (over != 0.0)[..., None], True
        pres, pJ = self._penetration(X)
        yield np.full((b, t1), w.penetration), pres[..., None], pJ[..., None, :], True
        if w.corner:
            cres, cJ = self._corners(X)
            yield np.full((b, t1), w.corner), cres, cJ, True
        # controls
        Ju = np.broadcast_to(np.eye(N_U), U.shape[:-1] + (N_U, N_U))
        yield np.full(U.shape[:2], w.control), U, Ju, False
        uover = U - np.clip(U, -w.u_max, w.u_max)
        yield np.full(U.shape[:2], w.control_bound), uover, Ju * (uover != 0.0)[..., None], False
        # demonstration penalties
        if not self.demo:
            return
        if w.demo_velocity:
            yield np.full((b, t1), w.demo_velocity), v - self.demo_X[idx][..., 5:7], Jv, True
        if w.demo_acceleration:
            yield np.full(U.shape[:2], w.demo_acceleration), U - self.demo_U[idx], Ju, False
        if w.demo_face:
            rel, Jr = self._pusher_relative(X)
            rel_d, _ = self._pusher_relative(self.demo_X[idx])
            yield w.demo_face * self.face_mask[idx], rel - rel_d, Jr, True

    def value(self, X, U, idx=None) -> np.ndarray:
        idx = np.arange(X.shape[0]) if idx is None else idx
        total = np.zeros(X.shape[0])
        for wt, res, _, _ in self._terms(X, U, idx, False):
            total += (wt * (res ** 2).sum(-1)).sum(-1)
        return total

    def derivatives(self, X, U, idx=None):
        idx = np.arange(X.shape[0]) if idx is None else idx
        b, t1 = X.shape[:2]
        lx, lxx = np.zeros((b, t1, N_X)), np.zeros((b, t1, N_X, N_X))
        lu, luu = np.zeros((b, t1 - 1, N_U)), np.zeros((b, t1 - 1, N_U, N_U))
        lux = np.zeros((b, t1 - 1, N_U, N_X))
        for wt, res, J, on_x in self._terms(X, U, idx, True):
            g = 2.0 * wt[..., None] * np.einsum("...ri,...r->...i", J, res)
            h = 2.0 * wt[..., None, None] * np.einsum("...ri,...rj->...ij", J, J)
            if on_x:
                lx += g
                lxx += h
            else:
                lu += g
                luu += h
        return lx, lu, lxx, luu, lux
