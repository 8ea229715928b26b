"""The one lookup of shipped files: scenes, cost weights, model weights, launch files, the RViz configuration.

Installed (colcon), they lie in the package's share directory; run from the source tree (plain Python, tests), in
the repository's ``config/``, ``launch/`` and ``rviz/``. Every part of parapush finds them here.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = "parapush_ros"


def _roots():
    """Candidate share directories, installed first: where ``config/`` (and, in the source tree, ``launch/``) are."""
    try:
        from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415
        yield Path(get_package_share_directory(PACKAGE))
    except Exception:  # noqa: BLE001 - ament index absent (plain Python) or package not installed
        pass
    for parent in Path(__file__).resolve().parents:
        if (parent / "config").is_dir() and (parent / "launch").is_dir():
            yield parent


def shipped(relative: str) -> Path:
    """The shipped file or directory ``relative`` (e.g. ``config/scenes``, ``config/costs.yaml``): in the
    installed share directory when it is there, else in the source tree. FileNotFoundError naming it otherwise."""
    for root in _roots():
        if (root / relative).exists():
            return root / relative
    raise FileNotFoundError(f"cannot find the shipped {relative} (neither installed nor in the source tree)")


def share_dir() -> Path:
    """Where launch/, config/ and rviz/ are: the installed share directory, else the source tree."""
    return shipped("config").parent
