"""A cluster of brokers in one process, with topic creation, clients and fault injection."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkactor import zk_model
from kafkactor.actors.broker import Broker, BrokerConfig
from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.add_partitions import plan_added_partitions
from kafkactor.actors.controller.admin_zk import AdminZkClient, plan_assignment
from kafkactor.actors.runtime import Client, Directory, addresses
from kafkactor.actors.transaction import transaction_state_topic_config
from kafkactor.common import (
    LEADER_DURING_DELETE,
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    BrokerEndpoint,
    PartitionLeaderState,
    TopicExistsError,
    TopicPartition,
    UnknownTopicError,
)
from kafkactor.kafka_uuid import random_uuid, uuid_to_string
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.controller import ElectLeadersResponse, PartitionElectionResult
from kafkactor.messages.offsets import (
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.replication import (
    DescribePartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionDescription,
    StopReplica,
    StopReplicaResponse,
    TopicIdentity,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.network.group_apis import OFFSETS_TOPIC_CONFIG
from kafkactor.network.socket_server import SocketServerConfig
from kafkactor.server.config import ConfigError, SharedBrokerConfig
from kafkactor.storage import LogConfig
from kafkactor.testing import cluster_configs, cluster_elections, cluster_reassignments
from kafkactor.testing.security import (
    ClusterSecurity,
    TestCertificates,
    acls_reached,
    broker_security,
    client_config,
    create_acls,
    prepare,
    write_user,
)
from kafkactor.timer import Clock, SystemClock
from kafkactor.tracing import get_logger
from kafkactor.zk_model import EmbeddedZooKeeper

if TYPE_CHECKING:  # loaded when first used: `kafkactor serve` runs a Cluster without them
    from kafkactor.clients import Consumer, Producer
    from kafkactor.security.acl import AclBinding

_log = get_logger("kafkactor.cluster")

# Kafka's legal topic names: ASCII letters, digits, '.', '_' and '-', at most 249 characters.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

CLUSTER_CONTROLLER_ID = 0  # the Cluster itself assigns leaders until a controller does

# what `isolate_broker` drops between brokers: the replication data path
_REPLICATION_TRAFFIC = (
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)


# the broker properties that are a Cluster parameter -> that parameter
_CLUSTER_PARAMETERS = {
    "listeners": "listen= and port=",
    "log.dirs": "data_dir=",
    "log.dir": "data_dir=",
    "zookeeper.connect": "zookeeper=",
    "zookeeper.session.timeout.ms": "session_timeout_ms=",
    "kafkactor.event.log": "the tracing configuration, kafkactor.tracing.configure(path=...)",
    "kafkactor.event.log.enable": "the tracing configuration, kafkactor.tracing.configure()",
}


def _shared_properties(
    properties: Mapping[str, str] | SharedBrokerConfig | None, config: BrokerConfig | None
) -> SharedBrokerConfig:
    """`Cluster(properties=...)` read on top of `config`; the properties that say where the
    cluster lives are refused, naming the Cluster's parameter for them. Properties already
    read (`kafkactor serve` reads a file and overrides) are taken as they are."""
    if isinstance(properties, SharedBrokerConfig):
        if config is not None:
            raise ValueError("give config= or properties read into a SharedBrokerConfig, not both")
        return properties
    if properties is None:
        properties = {}
    for name in properties:
        if name in _CLUSTER_PARAMETERS:
            raise ConfigError(
                "properties",
                f"{name!r} is a Cluster parameter here: give {_CLUSTER_PARAMETERS[name]}",
                setting=name,
            )
    return SharedBrokerConfig.from_properties(properties, base=config, source="properties")


class ControllerRequestError(RuntimeError):
    """A broker refused or did not answer a LeaderAndIsr / UpdateMetadata request."""


class KafkaStorageError(ControllerRequestError):
    """A partition's leader could not open or create its log (Kafka's KafkaStorageException:
    EMFILE when the process is out of file descriptors, ENOSPC, ...), so waiting for it to
    lead would never end. The message names each such partition, its broker and why."""


class Cluster:
    """N brokers (ids 1..N) in one process on one `Directory`, each with its own data dir.

    With `zookeeper="embedded"` (the default: the in-memory ZooKeeper model) or
    `zookeeper="host:port"` (a real ZooKeeper, under a chroot of this cluster's own), brokers
    register in ZooKeeper and elect a controller, which assigns leaders and moves them when a
    broker fails (`docs/controller.md`); `session_timeout_ms` is the brokers' ZooKeeper session
    timeout (Kafka's default, 6 s).

    With `zookeeper=None` there is no controller: the Cluster assigns replicas and leaders
    itself through the same `LeaderAndIsr` and `UpdateMetadata` requests (controller epoch
    1) and leaders never move. `create_topic` spreads each partition's replicas over the
    brokers round-robin and makes the first replica leader with the whole replica list as ISR.

    `kill_broker` stops a broker as a crash (nothing flushed); `restart_broker` starts it again
    from its data dir (logs recovered). Without ZooKeeper it then follows its partitions, or
    leads again (leader epoch + 1, ISR = its live replicas) the ones it led.

    `properties` are Kafka's broker properties, shared by every broker
    (`{"num.partitions": "4", "group.initial.rebalance.delay.ms": "0"}`), read and checked as
    `kafkactor broker` reads its file (`kafkactor.server.SharedBrokerConfig`; a bad one raises
    `ConfigError`, a ValueError, naming it). They are set on top of `config`: a property wins
    over `config` for the setting it names, `config` keeps the rest. `broker.id` and
    `advertised.listeners` name one broker and are refused; the properties that say where the
    cluster lives are this constructor's parameters and are refused too, naming the parameter
    (`listeners`: listen and port; `log.dirs`: data_dir; `zookeeper.connect`: zookeeper;
    `zookeeper.session.timeout.ms`: session_timeout_ms; `kafkactor.event.log`: the tracing
    configuration). `properties_ignored` names those accepted with no effect here. A
    `SharedBrokerConfig` already read (with no `config`) is taken as it is.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        data_dir: Path | str | None = None,
        clock: Clock | None = None,
        config: BrokerConfig | None = None,
        request_timeout_s: float = 10.0,
        zookeeper: str | None = "embedded",
        session_timeout_ms: int = 6000,
        listen: str | None = None,
        port: int = 0,
        properties: Mapping[str, str] | SharedBrokerConfig | None = None,
        security: ClusterSecurity | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, got {brokers}")
        shared = _shared_properties(properties, config)
        self._owns_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafkactor-"))
        )
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.config = shared.broker
        self.properties_ignored = shared.ignored
        self.request_timeout_s = request_timeout_s
        self.directory = Directory()
        self.topic_configs: dict[str, LogConfig] = {}
        self.topic_ids: dict[str, str] = {}  # without ZooKeeper: the ids this cluster gave
        self.broker_ids = list(range(1, brokers + 1))
        self.brokers: dict[int, Broker] = {}
        self.partition_states: dict[tuple[str, int], PartitionLeaderState] = {}
        self.controller_epoch = 1
        self._controller: Client | None = None
        self._clients: list[Producer | Consumer] = []
        self._started = False
        # ZooKeeper mode: "embedded" (the in-memory model) or "host:port" (a real server)
        self.zookeeper = zookeeper
        self.session_timeout_ms = session_timeout_ms
        self.embedded_zookeeper: EmbeddedZooKeeper | None = None
        self._zk_hosts = ""
        self._zk: Any = None  # the cluster's own admin session (topic creation, reads)
        self._isolated: set[int] = set()
        # TLS, SASL users, ACLs (kafkactor.testing.security): a secured client listener
        self.security = security
        self.certificates: TestCertificates | None = None
        if security is not None and listen is None:
            listen = "127.0.0.1"
        # Kafka's wire protocol: broker i listens on (listen, port + i - 1), or on free ports
        self.listen = listen
        self._listeners: dict[int, SocketServerConfig] = {}
        if listen is not None:
            if port and not 0 < port <= 65536 - brokers:
                raise ValueError(f"port {port} leaves no room for {brokers} brokers")
            for index, broker_id in enumerate(self.broker_ids):
                self._listeners[broker_id] = dataclasses.replace(
                    shared.socket_server, host=listen, port=port + index if port else 0
                )
        self._admin_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Cluster:
        """Start ZooKeeper (when asked for) and every broker; a start that fails part way (a
        port taken, ...) stops what it started before it raises."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Cluster:
        if self.zookeeper is not None:
            self._start_zookeeper()
        if self.security is not None:
            self.certificates = prepare(self.security, self.data_dir / "tls", self._zk)
        for broker_id in self.broker_ids:
            self._start_broker(broker_id)
        self._controller = Client("controller", self.directory, self.clock)
        self._started = True
        if self.zookeeper is None:
            self._update_metadata()
        else:
            self._wait_for(
                lambda: sorted(self._controller_view()) == self.broker_ids,
                "a controller that sees every broker registered",
            )
        return self

    def _controller_view(self) -> list[int]:
        """The live brokers as the elected controller actor sees them ([] while none acts)."""
        controller = self.controller_id()
        ref = self.directory.resolve(addresses.controller(controller)) if controller else None
        if ref is None:
            return []
        try:
            view: dict[str, Any] = ref.proxy().describe().get(timeout=self.request_timeout_s)  # type: ignore[attr-defined]
        except Exception:  # stopping, or not the controller any more
            return []
        return list(view["live_brokers"]) if view["is_controller"] else []

    def _start_zookeeper(self) -> None:
        if self.zookeeper == "embedded":
            # ZooKeeper allows session timeouts of 2 to 20 ticks
            tick = max(1, min(2000, self.session_timeout_ms // 2))
            self.embedded_zookeeper = EmbeddedZooKeeper(self.clock, tick_ms=tick)
        else:  # a real server: this cluster lives under a chroot of its own
            chroot = f"/kafkactor-{uuid.uuid4().hex[:12]}"
            admin = zk_model.connect(
                str(self.zookeeper), session_timeout_ms=self.session_timeout_ms
            )
            try:
                admin.ensure_path(chroot)
            finally:
                admin.stop()
                admin.close()
            self._zk_hosts = f"{self.zookeeper}{chroot}"
        self._zk = self._connect_zookeeper()

    def _connect_zookeeper(self) -> Any:
        if self.embedded_zookeeper is not None:
            return zk_model.connect(
                "embedded",
                embedded=self.embedded_zookeeper,
                session_timeout_ms=self.session_timeout_ms,
            )
        return zk_model.connect(self._zk_hosts, session_timeout_ms=self.session_timeout_ms)

    def _new_broker(self, broker_id: int) -> Broker:
        return Broker(
            broker_id,
            self.data_dir / f"broker-{broker_id}",
            self.directory,
            clock=self.clock,
            config=self.config,
            topic_configs=self.topic_configs,
            zookeeper=self._connect_zookeeper if self.zookeeper is not None else None,
            listener=self._listeners.get(broker_id),
            admin=self,
            security=broker_security(
                self.security, self._listeners.get(broker_id), self.certificates
            ),
        )

    def _start_broker(self, broker_id: int) -> Broker:
        broker = self._new_broker(broker_id).start()
        if broker.listener is not None:  # a free port, now chosen: kept for restarts
            self._listeners[broker_id] = broker.listener
        self.brokers[broker_id] = broker
        return broker

    @property
    def bootstrap_servers(self) -> str:
        """`host:port,host:port,...` of every broker's listener (Cluster(listen=...))."""
        if not self._listeners:
            raise RuntimeError("the cluster has no listeners: create it with listen=<address>")
        if not self._started:
            raise RuntimeError("the cluster is not started")
        return ",".join(f"{_url_host(c.host)}:{c.port}" for _, c in sorted(self._listeners.items()))

    @property
    def ca_file(self) -> Path:
        """The generated test CA's PEM file (a TLS protocol's clients trust it)."""
        if self.certificates is None:
            raise RuntimeError("the cluster has no TLS listener: Cluster(security=...) with SSL")
        return self.certificates.ca_file

    def client_config(self, client: str, user: str | None = None, **options: Any) -> Any:
        """What `client` ("confluent-kafka", "kafka-python", "aiokafka", "kcat") sets to reach
        this cluster as `user` (kafkactor.testing.security.client_config)."""
        security = self.security or ClusterSecurity(protocol="PLAINTEXT")
        ca = self.certificates.ca_file if self.certificates is not None else None
        return client_config(client, security, self.bootstrap_servers, ca, user=user, **options)  # type: ignore[arg-type]

    def add_user(self, name: str, password: str) -> None:
        """A SCRAM user, added while the cluster runs (no broker restarts)."""
        assert self.security is not None and self._zk is not None, "needs security and ZooKeeper"
        write_user(self._zk, self.security, name, password)
        self.security = self.security.with_user(name, password)

    def add_acls(self, *bindings: AclBinding) -> None:
        """Create ACLs in ZooKeeper (as `kafka-acls --add`); returns once every live broker's
        authorizer has them."""
        assert self._zk is not None, "ACLs live in ZooKeeper"
        create_acls(self._zk, bindings)
        live = [b for b in self.brokers.values() if b.alive]
        self._wait_for(lambda: acls_reached(live, bindings), "the ACLs on every broker")

    def _endpoints(self, live: Iterable[int]) -> tuple[BrokerEndpoint, ...]:
        return tuple(
            BrokerEndpoint(broker_id=b, host=c.host, port=c.port)
            for b in live
            if (c := self._listeners.get(b)) is not None
        )

    def _wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.request_timeout_s
        pause = threading.Event()
        while not condition():
            if time.monotonic() > deadline:
                raise ControllerRequestError(
                    f"timed out after {self.request_timeout_s}s waiting for {what}"
                )
            pause.wait(0.01)

    def registered_brokers(self) -> list[int]:
        """The brokers an assignment may name: registered in ZooKeeper, or else the live ones."""
        return self._registered_brokers() if self._zk is not None else self.live_brokers()

    def _registered_brokers(self) -> list[int]:
        try:
            children = self._zk.get_children(zk_data.BROKER_IDS)
        except NoNodeError:
            return []
        return sorted(int(c) for c in children if c.isdigit())

    def controller_id(self) -> int | None:
        """The elected controller's broker id (ZooKeeper mode), None while there is none."""
        if self._zk is None:
            return None
        try:
            data, _ = self._zk.get(zk_data.CONTROLLER)
        except NoNodeError:
            return None
        return zk_data.decode_controller(data)

    def current_controller_epoch(self) -> int:
        """The controller epoch in `/controller_epoch` (ZooKeeper mode)."""
        data, _ = self._zk.get(zk_data.CONTROLLER_EPOCH)
        return zk_data.decode_controller_epoch(data)

    def stop(self) -> None:
        """Close every client and shut every live broker down cleanly."""
        for client in self._clients:
            client.close()
        self._clients = []
        for broker in self.brokers.values():
            broker.shutdown()
        if self._controller is not None:
            self._controller.close()
            self._controller = None
        if self._zk is not None:
            with contextlib.suppress(Exception):
                if self._zk_hosts:  # a real server: leave no trace of this cluster
                    self._zk.delete("/", recursive=True)
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None
        if self.embedded_zookeeper is not None:
            self.embedded_zookeeper.close()
            self.embedded_zookeeper = None
        self._started = False
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start() if not self._started else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what is alive ---------------------------------------------------------------------------

    def live_brokers(self) -> list[int]:
        return [b for b in self.broker_ids if b in self.brokers and self.brokers[b].alive]

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader (-1 when it has none)."""
        if self._zk is not None:
            data, _ = self._zk.get(zk_data.partition_state_path(topic, partition))
            return zk_data.decode_partition_state(topic, partition, data).leader
        return self.partition_states[(topic, partition)].leader

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        """The partition's ISR as ZooKeeper holds it (ZooKeeper mode)."""
        data, _ = self._zk.get(zk_data.partition_state_path(topic, partition))
        return zk_data.decode_partition_state(topic, partition, data).isr

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        if self._zk is not None:
            data, _ = self._zk.get(zk_data.topic_path(topic))
            return zk_data.decode_assignment(topic, data)[partition]
        return self.partition_states[(topic, partition)].replicas

    def describe_partition(
        self, topic: str, partition: int, broker: int | None = None
    ) -> PartitionDescription:
        """A replica's state, asked of its actor (by default the leader's replica)."""
        target = self.leader(topic, partition) if broker is None else broker
        response = self._result(
            target,
            self._request(
                target,
                DescribePartition(),
                address=addresses.partition(
                    target, str(TopicPartition(topic=topic, partition=partition))
                ),
            ),
        )
        if not isinstance(response, PartitionDescription):
            raise ControllerRequestError(f"broker {target} has no replica of {topic}-{partition}")
        return response

    def delete_records(
        self,
        offsets: Mapping[TopicPartition | tuple[str, int], int],
        *,
        timeout_ms: int = 30_000,
    ) -> dict[TopicPartition, int]:
        """Kafka's `AdminClient.deleteRecords` (KIP-107): the records below each offset (-1:
        below the high watermark) are deleted through the partition's leader; answers each
        partition's low watermark once every live replica's log starts there. Raises
        `records_deletion.DeleteRecordsError` (a `ClientError`) naming the partitions that
        failed: an unknown one, an offset past the high watermark, a compacted topic, ..."""
        from kafkactor.testing.records_deletion import delete_records

        def leader(tp: TopicPartition) -> int:
            try:
                return self.leader(tp.topic, tp.partition)
            except (KeyError, NoNodeError):  # no such topic or partition
                return -1

        def ask(broker: int, request: Any) -> Response:
            return self._result(broker, self._request(broker, request))

        return delete_records(offsets, leader=leader, ask=ask, timeout_ms=timeout_ms)

    # -- topics ----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        config: LogConfig | Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        """Create a topic; returns its replica assignment (partition -> broker ids).

        The assignment is `assignments` (`{0: (2, 3), 1: (3, 1)}`: the first replica is the
        preferred leader), checked as Kafka checks a manual one (`InvalidReplicaAssignmentError`;
        `partitions` and `replication_factor` are then left out), or else `partitions`
        (default 1) spread over the brokers with `replication_factor` (default 1) replicas.

        `config` is a LogConfig or Kafka's topic config names (`{"min.insync.replicas": "2"}`;
        an unknown key is an error) over the brokers' topic-config defaults (`log.*`,
        `min.insync.replicas`, ... of `properties`); none: those defaults. With ZooKeeper,
        the assignment and config are written to `/brokers/topics/<t>` and
        `/config/topics/<t>` and the controller elects the leaders; this returns once every
        partition has one (at once with `wait=False`, what a broker's CreateTopics asks: its
        answer waits in its topic purgatory). A leader that cannot open a partition's log
        (EMFILE past the open-file limit, ...) raises `KafkaStorageError` naming it and why.
        """
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise ValueError(f"illegal topic name {name!r}: use [a-zA-Z0-9._-], 1-249 chars")
        if any(topic == name for topic, _ in self.partition_states):
            raise TopicExistsError(f"topic {name!r} already exists")
        if partitions is not None and partitions < 1:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        defaults = self.config.log_manager.default_log_config
        overrides: dict[str, str] = {}  # what /config/topics/<t> holds: the overrides alone
        if isinstance(config, Mapping):  # Kafka's names, over the brokers' defaults (log.*)
            overrides = {str(k): str(v) for k, v in config.items()}
            config = zk_data.log_config_from(config, base=defaults)
        elif config is not None:
            overrides = zk_data.topic_config_overrides(config, base=defaults)
        with self._admin_lock:  # brokers create topics too (CreateTopics, auto-creation)
            if self._zk is not None and self._zk.exists(zk_data.topic_path(name)) is not None:
                raise TopicExistsError(f"topic {name!r} already exists")
            assignment = plan_assignment(
                self.registered_brokers(), partitions, replication_factor, assignments
            )
            return self._create_topic(name, assignment, config, overrides, wait=wait)

    def _create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        config: LogConfig | None,
        overrides: Mapping[str, str] | None = None,
        *,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        if self._zk is not None:
            return self._create_topic_in_zookeeper(
                name, assignment, config, overrides or {}, wait=wait
            )
        if config is not None:
            self.topic_configs[name] = config
        self.topic_ids[name] = uuid_to_string(random_uuid())  # KIP-516, as a controller does
        states = []
        for p, replicas in assignment.items():
            state = PartitionLeaderState(
                topic=name,
                partition=p,
                controller_epoch=self.controller_epoch,
                leader=replicas[0],
                leader_epoch=0,
                isr=replicas,
                replicas=replicas,
            )
            self.partition_states[(name, p)] = state
            states.append(state)
        _log_topic_created(name, assignment)
        self._leader_and_isr(states)
        self._update_metadata()
        return assignment

    def _create_topic_in_zookeeper(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        config: LogConfig | None,
        overrides: Mapping[str, str],
        *,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        effective = config if config is not None else self.config.log_manager.default_log_config
        self.topic_configs[name] = effective
        config_path = zk_data.topic_config_path(name)
        config_data = zk_data.encode_topic_config_overrides(overrides)  # as Kafka: overrides
        if self._zk.exists(config_path) is None:
            self._zk.create(config_path, config_data, makepath=True)
        else:
            self._zk.set(config_path, config_data)
        try:
            self._zk.create(
                zk_data.topic_path(name),
                zk_data.encode_assignment(assignment, random_uuid()),  # KIP-516
                makepath=True,
            )
        except NodeExistsError:
            raise TopicExistsError(f"topic {name!r} already exists") from None
        _log_topic_created(name, assignment)
        if wait:  # (a broker's CreateTopics waits in its topic purgatory instead)
            self._wait_for(
                lambda: self._all_led(name, assignment), f"leaders for every partition of {name!r}"
            )
        return assignment

    def _all_led(self, topic: str, partitions: Iterable[int]) -> bool:
        """Every partition has an acting leader; raises `KafkaStorageError` when the leader
        of the first one waited for could not open its log (its replica manager holds it
        offline), naming every partition of the topic whose leader holds it so."""
        waiting = next((p for p in partitions if not self._is_led(topic, p)), None)
        if waiting is None:
            return True
        try:
            leader = self.leader(topic, waiting)
        except NoNodeError:  # no leader elected yet
            return False
        if f"{topic}-{waiting}" not in self._offline(leader):
            return False
        failed = []
        for broker in self.live_brokers():
            for key, why in self._offline(broker).items():
                name, _, partition = key.rpartition("-")
                with contextlib.suppress(NoNodeError):
                    if name == topic and self.leader(topic, int(partition)) == broker:
                        failed.append(f"{key} on broker {broker}: {why}")
        raise _storage_error(failed)

    def _offline(self, broker: int) -> dict[str, str]:
        """The partitions (`topic-partition`) whose log the broker could not open, each with
        why (`EMFILE (Too many open files): <file>`), as its replica manager holds them."""
        ref = self.directory.resolve(addresses.replica_manager(broker))
        if ref is None:
            return {}
        try:
            ask = ref.proxy().offline_partitions()  # type: ignore[attr-defined]
            offline: dict[str, str] = ask.get(timeout=self.request_timeout_s)
        except Exception:  # stopping: nothing to say
            return {}
        return offline

    def _is_led(self, topic: str, partition: int) -> bool:
        """The partition has a leader in ZooKeeper, and that broker acts as its leader."""
        try:
            leader = self.leader(topic, partition)
        except NoNodeError:
            return False
        if leader < 0 or leader not in self.live_brokers():
            return False
        try:
            return self.describe_partition(topic, partition, broker=leader).is_leader
        except ControllerRequestError:
            return False

    def wait_for_leader(self, topic: str, partition: int, *, not_broker: int | None = None) -> int:
        """Wait until the partition has a live, acting leader (other than `not_broker`)."""
        self._wait_for(
            lambda: self._is_led(topic, partition) and self.leader(topic, partition) != not_broker,
            f"a leader for {topic}-{partition}",
        )
        return self.leader(topic, partition)

    def create_partitions(
        self,
        topic: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        """Grow `topic` to `total` partitions (Kafka's CreatePartitions); returns its whole
        replica assignment. The new partitions get `assignments` (one replica list each, in
        partition order, the first replica the leader) or replicas generated as Kafka does,
        with Kafka's checks (`plan_added_partitions`: `InvalidPartitionsError`,
        `InvalidReplicaAssignmentError`, `InvalidReplicationFactorError`; `UnknownTopicError`;
        with ZooKeeper `TopicQueuedForDeletionError` for a topic marked for deletion).
        `validate_only` checks and changes nothing.

        With ZooKeeper the larger assignment is written to `/brokers/topics/<t>` and the
        controller, which watches that znode, elects the new partitions' leaders; this returns
        once each has an acting leader (at once without `wait`: a broker's CreatePartitions
        waits in its topic purgatory instead). Without ZooKeeper the Cluster sends LeaderAndIsr
        and UpdateMetadata itself, as for a new topic."""
        with self._admin_lock:  # brokers add partitions too (CreatePartitions)
            if self._zk is not None:
                whole = AdminZkClient(lambda: self._zk).create_partitions(
                    topic,
                    total,
                    assignments,
                    validate_only=validate_only,
                    max_partitions=max_partitions,
                    wait=False,
                )
            else:
                existing = {
                    p: s.replicas for (t, p), s in self.partition_states.items() if t == topic
                }
                if not existing:
                    raise UnknownTopicError(f"The topic '{topic}' does not exist.")
                added = plan_added_partitions(
                    topic,
                    existing,
                    self.registered_brokers(),
                    total,
                    assignments,
                    max_partitions=max_partitions,
                )
                whole = {**existing, **added}
                if not validate_only:
                    self._lead_added_partitions(topic, added)
        if self._zk is not None and wait and not validate_only:
            self._wait_for(
                lambda: self._all_led(topic, range(len(whole))),
                f"leaders for every partition of {topic!r}",
            )
        return whole

    def _lead_added_partitions(self, topic: str, added: dict[int, tuple[int, ...]]) -> None:
        """Without ZooKeeper: added partitions led by their first replica, all in the ISR."""
        states = [
            PartitionLeaderState(
                topic=topic,
                partition=p,
                controller_epoch=self.controller_epoch,
                leader=replicas[0],
                isr=replicas,
                replicas=replicas,
            )
            for p, replicas in added.items()
        ]
        for state in states:
            self.partition_states[(topic, state.partition)] = state
        self._leader_and_isr(states)
        self._update_metadata()

    # -- dynamic topic configs (kafkactor.testing.cluster_configs) --------------------------------

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides by Kafka's names (`/config/topics/<t>` with ZooKeeper)."""
        return cluster_configs.read_topic_config(self, topic)

    def change_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Replace the topic's overrides (a key left out reverts to the brokers' default), as
        AlterConfigs does; checked as Kafka checks them. Returns without waiting for brokers."""
        return cluster_configs.change_config(self, topic, overrides)

    def alter_topic_config(self, topic: str, changes: Mapping[str, str | None]) -> LogConfig:
        """Set (a value) or delete (None) some of the topic's overrides, as
        IncrementalAlterConfigs does; returns once every live broker's replicas of the topic
        run with the new config (`ControllerRequestError` after `request_timeout_s`).
        With ZooKeeper through `/config/topics/<t>` and a change notification."""
        return cluster_configs.alter_topic_config(self, topic, changes)

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        """Delete a topic: its replicas' logs, and every broker's metadata of it.

        With ZooKeeper it marks the topic for deletion (`/admin/delete_topics/<name>`) and the
        controller deletes it (docs/controller.md). This returns once no live broker's metadata
        has the topic and no live broker holds a replica of it, and, when every replica's
        broker is live, once the controller has removed its znodes (the name can be used
        again). A replica on a broker that is down is deleted when that broker comes back;
        until then the topic's znodes stay and the name stays taken, as in Kafka. Raises
        `ControllerRequestError` when that takes longer than `request_timeout_s`.

        Without ZooKeeper the Cluster does it itself: UpdateMetadata makes the brokers forget
        the topic, its replicas get StopReplica(delete_partitions=True), and the topic leaves
        `partition_states` and `topic_configs`. Every replica's broker must be live (a
        `ControllerRequestError` otherwise: without a controller nobody would delete it later).

        Raises `UnknownTopicError` for a topic that does not exist. With `wait=False` (what a
        broker's DeleteTopics asks: its answer waits in its topic purgatory) it returns once the
        topic is marked for deletion.
        """
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise UnknownTopicError(f"no topic {name!r}: not a legal topic name")
        with self._admin_lock:  # brokers create and delete topics too (CreateTopics, ...)
            if self._zk is not None:
                self._delete_topic_in_zookeeper(name, wait=wait)
            else:
                self._delete_topic_without_zookeeper(name)
                self.topic_ids.pop(name, None)
            self.topic_configs.pop(name, None)

    def _delete_topic_in_zookeeper(self, name: str, *, wait: bool = True) -> None:
        try:
            data, _ = self._zk.get(zk_data.topic_path(name))
        except NoNodeError:
            raise UnknownTopicError(f"no topic {name!r}") from None
        try:
            holders = {b for r in zk_data.decode_assignment(name, data).values() for b in r}
        except zk_data.MalformedZnodeError:
            holders = set()
        with contextlib.suppress(NodeExistsError):  # already marked: wait for it all the same
            self._zk.create(zk_data.delete_topic_path(name), b"", makepath=True)
        if not wait:  # (a broker's DeleteTopics waits in its topic purgatory instead)
            return

        def deleted() -> bool:
            live = self.live_brokers()
            if any(self._knows_topic(b, name) or self._holds_topic(b, name) for b in live):
                return False
            if holders <= set(live):  # nothing waits for a broker to return: all gone
                return self._zk.exists(zk_data.delete_topic_path(name)) is None
            return True

        self._wait_for(deleted, f"the deletion of topic {name!r}")
        _log.info(
            "cluster.topic_deleted", topic=name, pending=sorted(holders - set(self.live_brokers()))
        )

    def _knows_topic(self, broker: int, topic: str) -> bool:
        """The broker's metadata cache has the topic (False for a broker that did not answer:
        it is not live any more)."""
        response = self._result(broker, self._request(broker, MetadataRequest(topics=(topic,))))
        if not isinstance(response, MetadataResponse):
            return False
        return any(t.topic == topic and t.partitions for t in response.topics)

    def _holds_topic(self, broker: int, topic: str) -> bool:
        """The broker has a log of the topic (its replica's, or one loaded from disk)."""
        return any(tp.topic == topic for tp in self.brokers[broker].log_manager.all_logs())

    def _delete_topic_without_zookeeper(self, name: str) -> None:
        states = [s for (topic, _), s in sorted(self.partition_states.items()) if topic == name]
        if not states:
            raise UnknownTopicError(f"no topic {name!r}")
        live = self.live_brokers()
        down = sorted({r for s in states for r in s.replicas} - set(live))
        if down:
            raise ControllerRequestError(
                f"brokers {down} hold replicas of {name!r} and are down: restart them first"
            )
        # brokers forget the topic first (leader LEADER_DURING_DELETE), as Kafka's do
        kept = tuple(s for (topic, _), s in self.partition_states.items() if topic != name)
        gone = tuple(
            PartitionLeaderState(
                topic=s.topic,
                partition=s.partition,
                controller_epoch=self.controller_epoch,
                leader=LEADER_DURING_DELETE,
                leader_epoch=s.leader_epoch,
                isr=s.isr,
                replicas=s.replicas,
            )
            for s in states
        )
        request = UpdateMetadata(
            controller_id=CLUSTER_CONTROLLER_ID,
            controller_epoch=self.controller_epoch,
            partition_states=kept + gone,
            live_brokers=tuple(live),
            endpoints=self._endpoints(live),
        )
        calls = {broker: self._request(broker, request) for broker in live}
        for broker, future in calls.items():
            response = self._result(broker, future)
            if not isinstance(response, UpdateMetadataResponse) or response.error_code:
                raise ControllerRequestError(f"broker {broker} refused UpdateMetadata: {response}")
        by_broker: dict[int, list[TopicPartition]] = {}
        for s in states:
            for replica in s.replicas:
                by_broker.setdefault(replica, []).append(s.topic_partition)
        stops = {
            broker: self._request(
                broker,
                StopReplica(
                    controller_id=CLUSTER_CONTROLLER_ID,
                    controller_epoch=self.controller_epoch,
                    delete_partitions=True,
                    partitions=tuple(partitions),
                ),
            )
            for broker, partitions in sorted(by_broker.items())
        }
        for broker, future in stops.items():
            response = self._result(broker, future)
            if not isinstance(response, StopReplicaResponse) or response.error_code:
                raise ControllerRequestError(f"broker {broker} refused StopReplica: {response}")
            failed = [p for p in response.partitions if p.error_code is not ErrorCode.NONE]
            if failed:
                raise ControllerRequestError(f"broker {broker}: StopReplica failed for {failed}")
        for s in states:
            del self.partition_states[(name, s.partition)]
        _log.info("cluster.topic_deleted", topic=name, pending=[])

    # -- clients ---------------------------------------------------------------------------------

    def producer(self, **options: Any) -> Producer:
        """A producer (see `Producer`: acks, timeout_ms, retries, transactional_id, ...), closed
        with the cluster; with a `transactional_id`, `create_transaction_state_topic` first."""
        if options.get("transactional_id") is not None:
            self.create_transaction_state_topic()
        from kafkactor.clients import Producer

        producer = Producer(self.directory, self.live_brokers, clock=self.clock, **options)
        self._clients.append(producer)
        return producer

    def consumer(self, **options: Any) -> Consumer:
        """A consumer (see `Consumer`: max_wait_ms, min_bytes, group_id, isolation_level, ...),
        closed with the cluster; with a `group_id`, `ensure_offsets_topic` first."""
        if options.get("group_id") is not None:
            self.ensure_offsets_topic()
        from kafkactor.clients import Consumer

        consumer = Consumer(self.directory, self.live_brokers, clock=self.clock, **options)
        self._clients.append(consumer)
        return consumer

    def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` unless it exists (`config.group.offsets_topic_partitions`
        partitions, replication factor min(offsets.topic.replication.factor, live brokers),
        compacted), as a broker does on
        the first FindCoordinator of the wire protocol."""
        with contextlib.suppress(TopicExistsError):
            partitions, live = self.config.group.offsets_topic_partitions, self.live_brokers()
            factor = min(self.config.apis.offsets_topic_replication_factor, len(live))
            self.create_topic(OFFSETS_TOPIC, partitions, factor, OFFSETS_TOPIC_CONFIG)

    def create_transaction_state_topic(self) -> None:
        """Create `__transaction_state` unless it exists (`transaction.state.log.num.partitions`
        partitions, replication factor min(transaction.state.log.replication.factor, live
        brokers), compacted, Kafka's configs), as a broker does on the first FindCoordinator
        for a transactional id."""
        with contextlib.suppress(TopicExistsError):
            txn, live = self.config.transaction, self.live_brokers()
            factor = min(txn.state_log_replication_factor, len(live))
            config = transaction_state_topic_config(txn, factor)
            self.create_topic(TRANSACTION_STATE_TOPIC, txn.state_log_num_partitions, factor, config)

    # -- faults ----------------------------------------------------------------------------------

    def kill_broker(self, broker_id: int, *, lose_unflushed: bool = False) -> None:
        """Stop a broker as a crash: its actors stop, nothing is flushed or checkpointed.

        With ZooKeeper its session stops heartbeating, so its registration goes (and the
        controller reacts) only when the session times out, as after a real crash.
        `lose_unflushed=True` models an OS crash or power loss rather than a process crash:
        its segment files are cut back to what was fsynced, so records it had written but
        not flushed are gone when it restarts.
        """
        self.brokers[broker_id].kill(lose_unflushed=lose_unflushed)
        _log.info("cluster.broker_killed", broker=broker_id, lose_unflushed=lose_unflushed)
        if self._zk is None:
            self._update_metadata()

    def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None, election: str = "preferred"
    ) -> dict[tuple[str, int], PartitionElectionResult]:
        """Kafka's ElectLeaders, asked of the active controller (ZooKeeper mode). `election`
        "preferred": each partition's first assigned replica leads again if it is live and in
        the ISR; "unclean": an offline partition gets a live replica, out of the ISR if need
        be. `partitions` None: every partition, and those that needed no election are left
        out, as in Kafka. Returns each partition's result (error NONE: `leader` leads now).
        Raises ControllerRequestError without ZooKeeper (no controller to ask: the Cluster
        leads a restarted broker's partitions back itself) or with no controller elected."""
        if self._zk is None:
            raise ControllerRequestError("elect_leaders needs ZooKeeper (a controller)")
        request = cluster_elections.elect_request(self._zk, partitions, election)
        controller = self.controller_id()
        if controller is None:
            raise ControllerRequestError("no controller is elected")
        address = addresses.controller(controller)
        response = self._result(controller, self._request(controller, request, address=address))
        if not isinstance(response, ElectLeadersResponse):
            raise ControllerRequestError(f"controller {controller} did not elect: {response}")
        return cluster_elections.elect_results(response, everything=partitions is None)

    def reassign_partitions(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Kafka's AlterPartitionReassignments (KIP-455), asked of the active controller:
        each `(topic, partition)` moves to its target replicas, or, for None, a reassignment
        under way is cancelled. Returns each partition's error (NONE: started, or already
        done) and Kafka's message; the moves complete later (`wait_for_reassignments`).
        Raises ControllerRequestError without ZooKeeper (no controller to move replicas) or
        with no controller elected, `ReassignmentRequestError` for NOT_CONTROLLER."""
        if self._zk is None:
            raise ControllerRequestError("reassign_partitions needs ZooKeeper (a controller)")
        response = self._ask_controller(cluster_reassignments.alter_request(targets))
        return cluster_reassignments.alter_results(response)

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
        """Kafka's ListPartitionReassignments: the partitions (of `partitions`, or all) being
        reassigned, with their `replicas`, `adding_replicas` and `removing_replicas`."""
        if self._zk is None:
            raise ControllerRequestError(
                "list_partition_reassignments needs ZooKeeper (a controller)"
            )
        response = self._ask_controller(cluster_reassignments.list_request(partitions))
        return cluster_reassignments.list_results(response)

    def wait_for_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, timeout_s: float = 30.0
    ) -> None:
        """Wait until none of `partitions` (or no partition) is being reassigned, asking the
        controller in place (a controller that moves meanwhile is asked again);
        ControllerRequestError after `timeout_s`."""
        keys = list(partitions) if partitions is not None else None

        def done() -> bool:
            try:
                return not self.list_partition_reassignments(keys)
            except (ControllerRequestError, cluster_reassignments.ReassignmentRequestError):
                return False

        deadline = time.monotonic() + timeout_s
        pause = threading.Event()
        while not done():
            if time.monotonic() > deadline:
                raise ControllerRequestError(f"reassignments still under way after {timeout_s}s")
            pause.wait(0.05)

    def _ask_controller(self, request: Any) -> Response:
        controller = self.controller_id()
        if controller is None:
            raise ControllerRequestError("no controller is elected")
        address = addresses.controller(controller)
        return self._result(controller, self._request(controller, request, address=address))

    def stop_broker(self, broker_id: int, *, controlled: bool = False) -> bool:
        """Stop a broker cleanly (flushed, checkpointed; its ZooKeeper session closed).

        With `controlled`, first Kafka's controlled shutdown (`Broker.controlled_shutdown`):
        the controller moves its leaderships away while it still serves. Returns whether
        that left it leading nothing (always False without it)."""
        broker = self.brokers[broker_id]
        moved = False
        if controlled:
            moved = broker.controlled_shutdown(
                retries=3, backoff_ms=200, timeout_s=self.request_timeout_s
            )
        broker.shutdown()
        if self._zk is None:
            self._update_metadata()
        return moved

    def expire_session(self, broker_id: int) -> None:
        """Expire a running broker's ZooKeeper session (it reconnects with a new one).

        On a real server this is the classic trick: a second connection with the same session
        id and password takes the session over and closes it.
        """
        session = self.brokers[broker_id].zookeeper
        if session is None:
            raise RuntimeError("this cluster runs without ZooKeeper")
        if self.embedded_zookeeper is not None:
            self.embedded_zookeeper.expire_session(session.session_id)
        else:
            from kazoo.client import KazooClient  # a real ZooKeeper's client: loaded for one

            session_id, password = session.client.client_id
            twin = KazooClient(
                hosts=self._zk_hosts,
                client_id=(session_id, password),
                timeout=self.session_timeout_ms / 1000,
            )
            twin.start(timeout=self.request_timeout_s)
            twin.stop()
            twin.close()
        _log.info("cluster.session_expired", broker=broker_id)

    def isolate_broker(self, broker_id: int) -> None:
        """Drop the replication traffic between this broker and its peers (fetches and the
        OffsetsForLeaderEpoch exchange); its ZooKeeper session stays up."""
        self._isolated.add(broker_id)
        self.directory.drop = self._drop_isolated_fetch
        _log.info("cluster.broker_isolated", broker=broker_id)

    def heal_broker(self, broker_id: int) -> None:
        """Undo `isolate_broker`: fetches between this broker and its peers flow again."""
        self._isolated.discard(broker_id)
        if not self._isolated:
            self.directory.drop = None
        _log.info("cluster.broker_healed", broker=broker_id)

    def _drop_isolated_fetch(self, address: str, message: Any) -> bool:
        payload = getattr(message, "payload", message)
        if not isinstance(payload, _REPLICATION_TRAFFIC):
            return False
        # the envelope's sender; a request sent bare (tracing off) names it as its reply_to
        sender = getattr(message, "sender", "") or getattr(payload, "reply_to", "")
        ends = {_broker_of(address), _broker_of(sender)}
        return len(ends) == 2 and None not in ends and bool(ends & self._isolated)

    def restart_broker(self, broker_id: int) -> Broker:
        """Start a stopped or killed broker from its data dir; it rejoins its partitions."""
        old = self.brokers.get(broker_id)
        if old is not None and old.alive:
            raise RuntimeError(f"broker {broker_id} is running")
        broker = self._start_broker(broker_id)
        _log.info("cluster.broker_restarted", broker=broker_id)
        if self._zk is not None:
            return broker  # the controller sees it register and tells it what to do
        led, followed = [], []
        live = set(self.live_brokers())
        for key, state in sorted(self.partition_states.items()):
            if broker_id not in state.replicas:
                continue
            if state.leader != broker_id:
                followed.append(state)
            else:  # it led: lead again, in a new epoch every replica hears of
                again = PartitionLeaderState(
                    topic=state.topic,
                    partition=state.partition,
                    controller_epoch=self.controller_epoch,
                    leader=broker_id,
                    leader_epoch=state.leader_epoch + 1,
                    isr=tuple(r for r in state.replicas if r in live),  # the live ones
                    replicas=state.replicas,
                    zk_version=state.zk_version + 1,
                )
                self.partition_states[key] = again
                led.append(again)
        self._leader_and_isr(led)
        self._leader_and_isr(followed, only_broker=broker_id)
        self._update_metadata()
        return broker

    # -- the requests a controller sends ---------------------------------------------------------

    def _leader_and_isr(
        self, states: Iterable[PartitionLeaderState], only_broker: int | None = None
    ) -> None:
        by_broker: dict[int, list[PartitionLeaderState]] = {}
        for state in states:
            for replica in state.replicas:
                if only_broker is not None and replica != only_broker:
                    continue
                by_broker.setdefault(replica, []).append(state)
        live = set(self.live_brokers())
        calls = {
            broker: self._request(
                broker,
                LeaderAndIsr(
                    controller_id=CLUSTER_CONTROLLER_ID,
                    controller_epoch=self.controller_epoch,
                    partition_states=tuple(broker_states),
                    topic_ids=tuple(
                        TopicIdentity(topic=t, topic_id=self.topic_ids[t])
                        for t in sorted({s.topic for s in broker_states})
                        if t in self.topic_ids
                    ),
                ),
            )
            for broker, broker_states in by_broker.items()
            if broker in live
        }
        for broker, future in calls.items():
            response = self._result(broker, future)
            if not isinstance(response, LeaderAndIsrResponse) or response.error_code:
                raise ControllerRequestError(f"broker {broker} refused LeaderAndIsr: {response}")
            failed = [p for p in response.partitions if p.error_code is not ErrorCode.NONE]
            offline = self._offline(broker) if failed else {}
            if storage := [
                f"{key} on broker {broker}: {offline[key]}"
                for p in failed
                if p.error_code is ErrorCode.KAFKA_STORAGE_ERROR
                and (key := f"{p.topic}-{p.partition}") in offline
            ]:
                raise _storage_error(storage)
            if failed:
                raise ControllerRequestError(f"broker {broker}: LeaderAndIsr failed for {failed}")

    def _update_metadata(self) -> None:
        live = tuple(self.live_brokers())
        request = UpdateMetadata(
            controller_id=CLUSTER_CONTROLLER_ID,
            controller_epoch=self.controller_epoch,
            partition_states=tuple(self.partition_states.values()),
            live_brokers=live,
            endpoints=self._endpoints(live),
            topic_ids=tuple(TopicIdentity(topic=t, topic_id=i) for t, i in self.topic_ids.items()),
        )
        calls = {broker: self._request(broker, request) for broker in live}
        for broker, future in calls.items():
            self._result(broker, future)

    def _request(self, broker: int, request: Any, *, address: str | None = None) -> Future[Any]:
        assert self._controller is not None, "the cluster is not started"
        target = address if address is not None else addresses.replica_manager(broker)
        return self._controller.request(target, request)

    def _result(self, broker: int, future: Future[Any]) -> Response:
        try:
            response: Response = future.result(self.request_timeout_s)
        except TimeoutError:
            raise ControllerRequestError(
                f"broker {broker} did not answer within {self.request_timeout_s}s"
            ) from None
        return response


def _storage_error(failed: Sequence[str]) -> KafkaStorageError:
    """The error naming the first five partitions whose log could not be opened, and why."""
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    return KafkaStorageError(
        "KAFKA_STORAGE_ERROR: cannot open the log of " + "; ".join(failed[:5]) + more
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _broker_of(address: str) -> int | None:
    parts = address.split("/")
    if len(parts) >= 2 and parts[0] == "broker" and parts[1].isdigit():
        return int(parts[1])
    return None


def _log_topic_created(name: str, assignment: dict[int, tuple[int, ...]]) -> None:
    _log.info(
        "cluster.topic_created",
        topic=name,
        partitions=len(assignment),
        replication_factor=len(next(iter(assignment.values()))),
        assignment={str(p): list(r) for p, r in assignment.items()},
    )
