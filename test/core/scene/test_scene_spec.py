"""Scene loading and validation: every shipped scene loads; every kind of mistake is named precisely."""
import copy

import numpy as np
import pytest
import yaml

from parapush_ros.core.scene.spec import SceneError, load_scene, scene_from_dict, scenes_dir
from parapush_ros.core.scene.state import StateLayout

SHIPPED = ["block_003", "box_slider", "cylinder_slider", "four_cylinders", "obstacle_push"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenes_load_and_round_trip(name):
    scene = load_scene(name)
    assert scene.layout.dim == 4 + 6 * len(scene.objects)
    again = scene_from_dict(scene.to_dict(), source="roundtrip")
    assert again.objects == scene.objects and again.obstacles == scene.obstacles and again.goal == scene.goal


def test_required_scenes_match_the_papers():
    assert load_scene("cylinder_slider").objects[0].radius == pytest.approx(0.05115)
    assert [o.shape for o in load_scene("four_cylinders").objects] == ["cylinder"] * 4
    box = load_scene("box_slider").objects[0]
    assert box.shape == "box" and box.size == pytest.approx((0.109, 0.154, 0.011))
    block = load_scene("block_003")  # paper 003: 12 x 12 cm, 110 g, mu_p 0.3, mu_g 0.35, 5 mm pusher
    assert block.objects[0].size[:2] == pytest.approx((0.12, 0.12)) and block.objects[0].mass == 0.11
    assert block.friction["pusher_object"] == 0.3 and block.friction["object_table"] == 0.35
    assert block.pusher.radius == 0.005
    obst = load_scene("obstacle_push")
    slider, goal, ob = obst.objects[0].pose, obst.goal.position, obst.obstacles[0].pose
    # the obstacle sits on the segment between slider and goal
    to_goal = np.subtract(goal, slider[:2])
    t = np.dot(np.subtract(ob[:2], slider[:2]), to_goal) / np.sum(to_goal ** 2)
    closest = np.add(slider[:2], t * np.subtract(goal, slider[:2]))
    assert 0 < t < 1 and np.linalg.norm(closest - ob[:2]) < obst.obstacles[0].radius


def base():
    return yaml.safe_load((scenes_dir() / "obstacle_push.yaml").read_text())


def mutate(fn):
    d = copy.deepcopy(base())
    fn(d)
    return d


@pytest.mark.parametrize("change, field, words", [
    (lambda d: d["objects"][0].update(colour="red"), "objects[0].colour", "unknown key"),
    (lambda d: d.update(tabel={}), "tabel", "unknown key"),
    (lambda d: d["objects"][0].update(radius=-0.05), "objects[0].radius", "must be > 0"),
    (lambda d: d["objects"][0].update(shape="sphere"), "objects[0].shape", "must be one of"),
    (lambda d: d["objects"][0].pop("mass"), "objects[0].mass", "missing"),
    (lambda d: d["table"].update(size=[0.8]), "table.size", "list of 2"),
    (lambda d: d["objects"][0].update(start=[0.39, 0.0, 0.0]), "objects[0].start", "off the table"),
    (lambda d: d["objects"][0].update(start=[-0.02, 0.0, 0.0]), "obstacles[0].pose", "overlaps"),
    (lambda d: d["pusher"].update(start=[-0.25, 0.0]), "pusher.start", "overlaps"),
    (lambda d: d["goal"].update(object="nope"), "goal.object", "not one of the objects"),
    (lambda d: d["obstacles"][0].update(name="slider"), "obstacles[0].name", "duplicate"),
    (lambda d: d["friction"].update(object_table="high"), "friction.object_table", "must be a number"),
    (lambda d: d["objects"][0].update(size=[0.1, 0.1, 0.1]), "objects[0].size", "radius"),
])
def test_validation_names_file_and_field(change, field, words):
    with pytest.raises(SceneError) as e:
        scene_from_dict(mutate(change), source="bad_scene.yaml")
    msg = str(e.value)
    assert msg.startswith("bad_scene.yaml: ") and field in msg and words in msg, msg


def test_bad_file_errors(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("table: [unclosed")
    with pytest.raises(SceneError, match=r"broken.yaml: not valid YAML"):
        load_scene(p)
    with pytest.raises(SceneError, match="no such scene file"):
        load_scene("does_not_exist")
    # what the file system refuses is a SceneError too (a node answers it instead of raising in its callback)
    with pytest.raises(SceneError, match=r"x{200}\.\.\.: cannot read the scene file: File name too long"):
        load_scene("x" * 5000)
    with pytest.raises(SceneError, match="/proc/self/mem: cannot read the scene file"):
        load_scene("/proc/self/mem")


def test_state_layout_views_and_compose():
    L = StateLayout(2)
    x = L.compose([1.0, 2.0], [[3, 4, 5], [6, 7, 8]], pusher_vel=[9, 10], object_vels=[[11, 12, 13], [14, 15, 16]])
    assert x.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert L.object_poses(x)[1].tolist() == [6, 7, 8] and L.pusher_vel(x).tolist() == [9, 10]
    batch = np.stack([x, x + 1])
    L.object_poses(batch)[:, 0, 2] = 0.0  # views write through
    assert batch[:, 4].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="expected last dimension 16"):
        L.check(np.zeros(10))
    with pytest.raises(ValueError, match="NaN"):
        L.check(np.full(16, np.nan))


def box_scene_with_pusher_at(x):
    d = yaml.safe_load((scenes_dir() / "box_slider.yaml").read_text())
    d["pusher"]["start"] = [x, 0.0]
    return d


@pytest.mark.parametrize("depth, shown", [(0.25e-3, "0.25 mm"), (0.01e-3, "10.0 um"), (1.9e-3, "1.90 mm")])
def test_measured_start_overlaps_within_tolerance_are_projected_with_a_warning(depth, shown):
    """Issue 15: a recorded pusher a little inside the box (mocap noise) is a valid start: the box is moved out
    along the contact normal, the pusher stays, and the warning names the depth."""
    from parapush_ros.core.scene.geometry import disc_penetration
    from parapush_ros.core.scene.spec import StartOverlapWarning
    touching_x = -0.109 / 2 - 0.0145
    with pytest.warns(StartOverlapWarning, match=f"pusher.start: pusher overlaps objects\\[0\\] 'box' by {shown}"):
        scene = scene_from_dict(box_scene_with_pusher_at(touching_x + depth), source="measured.yaml")
    assert scene.pusher.start == (pytest.approx(touching_x + depth), 0.0)
    assert scene.objects[0].pose == pytest.approx((depth, 0.0, 0.0), abs=1e-9)
    left, _ = disc_penetration(np.array(scene.pusher.start), 0.0145, scene.objects[0].footprint,
                               np.array(scene.objects[0].pose))
    assert abs(left) < 1e-9


def test_measured_start_overlaps_beyond_tolerance_are_an_error():
    from parapush_ros.core.scene.spec import START_OVERLAP_TOLERANCE
    assert START_OVERLAP_TOLERANCE >= 1e-3
    with pytest.raises(SceneError, match=r"measured.yaml: pusher.start: pusher overlaps objects\[0\] 'box' by "
                                         r"3.00 mm \(more than the 2.00 mm"):
        scene_from_dict(box_scene_with_pusher_at(-0.109 / 2 - 0.0145 + 3e-3), source="measured.yaml")


@pytest.mark.parametrize("gap, says", [(0.5e-3, r"within the 1.00 mm contact tolerance of 'obstacle' \(0.50 mm apart"),
                                       (-0.5e-3, r"'obstacle' overlaps objects\[0\] 'slider' by 0.50 mm")])
def test_a_start_within_the_contact_tolerance_of_an_obstacle_is_projected_out_to_it(gap, says):
    """The outcome monitor counts outlines closer than 1 mm as a hit: such a start (a measured overlap projected
    out to touching, or a measured gap under 1 mm) was judged HIT_OBSTACLE before any push. The object is moved out
    to the contact tolerance, with the warning of a measured start; the pusher, which is not moved, is an error."""
    from parapush_ros.core.scene.queries import TOUCH_DISTANCE, obstacle_clearance
    from parapush_ros.core.scene.spec import StartOverlapWarning
    d = yaml.safe_load((scenes_dir() / "obstacle_push.yaml").read_text())
    scene = scene_from_dict(d)
    ob, obj = scene.obstacles[0], scene.objects[0]
    x = ob.pose[0] - ob.size[0] / 2 - obj.size[0] / 2 - gap  # the slider on the obstacle's left, on its axis
    d["objects"][0]["start"] = [x, ob.pose[1], 0.0]
    d["pusher"]["start"] = [x - obj.size[0] / 2 - scene.pusher.radius - 0.01, ob.pose[1]]
    with pytest.warns(StartOverlapWarning, match=says):
        moved = scene_from_dict(d)
    assert TOUCH_DISTANCE <= obstacle_clearance(moved, moved.initial_state())[0][0] < TOUCH_DISTANCE + 1e-6
    d = yaml.safe_load((scenes_dir() / "obstacle_push.yaml").read_text())
    d["pusher"]["start"] = [ob.pose[0] - ob.size[0] / 2 - scene.pusher.radius - 0.0005, ob.pose[1]]
    with pytest.raises(SceneError, match=r"pusher\.start: the pusher starts 0.50 mm from obstacles\[0\] 'obstacle', "
                                         r"within the 1.00 mm contact tolerance"):
        scene_from_dict(d)


def test_a_goal_inside_an_obstacle_is_refused():
    from parapush_ros.core.planning.tasks import goal_for
    d = yaml.safe_load((scenes_dir() / "obstacle_push.yaml").read_text())
    scene = scene_from_dict(d)
    centre = list(scene.obstacles[0].pose[:2])
    with pytest.raises(ValueError, match=r"goal position \[.*\] lies inside obstacle 'obstacle'"):
        goal_for(scene, "slider", centre, 0.05)
    d["goal"]["position"] = centre
    with pytest.raises(SceneError, match=r"goal\.position: \[.*\] lies inside obstacles\[0\] 'obstacle'"):
        scene_from_dict(d)


def test_objects_overlapping_a_little_are_separated_half_each():
    from parapush_ros.core.scene.spec import StartOverlapWarning
    d = yaml.safe_load((scenes_dir() / "four_cylinders.yaml").read_text())
    d["objects"][1]["start"] = [-0.2, 2 * 0.05115 - 0.5e-3, 0.0]  # 0.5 mm into the target
    with pytest.warns(StartOverlapWarning, match=r"objects\[1\].start: 'cylinder_1' overlaps objects\[0\] "
                                                 r"'target' by 0.50 mm"):
        scene = scene_from_dict(d, source="measured.yaml")
    assert scene.objects[0].pose[1] == pytest.approx(-0.25e-3, abs=1e-9)
    assert scene.objects[1].pose[1] == pytest.approx(2 * 0.05115 - 0.25e-3, abs=1e-9)


def test_a_changed_scene_is_revalidated_naming_its_source():
    """``with_poses`` does not validate; ``revalidated`` does, like a file, with top-level changes and an edit."""
    base = load_scene("obstacle_push")
    moved = base.with_poses(pusher_start=(5.0, 0.0))  # off the table: accepted unchecked
    with pytest.raises(SceneError, match="my change"):
        moved.revalidated("my change")
    renamed = base.revalidated("renamed", name="other")
    assert renamed.name == "other" and renamed.objects == base.objects

    def heavier(data):
        data["objects"][0]["mass"] *= 2.0
    assert base.revalidated("heavier", heavier).objects[0].mass == pytest.approx(2.0 * base.objects[0].mass)


def test_the_pusher_inside_an_obstacle_is_the_deepest_penetration_it_is():
    """A measured pusher 10 mm inside the obstacle is a calibration error to report (it read as feasible)."""
    from parapush_ros.core.scene.projection import deepest_penetration
    scene = load_scene("obstacle_push")
    x = scene.initial_state()
    ob = scene.obstacles[0]
    scene.layout.pusher_pos(x)[:] = [ob.pose[0] - ob.size[0] / 2 - scene.pusher.radius + 0.01, ob.pose[1]]
    depth, what = deepest_penetration(scene, x)
    assert depth == pytest.approx(0.01) and what == "the pusher inside obstacle 'obstacle'"
