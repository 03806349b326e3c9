"""The Spark schema of one event-log line: only the fields the analysis reads.

Spark never infers it (inference reads the whole log once more and guesses). Every field is
nullable: an event carries only its own fields, the rest read as null. Fields a log line has
and the schema does not name are skipped, as docs/events.md asks of a reader.

A Spark field has one type, and a value that does not fit it marks the whole line corrupt, so
a field name must mean one type across every event type that has it (docs/events.md keeps
them so). The exceptions: `latency_ms` is whole milliseconds in `produce.response` and
`fetch.response` and has a fraction in `network.response`, so it is read as a double (Spark
reads a JSON integer into a double, never a fraction into a long); `duration_ms` is read as a
double too (whole milliseconds in `group.load` and `txn.completed`, so a fraction from a
future writer would not set a line aside); and `broker.registered`'s `session`, a 64-bit
ZooKeeper session id that can exceed a signed long, is left out, so no such line is ever set
aside.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

CORRUPT_COLUMN = "_corrupt_record"
"""Where Spark keeps the text of a line it could not parse (mode PERMISSIVE)."""

_BROKER_IDS = ArrayType(IntegerType())

# (name, type): Kafka's int32 ids (brokers, partitions, acks, API keys and versions) are
# integers, offsets, times, counts, sizes and epochs are longs (correlation ids too: the
# in-process clients' are not bounded to int32). Grouped by the events that carry them.
_FIELDS: tuple[tuple[str, DataType], ...] = (
    # every event
    ("ts_ms", LongType()),
    ("event", StringType()),
    # actor and trace fields
    ("broker", IntegerType()),
    ("actor", StringType()),
    ("trace_id", StringType()),
    ("span_id", StringType()),
    ("parent_span_id", StringType()),
    ("msg_type", StringType()),
    ("mailbox_ms", LongType()),
    # produce.response / fetch.response
    ("acks", IntegerType()),
    ("fetcher", StringType()),
    ("outcome", StringType()),
    ("latency_ms", DoubleType()),  # network.response's has a fraction
    ("error_codes", ArrayType(LongType())),
    # network.request / network.response / network.bad_request (the socket server)
    ("connection", StringType()),
    ("api_key", IntegerType()),
    ("api", StringType()),
    ("api_version", IntegerType()),
    ("correlation_id", LongType()),
    ("client_id", StringType()),
    ("bytes", LongType()),
    # purgatory.*, timer.*
    ("purgatory", StringType()),
    ("operation_id", LongType()),
    ("delayed", LongType()),
    ("completed", LongType()),
    ("purged", LongType()),
    ("lateness_ms", LongType()),
    # partition.*, controller.*
    ("topic", StringType()),
    ("partition", IntegerType()),
    ("log_end_offset", LongType()),
    ("high_watermark", LongType()),
    ("follower_log_end_offsets", MapType(StringType(), LongType())),
    ("removed", _BROKER_IDS),
    ("replica", IntegerType()),
    ("isr", _BROKER_IDS),
    ("leader", IntegerType()),
    ("leader_epoch", LongType()),
    ("previous_leader", IntegerType()),
    ("unclean", BooleanType()),
    ("reason", StringType()),
    ("controller", IntegerType()),
    ("epoch", LongType()),
    # broker.start
    ("clean_shutdown", BooleanType()),
    # txn.completed (the transaction coordinator)
    ("transactional_id", StringType()),
    ("producer_id", LongType()),
    ("committed", BooleanType()),
    ("cause", StringType()),  # purgatory.complete's too
    ("duration_ms", DoubleType()),  # group.load's is whole milliseconds
    ("partitions", IntegerType()),
)

EVENT_SCHEMA = StructType(
    [StructField(name, kind, nullable=True) for name, kind in _FIELDS]
    + [StructField(CORRUPT_COLUMN, StringType(), nullable=True)]
)
"""One event line as Spark reads it, with the corrupt-record column last."""

EVENT_COLUMNS: tuple[str, ...] = tuple(name for name, _ in _FIELDS)
"""The event fields of `EVENT_SCHEMA`, without the corrupt-record column."""
