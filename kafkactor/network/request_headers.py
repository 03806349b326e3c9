"""The two request headers kio lacks: request header v0 and header v2 with a trace context.

Request header v0 (Kafka 3.9's `RequestHeader.json`: no client id) is the header of
ControlledShutdown v0 requests alone. kafkactor's request header v2 is Kafka's (KIP-482) with
one more tagged field carrying a trace context across broker processes (`TRACE_CONTEXT_TAG`);
every flexible request is read and written with it, so it lives apart from the inter-broker
APIs' entities (`inter_broker_schemas`), which the codec loads only when one of those APIs is
first spoken.
"""

from __future__ import annotations

from typing import Any, Final

from kafkactor.network.transcribed import EntityType, Field, entity

__all__ = ["REQUEST_HEADER_V0", "TRACED_REQUEST_HEADER", "TRACE_CONTEXT_TAG"]

_REQUEST_HEADER_FIELDS: Final = (
    Field("request_api_key", "int16", 0),
    Field("request_api_version", "int16", 0),
    Field("correlation_id", "int32", 0),
    Field("client_id", "string", 1, nullable=True),
)

REQUEST_HEADER_V0: Final[Any] = entity(
    "RequestHeader", 0, _REQUEST_HEADER_FIELDS, EntityType.header, module=__name__
)
"""Request header v0 (no client id): the header of ControlledShutdown v0 requests only."""

#: The tag of kafkactor's trace context in request header v2. Kafka numbers a struct's tags
#: from 0 upwards (its RequestHeader has none up to 3.9), so a tag this far away cannot meet
#: one Kafka adds; Kafka's own parser skips tags it does not know, and real Kafka clients never
#: send it. (Its uvarint takes two bytes.)
TRACE_CONTEXT_TAG: Final = 10_000

TRACED_REQUEST_HEADER: Final[Any] = entity(
    "RequestHeader",  # the name kio special-cases: client_id keeps its non-compact form
    2,
    (
        *_REQUEST_HEADER_FIELDS,
        # "<trace id>-<span id>" as text. On the wire a compact string (bytes and strings are
        # written alike in flexible versions); read as bytes, so that a value that is not
        # UTF-8 is ignored by the codec rather than refused by kio
        Field("trace_context", "bytes", 2, tag=TRACE_CONTEXT_TAG),
    ),
    EntityType.header,
    module=__name__,
    flexible_from=2,
)
"""Request header v2 (Kafka's, KIP-482) plus kafkactor's tagged trace context: every field of
kio's header v2, in its order, and `trace_context` (tag `TRACE_CONTEXT_TAG`, default b"", so
a header without it is written and read exactly as kio's)."""
