"""Demonstrations (file format, shipped libraries, k-NN) and DG-OC's DDP variants on paper 003's block."""
import json

import numpy as np
import pytest

from parapush_ros.core.models.quasistatic import SEPARATION, QuasiStaticPusherSlider
from parapush_ros.core.planning.ddp.demonstrations import (COLUMNS, Demonstration, DemonstrationError,
                                                           load_demonstration, load_library, nearest)
from parapush_ros.core.planning.ddp.dgoc import PLAN_DT, DGOCPlanner, face_switch_mask
from parapush_ros.core.planning.ddp.scripted import Push, Switch, perform
from parapush_ros.core.planning.ddp.solver import DDPSettings
from parapush_ros.core.scene.spec import load_scene


def model_of(scene):
    return QuasiStaticPusherSlider.from_scene(load_scene(scene), dt=PLAN_DT)


def count_switches(model, X, U):
    _, faces, modes = model.rollout_info(X[0], U)
    pushed = faces[modes != SEPARATION]
    return int(np.count_nonzero(np.diff(pushed)))


@pytest.mark.parametrize("scene", ["block_003", "box_slider"])
def test_shipped_libraries(scene):
    """At least three demonstrations with 0, 1 and 2 face switches; each is a rollout of its own accelerations on
    the scene's model (to the file's 7 digits), ends at rest, and never pushes into the box."""
    model = model_of(scene)
    demos = load_library(scene)
    assert len(demos) >= 3 and {0, 1, 2} <= {d.face_switches for d in demos}
    for d in demos:
        assert d.scene == scene and d.dt == PLAN_DT and "parapush demos" in d.source
        X = model.rollout(d.X[0], d.U)
        assert np.abs(X - d.X).max() < 1e-4, d.name
        assert count_switches(model, d.X, d.U) == d.face_switches, d.name
        assert np.abs(d.X[-1, 5:7]).max() < 1e-3 and model.penetration(X).max() < 1e-3
        np.testing.assert_array_equal(d.X[0, :3], 0.0)


def test_file_round_trip_and_errors_name_the_field(tmp_path):
    model = model_of("block_003")
    X, U = perform(model, [Push(0, 0.01, 0.0, 0.08, 1.0), Switch(1, -0.02), Push(1, -0.02, 0.1, 0.08, 0.5)], 150)
    d = Demonstration("mine", PLAN_DT, X, U, 1, scene="block_003", source="test")
    path = tmp_path / "mine.json"
    d.save(path)
    back = load_demonstration(path)
    np.testing.assert_allclose(back.X, X, atol=1e-6)
    np.testing.assert_allclose(back.U, U, atol=1e-6)
    assert (back.name, back.face_switches, back.scene, back.dt) == ("mine", 1, "block_003", PLAN_DT)
    assert count_switches(model, X, U) == 1
    data = json.loads(path.read_text())

    def broken(change, match):
        bad = json.loads(json.dumps(data))
        change(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        with pytest.raises(DemonstrationError, match=match):
            load_demonstration(p)

    broken(lambda b: b.pop("dt"), r"bad.json: dt: missing required key")
    broken(lambda b: b.__setitem__("dt", -1), r"bad.json: dt: must be a positive number")
    broken(lambda b: b["columns"].reverse(), r"bad.json: columns: must be")
    broken(lambda b: b.__setitem__("face_switches", "two"), r"bad.json: face_switches: must be a whole number")
    broken(lambda b: b.__setitem__("face_switches", 1.9), r"bad.json: face_switches: must be a whole number")
    broken(lambda b: b.__setitem__("meta", "x"), r"bad.json: meta: must be a JSON object")
    # the full format of earlier files (t and the slider velocities too) still loads, t checked
    full = dict(data, columns=list(COLUMNS), rows=[[i * PLAN_DT, *r[:3], 0.0, 0.0, 0.0, *r[3:]]
                                                   for i, r in enumerate(data["rows"])])
    (tmp_path / "full.json").write_text(json.dumps(full))
    old = load_demonstration(tmp_path / "full.json")
    np.testing.assert_array_equal(old.X, back.X)
    np.testing.assert_array_equal(old.U, back.U)
    data = full
    broken(lambda b: b["rows"][3].__setitem__(0, 7.0), r"bad.json: rows: column t must advance")
    broken(lambda b: b["rows"][3].__setitem__(4, "x"), r"bad.json: rows: must be a list of rows of numbers")
    broken(lambda b: b["rows"][3].pop(), r"bad.json: rows: must be")
    with pytest.raises(DemonstrationError, match="no demonstrations"):
        load_library(tmp_path / "nowhere")


def test_nearest_demonstration_is_k_nn_with_p_2():
    def demo(pose):
        X = np.zeros((2, 7))
        X[-1, :3] = pose
        return Demonstration("d", PLAN_DT, X, np.zeros((1, 2)), 0)

    demos = [demo([0.2, 0.0, 0.0]), demo([0.0, 0.2, 0.0]), demo([0.0, 0.0, 3.1])]
    targets = np.array([[0.15, 0.02, 0.1], [0.01, 0.15, -0.2], [0.0, 0.0, -3.1], [0.1, 0.1, 0.0]])
    idx = nearest(demos, targets, k=2)
    assert idx[:, 0].tolist() == [0, 1, 2, 0]  # -3.1 rad is 0.08 rad from 3.1 rad; a tie goes to the first
    assert idx[3].tolist() == [0, 1]


def test_a_demonstration_moved_to_another_start_is_the_same_push():
    model = model_of("block_003")
    d = load_library("block_003")[1]
    moved = d.to_start((0.1, -0.05, 2.0))
    X = model.rollout(moved.X[0], moved.U)
    np.testing.assert_allclose(X, moved.X, atol=1e-5)
    assert moved.final_pose[2] == pytest.approx(d.final_pose[2] + 2.0)
    planner = DGOCPlanner(model, [d])
    Xb, Ub = planner.demo_in_frame(np.array([0]), np.array([[0.1, -0.05, 2.0]]))
    np.testing.assert_allclose(Xb[0, :len(moved.X)], moved.X, atol=1e-12)
    np.testing.assert_allclose(Ub[0, :len(moved.U)], moved.U, atol=1e-12)


def test_face_switch_mask_marks_the_switches_only():
    model = model_of("block_003")
    demos = load_library("block_003")
    for d in demos:
        mask = face_switch_mask(model, d.X, d.U, window=5)
        assert (mask.sum() == 0) == (d.face_switches == 0), d.name
        assert mask.sum() <= d.face_switches * 2 * 7


def test_dgoc_methods_on_paper_003_block():
    """Targets that need the pusher to change face: the DP -> WS framework reaches every one within the success
    thresholds; zero-started DDP, which starts on the -x face with no demonstration, cannot reach the one behind."""
    model = model_of("block_003")
    planner = DGOCPlanner(model, load_library("block_003"), settings=DDPSettings(max_iterations=40))
    targets = np.array([[0.15, 0.05, 0.6], [-0.12, 0.05, 1.5], [0.05, -0.15, -2.5]])
    x0 = np.tile([0, 0, 0, -0.066, 0, 0, 0.0], (3, 1))
    plans = planner.plan_methods(x0, targets, ("zs", "ws"))
    err_ws = plans["ws"].final_error()
    assert np.all(err_ws[:, :2] < 0.01) and np.all(err_ws[:, 2] < 0.1), err_ws
    assert model.penetration(plans["ws"].X).max() < 2e-3
    assert np.all(np.abs(plans["ws"].X[:, :, 5:7]) < 0.16)  # the soft velocity box holds
    err_zs = plans["zs"].final_error()
    assert err_zs[1, 0] > 0.05  # ZS-DDP never gets behind the block
    assert np.all(plans["ws"].demo >= 0) and np.all(plans["zs"].demo == -1)
    with pytest.raises(ValueError, match="unknown method"):
        planner.plan(x0, targets, "xx")


def test_a_missed_plan_is_planned_again_from_the_next_nearest_demonstrations():
    """``plan_escalating``: only targets whose plan misses the tolerance are planned again, from their 2nd and 3rd
    nearest demonstrations, and each keeps the better plan (within tolerance first, then the cheaper)."""
    model = model_of("block_003")
    demos = load_library("block_003")
    planner = DGOCPlanner(model, demos, settings=DDPSettings(max_iterations=3))
    targets = np.array([[0.15, 0.05, 0.6], [0.05, -0.15, -2.5]])
    x0 = np.tile([0, 0, 0, -0.066, 0, 0, 0.0], (2, 1))
    first = planner.plan(x0, targets, "ws")
    assert planner.plan_escalating(x0, targets, "ws", escalate_k=3, tolerance=(1.0, 10.0), first=first) is first
    # 3 iterations leave both short of a 0.1 mm / 0.001 rad tolerance: both are planned again
    out = planner.plan_escalating(x0, targets, "ws", escalate_k=3, tolerance=(1e-4, 1e-3), first=first)
    again = planner.plan_methods(x0, targets, ("ws",), ranks=(1, 2))["ws"]
    ranked = nearest(demos, targets, 3)
    assert set(again.demo) <= set(ranked[:, 1:].ravel()) and np.all(again.demo != ranked[:, 0])
    np.testing.assert_array_equal(out.cost, np.minimum(first.cost, again.cost))
    np.testing.assert_array_equal(out.demo, np.where(again.cost < first.cost, again.demo, first.demo))
    np.testing.assert_array_equal(out.iterations, first.iterations + again.iterations)
    assert out.solve_time > first.solve_time
    with pytest.raises(ValueError, match="neighbour ranks"):
        planner.plan_methods(x0, targets, ("ws",), ranks=(len(demos),))
