"""Support pressure (issue 15): the fine model rests objects on a grid of support points that stands for uniform
pressure, and an offset push then turns a box as the uniform-pressure limit surface says (real MuJoCo)."""
import re

import mujoco
import numpy as np
import pytest
import yaml

from parapush_ros.tools.bench.support import contact_geometry, exact_turn_rate, measure
from parapush_ros.core.models.fine import FineModel
from parapush_ros.core.models.mjcf import build_mjcf
from parapush_ros.core.scene.spec import SceneError, load_scene, scene_from_dict, scenes_dir
from parapush_ros.core.scene.support import SupportSpec, mean_support_radius, support_points, uniform_mean_radius


def with_support(name, object_table=None, **support):
    d = load_scene(name).to_dict()
    d["support"] = support
    if object_table is not None:
        d["friction"]["object_table"] = object_table
    return scene_from_dict(d, source=f"{name}.yaml")


def test_uniform_pressure_geometry():
    assert uniform_mean_radius("box", (1.0, 1.0, 0.1)) == pytest.approx(0.3826, abs=1e-4)  # the reference's value
    assert uniform_mean_radius("cylinder", (0.2, 0.2, 0.1)) == pytest.approx(2 * 0.1 / 3)
    for shape, size in (("box", (0.109, 0.154, 0.011)), ("cylinder", (0.1023, 0.1023, 0.0245))):
        for spread in (0.8, 1.0):
            spec = SupportSpec("grid", 3, spread)
            assert mean_support_radius(shape, size, spec) == pytest.approx(spread * uniform_mean_radius(shape, size))
        assert mean_support_radius(shape, size, SupportSpec("native")) > 1.4 * uniform_mean_radius(shape, size)
    assert len(support_points("box", (0.1, 0.1, 0.1), SupportSpec("grid", 3))) == 9


def test_support_field_is_validated_and_round_trips():
    scene = with_support("box_slider", pattern="grid", points=4, spread=0.9)
    assert scene.support == SupportSpec("grid", 4, 0.9)
    assert scene_from_dict(scene.to_dict()).support == scene.support
    data = yaml.safe_load((scenes_dir() / "box_slider.yaml").read_text())
    for bad, words in (({"pattern": "ring"}, "support.pattern: must be one of native, grid"),
                       ({"pattern": "grid", "points": 1}, "support.points: must be an integer from 2 to 9"),
                       ({"pattern": "grid", "points": 3.5}, "support.points"),
                       ({"pattern": "grid", "spread": 0.0}, "support.spread: must be > 0"),
                       ({"pattern": "grid", "spread": 2.0}, "support.spread: 2.0 puts the support points of "
                                                            "objects[0] 'box' outside its footprint"),
                       ({"shape": "grid"}, "support.shape: unknown key")):
        data["support"] = bad
        with pytest.raises(SceneError, match=re.escape(f"box.yaml: {words}")):
            scene_from_dict(data, source="box.yaml")


def test_grid_support_carries_the_weight_on_every_point():
    scene = with_support("box_slider", pattern="grid", points=3)
    fm = FineModel(scene, threads=1)
    # the reference physics (the simulated world's): in the fine model a box at rest falls asleep, and a sleeping
    # body's contacts are not computed
    m = fm.reference_model
    d = mujoco.MjData(m)
    fm.mapping.to_mujoco(scene.initial_state(), d.qpos, d.qvel, d.act)
    mujoco.mj_step(m, d, nstep=600)
    loads, f = [], np.zeros(6)
    for i in range(d.ncon):
        assert "support_box" in m.geom(d.contact[i].geom1).name + m.geom(d.contact[i].geom2).name
        mujoco.mj_contactForce(m, d, i, f)
        loads.append(f[0])
    weight = scene.objects[0].mass * 9.81
    assert len(loads) == 9 and sum(loads) == pytest.approx(weight, rel=0.02)
    assert np.allclose(loads, weight / 9, rtol=0.1)


@pytest.mark.parametrize("name", ["box_slider", "cylinder_slider"])
def test_grid_support_turns_like_uniform_pressure_native_does_not(name):
    """Yaw per unit push at offset contacts against the exact quasi-static prediction of uniform pressure
    (``parapush bench support``): the grid within 15 %, MuJoCo's native corner/rim contacts 25 % or more short. On a
    table of low friction (0.2): the pusher's force acts half way up the object's side, and its tipping moment moves
    the support's load by contact height x table friction (2.5 mm on the disc; 12.8 mm with the scene's 1.0, which
    turns it 21-23 % less than uniform pressure does, as the load-transfer model says: test_quasistatic_convex)."""
    offsets = (0.6, 0.8)
    base = load_scene(name)
    obj = base.objects[0]
    uniform = support_points(obj.shape, obj.size, SupportSpec("grid", 41))
    expected = []
    for f in offsets:
        _, (p_x, p_y), normal = contact_geometry(obj, base.pusher.radius, f)
        expected.append(exact_turn_rate(uniform, p_x, p_y, base.friction["pusher_object"], normal))
    grid = np.array(measure(with_support(name, 0.2, pattern="grid", points=3), offsets)) / expected
    native = np.array(measure(with_support(name, 0.2, pattern="native"), offsets)) / expected
    assert np.all(np.abs(grid - 1.0) < 0.15), grid
    assert np.all(native < 0.75), native


def test_default_support_is_uniform_pressure_on_a_3_by_3_grid():
    """Issue 15: the physically motivated default (uniform pressure); a scene file may ask for MuJoCo's native
    contacts (the physics before issue 15) with ``support: {pattern: native}``."""
    scene = load_scene("box_slider")
    assert scene.support == SupportSpec("grid", 3, 1.0)
    assert 'name="support_box_8"' in build_mjcf(scene) and "support_" not in build_mjcf(
        with_support("box_slider", pattern="native"))
