"""KafkaApis' DescribeCluster (api key 60, KIP-700): the cluster id, the controller and the live
brokers, as Kafka's `KafkaApis.handleDescribeCluster` answers them from its metadata cache.

Pure translation like the rest: the brokers and the controller come from the replica manager's
metadata cache through an `Ask` (the brokers-only Metadata request), whose answer becomes the
response. v1 adds the endpoint type (KIP-919): a broker describes brokers (1); a request for
controllers (2) is MISMATCHED_ENDPOINT_TYPE, any other type UNSUPPORTED_ENDPOINT_TYPE, each with
Kafka's message (v0 cannot name a type: it describes brokers).
"""

from __future__ import annotations

import enum
from typing import Any, Final

from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.admin_apis import controller_for_clients
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import (
    AUTHORIZED_OPERATIONS_OMITTED,
    NO_THROTTLE,
    Answer,
    Ask,
    Step,
    error_of,
)

__all__ = ["ClusterApis", "EndpointType"]

NO_CONTROLLER: Final = -1  # Kafka's MetadataResponse.NO_CONTROLLER_ID


class EndpointType(enum.IntEnum):
    """Kafka's `EndpointType` (KIP-919): which nodes a DescribeCluster describes."""

    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


class ClusterApis:
    """DescribeCluster for one broker.

    The answer is error NONE, the cluster id Metadata answers (`cluster_id`), the controller id
    Metadata answers, and every live broker with a listener (host, port, no rack), as the
    metadata cache knows them. `cluster_authorized_operations` is Integer.MIN_VALUE ("not
    computed") even when asked for, as Metadata and DescribeGroups answer it here: there is no
    authorizer (Kafka without one would list every cluster operation).
    """

    def __init__(self, broker_id: int, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.replica_manager = addresses.replica_manager(broker_id)

    def describe_cluster(self, version: int, body: Any, listener: str = "") -> Step:
        requested = int(getattr(body, "endpoint_type", EndpointType.BROKER))
        if requested not in (EndpointType.BROKER, EndpointType.CONTROLLER):
            return self._refused(
                version,
                ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                f"Unsupported endpoint type {requested}",
            )
        if requested != EndpointType.BROKER:
            return self._refused(
                version,
                ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                f"of type {EndpointType(requested).name}",
            )
        return Ask(
            self.replica_manager,
            # brokers only, as Metadata's empty topic list, at the request listener's endpoints
            MetadataRequest(topics=("",), listener=listener),
            lambda response: self._answer(version, response),
        )

    def _answer(self, version: int, response: Response) -> Step:
        if not isinstance(response, MetadataResponse):  # the cache did not answer
            return self._refused(version, error_of(response), None)
        schema = response_type(ApiKey.DESCRIBE_CLUSTER, version)
        broker = nested(schema, "DescribeClusterBroker")
        endpoints = response.endpoints
        return Answer(
            build(
                schema,
                throttle_time=NO_THROTTLE,
                error_code=ErrorCode.NONE,
                error_message=None,
                endpoint_type=EndpointType.BROKER,
                cluster_id=self.cluster_id,
                controller_id=controller_for_clients(response.controller_id, endpoints),
                brokers=tuple(
                    build(broker, broker_id=e.broker_id, host=e.host, port=e.port, rack=None)
                    for e in sorted(endpoints, key=lambda e: e.broker_id)
                ),
                cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        )

    def _refused(self, version: int, code: ErrorCode, message: str | None) -> Step:
        """An error answer: Kafka's empty response data with `code` and `message`."""
        schema = response_type(ApiKey.DESCRIBE_CLUSTER, version)
        return Answer(
            build(
                schema,
                throttle_time=NO_THROTTLE,
                error_code=code,
                error_message=message,
                endpoint_type=EndpointType.BROKER,
                cluster_id="",
                controller_id=NO_CONTROLLER,
                brokers=(),
                cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
