"""The APIs and versions a kafkactor broker speaks (what its ApiVersions response advertises)."""

from __future__ import annotations

import enum
from typing import Final


class ApiKey(enum.IntEnum):
    """Kafka's API keys (org.apache.kafka.common.protocol.ApiKeys) that kafkactor serves."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23


#: (min, max) version per API, as advertised. Produce advertises 0 as Kafka 4 does, so that
#: librdkafka keeps compression enabled, but versions 0-2 (magic 0/1) are refused.
SUPPORTED: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 8),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (0, 8),
    # no group or transaction coordinator yet: every lookup answers COORDINATOR_NOT_AVAILABLE.
    # Listed all the same, as every Kafka broker lists it: librdkafka takes its absence for a
    # pre-0.10 broker and then sends lz4 batches uncompressed
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
}

#: The lowest Produce version actually served: magic-2 record batches only.
MIN_SERVED_PRODUCE_VERSION: Final = 3


def served(api_key: int, version: int) -> bool:
    """Whether a request of this API and version is decoded and answered."""
    try:
        low, high = SUPPORTED[ApiKey(api_key)]
    except ValueError:
        return False
    if api_key == ApiKey.PRODUCE:
        low = MIN_SERVED_PRODUCE_VERSION
    return low <= version <= high
