"""The scene family a set of learned weights is valid for, the weights file format and where the shipped weights are.

Scene family. One network serves 1 to ``MAX_OBJECTS`` = 4 cylinders of the ``four_cylinders`` scene (radius
51.15 mm, 0.5 kg), with that scene's friction and support and 1 s slices; it was trained with a 14.5 mm pusher and
serves any pusher radius through the equivalent contact (``encoding.equivalent_pusher``). ``family_scene(n)``
builds the n-object member; ``check_family`` refuses any other scene with an error naming the field. Static
obstacles are allowed: as in the analytical model, they act only through the projection of penetrations.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ...scene.assets import shipped
from ...scene.spec import Scene, load_scene

FORMAT = "parapush-learned-coarse/1"
MAX_OBJECTS = 4
N_OTHERS = MAX_OBJECTS - 1
HIDDEN = (512, 256, 128, 64)
F_IN = 8 + 6 * N_OTHERS
F_OUT = 6
FAMILY_BASE_SCENE = "four_cylinders"
DEFAULT_WEIGHTS = "learned_coarse.pt"
_REL_TOL = 1e-6


class LearnedModelError(ValueError):
    """A weights file is unusable here: missing, malformed, or made for another scene family."""


def read_weights_file(path: Path, fmt: str, fields: tuple[str, ...], what: str) -> dict:
    """The dict saved in a weights file of format ``fmt`` with ``fields`` present; ``LearnedModelError`` naming the
    file and what is wrong otherwise (missing, not torch's, another format, a field missing)."""
    if not path.is_file():
        raise LearnedModelError(f"{what} weights not found: {path}")
    try:
        import torch  # noqa: PLC0415
    except ImportError as e:
        raise LearnedModelError(f"reading {path.name} needs torch ({e})") from None
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - corrupt or foreign file: say which
        raise LearnedModelError(f"{path}: not a readable weights file ({e})") from None
    if not isinstance(blob, dict) or blob.get("format") != fmt:
        got = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        raise LearnedModelError(f"{path}: format is {got!r}, expected {fmt!r}")
    for key in fields:
        if key not in blob:
            raise LearnedModelError(f"{path}: missing field {key!r}")
    return blob


def family_scene(n_objects: int, base: Scene | None = None) -> Scene:
    """The member of the training family with ``n_objects`` cylinders (the first n of ``four_cylinders``)."""
    if not 1 <= int(n_objects) <= MAX_OBJECTS:
        raise ValueError(f"n_objects must be in 1..{MAX_OBJECTS}, got {n_objects}")
    base = base or load_scene(FAMILY_BASE_SCENE)
    return replace(base, name=f"cylinders_{int(n_objects)}", objects=base.objects[:int(n_objects)], obstacles=())


def family_metadata(scene: Scene | None = None, slice_s: float = 1.0) -> dict:
    """The physical facts that a set of weights is valid for (checked by ``check_family``)."""
    from .. import mjcf  # noqa: PLC0415 (mujoco is only needed for the constants, already a core dependency)
    from ..fine import FINE_TIMESTEP  # noqa: PLC0415
    scene = scene or family_scene(MAX_OBJECTS)
    o = scene.objects[0]
    return {
        "base_scene": FAMILY_BASE_SCENE,
        "pusher_radius": scene.pusher.radius,
        "object_shape": o.shape,
        "object_radius": o.radius,
        "object_height": o.size[2],
        "object_mass": o.mass,
        "max_objects": MAX_OBJECTS,
        "friction": dict(scene.friction),
        "slice_s": float(slice_s),
        "support": scene.support.to_dict(),  # the object-table pressure the data was made with
        "fine_timestep_s": mjcf.TIMESTEP,  # the reference physics' step
        "fine_model_timestep_s": FINE_TIMESTEP,  # the step of the fine model that made the data (weights before
        # the 2 ms fine model do not record it)
        "pusher_bandwidth_hz": mjcf.PUSHER_BANDWIDTH_HZ,
        "pusher_lag_s": 2.0 / (2.0 * np.pi * mjcf.PUSHER_BANDWIDTH_HZ),
    }


def check_family(scene: Scene, family: dict, source: str = "weights") -> None:
    """Raise ``LearnedModelError`` naming the first field in which ``scene`` leaves the trained family."""
    def fail(field, have, key, want=None):
        want = family[key] if want is None else want
        raise LearnedModelError(f"learned coarse model ({source}) does not fit scene {scene.name!r}: {field} is "
                                f"{have!r}, the weights were trained for {want!r} (metadata family.{key})")

    def close(a, b):
        return abs(float(a) - float(b)) <= _REL_TOL * max(1.0, abs(float(b)))

    try:
        # the pusher's radius is not checked: the model predicts any radius through the equivalent contact
        # (encoding.equivalent_pusher)
        if not 1 <= len(scene.objects) <= int(family["max_objects"]):
            fail("the number of objects", len(scene.objects), "max_objects", f"1..{family['max_objects']}")
        for i, o in enumerate(scene.objects):
            if o.shape != family["object_shape"]:
                fail(f"objects[{i}].shape", o.shape, "object_shape")
            for field, have, key in (("radius", o.radius, "object_radius"), ("height", o.size[2], "object_height"),
                                     ("mass", o.mass, "object_mass")):
                if not close(have, family[key]):
                    fail(f"objects[{i}].{field}", have, key)
        for k, v in family["friction"].items():
            if k not in scene.friction or not close(scene.friction[k], v):
                fail(f"friction.{k}", scene.friction.get(k), "friction", v)
        # weights made before uniform support do not record their support (they learned the native one)
        if "support" in family and scene.support.to_dict() != family["support"]:
            fail("support", scene.support.to_dict(), "support")
    except KeyError as e:
        raise LearnedModelError(f"learned coarse model ({source}): metadata lacks family field {e}") from None


def uses_object_velocities(meta: dict) -> bool:
    """Whether weights with this metadata take object velocities as inputs (older weights: yes)."""
    value = (meta.get("encoding") or {}).get("object_velocities", True)
    if not isinstance(value, bool):
        raise LearnedModelError(f"metadata encoding.object_velocities is {value!r}, expected true or false")
    return value


def default_weights_path() -> Path:
    """The shipped weights (``config/models``)."""
    try:
        return shipped(f"config/models/{DEFAULT_WEIGHTS}")
    except FileNotFoundError as e:
        raise LearnedModelError(str(e)) from None
