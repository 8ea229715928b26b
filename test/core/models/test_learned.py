"""Learned coarse model: encoding, shipped weights, accuracy against the analytical model, data generation and
training, Parareal exactness, and clear errors for weights that do not fit a scene."""
import json
import subprocess
import sys
from argparse import Namespace

import numpy as np
import pytest
import torch  # noqa: F401  (a hard requirement of the learned model: fail, do not skip, without it)

from parapush_ros.tools.bench.convergence import random_pushes
from parapush_ros.tools.bench.learned import random_cluster_pushes
from parapush_ros.core.models import learned as LM
from parapush_ros.core.models.analytical import AnalyticalCoarseModel
from parapush_ros.core.models.base import rollout
from parapush_ros.core.models.fine import FineModel
from parapush_ros.core.models.parareal import Parareal
from parapush_ros.core.models.registry import Predictor
from parapush_ros.core.scene.projection import max_penetration
from parapush_ros.core.scene.spec import load_scene, scene_from_dict
from parapush_ros.tools.learning import datagen
from parapush_ros.tools.learning.train import train

pytestmark = pytest.mark.timeout(300)


def reference_features(x, u):
    """Slow, explicit version of ``LM.encode`` for one state (the documented encoding, row by row)."""
    n = (len(x) - 4) // 6
    p, vp = x[0:2], x[2 + 3 * n:4 + 3 * n]
    poses, vels = x[2:2 + 3 * n].reshape(n, 3), x[4 + 3 * n:].reshape(n, 3)
    rows = []
    for i in range(n):
        rel = poses[i, :2] - p
        th = np.arctan2(u[1], u[0]) if np.hypot(*u) > LM.U_EPS else np.arctan2(rel[1], rel[0])
        rt = np.array([[np.cos(th), np.sin(th)], [-np.sin(th), np.cos(th)]])
        f = [np.hypot(*u), *(rt @ vp), *(rt @ rel), *(rt @ vels[i, :2]), vels[i, 2]]
        others = sorted((np.linalg.norm(poses[j, :2] - poses[i, :2]), j) for j in range(n) if j != i)
        others = [j for d, j in others if d <= LM.CONTEXT_RADIUS]
        for s in range(LM.N_OTHERS):
            if s < len(others):
                j = others[s]
                f += [1.0, *(rt @ (poses[j, :2] - poses[i, :2])), *(rt @ vels[j, :2]), vels[j, 2]]
            else:
                f += [0.0, *LM.PARKED, 0.0, 0.0, 0.0]
        rows.append(f)
    return np.array(rows)


def sample_states(n, count, seed):
    """Valid random family states with velocities (the data generator's sampler) and their controls."""
    sampler = datagen.Sampler(LM.family_scene(n), np.random.default_rng(seed))
    xs, us = zip(*(sampler.start() for _ in range(count)))
    x, u = np.array(xs), np.array(us)
    x[:, LM.family_scene(n).layout.n_q:] += np.random.default_rng(seed + 1).normal(0, 0.01, (count, 2 + 3 * n))
    u[::5] = 0.0  # zero controls: frame toward the focus object
    return x, u


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_encoding_matches_the_documented_layout_and_round_trips(n):
    x, u = sample_states(n, 12, seed=n)
    rows = LM.encode(x, u)
    assert rows.features.shape == (12 * n, LM.F_IN)
    expected = np.concatenate([reference_features(x[b], u[b]) for b in range(len(x))])
    np.testing.assert_allclose(rows.features, expected, rtol=0, atol=1e-12)
    # targets -> outputs -> state reproduces the next state's object part exactly (frame round trip)
    x_next = x.copy()
    L = LM.family_scene(n).layout
    L.object_poses(x_next)[...] += np.random.default_rng(0).normal(0, 0.02, (12, n, 3))
    L.object_vels(x_next)[...] = np.random.default_rng(1).normal(0, 0.03, (12, n, 3))
    y = LM.targets(rows, x, x_next)
    out = x.copy()
    LM.apply_outputs(rows, out, y)
    np.testing.assert_allclose(L.object_poses(out), L.object_poses(x_next), rtol=0, atol=1e-12)
    np.testing.assert_allclose(L.object_vels(out), L.object_vels(x_next), rtol=0, atol=1e-12)
    # mirroring twice is the identity
    xm, um = LM.mirror(*LM.mirror(x, u))
    assert np.array_equal(xm, x) and np.array_equal(um, u)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_absent_objects_and_far_objects_encode_alike_and_order_does_not_matter(n):
    x, u = sample_states(n, 8, seed=10 + n)
    L, L4 = LM.family_scene(n).layout, LM.family_scene(4).layout
    # the same scene with 4 - n extra objects parked 2 m away (beyond CONTEXT_RADIUS of everything)
    far = np.array([[2.0 + k, 2.0, 0.0] for k in range(4 - n)])
    x4 = L4.compose(L.pusher_pos(x), np.concatenate([L.object_poses(x), np.repeat(far[None], len(x), 0)], 1),
                    L.pusher_vel(x), np.concatenate([L.object_vels(x), np.zeros((len(x), 4 - n, 3))], 1))
    r1 = LM.encode(x, u)
    mask = np.zeros((len(x), 4), dtype=bool)
    mask[:, :n] = True
    r4 = LM.encode(x4, u, mask)
    np.testing.assert_allclose(r4.features, r1.features, rtol=0, atol=1e-12)
    # permuting the objects permutes the rows and nothing else
    perm = np.roll(np.arange(n), 1)
    xp = L.compose(L.pusher_pos(x), L.object_poses(x)[:, perm], L.pusher_vel(x), L.object_vels(x)[:, perm])
    fp = LM.encode(xp, u).features.reshape(len(x), n, -1)
    np.testing.assert_allclose(fp, r1.features.reshape(len(x), n, -1)[:, perm], rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def fines():
    out = {}
    yield out
    for f in out.values():
        f.close()


def fine_for(fines, scene):
    if scene.name not in fines:
        fines[scene.name] = FineModel(scene, threads=2)
    return fines[scene.name]


@pytest.mark.parametrize("name", ["cylinder_slider", "four_cylinders", "obstacle_push"])
def test_shipped_weights_predict_finite_feasible_states(name):
    scene = load_scene(name)
    model = LM.LearnedCoarseModel.load(scene)  # None: the shipped weights
    assert model.name == "learned" and model.meta["family"]["max_objects"] == 4
    rng = np.random.default_rng(3)
    if len(scene.objects) > 1:
        x0, U = random_cluster_pushes(scene, 16, 3, rng)
    else:
        x0, U = random_pushes(scene, 16, 3, rng)
    x = x0
    for n in range(U.shape[1]):
        x = model.propagate(x, U[:, n], 1.0)
        assert np.all(np.isfinite(x))
        assert max_penetration(scene, x).max() <= 1e-3 + 1e-9
    # batch of one equals the same state in a batch
    np.testing.assert_allclose(model.propagate(x0[:1], U[:1, 0], 1.0)[0], model.propagate(x0, U[:, 0], 1.0)[0],
                               rtol=0, atol=1e-6)


def test_far_objects_stay_put_and_the_pusher_follows_its_servo():
    scene = load_scene("four_cylinders")
    model = LM.LearnedCoarseModel.load(scene)
    x0 = scene.initial_state()  # pusher 8.5 cm behind the target, the others 20+ cm away
    u = np.array([[0.03, 0.0]])
    x1 = model.propagate(x0[None], u, 1.0)[0]
    L = scene.layout
    assert np.array_equal(L.object_poses(x1)[1:], L.object_poses(x0)[1:])
    assert np.all(L.object_vels(x1)[1:] == 0.0)
    np.testing.assert_allclose(L.pusher_pos(x1), L.pusher_pos(x0) + u[0] * (1.0 - model.pusher_lag), atol=1e-12)
    with pytest.raises(ValueError, match="slice duration"):
        model.propagate(x0[None], u, 1.5)
    np.testing.assert_allclose(model.propagate(x0[None], u, 2.0), model.propagate(x1[None], u, 1.0), atol=1e-12)


def tie_states(gap=0.02, eps=1e-6):
    """Two 4-cylinder states a hair apart in which object 0's two nearest neighbours swap slots: 1 and 2 sit at
    (nearly) the same distance from it, 1 a micrometre nearer in the first state and farther in the second."""
    scene = load_scene("four_cylinders")
    L, R = scene.layout, scene.objects[0].radius
    d = 2 * R + gap
    xs = []
    for sign in (-1.0, 1.0):
        poses = np.array([[0.0, 0.0, 0.3],
                          [(d + sign * eps) * np.cos(1.0), (d + sign * eps) * np.sin(1.0), 0.0],
                          [d * np.cos(-1.8), d * np.sin(-1.8), 1.0],
                          [0.35, 0.35, 0.0]])
        xs.append(L.compose(np.array([-(R + scene.pusher.radius + 0.003), 0.01]), poses))
    return scene, np.array(xs), np.array([[0.03, 0.0], [0.03, 0.0]])


def test_soft_slot_order_weights():
    _scene, x, u = tie_states()
    rows = LM.encode(x, u)
    focus = rows.features[rows.i == 0]
    w = LM.slot_order_weights(focus)
    np.testing.assert_allclose(w.sum(axis=0), 1.0)
    swap01 = LM.SLOT_ORDERS.index((1, 0, 2))
    # at a near tie the sorted order and the one that swaps the two near neighbours count (almost) equally
    np.testing.assert_allclose(w[[0, swap01]], 0.5, atol=1e-3)
    # neighbours 10 softness lengths apart: the sorted order alone; absent slots never blend
    far = LM.encode(*tie_states(gap=0.02)[1:])
    one = LM.encode(LM.family_scene(1).initial_state()[None], np.array([[0.02, 0.0]]))
    spread = focus.copy()
    spread[:, LM._SLOT_REL[0]] *= 1.0 - 10 * LM.SLOT_ORDER_SOFTNESS / np.hypot(*spread[0, LM._SLOT_REL[0]])
    for rows_ in (spread, one.features, far.features[far.i == 3]):
        assert np.all(LM.slot_order_weights(rows_)[0] > 1.0 - 1e-4)
    # the column map moves whole slots
    cols = LM.slot_order_columns()
    assert cols.shape == (6, LM.F_IN) and np.array_equal(cols[0], np.arange(LM.F_IN))
    assert all(sorted(c) == list(range(LM.F_IN)) for c in cols)


def test_the_prediction_is_continuous_where_neighbours_swap_slots():
    """A 2 um change that swaps two neighbours' slots must not move the prediction (it jumps with the hard
    nearest-first order, which is what made Parareal's corrections wrong in clusters)."""
    scene, x, u = tie_states()
    L = scene.layout
    soft = LM.LearnedCoarseModel.load(scene)
    hard = LM.LearnedCoarseModel.load(scene, slot_order_softness=0.0)
    ys, yh = soft.propagate(x, u, 1.0), hard.propagate(x, u, 1.0)
    assert np.linalg.norm(L.object_poses(yh)[0, 0, :2] - L.object_poses(x)[0, 0, :2]) > 0.01  # it is pushed
    soft_jump = np.abs(L.object_poses(ys)[1] - L.object_poses(ys)[0]).max()
    hard_jump = np.abs(L.object_poses(yh)[1] - L.object_poses(yh)[0]).max()
    assert soft_jump < 2e-5, (soft_jump, hard_jump)
    assert hard_jump > 10 * soft_jump, (soft_jump, hard_jump)
    # away from ties the soft order changes nothing: the network sees the sorted rows only
    _, x2, u2 = tie_states(gap=0.03)
    L.object_poses(x2)[:, 1, :2] *= 1.3
    np.testing.assert_array_equal(soft.propagate(x2, u2, 1.0), hard.propagate(x2, u2, 1.0))
    with pytest.raises(ValueError, match="slot_order_softness"):
        LM.LearnedCoarseModel.load(scene, slot_order_softness=-1.0)


def test_shipped_weights_are_blind_to_object_velocities():
    """Object start velocities hardly matter on this table (friction stops a free cylinder in milliseconds), and a
    network that reads them as "being pushed" mis-corrects Parareal: the shipped one ignores them exactly."""
    scene = load_scene("four_cylinders")
    model = LM.LearnedCoarseModel.load(scene)
    assert model.object_velocities is False and model.meta["encoding"]["object_velocities"] is False
    x0, U = random_cluster_pushes(scene, 8, 1, np.random.default_rng(4))
    L = scene.layout
    x1 = x0.copy()
    L.object_vels(x1)[...] = np.random.default_rng(5).normal(0.0, 0.03, (8, 4, 3))
    np.testing.assert_array_equal(L.object_poses(model.propagate(x0, U[:, 0], 1.0)),
                                  L.object_poses(model.propagate(x1, U[:, 0], 1.0)))
    rows = LM.encode(x1, U[:, 0], object_velocities=False)
    assert np.all(rows.features[:, LM.OBJECT_VELOCITY_COLS] == 0.0)
    assert np.array_equal(np.delete(rows.features, LM.OBJECT_VELOCITY_COLS, axis=1),
                          np.delete(LM.encode(x1, U[:, 0]).features, LM.OBJECT_VELOCITY_COLS, axis=1))
    assert LM.uses_object_velocities({}) is True  # older weights: trained with velocities
    with pytest.raises(LM.LearnedModelError, match=r"encoding.object_velocities"):
        LM.uses_object_velocities({"encoding": {"object_velocities": "no"}})


def heldout(fines, n, size, seed=987_654):
    scene = LM.family_scene(n)
    d = datagen.generate_chunk(fine_for(fines, scene), scene, seed, 0, size)
    return scene, d


def object_rms_mm(scene, pred, ref):
    L = scene.layout
    e = np.linalg.norm(L.object_poses(pred)[..., :2] - L.object_poses(ref)[..., :2], axis=-1)
    return float(np.sqrt(np.mean(e ** 2)) * 1e3)


@pytest.mark.parametrize("n, factor", [(4, 0.5), (1, 0.5)])
def test_learned_beats_analytical_on_a_fixed_heldout_set(fines, n, factor):
    scene, d = heldout(fines, n, 48)  # seed never used for training data ([0, chunk] there)
    learned = LM.LearnedCoarseModel.load(scene).propagate(d["x"], d["u"], 1.0)
    analytical = AnalyticalCoarseModel(scene).propagate(d["x"], d["u"], 1.0)
    e_l, e_a = object_rms_mm(scene, learned, d["x_next"]), object_rms_mm(scene, analytical, d["x_next"])
    assert e_l < factor * e_a, (e_l, e_a)


@pytest.mark.parametrize("n, radius", [(1, 0.025), (4, 0.0075)])
def test_another_pusher_radius_is_predicted_through_the_equivalent_contact(fines, n, radius):
    """The weights were trained with a 14.5 mm pusher; for another radius the network is shown the contact a
    trained-radius pusher would make (same normal, same gap). On fine-model data of that pusher it is much nearer
    than the network shown the pusher where it is, and than the analytical model."""
    data = LM.family_scene(n).to_dict()
    data["name"] = f"cylinders_{n}_pusher_{radius * 1e3:g}mm"
    data["pusher"]["radius"] = radius
    scene = scene_from_dict(data)
    d = datagen.generate_chunk(fine_for(fines, scene), scene, 987_654, 0, 48)
    model = LM.LearnedCoarseModel.load(scene)  # not refused: any pusher radius
    assert model.pusher_radius_offset == pytest.approx(radius - 0.0145)
    equivalent = object_rms_mm(scene, model.propagate(d["x"], d["u"], 1.0), d["x_next"])
    model.pusher_radius_offset = 0.0  # the network shown the pusher where it is
    as_is = object_rms_mm(scene, model.propagate(d["x"], d["u"], 1.0), d["x_next"])
    analytical = object_rms_mm(scene, AnalyticalCoarseModel(scene).propagate(d["x"], d["u"], 1.0), d["x_next"])
    assert equivalent < 0.7 * as_is and equivalent < 0.5 * analytical, (equivalent, as_is, analytical)


@pytest.mark.parametrize("name", ["cylinder_slider", "four_cylinders"])
def test_parareal_with_the_learned_model_is_exact_at_K_equals_N(fines, name):
    scene = load_scene(name)
    fine = fine_for(fines, scene)
    rng = np.random.default_rng(5)
    x0, U = (random_cluster_pushes if len(scene.objects) > 1 else random_pushes)(scene, 2, 3, rng)
    pr = Parareal(scene, LM.LearnedCoarseModel.load(scene), fine)
    r = pr.solve(x0, U, 1.0, max_iterations=3, keep_history=True)
    ref = rollout(fine, x0, U, 1.0)
    assert np.array_equal(r.states, ref)
    for k, X in enumerate(r.history):
        assert np.array_equal(X[:, :k + 1], ref[:, :k + 1])
    # the predictor's "learned" model and Parareal on top of it
    pred = Predictor(scene, coarse="learned", threads=2)
    try:
        p = pred.predict(x0[0], U[0], 1.0, model="learned")
        assert p.model == "learned" and p.states.shape == (4, scene.layout.dim)
        assert pred.predict(x0[0], U[0], 1.0, model="parareal3").states.tolist() == ref[0].tolist()
    finally:
        pred.close()


def test_weights_for_another_scene_family_are_refused(tmp_path):
    other_pusher = load_scene("cylinder_slider").to_dict()
    other_pusher["pusher"].update(radius=0.03, start=[-0.1, 0.0])
    LM.LearnedCoarseModel.load(scene_from_dict(other_pusher))  # any pusher radius: the equivalent contact
    with pytest.raises(LM.LearnedModelError, match=r"objects\[0\]\.shape is 'box'"):
        LM.LearnedCoarseModel.load(load_scene("box_slider"))
    base = load_scene("cylinder_slider").to_dict()
    bigger = json.loads(json.dumps(base))
    bigger["objects"][0]["radius"] = 0.04
    with pytest.raises(LM.LearnedModelError, match=r"objects\[0\]\.radius is 0\.04.*object_radius"):
        LM.LearnedCoarseModel.load(scene_from_dict(bigger))
    slippery = json.loads(json.dumps(base))
    slippery["friction"]["pusher_object"] = 0.5
    with pytest.raises(LM.LearnedModelError, match=r"friction\.pusher_object"):
        LM.LearnedCoarseModel.load(scene_from_dict(slippery))
    five = load_scene("four_cylinders").to_dict()
    five["objects"].append(dict(five["objects"][1], name="fifth", start=[0.3, -0.35, 0.0]))
    with pytest.raises(LM.LearnedModelError, match="number of objects is 5"):
        LM.LearnedCoarseModel.load(scene_from_dict(five))
    with pytest.raises(LM.LearnedModelError, match="not found"):
        LM.LearnedCoarseModel.load(load_scene("cylinder_slider"), tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a weights file")
    with pytest.raises(LM.LearnedModelError, match="not a readable weights file"):
        LM.LearnedCoarseModel.load(load_scene("cylinder_slider"), junk)


def test_weights_record_the_support_they_learned_and_refuse_another():
    """Issue 15 changed the support under every object; weights record theirs (weights made before do not, and
    are not refused for it)."""
    family = LM.family_metadata()
    assert family["support"] == {"pattern": "grid", "points": 3, "spread": 1.0}
    assert family["fine_model_timestep_s"] == 0.002 and family["fine_timestep_s"] == 0.001
    LM.check_family(load_scene("cylinder_slider"), family)
    native = load_scene("cylinder_slider").to_dict()
    native["support"] = {"pattern": "native"}
    with pytest.raises(LM.LearnedModelError, match=r"support is .*'native'.*trained for .*'grid'"):
        LM.check_family(scene_from_dict(native), family)
    LM.check_family(scene_from_dict(native), {k: v for k, v in family.items() if k != "support"})


def test_datagen_is_deterministic_resumable_and_training_lowers_the_loss(tmp_path, fines):
    scene = LM.family_scene(2)
    a = datagen.generate_chunk(fine_for(fines, scene), scene, 4, 7, 8)
    b = datagen.generate_chunk(fine_for(fines, scene), scene, 4, 7, 8)
    assert all(np.array_equal(a[k], b[k]) for k in ("x", "u", "x_next", "step"))

    out = tmp_path / "data"
    args = Namespace(objects="1,4", samples=128, out=str(out), seed=3, workers=1, chunk_size=32, into_cluster=0.5)
    meta = datagen.run(args)
    assert meta["complete"] and meta["samples"] == 128 and set(meta["counts"]) == {"1", "4"}
    assert meta["family"]["object_radius"] == 0.05115 and meta["code_version"].startswith("0.")
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("chunk_*.npz")}
    again = datagen.run(args)
    assert again["samples"] == 128  # resumed: nothing to do
    assert again["elapsed_s"] == pytest.approx(meta["elapsed_s"]) and meta["elapsed_s"] > 0.0  # from the chunks
    assert stamps == {p.name: p.stat().st_mtime_ns for p in out.glob("chunk_*.npz")}
    with pytest.raises(ValueError, match="seed"):
        datagen.run(Namespace(**{**vars(args), "seed": 4}))
    with pytest.raises(ValueError, match="into_cluster"):
        datagen.run(Namespace(**{**vars(args), "into_cluster": 0.0}))
    with pytest.raises(ValueError, match="--into-cluster"):
        datagen.run(Namespace(**{**vars(args), "into_cluster": 1.5, "out": str(tmp_path / "bad")}))
    legacy = tmp_path / "legacy"  # a dataset written before --into-cluster existed resumes with 0
    datagen.run(Namespace(**{**vars(args), "objects": "2", "samples": 32, "into_cluster": 0.0, "out": str(legacy)}))
    old_meta = json.loads((legacy / "dataset.json").read_text())
    del old_meta["into_cluster"]
    (legacy / "dataset.json").write_text(json.dumps(old_meta))
    assert datagen.run(Namespace(**{**vars(args), "objects": "2", "samples": 32, "into_cluster": 0.0,
                                    "out": str(legacy)}))["samples"] == 32

    weights = tmp_path / "w.pt"
    rep = train([out, legacy], weights, seed=1, epochs=8, batch=32, patience=100, threads=1, quiet=True,
                command="test")
    assert [d["into_cluster"] for d in rep["data"]["datasets"]] == [0.5, 0.0]
    assert rep["data"]["samples_used"] == 160
    other = json.loads((legacy / "dataset.json").read_text())
    other["family"]["object_radius"] = 0.04
    (legacy / "dataset.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match=r"legacy: scene family differs .* in object_radius"):
        train([out, legacy], tmp_path / "x.pt", epochs=1, quiet=True, command="test")
    # the same samples twice would validate on training samples
    with pytest.raises(ValueError, match=r"the same samples as .*data \(seed, objects, chunk size"):
        train([out, out], tmp_path / "x.pt", epochs=1, quiet=True, command="test")
    with pytest.raises(ValueError, match=r"training diverged: no epoch of 2 reached a finite validation loss"):
        train(out, tmp_path / "x.pt", epochs=2, lr=1e8, quiet=True, command="test")
    rep = train(out, weights, seed=1, epochs=8, batch=32, patience=100, threads=1, quiet=True, command="test")
    curves = rep["curves"]
    assert curves["train_loss"][-1] < 0.7 * curves["train_loss"][0]
    assert min(curves["val_loss"]) < curves["val_loss"][0]
    assert weights.with_suffix(".json").is_file() and weights.with_suffix(".png").stat().st_size > 1000
    assert json.loads(weights.with_suffix(".json").read_text())["data"]["samples_used"] == 128
    model = LM.LearnedCoarseModel.load(load_scene("four_cylinders"), weights)
    assert model.meta["training"]["seed"] == 1
    assert rep["encoding"]["object_velocities"] is False and model.object_velocities is False


def test_into_cluster_starts_push_the_target_into_the_others():
    scene = LM.family_scene(3)
    L = scene.layout

    def share_behind(into_cluster):
        """Share of starts with the pusher within 60 deg of 'behind its nearest object' (as seen from the
        others' centroid), among the starts where it nearly touches that object (so that it is the target)."""
        sampler = datagen.Sampler(scene, np.random.default_rng(2), into_cluster=into_cluster)
        hits = []
        while len(hits) < 60:
            x, _u = sampler.start()
            c, p = L.object_poses(x)[:, :2], L.pusher_pos(x)
            d = np.linalg.norm(c - p, axis=1)
            t = int(np.argmin(d))
            if d[t] > scene.objects[0].radius + scene.pusher.radius + 0.003:
                continue
            behind = c[t] - np.delete(c, t, axis=0).mean(axis=0)
            hits.append(behind @ (p - c[t]) / np.linalg.norm(behind) / d[t] >= np.cos(np.radians(60)) - 1e-9)
        return np.mean(hits)

    assert share_behind(1.0) >= 0.95
    assert share_behind(0.0) <= 0.6


def test_the_cli_names_a_missing_dataset_in_one_line(tmp_path, capsys):
    from parapush_ros.cli import console_main
    missing = tmp_path / "nowhere"
    assert console_main(["train", "--data", str(missing), "--out", str(tmp_path / "w.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"parapush train: error: {missing}: no dataset.json (is this a 'parapush datagen' output directory?)"
    assert console_main(["datagen", "--objects", "0..2", "--out", str(tmp_path / "d")]) == 2
    assert "parapush datagen: error: --objects: '0..2' must lie within 1..4" in capsys.readouterr().err


def test_core_import_does_not_need_torch():
    code = ("import sys; import parapush_ros.core.models.registry, parapush_ros.core.models.learned, "
            "parapush_ros.tools.learning.datagen, parapush_ros.cli; parapush_ros.cli.build_parser(); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bench_learned_small(tmp_path):
    from parapush_ros.cli import main
    out = tmp_path / "out"
    assert main(["bench", "learned", "--pushes", "1", "--actions", "2", "--multi-pushes", "1", "--multi-actions", "2",
                 "--repeats", "1", "--out", str(out)]) == 0
    res = json.loads((out / "bench_learned.json").read_text())
    for case in (res["single"]["N2"], res["multi"]["N2"]):
        assert case["exact_at_K_equals_N"]
        for model in ("learned", "analytical"):
            # measured against the fine model's own serial rollout (not the K = N iterate itself): 0 at K = N only
            # because Parareal is exact there
            assert np.asarray(case[model]["mean_rms_mm"])[:, -1].max() == 0.0
    assert res["cost"]["cylinder_slider"]["learned_batch100_fine_over_coarse"] > 0
    assert (out / "learned.png").stat().st_size > 1000
