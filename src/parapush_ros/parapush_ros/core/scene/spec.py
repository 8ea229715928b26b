"""Scene description: the one source of truth for table, pusher, objects, obstacles and goal.

Scenes are YAML files (``config/scenes/*.yaml``). Loading validates every field and raises ``SceneError`` whose
message names the file and the offending field, e.g. ``box_slider.yaml: objects[0].size[1]: must be > 0``.
Sizes are full extents in metres, masses in kg, poses in the table frame (origin at the centre of the table top).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from ..config import yaml_problem
from .convex import MESH_VOLUME_TOLERANCE, OUTLINE_SHAPES, ellipse_vertices, mesh_footprint, polygon_problem
from .geometry import TOUCH_DISTANCE, Footprint, disc_penetration, pair_penetration
from .assets import shipped
from .state import StateLayout
from .support import DEFAULT_SUPPORT, SUPPORT_PATTERNS, SUPPORT_POINTS_RANGE, SupportSpec, support_fits

# Facts from the authors' setup (docs/background.md, "What the authors' public code does").
DEFAULT_PUSHER_RADIUS = 0.0145
DEFAULT_FRICTION = {"object_table": 1.0, "pusher_object": 0.2, "object_object": 0.2}
# A measured start (mocap) puts the pusher or an object up to this deep into another one: marker noise and
# calibration (0.01-0.25 mm seen on real recordings). Such overlaps are projected out (the objects move, the pusher
# and obstacles stay) with a StartOverlapWarning naming the depth; deeper ones are an error: a wrong pose, not noise.
START_OVERLAP_TOLERANCE = 2.0e-3  # m
_TOUCHING = 1.0e-9  # m: a projected start leaves bodies touching to rounding


class StartOverlapWarning(UserWarning):
    """A start overlap within ``START_OVERLAP_TOLERANCE`` was projected out; the message names it and its depth."""


class SceneError(ValueError):
    """A scene file or dictionary is invalid; the message names the source and the field."""


@dataclass(frozen=True)
class TableSpec:
    size: tuple[float, float]  # full extents along x and y (m), centred on the table frame origin
    height: float  # table top above the floor (m)

    @property
    def half(self) -> np.ndarray:
        return np.asarray(self.size) / 2.0

    def contains(self, xy, margin: float = 0.0):
        """True where planar points lie on the table top, at least ``margin`` inside its edges."""
        return np.all(np.abs(np.asarray(xy)) <= self.half - margin, axis=-1)


@dataclass(frozen=True)
class PusherSpec:
    radius: float
    height: float
    mass: float
    start: tuple[float, float]

    @property
    def footprint(self) -> Footprint:
        return Footprint("cylinder", radius=self.radius)


@dataclass(frozen=True)
class BodySpec:
    """A movable object or a static obstacle. ``size`` is (x, y, z) full extents; a cylinder has x = y = 2 r."""

    name: str
    shape: str  # "box" | "cylinder" | "polygon" | "ellipse" | "mesh"
    size: tuple[float, float, float]  # a polygon's or an ellipse's: twice its largest |x| and |y|, and its height
    mass: float  # kg (ignored for obstacles)
    pose: tuple[float, float, float]  # start pose of an object / fixed pose of an obstacle: x, y, yaw
    # the outline of a polygon (as given) or an ellipse (``convex.ellipse_vertices``): object frame, counter-clockwise
    vertices: tuple = ()
    radii: tuple = ()  # an ellipse's half axes (a, b) along its body x and y
    file: str = ""  # a mesh's STL or OBJ file (absolute): its footprint's convex hull is ``vertices``, its z extent the
    # height, and the body is that prism

    @property
    def radius(self) -> float:
        return self.size[0] / 2.0

    @property
    def half_height(self) -> float:
        return self.size[2] / 2.0

    @property
    def footprint(self) -> Footprint:
        if self.shape == "cylinder":
            return Footprint("cylinder", radius=self.radius)
        if self.shape in OUTLINE_SHAPES:
            return Footprint("polygon", vertices=self.vertices)
        return Footprint("box", half_extents=(self.size[0] / 2.0, self.size[1] / 2.0))


@dataclass(frozen=True)
class GoalSpec:
    object: str
    position: tuple[float, float]
    radius: float  # goal region: disc around ``position`` (m)


@dataclass(frozen=True)
class Scene:
    name: str
    table: TableSpec
    pusher: PusherSpec
    objects: tuple[BodySpec, ...]
    obstacles: tuple[BodySpec, ...] = ()
    goal: GoalSpec | None = None
    friction: dict = field(default_factory=lambda: dict(DEFAULT_FRICTION))
    source: str = "<dict>"
    # coarse-model parameters of this scene: {"k_omega": {shape: value}} for the shapes the file sets (a number in
    # the file sets every shape); the analytical coarse model takes its own defaults for the rest
    coarse: dict = field(default_factory=dict)
    support: SupportSpec = DEFAULT_SUPPORT  # how objects rest on the table in the fine model (support.py)

    @property
    def layout(self) -> StateLayout:
        return StateLayout(len(self.objects))

    def object_index(self, name: str) -> int:
        for i, o in enumerate(self.objects):
            if o.name == name:
                return i
        raise KeyError(f"scene {self.name!r} has no object named {name!r} "
                       f"(objects: {', '.join(o.name for o in self.objects)})")

    def initial_state(self) -> np.ndarray:
        return self.layout.compose(np.array(self.pusher.start), np.array([o.pose for o in self.objects]))

    def with_poses(self, pusher_start=None, object_poses=None, obstacle_poses=None, goal=None) -> Scene:
        """A copy with other start poses (e.g. a random benchmark scene); not re-validated (``revalidated`` does
        that)."""
        pusher = self.pusher if pusher_start is None else replace(self.pusher, start=tuple(map(float, pusher_start)))
        objects = self.objects if object_poses is None else tuple(
            replace(o, pose=tuple(map(float, p))) for o, p in zip(self.objects, object_poses))
        obstacles = self.obstacles if obstacle_poses is None else tuple(
            replace(o, pose=tuple(map(float, p))) for o, p in zip(self.obstacles, obstacle_poses))
        return replace(self, pusher=pusher, objects=objects, obstacles=obstacles,
                       goal=self.goal if goal is None else goal)

    def revalidated(self, source: str, edit=None, **changes) -> Scene:
        """This scene changed and validated like a scene file, errors naming ``source``: its ``to_dict()`` with the
        top-level keys ``changes`` replaced (``name=...``, ``support={...}``), then changed in place by
        ``edit(data)`` where given, goes through ``scene_from_dict``. The one way to change a scene and check it."""
        data = self.to_dict()
        data.update(changes)
        if edit is not None:
            edit(data)
        return scene_from_dict(data, source=source)

    def to_dict(self) -> dict:
        """The scene as a plain dict that ``scene_from_dict`` accepts (round trip)."""
        def body(b, key):
            d = {"name": b.name, "shape": b.shape}
            if b.shape == "cylinder":
                d.update(radius=b.radius, height=b.size[2])
            elif b.shape == "polygon":
                d.update(vertices=[list(v) for v in b.vertices], height=b.size[2])
            elif b.shape == "ellipse":
                d.update(radii=list(b.radii), height=b.size[2])
            elif b.shape == "mesh":
                d["file"] = b.file
            else:
                d["size"] = list(b.size)
            if key == "start":
                d["mass"] = b.mass
                d["start"] = list(b.pose)
            else:
                d["pose"] = list(b.pose)
            return d
        out = {
            "name": self.name,
            "table": {"size": list(self.table.size), "height": self.table.height},
            "pusher": {"radius": self.pusher.radius, "height": self.pusher.height, "mass": self.pusher.mass,
                       "start": list(self.pusher.start)},
            "friction": dict(self.friction),
            **({"coarse": {k: dict(v) for k, v in self.coarse.items()}} if self.coarse else {}),
            "support": self.support.to_dict(),
            "objects": [body(o, "start") for o in self.objects],
            "obstacles": [body(o, "pose") for o in self.obstacles],
        }
        if self.goal is not None:
            out["goal"] = {"object": self.goal.object, "position": list(self.goal.position),
                           "radius": self.goal.radius}
        return out


# ----------------------------------------------------------------------------------------------- loading
_TOP_KEYS = {"name", "description", "table", "pusher", "friction", "coarse", "support", "objects", "obstacles", "goal"}
_COARSE_KEYS = {"k_omega"}
_SUPPORT_KEYS = {"pattern", "points", "spread"}
_TABLE_KEYS = {"size", "height"}
_PUSHER_KEYS = {"radius", "height", "mass", "start"}
_OBJECT_KEYS = {"name", "shape", "size", "radius", "radii", "vertices", "file", "height", "mass", "start"}
_OBSTACLE_KEYS = {"name", "shape", "size", "radius", "radii", "vertices", "file", "height", "pose"}
_GOAL_KEYS = {"object", "position", "radius"}
_SHAPES = ("box", "cylinder", "polygon", "ellipse", "mesh")
_SHAPE_KEYS = {"box": ("size",), "cylinder": ("radius", "height"), "polygon": ("vertices", "height"),
               "ellipse": ("radii", "height"), "mesh": ("file",)}


class _Ctx:
    def __init__(self, source: str, base_dir: Path | None = None):
        self.source = source
        self.base_dir = base_dir  # where relative file names (a mesh's) are

    def fail(self, path: str, msg: str):
        raise SceneError(f"{self.source}: {path}: {msg}" if path else f"{self.source}: {msg}")

    def mapping(self, value, path, allowed, required):
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        for k in value:
            if k not in allowed:
                self.fail(f"{path}.{k}" if path else str(k),
                          f"unknown key (allowed: {', '.join(sorted(allowed))})")
        for k in required:
            if k not in value:
                self.fail(f"{path}.{k}" if path else k, "missing required key")
        return value

    def number(self, value, path, positive=False, nonneg=False):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            self.fail(path, f"must be finite, got {value}")
        if positive and value <= 0.0:
            self.fail(path, f"must be > 0, got {value}")
        if nonneg and value < 0.0:
            self.fail(path, f"must be >= 0, got {value}")
        return value

    def vector(self, value, path, n, positive=False):
        if not isinstance(value, (list, tuple)) or len(value) != n:
            self.fail(path, f"must be a list of {n} numbers, got {value!r}")
        return tuple(self.number(v, f"{path}[{i}]", positive=positive) for i, v in enumerate(value))

    def string(self, value, path):
        if not isinstance(value, str) or not value.strip():
            self.fail(path, f"must be a non-empty string, got {value!r}")
        return value


def _body(ctx: _Ctx, d, path, obstacle: bool) -> BodySpec:
    allowed = _OBSTACLE_KEYS if obstacle else _OBJECT_KEYS
    pose_key = "pose" if obstacle else "start"
    required = ["name", "shape", pose_key] + ([] if obstacle else ["mass"])
    ctx.mapping(d, path, allowed, required)
    name = ctx.string(d["name"], f"{path}.name")
    shape = d["shape"]
    if shape not in _SHAPES:
        ctx.fail(f"{path}.shape", f"must be one of {', '.join(_SHAPES)}, got {shape!r}")
    for k in ("size", "radius", "radii", "vertices", "file", "height"):
        if k in d and k not in _SHAPE_KEYS[shape]:
            article = "an" if shape[0] in "aeiou" else "a"
            ctx.fail(f"{path}.{k}", f"{article} {shape} takes {' and '.join(repr(x) for x in _SHAPE_KEYS[shape])}, "
                                    f"not {k!r}")
    for k in _SHAPE_KEYS[shape]:
        if k not in d:
            ctx.fail(f"{path}.{k}", f"missing required key for a {shape}")
    vertices, radii, file = (), (), ""
    if shape == "mesh":
        file, vertices, height = _mesh(ctx, d["file"], f"{path}.file")
        v = np.asarray(vertices)
        size = (2 * float(np.abs(v[:, 0]).max()), 2 * float(np.abs(v[:, 1]).max()), height)
    elif shape == "cylinder":
        r = ctx.number(d["radius"], f"{path}.radius", positive=True)
        size = (2 * r, 2 * r, ctx.number(d["height"], f"{path}.height", positive=True))
    elif shape == "box":
        size = ctx.vector(d["size"], f"{path}.size", 3, positive=True)
    else:
        if shape == "ellipse":
            radii = ctx.vector(d["radii"], f"{path}.radii", 2, positive=True)
            vertices = ellipse_vertices(*radii)
        else:
            raw = d["vertices"]
            if not isinstance(raw, (list, tuple)):
                ctx.fail(f"{path}.vertices", f"must be a list of [x, y] points, got {raw!r}")
            vertices = tuple(ctx.vector(v, f"{path}.vertices[{i}]", 2) for i, v in enumerate(raw))
            problem = polygon_problem(vertices)
            if problem:
                ctx.fail(f"{path}.vertices", problem)
        v = np.asarray(vertices)
        size = (2 * float(np.abs(v[:, 0]).max()), 2 * float(np.abs(v[:, 1]).max()),
                ctx.number(d["height"], f"{path}.height", positive=True))
    mass = 0.0 if obstacle else ctx.number(d["mass"], f"{path}.mass", positive=True)
    pose = d[pose_key]
    if not isinstance(pose, (list, tuple)) or len(pose) not in (2, 3):
        ctx.fail(f"{path}.{pose_key}", f"must be [x, y] or [x, y, yaw], got {pose!r}")
    pose = ctx.vector(list(pose) + [0.0] * (3 - len(pose)), f"{path}.{pose_key}", 3)
    return BodySpec(name=name, shape=shape, size=size, mass=mass, pose=pose, vertices=vertices, radii=radii,
                    file=file)


class MeshVolumeWarning(UserWarning):
    """A mesh object's prism (its footprint's convex hull times its height) differs from the mesh's volume by more
    than ``convex.MESH_VOLUME_TOLERANCE``: the mesh is not a convex prism, and the prism is what is used."""


def _mesh(ctx: _Ctx, value, path) -> tuple[str, tuple, float]:
    """(absolute file, footprint vertices, height) of ``file:`` (relative to the scene file's folder)."""
    name = ctx.string(value, path)
    f = Path(name).expanduser()
    if not f.is_absolute() and ctx.base_dir is not None:
        f = ctx.base_dir / f
    try:
        vertices, height, change = mesh_footprint(f)
    except OSError as e:
        ctx.fail(path, f"cannot read {name!r}: {e.strerror or e}")
    except ValueError as e:
        ctx.fail(path, f"{name!r}: {e}")
    problem = polygon_problem(vertices)
    if problem:
        ctx.fail(path, f"{name!r}: its footprint is {problem}")
    if not change <= MESH_VOLUME_TOLERANCE:
        what = "the mesh is not closed" if math.isnan(change) else f"{change * 100:.1f} % more than the mesh's"
        warnings.warn(f"{ctx.source}: {path}: {name!r}: its footprint's convex hull x its height is used, volume "
                      f"{what}", MeshVolumeWarning, stacklevel=4)
    return str(f.resolve()), vertices, height


def scene_from_dict(data, source: str = "<dict>", base_dir=None) -> Scene:
    """Build and validate a scene from a parsed YAML mapping (``base_dir``: where relative mesh files are; default
    the working directory)."""
    ctx = _Ctx(source, None if base_dir is None else Path(base_dir))
    ctx.mapping(data, "", _TOP_KEYS, ["table", "objects"])
    name = ctx.string(data.get("name", Path(source).stem), "name")

    t = ctx.mapping(data["table"], "table", _TABLE_KEYS, ["size", "height"])
    table = TableSpec(size=ctx.vector(t["size"], "table.size", 2, positive=True),
                      height=ctx.number(t["height"], "table.height", positive=True))

    p = ctx.mapping(data.get("pusher", {}), "pusher", _PUSHER_KEYS, ["start"])
    pusher = PusherSpec(radius=ctx.number(p.get("radius", DEFAULT_PUSHER_RADIUS), "pusher.radius", positive=True),
                        height=ctx.number(p.get("height", 0.11), "pusher.height", positive=True),
                        mass=ctx.number(p.get("mass", 8.0), "pusher.mass", positive=True),
                        start=ctx.vector(p["start"], "pusher.start", 2))

    fr = ctx.mapping(data.get("friction", {}), "friction", set(DEFAULT_FRICTION), [])
    friction = {k: ctx.number(fr.get(k, v), f"friction.{k}", positive=True) for k, v in DEFAULT_FRICTION.items()}

    coarse = _coarse_params(ctx, data.get("coarse", {}))
    support = _support(ctx, data.get("support", {}))

    if not isinstance(data["objects"], list) or not data["objects"]:
        ctx.fail("objects", "must be a non-empty list")
    objects = tuple(_body(ctx, o, f"objects[{i}]", obstacle=False) for i, o in enumerate(data["objects"]))
    obs_raw = data.get("obstacles") or []
    if not isinstance(obs_raw, list):
        ctx.fail("obstacles", "must be a list")
    obstacles = tuple(_body(ctx, o, f"obstacles[{i}]", obstacle=True) for i, o in enumerate(obs_raw))

    goal = None
    if data.get("goal") is not None:
        g = ctx.mapping(data["goal"], "goal", _GOAL_KEYS, ["object", "position", "radius"])
        goal = GoalSpec(object=ctx.string(g["object"], "goal.object"),
                        position=ctx.vector(g["position"], "goal.position", 2),
                        radius=ctx.number(g["radius"], "goal.radius", positive=True))

    scene = Scene(name=name, table=table, pusher=pusher, objects=objects, obstacles=obstacles, goal=goal,
                  friction=friction, source=source, coarse=coarse,
                  support=support)
    scene = _project_start(ctx, scene)
    _check_consistency(ctx, scene)
    return scene


def _support(ctx: _Ctx, d) -> SupportSpec:
    """``support: {pattern: grid, points: 5, spread: 1.0}``: how the fine model rests objects on the table
    (support.py); missing keys take DEFAULT_SUPPORT's values."""
    ctx.mapping(d, "support", _SUPPORT_KEYS, [])
    pattern = d.get("pattern", DEFAULT_SUPPORT.pattern)
    if pattern not in SUPPORT_PATTERNS:
        ctx.fail("support.pattern", f"must be one of {', '.join(SUPPORT_PATTERNS)}, got {pattern!r}")
    points = d.get("points", DEFAULT_SUPPORT.points)
    lo, hi = SUPPORT_POINTS_RANGE
    if isinstance(points, bool) or not isinstance(points, int) or not lo <= points <= hi:
        ctx.fail("support.points", f"must be an integer from {lo} to {hi} (points per side), got {points!r}")
    spread = ctx.number(d.get("spread", DEFAULT_SUPPORT.spread), "support.spread", positive=True)
    return SupportSpec(pattern=pattern, points=points, spread=spread)


def _coarse_params(ctx: _Ctx, c) -> dict:
    """``coarse: {k_omega: 0.55}`` (every shape) or ``{k_omega: {box: 0.7, cylinder: 0.4}}``: the analytical coarse
    model's rotation gain K_omega (paper 000, eq. 8), which depends on the object's support (``parapush bench
    calibrate`` fits it)."""
    ctx.mapping(c, "coarse", _COARSE_KEYS, [])
    out = {}
    if "k_omega" in c:
        k = c["k_omega"]
        if isinstance(k, dict):
            for shape in k:
                if shape not in _SHAPES:
                    ctx.fail(f"coarse.k_omega.{shape}", f"unknown shape (allowed: {', '.join(_SHAPES)})")
            out["k_omega"] = {sh: ctx.number(v, f"coarse.k_omega.{sh}", positive=True) for sh, v in k.items()}
        else:
            value = ctx.number(k, "coarse.k_omega", positive=True)
            out["k_omega"] = {sh: value for sh in _SHAPES}
    return out


def _start_overlaps(s: Scene) -> list:
    """(field, message, depth, reach) of every overlap at the start that projection can resolve (an object is
    involved): ``reach`` > 0 is what projection moves away, the depth itself, or for an obstacle the depth plus the
    contact tolerance (an object that close is projected out to it too); pusher–obstacle overlaps are left to
    ``_check_consistency`` (both are fixed)."""
    out = []
    for i, b in enumerate(s.objects):
        depth, _ = disc_penetration(np.array(s.pusher.start), s.pusher.radius, b.footprint, np.array(b.pose))
        out.append(("pusher.start", f"pusher overlaps objects[{i}] {b.name!r} by {_mm(depth)}", float(depth),
                    float(depth)))
    others = [("objects", i, b) for i, b in enumerate(s.objects)] + [("obstacles", i, b) for i, b in
                                                                      enumerate(s.obstacles)]
    for i, b in enumerate(s.objects):
        for kind, j, c in others:
            if kind == "objects" and j <= i:
                continue
            depth, _ = pair_penetration(b.footprint, np.array(b.pose), c.footprint, np.array(c.pose))
            key = "start" if kind == "objects" else "pose"
            if kind == "obstacles" and depth <= _TOUCHING:
                text = (f"objects[{i}] {b.name!r} within the {_mm(TOUCH_DISTANCE)} contact tolerance of {c.name!r} "
                        f"({_mm(max(0.0, -depth))} apart)")
            else:
                text = f"{c.name!r} overlaps objects[{i}] {b.name!r} by {_mm(depth)}"
            reach = depth + (TOUCH_DISTANCE if kind == "obstacles" else 0.0)
            out.append((f"{kind}[{j}].{key}", text, float(depth), float(reach)))
    return out


def _project_start(ctx: _Ctx, s: Scene) -> Scene:
    """Measured starts: overlaps up to START_OVERLAP_TOLERANCE are projected out with a warning naming each depth;
    a deeper one is an error naming it."""
    overlaps = [o for o in _start_overlaps(s) if o[3] > _TOUCHING]
    if not overlaps:
        return s
    for path, what, depth, _reach in overlaps:
        if depth > START_OVERLAP_TOLERANCE:
            ctx.fail(path, f"{what} (more than the {_mm(START_OVERLAP_TOLERANCE)} a measured start may be off by)")
    from .projection import separate_completely  # noqa: PLC0415 (projection imports this module)
    x, _ = separate_completely(s, s.initial_state())
    moved = s.with_poses(object_poses=s.layout.object_poses(x))
    warnings.warn(f"{s.source}: start overlaps projected out (within the {_mm(START_OVERLAP_TOLERANCE)} "
                  f"tolerance): " + "; ".join(f"{path}: {what}" for path, what, _depth, _reach in overlaps),
                  StartOverlapWarning, stacklevel=3)
    return moved


def _mm(depth: float) -> str:
    """A depth in mm with enough digits that a small one never reads '0.0 mm'."""
    return f"{depth * 1e3:.2f} mm" if depth >= 1e-4 else f"{depth * 1e6:.1f} um"


def _check_consistency(ctx: _Ctx, s: Scene):
    names = {}
    for kind, bodies in (("objects", s.objects), ("obstacles", s.obstacles)):
        for i, b in enumerate(bodies):
            if b.name in names:
                ctx.fail(f"{kind}[{i}].name", f"duplicate name {b.name!r} (also {names[b.name]})")
            names[b.name] = f"{kind}[{i}]"
    # everything on the table: the whole footprint for objects/obstacles, the disc for the pusher
    if not s.table.contains(np.array(s.pusher.start), margin=s.pusher.radius):
        ctx.fail("pusher.start", f"{list(s.pusher.start)} is not on the table "
                                 f"(x within ±{s.table.half[0]:.3f}, y within ±{s.table.half[1]:.3f} minus radius)")
    for kind, bodies in (("objects", s.objects), ("obstacles", s.obstacles)):
        for i, b in enumerate(bodies):
            pts = _outline_points(b)
            if not np.all(s.table.contains(pts)):
                key = "start" if kind == "objects" else "pose"
                ctx.fail(f"{kind}[{i}].{key}", f"{b.name!r} at {list(b.pose)} is (partly) off the table")
    for i, b in enumerate(s.objects):
        if not support_fits(b.shape, b.size, s.support, b.vertices):
            ctx.fail("support.spread", f"{s.support.spread} puts the support points of objects[{i}] {b.name!r} "
                                       f"outside its footprint")
    # no overlaps at the start, and nothing within the contact tolerance of an obstacle: the outcome monitor would
    # judge the start itself a hit, before any push
    def too_close(what, j, ob, depth) -> str:
        return (f"{what} starts {_mm(max(0.0, -depth))} from obstacles[{j}] {ob.name!r}, within the "
                f"{_mm(TOUCH_DISTANCE)} contact tolerance: the push would be judged a hit before it starts (start it "
                f"at least {_mm(TOUCH_DISTANCE)} clear)")
    bodies = [("objects", i, b) for i, b in enumerate(s.objects)] + \
             [("obstacles", i, b) for i, b in enumerate(s.obstacles)]
    for kind, i, b in bodies:
        depth, _ = disc_penetration(np.array(s.pusher.start), s.pusher.radius, b.footprint, np.array(b.pose))
        if depth > _TOUCHING:
            ctx.fail("pusher.start", f"pusher overlaps {kind}[{i}] {b.name!r} by {_mm(depth)}")
        if kind == "obstacles" and -depth < TOUCH_DISTANCE:
            ctx.fail("pusher.start", too_close("the pusher", i, b, depth))
    for a in range(len(bodies)):
        for c in range(a + 1, len(bodies)):
            ka, ia, ba = bodies[a]
            kc, ic, bc = bodies[c]
            if ka == kc == "obstacles":
                continue
            depth, _ = pair_penetration(ba.footprint, np.array(ba.pose), bc.footprint, np.array(bc.pose))
            if depth > _TOUCHING:
                key = "start" if kc == "objects" else "pose"
                ctx.fail(f"{kc}[{ic}].{key}", f"{bc.name!r} overlaps {ka}[{ia}] {ba.name!r} by {_mm(depth)}")
            if kc == "obstacles" and -depth < TOUCH_DISTANCE:  # (objects come before obstacles in ``bodies``)
                ctx.fail(f"{ka}[{ia}].start", too_close(repr(ba.name), ic, bc, depth))
    if s.goal is not None:
        if s.goal.object not in {o.name for o in s.objects}:
            ctx.fail("goal.object", f"{s.goal.object!r} is not one of the objects "
                                    f"({', '.join(o.name for o in s.objects)})")
        if not s.table.contains(np.array(s.goal.position)):
            ctx.fail("goal.position", f"{list(s.goal.position)} is off the table")
        for j, ob in enumerate(s.obstacles):
            if ob.footprint.sdf(np.array(s.goal.position), np.array(ob.pose))[0] < 0.0:
                ctx.fail("goal.position", f"{list(s.goal.position)} lies inside obstacles[{j}] {ob.name!r}")


def _outline_points(b: BodySpec) -> np.ndarray:
    pose = np.array(b.pose)
    if b.shape != "cylinder":
        return b.footprint.corners(pose)
    ang = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    return pose[:2] + b.radius * np.stack([np.cos(ang), np.sin(ang)], -1)


def load_scene(path) -> Scene:
    """Load and validate a scene YAML file. A bare name (``box_slider``) is looked up in the shipped scenes.
    Anything that is not a readable scene is a SceneError, so a node can refuse it: the file system's errors too
    (a name too long for it, a file that cannot be read such as ``/proc/self/mem``)."""
    try:
        path = resolve_scene_path(path)
        text = path.read_text()
    except OSError as e:
        name = str(path)
        raise SceneError(f"{name[:200] + '...' if len(name) > 200 else name}: cannot read the scene file: "
                         f"{e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SceneError(f"{path.name}: not valid YAML: {yaml_problem(e)}") from None
    return scene_from_dict(data, source=path.name, base_dir=path.parent)


def scenes_dir() -> Path:
    """Directory of the shipped scenes (``assets.shipped``)."""
    try:
        return shipped("config/scenes")
    except FileNotFoundError as e:
        raise SceneError(str(e)) from None


def resolve_scene_path(path) -> Path:
    p = Path(path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    if p.exists() and p.is_file():
        return p
    candidate = scenes_dir() / (p.name if p.suffix else f"{p.name}.yaml")
    if candidate.exists():
        return candidate
    raise SceneError(f"{path}: no such scene file (shipped scenes: {', '.join(shipped_scene_names())})")


def shipped_scene_names() -> list[str]:
    """The names of the shipped scenes (``config/scenes/*.yaml``), sorted."""
    return sorted(f.stem for f in scenes_dir().glob("*.yaml"))
