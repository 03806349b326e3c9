"""A real Kafka client against kafkactor: kafka-python produces and consumes over TCP.

Three brokers start in this process, each on a free loopback port; kafka-python (with its
defaults: idempotent, acks=all) neither knows nor cares that they are Python actors.
"""

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkactor import Cluster

with Cluster(brokers=3, listen="127.0.0.1") as cluster:
    cluster.create_topic("orders", partitions=1, replication_factor=3)
    print("bootstrap.servers =", cluster.bootstrap_servers)

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for n in range(3):
        sent = producer.send("orders", key=b"customer-7", value=b"order %d" % n).get(timeout=10)
        leader = cluster.leader("orders", 0)
        print(f"acknowledged at offset {sent.offset} by the leader, broker {leader}")
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, consumer_timeout_ms=2000)
    consumer.assign([TopicPartition("orders", 0)])
    consumer.seek_to_beginning()
    for record in consumer:
        print(f"offset {record.offset}: key={record.key!r} value={record.value!r}")
    consumer.close()
