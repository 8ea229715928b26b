"""The ``parapush`` benchmarks and demo run end to end at tiny sizes and write what they promise.

These are smoke tests of the commands (arguments, JSON keys, plots), not of speed: numbers are checked by
running the benchmarks themselves (see docs/results/).
"""
import json

import numpy as np

import pytest

from parapush_ros.cli import main

pytestmark = pytest.mark.timeout(300)


def run(tmp_path, *args):
    out = tmp_path / "out"
    assert main(list(args) + ["--out", str(out)]) == 0
    return out


def test_bench_table1_small(tmp_path):
    out = run(tmp_path, "bench", "table1", "--states", "2", "--seed", "3")
    res = json.loads((out / "bench_table1.json").read_text())
    assert res["trajectories"] == 6
    assert set(res["models"]) == {"coarse", "parareal1", "parareal2", "parareal3", "parareal4"}
    assert res["models"]["parareal4"]["mean_trans_mm"] == 0.0 and res["models"]["parareal4"]["mean_rot_deg"] == 0.0
    for m in res["models"].values():
        assert {"mean_trans_mm", "mean_rot_deg", "paper_trans_mm", "paper_rot_deg"} <= set(m)
    assert (out / "table1.png").stat().st_size > 1000
    # another seed in the same --out is another study (it read the first seed's units back as its own)
    with pytest.raises(ValueError, match="seed = 3, this run asks for 4"):
        main(["bench", "table1", "--states", "2", "--seed", "4", "--out", str(out)])


def test_bench_table1_is_deterministic_given_the_seed_whatever_the_units(tmp_path):
    """One Parareal batch of 3 states or three units of one: the same figures (each unit a pure function)."""
    a = json.loads((run(tmp_path / "a", "bench", "table1", "--states", "3", "--seed", "5")
                    / "bench_table1.json").read_text())
    b = json.loads((run(tmp_path / "b", "bench", "table1", "--states", "3", "--seed", "5", "--unit-states", "1")
                    / "bench_table1.json").read_text())
    assert a["models"] == b["models"] and a["fine_slices"] == b["fine_slices"]


def test_bench_convergence_small(tmp_path):
    out = run(tmp_path, "bench", "convergence", "--pushes", "2", "--actions", "3")
    res = json.loads((out / "bench_convergence.json").read_text())
    assert set(res["fig5"]) == {"cylinder_centre", "cylinder_side", "box_centre", "box_side"}
    for case in res["fig5"].values():
        assert len(case["rms_mm"]) == 5 and case["rms_mm"][-1] == 0.0
    assert len(res["random"]["N3"]["mean_rms_mm"]) == 4 and res["random"]["N3"]["mean_rms_mm"][-1] == 0.0
    assert (out / "convergence.png").exists()


def test_speedup_push_keeps_contact():
    """The speedup push must keep contact for the longest default horizon (8 s): the model assumes every fine
    slice costs the same, and a slice without contact costs about half."""
    from parapush_ros.tools.bench.speedup import DEFAULT_OFFSET, contact_gaps_mm
    from parapush_ros.core.models.base import rollout
    from parapush_ros.core.models.fine import FineModel
    from parapush_ros.core.scene.spec import load_scene
    scene = load_scene("cylinder_slider")
    x0 = scene.initial_state()
    x0[1] = DEFAULT_OFFSET
    fine = FineModel(scene, threads=1)
    gaps = contact_gaps_mm(scene, rollout(fine, x0, np.array([[0.025, 0.0]] * 8), 1.0))
    assert gaps[1:].max() < 1.0, gaps
    x0[1] = 0.02  # the old offset: loses contact, which the bench's warning is about
    gaps = contact_gaps_mm(scene, rollout(fine, x0, np.array([[0.025, 0.0]] * 8), 1.0))
    assert gaps[-1] > 5.0, gaps


def test_bench_speedup_refuses_an_offset_that_misses_the_slider(tmp_path):
    with pytest.raises(ValueError, match="--offset"):
        run(tmp_path, "bench", "speedup", "--offset", "0.2", "--horizons", "2", "--repeats", "1")


def test_bench_speedup_and_physics_small(tmp_path):
    out = run(tmp_path, "bench", "speedup", "--horizons", "2", "--repeats", "1", "--batch", "2")
    res = json.loads((out / "bench_speedup.json").read_text())
    assert {"N2_K1", "N2_K2"} == set(res["single"])
    for entry in res["single"].values():
        assert entry["measured_speedup"] > 0 and entry["model_speedup"] > 0 and entry["pipelined_speedup"] > 0
        assert entry["model_speedup_hw"] > 0 and entry["measured_over_hw_model"] > 0
    assert res["coarse_model"] == "analytical" and res["fine_model"] == "fine" and res["parallel_efficiency"] > 0
    assert res["max_contact_gap_mm"]["N2"] < 1.0
    assert res["goals_summary"]["measured >= 0.9 x model"].split(" of ")[1].startswith("2 (N, K)")
    out = run(tmp_path, "bench", "speedup", "--horizons", "2", "--repeats", "1", "--batch", "2", "--coarse", "learned")
    res = json.loads((out / "bench_speedup.json").read_text())
    assert res["coarse_model"] == "learned" and res["single"]["N2_K2"]["measured_speedup"] > 0
    out = run(tmp_path, "bench", "physics", "--batch", "2", "--repeats", "1")
    res = json.loads((out / "bench_physics.json").read_text())
    for key in ("fine_slice_s", "fine_batch_steps_per_s_per_core", "raw_steps_per_s_per_core", "threads",
                "coarse_slice_s", "cost_ratio"):
        assert res[key] > 0


def test_demo_writes_the_open_loop_plot(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "demo_open_loop.png").stat().st_size > 1000
    assert "final pos diff to fine" in capsys.readouterr().out


def test_bench_support_small(tmp_path):
    out = run(tmp_path, "bench", "support", "--supports", "native,grid3")
    data = json.loads((out / "bench_support.json").read_text())
    assert [s["support"] for s in data["supports"]] == ["native", "grid3"]
    assert len(data["exact_uniform_rad_per_m"]) == len(data["offsets_fraction_of_half_face"])
    assert data["supports"][1]["median_ratio_exact"] > data["supports"][0]["median_ratio_exact"]
    assert (out / "bench_support.png").stat().st_size > 1000


def test_bench_dgoc_small(tmp_path, capsys):
    """Three targets in units of two: targets 0-1 planned, target 1 also tracked and compared (--track 2 etc. count
    from the seed's first target); the union equals one whole batch, a re-run resumes, another setting is refused."""
    common = ["bench", "dgoc", "--targets", "3", "--scenes", "block_003", "--max-iterations", "3"]
    out = run(tmp_path, *common, "--unit-targets", "2", "--single", "1", "--track", "2", "--compare-mpc", "1",
              "--mpc-actions", "1")
    res = json.loads((out / "bench_dgoc.json").read_text())
    r = res["scenes"]["block_003"]
    methods = r["methods"]
    assert set(methods) == {"zs", "ds", "dp", "ws", "dgoc"} and res["escalate_k"] == 3
    for m in methods.values():
        assert 0.0 <= m["success_rate"] <= 1.0 and m["solve_time_s"] > 0 and m["single_solve_time_s"] > 0
        assert len(m["batch_time_s"]) == 2 and len(m["succeeded"]) == 3
        for key in ("final_err_x_cm", "final_err_y_cm", "final_err_theta_rad"):
            assert set(m[key]) == {"mean", "std"} and m[key]["mean"] >= 0.0
    assert "1 cm" in res["success_rule"] and res["task_space"]["x_m"] == [-0.2, 0.2]
    assert r["target_indices"] == [0, 1, 2] and r["tracking"]["tracked_target_indices"] == [0, 1]
    tracking = r["tracking"]
    assert set(tracking["cases"]) == {"nominal", "perturbed", "mismatch"}
    for case in tracking["cases"].values():
        assert 0.0 <= case["tracked_success_rate"] <= 1.0 and len(case["succeeded"]) == 2
    kick = np.asarray(tracking["cases"]["perturbed"]["perturbations"])
    assert kick.shape == (2, 3) and np.all(np.abs(kick) <= [0.04, 0.04, 0.117])
    assert (out / "dgoc.png").stat().st_size > 1000
    compare = r["compare_mpc"]
    for m in ("dgoc", "mpc"):
        times = compare[m]
        assert len(times["runs"]) == 1 and times["task_time_s"]["mean"] > times["planning_time_s"]["mean"]
    assert compare["mpc"]["runs"][0]["actions"] == 1 and compare["mpc_model"] == "fine"
    # the seed's targets and perturbations, as one run draws them
    from parapush_ros.tools.bench.dgoc import draw_targets, perturbations, start_state
    from parapush_ros.core.models.quasistatic import QuasiStaticPusherSlider
    from parapush_ros.core.scene.spec import load_scene
    scene = load_scene("block_003")
    x0 = start_state(scene)
    np.testing.assert_allclose(r["targets"], draw_targets(3, 0, x0[:3]))
    np.testing.assert_allclose(kick, perturbations(QuasiStaticPusherSlider.from_scene(scene), x0, 3, 0)[:2])
    # one batch of all three targets: the same per-target results as the units of two
    whole = run(tmp_path / "whole", *common, "--unit-targets", "3", "--single", "0")
    w = json.loads((whole / "bench_dgoc.json").read_text())["scenes"]["block_003"]["methods"]
    for m in methods:
        for key in ("succeeded", "final_err", "iterations", "demo_used"):
            assert w[m][key] == methods[m][key], (m, key)
    capsys.readouterr()
    run(tmp_path, *common, "--unit-targets", "2", "--single", "1", "--track", "2", "--compare-mpc", "1",
        "--mpc-actions", "1")
    assert "2 units, 2 done before, 0 to run" in capsys.readouterr().err
    with pytest.raises(ValueError, match="k = 1, this run asks for 2"):
        run(tmp_path, *common, "--unit-targets", "2", "--single", "1", "--track", "2", "--compare-mpc", "1",
            "--mpc-actions", "1", "--k", "2")


def test_demos_command_writes_a_loadable_library(tmp_path):
    from parapush_ros.core.planning.ddp.demonstrations import load_library
    assert main(["demos", "--scene", "block_003", "--count", "3", "--candidates", "12", "--out",
                 str(tmp_path / "lib")]) == 0
    demos = load_library(tmp_path / "lib")
    assert sorted(d.face_switches for d in demos) == [0, 1, 2]
    with pytest.raises(SystemExit):  # argparse: "argument --count: must be a whole number >= 3"
        main(["demos", "--count", "2", "--out", str(tmp_path / "x")])


def test_bench_dgoc_refuses_bad_arguments_by_name(tmp_path):
    with pytest.raises(ValueError, match="--track"):
        run(tmp_path, "bench", "dgoc", "--targets", "1", "--track", "2")
    with pytest.raises(ValueError, match="--unit-targets"):
        run(tmp_path, "bench", "dgoc", "--targets", "5", "--unit-targets", "0")
    with pytest.raises(ValueError, match="--methods: unknown method 'ilqr'"):
        run(tmp_path, "bench", "dgoc", "--targets", "1", "--methods", "ws,ilqr")
    with pytest.raises(ValueError, match="--mpc-model"):
        run(tmp_path, "bench", "dgoc", "--targets", "1", "--compare-mpc", "1", "--mpc-model", "nonsense")
    with pytest.raises(ValueError, match=r"--scenes: quasi-static model: .*cylinder, the model is for box sliders"):
        run(tmp_path, "bench", "dgoc", "--targets", "1", "--scenes", "cylinder_slider")
    assert not (tmp_path / "out" / "dgoc_study").exists()  # refused before a study directory remembers it


def test_bench_dgoc_refuses_units_compared_with_another_mpc():
    """Units whose DG-OC-vs-MPC comparison ran another MPC are not one study: their MPC rows would mix."""
    from parapush_ros.tools.bench.dgoc import combine
    row = {"final_err": [0.001, 0.001, 0.01], "planning_time_s": 1.0, "execution_time_s": 5.0, "task_time_s": 6.0}
    units = [{"demonstrations": [], "target_indices": [first], "targets": [[0.1, 0.0, 0.0]], "methods": {},
              "plot_X": [], "compare_mpc": {"mpc_model": model, "mpc_actions": 1, "mpc_sampling": {}, "targets": [],
                                            "dgoc": {"runs": [row]}, "mpc": {"runs": [row]}}}
             for first, model in ((0, "fine"), (1, "parareal1"))]
    with pytest.raises(ValueError, match="block_003: the units' MPC comparisons differ in 'mpc_model'"):
        combine("block_003", units)
    with pytest.raises(ValueError, match="overlap"):
        combine("block_003", [units[0], units[0]])


def test_seeded_runs_each_seed_and_summarises(tmp_path):
    """``common.seeded``: one seed as before; N seeds: mean, std and per-seed values of every numeric leaf; the seeds
    are a study (<out>/<bench>_seeds_study): a finished seed is read back, not run again, more seeds extend, and other
    settings in the same --out are refused by name; another bench's seeds share the --out."""
    import argparse

    from parapush_ros.tools.bench.common import output_paths, seeded, write_json
    calls = []

    def run_one(args):
        calls.append((args.seed, args.out))
        res = {"settings": {"seed": args.seed, "w": args.w}, "a": {"x": float(args.seed), "ok": args.seed > 0},
               "name": "n", "list": [1, 2], "per_k": [float(args.seed), 2.0 * args.seed],
               "maybe": float("nan") if args.seed == 1 else float(args.seed), "runs": [{"x": 1.0}],
               "per_object_k": [[1.0, 2.0], [3.0, float(args.seed)]], "grid": [[0.0] * 10] * 10,
               "per_action": [1.0] * (args.seed + 1), "per_object_action": [[1.0] * (args.seed + 1), [2.0]]}
        write_json(output_paths(args, "t")[0], res)
        return res

    def args(**kw):
        return argparse.Namespace(**{"seed": 0, "seeds": 3, "out": str(tmp_path), "json": None, "w": 1, **kw})

    assert seeded(run_one, name="t")(args(seed=5, seeds=None))["a"]["x"] == 5.0 and calls == [(5, str(tmp_path))]
    calls.clear()
    r = seeded(run_one, name="t")(args())
    assert [c[0] for c in calls] == [0, 1, 2] and len({c[1] for c in calls}) == 3
    assert r["summary"]["a.x"]["mean"] == 1.0 and r["summary"]["a.x"]["std"] == 1.0
    assert r["summary"]["a.x"]["per_seed"] == {"0": 0.0, "1": 1.0, "2": 2.0}
    assert r["summary"]["a.ok"]["mean"] == 2 / 3 and "settings.seed" not in r["summary"]
    # a figure per k: one per element; lists of records are not figures
    assert r["summary"]["per_k[1]"]["mean"] == 2.0 and r["summary"]["per_object_k[1][1]"]["mean"] == 1.0
    assert not any(k.startswith(("runs", "grid")) for k in r["summary"])  # records, and data (100 numbers)
    # a list whose length differs between seeds is per-run data (its i-th elements are not one figure)
    assert not any(k.startswith("per_action") for k in r["summary"])
    assert "per_object_action[1][0]" in r["summary"] and "per_object_action[0][0]" not in r["summary"]
    # a seed without a finite value is counted out, and its JSON holds null (JSON has no NaN)
    assert r["summary"]["maybe"]["seeds"] == 2 and r["summary"]["maybe"]["mean"] == 1.0
    assert r["summary"]["a.x"]["seeds"] == 3
    assert json.loads((tmp_path / "seed_1" / "bench_t.json").read_text())["maybe"] is None
    assert json.loads((tmp_path / "bench_t.json").read_text())["summary"] == r["summary"]
    calls.clear()
    assert seeded(run_one, name="t")(args())["summary"] == r["summary"] and calls == []
    assert seeded(run_one, name="t")(args(seeds=4))["seeds"] == [0, 1, 2, 3]
    assert [c[0] for c in calls] == [3]  # only the new seed ran
    calls.clear()
    with pytest.raises(ValueError, match="w = 1, this run asks for 2"):  # another study: another --out
        seeded(run_one, name="t")(args(w=2))
    assert calls == []
    # another bench's seeds in the same --out (the README's commands with the default out/): a study of its own
    seeded(run_one, name="u")(args(w=2, seeds=2))
    assert [c[0] for c in calls] == [0, 1] and (tmp_path / "u_seeds_study").is_dir()


def test_bench_calibrate_resumes_its_study(tmp_path, capsys):
    """``bench calibrate``: the fine reference, then one unit per K_omega; a re-run reads every fit back."""
    argv = ["bench", "calibrate", "--scene", "cylinder_slider", "--pushes", "2", "--actions", "2"]
    out = run(tmp_path, *argv)
    res = json.loads((out / "bench_calibrate_cylinder_slider.json").read_text())
    assert len(res["grid"]) == 13 and res["best_k_omega"] in [g["k_omega"] for g in res["grid"]]
    assert res["best_k_omega"] == min(res["grid"], key=lambda g: g["score"])["k_omega"]
    capsys.readouterr()
    assert json.loads((run(tmp_path, *argv) / "bench_calibrate_cylinder_slider.json").read_text())["grid"] == \
        res["grid"]
    err = capsys.readouterr().err
    assert "1 units, 1 done before, 0 to run" in err and "13 units, 13 done before, 0 to run" in err
    with pytest.raises(ValueError, match="pushes = 2, this run asks for 3"):
        run(tmp_path, "bench", "calibrate", "--scene", "cylinder_slider", "--pushes", "3", "--actions", "2")
