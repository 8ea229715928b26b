"""Data generation and training of the learned coarse model (``parapush datagen``, ``parapush train``).

``datagen`` needs only MuJoCo; ``train`` imports torch when it runs. The model itself is ``core/models/learned/``.
"""
from __future__ import annotations

import subprocess
from pathlib import Path


def version_string() -> str:
    """``parapush_ros.__version__`` plus ``git describe`` of the source tree when available (provenance of data
    and weights)."""
    from ... import __version__  # noqa: PLC0415
    try:
        d = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=Path(__file__).resolve().parent,
                           capture_output=True, text=True, timeout=5)
        if d.returncode == 0 and d.stdout.strip():
            return f"{__version__}+git.{d.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__
