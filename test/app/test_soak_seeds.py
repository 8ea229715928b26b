"""``parapush soak --seeds N``: the soak's seeds as units of the study engine (``parapush_ros.tools.soak_seeds``),
in this process (``--workers 1``, as test/conftest.py sets). One real soak, the shortest (every kind of event once,
about 90 s of sim time); the second seed is made to fail by the engine's fault hook, so the study's resume, refusal
by name and failure by name are seen without a second soak. Assertions are on files and counts, never on time."""
import contextlib
import fcntl
import json
import os
import tempfile

import pytest

from parapush_ros.cli import build_parser
from parapush_ros.tools import soak
from parapush_ros.tools.soak_seeds import claimed_domain, combine, domain_id
from parapush_ros.tools.study import ENV_FAULT, StudyError


def test_each_seed_gets_its_own_domain_derived_from_the_base():
    assert [domain_id(59, k) for k in range(3)] == [59, 60, 61]
    assert domain_id(100, 1) == 101 and domain_id(100, 2) == 1  # wrapped into 1..101, never 0 (everyone's default)
    assert domain_id(0, 0) == 101 and domain_id(0, 1) == 1
    held = os.open(os.path.join(tempfile.gettempdir(), "parapush-ros-domain-97.lock"), os.O_CREAT | os.O_RDWR)
    with contextlib.suppress(OSError):  # (held by another process already: the same for the claim below)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a test run or another unit on this host holds its domain
    try:
        with claimed_domain(97) as d:
            assert d != 97 and 1 <= d <= 101
    finally:
        os.close(held)


@pytest.mark.timeout(600)
def test_soak_seeds_run_as_a_study_resume_and_refuse_a_changed_setting(tmp_path, monkeypatch):
    def cli(*extra):
        return build_parser().parse_args(["soak", "--minutes", "0.01", "--seed", "0", "--out", str(tmp_path),
                                          "--workers", "1", "--retries", "0", *extra])

    study = tmp_path / "seeds_study"
    monkeypatch.setenv(ENV_FAULT, "raise:seed=1")  # the engine's test hook: seed 1 fails, named, after seed 0 ran
    with pytest.raises(StudyError, match=r"1 unit\(s\) failed[\s\S]*seed=1: RuntimeError") as e:
        soak.run(cli("--seeds", "2"))
    assert list(e.value.failed) == ["seed=1"]
    one = json.loads((tmp_path / "seed_0" / "soak.json").read_text())  # the seed's own JSON and PNG, as one soak's
    assert one["seed"] == 0 and (tmp_path / "seed_0" / "soak.png").stat().st_size > 1000
    unit = json.loads((study / "units" / "seed=0.json").read_text())
    assert unit["domain_id"] != int(os.environ["ROS_DOMAIN_ID"])  # this test run holds its domain: the next free one
    assert unit["goals"] == one["goals"] and unit["unsafe_commands"] == one["unsafe_commands"]
    manifest = json.loads((study / "study.json").read_text())
    assert manifest["kind"] == "soak --seeds" and manifest["mode"] == "sim" and manifest["minutes"] == 0.01

    # the same study again: seed 0 is read back, not run again; seed 1 still fails by name
    with pytest.raises(StudyError, match="seed=1"):
        soak.run(cli("--seeds", "2"))
    assert [u for u, _, _ in (line.split("\t") for line in (study / "study.log").read_text().splitlines())] == [
        "seed=0"]

    # a changed setting in the same --out is refused by name before anything runs
    with pytest.raises(ValueError, match=r"scene = 'cylinder_slider', this run asks for 'obstacle_push'"):
        soak.run(cli("--seeds", "2", "--scene", "obstacle_push"))
    with pytest.raises(ValueError, match=r"minutes = 0.01, this run asks for 0.02"):
        soak.run(build_parser().parse_args(["soak", "--minutes", "0.02", "--seeds", "1", "--out", str(tmp_path),
                                            "--workers", "1"]))

    # the seeds that are done: the soak over them, from the units (nothing runs), as one soak's JSON names them
    monkeypatch.delenv(ENV_FAULT)
    summary = soak.run(cli("--seeds", "1"))  # SystemExit names the failed criteria of any seed
    s = json.loads((tmp_path / "soak.json").read_text())
    assert s["goals"] == summary["goals"] and s["failures"] == summary["failures"]
    assert (tmp_path / "soak.png").stat().st_size > 1000 and len((study / "study.log").read_text().splitlines()) == 1
    assert s["seeds"] == [0] and s["failures"] == [] and s["mode"] == "sim"
    for key in ("unsafe_commands", "unsafe_outputs", "estop_leaks", "exceptions", "stops_without_zero"):
        assert s[key] == one[key] == 0, key
    assert s["goals"] == one["goals"] and s["events"] == one["events"]
    assert s["hostile_requests"] == {"count": one["hostile_requests"]["count"],
                                     "refused": one["hostile_requests"]["refused"]}
    assert s["worst"]["max_stop_time_s"] == one["max_stop_time_s"]
    assert s["spread"]["sim_time_s"]["per_seed"] == {"0": one["sim_time_s"]}
    assert s["per_seed"]["0"]["json"] == str(tmp_path / "seed_0" / "soak.json")

    # over two seeds (the same soak's JSON twice): counts are totals, maxima the worst, quantities mean and std
    two = combine({0: one, 1: one}, "sim")
    assert two["seeds"] == [0, 1] and two["goals"] == {k: 2 * v for k, v in one["goals"].items()}
    assert two["hostile_requests"]["count"] == 2 * one["hostile_requests"]["count"]
    assert two["health_checks"] == {k: 2 * v for k, v in one["health_checks"].items()}
    assert two["worst"]["rss_growth_mb"] == one["rss_growth_mb"] and two["spread"]["wall_time_s"]["std"] == 0.0
    failed = dict(one, failures=["2 exception(s) (exceptions)"], exceptions=2)
    bad = combine({0: one, 1: failed}, "sim")
    assert bad["failed_seeds"] == [1] and bad["failures"] == ["seed 1: 2 exception(s) (exceptions)"]
    assert bad["exceptions"] == 2
