"""Controller failover: kill the controller's broker and watch another broker win the election
with a higher controller epoch, and partitions it led move to their ISR.

Run: .venv/bin/python examples/controller_failover.py
"""

import time

from kafkactor import Cluster, tracing

tracing.configure(enabled=False)

with Cluster(brokers=3, session_timeout_ms=1000) as cluster:
    cluster.create_topic("audit", partitions=3, replication_factor=3)
    old = cluster.controller_id()
    assert old is not None  # Cluster.start waits for the election
    print(f"controller: broker {old}, epoch {cluster.current_controller_epoch()}")
    print("leaders:", {p: cluster.leader("audit", p) for p in range(3)})

    started = time.monotonic()
    cluster.kill_broker(old)  # its ZooKeeper session expires after 1 s
    for partition in range(3):
        cluster.wait_for_leader("audit", partition, not_broker=old)
    while cluster.controller_id() in (None, old):
        time.sleep(0.05)
    print(
        f"after {time.monotonic() - started:.2f}s: controller broker {cluster.controller_id()},"
        f" epoch {cluster.current_controller_epoch()}"
    )
    print(
        "leaders:",
        {p: cluster.leader("audit", p) for p in range(3)},
        "ISRs:",
        {p: cluster.isr("audit", p) for p in range(3)},
    )
