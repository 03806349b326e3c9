"""Kafka's ClientQuotaManager: the byte rate, the throttle time, and the order of quota entities
(behaviours of Kafka's ClientQuotaManagerTest and QuotaUtilsTest, on a ManualClock)."""

from __future__ import annotations

import pytest

from kafkactor.security.client_quota_manager import (
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    QuotaBucket,
    QuotaManagers,
    QuotaType,
    Rate,
    bounded_throttle_time,
    sanitize,
    throttle_time,
)
from kafkactor.timer import ManualClock

pytestmark = pytest.mark.timeout(30)

Configs = dict[str, dict[str, str]]


def manager(
    configs: Configs, kind: QuotaType = QuotaType.PRODUCE, **config: int
) -> tuple[ClientQuotaManager, ManualClock]:
    clock = ManualClock()
    return (
        ClientQuotaManager(kind, configs.get, clock, ClientQuotaManagerConfig(**config)),
        clock,
    )


def test_throttle_time_brings_the_observed_rate_to_the_bound() -> None:
    assert throttle_time(100.0, 50.0, 3000) == 3000
    assert throttle_time(18.2, 18.2, 11_000) == 0
    assert throttle_time(16.5, 20.4, 11_000) < 0
    assert bounded_throttle_time(100.0, 10.0, 10_000, 5000) == 5000
    assert bounded_throttle_time(18.2, 18.2, 10_000, 5000) == 0


def test_rate_counts_at_least_the_whole_windows_before_the_current_one() -> None:
    rate = Rate(samples=2, window_ms=1000)
    rate.record(100, 0)
    # one window of history assumed: 100 bytes over 1.02 s, not over 20 ms
    assert rate.measure(20) == pytest.approx(100 / 1.02)
    assert rate.window_size(20) == 1020


def test_rate_forgets_samples_older_than_all_windows() -> None:
    rate = Rate(samples=3, window_ms=1000)
    rate.record(3000, 0)
    assert rate.measure(2999) == pytest.approx(3000 / 2.999)
    assert rate.measure(3000) == 0.0


def test_a_spike_is_throttled_until_it_rolls_out_of_the_windows() -> None:
    """Kafka's testQuotaViolation: 500 B/s, 400 B/s for 10 s, then 2300 bytes half a second
    later is 6300 bytes over 10.5 s = 600 B/s: throttled (600-500)/500 * 10.5 s = 2100 ms."""
    configs = {"clients/<default>": {"producer_byte_rate": "500"}}
    quotas, clock = manager(configs)
    for _ in range(10):
        assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400) == 0
        clock.advance(1000)
    clock.advance(500)
    assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 2300) == 2100
    clock.advance(2100)  # the channel stays muted that long
    for _ in range(10):
        quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400)
        clock.advance(1000)
    assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 0) == 0


def test_no_quota_no_throttle_and_no_state() -> None:
    quotas, _clock = manager({})
    assert quotas.record_and_get_throttle_time_ms("alice", "app", 10**12) == 0
    assert quotas.quota("alice", "app") is None
    assert quotas.bucket_count == 0


def test_fetch_counts_consumer_byte_rate_only() -> None:
    configs = {"clients/app": {"producer_byte_rate": "100"}}
    fetch, _clock = manager(configs, QuotaType.FETCH)
    assert fetch.quota("u", "app") is None
    configs["clients/app"]["consumer_byte_rate"] = "200"
    assert fetch.quota("u", "app") == 200


def test_unrecord_takes_back_a_throttled_fetch() -> None:
    configs = {"clients/<default>": {"consumer_byte_rate": "100"}}
    fetch, clock = manager(configs, QuotaType.FETCH)
    assert fetch.record_and_get_throttle_time_ms("u", "c", 5000) > 0
    fetch.unrecord("u", "c", 5000)
    clock.advance(10)
    assert fetch.record_and_get_throttle_time_ms("u", "c", 100) == 0


ORDER = [
    ("users/alice/clients/app", 1, QuotaBucket("alice", "app")),
    ("users/alice/clients/<default>", 2, QuotaBucket("alice", "app")),
    ("users/alice", 3, QuotaBucket("alice", "")),
    ("users/<default>/clients/app", 4, QuotaBucket("alice", "app")),
    ("users/<default>/clients/<default>", 5, QuotaBucket("alice", "app")),
    ("users/<default>", 6, QuotaBucket("alice", "")),
    ("clients/app", 7, QuotaBucket("", "app")),
    ("clients/<default>", 8, QuotaBucket("", "app")),
]


def test_quota_precedence_follows_kafkas_order() -> None:
    """Each entity set at once, then removed from the most specific: the next one applies."""
    configs: Configs = {path: {"producer_byte_rate": str(rate)} for path, rate, _ in ORDER}
    quotas, _clock = manager(configs)
    for path, rate, bucket in ORDER:
        assert quotas.quota("alice", "app") == rate, path
        assert quotas.bucket("alice", "app") == bucket, path
        del configs[path]
    assert quotas.quota("alice", "app") is None


def test_user_quota_is_shared_by_the_users_clients_default_one_each() -> None:
    configs = {
        "users/alice": {"producer_byte_rate": "1000"},
        "clients/<default>": {"producer_byte_rate": "1000"},
    }
    quotas, _clock = manager(configs)
    assert quotas.bucket("alice", "a") == quotas.bucket("alice", "b") == QuotaBucket("alice", "")
    # bob has no user quota: each of bob's client ids has a default client-id bucket
    assert quotas.bucket("bob", "a") == QuotaBucket("", "a")
    assert quotas.bucket("bob", "b") == QuotaBucket("", "b")
    assert quotas.record_and_get_throttle_time_ms("alice", "a", 11_000) > 0
    assert quotas.record_and_get_throttle_time_ms("alice", "b", 1) > 0  # same bucket
    assert quotas.record_and_get_throttle_time_ms("bob", "a", 100) == 0


def test_users_and_client_ids_are_sanitized_in_entity_paths() -> None:
    assert sanitize("CN=client,O=Org") == "CN%3Dclient%2CO%3DOrg"
    assert sanitize("a b*c") == "a%20b%2Ac"
    configs = {"users/CN%3Dx/clients/my%20app": {"producer_byte_rate": "42"}}
    quotas, _clock = manager(configs)
    assert quotas.quota("CN=x", "my app") == 42


def test_a_changed_quota_applies_to_the_next_request() -> None:
    configs = {"clients/app": {"producer_byte_rate": "1000000"}}
    quotas, clock = manager(configs)
    assert quotas.record_and_get_throttle_time_ms("u", "app", 20_000) == 0
    configs["clients/app"]["producer_byte_rate"] = "1000"
    clock.advance(1)
    # 20,001 bytes over 10.001 s is 2000 B/s: twice the new bound, one window again
    assert quotas.record_and_get_throttle_time_ms("u", "app", 1) == pytest.approx(10_001, abs=2)


def test_bad_quota_values_are_ignored() -> None:
    configs = {"clients/app": {"producer_byte_rate": "lots"}, "clients/<default>": {}}
    quotas, _clock = manager(configs)
    assert quotas.quota("u", "app") is None


def test_max_value_in_quota_window() -> None:
    configs = {"clients/<default>": {"consumer_byte_rate": "100"}}
    fetch, _clock = manager(configs, QuotaType.FETCH, num_quota_samples=5)
    assert fetch.max_value_in_quota_window("u", "c") == 400
    empty: Configs = {}
    assert QuotaManagers.create(empty.get, ManualClock()).produce.quota("u", "c") is None


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match=r"quota\.window\.num"):
        ClientQuotaManagerConfig(num_quota_samples=0)
