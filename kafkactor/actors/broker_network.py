"""A broker's network side: its KafkaApis actor and its `SocketServer` (Kafka's
KafkaServer.startup: `dataPlaneRequestProcessor` and `socketServer.startProcessingRequests`),
with the security parts the broker was given (listeners, SASL, SCRAM credentials, the
authorizer, quotas, the memory pool)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kafkactor.actors.runtime import addresses
from kafkactor.network.config_apis import BrokerProperties
from kafkactor.network.kafka_apis import KafkaApis
from kafkactor.network.kafka_apis_actor import KafkaApisActor
from kafkactor.network.socket_server import SocketServer

__all__ = ["start_network"]


def start_network(broker: Any) -> SocketServer:
    """Start `broker`'s (a `kafkactor.actors.broker.Broker`, not imported: it imports this)
    KafkaApis actor and socket server; the listener's port 0 becomes the port bound (kept in
    `broker.listener` / its security's listeners for restarts)."""
    assert broker.listener is not None
    broker_id, config, security = broker.broker_id, broker.config, broker.security
    extra = security.kafka_apis_options() if security is not None else {}
    apis = KafkaApis(
        broker_id,
        config.apis,
        admin=broker.admin,
        producer_ids=broker._producer_id_source(),
        group=config.group,
        transaction=config.transaction,
        properties=config.properties
        or BrokerProperties(log_config=config.log_manager.default_log_config),
        topic_configs=broker._topic_config_repository(),
        entity_configs=broker._entity_config_admin(),
        **extra,
    )
    ref = KafkaApisActor.start(
        addresses.kafka_apis(broker_id),
        broker.directory,
        broker.clock,
        broker_id,
        apis=apis,
        scheduler=broker.scheduler,
        quotas=broker.quotas,
    )
    broker.directory.register(addresses.kafka_apis(broker_id), ref)
    broker.refs.append(ref)
    options = security.socket_server_options() if security is not None else {}
    server = SocketServer(
        broker_id, broker.directory, broker.listener, clock=broker.clock, **options
    ).start()
    broker.listener = replace(broker.listener, host=server.host, port=server.port)
    if security is not None:
        security.bound(server)
    return server
