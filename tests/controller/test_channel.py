"""`ControllerChannel`: which brokers are due their controller requests again, and when."""

from __future__ import annotations

import pytest

from kafkactor.actors.controller.channel import RESEND_BACKOFF_MS, ControllerChannel
from kafkactor.messages import ErrorCode

pytestmark = pytest.mark.timeout(10)

LIVE = {1: 10, 2: 20, 3: 30}  # broker -> epoch


def test_a_request_lost_on_the_way_makes_its_broker_due_after_the_backoff() -> None:
    channel = ControllerChannel()
    channel.sent(7, 3, 30)
    assert channel.answered(7, ErrorCode.NETWORK_EXCEPTION, LIVE, 1_000) == 1_000 + 100
    assert RESEND_BACKOFF_MS == 100
    assert channel.due(LIVE, 1_099) == ([], 1_100)
    assert channel.due(LIVE, 1_100) == ([3], None)
    assert channel.due(LIVE, 5_000) == ([], None)  # once
    assert len(channel) == 0


def test_a_request_timed_out_counts_as_lost() -> None:
    channel = ControllerChannel(backoff_ms=5)
    channel.sent(1, 2, 20)
    assert channel.answered(1, ErrorCode.REQUEST_TIMED_OUT, LIVE, 0) == 5


@pytest.mark.parametrize(
    "error", [ErrorCode.NONE, ErrorCode.STALE_BROKER_EPOCH, ErrorCode.STALE_CONTROLLER_EPOCH]
)
def test_an_answer_from_the_broker_itself_is_not_a_loss(error: ErrorCode) -> None:
    channel = ControllerChannel()
    channel.sent(1, 3, 30)
    assert channel.answered(1, error, LIVE, 0) is None
    assert channel.due(LIVE, 10_000) == ([], None)
    assert len(channel) == 0


def test_a_broker_restarted_since_is_not_sent_its_old_requests_again() -> None:
    channel = ControllerChannel()
    channel.sent(1, 3, 30)
    assert channel.answered(1, ErrorCode.NETWORK_EXCEPTION, {**LIVE, 3: 31}, 0) is None
    assert channel.answered(1, ErrorCode.NETWORK_EXCEPTION, LIVE, 0) is None  # answered once
    channel.sent(2, 3, 30)
    assert channel.answered(2, ErrorCode.NETWORK_EXCEPTION, {1: 10, 2: 20}, 0) is None  # gone


def test_many_losses_make_one_resend_per_broker_and_one_wake_up() -> None:
    channel = ControllerChannel()
    for correlation_id, broker in [(1, 3), (2, 3), (3, 2), (4, 3)]:
        channel.sent(correlation_id, broker, LIVE[broker])
    assert channel.answered(1, ErrorCode.NETWORK_EXCEPTION, LIVE, 0) == 100
    assert channel.answered(2, ErrorCode.NETWORK_EXCEPTION, LIVE, 10) is None
    assert channel.answered(3, ErrorCode.NETWORK_EXCEPTION, LIVE, 50) is None  # wake-up set
    assert channel.due(LIVE, 100) == ([3], 150)
    assert channel.answered(4, ErrorCode.NETWORK_EXCEPTION, LIVE, 120) is None  # one is set
    assert channel.due(LIVE, 150) == ([2], 220)
    assert channel.due(LIVE, 220) == ([3], None)


def test_a_due_broker_that_left_is_not_sent_anything() -> None:
    channel = ControllerChannel()
    channel.sent(1, 3, 30)
    channel.answered(1, ErrorCode.NETWORK_EXCEPTION, LIVE, 0)
    assert channel.due({1: 10, 2: 20}, 500) == ([], None)


def test_a_broker_that_left_before_it_was_due_leaves_no_wake_up() -> None:
    channel = ControllerChannel()
    channel.sent(1, 3, 30)
    channel.answered(1, ErrorCode.NETWORK_EXCEPTION, LIVE, 0)
    assert channel.due({1: 10, 2: 20}, 50) == ([], None)  # 3 was due at 100, and is gone
    assert channel.due(LIVE, 500) == ([], None)


def test_forget_and_clear_drop_what_was_sent() -> None:
    channel = ControllerChannel()
    channel.sent(1, 3, 30)
    channel.sent(2, 2, 20)
    channel.sent(3, 3, 30)
    channel.forget(3)
    assert len(channel) == 1
    assert channel.answered(1, ErrorCode.NETWORK_EXCEPTION, LIVE, 0) is None
    channel.answered(2, ErrorCode.NETWORK_EXCEPTION, LIVE, 0)
    channel.clear()
    assert len(channel) == 0
    assert channel.due(LIVE, 10_000) == ([], None)
