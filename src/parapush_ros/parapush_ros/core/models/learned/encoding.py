"""How a state, a control and a focus object become one network row, and which objects the network is asked about.

Encoding (one network row per moving object, so the same weights serve 1..4 objects and every object is
treated alike). For the state x, the control u and a *focus* object i, the row is expressed in a frame centred on
the pusher with +x along u (for u = 0: +x toward the focus object); the frame depends on u only, so Parareal's
differences C(x') - C(x) see no frame jump. Positions are relative, so the row is translation and rotation
invariant; a cylinder's dynamics does not depend on its own yaw, so absolute yaw is not an input.

    in  [0]      |u|
        [1:3]    pusher velocity (frame)
        [3:5]    focus centre - pusher (frame)
        [5:8]    focus velocity vx, vy (frame), omega
        [8:26]   3 slots for the other objects, nearest to the focus first: present flag, centre - focus centre
                 (frame), vx, vy (frame), omega
    out [0:3]    change of the focus pose over the slice: dx, dy (frame), dyaw
        [3:6]    focus velocity at the end of the slice: vx, vy (frame), omega

Absent objects (fewer than 4 in the scene, or farther than ``CONTEXT_RADIUS`` from the focus, which one slice
cannot bridge) fill their slot with flag 0, the parked offset ``PARKED`` (behind the focus, out of reach) and zero
velocity: a 1-object scene and a 4-object scene whose other objects are far away give the same rows.
Inputs and outputs are normalised with the training set's mean and standard deviation, stored with the weights.

Soft slot order. "Nearest first" is discontinuous exactly where it matters: in a cluster the neighbours of an
object all sit near 2 R, so a 0.1 mm change of the state can swap two slots, and the network, which is not exactly
indifferent to the order, jumps. Parareal's correction C(x') - C(x) then sees a jump the fine model does not have
(on the bench's 4-cylinder pushes a 0.1 mm perturbation moved the sorted prediction by up to 7.8 mm, while
MuJoCo's answer moved by at most 1.1 mm). So the prediction is the weighted mean over the orders of the neighbour
slots, each order weighted by how well it is sorted: prod over slot pairs s < t of sigmoid((d_t - d_s) /
``SLOT_ORDER_SOFTNESS``), normalised. Where the distances differ by more than a few softness lengths only the
sorted order has weight (the network is evaluated once, as trained); near a tie the two orders blend, and at the
tie they count equally, so the prediction is continuous. Orders with weight below ``SLOT_ORDER_MIN_WEIGHT`` are
not evaluated. Absent slots never blend (they count as infinitely far, in their fixed order).

Gate (as the authors, who call their network only when the pusher path nears a slider): an object goes through
the network when the pusher's straight path over the slice passes within ``GATE_MARGIN`` of touching it or (only
for weights that read object velocities) when it is moving; then, pass by pass, every object that the *predicted*
motion of an object already evaluated sweeps within ``CHAIN_MARGIN`` of (chains of pushes). All other objects keep
their pose and come to rest. The predicted sweep is a much sharper test than "within reach": on the training data
~85 % of the objects merely within reach of a pushed object do not move, and a network asked about them answers
with a few mm of noise, which in a multi-object scene costs more than it gains (and ruins Parareal's corrections).
Training uses every object within reach (``gate``), a superset.
``parapush train``'s report checks on held-out fine data that objects left out indeed do not move.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .family import F_IN, F_OUT, MAX_OBJECTS, N_OTHERS

CONTEXT_RADIUS = 0.25  # m between centres: farther objects cannot touch the focus within one slice at <= 5 cm/s
PARKED = (-CONTEXT_RADIUS, 0.0)  # m, frame offset of an absent object from the focus (behind it)
GATE_MARGIN = 0.01  # m of extra clearance before an object is considered out of reach
CHAIN_MARGIN = 0.005  # m: an object is pushed on only if a predicted sweep comes this close to touching it
MOVE_EPS = 5e-4  # m: predicted motions below this push nothing
GATE_SPEED = 0.005  # m/s: objects moving faster than this always go through the network
GATE_OMEGA = 0.05  # rad/s
U_EPS = 1e-6  # m/s: slower controls count as zero (frame toward the focus object)
SLOT_ORDER_SOFTNESS = 0.003  # m: neighbours whose distances differ by less than this blend their slot orders
SLOT_ORDER_MIN_WEIGHT = 1e-4  # slot orders with a smaller weight are not evaluated (changes the result < 1 um)


@dataclass
class Rows:
    """Network rows of a batch: features (R, F_IN) of the (sample b, object i) pairs, and their frames."""

    features: np.ndarray
    b: np.ndarray
    i: np.ndarray
    cos: np.ndarray
    sin: np.ndarray

    def to_frame(self, v):
        """Planar vectors (R, 2) in the table frame -> the rows' frames."""
        return np.stack([self.cos * v[..., 0] + self.sin * v[..., 1],
                         -self.sin * v[..., 0] + self.cos * v[..., 1]], axis=-1)


def _split(x, n):
    B = x.shape[0]
    nq = 2 + 3 * n
    poses = x[:, 2:nq].reshape(B, n, 3)
    vels = x[:, nq + 2:].reshape(B, n, 3)
    return x[:, 0:2], poses, x[:, nq:nq + 2], vels


# feature columns of the planar vectors that are rotated into the frame, in the order encode() stacks them
_VEC_COLS = np.array([[1, 2], [3, 4], [5, 6]] + [[8 + 6 * s + k, 8 + 6 * s + k + 1] for s in range(N_OTHERS)
                                                  for k in (1, 3)])
_SLOT_FLAG = np.array([8 + 6 * s for s in range(N_OTHERS)])
_SLOT_OMEGA = _SLOT_FLAG + 5
_SLOT_REL = np.stack([_SLOT_FLAG + 1, _SLOT_FLAG + 2], -1)
_SLOT_VEL = np.stack([_SLOT_FLAG + 3, _SLOT_FLAG + 4], -1)
# mirroring about the frame's x axis (u is unchanged by it) flips the sign of these inputs and outputs
MIRROR_IN = np.ones(F_IN)
MIRROR_IN[[2, 4, 6, 7, *(_SLOT_FLAG + 2), *(_SLOT_FLAG + 4), *(_SLOT_FLAG + 5)]] = -1.0
MIRROR_OUT = np.array([1.0, -1.0, -1.0, 1.0, -1.0, -1.0])
SLOT_ORDERS = tuple(itertools.permutations(range(N_OTHERS)))  # the identity (sorted order) first
# object velocity inputs: the focus's vx, vy, omega and every slot's vx, vy, omega (zero for velocity-blind weights)
OBJECT_VELOCITY_COLS = np.concatenate([[5, 6, 7], _SLOT_VEL.ravel(), _SLOT_OMEGA])


def slot_order_columns() -> np.ndarray:
    """(len(SLOT_ORDERS), F_IN) column indices: ``features[:, cols[k]]`` puts the neighbour of slot
    ``SLOT_ORDERS[k][s]`` into slot s; all other columns stay."""
    cols = np.tile(np.arange(F_IN), (len(SLOT_ORDERS), 1))
    width = _SLOT_FLAG[1] - _SLOT_FLAG[0]
    for k, order in enumerate(SLOT_ORDERS):
        for s, src in enumerate(order):
            cols[k, _SLOT_FLAG[s]:_SLOT_FLAG[s] + width] = np.arange(_SLOT_FLAG[src], _SLOT_FLAG[src] + width)
    return cols


_SLOT_ORDER_COLS = slot_order_columns()


def slot_order_weights(features, softness: float = SLOT_ORDER_SOFTNESS) -> np.ndarray:
    """(len(SLOT_ORDERS), R) weights of the slot orders of encoded rows (see "Soft slot order"); columns sum
    to 1, and a row whose present neighbours are farther apart than a few ``softness`` has weight ~1 on the
    identity."""
    d = np.hypot(features[:, _SLOT_REL[:, 0]], features[:, _SLOT_REL[:, 1]])
    absent = features[:, _SLOT_FLAG] < 0.5
    d = np.where(absent, 1e3 * (1.0 + np.arange(N_OTHERS)), d)  # far, distinct, in slot order: never blend
    log_w = np.zeros((len(SLOT_ORDERS), len(features)))
    for k, order in enumerate(SLOT_ORDERS):
        for s, t in itertools.combinations(range(N_OTHERS), 2):
            log_w[k] -= np.logaddexp(0.0, -(d[:, order[t]] - d[:, order[s]]) / softness)  # log sigmoid
    w = np.exp(log_w - log_w.max(axis=0))
    return w / w.sum(axis=0)


def encode(x, u, mask=None, object_velocities: bool = True) -> Rows:
    """Rows for the objects of ``x`` (B, D) under controls ``u`` (B, 2); ``mask`` (B, n) selects objects
    (default: all). The object count is read from D = 4 + 6 n. ``object_velocities=False``: the object velocity
    columns are zero (see "Object velocities")."""
    x = np.asarray(x, dtype=float)
    u = np.asarray(u, dtype=float)
    n = (x.shape[1] - 4) // 6
    if n < 1 or n > MAX_OBJECTS or x.shape[1] != 4 + 6 * n:
        raise ValueError(f"learned coarse model: state dimension {x.shape[1]} is not 4 + 6 n for n in 1..{MAX_OBJECTS}")
    p, poses, vp, vels = _split(x, n)
    if mask is None:
        b, i = np.divmod(np.arange(x.shape[0] * n), n)
    else:
        b, i = np.nonzero(mask)
    R = b.size
    c = poses[..., :2]
    ub = u[b]
    speed = np.hypot(ub[:, 0], ub[:, 1])
    vec = np.zeros((R, 3 + 2 * N_OTHERS, 2))
    vec[:, 0] = vp[b]
    vec[:, 1] = c[b, i] - p[b]
    vec[:, 2] = vels[b, i, :2]
    theta = np.where(speed > U_EPS, np.arctan2(ub[:, 1], ub[:, 0]), np.arctan2(vec[:, 1, 1], vec[:, 1, 0]))
    cos, sin = np.cos(theta), np.sin(theta)
    f = np.zeros((R, F_IN))
    present = np.zeros((R, N_OTHERS), dtype=bool)
    if n > 1:  # the other objects, nearest first; beyond CONTEXT_RADIUS they count as absent
        d = c[:, None, :, :] - c[:, :, None, :]  # d[b, i, j] = c_j - c_i
        dist = np.hypot(d[..., 0], d[..., 1])
        dist[:, np.arange(n), np.arange(n)] = np.inf
        dist[dist > CONTEXT_RADIUS] = np.inf
        j = np.argsort(dist, axis=-1, kind="stable")[b, i, :n - 1]  # (R, n-1)
        bb, ii = b[:, None], i[:, None]
        present[:, :n - 1] = np.isfinite(dist[bb, ii, j])
        vec[:, 3:3 + 2 * (n - 1):2] = d[bb, ii, j]
        vec[:, 4:4 + 2 * (n - 1):2] = vels[bb, j, :2]
        f[:, _SLOT_OMEGA[:n - 1]] = vels[bb, j, 2]
    cs, sn = cos[:, None], sin[:, None]
    f[:, _VEC_COLS[:, 0]] = cs * vec[..., 0] + sn * vec[..., 1]
    f[:, _VEC_COLS[:, 1]] = cs * vec[..., 1] - sn * vec[..., 0]
    f[:, 0] = speed
    f[:, 7] = vels[b, i, 2]
    f[:, _SLOT_FLAG] = present
    absent = ~present
    if absent.any():
        rr, ss = np.nonzero(absent)
        f[rr[:, None], _SLOT_REL[ss]] = PARKED
        f[rr[:, None], _SLOT_VEL[ss]] = 0.0
        f[rr, _SLOT_OMEGA[ss]] = 0.0
    if not object_velocities:
        f[:, OBJECT_VELOCITY_COLS] = 0.0
    return Rows(f, b, i, cos, sin)


def equivalent_pusher(features, radius_offset: float) -> None:
    """Move the pusher of encoded rows, in place, to where a pusher of the trained radius makes the same contact
    with the focus object, for a scene whose pusher is ``radius_offset`` (m) larger than the trained one.

    Why this is exact for a disc pusher on a disc object: what the contact does depends on the contact normal (the
    direction between the centres), the gap (centre distance minus both radii) and the pusher's velocity; the
    pusher translates and does not turn, so the contact point's velocity is the pusher's whatever its radius. Moving
    the pusher along the normal by ``radius_offset`` keeps the normal and the gap, so the trained network sees the
    contact it learned. Only the focus - pusher column changes: the neighbours are encoded relative to the focus."""
    rel = features[:, 3:5]
    d = np.hypot(rel[:, 0], rel[:, 1])
    scale = np.where(d > 0.0, np.maximum(d - radius_offset, 0.0) / np.where(d > 0.0, d, 1.0), 1.0)
    features[:, 3:5] = rel * scale[:, None]


def targets(rows: Rows, x, x_next) -> np.ndarray:
    """Network outputs (R, F_OUT) that map ``x`` to ``x_next`` for ``rows`` (the training targets)."""
    n = (x.shape[1] - 4) // 6
    _, poses, _, _ = _split(np.asarray(x, dtype=float), n)
    _, poses1, _, vels1 = _split(np.asarray(x_next, dtype=float), n)
    b, i = rows.b, rows.i
    y = np.empty((b.size, F_OUT))
    y[:, 0:2] = rows.to_frame(poses1[b, i, :2] - poses[b, i, :2])
    y[:, 2] = poses1[b, i, 2] - poses[b, i, 2]
    y[:, 3:5] = rows.to_frame(vels1[b, i, :2])
    y[:, 5] = vels1[b, i, 2]
    return y


def apply_outputs(rows: Rows, x_next, y) -> None:
    """Write the network outputs ``y`` (R, F_OUT) into the object parts of ``x_next`` (B, D), in place.
    ``x_next`` must hold the start poses of the rows' objects (they are changed by the predicted deltas)."""
    n = (x_next.shape[1] - 4) // 6
    nq = 2 + 3 * n
    b, i = rows.b, rows.i
    c, s = rows.cos, rows.sin
    col = 2 + 3 * i
    x_next[b, col] += c * y[:, 0] - s * y[:, 1]
    x_next[b, col + 1] += s * y[:, 0] + c * y[:, 1]
    x_next[b, col + 2] += y[:, 2]
    col = nq + 2 + 3 * i
    x_next[b, col] = c * y[:, 3] - s * y[:, 4]
    x_next[b, col + 1] = s * y[:, 3] + c * y[:, 4]
    x_next[b, col + 2] = y[:, 5]


def gate(x, u, dt: float, pusher_radius: float, object_radius: float, chain: bool = True,
         object_velocities: bool = True) -> np.ndarray:
    """(B, n) bool: objects that may move during the slice (see the module docstring). ``chain=False``: only
    those near the pusher's path or (``object_velocities``) moving; with chains, also every object within reach of
    those, transitively (the training rows: a superset of what ``swept_reach`` selects at prediction time)."""
    x = np.asarray(x, dtype=float)
    n = (x.shape[1] - 4) // 6
    p, poses, _, vels = _split(x, n)
    c = poses[..., :2]
    seg = np.asarray(u, dtype=float)[:, None, :] * dt  # (B, 1, 2)
    seg2 = seg[..., 0] ** 2 + seg[..., 1] ** 2  # (B, 1)
    q = c - p[:, None]
    t = np.clip((q[..., 0] * seg[..., 0] + q[..., 1] * seg[..., 1]) / np.maximum(seg2, 1e-18), 0.0, 1.0)
    q -= t[..., None] * seg
    active = q[..., 0] ** 2 + q[..., 1] ** 2 < (pusher_radius + object_radius + GATE_MARGIN) ** 2
    if object_velocities:
        active |= (vels[..., 0] ** 2 + vels[..., 1] ** 2 > GATE_SPEED ** 2) | (np.abs(vels[..., 2]) > GATE_OMEGA)
    if chain and n > 1:
        reach = np.sqrt(seg2[:, 0]) + GATE_MARGIN
        dd = c[:, None, :, :] - c[:, :, None, :]
        near = np.hypot(dd[..., 0], dd[..., 1]) < 2.0 * object_radius + reach[:, None, None]
        near[:, np.arange(n), np.arange(n)] = False
        for _ in range(n - 1):
            grown = active | np.any(near & active[:, None, :], axis=-1)
            if np.array_equal(grown, active):
                break
            active = grown
    return active


def swept_reach(c0, c1, movers, reach: float) -> np.ndarray:
    """(B, n) bool: objects whose centre ``c0`` lies within ``reach`` of the segment c0 -> c1 swept by one of the
    ``movers`` (B, n) that moved more than ``MOVE_EPS`` (the objects a predicted motion may push)."""
    disp = c1 - c0
    moving = movers & (np.hypot(disp[..., 0], disp[..., 1]) > MOVE_EPS)
    q = c0[:, :, None, :] - c0[:, None, :, :]  # q[b, i, j] = c_i - c_j
    s = disp[:, None, :, :]
    t = np.clip((q * s).sum(-1) / np.maximum((s * s).sum(-1), 1e-18), 0.0, 1.0)
    q = q - t[..., None] * s
    hit = (q[..., 0] ** 2 + q[..., 1] ** 2 < reach * reach) & moving[:, None, :]
    n = c0.shape[1]
    hit[:, np.arange(n), np.arange(n)] = False
    return hit.any(axis=-1)


def mirror(x, u):
    """States and controls reflected about the table's x axis (the physics is symmetric: training augmentation)."""
    x = np.array(x, dtype=float, copy=True)
    u = np.array(u, dtype=float, copy=True)
    n = (x.shape[1] - 4) // 6
    p, poses, vp, vels = _split(x, n)
    p[:, 1] *= -1.0
    vp[:, 1] *= -1.0
    poses[..., 1:3] *= -1.0
    vels[..., 1:3] *= -1.0
    u[:, 1] *= -1.0
    return x, u
