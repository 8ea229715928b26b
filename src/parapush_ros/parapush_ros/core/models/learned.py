"""The learned coarse model of paper 001: an MLP (512-256-128-64, ReLU) that predicts one slice of pushing.

Scene family. One network serves a pusher (radius 14.5 mm) and 1 to ``MAX_OBJECTS`` = 4 cylinders of the
``four_cylinders`` scene (radius 51.15 mm, 0.5 kg), with that scene's friction and 1 s slices. ``family_scene(n)``
builds the n-object member; ``check_family`` refuses any other scene with an error naming the field. Static
obstacles are allowed: as in the analytical model, they act only through the projection of penetrations.

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

Object velocities. A cylinder on this table (friction 1.0) stops within milliseconds once nothing pushes it, so
its velocity at the start of a slice hardly changes where it ends (MuJoCo: a 10 mm/s change moves the end pose by
~0.2 mm, the size of its own contact noise). In the data, though, a moving object is almost always one being
pushed, and a network given the velocities learns them as a stand-in for "in contact": the first shipped network
moved its prediction by 1.3 mm for a 2 mm/s change. In Parareal, whose corrections feed the coarse model states
with the coarse model's own velocities, that is pure error. Weights trained with ``object_velocities = false``
(``parapush train``'s default) see zeros in the object velocity columns, and their gate ignores motion (only
the pusher's path and predicted sweeps count); the pusher velocity stays an input (it sets the servo's lag).
Weights without the key in their metadata were trained with velocities and are used that way.

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

Symmetry: the physics is mirror symmetric about the push direction, so the prediction is the mean of the network
on a row and on its mirror image (mirrored back): exactly symmetric, and smoother (training also uses mirrored
samples).

The pusher is not learned: it follows its servo exactly (``fine.py``: a critically damped position servo on the
integral of u lags a ramp by 2 / omega_servo seconds), so its end position is ``p + u (dt - lag)`` and its end
velocity u. Penetration left by the network is projected away as for the analytical model.

Inference is batched: one float32 forward pass of all gated rows per gate pass (``MLP``: torch
``inference_mode`` on one thread, NumPy for a single row), no per-sample Python. torch is imported when weights
are loaded, never at ``parapush_ros.core`` import time.
"""
from __future__ import annotations

import itertools
import subprocess
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..scene.projection import DEFAULT_PROJECTION_TOLERANCE, project_feasible
from ..scene.spec import Scene, load_scene

FORMAT = "parapush-learned-coarse/1"
MAX_OBJECTS = 4
N_OTHERS = MAX_OBJECTS - 1
HIDDEN = (512, 256, 128, 64)
F_IN = 8 + 6 * N_OTHERS
F_OUT = 6
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
FAMILY_BASE_SCENE = "four_cylinders"
DEFAULT_WEIGHTS = "learned_coarse.pt"
_REL_TOL = 1e-6


class LearnedModelError(ValueError):
    """A weights file is unusable here: missing, malformed, or made for another scene family."""


# ----------------------------------------------------------------------------------------------- scene family
def family_scene(n_objects: int, base: Scene | None = None) -> Scene:
    """The member of the training family with ``n_objects`` cylinders (the first n of ``four_cylinders``)."""
    if not 1 <= int(n_objects) <= MAX_OBJECTS:
        raise ValueError(f"n_objects must be in 1..{MAX_OBJECTS}, got {n_objects}")
    base = base or load_scene(FAMILY_BASE_SCENE)
    return replace(base, name=f"cylinders_{int(n_objects)}", objects=base.objects[:int(n_objects)], obstacles=())


def family_metadata(scene: Scene | None = None, slice_s: float = 1.0) -> dict:
    """The physical facts that a set of weights is valid for (checked by ``check_family``)."""
    from . import mjcf  # noqa: PLC0415 (mujoco is only needed for the constants, already a core dependency)
    scene = scene or family_scene(MAX_OBJECTS)
    o = scene.objects[0]
    return {
        "base_scene": FAMILY_BASE_SCENE,
        "pusher_radius": scene.pusher.radius,
        "object_shape": o.shape,
        "object_radius": o.radius,
        "object_height": o.size[2],
        "object_mass": o.mass,
        "max_objects": MAX_OBJECTS,
        "friction": dict(scene.friction),
        "slice_s": float(slice_s),
        "fine_timestep_s": mjcf.TIMESTEP,
        "pusher_bandwidth_hz": mjcf.PUSHER_BANDWIDTH_HZ,
        "pusher_lag_s": 2.0 / (2.0 * np.pi * mjcf.PUSHER_BANDWIDTH_HZ),
    }


def check_family(scene: Scene, family: dict, source: str = "weights") -> None:
    """Raise ``LearnedModelError`` naming the first field in which ``scene`` leaves the trained family."""
    def fail(field, have, key, want=None):
        want = family[key] if want is None else want
        raise LearnedModelError(f"learned coarse model ({source}) does not fit scene {scene.name!r}: {field} is "
                                f"{have!r}, the weights were trained for {want!r} (metadata family.{key})")

    def close(a, b):
        return abs(float(a) - float(b)) <= _REL_TOL * max(1.0, abs(float(b)))

    try:
        if not close(scene.pusher.radius, family["pusher_radius"]):
            fail("pusher.radius", scene.pusher.radius, "pusher_radius")
        if not 1 <= len(scene.objects) <= int(family["max_objects"]):
            fail("the number of objects", len(scene.objects), "max_objects", f"1..{family['max_objects']}")
        for i, o in enumerate(scene.objects):
            if o.shape != family["object_shape"]:
                fail(f"objects[{i}].shape", o.shape, "object_shape")
            for field, have, key in (("radius", o.radius, "object_radius"), ("height", o.size[2], "object_height"),
                                     ("mass", o.mass, "object_mass")):
                if not close(have, family[key]):
                    fail(f"objects[{i}].{field}", have, key)
        for k, v in family["friction"].items():
            if k not in scene.friction or not close(scene.friction[k], v):
                fail(f"friction.{k}", scene.friction.get(k), "friction", v)
    except KeyError as e:
        raise LearnedModelError(f"learned coarse model ({source}): metadata lacks family field {e}") from None


def uses_object_velocities(meta: dict) -> bool:
    """Whether weights with this metadata take object velocities as inputs (older weights: yes)."""
    value = (meta.get("encoding") or {}).get("object_velocities", True)
    if not isinstance(value, bool):
        raise LearnedModelError(f"metadata encoding.object_velocities is {value!r}, expected true or false")
    return value


def models_dir() -> Path:
    """Directory of the shipped weights: the installed share dir when available, else the source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415
        d = Path(get_package_share_directory("parapush_ros")) / "config" / "models"
        if (d / DEFAULT_WEIGHTS).exists():
            return d
    except Exception:  # ament index absent (plain Python) or package not installed
        pass
    for parent in Path(__file__).resolve().parents:
        d = parent / "config" / "models"
        if d.is_dir():
            return d
    raise LearnedModelError("cannot find the shipped model directory (config/models)")


def default_weights_path() -> Path:
    return models_dir() / DEFAULT_WEIGHTS


def version_string() -> str:
    """``parapush_ros.__version__`` plus ``git describe`` of the source tree when available."""
    from ... import __version__  # noqa: PLC0415
    try:
        d = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=Path(__file__).resolve().parent,
                           capture_output=True, text=True, timeout=5)
        if d.returncode == 0 and d.stdout.strip():
            return f"{__version__}+git.{d.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__


# ----------------------------------------------------------------------------------------------- encoding
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


# ----------------------------------------------------------------------------------------------- network
class MLP:
    """Forward pass of the exported network (normalisation included), float32, on one thread.

    A single row goes through NumPy (least call overhead). More rows go through torch with one intra-op thread
    for the call: OpenBLAS (NumPy) splits even a 2-row product over all cores, and on a machine whose cores are
    busy with fine-model threads, a multi-threaded product of this size waits milliseconds for a free core.
    One thread does ~4 us per row, far below a fine slice; the fine model owns the cores.
    """

    def __init__(self, layers, x_mean, x_std, y_mean, y_std, threads: int = 1):
        self.layers = [(np.ascontiguousarray(w, dtype=np.float32), np.asarray(bias, dtype=np.float32))
                       for w, bias in layers]
        self.x_mean = np.asarray(x_mean, dtype=np.float32)
        self.x_inv_std = (1.0 / np.asarray(x_std, dtype=np.float64)).astype(np.float32)
        self.y_mean = np.asarray(y_mean, dtype=np.float64)
        self.y_std = np.asarray(y_std, dtype=np.float64)
        self.threads = int(threads)
        self._torch = None

    def _torch_layers(self):
        if self._torch is None:
            import torch  # noqa: PLC0415
            self._torch = (torch, [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in self.layers],
                           torch.from_numpy(self.x_mean), torch.from_numpy(self.x_inv_std))
        return self._torch

    def __call__(self, features: np.ndarray) -> np.ndarray:
        if len(features) <= 1:
            return self._numpy(features)
        return self._torch_forward(features)

    def _numpy(self, features):
        h = features.astype(np.float32)
        h -= self.x_mean
        h *= self.x_inv_std
        last = len(self.layers) - 1
        for k, (w, bias) in enumerate(self.layers):
            h = h @ w
            h += bias
            if k < last:
                np.maximum(h, 0.0, out=h)
        return h.astype(np.float64) * self.y_std + self.y_mean

    def _torch_forward(self, features):
        torch, layers, x_mean, x_inv_std = self._torch_layers()
        prev = torch.get_num_threads()
        if prev != self.threads:
            torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                h = (torch.from_numpy(features.astype(np.float32)) - x_mean) * x_inv_std
                last = len(layers) - 1
                for k, (w, bias) in enumerate(layers):
                    h = torch.addmm(bias, h, w)
                    if k < last:
                        h.relu_()
                out = h.numpy()
        finally:
            if prev != self.threads:
                torch.set_num_threads(prev)
        return out.astype(np.float64) * self.y_std + self.y_mean


def mlp_from_state_dict(state: dict, norm: dict) -> MLP:
    """MLP from a torch ``nn.Sequential`` state dict (Linear layers at even indices) and the norm stats."""
    keys = sorted({k.rsplit(".", 1)[0] for k in state}, key=lambda s: int(s.split(".")[-1]))
    layers = [(_np(state[f"{k}.weight"]).T, _np(state[f"{k}.bias"])) for k in keys]
    sizes = [layers[0][0].shape[0]] + [w.shape[1] for w, _ in layers]
    if sizes != [F_IN, *HIDDEN, F_OUT]:
        raise LearnedModelError(f"network layer sizes {sizes} differ from the expected {[F_IN, *HIDDEN, F_OUT]}")
    return MLP(layers, _np(norm["x_mean"]), _np(norm["x_std"]), _np(norm["y_mean"]), _np(norm["y_std"]))


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


# ----------------------------------------------------------------------------------------------- the model
class LearnedCoarseModel:
    """C(x, u, dt) for one scene of the trained family. ``propagate`` takes (B, D) states and (B, 2) controls."""

    name = "learned"

    def __init__(self, scene: Scene, mlp: MLP, meta: dict, source: str = "<memory>",
                 projection_tolerance: float = DEFAULT_PROJECTION_TOLERANCE, symmetric: bool = True,
                 two_pass: bool = True, slot_order_softness: float = SLOT_ORDER_SOFTNESS):
        family = meta.get("family")
        if family is None:
            raise LearnedModelError(f"learned coarse model ({source}): metadata has no 'family'")
        check_family(scene, family, source)
        from . import mjcf  # noqa: PLC0415
        for key, now in (("fine_timestep_s", mjcf.TIMESTEP), ("pusher_bandwidth_hz", mjcf.PUSHER_BANDWIDTH_HZ)):
            if key in family and abs(float(family[key]) - now) > 1e-12:
                warnings.warn(f"learned coarse model ({source}) was trained on a fine model with {key} = "
                              f"{family[key]}, the fine model now uses {now}: retrain it", stacklevel=2)
        self.scene = scene
        self.layout = scene.layout
        self.mlp = mlp
        self.meta = meta
        self.source = source
        self.slice_s = float(family["slice_s"])
        self.pusher_lag = float(family["pusher_lag_s"])
        self.projection_tolerance = projection_tolerance
        self.object_radius = float(family["object_radius"])
        self.symmetric = symmetric
        self.two_pass = two_pass
        if not slot_order_softness >= 0.0:
            raise ValueError(f"slot_order_softness must be >= 0 m, got {slot_order_softness}")
        self.slot_order_softness = float(slot_order_softness)  # 0: hard nearest-first order (discontinuous)
        self.object_velocities = uses_object_velocities(meta)

    @classmethod
    def load(cls, scene: Scene, path=None, **kwargs) -> "LearnedCoarseModel":
        """Load weights (``None``: the shipped ones) and check they fit ``scene``."""
        path = Path(path) if path else default_weights_path()
        if not path.is_file():
            raise LearnedModelError(f"learned coarse model weights not found: {path}")
        try:
            import torch  # noqa: PLC0415
        except ImportError as e:
            raise LearnedModelError(f"reading {path.name} needs torch ({e})") from None
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # corrupt or foreign file: say which
            raise LearnedModelError(f"{path}: not a readable weights file ({e})") from None
        if not isinstance(blob, dict) or blob.get("format") != FORMAT:
            got = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
            raise LearnedModelError(f"{path}: format is {got!r}, expected {FORMAT!r}")
        for key in ("state_dict", "norm", "meta"):
            if key not in blob:
                raise LearnedModelError(f"{path}: missing field {key!r}")
        return cls(scene, mlp_from_state_dict(blob["state_dict"], blob["norm"]), blob["meta"], source=path.name,
                   **kwargs)

    def _steps(self, dt: float) -> int:
        k = int(round(dt / self.slice_s))
        if k < 1 or abs(k * self.slice_s - dt) > 1e-9:
            raise ValueError(f"learned coarse model: slice duration {dt} s is not a multiple of the "
                             f"{self.slice_s} s slices it was trained for")
        return k

    def propagate(self, x, u, dt: float) -> np.ndarray:
        x = np.array(np.atleast_2d(x), dtype=float)
        u = np.asarray(np.atleast_2d(u), dtype=float)
        if x.shape[0] != u.shape[0] or u.shape[-1] != 2 or x.shape[-1] != self.layout.dim:
            raise ValueError(f"coarse model: expected x (B, {self.layout.dim}) and u (B, 2), "
                             f"got {x.shape}, {u.shape}")
        for _ in range(self._steps(dt)):
            x = self._slice(x, u)
        return x

    def _slice(self, x, u):
        h = self.slice_s
        L = self.layout
        n = L.n_objects
        out = x.copy()
        L.object_vels(out)[...] = 0.0
        todo = gate(x, u, h, self.scene.pusher.radius, self.object_radius, chain=not self.two_pass,
                    object_velocities=self.object_velocities)
        done = np.zeros_like(todo)
        for _ in range(n):
            if not todo.any():
                break
            rows = encode(x, u, todo, self.object_velocities)
            apply_outputs(rows, out, self._predict(rows.features))
            done |= todo
            if n == 1 or not self.two_pass:
                break
            todo = ~done & swept_reach(L.object_poses(x)[..., :2], L.object_poses(out)[..., :2], done,
                                       2.0 * self.object_radius + CHAIN_MARGIN)
        L.pusher_pos(out)[...] += u * (h - self.pusher_lag)
        L.pusher_vel(out)[...] = u
        if self._may_penetrate(out):
            out, _ = project_feasible(self.scene, out, self.projection_tolerance)
        return out

    def _predict(self, features):
        """Network outputs for encoded rows: the weighted mean over the soft slot orders that carry weight
        (mostly just the sorted one), each the mean of the row and its mirror image; one batched call."""
        if self.slot_order_softness == 0.0:
            return self._network(features)
        w = slot_order_weights(features, self.slot_order_softness)
        w = np.where(w > SLOT_ORDER_MIN_WEIGHT, w, 0.0)
        w /= w.sum(axis=0)
        k, r = np.nonzero(w)
        if len(r) == len(features) and not k.any():  # every row has the sorted order alone: no gathering
            return self._network(features)
        y = self._network(features[r[:, None], _SLOT_ORDER_COLS[k]]) * w[k, r, None]
        out = np.zeros((len(features), F_OUT))
        np.add.at(out, r, y)
        return out

    def _network(self, features):
        if not self.symmetric:
            return self.mlp(features)
        R = len(features)
        y = self.mlp(np.concatenate([features, features * MIRROR_IN]))
        return 0.5 * (y[:R] + y[R:] * MIRROR_OUT)

    def _may_penetrate(self, x) -> bool:
        """Cheap test for discs (one vectorised distance check): does any state need ``project_feasible``?
        It moves nothing that penetrates by less than the tolerance, so skipping it then changes nothing."""
        if self.scene.obstacles:
            return True
        n = self.layout.n_objects
        p, poses, _, _ = _split(x, n)
        c = poses[..., :2]
        tol = self.projection_tolerance
        r = self.object_radius
        q = c - p[:, None, :]
        if np.any(np.hypot(q[..., 0], q[..., 1]) < r + self.scene.pusher.radius - tol):
            return True
        if n > 1:
            iu, ju = np.triu_indices(n, 1)
            q = c[:, ju] - c[:, iu]
            return bool(np.any(np.hypot(q[..., 0], q[..., 1]) < 2.0 * r - tol))
        return False
