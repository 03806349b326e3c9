"""A SASL_SSL cluster in your tests: SCRAM users, a generated test CA, a real client.

One broker starts in this process with a SASL_SSL listener; alice's SCRAM credentials are in
its ZooKeeper, its certificate comes from a test CA made for the run (localhost and
127.0.0.1), and confluent-kafka, with librdkafka's host name check on, logs in as alice.
"""

from confluent_kafka import Consumer, Producer

from kafkactor import Cluster
from kafkactor.testing.security import ClusterSecurity

security = ClusterSecurity(protocol="SASL_SSL", users={"alice": "alice-secret"})
with Cluster(brokers=1, security=security) as cluster:
    cluster.create_topic("orders", partitions=1, replication_factor=1)
    settings = cluster.client_config("confluent-kafka", user="alice")
    print("security.protocol =", settings["security.protocol"])
    print("sasl.mechanisms =", settings["sasl.mechanisms"])

    producer = Producer(settings)
    producer.produce("orders", b"order 0")
    print("undelivered after flush:", producer.flush(30))
    del producer  # librdkafka's client goes before the cluster does

    consumer = Consumer({**settings, "group.id": "billing", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    message = None
    while message is None:
        message = consumer.poll(1.0)
    print(f"alice read {message.value()!r} at offset {message.offset()}")
    consumer.close()
