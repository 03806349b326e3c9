"""Actors on a shared dispatcher: Pykka's refs, asks, proxies and stops, on one thread.

Each test starts actors on its own `Dispatcher` and waits on futures with a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pykka
import pytest

from kafkactor.actors.runtime import Directory, TracedActor, handles
from kafkactor.actors.runtime.dispatcher import Dispatcher, stop_actor
from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from tests.actors.runtime.conftest import WAIT_S

pytestmark = pytest.mark.timeout(30)


@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True, kw_only=True)
class Boom(Request):
    pass


@dataclass(frozen=True, kw_only=True)
class StopPeer:
    address: str


@dataclass(frozen=True, kw_only=True)
class Hold:
    """Holds the dispatcher's thread until the gate opens (so inboxes fill meanwhile)."""

    gate: threading.Event


class Recorder(TracedActor):
    """Appends what it handles, and on which thread, to a shared list."""

    def __init__(self, address: str, directory: Directory, seen: list[Any]) -> None:
        super().__init__(address, directory)
        self.seen = seen

    def on_start(self) -> None:
        super().on_start()
        self.seen.append((self.address, "start", threading.current_thread().name))

    def on_stop(self) -> None:
        self.seen.append((self.address, "stop", threading.current_thread().name))
        super().on_stop()

    @handles(Note)
    def _on_note(self, note: Note) -> str:
        self.seen.append((self.address, note.text, threading.current_thread().name))
        return note.text.upper()

    @handles(Boom)
    def _on_boom(self, request: Boom) -> None:
        raise RuntimeError("boom")

    @handles(Hold)
    def _on_hold(self, hold: Hold) -> None:
        hold.gate.wait(WAIT_S)

    @handles(StopPeer)
    def _on_stop_peer(self, request: StopPeer) -> None:
        ref = self.directory.resolve(request.address)
        assert isinstance(ref, pykka.ActorRef)
        stop_actor(ref, timeout=WAIT_S)
        self.seen.append((self.address, f"stopped {request.address}", ""))


class Answers(TracedActor):
    """Keeps the responses it is sent."""

    def __init__(self, address: str, directory: Directory) -> None:
        super().__init__(address, directory)
        self.responses: list[Response] = []

    @handles(Response)
    def _on_response(self, response: Response) -> None:
        self.responses.append(response)


@pytest.fixture
def dispatcher() -> Iterator[Dispatcher]:
    made = Dispatcher("test-dispatcher", throughput=4)
    yield made
    for ref in pykka.ActorRegistry.get_all():
        if ref.is_alive() and getattr(ref.actor_inbox, "dispatcher", None) is made:
            ref.stop(block=True, timeout=WAIT_S)
    made.shutdown()
    assert not made.is_alive()


def test_two_hundred_actors_share_one_thread_and_each_answers_in_order(
    dispatcher: Dispatcher,
) -> None:
    directory, seen = Directory(), list[Any]()
    before = threading.active_count()
    refs = [Recorder.start_on(dispatcher, f"a/{i}", directory, seen) for i in range(200)]
    assert threading.active_count() == before  # the dispatcher's thread was already there
    futures = [
        ref.ask(Note(f"{i}-{n}"), block=False) for n in range(3) for i, ref in enumerate(refs)
    ]
    assert [f.get(timeout=WAIT_S) for f in futures][:2] == ["0-0", "1-0"]
    for i in range(200):
        mine = [text for address, text, _ in seen if address == f"a/{i}"]
        assert mine == ["start", f"{i}-0", f"{i}-1", f"{i}-2"]  # on_start first, then FIFO
    assert {thread for _, _, thread in seen} == {"test-dispatcher"}


def test_proxies_and_the_directory_reach_a_dispatched_actor(dispatcher: Dispatcher) -> None:
    directory, seen = Directory(), list[Any]()
    ref = Recorder.start_on(dispatcher, "a/1", directory, seen)
    directory.register("a/1", ref)
    assert directory.tell("a/1", Note("hello"))
    assert ref.proxy().address.get(timeout=WAIT_S) == "a/1"
    assert ref.proxy().dispatcher.get(timeout=WAIT_S) is dispatcher
    assert ("a/1", "hello", "test-dispatcher") in seen


def test_a_backlog_does_not_starve_another_actor(dispatcher: Dispatcher) -> None:
    directory, seen = Directory(), list[Any]()
    busy = Recorder.start_on(dispatcher, "busy", directory, seen)
    quiet = Recorder.start_on(dispatcher, "quiet", directory, seen)
    blocker = Recorder.start_on(dispatcher, "blocker", directory, seen)
    gate = threading.Event()
    blocker.tell(Hold(gate=gate))  # the inboxes fill while the thread is held
    for n in range(100):
        busy.tell(Note(f"b{n}"))
    last = quiet.ask(Note("q"), block=False)
    gate.set()
    assert last.get(timeout=WAIT_S) == "Q"
    order = [text for address, text, _ in seen if address in ("busy", "quiet")]
    order = [text for text in order if text != "start"]
    assert order.index("q") <= 4  # after at most one turn of 4 of the busy actor's messages
    busy.ask(Note("end"), timeout=WAIT_S)
    assert [t for a, t, _ in seen if a == "busy" and t.startswith("b")] == [
        f"b{n}" for n in range(100)
    ]


def test_a_failing_request_is_answered_and_the_actor_keeps_running(dispatcher: Dispatcher) -> None:
    directory, seen = Directory(), list[Any]()
    ref = Recorder.start_on(dispatcher, "a/1", directory, seen)
    directory.register("a/1", ref)
    answers = Answers.start_on(dispatcher, "answers", directory)
    directory.register("answers", answers)
    assert directory.tell("a/1", Boom(correlation_id=7, reply_to="answers"))
    assert ref.ask(Note("still"), timeout=WAIT_S) == "STILL"  # the actor lives on
    responses = answers.proxy().responses.get(timeout=WAIT_S)
    assert responses and isinstance(responses[0], ErrorResponse)
    assert responses[0].error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert responses[0].correlation_id == 7


def test_an_actor_stops_another_of_its_dispatcher_after_what_was_queued(
    dispatcher: Dispatcher,
) -> None:
    directory, seen = Directory(), list[Any]()
    stopper = Recorder.start_on(dispatcher, "stopper", directory, seen)
    target = Recorder.start_on(dispatcher, "target", directory, seen)
    directory.register("target", target)
    queued = target.ask(Note("queued"), block=False)
    stopper.ask(StopPeer(address="target"), timeout=WAIT_S)  # no deadlock on the shared thread
    assert queued.get(timeout=WAIT_S) == "QUEUED"
    assert not target.is_alive()
    texts = [text for address, text, _ in seen if address in ("target", "stopper")]
    assert texts.index("queued") < texts.index("stop") < texts.index("stopped target")
    with pytest.raises(pykka.ActorDeadError):
        target.ask(Note("late"), timeout=WAIT_S)
    assert not directory.tell("target", Note("late"))


def test_asks_queued_behind_a_stop_fail_as_pykka_fails_them(dispatcher: Dispatcher) -> None:
    directory, seen = Directory(), list[Any]()
    ref = Recorder.start_on(dispatcher, "a/1", directory, seen)
    blocker = Recorder.start_on(dispatcher, "blocker", directory, seen)
    gate = threading.Event()
    blocker.tell(Hold(gate=gate))
    before = ref.ask(Note("before"), block=False)
    stopping = ref.stop(block=False)
    late = ref.ask(Note("late"), block=False)  # queued behind the stop
    gate.set()
    assert before.get(timeout=WAIT_S) == "BEFORE"
    stopping.get(timeout=WAIT_S)
    with pytest.raises(pykka.ActorDeadError):
        late.get(timeout=WAIT_S)
    assert not ref.is_alive()


def test_a_thread_per_actor_is_still_there_without_a_dispatcher() -> None:
    directory, seen = Directory(), list[Any]()
    ref = Recorder.start_on(None, "a/1", directory, seen)
    try:
        assert ref.ask(Note("x"), timeout=WAIT_S) == "X"
        assert seen[-1][2].startswith("Recorder-")  # Pykka's own thread
        assert ref.proxy().dispatcher.get(timeout=WAIT_S) is None
    finally:
        ref.stop(block=True, timeout=WAIT_S)


def test_shutdown_ends_the_thread() -> None:
    made = Dispatcher("short-lived")
    assert made.is_alive()
    made.shutdown()
    assert not made.is_alive()
    with pytest.raises(ValueError, match="throughput"):
        Dispatcher("bad", throughput=0)
