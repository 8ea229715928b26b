"""Smoke test of ``parapush bench uncertainty`` with tiny sizes: every stage runs and the JSON has the issue's
keys nested under each model / method."""
import json

import numpy as np
import pytest

from parapush_ros.cli import main


def test_bench_uncertainty_smoke(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", "uncertainty", "--out", str(out), "--samples", "48", "--epochs", "2", "--members", "2",
                 "--gp-max", "20", "--goals", "1", "--fine-goals", "1", "--fine-samples", "2", "--episodes", "1",
                 "--max-pushes", "1", "--threads", "1"]) == 0
    r = json.loads((out / "bench_uncertainty.json").read_text())
    for model in ("emdn", "single", "gp"):
        assert 0.0 <= r["calibration"][model]["calibration_1sigma"] <= 1.0
        assert "nll" in r["calibration"][model]
    for model in ("fine", "emdn", "gp"):
        assert {"success_rate", "final_pos_err_mm", "final_rot_err_deg"} <= set(r["exp2"][model])
    for method in ("plain", "ua", "alg2"):
        assert 0.0 <= r["exp34"][method]["path_in_lesion_fraction"] <= 1.0
        assert r["exp34"][method]["episodes"] == 1
    assert r["lesion"]["ratio"] > 0.0
    assert (out / "uncertainty_lesion.png").is_file()


def test_bench_uncertainty_refuses_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="--lesion"):
        main(["bench", "uncertainty", "--out", str(tmp_path), "--lesion", "1,2"])
    with pytest.raises(ValueError, match="--episodes"):
        main(["bench", "uncertainty", "--out", str(tmp_path), "--episodes", "-1"])
    with pytest.raises(ValueError, match="--w-smooth"):
        main(["bench", "uncertainty", "--out", str(tmp_path), "--w-smooth", "-1"])


def test_exp2_goals_are_seeded_distinct_and_inside_the_workspace():
    from parapush_ros.tools.bench.uncertainty import EXP2_GOALS, EXP2_REACH, EXP2_START, exp2_goals
    from parapush_ros.core.models.push_primitive import WORKSPACE
    goals = np.array(exp2_goals(12, seed=0))
    assert goals.shape == (12, 3) and exp2_goals(12, seed=0) == [tuple(g) for g in goals]
    np.testing.assert_allclose(goals[:4], EXP2_GOALS)  # the fixed four first
    assert len({tuple(np.round(g, 6)) for g in goals}) == 12
    assert np.all(np.abs(goals[:, :2]) <= np.asarray(WORKSPACE) - 0.05 + 1e-12)
    reach = np.linalg.norm(goals[4:, :2] - np.asarray(EXP2_START[:2]), axis=1)
    assert np.all((reach >= EXP2_REACH[0]) & (reach <= EXP2_REACH[1]))


def test_bench_uncertainty_seeds_reports_mean_spread_and_per_seed(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["bench", "uncertainty", "--out", str(out), "--seeds", "2", "--seed", "3", "--samples", "48", "--epochs",
            "1", "--members", "2", "--gp-max", "10", "--goals", "0", "--fine-goals", "0", "--episodes", "1",
            "--max-pushes", "1", "--threads", "1"]
    assert main(argv) == 0
    assert "2 units, 0 done before, 2 to run" in capsys.readouterr().err
    r = json.loads((out / "bench_uncertainty.json").read_text())
    assert r["seeds"] == [3, 4] and set(r["per_seed"]) == {"3", "4"}
    fig = r["summary"]["exp34.alg2.path_in_lesion_fraction"]
    assert set(fig["per_seed"]) == {"3", "4"} and {"mean", "std"} <= set(fig)
    assert fig["mean"] == pytest.approx(np.mean(list(fig["per_seed"].values())))
    assert r["summary"]["goals.alg2_success_ge_0.9"]["mean"] in (0.0, 0.5, 1.0)  # share of seeds
    for s in (3, 4):  # each seed its own dataset and result
        assert json.loads((out / f"seed_{s}" / "bench_uncertainty.json").read_text())["settings"]["seed"] == s
        assert json.loads((out / f"seed_{s}" / "primitive_data" / "dataset.json").read_text())["seed"] == s
    first = r["summary"]
    assert main(argv) == 0  # again: each seed's result is read back, not run again
    assert "2 units, 2 done before, 0 to run" in capsys.readouterr().err
    assert json.loads((out / "bench_uncertainty.json").read_text())["summary"] == first
    with pytest.raises(ValueError, match=r"w_data = 10\.0, this run asks for 5\.0"):  # another study: another --out
        main(argv + ["--w-data", "5"])
