"""A robot's system clock that steps back (an NTP step) must not silence the stack.

rcl timers on the system clock stall after it steps back until real time has made the step up (ros2/rclpy#1490):
``mocap_ingest`` published no scene state for as long as the step (4 s gap measured for a 4 s step), where it must go
on and say what the step did. Here the real node runs in its own process on the system clock (no sim time), with the
C library's ``clock_gettime(CLOCK_REALTIME)`` stepped back ``STEP_S`` by a small preload library once the test
creates a trigger file; this process feeds mocap poses (with a camera's micrometres of noise) and records the
scene states. The node's periodic work runs on the steady clock on a robot (``ros.node.period_clock``), so the states
go on through the step."""
import os
import random
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import PoseStamped  # noqa: E402
from parapush_msgs.msg import SceneState  # noqa: E402

from conftest import Recorder, wait_for  # noqa: E402
from parapush_ros.ros.qos import RELIABLE  # noqa: E402

pytestmark = pytest.mark.timeout(120)
STEP_S = 6.0  # s the system clock steps back

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* CLOCK_REALTIME steps back by SHIM_STEP_S seconds for good once the file SHIM_TRIGGER exists. */
static int (*real_gettime)(clockid_t, struct timespec *) = 0;
static int stepped = 0;
static struct timespec checked = {0, 0};
int clock_gettime(clockid_t id, struct timespec *ts) {
  if (!real_gettime) real_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real_gettime(id, ts);
  if (id != CLOCK_REALTIME || r != 0) return r;
  if (!stepped) {
    struct timespec m;
    real_gettime(CLOCK_MONOTONIC, &m);
    if (m.tv_sec != checked.tv_sec || m.tv_nsec - checked.tv_nsec > 1000000) { /* look at most every ms */
      checked = m;
      const char *trigger = getenv("SHIM_TRIGGER");
      stepped = trigger && access(trigger, F_OK) == 0;
    }
  }
  if (stepped) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec - (long long)(atof(getenv("SHIM_STEP_S")) * 1e9);
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return r;
}
"""

NODE = textwrap.dedent("""
    from parapush_ros.nodes.mocap_ingest import MocapIngestNode
    from parapush_ros.ros.node import run_node

    run_node(MocapIngestNode)
""")


@pytest.fixture
def stepped_clock(tmp_path):
    """(environment of a process whose system clock steps back STEP_S once ``trigger`` exists, trigger path)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the clock-step library (the ROS interfaces' build needs one too)")
    src, lib = tmp_path / "step.c", tmp_path / "step.so"
    src.write_text(SHIM)
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), "-ldl"], check=True)
    trigger = tmp_path / "step_now"
    env = {**os.environ, "LD_PRELOAD": str(lib), "SHIM_TRIGGER": str(trigger), "SHIM_STEP_S": str(STEP_S)}
    return env, trigger


def test_mocap_ingest_goes_on_publishing_through_a_step_back_of_the_system_clock(stepped_clock, ros_executor):
    env, trigger = stepped_clock
    ns = f"/clkstep{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", NODE, "--ros-args", "-r", f"__ns:={ns}",
                             "-p", "scene:=obstacle_push", "-p", f"pose_topic_template:={ns}/{{body}}/pose",
                             "-p", "table_origin_in_mocap:=[0.0, 0.0, 0.75]"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    io = ros_executor.add(rclpy.create_node("clock_step_io", namespace=ns))
    states = Recorder()
    arrivals = []  # monotonic times of the scene states
    io.create_subscription(SceneState, f"{ns}/scene_state", lambda m: (arrivals.append(time.monotonic()),
                                                                       states(m)), RELIABLE)
    pubs = {b: io.create_publisher(PoseStamped, f"{ns}/{b}/pose", RELIABLE) for b in ("pusher", "slider")}
    where = {"pusher": (-0.3, 0.0, 0.056), "slider": (-0.2, 0.0, 0.01)}
    stop = threading.Event()
    rng = random.Random(0)

    def feed():  # a mocap driver at 100 Hz on this process's (unstepped) clock
        while not stop.wait(0.01):
            for body, pub in pubs.items():
                m = PoseStamped()
                m.header.frame_id = "world"
                m.header.stamp = io.get_clock().now().to_msg()
                x, y, z = where[body]
                m.pose.position.x, m.pose.position.y = x + rng.gauss(0.0, 2e-5), y + rng.gauss(0.0, 2e-5)
                m.pose.position.z = 0.75 + z
                m.pose.orientation.w = 1.0
                pub.publish(m)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        wait_for(lambda: (m := states.last()) is not None and m.pusher_tracking_valid and m.objects[0].tracking_valid,
                 timeout=60.0, what="scene states with both bodies tracked")
        n = states.count()
        trigger.touch()
        stepped_at = time.monotonic()
        # states keep coming (at least) for as long again as the step took away
        wait_for(lambda: time.monotonic() - stepped_at > 1.5 * STEP_S, timeout=60.0, interval=0.05,
                 what="the step's time")
        assert states.count() > n
    finally:
        stop.set()
        feeder.join()
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    after = [t for t in arrivals if t >= stepped_at]
    gaps = [b - a for a, b in zip([stepped_at, *after], after)]
    assert after and max(gaps) < STEP_S / 2, (max(gaps, default=None), out[-2000:])
    assert after[-1] > stepped_at + STEP_S, out[-2000:]  # states kept coming past the step, not just before it
