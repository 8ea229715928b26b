"""The velocity commander's safety layer without ROS: watchdog, e-stop, limits, workspace clamping, mapping."""
import math

import numpy as np
import pytest

from parapush_ros.core.robot.command_safety import (
    STEP_INTERVAL_JITTER,
    CommandSafety,
    SafetyConfig,
    SafetyConfigError,
    Workspace,
    joint_matrix,
    rotate_planar,
)
from parapush_ros.core.scene.geometry import Footprint
from parapush_ros.core.scene.spec import load_scene

PERIOD = 0.01


def make(**kw):
    cfg = SafetyConfig(**{"max_speed": 0.1, "max_acceleration": 100.0, "command_timeout": 0.2, "state_timeout": 0.2,
                          "workspace_margin": 0.01, "braking_horizon": 0.2,
                          "follow_fraction": 0.0,  # (a pusher held still by run(): the follow check's own tests set it)
                          **kw})
    ws = Workspace((0.4, 0.5), 0.0145, [("obstacle", Footprint("cylinder", radius=0.04), (0.0, 0.0, 0.0))])
    s = CommandSafety(cfg, ws, output_period=PERIOD)
    s.step(-PERIOD)  # a first period has passed (the acceleration limit needs elapsed time)
    return s


def run(s, t0, t1, cmd=None, pusher=(-0.2, 0.0)):
    """Step from t0 to t1 at PERIOD, feeding ``cmd`` (or nothing) and the pusher state every step."""
    outs = []
    for t in np.arange(t0, t1, PERIOD):
        if pusher is not None:
            s.pusher_state(t, *pusher, True)
        if cmd is not None:
            s.command(t, *cmd)
        outs.append((t, s.step(t)))
    return outs


def test_passes_a_safe_command_and_waits_for_the_first():
    s = make()
    out = s.step(0.0)
    assert out.zero and out.status == "waiting for command"
    (_, out), = run(s, 0.01, 0.015, cmd=(0.03, 0.01))
    assert (out.vx, out.vy, out.status) == (0.03, 0.01, "ok")


def test_watchdog_sends_zeros_within_one_period_and_keeps_sending_them():
    s = make()
    run(s, 0.0, 0.5, cmd=(0.05, 0.0))
    last_cmd = 0.49
    outs = run(s, 0.5, 1.5)  # the planner went silent
    for t, o in outs:
        if t - last_cmd > 0.2 + PERIOD:  # one period after the timeout at the latest
            assert o.zero and o.status == "watchdog" and "no command" in o.detail
    assert sum(o.zero for _, o in outs) >= len(outs) - 22  # zeros on every period once timed out
    # a fresh command resumes motion
    (_, o), = run(s, 1.5, 1.505, cmd=(0.05, 0.0))
    assert o.vx == 0.05


def test_silence_after_a_zero_command_is_idle_not_a_fault():
    s = make()
    run(s, 0.0, 0.5, cmd=(0.05, 0.0))
    run(s, 0.5, 0.7, cmd=(0.0, 0.0))  # the planner stops the pusher (ramped down to zero) ...
    outs = run(s, 0.7, 1.2)  # ... and goes quiet
    assert all(o.zero for _, o in outs)
    assert outs[-1][1].status == "idle" and "last command was zero" in outs[-1][1].detail
    # silence while the output is still ramping down from a non-zero command is the watchdog's
    s = make()
    run(s, 0.0, 0.5, cmd=(0.05, 0.0))
    outs = run(s, 0.5, 1.0)
    assert outs[-1][1].status == "watchdog"


def test_estop_latches_until_reset_and_reset_needs_a_new_command():
    s = make()
    run(s, 0.0, 0.1, cmd=(0.05, 0.0))
    s.estop("operator")
    for _, o in run(s, 0.1, 0.5, cmd=(0.05, 0.0)):  # commands keep arriving: still zeros
        assert o.zero and o.status == "estop" and o.detail == "operator"
    s.reset()
    (_, o), = run(s, 0.5, 0.505)  # the pre-reset command is gone
    assert o.zero and o.status == "waiting for command"
    (_, o), = run(s, 0.51, 0.515, cmd=(0.05, 0.0))
    assert o.vx == 0.05 and not s.estopped


def test_speed_limit_keeps_direction():
    s = make(max_speed=0.1)
    (_, o), = run(s, 0.0, 0.005, cmd=(0.3, 0.4))
    assert math.hypot(o.vx, o.vy) == pytest.approx(0.1)
    assert o.vy / o.vx == pytest.approx(0.4 / 0.3)
    assert o.status == "limited" and "speed" in o.detail


def test_acceleration_limit_ramps_the_output():
    s = make(max_acceleration=1.0)
    outs = run(s, 0.0, 0.2, cmd=(0.1, 0.0))
    v = [o.vx for _, o in outs]
    assert v[0] == pytest.approx(1.0 * PERIOD)
    assert np.all(np.diff(v) <= 1.0 * PERIOD + 1e-12)
    assert v[-1] == pytest.approx(0.1)
    assert "acceleration" in outs[3][1].detail


def test_a_lowered_max_speed_holds_at_once_while_moving():
    """A parameter set that halves ``max_speed`` mid-push: the next output is within the new limit (braking is not
    held back by the acceleration limit, which bounds speeding up and smooth stops), the direction kept."""
    import dataclasses

    s = make(max_acceleration=0.5)
    outs = run(s, 0.0, 0.5, cmd=(0.06, 0.08))
    assert math.hypot(outs[-1][1].vx, outs[-1][1].vy) == pytest.approx(0.1)
    s.cfg = dataclasses.replace(s.cfg, max_speed=0.05)  # what velocity_commander does on a parameter set
    outs = run(s, 0.5, 0.6, cmd=(0.06, 0.08))
    speeds = [math.hypot(o.vx, o.vy) for _, o in outs]
    assert max(speeds) <= 0.05 + 1e-12 and speeds[0] == pytest.approx(0.05)
    assert outs[0][1].vy / outs[0][1].vx == pytest.approx(0.08 / 0.06)


@pytest.mark.parametrize("pusher, cmd, expect", [
    ((0.4 - 0.0145 - 0.005, 0.0), (0.05, 0.02), (0.0, 0.02)),  # inside the margin of +x: vx removed, vy kept
    ((0.4 - 0.0145 - 0.005, 0.0), (-0.05, 0.0), (-0.05, 0.0)),  # moving away from the edge is fine
    ((0.0, -0.5 + 0.0145 + 0.001), (0.01, -0.05), (0.01, 0.0)),  # -y edge
    ((-0.04 - 0.0145 - 0.005, 0.0), (0.05, 0.0), (0.0, 0.0)),  # touching the obstacle margin, moving into it
    ((-0.04 - 0.0145 - 0.005, 0.0), (0.0, 0.05), (0.0, 0.05)),  # sliding along the obstacle is allowed
    ((0.5, 0.0), (0.05, 0.0), (0.0, 0.0)),  # already off the table: never further out
    ((0.5, 0.0), (-0.05, 0.0), (-0.05, 0.0)),  # ... but it may come back
])
def test_workspace_clamps_components_toward_boundaries(pusher, cmd, expect):
    s = make()
    (_, o), = run(s, 0.0, 0.005, cmd=cmd, pusher=pusher)
    assert (o.vx, o.vy) == pytest.approx(expect, abs=1e-12)
    if expect != cmd:
        assert "workspace" in o.detail


def test_braking_zone_limits_speed_toward_an_edge_in_proportion_to_clearance():
    s = make(workspace_margin=0.01, braking_horizon=0.2)
    clearance = 0.02  # m from the +x edge (pusher disc edge to table edge)
    (_, o), = run(s, 0.0, 0.005, cmd=(0.1, 0.0), pusher=(0.4 - 0.0145 - clearance, 0.0))
    assert o.vx == pytest.approx((clearance - 0.01) / 0.2)


def test_closed_loop_never_leaves_the_table_or_enters_the_obstacle():
    s = make(max_acceleration=2.0)
    ws = s.workspace
    for start, cmd in [((-0.2, 0.0), (0.1, 0.0)), ((0.0, 0.3), (0.07, 0.07)), ((0.1, -0.1), (-0.1, 0.1)),
                       ((-0.3, -0.4), (-0.05, -0.1))]:
        p = np.array(start, dtype=float)
        s.reset()
        for k in range(1000):  # 10 s of integrating the output
            t = k * PERIOD
            s.pusher_state(t, p[0], p[1], True)
            s.command(t, *cmd)
            o = s.step(t)
            p += PERIOD * np.array([o.vx, o.vy])
            assert min(c for _, c, _ in ws.boundaries(p)) > 0.0, (start, cmd, p)


def test_missing_invalid_or_stale_pusher_state_gives_zeros():
    s = make()
    s.command(0.0, 0.05, 0.0)
    o = s.step(0.0)
    assert o.zero and o.status == "no pusher state"
    s.pusher_state(0.0, 0.0, 0.3, True)
    s.command(0.05, 0.05, 0.0)
    assert s.step(0.05).vx > 0.0
    s.command(0.3, 0.05, 0.0)
    o = s.step(0.3)  # the state is 0.3 s old
    assert o.zero and "old" in o.detail
    s.pusher_state(0.31, 0.0, 0.3, False)  # tracking lost
    s.command(0.31, 0.05, 0.0)
    assert s.step(0.31).status == "no pusher state"
    # without workspace enforcement the state is not needed
    free = CommandSafety(SafetyConfig(enforce_workspace=False, max_acceleration=100.0), output_period=PERIOD)
    free.command(0.0, 0.05, 0.0)
    free.step(0.0)
    assert free.step(0.01).vx == 0.05


def test_non_finite_commands_are_rejected():
    s = make()
    assert "non-finite" in s.command(0.0, float("nan"), 0.0)
    assert s.step(0.0).status == "waiting for command"


def test_config_errors_name_the_parameter():
    with pytest.raises(SafetyConfigError, match="max_speed"):
        SafetyConfig(max_speed=0.0)
    with pytest.raises(SafetyConfigError, match="workspace_margin"):
        SafetyConfig(workspace_margin=-1.0)
    with pytest.raises(SafetyConfigError, match="enforce_workspace"):
        CommandSafety(SafetyConfig(), output_period=PERIOD)
    with pytest.raises(SafetyConfigError, match="output_period: must be > 0"):
        CommandSafety(SafetyConfig(enforce_workspace=False), output_period=0.0)
    with pytest.raises(SafetyConfigError, match="singular"):
        joint_matrix([1.0, 1.0, 1.0, 1.0])
    with pytest.raises(SafetyConfigError, match="4 finite numbers"):
        joint_matrix([1.0, 0.0])


def test_output_mappings():
    np.testing.assert_allclose(rotate_planar([1.0, 0.0], math.pi / 2), [0.0, 1.0], atol=1e-12)
    m = joint_matrix([0.0, 1.0, -1.0, 0.0])  # joint 0 moves along table y, joint 1 along table -x
    np.testing.assert_allclose(m @ [0.02, 0.03], [0.03, -0.02])


def test_workspace_from_scene():
    scene = load_scene("obstacle_push")
    ws = Workspace.from_scene(scene)
    names = [n for n, _, _ in ws.boundaries(np.array(scene.pusher.start))]
    assert "obstacle 'obstacle'" in names and len(names) == 5


@pytest.mark.parametrize("fault", ["invalid state", "stale state", "e-stop"])
def test_pusher_stops_within_stop_travel_bound(fault):
    """The stated bound, checked in simulated time on the real MuJoCo pusher (servo included): a planner at 20 Hz
    pushes at max_speed; at t_bad the scene state goes invalid (the planner zeros on its next tick), stops coming
    (stale: the planner zeros once it is ``state_timeout`` old), or the e-stop is called (zeros at once). The
    commander (CommandSafety at 50 Hz, max_acceleration 0.5) drives SimWorld; the pusher moves along y, clear of
    the slider."""
    from parapush_ros.core.robot.command_safety import stop_travel_bound
    from parapush_ros.core.models.mjcf import PUSHER_BANDWIDTH_HZ, TIMESTEP
    from parapush_ros.core.sim.world import SimWorld

    planner_period, commander_period, state_timeout, speed, decel = 0.05, 0.02, 0.5, 0.1, 0.5
    sim = SimWorld(load_scene("cylinder_slider"))
    safety = CommandSafety(SafetyConfig(max_speed=speed, max_acceleration=decel, command_timeout=0.2,
                                        state_timeout=0.2, enforce_workspace=False), output_period=commander_period)
    t_bad, steps_per_ms = 1.0, round(1e-3 / TIMESTEP)
    last_good, planner_cmd, path = 0.0, (0.0, speed), []
    for k in range(int(3.0 / 1e-3)):
        t = k * 1e-3
        if k % round(planner_period / 1e-3) == 0:  # the planner's timer tick
            if fault != "stale state" or t < t_bad:
                last_good = t  # the newest valid state it has seen
            bad = (fault == "invalid state" and t >= t_bad) or (t - last_good > state_timeout)
            planner_cmd = (0.0, 0.0) if bad else (0.0, speed)
            safety.command(t, *planner_cmd)
        if fault == "e-stop" and abs(t - t_bad) < 1e-9:
            safety.estop("test")
        if k % round(commander_period / 1e-3) == 0 or (fault == "e-stop" and abs(t - t_bad) < 1e-9):
            out = safety.step(t)  # the e-stop service also sends zeros at once
            sim.set_velocity(out.vx, out.vy)
        sim.step(steps_per_ms)
        path.append((t + 1e-3, sim.planar_state()[1]))
    ys = np.array([y for t, y in path if t >= t_bad - 1e-9])
    travel = float(ys[-1] - ys[0])
    reaction = {"invalid state": planner_period, "stale state": state_timeout + planner_period, "e-stop": 0.0}[fault]
    bound = stop_travel_bound(speed=speed, reaction_time=reaction,
                              output_period=0.0 if fault == "e-stop" else commander_period,  # e-stop: zeros at once
                              deceleration=math.inf if fault == "e-stop" else decel,
                              servo_bandwidth_hz=PUSHER_BANDWIDTH_HZ)
    assert 0.0 < travel <= bound, f"{fault}: travelled {travel * 1e3:.2f} mm, bound {bound * 1e3:.2f} mm"
    assert travel >= 0.5 * bound  # and the bound is not vacuous
    assert abs(ys[-1] - ys[-200]) < 1e-5  # standing still at the end


def test_a_non_finite_table_yaw_is_refused_naming_it():
    with pytest.raises(SafetyConfigError, match="table_yaw_in_output_frame: must be finite"):
        SafetyConfig(table_yaw_in_output_frame=float("nan"))


def test_a_clock_that_jumps_back_stops_and_says_why():
    """A /clock restart or an NTP step back: the command held was measured on the old timeline, so it is stale
    (a negative age never counts as fresh); the next period is a zero that says so, and motion resumes only on a
    command received after the jump, ramping up from rest."""
    s = make(max_acceleration=0.5)
    run(s, 0.0, 1.0, cmd=(0.05, 0.0))
    assert s.step(1.0).vx == pytest.approx(0.05)
    # the clock goes back to 0.2 s: the step sees it first (no input since)
    o = s.step(0.2)
    assert o.zero and o.status == "clock jump" and "clock jumped back 0.800 s" in o.detail
    assert s.step(0.21).status == "waiting for command"  # the old command is gone, not resumed
    # jump seen by an input first: the command received after the jump is kept, but one period is still zero
    run(s, 0.22, 0.5, cmd=(0.05, 0.0))
    s.pusher_state(0.1, -0.2, 0.0, True)
    s.command(0.1, 0.05, 0.0)
    o = s.step(0.1)
    assert o.zero and o.status == "clock jump" and "clock jumped back" in o.detail
    s.pusher_state(0.11, -0.2, 0.0, True)
    o = s.step(0.11)
    assert o.status == "limited" and 0.0 < o.vx <= 0.5 * 0.01 + 1e-12  # from rest, at max_acceleration


def test_a_clock_that_jumps_forward_beyond_the_timeout_is_stale_and_ramps_from_its_limit():
    s = make(max_acceleration=0.5)
    run(s, 0.0, 1.0, cmd=(0.05, 0.0))
    o = s.step(1000.0)  # the held command is now 999 s old
    assert o.zero and o.status == "watchdog" and "no command for 999.0" in o.detail
    # a fresh command after a long gap: the velocity step is what one (late) period allows, not the gap's worth
    s = make(max_acceleration=0.5)
    run(s, 0.0, 0.1, cmd=(0.0, 0.0))
    s.pusher_state(50.0, -0.2, 0.0, True)
    s.command(50.0, 0.1, 0.0)
    assert s.step(50.0).vx == pytest.approx(0.5 * STEP_INTERVAL_JITTER * PERIOD)


def test_a_late_period_buys_no_larger_speed_up_than_a_punctual_one():
    """The arm holds the last output until the next one: a tick 150 ms late (a starved host) may speed the
    output up by at most what ``STEP_INTERVAL_JITTER`` periods of acceleration allow, not by 150 ms' worth."""
    s = make(max_acceleration=0.5)
    run(s, 0.0, 0.02, cmd=(0.0, 0.0))
    s.pusher_state(0.02, -0.2, 0.0, True)
    s.command(0.02, 0.1, 0.0)
    first = s.step(0.02).vx
    assert first == pytest.approx(0.5 * PERIOD)  # punctual: one period of acceleration
    s.pusher_state(0.17, -0.2, 0.0, True)
    s.command(0.17, 0.1, 0.0)
    late = s.step(0.17).vx  # 150 ms after the last output
    assert late - first == pytest.approx(0.5 * STEP_INTERVAL_JITTER * PERIOD)
    # slowing down counts the time in full: a late period does not stretch a stop beyond the stated ramp
    assert run(s, 0.18, 0.5, cmd=(0.1, 0.0))[-1][1].vx == pytest.approx(0.1)
    s.pusher_state(0.64, -0.2, 0.0, True)
    s.command(0.64, 0.0, 0.0)
    assert s.step(0.64).vx == pytest.approx(0.1 - 0.5 * 0.15)  # 150 ms after the last output


@pytest.mark.parametrize("cmd", [(-0.024, 0.0), (0.0, 0.024)], ids=["reversal", "turn"])
def test_a_late_period_reverses_or_turns_no_faster_than_it_speeds_up(cmd):
    """A slower command in another direction is not slowing down: 150 ms late, the output moves toward it by the
    speed-up's cap (1.5 periods of acceleration), not by 150 ms' worth (a 0.05 m/s flip in one message)."""
    s = make(max_acceleration=0.5)
    assert run(s, 0.0, 0.5, cmd=(0.025, 0.0))[-1][1].vx == pytest.approx(0.025)
    s.pusher_state(0.64, -0.2, 0.0, True)
    s.command(0.64, *cmd)
    o = s.step(0.64)
    assert math.hypot(o.vx - 0.025, o.vy) == pytest.approx(0.5 * STEP_INTERVAL_JITTER * PERIOD)


@pytest.mark.parametrize("reason", ["waiting for grasp", "waiting for servo settings"])
def test_an_output_held_at_zero_outside_the_layer_ramps_the_next_command_from_rest(reason):
    """The commander sends zero while the gripper closes or Servo's units are unknown, with the planner's command
    arriving all along: once the hold ends the output ramps up from rest at max_acceleration, as the arm was sent
    zeros (not from where a limiter ramping in the background would be)."""
    s = make(max_acceleration=0.5)
    for t in np.arange(0.0, 0.6, PERIOD):
        s.pusher_state(t, -0.2, 0.0, True)
        s.command(t, 0.1, 0.0)
        o = s.step(t, hold=(reason, "test"))
        assert o.zero and o.status == reason and o.detail == "test"
    s.pusher_state(0.6, -0.2, 0.0, True)
    s.command(0.6, 0.1, 0.0)
    o = s.step(0.6)
    assert o.status == "limited" and o.vx == pytest.approx(0.5 * PERIOD)
    s.estop("test")
    assert s.step(0.61, hold=(reason, "test")).status == "estop"  # an e-stop still says so first


def test_teleop_has_priority_until_its_timeout():
    s = make(teleop_timeout=0.3)
    run(s, 0.0, 0.1, cmd=(0.05, 0.0))
    s.command(0.1, 0.0, 0.02, source="teleop")
    assert s.step(0.1).vy == pytest.approx(0.02) and s.source == "teleop"
    reason = s.command(0.25, 0.05, 0.0)  # the planner, while teleop holds
    assert "teleop has priority" in reason
    s.pusher_state(0.25, -0.2, 0.0, True)
    assert s.step(0.25).vy == pytest.approx(0.02)  # still teleop's (0.15 s old, within command_timeout)
    assert s.command(0.41, 0.05, 0.0) is None  # 0.31 s after teleop's last: the planner again
    s.pusher_state(0.41, -0.2, 0.0, True)
    o = s.step(0.41)
    assert (o.vx, o.vy) == pytest.approx((0.05, 0.0)) and s.source == "planner"
    with pytest.raises(SafetyConfigError, match="teleop_timeout: must be > 0"):
        SafetyConfig(teleop_timeout=0.0)


def test_servo_linear_gain_by_command_in_type():
    from parapush_ros.core.robot.command_safety import servo_linear_gain
    assert servo_linear_gain("speed_units", None) == 1.0
    assert servo_linear_gain("unitless", 0.4) == pytest.approx(2.5)
    with pytest.raises(SafetyConfigError, match=r"scale.linear: must be > 0 .* when command_in_type is unitless"):
        servo_linear_gain("unitless", None)
    with pytest.raises(SafetyConfigError, match="command_in_type: must be one of speed_units, unitless"):
        servo_linear_gain("m/s", 1.0)


# ------------------------------------------------------------------------------------------------ follow check
def drive(s, t0, t1, cmd, arm=lambda v: v, lag=0.1, start=(-0.2, 0.0), valid=lambda t: True,
          occluded=lambda t: False, intruder=lambda t: None):
    """Command ``cmd`` (or ``cmd(t)``) from t0 to t1 while an arm moves the pusher at ``arm(output)``, ``lag``
    seconds after it was sent (a servo's and the mocap's delay); states are stamped with their measurement time (on
    a mocap clock 100 s ahead); while ``occluded`` the last measurement is repeated with its stamp (as mocap_ingest
    holds it, still valid, until its loss timeout); ``intruder(t)``: a state another publisher sends besides,
    (x, y, stamp).
    Returns the outputs."""
    p, outs, sent, held = np.array(start, dtype=float), [], [], None
    for t in np.arange(t0, t1, PERIOD):
        if occluded(t):
            held = (*p, t + 100.0) if held is None else held
            s.pusher_state(t, held[0], held[1], valid(t), measured_at=held[2])
        else:
            held = None
            s.pusher_state(t, p[0], p[1], valid(t), measured_at=t + 100.0)
        if intruder(t) is not None:
            x, y, stamp = intruder(t)
            s.pusher_state(t, x, y, True, measured_at=stamp)
        s.command(t, *(cmd(t) if callable(cmd) else cmd))
        o = s.step(t)
        outs.append((t, o))
        sent.append((t, np.array([o.vx, o.vy])))
        past = [v for ts, v in sent if ts <= t - lag]
        p += PERIOD * arm(past[-1] if past else np.zeros(2))
    return outs


def estop_time(outs):
    return next((t for t, o in outs if o.status == "estop"), None)


FOLLOW = {"follow_fraction": 0.25, "follow_window": 1.0, "follow_min_travel": 0.01, "follow_latency": 0.3,
          "enforce_workspace": False}


@pytest.mark.parametrize("arm", [lambda v: v, lambda v: 0.5 * v], ids=["follows", "follows_at_half_speed"])
def test_a_pusher_that_follows_even_sluggishly_is_not_stopped(arm):
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 6.0, (0.05, 0.02), arm=arm)
    assert estop_time(outs) is None
    assert outs[-1][1].status == "ok"


@pytest.mark.parametrize("arm, why", [
    (lambda v: 0.0 * v, "stands still (Servo halted, a protective stop)"),
    (lambda v: np.array([-v[1], v[0]]), "moves at right angles (table_yaw_in_output_frame off by 90 deg)"),
    (lambda v: -v, "moves the other way"),
    (lambda v: 0.2 * v, "moves a fifth of the way"),
], ids=["still", "at_right_angles", "backwards", "a_fifth"])
def test_a_pusher_that_does_not_follow_latches_the_estop_within_one_window(arm, why):
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 4.0, (0.05, 0.0), arm=arm)
    t_stop = estop_time(outs)
    # the way sent reaches follow_min_travel 0.3 s in (ramp at 0.5 m/s^2 to 0.05 m/s); the window of positions is
    # full 1.0 s in: the e-stop comes then, at the latest one lag allowance later (the arm may lag that much)
    assert t_stop is not None, why
    assert 1.0 - PERIOD <= t_stop <= 1.0 + FOLLOW["follow_latency"] + 2 * PERIOD, (why, t_stop)
    after = [o for t, o in outs if t >= t_stop]
    assert all(o.zero and o.status == "estop" for o in after)
    assert "does not follow" in after[0].detail and "follow_fraction 0.25" in after[0].detail and "mm sent" in \
        after[0].detail


def test_after_a_follow_estop_and_reset_a_pusher_that_moves_again_goes_on():
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 2.0, (0.05, 0.0), arm=lambda v: 0.0 * v)
    assert estop_time(outs) is not None
    s.reset()
    outs = drive(s, 2.0, 6.0, (0.05, 0.0))  # the arm's controller runs again: its window starts afresh
    assert estop_time(outs) is None and outs[-1][1].status == "ok"


@pytest.mark.parametrize("lag", [0.1, 0.2, 0.28])
@pytest.mark.parametrize("motion", ["start", "reverse", "turn", "stop_and_go", "back_and_forth"])
def test_an_arm_that_lags_within_the_allowance_is_not_stopped_however_it_is_commanded(lag, motion):
    """Servo, the controller and the mocap delay the pusher by 0.1-0.2 s on a cell. The scene state streams long
    before the push, so the window is full when it starts: an early check judged the ramp from rest after 1 cm
    ('10 mm sent, moved 2.2 mm') and a reversal, and e-stopped a working arm. Each lag up to follow_latency is
    tried, and a back and forth is not judged."""
    def cmd(t):
        if t < 2.0:
            return (0.0, 0.0)  # at rest, states streaming
        k = t - 2.0
        return {"start": (0.1, 0.0), "reverse": (0.1, 0.0) if k < 1.0 else (-0.1, 0.0),
                "turn": (0.1, 0.0) if k < 1.0 else (0.0, 0.1), "stop_and_go": (0.1, 0.0) if k % 1.0 < 0.5 else (0, 0),
                "back_and_forth": (0.1, 0.0) if int(k / 0.4) % 2 == 0 else (-0.1, 0.0)}[motion]
    s = make(**FOLLOW, max_acceleration=0.5)
    assert estop_time(drive(s, 0.0, 6.0, cmd, lag=lag)) is None


def test_a_state_from_another_publisher_stamped_later_is_never_judged():
    """A second publisher whose clock runs ahead: its state is in order when it comes, and taken for the pusher
    once the next state confirms that order; the ingest's next one, stamped earlier, contradicts it instead."""
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 6.0, (0.05, 0.0),
                 intruder=lambda t: (-0.2, 0.0, 5000.0 + t) if abs(t % 1.3) < PERIOD / 2 else None)
    assert estop_time(outs) is None


def test_slow_commands_below_the_minimum_travel_are_not_judged():
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 5.0, (0.008, 0.0), arm=lambda v: 0.0 * v)  # 8 mm per window < follow_min_travel 10 mm
    assert estop_time(outs) is None


@pytest.mark.parametrize("gaps", [lambda t: 0.8 <= t < 0.9, lambda t: int(t / PERIOD) % 7 == 3],
                         ids=["a_gap", "one_sample_in_seven"])
def test_invalid_pusher_states_neither_stop_a_following_arm_nor_hide_a_still_one(gaps):
    """The check compares the valid measurements it has: a tracking gap, or marginal tracking with a bad sample
    now and then, does not start its window again (it would never judge) nor count as the pusher standing."""
    s = make(**FOLLOW, max_acceleration=0.5)
    assert estop_time(drive(s, 0.0, 4.0, (0.05, 0.0), valid=lambda t: not gaps(t))) is None
    s = make(**FOLLOW, max_acceleration=0.5)
    t_stop = estop_time(drive(s, 0.0, 3.0, (0.05, 0.0), arm=lambda v: 0.0 * v, valid=lambda t: not gaps(t)))
    assert 1.0 - PERIOD <= t_stop <= 1.0 + FOLLOW["follow_latency"] + 2 * PERIOD


@pytest.mark.parametrize("gap", [0.3, 0.5, 2.0])
def test_a_pusher_held_by_the_mocap_while_occluded_is_not_taken_for_one_standing_still(gap):
    """mocap_ingest repeats an occluded body's last pose (valid, same stamp) until its loss timeout: the check
    compares new measurements with what was sent until the last of them, and waits while it measured too little."""
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 6.0, (0.05, 0.0), occluded=lambda t: 2.0 <= t < 2.0 + gap)
    assert estop_time(outs) is None


def test_a_state_from_another_publisher_stamped_earlier_is_not_taken_for_the_pusher_moving_back():
    """The soak's hostile scene_state (the scene's initial pusher position, stamp 0) once latched the e-stop
    ('moved -6.6 mm'): a measurement older than the last one is out of order and starts the window again."""
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 6.0, (0.05, 0.0), intruder=lambda t: (-0.2, 0.0, 0.0) if abs(t % 1.3) < PERIOD / 2 else None)
    assert estop_time(outs) is None


def test_a_still_pusher_seen_again_after_an_occlusion_is_stopped():
    s = make(**FOLLOW, max_acceleration=0.5)
    outs = drive(s, 0.0, 4.0, (0.05, 0.0), arm=lambda v: 0.0 * v, occluded=lambda t: t < 0.6)
    assert 1.0 - PERIOD <= estop_time(outs) <= 1.6 + FOLLOW["follow_latency"] + 2 * PERIOD


def test_no_follow_check_when_switched_off():
    s = make(**{**FOLLOW, "follow_fraction": 0.0}, max_acceleration=0.5)
    assert estop_time(drive(s, 0.0, 4.0, (0.05, 0.0), arm=lambda v: 0.0 * v)) is None


@pytest.mark.parametrize("field, value", [("follow_fraction", 1.0), ("follow_fraction", -0.1),
                                          ("follow_window", 0.0), ("follow_min_travel", math.nan)])
def test_a_bad_follow_setting_is_refused_naming_it(field, value):
    with pytest.raises(SafetyConfigError, match=field):
        SafetyConfig(**{field: value})


@pytest.mark.parametrize("field, value", [("follow_fraction", 0.1), ("follow_fraction", 0.0),
                                          ("follow_window", 5.0), ("follow_min_travel", 0.05)])
def test_the_follow_check_cannot_be_loosened_at_run_time(field, value):
    assert field in SafetyConfig(**{field: value}).looser_than(SafetyConfig())
    assert SafetyConfig(follow_fraction=0.5, follow_window=0.5).looser_than(SafetyConfig()) == ""  # tighter: taken


def test_the_follow_checks_state_says_whether_it_judges_and_what_it_found():
    """Shown on /diagnostics ("follow check"): a check that never judges (a second publisher resetting it, an
    occluded pusher) would otherwise look like one that passes."""
    s = make(**FOLLOW, max_acceleration=0.5)
    assert s.follow_state.startswith("waiting")
    drive(s, 0.0, 0.5, (0.05, 0.0))
    assert s.follow_state.startswith("waiting: new measurements cover less than follow_window")
    drive(s, 0.5, 3.0, (0.05, 0.0))
    assert s.follow_state.startswith("follows: moved"), s.follow_state
    drive(s, 3.0, 5.0, (0.05, 0.0), arm=lambda v: 0.0 * v)
    assert s.follow_state.startswith("does not follow: moved"), s.follow_state
    assert make(**{**FOLLOW, "follow_fraction": 0.0}).follow_state.startswith("off")
