"""Quasi-static pusher–slider model with four faces and face switching through separation (paper 003).

The slider is a box pushed on a table by a round pusher. Slider motion follows the ellipsoidal limit surface
(uniform pressure) and the motion cone of the contact (Lynch, Maekawa & Tanie 1992; Hogan & Rodriguez, WAFR 2016);
paper 003 (Xue et al., "Demonstration-guided optimal control") adds the pusher's position and velocity to the state,
takes its acceleration as the input, and lets the pusher change face only through separation. Facts and check
values: ``docs/background.md`` ("Quasi-static pushing").

State (one row, float64, table frame, SI units)::

    x = [s_x, s_y, s_theta, p_x, p_y, v_x, v_y]   (slider pose, pusher centre position and velocity)
    u = [a_x, a_y]                                 (pusher acceleration)

One step of ``dt`` (semi-implicit Euler: the slider moves with the pusher velocity the step ends with, so the
control acts on the slider within one step, which keeps DDP's Jacobians informative):

1. v' = v + dt u.
2. Face: the one whose plane the pusher centre lies furthest outside of (faces 0..3 = slider -x, -y, +x, +y;
   face f is the -x face of a frame turned by phi_f = f pi/2, so one set of face-frame formulas serves all four).
   Contact point on the face (p_x = -half depth, p_y = pusher centre's tangential coordinate), pusher velocity in
   the face frame (v_n into the face, v_t along it).
3. Mode: in contact (gap between pusher surface and face <= ``contact_tol`` and |p_y| <= half width) and
   v_n >= 0: sticking if gamma_b v_n <= v_t <= gamma_t v_n, else sliding up / down (the slider moves as if
   v_t = gamma v_n; the pusher slides along the face by the rest); otherwise separation: the slider stays.
   (v_n = 0 in contact counts as contact, so a pusher resting on a face still has gradients; the other side of
   that: at rest in contact the Jacobian is the sticking one for both signs of v_n, so DDP does not see that pulling
   away separates, and a plan from rest on a face gets no gradient toward leaving it.)
4. Slider twist in the face frame (sticking, D = c^2 + p_x^2 + p_y^2)::

       [v_x, v_y, omega] = [(c^2 + p_x^2) v_n + p_x p_y v_t,  p_x p_y v_n + (c^2 + p_y^2) v_t,  p_x v_t - p_y v_n] / D

   rotated by phi_f and by the slider yaw into the table frame; s' = s + dt twist, p' = p + dt v'.

The contact point is on the face (p_x = -a/2), as in Hogan & Rodriguez; the authors' code of paper 003 uses the
pusher centre (-(a/2 + r)) instead, which ``motion_cone`` reproduces when given that p_x.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scene.support import mean_support_radius, uniform_mean_radius
from . import dual
from .dual import Dual

GRAVITY = 9.81
MUJOCO_C_SCALE = 1.45  # c_scale that makes the model's pushes closest to the fine model's (MuJoCo, native support)


def fine_c_scale(scene, obj: int = 0) -> float:
    """The c_scale that fits the scene's fine model: where objects rest on a grid of support points, its ``spread``
    (the grid's mean radius relative to uniform pressure: 1 = uniform, what the model assumes); on MuJoCo's native
    contacts (pressure at the corners or rim) MUJOCO_C_SCALE for a box (fitted) and the support's mean radius
    relative to uniform pressure for other shapes (a disc on its rim: 1.5)."""
    if scene.support.pattern == "grid":
        return float(scene.support.spread)
    o = scene.objects[obj]
    if o.shape == "box":
        return MUJOCO_C_SCALE
    return (mean_support_radius(o.shape, o.size, scene.support, o.vertices)
            / uniform_mean_radius(o.shape, o.size, o.vertices))


STATE_DIM, CONTROL_DIM = 7, 2
# the parts of a model state (see the module docstring): index a state with these, not with numbers
SLIDER_POSE, PUSHER_POS, PUSHER_VEL = slice(0, 3), slice(3, 5), slice(5, 7)
SLIDER_YAW = 2  # within SLIDER_POSE
STICK, SLIDE_UP, SLIDE_DOWN, SEPARATION = 0, 1, 2, 3
MODE_NAMES = ("sticking", "sliding_up", "sliding_down", "separation")
FACE_NAMES = ("-x", "-y", "+x", "+y")
_FACE_COS = np.array([1.0, 0.0, -1.0, 0.0])  # cos(phi_f), phi_f = f pi / 2
_FACE_SIN = np.array([0.0, 1.0, 0.0, -1.0])


def from_scene_state(layout, x, index: int = 0) -> np.ndarray:
    """Scene state(s) (``core.scene.state.StateLayout`` ``layout``, last axis) -> model state(s) of object ``index``:
    [its pose, pusher position, pusher velocity]."""
    x = layout.check(x, "scene state")
    return np.concatenate([layout.object_poses(x)[..., index, :], layout.pusher_pos(x), layout.pusher_vel(x)], -1)


def to_scene_states(layout, X, like, index: int = 0) -> np.ndarray:
    """Model states (T, 7) -> scene states (T, D): object ``index`` and the pusher from ``X``, the other objects
    where they are in scene state ``like``, at rest."""
    X = np.asarray(X, dtype=float)
    out = np.repeat(layout.check(like, "scene state")[None], len(X), 0)
    layout.object_vels(out)[...] = 0.0
    layout.object_poses(out)[:, index] = X[:, SLIDER_POSE]
    layout.pusher_pos(out)[...] = X[:, PUSHER_POS]
    layout.pusher_vel(out)[...] = X[:, PUSHER_VEL]
    return out


def mean_distance_rectangle(a: float, b: float) -> float:
    """(1/A) * integral of |r| over a uniform a x b rectangle about its centre (closed form).

    For a square of side a: 0.3826 a. Quarter rectangle [0, h] x [0, k] with diagonal d:
    integral = (h k d + (h^3 ln((k + d)/h) + k^3 ln((h + d)/k)) / 2) / 3."""
    h, k = a / 2.0, b / 2.0
    d = np.hypot(h, k)
    quarter = (h * k * d + 0.5 * (h ** 3 * np.log((k + d) / h) + k ** 3 * np.log((h + d) / k))) / 3.0
    return float(quarter / (h * k))


def _value(a):
    return a.val if isinstance(a, Dual) else a


def motion_cone(p_x, p_y, c: float, mu_p: float):
    """Motion-cone edges (gamma_t, gamma_b) of a contact at (p_x, p_y) on the -x face (face frame)."""
    return _cone_edges(np.asarray(p_x, dtype=float), np.asarray(p_y, dtype=float), c, mu_p)


def _cone_edges(p_x, p_y, c: float, mu: float):
    """(gamma_t, gamma_b): v_t / v_n of the slider's contact point under the friction-cone edge forces (1, +-mu)."""
    c2 = c * c
    gamma_t = (mu * c2 - p_y * p_x + mu * p_x * p_x) / (c2 + p_y * p_y - p_y * (mu * p_x))
    gamma_b = (-mu * c2 - p_y * p_x - mu * p_x * p_x) / (c2 + p_y * p_y + p_y * (mu * p_x))
    return gamma_t, gamma_b


def contact_twist(p_x, p_y, v_n, v_t, c: float, mu_p: float, ops=dual):
    """The slider's twist under a point push: the one place the limit surface and the motion cone are evaluated,
    for the box of paper 003 (``QuasiStaticPusherSlider``) and for any convex footprint
    (``quasistatic_convex.QuasiStaticConvexSlider``).

    Everything is in the *contact frame*: x along the contact normal into the slider, y = x turned by +90 deg, origin
    at the slider's centre of friction (the centroid of its uniform support pressure). ``(p_x, p_y)``: the contact
    point (p_x < 0: the contact is on the side the normal enters from); ``(v_n, v_t)``: the pusher's velocity; ``c``
    = m_max / f_max of the ellipsoidal limit surface; ``mu_p`` the pusher-slider friction. Returns
    ``(t_x, t_y, omega, sliding_up, sliding_down)``: the velocity of the centre of friction (contact frame) and the
    yaw rate under sticking, or under sliding along the motion cone's edge ``gamma v_n`` when the pusher's tangential
    velocity leaves the cone (the masks say which edge; the pusher slides along the slider by the rest). Values are
    Duals (``ops=dual``: with derivatives) or arrays (``ops=np``); the modes are chosen on the values. Whether the
    pusher touches at all (separation) is the caller's: its geometry decides."""
    c2 = c * c
    gamma_t, gamma_b = _cone_edges(p_x, p_y, c, mu_p)
    up = _value(v_t) > _value(gamma_t) * _value(v_n)
    down = _value(v_t) < _value(gamma_b) * _value(v_n)
    vt_eff = ops.where(up, gamma_t * v_n, ops.where(down, gamma_b * v_n, v_t))
    inv_d = 1.0 / (c2 + p_x * p_x + p_y * p_y)
    tx = (v_n * (c2 + p_x * p_x) + p_y * vt_eff * p_x) * inv_d
    ty = (p_y * v_n * p_x + (p_y * p_y + c2) * vt_eff) * inv_d
    om = (vt_eff * p_x - p_y * v_n) * inv_d
    return tx, ty, om, up, down


def pusher_in_object_frame(z: list, dt: float, ops=dual):
    """The first half of every quasi-static step: ``z`` (7 state + 2 control components) unpacked, the pusher's
    velocity after the control, and the pusher's centre and velocity in the object frame. Returns
    ((sx, sy, th, px, py, vx1, vy1), (cos th, sin th), (rx, ry), (wx, wy))."""
    sx, sy, th, px, py, vx, vy, ax, ay = z
    vx1, vy1 = vx + dt * ax, vy + dt * ay
    c, s = ops.cos(th), ops.sin(th)
    dx, dy = px - sx, py - sy
    return ((sx, sy, th, px, py, vx1, vy1), (c, s), (c * dx + s * dy, c * dy - s * dx),
            (c * vx1 + s * vy1, c * vy1 - s * vx1))


class LimitSurfaceLoads:
    """The ellipsoidal limit surface's largest friction force and moment, of a slider with ``mu_g``, ``mass`` and
    the length scale ``c`` (m_max / f_max): one definition for the box and the convex models."""

    @property
    def f_max(self) -> float:
        return self.mu_g * self.mass * GRAVITY

    @property
    def m_max(self) -> float:
        return self.f_max * self.c


@dataclass(frozen=True)
class QuasiStaticPusherSlider(LimitSurfaceLoads):
    """The model for one box slider and a round pusher. All methods take batches: ``x`` (..., 7), ``u`` (..., 2)."""

    size: tuple[float, float]  # full extents of the box along its body x and y (m)
    mass: float  # kg
    mu_g: float  # slider-table friction
    mu_p: float  # pusher-slider friction
    pusher_radius: float  # m
    dt: float = 0.01  # s
    contact_tol: float = 0.005  # m: a gap up to this still counts as contact (paper 003's 5 mm)
    # the limit surface's length scale c relative to uniform pressure: 1 is the paper's model; MuJoCo's box-on-table
    # contacts press harder near the corners, and 1.45 fits its pushes best (MUJOCO_C_SCALE, fitted in the tests)
    c_scale: float = 1.0

    def __post_init__(self):
        for name in ("mass", "mu_g", "mu_p", "pusher_radius", "dt", "contact_tol", "c_scale"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) > 0.0):
                raise ValueError(f"quasi-static model: {name} must be finite and > 0, got {getattr(self, name)}")
        if len(self.size) != 2 or not all(np.isfinite(v) and v > 0.0 for v in self.size):
            raise ValueError(f"quasi-static model: size must be two positive extents (finite, m), got {self.size}")
        # the motion-cone edges are ratios whose denominators c^2 + p_y^2 -/+ mu_p p_x p_y must stay positive on
        # every face; past that the cone wraps through v_n = 0 and the formulas no longer describe friction
        for h, w in ((self.size[0] / 2, self.size[1] / 2), (self.size[1] / 2, self.size[0] / 2)):
            p_y = np.linspace(-w, w, 201)
            if np.any(self.c ** 2 + p_y ** 2 - self.mu_p * h * np.abs(p_y) <= 0.0):
                raise ValueError(f"quasi-static model: mu_p = {self.mu_p} is too large for a {self.size[0]} x "
                                 f"{self.size[1]} m box (the motion cone's edges pass through v_n = 0)")

    @classmethod
    def from_scene(cls, scene, obj: int | str = 0, **kw) -> QuasiStaticPusherSlider:
        """The model of one box object of a scene (size, mass, table and pusher friction, pusher radius)."""
        o = scene.objects[scene.object_index(obj) if isinstance(obj, str) else obj]
        if o.shape != "box":
            raise ValueError(f"quasi-static model: scene {scene.name!r} object {o.name!r} is a {o.shape}, "
                             "the model is for box sliders")
        return cls(size=(o.size[0], o.size[1]), mass=o.mass, mu_g=scene.friction["object_table"],
                   mu_p=scene.friction["pusher_object"], pusher_radius=scene.pusher.radius, **kw)

    # ------------------------------------------------------------------------------------ limit surface
    @property
    def c(self) -> float:
        """m_max / f_max: the limit surface's length scale (0.3826 a for a square of side a, uniform pressure)."""
        return self.c_scale * mean_distance_rectangle(*self.size)

    def face_half(self, face) -> tuple[np.ndarray, np.ndarray]:
        """(half depth along the face normal, half width along the face) of face index/indices."""
        face = np.asarray(face)
        a, b = self.size[0] / 2.0, self.size[1] / 2.0
        even = face % 2 == 0
        return np.where(even, a, b), np.where(even, b, a)

    def contact_state(self, face, p_y) -> np.ndarray:
        """Pusher centre in the slider frame, touching face ``face`` at tangential offset ``p_y`` (for starts)."""
        face, p_y = np.asarray(face), np.asarray(p_y, dtype=float)
        h, _ = self.face_half(face)
        fx, fy = -(h + self.pusher_radius), p_y  # face frame
        cf, sf = _FACE_COS[face], _FACE_SIN[face]
        return np.stack([cf * fx - sf * fy, sf * fx + cf * fy], -1)

    # ------------------------------------------------------------------------------------ dynamics
    def _step(self, z: list, ops=dual):
        """One step on ``z`` = 7 state + 2 control components, Duals (``ops=dual``: values and Jacobians) or plain
        arrays (``ops=np``: values only, several times faster); returns (next state components, face, mode)."""
        dt = self.dt
        (sx, sy, th, px, py, vx1, vy1), (c, s), (rx, ry), (wx, wy) = pusher_in_object_frame(z, dt, ops)
        a, b = self.size[0] / 2.0, self.size[1] / 2.0
        outside = np.stack([-_value(rx) - a, -_value(ry) - b, _value(rx) - a, _value(ry) - b], -1)
        face = np.argmax(outside, axis=-1)
        cf, sf = _FACE_COS[face], _FACE_SIN[face]
        h, w = self.face_half(face)
        fy = ry * cf - rx * sf  # tangential contact coordinate (face frame y)
        fx = rx * cf + ry * sf
        vn, vt = wx * cf + wy * sf, wy * cf - wx * sf
        gap = -_value(fx) - h - self.pusher_radius
        contact = (gap <= self.contact_tol) & (np.abs(_value(fy)) <= w) & (_value(vn) >= 0.0)
        tx, ty, om, up, down = contact_twist(-h, fy, vn, vt, self.c, self.mu_p, ops)
        tx, ty, om = (ops.where(contact, t, 0.0) for t in (tx, ty, om))
        bx, by = tx * cf - ty * sf, tx * sf + ty * cf  # face frame -> slider frame
        gx, gy = c * bx - s * by, s * bx + c * by  # slider frame -> table frame
        nxt = [sx + dt * gx, sy + dt * gy, th + dt * om, px + dt * vx1, py + dt * vy1, vx1, vy1]
        mode = np.where(~contact, SEPARATION, np.where(up, SLIDE_UP, np.where(down, SLIDE_DOWN, STICK)))
        return nxt, face, mode

    @staticmethod
    def _flatten(x, u):
        x, u = np.asarray(x, dtype=float), np.asarray(u, dtype=float)
        if x.shape[-1] != STATE_DIM or u.shape[-1] != CONTROL_DIM:
            raise ValueError(f"quasi-static model: expected x (..., 7) and u (..., 2), got {x.shape}, {u.shape}")
        batch = np.broadcast_shapes(x.shape[:-1], u.shape[:-1])
        z = np.concatenate([np.broadcast_to(x, batch + (STATE_DIM,)), np.broadcast_to(u, batch + (CONTROL_DIM,))],
                           -1).reshape(-1, STATE_DIM + CONTROL_DIM)
        return z, batch

    def step(self, x, u) -> np.ndarray:
        """Next state(s)."""
        x, u = np.asarray(x, dtype=float), np.asarray(u, dtype=float)
        if x.ndim == 2 and u.shape == (len(x), CONTROL_DIM) and x.shape[1] == STATE_DIM:  # the hot path of DDP
            return np.stack(self._step(list(x.T) + list(u.T), ops=np)[0], -1)
        return self.step_info(x, u)[0]

    def step_info(self, x, u):
        """(next state, face index, mode) for a batch; mode in STICK, SLIDE_UP, SLIDE_DOWN, SEPARATION."""
        z, batch = self._flatten(x, u)
        nxt, face, mode = self._step(list(z.T), ops=np)
        return (np.stack(nxt, -1).reshape(batch + (STATE_DIM,)), face.reshape(batch),
                mode.reshape(batch))

    def step_jacobians(self, x, u):
        """(next state (..., 7), A = d x'/d x (..., 7, 7), B = d x'/d u (..., 7, 2)), derivatives exact (forward
        mode) within the current face and mode."""
        z, batch = self._flatten(x, u)
        nxt, _, _ = self._step(Dual.seed(z))
        val, jac = dual.stack(nxt)
        return (val.reshape(batch + (STATE_DIM,)), jac[..., :STATE_DIM].reshape(batch + (STATE_DIM, STATE_DIM)),
                jac[..., STATE_DIM:].reshape(batch + (STATE_DIM, CONTROL_DIM)))

    def rollout(self, x0, controls) -> np.ndarray:
        """Chain steps: ``x0`` (..., 7), ``controls`` (..., T, 2) -> states (..., T + 1, 7)."""
        controls = np.asarray(controls, dtype=float)
        x = np.broadcast_to(np.asarray(x0, dtype=float), controls.shape[:-2] + (STATE_DIM,))
        out = [x]
        for t in range(controls.shape[-2]):
            x = self.step(x, controls[..., t, :])
            out.append(x)
        return np.stack(out, -2)

    def rollout_info(self, x0, controls):
        """Like ``rollout``, also returning face and mode per step (..., T)."""
        controls = np.asarray(controls, dtype=float)
        x = np.broadcast_to(np.asarray(x0, dtype=float), controls.shape[:-2] + (STATE_DIM,))
        xs, faces, modes = [x], [], []
        for t in range(controls.shape[-2]):
            x, f, m = self.step_info(x, controls[..., t, :])
            xs.append(x)
            faces.append(f)
            modes.append(m)
        return np.stack(xs, -2), np.stack(faces, -1), np.stack(modes, -1)

    def penetration(self, x) -> np.ndarray:
        """How deep the pusher disc overlaps the box (m, >= 0), from the pusher centre's distance to the box."""
        x = np.asarray(x, dtype=float)
        c, s = np.cos(x[..., 2]), np.sin(x[..., 2])
        dx, dy = x[..., 3] - x[..., 0], x[..., 4] - x[..., 1]
        r = np.stack([np.abs(c * dx + s * dy), np.abs(c * dy - s * dx)], -1) - np.asarray(self.size) / 2.0
        outside = np.linalg.norm(np.maximum(r, 0.0), axis=-1)
        inside = np.minimum(r.max(-1), 0.0)
        return np.maximum(self.pusher_radius - (outside + inside), 0.0)
