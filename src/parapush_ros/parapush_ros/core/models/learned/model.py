"""The learned coarse model C(x, u, dt) of paper 001: the network applied to every object that may move.

Object velocities. A cylinder on this table (friction 1.0) stops within milliseconds once nothing pushes it, so
its velocity at the start of a slice hardly changes where it ends (MuJoCo: a 10 mm/s change moves the end pose by
~0.2 mm, the size of its own contact noise). In the data, though, a moving object is almost always one being
pushed, and a network given the velocities learns them as a stand-in for "in contact": the first shipped network
moved its prediction by 1.3 mm for a 2 mm/s change. In Parareal, whose corrections feed the coarse model states
with the coarse model's own velocities, that is pure error. Weights trained with ``object_velocities = false``
(``parapush train``'s default) see zeros in the object velocity columns, and their gate ignores motion (only
the pusher's path and predicted sweeps count); the pusher velocity stays an input (it sets the servo's lag).
Weights without the key in their metadata were trained with velocities and are used that way.

Symmetry: the physics is mirror symmetric about the push direction, so the prediction is the mean of the network
on a row and on its mirror image (mirrored back): exactly symmetric, and smoother (training also uses mirrored
samples).

The pusher's radius is an input of the geometry, not of the network: a scene with another pusher radius than the
trained one is predicted through the equivalent contact (``encoding.equivalent_pusher``: the pusher moved along the
contact normal by the difference of the radii keeps the normal and the gap); the gate and the projection use the
scene's own radius.

The pusher is not learned: it follows its servo exactly (``mjcf.py``: a critically damped position servo on the
integral of u lags a ramp by 2 / omega_servo seconds), so its end position is ``p + u (dt - lag)`` and its end
velocity u. Penetration left by the network is projected away as for the analytical model.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ...scene.projection import DEFAULT_PROJECTION_TOLERANCE, project_feasible
from ...scene.spec import Scene
from ..base import batch_arguments
from .encoding import (_SLOT_ORDER_COLS, CHAIN_MARGIN, MIRROR_IN, MIRROR_OUT, SLOT_ORDER_MIN_WEIGHT,
                       SLOT_ORDER_SOFTNESS, _split, apply_outputs, encode, equivalent_pusher, gate, slot_order_weights,
                       swept_reach)
from .family import (F_OUT, FORMAT, LearnedModelError, check_family, default_weights_path, read_weights_file,
                     uses_object_velocities)
from .network import MLP, mlp_from_state_dict


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
        from .. import mjcf  # noqa: PLC0415
        from ..fine import FINE_TIMESTEP  # noqa: PLC0415
        for key, now in (("fine_timestep_s", mjcf.TIMESTEP), ("fine_model_timestep_s", FINE_TIMESTEP),
                         ("pusher_bandwidth_hz", mjcf.PUSHER_BANDWIDTH_HZ)):
            if key in family and abs(float(family[key]) - now) > 1e-12:
                warnings.warn(f"learned coarse model ({source}) was trained on a fine model with {key} = "
                              f"{family[key]}, the fine model now uses {now}: retrain it", stacklevel=2)
        # weights made before these were recorded learned older physics (the 1 ms fine model, the native support):
        # they load, but say so (a shipped ensemble of that age predicted 3.7-4.5 mm where retrained weights of the
        # same kind predict under 1.6)
        missing = [k for k in ("fine_model_timestep_s", "support") if k not in family]
        if missing:
            warnings.warn(f"learned coarse model ({source}) was trained before its metadata recorded "
                          f"{' and '.join(missing)}: on older physics than today's fine model; retrain it",
                          stacklevel=2)
        self.scene = scene
        self.layout = scene.layout
        self.mlp = mlp
        self.meta = meta
        self.source = source
        self.slice_s = float(family["slice_s"])
        self.pusher_lag = float(family["pusher_lag_s"])
        self.projection_tolerance = projection_tolerance
        self.object_radius = float(family["object_radius"])
        # another pusher radius than the trained one: the network sees the equivalent contact (equivalent_pusher)
        self.pusher_radius_offset = scene.pusher.radius - float(family["pusher_radius"])
        self.symmetric = symmetric
        self.two_pass = two_pass
        if not slot_order_softness >= 0.0:
            raise ValueError(f"slot_order_softness must be >= 0 m, got {slot_order_softness}")
        self.slot_order_softness = float(slot_order_softness)  # 0: hard nearest-first order (discontinuous)
        self.object_velocities = uses_object_velocities(meta)

    @classmethod
    def load(cls, scene: Scene, path=None, **kwargs) -> LearnedCoarseModel:
        """Load weights (``None``: the shipped ones) and check they fit ``scene``."""
        path = Path(path) if path else default_weights_path()
        blob = read_weights_file(path, FORMAT, ("state_dict", "norm", "meta"), "learned coarse model")
        return cls(scene, mlp_from_state_dict(blob["state_dict"], blob["norm"]), blob["meta"], source=path.name,
                   **kwargs)

    def _steps(self, dt: float) -> int:
        k = int(round(dt / self.slice_s))
        if k < 1 or abs(k * self.slice_s - dt) > 1e-9:
            raise ValueError(f"learned coarse model: slice duration {dt} s is not a multiple of the "
                             f"{self.slice_s} s slices it was trained for")
        return k

    def propagate(self, x, u, dt: float) -> np.ndarray:
        x, u = batch_arguments(x, u, self.layout.dim, "coarse model")
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
            if self.pusher_radius_offset != 0.0:
                equivalent_pusher(rows.features, self.pusher_radius_offset)
            self._apply(rows, out, self._predict(rows.features))
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

    def _apply(self, rows, out, y):
        """Write the network outputs of ``rows`` into ``out`` (a subclass with a variance adds its own)."""
        apply_outputs(rows, out, y)

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
