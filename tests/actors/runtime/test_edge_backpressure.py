"""Backpressure at the edge of the actor system: a `Client` on a caller's thread waits while the
target actor's mailbox holds `Directory.edge_mailbox_limit` messages, and gives up unsent after
its `max_block_ms`; an actor's own sends never wait.

A held actor (its thread parked in a handler) with messages lined up behind it makes a mailbox
of known depth. The directory's `pause` is how a waiting edge sleeps between checks: the tests
observe its first call to know the edge is waiting, instead of watching the clock.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from kafkactor.actors.runtime import (
    Client,
    Directory,
    MailboxFullError,
    TracedActor,
    handles,
)
from kafkactor.messages import ErrorCode, ErrorResponse, Request
from tests.actors.runtime.conftest import WAIT_S, Actors
from tests.actors.runtime.test_actors import Echo, EchoActor, Echoed, hold

pytestmark = pytest.mark.timeout(30)

LIMIT = 2
ECHO = "test/echo"


class ObservedPause:
    """A directory's `pause` that records that an edge is waiting, then sleeps briefly."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.calls = 0

    def __call__(self, seconds: float) -> None:
        self.calls += 1
        self.waiting.set()
        time.sleep(min(seconds, 0.001))


@pytest.fixture
def pause() -> ObservedPause:
    return ObservedPause()


@pytest.fixture
def directory(pause: ObservedPause) -> Directory:
    return Directory(edge_mailbox_limit=LIMIT, pause=pause)


def full_mailbox(actors: Actors, directory: Directory) -> threading.Event:
    """An echo actor held in a handler with LIMIT echoes lined up behind it; set the returned
    event to let it go on."""
    ref = actors.start(EchoActor, ECHO, directory)
    release = hold(ref)
    for n in range(LIMIT):
        assert directory.tell(ECHO, Echo(text=f"filler-{n}"))  # an actor's send: never waits
    assert ref.actor_inbox.qsize() == LIMIT
    return release


class RecordingClient(Client):
    """A client that also records the text of every answer it gets, in order."""

    def __init__(self, name: str, directory: Directory, *, max_block_ms: int) -> None:
        super().__init__(name, directory, max_block_ms=max_block_ms)
        self.texts: list[str] = []

    def tell(self, message: Any) -> None:
        payload = getattr(message, "payload", message)
        self.texts.append(getattr(payload, "text", repr(payload)))
        super().tell(message)


def in_thread(call: Any) -> Future[Any]:
    """Run `call` on a thread of its own (it may block); the Future holds what it returned."""
    done: Future[Any] = Future()

    def run() -> None:
        try:
            done.set_result(call())
        except BaseException as error:  # handed to the test through the Future
            done.set_exception(error)

    threading.Thread(target=run, daemon=True).start()
    return done


def test_a_request_to_a_full_mailbox_waits_for_room_then_is_answered(
    actors: Actors, directory: Directory, pause: ObservedPause
) -> None:
    release = full_mailbox(actors, directory)
    client = Client("edge", directory)

    answer = in_thread(lambda: client.request(ECHO, Echo(text="late")).result(WAIT_S))

    assert pause.waiting.wait(WAIT_S)  # the request is not in the mailbox: the edge waits
    assert not answer.done()
    release.set()
    assert answer.result(WAIT_S) == Echoed(correlation_id=1, text="late", served_by=ECHO)


def test_no_room_within_max_block_ms_fails_the_request_unsent(
    actors: Actors, directory: Directory
) -> None:
    release = full_mailbox(actors, directory)
    client = RecordingClient("edge", directory, max_block_ms=50)

    response = client.request(ECHO, Echo(text="refused")).result(WAIT_S)

    assert isinstance(response, ErrorResponse)
    assert response.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert "max_block_ms=50" in response.message
    assert client.pending == 0
    release.set()
    assert client.call(ECHO, Echo(text="after"), WAIT_S) == Echoed(
        correlation_id=2, text="after", served_by=ECHO
    )
    assert client.texts == ["after"]  # the mailbox is FIFO: "refused" never reached the actor


def test_fire_and_forget_sends_to_a_full_mailbox_raise_after_max_block_ms(
    actors: Actors, directory: Directory
) -> None:
    release = full_mailbox(actors, directory)
    client = Client("edge", directory, max_block_ms=20)
    try:
        with pytest.raises(MailboxFullError, match="was not sent"):
            client.tell_request(ECHO, Echo(text="told"))
        with pytest.raises(MailboxFullError):
            client.send_request(ECHO, Echo(text="sent"), 99)
    finally:
        release.set()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Relay(Request):
    """Sent by the relay actor, through a Client of its own, to `to`."""

    to: str


class RelayActor(TracedActor):
    """Sends an Echo with a Client from inside a handler: an actor's thread."""

    def __init__(self, address: str, directory: Directory) -> None:
        super().__init__(address, directory)
        self.client = Client("relay-edge", directory, max_block_ms=0)

    @handles(Relay)
    def _on_relay(self, request: Relay) -> None:
        self.client.tell_request(request.to, Echo(text="from an actor"))
        self.reply(request, Echoed(text="relayed"))


def test_a_client_on_an_actors_thread_never_waits(actors: Actors, directory: Directory) -> None:
    release = full_mailbox(actors, directory)
    actors.start(RelayActor, "test/relay", directory)
    client = Client("edge", directory)
    try:
        # with max_block_ms=0 a wait would fail at once: the relay's send raising would turn
        # into an ErrorResponse here; it goes past the bound instead
        answer = client.call("test/relay", Relay(to=ECHO), WAIT_S)
        assert answer == Echoed(correlation_id=1, text="relayed")
    finally:
        release.set()


def test_an_actor_that_leaves_while_an_edge_waits_fails_its_request_at_once(
    actors: Actors, directory: Directory, pause: ObservedPause
) -> None:
    release = full_mailbox(actors, directory)
    client = Client("edge", directory, max_block_ms=60_000)
    try:
        answer = in_thread(lambda: client.request(ECHO, Echo(text="orphan")).result(WAIT_S))
        assert pause.waiting.wait(WAIT_S)

        directory.unregister(ECHO)  # what a stopping actor does first

        response = answer.result(WAIT_S)  # not after max_block_ms
        assert isinstance(response, ErrorResponse)
        assert response.error_code is ErrorCode.NETWORK_EXCEPTION
    finally:
        release.set()


def test_below_the_limit_and_without_one_an_edge_never_waits(
    actors: Actors, pause: ObservedPause
) -> None:
    for limit in (LIMIT + 1, None):
        directory = Directory(edge_mailbox_limit=limit, pause=pause)
        address = f"test/echo-{limit}"
        ref = actors.start(EchoActor, address, directory)
        release = hold(ref)
        for n in range(LIMIT):
            directory.tell(address, Echo(text=f"filler-{n}"))
        client = Client(f"edge-{limit}", directory, max_block_ms=0)
        future = client.request(address, Echo(text="straight in"))
        release.set()
        assert future.result(WAIT_S) == Echoed(
            correlation_id=1, text="straight in", served_by=address
        )
    assert pause.calls == 0


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="edge_mailbox_limit"):
        Directory(edge_mailbox_limit=limit)


def test_a_negative_max_block_ms_is_refused() -> None:
    with pytest.raises(ValueError, match="max_block_ms"):
        Client("edge", Directory(), max_block_ms=-1)
