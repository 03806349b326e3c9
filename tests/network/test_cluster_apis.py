"""DescribeCluster (api key 60) through `KafkaApis` without threads: the cluster id, the
controller and the live brokers from the metadata cache, as Kafka's handleDescribeCluster
answers them, and v1's endpoint type (KIP-919).

Every answer is encoded with the codec and read back as a client reads it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.common import BrokerEndpoint
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import encode_response
from kafkactor.network.kafka_apis import KafkaApis, KafkaApisConfig
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import AUTHORIZED_OPERATIONS_OMITTED, Answer, Ask, Step
from tests.network.wire import decode_response, describe_cluster_request

pytestmark = pytest.mark.timeout(10)

BROKER = 2
LOW, HIGH = SUPPORTED[ApiKey.DESCRIBE_CLUSTER]
VERSIONS = range(LOW, HIGH + 1)
ENDPOINTS = (
    BrokerEndpoint(broker_id=3, host="h3", port=9094),
    BrokerEndpoint(broker_id=1, host="h1", port=9092),
    BrokerEndpoint(broker_id=2, host="h2", port=9093),
)
CACHE = MetadataResponse(brokers=(1, 2, 3), endpoints=ENDPOINTS, controller_id=3)


def describe(
    version: int,
    cache: Response | None = CACHE,
    *,
    endpoint_type: int = 1,
    include_authorized_operations: bool = True,
) -> Any:
    """Handle a DescribeCluster, answer its metadata Ask with `cache`; the response as a client
    decodes it."""
    kafka_apis = KafkaApis(BROKER, KafkaApisConfig(cluster_id="blue"))
    header = RequestHeader(
        api_key=ApiKey.DESCRIBE_CLUSTER, api_version=version, correlation_id=7, client_id="c"
    )
    body = describe_cluster_request(
        version,
        endpoint_type=endpoint_type,
        include_authorized_operations=include_authorized_operations,
    )
    step: Step = kafka_apis.handle(header, body)
    if cache is not None:
        assert isinstance(step, Ask), step
        assert step.address == addresses.replica_manager(BROKER)
        # brokers, no topics, at the endpoints of the listener the request came in on
        assert step.request == MetadataRequest(topics=("",), listener="PLAINTEXT")
        step = step.then(cache)
    assert isinstance(step, Answer), step
    frame = encode_response(ApiKey.DESCRIBE_CLUSTER, version, 7, step.body)
    correlation_id, decoded = decode_response(frame[4:], ApiKey.DESCRIBE_CLUSTER, version)
    assert correlation_id == 7
    return decoded


def test_versions_zero_and_one_are_served() -> None:
    assert (LOW, HIGH) == (0, 1)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("include", [True, False])
def test_the_cluster_id_controller_and_live_brokers_are_described(
    version: int, include: bool
) -> None:
    response = describe(version, include_authorized_operations=include)
    assert response.error_code == ErrorCode.NONE
    assert response.error_message is None
    assert response.cluster_id == "blue"  # the id Metadata answers (KafkaApisConfig)
    assert response.controller_id == 3
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "h1", 9092, None),
        (2, "h2", 9093, None),
        (3, "h3", 9094, None),
    ]
    # no authorizer: "not computed", asked for or not, as Metadata answers it here
    assert response.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    if version >= 1:
        assert response.endpoint_type == 1  # brokers


def test_without_an_elected_controller_the_lowest_live_broker_is_named_as_metadata_does() -> None:
    response = describe(1, MetadataResponse(endpoints=ENDPOINTS, controller_id=-1))
    assert response.controller_id == 1


def test_a_cache_with_no_live_broker_answers_no_broker_and_no_controller() -> None:
    response = describe(1, MetadataResponse(controller_id=-1))
    assert (response.error_code, response.brokers, response.controller_id) == (0, (), -1)


def test_a_cache_that_does_not_answer_is_the_responses_error() -> None:
    response = describe(1, ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT))
    assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert (response.brokers, response.controller_id) == ((), -1)


def test_controllers_asked_of_a_broker_are_a_mismatched_endpoint_type() -> None:
    response = describe(1, None, endpoint_type=2)
    assert response.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert int(ErrorCode.MISMATCHED_ENDPOINT_TYPE) == 114
    assert response.error_message == (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
        "CONTROLLER"
    )
    assert (response.brokers, response.controller_id, response.cluster_id) == ((), -1, "")


@pytest.mark.parametrize("endpoint_type", [0, 3, -1])
def test_an_unknown_endpoint_type_is_unsupported(endpoint_type: int) -> None:
    response = describe(1, None, endpoint_type=endpoint_type)
    assert response.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    assert int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE) == 115
    assert response.error_message == f"Unsupported endpoint type {endpoint_type}"
    assert response.brokers == ()
