"""The planar state layout: the one place that knows where each number lives in a state vector.

A state of a scene with ``n`` objects is a float64 vector of length ``4 + 6 n``::

    [pusher x, pusher y,
     object_0 x, y, yaw, ..., object_{n-1} x, y, yaw,
     pusher vx, vy,
     object_0 vx, vy, omega, ..., object_{n-1} vx, vy, omega]

i.e. ``[q_P, q_S, qdot_P, qdot_S]`` as in paper 000. Positions are metres in the table frame (REP-103: x forward,
y left, z up, origin at the centre of the table top), yaw in radians counter-clockwise, velocities in m/s and rad/s.
Yaw is *not* wrapped: propagators keep it continuous along a trajectory so that Parareal corrections
``C(x') + F(x) - C(x)`` never see a spurious 2*pi jump.

All functions accept batches: any array whose last axis is the state dimension.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StateLayout:
    """Index bookkeeping for the planar state of a pusher and ``n_objects`` objects."""

    n_objects: int

    def __post_init__(self):
        if self.n_objects < 0:
            raise ValueError(f"n_objects must be >= 0, got {self.n_objects}")

    @property
    def dim(self) -> int:
        return 4 + 6 * self.n_objects

    @property
    def n_q(self) -> int:
        """Number of configuration entries (the first half of the state)."""
        return 2 + 3 * self.n_objects

    # --- views (numpy basic slicing: they alias the input, so they can be written to) ---
    def pusher_pos(self, x: np.ndarray) -> np.ndarray:
        return x[..., 0:2]

    def pusher_vel(self, x: np.ndarray) -> np.ndarray:
        return x[..., self.n_q:self.n_q + 2]

    def object_poses(self, x: np.ndarray) -> np.ndarray:
        """(..., n_objects, 3) view of [x, y, yaw] per object."""
        return x[..., 2:self.n_q].reshape(x.shape[:-1] + (self.n_objects, 3))

    def object_vels(self, x: np.ndarray) -> np.ndarray:
        """(..., n_objects, 3) view of [vx, vy, omega] per object."""
        return x[..., self.n_q + 2:].reshape(x.shape[:-1] + (self.n_objects, 3))

    def object_position_sigma(self, variance: np.ndarray) -> np.ndarray:
        """(..., n_objects) standard deviation of each object's position, sqrt(var x + var y) (m), from a
        per-coordinate variance in this layout (a model's predicted uncertainty)."""
        v = self.object_poses(np.asarray(variance, dtype=float))
        return np.sqrt(np.maximum(v[..., 0] + v[..., 1], 0.0))

    # --- index arrays, for code that needs masks rather than views ---
    @property
    def position_indices(self) -> np.ndarray:
        """Indices of all planar positions (pusher and object x, y), in metres."""
        obj = [2 + 3 * i + k for i in range(self.n_objects) for k in (0, 1)]
        return np.array([0, 1] + obj, dtype=int)

    @property
    def yaw_indices(self) -> np.ndarray:
        return np.array([2 + 3 * i + 2 for i in range(self.n_objects)], dtype=int)

    def compose(self, pusher_pos, object_poses, pusher_vel=None, object_vels=None) -> np.ndarray:
        """Build state vector(s) from parts; velocities default to zero. Leading batch dims broadcast."""
        pusher_pos = np.asarray(pusher_pos, dtype=float)
        object_poses = np.asarray(object_poses, dtype=float).reshape(pusher_pos.shape[:-1] + (self.n_objects, 3))
        batch = pusher_pos.shape[:-1]
        x = np.zeros(batch + (self.dim,))
        self.pusher_pos(x)[...] = pusher_pos
        self.object_poses(x)[...] = object_poses
        if pusher_vel is not None:
            self.pusher_vel(x)[...] = pusher_vel
        if object_vels is not None:
            self.object_vels(x)[...] = np.asarray(object_vels, dtype=float).reshape(batch + (self.n_objects, 3))
        return x

    def check(self, x: np.ndarray, name: str = "state") -> np.ndarray:
        """Return ``x`` as float64 after checking its last dimension and finiteness; raise ValueError naming it."""
        x = np.asarray(x, dtype=float)
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"{name}: expected last dimension {self.dim} for {self.n_objects} object(s), "
                             f"got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name}: contains NaN or infinite values")
        return x

    def pose_change(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Max-norm change of positions (m) and yaw (rad) between two states, over the last axis."""
        pos = np.abs(a[..., self.position_indices] - b[..., self.position_indices]).max(axis=-1)
        if self.n_objects:
            yaw = np.abs(wrap_angle(a[..., self.yaw_indices] - b[..., self.yaw_indices])).max(axis=-1)
        else:
            yaw = np.zeros(pos.shape)
        return pos, yaw


# ------------------------------------------------------------------------------------------------- angles
def wrap_angle(a):
    """Wrap angles to [-pi, pi)."""
    return (np.asarray(a) + np.pi) % (2.0 * np.pi) - np.pi


def unwrap_near(angle, reference):
    """The angle equal to ``angle`` (mod 2 pi) within pi of ``reference``: keeps a yaw continuous along a
    trajectory (``reference`` the previous value)."""
    return reference + (angle - reference + np.pi) % (2 * np.pi) - np.pi


def yaw_from_quaternion(q):
    """Heading of the body's local x axis about +z (rad, counter-clockwise, in (-pi, pi]) of the quaternion
    ``q`` = (x, y, z, w): for a body that is flat this is its yaw; it stays meaningful under moderate tilt."""
    x, y, z, w = q
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
