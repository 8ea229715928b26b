"""Demonstrations for DG-OC (paper 003): the file format, the shipped library and k-NN selection.

A demonstration is one push of a box slider from rest, recorded as a time series of slider and pusher states,
velocities and accelerations. On disk it is a small JSON file (``config/demonstrations/<scene>/*.json``)::

    {"name": ..., "scene": ..., "dt": 0.02, "face_switches": 1, "source": "how it was made",
     "columns": ["slider_x", "slider_y", "slider_theta", "pusher_x", "pusher_y", "pusher_vx", "pusher_vy",
                 "pusher_ax", "pusher_ay"],
     "rows": [[...], ...]}

in the frame of the slider's start pose (the slider starts at the origin with zero yaw; ``to_start`` moves it to any
start pose). ``pusher_a*`` of a row is the acceleration applied from that row to the next (zero on the last row).
Row i is at time i dt. The full format of earlier files (``COLUMNS``: also the time ``t`` and the slider velocities
``slider_vx``, ``slider_vy``, ``slider_omega``) is read as well; those columns are derivable (from dt and the poses),
DG-OC does not use them, so ``save`` leaves them out. The pusher velocities stay: derived from the accelerations
they would differ from the recorded ones in the last digits.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...scene.assets import shipped
from ...scene.state import wrap_angle

COLUMNS = ("t", "slider_x", "slider_y", "slider_theta", "slider_vx", "slider_vy", "slider_omega",
           "pusher_x", "pusher_y", "pusher_vx", "pusher_vy", "pusher_ax", "pusher_ay")  # the full format
# what ``save`` writes: the model state and the acceleration (t and the slider velocities are derivable)
STORED_COLUMNS = ("slider_x", "slider_y", "slider_theta", "pusher_x", "pusher_y", "pusher_vx", "pusher_vy",
                  "pusher_ax", "pusher_ay")
YAW_LENGTH = 0.1  # m per rad: how k-NN weighs a yaw difference against a position difference


class DemonstrationError(ValueError):
    """A demonstration file is invalid; the message names the file and the field."""


@dataclass
class Demonstration:
    name: str
    dt: float
    X: np.ndarray  # (T+1, 7) model states [s_x, s_y, s_theta, p_x, p_y, v_x, v_y]
    U: np.ndarray  # (T, 2) pusher accelerations
    face_switches: int
    scene: str = ""
    source: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def horizon(self) -> int:
        return len(self.U)

    @property
    def final_pose(self) -> np.ndarray:
        return self.X[-1, :3]

    def rows(self) -> np.ndarray:
        """The rows of ``STORED_COLUMNS``: the model state and the acceleration applied from it (zero on the last)."""
        return np.column_stack([self.X, np.vstack([self.U, np.zeros((1, 2))])])

    def save(self, path) -> None:
        data = {"name": self.name, "scene": self.scene, "dt": self.dt, "face_switches": self.face_switches,
                "source": self.source, **({"meta": self.meta} if self.meta else {}), "columns": list(STORED_COLUMNS),
                "rows": [[float(f"{v:.7g}") for v in r] for r in self.rows()]}
        text = json.dumps(data, indent=None, separators=(",", ":"))
        Path(path).write_text(text.replace('"rows":[[', '"rows":[\n[').replace("],[", "],\n[") + "\n")

    def to_start(self, pose) -> Demonstration:
        """The same push, started from slider pose ``pose`` (x, y, yaw) instead of the origin."""
        x0, y0, th = (float(v) for v in pose)
        c, s = np.cos(th), np.sin(th)
        R = np.array([[c, -s], [s, c]])
        X = self.X.copy()
        X[:, 0:2] = self.X[:, 0:2] @ R.T + (x0, y0)
        X[:, 2] = self.X[:, 2] + th
        X[:, 3:5] = self.X[:, 3:5] @ R.T + (x0, y0)
        X[:, 5:7] = self.X[:, 5:7] @ R.T
        return Demonstration(self.name, self.dt, X, self.U @ R.T, self.face_switches, self.scene, self.source,
                             dict(self.meta))


def load_demonstration(path) -> Demonstration:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DemonstrationError(f"{path.name}: cannot read the demonstration: {e}") from None

    def fail(key, msg):
        raise DemonstrationError(f"{path.name}: {key}: {msg}")

    if not isinstance(data, dict):
        fail("", "must be a JSON object")
    for key in ("name", "dt", "face_switches", "columns", "rows"):
        if key not in data:
            fail(key, "missing required key")
    columns = data["columns"]
    if not isinstance(columns, list) or columns not in (list(STORED_COLUMNS), list(COLUMNS)):
        fail("columns", f"must be {list(STORED_COLUMNS)} (or the full format {list(COLUMNS)})")
    dt = data["dt"]
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
        fail("dt", f"must be a positive number, got {dt!r}")
    switches = data["face_switches"]
    if isinstance(switches, bool) or not isinstance(switches, int) or switches < 0:
        fail("face_switches", f"must be a whole number >= 0, got {switches!r}")
    if not isinstance(data.get("meta", {}), dict):
        fail("meta", f"must be a JSON object, got {data['meta']!r}")
    try:
        rows = np.asarray(data["rows"], dtype=float)
    except (TypeError, ValueError):
        fail("rows", "must be a list of rows of numbers")
    if rows.ndim != 2 or rows.shape[1] != len(columns) or len(rows) < 2:
        fail("rows", f"must be at least 2 rows of {len(columns)} numbers, got shape {rows.shape}")
    if not np.all(np.isfinite(rows)):
        fail("rows", "contain NaN or infinite values")
    col = {c: i for i, c in enumerate(columns)}
    if "t" in col and not np.allclose(np.diff(rows[:, col["t"]]), dt, atol=1e-6):
        fail("rows", f"column t must advance by dt = {dt} on every row")
    X = rows[:, [col[c] for c in ("slider_x", "slider_y", "slider_theta", "pusher_x", "pusher_y", "pusher_vx",
                                  "pusher_vy")]]
    U = rows[:-1, [col["pusher_ax"], col["pusher_ay"]]]
    return Demonstration(name=str(data["name"]), dt=float(dt), X=X, U=U, face_switches=switches,
                         scene=str(data.get("scene", "")), source=str(data.get("source", "")),
                         meta=dict(data.get("meta", {})))


def demonstrations_dir() -> Path:
    """``config/demonstrations``: the installed share dir when available, else the source tree."""
    try:
        return shipped("config/demonstrations")
    except FileNotFoundError as e:
        raise DemonstrationError(str(e)) from None


def load_library(scene_or_dir) -> list[Demonstration]:
    """Every demonstration of a directory, or of a shipped scene's directory given the scene's name."""
    d = Path(scene_or_dir)
    if not d.is_dir():
        d = demonstrations_dir() / str(scene_or_dir)
    files = sorted(d.glob("*.json"))
    if not files:
        raise DemonstrationError(f"{scene_or_dir}: no demonstrations (no *.json in {d})")
    return [load_demonstration(f) for f in files]


def pose_distance(a, b) -> np.ndarray:
    """The k-NN metric: Euclidean (p = 2) over (x, y, YAW_LENGTH * wrapped yaw difference)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    yaw = wrap_angle(d[..., 2])
    return np.sqrt(d[..., 0] ** 2 + d[..., 1] ** 2 + (YAW_LENGTH * yaw) ** 2)


def nearest(demos: list[Demonstration], targets, k: int = 1) -> np.ndarray:
    """Indices (B, k) of the k demonstrations whose final slider pose is closest to each target (B, 3) pose,
    nearest first (targets relative to the slider's start pose, as the demonstrations are)."""
    targets = np.atleast_2d(np.asarray(targets, dtype=float))
    finals = np.stack([d.final_pose for d in demos])
    dist = pose_distance(targets[:, None, :], finals[None])
    return np.argsort(dist, axis=1, kind="stable")[:, :k]
