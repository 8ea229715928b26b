"""The fine model: the fine propagator F(x, u, dt) on the scene's MuJoCo model (``mjcf.compile_scene``).

Definition of F (the one every part of parapush uses, including the serial reference that Parareal must
reproduce): a slice starts from the *planar* state x alone. The MuJoCo state is rebuilt from x (objects resting at
their settled height, flat, with the planar velocities; solver warmstart zero), the pusher velocity command u is
held for ``dt`` seconds of ``FINE_TIMESTEP`` (2 ms) steps, and the planar state is read back. F is therefore a pure
function of (x, u, dt): a real robot only ever observes the planar state, and chaining slices this way reproduces the
serial fine rollout bitwise however the slices are scheduled across threads. (Carrying the hidden warmstart across slice
boundaries instead changes results by up to a few mm on contact-rich pushes, below pushing noise; see
``parallel-mujoco.md``.)

Time step and solver: the scene's MuJoCo model is the 1 ms reference physics (``mjcf.TIMESTEP``, Newton
solver; the simulated world's physics); the fine model steps it at 2 ms with MuJoCo's CG solver. Measured against
the reference (docs/results/parareal.md): final poses within 0.06 mm / 0.04 deg on Table 1's pushes, 0.04 mm
RMS on the convergence bench's random pushes, 0.05 mm / 0.10 deg on four-cylinder clutter pushes and 0.19 mm /
0.42 deg on recorded-push replay, far below the real-world spread of pushing (8 mm / 4 deg), at 2.2x (four
cylinders) to 2.9x (box) less CPU time per rollout. 4 ms steps also stay within 0.65 mm / 0.5 deg, but 0.25 s
control periods and replay slices are not whole 4 ms steps. A slice that is not a whole number of fine steps runs
on the reference physics.

Sleeping bodies (``FINE_SLEEP``, MuJoCo's ``mjENBL_SLEEP``): a body at rest (speed below ``sleep_tolerance``) stops
being simulated until something awake touches it. In clutter most objects rest most of the time, so a four-object
step costs 1.6-2.2x less; measured against the reference on random pushes (docs/results/parareal.md, "A cheaper
fine model"), final poses move by no more than the 2 ms CG step's own differences (0.60 mm / 0.75 deg largest on 20
clutter pushes; box, disc and obstacle pushes unchanged: nothing rests while it is pushed). The reference physics
keeps every body awake.

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
from .base import ModelDiverged, batch_arguments
from .mjcf import TIMESTEP, build_mjcf, compile_scene, divergence

FINE_TIMESTEP = 2 * TIMESTEP  # s: the fine model's step (module docstring: what it costs in accuracy and buys)
FINE_SOLVER = mujoco.mjtSolver.mjSOL_CG  # as accurate here as Newton (the reference's), at less cost per step
# resting bodies sleep in the fine model (module docstring); MuJoCo releases without sleeping bodies step them all
FINE_SLEEP = int(getattr(mujoco.mjtEnableBit, "mjENBL_SLEEP", 0))

def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class FineModel:
    """F(x, u, dt) for one scene, batched across threads. Thread-safe for one caller at a time."""

    name = "fine"

    def __init__(self, scene: Scene, threads: int | None = None, timestep: float = FINE_TIMESTEP):
        """``timestep = mjcf.TIMESTEP`` gives the reference physics itself (1 ms, Newton)."""
        self.scene = scene
        self.layout = scene.layout
        n = round(timestep / TIMESTEP)
        if n < 1 or abs(n * TIMESTEP - timestep) > 1e-12:
            raise ValueError(f"fine model: time step {timestep} s must be a positive multiple of {TIMESTEP} s")
        compiled = compile_scene(scene)
        self.model, self.mapping = compiled.model, compiled.mapping
        self.model.opt.timestep = self.timestep = float(timestep)
        if n > 1:
            self.model.opt.solver = FINE_SOLVER
            self.model.opt.enableflags |= FINE_SLEEP
        # the reference physics (its own MjModel: sizes are equal, so any thread's MjData steps either model)
        self.reference_model = compiled.model if n == 1 else mujoco.MjModel.from_xml_string(build_mjcf(scene))
        if threads is not None and not (int(threads) == threads and threads >= 0):
            raise ValueError(f"fine model: threads must be a whole number >= 0 (0 = all cores), got {threads!r}")
        self.threads = max(1, int(threads or default_threads()))
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="parapush-fine") if self.threads > 1 else None

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __del__(self):
        try:  # noqa: SIM105 - no contextlib in __del__: it may run at interpreter exit
            self.close()
        except Exception:  # noqa: BLE001 - __del__ must not raise
            pass

    def _data(self) -> mujoco.MjData:
        d = getattr(self._local, "data", None)
        if d is None:
            d = self._local.data = mujoco.MjData(self.model)
        return d

    def stepping(self, dt: float) -> tuple[mujoco.MjModel, int]:
        """(model, steps) of a ``dt`` slice: fine steps when ``dt`` is a whole number of them, else reference steps."""
        n = int(round(dt / self.timestep))
        if n >= 1 and abs(n * self.timestep - dt) <= 1e-9:
            return self.model, n
        n = int(round(dt / TIMESTEP))
        if n < 1 or abs(n * TIMESTEP - dt) > 1e-9:
            raise ValueError(f"slice duration {dt} s must be a positive multiple of the {TIMESTEP} s time step")
        return self.reference_model, n

    def _slice(self, x: np.ndarray, u: np.ndarray, stepping: tuple, out: np.ndarray) -> str | None:
        """Run one slice in this thread's MjData; return an error string instead of raising (called in workers)."""
        (m, nstep), d = stepping, self._data()
        mujoco.mj_resetData(m, d)
        self.mapping.to_mujoco(x, d.qpos, d.qvel, d.act)
        d.ctrl[:] = u
        mujoco.mj_step(m, d, nstep=nstep)
        reason = divergence(d)
        if reason:
            return reason
        if abs(d.time - nstep * m.opt.timestep) > 1e-9:
            return "simulation time did not advance (MuJoCo reset the state)"
        self.mapping.from_mujoco(d.qpos, d.qvel, out, self.layout.object_poses(x)[:, 2], act=d.act)
        return None

    def propagate(self, x, u, dt: float) -> np.ndarray:
        """F for a batch: ``x`` (B, D) states, ``u`` (B, 2) pusher velocities -> (B, D) states after ``dt``.

        Raises ``ModelDiverged`` naming the failed slices; never returns a silently reset state.
        """
        x, u = batch_arguments(x, u, self.layout.dim, "fine model")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(u))):
            raise ValueError("fine model: states or controls contain NaN or infinite values")
        stepping = self.stepping(dt)
        out = np.empty_like(x)
        if self._pool is None or len(x) == 1:
            errors = [self._slice(x[i], u[i], stepping, out[i]) for i in range(len(x))]
        else:
            errors = list(self._pool.map(lambda i: self._slice(x[i], u[i], stepping, out[i]), range(len(x))))
        failed = [i for i, e in enumerate(errors) if e]
        if failed:
            raise ModelDiverged(errors[failed[0]], failed)
        return out

    def submit(self, x, u, dt: float):
        """Start one slice asynchronously (for pipelined Parareal); returns a future of the (D,) state."""
        x = np.array(x, dtype=float)
        u = np.array(u, dtype=float)
        stepping = self.stepping(dt)

        def job():
            out = np.empty_like(x)
            err = self._slice(x, u, stepping, out)
            if err:
                raise ModelDiverged(err, [0])
            return out

        if self._pool is None:
            from concurrent.futures import Future  # noqa: PLC0415
            f = Future()
            try:
                f.set_result(job())
            except Exception as e:  # noqa: BLE001 - surfaced through the future, as with a pool
                f.set_exception(e)
            return f
        return self._pool.submit(job)
