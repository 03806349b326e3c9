"""The replica manager's settings: Kafka's replica.* broker configuration."""

from __future__ import annotations

from dataclasses import dataclass

VALID_ACKS = (0, 1, -1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaManagerConfig:
    """The broker's `replica.*` settings (Kafka's defaults)."""

    replica_lag_time_max_ms: int = 10_000  # replica.lag.time.max.ms
    replica_fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    replica_fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    replica_fetch_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    replica_fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    # replica.socket.timeout.ms: a fetch unanswered this long after its max wait is given up
    replica_socket_timeout_ms: int = 30_000
    high_watermark_checkpoint_interval_ms: int = 5000  # replica.high.watermark.checkpoint...

    def __post_init__(self) -> None:
        # As Kafka checks: an idle follower's long poll must end (and the follower fetch
        # again) before the leader would count it as lagging.
        if self.replica_fetch_wait_max_ms >= self.replica_lag_time_max_ms:
            raise ValueError(
                f"replica_fetch_wait_max_ms ({self.replica_fetch_wait_max_ms}) must be less "
                f"than replica_lag_time_max_ms ({self.replica_lag_time_max_ms})"
            )
        for name in (
            "replica_fetch_max_bytes",
            "replica_fetch_backoff_ms",
            "high_watermark_checkpoint_interval_ms",
            "replica_lag_time_max_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
