"""A background thread that spins an rclpy executor and can be stopped cleanly.

Why not ``executor.spin()`` on a thread and ``executor.shutdown()`` from another: in rclpy Jazzy, ``shutdown``
destroys the executor's guard condition without waiting for a ``spin`` in progress, which then dies in its wait
set (``AttributeError: 'NoneType' object has no attribute 'handle'``). Here the thread runs ``spin_once`` in its
own loop; ``stop()`` ends the loop, wakes the executor and joins the thread, and only then may the executor be
shut down.
"""
from __future__ import annotations

import threading


class BackgroundSpin:
    """Spin ``executor`` on a daemon thread until ``stop()`` or the context shuts down."""

    def __init__(self, executor, name: str = "ros-spin", period: float = 0.1):
        self.executor = executor
        self.name = name
        self.period = period  # s: the longest one wait lasts, so the longest a stop can take without a wake
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "BackgroundSpin":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        from rclpy.executors import ExternalShutdownException  # noqa: PLC0415

        context = self.executor.context
        try:
            while not self._stop.is_set() and context.ok():
                self.executor.spin_once(timeout_sec=self.period)
        except (ExternalShutdownException, KeyboardInterrupt):
            pass

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
