"""The learned coarse model as an ensemble that knows where it is unsure (paper 004 on paper 001's model).

Same encoding, gate, symmetry, soft slot order and pusher as ``LearnedCoarseModel`` (one network row per object
that may move, 1..4 cylinders of the ``four_cylinders`` family); the row -> output map is an ensemble of mixture
density networks (``core/models/ensemble_mdn.py``: M members, stacked, eqs. 5-6) instead of one MLP, so every
prediction comes with a variance: ``propagate_with_variance(x, u, dt) -> (states, variance)``.

How a row's output variance becomes the state's: the mean is the mean of the row and its mirror image and the
blend over slot orders, as in the MLP model; the variance is that of the same mixture (the members' variance
plus the spread of the blended means). Position outputs are in the row's frame (x along u); their variance is
rotated into the table frame keeping only the diagonal (var_x = c^2 v_fx + s^2 v_fy, var_y = s^2 v_fx + c^2 v_fy).
Objects the gate leaves out keep their pose (variance 0); the pusher follows its servo exactly (variance 0).
Within one ``propagate`` of several slices, pose variances add up (``base.rollout_with_variance`` does the same
across calls).

Weights: ``config/models/learned_ensemble.pt`` (format ``parapush-learned-ensemble/1``: the E-MDN's state plus the
family metadata), made with ``parapush train-ensemble``.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ...scene.assets import shipped
from ..base import batch_arguments
from .encoding import _SLOT_ORDER_COLS, MIRROR_IN, MIRROR_OUT, SLOT_ORDER_MIN_WEIGHT, Rows, slot_order_weights
from .family import F_IN, F_OUT, LearnedModelError, read_weights_file
from .model import LearnedCoarseModel

FORMAT = "parapush-learned-ensemble/1"
DEFAULT_WEIGHTS = "learned_ensemble.pt"


def default_weights_path() -> Path:
    try:
        return shipped(f"config/models/{DEFAULT_WEIGHTS}")
    except FileNotFoundError as e:
        raise LearnedModelError(str(e)) from None


def _mix(means, variances, weights):
    """Mean and variance of a mixture: ``means``/``variances`` (J, R, F), ``weights`` (J, R) summing to 1."""
    w = weights[..., None]
    mean = (w * means).sum(0)
    var = (w * (variances + means ** 2)).sum(0) - mean ** 2
    return mean, np.maximum(var, 0.0)


class LearnedEnsembleModel(LearnedCoarseModel):
    """C(x, u, dt) with its variance, for one scene of the trained family."""

    name = "learned_ensemble"

    def __init__(self, scene, emdn, meta: dict, source: str = "<memory>", **kwargs):
        if emdn.n_in != F_IN or emdn.n_out != F_OUT:
            raise LearnedModelError(f"learned ensemble ({source}): E-MDN maps {emdn.n_in} -> {emdn.n_out}, the "
                                    f"encoding needs {F_IN} -> {F_OUT}")
        # the per-slice variance being collected by _slice (set by propagate_with_variance), per thread: a plain
        # propagate on another thread must not see (or add to) it
        self._collecting = threading.local()
        super().__init__(scene, emdn, meta, source=source, **kwargs)
        self.emdn = emdn

    @property
    def _var(self):
        return getattr(self._collecting, "var", None)

    @_var.setter
    def _var(self, value):
        self._collecting.var = value

    @classmethod
    def load(cls, scene, path=None, **kwargs) -> LearnedEnsembleModel:
        path = Path(path) if path else default_weights_path()
        blob = read_weights_file(path, FORMAT, ("emdn", "meta"), "learned ensemble")
        from ..ensemble_mdn import EnsembleMDN  # noqa: PLC0415 (torch: read_weights_file found it)
        try:
            emdn = EnsembleMDN.from_state(blob["emdn"], str(path))
        except (ValueError, KeyError, RuntimeError) as e:
            raise LearnedModelError(f"{path}: {e}") from None
        return cls(scene, emdn, blob["meta"], source=path.name, **kwargs)

    # ------------------------------------------------------------------------------------------ propagation
    def propagate_with_variance(self, x, u, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(B, D) states after ``dt`` and the variance of each coordinate (B, D)."""
        x, u = batch_arguments(x, u, self.layout.dim, "coarse model")
        nq = self.layout.n_q
        total = np.zeros_like(x)
        for _ in range(self._steps(dt)):
            self._var = np.zeros_like(x)
            try:
                x = self._slice(x, u)
            finally:
                var, self._var = self._var, None
            var[:, :nq] += total[:, :nq]
            total = var
        return x, total

    def _network(self, features):
        mean, var = self._network_moments(features)
        return mean if self._var is None else (mean, var)

    def _emdn(self, features):
        """The E-MDN on one torch thread (as ``MLP``): its products are tiny, and on a machine whose cores are busy
        (the fine model's threads) a multi-threaded call waits milliseconds for a free core."""
        import torch  # noqa: PLC0415
        prev = torch.get_num_threads()
        if prev != 1:
            torch.set_num_threads(1)
        try:
            return self.emdn.predict(features)
        finally:
            if prev != 1:
                torch.set_num_threads(prev)

    def _network_moments(self, features):
        if not self.symmetric:
            return self._emdn(features)
        R = len(features)
        m, v = self._emdn(np.concatenate([features, features * MIRROR_IN]))
        return _mix(np.stack([m[:R], m[R:] * MIRROR_OUT]), np.stack([v[:R], v[R:]]), np.full((2, R), 0.5))

    def _predict(self, features):
        """The MLP model's blend over soft slot orders, as a mixture (mean and variance) when collecting."""
        if self._var is None:
            return super()._predict(features)
        if self.slot_order_softness == 0.0:
            return self._network_moments(features)
        w = slot_order_weights(features, self.slot_order_softness)
        w = np.where(w > SLOT_ORDER_MIN_WEIGHT, w, 0.0)
        w /= w.sum(axis=0)
        k, r = np.nonzero(w)
        if len(r) == len(features) and not k.any():
            return self._network_moments(features)
        m, v = self._network_moments(features[r[:, None], _SLOT_ORDER_COLS[k]])
        wk = w[k, r][:, None]
        mean = np.zeros((len(features), F_OUT))
        second = np.zeros((len(features), F_OUT))
        np.add.at(mean, r, wk * m)
        np.add.at(second, r, wk * (v + m ** 2))
        return mean, np.maximum(second - mean ** 2, 0.0)

    def _apply(self, rows: Rows, out, y):
        if self._var is None:
            return super()._apply(rows, out, y)
        mean, var = y
        super()._apply(rows, out, mean)
        nq = self.layout.n_q
        c2, s2 = rows.cos ** 2, rows.sin ** 2
        b, col = rows.b, 2 + 3 * rows.i
        self._var[b, col] += c2 * var[:, 0] + s2 * var[:, 1]
        self._var[b, col + 1] += s2 * var[:, 0] + c2 * var[:, 1]
        self._var[b, col + 2] += var[:, 2]
        col = nq + 2 + 3 * rows.i
        self._var[b, col] = c2 * var[:, 3] + s2 * var[:, 4]
        self._var[b, col + 1] = s2 * var[:, 3] + c2 * var[:, 4]
        self._var[b, col + 2] = var[:, 5]
