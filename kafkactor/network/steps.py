"""The steps of a request through KafkaApis: what the pure translation asks its actor to do.

`KafkaApis.handle` turns a request into a `Step`: an `Answer` (a response body to encode),
`NoAnswer` (a Produce with acks=0 that succeeded), `Close` (Kafka closes the connection, e.g.
when an acks=0 produce failed), an `Ask` (send this message to that actor and continue with its
answer) or an `Admin` (blocking work such as a ZooKeeper write, run off the actor thread, then
continue with its result).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from kafkactor.network.codec import build

__all__ = ["Admin", "Answer", "Ask", "Close", "NoAnswer", "Step"]

NO_THROTTLE: Final = datetime.timedelta(0)
TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's legal topic names
# the authorized operations of a topic, cluster or group when they were not asked for (KIP-430):
# Integer.MIN_VALUE; there is no authorizer here to compute them when they are
AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648


@dataclass(frozen=True, slots=True)
class Answer:
    """Encode `body` as the response (in `version`, when not the request's: KIP-511)."""

    body: Any
    version: int | None = None


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """The request gets no response (acks=0)."""


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection (after the responses before this one)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Send `request` to the actor at `address`; continue with `then(its response)`."""

    address: str
    request: Request
    then: Callable[[Response], Step]


@dataclass(frozen=True, slots=True)
class Admin:
    """Run `work` off the actor thread (it may block); continue with `then(its result)`."""

    work: Callable[[], Any]
    then: Callable[[Any], Step]


Step = Answer | NoAnswer | Close | Ask | Admin
R = TypeVar("R", bound=Response)


def respond(schema: type[Any], **values: Any) -> Answer:
    """An Answer of `schema` (throttle time 0 in the versions that have one)."""
    return Answer(build(schema, throttle_time=NO_THROTTLE, **values))


def ask_expecting(
    address: str,
    request: Request,
    answered: type[R],
    answer: Callable[[R | None, ErrorCode], Step],
) -> Step:
    """Ask the actor at `address`; `answer(its response, the code for what it omits)`, or
    `answer(None, the failure's code)` when it answered something else (an ErrorResponse)."""

    def then(response: Response) -> Step:
        if isinstance(response, answered):
            return answer(response, ErrorCode.UNKNOWN_SERVER_ERROR)
        return answer(None, error_of(response))

    return Ask(address, request, then)


def millis(value: Any) -> int:
    """A kio duration field (a timedelta) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def error_of(response: Response) -> ErrorCode:
    """The code for partitions a response does not mention (the request failed as a whole)."""
    if isinstance(response, ErrorResponse):
        return response.error_code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def topic_name_error(name: str) -> str | None:
    """Kafka's `Topic.validate` message for an illegal topic name, or None for a legal one."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > 249:
        return f"Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
    if TOPIC_NAME.fullmatch(name) is None:
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


def legal_topic_name(name: str) -> bool:
    return topic_name_error(name) is None


def group_instance_id(body: Any) -> str | None:
    """A request's group instance id (KIP-345; JoinGroup v5+, SyncGroup, Heartbeat v3+,
    OffsetCommit v7+): None for a dynamic member and in the versions without the field."""
    instance: str | None = getattr(body, "group_instance_id", None)
    return instance
