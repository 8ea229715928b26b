"""Gaussian-process baseline of the push-primitive model (paper 004 Sec. V-A): one exact GP per output.

Library: scikit-learn's ``GaussianProcessRegressor`` (pinned in requirements.txt), chosen by measurement against
gpytorch 1.15.2's exact GP (ARD RBF, Adam 100 iterations, lr 0.1) on 300 training pushes of ``parapush datagen
--primitive`` with raw x, y features, one BLAS thread: scikit-learn fit 13.4 s, held-out position RMSE 1.0 / 0.9
mm, NLL -12.96, 1-sigma coverage 0.66; gpytorch 8.8 s, RMSE 1.6 / 1.6 mm, NLL -13.90, coverage 0.78. scikit-learn
converges its hyper-parameters (L-BFGS on the marginal likelihood, no learning rate or iteration count to tune)
and predicts better means; gpytorch pays off on GPUs or with > 10^4 points, which "a few hundred pushes" never
reach.

Kernel: constant x RBF with one length scale per input (ARD) + white noise; inputs and outputs standardised.
The predictive variance includes the white noise (it is the variance of a new observation, comparable with the
E-MDN's).
"""
from __future__ import annotations

import warnings

import numpy as np


class GPRegressor:
    """``fit(x, y)``, ``predict(x) -> (mean (B, D), variance (B, D))`` in data units."""

    name = "gp"

    def __init__(self, restarts: int = 0, seed: int = 0):
        self.restarts = int(restarts)
        self.seed = int(seed)
        self.models = []
        self.var_scale = None

    def fit(self, x, y):
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 (installed with scikit-learn)
        with threadpool_limits(1):  # BLAS threads on a shared 2-core machine: 600 pushes took 329 s, not 60
            return self._fit(x, y)

    def _fit(self, x, y):
        from sklearn.exceptions import ConvergenceWarning  # noqa: PLC0415
        from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: PLC0415
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel  # noqa: PLC0415
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        self.x_mean, self.x_std = x.mean(0), np.where(x.std(0) > 1e-12, x.std(0), 1.0)
        xs = (x - self.x_mean) / self.x_std
        self.models = []
        for d in range(y.shape[1]):
            kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(np.ones(x.shape[1]), (1e-2, 1e3)) + \
                WhiteKernel(1e-2, (1e-8, 1e1))
            gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=self.restarts,
                                          random_state=self.seed + d)
            with warnings.catch_warnings():  # a length scale at its bound (an input that does not matter) is fine
                warnings.simplefilter("ignore", ConvergenceWarning)
                gp.fit(xs, y[:, d])
            self.models.append(gp)
        self.var_scale = np.ones(y.shape[1])
        return self

    def calibrate(self, x, y) -> np.ndarray:
        """Per-output variance scale fitted on held-out data (as ``EnsembleMDN.calibrate``)."""
        from .ensemble_mdn import ONE_SIGMA  # noqa: PLC0415
        self.var_scale = np.ones(len(self.models))
        mean, var = self.predict(x)
        self.var_scale = np.quantile((np.asarray(y) - mean) ** 2 / np.maximum(var, 1e-300), ONE_SIGMA, axis=0)
        return self.var_scale

    def predict(self, x):
        if not self.models:
            raise ValueError("GP: fit it before predicting")
        xs = (np.asarray(x, dtype=float) - self.x_mean) / self.x_std
        out = [gp.predict(xs, return_std=True) for gp in self.models]
        mean = np.column_stack([m for m, _ in out])
        var = np.column_stack([s ** 2 for _, s in out]) * self.var_scale
        return mean, var
