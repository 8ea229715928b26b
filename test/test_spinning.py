"""BackgroundSpin: callbacks run while it spins, none after stop(), and stop-then-shutdown never kills the thread."""
import threading

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

from conftest import wait_for  # noqa: E402
from parapush_ros.spinning import BackgroundSpin  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def thread_errors():
    """Exceptions raised in any thread during the test (rclpy's shutdown race shows up only there)."""
    errors, previous = [], threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        yield errors
    finally:
        threading.excepthook = previous


def test_stop_ends_callbacks_and_shutdown_after_it_is_clean(ros_context, thread_errors):
    for cycle in range(10):  # the race it avoids needs a shutdown while a wait is in progress: try repeatedly
        ex = MultiThreadedExecutor(num_threads=2, context=ros_context)
        node = rclpy.create_node(f"spin_test_{cycle}", context=ros_context)
        ticks = []
        node.create_timer(0.002, lambda: ticks.append(1))
        ex.add_node(node)
        spin = BackgroundSpin(ex, name="spin-test").start()
        assert spin.running
        wait_for(lambda: len(ticks) >= 3, timeout=5.0, what="timer callbacks while spinning")
        assert spin.stop(timeout=5.0) and not spin.running
        ex.shutdown(timeout_sec=5.0)
        n_after_stop = len(ticks)
        threading.Event().wait(0.05)  # a timer period many times over: no callback may run any more
        assert len(ticks) <= n_after_stop + 2  # at most the callbacks already handed to the pool
        node.destroy_node()
    assert thread_errors == []


def test_stop_before_start_and_twice_is_harmless(ros_context):
    ex = MultiThreadedExecutor(num_threads=2, context=ros_context)
    spin = BackgroundSpin(ex)
    assert spin.stop() and not spin.running
    spin.start()
    assert spin.stop() and spin.stop()
    ex.shutdown(timeout_sec=1.0)
