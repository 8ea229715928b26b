"""Ensemble of mixture density networks (E-MDN, paper 004 Sec. V-A): a regression model that knows where it is
unsure.

Each member is an MDN (Bishop): an MLP (tanh hidden layers) whose outputs are, for K Gaussian components with
diagonal covariance over the D outputs, the mixture weights (softmax: positive, summing to one), the means
(linear) and the variances (softplus plus a floor: positive; the paper's exponential overflows early in training,
softplus is what the deep-ensembles paper uses). A member's mean and variance are those of its mixture:

    mu_m = sum_k pi_k mu_k,     var_m = sum_k pi_k (sigma_k^2 + mu_k^2) - mu_m^2

and the ensemble of M members, trained from different random initialisations on differently shuffled batches,
is the uniform mixture of the members (paper eqs. 5-6, Lakshminarayanan et al.):

    mu = (1/M) sum_m mu_m,      var = (1/M) sum_m (var_m + mu_m^2) - mu^2

so ``var`` holds both the noise each member learned (aleatoric) and the members' disagreement, which grows away
from the data (epistemic). Training minimises each member's mixture negative log-likelihood plus the same loss at
an adversarial input x + eps sign(grad_x NLL) (fast gradient sign, as in deep ensembles), which smooths the
likelihood around the data.

Why one batched module instead of M networks: the weights of all members are stacked ((M, in, out) tensors), so
one ``einsum`` evaluates every member on a batch and training steps all members at once; a planner that rolls out
thousands of samples pays one forward pass. Inputs and outputs are standardised with the training set's mean and
standard deviation (stored with the weights); a per-output variance scale ``var_scale`` fitted on held-out data
(``calibrate``) makes the 1-sigma coverage honest without changing where the variance is high.

torch is imported by this module; ``parapush_ros.core`` does not import it at package import time.
"""
from __future__ import annotations

import math
from itertools import pairwise
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from .emdn_config import EMDNConfig

FORMAT = "parapush-emdn/1"
VAR_FLOOR = 1e-6  # in standardised output units: keeps the NLL finite where the data are noise free
LOG_2PI = math.log(2.0 * math.pi)
ONE_SIGMA = math.erf(1.0 / math.sqrt(2.0))  # 0.683: share of a Gaussian within one sigma


class _StackedLinear(nn.Module):
    """M independent linear layers applied in one einsum: x (M, B, i) -> (M, B, o)."""

    def __init__(self, members: int, n_in: int, n_out: int, generator: torch.Generator):
        super().__init__()
        bound = 1.0 / math.sqrt(n_in)  # torch's nn.Linear default, drawn per member
        self.weight = nn.Parameter((torch.rand(members, n_in, n_out, generator=generator) * 2 - 1) * bound)
        self.bias = nn.Parameter((torch.rand(members, 1, n_out, generator=generator) * 2 - 1) * bound)

    def forward(self, x):
        return torch.einsum("mbi,mio->mbo", x, self.weight) + self.bias


class StackedMDN(nn.Module):
    """M MDN members as one module; ``forward`` returns (log pi (M, B, K), mu (M, B, K, D), var (M, B, K, D))."""

    def __init__(self, n_in: int, n_out: int, cfg: EMDNConfig):
        super().__init__()
        g = torch.Generator().manual_seed(int(cfg.seed))
        sizes = (n_in,) + cfg.hidden
        self.hidden = nn.ModuleList(_StackedLinear(cfg.members, a, b, g) for a, b in pairwise(sizes))
        if cfg.unscaled_inputs and cfg.unscaled_init > 0.0:
            with torch.no_grad():
                w = self.hidden[0].weight
                w[:, :cfg.unscaled_inputs] = torch.randn(w[:, :cfg.unscaled_inputs].shape, generator=g) * \
                    cfg.unscaled_init
        self.K, self.D = cfg.components, n_out
        self.head = _StackedLinear(cfg.members, sizes[-1], cfg.components * (1 + 2 * n_out), g)

    def forward(self, x):
        h = x
        for layer in self.hidden:
            h = torch.tanh(layer(h))
        out = self.head(h)
        M, B, K, D = out.shape[0], out.shape[1], self.K, self.D
        log_pi = torch.log_softmax(out[..., :K], dim=-1)
        mu = out[..., K:K + K * D].reshape(M, B, K, D)
        var = nn.functional.softplus(out[..., K + K * D:].reshape(M, B, K, D)) + VAR_FLOOR
        return log_pi, mu, var


def mixture_nll(log_pi, mu, var, y):
    """Negative log-likelihood of y (M, B, D) under each member's mixture, (M, B)."""
    log_n = -0.5 * (LOG_2PI + torch.log(var) + (y.unsqueeze(2) - mu) ** 2 / var).sum(-1)  # (M, B, K)
    return -torch.logsumexp(log_pi + log_n, dim=-1)


def member_moments(log_pi, mu, var):
    """Mean and variance (M, B, D) of each member's mixture."""
    pi = log_pi.exp().unsqueeze(-1)
    mean = (pi * mu).sum(2)
    second = (pi * (var + mu ** 2)).sum(2)
    return mean, torch.clamp(second - mean ** 2, min=0.0)


def ensemble_moments(mean_m, var_m):
    """Eqs. 5-6: mean and variance (B, D) of the uniform mixture of the members (M, B, D)."""
    mean = mean_m.mean(0)
    var = (var_m + mean_m ** 2).mean(0) - mean ** 2
    return mean, torch.clamp(var, min=0.0)


@dataclass
class Normaliser:
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray

    @classmethod
    def fit(cls, x, y, unscaled_inputs: int = 0):
        def std(a):
            s = a.std(0)
            return np.where(s > 1e-12, s, 1.0)
        x_mean, x_std = x.mean(0), std(x)
        x_mean[:unscaled_inputs], x_std[:unscaled_inputs] = 0.0, 1.0
        return cls(x_mean, x_std, y.mean(0), std(y))


@dataclass
class TrainReport:
    epochs: int = 0
    steps: int = 0
    final_nll: float = float("nan")  # mean member NLL on the training set (standardised units), last epoch
    history: list = field(default_factory=list)  # mean training loss per epoch


class EnsembleMDN:
    """Numpy in, numpy out: ``predict(x)`` -> (mean (B, D), variance (B, D)) in the data's units."""

    def __init__(self, n_in: int, n_out: int, cfg: EMDNConfig | None = None, norm: Normaliser | None = None):
        self.cfg = cfg or EMDNConfig()
        self.n_in, self.n_out = int(n_in), int(n_out)
        self.net = StackedMDN(self.n_in, self.n_out, self.cfg)
        self.norm = norm or Normaliser(np.zeros(n_in), np.ones(n_in), np.zeros(n_out), np.ones(n_out))
        self.var_scale = np.ones(n_out)

    # ------------------------------------------------------------------------------------------------- training
    def fit(self, x, y, progress=None) -> TrainReport:
        """Train all members on (x (N, n_in), y (N, n_out)); each member sees its own shuffle of the data.
        ``progress``: optional callable(epoch, loss) (e.g. a tqdm update)."""
        x, y = self._check_xy(x, y)
        cfg = self.cfg
        self.norm = Normaliser.fit(x, y, cfg.unscaled_inputs)
        xs = torch.as_tensor((x - self.norm.x_mean) / self.norm.x_std, dtype=torch.float32)
        ys = torch.as_tensor((y - self.norm.y_mean) / self.norm.y_std, dtype=torch.float32)
        dense = xs[:, cfg.unscaled_inputs:]
        eps = cfg.adversarial * float((dense.max(0).values - dense.min(0).values).mean()) \
            if len(xs) > 1 and dense.shape[1] else 0.0
        opt = torch.optim.Adam(self.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        g = torch.Generator().manual_seed(int(cfg.seed) + 1)
        N, M = len(xs), cfg.members
        batch = min(cfg.batch, N)
        steps_per_epoch = max(1, N // batch)
        report = TrainReport()
        self.net.train()
        for epoch in range(cfg.epochs):
            perm = torch.argsort(torch.rand(M, N, generator=g), dim=1)  # one shuffle per member
            total = 0.0
            for s in range(steps_per_epoch):
                idx = perm[:, s * batch:(s + 1) * batch]
                xb, yb = xs[idx], ys[idx]  # (M, b, n_in), (M, b, n_out)
                if eps > 0.0:
                    xb = xb.clone().requires_grad_(True)
                    loss = mixture_nll(*self.net(xb), yb).mean()
                    (grad,) = torch.autograd.grad(loss, xb, retain_graph=True)
                    step = grad.sign()
                    step[..., :cfg.unscaled_inputs] = 0.0  # sparse features are an encoding: not perturbed
                    x_adv = (xb + eps * step).detach()
                    loss = loss + mixture_nll(*self.net(x_adv), yb).mean()
                else:
                    loss = mixture_nll(*self.net(xb), yb).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach())
                report.steps += 1
            report.history.append(total / steps_per_epoch)
            report.epochs = epoch + 1
            if progress is not None:
                progress(epoch, report.history[-1])
        self.net.eval()
        with torch.no_grad():
            report.final_nll = float(mixture_nll(*self.net(xs.expand(M, -1, -1)), ys.expand(M, -1, -1)).mean())
        return report

    def calibrate(self, x, y) -> np.ndarray:
        """Fit the per-output variance scale on held-out (x, y): s_d = the 68.3 % quantile of r_d^2 / var_d, so that
        68.3 % of the held-out residuals lie within one sigma. (The Gaussian maximum-likelihood scale, the mean of
        r^2 / var, is pulled up by the heavy tails of pushing residuals: 1-sigma coverage 0.83 for the GP.)
        Returns it (also stored in ``var_scale``)."""
        x, y = self._check_xy(x, y)
        self.var_scale = np.ones(self.n_out)
        mean, var = self.predict(x)
        self.var_scale = np.quantile((y - mean) ** 2 / np.maximum(var, 1e-300), ONE_SIGMA, axis=0)
        return self.var_scale

    # ------------------------------------------------------------------------------------------------ inference
    @torch.inference_mode()
    def predict(self, x, members: bool = False):
        """Mean and variance (B, n_out) of the ensemble at inputs x (B, n_in) (eqs. 5-6), in data units.
        ``members=True`` also returns each member's mean and variance (M, B, n_out)."""
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.n_in:
            raise ValueError(f"E-MDN input must be (B, {self.n_in}), got {x.shape}")
        xs = torch.as_tensor((x - self.norm.x_mean) / self.norm.x_std, dtype=torch.float32)
        mean_m, var_m = member_moments(*self.net(xs.expand(self.cfg.members, -1, -1)))
        mean, var = ensemble_moments(mean_m, var_m)
        scale_y = self.norm.y_std
        mean = mean.double().numpy() * scale_y + self.norm.y_mean
        var = var.double().numpy() * scale_y ** 2 * self.var_scale
        if members:
            return (mean, var, mean_m.double().numpy() * scale_y + self.norm.y_mean,
                    var_m.double().numpy() * scale_y ** 2)
        return mean, var

    def __call__(self, x):
        return self.predict(x)

    # ---------------------------------------------------------------------------------------------------- I/O
    def state(self) -> dict:
        """Everything needed to rebuild the model (torch.save-able; small: no optimiser state)."""
        return {"format": FORMAT, "n_in": self.n_in, "n_out": self.n_out, "config": asdict(self.cfg),
                "norm": {k: np.asarray(v).tolist() for k, v in asdict(self.norm).items()},
                "var_scale": self.var_scale.tolist(),
                "weights": {k: v.detach().clone() for k, v in self.net.state_dict().items()}}

    @classmethod
    def from_state(cls, state: dict, source: str = "<memory>") -> EnsembleMDN:
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"{source}: not an E-MDN (format {got!r}, expected {FORMAT!r})")
        cfg = EMDNConfig(**state["config"])
        norm = Normaliser(**{k: np.asarray(v, dtype=float) for k, v in state["norm"].items()})
        model = cls(state["n_in"], state["n_out"], cfg, norm)
        model.net.load_state_dict(state["weights"])
        model.net.eval()
        model.var_scale = np.asarray(state["var_scale"], dtype=float)
        return model

    def save(self, path) -> None:
        torch.save(self.state(), path)

    @classmethod
    def load(cls, path) -> EnsembleMDN:
        return cls.from_state(torch.load(path, map_location="cpu", weights_only=True), str(path))

    def _check_xy(self, x, y):
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.n_in or y.ndim != 2 or y.shape[1] != self.n_out or len(x) != len(y):
            raise ValueError(f"E-MDN data must be x (N, {self.n_in}) and y (N, {self.n_out}), got {x.shape} and "
                             f"{y.shape}")
        if len(x) == 0 or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise ValueError("E-MDN data must be non-empty and finite")
        return x, y


# ----------------------------------------------------------------------------------------- evaluation helpers
def gaussian_nll(y, mean, var) -> float:
    """Mean per-sample negative log-likelihood (nats, summed over outputs) of y under N(mean, diag(var))."""
    var = np.maximum(var, 1e-300)
    return float(np.mean(0.5 * (LOG_2PI + np.log(var) + (y - mean) ** 2 / var).sum(-1)))


def coverage(y, mean, var, k: float = 1.0) -> float:
    """Share of (sample, output) pairs with |y - mean| <= k sigma: 0.683 (k = 1) and 0.954 (k = 2) when the
    predicted variance is calibrated (per coordinate, so the goal 0.6-0.75 is independent of the output count)."""
    return float(np.mean(np.abs(y - mean) <= k * np.sqrt(var)))
