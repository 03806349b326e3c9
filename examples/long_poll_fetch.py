"""A consumer's long poll: it returns as soon as a record becomes visible (committed to the
ISR), and returns empty when nothing arrives within its timeout.

Run: .venv/bin/python examples/long_poll_fetch.py
"""

import threading
import time

from kafkactor import Cluster, tracing
from kafkactor.common import TopicPartition

tracing.configure(enabled=False)

with Cluster(brokers=3) as cluster:
    cluster.create_topic("clicks", replication_factor=3)
    consumer = cluster.consumer(max_wait_ms=5000)  # the broker may hold a fetch up to 5 s
    consumer.assign([TopicPartition(topic="clicks", partition=0)])

    started = time.monotonic()
    print(
        "idle poll returned",
        consumer.poll(timeout_ms=500),
        f"after {time.monotonic() - started:.2f}s",
    )

    producer = cluster.producer(acks=-1)
    threading.Timer(0.3, lambda: producer.send("clicks", b"click!", partition=0)).start()
    started = time.monotonic()
    records = consumer.poll(timeout_ms=5000)
    print(
        f"long poll returned {[r.value for r in records]} after "
        f"{time.monotonic() - started:.2f}s (the record was sent at 0.3s)"
    )
