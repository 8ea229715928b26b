"""rclpy's ``ActionClient`` without its lost-answer race (ros2/rclpy#1123; fixed upstream by #1308 and its
backports, not in the Jazzy wheel pinned here, 7.1.6).

``send_goal_async`` (and a goal handle's ``cancel_goal_async`` / ``get_result_async``) sends the request first and
only then files the future under the request's sequence number. A client whose executor spins on another thread
(a multi-threaded executor, a background spinner, a test) can take the server's answer in between: rclpy logs
"Ignoring unexpected goal response. There may be more than one action server ..." and the future never completes.
Seen under load (``make test-stress``): a launch test's goal went unanswered for 60 s. Here sending and filing are one
step under a lock that the executor's handling of answers takes too, so an answer waits the microseconds until its
future is filed. Use this class wherever parapush sends goals."""
import threading
import time

from rclpy.action import ActionClient as _RclpyActionClient

ANSWERS = ("goal", "cancel", "result")  # the parts of taken data that are answers to requests sent


class ActionClient(_RclpyActionClient):
    """Drop-in for ``rclpy.action.ActionClient`` (same arguments)."""

    def __init__(self, *args, **kwargs):
        self._filing = threading.RLock()  # reentrant: a done callback run while answering may send the next goal
        super().__init__(*args, **kwargs)

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        with self._filing:
            return super().send_goal_async(goal, feedback_callback=feedback_callback, goal_uuid=goal_uuid)

    def _cancel_goal_async(self, goal_handle):
        with self._filing:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle):
        with self._filing:
            return super()._get_result_async(goal_handle)

    async def execute(self, taken_data):
        answers = {k: taken_data[k] for k in ANSWERS if k in taken_data}
        rest = {k: v for k, v in taken_data.items() if k not in ANSWERS}
        if answers:
            with self._filing:  # rclpy's handling of answers never awaits: the lock is not held across a suspension
                await super().execute(answers)
        if rest:  # feedback and status may await a user's coroutine callback: not under the lock
            await super().execute(rest)


class ResentGoal:
    """A goal sent again when its answer does not come within ``timeout`` s of ``clock`` (wall time by default),
    at most ``attempts`` goals in all. rmw_fastrtps answers a request whose caller its server has not yet paired in
    discovery (request writer with reply reader) into nothing and reports success (ros2/rmw_fastrtps#467; #418 would
    hold such requests back, never merged): seen once on CI as a launch test's goal unanswered for 60 s, nothing
    logged. A caller that waits for that answer waits forever. Each goal sent has a goal id of its own; a late
    answer to an earlier one is ignored (a planner pre-empts a running push with the next goal)."""

    def __init__(self, client, goal, timeout: float = 30.0, attempts: int = 3, feedback_callback=None,
                 clock=time.monotonic):
        if timeout <= 0.0 or attempts < 1:
            raise ValueError(f"ResentGoal: timeout must be > 0 and attempts >= 1, got {timeout}, {attempts}")
        self.client, self.goal, self.timeout, self.attempts = client, goal, timeout, attempts
        self._feedback, self._clock = feedback_callback, clock
        self.sent = 0  # goals sent so far
        self.resend()

    @property
    def lost(self) -> int:
        """Goals sent again: their answer did not come (in time, or the caller knew it lost, ``resend``)."""
        return self.sent - 1

    def resend(self):
        """Send the goal (again): also for a caller that knows the answer is lost (rclpy's server logs "Failed to
        send goal response" where rmw_fastrtps gives up on the caller's reply reader after 100 ms)."""
        if self.sent >= self.attempts:
            raise TimeoutError(f"no answer to the goal, sent {self.sent} times, {self.timeout:g} s each")
        self.sent += 1
        self._sent_at = self._clock()
        self.future = self.client.send_goal_async(self.goal, feedback_callback=self._feedback)

    def poll(self):
        """The goal handle once the latest goal is answered, else None (sending it again when due); raises
        TimeoutError when ``attempts`` goals went unanswered."""
        if self.future.done():
            return self.future.result()
        if self._clock() - self._sent_at < self.timeout:
            return None
        self.resend()
        return None
