"""Client byte-rate quotas on Produce and Fetch responses (kafkactor/network/client_quotas.py):
what is recorded, what the throttled response says, and who is exempt."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from kafkactor.network.api_versions import ApiKey
from kafkactor.network.client_quotas import apply_client_quotas, limit_fetch
from kafkactor.network.codec import decode_response, encode_response
from kafkactor.network.request_channel import NetworkRequest, RequestHeader
from kafkactor.network.steps import Answer, NoAnswer
from kafkactor.security.client_quota_manager import QuotaManagers
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.timer import ManualClock

from kio.schema.produce.v7.response import ProduceResponse  # isort: skip (after the codec)
from kio.static.primitive import i32Timedelta  # isort: skip

NONE = i32Timedelta.parse(datetime.timedelta(0))

pytestmark = pytest.mark.timeout(30)


@dataclasses.dataclass(frozen=True)
class FetchBody:
    throttle_time: datetime.timedelta
    responses: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class FetchRequestBody:
    replica_id: int = -1
    max_bytes: int = 52_428_800  # fetch.max.bytes' default
    min_bytes: int = 1


def request(api_key: int, size: int, body: Any = None, version: int = 7) -> NetworkRequest:
    return NetworkRequest(
        connection_id="c1",
        sequence=0,
        header=RequestHeader(
            api_key=api_key,
            api_version=version,
            correlation_id=9,
            client_id="app",
            principal=KafkaPrincipal.user("alice"),
        ),
        body=body,
        size=size,
        received_ns=0,
    )


def quotas(**settings: str) -> QuotaManagers:
    configs = {"users/alice": settings}
    return QuotaManagers.create(configs.get, ManualClock())


def encode_produce(answer: Answer) -> bytes:
    return encode_response(ApiKey.PRODUCE, 7, 9, answer.body)


def test_produce_within_quota_is_untouched() -> None:
    managers = quotas(producer_byte_rate="1000000")
    answer = Answer(ProduceResponse(responses=(), throttle_time=NONE))
    frame = encode_produce(answer)
    assert apply_client_quotas(managers, request(0, 1000), answer, frame, encode_produce) is None


def test_produce_over_quota_says_its_throttle_time_in_the_response() -> None:
    managers = quotas(producer_byte_rate="1000")
    answer = Answer(ProduceResponse(responses=(), throttle_time=NONE))
    # 21,000 bytes over 10 windows of 1 s at 1000 B/s: (2100 - 1000) / 1000 * 10 s
    throttle = apply_client_quotas(
        managers, request(0, 21_000), answer, encode_produce(answer), encode_produce
    )
    assert throttle is not None
    assert (throttle.kind, throttle.user, throttle.client_id) == ("produce", "alice", "app")
    assert throttle.throttle_ms == 11_000
    assert throttle.frame is not None
    _, body = decode_response(ApiKey.PRODUCE, 7, throttle.frame[4:])
    assert body.throttle_time == datetime.timedelta(milliseconds=11_000)


def test_acks_0_produce_is_throttled_without_a_response() -> None:
    managers = quotas(producer_byte_rate="1000")
    throttle = apply_client_quotas(managers, request(0, 50_000), NoAnswer(), None, encode_produce)
    assert throttle is not None and throttle.frame is None and throttle.throttle_ms > 0


def test_throttled_fetch_has_no_partitions_and_is_not_counted() -> None:
    managers = quotas(consumer_byte_rate="1000")
    encoded: list[Any] = []

    def encode(answer: Answer) -> bytes:
        encoded.append(answer.body)
        return b"\0" * 8

    answer = Answer(FetchBody(datetime.timedelta(0), ("records",)))
    fetch = request(ApiKey.FETCH, 60, FetchRequestBody(), version=11)
    throttle = apply_client_quotas(managers, fetch, answer, b"\0" * 30_004, encode)
    assert throttle is not None and throttle.kind == "fetch"
    assert encoded == [FetchBody(datetime.timedelta(milliseconds=throttle.throttle_ms), ())]
    # the 30,000 bytes were taken back: a small fetch right after passes
    small = apply_client_quotas(managers, fetch, answer, b"\0" * 104, encode)
    assert small is None


def test_a_followers_fetch_is_not_throttled_by_client_quotas() -> None:
    managers = quotas(consumer_byte_rate="1")
    answer = Answer(FetchBody(datetime.timedelta(0), ("records",)))
    follower = request(ApiKey.FETCH, 60, FetchRequestBody(replica_id=2), version=11)
    assert apply_client_quotas(managers, follower, answer, b"\0" * 10**6, encode_produce) is None


def test_other_apis_are_not_counted() -> None:
    managers = quotas(producer_byte_rate="1", consumer_byte_rate="1")
    metadata = request(ApiKey.METADATA, 10**6)
    assert apply_client_quotas(managers, metadata, NoAnswer(), None, encode_produce) is None
    assert managers.produce.bucket_count == managers.fetch.bucket_count == 0


def test_a_clients_fetch_asks_for_at_most_one_quota_window() -> None:
    """Kafka caps a client's fetch at getMaxValueInQuotaWindow: the quota times the whole
    windows, so one response can always pass the quota."""
    managers = quotas(consumer_byte_rate="1000")  # 10 whole windows of 1 s: 10,000 bytes
    fetch = request(ApiKey.FETCH, 60, FetchRequestBody(min_bytes=50_000), version=11)
    limited = limit_fetch(managers, fetch).body
    assert (limited.max_bytes, limited.min_bytes) == (10_000, 10_000)
    follower = request(ApiKey.FETCH, 60, FetchRequestBody(replica_id=2), version=11)
    assert limit_fetch(managers, follower) is follower
    unlimited = quotas(producer_byte_rate="1000")
    assert limit_fetch(unlimited, fetch) is fetch
