"""Random obstacle scenes of every shape (``bench mpc --shapes``): each drawn scene validates, nothing overlaps, the
margins hold on the outlines (not on bounding circles), the obstacle blocks the straight push, the pusher starts
right behind the outline; in the fine model (MuJoCo) a straight push moves the object from the first step.
"""
import json

import numpy as np
import pytest

from parapush_ros.cli import main
from parapush_ros.core.scene.geometry import Footprint, disc_penetration, pair_penetration
from parapush_ros.core.scene.shapes import (SHAPE_SCENES, SHAPES, half_width, outline_points, parse_shapes,
                                            pusher_behind, support)
from parapush_ros.core.scene.spec import load_scene, scene_from_dict
from parapush_ros.core.sim.world import SimWorld
from parapush_ros.tools.bench.mpc import (EDGE_GAP, GOAL_GAP, OBSTACLE_GAP, PUSHER_GAP, random_scenes,
                                          shaped_scene)

pytestmark = pytest.mark.timeout(120)
SCENES_PER_SHAPE = 12


def _straight_push_hits(scene) -> bool:
    """Whether the object, moved along the line from its start to the goal (its yaw kept), touches the obstacle."""
    o, ob = scene.objects[0], scene.obstacles[0]
    start, goal = np.array(o.pose), np.array([*scene.goal.position, o.pose[2]])
    poses = start + np.linspace(0.0, 1.0, 400)[:, None] * (goal - start)
    depth, _ = pair_penetration(o.footprint, poses, ob.footprint, np.repeat(np.array(ob.pose)[None], len(poses), 0))
    return bool(np.any(depth > 0.0))


@pytest.mark.parametrize("shape", SHAPES)
def test_every_drawn_scene_validates_and_keeps_its_margins(shape):
    scenes = random_scenes(SCENES_PER_SHAPE, 7, shapes=(shape,))
    shipped = load_scene(SHAPE_SCENES[shape]).objects[0]
    yaws = []
    for s in scenes:
        o, ob = s.objects[0], s.obstacles[0]
        assert o.shape == shipped.shape and o.size == shipped.size and o.vertices == shipped.vertices
        assert o.mass == 0.5 and o.name == s.goal.object == "slider"
        # the scene file it stands for loads back to the same scene (the loader's validation: no overlaps, on the
        # table, support inside the footprint)
        assert scene_from_dict(s.to_dict(), source="round trip").to_dict() == s.to_dict()
        pose, opose = np.array(o.pose), np.array(ob.pose)
        gap = -pair_penetration(o.footprint, pose, ob.footprint, opose)[0]
        assert gap >= OBSTACLE_GAP - 1e-9
        pusher = np.array(s.pusher.start)
        assert -disc_penetration(pusher, s.pusher.radius, ob.footprint, opose)[0] >= OBSTACLE_GAP - 1e-9
        # the pusher: PUSHER_GAP from the outline (its exact signed distance), on the line from the object to the goal
        d_obj = o.footprint.sdf(pusher, pose)[0]
        assert d_obj - s.pusher.radius == pytest.approx(PUSHER_GAP, abs=1e-9)
        to_goal = np.array(s.goal.position) - pose[:2]
        behind = pose[:2] - pusher
        assert abs(to_goal[0] * behind[1] - to_goal[1] * behind[0]) / np.linalg.norm(to_goal) < 1e-9
        assert behind @ to_goal > 0.0
        # the goal region is clear of the obstacle; the object's outline is EDGE_GAP inside the table
        goal_disc = Footprint("cylinder", radius=s.goal.radius)
        assert -pair_penetration(goal_disc, np.array([*s.goal.position, 0.0]), ob.footprint, opose)[0] >= GOAL_GAP
        assert np.all(np.abs(outline_points(o.footprint, pose)) <= s.table.half - EDGE_GAP + 1e-12)
        assert _straight_push_hits(s), s.name
        yaws.append(o.pose[2])
    if shape == "cylinder":
        assert yaws == [0.0] * SCENES_PER_SHAPE
    else:  # drawn at random yaws
        assert np.ptp(yaws) > 2.0


def test_shapes_are_drawn_in_turn_deterministically_and_the_default_is_unchanged():
    a = random_scenes(5, 3, shapes=("polygon", "ellipse"))
    assert [s.objects[0].shape for s in a] == ["polygon", "ellipse", "polygon", "ellipse", "polygon"]
    assert [s.to_dict() for s in a] == [s.to_dict() for s in random_scenes(5, 3, shapes=("polygon", "ellipse"))]
    # scene i depends on (seed, i, shape) only
    assert shaped_scene(2, 3, "polygon").to_dict() == a[2].to_dict()
    assert random_scenes(2, 4, shapes=("polygon",))[0].to_dict() != a[0].to_dict()
    # without --shapes: the obstacle_push cylinder at yaw 0, as before
    plain = random_scenes(3, 3)
    assert all(s.objects[0].shape == "cylinder" and s.objects[0].pose[2] == 0.0 for s in plain)
    assert plain[0].name == "random_obstacle_3_0"
    assert parse_shapes(None) is None and parse_shapes("box, ellipse") == ("box", "ellipse")
    with pytest.raises(ValueError, match="--shapes: unknown shape 'triangle'"):
        parse_shapes("box,triangle")


def test_placement_uses_the_outline_not_a_bounding_circle():
    """An ellipse of half axes 60 x 35 mm pushed along its short axis: the pusher sits 35 mm + radius + gap behind
    the centre (a bounding circle would put it 60 mm), and its half width across the push is 60 mm."""
    fp = load_scene("ellipse_slider").objects[0].footprint
    pose = np.array([0.1, -0.05, np.pi / 2])  # body x (60 mm) along table y
    d = np.array([1.0, 0.0])
    p = pusher_behind(fp, pose, d, 0.0145, 0.002)
    assert p[1] == pytest.approx(-0.05, abs=1e-12)
    # the 64-gon's vertex at the end of the short axis lies on the ellipse: the distance is exact
    assert pose[0] - p[0] == pytest.approx(0.035 + 0.0145 + 0.002, abs=1e-9)
    assert half_width(fp, pose, d) == pytest.approx(0.06, abs=1e-9)
    assert support(fp, pose, np.array([0.0, 1.0])) == pytest.approx(0.06, abs=1e-9)


@pytest.mark.parametrize("shape", ("box", "polygon", "ellipse"))
def test_the_fine_model_pushes_a_drawn_object_from_the_start(shape):
    """In MuJoCo, the pusher moving at 5 cm/s toward the goal touches the object after its 2 mm gap and moves it
    along the push: the outline the scene places by is where the fine model has it."""
    s = random_scenes(1, 11, shapes=(shape,))[0]
    start = np.array(s.objects[0].pose)
    d = np.array(s.goal.position) - start[:2]
    d /= np.linalg.norm(d)
    world = SimWorld(s)
    moved, travel = [], []
    try:
        world.reset()
        world.set_velocity(*(0.05 * d))
        for steps in (100, 900):  # 0.1 s, then on to 1 s
            world.step(steps)
            x = world.planar_state()
            moved.append(s.layout.object_poses(x)[0, :2] - start[:2])
            travel.append((s.layout.pusher_pos(x) - np.array(s.pusher.start)) @ d)
    finally:
        world.close()
    # in contact once the pusher has closed the 2 mm gap, not before (MuJoCo's soft contact: within half a mm); an
    # oblique contact turns the object, so it moves less than the pusher's travel past the gap
    assert travel[0] > 0.003 and 0.0005 < moved[0] @ d <= travel[0] - PUSHER_GAP + 0.0005
    assert moved[1] @ d > 0.025  # and pushed along (turning, the pusher sliding along the outline)


def test_bench_mpc_shapes_option(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--scenes", "2", "--shapes", "polygon,ellipse", "--models", "coarse", "--coarse",
                 "auto", "--max-actions", "1", "--samples", "4", "--iterations", "1", "--no-timing",
                 "--out", str(out)]) == 0
    res = json.loads((out / "bench_mpc.json").read_text())
    assert res["shapes"] == ["polygon", "ellipse"]
    assert [sd["objects"][0]["shape"] for sd in res["scene_defs"]] == ["polygon", "ellipse"]
    assert [r["shape"] for r in res["runs"]] == ["polygon", "ellipse"]
    assert set(res["summary_by_shape"]) == {"polygon", "ellipse"}
    assert all(v["nominal/coarse"]["runs"] == 1 for v in res["summary_by_shape"].values())
    with pytest.raises(ValueError, match="--shapes: the multi_object task"):
        main(["bench", "mpc", "--task", "multi_object", "--scenes", "1", "--shapes", "box", "--no-timing",
              "--out", str(tmp_path / "m")])
    # another --shapes in the same --out is another study, refused by name
    with pytest.raises(ValueError, match="shapes"):
        main(["bench", "mpc", "--scenes", "2", "--shapes", "box", "--models", "coarse", "--coarse", "auto",
              "--max-actions", "1", "--samples", "4", "--iterations", "1", "--no-timing", "--out", str(out)])


def test_a_task_added_to_bench_mpcs_table_is_measured_on_its_own_scenes(tmp_path, monkeypatch):
    """docs/extending.md's fourth step for a new task: an entry of ``bench mpc``'s ``TASKS`` with its scene generator
    makes ``--task <name>`` run on that task's scenes (they were chosen by task name: any other ran the obstacle
    task's scenes without a word)."""
    from parapush_ros.tools.bench import mpc as bench_mpc
    monkeypatch.setitem(bench_mpc.TASKS, "plain", {
        **bench_mpc.TASKS["obstacle"], "label": "plain", "shapes": False,
        "scenes": lambda n, seed, shapes: [load_scene("cylinder_slider") for _ in range(n)]})
    out = tmp_path / "out"
    assert main(["bench", "mpc", "--task", "plain", "--scenes", "1", "--models", "coarse", "--coarse", "auto",
                 "--max-actions", "1", "--samples", "4", "--iterations", "1", "--no-timing", "--out", str(out)]) == 0
    res = json.loads((out / "bench_mpc.json").read_text())
    assert res["task"] == "plain" and [sd["name"] for sd in res["scene_defs"]] == ["cylinder_slider"]
    assert not res["scene_defs"][0]["obstacles"]
