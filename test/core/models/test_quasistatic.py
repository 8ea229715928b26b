"""The quasi-static pusher-slider model (paper 003): limit surface, motion cone, the four modes, the four faces,
face switching through separation, exact Jacobians."""
import numpy as np
import pytest

from parapush_ros.core.models.base import rollout
from parapush_ros.core.models.quasistatic import (SEPARATION, SLIDE_DOWN, SLIDE_UP, STICK, QuasiStaticPusherSlider,
                                                  mean_distance_rectangle, motion_cone)

# paper 003's block: 12 x 12 cm, 110 g, mu_g 0.35, mu_p 0.3, 5 mm pusher
BLOCK = QuasiStaticPusherSlider(size=(0.12, 0.12), mass=0.11, mu_g=0.35, mu_p=0.3, pusher_radius=0.005)
DT = BLOCK.dt


def state(py=0.0, v=(0.1, 0.0), face=0, theta=0.0, slider=(0.0, 0.0), model=BLOCK):
    """Pusher touching ``face`` at offset ``py``, velocity ``v`` given in that face's frame (v_n, v_t)."""
    c, s = np.cos(theta), np.sin(theta)
    rot = np.array([[c, -s], [s, c]])
    phi = face * np.pi / 2
    rf = np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])
    p = np.asarray(slider) + rot @ model.contact_state(face, py)
    vel = rot @ rf @ np.asarray(v, dtype=float)
    return np.array([slider[0], slider[1], theta, p[0], p[1], vel[0], vel[1]])


def test_limit_surface_of_a_uniform_square_and_rectangle():
    assert mean_distance_rectangle(1.0, 1.0) == pytest.approx((np.sqrt(2) + np.arcsinh(1.0)) / 6, rel=1e-12)
    assert BLOCK.c == pytest.approx(0.04591, abs=1e-5)  # the reference file's value, 0.3826 a
    g = (np.arange(2000) + 0.5) / 2000 - 0.5  # midpoint rule over a 2 x 1 rectangle
    xx, yy = np.meshgrid(2 * g, g)
    assert mean_distance_rectangle(2.0, 1.0) == pytest.approx(np.hypot(xx, yy).mean(), rel=1e-6)
    assert BLOCK.f_max == pytest.approx(0.35 * 0.11 * 9.81) and BLOCK.m_max == pytest.approx(BLOCK.f_max * BLOCK.c)


def test_motion_cone_check_values():
    """The reference file's check values (pusher-centre contact coordinate p_x = -0.065 m)."""
    gt, gb = motion_cone(-0.065, 0.0, BLOCK.c, 0.3)
    assert gt == pytest.approx(0.9013, abs=1e-4) and gb == pytest.approx(-0.9013, abs=1e-4)
    gt, gb = motion_cone(-0.065, 0.03, BLOCK.c, 0.3)
    assert gt == pytest.approx(1.0715, abs=1e-4) and gb == pytest.approx(0.0207, abs=1e-4)


def test_central_push_moves_the_slider_straight_with_the_pusher():
    x1, face, mode = BLOCK.step_info(state(0.0, (0.1, 0.0)), np.zeros(2))
    assert face == 0 and mode == STICK
    np.testing.assert_allclose(x1, [0.001, 0.0, 0.0, -0.065 + 0.001, 0.0, 0.1, 0.0], atol=1e-15)


def test_sticking_by_hand_and_its_sign_convention():
    """Push +x at p_y = +1 cm (above the centre) with a little tangential velocity: sticking, clockwise turn."""
    py, vn, vt = 0.01, 0.1, 0.01
    x1, _face, mode = BLOCK.step_info(state(py, (vn, vt)), np.zeros(2))
    assert mode == STICK
    px, c2 = -0.06, BLOCK.c ** 2
    d = c2 + px ** 2 + py ** 2
    twist = np.array([(c2 + px ** 2) * vn + px * py * vt, px * py * vn + (c2 + py ** 2) * vt, px * vt - py * vn]) / d
    np.testing.assert_allclose(x1[:3], DT * twist, rtol=1e-12)
    assert twist[2] < 0.0  # clockwise
    x1m, _, _ = BLOCK.step_info(state(-py, (vn, -vt)), np.zeros(2))  # the mirror image turns the other way
    np.testing.assert_allclose(x1m[:3], DT * twist * [1, -1, -1], rtol=1e-12)


@pytest.mark.parametrize("vt, expected", [(0.2, SLIDE_UP), (-0.2, SLIDE_DOWN)])
def test_sliding_by_hand(vt, expected):
    py, vn = 0.01, 0.1
    x0 = state(py, (vn, vt))
    x1, _, mode = BLOCK.step_info(x0, np.zeros(2))
    assert mode == expected
    px, c2 = -0.06, BLOCK.c ** 2
    gt, gb = motion_cone(px, py, BLOCK.c, BLOCK.mu_p)
    gamma = gt if expected == SLIDE_UP else gb
    assert gb <= 0.0 <= gt and (vt / vn > gt if expected == SLIDE_UP else vt / vn < gb)
    d = c2 + px ** 2 + py ** 2
    veff = gamma * vn  # the slider moves as if pushed on the cone's edge
    twist = np.array([(c2 + px ** 2) * vn + px * py * veff, px * py * vn + (c2 + py ** 2) * veff,
                      px * veff - py * vn]) / d
    np.testing.assert_allclose(x1[:3], DT * twist, rtol=1e-12)
    # the pusher slides along the face by the rest, dt (v_t - gamma v_n), plus dt omega r_p: the pusher's centre
    # lies r_p outside the face, so a turn of the slider rolls the contact around the pusher disc
    dpy = _contact_offset(x1) - _contact_offset(x0)
    assert dpy == pytest.approx(DT * (vt - gamma * vn + twist[2] * BLOCK.pusher_radius), rel=0.01)


def _contact_offset(x):
    c, s = np.cos(x[2]), np.sin(x[2])
    return -s * (x[3] - x[0]) + c * (x[4] - x[1])


def test_pure_normal_push_off_centre_slides_when_outside_the_cone():
    """At p_y = 3 cm on the 12 cm block gamma_b > 0: even a purely normal push slides the pusher down the face."""
    _, gb = motion_cone(-0.06, 0.03, BLOCK.c, BLOCK.mu_p)
    assert gb > 0.0
    assert BLOCK.step_info(state(0.03, (0.1, 0.0)), np.zeros(2))[2] == SLIDE_DOWN


def test_limit_of_pure_sticking():
    """Inside the cone the contact point does not slide on the face (to first order it moves only by the roll of
    the contact around the pusher disc, dt omega r_p) and a central push sticks for ever; with a frictionless
    contact (mu_p -> 0) only a central normal push sticks."""
    x0 = state(0.01, (0.1, 0.005))
    x1, _, mode = BLOCK.step_info(x0, np.zeros(2))
    assert mode == STICK
    omega = (x1[2] - x0[2]) / DT
    assert _contact_offset(x1) - _contact_offset(x0) == pytest.approx(DT * omega * BLOCK.pusher_radius, rel=0.01)
    rollout, _, modes = BLOCK.rollout_info(state(0.0, (0.05, 0.0)), np.zeros((200, 2)))
    assert np.all(modes == STICK) and np.allclose(rollout[:, 1:3], 0.0)
    smooth = QuasiStaticPusherSlider(size=(0.12, 0.12), mass=0.11, mu_g=0.35, mu_p=1e-9, pusher_radius=0.005)
    assert smooth.step_info(state(0.0, (0.1, 0.0), model=smooth), np.zeros(2))[2] == STICK
    assert smooth.step_info(state(0.001, (0.1, 0.0), model=smooth), np.zeros(2))[2] == SLIDE_DOWN


def test_separation_leaves_the_slider_where_it_is():
    for x0 in (state(0.0, (-0.1, 0.05)),  # pulling away from the face
               state(0.0, (0.1, 0.0)) + [0, 0, 0, -0.02, 0, 0, 0],  # 2 cm off the face, approaching
               state(0.065, (0.1, 0.0))):  # beside the face (beyond its end)
        u = np.array([0.3, -0.2])
        x1, _, mode = BLOCK.step_info(x0, u)
        assert mode == SEPARATION
        np.testing.assert_array_equal(x1[:3], x0[:3])
        v1 = x0[5:7] + DT * u  # the pusher moves freely
        np.testing.assert_allclose(x1[3:], np.r_[x0[3:5] + DT * v1, v1], rtol=1e-14)


@pytest.mark.parametrize("theta", [0.0, 0.7, -2.5])
def test_four_faces_are_the_same_law_turned_by_a_quarter(theta):
    """On a square, pushing face f is face 0 turned by f pi/2, and every push turns with the slider's yaw."""
    ref = BLOCK.step(state(0.012, (0.08, 0.03)), np.zeros(2))
    for face in range(4):
        x0 = state(0.012, (0.08, 0.03), face=face, theta=theta, slider=(0.1, -0.2))
        x1, f, mode = BLOCK.step_info(x0, np.zeros(2))
        assert f == face and mode == STICK
        rot = face * np.pi / 2 + theta
        c, s = np.cos(rot), np.sin(rot)
        dxy = np.array([[c, -s], [s, c]]) @ ref[:2]
        np.testing.assert_allclose(x1[:3] - x0[:3], [dxy[0], dxy[1], ref[2]], atol=1e-15)


def test_a_rectangle_uses_each_face_own_depth_and_width():
    """box_slider's box: 10.9 cm along body x, 15.4 cm along y. The -x face is 15.4 cm wide, the -y face 10.9."""
    box = QuasiStaticPusherSlider(size=(0.109, 0.154), mass=0.5, mu_g=1.0, mu_p=0.2, pusher_radius=0.0145)
    x0 = state(0.05, (0.1, 0.0), face=1, model=box)
    np.testing.assert_allclose(x0[3:5], [-0.05, -(0.077 + 0.0145)])
    x1, face, mode = box.step_info(x0, np.zeros(2))
    assert face == 1 and mode != SEPARATION and x1[1] > 0.0
    assert box.step_info(state(0.06, (0.1, 0.0), face=1, model=box), np.zeros(2))[2] == SEPARATION  # off its end
    x1, face, mode = box.step_info(state(0.07, (0.1, 0.0), face=0, model=box), np.zeros(2))
    assert face == 0 and mode != SEPARATION and x1[0] > 0.0


def test_no_penetration_while_pushing():
    """Three seconds of random pushes into random faces: the pusher never sinks into the box by 1 mm."""
    rng = np.random.default_rng(1)
    n = 200
    x0 = np.stack([state(rng.uniform(-0.055, 0.055), (rng.uniform(0.02, 0.1), rng.uniform(-0.1, 0.1)),
                         face=rng.integers(4), theta=rng.uniform(-np.pi, np.pi)) for _ in range(n)])
    xs, _, modes = BLOCK.rollout_info(x0, rng.normal(0.0, 0.3, (n, 300, 2)))
    assert np.count_nonzero(modes != SEPARATION) > 0.2 * modes.size
    assert np.all({STICK, SLIDE_UP, SLIDE_DOWN, SEPARATION} <= set(np.unique(modes)))
    assert BLOCK.penetration(xs).max() < 1e-3


def test_face_switch_through_separation():
    """Push face 0, back off, go round the corner, push face 1: the slider moves in +x, then in +y."""
    plan = [(np.array([0.1, 0.0]), 100), (np.array([-0.1, 0.0]), 20), (np.array([0.0, -0.1]), 100),
            (np.array([0.1, 0.0]), 110), (np.array([0.0, 0.1]), 60)]
    vel = np.concatenate([np.repeat(v[None], n, 0) for v, n in plan])
    x = state(0.0, (0.0, 0.0))
    xs, faces, modes = [x], [], []
    for v in vel:  # a velocity-tracking pusher: u = (v_ref - v) / dt
        x, f, m = BLOCK.step_info(x, (v - x[5:7]) / DT)
        xs.append(x)
        faces.append(int(f))
        modes.append(int(m))
    xs, faces, modes = np.array(xs), np.array(faces), np.array(modes)
    pushing = modes != SEPARATION
    assert faces[pushing][0] == 0 and faces[pushing][-1] == 1
    first, last = np.flatnonzero(faces[pushing] == 1)[0], len(faces[pushing])
    assert np.all(faces[pushing][:first] == 0) and last - first > 20
    assert np.any(~pushing[:np.flatnonzero(pushing & (faces == 1))[0]])  # separation between the two pushes
    assert xs[100, 0] == pytest.approx(0.1 * 100 * DT - 0.001, abs=2e-3)  # face 0 pushed it 10 cm in +x
    assert xs[-1, 1] - xs[230, 1] > 0.02  # face 1 pushes it in +y
    assert BLOCK.penetration(xs).max() < 1e-3


def test_jacobians_match_finite_differences_in_every_mode_and_face():
    rng = np.random.default_rng(2)
    rows = []
    for face in range(4):
        for v, py in (((0.08, 0.0), 0.0), ((0.08, 0.2), 0.01), ((0.08, -0.2), 0.01), ((-0.05, 0.0), 0.0)):
            rows.append(state(py, v, face=face, theta=rng.uniform(-3, 3), slider=rng.uniform(-0.2, 0.2, 2)))
    x = np.array(rows)
    u = rng.normal(0.0, 0.5, (len(x), 2))
    modes = BLOCK.step_info(x, u)[2]
    assert set(modes) == {STICK, SLIDE_UP, SLIDE_DOWN, SEPARATION}
    _, a, b = BLOCK.step_jacobians(x, u)
    eps = 1e-7
    a_fd = np.stack([(BLOCK.step(x + eps * e, u) - BLOCK.step(x - eps * e, u)) / (2 * eps) for e in np.eye(7)], -1)
    b_fd = np.stack([(BLOCK.step(x, u + eps * e) - BLOCK.step(x, u - eps * e)) / (2 * eps) for e in np.eye(2)], -1)
    np.testing.assert_allclose(a, a_fd, atol=1e-7)
    np.testing.assert_allclose(b, b_fd, atol=1e-7)
    assert np.abs(a[modes == STICK][:, 0:3, 5:7]).max() > 0.001  # the slider depends on the pusher in contact
    assert np.abs(a[modes == SEPARATION][:, 0:3, 3:7]).max() == 0.0


def test_bad_parameters_are_refused_by_name():
    with pytest.raises(ValueError, match="mu_p"):
        QuasiStaticPusherSlider(size=(0.12, 0.12), mass=0.11, mu_g=0.35, mu_p=5.0, pusher_radius=0.005)
    with pytest.raises(ValueError, match="mass"):
        QuasiStaticPusherSlider(size=(0.12, 0.12), mass=0.0, mu_g=0.35, mu_p=0.3, pusher_radius=0.005)
    for size in ((float("nan"), 0.12), (float("inf"), 0.12), (0.12, -0.1)):
        with pytest.raises(ValueError, match="size must be two positive extents"):
            QuasiStaticPusherSlider(size=size, mass=0.11, mu_g=0.35, mu_p=0.3, pusher_radius=0.005)
    with pytest.raises(ValueError, match="mu_g must be finite and > 0"):
        QuasiStaticPusherSlider(size=(0.12, 0.12), mass=0.11, mu_g=float("inf"), mu_p=0.3, pusher_radius=0.005)
    with pytest.raises(ValueError, match=r"x \(\.\.\., 7\)"):
        BLOCK.step(np.zeros(6), np.zeros(2))


@pytest.mark.parametrize("name", ["block_003", "box_slider"])
def test_from_scene_and_signs_agree_with_mujoco(name):
    """The model of a scene's box; an off-centre push turns the box the same way in MuJoCo (the fine model)."""
    from parapush_ros.core.models.fine import FineModel
    from parapush_ros.core.scene.spec import load_scene
    scene = load_scene(name)
    model = QuasiStaticPusherSlider.from_scene(scene)
    box = scene.objects[0]
    assert model.size == box.size[:2] and model.mass == box.mass and model.pusher_radius == scene.pusher.radius
    assert (model.mu_g, model.mu_p) == (scene.friction["object_table"], scene.friction["pusher_object"])
    x = scene.initial_state()
    x[1] = 0.02  # pusher 2 cm left of the centre line, pushing +x
    fine = FineModel(scene, threads=1)
    final_fine = rollout(fine, x, np.tile([0.05, 0.0], (10, 1)), 0.1)[-1, 2:5]
    fine.close()
    final_qs = model.rollout([0, 0, 0, x[0], x[1], 0.05, 0.0], np.zeros((100, 2)))[-1, :3]
    assert final_fine[0] > 0.03 and final_qs[0] > 0.03
    assert final_fine[2] < -0.05 and final_qs[2] < -0.05  # clockwise in both
    assert final_fine[1] < 0.0 and final_qs[1] < 0.0


def test_from_scene_refuses_a_cylinder():
    from parapush_ros.core.scene.spec import load_scene
    with pytest.raises(ValueError, match="box sliders"):
        QuasiStaticPusherSlider.from_scene(load_scene("cylinder_slider"))


@pytest.mark.parametrize("name, support", [("box_slider", "native"), ("box_slider", None), ("block_003", None)])
def test_fine_c_scale_fits_the_scene_fine_model(name, support):
    """MuJoCo's native box-on-table contacts press harder near the corners than uniform pressure: c scaled by
    MUJOCO_C_SCALE fits box_slider's pushes better there. The default support (issue 15) and block_003 are a grid of
    support points (uniform pressure): the paper's c fits better. ``fine_c_scale`` picks the one that fits."""
    from parapush_ros.core.models.fine import FineModel
    from parapush_ros.core.models.quasistatic import MUJOCO_C_SCALE, fine_c_scale
    from parapush_ros.core.scene.spec import load_scene
    scene = load_scene(name)
    if support is not None:
        from parapush_ros.core.scene.spec import scene_from_dict
        data = scene.to_dict()
        data["support"] = {"pattern": support}
        scene = scene_from_dict(data)
    rng = np.random.default_rng(0)
    n = 6
    x = np.repeat(scene.initial_state()[None], n, 0)
    x[:, 1] = rng.uniform(-0.04, 0.04, n)
    ang = rng.uniform(-0.4, 0.4, n)
    v = 0.05 * np.c_[np.cos(ang), np.sin(ang)]
    fine = FineModel(scene, threads=1)
    final_fine = rollout(fine, x, np.repeat(v[:, None], 10, 1), 0.1)[:, -1, 2:5]
    fine.close()
    errors = {}
    for scale in (1.0, MUJOCO_C_SCALE):
        model = QuasiStaticPusherSlider.from_scene(scene, c_scale=scale)
        assert model.c == pytest.approx(scale * mean_distance_rectangle(*model.size))
        assert model.m_max == pytest.approx(model.f_max * model.c)
        final = model.rollout(np.c_[np.zeros((n, 3)), x[:, :2], v], np.zeros((n, 100, 2)))[:, -1, :3]
        errors[scale] = np.abs(final - final_fine).mean(0)
    best = fine_c_scale(scene)
    other = MUJOCO_C_SCALE if best == 1.0 else 1.0
    assert best == (MUJOCO_C_SCALE if support == "native" else 1.0)
    assert errors[best][2] < errors[other][2] and errors[best][:2].sum() < 1.1 * errors[other][:2].sum(), errors
