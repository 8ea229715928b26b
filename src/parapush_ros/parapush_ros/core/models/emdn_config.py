"""The E-MDN's settings (``ensemble_mdn.EMDNConfig``), apart from the model so that a command line can show their
defaults without importing torch."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EMDNConfig:
    """Architecture and training settings. Defaults follow paper 004 Exp. 1 (3 hidden layers of 20, Adam, lr
    0.001, adversarial coefficient 0.005 of the standardised input range) except the batch size and the epochs
    (32 instead of 5, 300 instead of 3000: on our 2-core machines the paper's schedule takes 10x the epochs at 6x the
    steps each; the commands that train the shipped weights set their own, see docs/results/uncertainty.md)."""
    hidden: tuple = (20, 20, 20)
    components: int = 2  # K, mixture components per member
    members: int = 5  # M
    epochs: int = 300
    batch: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.0
    adversarial: float = 0.005  # eps of the fast-gradient-sign example, as a share of the standardised range
    unscaled_inputs: int = 0  # leading input columns passed as they are (sparse features in [0, 1]: standardising
    #                           a rarely active column would blow it up, and a never active one has no scale)
    unscaled_init: float = 0.0  # std of the first-layer weights of the unscaled columns (0: the default init)
    seed: int = 0

    def __post_init__(self):
        self.hidden = tuple(int(h) for h in self.hidden)
        for name, ok in (("hidden", len(self.hidden) >= 1 and min(self.hidden) >= 1),
                         ("components", self.components >= 1), ("members", self.members >= 1),
                         ("epochs", self.epochs >= 0), ("batch", self.batch >= 1),
                         ("lr", self.lr > 0.0), ("weight_decay", self.weight_decay >= 0.0),
                         ("adversarial", self.adversarial >= 0.0)):
            if not ok:
                raise ValueError(f"E-MDN config {name}: invalid value {getattr(self, name)!r}")
