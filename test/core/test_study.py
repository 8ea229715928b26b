"""The study engine (``parapush_ros.tools.study``) in this process (``--workers 1``, no Ray): unit ids, the manifest
refusing a changed setting by name, one atomic result per unit, resume, retries and failures reported by name.
Ray itself, on a two-node cluster: test/app/test_study_cluster.py."""
import argparse
import json

import pytest

from parapush_ros.tools.study import ENV_FAULT, Study, StudyError, Unit

CALLS = []


def square(context, unit):
    CALLS.append(unit.id)
    return {"value": unit["i"] ** 2 + context["offset"]}


def args(**kw):
    return argparse.Namespace(**{"workers": 1, "ray": None, "retries": 1, **kw})


def test_unit_ids_are_stable_file_names_and_seed_from_the_study_seed():
    u = Unit.of(scene=3, model="parareal1", world="nominal")
    assert u.id == "scene=3.model=parareal1.world=nominal" and u["scene"] == 3 and u.cpus == 1
    assert Unit.of(path="a/b c").id == "path=a_b_c"
    assert u.seed(5) == Unit.of(scene=3, model="parareal1", world="nominal").seed(5) != u.seed(6)


def test_a_study_resumes_and_refuses_a_changed_setting_by_name(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    CALLS.clear()
    units = [Unit.of(i=i) for i in range(4)]
    study = Study(tmp_path, "test", {"seed": 0, "offset": 1})
    got = study.run(units[:2], square, {"offset": 1}, args())
    assert got == {"i=0": {"value": 1}, "i=1": {"value": 2}} and CALLS == ["i=0", "i=1"]
    assert json.loads((tmp_path / "study.json").read_text())["kind"] == "test"
    # the same study, more units: only the new ones run, results in the units' order
    got = Study(tmp_path, "test", {"seed": 0, "offset": 1}).run(units, square, {"offset": 1}, args())
    assert list(got) == [u.id for u in units] and CALLS == ["i=0", "i=1", "i=2", "i=3"]
    assert [e[0] for e in study.log()] == ["i=0", "i=1", "i=2", "i=3"]  # each unit finished once
    assert not list(tmp_path.glob("units/.*"))  # no temporary file left
    with pytest.raises(ValueError, match="offset = 1, this run asks for 2"):
        Study(tmp_path, "test", {"seed": 0, "offset": 2})


def test_a_failing_unit_is_retried_then_reported_by_name_and_a_rerun_does_only_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    CALLS.clear()
    units = [Unit.of(i=i) for i in range(3)]
    monkeypatch.setenv(ENV_FAULT, "raise:i=1")
    with pytest.raises(StudyError, match=r"1 unit\(s\) failed[\s\S]*i=1: RuntimeError") as e:
        Study(tmp_path, "test", {"seed": 0}).run(units, square, {"offset": 0}, args(retries=1))
    assert list(e.value.failed) == ["i=1"] and CALLS == ["i=0", "i=2"]
    assert "unit i=1 failed (attempt 2 of 2)" in capsys.readouterr().err
    monkeypatch.delenv(ENV_FAULT)
    got = Study(tmp_path, "test", {"seed": 0}).run(units, square, {"offset": 0}, args())
    assert CALLS == ["i=0", "i=2", "i=1"] and got["i=1"] == {"value": 1}


def test_a_setting_given_before_and_not_now_is_refused_by_name(tmp_path):
    """An option the first run gave (``--shapes box``) and this one leaves out is a changed setting too: reusing
    the box runs as the default scenes would mix two studies."""
    Study(tmp_path, "test", {"seed": 0, "shapes": ["box"]})
    with pytest.raises(ValueError, match=r"shapes = \['box'\], this run asks for None"):
        Study(tmp_path, "test", {"seed": 0})


def test_the_seed_is_a_setting_of_a_bench_study():
    """Another --seed in the same --out would otherwise read the first seed's units back as its own."""
    from parapush_ros.tools.bench.common import study_settings
    s = study_settings(argparse.Namespace(seed=3, seeds=None, out="x", workers=1, states=2))
    assert s == {"seed": 3, "states": 2}


def test_workers_1_runs_here_whatever_ray_address_says(tmp_path, monkeypatch, capsys):
    """``--workers 1`` is this process without Ray; a RAY_ADDRESS left in the environment (here one nothing
    listens on, where Ray would retry for minutes) does not send the study to a cluster; ``--ray`` would."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    CALLS.clear()
    got = Study(tmp_path, "test", {}).run([Unit.of(i=0), Unit.of(i=1)], square, {"offset": 0}, args())
    assert got == {"i=0": {"value": 0}, "i=1": {"value": 1}} and "in this process" in capsys.readouterr().err
    assert CALLS == ["i=0", "i=1"]


def test_a_ray_head_nothing_answers_on_is_named_at_once(tmp_path, monkeypatch):
    """Ray itself retries an unreachable head for minutes; the study says so in one line first."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ValueError, match=r"--ray \(or \$RAY_ADDRESS\) 127\.0\.0\.1:1: no Ray head answers there"):
        Study(tmp_path, "test", {}).run([Unit.of(i=0)], square, {"offset": 0}, args(ray="127.0.0.1:1", workers=2))


def test_bad_execution_settings_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    study = Study(tmp_path, "test", {})
    with pytest.raises(ValueError, match="--workers"):
        study.run([Unit.of(i=0)], square, {"offset": 0}, args(workers=0))
    with pytest.raises(ValueError, match="--retries"):
        study.run([Unit.of(i=0)], square, {"offset": 0}, args(retries=-1))
    monkeypatch.setenv("PARAPUSH_WORKERS", "two")
    with pytest.raises(ValueError, match="PARAPUSH_WORKERS"):
        study.run([Unit.of(i=0)], square, {"offset": 0}, args(workers=None))


def test_ray_is_imported_only_when_a_study_runs_on_it():
    """The nodes, the CLI and the benches import without Ray (robot nodes never load it)."""
    import subprocess
    import sys
    code = ("import sys; import parapush_ros.cli, parapush_ros.tools.study, parapush_ros.tools.bench.mpc, "
            "parapush_ros.tools.learning.datagen, parapush_ros.nodes.mpc_planner; parapush_ros.cli.build_parser(); "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
