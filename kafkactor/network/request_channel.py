"""What crosses between the socket server and the KafkaApis role: Kafka's RequestChannel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkactor.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    """A request's header (Kafka's RequestHeader v0 / v1 / v2), with the address of the client
    that sent it (`client_host`, not on the wire: Kafka's `RequestContext.clientAddress`; ""
    when not known).

    `trace_id` and `parent_span_id` are the trace context another kafkactor broker put in a
    header v2 (a tagged field of kafkactor's own, `request_headers.TRACE_CONTEXT_TAG`), so
    that the request continues the sender's trace; both "" when the request carried none, as
    every request of a real Kafka client, and every header v0 / v1. Header v0 (ControlledShutdown
    v0) has no client id: `client_id` is then "", as Kafka's RequestHeader reads it.

    `principal` and `listener` are the connection's (Kafka's `RequestContext.principal` and
    `listenerName`), set by the socket server: who authenticated on it (`User:ANONYMOUS` without
    SASL or a client certificate) and the name of the listener it came in on, whose endpoints
    Metadata answers."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""
    trace_id: str = ""
    parent_span_id: str = ""
    principal: KafkaPrincipal = ANONYMOUS
    listener: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkRequest:
    """One decoded request from one connection (Kafka's `RequestChannel.Request`).

    `body` is the codec's immutable request entity for this API and version; `size` the
    frame's length; `received_ns` when its last byte was read (monotonic), for latency.
    It is a value local to the broker that read it, so it is not a registered message:
    other processes see the wire bytes, never this.
    """

    connection_id: str
    sequence: int  # this request's place among its connection's requests
    header: RequestHeader
    body: Any
    size: int
    received_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkResponse:
    """The answer to one `NetworkRequest` (Kafka's `RequestChannel.Response`).

    `frame` is the encoded response with its size prefix, or None when the request gets no
    response (a Produce with acks=0); `close` closes the connection after this slot
    (`reason` says why: Kafka closes on an acks=0 produce that failed, and on bad requests).
    `throttle_ms` > 0 mutes the connection for that long after this response is written (a
    client quota was exceeded: Kafka's `ClientQuotaManager` throttling, KIP-219).
    """

    connection_id: str
    sequence: int
    frame: bytes | None
    close: bool = False
    reason: str = ""
    throttle_ms: int = 0
