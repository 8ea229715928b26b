"""Shared pytest fixtures for parapush.

ROS isolation: every test run gets its own ROS_DOMAIN_ID (a free one, locked for the run, set here, before any
rclpy.init, and inherited by subprocesses) and discovery is limited to this host, so parallel runs do not see each
other's nodes. rclpy is imported lazily: the ROS-free core tests do not need it.

Fixtures / helpers for ROS tests:
  ros_context        session-scoped rclpy context (rclpy.init / rclpy.shutdown of the default context)
  ros_executor       function-scoped BackgroundExecutor (MultiThreadedExecutor spinning in a thread)
  BackgroundExecutor context manager: add nodes, spin in a daemon thread, clean teardown (nodes destroyed)
  wait_for           poll a predicate until it holds or a timeout passes (no fixed sleeps)
  wait_sim           wait until a given span of simulated time has passed
  wait_future        wait for an rclpy Future completed by the background executor and return its result
  lifecycle_state    the label of a lifecycle node's current state
  (autouse)          no thread a test started may outlive it (idle pool workers excepted)
"""
import fcntl
import os
import re
import sys
import tempfile
import threading
import time

import pytest

# ---------------------------------------------------------------------------------------------------------------
# ROS isolation (must happen before rclpy.init anywhere in this process or its children).
# Domain ids 1..100 keep Fast DDS ports valid; 0 (the default everyone uses) is avoided.
# Set PARAPUSH_TEST_DOMAIN_ID to force a specific domain.
# ---------------------------------------------------------------------------------------------------------------
def _claim_free_domain() -> int:
    """A domain id no other test run on this host holds: a pid-derived id collides between concurrent runs (about
    one in four with eight at once), and runs that share a domain see each other's /clock, goals and answers. Each
    run holds an exclusive lock on /tmp/parapush-ros-domain-<id>.lock for its lifetime (released by the OS on exit,
    however the run ends)."""
    start = os.getpid() % 100
    for k in range(100):
        domain = 1 + (start + k) % 100
        fd = os.open(os.path.join(tempfile.gettempdir(), f"parapush-ros-domain-{domain}.lock"), os.O_CREAT | os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _DOMAIN_LOCKS.append(fd)  # kept open (and locked) until the process ends
        return domain
    return 1 + start


_DOMAIN_LOCKS = []
_DOMAIN_ID = int(os.environ.get("PARAPUSH_TEST_DOMAIN_ID") or _claim_free_domain())
os.environ["ROS_DOMAIN_ID"] = str(_DOMAIN_ID)
if os.environ.get("ROS_DISTRO", "") in ("humble", "iron"):
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")  # pre-Jazzy spelling
else:
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # Jazzy+; ROS_LOCALHOST_ONLY is deprecated


# Studies (parapush_ros/study.py) run their units one after another in the test process unless a test asks for Ray
# (--workers N / --ray): a local Ray per bench test would start a cluster in every test on a 2-core machine.
# test/app/test_study_cluster.py runs the real multi-node Ray cluster.
os.environ.setdefault("PARAPUSH_WORKERS", "1")


if os.environ.get("PARAPUSH_REQUIRE_ROS", "0") == "1":
    import rclpy  # noqa: F401  (`make test` sets this: a missing ROS must fail the run, not skip its tests)


_UNRETRIEVED = []  # rclpy futures whose exception nobody retrieved (rclpy only prints them from Future.__del__)


def pytest_configure(config):
    """Make rclpy's "The following exception was never retrieved" a failure of the run instead of a stray line:
    every callback's exception must reach someone (parapush_ros.ros.spinning collects them at teardown)."""
    try:
        from rclpy.task import Future
    except ImportError:
        return
    original = Future.__del__

    def __del__(self):
        if self._exception is not None and not self._exception_fetched:
            _UNRETRIEVED.append(f"{self._exception!r} (during {os.environ.get('PYTEST_CURRENT_TEST', '?')})")
        original(self)

    Future.__del__ = __del__


def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: its exit status is not the run's, so its controller judges
        workeroutput["unretrieved_futures"] = list(_UNRETRIEVED)
        return
    if _UNRETRIEVED and session.exitstatus == 0:
        print(f"\n{len(_UNRETRIEVED)} rclpy future exception(s) never retrieved: {_UNRETRIEVED[:5]}")
        session.exitstatus = 1


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller (``make test`` runs the suite on workers): each worker's never-retrieved rclpy
    future exceptions, for the check above."""
    _UNRETRIEVED.extend(getattr(node, "workeroutput", {}).get("unretrieved_futures", []))


def pytest_report_header(config):
    return f"ROS_DOMAIN_ID={_DOMAIN_ID} (isolated per test run)"


# A command prefix that starts a program as a shell script's background job does (``ros2 launch ... &``,
# ``nohup make test &``): with SIGINT ignored, which exec keeps
SIGINT_IGNORED = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                  "os.execvp(sys.argv[1], sys.argv[1:])"]


# A line Fast DDS logs on a process's stdout (its own logger, not ROS's): "2026-12-04 05:10:34.784 [RTPS_TRANSPORT_SHM
# Error] Failed init_port fastrtps_port7001: open_and_lock_file failed -> Function open_port_internal", in colour.
# Seen under make test-stress as the first line of a node's output: a shared-memory port whose lock file a killed
# process left behind; Fast DDS then talks over UDP, so it is noise to a test that reads what the node printed.
FASTDDS_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[\w+ (Error|Warning|Info)\]")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def is_fastdds_log(line: str) -> bool:
    return bool(FASTDDS_LOG_LINE.match(ANSI_ESCAPE.sub("", line).strip()))


def printed_lines(text: str) -> list:
    """The lines a process printed itself: without Fast DDS's log lines."""
    return [line for line in text.splitlines() if not is_fastdds_log(line)]


def read_printed_line(stream) -> str:
    """The next line a process printed itself (stripped), skipping Fast DDS's log lines; "" at the end."""
    while True:
        line = stream.readline()
        if not line or not is_fastdds_log(line):
            return line.strip()


def wait_for(predicate, timeout=5.0, interval=0.005, what="condition"):
    """Poll ``predicate()`` until it is truthy; return its value or fail the test after ``timeout`` seconds.
    ``what`` may be a callable, called at the failure: a log's state then, not when the wait began."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.1f} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


def wait_sim(now, seconds, timeout=60.0, what=None):
    """Wait until ``seconds`` of simulated time have passed on the clock that ``now()`` reads (s): a test waits on
    the clock its world runs on, never on wall-clock sleeps (a slow host makes it slower, not different)."""
    t_end = now() + seconds
    wait_for(lambda: now() >= t_end, timeout=timeout, what=what or f"{seconds:g} s of simulated time")


def wait_future(future, timeout=5.0, what="future"):
    """Wait until an rclpy Future (completed by a background executor) is done and return its result."""
    wait_for(future.done, timeout=timeout, what=what)
    exc = future.exception()
    if exc is not None:
        raise exc
    return future.result()


def lifecycle_state(node) -> str:
    """The label of a lifecycle node's current state: unconfigured, inactive, active or finalized."""
    return node._state_machine.current_state[1]


class Recorder:
    """A subscription callback that keeps every message (callbacks may run on several executor threads)."""

    def __init__(self):
        self.msgs = []
        self.lock = threading.Lock()

    def __call__(self, msg):
        with self.lock:
            self.msgs.append(msg)

    def last(self):
        with self.lock:
            return self.msgs[-1] if self.msgs else None

    def count(self):
        with self.lock:
            return len(self.msgs)

    def first_since(self, n, predicate):
        """The first message after the first n that satisfies predicate, or None (a loaded machine may publish
        the state that shows an event late, so tests look through everything published since, not only the last)."""
        with self.lock:
            return next((m for m in self.msgs[n:] if predicate(m)), None)

    def clear(self):
        with self.lock:
            self.msgs.clear()


class BackgroundExecutor:
    """Nodes spun on a background thread (``parapush_ros.ros.spinning.SpinningNodes``), for a ``with`` block or a
    fixture. Teardown ends the nodes' activity, waits for callbacks in flight and destroys the nodes, then fails
    the test if any callback raised: a test leaves nothing running and hides no exception.

    Usage::

        with BackgroundExecutor(context) as ex:
            node = ex.add(rclpy.create_node("x", context=context))
    """

    def __init__(self, context=None, num_threads=4):
        from parapush_ros.ros.spinning import SpinningNodes

        self._nodes = SpinningNodes(context, num_threads=num_threads, name="ros-executor")
        self.executor = self._nodes.executor

    @property
    def nodes(self) -> list:
        return self._nodes.nodes

    def add(self, node):
        return self._nodes.add(node)

    def start(self):
        self._nodes.start()
        return self

    def shutdown(self, timeout=5.0, check=True):
        errors = self._nodes.shutdown(timeout)
        if errors and check:
            pytest.fail(f"{len(errors)} callback(s) raised: {errors!r}")

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, *_):
        self.shutdown(check=exc_type is None)  # a failure in progress is not masked by the teardown's
        return False


@pytest.fixture(scope="session")
def ros_context():
    """The default rclpy context, initialised once per test session (on the isolated ROS_DOMAIN_ID)."""
    rclpy = pytest.importorskip("rclpy")
    rclpy.init()
    context = rclpy.get_default_context()
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)


@pytest.fixture
def ros_executor(ros_context):
    """A started BackgroundExecutor; nodes added to it are destroyed at teardown."""
    ex = BackgroundExecutor(ros_context).start()
    try:
        yield ex
    finally:
        ex.shutdown()



# Threads that may outlive a test because they idle in a pool until the process ends: rclpy's multi-threaded
# executors' workers, the fine model's rollout pool, tqdm's monitor.
IDLE_POOL_THREADS = ("ThreadPoolExecutor-", "parapush-fine_", "tqdm_monitor")


@pytest.fixture(autouse=True)
def _no_thread_outlives_its_test():
    """Tests are independent: a thread a test started (an executor spinning, a push loop planning, a test world
    ticking) must have ended within 10 s of wall time after the test, or the test fails with the threads' names.
    A test that fails must not leave busy work behind to slow down or confuse the next ones."""
    import threading
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10.0
    for t in threading.enumerate():  # wait for each to end (join), within the one shared bound
        if t not in before and not t.name.startswith(IDLE_POOL_THREADS):
            t.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in threading.enumerate()
            if t not in before and t.is_alive() and not t.name.startswith(IDLE_POOL_THREADS)]
    if left:
        pytest.fail(f"threads still running 10 s after the test: {left}")
