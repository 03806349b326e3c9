"""A transactional producer with confluent-kafka: one transaction committed, one aborted; a
read_committed consumer sees only the committed one, a read_uncommitted consumer both."""

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkactor import Cluster


def read_all(bootstrap: str, isolation: str) -> list[str]:
    """Every value of partition 0, read to its end (for read_committed: its last stable offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"audit-{isolation}",
            "isolation.level": isolation,
            "enable.partition.eof": True,  # an event when the read reaches the end
        }
    )
    consumer.assign([TopicPartition("payments", 0, 0)])
    values: list[str] = []
    while True:
        message = consumer.poll(30.0)
        if message is None or message.error() is not None:  # the end, or nothing in 30 s
            break
        values.append(bytes(message.value() or b"").decode())
    consumer.close()
    return values


with Cluster(brokers=3, listen="127.0.0.1") as cluster:
    cluster.create_topic("payments", partitions=1, replication_factor=3)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "payments-1"}
    )
    producer.init_transactions(10)

    producer.begin_transaction()
    for n in range(3):
        producer.produce("payments", value=b"paid %d" % n)
    producer.commit_transaction(10)
    print("committed: paid 0, paid 1, paid 2")

    producer.begin_transaction()
    producer.produce("payments", value=b"refund 0")
    producer.flush(10)  # sent and written: an abort would otherwise drop it unsent
    producer.abort_transaction(10)
    print("aborted: refund 0")
    del producer  # librdkafka's producer closes when its last reference goes

    print("read_committed sees:", read_all(cluster.bootstrap_servers, "read_committed"))
    print("read_uncommitted sees:", read_all(cluster.bootstrap_servers, "read_uncommitted"))
