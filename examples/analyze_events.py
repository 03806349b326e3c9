"""Analyse an event log with Spark: run a small cluster with tracing on, then `analyze` the log.

Every message hop and state change is one JSON line. `analyze` turns a log into Parquet tables
(request latencies, purgatory activity, mailbox delays, hops per trace, ...), PNG plots and a
Markdown report that embeds them.

Run: .venv/bin/python examples/analyze_events.py [OUT_DIR]   (without OUT_DIR: a temp dir)
"""

import sys
import tempfile
from pathlib import Path

from kafkactor import Cluster, tracing
from kafkactor.analytics import analyze, spark_session
from kafkactor.common import TopicPartition

with tempfile.TemporaryDirectory(prefix="kafkactor-example-") as scratch:
    events = Path(scratch) / "events.jsonl"
    tracing.configure(path=events)  # from here on, every hop is a line in this file
    with Cluster(brokers=3) as cluster:
        cluster.create_topic(
            "orders", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        acks_all, acks_one = cluster.producer(acks=-1), cluster.producer(acks=1)
        for number in range(200):
            acks_all.send("orders", b"order %d" % number).result(timeout=5)
            acks_one.send("orders", b"audit %d" % number).result(timeout=5)
        consumer = cluster.consumer(max_wait_ms=100)
        consumer.assign([TopicPartition(topic="orders", partition=p) for p in (0, 1)])
        received = 0
        while received < 400:
            received += len(consumer.poll(timeout_ms=1000))
    tracing.close()  # flushed: the log is complete

    spark = spark_session("local[2]")  # Spark in this process, on two cores
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(scratch) / "analysis"
    result = analyze(events, out, spark=spark)
    print(f"{result.events:,} events analysed, {result.corrupt_lines} corrupt lines")
    print(f"report: {result.report} ({len(result.plots)} plots beside it)")

    latency = spark.read.parquet(str(result.tables["latency"]))
    for row in latency.orderBy("request", "fetcher", "acks", "outcome").collect():
        acks = "" if row.acks is None else f", acks={row.acks}"
        print(
            f"  {row.request} ({row.fetcher}{acks}) {row.outcome}: {row['count']} requests,"
            f" p50 {row.p50_ms:.1f} ms, p99 {row.p99_ms:.1f} ms"
        )
    hops = spark.read.parquet(str(result.tables["trace_hops"]))
    longest = hops.orderBy(hops.hops.desc()).first()
    assert longest is not None  # every request is a trace
    print(f"longest trace: {longest.trace_id}, {longest.hops} hops over {longest.actors} actors")
    spark.stop()
    if len(sys.argv) == 1:
        print("(the temp dir goes now; pass a directory to keep the report)")
