"""WriteTxnMarkers (api key 27) on the wire, both ways: a transaction coordinator's
`WriteTxnMarkersRequest` to a partition leader in another broker process becomes the wire
request (`markers_body`) and its wire response the actor's `WriteTxnMarkersResponse`
(`markers_answer`); a wire request a broker receives is asked of its replica manager
(`write_txn_markers`) and the answer becomes the wire response.

Only v1 (flexible, so the request header carries the trace context) is sent and served: v0,
the same fields in the non-flexible encoding, was removed in Kafka 4 and is absent from kio,
and only kafkactor brokers (and admin tools aborting a hanging transaction, KIP-664, which
ask v1+) send this API.
"""

from __future__ import annotations

from typing import Any, Final

from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.transaction import (
    TxnMarkerEntry,
    TxnMarkerPartitionResult,
    TxnMarkerResult,
    TxnPartition,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import Ask, Step, error_of, respond

__all__ = ["MARKERS_VERSION", "markers_answer", "markers_body", "write_txn_markers"]

MARKERS_VERSION: Final = 1


def _grouped(partitions: tuple[TxnPartition, ...]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for p in partitions:
        grouped.setdefault(p.topic, []).append(p.partition)
    return grouped


# -- the sending broker's side -------------------------------------------------------------------


def markers_body(request: WriteTxnMarkersRequest, schema: type[Any]) -> Any:
    """The wire request body (`schema`: the request entity of the version sent)."""
    marker_type = nested(schema, "WritableTxnMarker")
    topic_type = nested(schema, "WritableTxnMarkerTopic")
    return build(
        schema,
        markers=tuple(
            build(
                marker_type,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                transaction_result=m.committed,
                coordinator_epoch=m.coordinator_epoch,
                topics=tuple(
                    build(topic_type, name=topic, partition_indexes=tuple(indexes))
                    for topic, indexes in _grouped(m.partitions).items()
                ),
            )
            for m in request.markers
        ),
    )


def markers_answer(request: WriteTxnMarkersRequest, response: Any) -> WriteTxnMarkersResponse:
    """The actor's answer from the wire response body, matched to `request`'s correlation id."""
    return WriteTxnMarkersResponse(
        correlation_id=request.correlation_id,
        markers=tuple(
            TxnMarkerResult(
                producer_id=int(m.producer_id),
                partitions=tuple(
                    TxnMarkerPartitionResult(
                        topic=t.name,
                        partition=int(p.partition_index),
                        error_code=ErrorCode(p.error_code),
                    )
                    for t in m.topics
                    for p in t.partitions
                ),
            )
            for m in response.markers
        ),
    )


# -- the receiving broker's side -----------------------------------------------------------------


def write_txn_markers(broker_id: int, version: int, body: Any) -> Step:
    """Ask this broker's replica manager to write the request's markers; answer one result per
    marker and partition of the request (Kafka's handleWriteTxnMarkersRequest), a partition its
    answer does not name with the code of the whole answer."""
    schema = response_type(ApiKey.WRITE_TXN_MARKERS, version)
    result_type = nested(schema, "WritableTxnMarkerResult")
    topic_type = nested(schema, "WritableTxnMarkerTopicResult")
    partition_type = nested(schema, "WritableTxnMarkerPartitionResult")
    request = WriteTxnMarkersRequest(
        markers=tuple(
            TxnMarkerEntry(
                producer_id=int(m.producer_id),
                producer_epoch=int(m.producer_epoch),
                committed=bool(m.transaction_result),
                coordinator_epoch=int(m.coordinator_epoch),
                partitions=tuple(
                    TxnPartition(topic=t.name, partition=int(p))
                    for t in m.topics
                    for p in t.partition_indexes
                ),
            )
            for m in body.markers
        )
    )

    def answered(response: Response) -> Step:
        fallback = error_of(response)
        codes: dict[tuple[int, str, int], ErrorCode] = {}
        if isinstance(response, WriteTxnMarkersResponse):
            fallback = ErrorCode.UNKNOWN_SERVER_ERROR
            for result in response.markers:
                for p in result.partitions:
                    codes[(result.producer_id, p.topic, p.partition)] = p.error_code
        return respond(
            schema,
            markers=tuple(
                build(
                    result_type,
                    producer_id=m.producer_id,
                    topics=tuple(
                        build(
                            topic_type,
                            name=t.name,
                            partitions=tuple(
                                build(
                                    partition_type,
                                    partition_index=int(p),
                                    error_code=codes.get(
                                        (int(m.producer_id), t.name, int(p)), fallback
                                    ),
                                )
                                for p in t.partition_indexes
                            ),
                        )
                        for t in m.topics
                    ),
                )
                for m in body.markers
            ),
        )

    return Ask(addresses.replica_manager(broker_id), request, answered)
