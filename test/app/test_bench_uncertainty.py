"""Smoke test of ``parapush bench uncertainty`` with tiny sizes: every stage runs and the JSON has the issue's
keys nested under each model / method."""
import json

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
