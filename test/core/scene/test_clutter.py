"""Clutter scenes of paper 001's multi-object task: the shipped one and the seeded generator obey the rules."""
import numpy as np
import pytest

from parapush_ros.core.scene.clutter import EDGE_CLEARANCE, GOAL_CLEARANCE, MIN_GAP, clutter_scene, clutter_scenes
from parapush_ros.core.models.learned import check_family, family_metadata
from parapush_ros.core.scene.spec import load_scene, scene_from_dict

PAPER_RADIUS = 0.0512  # m, paper 001's cylinders


def cross(a, b):
    return a[0] * b[1] - a[1] * b[0]


def check_clutter(scene, min_gap=MIN_GAP, edge=EDGE_CLEARANCE, goal_clearance=GOAL_CLEARANCE):
    """Every rule of a clutter scene, checked from the scene itself."""
    assert len(scene.objects) == 4 and all(o.shape == "cylinder" for o in scene.objects)
    assert all(o.radius == pytest.approx(PAPER_RADIUS, abs=1e-4) for o in scene.objects)
    check_family(scene, family_metadata())  # every model applies, the learned one included
    t = scene.object_index(scene.goal.object)
    centres = np.array([o.pose[:2] for o in scene.objects])
    radii = np.array([o.radius for o in scene.objects])
    assert np.all(np.abs(centres) <= scene.table.half - edge + 1e-9)  # on the table, away from its edges
    discs = [(np.array(scene.pusher.start), scene.pusher.radius)] + list(zip(centres, radii))
    for a in range(len(discs)):
        for b in range(a + 1, len(discs)):
            if (a, b) == (0, t + 1):
                continue  # the pusher starts just behind the target (checked below)
            gap = np.linalg.norm(discs[a][0] - discs[b][0]) - discs[a][1] - discs[b][1]
            assert gap >= min_gap - 1e-9, (scene.name, a, b, gap)
    goal = np.array(scene.goal.position)
    for i in range(4):
        if i != t:
            assert np.linalg.norm(centres[i] - goal) - radii[i] - scene.goal.radius >= goal_clearance - 1e-9
    assert centres[t][0] < 0.0 < goal[0]  # target on the left, goal on the right
    # the pusher sits right behind the target, pointing at the goal
    d = (goal - centres[t]) / np.linalg.norm(goal - centres[t])
    behind = centres[t] - np.array(scene.pusher.start)
    assert 0.0 < np.linalg.norm(behind) - radii[t] - scene.pusher.radius < 0.005
    assert np.dot(behind, d) / np.linalg.norm(behind) > 0.999
    return t, centres, goal


def test_shipped_clutter_scene():
    scene = load_scene("clutter_push")
    t, centres, goal = check_clutter(scene, min_gap=0.002)
    assert scene.objects[t].name == "target" and scene.goal.radius == pytest.approx(0.05)
    # one other cylinder stands on the straight push from target to goal
    d = (goal - centres[t]) / np.linalg.norm(goal - centres[t])
    off = [abs(cross(d, c - centres[t])) for i, c in enumerate(centres) if i != t]
    assert min(off) < 2 * scene.objects[t].radius
    again = scene_from_dict(scene.to_dict(), source="roundtrip")
    assert again.objects == scene.objects and again.goal == scene.goal


def test_generator_is_seeded_valid_and_cluttered():
    scenes = clutter_scenes(40, seed=3)
    assert [s.to_dict() for s in scenes[5:8]] == [s.to_dict() for s in clutter_scenes(3, seed=3, first=5)]
    assert clutter_scene(0, 4).to_dict() != scenes[0].to_dict()
    blocked = 0
    for s in scenes:
        t, centres, goal = check_clutter(s)
        assert s.name.startswith("clutter_3_")
        d = (goal - centres[t]) / np.linalg.norm(goal - centres[t])
        rel = [c - centres[t] for i, c in enumerate(centres) if i != t]
        along = np.array([np.dot(d, r) for r in rel]) / np.linalg.norm(goal - centres[t])
        off = np.array([abs(cross(d, r)) for r in rel])
        # the first other object is between target and goal, near the straight push
        assert 0.35 < along[0] < 0.65 and off[0] < 2 * s.objects[t].radius
        blocked += off[0] < 2 * s.objects[t].radius - 0.03  # the straight push clearly hits it
    assert blocked >= 20  # most scenes need a detour or a nudge
    # a scene that goes through the loader validates: the generator's output is a scene file's content
    assert scene_from_dict(scenes[0].to_dict(), source="x").objects == scenes[0].objects
