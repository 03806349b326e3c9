"""Consumer groups with a real client: two kafka-python consumers share a topic's partitions.

Three brokers start in this process on free loopback ports. Two KafkaConsumers join the group
"billing" (kafka-python's defaults, each on a thread of its own); kafkactor's group
coordinator hands each half of the partitions, and each commits what it read.
"""

import threading

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from kafkactor import Cluster

ORDERS = 8

with Cluster(brokers=3, listen="127.0.0.1") as cluster:
    cluster.create_topic("orders", partitions=4, replication_factor=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for n in range(ORDERS):
        producer.send("orders", value=b"order %d" % n, partition=n % 4)
    producer.flush()
    producer.close()
    print(f"produced {ORDERS} orders to the 4 partitions of 'orders'")

    read: dict[str, list[tuple[int, int, str]]] = {"consumer-a": [], "consumer-b": []}
    held: dict[str, list[int]] = {}

    def consume(name: str) -> None:
        consumer = KafkaConsumer(
            "orders",
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="billing",
            auto_offset_reset="earliest",  # the orders were produced before the group existed
        )
        while sum(len(records) for records in read.values()) < ORDERS:
            for records in consumer.poll(timeout_ms=500).values():
                read[name] += [(r.partition, r.offset, r.value.decode()) for r in records]
        held[name] = sorted(tp.partition for tp in consumer.assignment())
        consumer.commit()  # the positions: the next consumer of "billing" starts there
        consumer.close()  # and leaves the group

    threads = [threading.Thread(target=consume, args=(name,)) for name in read]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for name, records in read.items():
        shown = ", ".join(f"{value} (p{p}@{offset})" for p, offset, value in sorted(records))
        print(f"{name} held partitions {held[name]} and read {shown or 'nothing'}")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    committed = admin.list_group_offsets("billing")["billing"]
    admin.close()
    print("committed offsets:", {tp.partition: c.offset for tp, c in sorted(committed.items())})
    orders = sorted(value for records in read.values() for _, _, value in records)
    print("each order read exactly once:", orders == sorted(f"order {n}" for n in range(ORDERS)))
