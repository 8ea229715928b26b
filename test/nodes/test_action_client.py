"""``ros.actions.ActionClient``: an answer that arrives before rclpy has filed its request's future is not lost
(ros2/rclpy#1123: rclpy's own client logs "Ignoring unexpected goal response" and the future never completes; a
launch test's goal went unanswered that way under ``make test-stress``).

The interleaving is forced, not hoped for, and waits on conditions, not on the wall clock: the client's rcl handle is
wrapped so that each request pauses after it has gone out, before rclpy files its future, until the background
executor has taken the answer. With rclpy's class the pause lasts until the executor has handled the goal's answer,
which it then drops (``test_rclpy_s_own_client_loses_it``: the race is real and the test meets it). With ours the
taken answer waits for the filing."""
import threading

import pytest

rclpy = pytest.importorskip("rclpy")
from action_msgs.msg import GoalStatus  # noqa: E402
from parapush_msgs.action import PushObject  # noqa: E402
from rclpy.action import ActionClient as RclpyActionClient  # noqa: E402
from rclpy.action import ActionServer, CancelResponse, GoalResponse  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402

from conftest import wait_for, wait_future  # noqa: E402
from parapush_ros.ros.actions import ActionClient, ResentGoal  # noqa: E402

ACTION = "/action_client_test/push_object"
class SlowToFile:
    """The client's rcl handle, with a pause after each request is sent (before rclpy files its future) that lasts
    until the executor has taken the request's answer, or until ``until`` is set (at most 30 s either way)."""

    def __init__(self, handle, until=None):
        self._handle, self._until, self._taken = handle, until, threading.Event()

    def __getattr__(self, name):
        attr = getattr(self._handle, name)
        if name.startswith("take_") and name.endswith("_response"):
            def take_and_say(*args):
                taken = attr(*args)
                if all(taken):  # (None, None) when there was nothing to take
                    self._taken.set()
                return taken
            return take_and_say
        if not name.startswith("send_"):
            return attr

        def sent_then_pause(*args):
            self._taken.clear()
            sequence_number = attr(*args)
            waited = self._until or self._taken
            assert waited.wait(30.0), "the executor did not take the request's answer in 30 s"
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


@pytest.fixture
def holding_server(ros_executor):
    """A server that holds back its answer to the first ``hold`` goals (their goal callback waits until the test
    ends), as a transport that lost the answer would, and accepts the rest: (node, goals seen, goals held)."""
    node = ros_executor.add(rclpy.create_node("action_client_test_holding_server"))
    release, seen, held = threading.Event(), [], []
    hold = [0]

    def on_goal(goal):
        seen.append(goal.target_object)
        if len(seen) <= hold[0]:
            held.append(goal.target_object)
            release.wait(60.0)
        return GoalResponse.ACCEPT

    def execute(goal_handle):
        goal_handle.succeed()
        return PushObject.Result(outcome=PushObject.Result.REACHED, message="reached")

    ActionServer(node, PushObject, ACTION, execute_callback=execute, goal_callback=on_goal,
                 callback_group=ReentrantCallbackGroup())
    yield hold, seen, held
    release.set()


def _plain_client(ros_executor):
    node = ros_executor.add(rclpy.create_node("action_client_test_client"))
    client = ActionClient(node, PushObject, ACTION)
    assert client.wait_for_server(timeout_sec=30.0), "the test's action server was not discovered"
    return client


def test_a_goal_whose_answer_does_not_come_is_sent_again(ros_executor, holding_server):
    """The first goal's answer never comes (held back): once ``timeout`` has passed on the caller's clock (a test
    clock here, so no wall time is waited) the goal is sent again, with a goal id of its own, and that answer is
    the one returned."""
    hold, seen, held = holding_server
    hold[0] = 1
    now = [0.0]
    goal = ResentGoal(_plain_client(ros_executor), PushObject.Goal(target_object="slider"), timeout=30.0,
                      attempts=3, clock=lambda: now[0])
    wait_for(lambda: held, timeout=30.0, what="the server to hold the first goal")
    assert goal.poll() is None and goal.sent == 1
    now[0] = 29.9
    assert goal.poll() is None and goal.sent == 1  # not yet due
    first = goal.future
    now[0] = 30.0
    assert goal.poll() is None and goal.sent == 2 and goal.lost == 1
    handle = wait_for(goal.poll, timeout=30.0, what="the second goal's answer")
    assert handle.accepted and not first.done() and len(seen) == 2
    res = wait_future(handle.get_result_async(), timeout=30.0, what="the goal's result")
    assert res.status == GoalStatus.STATUS_SUCCEEDED


def test_no_answer_to_any_goal_is_an_error_naming_how_often_it_was_sent(ros_executor, holding_server):
    hold, _seen, held = holding_server
    hold[0] = 2
    now = [0.0]
    goal = ResentGoal(_plain_client(ros_executor), PushObject.Goal(target_object="slider"), timeout=5.0,
                      attempts=2, clock=lambda: now[0])
    wait_for(lambda: len(held) == 1, timeout=30.0, what="the server to hold the first goal")
    now[0] = 5.0
    assert goal.poll() is None and goal.sent == 2
    wait_for(lambda: len(held) == 2, timeout=30.0, what="the server to hold the second goal")
    now[0] = 10.0
    with pytest.raises(TimeoutError, match=r"no answer to the goal, sent 2 times, 5 s each"):
        goal.poll()


def test_resent_goal_refuses_a_timeout_or_attempts_that_cannot_work():
    with pytest.raises(ValueError, match="timeout must be > 0"):
        ResentGoal(None, None, timeout=0.0)
    with pytest.raises(ValueError, match="attempts >= 1"):
        ResentGoal(None, None, attempts=0)
