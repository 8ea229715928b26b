"""The scene simulated continuously (for the ``mujoco_sim`` node), without ROS.

``PushSim`` runs the fine model's MuJoCo model of a scene (``FineModel``: ``build_mjcf`` + ``PlanarMapping``, the
same model every prediction uses; no second definition) forward in time with the pusher driven by velocity
commands, exactly as ``FineModel`` drives it (``intvelocity`` actuators, ctrl = pusher velocity in the table
frame, m/s). Unlike a fine-model slice, the MuJoCo state is carried across steps.

``MocapEmulator`` turns true body poses into what a mocap driver would deliver: samples at a fixed rate with
Gaussian noise, a latency (a sample is delivered ``latency`` seconds after its measurement time, which it carries
as its stamp), random dropouts of a given duration and bodies hidden on request; all randomness is seeded.
"""
from __future__ import annotations

import heapq
import math

import mujoco
import numpy as np

from .fine import _DIVERGENCE_WARNINGS, TIMESTEP, FineModel
from .scene import Scene

PUSHER = "pusher"  # body name of the pusher in the scene bodies of PushSim.body_poses


class PushSim:
    def __init__(self, scene: Scene):
        self.scene = scene
        self._fine = FineModel(scene, threads=1)  # the model, the planar mapping and the settled object heights
        self.model = self._fine.model
        self.mapping = self._fine.mapping
        self.data = mujoco.MjData(self.model)
        self.steps = 0  # physics steps since construction (monotonic across resets: the simulated clock)
        self._pusher_body = self.model.body("pusher").id
        self._object_bodies = [self.model.body(f"object_{o.name}").id for o in scene.objects]
        self.fallen: set = set()
        self.reset()

    @property
    def time(self) -> float:
        """Simulated time (s); keeps running across resets."""
        return self.steps * TIMESTEP

    @property
    def body_names(self) -> list:
        return [PUSHER] + [o.name for o in self.scene.objects]

    def close(self):
        self._fine.close()

    def reset(self, state: np.ndarray | None = None):
        """Back to the scene's initial state (or ``state``), pusher at rest, command zero."""
        x = self.scene.initial_state() if state is None else np.asarray(state, dtype=float)
        self.scene.layout.check(x)
        d = self.data
        mujoco.mj_resetData(self.model, d)
        self.mapping.to_mujoco(x, d.qpos, d.qvel, d.act)
        d.ctrl[:] = 0.0
        mujoco.mj_forward(self.model, d)
        self.fallen = set()

    def set_velocity(self, vx: float, vy: float):
        if not (math.isfinite(vx) and math.isfinite(vy)):
            raise ValueError(f"pusher velocity ({vx}, {vy}) is not finite")
        self.data.ctrl[:] = (vx, vy)

    def step(self, nstep: int = 1):
        """Advance ``nstep`` physics steps; raises RuntimeError (and resets) if MuJoCo reports instability."""
        if nstep <= 0:
            return
        d = self.data
        before = [d.warning[w].number for w in _DIVERGENCE_WARNINGS]
        mujoco.mj_step(self.model, d, nstep=nstep)
        self.steps += nstep
        after = [d.warning[w].number for w in _DIVERGENCE_WARNINGS]
        if after != before or not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            names = [mujoco.mjtWarning(w).name for w, a, b in zip(_DIVERGENCE_WARNINGS, after, before) if a != b]
            self.reset()
            raise RuntimeError(f"simulation became unstable ({', '.join(names) or 'non-finite state'}); "
                               "the scene was reset")

    def planar_state(self) -> np.ndarray:
        x = np.empty(self.scene.layout.dim)
        yaw_ref = np.array([o.pose[2] for o in self.scene.objects])
        self.mapping.from_mujoco(self.data.qpos, self.data.qvel, x, yaw_ref)
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


class MocapEmulator:
    """Mocap samples of true poses: rate, noise, latency, dropouts, hidden bodies (see the module docstring)."""

    def __init__(self, bodies, rate: float = 120.0, position_noise: float = 0.0, yaw_noise: float = 0.0,
                 latency: float = 0.0, dropout_probability: float = 0.0, dropout_duration: float = 0.1,
                 seed: int = 0):
        checks = {"pose_rate": (rate, rate > 0.0), "position_noise": (position_noise, position_noise >= 0.0),
                  "yaw_noise": (yaw_noise, yaw_noise >= 0.0), "latency": (latency, latency >= 0.0),
                  "dropout_probability": (dropout_probability, 0.0 <= dropout_probability <= 1.0),
                  "dropout_duration": (dropout_duration, dropout_duration >= 0.0)}
        for name, (value, ok) in checks.items():
            if not (math.isfinite(value) and ok):
                raise ValueError(f"{name}: invalid value {value}")
        self.bodies = list(bodies)
        self.period = 1.0 / rate
        self.position_noise = position_noise
        self.yaw_noise = yaw_noise
        self.latency = latency
        self.dropout_probability = dropout_probability
        self.dropout_duration = dropout_duration
        self.rng = np.random.default_rng(seed)
        self.hidden: set = set()
        self._dropped_until = {b: -math.inf for b in self.bodies}
        self._queue = []  # heap of (delivery time, seq, body, stamp, position, quaternion)
        self._seq = 0
        self.next_sample = 0.0

    def sample(self, t: float, poses: dict):
        """Measure ``poses`` ({body: (position, quaternion)}, table frame) at time ``t``."""
        for body in self.bodies:
            if body in self.hidden or body not in poses:
                continue
            if t < self._dropped_until[body]:
                continue
            if self.dropout_probability > 0.0 and self.rng.random() < self.dropout_probability:
                self._dropped_until[body] = t + self.dropout_duration
                continue
            p, q = poses[body]
            p = np.array(p, dtype=float)
            q = np.array(q, dtype=float)
            if self.position_noise > 0.0:
                p[:2] += self.rng.normal(0.0, self.position_noise, 2)
            if self.yaw_noise > 0.0:
                half = 0.5 * self.rng.normal(0.0, self.yaw_noise)
                qz = np.array([0.0, 0.0, math.sin(half), math.cos(half)])
                x1, y1, z1, w1 = qz
                x2, y2, z2, w2 = q
                q = np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                              w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])
            heapq.heappush(self._queue, (t + self.latency, self._seq, body, t, p, q))
            self._seq += 1

    def due(self, t: float) -> list:
        """Samples whose delivery time has come: [(body, stamp, position, quaternion)] in delivery order."""
        out = []
        while self._queue and self._queue[0][0] <= t + 1e-12:
            _, _, body, stamp, p, q = heapq.heappop(self._queue)
            out.append((body, stamp, p, q))
        return out

    def clear(self):
        self._queue.clear()
