"""E-MDN (paper 004 eqs. 5-6) on a small synthetic 1-D problem with a gap in the data: seeded, a few seconds."""
import numpy as np
import pytest
import torch

from parapush_ros.core.models.ensemble_mdn import EMDNConfig, EnsembleMDN, coverage, gaussian_nll


def _data(rng, n, noise=0.1):
    x = rng.uniform(-1.0, 1.0, n)
    x = x[np.abs(x) > 0.35]  # the gap: no data in (-0.35, 0.35)
    return x[:, None], (np.sin(3.0 * x) + rng.normal(0.0, noise, len(x)))[:, None]


@pytest.fixture(scope="module")
def trained():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    train, val, test = _data(rng, 300), _data(rng, 600), _data(rng, 600)
    model = EnsembleMDN(1, 1, EMDNConfig(members=5, components=2, epochs=60, seed=0))
    report = model.fit(*train)
    return model, report, val, test


def test_variance_is_higher_in_the_gap(trained):
    model, report, _, _ = trained
    assert report.epochs == 60 and np.isfinite(report.final_nll)
    inside = np.linspace(-0.2, 0.2, 41)[:, None]
    outside = np.concatenate([np.linspace(-0.9, -0.5, 21), np.linspace(0.5, 0.9, 21)])[:, None]
    ratio = model.predict(inside)[1].mean() / model.predict(outside)[1].mean()
    assert ratio >= 3.0


def test_mean_fits_and_calibrated_one_sigma_coverage(trained):
    model, _, val, (xt, yt) = trained
    mean, var = model.predict(xt)
    assert np.sqrt(np.mean((mean - np.sin(3.0 * xt)) ** 2)) < 0.08  # noise is 0.1
    scale = model.calibrate(*val)
    assert scale.shape == (1,) and 0.1 < scale[0] < 10.0
    mean, var = model.predict(xt)
    assert 0.6 <= coverage(yt, mean, var) <= 0.75
    assert 0.9 <= coverage(yt, mean, var, 2.0) <= 0.99
    assert gaussian_nll(yt, mean, var) < 0.0  # a 0.1 noise Gaussian has NLL -1.38; a constant model ~ +0.5


def test_ensemble_moments_are_the_mixture_of_the_members(trained):
    model, _, _, (xt, _) = trained
    mean, var, mean_m, var_m = model.predict(xt[:20], members=True)
    assert mean_m.shape == (5, 20, 1) and np.all(var_m > 0.0)
    np.testing.assert_allclose(mean, mean_m.mean(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(var / model.var_scale, (var_m + mean_m ** 2).mean(0) - mean_m.mean(0) ** 2,
                               rtol=1e-4, atol=1e-7)
    assert np.ptp(mean_m[:, :, 0], axis=0).max() > 0.0  # members differ (different initialisations)


def test_save_load_round_trip_and_seeded(trained, tmp_path):
    model, _, _, (xt, _) = trained
    model.save(tmp_path / "m.pt")
    again = EnsembleMDN.load(tmp_path / "m.pt")
    for a, b in zip(model.predict(xt), again.predict(xt)):
        np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(1)
    x, y = _data(rng, 60)
    a, b = (EnsembleMDN(1, 1, EMDNConfig(members=2, epochs=3, seed=7)) for _ in range(2))
    a.fit(x, y), b.fit(x, y)
    np.testing.assert_array_equal(a.predict(x)[1], b.predict(x)[1])


def test_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="members"):
        EMDNConfig(members=0)
    model = EnsembleMDN(2, 1, EMDNConfig(members=1, epochs=1))
    with pytest.raises(ValueError, match=r"\(B, 2\)"):
        model.predict(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="finite"):
        model.fit(np.full((4, 2), np.nan), np.zeros((4, 1)))
    torch.save({"format": "other"}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="not an E-MDN"):
        EnsembleMDN.load(tmp_path / "x.pt")
