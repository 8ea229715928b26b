"""Mocap as the simulator delivers it, without ROS.

``MocapEmulator`` turns true body poses into what a mocap driver would deliver: samples at a fixed rate with
Gaussian noise, a latency (a sample is delivered ``latency`` seconds after its measurement time, which it carries
as its stamp), random dropouts of a given duration and bodies hidden on request; all randomness is seeded.
"""
from __future__ import annotations

import heapq
import math

import numpy as np


class MocapEmulator:
    """Mocap samples of true poses: rate, noise, latency, dropouts, hidden bodies (see the module docstring)."""

    def __init__(self, bodies, rate: float = 120.0, position_noise: float = 0.0, yaw_noise: float = 0.0,
                 latency: float = 0.0, dropout_probability: float = 0.0, dropout_duration: float = 0.1,
                 seed: int = 0):
        checks = {"pose_rate": (rate, rate > 0.0), "position_noise": (position_noise, position_noise >= 0.0),
                  "yaw_noise": (yaw_noise, yaw_noise >= 0.0), "latency": (latency, latency >= 0.0),
                  "dropout_probability": (dropout_probability, 0.0 <= dropout_probability <= 1.0),
                  "dropout_duration": (dropout_duration, dropout_duration >= 0.0)}
        for name, (value, ok) in checks.items():
            if not (math.isfinite(value) and ok):
                raise ValueError(f"{name}: invalid value {value}")
        self.bodies = list(bodies)
        self.period = 1.0 / rate
        self.position_noise = position_noise
        self.yaw_noise = yaw_noise
        self.latency = latency
        self.dropout_probability = dropout_probability
        self.dropout_duration = dropout_duration
        self.rng = np.random.default_rng(seed)
        self.hidden: set = set()
        self._dropped_until = {b: -math.inf for b in self.bodies}
        self._queue = []  # heap of (delivery time, seq, body, stamp, position, quaternion)
        self._seq = 0
        self.next_sample = 0.0

    def sample(self, t: float, poses: dict):
        """Measure ``poses`` ({body: (position, quaternion)}, table frame) at time ``t``."""
        for body in self.bodies:
            if body in self.hidden or body not in poses:
                continue
            if t < self._dropped_until[body]:
                continue
            if self.dropout_probability > 0.0 and self.rng.random() < self.dropout_probability:
                self._dropped_until[body] = t + self.dropout_duration
                continue
            p, q = poses[body]
            p = np.array(p, dtype=float)
            q = np.array(q, dtype=float)
            if self.position_noise > 0.0:
                p[:2] += self.rng.normal(0.0, self.position_noise, 2)
            if self.yaw_noise > 0.0:
                half = 0.5 * self.rng.normal(0.0, self.yaw_noise)
                qz = np.array([0.0, 0.0, math.sin(half), math.cos(half)])
                x1, y1, z1, w1 = qz
                x2, y2, z2, w2 = q
                q = np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                              w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])
            heapq.heappush(self._queue, (t + self.latency, self._seq, body, t, p, q))
            self._seq += 1

    def due(self, t: float) -> list:
        """Samples whose delivery time has come: [(body, stamp, position, quaternion)] in delivery order."""
        out = []
        while self._queue and self._queue[0][0] <= t + 1e-12:
            _, _, body, stamp, p, q = heapq.heappop(self._queue)
            out.append((body, stamp, p, q))
        return out

    def clear(self):
        self._queue.clear()
