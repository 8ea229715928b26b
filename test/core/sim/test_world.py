"""The continuous scene simulation and the mocap emulator without ROS."""
import numpy as np
import pytest

from parapush_ros.core.models.fine import FineModel
from parapush_ros.core.scene.spec import load_scene
from parapush_ros.core.sim.mocap_emulator import EmulatedMocapConfig, MocapEmulator
from parapush_ros.core.sim.world import PUSHER, SimWorld


@pytest.fixture(scope="module")
def sim():
    s = SimWorld(load_scene("cylinder_slider"))
    yield s
    s.close()


def test_reset_state_and_poses_match_the_scene(sim):
    sim.reset()
    x = sim.planar_state()
    np.testing.assert_allclose(x, sim.scene.initial_state(), atol=1e-9)
    poses = sim.body_poses()
    assert list(poses) == [PUSHER, "cylinder"]
    p, q = poses["cylinder"]
    np.testing.assert_allclose(p[:2], [0.0, 0.0], atol=1e-9)
    assert 0.0 < p[2] < 0.0245 and np.allclose(q, [0, 0, 0, 1], atol=1e-6)


def test_pusher_follows_the_command_and_pushes_the_slider_like_the_fine_model(sim):
    sim.reset()
    t0 = sim.time
    sim.set_velocity(0.05, 0.0)
    sim.step(1000)
    assert sim.time == pytest.approx(t0 + 1.0)
    x = sim.planar_state()
    assert x[0] == pytest.approx(sim.scene.pusher.start[0] + 0.05, abs=2e-3)
    assert x[2] > 0.02  # the slider moved forward
    # same MuJoCo model and control path as the fine model: one 1 s slice from the same state agrees
    fine = FineModel(sim.scene, threads=1)
    ref = fine.propagate(sim.scene.initial_state()[None], np.array([[0.05, 0.0]]), 1.0)[0]
    fine.close()
    np.testing.assert_allclose(x[:5], ref[:5], atol=2e-3)


def test_time_keeps_running_across_resets_and_objects_falling_off_are_reported(sim):
    sim.reset()
    x = sim.scene.initial_state()
    x[2] = 0.39  # slider centre right at the +x edge, pushed outward
    x[0] = 0.39 - 0.05115 - 0.0145 - 0.001
    sim.reset(x)
    t0 = sim.time
    sim.set_velocity(0.2, 0.0)
    sim.step(1500)
    assert sim.newly_fallen() == ["cylinder"]
    assert sim.newly_fallen() == []  # reported once
    sim.reset()
    assert sim.time > t0 and sim.fallen == set()


def test_emulator_rate_latency_noise_dropouts_and_hidden_bodies():
    poses = {"pusher": (np.array([0.1, 0.0, 0.05]), np.array([0, 0, 0, 1.0])),
             "slider": (np.array([0.2, 0.1, 0.01]), np.array([0, 0, 0, 1.0]))}
    em = MocapEmulator(["pusher", "slider"], EmulatedMocapConfig(pose_rate=100.0, position_noise=0.001, yaw_noise=0.01,
                                                                 latency=0.02, dropout_probability=0.0, seed=3))
    em.sample(0.0, poses)
    assert em.due(0.019) == []
    got = em.due(0.02)
    assert [g[0] for g in got] == ["pusher", "slider"] and all(g[1] == 0.0 for g in got)  # stamp = measure time
    assert 0.0 < np.linalg.norm(got[1][2][:2] - [0.2, 0.1]) < 0.01
    assert got[1][2][2] == 0.01  # noise is planar
    em.hidden.add("slider")
    em.sample(0.01, poses)
    assert [g[0] for g in em.due(1.0)] == ["pusher"]
    # seeded: the same seed gives the same samples
    cfg = EmulatedMocapConfig(position_noise=0.001, yaw_noise=0.0, latency=0.0, dropout_probability=0.3, seed=7)
    a, b = MocapEmulator(["slider"], cfg), MocapEmulator(["slider"], cfg)
    for k in range(50):
        a.sample(k * 0.01, poses)
        b.sample(k * 0.01, poses)
    da, db = a.due(1.0), b.due(1.0)
    assert len(da) == len(db) < 50  # some samples dropped
    np.testing.assert_array_equal(np.array([d[2] for d in da]), np.array([d[2] for d in db]))
    with pytest.raises(ValueError, match=r"dropout_probability: must be in \[0, 1\], got 2.0"):
        EmulatedMocapConfig(dropout_probability=2.0)


def test_divergence_raises_model_diverged_and_leaves_the_reset_to_the_caller(sim):
    from parapush_ros.core.models.base import ModelDiverged
    x = sim.scene.initial_state()
    sim.scene.layout.object_vels(x)[0, 0] = 1e9  # finite but absurd: MuJoCo blows up
    sim.reset(x)
    with pytest.raises(ModelDiverged, match="world simulation diverged: unstable simulation"):
        sim.step(10)
    sim.reset()  # what the mujoco_sim node does: the world is usable again
    sim.step(10)
    np.testing.assert_allclose(sim.planar_state()[:2], sim.scene.initial_state()[:2], atol=1e-6)
