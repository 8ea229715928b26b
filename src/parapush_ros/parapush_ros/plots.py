"""Figures the runtime writes too (``parapush sim``'s executed path) and every tool: matplotlib without a display,
imported only when a figure is drawn, so a robot that never plots does not need it."""
from __future__ import annotations

from pathlib import Path


def pyplot():
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def save_figure(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
    print(f"wrote {path}")
