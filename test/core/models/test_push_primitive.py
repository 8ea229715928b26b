"""The push primitive of paper 004 in MuJoCo (box_slider scene) and its dataset command."""
import json

import numpy as np
import pytest

from parapush_ros.cli import main
from parapush_ros.core.models.push_primitive import (MAX_OBLIQUE, N_FEATURES, N_PLACE, EMDNPrimitive, FinePrimitive,
                                                     Lesion, apply_change, face_normal_angle, features,
                                                     place_features, pose_change, random_pushes, valid_action)
from parapush_ros.tools.learning.datagen_primitive import load


@pytest.fixture(scope="module")
def fine():
    f = FinePrimitive(threads=1)
    yield f
    f.close()


def test_valid_action_keeps_pushes_on_a_face():
    a = valid_action(np.array([[0.0, 0.5], [np.radians(44.0), 1.7], [np.pi + 0.1, -0.2], [7.0, 0.3]]))
    assert np.all(np.abs(a[:, 0] - face_normal_angle(a[:, 0])) <= MAX_OBLIQUE + 1e-12)
    assert np.all((a[:, 1] >= 0.0) & (a[:, 1] <= 1.0))
    np.testing.assert_allclose(a[0], [0.0, 0.5])
    assert a[1, 0] == pytest.approx(MAX_OBLIQUE) and a[1, 1] == 1.0
    _poses, actions = random_pushes(np.random.default_rng(0), 100)
    np.testing.assert_allclose(valid_action(actions), actions, atol=1e-12)


def test_pose_change_round_trip():
    rng = np.random.default_rng(1)
    p = rng.normal(size=(5, 3))
    q = rng.normal(size=(5, 3))
    np.testing.assert_allclose(apply_change(p, pose_change(p, q)), q, atol=1e-12)


def test_fine_push_moves_the_box_as_physics_says(fine):
    # a central push along +x moves the box ~5 cm along its own x, without turning; the same push at another pose
    # gives the same object-frame change (the table is uniform); pushing off-centre turns the box
    poses = np.array([[0.0, 0.0, 0.0], [0.15, -0.2, 2.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    actions = np.array([[0.0, 0.5], [0.0, 0.5], [0.0, 0.0], [0.0, 1.0]])
    change = pose_change(poses, fine.push(poses, actions))
    assert 0.045 < change[0, 0] < 0.05 and abs(change[0, 1]) < 1e-3 and abs(change[0, 2]) < 0.01
    np.testing.assert_allclose(change[1, :2], change[0, :2], atol=5e-4)
    assert abs(change[1, 2] - change[0, 2]) < 5e-3
    assert change[2, 2] > 0.1 and change[3, 2] < -0.1  # contact at the -y end turns it counter-clockwise
    np.testing.assert_allclose(change[2, 2], -change[3, 2], atol=0.02)


def test_lesion_parse_and_contains():
    le = Lesion.parse("-0.1,-0.05,0.1,0.05")
    assert le.contains(np.array([[0.0, 0.0], [0.0, 0.06]])).tolist() == [True, False]
    with pytest.raises(ValueError, match="--lesion"):
        Lesion.parse("1,2,3")
    with pytest.raises(ValueError, match="x0 < x1"):
        Lesion(0.1, 0.0, 0.0, 0.1)


def test_datagen_primitive_is_seeded_and_resumes(tmp_path):
    out = tmp_path / "prim"

    def datagen(path, samples, *more):
        return main(["datagen", "--primitive", "--out", str(path), "--samples", str(samples), "--chunk-size", "3",
                     "--workers", "1", *more])

    assert datagen(out, 6) == 0
    meta, data = load(out)
    assert meta["complete"] and meta["samples"] == 6 and data["poses"].shape == (6, 3)
    first = (out / "chunk_00000.npz").stat().st_mtime_ns
    assert datagen(out, 9) == 0  # extends, keeps chunk 0
    assert (out / "chunk_00000.npz").stat().st_mtime_ns == first
    meta, data = load(out)
    assert meta["samples"] == 9 and len(data["actions"]) == 9
    other = tmp_path / "again"
    assert datagen(other, 3) == 0
    np.testing.assert_array_equal(load(other)[1]["poses_next"], data["poses_next"][:3])
    with pytest.raises(ValueError, match="seed"):
        datagen(out, 6, "--seed", "1")
    assert json.loads((out / "dataset.json").read_text())["seed"] == 0


def test_place_features_are_bilinear_weights():
    xy = np.array([[0.0, 0.0], [0.03, -0.07], [0.55, 0.9]])
    f = place_features(xy)
    assert f.shape == (3, N_PLACE)
    np.testing.assert_allclose(f.sum(1), 1.0)
    assert (f[0] > 0).sum() == 1 and (f[1] > 0).sum() == 4
    x = features(np.array([[0.0, 0.0, 0.3]]), np.array([[0.2, 0.7]]))
    assert x.shape == (1, N_FEATURES)
    np.testing.assert_allclose(x[0, N_PLACE:], [np.cos(0.3), np.sin(0.3), np.cos(0.2), np.sin(0.2), 0.7])


def test_train_primitive_writes_a_loadable_lesioned_model(tmp_path):
    data = tmp_path / "prim"
    assert main(["datagen", "--primitive", "--out", str(data), "--samples", "24", "--chunk-size", "12",
                 "--workers", "1"]) == 0
    out = tmp_path / "emdn.pt"
    assert main(["train-primitive", "--data", str(data), "--out", str(out), "--epochs", "2", "--members", "2",
                 "--lesion=-0.1,-0.1,0.1,0.1"]) == 0
    model = EMDNPrimitive.load(out)
    assert model.lesion == Lesion(-0.1, -0.1, 0.1, 0.1) and model.var_ref > 0.0
    assert model.info["train_pushes"] + model.info["val_pushes"] + model.info["test_pushes"] <= 24
    nxt, var = model.predict(np.zeros((2, 3)), np.array([[0.0, 0.5], [np.pi / 2, 0.5]]))
    assert nxt.shape == (2, 3) and var.shape == (2, 3) and np.all(var > 0.0)
    with pytest.raises(ValueError, match="--hidden"):
        main(["train-primitive", "--data", str(data), "--out", str(out), "--hidden", "a,b"])
