"""``parapush soak``: the whole simulated stack for 2 minutes under random goals, cancels, pre-emptions, mocap
dropouts and blackouts, e-stops, sim resets and hostile requests on every service, action and input topic; and the
rule that judges unsafe commands. Assertions are on counts and sim-time quantities, never on wall time."""
import json
import math

import pytest

from parapush_ros import bringup
from parapush_ros.tools.soak import GOAL_TAGS, StateTimeline, make_schedule

DELIVERY = 0.1  # s of sim time a message may take from one node to the next: a hop is served within a /clock
# period or two; one mujoco_sim loop tick advances the clock by at most 4 nominal ticks (20 ms at 1x), so 0.1 s is
# five late ticks of the sim in a row while the receiving node's thread never ran


def test_state_timeline_judges_stale_and_invalid_states():
    tl = StateTimeline(state_timeout=0.5)
    assert tl.bad_since(1.0) == -math.inf  # nothing received yet: never usable
    tl.add(1.00, True)
    tl.add(1.02, True)
    assert tl.bad_since(1.10) is None
    assert tl.bad_since(1.60) == pytest.approx(1.52)  # stale: state_timeout after the last reception
    tl.add(1.04, False)  # an invalid state (tracking lost, NaN, wrong objects)
    assert tl.bad_since(1.03) is None and tl.bad_since(1.05) == 1.04
    tl.add(1.06, False)
    assert tl.bad_since(1.07) == 1.04  # bad since the first invalid one
    tl.add(1.08, True)
    assert tl.bad_since(1.07) == 1.04 and tl.bad_since(1.09) is None
    # the verdict on a command at t: unusable throughout [t - allowance, t + skew]
    assert tl.unusable_for(1.07) == pytest.approx(0.03)
    assert tl.unusable_for(1.07, skew=0.02) is None  # usable again within the delivery skew: not judged
    assert tl.unusable_for(1.03, skew=0.005) is None and tl.unusable_for(1.10) is None
    assert tl.unusable_for(1.70) == pytest.approx(1.70 - 1.58)  # stale again
    # a usable state measured at 1.75 that reached the monitor only at 1.85 (the planner may have had it at once):
    # a command at 1.80 may rest on it, one at 1.74 may not
    tl.add(1.85, True, stamp=1.75)
    assert tl.unusable_for(1.80) is None and tl.unusable_for(1.74) == pytest.approx(1.74 - 1.58)
    assert tl.bad_since(1.86) is None and tl.bad_since(1.85 + 0.5 + 1e-6) == pytest.approx(2.35)  # stale from r


def test_schedule_is_deterministic_given_the_seed_and_covers_every_kind_early():
    args = (["pusher", "cylinder"], ["req_a", "req_b", "msg_c"], ["goal_nan", "goal_off_table"])
    events, coverage = make_schedule(0, 60.0, *args)
    assert (events, coverage) == make_schedule(0, 60.0, *args)
    assert events != make_schedule(1, 60.0, *args)[0]
    assert events == sorted(events, key=lambda e: e.t) and events[-1].t < 60.0 + 30.0
    early = [e for e in events if e.t <= coverage]
    assert {e.args["tag"] for e in early if e.kind == "goal"} >= set(GOAL_TAGS)
    assert {e.args["name"] for e in early if e.kind == "hostile"} == set(args[1]) | set(args[2])
    assert {e.args["variant"] for e in early if e.kind == "hide"} == {"dropout", "blackout"}
    assert {e.args.get("reload") for e in early if e.kind == "sim_reset"} == {True, False}
    for kind in ("estop", "estop_reset", "cancel", "health"):
        assert any(e.kind == kind for e in early), kind
    for e in events:
        if e.kind == "hide":
            assert 0.05 <= e.args["duration"] <= 2.0 and e.args["bodies"]
    # a short horizon still holds every kind once, and no stream runs dry before the coverage end
    short, short_coverage = make_schedule(0, 1.0, *args)
    assert short_coverage > 1.0 and {e.args["name"] for e in short if e.kind == "hostile"} >= set(args[1])
    longer = make_schedule(0, 200.0, *args)[0]
    assert [e for e in short if e.t < short_coverage] == [e for e in longer if e.t < short_coverage]
    hostile_times = [e.t for e in short if e.kind == "hostile" and e.args["name"] in args[1]]
    assert short_coverage - max(hostile_times) < 2.0


@pytest.mark.timeout(400)
def test_two_minute_soak(ros_context, tmp_path):
    from parapush_ros.tools import soak
    from parapush_ros.cli import build_parser

    args = build_parser().parse_args(["soak", "--minutes", "2", "--seed", "0", "--out", str(tmp_path)])
    summary = soak.run(args, context=ros_context)  # SystemExit names the failed criteria
    s = json.loads((tmp_path / "soak.json").read_text())
    assert s["seed"] == 0 and s["goals"] == summary["goals"] and (tmp_path / "soak.png").stat().st_size > 1000
    assert not (tmp_path / "seeds_study").exists()  # one seed, without --seeds: no study, as before

    assert s["unsafe_commands"] == 0 and s["unsafe_outputs"] == 0, s["unsafe_details"]
    assert s["estop_leaks"] == 0 and s["nonfinite_outputs"] == 0 and s["nonfinite_from_planner"] == 0
    assert s["stops_without_zero"] == 0, s["stop_events"]
    assert s["exceptions"] == 0, s["exception_details"]
    assert not s["problems"], s["problems"]
    assert s["commands"]["nonzero"] > 100 and s["outputs"]["nonzero"] > 100  # the monitor saw real pushing

    h = s["hostile_requests"]
    assert h["kinds"] == h["kinds_in_catalogue"] >= 30, h  # every service and action got each of its kinds
    assert h["refused"] == h["count"], h["not_refused"]
    assert s["hostile_messages"]["count"] >= 10
    assert s["health_checks"]["sent"] >= 5 and s["health_checks"]["ok"] == s["health_checks"]["sent"]

    # Every goal ends with a result, and the outcomes the schedule forces (a cancel, a one-action budget) are there.
    # Whether a plain goal is reached is not asserted: the planner runs in real time (the product's setting), so on
    # a starved host its plans come later in sim time and pushes stall short of the goal (measured under `make
    # test-stress`: no goal reached, everything else the same). Reaching goals is checked where the world runs in
    # lock-step with the planner (test_mpc_planner_node, test_session); the soak judges safety under faults.
    assert {"aborted", "timeout"} <= set(s["goals"]), s["goals"]
    assert "unfinished" not in s["goals"] and not any(k.startswith("code ") for k in s["goals"]), s["goals"]
    for kind in ("dropout", "blackout", "estop", "estop_again", "estop_reset", "reset_without_estop", "sim_reset",
                 "sim_reload", "cancel", "goal_preempting", "goal_goal_pose"):
        assert s["events"].get(kind, 0) >= 1, (kind, s["events"])

    # stop times, bounded by the commander's parameters: a planner zero (a cancel, the end of a push) is noticed
    # at once and ramped down at max_acceleration from at most max_speed, plus a period of each node and the
    # delivery of the messages; an e-stop zeroes the output inside the service call, so its zero is out by the
    # time the answer is (plus a period and the delivery of the zero). Both are timed from the answer (a cancel's:
    # the planner sends its zero before it accepts; a push's end is timed from its result): how long a call takes
    # is the host's, on the simulated clock that runs at real time here the wall time until the node's executor
    # serves it (a bound from the request failed a quiet run: an e-stop zero 0.125 s after it against 0.12 s)
    com = bringup.node_parameters(bringup.spec("velocity_commander"), "sim", {})
    control_rate = bringup.node_parameters(bringup.spec("mpc_planner"), "sim", {})["control_rate"]
    ramp_bound = com["max_speed"] / com["max_acceleration"] + 2.0 / com["rate"] + 1.0 / control_rate + 2 * DELIVERY
    stops = s["stop_events"]["by_kind"]
    assert stops["estop"]["timed"] >= 1, stops
    assert stops["cancel"]["timed"] + stops["goal_end"]["timed"] >= 2, stops
    bound = {"estop": 1.0 / com["rate"] + DELIVERY, "cancel": ramp_bound, "goal_end": ramp_bound}
    for e in s["stop_events"]["list"]:
        if "stop_time_s" in e:
            assert e["stop_time_s"] - e.get("answer_s", 0.0) <= bound[e["kind"]], e
    assert s["max_stop_time_s"] > 0.0, stops

    assert s["rss_growth_mb"] < 100.0, s["rss_samples"]
