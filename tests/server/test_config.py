"""`KafkaConfig`: a broker's settings from a Kafka-style properties file.

Every supported property lands in its field; absent ones keep the config objects' defaults;
Kafka 3.9's stock ZooKeeper-mode server.properties loads, its thread and buffer settings
listed as ignored. Every refusal is one line naming the file, the line and the setting. What
`to_properties` writes reads back to an equal configuration.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import javaproperties
import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.transaction import TransactionConfig
from kafkactor.network.socket_server import SocketServerConfig
from kafkactor.server import ConfigError, EndPoint, KafkaConfig
from kafkactor.server.config import SharedBrokerConfig
from kafkactor.server.config_properties import ALIASES, IGNORED, SETTINGS
from kafkactor.storage import LogConfig

DOCS = Path(__file__).parents[2] / "docs" / "broker-config.md"

# Every supported property, none at its default.
FULL = """\
broker.id=7
log.dirs=/data/kafka-7
kafkactor.event.log=/var/log/kafkactor/broker-7.jsonl
kafkactor.event.log.enable=false
listeners=PLAINTEXT://10.1.2.3:19092,INTERNAL://10.1.2.3:19093
advertised.listeners=PLAINTEXT://broker7.example:29092,INTERNAL://broker7.internal:29093
socket.request.max.bytes=2000000
queued.max.requests=50
connections.max.idle.ms=60000
request.timeout.ms=15000
zookeeper.connect=zk1:2181,zk2:2182/kafka/prod
zookeeper.session.timeout.ms=9000
zookeeper.connection.timeout.ms=4000
controlled.shutdown.enable=false
controlled.shutdown.max.retries=5
controlled.shutdown.retry.backoff.ms=250
auto.leader.rebalance.enable=false
leader.imbalance.per.broker.percentage=25
leader.imbalance.check.interval.seconds=60
replica.lag.time.max.ms=30000
replica.fetch.wait.max.ms=400
replica.fetch.min.bytes=10
replica.fetch.max.bytes=2097152
replica.fetch.backoff.ms=200
replica.socket.timeout.ms=20000
replica.high.watermark.checkpoint.interval.ms=2500
producer.purgatory.purge.interval.requests=100
fetch.purgatory.purge.interval.requests=200
actor.runtime=threads
actor.dispatcher.throughput=8
auto.create.topics.enable=false
num.partitions=3
default.replication.factor=2
delete.topic.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
offset.metadata.max.bytes=1024
group.min.session.timeout.ms=1000
group.max.session.timeout.ms=60000
group.initial.rebalance.delay.ms=0
transaction.max.timeout.ms=600000
transactional.id.expiration.ms=86400000
transaction.abort.timed.out.transaction.cleanup.interval.ms=5000
transaction.remove.expired.transaction.cleanup.interval.ms=60000
transaction.state.log.num.partitions=8
transaction.state.log.replication.factor=2
transaction.state.log.min.isr=1
transaction.state.log.segment.bytes=1048576
log.retention.check.interval.ms=1000
log.flush.scheduler.interval.ms=500
log.flush.offset.checkpoint.interval.ms=30000
log.flush.start.offset.checkpoint.interval.ms=40000
log.cleaner.threads=0
log.cleaner.backoff.ms=3000
log.segment.bytes=1048576
log.roll.ms=3600000
log.index.interval.bytes=1024
log.index.size.max.bytes=65536
log.retention.bytes=1073741824
log.retention.ms=86400000
message.max.bytes=2000000
log.flush.interval.messages=1000
log.flush.interval.ms=2000
log.segment.delete.delay.ms=1000
min.insync.replicas=2
unclean.leader.election.enable=true
log.cleanup.policy=delete,compact
log.cleaner.delete.retention.ms=3600000
log.cleaner.min.cleanable.ratio=0.25
log.cleaner.min.compaction.lag.ms=5000
log.cleaner.max.compaction.lag.ms=600000
log.roll.jitter.ms=60000
log.message.timestamp.type=LogAppendTime
log.message.timestamp.difference.max.ms=3600000
compression.type=zstd
log.preallocate=true
log.message.format.version=2.4
log.message.downconversion.enable=false
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL
inter.broker.listener.name=INTERNAL
ssl.keystore.type=PEM
ssl.keystore.location=/etc/kafka/broker-7.pem
ssl.key.password=key-secret
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.client.auth=requested
ssl.endpoint.identification.algorithm=
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="broker" password="broker-secret";
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
super.users=User:admin;User:broker
allow.everyone.if.no.acl.found=true
connection.failed.authentication.delay.ms=250
queued.max.request.bytes=104857600
max.connections=1000
max.connections.per.ip=100
max.connections.per.ip.overrides=127.0.0.1:200
quota.window.num=5
quota.window.size.seconds=2
"""
# FULL leaves out security.inter.broker.protocol: Kafka refuses it beside
# inter.broker.listener.name (tests/server/test_security_config.py reads it)

# The settings of Kafka 3.9's config/server.properties (ZooKeeper mode), without its comments.
KAFKA_3_9_SERVER_PROPERTIES = """\
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""

MINIMAL = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def _write(tmp_path: Path, text: str, name: str = "broker.properties") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _refusal(tmp_path: Path, text: str) -> ConfigError:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_file(path)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message
    return caught.value


# -- loading -----------------------------------------------------------------------------------


def test_a_full_file_sets_every_supported_property(tmp_path: Path) -> None:
    names = {line.split("=", 1)[0] for line in FULL.splitlines() if not line.startswith(" ")}
    covered = names | {"security.inter.broker.protocol"}
    assert covered == set(SETTINGS), "FULL must cover every supported property"
    config = KafkaConfig.from_file(_write(tmp_path, FULL))

    assert config.broker_id == 7
    assert config.log_dirs == Path("/data/kafka-7")
    assert config.event_log == Path("/var/log/kafkactor/broker-7.jsonl")
    assert config.event_log_enable is False
    assert config.listeners == EndPoint("10.1.2.3", 19092)
    assert config.advertised_listeners == EndPoint("broker7.example", 29092)
    assert config.socket_server == SocketServerConfig(
        host="10.1.2.3",
        port=19092,
        socket_request_max_bytes=2_000_000,
        queued_max_requests=50,
        connections_max_idle_ms=60_000,
    )
    assert config.request_timeout_ms == 15_000
    assert config.zookeeper_connect == "zk1:2181,zk2:2182/kafka/prod"
    assert config.zookeeper_session_timeout_ms == 9000
    assert config.zookeeper_connection_timeout_ms == 4000
    assert config.controlled_shutdown_enable is False
    assert config.controlled_shutdown_max_retries == 5
    assert config.controlled_shutdown_retry_backoff_ms == 250

    broker = config.broker
    replica = broker.replica
    assert (replica.replica_lag_time_max_ms, replica.replica_fetch_wait_max_ms) == (30_000, 400)
    assert (replica.replica_fetch_min_bytes, replica.replica_fetch_max_bytes) == (10, 2_097_152)
    assert (replica.replica_fetch_backoff_ms, replica.replica_socket_timeout_ms) == (200, 20_000)
    assert replica.high_watermark_checkpoint_interval_ms == 2500
    assert broker.producer_purgatory_purge_interval == 100
    assert broker.fetch_purgatory_purge_interval == 200
    assert (broker.runtime.runtime, broker.runtime.throughput) == ("threads", 8)
    assert broker.controller == ControllerConfig(
        auto_leader_rebalance_enable=False,
        leader_imbalance_per_broker_percentage=25,
        leader_imbalance_check_interval_seconds=60,
    )
    apis = broker.apis
    assert (apis.auto_create_topics_enable, apis.delete_topic_enable) == (False, False)
    assert (apis.num_partitions, apis.default_replication_factor) == (3, 2)
    assert apis.offsets_topic_replication_factor == 1
    group = broker.group
    assert (group.offsets_topic_partitions, group.offset_metadata_max_bytes) == (10, 1024)
    assert (group.min_session_timeout_ms, group.max_session_timeout_ms) == (1000, 60_000)
    assert group.initial_rebalance_delay_ms == 0
    assert broker.transaction == TransactionConfig(
        max_timeout_ms=600_000,
        transactional_id_expiration_ms=86_400_000,
        abort_timed_out_transactions_interval_ms=5000,
        remove_expired_transactional_ids_interval_ms=60_000,
        state_log_num_partitions=8,
        state_log_replication_factor=2,
        state_log_min_isr=1,
        state_log_segment_bytes=1_048_576,
    )
    manager = broker.log_manager
    assert (manager.retention_check_interval_ms, manager.flush_check_interval_ms) == (1000, 500)
    assert manager.recovery_point_checkpoint_interval_ms == 30_000
    assert manager.log_start_offset_checkpoint_interval_ms == 40_000
    assert (manager.cleaner_threads, manager.cleaner_backoff_ms) == (0, 3000)

    assert config.log_config is manager.default_log_config
    assert config.log_config == LogConfig(
        segment_bytes=1_048_576,
        segment_ms=3_600_000,
        index_interval_bytes=1024,
        max_index_size=65_536,
        retention_bytes=1_073_741_824,
        retention_ms=86_400_000,
        max_message_bytes=2_000_000,
        flush_interval_messages=1000,
        flush_interval_ms=2000,
        file_delete_delay_ms=1000,
        min_insync_replicas=2,
        unclean_leader_election_enable=True,
        cleanup_policy="compact,delete",
        delete_retention_ms=3_600_000,
        min_cleanable_dirty_ratio=0.25,
        min_compaction_lag_ms=5000,
        max_compaction_lag_ms=600_000,
        segment_jitter_ms=60_000,
        message_timestamp_type="LogAppendTime",
        message_timestamp_difference_max_ms=3_600_000,
        compression_type="zstd",
        preallocate=True,
        message_format_version="2.4",
        message_downconversion_enable=False,
    )
    # kafkactor's own settings that no Kafka property reaches keep their defaults
    assert (broker.timer_tick_ms, broker.apis.cluster_id) == (1, "kafkactor")
    assert config.ignored == ()


def test_absent_settings_keep_the_defaults() -> None:
    config = KafkaConfig.from_properties(MINIMAL)
    assert config == KafkaConfig(
        broker_id=1,
        zookeeper_connect="127.0.0.1:2181",
        advertised_listeners=EndPoint("127.0.0.1", 9092),
        event_log=Path("/tmp/events-1.jsonl"),
    )
    assert config.listeners == config.advertised_listeners == EndPoint("127.0.0.1", 9092)
    assert config.log_dirs == Path("/tmp/kafka-logs")  # Kafka's log.dir default
    assert config.event_log_enable is True
    assert config.zookeeper_session_timeout_ms == 18_000
    assert config.zookeeper_connection_timeout_ms == 18_000  # the session timeout
    assert config.request_timeout_ms == 30_000
    assert config.controlled_shutdown_enable is True
    assert config.controlled_shutdown_max_retries == 3
    assert config.controlled_shutdown_retry_backoff_ms == 5000
    assert config.broker == BrokerConfig()
    assert config.socket_server == SocketServerConfig(host="127.0.0.1", port=9092)
    assert config.ignored == ()


def test_the_zookeeper_connection_timeout_defaults_to_the_session_timeout() -> None:
    config = KafkaConfig.from_properties({**MINIMAL, "zookeeper.session.timeout.ms": "6000"})
    assert config.zookeeper_connection_timeout_ms == 6000


def test_the_event_log_defaults_to_a_file_beside_the_data_directory() -> None:
    config = KafkaConfig.from_properties({**MINIMAL, "broker.id": "3", "log.dirs": "run/b3/data"})
    assert config.event_log == Path("run/b3/events-3.jsonl")


def test_kafka_3_9_stock_server_properties_loads_with_its_ignored_settings(
    tmp_path: Path,
) -> None:
    config = KafkaConfig.from_file(_write(tmp_path, KAFKA_3_9_SERVER_PROPERTIES))
    assert config.broker_id == 0
    assert config.log_dirs == Path("/tmp/kafka-logs")
    assert config.zookeeper_connect == "localhost:2181"
    assert config.zookeeper_connection_timeout_ms == 18_000
    assert config.socket_request_max_bytes == 104_857_600
    assert config.broker.apis.num_partitions == 1
    assert config.broker.apis.offsets_topic_replication_factor == 1
    assert config.broker.group.initial_rebalance_delay_ms == 0
    assert config.log_config.retention_ms == 168 * 60 * 60 * 1000
    assert config.broker.log_manager.retention_check_interval_ms == 300_000
    assert config.listeners == EndPoint("127.0.0.1", 9092)  # listeners is commented out there
    assert config.ignored == (
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "num.recovery.threads.per.data.dir",
    )
    transaction = config.broker.transaction
    assert (transaction.state_log_replication_factor, transaction.state_log_min_isr) == (1, 1)


def test_java_properties_syntax_is_read_as_java_reads_it(tmp_path: Path) -> None:
    text = (
        "! a bang comment\r\n"
        "broker.id : 4\r\n"
        "zookeeper.connect   zk\\u0031:2181\r\n"  # whitespace separator, a \\u escape
        "log.dirs=/data/with\\\\backslash/and space \r\n"  # an escaped backslash, trailing blank
        "listeners=PLAINTEXT://\\\r\n"
        "      [::1]:9092\r\n"
    )
    config = KafkaConfig.from_file(_write(tmp_path, text))
    assert config.broker_id == 4
    assert config.zookeeper_connect == "zk1:2181"
    assert config.log_dirs == Path("/data/with\\backslash/and space")
    assert config.listeners == EndPoint("::1", 9092)
    assert str(config.listeners) == "PLAINTEXT://[::1]:9092"


@pytest.mark.parametrize(
    ("extra", "retention_ms"),
    [
        ({"log.retention.hours": "2"}, 2 * 3_600_000),
        ({"log.retention.minutes": "3"}, 3 * 60_000),
        ({"log.retention.hours": "2", "log.retention.minutes": "3"}, 3 * 60_000),
        ({"log.retention.hours": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_in_hours_or_minutes_as_kafka_ranks_them(
    extra: dict[str, str], retention_ms: int
) -> None:
    config = KafkaConfig.from_properties({**MINIMAL, **extra})
    assert config.log_config.retention_ms == retention_ms


@pytest.mark.parametrize(
    ("extra", "jitter_ms"),
    [
        ({}, 0),  # Kafka's default: log.roll.jitter.hours=0
        ({"log.roll.jitter.hours": "2"}, 2 * 3_600_000),
        ({"log.roll.jitter.ms": "1500"}, 1500),
        ({"log.roll.jitter.hours": "2", "log.roll.jitter.ms": "1500"}, 1500),  # ms wins
        ({"log.roll.jitter.hours": "2", "log.roll.jitter.ms": "0"}, 0),
    ],
)
def test_roll_jitter_in_hours_or_ms_as_kafka_ranks_them(
    extra: dict[str, str], jitter_ms: int
) -> None:
    config = KafkaConfig.from_properties({**MINIMAL, **extra})
    assert config.log_config.segment_jitter_ms == jitter_ms


@pytest.mark.parametrize(
    ("name", "text", "field", "value"),
    [
        ("log.message.timestamp.type", "LogAppendTime", "message_timestamp_type", "LogAppendTime"),
        ("log.message.timestamp.type", " CreateTime ", "message_timestamp_type", "CreateTime"),
        ("log.message.timestamp.difference.max.ms", "0", "message_timestamp_difference_max_ms", 0),
        ("log.roll.jitter.ms", "0", "segment_jitter_ms", 0),
        ("log.preallocate", "TRUE", "preallocate", True),
        ("compression.type", "producer", "compression_type", "producer"),
        ("compression.type", "uncompressed", "compression_type", "uncompressed"),
        ("compression.type", "lz4", "compression_type", "lz4"),
        ("log.cleaner.max.compaction.lag.ms", "1", "max_compaction_lag_ms", 1),
        ("log.message.downconversion.enable", "False", "message_downconversion_enable", False),
        ("log.message.format.version", "0.10.2", "message_format_version", "0.10.2"),
        ("log.message.format.version", "2.8-IV0", "message_format_version", "2.8-IV0"),
    ],
)
def test_the_topic_defaults_kafka_2_8_adds_are_read_into_the_log_config(
    name: str, text: str, field: str, value: object
) -> None:
    config = KafkaConfig.from_properties({**MINIMAL, name: text})
    assert getattr(config.log_config, field) == value
    assert config.ignored == ()
    shared = SharedBrokerConfig.read(None, [(name, text)])  # kafkactor serve --override
    assert getattr(shared.broker.log_manager.default_log_config, field) == value


def test_a_minimum_compaction_lag_above_the_maximum_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as refused:
        KafkaConfig.from_properties(
            {
                **MINIMAL,
                "log.cleaner.max.compaction.lag.ms": "5",
                "log.cleaner.min.compaction.lag.ms": "10",
            }
        )
    assert refused.value.reason == (
        "'log.cleaner.min.compaction.lag.ms' (10) must not be above "
        "'log.cleaner.max.compaction.lag.ms' (5)"
    )


def test_the_other_names_kafka_accepts() -> None:
    config = KafkaConfig.from_properties(
        {**MINIMAL, "log.dir": "/d", "log.roll.hours": "2", "log.cleaner.enable": "false"}
    )
    assert config.log_dirs == Path("/d")
    assert config.log_config.segment_ms == 2 * 3_600_000
    assert config.broker.log_manager.cleaner_threads == 0
    both = {**MINIMAL, "log.dir": "/d", "log.dirs": "/e", "log.cleaner.threads": "1"}
    config = KafkaConfig.from_properties({**both, "log.cleaner.enable": "false"})
    assert config.log_dirs == Path("/e")  # log.dirs wins over log.dir
    assert config.broker.log_manager.cleaner_threads == 0  # disabled whatever the threads
    config = KafkaConfig.from_properties({**both, "log.cleaner.enable": "true"})
    assert config.broker.log_manager.cleaner_threads == 1


# -- refusals ----------------------------------------------------------------------------------


def test_an_unknown_setting_is_refused_on_its_own_line(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        # a comment
        ! another

        broker.id=1
        zookeeper.connect=zk:2181,\\
            zk2:2181
        log.dirs = /data

        brokr.id=3
        """
    )
    error = _refusal(tmp_path, text)
    assert str(error) == (
        f"{tmp_path / 'broker.properties'}:9: unknown setting 'brokr.id' (did you mean "
        "'broker.id'?)"
    )
    assert (error.line, error.setting) == (9, "brokr.id")


def test_line_numbers_count_windows_line_ends(tmp_path: Path) -> None:
    text = "# c\r\n\r\nbroker.id=1\r\nnum.io.thread=8\r\n"
    assert _refusal(tmp_path, text).line == 4


@pytest.mark.parametrize(
    ("line", "setting", "needle"),
    [
        ("replica.lag.time.max.ms=ten", "replica.lag.time.max.ms", "must be a positive integer"),
        ("num.partitions=0", "num.partitions", "must be a positive integer, got '0'"),
        ("actor.runtime=fibers", "actor.runtime", "must be dispatcher or threads"),
        ("num.partitions=1\\n2", "num.partitions", r"got '1\n2'"),  # an escaped line break
        ("broker.id=-1", "broker.id", "must be a non-negative integer, got '-1'"),
        ("log.retention.bytes=-2", "log.retention.bytes", "must be -1 or a non-negative"),
        ("delete.topic.enable=yes", "delete.topic.enable", "must be true or false"),
        ("log.cleaner.min.cleanable.ratio=2", "log.cleaner.min.cleanable.ratio", "from 0 to 1"),
        ("log.cleanup.policy=forever", "log.cleanup.policy", "delete, compact or"),
        ("log.cleaner.threads=4", "log.cleaner.threads", "must be 0 or 1"),
        ("ssl.keystore.type=JKS", "ssl.keystore.type", "must be PEM: kafkactor reads"),
        ("listeners=PLAINTEXT://h", "listeners", "must be NAME://host:port"),
        ("listeners=PLAINTEXT://h:99999", "listeners", "port from 0 to 65535"),
        ("listeners=PLAINTEXT://:9092", "listeners", "must name a host"),
        ("listeners=PLAINTEXT://a:1,PLAINTEXT://b:2", "listeners", "a different name"),
        ("listeners=PLAINTEXT://0.0.0.0:9092", "listeners", "cannot be advertised"),
        ("advertised.listeners=PLAINTEXT://h:0", "advertised.listeners", "port from 1"),
        ("advertised.listeners=PLAINTEXT://0.0.0.0:1", "advertised.listeners", "non-routable"),
        ("log.dirs=/a,/b", "log.dirs", "must name one directory, not 2"),
        ("log.dir=/a, /b", "log.dir", "must name one directory, not 2"),
        ("zookeeper.connect=zk", "zookeeper.connect", "host:port[,host:port...][/chroot]"),
        ("zookeeper.connect=zk:1/a//b", "zookeeper.connect", "malformed chroot"),
        ("ssl.keystore.password=p", "ssl.keystore.password", "has no store password"),
        ("node.id=1", "node.id", "KRaft is not built"),
        ("compression.type=brotli", "compression.type", "String must be one of: uncompressed"),
        ("compression.type=GZIP", "compression.type", "must be a valid compression.type value"),
        (
            "log.message.timestamp.type=WallClock",
            "log.message.timestamp.type",
            "must be a valid message.timestamp.type value (String must be one of: CreateTime, "
            "LogAppendTime), got 'WallClock'",
        ),
        (
            "log.message.timestamp.difference.max.ms=-1",
            "log.message.timestamp.difference.max.ms",
            "(Value must be at least 0; valid values: [0,...]), got '-1'",
        ),
        (
            "log.message.timestamp.difference.max.ms=9223372036854775808",  # above a Java long
            "log.message.timestamp.difference.max.ms",
            "(Not a number of type LONG)",
        ),
        (
            "log.roll.jitter.ms=-5",
            "log.roll.jitter.ms",
            "must be a valid segment.jitter.ms value (Value must be at least 0; valid values: "
            "[0,...]), got '-5'",
        ),
        ("log.roll.jitter.hours=-1", "log.roll.jitter.hours", "must be a non-negative integer"),
        (
            "log.cleaner.max.compaction.lag.ms=0",
            "log.cleaner.max.compaction.lag.ms",
            "(Value must be at least 1; valid values: [1,...]), got '0'",
        ),
        ("log.preallocate=yes", "log.preallocate", "(Expected value to be either true or false)"),
        (
            "log.message.downconversion.enable=1",
            "log.message.downconversion.enable",
            "must be a valid message.downconversion.enable value",
        ),
        (
            "log.message.format.version=3.0",
            "log.message.format.version",
            "(Version `3.0` is not a valid version; valid values: [0.8.0, 0.8.1,",
        ),
        ("kafkactor.event.logs=/e", "kafkactor.event.logs", "did you mean 'kafkactor.event.log'"),
    ],
)
def test_a_malformed_value_is_refused_naming_the_setting_and_line(
    tmp_path: Path, line: str, setting: str, needle: str
) -> None:
    base = [f"{k}={v}" if k != setting else f"# {k} below" for k, v in MINIMAL.items()]
    text = "\n".join(["# broker 1", *base, "", line, ""])
    error = _refusal(tmp_path, text)
    assert str(error).startswith(f"{tmp_path / 'broker.properties'}:{error.line}: ")
    assert error.line == text.splitlines().index(line) + 1
    assert error.setting == setting
    assert f"'{setting}'" in str(error)
    assert needle in str(error)


def test_a_rule_between_two_settings_blames_the_one_the_file_set(tmp_path: Path) -> None:
    text = "broker.id=1\nzookeeper.connect=zk:2181\nreplica.lag.time.max.ms=300\n"
    error = _refusal(tmp_path, text)
    assert (error.line, error.setting) == (3, "replica.lag.time.max.ms")
    assert error.reason == (
        "'replica.fetch.wait.max.ms' (500) must be less than 'replica.lag.time.max.ms' (300)"
    )


@pytest.mark.parametrize("missing", ["broker.id", "zookeeper.connect"])
def test_a_missing_required_setting_is_refused(tmp_path: Path, missing: str) -> None:
    text = "".join(f"{k}={v}\n" for k, v in MINIMAL.items() if k != missing)
    error = _refusal(tmp_path, text)
    assert str(error) == f"{tmp_path / 'broker.properties'}: missing required setting {missing!r}"
    assert (error.line, error.setting) == (None, None)


def test_a_duplicate_setting_is_refused_with_both_lines(tmp_path: Path) -> None:
    text = "broker.id=1\nzookeeper.connect=zk:2181\n# again\nbroker.id=2\n"
    error = _refusal(tmp_path, text)
    assert (error.line, error.setting) == (4, "broker.id")
    assert str(error).startswith(f"{tmp_path / 'broker.properties'}:4: 'broker.id' is set twice")
    assert "first on line 1" in str(error)


def test_a_file_that_is_not_there_or_not_text_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        KafkaConfig.from_file(tmp_path / "absent.properties")
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"broker.id=1\nlog.dirs=/caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin1\.properties:2: is not UTF-8 text"):
        KafkaConfig.from_file(path)
    path.write_bytes(b"broker.id=1\nlog.dirs=/a\\u12\n")
    with pytest.raises(ConfigError, match=r":2: malformed escape"):
        KafkaConfig.from_file(path)


def test_properties_from_a_mapping_are_refused_without_a_line() -> None:
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_properties({**MINIMAL, "num.partitions": "x"}, source="launcher")
    assert str(caught.value) == "launcher: 'num.partitions' must be a positive integer, got 'x'"


# -- writing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "properties",
    [
        MINIMAL,
        javaproperties.loads(FULL),
        javaproperties.loads(KAFKA_3_9_SERVER_PROPERTIES),
        {
            **MINIMAL,
            "listeners": "PLAINTEXT://[::1]:0",
            "log.dirs": "/données/#1 = x:y",
            "kafkactor.event.log": " lead space.jsonl",
        },
    ],
)
def test_what_to_properties_writes_reads_back_equal(
    tmp_path: Path, properties: dict[str, str]
) -> None:
    config = KafkaConfig.from_properties(properties)
    text = config.to_properties()
    assert KafkaConfig.from_properties(javaproperties.loads(text)) == config
    assert KafkaConfig.from_file(_write(tmp_path, text)) == config
    assert "############################# Replication #############################" in text


def test_to_properties_writes_every_setting_with_unset_ones_commented_out() -> None:
    text = KafkaConfig.from_properties(MINIMAL).to_properties()
    written = javaproperties.loads(text)
    assert set(written) == set(SETTINGS) - {
        "advertised.listeners",  # the listeners, as reading it back gives
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "inter.broker.listener.name",  # unset: named after security.inter.broker.protocol
        "security.inter.broker.protocol",  # unset: PLAINTEXT
        "ssl.keystore.location",
        "ssl.key.password",
        "ssl.truststore.location",
        "sasl.jaas.config",
    }
    assert "\n#log.flush.interval.ms=\n" in text


def test_equality_ignores_which_settings_were_ignored() -> None:
    plain = KafkaConfig.from_properties(MINIMAL)
    noisy = KafkaConfig.from_properties({**MINIMAL, "num.io.threads": "8"})
    assert noisy.ignored == ("num.io.threads",)
    assert noisy == plain
    assert dataclasses.replace(plain, broker_id=2) != plain


def test_the_docs_page_names_every_property_with_its_default() -> None:
    page = DOCS.read_text(encoding="utf-8")
    names = [*SETTINGS, *ALIASES, *IGNORED]
    assert [name for name in names if f"`{name}`" not in page] == []
    defaults = KafkaConfig.from_properties(MINIMAL)
    documented = dict(re.findall(r"^\| `([a-z.]+)` \| `([^`]*)` \|", page, flags=re.MULTILINE))
    assert len(documented) > 40
    for name, text in documented.items():
        setting = SETTINGS.get(name)
        if setting is None or setting.path is None:  # an alias's target, compression.type's value
            continue
        value: object = defaults
        for attr in setting.path:
            value = getattr(value, attr)
        assert setting.kind.format(value) == text, name


# -- SharedBrokerConfig: the properties every broker of an in-process cluster shares -----------


def test_the_stock_file_without_its_broker_id_is_shared_by_every_broker(tmp_path: Path) -> None:
    lines = KAFKA_3_9_SERVER_PROPERTIES.splitlines()
    stock = "\n".join(line for line in lines if not line.startswith("broker.id"))
    shared = SharedBrokerConfig.read(_write(tmp_path, stock), [("num.partitions", "4")])
    assert shared.broker.apis.num_partitions == 4  # the override over the file's 1
    assert shared.broker.group.initial_rebalance_delay_ms == 0
    assert shared.log_dirs == Path("/tmp/kafka-logs")
    assert shared.zookeeper_connect == "localhost:2181"
    assert shared.listeners is None  # commented out there: the caller's default
    assert "zookeeper.connection.timeout.ms" in shared.ignored  # a broker process's only


def test_a_shared_file_refuses_a_per_broker_setting_on_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "num.partitions=4\nbroker.id=1\n")
    with pytest.raises(ConfigError) as refused:
        SharedBrokerConfig.read(path)
    assert (refused.value.line, refused.value.setting) == (2, "broker.id")
    assert str(refused.value).startswith(f"{path}:2: 'broker.id' names one broker")


def test_an_override_is_checked_and_named_as_an_override(tmp_path: Path) -> None:
    path = _write(tmp_path, "replica.lag.time.max.ms=1000\n")
    with pytest.raises(ConfigError, match=r"^--override: 'num.partitions' must be a posi"):
        SharedBrokerConfig.read(path, [("num.partitions", "-1")])
    with pytest.raises(ConfigError) as refused:  # a rule between a file's and an override's
        SharedBrokerConfig.read(path, [("replica.fetch.wait.max.ms", "2000")])
    assert str(refused.value) == (
        "--override: 'replica.fetch.wait.max.ms' (2000) must be less than "
        "'replica.lag.time.max.ms' (1000)"
    )


def test_shared_properties_are_set_on_a_base_config() -> None:
    base = dataclasses.replace(BrokerConfig(), timer_tick_ms=5)
    shared = SharedBrokerConfig.from_properties({"num.partitions": "3"}, base=base)
    assert (shared.broker.timer_tick_ms, shared.broker.apis.num_partitions) == (5, 3)
    assert SharedBrokerConfig.from_properties({}, base=base).broker == base
