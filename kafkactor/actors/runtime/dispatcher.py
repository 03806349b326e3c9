"""A dispatcher: many actors' mailboxes drained by one shared thread (Akka's dispatcher model).

With Pykka's ThreadingActor every actor is a thread, so a broker with thousands of partition
replicas runs thousands of threads, and each hop between two actors is a hand-off between two
threads. A `Dispatcher` runs many Pykka actors on one thread instead: an actor started on it gets
a `DispatchedInbox` in place of its own thread and queue; a message put into an idle inbox puts
the actor on the dispatcher's run queue, and the dispatcher's thread gives each actor on that
queue a turn of up to `throughput` messages, then puts it back at the end of the queue while its
inbox holds more (so a busy partition cannot starve the others). The actor itself is unchanged:
the same `ActorRef`, `tell`, `ask`, proxies, futures and registry; only Pykka's run loop became
a step (`Actor._actor_loop` split into setup, one message at a time, teardown).

One thread per dispatcher: an actor on it never runs concurrently with another actor of the same
dispatcher, which is what lets `stop_actor` stop one of them from another one's handler (see
there). An actor on a dispatcher must not block for long: a handler that waits holds up every
actor of the dispatcher, and one that waits on another actor of the same dispatcher never wakes.
Actors that block (ZooKeeper sessions, the Reaper's wait, fetchers doing network I/O, the
coordinators' synchronous log reads at load) keep a pinned thread (Pykka's `ThreadingActor`).
"""

from __future__ import annotations

import collections
import logging
import queue
import sys
import threading
from typing import TYPE_CHECKING, Any

import pykka

from kafkactor.actors.runtime.directory import mark_actor_thread

if TYPE_CHECKING:
    from pykka._envelope import Envelope

_logger = logging.getLogger("kafkactor.dispatcher")

# Akka's default `throughput` is 5; a partition's turn here is cheap and its messages often come
# in runs (a produce fan-out, a fetch session's round), so a turn takes more before yielding.
DEFAULT_THROUGHPUT = 32


class Dispatcher:
    """Runs many actors' message handling on one shared thread, `throughput` messages per turn.

    Kafka runs a broker's request handling on a fixed pool of request-handler threads
    (`num.io.threads`) whatever the partition count; this is that for the actor system: a
    broker's partitions, purgatories and replica manager share one dispatcher, so the threads a
    broker runs do not grow with its partitions. `shutdown()` ends the thread once the actors
    on it have stopped.
    """

    def __init__(self, name: str, *, throughput: int = DEFAULT_THROUGHPUT) -> None:
        if throughput < 1:
            raise ValueError(f"throughput must be positive, not {throughput}")
        self.name = name
        self.throughput = throughput
        # the actors with messages waiting (each at most once); None ends the thread
        self._ready: queue.SimpleQueue[DispatchedInbox | None] = queue.SimpleQueue()
        # daemon: a dispatcher left running (a test that never stops its broker) does not keep
        # the interpreter alive; a broker stops its actors, then the dispatcher, on shutdown
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopped = False
        self._thread.start()

    # -- scheduling ----------------------------------------------------------------------------

    def schedule(self, inbox: DispatchedInbox) -> None:
        """Give `inbox`'s actor a turn (called once per idle → busy change of the inbox)."""
        self._ready.put(inbox)

    def on_own_thread(self) -> bool:
        """Whether the caller is this dispatcher's thread (i.e. inside one of its actors)."""
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        mark_actor_thread()  # a Client used from a handler never waits for room
        get = self._ready.get
        throughput = self.throughput
        while True:
            inbox = get()
            if inbox is None:
                return
            try:
                inbox.run_turn(throughput)
            except BaseException:  # a bug here must not take every other actor with it
                _logger.exception("dispatcher %s: a turn failed", self.name)

    # -- lifecycle -----------------------------------------------------------------------------

    def shutdown(self, timeout: float | None = 10.0) -> None:
        """End the thread after the turns already queued (stop the actors first)."""
        if self._stopped:
            return
        self._stopped = True
        self._ready.put(None)
        if not self.on_own_thread():
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()


class DispatchedInbox:
    """The mailbox of an actor running on a `Dispatcher`: Pykka's inbox protocol (`put`, `get`,
    `empty`, `qsize`) over a deque, and the actor's turn on the dispatcher's thread.

    `put` from any thread; every other method on the dispatcher's thread only (the actor's
    turn, its stop and its teardown), which is what Pykka expects of an inbox's consumer.
    """

    __slots__ = ("_actor", "_lock", "_messages", "_scheduled", "_started", "dispatcher")

    def __init__(self, actor: pykka.Actor, dispatcher: Dispatcher) -> None:
        self._actor = actor
        self.dispatcher = dispatcher
        self._messages: collections.deque[Envelope[Any]] = collections.deque()
        self._lock = threading.Lock()
        # True while the actor is on the run queue or in its turn: puts then only append. It
        # starts True: `start` schedules the first turn (on_start) itself.
        self._scheduled = True
        self._started = False

    # -- Pykka's inbox protocol ----------------------------------------------------------------

    def put(self, envelope: Envelope[Any], /) -> None:
        with self._lock:
            self._messages.append(envelope)
            if self._scheduled:
                return
            self._scheduled = True
        self.dispatcher.schedule(self)

    def get(self) -> Envelope[Any]:
        return self._messages.popleft()

    def empty(self) -> bool:
        return not self._messages

    def qsize(self) -> int:
        return len(self._messages)

    # -- turns ---------------------------------------------------------------------------------

    def start(self) -> None:
        """The actor's first turn runs its `on_start`, before any message."""
        self.dispatcher.schedule(self)

    def run_turn(self, throughput: int) -> None:
        """Handle up to `throughput` messages; back on the run queue if more are waiting."""
        actor = self._actor
        if not self._started:
            self._started = True
            actor._actor_loop_setup()
        stopped = actor.actor_stopped
        messages = self._messages
        for _ in range(throughput):
            if stopped.is_set() or not messages:
                break
            _handle(actor, messages.popleft())
        if stopped.is_set():
            actor._actor_loop_teardown()  # asks still queued get ActorDeadError
        with self._lock:
            if not messages:
                self._scheduled = False
                return
        self.dispatcher.schedule(self)  # more waiting: after the others' turns

    def stop_now(self) -> None:
        """Stop the actor on this (its dispatcher's) thread, as `ActorRef.stop(block=True)`
        would: what is already in its inbox is handled first, then `on_stop`, then teardown."""
        actor = self._actor
        if actor.actor_stopped.is_set():
            return
        if not self._started:
            self._started = True
            actor._actor_loop_setup()
        messages = self._messages
        while messages and not actor.actor_stopped.is_set():
            _handle(actor, messages.popleft())
        if not actor.actor_stopped.is_set():
            actor._stop()
        actor._actor_loop_teardown()


def _handle(actor: pykka.Actor, envelope: Envelope[Any]) -> None:
    """One message, as Pykka's `_actor_loop_running` handles it: the answer to an ask goes to
    its future, an exception to an ask is the caller's, one from a tell fails the actor."""
    reply_to = envelope.reply_to
    try:
        response = actor._handle_receive(envelope.message)
        if reply_to is not None:
            reply_to.set(response)
    except Exception:
        if reply_to is not None:
            reply_to.set_exception()
        else:
            actor._handle_failure(*sys.exc_info())
            try:
                actor.on_failure(*sys.exc_info())
            except Exception:
                actor._handle_failure(*sys.exc_info())
    except BaseException:
        # Pykka stops every actor here; on a shared thread that would wait on itself, so only
        # this actor stops, and the error is logged.
        _logger.exception("%s stopped by %s", actor, sys.exc_info()[0])
        actor._stop()


def stop_actor(ref: pykka.ActorRef[Any], *, timeout: float | None) -> None:
    """Stop the actor behind `ref` and wait until it has stopped.

    From another actor of the same dispatcher, the stop runs here and now (waiting on its future
    would wait on this very thread); from anywhere else it is `ref.stop(block=True)`.
    """
    inbox = ref.actor_inbox
    if isinstance(inbox, DispatchedInbox) and inbox.dispatcher.on_own_thread():
        inbox.stop_now()
        return
    if ref.is_alive():
        ref.stop(block=True, timeout=timeout)
