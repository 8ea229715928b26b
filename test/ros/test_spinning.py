"""BackgroundSpin and SpinningNodes: callbacks run while it spins, none after stop(), stop-then-shutdown never kills
the thread, a callback's exception is kept (not lost, not fatal), and the teardown leaves nothing running."""
import threading

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.node import Node  # noqa: E402
import std_msgs.msg as std_msgs  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

from conftest import wait_for  # noqa: E402
from parapush_ros.ros.spinning import BackgroundSpin  # noqa: E402

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
        node.create_timer(0.002, lambda: ticks.append(1))  # noqa: B023 - called within this iteration
        ex.add_node(node)
        spin = BackgroundSpin(ex, name="spin-test").start()
        assert spin.running
        wait_for(lambda: len(ticks) >= 3, timeout=5.0, what="timer callbacks while spinning")  # noqa: B023 - called within this iteration
        assert spin.stop(timeout=5.0) and not spin.running
        assert spin.drain(timeout=5.0) == [] and spin.errors == []  # callbacks in flight end, none failed
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


def test_a_failing_callback_is_kept_and_spinning_goes_on(ros_context):
    from parapush_ros.ros.spinning import SpinningNodes

    nodes = SpinningNodes(ros_context, num_threads=2, name="spin-errors")
    node = nodes.add(rclpy.create_node("spin_errors", context=ros_context))
    ticks = []

    def tick():
        ticks.append(1)
        if len(ticks) == 2:
            raise RuntimeError("boom")
    node.create_timer(0.002, tick)
    nodes.start()
    wait_for(lambda: len(ticks) >= 10, timeout=30.0, what="timer callbacks after the failing one")
    errors = nodes.shutdown()
    assert [str(e) for e in errors] == ["boom"] and nodes.nodes == []


def test_stop_activity_runs_before_the_nodes_are_destroyed(ros_context):
    from parapush_ros.ros.spinning import SpinningNodes

    class Busy(Node):
        """A node with work of its own on a thread that publishes until told to stop (like a push in progress)."""

        def __init__(self):
            super().__init__("spin_busy", context=ros_context)
            self.pub = self.create_publisher(std_msgs.String, "spin_busy", 10)
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._work, daemon=True)
            self.thread.start()

        def _work(self):
            while not self.stop.wait(0.001):
                self.pub.publish(std_msgs.String(data="x"))  # raises if the node were destroyed first

        def stop_activity(self, timeout):
            self.stop.set()
            self.thread.join(timeout)
            return not self.thread.is_alive()

    nodes = SpinningNodes(ros_context, num_threads=2)
    busy = nodes.add(Busy())
    nodes.start()
    assert nodes.shutdown() == [] and not busy.thread.is_alive()


def test_an_action_goal_accepted_as_the_spinning_stops_is_closed_not_left_never_awaited(ros_context):
    """rclpy queues an accepted goal's execution as a task (``ActionServer.notify_execute``); one accepted after the
    last spin is never started. The teardown closes it: its execute callback never runs, and the garbage collector
    finds no coroutine "never awaited" (seen under make test-stress: a RuntimeWarning, an error of the next test)."""
    import gc
    import sys

    from rclpy.action import ActionClient, ActionServer
    from parapush_msgs.action import PushObject
    from parapush_ros.ros.spinning import SpinningNodes

    accepted, executed = [], []

    def execute(goal_handle):
        executed.append(goal_handle)
        goal_handle.abort()
        return PushObject.Result()

    nodes = SpinningNodes(ros_context, num_threads=2, name="spin-goal")
    server_node = nodes.add(rclpy.create_node("spin_goal_server", context=ros_context))
    ActionServer(server_node, PushObject, "spin_goal", execute_callback=execute,
                 handle_accepted_callback=accepted.append)  # executed only when the test says so
    client_node = nodes.add(rclpy.create_node("spin_goal_client", context=ros_context))
    client = ActionClient(client_node, PushObject, "spin_goal")
    nodes.start()
    assert client.wait_for_server(timeout_sec=10.0)
    client.send_goal_async(PushObject.Goal(target_object="slider"))
    wait_for(lambda: accepted, timeout=10.0, what="the goal accepted")
    nodes.spin.stop()  # the last spin is over
    accepted[0].execute()  # what the default handle_accepted_callback does: queue _execute_goal as a task
    unraisable, previous = [], sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        assert nodes.shutdown() == []
        accepted.clear()
        del nodes, client, server_node, client_node  # the queued task goes with the executor
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert executed == [] and [str(u.exc_value) for u in unraisable] == []
