"""``parapush synth-pushes``, ``replay`` and ``calibrate`` end to end (issue 15): recordings made by the sim in a
world with known, perturbed physics (table and pusher friction, support spread); the replay
reports the issue's JSON; the calibration recovers the perturbed parameters within 10 % and writes a scene file
with them."""
import json

import pytest
import yaml

from parapush_ros.cli import main
from parapush_ros.core.scene.spec import load_scene

pytestmark = pytest.mark.timeout(600)

TRUTH = {"object_table": 0.8, "pusher_object": 0.3, "spread": 0.85}
GRID = ["--set", "support.pattern=grid", "--set", "support.points=3"]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    out = tmp_path_factory.mktemp("recordings")
    # half of the pushes end with a fast stroke and a free slide: the table friction shows only there
    assert main(["synth-pushes", "--scene", "box_slider", "--count", "8", "--seed", "1", "--out", str(out), *GRID,
                 "--set", f"friction.object_table={TRUTH['object_table']}",
                 "--set", f"friction.pusher_object={TRUTH['pusher_object']}",
                 "--set", f"support.spread={TRUTH['spread']}"]) == 0
    return out


def test_replay_writes_the_issue_json_and_a_plot_per_push(tmp_path, recordings):
    assert main(["replay", "--scene", "box_slider", "--recordings", str(recordings), *GRID,
                 "--models", "fine,coarse", "--out", str(tmp_path), "--json", str(tmp_path / "r.json")]) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    # the models asked for and the no-motion baseline every replay reports
    assert set(data["models"]) == {"fine", "coarse", "no_motion"} and len(data["recordings"]) == 8
    for m in data["models"].values():
        assert set(m) == {"final_trans_mm", "final_rot_deg", "path_trans_mm", "path_rot_deg"}
        assert all(set(v) == {"mean", "median", "max"} for v in m.values())
    # coarse is the default coarse model, auto: the quasi-static box model, here as near the record as the fine
    # model (measured 2.9 and 3.5 mm); both far better than no motion
    final = {m: data["models"][m]["final_trans_mm"]["mean"] for m in data["models"]}
    assert max(final["fine"], final["coarse"]) < 0.5 * final["no_motion"], final
    assert len(list(tmp_path.glob("replay_push_*.png"))) == 8


def test_replay_names_a_bad_argument(tmp_path, recordings):
    with pytest.raises(ValueError, match="unknown model 'finest'"):
        main(["replay", "--scene", "box_slider", "--recordings", str(recordings), "--models", "finest",
              "--out", str(tmp_path)])


def test_replay_takes_a_models_option(tmp_path, recordings):
    """``--model-option``: the convex model with the integrated limit surface replays the pushes (nearer than no
    motion); an option the model does not have is refused by name."""
    assert main(["replay", "--scene", "box_slider", "--recordings", str(recordings), *GRID,
                 "--models", "quasistatic_convex", "--model-option", "quasistatic_convex.limit_surface=integrated",
                 "--out", str(tmp_path), "--json", str(tmp_path / "r.json")]) == 0
    final = {m: v["final_trans_mm"]["mean"] for m, v in json.loads((tmp_path / "r.json").read_text())["models"].items()}
    assert final["quasistatic_convex"] < 0.5 * final["no_motion"], final
    with pytest.raises(ValueError, match="model 'quasistatic_convex' has no option 'c'"):
        main(["replay", "--scene", "box_slider", "--recordings", str(recordings), "--models", "quasistatic_convex",
              "--model-option", "quasistatic_convex.c=0.1", "--out", str(tmp_path)])


def test_calibration_recovers_the_perturbed_world(tmp_path, recordings):
    out_scene = tmp_path / "fitted.yaml"
    assert main(["calibrate", "--scene", "box_slider", "--recordings", str(recordings), *GRID,
                 "--fit", ",".join(TRUTH), "--holdout", "0.25", "--max-evaluations", "30", "--out", str(out_scene),
                 "--json", str(tmp_path / "c.json")]) == 0
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["training"]["evaluations"] <= 30  # the Jacobian's evaluations counted too (SciPy counts steps)
    for name, truth in TRUTH.items():
        assert data["fitted"][name] == pytest.approx(truth, rel=0.10), (name, data["fitted"])
        assert data["std_error"][name] > 0
    assert len(data["held_out"]["recordings"]) == 2
    assert data["held_out"]["after"]["final_trans_mm"]["mean"] < data["held_out"]["before"]["final_trans_mm"]["mean"]
    fitted = load_scene(out_scene)
    assert fitted.friction["pusher_object"] == pytest.approx(data["fitted"]["pusher_object"])
    assert fitted.friction["object_table"] == pytest.approx(data["fitted"]["object_table"])
    assert fitted.support.spread == pytest.approx(data["fitted"]["spread"])
    assert "calibrated by `parapush calibrate`" in out_scene.read_text().splitlines()[0]
    assert yaml.safe_load(out_scene.read_text())["support"]["pattern"] == "grid"


def test_split_pushes_cuts_a_session_into_recordings_replay_reads(tmp_path, recordings):
    """``split-pushes``: three recorded pushes in one session file (the box set back by hand between them) are
    refused by replay as one push, and cut into three CSV recordings that replay reads, with a table, JSON and a
    timeline plot."""
    from parapush_ros.core.fidelity.recordings import read_csv, write_csv
    from parapush_ros.core.fidelity.synthetic import session
    scene = load_scene("box_slider")
    pushes = [read_csv(recordings / f"push_{i:03d}.csv", scene) for i in range(3)]
    write_csv(tmp_path / "session.csv", scene, session(pushes)[0])
    with pytest.raises(ValueError, match=r"not a push .*\(parapush split-pushes\)"):
        main(["replay", "--scene", "box_slider", "--recordings", str(tmp_path / "session.csv"), "--models", "coarse",
              "--out", str(tmp_path)])
    assert main(["split-pushes", "--scene", "box_slider", "--recordings", str(tmp_path / "session.csv"),
                 "--out", str(tmp_path / "cut")]) == 0
    data = json.loads((tmp_path / "cut" / "split_pushes.json").read_text())
    cut = data["sessions"][0]
    assert [p["file"].rsplit("/", 1)[-1] for p in cut["pushes"]] == [f"session_push_{i:03d}.csv" for i in range(3)]
    assert len(cut["breaks"]) == 2 and all("(a hand?)" in why for _, _, why in cut["breaks"])
    assert (tmp_path / "cut" / "split_session.png").stat().st_size > 0
    assert main(["replay", "--scene", "box_slider", "--recordings", str(tmp_path / "cut"), *GRID, "--models", "coarse",
                 "--out", str(tmp_path / "r"), "--json", str(tmp_path / "r.json")]) == 0
    assert len(json.loads((tmp_path / "r.json").read_text())["recordings"]) == 3

    # two sessions of the same name would overwrite each other's pushes and plot: refused, naming them
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "session.csv").write_text((tmp_path / "session.csv").read_text())
    with pytest.raises(ValueError, match="--recordings: several recordings named session"):
        main(["split-pushes", "--scene", "box_slider", "--recordings", str(tmp_path / "session.csv"),
              str(tmp_path / "b" / "session.csv"), "--out", str(tmp_path / "cut2")])
