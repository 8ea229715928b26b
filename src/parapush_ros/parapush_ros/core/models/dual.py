"""Forward-mode automatic differentiation on NumPy batches: enough of it for the quasi-static model and its costs.

A ``Dual`` holds values ``val`` (shape ``(N,)``, or ``(N, P)`` for P values per row, which broadcast as NumPy
arrays do) and derivatives ``der`` (``val.shape + (K,)``) with respect to K seeded inputs. The dynamics are written
once, on Duals, and give both the next state and its exact Jacobians (A, B) for DDP; discrete choices (contact face,
mode) are taken on the values with ``where``, as a hybrid model's derivative is the derivative of the mode it is in.
Hand-derived Jacobians of the motion cone would be a second copy of the model to keep in step; finite differences
blur the mode boundaries and cost K extra evaluations.
"""
from __future__ import annotations

import numpy as np


class Dual:
    __slots__ = ("der", "val")
    __array_priority__ = 100.0  # ndarray (op) Dual defers to Dual's reflected operators

    def __init__(self, val, der):
        self.val = val
        self.der = der

    @staticmethod
    def seed(values: np.ndarray) -> list[Dual]:
        """One Dual per column of ``values`` (N, K), each the derivative of itself: the K independent inputs."""
        n, k = values.shape
        eye = np.eye(k)
        return [Dual(values[:, i].copy(), np.broadcast_to(eye[i], (n, k)).copy()) for i in range(k)]

    @staticmethod
    def const(val, like: Dual) -> Dual:
        return Dual(np.broadcast_to(np.asarray(val, dtype=float), like.val.shape).copy(), np.zeros_like(like.der))

    def __add__(self, o):
        if isinstance(o, Dual):
            return Dual(self.val + o.val, self.der + o.der)
        return Dual(self.val + o, self.der)

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, Dual):
            return Dual(self.val - o.val, self.der - o.der)
        return Dual(self.val - o, self.der)

    def __rsub__(self, o):
        return Dual(o - self.val, -self.der)

    def __neg__(self):
        return Dual(-self.val, -self.der)

    def __mul__(self, o):
        if isinstance(o, Dual):
            return Dual(self.val * o.val, self.der * o.val[..., None] + o.der * self.val[..., None])
        o = np.asarray(o, dtype=float)
        return Dual(self.val * o, self.der * (o[..., None] if o.ndim else o))

    __rmul__ = __mul__

    def __truediv__(self, o):
        if isinstance(o, Dual):
            inv = 1.0 / o.val
            return Dual(self.val * inv, (self.der - o.der * (self.val * inv)[..., None]) * inv[..., None])
        return self * (1.0 / np.asarray(o, dtype=float))

    def __rtruediv__(self, o):
        inv = 1.0 / self.val
        return Dual(o * inv, -self.der * (o * inv * inv)[..., None])


def sin(a: Dual) -> Dual:
    return Dual(np.sin(a.val), a.der * np.cos(a.val)[..., None])


def cos(a: Dual) -> Dual:
    return Dual(np.cos(a.val), -a.der * np.sin(a.val)[..., None])


def sqrt(a: Dual) -> Dual:
    r = np.sqrt(a.val)
    return Dual(r, a.der * (0.5 / np.maximum(r, 1e-300))[..., None])


def arctan2(y, x) -> Dual:
    """atan2(y, x) of Duals (or a Dual and a constant): NumPy's name, so ``ops.arctan2`` serves both."""
    yv, xv = (a.val if isinstance(a, Dual) else np.asarray(a, dtype=float) for a in (y, x))
    r2 = np.maximum(xv * xv + yv * yv, 1e-300)
    like = y if isinstance(y, Dual) else x
    dy = y.der if isinstance(y, Dual) else np.zeros_like(like.der)
    dx = x.der if isinstance(x, Dual) else np.zeros_like(like.der)
    return Dual(np.arctan2(yv, xv), (dy * xv[..., None] - dx * yv[..., None]) / r2[..., None])


def where(mask: np.ndarray, a, b) -> Dual:
    """Per-row choice between two Duals (or a Dual and a constant)."""
    if not isinstance(a, Dual):
        a = Dual.const(a, b)
    if not isinstance(b, Dual):
        b = Dual.const(b, a)
    return Dual(np.where(mask, a.val, b.val), np.where(mask[..., None], a.der, b.der))


def psum(a):
    """Sum over the last axis of the values (a Dual's (N, P) -> (N,), or a plain array's)."""
    if isinstance(a, Dual):
        return Dual(a.val.sum(-1), a.der.sum(-2))
    return np.sum(a, -1)


def column(a):
    """(N,) -> (N, 1), to broadcast against (N, P) (a Dual or a plain array)."""
    if isinstance(a, Dual):
        return Dual(a.val[:, None], a.der[:, None, :])
    return np.asarray(a)[:, None]


def stack(duals: list[Dual]) -> tuple[np.ndarray, np.ndarray]:
    """(N, M) values and (N, M, K) Jacobian of M Duals."""
    return np.stack([d.val for d in duals], -1), np.stack([d.der for d in duals], -2)
