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
