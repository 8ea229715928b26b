"""RViz visualisation of scenes and predictions (MarkerArray, Path), shared by the predictor and planner nodes."""
from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Point, PoseStamped
from nav_msgs.msg import Path
from visualization_msgs.msg import Marker, MarkerArray

from ..core.scene.spec import Scene

PALETTE = [(0.12, 0.47, 0.71), (1.0, 0.5, 0.05), (0.17, 0.63, 0.17), (0.84, 0.15, 0.16), (0.58, 0.4, 0.74)]


def _color(m: Marker, rgb, a: float):
    m.color.r, m.color.g, m.color.b = (float(c) for c in rgb)
    m.color.a = float(a)


def _yaw_quat(pose_msg, yaw: float):
    pose_msg.orientation.z = float(np.sin(yaw / 2.0))
    pose_msg.orientation.w = float(np.cos(yaw / 2.0))


def _body_marker(header, ns, mid, shape, size, pose, rgb, alpha, z_center, vertices=()) -> Marker:
    """A body at ``pose``: a cube, a cylinder or, for a polygon or an ellipse (``vertices``), its prism as a
    triangle list."""
    m = Marker(header=header, ns=ns, id=mid, action=Marker.ADD)
    if len(vertices):
        m.type = Marker.TRIANGLE_LIST
        m.scale.x = m.scale.y = m.scale.z = 1.0
        m.points = _prism_triangles(vertices, float(size[2]) / 2.0)
    else:
        m.type = Marker.CUBE if shape == "box" else Marker.CYLINDER
        m.scale.x, m.scale.y, m.scale.z = (float(s) for s in size)
    m.pose.position.x, m.pose.position.y, m.pose.position.z = float(pose[0]), float(pose[1]), float(z_center)
    _yaw_quat(m.pose, float(pose[2]))
    _color(m, rgb, alpha)
    return m


body_marker = _body_marker  # for the nodes that draw bodies of their own (mocap_ingest's tracked bodies)


def _prism_triangles(vertices, h: float) -> list:
    """Triangles (body frame, centred on the body's half height) of a convex prism: both caps and the sides."""
    v = [(float(x), float(y)) for x, y in vertices]
    out = []
    for z in (-h, h):  # caps: fans from vertex 0
        for i in range(1, len(v) - 1):
            out += [Point(x=v[0][0], y=v[0][1], z=z), Point(x=v[i][0], y=v[i][1], z=z),
                    Point(x=v[i + 1][0], y=v[i + 1][1], z=z)]
    for i in range(len(v)):
        (ax, ay), (bx, by) = v[i], v[(i + 1) % len(v)]
        out += [Point(x=ax, y=ay, z=-h), Point(x=bx, y=by, z=-h), Point(x=bx, y=by, z=h),
                Point(x=ax, y=ay, z=-h), Point(x=bx, y=by, z=h), Point(x=ax, y=ay, z=h)]
    return out


def delete_all(header, ns: str = "") -> Marker:
    return Marker(header=header, ns=ns, action=Marker.DELETEALL)


def scene_markers(scene: Scene, header, goal=None) -> list:
    """Table, obstacles and goal region (static parts of the scene)."""
    out = []
    t = Marker(header=header, ns="table", id=0, type=Marker.CUBE, action=Marker.ADD)
    t.scale.x, t.scale.y, t.scale.z = float(scene.table.size[0]), float(scene.table.size[1]), 0.01
    t.pose.position.z = -0.005
    t.pose.orientation.w = 1.0
    _color(t, (0.8, 0.7, 0.55), 0.6)
    out.append(t)
    for i, o in enumerate(scene.obstacles):
        out.append(_body_marker(header, "obstacles", i, o.shape, o.size, o.pose, (0.3, 0.3, 0.3), 0.9, o.half_height,
                                o.vertices))
    goal_xy, radius = goal if goal is not None else (
        (scene.goal.position, scene.goal.radius) if scene.goal is not None else (None, None))
    if goal_xy is not None:
        g = _body_marker(header, "goal", 0, "cylinder", (2 * radius, 2 * radius, 0.002), (*goal_xy, 0.0),
                         (0.1, 0.8, 0.1), 0.4, 0.001)
        out.append(g)
    return out


def trajectory_markers(scene: Scene, states: np.ndarray, header, ns: str, alpha: float = 0.8,
                       pusher: bool = True) -> list:
    """Predicted object outlines at every slice end plus a line per object and one for the pusher."""
    L = scene.layout
    states = np.asarray(states)
    out = []
    mid = 0
    for k, spec in enumerate(scene.objects):
        rgb = PALETTE[k % len(PALETTE)]
        line = Marker(header=header, ns=f"{ns}/paths", id=mid, type=Marker.LINE_STRIP, action=Marker.ADD)
        line.scale.x = 0.004
        line.pose.orientation.w = 1.0
        _color(line, rgb, alpha)
        line.points = [Point(x=float(p[0]), y=float(p[1]), z=0.002) for p in L.object_poses(states)[:, k, :2]]
        out.append(line)
        mid += 1
        for n in range(1, len(states)):
            fade = alpha * (0.25 + 0.75 * n / (len(states) - 1 if len(states) > 1 else 1))
            out.append(_body_marker(header, f"{ns}/objects", mid, spec.shape, spec.size,
                                    L.object_poses(states[n])[k], rgb, 0.5 * fade, spec.half_height, spec.vertices))
            mid += 1
    if pusher:
        line = Marker(header=header, ns=f"{ns}/pusher", id=mid, type=Marker.LINE_STRIP, action=Marker.ADD)
        line.scale.x = 0.003
        line.pose.orientation.w = 1.0
        _color(line, (0.1, 0.1, 0.1), alpha)
        line.points = [Point(x=float(p[0]), y=float(p[1]), z=0.003) for p in states[:, 0:2]]
        out.append(line)
    return out


def uncertainty_markers(scene: Scene, states: np.ndarray, variance: np.ndarray, header, ns: str,
                        sigmas: float = 1.0, alpha: float = 0.3) -> list:
    """The predicted uncertainty along a path (paper 004): a flat ellipse at every predicted object position whose
    half-axes are ``sigmas`` standard deviations along x and y of the table frame (the model's variance is per
    coordinate). ``states`` and ``variance`` (N+1, D); the start state (zero variance) gets none."""
    L = scene.layout
    states, variance = np.asarray(states), np.asarray(variance)
    poses, var = L.object_poses(states), L.object_poses(variance)
    out = []
    mid = 0
    for k in range(len(scene.objects)):
        rgb = PALETTE[k % len(PALETTE)]
        for n in range(1, len(states)):
            sx, sy = (float(sigmas * np.sqrt(max(v, 0.0))) for v in var[n, k, :2])
            m = _body_marker(header, f"{ns}/sigma", mid, "cylinder", (max(2 * sx, 1e-4), max(2 * sy, 1e-4), 0.001),
                             (poses[n, k, 0], poses[n, k, 1], 0.0), rgb, alpha, 0.004)
            out.append(m)
            mid += 1
    return out


def waypoint_markers(points: np.ndarray, header, ns: str, current: int | None = None) -> list:
    """A planned way-point path (paper 004 Algorithm 2): a line through ``points`` (W, 2) and a small sphere at
    each way-point, the one aimed at now (``current``) larger."""
    points = np.asarray(points, dtype=float)
    line = Marker(header=header, ns=ns, id=0, type=Marker.LINE_STRIP, action=Marker.ADD)
    line.scale.x = 0.003
    line.pose.orientation.w = 1.0
    _color(line, (0.9, 0.9, 0.9), 0.9)
    line.points = [Point(x=float(p[0]), y=float(p[1]), z=0.004) for p in points]
    out = [line]
    for i, p in enumerate(points):
        d = 0.025 if i == current else 0.012
        m = Marker(header=header, ns=ns, id=i + 1, type=Marker.SPHERE, action=Marker.ADD)
        m.scale.x = m.scale.y = m.scale.z = d
        m.pose.position.x, m.pose.position.y, m.pose.position.z = float(p[0]), float(p[1]), 0.01
        m.pose.orientation.w = 1.0
        _color(m, (1.0, 1.0, 1.0) if i == current else (0.9, 0.9, 0.9), 0.9)
        out.append(m)
    return out


def object_path(scene: Scene, states: np.ndarray, header, object_index: int = 0) -> Path:
    path = Path(header=header)
    for pose in scene.layout.object_poses(np.asarray(states))[:, object_index]:
        ps = PoseStamped(header=header)
        ps.pose.position.x, ps.pose.position.y = float(pose[0]), float(pose[1])
        _yaw_quat(ps.pose, float(pose[2]))
        path.poses.append(ps)
    return path


def marker_array(markers) -> MarkerArray:
    return MarkerArray(markers=list(markers))


FACE_NAMES = ("-x", "-y", "+x", "+y")  # the quasi-static model's face order (slider frame)
FACE_COLORS = ((0.12, 0.47, 0.71), (0.17, 0.63, 0.17), (0.58, 0.4, 0.74), (1.0, 0.5, 0.05))


def _face_points(size, pose, face: int) -> list:
    """The two ends of face ``face`` of a box of ``size`` at ``pose`` (table frame)."""
    a, b = size[0] / 2.0, size[1] / 2.0
    ends = {0: ((-a, -b), (-a, b)), 1: ((-a, -b), (a, -b)), 2: ((a, -b), (a, b)), 3: ((-a, b), (a, b))}[int(face)]
    c, s = np.cos(pose[2]), np.sin(pose[2])
    return [Point(x=float(pose[0] + c * x - s * y), y=float(pose[1] + s * x + c * y), z=0.004) for x, y in ends]


def contact_face_markers(scene: Scene, states: np.ndarray, faces: np.ndarray, header, object_index: int = 0,
                         ns: str = "plan/faces", dt: float | None = None) -> list:
    """Where a plan pushes which face: the pushed face drawn thick (coloured by face) on the slider where each
    contact begins, and at every face switch (a new face after separation) a red sphere at the pusher and a label
    "switch k: -x -> +y" (with the time when ``dt`` is given). ``faces`` (T,) per step, -1 = separated."""
    L = scene.layout
    states, faces = np.asarray(states), np.asarray(faces)
    obj = scene.objects[object_index]
    out, mid, last_face, was = [], 0, None, False
    for t, f in enumerate(faces):
        if f < 0:
            was = False
            continue
        if was and f == last_face:
            continue
        pose = L.object_poses(states[t + 1])[object_index]
        line = Marker(header=header, ns=f"{ns}/contact", id=mid, type=Marker.LINE_STRIP, action=Marker.ADD)
        line.scale.x = 0.006
        line.pose.orientation.w = 1.0
        _color(line, FACE_COLORS[int(f)], 0.95)
        line.points = _face_points(obj.size, pose, f)
        out.append(line)
        mid += 1
        if last_face is not None and f != last_face:
            p = L.pusher_pos(states[t + 1])
            sphere = Marker(header=header, ns=f"{ns}/switches", id=mid, type=Marker.SPHERE, action=Marker.ADD)
            sphere.scale.x = sphere.scale.y = sphere.scale.z = 0.015
            sphere.pose.position.x, sphere.pose.position.y, sphere.pose.position.z = float(p[0]), float(p[1]), 0.01
            sphere.pose.orientation.w = 1.0
            _color(sphere, (0.9, 0.1, 0.1), 0.9)
            text = Marker(header=header, ns=f"{ns}/switches", id=mid + 1, type=Marker.TEXT_VIEW_FACING,
                          action=Marker.ADD)
            text.scale.z = 0.015
            text.pose.position.x, text.pose.position.y, text.pose.position.z = float(p[0]), float(p[1]), 0.03
            text.pose.orientation.w = 1.0
            _color(text, (0.9, 0.1, 0.1), 1.0)
            n = sum(1 for m in out if m.ns == f"{ns}/switches" and m.type == Marker.SPHERE) + 1
            when = f" at {(t + 1) * dt:.1f} s" if dt else ""
            text.text = f"switch {n}: {FACE_NAMES[int(last_face)]} -> {FACE_NAMES[int(f)]}{when}"
            out += [sphere, text]
            mid += 2
        last_face, was = f, True
    return out
