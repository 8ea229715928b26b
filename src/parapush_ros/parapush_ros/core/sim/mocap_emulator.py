"""Mocap as the simulator delivers it, without ROS.

``MocapEmulator`` turns true body poses into what a mocap driver would deliver: samples at a fixed rate with
Gaussian noise, a latency (a sample is delivered ``latency`` seconds after its measurement time, which it carries
as its stamp), random dropouts of a given duration and bodies hidden on request; all randomness is seeded.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ..config import finite, knob, require


@dataclass(frozen=True)
class EmulatedMocapConfig:
    """What the emulated mocap system delivers (``mujoco_sim`` declares the settings as its parameters of the same
    names); the defaults are an OptiTrack system with sub-millimetre noise."""

    pose_rate: float = knob(120.0, "mocap sample rate (Hz)")
    position_noise: float = knob(0.0002, "standard deviation of the planar position noise (m)")
    yaw_noise: float = knob(0.002, "standard deviation of the yaw noise (rad)")
    latency: float = knob(0.005, "delay between a pose's measurement time (its stamp) and its "
                                 "publication (s)")
    dropout_probability: float = knob(0.0, "probability per sample and body that tracking drops out")
    dropout_duration: float = knob(0.1, "duration of a random dropout (s)")
    seed: int = knob(0, "seed of the noise and dropouts")
    clock_offset: float = knob(0.0, "the mocap host's clock minus this host's (s), added to every pose stamp as a "
                                    "mocap PC without clock sync stamps them; may be changed at run time")

    def __post_init__(self):
        require(finite(self.pose_rate) and self.pose_rate > 0.0, "pose_rate", self.pose_rate, "> 0")
        require(finite(self.clock_offset), "clock_offset", self.clock_offset, "finite")
        for name in ("position_noise", "yaw_noise", "latency", "dropout_duration"):
            v = getattr(self, name)
            require(finite(v) and v >= 0.0, name, v, ">= 0")
        p = self.dropout_probability
        require(finite(p) and 0.0 <= p <= 1.0, "dropout_probability", p, "in [0, 1]")


class MocapEmulator:
    """Mocap samples of true poses: rate, noise, latency, dropouts, hidden bodies (see the module docstring)."""

    def __init__(self, bodies, config: EmulatedMocapConfig = EmulatedMocapConfig()):
        self.bodies = list(bodies)
        self.config = config
        self.period = 1.0 / config.pose_rate
        self.position_noise = config.position_noise
        self.yaw_noise = config.yaw_noise
        self.latency = config.latency
        self.dropout_probability = config.dropout_probability
        self.dropout_duration = config.dropout_duration
        self.rng = np.random.default_rng(config.seed)
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
