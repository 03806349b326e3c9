"""The analysis tables, one pure DataFrame -> DataFrame transform each.

Every event table takes the events frame: the columns of `EVENT_SCHEMA` (rows that parsed as
events; a test can build one with `spark.createDataFrame(rows, EVENT_SCHEMA)`), optionally
with the loader's `_seq` order column. `corrupt_lines` takes the loader's parsed frame, every
line. Counts are longs, times doubles in milliseconds, timestamps epoch-millisecond longs;
percentiles are exact (Spark SQL `percentile`). docs/analytics.md says what each number means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from kafkactor.analytics.load import FILE_COLUMN, SEQ_COLUMN, is_event
from kafkactor.analytics.schema import CORRUPT_COLUMN, EVENT_COLUMNS
from kafkactor.analytics.transactions import transactions, txn_rate

TABLES: tuple[str, ...] = (
    "event_counts",
    "latency",
    "api_requests",
    "client_requests",
    "bad_requests",
    "purgatory_timeline",
    "transactions",
    "txn_rate",
    "timer_lateness",
    "hw_lag",
    "timeline",
    "mailbox_delay",
    "trace_hops",
    "corrupt_lines",
)
"""Every table `analyze` writes, in report order; each is `<out>/<name>.parquet`."""

WINDOW_MS = 1000
"""The purgatory timeline's window: one row per broker, purgatory and second."""

TIMELINE_EVENTS: tuple[str, ...] = (
    "broker.start",
    "broker.stop",
    "broker.crash",
    "cluster.broker_killed",
    "cluster.broker_restarted",
    "cluster.broker_isolated",
    "cluster.broker_healed",
    "cluster.session_expired",
    "controller.elected",
    "controller.resign",
    "controller.leader_elected",
    "controller.isr_changed",
    "partition.isr_shrink",
    "partition.isr_expand",
    "partition.become_leader",
)
"""The cluster's history: brokers coming and going, controllers, leaders and ISRs."""

_PURGATORY_EVENTS = ("purgatory.watch", "purgatory.complete", "purgatory.expire", "purgatory.purge")


def _event(name: str) -> Column:
    return sf.col("event") == name


def _stats(
    value: Column, percentiles: Sequence[tuple[str, float]], suffix: str = "_ms"
) -> list[Column]:
    """count, mean, exact percentiles and max of `value`, named `<stat><suffix>`."""
    exact = sf.percentile(value, [fraction for _, fraction in percentiles])
    return [
        sf.count(sf.lit(1)).alias("count"),
        sf.avg(value).alias(f"mean{suffix}"),
        *(exact[i].alias(f"{name}{suffix}") for i, (name, _) in enumerate(percentiles)),
        sf.max(value).cast("double").alias(f"max{suffix}"),
    ]


def _order(frame: DataFrame) -> Column:
    """The order of lines logged in the same millisecond, when the loader numbered them."""
    return sf.col(SEQ_COLUMN) if SEQ_COLUMN in frame.columns else sf.lit(0).cast("long")


def event_counts(events: DataFrame) -> DataFrame:
    """event, count: how many events of each type the log holds, most frequent first."""
    return (
        events.groupBy("event")
        .agg(sf.count(sf.lit(1)).alias("count"))
        .orderBy(sf.desc("count"), "event")
    )


def latency(events: DataFrame) -> DataFrame:
    """Response times of produce and fetch requests, by who asked, acks and outcome.

    From `produce.response` (request "produce", fetcher "producer", its acks) and
    `fetch.response` (request "fetch", fetcher "consumer" / "follower", acks null); the time is
    each response's `latency_ms`, measured on the answering broker's clock from the replica
    manager's receipt of the request.
    """
    produce = _event("produce.response")
    responses = events.filter(produce | _event("fetch.response")).select(
        sf.when(produce, sf.lit("produce")).otherwise(sf.lit("fetch")).alias("request"),
        sf.when(produce, sf.lit("producer")).otherwise(sf.col("fetcher")).alias("fetcher"),
        sf.when(produce, sf.col("acks")).cast("int").alias("acks"),
        sf.col("outcome"),
        sf.col("latency_ms"),
    )
    return (
        responses.groupBy("request", "fetcher", "acks", "outcome")
        .agg(*_stats(sf.col("latency_ms"), [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]))
        .orderBy(sf.desc("request"), "fetcher", sf.asc_nulls_last("acks"), "outcome")
    )


NETWORK_PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p99", 0.99))
"""The percentiles of the wire requests' latency (`api_requests`, `client_requests`)."""


def wire_requests(events: DataFrame) -> DataFrame:
    """One row per request a broker read over the wire: its `network.request` and its
    `network.response` joined on (broker, trace_id) (each request is the root of a trace of
    its own). A full outer join: a request the log has no response of (answered after the log
    ends, or its client closed the connection first) and a response whose request is not in
    the log (the log starts after it) are rows too.

    Columns: api_key, api, api_version (the request's, else the response's), client_id (null
    when the client sent none or the request is not in the log), requested and responded
    (which of the two events the log has), response_bytes, latency_ms (the response's).
    """
    traced = sf.coalesce(sf.col("trace_id"), sf.lit("")) != ""
    requests = events.filter(_event("network.request") & traced).select(
        sf.col("broker"),
        sf.col("trace_id"),
        sf.col("api_key").alias("request_api_key"),
        sf.col("api").alias("request_api"),
        sf.col("api_version").alias("request_api_version"),
        sf.col("client_id"),
        sf.lit(True).alias("requested"),
    )
    responses = events.filter(_event("network.response") & traced).select(
        sf.col("broker"),
        sf.col("trace_id"),
        sf.col("api_key").alias("response_api_key"),
        sf.col("api").alias("response_api"),
        sf.col("api_version").alias("response_api_version"),
        sf.col("bytes").alias("response_bytes"),
        sf.col("latency_ms"),
        sf.lit(True).alias("responded"),
    )
    joined = requests.join(responses, on=["broker", "trace_id"], how="full")
    return joined.select(
        sf.coalesce("request_api_key", "response_api_key").cast("int").alias("api_key"),
        sf.coalesce("request_api", "response_api").alias("api"),
        sf.coalesce("request_api_version", "response_api_version").cast("int").alias("api_version"),
        sf.col("client_id"),
        sf.coalesce(sf.col("requested"), sf.lit(False)).alias("requested"),
        sf.coalesce(sf.col("responded"), sf.lit(False)).alias("responded"),
        sf.col("response_bytes"),
        sf.col("latency_ms").cast("double").alias("latency_ms"),
    )


def _wire_counts() -> list[Column]:
    """requests, responses and unanswered (a request without its response) over the rows of
    `wire_requests`."""
    return [
        sf.count_if(sf.col("requested")).alias("requests"),
        sf.count_if(sf.col("responded")).alias("responses"),
        sf.count_if(sf.col("requested") & ~sf.col("responded")).alias("unanswered"),
    ]


def _wire_latency() -> list[Column]:
    """The responses' `latency_ms`: mean, exact percentiles (`NETWORK_PERCENTILES`) and max
    (null where no response is in the log)."""
    latency = sf.col("latency_ms")
    exact = sf.percentile(latency, [fraction for _, fraction in NETWORK_PERCENTILES])
    return [
        sf.avg(latency).alias("mean_ms"),
        *(exact[i].alias(f"{name}_ms") for i, (name, _) in enumerate(NETWORK_PERCENTILES)),
        sf.max(latency).alias("max_ms"),
    ]


def api_requests(events: DataFrame) -> DataFrame:
    """Requests over the wire per API and version: how many were read (`network.request`),
    answered (`network.response`; `no_response_bytes` of them wrote nothing: an acks=0 produce,
    or a request that closed its connection) and left unanswered in the log, and the
    responses' `latency_ms` (frame read to response written, on the broker)."""
    return (
        wire_requests(events)
        .groupBy("api", "api_key", "api_version")
        .agg(
            *_wire_counts(),
            sf.count_if(sf.col("responded") & (sf.col("response_bytes") == 0)).alias(
                "no_response_bytes"
            ),
            *_wire_latency(),
        )
        .orderBy("api_key", "api_version")
    )


def client_requests(events: DataFrame) -> DataFrame:
    """Requests over the wire per client id (the request header's; null when the client sent
    none, or for a response whose request is not in the log): read, answered, unanswered, and
    the responses' `latency_ms`."""
    return (
        wire_requests(events)
        .groupBy("client_id")
        .agg(*_wire_counts(), *_wire_latency())
        .orderBy(sf.asc_nulls_last("client_id"))
    )


def bad_requests(events: DataFrame) -> DataFrame:
    """Frames the brokers could not serve (`network.bad_request`), by reason: how many, on
    which brokers, the first and the last."""
    return (
        events.filter(_event("network.bad_request"))
        .groupBy("reason")
        .agg(
            sf.count(sf.lit(1)).alias("count"),
            sf.array_sort(sf.collect_set(sf.col("broker").cast("int"))).alias("brokers"),
            sf.min("ts_ms").cast("long").alias("first_ts_ms"),
            sf.max("ts_ms").cast("long").alias("last_ts_ms"),
        )
        .orderBy(sf.desc("count"), "reason")
    )


def purgatory_timeline(events: DataFrame, window_ms: int = WINDOW_MS) -> DataFrame:
    """Each purgatory of each broker per window: operations watched, completed, expired,
    purged, and the most operations waiting at once (`delayed` after any of its events)."""
    completed = sf.when(_event("purgatory.complete"), sf.coalesce(sf.col("completed"), sf.lit(1)))
    purged = sf.when(_event("purgatory.purge"), sf.col("purged"))
    window_start = sf.col("ts_ms") - sf.pmod(sf.col("ts_ms"), sf.lit(window_ms))
    return (
        events.filter(sf.col("event").isin(*_PURGATORY_EVENTS))
        .groupBy(
            sf.col("broker").cast("int").alias("broker"),
            sf.col("purgatory"),
            window_start.cast("long").alias("window_start_ms"),
        )
        .agg(
            sf.count(sf.when(_event("purgatory.watch"), 1)).alias("watched"),
            sf.coalesce(sf.sum(completed), sf.lit(0)).cast("long").alias("completed"),
            sf.count(sf.when(_event("purgatory.expire"), 1)).alias("expired"),
            sf.coalesce(sf.max(sf.col("delayed")), sf.lit(0)).cast("long").alias("max_delayed"),
            sf.coalesce(sf.sum(purged), sf.lit(0)).cast("long").alias("purged"),
        )
        .orderBy("window_start_ms", "broker", "purgatory")
    )


def timer_lateness(events: DataFrame) -> DataFrame:
    """Per broker: how late its shared timer fired delayed operations (`timer.expire`
    `lateness_ms`, the firing time minus the deadline)."""
    return (
        events.filter(_event("timer.expire"))
        .groupBy(sf.col("broker").cast("int").alias("broker"))
        .agg(*_stats(sf.col("lateness_ms"), [("p50", 0.5), ("p99", 0.99)]))
        .orderBy("broker")
    )


def hw_lag(events: DataFrame) -> DataFrame:
    """Per partition leader and follower: how many messages the follower's log end trailed
    the leader's whenever the high watermark advanced (`partition.hw_advance`:
    `log_end_offset` minus the follower's entry in `follower_log_end_offsets`)."""
    samples = events.filter(
        _event("partition.hw_advance") & sf.col("follower_log_end_offsets").isNotNull()
    ).select(
        sf.col("topic"),
        sf.col("partition").cast("int").alias("partition"),
        sf.col("broker").cast("int").alias("leader"),
        sf.col("log_end_offset"),
        sf.explode(sf.col("follower_log_end_offsets")).alias("follower_id", "follower_leo"),
    )
    lag = sf.col("log_end_offset") - sf.col("follower_leo")
    return (
        samples.groupBy(
            "topic", "partition", "leader", sf.col("follower_id").try_cast("int").alias("follower")
        )
        .agg(
            sf.count(sf.lit(1)).alias("samples"),
            sf.avg(lag).alias("mean_lag"),
            sf.percentile(lag, 0.99).alias("p99_lag"),
            sf.max(lag).cast("long").alias("max_lag"),
        )
        .orderBy("topic", "partition", "leader", "follower")
    )


def _ids(column: str) -> Column:
    """An array of broker ids as text: [1, 2, 3]."""
    return sf.concat(
        sf.lit("["), sf.array_join(sf.col(column).cast("array<string>"), ", "), sf.lit("]")
    )


def _labelled(label: str, value: Column) -> Column:
    """`label value`, or null when the value is (concat_ws then leaves it out)."""
    return sf.concat(sf.lit(label), value.cast("string"))


def _timeline_detail() -> Column:
    """One line of text per timeline event, from the fields its type carries."""
    election = sf.concat_ws(
        ", ",
        _labelled("leader ", sf.col("leader")),
        _labelled("leader epoch ", sf.col("leader_epoch")),
        sf.concat(
            sf.lit("previous leader "),
            sf.coalesce(sf.col("previous_leader").cast("string"), sf.lit("none")),
        ),
        _labelled("isr ", _ids("isr")),
        sf.col("reason"),
        sf.when(sf.col("unclean"), sf.lit("unclean")),
    )
    return (
        sf.when(
            _event("broker.start"),
            sf.concat(
                sf.lit("started; last stop clean: "),
                sf.coalesce(sf.col("clean_shutdown").cast("string"), sf.lit("?")),
            ),
        )
        .when(_event("broker.stop"), sf.lit("stopped cleanly"))
        .when(_event("broker.crash"), sf.lit("crashed: nothing flushed"))
        .when(_event("cluster.broker_killed"), sf.lit("killed by the harness"))
        .when(_event("cluster.broker_restarted"), sf.lit("restarted by the harness"))
        .when(_event("cluster.broker_isolated"), sf.lit("fetches to and from it dropped"))
        .when(_event("cluster.broker_healed"), sf.lit("fetches flow again"))
        .when(_event("cluster.session_expired"), sf.lit("its ZooKeeper session expired"))
        .when(
            _event("controller.elected"),
            sf.concat_ws(
                ", ",
                _labelled("controller ", sf.col("controller")),
                _labelled("epoch ", sf.col("epoch")),
            ),
        )
        .when(
            _event("controller.resign"),
            sf.concat_ws(", ", sf.col("reason"), _labelled("epoch ", sf.col("epoch"))),
        )
        .when(_event("controller.leader_elected") | _event("controller.isr_changed"), election)
        .when(
            _event("partition.isr_shrink"),
            sf.concat_ws(
                ", ",
                _labelled("removed ", _ids("removed")),
                _labelled("isr ", _ids("isr")),
                _labelled("hw ", sf.col("high_watermark")),
            ),
        )
        .when(
            _event("partition.isr_expand"),
            sf.concat_ws(
                ", ",
                _labelled("added ", sf.col("replica")),
                _labelled("isr ", _ids("isr")),
                _labelled("hw ", sf.col("high_watermark")),
            ),
        )
        .when(
            _event("partition.become_leader"),
            sf.concat_ws(
                ", ",
                _labelled("leader epoch ", sf.col("leader_epoch")),
                _labelled("isr ", _ids("isr")),
                _labelled("log end ", sf.col("log_end_offset")),
                _labelled("hw ", sf.col("high_watermark")),
            ),
        )
        .otherwise(sf.lit(""))
    )


def timeline(events: DataFrame) -> DataFrame:
    """The cluster's history in time order: broker starts, stops and crashes, controller
    elections and resignations, leader elections, ISR changes and new leaders."""
    return (
        events.filter(sf.col("event").isin(*TIMELINE_EVENTS))
        .orderBy("ts_ms", _order(events))
        .select(
            sf.col("ts_ms"),
            sf.col("event"),
            sf.col("broker").cast("int").alias("broker"),
            sf.col("topic"),
            sf.col("partition").cast("int").alias("partition"),
            _timeline_detail().alias("detail"),
        )
    )


def actor_type(actor: Column) -> Column:
    """An actor address without its ids: broker/1/partition/events-0 -> partition,
    broker/2/purgatory/fetch -> purgatory/fetch, broker/3/fetcher/1 -> fetcher,
    client/producer-3 -> producer."""
    kind = sf.regexp_replace(actor, r"^broker/[0-9]+/", "")
    kind = sf.regexp_replace(kind, r"^client/", "")
    kind = sf.regexp_replace(kind, r"^partition/.*$", "partition")
    kind = sf.regexp_replace(kind, r"/[0-9]+$", "")
    return sf.regexp_replace(kind, r"-[0-9]+$", "")


def mailbox_delay(events: DataFrame) -> DataFrame:
    """Per actor type: how long messages waited in mailboxes (`msg.recv` `mailbox_ms`, the
    receipt minus the send)."""
    return (
        events.filter(_event("msg.recv"))
        .groupBy(actor_type(sf.col("actor")).alias("actor_type"))
        .agg(*_stats(sf.col("mailbox_ms"), [("p50", 0.5), ("p99", 0.99)]))
        .orderBy("actor_type")
    )


def trace_hops(events: DataFrame) -> DataFrame:
    """Per trace (trace_id not empty): hops (`msg.recv` events), distinct receiving actors,
    duration (last minus first `ts_ms` of any event in it) and root (the message type of its
    earliest `msg.send`, a send at the trace's root first among sends of one millisecond)."""
    receipt = _event("msg.recv")
    first_send = sf.min(
        sf.when(
            _event("msg.send"),
            sf.struct(
                sf.col("ts_ms"),
                (sf.coalesce(sf.col("parent_span_id"), sf.lit("")) != "").alias("inner"),
                _order(events).alias("order"),
                sf.col("msg_type"),
            ),
        )
    )
    return (
        events.filter(sf.col("trace_id").isNotNull() & (sf.col("trace_id") != ""))
        .groupBy("trace_id")
        .agg(
            sf.count(sf.when(receipt, 1)).alias("hops"),
            sf.size(sf.collect_set(sf.when(receipt, sf.col("actor")))).cast("long").alias("actors"),
            (sf.max("ts_ms") - sf.min("ts_ms")).cast("long").alias("duration_ms"),
            first_send.getField("msg_type").alias("root"),
        )
    )


def corrupt_lines(parsed: DataFrame) -> DataFrame:
    """file, line: every line that is not an event. `line` is the text Spark kept; for valid
    JSON without `event` or `ts_ms` (`{}`), Spark keeps none, and it is the JSON of the
    fields the schema reads."""
    fields = [name for name in EVENT_COLUMNS if name in parsed.columns]
    kept = sf.col(CORRUPT_COLUMN) if CORRUPT_COLUMN in parsed.columns else sf.lit(None)
    file = sf.col(FILE_COLUMN) if FILE_COLUMN in parsed.columns else sf.input_file_name()
    return parsed.filter(~is_event(parsed)).select(
        file.cast("string").alias("file"),
        sf.coalesce(kept.cast("string"), sf.to_json(sf.struct(*fields))).alias("line"),
    )


EVENT_TABLES: dict[str, Callable[[DataFrame], DataFrame]] = {
    "event_counts": event_counts,
    "latency": latency,
    "api_requests": api_requests,
    "client_requests": client_requests,
    "bad_requests": bad_requests,
    "purgatory_timeline": purgatory_timeline,
    "transactions": transactions,
    "txn_rate": txn_rate,
    "timer_lateness": timer_lateness,
    "hw_lag": hw_lag,
    "timeline": timeline,
    "mailbox_delay": mailbox_delay,
    "trace_hops": trace_hops,
}
"""The tables computed from the events frame (all of `TABLES` but `corrupt_lines`)."""
