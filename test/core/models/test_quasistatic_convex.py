"""The quasi-static model of any convex footprint (``quasistatic_convex``): exact limit surface of uniform pressure,
contact from the outline, the same twist as paper 003's box model, exact Jacobians, one object only, and
``coarse_model: auto``."""
from dataclasses import replace

import numpy as np
import pytest

from parapush_ros.core.models.base import UnsupportedScene
from parapush_ros.core.models.quasistatic import (SEPARATION, SLIDE_DOWN, SLIDE_UP, STICK, QuasiStaticPusherSlider,
                                                  mean_distance_rectangle)
from parapush_ros.core.models.quasistatic_convex import QuasiStaticConvexSlider
from parapush_ros.core.models.registry import AUTO, COARSE, Predictor, auto_coarse, names, parameter_descriptions
from parapush_ros.core.scene.convex import ConvexOutline, ellipse_vertices
from parapush_ros.core.scene.spec import load_scene

BOX = dict(mass=0.11, mu_g=0.35, mu_p=0.3, pusher_radius=0.005)
ELLIPSOID = dict(BOX, limit_surface="ellipsoid")  # the single-c limit surface that paper 003's box model has
DISC = QuasiStaticConvexSlider(ConvexOutline.of("cylinder", (0.1, 0.1, 0.02)), **ELLIPSOID)
HEX = QuasiStaticConvexSlider(ConvexOutline("polygon", vertices=tuple(
    (0.05 * np.cos(a) + 0.01, 0.05 * np.sin(a) - 0.02) for a in np.arange(6) * np.pi / 3)), **ELLIPSOID)


def test_limit_surface_is_the_exact_uniform_pressure_moment():
    box = ConvexOutline.of("box", (0.109, 0.154, 0.01))
    assert box.mean_distance == pytest.approx(mean_distance_rectangle(0.109, 0.154), rel=1e-12)
    assert DISC.c == pytest.approx(2 * 0.05 / 3, rel=1e-12)
    # the hexagon, off its frame's origin: about its own centroid, against a Monte-Carlo integral
    g = HEX.outline.centroid
    np.testing.assert_allclose(g, [0.01, -0.02], atol=1e-12)
    pts = np.random.default_rng(0).uniform(-0.05, 0.05, (400000, 2)) + g
    n, off = HEX.outline.edges()
    inside = np.all(pts @ n.T <= off, axis=1)
    assert HEX.c == pytest.approx(np.hypot(*(pts[inside] - g).T).mean(), rel=2e-3)


def test_a_box_outline_pushed_on_its_faces_moves_as_the_paper_003_box():
    """One twist function for both: every mode, every face, turned boxes, within a face the models agree."""
    size = (0.12, 0.08)
    qs = QuasiStaticPusherSlider(size=size, **BOX)
    cv = QuasiStaticConvexSlider(ConvexOutline.of("box", size + (0.02,)), **ELLIPSOID)
    rng = np.random.default_rng(1)
    rows = []
    for face in range(4):
        for _ in range(40):
            _, w = qs.face_half(face)
            p = qs.contact_state(face, rng.uniform(-0.9, 0.9) * w)
            th = rng.uniform(-np.pi, np.pi)
            c, s = np.cos(th), np.sin(th)
            rot = np.array([[c, -s], [s, c]])
            rows.append([0.01, -0.02, th, *(np.array([0.01, -0.02]) + rot @ p), *rng.normal(0, 0.1, 2)])
    x, u = np.array(rows), rng.normal(0, 1.0, (len(rows), 2))
    a, _, mode_a = qs.step_info(x, u)
    b, _, mode_b = cv.step_info(x, u)
    np.testing.assert_array_equal(mode_a, mode_b)
    assert {STICK, SLIDE_UP, SLIDE_DOWN, SEPARATION} <= set(mode_a.tolist())
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_a_disc_pushed_through_its_centre_translates_and_off_centre_turns_away():
    x = np.array([0.0, 0.0, 0.3, -0.0551, 0.0, 0.1, 0.0])  # 0.1 mm short of the disc, 1 mm closer per step
    nxt, feature, mode = DISC.step_info(x, np.zeros(2))
    assert mode == STICK and feature == 0
    # the pusher crosses the gap first and pushes for the rest of the step: the gap closes, it is not carried on
    np.testing.assert_allclose(nxt[:3], [0.9 * 0.1 * DISC.dt, 0.0, 0.3], atol=1e-12)
    np.testing.assert_allclose(nxt[3] - nxt[0], -0.055, atol=1e-12)
    kept = replace(DISC, close_gap=False).step_info(x, np.zeros(2))[0]  # paper 003's rule: moved as if touched
    np.testing.assert_allclose(kept[:3], [0.1 * DISC.dt, 0.0, 0.3], atol=1e-12)
    x[3] = -0.0556  # 0.6 mm short, 1 mm closer: the share is 0.4
    np.testing.assert_allclose(DISC.step_info(x, np.zeros(2))[0][0], 0.4 * 0.1 * DISC.dt, atol=1e-12)
    x[3] = -0.0551
    x[4] = 0.02  # above the centre, pushed in +x: the disc turns clockwise
    x[3] = -np.sqrt(0.0551 ** 2 - 0.02 ** 2)
    nxt, _, mode = DISC.step_info(x, np.zeros(2))
    assert mode in (STICK, SLIDE_UP, SLIDE_DOWN) and nxt[2] < 0.3 and nxt[0] > 0.0
    x[5] = -0.1  # moving away: separation, the disc stays
    nxt, _, mode = DISC.step_info(x, np.zeros(2))
    assert mode == SEPARATION
    np.testing.assert_array_equal(nxt[:3], x[:3])


@pytest.mark.parametrize("model", [DISC, HEX], ids=["disc", "hexagon"])
def test_jacobians_are_exact_within_a_mode(model):
    rng = np.random.default_rng(2)
    pts, nrm = model.outline.contact_samples(7)
    interior = np.flatnonzero(np.isin(np.arange(len(pts)) % 7, (1, 2, 3, 4, 5)))  # off the edge-vertex kinks
    pick = rng.choice(interior, 12, replace=False)
    p = pts[pick] - nrm[pick] * (model.pusher_radius + 0.0004)  # short of the outline: crossed within the step
    th = rng.uniform(-np.pi, np.pi, 12)
    c, s = np.cos(th), np.sin(th)
    pw = np.stack([c * p[:, 0] - s * p[:, 1], s * p[:, 0] + c * p[:, 1]], -1) + [0.02, 0.01]
    nw = np.stack([c * nrm[pick, 0] - s * nrm[pick, 1], s * nrm[pick, 0] + c * nrm[pick, 1]], -1)
    v = 0.1 * nw + rng.normal(0, 0.02, (12, 2))
    x = np.concatenate([np.tile([0.02, 0.01], (12, 1)), th[:, None], pw, v], 1)
    u = rng.normal(0, 0.5, (12, 2))
    crossed = np.linalg.norm(model.step(x, u)[:, :2] - x[:, :2], axis=1)
    touched = np.linalg.norm(replace(model, close_gap=False).step(x, u)[:, :2] - x[:, :2], axis=1)
    assert np.all((crossed > 0.0) & (crossed < 0.9 * touched))  # every push crosses the gap, then pushes
    assert_jacobians_match_central_differences(model, x, u)


def test_registered_refuses_several_objects_by_name_and_predicts_a_disc_near_mujoco():
    assert "quasistatic_convex" in names(COARSE)
    with pytest.raises(UnsupportedScene, match=r"'four_cylinders' has 4 objects \(target, cylinder_1, .*one object"):
        Predictor(load_scene("four_cylinders"), coarse="quasistatic_convex").coarse_model()
    scene = load_scene("cylinder_slider")
    L = scene.layout
    x0 = scene.initial_state()
    r = scene.objects[0].radius + scene.pusher.radius + 1e-3
    L.pusher_pos(x0)[:] = [-np.sqrt(r ** 2 - 0.03 ** 2), 0.03]  # off the centre: the disc turns
    push = np.array([[0.025, 0.0]] * 4)
    predictor = Predictor(scene, coarse="quasistatic_convex", threads=1)
    try:
        fine = L.object_poses(predictor.predict(x0, push, 1.5, model="fine").states[-1])[0]
        err = {}
        for m in ("quasistatic_convex", "analytical"):
            pose = L.object_poses(predictor.predict(x0, push, 1.5, model=m).states[-1])[0]
            err[m] = (np.linalg.norm(pose[:2] - fine[:2]), abs(pose[2] - fine[2]))
        print(err)
        assert err["quasistatic_convex"][0] < err["analytical"][0], err
        p1 = predictor.predict(x0, push, 1.5, model="parareal1")
        assert p1.spec.coarse == "quasistatic_convex" and p1.iterations == 1
    finally:
        predictor.close()


def test_auto_picks_the_quasi_static_model_of_one_object_and_learned_or_analytical_for_several():
    """One object of any shape, box included: the convex model (its integrated limit surface with load transfer is
    nearer replayed pushes than paper 003's box model: docs/results/fidelity.md)."""
    assert auto_coarse(load_scene("box_slider"))[0] == "quasistatic_convex"
    assert auto_coarse(load_scene("cylinder_slider"))[0] == "quasistatic_convex"
    assert auto_coarse(load_scene("four_cylinders"))[0] in ("learned", "analytical")
    assert AUTO in parameter_descriptions()["coarse_model"][1]
    p = Predictor(load_scene("cylinder_slider"), coarse=AUTO)
    assert p.default_coarse == "quasistatic_convex" and p.resolve("parareal1").coarse == "quasistatic_convex"
    assert p.resolve("coarse").kind == "quasistatic_convex" and "cylinder" in p.auto_reason
    assert p.coarse_model().model.limit_surface == "integrated" and p.coarse_model().model.contact_height > 0.0
    p.close()


def test_auto_picks_a_coarse_model_that_predicts_the_planners_controls():
    """The learned model predicts whole 1 s slices: with 0.1 s controls (the robot's) auto takes the analytical
    model for several objects and says why, and the planner plans; a learned model named outright is refused at
    configuration, naming both settings, not at the first plan."""
    import dataclasses

    from parapush_ros.core.planning.planner import MPCPlanner, PlannerConfig
    scene = load_scene("four_cylinders")
    assert auto_coarse(scene, slice_s=2.0)[0] == "learned"
    name, why = auto_coarse(scene, slice_s=0.1)
    assert name == "analytical" and "whole 1 s slices, not controls of 0.1 s" in why
    base = PlannerConfig()
    fast = dataclasses.replace(base, sampling=dataclasses.replace(base.sampling, control_duration=0.1, samples=4,
                                                                  iterations=1, horizon=2))
    planner = MPCPlanner(scene, fast)
    try:
        assert planner.predictor.default_coarse == "analytical"
        assert np.all(np.isfinite(planner.plan(scene.initial_state()).controls))
    finally:
        planner.close()
    named = Predictor(scene, coarse="learned")
    with pytest.raises(ValueError, match=r"coarse_model 'learned' predicts whole 1 s slices; control_duration 0.1 s"):
        MPCPlanner(scene, fast, predictor=named)
    named.close()


class _PoseCost:
    """Terminal 1e4 |slider position - goal|^2 and 1e3 pusher speed^2, controls 1e-3 |u|^2 (Gauss-Newton)."""

    def __init__(self, goal):
        self.goal = goal

    def value(self, X, U, idx=None):
        g = self.goal if idx is None else self.goal[idx]
        return (1e4 * ((X[:, -1, :2] - g) ** 2).sum(-1) + 1e3 * (X[:, -1, 5:7] ** 2).sum(-1)
                + 1e-3 * (U ** 2).sum((1, 2)))

    def derivatives(self, X, U, idx=None):
        g = self.goal if idx is None else self.goal[idx]
        b, t1 = X.shape[:2]
        lx, lxx = np.zeros((b, t1, 7)), np.zeros((b, t1, 7, 7))
        lx[:, -1, :2] = 2e4 * (X[:, -1, :2] - g)
        lx[:, -1, 5:7] = 2e3 * X[:, -1, 5:7]
        lxx[:, -1] = np.diag([2e4, 2e4, 0, 0, 0, 2e3, 2e3])
        return lx, 2e-3 * U, lxx, np.broadcast_to(2e-3 * np.eye(2), U.shape + (2,)).copy(), np.zeros(U.shape + (7,))


@pytest.mark.parametrize("limit_surface,height", [("ellipsoid", 0.0), ("integrated", 0.0), ("integrated", 0.01)],
                         ids=["ellipsoid", "integrated", "integrated-load-transfer"])
def test_ddp_pushes_a_disc_with_the_convex_model_derivatives(limit_surface, height):
    """The DDP of DG-OC (``BatchedDDP``: ``step`` and ``step_jacobians``) on the disc: a push from rest reaches
    goals ahead and to the side of the pusher, with either limit surface."""
    from parapush_ros.core.planning.ddp.solver import BatchedDDP, DDPSettings
    model = replace(DISC, dt=0.02, limit_surface=limit_surface, contact_height=height)
    goals = np.array([[0.08, 0.0], [0.08, 0.02], [0.07, -0.02]])
    x0 = np.tile([0.0, 0.0, 0.0, -0.0551, 0.0, 0.0, 0.0], (3, 1))
    U0 = np.tile([0.5, 0.0], (3, 60, 1)) * (np.arange(60) < 10)[None, :, None]  # a start: 0.1 m/s, then coast
    before = np.linalg.norm(model.rollout(x0, U0)[:, -1, :2] - goals, axis=-1)
    r = BatchedDDP(model, _PoseCost(goals), DDPSettings(max_iterations=40)).solve(x0, U0)
    after = np.linalg.norm(r.X[:, -1, :2] - goals, axis=-1)
    assert np.all(after < 0.005) and np.all(after < 0.3 * before), (before, after)


# ------------------------------------------------------------------------------------ the integrated limit surface
ELLIPSE = ConvexOutline.of("ellipse", (0.12, 0.07, 0.02), ellipse_vertices(0.06, 0.035))
INTEGRATED = dict(BOX, limit_surface="integrated")
INTEGRATED_DIRECT = dict(INTEGRATED, tabulated=False)  # every contact solved: the reference the table is built from


def _friction(model, x, nxt):
    """The support's friction on a model's step from ``x`` to ``nxt`` (object frame, about the centroid, in units of
    f_max) and the twist: (F (N, 2), M (N,), (v_x, v_y, omega) of the centroid), and the slowest support point's
    speed (N,)."""
    dt = model.dt
    th = x[:, 2]
    c, s = np.cos(th), np.sin(th)
    dsx, dsy = (nxt[:, 0] - x[:, 0]) / dt, (nxt[:, 1] - x[:, 1]) / dt
    om = (nxt[:, 2] - x[:, 2]) / dt
    g = model.outline.centroid
    bx, by = c * dsx + s * dsy, c * dsy - s * dsx  # the origin's velocity, object frame
    vx, vy = bx - om * g[1], by + om * g[0]  # the centroid's
    r = model._support  # relative to the centroid
    px, py = vx[:, None] - om[:, None] * r[:, 1], vy[:, None] + om[:, None] * r[:, 0]
    sp = np.hypot(px, py)
    w = model._weights
    fx, fy = -(px / sp) @ w, -(py / sp) @ w
    m = -((r[:, 0] * py - r[:, 1] * px) / sp) @ w
    return np.stack([fx, fy], -1), m, (vx, vy, om), sp.min(1)


def _pushes(model, n, speed_t, seed=0, gap=-5e-4):
    """``n`` pushes from contacts of the outline, along the inward normal at 0.1 m/s plus up to ``speed_t`` m/s along
    the contact, the object at yaw 0: (x, u, contact points, inward normals) (object frame). ``gap`` < 0: the pusher
    overlaps the outline that much, pushing for the whole step (a gap is crossed first: ``close_gap``)."""
    rng = np.random.default_rng(seed)
    pts, nrm = model.outline.contact_samples(9)
    interior = np.flatnonzero(np.isin(np.arange(len(pts)) % 9, range(1, 8)))
    pick = rng.choice(interior, n, replace=len(interior) < n)
    p = pts[pick] - nrm[pick] * (model.pusher_radius + gap)
    tang = np.stack([-nrm[pick, 1], nrm[pick, 0]], -1)
    v = 0.1 * nrm[pick] + speed_t * tang * rng.uniform(-1.0, 1.0, (n, 1))
    x = np.concatenate([np.zeros((n, 3)), p, v], 1)
    return x, np.zeros((n, 2)), pts[pick], nrm[pick]


def test_the_integrated_support_is_the_fine_models_grid():
    from parapush_ros.core.models.integrated_ls import support_grid
    from parapush_ros.core.scene.support import SupportSpec, support_points
    for name in ("box_slider", "cylinder_slider", "hexagon_slider", "ellipse_slider"):
        o = load_scene(name).objects[0]
        for points, spread in ((3, 1.0), (5, 0.85)):
            np.testing.assert_allclose(
                support_grid(ConvexOutline.of(o.shape, o.size, o.vertices), points, spread),
                support_points(o.shape, o.size, SupportSpec("grid", points, spread), o.vertices), atol=1e-15)


@pytest.mark.parametrize("outline", [DISC.outline, HEX.outline, ELLIPSE], ids=["disc", "hexagon", "ellipse"])
def test_integrated_sticking_and_sliding_balance_the_support_friction(outline):
    """Every push in contact: the support's friction has no moment about the contact point; sticking, the contact
    point moves with the pusher and the contact force is inside the friction cone; sliding, the force is on the
    cone's edge of its side and the contact point's normal velocity is the pusher's. (Where the object turns about
    a support point, that point's friction is anything up to its share: those pushes are left out of the balance.)"""
    model = QuasiStaticConvexSlider(outline, **INTEGRATED_DIRECT)
    x, u, cp, n = _pushes(model, 80, 0.25)
    nxt, _, mode = model.step_info(x, u)
    assert {STICK, SLIDE_UP, SLIDE_DOWN} <= set(mode.tolist()) and SEPARATION not in mode
    F, M, (vx, vy, om), slowest = _friction(model, x, nxt)
    free = slowest > 0.05 * np.hypot(*x[:, 5:7].T)
    assert free.mean() > 0.7
    q = cp - model.outline.centroid
    np.testing.assert_allclose((M - (q[:, 0] * F[:, 1] - q[:, 1] * F[:, 0]))[free], 0.0, atol=1e-5)
    f = -F  # the pusher's force on the object
    f_n, f_t = (f * n).sum(1), f[:, 1] * n[:, 0] - f[:, 0] * n[:, 1]
    cvx, cvy = vx - om * q[:, 1], vy + om * q[:, 0]  # the object's contact point
    w = x[:, 5:7]
    stick, up, down = mode == STICK, mode == SLIDE_UP, mode == SLIDE_DOWN
    np.testing.assert_allclose(np.stack([cvx, cvy], -1)[stick], w[stick], atol=1e-9)
    stick, up, down = stick & free, up & free, down & free
    assert np.all(np.abs(f_t[stick]) <= model.mu_p * f_n[stick] + 1e-6)
    np.testing.assert_allclose(f_t[up], model.mu_p * f_n[up], atol=1e-5)
    np.testing.assert_allclose(f_t[down], -model.mu_p * f_n[down], atol=1e-5)
    slide = up | down
    np.testing.assert_allclose((cvx * n[:, 0] + cvy * n[:, 1])[slide], (w * n).sum(1)[slide], atol=1e-9)


def test_integrated_disc_turns_at_the_exact_uniform_pressure_rate():
    """A disc pushed in +x at a contact off the centre's line, sticking: the yaw rate of a 9 x 9 support grid is the
    exact quasi-static one of uniform pressure (a fine polar quadrature: the yaw rate at which the friction has no
    moment about the contact point, by bisection) within 1 %, and closer to it than the ellipsoid's (one c)."""
    R = 0.05
    rho = (np.arange(200) + 0.5) / 200 * R
    phi = (np.arange(400) + 0.5) / 400 * 2 * np.pi
    rr, pp = np.meshgrid(rho, phi)
    pts, wts = np.stack([rr * np.cos(pp), rr * np.sin(pp)], -1).reshape(-1, 2), rr.ravel() / rr.sum()
    kw = dict(BOX, mu_p=1.0)  # sticking at every contact below
    integrated = QuasiStaticConvexSlider(DISC.outline, **dict(kw, limit_surface="integrated", support_points=9))
    ellipsoid = QuasiStaticConvexSlider(DISC.outline, **kw)
    w = np.array([0.1, 0.0])
    for b in (0.2, 0.4, 0.6):  # the contact's angle from the push's line through the centre
        q = R * np.array([-np.cos(b), np.sin(b)])  # contact point

        def moment_about_contact(om, q=q):
            v = w + om * np.stack([-(pts[:, 1] - q[1]), pts[:, 0] - q[0]], -1)
            f = v / np.linalg.norm(v, axis=1)[:, None] * wts[:, None]
            return ((pts[:, 0] - q[0]) * f[:, 1] - (pts[:, 1] - q[1]) * f[:, 0]).sum()

        lo, hi = -20.0, 0.0  # pushed above the centre in +x: the disc turns clockwise
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if moment_about_contact(mid) > 0 else (mid, hi)
        exact = 0.5 * (lo + hi)
        p = q * (R + DISC.pusher_radius - 0.0005) / R
        x = np.array([[0.0, 0.0, 0.0, *p, *w]])
        om = {}
        for name, model in (("integrated", integrated), ("ellipsoid", ellipsoid)):
            nxt, _, mode = model.step_info(x, np.zeros((1, 2)))
            assert mode[0] == STICK
            om[name] = nxt[0, 2] / model.dt
        print(b, om, exact)
        assert exact < 0.0 and om["integrated"] == pytest.approx(exact, rel=0.01), (b, om, exact)
        assert abs(om["integrated"] - exact) < abs(om["ellipsoid"] - exact), (b, om, exact)


@pytest.mark.parametrize("outline,height", [(DISC.outline, 0.0), (HEX.outline, 0.0), (ELLIPSE, 0.0),
                                            (HEX.outline, 0.01), (ELLIPSE, 0.01)],
                         ids=["disc", "hexagon", "ellipse", "hexagon-load-transfer", "ellipse-load-transfer"])
def test_integrated_jacobians_are_exact_within_a_mode(outline, height):
    model = QuasiStaticConvexSlider(outline, **dict(INTEGRATED_DIRECT, contact_height=height))
    x, _, _, _ = _pushes(model, 40, 0.25, seed=3)
    rng = np.random.default_rng(4)
    th = rng.uniform(-np.pi, np.pi, len(x))  # turned objects, off the origin
    c, s = np.cos(th), np.sin(th)
    rot = lambda a: np.stack([c * a[:, 0] - s * a[:, 1], s * a[:, 0] + c * a[:, 1]], -1)  # noqa: E731
    x = np.concatenate([np.tile([0.02, 0.01], (len(x), 1)), th[:, None], rot(x[:, 3:5]) + [0.02, 0.01],
                        rot(x[:, 5:7])], 1)
    u = rng.normal(0, 0.5, (len(x), 2))
    _, _, mode = model.step_info(x, u)
    assert {STICK, SLIDE_UP, SLIDE_DOWN} <= set(mode.tolist())
    assert_jacobians_match_central_differences(model, x, u)


@pytest.mark.parametrize("outline,height", [(DISC.outline, 0.0), (HEX.outline, 0.01), (ELLIPSE, 0.01)],
                         ids=["disc", "hexagon-load-transfer", "ellipse-load-transfer"])
def test_the_twist_table_matches_the_direct_solve_and_gives_its_own_jacobians(outline, height):
    """The integrated limit surface is read from a table (the default: 7-11x cheaper per step) built by the direct
    solve: on random contacts, pusher directions and yaws the object's velocity is within 1 % of the direct solve's
    (median; a few % next to the motion cone's edges and the vertices, where the twist has kinks), and
    ``step_jacobians`` are the derivatives of what ``step`` computes (central differences, off the table's nodes)."""
    table = QuasiStaticConvexSlider(outline, **dict(INTEGRATED, contact_height=height))
    direct = replace(table, tabulated=False)
    x, _, _, nrm = _pushes(table, 60, 0.25, seed=5)
    rng = np.random.default_rng(6)
    x[:, 3:5] += np.stack([-nrm[:, 1], nrm[:, 0]], -1) * rng.uniform(-3e-4, 3e-4, (len(x), 1))  # off the nodes
    th = rng.uniform(-np.pi, np.pi, len(x))
    c, s = np.cos(th), np.sin(th)
    rot = lambda a: np.stack([c * a[:, 0] - s * a[:, 1], s * a[:, 0] + c * a[:, 1]], -1)  # noqa: E731
    x = np.concatenate([np.tile([0.02, 0.01], (len(x), 1)), th[:, None], rot(x[:, 3:5]) + [0.02, 0.01],
                        rot(x[:, 5:7])], 1)
    u = np.zeros((len(x), 2))
    vel = {name: (m.step(x, u)[:, :3] - x[:, :3]) / m.dt for name, m in (("table", table), ("direct", direct))}
    speed = np.linalg.norm(vel["direct"][:, :2], axis=1)
    assert np.all(speed > 0.01)  # every push moves the object
    err = np.linalg.norm(vel["table"][:, :2] - vel["direct"][:, :2], axis=1) / speed
    turn = np.abs(vel["table"][:, 2] - vel["direct"][:, 2]) / np.abs(vel["direct"][:, 2]).max()
    print(np.median(err), err.max(), np.median(turn), turn.max())
    assert np.median(err) < 0.01 and err.max() < 0.05
    assert np.median(turn) < 0.01 and turn.max() < 0.05
    assert_jacobians_match_central_differences(table, x, rng.normal(0, 0.5, (len(x), 2)))


def test_the_limit_surface_is_a_model_option():
    from parapush_ros.core.models.registry import parse_model_options
    assert parse_model_options(["quasistatic_convex.limit_surface=integrated",
                                "quasistatic_convex.support_points=5"]) == {
        "quasistatic_convex": {"limit_surface": "integrated", "support_points": 5}}
    assert parse_model_options(["quasistatic_convex.close_gap=False"]) == {"quasistatic_convex": {"close_gap": False}}
    with pytest.raises(ValueError, match="'no' is not true or false"):
        parse_model_options(["quasistatic_convex.close_gap=no"])
    with pytest.raises(ValueError, match="model 'quasistatic_convex' has no option 'c'"):
        parse_model_options(["quasistatic_convex.c=1"])
    with pytest.raises(ValueError, match=r"not of the form model\.option=value"):
        parse_model_options(["limit_surface=integrated"])
    with pytest.raises(ValueError, match=r"limit_surface must be one of ellipsoid, integrated"):
        QuasiStaticConvexSlider(DISC.outline, **dict(BOX, limit_surface="polynomial"))
    with pytest.raises(ValueError, match=r"'inf' is not a finite number"):  # (the model predicted NaN silently)
        parse_model_options(["quasistatic_convex.contact_height=inf"])
    with pytest.raises(ValueError, match=r"contact_height must be finite and >= 0, got inf"):
        QuasiStaticConvexSlider(DISC.outline, **dict(BOX, contact_height=float("inf")))
    scene = load_scene("ellipse_slider")
    p = Predictor(scene, options={"quasistatic_convex": {"limit_surface": "integrated"}})
    try:
        m = p.coarse_model()
        assert m.model.limit_surface == "integrated" and m.model.support_points == scene.support.points
        assert m.with_substep(0.01).model.limit_surface == "integrated"
        from parapush_ros.core.models.quasistatic_coarse import QuasiStaticConvexCoarseModel
        scaled = QuasiStaticConvexCoarseModel(scene, c_scale=1.7)  # an explicit scale survives a re-substep
        assert scaled.with_substep(0.01).model.c == pytest.approx(scaled.model.c)
        x0 = scene.initial_state()
        out = p.predict(x0, np.array([[0.05, 0.0]] * 4), 0.25, model="coarse").states
        assert np.all(np.isfinite(out))
    finally:
        p.close()


@pytest.mark.parametrize("scene_name,pusher", [("box_slider", [-0.07, 0.02]), ("cylinder_slider", [-0.064, 0.02])])
def test_load_transfer_turns_a_box_and_a_disc_as_the_fine_model_does(scene_name, pusher):
    """An object pushed off the centre's line for 1 s: its support's load moves towards the push (the pusher's force
    acts half way up the side the two share, in the fine model too: ``mjcf.pusher_contact_height``), so it turns
    less than under uniform load, as MuJoCo's box and disc do (uniform load turns them 7 % and 31 % too far here)."""
    scene = load_scene(scene_name)
    L = scene.layout
    x0 = scene.initial_state()
    L.pusher_pos(x0)[:] = pusher
    push = np.array([[0.05, 0.0]] * 4)
    yaw = {}
    for name, height in (("uniform", 0.0), ("transfer", -1.0)):
        p = Predictor(scene, options={"quasistatic_convex": {"limit_surface": "integrated",
                                                             "contact_height": height}}, threads=1)
        try:
            if name == "uniform":
                yaw["fine"] = L.object_poses(p.predict(x0, push, 0.25, model="fine").states[-1])[0, 2]
            yaw[name] = L.object_poses(p.predict(x0, push, 0.25, model="quasistatic_convex").states[-1])[0, 2]
        finally:
            p.close()
    print({k: np.degrees(v) for k, v in yaw.items()})
    assert yaw["fine"] < 0.0 and yaw["uniform"] < yaw["transfer"] < 0.0
    assert abs(yaw["transfer"] - yaw["fine"]) < 0.5 * abs(yaw["uniform"] - yaw["fine"])


def assert_jacobians_match_central_differences(model, x, u, eps=1e-7):
    """``step_jacobians`` against central differences of ``step``, state and control, batch-wise."""
    val, A, B = model.step_jacobians(x, u)
    np.testing.assert_allclose(val, model.step(x, u), atol=1e-14)
    for i in range(7):
        d = np.zeros(7)
        d[i] = eps
        fd = (model.step(x + d, u) - model.step(x - d, u)) / (2 * eps)
        np.testing.assert_allclose(A[:, :, i], fd, atol=2e-6, rtol=1e-5)
    for i in range(2):
        d = np.zeros(2)
        d[i] = eps
        fd = (model.step(x, u + d) - model.step(x, u - d)) / (2 * eps)
        np.testing.assert_allclose(B[:, :, i], fd, atol=2e-6, rtol=1e-5)


def test_a_gap_at_the_start_is_crossed_so_parareal_1_follows_the_fine_model():
    """The pusher starts 1 mm short of the ellipse (as a measured start does) and pushes it off-centre for 2 s. The
    default coarse model crosses the gap and then touches, as MuJoCo does; paper 003's rule (``close_gap=False``)
    pushes from 1 mm away all along, so every fine slice Parareal starts from its states first travels that
    millimetre without pushing, and Parareal-1 turns the ellipse several degrees less than the fine model."""
    from parapush_ros.core.scene.geometry import disc_penetration
    scene = load_scene("ellipse_slider")
    L, r = scene.layout, scene.pusher.radius
    a, b = scene.objects[0].radii
    t = np.radians(200.0)
    p = np.array([a * np.cos(t), b * np.sin(t)])
    n = np.array([p[0] / a ** 2, p[1] / b ** 2])
    n /= np.linalg.norm(n)
    x0 = scene.initial_state()
    L.pusher_pos(x0)[:] = p + n * (r + 0.001)
    L.pusher_vel(x0)[:] = 0.0
    u = np.tile(-0.03 * n + [0.0, 0.01], (8, 1))
    turn, gaps = {}, {}
    for close in (True, False):
        pred = Predictor(scene, options={"quasistatic_convex": {"close_gap": close}}, threads=1)
        try:
            states = {m: pred.predict(x0, u, 0.25, model=m).states for m in ("fine", "coarse", "parareal1")}
        finally:
            pred.close()
        gaps[close] = np.array([-disc_penetration(L.pusher_pos(s), r, scene.objects[0].footprint,
                                                  L.object_poses(s)[0])[0] for s in states["coarse"][1:]])
        yaw = {m: np.degrees(L.object_poses(s)[-1, 0, 2]) for m, s in states.items()}
        turn[close] = abs(yaw["parareal1"] - yaw["fine"])
    print(gaps, turn)
    assert np.all(np.abs(gaps[True]) < 1e-4) and np.all(gaps[False] > 0.9e-3)
    assert turn[True] < 3.0 and turn[False] > 2.0 * turn[True]
