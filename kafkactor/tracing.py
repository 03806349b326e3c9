"""The event log: kafkactor's own structlog chain to JSON lines, and the trace ids that tie hops
together.

Every message hop and state change is one JSON object per line with the common fields
`schema`, `ts_ms`, `event` (and, from actors, `broker`, `actor`, `trace_id`, `span_id`,
`parent_span_id`, `msg_type`, `mailbox_ms`). Rendering goes through orjson.

A library prints nothing: until the application calls `configure(...)`, every event is
dropped, and hot paths skip building them (`is_enabled()` is false). kafkactor's loggers are a
private structlog chain (`structlog.wrap_logger` with this module's processors and final
logger), so structlog's global configuration is never read nor changed here: an application's
own structlog setup neither receives kafkactor's events nor is altered by them. Where events go
and whether they are written are looked up per event, so a logger kept by a module since import
follows every later `configure`. A file sink takes lines in batches through a lock-free queue,
so actor threads do not queue on one lock per event; `flush()` (or exit) writes what is
pending, and a process killed outright loses at most the last batch.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import IO, Any, Protocol

import orjson
import structlog


class Clock(Protocol):
    """What stamps `ts_ms` on events: any `kafkactor.timer` clock (`SystemClock`,
    `ManualClock`). A protocol here, since kafkactor.timer's modules log through this one."""

    def now_ms(self) -> int: ...


SCHEMA_VERSION = 1

_ids = random.Random()


# A file sink gathers this many lines before one write; `flush()` and `close()` push the rest.
_BATCH_LINES = 1024


class _TracingState:
    """Where events go and whether they are written at all (one per process).

    Events are written only while `enabled` and a `sink` is set: never before the first
    `configure` (a library is silent until the application asks) and not after `close()`.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.enabled = True
        self.clock: Clock | None = None  # set by `configure`; None: the wall clock
        self.sink: IO[bytes] | None = None
        self.owned_sink = False
        self.configured = False
        # Lines waiting for a batched write to a file sink (`owned_sink`: opened by
        # `configure(path=...)`). deque.append and popleft are atomic, so actor threads add
        # lines without taking the lock.
        self.pending: deque[bytes] = deque()


_state = _TracingState()


def is_enabled() -> bool:
    """Whether events are being written (hot paths check this before building one): false
    until `configure`, after `disable()` or `configure(enabled=False)`, and after `close()`."""
    state = _state
    return state.enabled and state.sink is not None


def new_id() -> str:
    """A random 64-bit id as 16 hex digits (trace and span ids, as in W3C trace context).

    With tracing off nobody reads ids, so none is made ("").
    """
    state = _state
    if not state.enabled or state.sink is None:
        return ""
    return f"{_ids.getrandbits(64):016x}"


class _JsonLinesLogger:
    """The final logger of kafkactor's structlog chain: each rendered event as one line to the
    current sink.

    To a stream, each line is written at once, under the lock (tests read streams as the
    system runs). To a file, lines gather in a lock-free queue and go out in batches of
    `_BATCH_LINES`, one write each, so actor threads rarely meet on the lock; `flush()` or
    `close()` pushes the rest out, as does exit. Lines stay in the order they were logged.
    """

    def msg(self, message: bytes) -> None:
        state = _state
        if state.owned_sink:
            pending = state.pending
            pending.append(message)
            if len(pending) >= _BATCH_LINES:
                with state.lock:
                    _write_pending(state)
            return
        with state.lock:
            sink = state.sink
            if sink is not None:
                sink.write(message + b"\n")

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


_LOGGER = _JsonLinesLogger()


def _write_pending(state: _TracingState) -> None:
    """Write the queued lines to the sink as one chunk (the caller holds the lock)."""
    pending = state.pending
    count = len(pending)
    if not count:
        return
    popleft = pending.popleft
    lines = [popleft() for _ in range(count)]
    sink = state.sink
    if sink is not None and not sink.closed:
        lines.append(b"")
        sink.write(b"\n".join(lines))


def _add_common_fields(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Drop the event when tracing is off or has no sink (never configured, or closed); else
    stamp `ts_ms` (unless given) and `schema`."""
    state = _state
    if not state.enabled or state.sink is None:
        raise structlog.DropEvent
    if "ts_ms" not in event_dict:
        clock = state.clock
        event_dict["ts_ms"] = clock.now_ms() if clock is not None else time.time_ns() // 1_000_000
    event_dict["schema"] = SCHEMA_VERSION
    return event_dict


def _render(_logger: object, _method: str, event_dict: MutableMapping[str, Any]) -> bytes:
    return orjson.dumps(event_dict, default=repr)


# kafkactor's own chain, handed to `structlog.wrap_logger` by `get_logger`: structlog's global
# configuration (`structlog.configure`, the application's) is neither used nor changed.
_PROCESSORS: list[structlog.typing.Processor] = [
    _add_common_fields,
    structlog.processors.add_log_level,
    structlog.processors.format_exc_info,
    _render,
]
_BOUND_LOGGER = structlog.make_filtering_bound_logger(logging.DEBUG)


def _flush_at_exit() -> None:
    """Register `flush` to run at exit, once (on the first `configure`)."""
    if not _state.configured:
        _state.configured = True
        atexit.register(flush)


def configure(
    *,
    path: Path | str | None = None,
    stream: IO[bytes] | None = None,
    enabled: bool = True,
    clock: Clock | None = None,
) -> None:
    """Send events as JSON lines to `path` (appended) or a binary `stream` (default: stderr).

    `enabled=False` switches tracing off. `clock` stamps `ts_ms` on events that carry none
    (default: the system clock).
    """
    state = _state
    with state.lock:
        _write_pending(state)
        if state.owned_sink and state.sink is not None:
            state.sink.close()
        state.owned_sink = False
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            state.sink = Path(path).open("ab", buffering=1 << 16)  # noqa: SIM115 - kept open
            state.owned_sink = True
        else:
            state.sink = stream if stream is not None else sys.stderr.buffer
        state.enabled = enabled
        state.clock = clock  # None: the wall clock, as SystemClock reads it
        _flush_at_exit()
    _route_pykka_logging()


@contextlib.contextmanager
def configured(
    *,
    path: Path | str | None = None,
    stream: IO[bytes] | None = None,
    enabled: bool = True,
    clock: Clock | None = None,
) -> Iterator[None]:
    """`configure(...)` inside a `with` block, then tracing exactly as it was found.

    For a harness or a test that traces one run inside a program that may trace too: the
    sink, switch and clock found are put back, a file the block opened is flushed and closed,
    and a sink found open is left open."""
    state = _state
    with state.lock:
        saved = (state.sink, state.owned_sink, state.enabled, state.clock)
        state.owned_sink = False  # configure() must not close a sink the caller owns
    configure(path=path, stream=stream, enabled=enabled, clock=clock)
    try:
        yield
    finally:
        flush()
        with state.lock:
            if state.owned_sink and state.sink is not None:
                state.sink.close()
            state.sink, state.owned_sink, state.enabled, state.clock = saved


def disable() -> None:
    """Switch tracing off: events are dropped before they are built or rendered."""
    _state.enabled = False


def enable() -> None:
    """Switch tracing back on, to the sink configured last (none before `configure`: then
    events are still dropped)."""
    _state.enabled = True


def flush() -> None:
    """Push buffered events to their stream or file."""
    with _state.lock:
        _write_pending(_state)
        if _state.sink is not None and not _state.sink.closed:
            _state.sink.flush()


def close() -> None:
    """Flush, and close an event file opened by `configure(path=...)`; later events are
    dropped until the next `configure`."""
    state = _state
    with state.lock:
        _write_pending(state)
        if state.sink is not None:
            if not state.sink.closed:
                state.sink.flush()
            if state.owned_sink:
                state.sink.close()
            state.sink = None
            state.owned_sink = False


def get_logger(name: str) -> Any:
    """A logger on kafkactor's private chain (the name only says who asks: events carry none).

    It is bound at once and never depends on structlog's global configuration, which is left
    to the application: where events go is looked up per event, so a module can keep the logger
    from import on. Until `configure`, everything it is given is dropped.
    """
    return structlog.wrap_logger(
        _LOGGER, processors=_PROCESSORS, wrapper_class=_BOUND_LOGGER, context_class=dict
    ).bind()


class _PykkaToEvents(logging.Handler):
    """Pykka reports actor failures on its stdlib logger: turn them into `actor.error` events."""

    def emit(self, record: logging.LogRecord) -> None:
        if is_enabled():
            _pykka_log.error("actor.error", source="pykka", detail=record.getMessage())


_pykka_log = get_logger("pykka")
_pykka_handler = _PykkaToEvents()


def _route_pykka_logging() -> None:
    logger = logging.getLogger("pykka")
    if _pykka_handler not in logger.handlers:
        logger.addHandler(_pykka_handler)
