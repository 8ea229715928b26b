"""Config dataclasses: each setting written once, with its default, its meaning and its check.

A config is a frozen dataclass. A field made with ``knob(default, "meaning")`` is a *setting*: ``ros/params.py``
declares it as a ROS parameter of the same name (under a namespace where the config says so), so its default and
description live here only. Plain fields (e.g. what a node takes from the scene) are not parameters.
``__post_init__`` validates and raises ``ConfigError`` naming the field (``require`` below), so every check is
written once, next to the setting, and serves the nodes, the benches and the tests alike.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import field


def yaml_problem(e: Exception) -> str:
    """A YAML parser's error in one line, "line L, column C: what" (its own message spans several lines and
    quotes the text)."""
    mark, problem = getattr(e, "problem_mark", None), getattr(e, "problem", None)
    if mark is not None and problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(e).split())


class ConfigError(ValueError):
    """An invalid setting; the message starts with the field's name (``"decay: must be in (0, 1], got 1.5"``)."""

    def __init__(self, name: str, message: str | None = None):
        """``ConfigError("decay", "must be ...")``, or one text that starts with the name: ``ConfigError("decay:
        must be ...")``."""
        if message is None:
            name, _, message = name.partition(": ")
        super().__init__(f"{name}: {message}")
        self.name = name

    def within(self, prefix: str) -> ConfigError:
        """The same error named with ``prefix`` before the field (a config nested under a namespace)."""
        return ConfigError(prefix + self.name, str(self)[len(self.name) + 2:])


def knob(default, description: str):
    """A dataclass field that is a setting: ``default`` and ``description`` become the ROS parameter's."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("knob defaults must be immutable (use a tuple)")
    return field(default=default, metadata={"description": description})


def knobs(cls) -> dict:
    """The settings of config class ``cls``: {name: (default, description)} in field order."""
    return {f.name: (f.default, f.metadata["description"]) for f in dataclasses.fields(cls)
            if "description" in f.metadata}


def from_values(cls, values, prefix: str = "", **given):
    """``cls`` built from ``values`` (a mapping of setting names, e.g. ROS parameters), reading each setting
    ``name`` as ``prefix + name``; missing ones keep their defaults; ``given`` fills fields that are not settings.
    A ``ConfigError`` names the setting as it is spelt in ``values`` (with the prefix)."""
    kwargs = {name: values[prefix + name] for name in knobs(cls) if prefix + name in values}
    try:
        return cls(**kwargs, **given)
    except ConfigError as e:
        raise e.within(prefix) from None


def require(ok: bool, name: str, value, what: str):
    """Raise ``ConfigError`` "name: must be <what>, got <value>" unless ``ok``."""
    if not ok:
        raise ConfigError(name, f"must be {what}, got {value!r}")


def require_each(config, names, ok, what: str):
    """``require(ok(value), name, value, what)`` for each field ``name`` of ``names`` of ``config``."""
    for name in names:
        v = getattr(config, name)
        require(ok(v), name, v, what)


def whole(v) -> bool:
    """An integer (Python's or NumPy's), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
