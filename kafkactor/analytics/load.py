"""Reading event logs into Spark: the explicit schema, the corrupt lines set aside, one cache."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from kafkactor.analytics.schema import CORRUPT_COLUMN, EVENT_SCHEMA
from kafkactor.trace.inputs import spark_path

FILE_COLUMN = "_file"
"""The file a line came from (a path for local files, the URI for other filesystems)."""

SEQ_COLUMN = "_seq"
"""A number that grows along each file: orders events logged in the same millisecond."""


def is_event(frame: DataFrame) -> Column:
    """True for a line that parsed as an event: valid JSON of the schema's types, with the
    `event` and `ts_ms` every event has. Everything else is a corrupt line."""
    valid = sf.col("event").isNotNull() & sf.col("ts_ms").isNotNull()
    if CORRUPT_COLUMN in frame.columns:
        valid = valid & sf.col(CORRUPT_COLUMN).isNull()
    return valid


def _file_name() -> Column:
    """input_file_name() as a plain path for local files (Spark gives a %-encoded URI)."""
    uri = sf.input_file_name()
    local = sf.regexp_replace(uri, r"^file:(//)?", "")
    # try_url_decode reads '+' as a space (form encoding); a '+' in a URI path is literal.
    decoded = sf.try_url_decode(sf.regexp_replace(local, r"\+", "%2B"))
    return sf.when(uri.startswith("file:"), sf.coalesce(decoded, local)).otherwise(uri)


@dataclass(frozen=True)
class LogCounts:
    """The size of the log: lines that are events, lines set aside, the time it spans."""

    events: int
    corrupt_lines: int
    first_ts_ms: int | None
    last_ts_ms: int | None


@dataclass(frozen=True)
class LoadedLog:
    """The parsed lines of the inputs, cached once: every table is computed from this cache."""

    paths: tuple[str, ...]
    parsed: DataFrame  # every line: the schema's fields, the corrupt text, its file, its order

    @property
    def events(self) -> DataFrame:
        """The lines that are events, with the schema's fields and the order column."""
        return self.parsed.filter(is_event(self.parsed)).drop(CORRUPT_COLUMN, FILE_COLUMN)

    def counts(self) -> LogCounts:
        """Events, corrupt lines and the events' time span, in one pass that fills the cache."""
        valid = is_event(self.parsed)
        row = self.parsed.agg(
            sf.count_if(valid).alias("events"),
            sf.count_if(~valid).alias("corrupt"),
            sf.min(sf.when(valid, sf.col("ts_ms"))).alias("first"),
            sf.max(sf.when(valid, sf.col("ts_ms"))).alias("last"),
        ).first()
        if row is None:
            return LogCounts(0, 0, None, None)
        return LogCounts(
            events=int(row["events"] or 0),
            corrupt_lines=int(row["corrupt"] or 0),
            first_ts_ms=None if row["first"] is None else int(row["first"]),
            last_ts_ms=None if row["last"] is None else int(row["last"]),
        )

    def unpersist(self) -> None:
        """Release the cache (the session may go on to analyse other logs)."""
        self.parsed.unpersist()


def read_events(spark: SparkSession, paths: Sequence[str]) -> LoadedLog:
    """Read JSON-lines event logs with `EVENT_SCHEMA`, never inferring one.

    Mode PERMISSIVE: a line that is not JSON, is cut short (a killed writer's last line) or
    holds a value of the wrong type keeps its text in the corrupt-record column instead of
    failing the read. The frame is cached, which Spark also requires before a query reads
    only the corrupt-record column of a JSON source.
    """
    parsed = (
        spark.read.schema(EVENT_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .json([spark_path(path) for path in paths])
        .withColumn(FILE_COLUMN, _file_name())
        .withColumn(SEQ_COLUMN, sf.monotonically_increasing_id())
        .cache()
    )
    return LoadedLog(paths=tuple(paths), parsed=parsed)
