"""The event log: JSON lines through kafkactor's own structlog chain and orjson, with injected
time and trace ids.

Tracing is process-global (kafkactor.tracing's sink, clock and on/off switch), so the
`restore_tracing` fixture puts it back after every test; it also checks that no test changed
structlog's global configuration, which belongs to the application (tests/test_quiet.py checks
the same in a fresh process, where nothing configured tracing before).
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog

from kafkactor import tracing
from kafkactor.timer import ManualClock

THREADS = 8
EVENTS_PER_THREAD = 2000


@pytest.fixture(autouse=True)
def restore_tracing() -> Iterator[None]:
    """Snapshot the global tracing state and put it back (closing any file a test opened)."""
    state = tracing._state
    with state.lock:
        saved = (state.sink, state.owned_sink, state.enabled, state.clock)
    was_configured = structlog.is_configured()
    saved_config = structlog.get_config()
    pykka_logger = logging.getLogger("pykka")
    saved_handlers = list(pykka_logger.handlers)
    yield
    with state.lock:
        if state.owned_sink and state.sink is not None and state.sink is not saved[0]:
            state.sink.close()
        state.sink, state.owned_sink, state.enabled, state.clock = saved
    pykka_logger.handlers[:] = saved_handlers
    # kafkactor never configures structlog: the global configuration is as the test found it
    assert structlog.is_configured() == was_configured
    config = structlog.get_config()
    assert [key for key in saved_config if config[key] != saved_config[key]] == []


def _events(data: bytes) -> list[dict[str, Any]]:
    """Every line of `data` as one JSON object (the whole buffer must be newline-terminated)."""
    assert data == b"" or data.endswith(b"\n")
    events: list[dict[str, Any]] = []
    for line in data.splitlines():
        event = orjson.loads(line)
        assert isinstance(event, dict), line
        events.append(event)
    return events


def test_each_event_is_one_json_line_with_the_common_fields() -> None:
    stream = io.BytesIO()
    clock = ManualClock(1_000)
    tracing.configure(stream=stream, clock=clock)
    assert tracing.is_enabled()
    log = tracing.get_logger("test.tracing")
    log.info("x.y", a=1)
    clock.advance(25)
    log.warning("x.z", b="text", nested={"k": [1, 2]})

    first, second = _events(stream.getvalue())
    assert first["schema"] == second["schema"] == tracing.SCHEMA_VERSION
    assert (first["event"], first["ts_ms"], first["a"]) == ("x.y", 1_000, 1)
    assert (second["event"], second["ts_ms"], second["b"]) == ("x.z", 1_025, "text")
    assert second["nested"] == {"k": [1, 2]}
    assert (first["level"], second["level"]) == ("info", "warning")


def test_an_event_keeps_its_own_ts_ms() -> None:
    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(5_000))
    tracing.get_logger("test.tracing").info("late.event", ts_ms=42)
    (event,) = _events(stream.getvalue())
    assert event["ts_ms"] == 42
    assert event["schema"] == tracing.SCHEMA_VERSION


def test_values_json_cannot_hold_are_rendered_not_raised() -> None:
    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(0))
    tracing.get_logger("test.tracing").info("odd.values", value=object(), data=b"\x00\xff")
    (event,) = _events(stream.getvalue())
    assert event["event"] == "odd.values"
    assert event["value"].startswith("<object object")


def test_events_are_appended_to_a_file(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "events.jsonl"  # the parent directory is created
    path.parent.mkdir()
    path.write_bytes(b'{"event":"earlier"}\n')
    clock = ManualClock(7)
    tracing.configure(path=path, clock=clock)
    tracing.get_logger("test.tracing").info("one", n=1)
    tracing.flush()
    assert [e["event"] for e in _events(path.read_bytes())] == ["earlier", "one"]

    tracing.get_logger("test.tracing").info("two", n=2)
    tracing.close()
    assert [e["event"] for e in _events(path.read_bytes())] == ["earlier", "one", "two"]

    tracing.configure(path=path, clock=clock)  # configuring the same file again appends
    tracing.get_logger("test.tracing").info("three")
    tracing.close()
    events = _events(path.read_bytes())
    assert [e["event"] for e in events] == ["earlier", "one", "two", "three"]
    assert all(e["ts_ms"] == 7 for e in events[1:])


def test_configure_creates_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "events.jsonl"
    tracing.configure(path=str(path))
    tracing.get_logger("test.tracing").info("made")
    tracing.close()
    assert [e["event"] for e in _events(path.read_bytes())] == ["made"]


def test_disabled_tracing_writes_nothing() -> None:
    stream = io.BytesIO()
    tracing.configure(stream=stream, enabled=False, clock=ManualClock(0))
    assert not tracing.is_enabled()
    log = tracing.get_logger("test.tracing")
    log.info("dropped")
    log.error("dropped.too")
    log.critical("dropped.as.well")
    logging.getLogger("pykka").error("boom")
    assert stream.getvalue() == b""


def test_nothing_is_traced_before_configure_or_after_close() -> None:
    state = tracing._state
    with state.lock:  # as in a process that never configured tracing
        state.sink, state.owned_sink, state.enabled = None, False, True
    log = tracing.get_logger("test.tracing")
    assert not tracing.is_enabled()
    assert tracing.new_id() == ""  # nobody reads ids: none is made
    log.info("dropped")  # no sink: dropped, not an error
    logging.getLogger("pykka").error("not routed either")

    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(0))
    assert tracing.is_enabled()
    log.info("kept")
    tracing.close()
    assert not tracing.is_enabled()
    assert tracing.new_id() == ""
    log.info("dropped.after.close")
    tracing.enable()  # the switch alone does not bring a sink back
    assert not tracing.is_enabled()
    log.info("dropped.too")
    assert [e["event"] for e in _events(stream.getvalue())] == ["kept"]


def test_kafkactor_loggers_ignore_structlogs_global_configuration() -> None:
    """An application's structlog setup neither receives kafkactor's events nor changes them."""
    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(3))
    log = tracing.get_logger("test.tracing")
    app_events: list[Any] = []

    def capture(_logger: object, _method: str, event_dict: Any) -> str:
        app_events.append(dict(event_dict))
        raise structlog.DropEvent

    was_configured, saved = structlog.is_configured(), structlog.get_config()
    structlog.configure(processors=[capture])
    try:
        log.info("ours", n=1)
        tracing.get_logger("test.tracing.later").info("ours.too")
        structlog.get_logger("app").info("theirs")
    finally:
        if was_configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()
    assert [e["event"] for e in app_events] == ["theirs"]
    assert [(e["event"], e["ts_ms"]) for e in _events(stream.getvalue())] == [
        ("ours", 3),
        ("ours.too", 3),
    ]


def test_disable_switches_tracing_off() -> None:
    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(0))
    tracing.disable()
    assert not tracing.is_enabled()
    tracing.get_logger("test.tracing").info("dropped")
    assert stream.getvalue() == b""
    tracing.configure(stream=stream)
    assert tracing.is_enabled()


def test_new_ids_are_16_hex_digits_and_unique() -> None:
    tracing.configure(stream=io.BytesIO())
    ids = [tracing.new_id() for _ in range(50_000)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", trace_id) for trace_id in ids)
    assert len(set(ids)) == len(ids)
    assert {trace_id[0] for trace_id in ids} == set("0123456789abcdef")  # all 64 bits random


def test_new_ids_from_many_threads_are_unique() -> None:
    tracing.configure(stream=io.BytesIO())
    per_thread: list[list[str]] = [[] for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)

    def make(ids: list[str]) -> None:
        barrier.wait()
        ids.extend(tracing.new_id() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(ids,)) for ids in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [trace_id for ids in per_thread for trace_id in ids]
    assert len(every) == THREADS * 5_000
    assert len(set(every)) == len(every)


@pytest.mark.parametrize("sink", ["file", "stream"])
def test_events_from_many_threads_are_whole_lines(tmp_path: Path, sink: str) -> None:
    path = tmp_path / "events.jsonl"
    stream = io.BytesIO()
    if sink == "file":
        tracing.configure(path=path, clock=ManualClock(0))
    else:
        tracing.configure(stream=stream, clock=ManualClock(0))
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def emit(thread_no: int) -> None:
        try:
            log = tracing.get_logger("test.threads")
            barrier.wait()
            for seq in range(EVENTS_PER_THREAD):
                log.info("thread.event", thread=thread_no, seq=seq, pad="x" * (seq % 97))
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=emit, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    tracing.close()
    data = path.read_bytes() if sink == "file" else stream.getvalue()

    events = _events(data)
    assert len(events) == THREADS * EVENTS_PER_THREAD
    seen = {(event["thread"], event["seq"]) for event in events}
    assert seen == {(n, s) for n in range(THREADS) for s in range(EVENTS_PER_THREAD)}
    for thread_no in range(THREADS):  # each thread's events stay in its own order
        order = [event["seq"] for event in events if event["thread"] == thread_no]
        assert order == list(range(EVENTS_PER_THREAD))


def test_a_file_sink_writes_pending_lines_on_flush_and_before_switching(tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    tracing.configure(path=first, clock=ManualClock(0))
    log = tracing.get_logger("test.batches")
    for seq in range(3):
        log.info("batch.event", seq=seq)
    tracing.flush()
    assert [e["seq"] for e in _events(first.read_bytes())] == [0, 1, 2]
    log.info("batch.event", seq=3)
    tracing.configure(path=second, clock=ManualClock(0))  # the old file gets its pending line
    log.info("batch.event", seq=4)
    tracing.close()
    assert [e["seq"] for e in _events(first.read_bytes())] == [0, 1, 2, 3]
    assert [e["seq"] for e in _events(second.read_bytes())] == [4]


def test_pykka_errors_become_actor_error_events() -> None:
    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(321))
    tracing.configure(stream=stream, clock=ManualClock(321))  # the handler is added only once
    logging.getLogger("pykka").error("boom %s", "here")
    (event,) = _events(stream.getvalue())
    assert event["event"] == "actor.error"
    assert event["detail"] == "boom here"
    assert event["source"] == "pykka"
    assert event["level"] == "error"
    assert (event["schema"], event["ts_ms"]) == (tracing.SCHEMA_VERSION, 321)


# --- loggers cached before a reconfiguration --------------------------------------------------
# Modules hold module-level loggers (`_log = tracing.get_logger(...)`), taken at import, before
# any `configure`; these tests configure, use such a logger, then configure again.


def test_a_logger_cached_before_configure_writes_to_the_new_stream() -> None:
    first, second = io.BytesIO(), io.BytesIO()
    tracing.configure(stream=first, clock=ManualClock(0))
    log = tracing.get_logger("test.cached")
    log.info("before")
    tracing.configure(stream=second)
    log.info("after")
    assert [e["event"] for e in _events(first.getvalue())] == ["before"]
    assert [e["event"] for e in _events(second.getvalue())] == ["after"]


def test_a_logger_cached_before_a_new_file_writes_to_the_new_file(tmp_path: Path) -> None:
    tracing.configure(path=tmp_path / "a.jsonl", clock=ManualClock(0))
    log = tracing.get_logger("test.cached")
    log.info("before")
    tracing.configure(path=tmp_path / "b.jsonl")
    log.info("after")
    tracing.close()
    assert [e["event"] for e in _events((tmp_path / "a.jsonl").read_bytes())] == ["before"]
    assert [e["event"] for e in _events((tmp_path / "b.jsonl").read_bytes())] == ["after"]


def test_a_logger_cached_before_disable_stops_writing() -> None:
    stream = io.BytesIO()
    tracing.configure(stream=stream, clock=ManualClock(0))
    log = tracing.get_logger("test.cached")
    log.info("before")
    tracing.disable()
    log.info("after")
    assert [e["event"] for e in _events(stream.getvalue())] == ["before"]


def test_configured_traces_inside_the_block_and_puts_tracing_back_as_found(
    tmp_path: Path,
) -> None:
    outer = io.BytesIO()
    tracing.configure(stream=outer, clock=ManualClock(7))
    inner = tmp_path / "inner.jsonl"

    with tracing.configured(path=inner, clock=ManualClock(9)):
        tracing.get_logger("t").info("inside")
    tracing.get_logger("t").info("outside")
    tracing.flush()

    assert [orjson.loads(line)["event"] for line in inner.read_bytes().splitlines()] == ["inside"]
    [line] = outer.getvalue().splitlines()
    assert (orjson.loads(line)["event"], orjson.loads(line)["ts_ms"]) == ("outside", 7)
    assert not outer.closed  # the sink found is the caller's: left open


def test_configured_closes_the_file_it_opened_even_when_the_block_raises(tmp_path: Path) -> None:
    tracing.configure(enabled=False)
    with pytest.raises(RuntimeError), tracing.configured(path=tmp_path / "e.jsonl"):
        sink = tracing._state.sink
        raise RuntimeError("the traced run failed")
    assert sink is not None and sink.closed
    assert not tracing._state.enabled  # off again, as found
