"""The quasi-static pusher-slider models as coarse propagators for scenes of one object: ``quasistatic`` (paper
003's box model, ``QuasiStaticPusherSlider``) and ``quasistatic_convex`` (any convex footprint,
``quasistatic_convex.QuasiStaticConvexSlider``: discs and boxes, vertex contacts included). Both share this
propagator and the twist function ``quasistatic.contact_twist``.

It keeps the ``Propagator`` contract: a pusher velocity held for ``dt`` moves the pusher by ``u dt``; the box
moves as ``QuasiStaticPusherSlider`` says (limit surface, motion cone, sticking / sliding / separation, four
faces), integrated in sub-steps of at most ``max_substep`` s so the contact and the face follow the turning box.
Unlike paper 000's analytical model (eq. 5-8), the box does not move with the full pusher velocity while the
pusher slides along its face. The box's velocity in the returned state is its mean twist over the last sub-step
(zero once the pusher has left it: quasi-static, table friction stops it at once). Penetration left by the
discrete steps is projected away, as the analytical model does.

Only a scene of exactly one object fits (of a box for ``quasistatic``); any other scene is refused with an error
naming the scene, its objects and why (``UnsupportedScene``: a cylinder has no faces; several objects would need
object-object contacts, which neither model has: use ``learned`` or ``analytical`` there, or ``auto``).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..scene.projection import DEFAULT_PROJECTION_TOLERANCE, project_feasible
from ..scene.spec import Scene
from ..scene.support import DEFAULT_SUPPORT
from .base import UnsupportedScene, batch_arguments
from .quasistatic import QuasiStaticPusherSlider, fine_c_scale
from .mjcf import pusher_contact_height
from .quasistatic_convex import DEFAULT_CONTACT_HEIGHT, DEFAULT_LIMIT_SURFACE, QuasiStaticConvexSlider

MAX_SUBSTEP = 0.005  # s: at 0.1 m/s the pusher moves 0.5 mm per sub-step, well inside the 5 mm contact tolerance


def refuse_several_objects(scene: Scene, model: str) -> None:
    """``UnsupportedScene`` naming the scene and its objects unless it holds exactly one object."""
    if len(scene.objects) != 1:
        raise UnsupportedScene(
            f"{model} model: scene {scene.name!r} has {len(scene.objects)} objects "
            f"({', '.join(o.name for o in scene.objects)}); the model is for exactly one object (object-object "
            "contacts are not modelled): use coarse_model learned, analytical or auto")


class QuasiStaticCoarseModel:
    """C(x, u, dt) for a scene of one box (paper 003). ``c_scale`` None = ``fine_c_scale(scene)`` (the fit to the
    fine model)."""

    name = "quasistatic"

    def __init__(self, scene: Scene, c_scale: float | None = None, max_substep: float = MAX_SUBSTEP,
                 projection_tolerance: float = DEFAULT_PROJECTION_TOLERANCE):
        self.check_scene(scene)
        if not max_substep > 0.0:
            raise ValueError(f"quasi-static model: max_substep must be > 0, got {max_substep}")
        self.scene = scene
        self.layout = scene.layout
        self.max_substep = float(max_substep)
        self.projection_tolerance = projection_tolerance
        self.c_scale = c_scale  # as given (None: the fine fit), so that with_substep builds the same model
        scale = fine_c_scale(scene) if c_scale is None else float(c_scale)
        self.model = self.slider(scene, dt=self.max_substep, c_scale=scale, **self.slider_options())
        self._by_dt = {}

    def slider_options(self) -> dict:
        """The factory options this model passes on to its slider (none for the box)."""
        return {}

    def with_substep(self, max_substep: float):
        """The same model (scene, limit surface) integrated in sub-steps of at most ``max_substep`` s."""
        return type(self)(self.scene, c_scale=self.c_scale, max_substep=max_substep,
                          projection_tolerance=self.projection_tolerance, **self.factory_options())

    def factory_options(self) -> dict:
        return {}

    @staticmethod
    def check_scene(scene: Scene) -> None:
        refuse_several_objects(scene, "quasi-static")
        if scene.objects[0].shape != "box":
            raise UnsupportedScene(f"quasi-static model: scene {scene.name!r} object {scene.objects[0].name!r} "
                                   f"is a {scene.objects[0].shape}; the model is for box sliders (use "
                                   "quasistatic_convex)")

    @staticmethod
    def slider(scene: Scene, **kw):
        return QuasiStaticPusherSlider.from_scene(scene, **kw)

    def _stepper(self, h: float) -> QuasiStaticPusherSlider:
        key = round(h, 12)
        if key not in self._by_dt:
            self._by_dt[key] = replace(self.model, dt=h)
        return self._by_dt[key]

    def propagate(self, x, u, dt: float) -> np.ndarray:
        x, u = batch_arguments(x, u, self.layout.dim, "quasi-static model")
        if not dt > 0.0:
            raise ValueError(f"slice duration must be > 0, got {dt}")
        n = max(1, math.ceil(dt / self.max_substep - 1e-9))
        model = self._stepper(dt / n)
        L = self.layout
        pose = L.object_poses(x)[:, 0, :]
        q = np.concatenate([pose, L.pusher_pos(x), u], -1)  # model state: slider pose, pusher position, velocity
        zero = np.zeros_like(u)
        prev = q
        for _ in range(n):
            prev = q
            q = model.step(q, zero)  # the pusher keeps velocity u (zero acceleration)
        out = x.copy()
        L.object_poses(out)[:, 0, :] = q[:, :3]
        L.pusher_pos(out)[...] = q[:, 3:5]
        L.pusher_vel(out)[...] = u
        L.object_vels(out)[:, 0, :] = (q[:, :3] - prev[:, :3]) / model.dt
        out, _ = project_feasible(self.scene, out, self.projection_tolerance)
        return out


class QuasiStaticConvexCoarseModel(QuasiStaticCoarseModel):
    """C(x, u, dt) for a scene of one object of any convex footprint (``QuasiStaticConvexSlider``).
    ``limit_surface``: "ellipsoid" (one c) or "integrated" (the friction summed over support points: a
    ``support_points`` x ``support_points`` grid over the footprint, 0 = the scene's support grid, as the fine model
    has it; 3 where the scene's support is ``native``), both scaled by ``fine_c_scale``; ``contact_height`` (m,
    integrated only): where the pusher's force acts above the table, for the load it shifts over the support
    (negative: the middle of the side the pusher and the object share, where the fine model's pusher touches;
    0: none); ``close_gap``: a gap within the contact tolerance is closed, not kept (``QuasiStaticConvexSlider``)."""

    name = "quasistatic_convex"

    def __init__(self, scene: Scene, limit_surface: str = DEFAULT_LIMIT_SURFACE, support_points: int = 0,
                 contact_height: float = DEFAULT_CONTACT_HEIGHT, close_gap: bool = True, **kw):
        self.limit_surface = str(limit_surface)
        self.close_gap = bool(close_gap)
        self._requested_height = float(contact_height)
        self.contact_height = (pusher_contact_height(scene, scene.objects[0]) if contact_height < 0.0
                               else float(contact_height))
        points = int(support_points)
        if points == 0:
            points = int(scene.support.points) if scene.support.pattern == "grid" else DEFAULT_SUPPORT.points
        self.support_points = points
        self._requested_points = int(support_points)
        super().__init__(scene, **kw)

    def slider_options(self) -> dict:
        return {"limit_surface": self.limit_surface, "support_points": self.support_points,
                "contact_height": self.contact_height if self.limit_surface == "integrated" else 0.0,
                "close_gap": self.close_gap}

    def factory_options(self) -> dict:
        return {"limit_surface": self.limit_surface, "support_points": self._requested_points,
                "contact_height": self._requested_height, "close_gap": self.close_gap}

    @staticmethod
    def check_scene(scene: Scene) -> None:
        refuse_several_objects(scene, "quasi-static (convex)")

    @staticmethod
    def slider(scene: Scene, **kw):
        return QuasiStaticConvexSlider.from_scene(scene, **kw)
