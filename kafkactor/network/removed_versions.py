"""The request and response entities of API versions Kafka 4.0 removed (KIP-896) and kio lacks.

kio generates its entities from Kafka 4's message definitions, which dropped OffsetCommit v0-1,
OffsetFetch v0 and DescribeConfigs v0. Older clients still speak them, so the broker serves
them from entities transcribed here, field by field, from Kafka 3.9's
`clients/src/main/resources/common/message/OffsetCommitRequest.json`,
`OffsetCommitResponse.json`, `OffsetFetchRequest.json`, `OffsetFetchResponse.json`,
`DescribeConfigsRequest.json` and `DescribeConfigsResponse.json`: only the
fields those versions hold, named as kio names them in the later versions. The entities are made
by `kafkactor.network.transcribed` (kio's `entity_reader` / `entity_writer` do every byte), and
each version's classes live in a namespace module, so `codec.nested(schema, name)` finds them.

`REQUESTS` and `RESPONSES` map (API key, version) to the entity class; codec.py consults them
before kio.
"""

from __future__ import annotations

from typing import Any, Final

from kafkactor.network.api_versions import ApiKey
from kafkactor.network.transcribed import EntityType, Field, message

__all__ = ["REQUESTS", "RESPONSES"]

# -- OffsetCommit (api key 8): v0 and v1 --------------------------------------------------------

_OFFSET_COMMIT_VERSIONS: Final = range(2)

_OFFSET_COMMIT_REQUEST: Final = (
    Field("group_id", "string", 0),
    Field("generation_id_or_member_epoch", "int32", 1),
    Field("member_id", "string", 1),
    Field(
        "topics",
        "[]OffsetCommitRequestTopic",
        0,
        nested=(
            "OffsetCommitRequestTopic",
            (
                Field("name", "string", 0),
                Field(
                    "partitions",
                    "[]OffsetCommitRequestPartition",
                    0,
                    nested=(
                        "OffsetCommitRequestPartition",
                        (
                            Field("partition_index", "int32", 0),
                            Field("committed_offset", "int64", 0),
                            Field("commit_timestamp", "int64", 1, last=1),
                            Field("committed_metadata", "string", 0, nullable=True),
                        ),
                    ),
                ),
            ),
        ),
    ),
)

_OFFSET_COMMIT_RESPONSE: Final = (
    Field(
        "topics",
        "[]OffsetCommitResponseTopic",
        0,
        nested=(
            "OffsetCommitResponseTopic",
            (
                Field("name", "string", 0),
                Field(
                    "partitions",
                    "[]OffsetCommitResponsePartition",
                    0,
                    nested=(
                        "OffsetCommitResponsePartition",
                        (
                            Field("partition_index", "int32", 0),
                            Field("error_code", "int16", 0),
                        ),
                    ),
                ),
            ),
        ),
    ),
)

# -- OffsetFetch (api key 9): v0 ----------------------------------------------------------------

_OFFSET_FETCH_VERSIONS: Final = range(1)

_OFFSET_FETCH_REQUEST: Final = (
    Field("group_id", "string", 0),
    Field(
        "topics",
        "[]OffsetFetchRequestTopic",
        0,
        nested=(
            "OffsetFetchRequestTopic",
            (
                Field("name", "string", 0),
                Field("partition_indexes", "[]int32", 0),
            ),
        ),
    ),
)

_OFFSET_FETCH_RESPONSE: Final = (
    Field(
        "topics",
        "[]OffsetFetchResponseTopic",
        0,
        nested=(
            "OffsetFetchResponseTopic",
            (
                Field("name", "string", 0),
                Field(
                    "partitions",
                    "[]OffsetFetchResponsePartition",
                    0,
                    nested=(
                        "OffsetFetchResponsePartition",
                        (
                            Field("partition_index", "int32", 0),
                            Field("committed_offset", "int64", 0),
                            Field("metadata", "string", 0, nullable=True),
                            Field("error_code", "int16", 0),
                        ),
                    ),
                ),
            ),
        ),
    ),
)

# -- DescribeConfigs (api key 32): v0 --------------------------------------------------------------

_DESCRIBE_CONFIGS_VERSIONS: Final = range(1)

_DESCRIBE_CONFIGS_REQUEST: Final = (
    Field(
        "resources",
        "[]DescribeConfigsResource",
        0,
        nested=(
            "DescribeConfigsResource",
            (
                Field("resource_type", "int8", 0),
                Field("resource_name", "string", 0),
                Field("configuration_keys", "[]string", 0, nullable=True),
            ),
        ),
    ),
)

_DESCRIBE_CONFIGS_RESPONSE: Final = (
    Field("throttle_time", "int32", 0),
    Field(
        "results",
        "[]DescribeConfigsResult",
        0,
        nested=(
            "DescribeConfigsResult",
            (
                Field("error_code", "int16", 0),
                Field("error_message", "string", 0, nullable=True),
                Field("resource_type", "int8", 0),
                Field("resource_name", "string", 0),
                Field(
                    "configs",
                    "[]DescribeConfigsResourceResult",
                    0,
                    nested=(
                        "DescribeConfigsResourceResult",
                        (
                            Field("name", "string", 0),
                            Field("value", "string", 0, nullable=True),
                            Field("read_only", "bool", 0),
                            Field("is_default", "bool", 0, last=0),
                            Field("is_sensitive", "bool", 0),
                        ),
                    ),
                ),
            ),
        ),
    ),
)

#: (api key, the versions transcribed, kio's module stem, request fields, response fields)
_TRANSCRIBED: Final = (
    (
        ApiKey.OFFSET_COMMIT,
        _OFFSET_COMMIT_VERSIONS,
        "offset_commit",
        ("OffsetCommitRequest", _OFFSET_COMMIT_REQUEST),
        ("OffsetCommitResponse", _OFFSET_COMMIT_RESPONSE),
    ),
    (
        ApiKey.OFFSET_FETCH,
        _OFFSET_FETCH_VERSIONS,
        "offset_fetch",
        ("OffsetFetchRequest", _OFFSET_FETCH_REQUEST),
        ("OffsetFetchResponse", _OFFSET_FETCH_RESPONSE),
    ),
    (
        ApiKey.DESCRIBE_CONFIGS,
        _DESCRIBE_CONFIGS_VERSIONS,
        "describe_configs",
        ("DescribeConfigsRequest", _DESCRIBE_CONFIGS_REQUEST),
        ("DescribeConfigsResponse", _DESCRIBE_CONFIGS_RESPONSE),
    ),
)


def _messages(kind: EntityType) -> dict[tuple[int, int], Any]:
    made: dict[tuple[int, int], Any] = {}
    for api_key, versions, stem, request, response in _TRANSCRIBED:
        name, schema = request if kind is EntityType.request else response
        for version in versions:
            made[(api_key, version)] = message(
                name, api_key, version, kind, schema, package=f"{__name__}.{stem}"
            )
    return made


REQUESTS: Final[dict[tuple[int, int], Any]] = _messages(EntityType.request)
"""(API key, version) -> the transcribed request entity class."""
RESPONSES: Final[dict[tuple[int, int], Any]] = _messages(EntityType.response)
"""(API key, version) -> the transcribed response entity class."""
