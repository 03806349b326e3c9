"""Kafka's `ClientQuotaManager`: produce and fetch byte-rate quotas per user / client id.

Pure: a rate per quota bucket over `quota.window.num` samples of `quota.window.size.seconds`
(Kafka's `Rate` over a `WindowedSum`), the throttle time that brings an observed rate back to
its bound, and Kafka's order of quota entities. The quota settings are read through a lookup of
raw entity configs (`entity_quota("users/alice/clients/app") -> {"producer_byte_rate": ...}`),
as ZooKeeper's `/config/users` and `/config/clients` hold them; the broker's entity-config cache
provides it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final
from urllib.parse import quote

from kafkactor.timer import Clock

__all__ = [
    "DEFAULT_ENTITY",
    "ClientQuotaManager",
    "ClientQuotaManagerConfig",
    "EntityQuotaLookup",
    "QuotaManagers",
    "QuotaType",
    "Rate",
    "bounded_throttle_time",
    "sanitize",
    "throttle_time",
]

DEFAULT_ENTITY: Final = "<default>"  # Kafka's ConfigEntityName.Default
INACTIVE_SENSOR_EXPIRATION_MS: Final = 3_600_000  # a bucket unused for an hour is dropped

EntityQuotaLookup = Callable[[str], Mapping[str, str] | None]
"""An entity's raw config by its path under /config (`users/<u>`, `clients/<c>`,
`users/<u>/clients/<c>`, names sanitized, `<default>` for the default entity); None when the
entity has no config."""


class QuotaType(Enum):
    """Which bytes a manager counts, by the entity config key that bounds them."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"

    @property
    def kind(self) -> str:
        return self.name.lower()


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: a user or client id as a znode name (URL-encoded UTF-8,
    `*` as %2A, a space as %20)."""
    return quote(name, safe="-_.*").replace("*", "%2A")


def throttle_time(value: float, bound: float, window_ms: int) -> int:
    """Kafka's `QuotaUtils.throttleTime`: the delay X that brings an observed rate O over a
    window W down to the bound T, O * W / (W + X) = T, so X = (O - T) / T * W (rounded;
    negative when O is below T)."""
    return round((value - bound) / bound * window_ms)


def bounded_throttle_time(value: float, bound: float, window_ms: int, max_ms: int) -> int:
    """Kafka's `QuotaUtils.boundedThrottleTime`: `throttle_time`, at most `max_ms`."""
    return min(throttle_time(value, bound, window_ms), max_ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaManagerConfig:
    """`quota.window.num` samples (10 whole windows and the current one by default) of
    `quota.window.size.seconds` each."""

    num_quota_samples: int = 11
    quota_window_size_seconds: int = 1

    def __post_init__(self) -> None:
        if self.num_quota_samples < 1:
            raise ValueError(f"quota.window.num must be at least 1, got {self.num_quota_samples}")
        if self.quota_window_size_seconds < 1:
            size = self.quota_window_size_seconds
            raise ValueError(f"quota.window.size.seconds must be at least 1, got {size}")

    @property
    def window_ms(self) -> int:
        return self.quota_window_size_seconds * 1000


class _Sample:
    __slots__ = ("last_window_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.last_window_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.last_window_ms = now_ms
        self.value = 0.0


class Rate:
    """Kafka's `Rate` over a `WindowedSum` (`SampledStat`): values summed into at most
    `samples` windows of `window_ms`; the rate is their sum over the time they span, counted
    as at least `samples - 1` whole windows (so a first burst is not taken for a high rate),
    per second. Windows older than `samples * window_ms` count as empty."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        self.last_record_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Per second, at `now_ms`."""
        self._purge_obsolete(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size(now_ms) / 1000)

    def window_size(self, now_ms: int) -> int:
        """The time (ms) the rate is taken over: since the oldest live window began, at least
        `samples - 1` whole windows."""
        self._purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest(now_ms).last_window_ms
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return elapsed

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda sample: sample.last_window_ms)

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire_age:
                sample.reset(now_ms)


@dataclass(frozen=True, slots=True)
class QuotaBucket:
    """Whose bytes share one rate (Kafka's quota metric tags): the sanitized user ("" when the
    quota is not per user) and the client id ("" when it is not per client id)."""

    user: str
    client_id: str


class ClientQuotaManager:
    """Kafka's `ClientQuotaManager` for one `QuotaType` (produce or fetch bytes).

    `record_and_get_throttle_time_ms(user, client_id, bytes)` adds the bytes to the rate of
    the request's quota bucket and answers how long the client must be throttled (0 within
    the quota): Kafka's `(O - T) / T * W` over the rate's window. The quota that applies is
    the first of, in Kafka's order: /config/users/<user>/clients/<client-id>,
    /config/users/<user>/clients/<default>, /config/users/<user>,
    /config/users/<default>/clients/<client-id>, /config/users/<default>/clients/<default>,
    /config/users/<default>, /config/clients/<client-id>, /config/clients/<default>; a user
    quota is shared by all the user's client ids, a client-id quota by all users of that
    client id, and a `<default>` quota gives each user / client id a bucket of its own.
    Settings are read through `entity_quota` at each record, so a change applies to the next
    request. Owned by one thread (the KafkaApis actor).
    """

    def __init__(
        self,
        quota_type: QuotaType,
        entity_quota: EntityQuotaLookup,
        clock: Clock,
        config: ClientQuotaManagerConfig | None = None,
    ) -> None:
        self.quota_type = quota_type
        self.entity_quota = entity_quota
        self.clock = clock
        self.config = config if config is not None else ClientQuotaManagerConfig()
        self._rates: dict[QuotaBucket, Rate] = {}
        self._last_expiry_ms = 0

    # -- quotas -----------------------------------------------------------------------------

    def _limit(self, entity_path: str) -> float | None:
        settings = self.entity_quota(entity_path)
        if not settings:
            return None
        raw = settings.get(self.quota_type.value)
        if raw is None:
            return None
        try:
            limit = float(raw)
        except ValueError:
            return None
        return limit if limit > 0 and math.isfinite(limit) else None

    def _has(self, entity_path: str) -> bool:
        return self._limit(entity_path) is not None

    def bucket(self, user: str, client_id: str) -> QuotaBucket:
        """Kafka's `quotaMetricTags`: the bucket of (user, client id) by the first entity in
        the order that has a quota of this type."""
        u, c = sanitize(user), sanitize(client_id)
        d = DEFAULT_ENTITY
        for path, tags in (
            (f"users/{u}/clients/{c}", (u, client_id)),
            (f"users/{u}/clients/{d}", (u, client_id)),
            (f"users/{u}", (u, "")),
            (f"users/{d}/clients/{c}", (u, client_id)),
            (f"users/{d}/clients/{d}", (u, client_id)),
            (f"users/{d}", (u, "")),
        ):
            if self._has(path):
                return QuotaBucket(*tags)
        return QuotaBucket("", client_id)

    def quota_limit(self, bucket: QuotaBucket) -> float | None:
        """Kafka's `quotaLimit` of a bucket (bytes per second); None: unlimited."""
        user, client_id = bucket.user, bucket.client_id
        d = DEFAULT_ENTITY
        paths: tuple[str, ...]
        if user and client_id:
            c = sanitize(client_id)
            paths = (
                f"users/{user}/clients/{c}",
                f"users/{user}/clients/{d}",
                f"users/{d}/clients/{c}",
                f"users/{d}/clients/{d}",
            )
        elif user:
            paths = (f"users/{user}", f"users/{d}")
        elif client_id:
            paths = (f"clients/{sanitize(client_id)}", f"clients/{d}")
        else:
            return None
        for path in paths:
            limit = self._limit(path)
            if limit is not None:
                return limit
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The bytes per second allowed to `user` (a principal's name) with `client_id`."""
        return self.quota_limit(self.bucket(user, client_id))

    # -- recording --------------------------------------------------------------------------

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int | None = None
    ) -> int:
        """Record `value` bytes; the throttle time in ms (0: within the quota, or none)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        bucket = self.bucket(user, client_id)
        bound = self.quota_limit(bucket)
        if bound is None:
            return 0
        rate = self._rate(bucket, now)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        return max(0, throttle_time(observed, bound, rate.window_size(now)))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back bytes recorded for a response that was not sent (Kafka answers a throttled
        fetch with no records, and unrecords its size)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        bucket = self.bucket(user, client_id)
        rate = self._rates.get(bucket)
        if rate is not None:
            rate.record(-value, now)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """Kafka's `getMaxValueInQuotaWindow`: the most bytes one request can carry without
        being throttled for certain (inf without a quota)."""
        bound = self.quota(user, client_id)
        if bound is None:
            return math.inf
        config = self.config
        return bound * (config.num_quota_samples - 1) * config.quota_window_size_seconds

    def _rate(self, bucket: QuotaBucket, now_ms: int) -> Rate:
        if now_ms - self._last_expiry_ms >= 60_000:
            self._last_expiry_ms = now_ms
            for key in [
                key
                for key, rate in self._rates.items()
                if now_ms - rate.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS
            ]:
                del self._rates[key]
        rate = self._rates.get(bucket)
        if rate is None:
            rate = Rate(self.config.num_quota_samples, self.config.window_ms)
            self._rates[bucket] = rate
        return rate

    @property
    def bucket_count(self) -> int:
        return len(self._rates)


@dataclass(frozen=True, slots=True)
class QuotaManagers:
    """Kafka's `QuotaManagers`: the produce and fetch byte-rate managers of one broker."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager

    @classmethod
    def create(
        cls,
        entity_quota: EntityQuotaLookup,
        clock: Clock,
        config: ClientQuotaManagerConfig | None = None,
    ) -> QuotaManagers:
        return cls(
            ClientQuotaManager(QuotaType.PRODUCE, entity_quota, clock, config),
            ClientQuotaManager(QuotaType.FETCH, entity_quota, clock, config),
        )
