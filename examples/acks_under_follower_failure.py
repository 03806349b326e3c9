"""acks=all against acks=1 while a follower is down, with min.insync.replicas=2.

With one follower dead, acks=all waits until the leader drops it from the ISR, then goes on
with two replicas; with both followers dead it is refused (NOT_ENOUGH_REPLICAS), while acks=1
is still answered by the leader alone.

Run: .venv/bin/python examples/acks_under_follower_failure.py
"""

import time

from kafkactor import Cluster, tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.clients import ProduceError

tracing.configure(enabled=False)
# Kafka's replica.lag.time.max.ms is 10 s; one second keeps the example short.
config = BrokerConfig(
    replica=ReplicaManagerConfig(replica_lag_time_max_ms=1000, replica_fetch_wait_max_ms=200)
)

with Cluster(brokers=3, config=config, zookeeper=None) as cluster:  # leaders stay put
    cluster.create_topic("payments", replication_factor=3, config={"min.insync.replicas": "2"})
    acks_all = cluster.producer(acks=-1, timeout_ms=5000)
    acks_one = cluster.producer(acks=1)
    print("ISR at the start:", cluster.describe_partition("payments", 0).isr)

    follower = cluster.replicas("payments", 0)[1]
    cluster.kill_broker(follower)
    started = time.monotonic()
    acks_all.send("payments", b"with one follower down", partition=0).result(timeout=10)
    print(
        f"acks=all answered after {time.monotonic() - started:.2f}s, once the ISR shrank to",
        cluster.describe_partition("payments", 0).isr,
    )

    cluster.kill_broker(cluster.replicas("payments", 0)[2])
    time.sleep(1.6)  # let the leader notice that the second follower is gone too
    print("ISR now:", cluster.describe_partition("payments", 0).isr)
    try:
        acks_all.send("payments", b"with both followers down", partition=0).result(timeout=10)
    except ProduceError as error:
        print("acks=all refused:", error.error_code.name)
    print(
        "acks=1 still answered:",
        acks_one.send("payments", b"leader only", partition=0).result(timeout=5),
    )
