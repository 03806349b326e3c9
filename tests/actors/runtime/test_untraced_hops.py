"""With tracing off a hop carries the bare message: no envelope, ids or clock read.

What a user would notice if that went wrong: requests unanswered or answered twice, an
undeliverable request that hangs its caller, or fault injection (`Directory.drop`, which needs
the sender) letting isolated traffic through. The tests run with tracing off, as the library
starts, and restore whatever tracing was before.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest

from kafkactor import tracing
from kafkactor.actors.runtime import Client, Directory, TracedActor, handles
from kafkactor.messages import Envelope, ErrorCode, ErrorResponse, Request, Response

pytestmark = pytest.mark.timeout(30)
WAIT_S = 10.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Ask(Request):
    """Forwarded to `forward_to` when set, else answered with `Told`."""

    forward_to: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Told(Response):
    by: str = ""
    trace_id: str = ""


class Relay(TracedActor):
    @handles(Ask)
    def _on_ask(self, request: Ask) -> None:
        if request.forward_to:
            self.send(request.forward_to, dataclasses.replace(request, forward_to=""))
            return
        context = self.trace_context
        trace_id = context.trace_id if context is not None else "?"
        self.reply(request, Told(by=self.address, trace_id=trace_id))


class Recorder:
    """A mailbox that keeps what arrives, as it arrives."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.arrived = threading.Event()

    def tell(self, message: Any) -> None:
        self.messages.append(message)
        self.arrived.set()


@pytest.fixture(autouse=True)
def tracing_off() -> Iterator[None]:
    with tracing.configured(enabled=False):
        yield


@pytest.fixture
def directory() -> Directory:
    return Directory()


@pytest.fixture
def start(directory: Directory) -> Iterator[Callable[[str], None]]:
    """Starts a `Relay` at an address; the test's teardown stops them all."""
    refs: list[pykka.ActorRef[Any]] = []
    yield lambda address: refs.append(Relay.start(address, directory))
    for ref in refs:
        ref.stop(block=True, timeout=WAIT_S)


def test_a_request_through_two_actors_is_answered_once_and_travels_bare(
    directory: Directory, start: Callable[[str], None]
) -> None:
    start("a")
    start("b")
    recorder = Recorder()
    directory.register("client/recorder", recorder)
    directory.tell("a", Ask(reply_to="client/recorder", correlation_id=7, forward_to="b"))
    assert recorder.arrived.wait(WAIT_S)
    [answer] = recorder.messages
    assert not isinstance(answer, Envelope)  # nothing wrapped it
    assert answer == Told(correlation_id=7, by="b", trace_id="")


def test_a_client_call_is_answered_with_tracing_off(
    directory: Directory, start: Callable[[str], None]
) -> None:
    start("a")
    client = Client("caller", directory)
    answer = client.call("a", Ask(), timeout_s=WAIT_S)
    assert isinstance(answer, Told) and answer.by == "a"
    assert client.pending == 0


def test_an_untraced_request_to_nobody_is_answered_network_exception(
    directory: Directory, start: Callable[[str], None]
) -> None:
    start("a")
    client = Client("caller", directory)
    answer = client.call("a", Ask(forward_to="nobody"), timeout_s=WAIT_S)
    assert isinstance(answer, ErrorResponse)
    assert answer.error_code is ErrorCode.NETWORK_EXCEPTION


def test_while_fault_injection_is_on_hops_carry_their_sender(
    directory: Directory, start: Callable[[str], None]
) -> None:
    start("a")
    dropped: list[Any] = []
    done = threading.Event()

    def drop(address: str, message: Any) -> bool:
        if getattr(message, "sender", "") != "a":
            return False
        dropped.append(message)  # isolate actor a: its answer is lost
        done.set()
        return True

    directory.drop = drop
    client = Client("caller", directory)
    future = client.request("a", Ask())
    assert done.wait(WAIT_S)
    [message] = dropped
    assert isinstance(message, Envelope) and isinstance(message.payload, Told)
    assert not future.done()
