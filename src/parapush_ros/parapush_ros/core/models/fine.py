"""The fine model: MuJoCo, generated from a scene, and the fine propagator F(x, u, dt).

Definition of F (the one every part of parapush uses, including the serial reference that Parareal must
reproduce): a slice starts from the *planar* state x alone. The MuJoCo state is rebuilt from x (objects resting at
their settled height, flat, with the planar velocities; solver warmstart zero), the pusher velocity command u is
held for ``dt`` seconds of 1 ms steps, and the planar state is read back. F is therefore a pure function of
(x, u, dt): a real robot only ever observes the planar state, and chaining slices this way reproduces the serial
fine rollout bitwise however the slices are scheduled across threads. (Carrying the hidden warmstart across slice
boundaries instead changes results by up to a few mm on contact-rich pushes, below pushing noise; see
``parallel-mujoco.md``.)

Batches of (state, control) slices run across cores: each worker thread owns an ``MjData`` and calls
``mj_step(..., nstep)``, which releases the GIL.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np

from ..scene.spec import Scene
from ..scene.support import SUPPORT_SOLIMP, SUPPORT_SPHERE_RADIUS, support_points
from ..scene.state import StateLayout

TIMESTEP = 0.001  # s; the largest step that is stable and accurate for this contact problem (paper 000)
# The pusher is position-servoed along the integral of its velocity command (MuJoCo ``intvelocity``), as a
# real arm under MoveIt Servo is: no steady-state lag under load, and a critically damped response of this
# bandwidth to a change of command. An ideal velocity servo (kv -> inf) would change the pusher's velocity within
# one step and hammer a touching slider off the table at every control switch.
PUSHER_BANDWIDTH_HZ = 30.0
PUSHER_OMEGA = 2.0 * np.pi * PUSHER_BANDWIDTH_HZ  # rad/s
# The servo force is kp (setpoint - q) - kv qdot, so a pusher moving freely at velocity v sits kv/kp v = 2 v / omega
# behind its setpoint (0.74 mm at 70 mm/s). A slice restarts the setpoint at q + SERVO_LEAD qdot: the continuous
# servo's setpoint whenever the pusher is not accelerating (without it every slice lost 2 v / omega of travel). A
# slice reads the pusher position back from the setpoint (``PlanarMapping.from_mujoco``), so the setpoint, and with
# it the pusher's path, is continuous across slices however a push is sliced (README, "Slice-independent pusher").
SERVO_LEAD = 2.0 / PUSHER_OMEGA  # s: kv / kp of a critically damped servo
PUSHER_REACH = 2.0  # m: the servo's setpoint range around the table centre (MuJoCo requires one)
PUSHER_CLEARANCE = 0.001  # gap between pusher bottom and table top (m): the pusher never drags on the table
TABLE_THICKNESS = 0.04  # m
# collision bits (MuJoCo: two geoms collide when contype of one and conaffinity of the other share a bit)
_TABLE, _BODIES, _FLOOR = 1, 2, 4  # table top / pusher, objects, obstacles / floor


# MuJoCo resets the simulation (or zeroes the control) after these: the result would be silently wrong
_DIVERGENCE_WARNINGS = [int(mujoco.mjtWarning.mjWARN_BADQACC), int(mujoco.mjtWarning.mjWARN_BADQPOS),
                        int(mujoco.mjtWarning.mjWARN_BADQVEL), int(mujoco.mjtWarning.mjWARN_BADCTRL)]


class FineModelDiverged(RuntimeError):
    """MuJoCo reported an unstable simulation (or produced non-finite values) for some slices."""

    def __init__(self, indices, reason: str):
        self.indices = list(indices)
        super().__init__(f"fine model diverged for slice(s) {self.indices}: {reason}")


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def build_mjcf(scene: Scene) -> str:
    """MJCF text of the scene. Friction per pair follows the scene (MuJoCo geom priorities pick the parameters:
    table/floor decide object–table, the pusher decides pusher–object, equal priorities take the max)."""
    fr = scene.friction
    hx, hy = scene.table.half
    p = scene.pusher
    kp, kv = p.mass * PUSHER_OMEGA ** 2, 2.0 * p.mass * PUSHER_OMEGA  # critically damped: kv / kp = SERVO_LEAD
    # the table's priority makes its contact parameters those of every support contact (support.py)
    support_softness = "" if scene.support.pattern == "native" else f' solimp="{SUPPORT_SOLIMP}"'
    lines = [
        f'<mujoco model="parapush_{scene.name}">',
        # elliptic cones: isotropic Coulomb friction (pyramidal cones make a central push drift sideways)
        f'  <option timestep="{TIMESTEP}" integrator="implicitfast" cone="elliptic"/>',
        '  <default><geom condim="3" solref="0.02 1" solimp="0.9 0.95 0.001"/></default>',
        '  <worldbody>',
        # the floor is where fallen objects end up; the table is a finite box whose top is z = 0
        f'    <geom name="floor" type="plane" pos="0 0 {-scene.table.height}" size="0 0 1" '
        f'contype="{_FLOOR}" conaffinity="{_FLOOR}" priority="1" friction="{fr["object_table"]} 0.005 0.0001"/>',
        f'    <geom name="table" type="box" pos="0 0 {-TABLE_THICKNESS / 2}" '
        f'size="{hx} {hy} {TABLE_THICKNESS / 2}" contype="{_TABLE}" conaffinity="{_TABLE}" priority="1" '
        f'friction="{fr["object_table"]} 0.005 0.0001"{support_softness}/>',
    ]
    for o in scene.obstacles:
        lines.append(f'    <geom name="obstacle_{o.name}" {_geom_shape(o)} pos="{o.pose[0]} {o.pose[1]} '
                     f'{o.half_height}" euler="0 0 {o.pose[2]}" contype="{_BODIES}" conaffinity="{_BODIES}" '
                     f'priority="1" friction="{fr["object_object"]} 0.005 0.0001"/>')
    lines += [
        f'    <body name="pusher" pos="0 0 {PUSHER_CLEARANCE + p.height / 2}">',
        '      <joint name="pusher_x" type="slide" axis="1 0 0" limited="false"/>',
        '      <joint name="pusher_y" type="slide" axis="0 1 0" limited="false"/>',
        f'      <geom name="pusher" type="cylinder" size="{p.radius} {p.height / 2}" mass="{p.mass}" '
        f'contype="{_BODIES}" conaffinity="{_BODIES}" priority="1" '
        f'friction="{fr["pusher_object"]} 0.005 0.0001"/>',
        '    </body>',
    ]
    # the object itself meets the pusher, other objects, obstacles and the floor; it rests on the table through
    # its own geom (support 'native': MuJoCo's corner/rim contacts) or through its support points (support.py)
    hits = _BODIES | _FLOOR | (_TABLE if scene.support.pattern == "native" else 0)
    for o in scene.objects:
        lines += [
            f'    <body name="object_{o.name}" pos="{o.pose[0]} {o.pose[1]} {o.half_height}">',
            '      <freejoint/>',
            f'      <geom name="object_{o.name}" {_geom_shape(o)} mass="{o.mass}" contype="{hits}" '
            f'conaffinity="{hits}" friction="{fr["object_object"]} 0.005 0.0001"/>',
            *_support_geoms(o, scene),
            '    </body>',
        ]
    lines += [
        '  </worldbody>',
        '  <actuator>',
        *[f'    <intvelocity name="pusher_v{a}" joint="pusher_{a}" kp="{kp}" kv="{kv}" '
          f'actrange="{-PUSHER_REACH} {PUSHER_REACH}"/>' for a in "xy"],
        '  </actuator>',
        '</mujoco>',
    ]
    return "\n".join(lines)


def _support_geoms(o, scene: Scene) -> list:
    """Massless spheres on the object's base that touch the table only (contype table, conaffinity none: they
    meet nothing else and not each other); the table's priority gives them the object–table friction."""
    if scene.support.pattern == "native":
        return []
    r = SUPPORT_SPHERE_RADIUS
    return [f'      <geom name="support_{o.name}_{k}" type="sphere" size="{r}" pos="{px} {py} {r - o.half_height}" '
            f'mass="0" contype="{_TABLE}" conaffinity="0" group="3"/>'
            for k, (px, py) in enumerate(support_points(o.shape, o.size, scene.support))]


def _geom_shape(b) -> str:
    if b.shape == "cylinder":
        return f'type="cylinder" size="{b.radius} {b.half_height}"'
    return f'type="box" size="{b.size[0] / 2} {b.size[1] / 2} {b.half_height}"'


class PlanarMapping:
    """The mapping between planar states and MuJoCo ``qpos``/``qvel`` for one compiled scene model."""

    def __init__(self, model: mujoco.MjModel, scene: Scene, rest_height: np.ndarray):
        self.layout: StateLayout = scene.layout
        self.rest_height = np.asarray(rest_height, dtype=float)
        self.pusher_qpos = np.array([model.jnt_qposadr[model.joint("pusher_x").id],
                                     model.jnt_qposadr[model.joint("pusher_y").id]])
        self.pusher_qvel = np.array([model.jnt_dofadr[model.joint("pusher_x").id],
                                     model.jnt_dofadr[model.joint("pusher_y").id]])
        self.obj_qpos = []
        self.obj_qvel = []
        for o in scene.objects:
            jid = model.body(f"object_{o.name}").jntadr[0]
            self.obj_qpos.append(model.jnt_qposadr[jid])
            self.obj_qvel.append(model.jnt_dofadr[jid])

    def to_mujoco(self, x: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray | None = None) -> None:
        """Write one planar state into qpos/qvel (objects flat at rest height, no vertical motion) and the pusher
        servo setpoint into ``act`` (where the continuous servo's setpoint is for this pusher velocity)."""
        L = self.layout
        qpos[self.pusher_qpos] = x[0:2]
        qvel[self.pusher_qvel] = L.pusher_vel(x)
        if act is not None:
            act[:] = x[0:2] + SERVO_LEAD * L.pusher_vel(x)
        poses, vels = L.object_poses(x), L.object_vels(x)
        for i, (a, v) in enumerate(zip(self.obj_qpos, self.obj_qvel)):
            half = 0.5 * poses[i, 2]
            qpos[a:a + 7] = (poses[i, 0], poses[i, 1], self.rest_height[i], np.cos(half), 0.0, 0.0, np.sin(half))
            # free joint: linear velocity in the world frame, angular velocity in the body frame (= world z when flat)
            qvel[v:v + 6] = (vels[i, 0], vels[i, 1], 0.0, 0.0, 0.0, vels[i, 2])

    def from_mujoco(self, qpos: np.ndarray, qvel: np.ndarray, out: np.ndarray, yaw_ref: np.ndarray,
                    act: np.ndarray | None = None) -> None:
        """Read a planar state; yaw is unwrapped to lie within pi of ``yaw_ref`` so trajectories stay continuous.

        With ``act`` (the fine propagator's reading) the pusher position is the servo setpoint less its velocity
        lead, so the next slice's ``to_mujoco`` restores the setpoint exactly and the pusher's path does not depend
        on the slicing. It differs from the pusher's actual position by the servo's load deflection (F / kp: 0.02 mm
        per 5 N; m a / kp while the pusher accelerates, within ~20 ms of a command change). Without ``act`` (the
        continuous simulator) the actual position is read."""
        L = self.layout
        L.pusher_vel(out)[:] = qvel[self.pusher_qvel]
        if act is None:
            out[0:2] = qpos[self.pusher_qpos]
        else:
            out[0:2] = act - SERVO_LEAD * L.pusher_vel(out)
        poses, vels = L.object_poses(out), L.object_vels(out)
        for i, (a, v) in enumerate(zip(self.obj_qpos, self.obj_qvel)):
            w, qx, qy, qz = qpos[a + 3:a + 7]
            yaw = np.arctan2(2.0 * (w * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz))
            poses[i, 0:2] = qpos[a:a + 2]
            poses[i, 2] = yaw_ref[i] + (yaw - yaw_ref[i] + np.pi) % (2 * np.pi) - np.pi
            # world-frame angular velocity z = third row of R(quat) times body angular velocity
            r20 = 2.0 * (qx * qz - w * qy)
            r21 = 2.0 * (qy * qz + w * qx)
            r22 = 1.0 - 2.0 * (qx * qx + qy * qy)
            vels[i, 0:2] = qvel[v:v + 2]
            vels[i, 2] = r20 * qvel[v + 3] + r21 * qvel[v + 4] + r22 * qvel[v + 5]


class FineModel:
    """F(x, u, dt) for one scene, batched across threads. Thread-safe for one caller at a time."""

    name = "fine"

    def __init__(self, scene: Scene, threads: int | None = None):
        self.scene = scene
        self.layout = scene.layout
        self.model = mujoco.MjModel.from_xml_string(build_mjcf(scene))
        self.threads = max(1, int(threads or default_threads()))
        self.mapping = PlanarMapping(self.model, scene, self._settled_heights())
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="parapush-fine") if self.threads > 1 else None

    def _settled_heights(self) -> np.ndarray:
        """Object heights at rest on the table (contacts are soft: objects sink a fraction of a mm). Starting
        slices at the settled height avoids a bounce transient at every slice start."""
        d = mujoco.MjData(self.model)
        heights = np.array([o.half_height for o in self.scene.objects])
        PlanarMapping(self.model, self.scene, heights).to_mujoco(self.scene.initial_state(), d.qpos, d.qvel, d.act)
        mujoco.mj_step(self.model, d, nstep=500)
        return np.array([d.qpos[adr + 2] for adr in PlanarMapping(self.model, self.scene, heights).obj_qpos])

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _data(self) -> mujoco.MjData:
        d = getattr(self._local, "data", None)
        if d is None:
            d = self._local.data = mujoco.MjData(self.model)
        return d

    def steps_for(self, dt: float) -> int:
        n = int(round(dt / TIMESTEP))
        if n < 1 or abs(n * TIMESTEP - dt) > 1e-9:
            raise ValueError(f"slice duration {dt} s must be a positive multiple of the {TIMESTEP} s time step")
        return n

    def _slice(self, x: np.ndarray, u: np.ndarray, nstep: int, out: np.ndarray) -> str | None:
        """Run one slice in this thread's MjData; return an error string instead of raising (called in workers)."""
        m, d = self.model, self._data()
        mujoco.mj_resetData(m, d)
        self.mapping.to_mujoco(x, d.qpos, d.qvel, d.act)
        d.ctrl[:] = u
        mujoco.mj_step(m, d, nstep=nstep)
        for w in _DIVERGENCE_WARNINGS:
            if d.warning[w].number:
                return f"unstable simulation (MuJoCo warning {mujoco.mjtWarning(w).name})"
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            return "unstable simulation (non-finite state)"
        if abs(d.time - nstep * m.opt.timestep) > 1e-9:
            return "simulation time did not advance (MuJoCo reset the state)"
        self.mapping.from_mujoco(d.qpos, d.qvel, out, self.layout.object_poses(x)[:, 2], act=d.act)
        return None

    def propagate(self, x, u, dt: float) -> np.ndarray:
        """F for a batch: ``x`` (B, D) states, ``u`` (B, 2) pusher velocities -> (B, D) states after ``dt``.

        Raises ``FineModelDiverged`` naming the failed slices; never returns a silently reset state.
        """
        x = np.ascontiguousarray(np.atleast_2d(x), dtype=float)
        u = np.ascontiguousarray(np.atleast_2d(u), dtype=float)
        if x.shape[0] != u.shape[0] or u.shape[1] != 2 or x.shape[1] != self.layout.dim:
            raise ValueError(f"fine model: expected x (B, {self.layout.dim}) and u (B, 2), got {x.shape}, {u.shape}")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(u))):
            raise ValueError("fine model: states or controls contain NaN or infinite values")
        nstep = self.steps_for(dt)
        out = np.empty_like(x)
        if self._pool is None or len(x) == 1:
            errors = [self._slice(x[i], u[i], nstep, out[i]) for i in range(len(x))]
        else:
            errors = list(self._pool.map(lambda i: self._slice(x[i], u[i], nstep, out[i]), range(len(x))))
        failed = [i for i, e in enumerate(errors) if e]
        if failed:
            raise FineModelDiverged(failed, errors[failed[0]])
        return out

    def submit(self, x, u, dt: float):
        """Start one slice asynchronously (for pipelined Parareal); returns a future of the (D,) state."""
        x = np.array(x, dtype=float)
        u = np.array(u, dtype=float)
        nstep = self.steps_for(dt)

        def job():
            out = np.empty_like(x)
            err = self._slice(x, u, nstep, out)
            if err:
                raise FineModelDiverged([0], err)
            return out

        if self._pool is None:
            from concurrent.futures import Future  # noqa: PLC0415
            f = Future()
            try:
                f.set_result(job())
            except Exception as e:  # surfaced through the future, as with a pool
                f.set_exception(e)
            return f
        return self._pool.submit(job)

    def rollout(self, x0, controls, dt: float) -> np.ndarray:
        """Serial fine reference: chain F over ``controls`` (N, 2) from ``x0``; returns (N+1, D) states."""
        controls = np.atleast_2d(np.asarray(controls, dtype=float))
        xs = [np.asarray(x0, dtype=float)]
        for u in controls:
            xs.append(self.propagate(xs[-1][None], u[None], dt)[0])
        return np.stack(xs)

    def rollout_batch(self, x0, controls, dt: float) -> np.ndarray:
        """Many serial fine rollouts at once: ``x0`` (M, D), ``controls`` (M, N, 2) -> (M, N+1, D); each time
        step is one batched call of M slices across the threads."""
        x0 = np.atleast_2d(np.asarray(x0, dtype=float))
        controls = np.asarray(controls, dtype=float)
        out = np.empty((x0.shape[0], controls.shape[1] + 1, x0.shape[1]))
        out[:, 0] = x0
        for n in range(controls.shape[1]):
            out[:, n + 1] = self.propagate(out[:, n], controls[:, n], dt)
        return out
