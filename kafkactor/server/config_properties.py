"""The property table behind `KafkaConfig`: every Kafka property kafkactor reads and where its
value goes, the other names Kafka accepts for some of them, and the Kafka properties kafkactor
accepts and ignores (docs/broker-config.md documents each one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kafkactor.actors.controller.zk_data import TOPIC_CONFIG_KEYS
from kafkactor.server.config_kinds import (
    INT_MAX,
    ActorRuntime,
    Bool,
    CleanupPolicy,
    File,
    Int,
    Kind,
    Listeners,
    LogDirs,
    Ratio,
    TopicValue,
    ZooKeeperConnect,
)
from kafkactor.server.security_kinds import (
    AuthorizerClass,
    ClientAuthKind,
    EndpointIdentification,
    Jaas,
    ListenerNameKind,
    Mechanism,
    Mechanisms,
    Password,
    PerIpOverrides,
    Principals,
    Protocol,
    ProtocolMap,
    StoreType,
)
from kafkactor.storage.topic_config import TOPIC_CONFIG_SYNONYMS

_HOUR_MS: Final = 60 * 60 * 1000
_MINUTE_MS: Final = 60 * 1000


@dataclass(frozen=True, slots=True)
class Setting:
    """One property: Kafka's name, its place in `KafkaConfig` (attribute names, outermost
    first; None for one accepted at a single value with no effect) and its kind. `topic` is
    the topic-level name of a broker-wide topic-config default."""

    name: str
    path: tuple[str, ...] | None
    kind: Kind
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class Alias:
    """Another name Kafka accepts for a setting's value (log.retention.hours, log.dir, ...).

    `convert` turns its value into the target's (None: no effect). The target's own property
    wins over its aliases, and among aliases the first listed wins, as in Kafka; an alias with
    `overrides` wins even over the target (log.cleaner.enable=false turns the cleaner off).
    """

    name: str
    target: str
    kind: Kind
    convert: Callable[[Any], Any]
    overrides: bool = False


@dataclass(frozen=True, slots=True)
class Section:
    """A titled group of settings with a comment, as `to_properties` writes them."""

    title: str
    comment: str
    settings: tuple[Setting, ...]


def _top(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, (attr,), kind)


def _broker(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", attr), kind)


def _replica(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", "replica", attr), kind)


def _log_manager(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", "log_manager", attr), kind)


def _apis(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", "apis", attr), kind)


def _group(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", "group", attr), kind)


def _txn(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", "transaction", attr), kind)


def _controller(name: str, attr: str, kind: Kind) -> Setting:
    return Setting(name, ("broker", "controller", attr), kind)


def _security(name: str, kind: Kind) -> Setting:
    """A security setting: its value in `SecurityProperties`, the attribute its name spells."""
    return Setting(name, ("security_properties", name.replace(".", "_")), kind)


def _topic(topic: str, kind: Kind | None = None) -> Setting:
    """A broker-wide topic-config default: the broker property Kafka's
    `LogConfig.TopicConfigSynonyms` names for the topic-level key, setting the LogConfig field
    zk_data's table names for it. Without a kind, the value is read and checked as the
    topic-level key is (Kafka's `LogConfig` validates the defaults its broker copies in)."""
    name = TOPIC_CONFIG_SYNONYMS[topic]
    path = ("broker", "log_manager", "default_log_config", TOPIC_CONFIG_KEYS[topic])
    return Setting(name, path, kind if kind is not None else TopicValue(topic), topic=topic)


POSITIVE, NON_NEGATIVE, UNLIMITED = Int(1), Int(0), Int(-1)

SECTIONS: Final = (
    Section(
        "Server Basics",
        "This broker's id, its one data directory, and kafkactor's JSON-lines event log\n"
        "(default: events-<broker.id>.jsonl in the directory that holds log.dirs).",
        (
            _top("broker.id", "broker_id", Int(0, INT_MAX)),
            _top("log.dirs", "log_dirs", LogDirs()),
            _top("kafkactor.event.log", "event_log", File()),
            _top("kafkactor.event.log.enable", "event_log_enable", Bool()),
        ),
    ),
    Section(
        "Socket Server Settings",
        "Listeners NAME://host:port, comma-separated, each with the security protocol\n"
        "listener.security.protocol.map gives its name; ZooKeeper registers the advertised ones\n"
        "(default: listeners). request.timeout.ms bounds this broker's requests to other brokers.",
        (
            _top("listeners", "listener_endpoints", Listeners()),
            _top("advertised.listeners", "advertised_endpoints", Listeners(advertised=True)),
            _top("socket.request.max.bytes", "socket_request_max_bytes", POSITIVE),
            _top("queued.max.requests", "queued_max_requests", POSITIVE),
            _top("connections.max.idle.ms", "connections_max_idle_ms", POSITIVE),
            _top("request.timeout.ms", "request_timeout_ms", POSITIVE),
        ),
    ),
    Section(
        "Security",
        "Listeners' protocols, the inter-broker listener, TLS key and trust stores (PEM files),\n"
        "SASL mechanisms with their JAAS entries, and the ACL authorizer. listener.name.<l>.*\n"
        "overrides a ssl.* or sasl.enabled.mechanisms setting for listener <l>, and\n"
        "listener.name.<l>.<mechanism>.sasl.jaas.config gives a mechanism's JAAS entry there.",
        (
            _security("listener.security.protocol.map", ProtocolMap()),
            _security("inter.broker.listener.name", ListenerNameKind()),
            _security("security.inter.broker.protocol", Protocol()),
            _security("ssl.keystore.type", StoreType()),
            _security("ssl.keystore.location", File()),
            _security("ssl.key.password", Password()),
            _security("ssl.truststore.type", StoreType()),
            _security("ssl.truststore.location", File()),
            _security("ssl.client.auth", ClientAuthKind()),
            _security("ssl.endpoint.identification.algorithm", EndpointIdentification()),
            _security("sasl.enabled.mechanisms", Mechanisms()),
            _security("sasl.mechanism.inter.broker.protocol", Mechanism()),
            _security("sasl.jaas.config", Jaas()),
            _security("authorizer.class.name", AuthorizerClass()),
            _security("super.users", Principals()),
            _security("allow.everyone.if.no.acl.found", Bool()),
            _security("connection.failed.authentication.delay.ms", NON_NEGATIVE),
        ),
    ),
    Section(
        "Limits and Quotas",
        "The request memory pool (queued.max.request.bytes; -1: unbounded), connection limits,\n"
        "and the client quotas' sampling (quota.window.num windows of quota.window.size.seconds).",
        (
            _security("queued.max.request.bytes", UNLIMITED),
            _security("max.connections", Int(0, INT_MAX)),
            _security("max.connections.per.ip", Int(0, INT_MAX)),
            _security("max.connections.per.ip.overrides", PerIpOverrides()),
            _security("quota.window.num", Int(1, INT_MAX)),
            _security("quota.window.size.seconds", Int(1, INT_MAX)),
        ),
    ),
    Section(
        "Zookeeper",
        "The ensemble, host:port[,host:port...][/chroot]. Without a connection timeout, the\n"
        "session timeout bounds the wait for a connection.",
        (
            _top("zookeeper.connect", "zookeeper_connect", ZooKeeperConnect()),
            _top("zookeeper.session.timeout.ms", "zookeeper_session_timeout_ms", POSITIVE),
            _top("zookeeper.connection.timeout.ms", "zookeeper_connection_timeout_ms", POSITIVE),
        ),
    ),
    Section(
        "Controlled Shutdown",
        "Before stopping, ask the controller to move this broker's leaderships away.",
        (
            _top("controlled.shutdown.enable", "controlled_shutdown_enable", Bool()),
            _top("controlled.shutdown.max.retries", "controlled_shutdown_max_retries", Int(0)),
            _top(
                "controlled.shutdown.retry.backoff.ms",
                "controlled_shutdown_retry_backoff_ms",
                NON_NEGATIVE,
            ),
        ),
    ),
    Section(
        "Leader Balancing",
        "The active controller elects preferred replicas back to leadership every interval,\n"
        "for a broker not leading more than this percentage of the partitions it prefers.",
        (
            _controller("auto.leader.rebalance.enable", "auto_leader_rebalance_enable", Bool()),
            _controller(
                "leader.imbalance.per.broker.percentage",
                "leader_imbalance_per_broker_percentage",
                NON_NEGATIVE,
            ),
            _controller(
                "leader.imbalance.check.interval.seconds",
                "leader_imbalance_check_interval_seconds",
                POSITIVE,
            ),
        ),
    ),
    Section(
        "Replication",
        "The replica manager, its fetchers and purgatories (ReplicaManagerConfig, BrokerConfig).\n"
        "replica.fetch.wait.max.ms must be less than replica.lag.time.max.ms.",
        (
            _replica("replica.lag.time.max.ms", "replica_lag_time_max_ms", POSITIVE),
            _replica("replica.fetch.wait.max.ms", "replica_fetch_wait_max_ms", NON_NEGATIVE),
            _replica("replica.fetch.min.bytes", "replica_fetch_min_bytes", POSITIVE),
            _replica("replica.fetch.max.bytes", "replica_fetch_max_bytes", POSITIVE),
            _replica("replica.fetch.backoff.ms", "replica_fetch_backoff_ms", POSITIVE),
            _replica("replica.socket.timeout.ms", "replica_socket_timeout_ms", POSITIVE),
            _replica(
                "replica.high.watermark.checkpoint.interval.ms",
                "high_watermark_checkpoint_interval_ms",
                POSITIVE,
            ),
            _broker(
                "producer.purgatory.purge.interval.requests",
                "producer_purgatory_purge_interval",
                POSITIVE,
            ),
            _broker(
                "fetch.purgatory.purge.interval.requests",
                "fetch_purgatory_purge_interval",
                POSITIVE,
            ),
        ),
    ),
    Section(
        "Actor runtime",
        "kafkactor's own: how a broker's partitions, purgatories and replica manager run\n"
        "(ActorRuntimeConfig): on one shared dispatcher thread, or a thread per actor.",
        (
            Setting("actor.runtime", ("broker", "runtime", "runtime"), ActorRuntime()),
            Setting("actor.dispatcher.throughput", ("broker", "runtime", "throughput"), POSITIVE),
        ),
    ),
    Section(
        "Topics",
        "Creating and deleting topics (KafkaApisConfig).",
        (
            _apis("auto.create.topics.enable", "auto_create_topics_enable", Bool()),
            _apis("num.partitions", "num_partitions", POSITIVE),
            _apis("default.replication.factor", "default_replication_factor", POSITIVE),
            _apis("delete.topic.enable", "delete_topic_enable", Bool()),
        ),
    ),
    Section(
        "Group Coordinator",
        "Consumer groups and __consumer_offsets (GroupConfig, KafkaApisConfig).",
        (
            _apis("offsets.topic.replication.factor", "offsets_topic_replication_factor", POSITIVE),
            _group("offsets.topic.num.partitions", "offsets_topic_partitions", POSITIVE),
            _group("offset.metadata.max.bytes", "offset_metadata_max_bytes", NON_NEGATIVE),
            _group("group.min.session.timeout.ms", "min_session_timeout_ms", POSITIVE),
            _group("group.max.session.timeout.ms", "max_session_timeout_ms", POSITIVE),
            _group("group.initial.rebalance.delay.ms", "initial_rebalance_delay_ms", NON_NEGATIVE),
        ),
    ),
    Section(
        "Transaction Coordinator",
        "Transactions and __transaction_state (TransactionConfig).",
        (
            _txn("transaction.max.timeout.ms", "max_timeout_ms", POSITIVE),
            _txn("transactional.id.expiration.ms", "transactional_id_expiration_ms", POSITIVE),
            _txn(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                "abort_timed_out_transactions_interval_ms",
                POSITIVE,
            ),
            _txn(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                "remove_expired_transactional_ids_interval_ms",
                POSITIVE,
            ),
            _txn("transaction.state.log.num.partitions", "state_log_num_partitions", POSITIVE),
            _txn(
                "transaction.state.log.replication.factor",
                "state_log_replication_factor",
                POSITIVE,
            ),
            _txn("transaction.state.log.min.isr", "state_log_min_isr", POSITIVE),
            _txn("transaction.state.log.segment.bytes", "state_log_segment_bytes", POSITIVE),
        ),
    ),
    Section(
        "Log Manager",
        "Retention, flushing, checkpoints and the log cleaner (LogManagerConfig);\n"
        "log.cleaner.threads is 0 (no compaction) or 1.",
        (
            _log_manager(
                "log.retention.check.interval.ms", "retention_check_interval_ms", POSITIVE
            ),
            _log_manager("log.flush.scheduler.interval.ms", "flush_check_interval_ms", POSITIVE),
            _log_manager(
                "log.flush.offset.checkpoint.interval.ms",
                "recovery_point_checkpoint_interval_ms",
                POSITIVE,
            ),
            _log_manager(
                "log.flush.start.offset.checkpoint.interval.ms",
                "log_start_offset_checkpoint_interval_ms",
                POSITIVE,
            ),
            _log_manager("log.cleaner.threads", "cleaner_threads", Int(0, 1)),
            _log_manager("log.cleaner.backoff.ms", "cleaner_backoff_ms", POSITIVE),
        ),
    ),
    Section(
        "Topic Defaults",
        "Every topic's config unless the topic overrides it (LogConfig); -1 retention: none.\n"
        "Unset flush settings leave flushing to the OS, as in Kafka. log.preallocate,\n"
        "log.message.format.version and log.message.downconversion.enable are kept, not acted on.",
        (
            _topic("segment.bytes", POSITIVE),
            _topic("segment.ms", POSITIVE),
            _topic("index.interval.bytes", NON_NEGATIVE),
            _topic("segment.index.bytes", Int(8)),
            _topic("retention.bytes", UNLIMITED),
            _topic("retention.ms", UNLIMITED),
            _topic("max.message.bytes", POSITIVE),
            _topic("flush.messages", POSITIVE),
            _topic("flush.ms", NON_NEGATIVE),
            _topic("file.delete.delay.ms", NON_NEGATIVE),
            _topic("min.insync.replicas", POSITIVE),
            _topic("unclean.leader.election.enable", Bool()),
            _topic("cleanup.policy", CleanupPolicy()),
            _topic("delete.retention.ms", NON_NEGATIVE),
            _topic("min.cleanable.dirty.ratio", Ratio()),
            _topic("min.compaction.lag.ms", NON_NEGATIVE),
            _topic("max.compaction.lag.ms"),
            _topic("segment.jitter.ms"),
            _topic("message.timestamp.type"),
            _topic("message.timestamp.difference.max.ms"),
            _topic("compression.type"),
            _topic("preallocate"),
            _topic("message.format.version"),
            _topic("message.downconversion.enable"),
        ),
    ),
)

SETTINGS: Final = {setting.name: setting for section in SECTIONS for setting in section.settings}
REQUIRED: Final = ("broker.id", "zookeeper.connect")


def _hours(value: int) -> int:
    return value * _HOUR_MS if value >= 0 else -1


def _minutes(value: int) -> int:
    return value * _MINUTE_MS if value >= 0 else -1


ALIASES: Final = {
    alias.name: alias
    for alias in (
        Alias("log.dir", "log.dirs", LogDirs(), lambda path: path),
        Alias("log.retention.minutes", "log.retention.ms", UNLIMITED, _minutes),
        Alias("log.retention.hours", "log.retention.ms", UNLIMITED, _hours),
        Alias("log.roll.hours", "log.roll.ms", POSITIVE, lambda hours: hours * _HOUR_MS),
        Alias(
            "log.roll.jitter.hours",
            "log.roll.jitter.ms",
            Int(0, INT_MAX),  # Kafka's INT, at least 0
            lambda hours: hours * _HOUR_MS,
        ),
        Alias(
            "log.cleaner.enable",
            "log.cleaner.threads",
            Bool(),
            lambda enable: None if enable else 0,
            overrides=True,
        ),
    )
}

_THREADS = "kafkactor's actors and event loop have no such pool"
_BUFFERS = "the log cleaner's buffers are not preallocated"
_METRICS = "no metrics reporters: the event log records what happens"
# Kafka settings accepted and ignored, with the reason; `KafkaConfig.ignored` names those met.
IGNORED: Final = {
    "num.network.threads": "the SocketServer is one asyncio event loop",
    "num.io.threads": _THREADS,
    "background.threads": _THREADS,
    "num.replica.fetchers": "one ReplicaFetcherActor per leader broker",
    "num.recovery.threads.per.data.dir": "one data directory, recovered on one thread",
    "socket.send.buffer.bytes": "the OS's socket buffer sizes are used",
    "socket.receive.buffer.bytes": "the OS's socket buffer sizes are used",
    "log.cleaner.dedupe.buffer.size": _BUFFERS,
    "log.cleaner.io.buffer.size": _BUFFERS,
    "log.cleaner.io.buffer.load.factor": _BUFFERS,
    "log.cleaner.io.max.bytes.per.second": "the log cleaner is not throttled",
    "inter.broker.protocol.version": "one protocol, negotiated through ApiVersions",
    "zookeeper.max.in.flight.requests": "kazoo pipelines its own requests",
    "metric.reporters": _METRICS,
    "metrics.num.samples": _METRICS,
    "metrics.sample.window.ms": _METRICS,
    "metrics.recording.level": _METRICS,
    "offsets.retention.minutes": "committed offsets do not expire here",
    "offsets.retention.check.interval.ms": "committed offsets do not expire here",
}

_PEM_FILES = (
    "kafkactor reads PEM files: name them with ssl.keystore.location or ssl.truststore.location"
)
# Kafka settings refused with a reason rather than as unknown: name or prefix -> reason
UNSUPPORTED: Final = {
    "ssl.keystore.password": "a PEM key store has no store password (Kafka refuses one too): "
    "ssl.key.password decrypts an encrypted private key",
    "ssl.truststore.password": "a PEM trust store has no password (Kafka refuses one too)",
    "ssl.keystore.key": _PEM_FILES,
    "ssl.keystore.certificate.chain": _PEM_FILES,
    "ssl.truststore.certificates": _PEM_FILES,
    "ssl.": "kafkactor reads the ssl.* settings docs/broker-config.md lists; protocols, cipher "
    "suites and engine settings are Python's ssl defaults (TLS 1.2 and up)",
    "sasl.": "kafkactor serves PLAIN and SCRAM-SHA-256/512, set by sasl.enabled.mechanisms and "
    "JAAS entries (docs/broker-config.md); Kerberos and OAUTHBEARER settings mean nothing here",
    "security.": "security.inter.broker.protocol is the one security.* setting kafkactor reads",
    "listener.": "listener.security.protocol.map and listener.name.<listener>.* are the "
    "listener settings kafkactor reads",
    "principal.builder.class": "principals are User:<SASL user name>, or User:ANONYMOUS",
    "process.roles": "KRaft is not built: brokers use ZooKeeper",
    "node.id": "KRaft is not built: brokers use ZooKeeper (broker.id names a broker)",
    "controller.quorum.": "KRaft is not built: brokers use ZooKeeper",
    "controller.listener.names": "KRaft is not built: brokers use ZooKeeper",
}


def unsupported_reason(name: str) -> str | None:
    """Why kafkactor refuses this Kafka setting, or None when it is not one it knows of."""
    for prefix, reason in UNSUPPORTED.items():
        if name == prefix or (prefix.endswith(".") and name.startswith(prefix)):
            return reason
    return None


def is_sensitive(name: str) -> bool:
    """Whether a property holds a secret (Kafka's PASSWORD type: ssl.key.password, the JAAS
    entries, listener.name.<l>.* of those): never listed with its value, never in an error."""
    suffix = name
    if name.startswith("listener.name."):
        suffix = name[len("listener.name.") :].partition(".")[2]
    return suffix in (
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
    ) or suffix.endswith("sasl.jaas.config")


def known_names() -> tuple[str, ...]:
    """Every property name `KafkaConfig` accepts (for "did you mean" suggestions)."""
    return (*SETTINGS, *ALIASES, *IGNORED)
