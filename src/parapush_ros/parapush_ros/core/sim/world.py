"""The one simulated world: a scene's MuJoCo model stepped continuously, without ROS.

``SimWorld`` runs exactly the model every prediction uses (``core/models/mjcf.compile_scene``: no second
definition) forward in time with the pusher driven by velocity commands, as the fine model drives it
(``intvelocity`` actuators, ctrl = pusher velocity in the table frame, m/s). Unlike a fine-model slice, the MuJoCo
state (contacts, solver warm start, the servo's setpoint) is carried across steps: it is the truth that the
``mujoco_sim`` node publishes and that the closed-loop benchmark (``core/sim/closed_loop.py``) pushes in.

A ``WorldConfig`` makes it differ from the planner's scene (other friction and masses, noisy observations), because
on a real robot the model is never exact. When MuJoCo reports an unstable simulation, ``step`` and ``execute``
raise ``ModelDiverged`` and leave the state as it is; the caller decides (the node resets, the benchmark fails the
push).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import mujoco
import numpy as np

from ..config import finite, require_each, whole
from ..models.base import ModelDiverged
from ..models.mjcf import compile_scene, divergence, divergence_counts
from ..scene.spec import Scene

PUSHER = "pusher"  # body name of the pusher in ``SimWorld.body_poses``


@dataclass(frozen=True)
class WorldConfig:
    """How the simulated world differs from the planner's scene. Checked when made: ``ConfigError`` names the
    field and its valid range (a negative noise would silently be no noise)."""

    # plain fields, not ``knob`` settings: no node declares these as ROS parameters (core/config.py)
    friction_scale: float = 1.0  # object-table friction x this
    pusher_friction_scale: float = 1.0  # pusher-object friction x this
    mass_scale: float = 1.0  # object masses x this
    position_noise: float = 0.0  # std of observed positions (m), pusher and objects
    yaw_noise: float = 0.0  # std of observed object yaw (rad)
    samples_per_action: int = 20  # true states recorded per action (for the outcome and the plots)
    seed: int = 0  # seed of the observation noise

    def __post_init__(self):
        require_each(self, ("friction_scale", "pusher_friction_scale", "mass_scale"),
                     lambda v: finite(v) and v > 0.0, "> 0")
        require_each(self, ("position_noise", "yaw_noise"), lambda v: finite(v) and v >= 0.0, ">= 0")
        require_each(self, ("samples_per_action",), lambda v: whole(v) and v >= 1, "an integer >= 1")
        require_each(self, ("seed",), lambda v: whole(v) and v >= 0, "an integer >= 0")

    @property
    def mismatched(self) -> bool:
        return (self.friction_scale, self.pusher_friction_scale, self.mass_scale, self.position_noise,
                self.yaw_noise) != (1.0, 1.0, 1.0, 0.0, 0.0)


def perturbed_scene(scene: Scene, friction_scale: float = 1.0, pusher_friction_scale: float = 1.0,
                    mass_scale: float = 1.0) -> Scene:
    """The scene with object-table and pusher-object friction and object masses scaled."""
    for name, v in (("friction_scale", friction_scale), ("pusher_friction_scale", pusher_friction_scale),
                    ("mass_scale", mass_scale)):
        if not (np.isfinite(v) and v > 0.0):
            raise ValueError(f"world {name} must be > 0, got {v}")
    friction = dict(scene.friction)
    friction["object_table"] *= friction_scale
    friction["pusher_object"] *= pusher_friction_scale
    objects = tuple(replace(o, mass=o.mass * mass_scale) for o in scene.objects)
    return replace(scene, friction=friction, objects=objects)


class SimWorld:
    """A continuously stepped MuJoCo world of a scene (see the module docstring)."""

    def __init__(self, scene: Scene, config: WorldConfig = WorldConfig(), x0=None):
        self.config = config
        self.scene = perturbed_scene(scene, config.friction_scale, config.pusher_friction_scale, config.mass_scale)
        self.layout = self.scene.layout
        compiled = compile_scene(self.scene)
        self.model, self.mapping = compiled.model, compiled.mapping
        self.data = mujoco.MjData(self.model)
        self.rng = np.random.default_rng(config.seed)
        self.steps = 0  # physics steps since construction (monotonic across resets: the simulated clock)
        self._pusher_body = self.model.body("pusher").id
        self._object_bodies = [self.model.body(f"object_{o.name}").id for o in self.scene.objects]
        self.fallen: set = set()
        self.x = None  # the true state last read (yaw continuous from read to read)
        self.reset(x0)

    @property
    def time(self) -> float:
        """Simulated time (s); keeps running across resets."""
        return self.steps * self.model.opt.timestep

    @property
    def body_names(self) -> list:
        return [PUSHER] + [o.name for o in self.scene.objects]

    def close(self):
        """Nothing to release (kept so a world can be handled like the models)."""

    def reset(self, state=None):
        """Back to the scene's initial state (or ``state``), pusher at rest unless ``state`` moves it, command
        zero, nothing fallen."""
        x = self.scene.initial_state() if state is None else state
        self.x = self.layout.check(x, "world state").copy()
        d = self.data
        mujoco.mj_resetData(self.model, d)
        self.mapping.to_mujoco(self.x, d.qpos, d.qvel, d.act)
        d.ctrl[:] = 0.0
        mujoco.mj_forward(self.model, d)
        self.fallen = set()

    def set_velocity(self, vx: float, vy: float):
        """Command the pusher velocity (m/s, table frame) from now on."""
        if not (math.isfinite(vx) and math.isfinite(vy)):
            raise ValueError(f"pusher velocity ({vx}, {vy}) is not finite")
        self.data.ctrl[:] = (vx, vy)

    def step(self, nstep: int = 1):
        """Advance ``nstep`` physics steps under the current command; ``ModelDiverged`` if MuJoCo reports an
        unstable simulation (the state is left as it is)."""
        if nstep <= 0:
            return
        before = divergence_counts(self.data)
        mujoco.mj_step(self.model, self.data, nstep=nstep)
        self.steps += nstep
        reason = divergence(self.data, before)
        if reason:
            raise ModelDiverged(reason, what="world simulation")

    def execute(self, u, dt: float) -> np.ndarray:
        """Hold pusher velocity ``u`` for ``dt`` s; returns the true states along the way ((S, D), last = now)."""
        u = np.asarray(u, dtype=float)
        if u.shape != (2,) or not np.all(np.isfinite(u)):
            raise ValueError(f"world: control must be 2 finite numbers, got {u}")
        nstep = int(round(dt / self.model.opt.timestep))
        if nstep < 1:
            raise ValueError(f"world: dt {dt} s is shorter than the {self.model.opt.timestep} s time step")
        S = min(self.config.samples_per_action, nstep)
        bounds = np.linspace(0, nstep, S + 1).round().astype(int)
        path = np.empty((S, self.layout.dim))
        self.data.ctrl[:] = u
        for s in range(S):
            self.step(int(bounds[s + 1] - bounds[s]))
            path[s] = self.planar_state()
        return path

    def planar_state(self) -> np.ndarray:
        """The true state now (yaw continuous with the last one read); also kept as ``x``."""
        x = np.empty(self.layout.dim)
        self.mapping.from_mujoco(self.data.qpos, self.data.qvel, x, self.layout.object_poses(self.x)[:, 2])
        self.x = x
        return x.copy()

    def displace_object(self, index: int, delta) -> None:
        """Move object ``index`` by (dx, dy, dyaw) and leave it at rest, as a hand pushing it would (paper 003's
        disturbance tests); the pusher and its servo are untouched."""
        x = self.x.copy()
        self.layout.object_poses(x)[index] += np.asarray(delta, dtype=float)
        self.layout.object_vels(x)[index] = 0.0
        self.mapping.to_mujoco(x, self.data.qpos, self.data.qvel)
        mujoco.mj_forward(self.model, self.data)
        self.x = x

    def observe(self) -> np.ndarray:
        """The last true state read, with measurement noise on positions and yaw (velocities as they are)."""
        x = self.x.copy()
        c = self.config
        if c.position_noise > 0.0:
            idx = self.layout.position_indices
            x[idx] += self.rng.normal(0.0, c.position_noise, idx.size)
        if c.yaw_noise > 0.0 and self.layout.n_objects:
            idx = self.layout.yaw_indices
            x[idx] += self.rng.normal(0.0, c.yaw_noise, idx.size)
        return x

    def body_poses(self) -> dict:
        """True poses in the table frame: {name: (position (3,), quaternion (x, y, z, w))}, the pusher first."""
        d = self.data
        out = {}
        for name, bid in zip(self.body_names, [self._pusher_body] + self._object_bodies):
            w, x, y, z = d.xquat[bid]
            out[name] = (d.xpos[bid].copy(), np.array([x, y, z, w]))
        return out

    def newly_fallen(self) -> list:
        """Objects that left the table top since the last call (centre beyond an edge or below the top)."""
        hx, hy = self.scene.table.half
        out = []
        for o, bid in zip(self.scene.objects, self._object_bodies):
            px, py, pz = self.data.xpos[bid]
            if o.name not in self.fallen and (abs(px) > hx or abs(py) > hy or pz < 0.0):
                self.fallen.add(o.name)
                out.append(o.name)
        return out
