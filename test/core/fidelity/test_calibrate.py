"""The calibration's standard errors and split: what the data do not determine is said, not reported as known."""
import numpy as np
import pytest

from parapush_ros.core.fidelity.calibrate import _standard_errors, split


def test_a_parameter_the_residuals_do_not_depend_on_has_no_finite_error():
    """Pushes without a free slide do not see the table friction: its Jacobian column is zero. A pseudo-inverse
    reported it as exactly known (std error 0 at its start value); it is inf, with a warning naming it."""
    rng = np.random.default_rng(0)
    J = np.column_stack([np.zeros(40), rng.normal(size=40)])  # object_table: no effect; pusher_object: some
    sigma, warnings = _standard_errors(J, 0.5, np.array([1.0, 0.3]), ["object_table", "pusher_object"])
    assert sigma[0] == np.inf and 0.0 < sigma[1] < np.inf
    assert len(warnings) == 1 and warnings[0].startswith("object_table: not determined by these recordings")


def test_parameters_seen_only_together_are_both_undetermined_and_a_full_rank_fit_is_plain_gauss_newton():
    rng = np.random.default_rng(1)
    a = rng.normal(size=30)
    sigma, warnings = _standard_errors(np.column_stack([a, -a]), 1.0, np.array([1.0, 1.0]), ["mass", "object_table"])
    assert np.all(sigma == np.inf) and len(warnings) == 2 and "alone or with object_table" in warnings[0]
    J = rng.normal(size=(30, 2))
    values = np.array([0.8, 0.3])
    sigma, warnings = _standard_errors(J, 2.0, values, ["object_table", "pusher_object"])
    assert not warnings
    np.testing.assert_allclose(sigma, values * np.sqrt(np.diag(2.0 * np.linalg.inv(J.T @ J))), rtol=1e-9)


def test_a_holdout_needs_two_recordings():
    with pytest.raises(ValueError, match=r"--holdout 0\.3 needs at least 2 recordings"):
        split(["a"], 0.3, 0)
    assert split(["a"], 0.0, 0) == (["a"], [])
    train, held = split(["a", "b"], 0.3, 0)
    assert len(train) == 1 and len(held) == 1
