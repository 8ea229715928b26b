"""The simulated closed-loop experiment around the MPC planner (paper 000 Sec. 4.3).

``run_closed_loop``: the world is a continuously stepped MuJoCo simulation of the scene (one ``MjData`` that is
never rebuilt, unlike the fine model's slices), optionally with other friction and masses than the planner's scene
and with noisy observations, because on a real robot the model is never exact.
Each step: plan -> execute the first control in the world -> observe -> check the outcome -> re-plan.
The outcome is judged on the world's true states, sampled densely along each action, so grazing the obstacle
between two observations counts as a hit.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import mujoco
import numpy as np

from .fine import _DIVERGENCE_WARNINGS, FineModel, FineModelDiverged
from .optimisers import OptimiserResult, make_optimiser
from .outcome import DEFAULT_MAX_ACTIONS, Outcome, OutcomeMonitor, Status
from .predict import Predictor
from .projection import project_feasible
from .scene import Scene
from .tasks import CostWeights, Goal, PushTask


from .mpc import MPCPlanner


@dataclass(frozen=True)
class WorldConfig:
    """How the simulated world differs from the planner's scene."""

    friction_scale: float = 1.0  # object-table friction x this
    pusher_friction_scale: float = 1.0  # pusher-object friction x this
    mass_scale: float = 1.0  # object masses x this
    position_noise: float = 0.0  # std of observed positions (m), pusher and objects
    yaw_noise: float = 0.0  # std of observed object yaw (rad)
    samples_per_action: int = 20  # true states recorded per action (for the outcome and the plots)
    seed: int = 0

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
    """A continuously stepped MuJoCo world built like the fine model (same MJCF, same pusher servo)."""

    def __init__(self, scene: Scene, config: WorldConfig = WorldConfig(), x0=None):
        if config.samples_per_action < 1:
            raise ValueError(f"world samples_per_action must be >= 1, got {config.samples_per_action}")
        self.config = config
        self.scene = perturbed_scene(scene, config.friction_scale, config.pusher_friction_scale, config.mass_scale)
        self.layout = self.scene.layout
        fine = FineModel(self.scene, threads=1)
        self.model, self.mapping = fine.model, fine.mapping
        fine.close()
        self.data = mujoco.MjData(self.model)
        self.rng = np.random.default_rng(config.seed)
        self.x = self.layout.check(self.scene.initial_state() if x0 is None else x0, "world initial state").copy()
        self.mapping.to_mujoco(self.x, self.data.qpos, self.data.qvel, self.data.act)
        mujoco.mj_forward(self.model, self.data)
        self.time = 0.0

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
            mujoco.mj_step(self.model, self.data, nstep=int(bounds[s + 1] - bounds[s]))
            for w in _DIVERGENCE_WARNINGS:
                if self.data.warning[w].number:
                    raise FineModelDiverged([0], f"world simulation unstable (MuJoCo warning "
                                                 f"{mujoco.mjtWarning(w).name})")
            if not (np.all(np.isfinite(self.data.qpos)) and np.all(np.isfinite(self.data.qvel))):
                raise FineModelDiverged([0], "world simulation produced non-finite values")
            self.mapping.from_mujoco(self.data.qpos, self.data.qvel, path[s], self.layout.object_poses(self.x)[:, 2])
            self.x = path[s].copy()
        self.time += nstep * self.model.opt.timestep
        return path

    def observe(self) -> np.ndarray:
        """The true state with measurement noise on positions and yaw (velocities as they are)."""
        x = self.x.copy()
        c = self.config
        if c.position_noise > 0.0:
            idx = self.layout.position_indices
            x[idx] += self.rng.normal(0.0, c.position_noise, idx.size)
        if c.yaw_noise > 0.0 and self.layout.n_objects:
            idx = self.layout.yaw_indices
            x[idx] += self.rng.normal(0.0, c.yaw_noise, idx.size)
        return x


# ------------------------------------------------------------------------------------------------- closed loop
@dataclass
class ClosedLoopRecord:
    outcome: Outcome
    reason: str
    actions: int
    final_distance: float  # m, true target centre to goal
    states: np.ndarray  # (actions+1, D) true states after each action (states[0] = start)
    observed: np.ndarray  # (actions+1, D) what the planner saw
    path: np.ndarray  # (S, D) true states sampled densely along the execution
    controls: np.ndarray  # (actions, 2) executed controls
    plan_times: list = field(default_factory=list)  # s per planning step
    plan_costs: list = field(default_factory=list)
    predicted: list = field(default_factory=list)  # (N+1, D) predicted states of every plan
    execution_time: float = 0.0  # simulated seconds of pushing

    @property
    def success(self) -> bool:
        return self.outcome is Outcome.REACHED

    @property
    def planning_time(self) -> float:
        return float(np.sum(self.plan_times))

    @property
    def task_time(self) -> float:
        """Planning plus execution time: what a robot that plans between pushes would take."""
        return self.planning_time + self.execution_time


def run_closed_loop(planner: MPCPlanner, world: SimWorld, max_actions: int = DEFAULT_MAX_ACTIONS,
                    monitor: OutcomeMonitor | None = None, keep_plans: bool = False,
                    on_step=None) -> ClosedLoopRecord:
    """Plan, execute the first control in ``world``, observe, re-plan until the monitor says the push is over.

    ``on_step(step, status, plan)`` is called after every executed action (progress reporting)."""
    monitor = monitor or OutcomeMonitor(planner.scene, planner.task.goal, max_actions)
    planner.reset()
    dt = planner.config.dt
    states, observed, path, controls = [world.x.copy()], [world.observe()], [world.x.copy()], []
    rec = ClosedLoopRecord(Outcome.RUNNING, "", 0, monitor.distance(world.x), np.empty(0), np.empty(0),
                           np.empty(0), np.empty(0))
    status: Status = monitor.check(world.x, 0)
    while not status.outcome.done:
        try:
            plan = planner.plan(observed[-1])
        except (FineModelDiverged, ValueError) as e:
            status = Status(Outcome.FAILED, f"planning failed: {e}", monitor.distance(world.x), len(controls))
            break
        rec.plan_times.append(plan.plan_time)
        rec.plan_costs.append(plan.cost)
        if keep_plans:
            rec.predicted.append(plan.states)
        u = plan.controls[0]
        try:
            seg = world.execute(u, dt)
        except FineModelDiverged as e:
            status = Status(Outcome.FAILED, str(e), monitor.distance(world.x), len(controls))
            break
        planner.commit()
        controls.append(u.copy())
        path.extend(seg)
        states.append(world.x.copy())
        observed.append(world.observe())
        rec.execution_time += dt
        status = monitor.check_path(seg, len(controls))
        if on_step is not None:
            on_step(len(controls), status, plan)
    rec.outcome, rec.reason, rec.actions = status.outcome, status.reason, len(controls)
    rec.final_distance = monitor.distance(world.x)
    rec.states, rec.observed, rec.path = np.array(states), np.array(observed), np.array(path)
    rec.controls = np.array(controls).reshape(-1, 2)
    return rec
