"""The KafkaApis actor's promise that nothing waits for ever: an actor that never answers costs
the request one REQUEST_TIMED_OUT answer, in order, and the actor keeps serving, on a
ManualClock (the sweep runs on the broker's scheduler, which the test's clock drives)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.actors.runtime import Directory, addresses
from kafkactor.messages import Envelope, ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import decode_request
from kafkactor.network.kafka_apis import KafkaApis
from kafkactor.network.kafka_apis_actor import KafkaApisActor
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse
from kafkactor.timer import ManualClock, Scheduler
from tests.network.wire import batch, decode_response, encode_request, produce_request
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(30)

BROKER = 1
TIMEOUT_MS = 5_000


class Silent:
    """An actor address that takes every message and never answers (a lost reply)."""

    def __init__(self) -> None:
        self.received: list[Any] = []

    def tell(self, message: Any) -> None:
        self.received.append(message.payload if isinstance(message, Envelope) else message)


class SocketServerStub:
    """Collects what KafkaApis tells the socket server."""

    def __init__(self) -> None:
        self.responses: list[NetworkResponse] = []
        self._lock = threading.Lock()

    def tell(self, message: Any) -> None:
        payload = message.payload if isinstance(message, Envelope) else message
        with self._lock:
            self.responses.append(payload)


@pytest.fixture
def setup() -> Iterator[tuple[ManualClock, Silent, SocketServerStub, Any]]:
    clock = ManualClock(1_000_000)
    directory = Directory()
    scheduler = Scheduler(clock).startup()
    silent, server = Silent(), SocketServerStub()
    directory.register(addresses.replica_manager(BROKER), silent)
    directory.register(addresses.socket_server(BROKER), server)
    ref = KafkaApisActor.start(
        addresses.kafka_apis(BROKER),
        directory,
        clock,
        BROKER,
        apis=KafkaApis(BROKER),
        scheduler=scheduler,
        answer_timeout_ms=TIMEOUT_MS,
        sweep_ms=100,
    )
    try:
        yield clock, silent, server, ref
    finally:
        ref.stop()
        scheduler.shutdown()


def produce(sequence: int) -> NetworkRequest:
    frame = encode_request(
        ApiKey.PRODUCE, 8, produce_request(8, batch(b"x"), acks=-1), correlation_id=sequence
    )
    header, body = decode_request(frame)
    return NetworkRequest(
        connection_id="c",
        sequence=sequence,
        header=header,
        body=body,
        size=len(frame),
        received_ns=0,
    )


def test_an_ask_nobody_answers_is_answered_request_timed_out_and_the_actor_serves_on(
    setup: tuple[ManualClock, Silent, SocketServerStub, Any],
) -> None:
    clock, silent, server, ref = setup
    ref.tell(produce(0))
    wait_until(lambda: silent.received, message="the produce to reach the replica manager")

    clock.advance(TIMEOUT_MS - 200)  # not yet
    ref.tell(produce(1))  # a later request: it is still served meanwhile
    wait_until(lambda: len(silent.received) == 2, message="the second produce handed on")
    assert server.responses == []

    clock.advance(400)  # the first one's deadline passes; the sweep answers it
    answered = wait_until(lambda: list(server.responses), message="the timed-out answer")
    assert [r.sequence for r in answered] == [0]
    response = answered[0]
    assert response.frame is not None and not response.close
    correlation_id, body = decode_response(response.frame[4:], ApiKey.PRODUCE, 8)
    assert correlation_id == 0
    codes = [p.error_code for t in body.responses for p in t.partition_responses]
    assert codes == [ErrorCode.REQUEST_TIMED_OUT]

    clock.advance(TIMEOUT_MS)
    wait_until(lambda: len(server.responses) == 2, message="the second one timed out too")
    assert ref.is_alive()
