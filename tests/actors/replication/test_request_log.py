"""How the request log names a request's outcome from its partitions' error codes."""

from __future__ import annotations

import pytest

from kafkactor.actors.replication.request_log import fetcher_kind, outcome
from kafkactor.messages import ErrorCode

NONE, TIMED_OUT = ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT
NOT_LEADER = ErrorCode.NOT_LEADER_FOR_PARTITION


@pytest.mark.parametrize(
    ("codes", "expired", "expected"),
    [
        ([NONE, NONE], False, "completed"),
        ([], False, "completed"),
        ([NONE], True, "expired"),  # a long poll whose max wait passed: no error
        ([TIMED_OUT, TIMED_OUT], True, "expired"),
        ([NONE, TIMED_OUT], True, "expired"),  # one partition made it, one timed out
        ([NOT_LEADER, TIMED_OUT], True, "error"),  # another error beside the timeout
        ([NONE, NOT_LEADER], False, "error"),
        ([ErrorCode.INVALID_REQUIRED_ACKS], False, "error"),
        ([TIMED_OUT], False, "error"),  # a timeout code that no timeout of ours produced
    ],
)
def test_outcome(codes: list[ErrorCode], expired: bool, expected: str) -> None:
    assert outcome(codes, expired=expired) == expected


def test_fetcher_kind_tells_consumers_from_followers() -> None:
    assert fetcher_kind(-1) == "consumer"
    assert [fetcher_kind(b) for b in (0, 1, 3)] == ["follower"] * 3
