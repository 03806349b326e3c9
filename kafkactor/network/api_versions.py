"""The APIs and versions a kafkactor broker speaks: what its ApiVersions response advertises
(SUPPORTED), and the few versions it decodes without advertising them (SERVED_NOT_ADVERTISED)."""

from __future__ import annotations

import enum
from typing import Final


class ApiKey(enum.IntEnum):
    """Kafka's API keys (org.apache.kafka.common.protocol.ApiKeys) that kafkactor serves."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    OFFSET_DELETE = 47
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLUSTER = 60
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51


#: (min, max) version per API, as advertised. Produce advertises 0 as Kafka 4 does, so that
#: librdkafka keeps compression enabled, but versions 0-2 (magic 0/1) are refused.
SUPPORTED: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 8),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (0, 12),
    # the ZooKeeper-era inter-broker APIs, every version of Kafka 3.9 (a ZooKeeper-mode Kafka
    # broker lists them too). Kafka 4 removed them and kio lacks them: their entities are
    # transcribed from Kafka 3.9's definitions (inter_broker_schemas.py)
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    # OffsetCommit 0-1 and OffsetFetch 0, removed in Kafka 4 (KIP-896) and absent from kio,
    # are served through entities transcribed from Kafka 3's definitions (removed_versions.py)
    ApiKey.OFFSET_COMMIT: (0, 7),
    # v6 is flexible, v7 adds require_stable (KIP-447), as Kafka 2.8 serves them
    ApiKey.OFFSET_FETCH: (0, 7),
    ApiKey.OFFSET_DELETE: (0, 0),  # KIP-496, Kafka 2.8's only version
    # groups (key type 0) and transactional ids (1). Every Kafka broker lists FindCoordinator,
    # and librdkafka takes its absence for a pre-0.10 broker and then sends lz4 batches
    # uncompressed
    ApiKey.FIND_COORDINATOR: (0, 3),  # v3 flexible, as Kafka 2.8; v4 (batched keys) is 3.0's
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 3),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.API_VERSIONS: (0, 3),
    # SASL (KIP-43, KIP-152): answered by the connection's authenticator before any other
    # request on a SASL listener; reaching KafkaApis (elsewhere, or once authenticated) they
    # are answered ILLEGAL_SASL_STATE, as Kafka 2.8's KafkaApis does
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    # transactions (KIP-98): v3+ lets a producer bump its epoch after an abortable error
    # (KIP-360), v4 may answer PRODUCER_FENCED (KIP-588; INVALID_PRODUCER_EPOCH before)
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),  # v4 (KIP-890's batched verification) not served
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    # a transaction coordinator's markers to a partition leader (between broker processes);
    # v0 was removed in Kafka 4 and is absent from kio
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    # Kafka 2.8 serves 0-2 (v1 adds the pattern type, KIP-290; v2 is flexible). v0, removed in
    # Kafka 4, is absent from kio and not served: librdkafka, kafka-python and the Java
    # client negotiate v1 or v2 with a broker that lists 1-2
    ApiKey.DESCRIBE_ACLS: (1, 2),
    ApiKey.CREATE_ACLS: (1, 2),
    ApiKey.DELETE_ACLS: (1, 2),
    # KIP-664's admin APIs, v0 (v1 adds a duration filter)
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 0),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
    # v0, removed in Kafka 4 (KIP-896) and absent from kio, through a transcribed entity
    ApiKey.DESCRIBE_CONFIGS: (0, 2),
    # topics (dynamic topic configs); every broker config is refused as not dynamic
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # Kafka 2.8's versions; only the active controller adds partitions (NOT_CONTROLLER)
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    # KIP-183 / KIP-460: v1 adds the election type, v2 is flexible; answered by the active
    # controller's broker (NOT_CONTROLLER per partition elsewhere, as Kafka 2.8)
    ApiKey.ELECT_LEADERS: (0, 2),
    # KIP-455, v0 (flexible) as Kafka 2.8; answered by the active controller's broker
    # (a top-level NOT_CONTROLLER elsewhere)
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # v1 adds the endpoint type (KIP-919); a broker describes brokers
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # KIP-107, Kafka 2.8's versions (v2 flexible)
    ApiKey.DELETE_RECORDS: (0, 2),
    # v0 (removed in Kafka 4, absent from kio) is not served; v3 adds the top-level error
    # code, v4 the disk's total and usable bytes (KIP-827)
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    # KIP-546's client quotas and KIP-554's SCRAM credentials, Kafka 2.8's versions (quotas'
    # v1 flexible); AlterUserScramCredentials is answered by the active controller
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

#: (min, max) versions decoded and answered beyond SUPPORTED's, and never advertised: clients
#: negotiate within the advertised ranges, kafkactor's own brokers send these. Fetch 12 and
#: OffsetForLeaderEpoch 4 are the first flexible versions (KIP-482): a follower sends them so
#: that its request header (v2) can carry the trace context, while clients keep being offered
#: Fetch 4-11 and OffsetForLeaderEpoch 2-3.
SERVED_NOT_ADVERTISED: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey.FETCH: (12, 12),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (4, 4),
}

#: The lowest Produce version actually served: magic-2 record batches only.
MIN_SERVED_PRODUCE_VERSION: Final = 3


def served(api_key: int, version: int) -> bool:
    """Whether a request of this API and version is decoded and answered: an advertised
    version (SUPPORTED; Produce from MIN_SERVED_PRODUCE_VERSION), or one of
    SERVED_NOT_ADVERTISED."""
    try:
        api = ApiKey(api_key)
    except ValueError:
        return False
    for ranges in (SUPPORTED, SERVED_NOT_ADVERTISED):
        if api not in ranges:
            continue
        low, high = ranges[api]
        if ranges is SUPPORTED and api is ApiKey.PRODUCE:
            low = MIN_SERVED_PRODUCE_VERSION
        if low <= version <= high:
            return True
    return False
