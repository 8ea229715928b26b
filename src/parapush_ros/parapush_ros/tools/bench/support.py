"""``parapush bench support``: how much the fine model turns a box per unit push, against the limit surface.

An offset push on a box's face turns it at a rate the quasi-static model predicts from the ellipsoidal limit
surface (``docs/background.md``): sticking contact at r_c = (p_x, p_y) on the face,
omega / v_n = -p_y / (c^2 + p_x^2 + p_y^2), or the edge of the motion cone when the pusher slides. Uniform support
pressure gives c = (1/A) int |r| dA (0.3826 a for a square). The ellipsoid is an approximation (it under-predicts
turning near a central push); the bench also solves the exact quasi-static problem of uniform Coulomb pressure
numerically (a 41 x 41 sample of the footprint). The bench pushes the scene's box (or cylinder) from a
few offsets with each support pattern and reports the fine model's rotation per unit push against that prediction
(ratio 1 = turns like a uniformly supported object; ``native`` MuJoCo contacts turn it about half as much).
"""
from __future__ import annotations

import math

import numpy as np

from ...core.models.fine import FineModel
from ...core.scene.spec import load_scene
from ...core.scene.support import SupportSpec, mean_support_radius, support_points, uniform_mean_radius
from .common import output_paths, print_table, pyplot, save_figure, write_json

PUSH_SPEED = 0.05  # m/s
PUSH_LENGTH = 0.01  # m: short enough that the contact geometry stays close to the initial one
OFFSETS = (0.0, 0.2, 0.4, 0.6, 0.8)  # contact offset as a fraction of the half face


def quasi_static_turn_rate(p_x: float, p_y: float, c: float, mu_p: float) -> float:
    """d(yaw)/d(push) (rad/m) of a quasi-static slider pushed normally to its face at (p_x, p_y) (slider frame,
    p_x < 0 on the back face), limit-surface parameter c, pusher friction mu_p: sticking, or the motion cone's
    edge when the normal push lies outside it (Lynch et al. 1992; Hogan & Rodriguez 2016)."""
    c2 = c * c
    gamma_t = (mu_p * c2 - p_x * p_y + mu_p * p_x ** 2) / (c2 + p_y ** 2 - mu_p * p_x * p_y)
    gamma_b = (-mu_p * c2 - p_x * p_y - mu_p * p_x ** 2) / (c2 + p_y ** 2 + mu_p * p_x * p_y)
    v_t = 0.0 if gamma_b <= 0.0 <= gamma_t else (gamma_t if gamma_t < 0.0 else gamma_b)
    return (p_x * v_t - p_y) / (c2 + p_x ** 2 + p_y ** 2)


def _support_wrench(points: np.ndarray, twist) -> np.ndarray:
    """Coulomb friction wrench (f_x, f_y, m_z) per unit of mu m g on a slider resting equally on ``points`` and
    moving with ``twist`` = (v_x, v_y, omega) (slider frame)."""
    vx, vy, w = twist
    v = np.stack([vx - w * points[:, 1], vy + w * points[:, 0]], -1)
    n = np.linalg.norm(v, axis=1) + 1e-15
    f = -(v / n[:, None]).mean(0)
    m = -(points[:, 0] * v[:, 1] / n - points[:, 1] * v[:, 0] / n).mean()
    return np.array([f[0], f[1], m])


def exact_turn_rate(points: np.ndarray, p_x: float, p_y: float, mu_p: float, normal=(1.0, 0.0)) -> float:
    """d(yaw)/d(push) (rad/m) of the quasi-static slider resting equally on ``points`` (the exact limit surface of
    that pressure, not its ellipsoidal approximation), its contact point (p_x, p_y) pushed along +x: sticking if the
    needed contact force lies in the friction cone about the contact ``normal`` (into the slider: (1, 0) on a
    box's back face, towards the centre on a cylinder), else sliding on the cone's edge."""
    from scipy.optimize import brentq, fsolve  # noqa: PLC0415
    n = np.asarray(normal, dtype=float) / np.linalg.norm(normal)
    tangent = np.array([-n[1], n[0]])

    def stick_twist(w):  # the contact point moves with the pusher: velocity (1, 0)
        return (1.0 + w * p_y, -w * p_x, w)

    def moment_residual(f):  # the friction wrench's line of action passes through the contact point
        return f[2] - (p_x * f[1] - p_y * f[0])
    if abs(p_y) < 1e-9:
        return 0.0
    lo, hi = sorted((-1e3 * np.sign(p_y), -1e-9 * np.sign(p_y)))
    w = brentq(lambda w: moment_residual(_support_wrench(points, stick_twist(w))), lo, hi)
    force = -_support_wrench(points, stick_twist(w))[:2]  # what the pusher applies
    if abs(force @ tangent) <= mu_p * (force @ n):
        return float(w)
    applied = n + np.sign(force @ tangent) * mu_p * tangent
    moment = p_x * applied[1] - p_y * applied[0]

    def slide_residual(t):  # the twist (1, v_y, omega) whose friction wrench opposes the applied one
        f = -_support_wrench(points, (1.0, t[0], t[1]))
        return [f[1] / f[0] - applied[1] / applied[0], f[2] / f[0] - moment / applied[0]]
    v0 = stick_twist(w)
    (vy, w), _, ok, _ = fsolve(slide_residual, [v0[1] / v0[0], v0[2] / v0[0]], full_output=True)
    if ok != 1:
        return float("nan")
    normal_speed = np.array([1.0 - w * p_y, vy + w * p_x]) @ n  # the contact point's motion along the normal
    return float(w / normal_speed * n[0])  # per unit of pusher travel (its normal component is n[0] per unit)


def support_variants(spec: str) -> list:
    """'native,grid5' -> [{'pattern': 'native'}, {'pattern': 'grid', 'points': 5}]"""
    out = []
    for item in spec.split(","):
        item = item.strip()
        if item == "native":
            out.append({"pattern": "native"})
        elif item.startswith("grid") and item[4:].isdigit():
            out.append({"pattern": "grid", "points": int(item[4:])})
        else:
            raise ValueError(f"--supports: unknown support {item!r} (expected native or grid<N>, e.g. grid5)")
    return out


def contact_geometry(obj, pusher_radius: float, fraction: float):
    """(pusher centre, contact point, contact normal into the object), object frame, for a pusher touching the
    back of ``obj`` (-x side) with its centre ``fraction`` of the half width off the axis."""
    y = fraction * obj.size[1] / 2.0
    if obj.shape == "box":
        return np.array([-obj.size[0] / 2.0 - pusher_radius, y]), np.array([-obj.size[0] / 2.0, y]), (1.0, 0.0)
    reach = obj.radius + pusher_radius  # centre distance when two discs touch; the contact is on that line
    centre = np.array([-math.sqrt(reach ** 2 - y ** 2), y])
    contact = centre * obj.radius / reach
    return centre, contact, tuple(-contact / obj.radius)


def measure(scene, offsets=OFFSETS) -> list:
    """Fine-model yaw per unit push (rad/m) for each offset fraction, pushing along the body x axis."""
    obj = scene.objects[0]
    fm = FineModel(scene, threads=1)
    try:
        rates = []
        for f in offsets:
            centre, _, _ = contact_geometry(obj, scene.pusher.radius, f)
            x0 = scene.layout.compose(np.array(obj.pose[:2]) + centre, np.array([[obj.pose[0], obj.pose[1], 0.0]]))
            steps = int(round(PUSH_LENGTH / PUSH_SPEED / 0.001))
            x1 = fm.propagate(x0[None], np.array([[PUSH_SPEED, 0.0]]), steps * 0.001)[0]
            rates.append(float(scene.layout.object_poses(x1)[0, 2] / PUSH_LENGTH))
        return rates
    finally:
        fm.close()


def run(args) -> dict:
    base = load_scene(args.scene)
    if len(base.objects) != 1:
        raise ValueError(f"--scene: {base.name!r} has {len(base.objects)} objects; the bench pushes one")
    obj = base.objects[0]
    mu_p = base.friction["pusher_object"]
    half_y = obj.size[1] / 2.0
    c_uniform = uniform_mean_radius(obj.shape, obj.size)
    rows, results = [], []
    predicted, exact = [], []
    uniform = support_points(obj.shape, obj.size, SupportSpec("grid", 41))  # uniform pressure, finely sampled
    for f in OFFSETS:
        _, (p_x, p_y), normal = contact_geometry(obj, base.pusher.radius, f)
        # the ellipsoidal formula is for a flat face; a cylinder's contact normal points at its centre
        predicted.append(quasi_static_turn_rate(p_x, p_y, c_uniform, mu_p) if obj.shape == "box" else float("nan"))
        exact.append(exact_turn_rate(uniform, p_x, p_y, mu_p, normal))
    for variant in support_variants(args.supports):
        scene = base.revalidated(f"{base.name} with support {variant}", support=variant)
        fine = measure(scene)
        c = mean_support_radius(obj.shape, obj.size, scene.support)
        label = variant["pattern"] + (str(variant["points"]) if "points" in variant else "")
        ratios = [fr / pr if abs(pr) > 1e-9 else float("nan") for fr, pr in zip(fine, predicted)]
        ratios_exact = [fr / pr if abs(pr) > 1e-9 else float("nan") for fr, pr in zip(fine, exact)]
        results.append({"support": label, "mean_support_radius_m": c, "fine_rad_per_m": fine,
                        "ratio_to_uniform_limit_surface": ratios, "ratio_to_uniform_exact": ratios_exact,
                        "median_ratio": float(np.median([r for r, f in zip(ratios, OFFSETS) if f > 0])),
                        "median_ratio_exact": float(np.median([r for r, f in zip(ratios_exact, OFFSETS) if f > 0]))})
        for f, fr, pr, ex, r, rx in zip(OFFSETS, fine, predicted, exact, ratios, ratios_exact):
            rows.append([label, f"{c * 1e3:.1f}", f, math.degrees(fr) / 100.0, math.degrees(pr) / 100.0,
                         math.degrees(ex) / 100.0, r, rx])
    print_table(["support", "c (mm)", "pusher offset/half", "fine deg/cm", "ellipsoid LS deg/cm", "exact LS deg/cm",
                 "ratio ellipsoid", "ratio exact"], rows,
                title=f"bench support: {base.name}, push {PUSH_LENGTH * 1e3:.0f} mm at {PUSH_SPEED * 1e3:.0f} mm/s, "
                      f"mu_p {mu_p}, uniform-pressure c = {c_uniform * 1e3:.1f} mm")
    payload = {"scene": base.name, "shape": obj.shape, "mu_p": mu_p, "push_length_m": PUSH_LENGTH,
               "offsets_fraction_of_half_face": list(OFFSETS), "uniform_limit_surface_c_m": c_uniform,
               "limit_surface_rad_per_m": predicted, "exact_uniform_rad_per_m": exact, "supports": results}
    path, out = output_paths(args, "support")
    write_json(path, payload)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(np.array(OFFSETS) * half_y * 1e3, np.degrees(predicted) / 100.0, "k--", label="ellipsoidal LS, uniform")
    ax.plot(np.array(OFFSETS) * half_y * 1e3, np.degrees(exact) / 100.0, "k:", label="exact quasi-static, uniform")
    for r in results:
        ax.plot(np.array(OFFSETS) * half_y * 1e3, np.degrees(r["fine_rad_per_m"]) / 100.0, "o-",
                label=f"fine, {r['support']}")
    ax.set_xlabel("pusher offset (mm)")
    ax.set_ylabel("yaw per push (deg/cm)")
    ax.legend()
    save_figure(fig, out / "bench_support.png")
    return payload


def add_parser(sub, parents):
    p = sub.add_parser("support", parents=[parents],
                       help="rotation per unit push at offset contacts vs the limit surface, per support pattern")
    p.add_argument("--scene", default="box_slider", help="a one-object scene (default: box_slider)")
    p.add_argument("--supports", default="native,grid5", help="support patterns (default: native,grid5)")
    p.set_defaults(func=run)
