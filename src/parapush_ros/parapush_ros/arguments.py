"""Argument types of the command line that check their range, so that argparse refuses a bad value in one line
naming the option (exit status 2) before any work starts: a negative count or a zero rate otherwise surfaces
minutes later as an IndexError, a division by zero, or a study directory that remembers the bad setting."""
from __future__ import annotations

import argparse
import math
from pathlib import Path


def _number(kind, low: float, low_inclusive: bool = True, high: float | None = None, high_inclusive: bool = True):
    """An argparse ``type``: ``kind`` (int or float) from ``low`` up to ``high`` (None: no upper bound), each bound
    included or not."""
    bound = f"{'>=' if low_inclusive else '>'} {low:g}" + (
        f" and {'<=' if high_inclusive else '<'} {high:g}" if high is not None else "")
    noun = "a whole number" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        ok = math.isfinite(value) and (value >= low if low_inclusive else value > low) and (
            high is None or (value <= high if high_inclusive else value < high))
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {noun} {bound}, got {text}")
        return value
    parse.__name__ = f"{kind.__name__} {bound}"
    return parse


positive_int = _number(int, 1)  # counts: samples, pushes, repeats, epochs
nonnegative_int = _number(int, 0)  # counts where 0 means "none" or "automatic" (threads: 0 = all cores)
positive_float = _number(float, 0.0, low_inclusive=False)  # durations, rates
nonnegative_float = _number(float, 0.0)  # noise levels; durations where 0 means "no limit"
fraction = _number(float, 0.0, high=1.0)  # shares
relative_spread = _number(float, 0.0, high=1.0, high_inclusive=False)  # relative spreads: x U(1 - s, 1 + s) stays > 0
share = _number(float, 0.0, low_inclusive=False, high=1.0, high_inclusive=False)  # a part of a whole: (0, 1)


def int_at_least(low: int):
    """Counts with a larger minimum than 1 (``demos --count``: one push of each switch count)."""
    return _number(int, low)


def comma_list(item):
    """An argparse ``type``: comma-separated values of type ``item`` ("" = none)."""
    def parse(text: str) -> list:
        return [item(v.strip()) for v in text.split(",") if v.strip()]
    parse.__name__ = f"comma-separated {item.__name__}"
    return parse


# Paths written at the end of a long job are checked before it starts: a file where a directory is wanted (or the
# reverse) would otherwise fail only after the work (a fit, a training run, a benchmark)
def output_dir(text: str) -> str:
    """A directory to write into (created if missing): not an existing file, nor inside one."""
    _no_file_above(Path(text))
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
    return text


def output_file(text: str) -> str:
    """A file to write (its directory created if missing): not an existing directory, nor inside a file."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory (give a file name)")
    _no_file_above(path.parent)
    return text


def _no_file_above(path: Path):
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise argparse.ArgumentTypeError(f"{p} is a file, not a directory")
            return
