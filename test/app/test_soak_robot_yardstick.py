"""The robot soak's planner settings, its yardstick of fault-free goals and its report of a process left running
(no ROS needed)."""
import subprocess
import sys
import time

import pytest

from parapush_ros.core.config import from_values
from parapush_ros.core.planning.fast_mpc import FastConfig
from parapush_ros.core.planning.planner import PlannerConfig
from parapush_ros.tools.soak_robot import PLANNERS, STANDIN_STALL, fault_free, planner_parameters, where_stuck


@pytest.mark.parametrize("dt", [0.1, 0.05, 0.25, 1.0])
def test_the_fast_planner_re_plans_every_control_and_its_settings_are_valid(dt):
    p = planner_parameters("fast", dt, 80)
    assert p["planner"] == "fast" and p["fast.replan_rate"] == pytest.approx(1.0 / dt) and p["max_actions"] == 80
    assert from_values(FastConfig, p, "fast.").period == pytest.approx(dt)  # refused otherwise, naming it


def test_the_sampling_mpc_plans_controls_of_the_given_length_over_at_least_a_second():
    p = planner_parameters("mpc", 0.1, 80)
    assert (p["planner"], p["control_duration"], p["horizon"]) == ("mpc", 0.1, 10)
    PlannerConfig.from_values({k: v for k, v in p.items() if k not in ("planner", "max_actions", "threads")})
    assert planner_parameters("mpc", 1.0, 8)["horizon"] == 4
    assert PLANNERS[0] == "fast"
    with pytest.raises(ValueError, match="planner"):
        planner_parameters("dgoc", 0.1, 80)


def episode(fault="none", outcome="reached", skipped=0.0, **kw):
    return {"fault": fault, "outcome": outcome, "standin_skipped_s": skipped, "actions": 30, **kw}


def test_fault_free_goals_are_counted_with_and_without_the_stand_in_s_stalls():
    eps = [episode(), episode(outcome="timeout", actions=80), episode(skipped=2 * STANDIN_STALL),
           episode(outcome="timeout", skipped=STANDIN_STALL), episode(fault="estop", outcome="timeout")]
    ff = fault_free(eps)
    assert (ff["sent"], ff["reached"], ff["standin_ran"], ff["reached_standin_ran"]) == (4, 2, 2, 1)
    assert [m["outcome"] for m in ff["missed"]] == ["timeout", "timeout"]
    assert ff["actions_reached"] == [30, 30]
    assert fault_free([]) == {"sent": 0, "reached": 0, "standin_ran": 0, "reached_standin_ran": 0,
                              "actions_reached": [], "missed": []}


def test_a_process_left_running_is_described_by_its_threads_states_and_wait_channels():
    """What a stop left running was doing, for a run that cannot be repeated: one thread asleep in the kernel, one
    busy in Python (two threads: the sleeper is the main one), and a process already gone."""
    busy = ("import threading, time\n"
            "threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\n"
            "print('up', flush=True)\n"
            "time.sleep(60)\n")
    with subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout.readline().strip() == "up"
            deadline = time.monotonic() + 60.0
            while not (where := where_stuck(proc.pid)).startswith("main S ") and time.monotonic() < deadline:
                time.sleep(0.05)  # (between the print and the sleep the main thread still runs)
        finally:
            proc.kill()
    assert where.startswith("main S ") and "; 1 others: 1 " in where and where.endswith(" s"), where
    assert where_stuck(proc.pid) == "gone"
