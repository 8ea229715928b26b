"""The network's forward pass: the exported MLP (512-256-128-64, ReLU), float32, batched.

Inference is batched: one float32 forward pass of all gated rows per gate pass (``MLP``: torch
``inference_mode`` on one thread, NumPy for a single row), no per-sample Python. torch is imported when weights
are loaded, never at ``parapush_ros.core`` import time.
"""
from __future__ import annotations

import numpy as np

from .family import F_IN, F_OUT, HIDDEN, LearnedModelError


class MLP:
    """Forward pass of the exported network (normalisation included), float32, on one thread.

    A single row goes through NumPy (least call overhead). More rows go through torch with one intra-op thread
    for the call: OpenBLAS (NumPy) splits even a 2-row product over all cores, and on a machine whose cores are
    busy with fine-model threads, a multi-threaded product of this size waits milliseconds for a free core.
    One thread does ~4 us per row, far below a fine slice; the fine model owns the cores.
    """

    def __init__(self, layers, x_mean, x_std, y_mean, y_std, threads: int = 1):
        self.layers = [(np.ascontiguousarray(w, dtype=np.float32), np.asarray(bias, dtype=np.float32))
                       for w, bias in layers]
        self.x_mean = np.asarray(x_mean, dtype=np.float32)
        self.x_inv_std = (1.0 / np.asarray(x_std, dtype=np.float64)).astype(np.float32)
        self.y_mean = np.asarray(y_mean, dtype=np.float64)
        self.y_std = np.asarray(y_std, dtype=np.float64)
        self.threads = int(threads)
        self._torch = None

    def _torch_layers(self):
        if self._torch is None:
            import torch  # noqa: PLC0415
            self._torch = (torch, [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in self.layers],
                           torch.from_numpy(self.x_mean), torch.from_numpy(self.x_inv_std))
        return self._torch

    def __call__(self, features: np.ndarray) -> np.ndarray:
        if len(features) <= 1:
            return self._numpy(features)
        return self._torch_forward(features)

    def _numpy(self, features):
        h = features.astype(np.float32)
        h -= self.x_mean
        h *= self.x_inv_std
        last = len(self.layers) - 1
        for k, (w, bias) in enumerate(self.layers):
            h = h @ w
            h += bias
            if k < last:
                np.maximum(h, 0.0, out=h)
        return h.astype(np.float64) * self.y_std + self.y_mean

    def _torch_forward(self, features):
        torch, layers, x_mean, x_inv_std = self._torch_layers()
        prev = torch.get_num_threads()
        if prev != self.threads:
            torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                h = (torch.from_numpy(features.astype(np.float32)) - x_mean) * x_inv_std
                last = len(layers) - 1
                for k, (w, bias) in enumerate(layers):
                    h = torch.addmm(bias, h, w)
                    if k < last:
                        h.relu_()
                out = h.numpy()
        finally:
            if prev != self.threads:
                torch.set_num_threads(prev)
        return out.astype(np.float64) * self.y_std + self.y_mean


def mlp_from_state_dict(state: dict, norm: dict) -> MLP:
    """MLP from a torch ``nn.Sequential`` state dict (Linear layers at even indices) and the norm stats."""
    keys = sorted({k.rsplit(".", 1)[0] for k in state}, key=lambda s: int(s.split(".")[-1]))
    layers = [(_np(state[f"{k}.weight"]).T, _np(state[f"{k}.bias"])) for k in keys]
    sizes = [layers[0][0].shape[0]] + [w.shape[1] for w, _ in layers]
    if sizes != [F_IN, *HIDDEN, F_OUT]:
        raise LearnedModelError(f"network layer sizes {sizes} differ from the expected {[F_IN, *HIDDEN, F_OUT]}")
    return MLP(layers, _np(norm["x_mean"]), _np(norm["x_std"]), _np(norm["y_mean"]), _np(norm["y_std"]))


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
