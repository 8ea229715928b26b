"""The fine model: the fine propagator F(x, u, dt) on the scene's MuJoCo model (``mjcf.compile_scene``).

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
from .base import ModelDiverged, batch_arguments
from .mjcf import TIMESTEP, compile_scene, divergence

def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class FineModel:
    """F(x, u, dt) for one scene, batched across threads. Thread-safe for one caller at a time."""

    name = "fine"

    def __init__(self, scene: Scene, threads: int | None = None):
        self.scene = scene
        self.layout = scene.layout
        compiled = compile_scene(scene)
        self.model, self.mapping = compiled.model, compiled.mapping
        self.threads = max(1, int(threads or default_threads()))
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="parapush-fine") if self.threads > 1 else None

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
        nstep = self.steps_for(dt)
        out = np.empty_like(x)
        if self._pool is None or len(x) == 1:
            errors = [self._slice(x[i], u[i], nstep, out[i]) for i in range(len(x))]
        else:
            errors = list(self._pool.map(lambda i: self._slice(x[i], u[i], nstep, out[i]), range(len(x))))
        failed = [i for i, e in enumerate(errors) if e]
        if failed:
            raise ModelDiverged(errors[failed[0]], failed)
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
                raise ModelDiverged(err, [0])
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
