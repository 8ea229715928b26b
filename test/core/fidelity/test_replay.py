"""Replay of recorded pushes (issue 15) on sim-made recordings: the models start from the first row, the pusher
follows the recorded path, and the errors are what the JSON reports."""
import numpy as np
import pytest

from parapush_ros.core.fidelity.recordings import Recording
from parapush_ros.core.fidelity.replay import prepare, replay, servo_commands, summarise
from parapush_ros.core.fidelity.synthetic import PushPlan, random_push_plans, simulate
from parapush_ros.core.models.registry import Predictor
from parapush_ros.core.scene.spec import load_scene


@pytest.fixture(scope="module")
def world():
    scene = load_scene("box_slider")
    recs = [simulate(scene, p, f"push_{i}", position_noise=1e-4, yaw_noise=np.radians(0.1), seed=i)
            for i, p in enumerate(random_push_plans(scene, 3, seed=2, slide_share=0.0))]
    return scene, recs


def test_models_replayed_on_sim_made_pushes(world):
    scene, recs = world
    cases = [prepare(scene, r, 0.25) for r in recs]
    predictor = Predictor(scene, threads=1)
    try:
        results = replay(predictor, scene, cases, ["fine", "parareal2", "coarse"])
    finally:
        predictor.close()
    summary = {m: summarise(v) for m, v in results.items()}
    assert set(summary["fine"]) == {"final_trans_mm", "final_rot_deg", "path_trans_mm", "path_rot_deg"}
    assert set(summary["fine"]["final_trans_mm"]) == {"mean", "median", "max"}
    # the fine model is the world these pushes were made in: it replays them within a millimetre and a degree
    assert summary["fine"]["final_trans_mm"]["max"] < 1.5 and summary["fine"]["final_rot_deg"]["max"] < 1.5
    assert summary["coarse"]["final_trans_mm"]["mean"] > summary["fine"]["final_trans_mm"]["mean"]
    # the fine model's pusher goes through the recorded pusher positions at every slice boundary (within the
    # servo's transient where the recorded push stops: 0.54 mm here)
    L = scene.layout
    for case, r in zip(cases, results["fine"]):
        recorded_pusher, _ = case.recording.at(case.times)
        gap = np.linalg.norm(L.pusher_pos(r["states"]) - recorded_pusher, axis=-1)
        assert np.median(gap) < 0.3e-3 and gap.max() < 0.75e-3, gap


def test_a_measured_start_inside_the_box_is_projected_with_a_warning(world):
    scene, recs = world
    rec = recs[0]
    # move the recorded pusher 0.2 mm into the box at the first row
    box = rec.objects[0, 0]
    to_box = box[:2] - rec.pusher[0]
    from parapush_ros.core.scene.geometry import disc_penetration
    depth, normal = disc_penetration(rec.pusher[0], scene.pusher.radius, scene.objects[0].footprint, box)
    pusher = rec.pusher.copy()
    pusher[0] += normal * (-depth + 0.2e-3) if np.dot(normal, to_box) > 0 else -normal * (-depth + 0.2e-3)
    bad = Recording(rec.name, rec.times, pusher, rec.objects)
    case = prepare(scene, bad, 0.25)
    assert "pusher overlaps objects[0] 'box' by 0.20 mm" in case.start_warning


@pytest.mark.parametrize("noise", [0.0, 1e-4])
def test_servo_commands_recover_the_velocity_steps_behind_a_recorded_path(noise):
    """A push that ends with a fast stroke and an abrupt stop, recorded at 100 Hz: the commands inverted from the
    pusher's positions are the commanded velocities (the stop included, which the free slide after it depends on),
    with the pusher starting at rest."""
    scene = load_scene("box_slider")
    plan = random_push_plans(scene, 1, seed=3, slide_share=1.0)[0]
    rec = simulate(scene, plan, "stroke", position_noise=noise, seed=1)
    dt = 0.01
    times = np.arange(int(np.floor(rec.duration / dt + 1e-9)) + 1) * dt
    controls, v0 = servo_commands(rec.at(times)[0], dt)
    commanded = np.concatenate([np.tile([vx, vy], (int(round(d / dt)), 1)) for d, vx, vy in plan.segments])
    err = np.abs(controls - commanded[:len(controls)]).max(axis=1)  # m/s per period; the stroke is 0.25 m/s
    assert np.median(err) < (1e-5 if noise == 0 else 1e-4)
    assert err.max() < (0.01 if noise == 0 else 0.03)
    assert np.all(np.abs(v0) < (0.002 if noise == 0 else 0.01))


def test_servo_commands_invert_a_long_recording():
    """A 30 s recording (3000 periods at 100 Hz: a session, not one push) is inverted like a short one: the
    commands are the ones sent. The fit is banded (states and commands as unknowns, the servo's dynamics as
    constraints); with the states eliminated it was dense in the commands, O(N^3): 11 s for 10 s of recording."""
    scene = load_scene("box_slider")
    start = random_push_plans(scene, 1, seed=0)[0].start
    L = scene.layout
    away = L.pusher_pos(start) - L.object_poses(start)[0, :2]
    away /= np.linalg.norm(away)
    side = np.array([-away[1], away[0]])
    segments = [(1.0, *(0.05 * away))]  # 5 cm clear of the box, then back and forth beside it
    for i in range(19):
        v = (0.04 if i % 2 == 0 else -0.04) * side + (0.01 if i % 4 < 2 else -0.01) * away
        segments.append((1.5, *v))
    plan = PushPlan(start, segments)
    rec = simulate(scene, plan, "session", position_noise=1e-4, seed=2)
    dt = 0.01
    times = np.arange(int(np.floor(rec.duration / dt + 1e-9)) + 1) * dt
    assert len(times) > 2900
    controls, _ = servo_commands(rec.at(times)[0], dt)
    commanded = np.concatenate([np.tile([vx, vy], (int(round(d / dt)), 1)) for d, vx, vy in plan.segments])
    err = np.abs(controls - commanded[:len(controls)]).max(axis=1)
    changes = np.cumsum([int(round(d / dt)) for d, *_ in plan.segments])[:-1]
    near_change = np.abs(np.arange(len(err))[:, None] - changes).min(axis=1) <= 2  # noise blurs a jump's period
    assert np.median(err) < 1e-4
    assert err[~near_change].max() < 0.005
