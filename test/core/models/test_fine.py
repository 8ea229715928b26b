"""The MuJoCo fine model: mapping, determinism, chaining, batching and divergence, on real MuJoCo."""
import mujoco
import numpy as np
import pytest

from parapush_ros.core.models.base import ModelDiverged, rollout
from parapush_ros.core.models.fine import FINE_SLEEP, FINE_TIMESTEP, FineModel
from parapush_ros.core.models.mjcf import SERVO_LEAD, TIMESTEP, compile_scene, pusher_contact_height
from parapush_ros.core.scene.shapes import pusher_behind
from parapush_ros.core.scene.spec import load_scene


@pytest.fixture(scope="module")
def box():
    scene = load_scene("box_slider")
    fm = FineModel(scene, threads=2)
    yield scene, fm
    fm.close()


def random_states(scene, n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.repeat(scene.initial_state()[None], n, 0)
    L = scene.layout
    L.pusher_pos(x)[:, 1] = rng.uniform(-0.07, 0.07, n)
    L.object_poses(x)[:, :, 2] = rng.uniform(-0.3, 0.3, (n, L.n_objects))
    L.object_vels(x)[...] = rng.normal(0, 0.01, (n, L.n_objects, 3))
    return x, rng.uniform(-0.01, 0.03, (n, 2)) + np.array([0.01, 0.0])


def test_state_mapping_round_trip():
    scene = load_scene("four_cylinders")
    fm = FineModel(scene, threads=1)
    rng = np.random.default_rng(1)
    x = scene.initial_state() + rng.normal(0, 0.01, scene.layout.dim)
    scene.layout.object_poses(x)[:, 2] = [3.0, -3.0, 0.5, 10.0]  # also beyond +-pi: unwrapping must restore them
    d = mujoco.MjData(fm.model)
    fm.mapping.to_mujoco(x, d.qpos, d.qvel)
    back = np.empty_like(x)
    fm.mapping.from_mujoco(d.qpos, d.qvel, back, scene.layout.object_poses(x)[:, 2])
    np.testing.assert_allclose(back, x, atol=1e-12)


def test_deterministic_and_batched_equals_one_by_one_bitwise(box):
    scene, fm = box
    x, u = random_states(scene, 6)
    batched = fm.propagate(x, u, 1.0)
    again = fm.propagate(x, u, 1.0)
    single_thread = FineModel(scene, threads=1)
    one_by_one = np.stack([single_thread.propagate(x[i:i + 1], u[i:i + 1], 1.0)[0] for i in range(len(x))])
    assert np.array_equal(batched, again)
    assert np.array_equal(batched, one_by_one)
    assert np.array_equal(fm.submit(x[2], u[2], 1.0).result(), batched[2])


def test_chained_slices_equal_a_continuous_run_with_the_same_restart(box):
    """F restarts every slice from the planar state; a hand-written continuous loop doing the same is identical,
    and truly continuous stepping (no restart) stays within a few millimetres."""
    scene, fm = box
    x0 = scene.initial_state()
    x0[1] = 0.03  # side push: contact all along
    controls = np.array([[0.025, 0.0]] * 4)
    chained = rollout(fm, x0, controls, 1.0)
    batch = rollout(fm, np.stack([x0, x0]), np.stack([controls, controls]), 1.0)
    assert np.array_equal(batch[0], chained) and np.array_equal(batch[1], chained)

    m, d = fm.model, mujoco.MjData(fm.model)
    state, manual = x0.copy(), [x0.copy()]
    for u in controls:
        mujoco.mj_resetData(m, d)
        fm.mapping.to_mujoco(state, d.qpos, d.qvel, d.act)
        d.ctrl[:] = u
        for _ in range(round(1.0 / m.opt.timestep)):
            mujoco.mj_step(m, d)
        out = np.empty_like(state)
        fm.mapping.from_mujoco(d.qpos, d.qvel, out, scene.layout.object_poses(state)[:, 2], act=d.act)
        manual.append(out)
        state = out
    assert np.array_equal(np.stack(manual), chained)

    mujoco.mj_resetData(m, d)
    fm.mapping.to_mujoco(x0, d.qpos, d.qvel, d.act)
    for u in controls:
        d.ctrl[:] = u
        mujoco.mj_step(m, d, nstep=round(1.0 / m.opt.timestep))
    adr = fm.mapping.obj_qpos[0]
    assert np.linalg.norm(d.qpos[adr:adr + 2] - chained[-1, 2:4]) < 5e-3


@pytest.mark.parametrize("offset", [0.0, 0.03])  # central push, and a side push that turns the box
def test_pusher_path_does_not_depend_on_the_slicing(box, offset):
    """Issue 15: chaining 0.1 s slices and 1 s slices drive the pusher along the same path (within 0.1 mm at
    70 mm/s) while it pushes the box, through command changes; each slice used to lose 2 v / omega (0.74 mm)."""
    scene, fm = box
    x0 = scene.initial_state()
    x0[1] = offset
    per_second = np.array([[0.07, 0.0], [0.07, 0.0], [0.05, 0.02]])
    coarse = rollout(fm, x0, per_second, 1.0)
    fine = rollout(fm, x0, np.repeat(per_second, 10, axis=0), 0.1)[::10]
    pusher_gap = np.linalg.norm(coarse[:, :2] - fine[:, :2], axis=1)
    assert pusher_gap.max() < 1e-4, pusher_gap
    # and the pusher goes where it is sent: the lag behind the commanded path is the servo's velocity lead only
    commanded = x0[:2] + per_second.sum(axis=0)
    lead = SERVO_LEAD * per_second[-1]
    assert np.linalg.norm(fine[-1, :2] - (commanded - lead)) < 1e-4
    assert fine[-1, 2] - x0[2] > 0.08  # the box was pushed all along (91 mm of 210 mm at 30 mm off-centre)


def test_push_moves_the_box_and_free_box_stays(box):
    scene, fm = box
    x0 = scene.initial_state()
    pushed = fm.propagate(x0[None], np.array([[0.025, 0.0]]), 1.0)[0]
    away = fm.propagate(x0[None], np.array([[-0.025, 0.0]]), 1.0)[0]
    assert pushed[0] == pytest.approx(x0[0] + 0.025, abs=5e-4)  # tracks its command (servo lag from rest)
    assert pushed[2] > 0.015  # the box moved forward
    assert np.allclose(away[2:5], x0[2:5], atol=1e-4)  # no contact: the box stays put


def test_divergence_is_reported_not_hidden(box):
    scene, fm = box
    x, u = random_states(scene, 3)
    x[1, scene.layout.n_q + 2] = 1e9  # finite but absurd object velocity: the solver blows up
    with pytest.raises(ModelDiverged) as e:
        fm.propagate(x, u, 1.0)
    assert e.value.indices == [1] and "unstable" in str(e.value)
    u[1] = [np.nan, 0.0]
    with pytest.raises(ValueError, match="NaN"):
        fm.propagate(x, u, 1.0)
    with pytest.raises(ValueError, match=r"multiple of the 0.001 s"):
        fm.propagate(x, np.zeros_like(u), 0.0005)
    with pytest.raises(ValueError, match=r"threads must be a whole number >= 0 \(0 = all cores\), got -4"):
        FineModel(scene, threads=-4)  # (it became 1 thread)


def test_objects_can_fall_off_the_table():
    scene = load_scene("cylinder_slider")
    fm = FineModel(scene, threads=1)
    x0 = scene.initial_state()
    x0[2] = scene.table.half[0] - 0.06  # slider near the +x edge, pusher right behind it
    x0[0] = x0[2] - 0.0672
    states = rollout(fm, x0, [[0.1, 0.0]] * 2, 1.0)
    assert not scene.table.contains(states[-1, 2:4])


def test_two_ms_steps_stay_on_the_one_ms_reference(box):
    """Issue 16: the fine model steps 2 ms with the CG solver; a contact-rich side push (box turning) ends within
    0.2 mm / 0.1 deg of the 1 ms reference physics, and a slice that is not a whole number of 2 ms steps runs on
    the reference physics."""
    scene, fm = box
    assert fm.timestep == FINE_TIMESTEP == 2 * TIMESTEP and fm.model.opt.timestep == FINE_TIMESTEP
    ref = FineModel(scene, threads=1, timestep=TIMESTEP)
    assert fm.model.opt.solver == mujoco.mjtSolver.mjSOL_CG and ref.model.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    x0 = scene.initial_state()
    x0[1] = 0.03
    U = np.array([[0.03, 0.0], [0.03, 0.01], [0.02, -0.01]])
    fast, slow = rollout(fm, x0, U, 1.0), rollout(ref, x0, U, 1.0)
    assert fast[-1, 2] - x0[2] > 0.03 and abs(slow[-1, 4] - x0[4]) > 0.05  # pushed and turned
    assert np.linalg.norm(fast[-1, 2:4] - slow[-1, 2:4]) < 2e-4 and abs(fast[-1, 4] - slow[-1, 4]) < np.radians(0.1)
    odd = fm.propagate(x0[None], U[:1], 0.013)  # 13 ms: reference steps, bitwise the 1 ms model's
    assert np.array_equal(odd, ref.propagate(x0[None], U[:1], 0.013))
    ref.close()
    with pytest.raises(ValueError, match=r"multiple of 0.001 s"):
        FineModel(scene, timestep=0.0015)


@pytest.mark.skipif(not FINE_SLEEP, reason="this MuJoCo has no sleeping bodies")
def test_resting_objects_sleep_and_clutter_pushes_stay_on_the_reference():
    """Resting bodies sleep in the fine model, not in the reference: in four-cylinder clutter the objects the pusher
    never reaches end asleep exactly where they were, and the pushed target ends within 1 mm / 1 deg of the 1 ms
    reference (on 20 clutter pushes into other objects: 0.60 mm / 0.75 deg at most, docs/results/parareal.md)."""
    scene = load_scene("four_cylinders")
    fm, ref = FineModel(scene, threads=1), FineModel(scene, threads=1, timestep=TIMESTEP)
    assert fm.model.opt.enableflags & FINE_SLEEP and not ref.model.opt.enableflags & FINE_SLEEP
    L = scene.layout
    x0 = scene.initial_state()
    target = L.object_poses(x0)[0, :2]
    d = (target - L.pusher_pos(x0)) / np.linalg.norm(target - L.pusher_pos(x0))
    U = np.repeat((0.05 * d)[None], 4, axis=0)
    fine, slow = rollout(fm, x0, U, 1.0), rollout(ref, x0, U, 1.0)
    moved = np.linalg.norm(L.object_poses(fine[-1])[:, :2] - L.object_poses(x0)[:, :2], axis=1)
    assert moved[0] > 0.05  # the target was pushed
    data = fm._data()  # the last slice's
    asleep = {i for i, o in enumerate(scene.objects) if not data.body_awake[fm.model.body(f"object_{o.name}").id]}
    still = moved < 1e-9
    assert np.any(still) and set(np.flatnonzero(still)) <= asleep  # objects never reached rest, asleep
    err = np.linalg.norm(L.object_poses(fine[-1])[:, :2] - L.object_poses(slow[-1])[:, :2], axis=1)
    yaw = np.abs(np.angle(np.exp(1j * (L.object_poses(fine[-1])[:, 2] - L.object_poses(slow[-1])[:, 2]))))
    assert err.max() < 1e-3 and np.degrees(yaw.max()) < 1.0
    fm.close()
    ref.close()


@pytest.mark.parametrize("name", ["box_slider", "cylinder_slider", "hexagon_slider", "ellipse_slider"])
def test_the_pusher_touches_half_way_up_the_side_it_shares_with_the_object(name):
    """A vertical pusher on a vertical side is a line contact; its force acts at the line's middle, so its tipping
    moment moves the support's load as on a real table. MuJoCo's own cylinder-on-cylinder contact sat at the
    pusher's bottom edge, 1 mm above the table (no load transfer on a disc), and its mesh contacts wandered."""
    scene = load_scene(name)
    compiled = compile_scene(scene)
    model = compiled.model
    d = mujoco.MjData(model)
    o = scene.objects[0]
    x0 = scene.initial_state()
    behind = pusher_behind(o.footprint, o.pose, (1.0, 0.0), scene.pusher.radius, 5e-4)
    scene.layout.pusher_pos(x0)[:] = behind + [0.0, 0.01]
    compiled.mapping.to_mujoco(x0, d.qpos, d.qvel, d.act)
    d.ctrl[:] = (0.05, 0.0)
    pusher = model.body("pusher").id
    heights, normals = [], []
    for _ in range(300):
        mujoco.mj_step(model, d)
        for c in d.contact[:d.ncon]:
            if pusher in (model.geom_bodyid[c.geom1], model.geom_bodyid[c.geom2]):
                heights.append(c.pos[2])
                normals.append(abs(c.frame[2]))
    assert len(heights) > 100
    assert np.allclose(heights, pusher_contact_height(scene, o), atol=5e-4), (min(heights), max(heights))
    assert max(normals) < 0.01
