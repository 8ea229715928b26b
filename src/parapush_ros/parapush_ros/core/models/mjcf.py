"""The MuJoCo model of a scene: MJCF generation, the planar-state mapping and the divergence check.

``compile_scene`` is the one way to get a scene's MuJoCo model: the fine model (``core/models/fine.py``, which
rebuilds the MuJoCo state from the planar state at every slice) and the continuously stepped world
(``core/sim/world.py``) both simulate exactly this model, so a prediction and the simulated truth differ only in
how they are stepped.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from ..scene.spec import Scene
from ..scene.state import StateLayout, unwrap_near, yaw_from_quaternion
from ..scene.convex import OUTLINE_SHAPES
from ..scene.support import SUPPORT_SOLIMP, SUPPORT_SPHERE_RADIUS, support_points

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
# it the pusher's path, is continuous across slices however a push is sliced (docs/architecture.md).
SERVO_LEAD = 2.0 / PUSHER_OMEGA  # s: kv / kp of a critically damped servo
PUSHER_REACH = 2.0  # m: the servo's setpoint range around the table centre (MuJoCo requires one)
PUSHER_CLEARANCE = 0.001  # gap between pusher bottom and table top (m): the pusher never drags on the table
TABLE_THICKNESS = 0.04  # m
# collision bits (MuJoCo: two geoms collide when contype of one and conaffinity of the other share a bit)
_TABLE, _BODIES, _FLOOR, _OBSTACLE = 1, 2, 4, 8  # table top / objects, obstacles / floor / pusher, obstacles
CONTACT_SOLREF, CONTACT_SOLIMP = "0.02 1", "0.9 0.95 0.001"  # every contact's softness but the support's
SETTLE_STEPS = 500  # physics steps objects are left to settle on the table to find their rest heights

# MuJoCo resets the simulation (or zeroes the control) after these: the result would be silently wrong
DIVERGENCE_WARNINGS = (int(mujoco.mjtWarning.mjWARN_BADQACC), int(mujoco.mjtWarning.mjWARN_BADQPOS),
                       int(mujoco.mjtWarning.mjWARN_BADQVEL), int(mujoco.mjtWarning.mjWARN_BADCTRL))


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
        f'  <default><geom condim="3" solref="{CONTACT_SOLREF}" solimp="{CONTACT_SOLIMP}"/></default>',
        *_mesh_assets(scene),
        '  <worldbody>',
        # the floor is where fallen objects end up; the table is a finite box whose top is z = 0
        f'    <geom name="floor" type="plane" pos="0 0 {-scene.table.height}" size="0 0 1" '
        f'contype="{_FLOOR}" conaffinity="{_FLOOR}" priority="1" friction="{fr["object_table"]} 0.005 0.0001"/>',
        f'    <geom name="table" type="box" pos="0 0 {-TABLE_THICKNESS / 2}" '
        f'size="{hx} {hy} {TABLE_THICKNESS / 2}" contype="{_TABLE}" conaffinity="{_TABLE}" priority="1" '
        f'friction="{fr["object_table"]} 0.005 0.0001"{support_softness}/>',
    ]
    for o in scene.obstacles:
        lines.append(f'    <geom name="obstacle_{o.name}" {_geom_shape(o, "obstacle")} pos="{o.pose[0]} {o.pose[1]} '
                     f'{o.half_height}" euler="0 0 {o.pose[2]}" contype="{_BODIES | _OBSTACLE}" '
                     f'conaffinity="{_BODIES | _OBSTACLE}" priority="1" '
                     f'friction="{fr["object_object"]} 0.005 0.0001"/>')
    heights, pairs = _pusher_contacts(scene)
    lines += [
        f'    <body name="pusher" pos="0 0 {PUSHER_CLEARANCE + p.height / 2}">',
        '      <joint name="pusher_x" type="slide" axis="1 0 0" limited="false"/>',
        '      <joint name="pusher_y" type="slide" axis="0 1 0" limited="false"/>',
        # the cylinder meets obstacles; objects meet the pusher through its contact spheres (``_pusher_contacts``)
        f'      <geom name="pusher" type="cylinder" size="{p.radius} {p.height / 2}" mass="{p.mass}" '
        f'contype="{_OBSTACLE}" conaffinity="{_OBSTACLE}" priority="1" '
        f'friction="{fr["pusher_object"]} 0.005 0.0001"/>',
        *[f'      <geom name="pusher_contact_{k}" type="sphere" size="{p.radius}" '
          f'pos="0 0 {z - PUSHER_CLEARANCE - p.height / 2}" mass="0" contype="0" conaffinity="0" group="3"/>'
          for k, z in enumerate(heights)],
        '    </body>',
    ]
    # the object itself meets other objects, obstacles and the floor (the pusher: explicit pairs); it rests on the
    # table through its own geom (support 'native': MuJoCo's corner/rim contacts) or through its support points
    # (support.py)
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
    # the pusher's contact with each object: its sphere at that object's contact height (explicit pairs; the
    # pusher-object friction; the default contact softness)
    contact_pairs = [f'    <pair geom1="pusher_contact_{k}" geom2="object_{o.name}" condim="3" '
                     f'friction="{fr["pusher_object"]} {fr["pusher_object"]} 0.005 0.0001 0.0001" '
                     f'solref="{CONTACT_SOLREF}" solimp="{CONTACT_SOLIMP}"/>' for o, k in zip(scene.objects, pairs)]
    lines += [
        '  </worldbody>',
        '  <contact>',
        *contact_pairs,
        '  </contact>',
        '  <actuator>',
        *[f'    <intvelocity name="pusher_v{a}" joint="pusher_{a}" kp="{kp}" kv="{kv}" '
          f'actrange="{-PUSHER_REACH} {PUSHER_REACH}"/>' for a in "xy"],
        '  </actuator>',
        '</mujoco>',
    ]
    return "\n".join(lines)


def pusher_contact_height(scene: Scene, obj) -> float:
    """Height above the table (m) at which the pusher's force acts on ``obj``: the middle of the height the pusher's
    side and the object's side share. A vertical pusher against a vertical side is a line contact whose resultant,
    for uniform pressure along it, acts at the line's middle; MuJoCo reduces such a contact to one point that lies
    wherever its convex collision ends (a cylinder pusher on a cylinder: at the pusher's bottom edge, 1 mm above the
    table, so the push had no tipping moment and no load transfer on the object's support; on a box: the middle).
    The pusher's contact sphere of its own radius, centred at this height, meets every vertical side there, with a
    horizontal normal, whatever the shape (docs/results/fidelity.md)."""
    top = min(2.0 * obj.half_height, PUSHER_CLEARANCE + scene.pusher.height)
    return 0.5 * (PUSHER_CLEARANCE + top)


def _pusher_contacts(scene: Scene) -> tuple[list, list]:
    """The distinct contact heights (one pusher sphere each, to 0.1 mm) and, per object, the index of its sphere."""
    heights, pairs = [], []
    for o in scene.objects:
        z = round(pusher_contact_height(scene, o), 4)
        if z not in heights:
            heights.append(z)
        pairs.append(heights.index(z))
    return heights, pairs


def _mesh_assets(scene: Scene) -> list:
    """The prisms of polygon and ellipse bodies (their outline at z = -h/2 and +h/2, body frame) as mesh assets;
    MuJoCo uses their convex hull for contacts, the prism itself, as the outline is convex."""
    out = []
    for kind, bodies in (("object", scene.objects), ("obstacle", scene.obstacles)):
        for b in bodies:
            if b.shape in OUTLINE_SHAPES:
                h = b.half_height
                pts = " ".join(f"{x} {y} {z}" for z in (-h, h) for x, y in b.vertices)
                out.append(f'    <mesh name="{kind}_{b.name}" vertex="{pts}"/>')
    return ["  <asset>", *out, "  </asset>"] if out else []


def _support_geoms(o, scene: Scene) -> list:
    """Massless spheres on the object's base that touch the table only (contype table, conaffinity none: they
    meet nothing else and not each other); the table's priority gives them the object–table friction."""
    if scene.support.pattern == "native":
        return []
    r = SUPPORT_SPHERE_RADIUS
    return [f'      <geom name="support_{o.name}_{k}" type="sphere" size="{r}" pos="{px} {py} {r - o.half_height}" '
            f'mass="0" contype="{_TABLE}" conaffinity="0" group="3"/>'
            for k, (px, py) in enumerate(support_points(o.shape, o.size, scene.support, o.vertices))]


def _geom_shape(b, kind: str = "object") -> str:
    if b.shape == "cylinder":
        return f'type="cylinder" size="{b.radius} {b.half_height}"'
    if b.shape in OUTLINE_SHAPES:  # a convex mesh: the outline's prism (``_mesh_assets``)
        return f'type="mesh" mesh="{kind}_{b.name}"'
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
            poses[i, 0:2] = qpos[a:a + 2]
            poses[i, 2] = unwrap_near(yaw_from_quaternion((qx, qy, qz, w)), yaw_ref[i])
            # world-frame angular velocity z = third row of R(quat) times body angular velocity
            r20 = 2.0 * (qx * qz - w * qy)
            r21 = 2.0 * (qy * qz + w * qx)
            r22 = 1.0 - 2.0 * (qx * qx + qy * qy)
            vels[i, 0:2] = qvel[v:v + 2]
            vels[i, 2] = r20 * qvel[v + 3] + r21 * qvel[v + 4] + r22 * qvel[v + 5]


@dataclass(frozen=True)
class CompiledScene:
    """A scene's MuJoCo model and the mapping between its planar states and MuJoCo's state."""

    scene: Scene
    model: mujoco.MjModel
    mapping: PlanarMapping


def compile_scene(scene: Scene) -> CompiledScene:
    """Compile ``scene`` (MJCF -> MjModel) and find the objects' rest heights (contacts are soft: objects sink a
    fraction of a mm). Starting from the settled height avoids a bounce transient at every start."""
    model = mujoco.MjModel.from_xml_string(build_mjcf(scene))
    d = mujoco.MjData(model)
    nominal = PlanarMapping(model, scene, np.array([o.half_height for o in scene.objects]))
    nominal.to_mujoco(scene.initial_state(), d.qpos, d.qvel, d.act)
    mujoco.mj_step(model, d, nstep=SETTLE_STEPS)
    settled = np.array([d.qpos[adr + 2] for adr in nominal.obj_qpos])
    return CompiledScene(scene, model, PlanarMapping(model, scene, settled))


def divergence_counts(data: mujoco.MjData) -> tuple:
    """How often MuJoCo has raised each divergence warning in ``data`` (pass to ``divergence`` as ``before``)."""
    return tuple(int(data.warning[w].number) for w in DIVERGENCE_WARNINGS)


def divergence(data: mujoco.MjData, before: tuple | None = None) -> str | None:
    """Why the simulation in ``data`` can no longer be trusted, or None: MuJoCo raised a divergence warning (since
    ``before``, a ``divergence_counts`` taken earlier; ever, without it) or the state is not finite."""
    now = divergence_counts(data)
    before = before or (0,) * len(now)
    for w, a, b in zip(DIVERGENCE_WARNINGS, now, before):
        if a != b:
            return f"unstable simulation (MuJoCo warning {mujoco.mjtWarning(w).name})"
    if not (np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))):
        return "unstable simulation (non-finite state)"
    return None
