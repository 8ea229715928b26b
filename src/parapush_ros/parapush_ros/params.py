"""Node parameters: the single source of their names, defaults and meanings.

Nodes declare exactly these (``declare_all``); the YAML files in ``config/`` set a subset of them and a test
checks that every key there is declared here with a matching type.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    default: object
    description: str


PREDICTOR = {
    "scene": Param("obstacle_push", "scene name (config/scenes/<name>.yaml) or path to a scene YAML"),
    "coarse_model": Param("analytical", "default coarse model for Parareal: analytical | learned"),
    "learned_weights": Param("", "weights file for the learned coarse model; empty = the shipped weights"),
    "max_iterations": Param(2, "default Parareal iterations K (requests may override, 1..N)"),
    "tolerance": Param(0.0, "default Parareal tolerance on the change between iterates (m); 0 = run K iterations"),
    "threads": Param(0, "threads for the fine model; 0 = all cores"),
    "frame_id": Param("table", "frame of all states (REP-103 table frame)"),
    "max_speed": Param(0.5, "reject controls faster than this (m/s)"),
    "max_slice_duration": Param(10.0, "reject control durations above this (s)"),
    "max_controls": Param(64, "reject requests with more controls than this"),
    "publish_iterations": Param(True, "publish every Parareal iterate as markers (not only the last)"),
}


def declare_all(node, spec: dict) -> dict:
    """Declare every parameter of ``spec`` on ``node`` and return their current values by name."""
    from rcl_interfaces.msg import ParameterDescriptor  # noqa: PLC0415
    values = {}
    for name, p in spec.items():
        node.declare_parameter(name, p.default, ParameterDescriptor(description=p.description))
        values[name] = node.get_parameter(name).value
    return values
