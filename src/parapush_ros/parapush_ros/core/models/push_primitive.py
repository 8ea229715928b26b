"""The push-primitive world of paper 004: a box on the table, quasi-static, moved by one straight push at a time.

State: the box pose s = (x, y, yaw) in the table frame (the box at rest between pushes). Action: a push in the
*object* frame, a = (phi, c): ``phi`` the push direction (angle of the unit vector d = (cos phi, sin phi)) and ``c``
in [0, 1] where the pusher centre's straight path crosses the box face the push enters through (0 and 1: the
face's ends, less a pusher radius). The pusher disc first touches the face r tan(psi) before that point, on the
side it comes from (psi the angle between d and the face's inward normal; up to 12 mm at 40 deg, so an oblique
push at c = 0 or 1 may touch within a few millimetres of the corner): the learned models' data and weights use this
parameterisation, so it stays as it is. The face is the one whose outward normal is most opposed to d; ``phi`` is
kept within ``MAX_OBLIQUE`` of that face's inward normal (a push closer to a corner diagonal would slide off the
corner).
The push: the pusher starts ``CONTACT_GAP`` outside the contact point and moves along d at ``PUSH_SPEED`` for
``PUSH_DURATION`` (MuJoCo, the fine model of the ``box_slider`` scene, pusher already at speed so there is no
servo lag). The outcome is the change of pose in the object frame at the start, (dx, dy, dyaw), which is what the
learned models predict (the paper's encoding: inputs s and (d, c); outputs the object-frame pose change).

``PrimitiveModel``s share one interface: ``predict(poses (B, 3), actions (B, 2)) -> (next poses (B, 3),
variance (B, 3) of the object-frame change)``. ``FinePrimitive`` is MuJoCo (zero variance), ``EMDNPrimitive``
the E-MDN and ``GPPrimitive`` the Gaussian-process baseline (scikit-learn, see ``gp.py``).

Lesioning (paper Fig. 4): a ``Lesion`` is an axis-aligned rectangle of box positions whose pushes are left out
of a training set, so the models' variance there can be compared with elsewhere.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..scene.spec import Scene, load_scene
from ..scene.state import wrap_angle

SCENE = "box_slider"
PUSH_SPEED = 0.05  # m/s
PUSH_DURATION = 1.0  # s: a 5 cm push
CONTACT_GAP = 0.001  # m between pusher and face at the start
MAX_OBLIQUE = np.radians(40.0)  # largest angle between the push and the face's inward normal
# The push-primitive workspace (box_slider's table: half size 0.4 x 0.5 m), |x|, |y| bounds of the box centre (m),
# written here once for the data, the planners (``planning.uncertainty_mppi``) and the bench:
WORKSPACE = (0.3, 0.35)  # where the data's pushes start
PLANNING_LIMITS = (0.3, 0.42)  # Algorithm 1's poses (beyond: a penalty per m) and the extent of the heat map
PATH_LIMITS = (0.28, 0.34)  # Algorithm 2's way-points: the box stays on the table, inside the data's workspace
PLACE_SPACING = 0.1  # m between the nodes of the position encoding
PLACE_EXTENT = (0.4, 0.4)  # m: |x|, |y| covered by nodes (positions beyond are clamped to the border)
PLACE_INIT = 1.5  # std of the E-MDN's first-layer weights of the place features (EMDNConfig.unscaled_init)
PLACE_XS = np.arange(-PLACE_EXTENT[0], PLACE_EXTENT[0] + 1e-9, PLACE_SPACING)
PLACE_YS = np.arange(-PLACE_EXTENT[1], PLACE_EXTENT[1] + 1e-9, PLACE_SPACING)
N_PLACE = len(PLACE_XS) * len(PLACE_YS)
N_FEATURES = N_PLACE + 5  # place features, cos yaw, sin yaw, cos phi, sin phi, c
N_OUT = 3


@dataclass(frozen=True)
class Lesion:
    """Box positions x in [x0, x1], y in [y0, y1] (table frame, m) removed from a training set."""
    x0: float
    y0: float
    x1: float
    y1: float

    def __post_init__(self):
        if not (self.x0 < self.x1 and self.y0 < self.y1):
            raise ValueError(f"lesion: need x0 < x1 and y0 < y1, got {self}")

    @classmethod
    def parse(cls, text: str, what: str = "--lesion") -> Lesion:
        try:
            v = [float(t) for t in text.split(",")]
        except ValueError:
            v = []
        if len(v) != 4:
            raise ValueError(f"{what}: {text!r} is not x0,y0,x1,y1 (metres)")
        return cls(*v)

    def contains(self, xy) -> np.ndarray:
        xy = np.asarray(xy, dtype=float)
        return (xy[..., 0] >= self.x0) & (xy[..., 0] <= self.x1) & (xy[..., 1] >= self.y0) & (xy[..., 1] <= self.y1)

    def as_list(self) -> list:
        return [self.x0, self.y0, self.x1, self.y1]


def face_normal_angle(phi) -> np.ndarray:
    """Angle of the inward normal of the face a push along ``phi`` enters through (0, pi/2, pi, -pi/2)."""
    return np.round(np.asarray(phi, dtype=float) / (np.pi / 2)) * (np.pi / 2)


def valid_action(actions) -> np.ndarray:
    """Actions (..., 2) made valid: phi wrapped and kept within MAX_OBLIQUE of its face normal, c in [0, 1]."""
    a = np.array(actions, dtype=float, copy=True)
    phi = wrap_angle(a[..., 0])
    n = face_normal_angle(phi)
    a[..., 0] = wrap_angle(n + np.clip(phi - n, -MAX_OBLIQUE, MAX_OBLIQUE))
    a[..., 1] = np.clip(a[..., 1], 0.0, 1.0)
    return a


def contact_point(actions, half_size, pusher_radius: float) -> np.ndarray:
    """Object-frame start position (..., 2) of the pusher centre for valid actions (..., 2): on the line along d
    through the face point of ``c``, ``CONTACT_GAP`` short of touching the face."""
    a = np.asarray(actions, dtype=float)
    n = face_normal_angle(a[..., 0])
    inward = np.stack([np.cos(n), np.sin(n)], -1)  # the push enters along +inward: the face is at -inward
    along = np.stack([-inward[..., 1], inward[..., 0]], -1)
    hx, hy = half_size
    depth = np.where(np.abs(inward[..., 0]) > 0.5, hx, hy)  # distance from the centre to the face
    span = np.where(np.abs(inward[..., 0]) > 0.5, hy, hx) - pusher_radius  # half usable length of the face
    s = (2.0 * a[..., 1] - 1.0) * span
    d = np.stack([np.cos(a[..., 0]), np.sin(a[..., 0])], -1)
    face_point = -inward * depth[..., None] + along * s[..., None]
    # step back along -d until the pusher circle clears the face by CONTACT_GAP
    cos_in = np.sum(d * inward, -1)
    return face_point - d * ((pusher_radius + CONTACT_GAP) / np.maximum(cos_in, 1e-6))[..., None]


def random_pushes(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The data's distribution: poses (n, 3) uniform over the workspace (any yaw) and valid pushes (n, 2) (a face
    drawn uniformly, the direction within MAX_OBLIQUE of its inward normal, c uniform in [0, 1])."""
    poses = np.column_stack([rng.uniform(-WORKSPACE[0], WORKSPACE[0], n), rng.uniform(-WORKSPACE[1], WORKSPACE[1], n),
                             rng.uniform(-np.pi, np.pi, n)])
    phi = rng.integers(0, 4, n) * (np.pi / 2) + rng.uniform(-MAX_OBLIQUE, MAX_OBLIQUE, n)
    return poses, np.column_stack([wrap_angle(phi), rng.uniform(0.0, 1.0, n)])


def place_features(xy) -> np.ndarray:
    """Position as bilinear ("tent") weights (B, N_PLACE) on a grid of nodes ``PLACE_SPACING`` apart: each
    position activates its 4 surrounding nodes, with weights summing to 1 (so any function of the position the
    network could compute from x, y it can compute from these). Why not x, y themselves: a network fed raw
    coordinates is global in them; our physics does not depend on where the box is, every member learns that
    from the data around a lesioned region and is just as sure inside it (measured on 600 pushes with the
    default lesion: mean heat-map variance inside / outside 0.98, also with a random-prior ensemble or batch 5).
    With place features, the first-layer weights of nodes that no training push activated keep their random
    initialisation (std ``PLACE_INIT``, not touched by Adam or by the adversarial step), which differs by
    member: the ensemble disagrees where it has seen no data. The price: position is learned node by node, so
    the fit is coarser (held-out position RMSE ~3.5 mm instead of ~1 mm with raw x, y)."""
    xy = np.asarray(xy, dtype=float)
    nx, ny = len(PLACE_XS), len(PLACE_YS)
    fx = np.clip((xy[:, 0] - PLACE_XS[0]) / PLACE_SPACING, 0.0, nx - 1 - 1e-9)
    fy = np.clip((xy[:, 1] - PLACE_YS[0]) / PLACE_SPACING, 0.0, ny - 1 - 1e-9)
    ix, iy = np.floor(fx).astype(int), np.floor(fy).astype(int)
    tx, ty = fx - ix, fy - iy
    out = np.zeros((len(xy), N_PLACE))
    rows = np.arange(len(xy))
    for dx, dy, w in ((0, 0, (1 - tx) * (1 - ty)), (1, 0, tx * (1 - ty)), (0, 1, (1 - tx) * ty), (1, 1, tx * ty)):
        out[rows, (iy + dy) * nx + ix + dx] += w
    return out


def raw_features(poses, actions) -> np.ndarray:
    """The paper's inputs (B, 7): box x, y, cos yaw, sin yaw, push cos phi, sin phi, contact c (the GP's: its
    kernel is local in x, y by itself)."""
    p = np.asarray(poses, dtype=float)
    a = np.asarray(actions, dtype=float)
    return np.column_stack([p[:, 0], p[:, 1], np.cos(p[:, 2]), np.sin(p[:, 2]), np.cos(a[:, 0]), np.sin(a[:, 0]),
                            a[:, 1]])


def features(poses, actions) -> np.ndarray:
    """Network inputs (B, N_FEATURES): the box position's place features, cos yaw, sin yaw, push cos phi, sin phi,
    contact c. The first ``N_PLACE`` columns are passed unscaled (``EMDNConfig.unscaled_inputs``)."""
    p = np.asarray(poses, dtype=float)
    a = np.asarray(actions, dtype=float)
    return np.column_stack([place_features(p[:, :2]), np.cos(p[:, 2]), np.sin(p[:, 2]), np.cos(a[:, 0]),
                            np.sin(a[:, 0]), a[:, 1]])


def pose_change(poses, poses_next) -> np.ndarray:
    """Object-frame change (B, 3) from ``poses`` to ``poses_next``."""
    p, q = np.asarray(poses, dtype=float), np.asarray(poses_next, dtype=float)
    c, s = np.cos(p[:, 2]), np.sin(p[:, 2])
    dx, dy = q[:, 0] - p[:, 0], q[:, 1] - p[:, 1]
    return np.column_stack([c * dx + s * dy, -s * dx + c * dy, q[:, 2] - p[:, 2]])


def apply_change(poses, change) -> np.ndarray:
    """Inverse of ``pose_change``: the poses reached by object-frame changes (B, 3)."""
    p, d = np.asarray(poses, dtype=float), np.asarray(change, dtype=float)
    c, s = np.cos(p[:, 2]), np.sin(p[:, 2])
    return np.column_stack([p[:, 0] + c * d[:, 0] - s * d[:, 1], p[:, 1] + s * d[:, 0] + c * d[:, 1],
                            p[:, 2] + d[:, 2]])


def uncertainty(variance, yaw_scale: float = 0.0) -> np.ndarray:
    """The scalar uncertainty of the cost (eq. 11) from a change's variance (..., 3): position variance (m^2)
    plus ``yaw_scale`` (m^2/rad^2) times the yaw variance. Rotation invariant (trace of the xy block)."""
    v = np.asarray(variance, dtype=float)
    return v[..., 0] + v[..., 1] + yaw_scale * v[..., 2]


class PrimitiveModel(ABC):
    """Base: subclasses implement ``predict_change(poses, actions) -> (mean change, variance)`` (object frame)."""

    name = "base"

    @abstractmethod
    def predict_change(self, poses, actions):
        """(mean change (B, 3), variance (B, 3)) of the pose in the object frame."""

    def predict(self, poses, actions):
        """Next poses (B, 3) in the table frame and the variance (B, 3) of the object-frame change."""
        poses = np.atleast_2d(np.asarray(poses, dtype=float))
        actions = valid_action(np.atleast_2d(actions))
        change, var = self.predict_change(poses, actions)
        return apply_change(poses, change), var


class FinePrimitive(PrimitiveModel):
    """MuJoCo: one 1 s push of the ``box_slider`` scene's pusher per action, batched across threads."""

    name = "fine"

    def __init__(self, scene: Scene | None = None, threads: int | None = None):
        from .fine import FineModel  # noqa: PLC0415 (mujoco only where the fine model is used)
        self.scene = scene or load_scene(SCENE)
        if len(self.scene.objects) != 1 or self.scene.objects[0].shape != "box" or self.scene.obstacles:
            raise ValueError(f"push primitive: scene {self.scene.name!r} must hold exactly one box and no obstacles")
        self.fine = FineModel(self.scene, threads=threads)
        self.half = np.asarray(self.scene.objects[0].size[:2], dtype=float) / 2.0
        self.pusher_radius = float(self.scene.pusher.radius)

    def close(self):
        self.fine.close()

    def states(self, poses, actions):
        """Fine-model start states (B, D) and pusher velocities (B, 2) of valid actions at poses."""
        c, s = np.cos(poses[:, 2]), np.sin(poses[:, 2])
        rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)  # (B, 2, 2) object -> table
        start = poses[:, :2] + np.einsum("bij,bj->bi", rot, contact_point(actions, self.half, self.pusher_radius))
        d = np.stack([np.cos(actions[:, 0]), np.sin(actions[:, 0])], -1)
        u = PUSH_SPEED * np.einsum("bij,bj->bi", rot, d)
        x = self.scene.layout.compose(start, poses[:, None, :], pusher_vel=u)
        return x, u

    def push(self, poses, actions) -> np.ndarray:
        """Box poses (B, 3) after each push (yaw continuous, not wrapped)."""
        poses = np.atleast_2d(np.asarray(poses, dtype=float))
        actions = valid_action(np.atleast_2d(actions))
        x, u = self.states(poses, actions)
        x1 = self.fine.propagate(x, u, PUSH_DURATION)
        return self.scene.layout.object_poses(x1)[:, 0, :].copy()

    def predict_change(self, poses, actions):
        nxt = self.push(poses, actions)
        return pose_change(poses, nxt), np.zeros((len(poses), N_OUT))


class EMDNPrimitive(PrimitiveModel):
    """The E-MDN on the primitive's features; variance from eqs. 5-6 (calibrated scale included). ``var_ref``:
    the median predicted uncertainty on its training pushes (the unit of the planner's uncertainty weight)."""

    name = "emdn"
    FORMAT = "parapush-push-primitive-emdn/1"

    def __init__(self, emdn, lesion: Lesion | None = None, var_ref: float = 1.0, info: dict | None = None):
        self.emdn = emdn
        self.lesion = lesion
        self.var_ref = float(var_ref)
        self.info = dict(info or {})

    def predict_change(self, poses, actions):
        return self.emdn.predict(features(poses, actions))

    def save(self, path) -> None:
        import torch  # noqa: PLC0415
        torch.save({"format": self.FORMAT, "emdn": self.emdn.state(), "var_ref": self.var_ref,
                    "lesion": self.lesion.as_list() if self.lesion else None, "info": self.info}, path)

    @classmethod
    def load(cls, path) -> EMDNPrimitive:
        import torch  # noqa: PLC0415

        from .ensemble_mdn import EnsembleMDN  # noqa: PLC0415
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != cls.FORMAT:
            raise ValueError(f"{path}: not a push-primitive E-MDN (expected format {cls.FORMAT!r})")
        lesion = Lesion(*state["lesion"]) if state.get("lesion") else None
        return cls(EnsembleMDN.from_state(state["emdn"], str(path)), lesion, state["var_ref"], state.get("info"))


class GPPrimitive(PrimitiveModel):
    """The Gaussian-process baseline (``gp.GPRegressor``) on the primitive's features."""

    name = "gp"

    def __init__(self, gp, var_ref: float = 1.0):
        self.gp = gp
        self.var_ref = float(var_ref)

    def predict_change(self, poses, actions):
        return self.gp.predict(raw_features(poses, actions))
