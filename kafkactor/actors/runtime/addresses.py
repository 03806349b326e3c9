"""The address of every actor of a broker: actors are named by address strings, never by ref."""

from __future__ import annotations


def broker_prefix(broker: int) -> str:
    return f"broker/{broker}"


def replica_manager(broker: int) -> str:
    return f"broker/{broker}/replica-manager"


def partition(broker: int, key: str) -> str:
    """A partition replica's actor; `key` is `<topic>-<partition>`."""
    return f"broker/{broker}/partition/{key}"


def produce_purgatory(broker: int) -> str:
    return f"broker/{broker}/purgatory/produce"


def fetch_purgatory(broker: int) -> str:
    return f"broker/{broker}/purgatory/fetch"


def delete_records_purgatory(broker: int) -> str:
    return f"broker/{broker}/purgatory/delete-records"


def topic_purgatory(broker: int) -> str:
    return f"broker/{broker}/purgatory/topic"


def reaper(broker: int) -> str:
    return f"broker/{broker}/reaper"


def fetcher(broker: int, leader: int) -> str:
    """The fetcher on `broker` that replicates from `leader`."""
    return f"broker/{broker}/fetcher/{leader}"


def controller(broker: int) -> str:
    """The broker's controller actor (every broker runs one; one of them is elected)."""
    return f"broker/{broker}/controller"


def socket_server(broker: int) -> str:
    """The broker's socket server (not an actor: the network thread's participant)."""
    return f"broker/{broker}/socket-server"


def kafka_apis(broker: int) -> str:
    """The broker's KafkaApis actor: wire requests in, actor messages out."""
    return f"broker/{broker}/kafka-apis"


def group_coordinator(broker: int) -> str:
    """The broker's GroupCoordinator actor: the groups of the `__consumer_offsets` partitions
    it leads."""
    return f"broker/{broker}/group-coordinator"


def dynamic_config_manager(broker: int) -> str:
    """The broker's listener of `/config/changes` (Kafka's DynamicConfigManager)."""
    return f"broker/{broker}/dynamic-config-manager"


def transaction_coordinator(broker: int) -> str:
    """The broker's TransactionCoordinator actor: the transactional ids of the
    `__transaction_state` partitions it leads (with its "txn-marker" purgatory)."""
    return f"broker/{broker}/transaction-coordinator"
