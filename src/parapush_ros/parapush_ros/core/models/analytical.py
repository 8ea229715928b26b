"""The analytical coarse model of paper 000 (eq. 5–8), vectorised over a batch, for discs and rectangles.

For each object, the pusher's straight path over the slice is intersected with the object's outline grown by the
pusher radius (exact Minkowski sum, so a box is a box, not a circle). The slider then moves with the pusher for
the part of the path spent in contact (``p_c = d_contact / (d_contact + d_free)``) and turns with

    omega = K_omega * ((c - o) x u)_z / ||c - o||^2

where ``c`` is the contact point and ``o`` the slider centre: the torque of a push about the centre, divided by
the lever arm squared. It is zero for a central push, continuous in the offset, and zero for zero control
(no NaN). The slice can be split into ``substeps`` so the contact geometry follows the turning slider.

As in the paper there is no friction cone: a pusher that only grazes an object (moving nearly along its surface)
carries it at the full pusher velocity, where a quasi-static model moves it a fraction of a millimetre. One reason
why the coarse-model rule (``models.registry``) takes the quasi-static model for one object and the learned one
where it fits for several; Parareal's fine sweeps correct it where it is used.

Two deliberate departures from the paper, both toward the fine model: the slider keeps the pusher's velocity
only while still in contact at the end of the slice (otherwise table friction stops it within milliseconds, so
its velocity is zero, not "unchanged"); and penetration left by the kinematic update is projected away.
"""
from __future__ import annotations

import numpy as np

from ..scene.geometry import ray_entry
from ..scene.projection import DEFAULT_PROJECTION_TOLERANCE, project_feasible
from ..scene.spec import Scene
from .base import batch_arguments

# From ``parapush bench calibrate`` (Parareal-1 error on random pushes): cylinder 0.40 is its optimum; for boxes
# it prefers 0.70-0.78, within 15 % of 0.55 in score, and 0.55 also meets paper 000 Table 1 at every K (docs/results/).
# polygons, ellipses and meshes: the box value, not fitted
DEFAULT_K_OMEGA = {"cylinder": 0.4, "box": 0.55, "polygon": 0.55, "ellipse": 0.55, "mesh": 0.55}
# m: a pusher path passing this close to an object's outline pushes it (the coarse model's contact test; MuJoCo
# keeps ~0.7 mm of penetration in contact)
PUSH_CONTACT_MARGIN = 1.5e-3


class AnalyticalCoarseModel:
    """C(x, u, dt) for one scene. ``propagate`` takes (B, D) states and (B, 2) controls."""

    name = "analytical"

    def __init__(self, scene: Scene, k_omega: dict | float | None = None, substeps: int = 4,
                 projection_tolerance: float = DEFAULT_PROJECTION_TOLERANCE):
        self.scene = scene
        self.layout = scene.layout
        if k_omega is None:  # the scene's values (``coarse.k_omega`` in its file), else the defaults
            k_omega = {**DEFAULT_K_OMEGA, **scene.coarse.get("k_omega", {})}
        if isinstance(k_omega, (int, float)):
            k_omega = dict.fromkeys(DEFAULT_K_OMEGA, float(k_omega))
        for k, v in k_omega.items():
            if not v > 0.0:
                raise ValueError(f"k_omega[{k!r}] must be > 0, got {v}")
        self.k_omega = np.array([k_omega[o.shape] for o in scene.objects])
        if int(substeps) < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps}")
        self.substeps = int(substeps)
        self.projection_tolerance = projection_tolerance
        self._bounds = np.array([o.footprint.bounding_radius for o in scene.objects])
        # farthest pusher-centre to object-centre distance (less the path) at which the pusher can touch an object
        self._reach = self._bounds + scene.pusher.radius + PUSH_CONTACT_MARGIN + 1e-6

    def propagate(self, x, u, dt: float) -> np.ndarray:
        x, u = batch_arguments(x, u, self.layout.dim, "coarse model")
        if not dt > 0.0:
            raise ValueError(f"slice duration must be > 0, got {dt}")
        L, h = self.layout, dt / self.substeps
        speed = np.linalg.norm(u, axis=-1)
        moving = speed > 1e-12
        direction = np.where(moving[:, None], u / np.where(moving, speed, 1.0)[:, None], 0.0)
        length = speed * h
        in_contact_end = np.zeros((x.shape[0], L.n_objects), dtype=bool)
        omega_end = np.zeros((x.shape[0], L.n_objects))
        poses = L.object_poses(x)
        # Objects move here only where the pusher touches them, so one that no row's path over the slice can reach
        # keeps its pose and zero velocity: its contact geometry is skipped (in clutter most of this model's cost)
        gap = np.linalg.norm(poses[..., :2] - L.pusher_pos(x)[:, None, :], axis=-1) - (speed * dt)[:, None]
        reachable = np.any(gap <= self._reach, axis=0)
        for _ in range(self.substeps):
            pusher = L.pusher_pos(x).copy()
            for i, obj in enumerate(self.scene.objects):
                if not reachable[i]:
                    continue
                fp = obj.footprint
                pose = poses[:, i, :]
                s_in = ray_entry(pusher, direction, length, fp, pose, self.scene.pusher.radius + PUSH_CONTACT_MARGIN)
                touch = moving & np.isfinite(s_in)
                s_in = np.where(touch, s_in, 0.0)
                p_c = np.where(touch, (length - s_in) / np.where(moving, length, 1.0), 0.0)
                # contact point on the outline, seen from the pusher centre at first touch
                p_touch = pusher + direction * s_in[:, None]
                sdf, normal = fp.sdf(p_touch, pose)
                contact = p_touch - normal * sdf[:, None]
                lever = contact - pose[:, :2]
                torque = lever[:, 0] * u[:, 1] - lever[:, 1] * u[:, 0]
                omega = np.where(touch, self.k_omega[i] * torque / np.maximum((lever ** 2).sum(-1), 1e-12), 0.0)
                pose[:, 0:2] += u * (p_c * h)[:, None]
                pose[:, 2] += omega * p_c * h
                in_contact_end[:, i] = touch
                omega_end[:, i] = omega
            L.pusher_pos(x)[...] += u * h
        L.pusher_vel(x)[...] = u
        vels = L.object_vels(x)
        vels[..., 0:2] = np.where(in_contact_end[..., None], u[:, None, :], 0.0)
        vels[..., 2] = np.where(in_contact_end, omega_end, 0.0)
        x, _ = project_feasible(self.scene, x, self.projection_tolerance)
        return x
