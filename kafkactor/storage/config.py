"""Per-log settings (Kafka's LogConfig, the topic-level `segment.*`, `retention.*`, ... keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_WEEK_MS = 7 * 24 * 60 * 60 * 1000
_DAY_MS = 24 * 60 * 60 * 1000

COMPACT: Final = "compact"
DELETE: Final = "delete"
_POLICIES: Final = (COMPACT, DELETE)  # the canonical order of "compact,delete"

LONG_MAX: Final = 2**63 - 1  # Java's Long.MAX_VALUE: Kafka's "no limit" for a LONG config

# message.timestamp.type (Kafka's TimestampType names)
CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"
TIMESTAMP_TYPES: Final = (CREATE_TIME, LOG_APPEND_TIME)

# compression.type (Kafka's BrokerCompressionCodec.brokerCompressionOptions)
PRODUCER_COMPRESSION: Final = "producer"
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "snappy", "lz4", "gzip", PRODUCER_COMPRESSION)

# message.format.version: the default is Kafka 2.8's latest ApiVersion
MESSAGE_FORMAT_VERSION: Final = "2.8-IV1"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Kafka's `LogConfig`: how one partition's log rolls, indexes, flushes and retains data.

    Defaults are Kafka's. `-1` / None mean "no limit" as in Kafka's configs.
    """

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes
    segment_ms: int = _WEEK_MS  # segment.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    max_index_size: int = 10 * 1024 * 1024  # segment.index.bytes
    retention_bytes: int = -1  # retention.bytes
    retention_ms: int = _WEEK_MS  # retention.ms (-1: keep forever)
    max_message_bytes: int = 1024 * 1024 + 12  # max.message.bytes: the largest batch accepted
    flush_interval_messages: int | None = None  # flush.messages: flush after this many records
    flush_interval_ms: int | None = None  # flush.ms: the LogManager flushes logs older than this
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms: how long .deleted files linger
    min_insync_replicas: int = 1  # min.insync.replicas: ISR size an acks=-1 produce needs
    # unclean.leader.election.enable: with the whole ISR dead, may a replica outside it lead?
    unclean_leader_election_enable: bool = False
    # cleanup.policy: "delete" (retention), "compact" (the log cleaner), or both (KIP-71),
    # written "compact,delete" whichever order it was given in.
    cleanup_policy: str = DELETE
    delete_retention_ms: int = _DAY_MS  # delete.retention.ms: how long tombstones stay cleaned
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: younger segments stay uncleaned
    # max.compaction.lag.ms: a compacted log's active segment rolls when this old (its
    # `segment.ms` is at most this), and a log holding dirty records this old is cleaned
    # whatever its dirty ratio (KIP-354)
    max_compaction_lag_ms: int = LONG_MAX
    # segment.jitter.ms: a segment rolls by time up to this much (chosen at random per
    # segment, below segment.ms) before segment.ms, so that logs do not all roll at once
    segment_jitter_ms: int = 0
    # message.timestamp.type: "CreateTime" keeps the producer's timestamps; "LogAppendTime"
    # makes the leader stamp each appended batch with its clock
    message_timestamp_type: str = CREATE_TIME
    # message.timestamp.difference.max.ms: with CreateTime, a record whose timestamp is
    # further than this from the leader's clock is refused (INVALID_TIMESTAMP)
    message_timestamp_difference_max_ms: int = LONG_MAX
    # compression.type: "producer" keeps each batch as the producer compressed it; a codec
    # ("uncompressed", "gzip", "snappy", "lz4", "zstd") makes the leader recompress batches
    # written with another codec
    compression_type: str = PRODUCER_COMPRESSION
    # Stored and read back, not acted on (docs/broker-config.md says why):
    preallocate: bool = False  # preallocate
    message_format_version: str = MESSAGE_FORMAT_VERSION  # message.format.version
    message_downconversion_enable: bool = True  # message.downconversion.enable
    # leader/follower.replication.throttled.replicas: "" (none), "*" or "p:b,p:b"
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    @property
    def log_append_time(self) -> bool:
        """Whether the leader stamps batches with its clock (`message.timestamp.type`)."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def max_segment_ms(self) -> int:
        """Kafka's `maxSegmentMs`: a compacted log with a `max.compaction.lag.ms` rolls its
        active segment at the smaller of that and `segment.ms`."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this log (`cleanup.policy` holds `compact`)."""
        return COMPACT in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """Whether retention by time and size applies (`cleanup.policy` holds `delete`)."""
        return DELETE in self.cleanup_policy.split(",")

    def __post_init__(self) -> None:
        self._check_cleanup()
        if self.segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0, got {self.index_interval_bytes}")
        if self.max_index_size < 8:
            raise ValueError(f"max_index_size must hold one entry (8 bytes): {self.max_index_size}")
        if self.max_message_bytes < 0:
            raise ValueError(f"max_message_bytes must be >= 0, got {self.max_message_bytes}")
        if self.flush_interval_messages is not None and self.flush_interval_messages < 0:
            raise ValueError("flush_interval_messages must be >= 0 or None")
        if self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1: {self.min_insync_replicas}")
        if self.flush_interval_ms is not None and self.flush_interval_ms < 0:
            raise ValueError("flush_interval_ms must be >= 0 or None")
        self._check_timestamps_and_codec()

    def _check_timestamps_and_codec(self) -> None:
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"message_timestamp_type must be CreateTime or LogAppendTime: "
                f"{self.message_timestamp_type!r}"
            )
        if self.message_timestamp_difference_max_ms < 0:
            raise ValueError(
                "message_timestamp_difference_max_ms must be >= 0: "
                f"{self.message_timestamp_difference_max_ms}"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression_type must be one of {', '.join(COMPRESSION_TYPES)}: "
                f"{self.compression_type!r}"
            )
        if self.segment_jitter_ms < 0:
            raise ValueError(f"segment_jitter_ms must be >= 0: {self.segment_jitter_ms}")
        if self.max_compaction_lag_ms < 1:
            raise ValueError(f"max_compaction_lag_ms must be >= 1: {self.max_compaction_lag_ms}")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError(
                f"min_compaction_lag_ms ({self.min_compaction_lag_ms}) must not be above "
                f"max_compaction_lag_ms ({self.max_compaction_lag_ms})"
            )

    def _check_cleanup(self) -> None:
        policies = [part.strip() for part in str(self.cleanup_policy).lower().split(",")]
        if not policies or len(set(policies)) != len(policies) or not set(policies) <= {*_POLICIES}:
            raise ValueError(
                f"cleanup_policy must be delete, compact or compact,delete: {self.cleanup_policy!r}"
            )
        canonical = ",".join(policy for policy in _POLICIES if policy in policies)
        object.__setattr__(self, "cleanup_policy", canonical)  # frozen: normalise once, here
        if self.delete_retention_ms < 0:
            raise ValueError(f"delete_retention_ms must be >= 0: {self.delete_retention_ms}")
        if self.min_compaction_lag_ms < 0:
            raise ValueError(f"min_compaction_lag_ms must be >= 0: {self.min_compaction_lag_ms}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(
                f"min_cleanable_dirty_ratio must be in [0, 1]: {self.min_cleanable_dirty_ratio}"
            )
