"""The learned coarse model of paper 001: an MLP (512-256-128-64, ReLU) that predicts one slice of pushing.

By concern: ``family.py`` (the scenes one set of weights serves, the file format, the shipped weights),
``encoding.py`` (state -> network rows, the gate), ``network.py`` (the forward pass), ``model.py``
(``LearnedCoarseModel``, the propagator). Everything is importable from here.
"""
from .encoding import (_SLOT_FLAG, _SLOT_OMEGA, _SLOT_ORDER_COLS, _SLOT_REL, _SLOT_VEL, _VEC_COLS, CHAIN_MARGIN,
                       CONTEXT_RADIUS, GATE_MARGIN, GATE_OMEGA, GATE_SPEED, MIRROR_IN, MIRROR_OUT, MOVE_EPS,
                       OBJECT_VELOCITY_COLS, PARKED, SLOT_ORDER_MIN_WEIGHT, SLOT_ORDER_SOFTNESS, SLOT_ORDERS, U_EPS,
                       Rows, _split, apply_outputs, encode, gate, mirror, slot_order_columns, slot_order_weights,
                       swept_reach, targets)
from .family import (DEFAULT_WEIGHTS, F_IN, F_OUT, FAMILY_BASE_SCENE, FORMAT, HIDDEN, MAX_OBJECTS, N_OTHERS,
                     LearnedModelError, check_family, default_weights_path, family_metadata, family_scene,
                     uses_object_velocities)
from .model import LearnedCoarseModel
from .network import MLP, mlp_from_state_dict

__all__ = [
    "CHAIN_MARGIN", "CONTEXT_RADIUS", "DEFAULT_WEIGHTS", "FAMILY_BASE_SCENE", "FORMAT", "F_IN", "F_OUT", "GATE_MARGIN",
    "GATE_OMEGA", "GATE_SPEED", "HIDDEN", "MAX_OBJECTS", "MIRROR_IN", "MIRROR_OUT", "MLP", "MOVE_EPS", "N_OTHERS",
    "OBJECT_VELOCITY_COLS", "PARKED", "SLOT_ORDERS", "SLOT_ORDER_MIN_WEIGHT", "SLOT_ORDER_SOFTNESS", "U_EPS",
    "LearnedCoarseModel", "LearnedModelError", "Rows", "_SLOT_FLAG", "_SLOT_OMEGA", "_SLOT_ORDER_COLS", "_SLOT_REL",
    "_SLOT_VEL", "_VEC_COLS", "_split", "apply_outputs", "check_family", "default_weights_path", "encode",
    "family_metadata", "family_scene", "gate", "mirror", "mlp_from_state_dict", "slot_order_columns",
    "slot_order_weights", "swept_reach", "targets", "uses_object_velocities",
]
