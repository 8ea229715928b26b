"""A node process whose middleware cleanup hangs still exits, with the status its stop earned.

rclpy 7.1's ``destroy_node`` was seen to block for ever below Python, holding the GIL, about once in 70 stops of the
whole stack. The node below blocks exactly so in its ``destroy_node`` (a C call made with the GIL held), after a
stop that went well: ``run_node`` must print the hung thread's traceback and exit 0, promptly, where the old
teardown watchdog exited 1 and a plain process never exits. Its stop is said on stdout, so the test also sees that
the stop ran before the cleanup."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("rclpy")

from conftest import printed_lines, read_printed_line, wait_for
from parapush_ros.ros.node import DESTROY_LIMIT_S

pytestmark = pytest.mark.timeout(90)

NODE = textwrap.dedent("""
    import ctypes

    from rclpy.node import Node

    from parapush_ros.ros.node import run_node


    class HangsInDestroy(Node):
        def __init__(self):
            super().__init__("hangs_in_destroy")
            print("up", flush=True)

        def stop_activity(self, timeout):
            print("stopped", flush=True)

        def destroy_node(self):
            ctypes.PyDLL(None).sleep(120)  # blocked below Python, holding the GIL, as rclpy's was seen to


    run_node(HangsInDestroy)
""")


def test_a_hung_destroy_node_after_a_clean_stop_exits_0_with_its_traceback():
    proc = subprocess.Popen([sys.executable, "-c", NODE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert read_printed_line(proc.stdout) == "up"
        proc.send_signal(signal.SIGINT)
        t_signal = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    elapsed = time.monotonic() - t_signal
    assert proc.returncode == 0, err
    assert printed_lines(out) == ["stopped"]  # the stop ran (and said so) before the cleanup that hung
    assert "Timeout" in err and "in destroy_node" in err  # the hung thread's traceback, for whoever reads the log
    assert elapsed >= DESTROY_LIMIT_S  # it waited for the cleanup as long as it said (no upper bound: host speed)


RAISES = textwrap.dedent("""
    import sys

    from rclpy.node import Node

    from parapush_ros.ros.node import run_node


    class RaisesInACallback(Node):
        def __init__(self):
            super().__init__("raises_in_a_callback")
            self.create_timer(0.01, self.tick)

        def tick(self):
            raise RuntimeError("boom in a callback")

        def stop_activity(self, timeout):
            print("stopped", flush=True)


    run_node(RaisesInACallback, num_threads=int(sys.argv[1]))
""")


@pytest.mark.parametrize("threads", [1, 2])
def test_a_callback_that_raises_ends_the_node_with_status_1_after_its_stop(threads):
    """One rule for every node process (and ``parapush sim``, which stops the stack): a callback's exception ends
    the node, after its stop (its zeros), with status 1, so that ``ros2 launch`` ends the stack and the arm gets its
    zero. The multi-threaded planner kept spinning after one (the single-threaded nodes exited), so the two
    bring-ups and the nodes within one disagreed."""
    proc = subprocess.run([sys.executable, "-c", RAISES, str(threads)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "boom in a callback" in proc.stderr
    assert "stopped" in proc.stdout  # the node's stop ran


WEDGED = textwrap.dedent("""
    import ctypes
    import sys

    from rclpy.node import Node

    from parapush_ros.ros import node as scaffolding

    scaffolding.WEDGED_LIMIT_S = 3.0  # the node's 30 s, shortened for the test
    holds_gil, threads = sys.argv[1] == "holds", int(sys.argv[2])


    class WedgedInACallback(Node):
        def __init__(self):
            super().__init__("wedged_in_a_callback")
            self.timer = self.create_timer(0.5, self.tick)

        def tick(self):
            self.timer.cancel()
            print("wedged", flush=True)
            # a C call that never returns, not even for a signal (a deadlock: a plain mutex locked twice): holding
            # the GIL no Python runs again; without it only this thread hangs
            libc, mutex = (ctypes.PyDLL if holds_gil else ctypes.CDLL)(None), ctypes.create_string_buffer(64)
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)


    scaffolding.run_node(WedgedInACallback, num_threads=threads)
""")


@pytest.mark.parametrize(("gil", "threads"), [("holds", 2), ("holds", 1), ("released", 1)])
def test_a_node_wedged_below_python_still_ends_on_sigterm_with_every_threads_traceback(gil, threads):
    """A node whose callback blocks below Python can run no signal handler (Python runs them on the main thread):
    SIGTERM alone would leave it running for ever (seen in the robot soak: the multi-threaded planner still running
    60 s after SIGTERM, in CI the single-threaded mocap_ingest, whose main thread is its spin). The signals are heard
    on a thread of their own and faulthandler's watchdog needs no GIL: the node ends with status 1 and the traceback
    of the thread that wedged it, so that the launch ends the stack and the arm gets its zero."""
    proc = subprocess.Popen([sys.executable, "-c", WEDGED, gil, str(threads)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert read_printed_line(proc.stdout) == "wedged"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err[-2000:]
    assert "Timeout" in err and "in tick" in err, err[-2000:]  # the wedged thread's traceback


def test_a_single_threaded_node_busy_in_a_long_callback_is_not_ended_by_the_watchdog():
    """The watchdog ends a node that cannot run Python or cannot get to a stop it was asked for, not one whose
    callback merely runs long (a prediction of a long horizon): with the limit shortened to 5 s, a 7 s callback of
    Python that releases the GIL finishes, and the node then stops cleanly on SIGTERM."""
    code = textwrap.dedent("""
        import time

        from rclpy.node import Node

        from parapush_ros.ros import node as scaffolding

        scaffolding.WEDGED_LIMIT_S = 5.0


        class Busy(Node):
            def __init__(self):
                super().__init__("busy_in_a_callback")
                self.timer = self.create_timer(0.2, self.tick)

            def tick(self):
                self.timer.cancel()
                end = time.monotonic() + 7.0
                while time.monotonic() < end:
                    sum(range(1000))
                print("done", flush=True)


        scaffolding.run_node(Busy)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert read_printed_line(proc.stdout) == "done"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]


def test_a_node_tells_whether_the_launch_that_started_it_has_ended():
    """``stop_with_parent``'s ancestry check: a launch that is this process's parent, or further up (a
    launch-prefix between), or pid 1 (a container's entry point) has not ended; one that has exited has."""
    import os

    from parapush_ros.ros.node import _ended

    gone = subprocess.Popen(["true"])
    gone.wait()
    assert not _ended(os.getppid())
    assert not _ended(1)
    assert _ended(gone.pid)


PARENT_GONE = textwrap.dedent("""
    import os, sys, threading
    from parapush_ros.ros.node import listen_for_stop
    stop = threading.Event()
    # as after the parent's death: this process now has another parent than the one it was started by
    stop_listening = listen_for_stop(stop, parent=os.getppid() + 1)
    heard = stop.wait(60.0)
    stop_listening()
    print("stopped" if heard else "still running")
""")


def test_a_node_whose_parent_has_ended_stops_without_any_signal():
    """The stop-signal thread also watches the parent: a node once kept running 60 s after its ``ros2 launch`` died
    of SIGTERM, no signal heard (the kernel's parent-death SIGINT did not reach it); now the reparenting alone
    stops it, saying why."""
    proc = subprocess.run([sys.executable, "-c", PARENT_GONE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "stopped", proc.stdout + proc.stderr
    assert "has ended: stopping" in proc.stderr


def test_a_node_whose_launch_has_ended_stops_though_its_stderr_is_a_broken_pipe(tmp_path):
    """Its stderr is a pipe to the launch, which a launch ended by SIGTERM leaves with no reader: saying why it
    stops raises ``BrokenPipeError`` there (Python ignores SIGPIPE), and the stop-signal thread once said it before
    it set the stop, so it died saying it and the node ran on. The stop comes first, and the line cannot raise."""
    read, write = os.pipe()
    os.close(read)  # the launch's end: gone
    out = tmp_path / "out.txt"
    with open(out, "w") as stdout:
        proc = subprocess.run([sys.executable, "-c", PARENT_GONE], stdout=stdout, stderr=write, timeout=120)
    os.close(write)
    assert proc.returncode == 0 and out.read_text().strip() == "stopped", out.read_text()


def test_a_node_executable_hears_a_stop_before_it_imports_its_node(tmp_path):
    """A node's imports (rclpy, MuJoCo, torch) take half a second to seconds: a Ctrl-C then met Python's default
    handler and killed the node with a traceback and status -2 (``ros2 launch`` reported parareal_predictor so).
    The entry points install the stop handlers first, having imported only the standard library, and hand the stop
    to the node's ``main``. Here the node module itself receives SIGINT while it is imported."""
    (tmp_path / "node_signalled_while_imported.py").write_text(textwrap.dedent("""
        import signal
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the node's imports run

        def main(stop):
            print("stop heard" if stop.is_set() else "stop missed", flush=True)
    """))
    probe = textwrap.dedent("""
        import signal, sys
        from parapush_ros import executable
        heavy = sorted({"rclpy", "numpy", "torch", "mujoco", "yaml"} & set(sys.modules))
        print("heavy imports:", heavy, flush=True)
        executable.start(sys.argv[1])
    """)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", probe, "node_signalled_while_imported"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["heavy imports: []", "stop heard"], proc.stdout + proc.stderr


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``sig`` (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(caught & (1 << (sig - 1)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_node_stopped_while_it_starts_exits_0_without_a_traceback():
    """The real executable, given SIGINT as soon as its entry point hears signals (SIGTERM caught: Python's own
    start leaves SIGTERM at its default), i.e. while it imports its node: status 0, no traceback."""
    exe = shutil.which("parareal_predictor")
    assert exe, "parareal_predictor is not on PATH (make build; source env.sh)"
    proc = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: proc.poll() is not None or _catches(proc.pid, signal.SIGTERM), timeout=60.0, interval=0.001,
                 what="the entry point's stop handlers")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err, err[-2000:]


STOP_RAISES = textwrap.dedent("""
    from rclpy.node import Node

    from parapush_ros.ros.node import run_node


    class StopRaises(Node):
        def __init__(self):
            super().__init__("stop_raises")
            print("up", flush=True)

        def stop_activity(self, timeout):
            raise RuntimeError("boom in the stop")


    run_node(StopRaises)
""")


def test_an_exception_in_a_node_s_stop_is_in_its_ros_log_file_too(tmp_path):
    """A node's stderr is a pipe to its launch, which may be gone when the node stops (SIGTERM): the exception
    that ended the stop is also in the node's ROS log file, with its traceback (``ros.node.log_failure``)."""
    env = {**os.environ, "ROS_LOG_DIR": str(tmp_path / "log")}
    proc = subprocess.Popen([sys.executable, "-c", STOP_RAISES], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert read_printed_line(proc.stdout) == "up"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err[-2000:]
    logs = "".join(p.read_text() for p in (tmp_path / "log").glob("*.log"))
    assert "[stop_raises]: the stop raised RuntimeError('boom in the stop')" in logs, logs[-2000:]
    assert "in stop_activity" in logs, logs[-2000:]
