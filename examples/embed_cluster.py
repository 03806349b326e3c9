"""Embed a three-broker cluster in a program: create a topic, produce with acks=all, consume.

Run: .venv/bin/python examples/embed_cluster.py
"""

from kafkactor import Cluster, tracing
from kafkactor.clients import ConsumerRecord
from kafkactor.common import TopicPartition

tracing.configure(enabled=False)  # no event log for this one

with Cluster(brokers=3) as cluster:  # embedded ZooKeeper, a controller, data in a temp dir
    cluster.create_topic(
        "orders", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    producer = cluster.producer(acks=-1)  # acks=all: answered once the ISR has the record
    for number in range(10):
        metadata = producer.send("orders", b"order %d" % number, key=b"customer-%d" % (number % 3))
        print("sent", metadata.result(timeout=5))

    consumer = cluster.consumer()
    consumer.assign([TopicPartition(topic="orders", partition=p) for p in range(3)])
    received: list[ConsumerRecord] = []
    while len(received) < 10:
        received += consumer.poll(timeout_ms=1000)
    for record in sorted(received, key=lambda r: (r.partition, r.offset)):
        print(f"partition {record.partition} offset {record.offset}: {record.value!r}")
