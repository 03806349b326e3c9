"""Client byte-rate quotas on Produce and Fetch, as Kafka 2.8's KafkaApis applies them.

A Produce's request size and a client Fetch's response size are recorded for the request's
(principal, client id) in the broker's `QuotaManagers`; past the quota the response says how
long the client is throttled (`throttle_time` in its body, when its version has the field) and
the socket server mutes the connection that long after writing it (KIP-219). A throttled Fetch
is answered with no partitions and its size is taken back from the rate, as Kafka does; a
follower's Fetch (`replica_id` >= 0) is not counted against client quotas. A client's Fetch
asks for at most what its quota allows in one window (`limit_fetch`), as Kafka caps
`fetch.max.bytes`, so that a response is never too large to pass the quota at all.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkactor.network.api_versions import ApiKey
from kafkactor.network.request_channel import NetworkRequest
from kafkactor.network.steps import Answer, NoAnswer
from kafkactor.security.client_quota_manager import QuotaManagers

__all__ = ["Throttle", "apply_client_quotas", "limit_fetch"]

_SIZE_PREFIX = 4
_I32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Throttle:
    """A response over its client's quota: the frame to send (its body's `throttle_time` set;
    None for an acks=0 Produce) and how long to mute the connection after it."""

    frame: bytes | None
    throttle_ms: int
    kind: str  # "produce" or "fetch": the quota exceeded
    user: str
    client_id: str


def _with_throttle_time(body: Any, throttle_ms: int, **changes: Any) -> Any:
    names = {f.name for f in dataclasses.fields(body)}
    if "throttle_time" in names:
        changes["throttle_time"] = datetime.timedelta(milliseconds=min(throttle_ms, _I32_MAX))
    return dataclasses.replace(body, **changes) if changes else body


def limit_fetch(quotas: QuotaManagers, request: NetworkRequest) -> NetworkRequest:
    """A client's Fetch with `max_bytes` (and `min_bytes`) at most the bytes its quota allows
    in one quota window (Kafka's `getMaxValueInQuotaWindow` in handleFetchRequest); other
    requests as they are."""
    header, body = request.header, request.body
    if header.api_key != ApiKey.FETCH or getattr(body, "replica_id", -1) >= 0:
        return request
    max_bytes = getattr(body, "max_bytes", None)
    if max_bytes is None:
        return request
    window = quotas.fetch.max_value_in_quota_window(header.principal.name, header.client_id or "")
    if window >= max_bytes:
        return request
    cap = max(1, int(window))
    body = dataclasses.replace(body, max_bytes=cap, min_bytes=min(int(body.min_bytes), cap))
    return dataclasses.replace(request, body=body)


def apply_client_quotas(
    quotas: QuotaManagers,
    request: NetworkRequest,
    step: Answer | NoAnswer,
    frame: bytes | None,
    encode: Callable[[Answer], bytes],
) -> Throttle | None:
    """Record the request's bytes against its quota; a `Throttle` when it is exceeded."""
    header = request.header
    user = header.principal.name
    client_id = header.client_id or ""
    if header.api_key == ApiKey.PRODUCE:
        throttle_ms = quotas.produce.record_and_get_throttle_time_ms(user, client_id, request.size)
        if throttle_ms <= 0:
            return None
        if isinstance(step, Answer):
            frame = encode(
                dataclasses.replace(step, body=_with_throttle_time(step.body, throttle_ms))
            )
        return Throttle(frame, throttle_ms, "produce", user, client_id)
    if header.api_key == ApiKey.FETCH and isinstance(step, Answer) and frame is not None:
        if getattr(request.body, "replica_id", -1) >= 0:
            return None  # a follower: replication quotas, not client quotas
        size = len(frame) - _SIZE_PREFIX
        throttle_ms = quotas.fetch.record_and_get_throttle_time_ms(user, client_id, size)
        if throttle_ms <= 0:
            return None
        quotas.fetch.unrecord(user, client_id, size)
        body = step.body
        if any(f.name == "responses" for f in dataclasses.fields(body)):
            body = _with_throttle_time(body, throttle_ms, responses=())
        else:
            body = _with_throttle_time(body, throttle_ms)
        return Throttle(
            encode(dataclasses.replace(step, body=body)), throttle_ms, "fetch", user, client_id
        )
    return None
