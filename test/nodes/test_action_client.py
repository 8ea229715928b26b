"""``ros.actions.ActionClient``: an answer that arrives before rclpy has filed its request's future is not lost
(ros2/rclpy#1123: rclpy's own client logs "Ignoring unexpected goal response" and the future never completes; a
launch test's goal went unanswered that way under ``make test-stress``).

The interleaving is forced, not hoped for: the client's rcl handle is wrapped so that each request pauses after it
has gone out, before rclpy files its future. With rclpy's class the pause lasts until the background executor has
handled the goal's answer, which it then drops (``test_rclpy_s_own_client_loses_it``: the race is real and the test
meets it). With ours the answer waits for the filing, so no pause of any length can lose it."""
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from rclpy.action import ActionClient as RclpyActionClient  # noqa: E402
from rclpy.action import ActionServer, CancelResponse, GoalResponse  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402

from conftest import wait_future  # noqa: E402
from parapush_ros.ros.actions import ActionClient  # noqa: E402

ACTION = "/action_client_test/push_object"
SENT_TO_FILED = 0.3  # s: the pause for parapush's class (any length: its answers wait for the filing)


class SlowToFile:
    """The client's rcl handle, with a pause after each request is sent (before rclpy files its future): until
    ``until`` is set (at most 30 s), or ``SENT_TO_FILED`` without one."""

    def __init__(self, handle, until=None):
        self._handle, self._until = handle, until

    def __getattr__(self, name):
        attr = getattr(self._handle, name)
        if not name.startswith("send_"):
            return attr

        def sent_then_pause(*args):
            sequence_number = attr(*args)
            if self._until is None:
                time.sleep(SENT_TO_FILED)  # forces the interleaving (not a pacing of the test's world)
            else:
                assert self._until.wait(30.0), "the executor did not handle the goal's answer in 30 s"
            return sequence_number
        return sent_then_pause


@pytest.fixture
def server(ros_executor):
    """A server that accepts every goal, lets it be cancelled, and ends it at once when it is not."""
    node = ros_executor.add(rclpy.create_node("action_client_test_server"))
    release = threading.Event()

    def execute(goal_handle):
        if goal_handle.request.target_object == "hold":
            while not goal_handle.is_cancel_requested and not release.wait(0.01):
                pass
            goal_handle.canceled()
            return PushObject.Result(outcome=PushObject.Result.ABORTED, message="cancelled")
        goal_handle.succeed()
        return PushObject.Result(outcome=PushObject.Result.REACHED, message="reached")

    ActionServer(node, PushObject, ACTION, execute_callback=execute, goal_callback=lambda g: GoalResponse.ACCEPT,
                 cancel_callback=lambda g: CancelResponse.ACCEPT, callback_group=ReentrantCallbackGroup())
    yield node
    release.set()


def _client(ros_executor, cls, until=None):
    node = ros_executor.add(rclpy.create_node("action_client_test_client"))
    client = cls(node, PushObject, ACTION)
    assert client.wait_for_server(timeout_sec=30.0), "the test's action server was not discovered"
    client._client_handle = SlowToFile(client._client_handle, until)
    return client


def test_answers_that_come_before_their_request_is_filed_are_not_lost(ros_executor, server):
    client = _client(ros_executor, ActionClient)
    for _ in range(3):
        handle = wait_future(client.send_goal_async(PushObject.Goal(target_object="slider")), timeout=30.0,
                             what="the goal's answer")
        assert handle.accepted
        res = wait_future(handle.get_result_async(), timeout=30.0, what="the goal's result")
        assert res.status == GoalStatus.STATUS_SUCCEEDED and res.result.message == "reached"
    handle = wait_future(client.send_goal_async(PushObject.Goal(target_object="hold")), timeout=30.0,
                         what="the held goal's answer")
    cancel = wait_future(handle.cancel_goal_async(), timeout=30.0, what="the cancel's answer")
    assert len(cancel.goals_canceling) == 1
    res = wait_future(handle.get_result_async(), timeout=30.0, what="the cancelled goal's result")
    assert res.status == GoalStatus.STATUS_CANCELED


def test_rclpy_s_own_client_loses_it(ros_executor, server):
    """The forced interleaving meets the race in rclpy's class: the goal's answer is handled before its future is
    filed, and dropped. If a newer rclpy files before it sends (its fix), this fails: then ``ros.actions`` can go."""
    answered = threading.Event()

    class Observed(RclpyActionClient):
        async def execute(self, taken_data):
            await super().execute(taken_data)
            if "goal" in taken_data:
                answered.set()

    client = _client(ros_executor, Observed, until=answered)
    future = client.send_goal_async(PushObject.Goal(target_object="slider"))
    assert answered.is_set() and not future.done()  # answered, and the answer is gone: the future never completes
