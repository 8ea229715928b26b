"""Spinning rclpy nodes on a background thread, and taking them down without leaving anything running.

Why not ``executor.spin()`` on a thread and ``executor.shutdown()`` from another: in rclpy Jazzy, ``shutdown``
destroys the executor's guard condition without waiting for a ``spin`` in progress, which then dies in its wait
set (``AttributeError: 'NoneType' object has no attribute 'handle'``). Here the thread runs ``spin_once`` in its
own loop; ``stop()`` ends the loop, wakes the executor and joins the thread, and only then may the executor be
shut down.

Why a fixed teardown order (``SpinningNodes.shutdown``): a ``MultiThreadedExecutor`` hands callbacks to worker
threads and looks at their outcome only in a later ``spin_once``. Destroying a node while one of its callbacks
still runs makes that callback fail ("cannot use Destroyable because destruction was requested"), and a callback
that fails after the last ``spin_once`` is reported by nobody but rclpy's ``Future.__del__`` ("The following
exception was never retrieved"). So: stop spinning, let every node end its own long-running work
(``stop_activity()``, e.g. a push in progress), wait for the callbacks in flight and collect their exceptions,
and only then destroy the nodes. A task queued but never started (rclpy queues an accepted action goal's execution
as one) is closed at the stop: it never runs, and its coroutine is not left for the garbage collector to report as
"never awaited".
"""
from __future__ import annotations

import inspect
import threading
import time
import traceback

from ..executable import say


def parallel_executor(num_threads: int, context=None):
    """A ``MultiThreadedExecutor`` without rclpy 7.1's busy loop (ros2/rclpy#1452, fixed upstream by #1547 after
    the Jazzy wheels pinned here): a task handed to the thread pool but not yet started by a worker is yielded
    again by every wait and queued again, and the spinning thread loops without waiting, starving the workers of
    the GIL. Measured on the sim stack (2 cores): 0.1x real time, with ~2000 queued copies of 7 tasks. Here a
    task is queued once; while it waits for a worker, the spinning thread waits for it to start."""
    from rclpy.executors import (ConditionReachedException, ExternalShutdownException,  # noqa: PLC0415
                                 MultiThreadedExecutor, ShutdownException, TimeoutException)
    from rclpy.impl.implementation_singleton import rclpy_implementation  # noqa: PLC0415
    invalid_handle = rclpy_implementation.InvalidHandle

    class ParallelExecutor(MultiThreadedExecutor):
        def __init__(self):
            super().__init__(num_threads=num_threads, context=context)
            self._queued: dict = {}  # task -> Event set when a worker starts it
            self._queued_lock = threading.Lock()

        def _run(self, task, started: threading.Event):
            with self._queued_lock:
                self._queued.pop(task, None)
            started.set()
            task()

        def _spin_once_impl(self, timeout_sec=None, wait_condition=lambda: False):
            try:
                task, _, _ = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
            except (ExternalShutdownException, ShutdownException, TimeoutException, ConditionReachedException):
                return
            except invalid_handle:
                # an entity was destroyed by another thread while this one built the wait set (a lifecycle
                # cleanup called off the executor destroys publishers with their QoS event handlers; rclpy defers
                # a destruction only while the entity is in use, not between the snapshot of a node's entities
                # and their use): the next spin builds the wait set without it. Seen once in ~750 tests under
                # make test-stress (velocity_commander's transitions from another thread).
                return
            with self._queued_lock:
                started = self._queued.get(task)
                if started is None:  # new, or a coroutine suspended at an await: (re)queue it
                    started = self._queued[task] = threading.Event()
                    if task not in self._futures:
                        self._futures.append(task)
                    self._executor.submit(self._run, task, started)
                    started = None
            if started is not None:  # queued already: let a worker start it rather than looping hot
                started.wait(0.01)
            for future in self._futures[:]:
                if future.done():
                    self._futures.remove(future)
                    future.result()  # raise the callback's exception here, as rclpy does

    return ParallelExecutor()


class BackgroundSpin:
    """Spin ``executor`` on a daemon thread until ``stop()`` or the context shuts down.

    An exception raised by a callback does not end the thread: it is printed with its traceback and kept in
    ``errors`` (a robot stack must not go deaf because one callback failed; its owner decides what a failure
    means: the tests fail on any, ``parapush soak`` counts them)."""

    def __init__(self, executor, name: str = "ros-spin", period: float = 0.1):
        self.executor = executor
        self.name = name
        self.period = period  # s: the longest one wait lasts, so the longest a stop can take without a wake
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> BackgroundSpin:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        from rclpy.executors import ExternalShutdownException  # noqa: PLC0415

        context = self.executor.context
        while not self._stop.is_set() and context.ok():
            try:
                self.executor.spin_once(timeout_sec=self.period)
            except (ExternalShutdownException, KeyboardInterrupt):
                return
            except Exception as e:  # noqa: BLE001 - a callback's failure: reported and kept, spinning goes on
                self.record(e)

    def record(self, error: BaseException):
        self.errors.append(error)
        say(f"[{self.name}] callback raised {error!r}:\n"
            + "".join(traceback.format_exception(type(error), error, error.__traceback__)))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> bool:
        """End the loop and join the thread; False if it is still running after ``timeout`` (a stuck callback)."""
        if self._thread is None:
            return True
        self._stop.set()
        self.executor.wake()
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped

    def drain(self, timeout: float) -> list:
        """Wait (bounded) for the callbacks still running in the executor's worker threads and keep their
        exceptions in ``errors``; returns the futures still running at the deadline."""
        futures = list(getattr(self.executor, "_futures", []))
        deadline = time.monotonic() + timeout
        while any(not f.done() for f in futures) and time.monotonic() < deadline:
            time.sleep(0.005)
        for f in futures:
            if f.done() and f.exception() is not None:  # exception() marks it retrieved
                self.record(f.exception())
        return [f for f in futures if not f.done()]


class SpinningNodes:
    """Nodes spun by one ``MultiThreadedExecutor`` on a background thread, with the teardown of the module
    docstring. Nodes may define ``stop_activity(timeout)`` (end their own long-running work and wait for it)."""

    def __init__(self, context=None, num_threads: int = 4, name: str = "ros-spin"):
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        self.context = context
        self.executor = (SingleThreadedExecutor(context=context) if num_threads == 1
                         else parallel_executor(num_threads, context))
        self.nodes: list = []
        self.spin = BackgroundSpin(self.executor, name=name)

    @property
    def errors(self) -> list:
        """Exceptions raised by callbacks so far."""
        return self.spin.errors

    def add(self, node):
        self.executor.add_node(node)
        self.nodes.append(node)
        return node

    def start(self) -> SpinningNodes:
        self.spin.start()
        return self

    def shutdown(self, timeout: float = 5.0) -> list:
        """Stop spinning, end the nodes' activity, wait for callbacks in flight, destroy the nodes (last added
        first); returns ``errors``. Safe to call twice."""
        self.stop(timeout)
        return self.destroy()

    def stop(self, timeout: float = 5.0) -> list:
        """The part of the teardown that matters to the robot: stop spinning, end the nodes' activity (a node that
        commands motion sends its last zero here), wait for callbacks in flight; returns ``errors``."""
        self.spin.stop(timeout)
        for node in self.nodes:
            stop_activity = getattr(node, "stop_activity", None)
            if stop_activity is not None:
                stop_activity(timeout)
        stuck = self.spin.drain(timeout)
        if stuck:
            say(f"[{self.spin.name}] {len(stuck)} callback(s) still running after {timeout:g} s; destroying the "
                f"nodes anyway")
        for node in self.nodes:
            self.executor.remove_node(node)
        self.executor.shutdown(timeout_sec=timeout)
        self._close_unstarted_tasks()
        return self.errors

    def _close_unstarted_tasks(self) -> None:
        """Close the coroutines of tasks queued on the executor that no spin will start any more (an action goal
        accepted as the spinning stopped: ``ActionServer.notify_execute`` queues ``_execute_goal`` with
        ``create_task``). A coroutine never started is closed without running any of it."""
        with self.executor._tasks_lock:  # rclpy keeps its queued tasks here (Executor.create_task)
            tasks = [entry[0] for entry in self.executor._tasks]
        for task in tasks:
            coroutine = getattr(task, "_handler", None)
            if (not task.done() and inspect.iscoroutine(coroutine)
                    and inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED):
                coroutine.close()
                task.cancel()

    def destroy(self) -> list:
        """The middleware's cleanup, after ``stop``: destroy the nodes (last added first); returns ``errors``."""
        for node in reversed(self.nodes):
            try:
                node.destroy_node()
            except Exception as e:  # noqa: BLE001 - teardown goes on; the failure is kept
                self.spin.record(e)
        self.nodes = []
        return self.errors

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.shutdown()
        return False

