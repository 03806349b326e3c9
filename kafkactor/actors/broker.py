"""One broker: its timer and Reaper, purgatories, replica manager, log manager and scheduler."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykka
from kazoo.exceptions import NoNodeError

from kafkactor.actors.broker_network import start_network
from kafkactor.actors.broker_security import BrokerSecurity, client_quotas, registration
from kafkactor.actors.controller import ControllerActor, ZooKeeperSession, zk_data
from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.controller.dynamic_config_manager import DynamicConfigManagerActor
from kafkactor.actors.controller.entity_admin_zk import EntityAdminZkClient
from kafkactor.actors.controller.topic_configs import (
    MappingTopicConfigRepository,
    ZkTopicConfigRepository,
)
from kafkactor.actors.coordinator.coordinator_actor import GroupCoordinatorActor
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.purgatory import REAPER_POLL_MS, ExpirationDelivery, ReaperActor
from kafkactor.actors.replication import (
    HighWatermarks,
    ReplicaManagerActor,
    ReplicaManagerConfig,
    ReplicaPurgatoryActor,
)
from kafkactor.actors.replication.producer_ids import CurrentZkClient, producer_id_manager
from kafkactor.actors.replication.topic_purgatory import TopicPurgatoryActor
from kafkactor.actors.runtime import Client, Directory, Dispatcher, RequestTimeoutError, addresses
from kafkactor.actors.runtime.runtime_config import ActorRuntimeConfig
from kafkactor.actors.transaction import TransactionConfig
from kafkactor.actors.transaction.coordinator_actor import TransactionCoordinatorActor
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.controller import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ZooKeeperSessionLost,
    ZooKeeperSessionStarted,
)
from kafkactor.network.config_apis import BrokerProperties, TopicConfigRepository
from kafkactor.network.kafka_apis import KafkaApisConfig, ProducerIdSource, TopicAdmin
from kafkactor.network.socket_server import SocketServer, SocketServerConfig
from kafkactor.security.security_config import BrokerSecurityConfig
from kafkactor.storage import Log, LogConfig, LogManager, LogManagerConfig
from kafkactor.timer import Clock, Scheduler, SystemClock, Timer
from kafkactor.tracing import get_logger

_log = get_logger("kafkactor.broker")

STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """A broker's settings: replication, logs, timer, and purgatory purge intervals."""

    replica: ReplicaManagerConfig = field(default_factory=ReplicaManagerConfig)
    log_manager: LogManagerConfig = field(default_factory=LogManagerConfig)
    timer_tick_ms: int = 1
    timer_wheel_size: int = 20
    reaper_poll_ms: int = REAPER_POLL_MS
    producer_purgatory_purge_interval: int = 1000  # producer.purgatory.purge.interval.requests
    fetch_purgatory_purge_interval: int = 1000  # fetch.purgatory.purge.interval.requests
    apis: KafkaApisConfig = field(default_factory=KafkaApisConfig)
    group: GroupConfig = field(default_factory=GroupConfig)  # the group coordinator's settings
    # the transaction coordinator's (transaction.*, transactional.id.expiration.ms)
    transaction: TransactionConfig = field(default_factory=TransactionConfig)
    # the controller's (auto.leader.rebalance.enable, leader.imbalance.*)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    # how partitions, purgatories and the replica manager run (actor.runtime: a dispatcher)
    runtime: ActorRuntimeConfig = field(default_factory=ActorRuntimeConfig)
    # the broker's static properties as DescribeConfigs lists them (set by the properties
    # reader, kafkactor.server.KafkaConfig / SharedBrokerConfig); None: the topic-config
    # defaults only, and no broker properties to list
    properties: BrokerProperties | None = field(default=None, compare=False)


class Broker:
    """A Kafka broker in this process: its actors, on one shared `Directory`.

    `start()` opens the data dir (its `LogManager` recovers the logs when the last stop was
    not clean), loads the high-watermark checkpoint and starts, in order, the Reaper driving
    the broker's shared `Timer`, the produce and fetch purgatories, and the replica manager
    (which starts partition and fetcher actors as the controller assigns replicas).
    `shutdown()` stops them in reverse order, then checkpoints high watermarks and flushes the
    logs (a clean shutdown); `kill()` stops them as a crash would: no flush, no checkpoint, so
    the next start recovers.
    """

    def __init__(
        self,
        broker_id: int,
        data_dir: Path,
        directory: Directory,
        *,
        clock: Clock | None = None,
        config: BrokerConfig | None = None,
        topic_configs: MutableMapping[str, LogConfig] | None = None,
        zookeeper: Callable[[], Any] | None = None,
        listener: SocketServerConfig | None = None,
        advertised: tuple[str, int] | None = None,
        admin: TopicAdmin | None = None,
        producer_ids: ProducerIdSource | None = None,
        security: BrokerSecurityConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        if security is not None and listener is None:  # its listeners, this socket's settings
            listener = SocketServerConfig()
        # with a listener, Kafka's wire protocol on (host, port); port 0 takes a free one,
        # which `listener` then names, so a restart listens where clients knew it
        self.listener = listener
        # Kafka's advertised.listeners: what the broker registers for clients and peers when
        # it is not where it listens (a wildcard address, a NAT); None: the listener itself
        self.advertised = advertised
        self.admin = admin
        self.producer_ids = producer_ids
        self.socket_server: SocketServer | None = None
        self.dispatcher: Dispatcher | None = None  # its partitions' thread, once started
        self.data_dir = Path(data_dir)
        self.directory = directory
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.config = config if config is not None else BrokerConfig()
        self.topic_configs: MutableMapping[str, LogConfig] = (
            topic_configs if topic_configs is not None else {}
        )
        self.scheduler = Scheduler(self.clock, thread_name_prefix=f"broker-{broker_id}-scheduler")
        self.log_manager = LogManager(
            self.data_dir,
            self.scheduler,
            self.config.log_manager,
            self.clock,
            self.topic_configs,
        )
        self.high_watermarks = HighWatermarks(self.data_dir)
        self.delivery = ExpirationDelivery(
            directory, addresses.reaper(broker_id), self.clock, broker_id
        )
        self.timer = Timer(
            self.clock,
            tick_ms=self.config.timer_tick_ms,
            wheel_size=self.config.timer_wheel_size,
            executor=self.delivery,
        )
        self.logs: dict[str, Log] = {}
        self.refs: list[pykka.ActorRef[Any]] = []
        self.alive = False
        self.zookeeper: ZooKeeperSession | None = None
        if zookeeper is not None:
            controller = addresses.controller(broker_id)
            self.zookeeper = ZooKeeperSession(
                broker_id,
                zookeeper,
                lambda: registration(broker_id, self.endpoint, self.security, self.clock).encode(),
                on_lost=lambda: directory.tell(controller, ZooKeeperSessionLost()),
                on_started=lambda: _tell_all(
                    directory,
                    (controller, addresses.dynamic_config_manager(broker_id)),
                    ZooKeeperSessionStarted(),
                ),
            )
        # Kafka's listeners, TLS, SASL, ACLs and quotas (kafkactor.actors.broker_security)
        session = self.zookeeper
        self.security: BrokerSecurity | None = None
        if security is not None:
            self.security = BrokerSecurity(
                broker_id,
                security,
                clock=self.clock,
                timer=self.timer,
                zookeeper=(lambda: session.client) if session is not None else None,
            )
        self.credentials, self.quotas = client_quotas(self.security, self.clock)

    @property
    def endpoint(self) -> tuple[str, int]:
        """(host, port) clients and peers connect to, as registered: the advertised address,
        else the listener's; port -1 without a listener."""
        if self.listener is None:
            return "localhost", -1
        if self.security is not None:  # the inter-broker listener's
            return self.security.endpoint
        if self.advertised is not None:
            return self.advertised
        return self.listener.host, self.listener.port

    @property
    def replica_manager_address(self) -> str:
        return addresses.replica_manager(self.broker_id)

    def start(self) -> Broker:
        """Start the broker; a start that fails part way (its listener's port is taken, ...)
        stops what it started, closes the logs as a crash would (no clean-shutdown marker is
        claimed) and raises."""
        try:
            return self._start()
        except BaseException:
            self._stop_actors()
            if self.zookeeper is not None:
                self.zookeeper.close()
            with contextlib.suppress(Exception):  # it may not have opened the logs yet
                self.log_manager.crash()
            raise

    def _start(self) -> Broker:
        broker = self.broker_id
        self.scheduler.startup()
        self.log_manager.startup()
        self.high_watermarks.load()
        directory, clock = self.directory, self.clock
        on = self.dispatcher = self.config.runtime.dispatcher(f"broker-{broker}-dispatcher")
        self.refs = [
            ReaperActor.start(
                addresses.reaper(broker),
                directory,
                self.timer,
                clock,
                broker,
                poll_ms=self.config.reaper_poll_ms,
            ),
            ReplicaPurgatoryActor.start_on(
                on,
                addresses.produce_purgatory(broker),
                directory,
                self.timer,
                clock,
                broker,
                name="Produce",
                purge_interval=self.config.producer_purgatory_purge_interval,
            ),
            ReplicaPurgatoryActor.start_on(
                on,
                addresses.fetch_purgatory(broker),
                directory,
                self.timer,
                clock,
                broker,
                name="Fetch",
                purge_interval=self.config.fetch_purgatory_purge_interval,
                logs=self.logs,
            ),
            ReplicaPurgatoryActor.start_on(
                on,
                addresses.delete_records_purgatory(broker),
                directory,
                self.timer,
                clock,
                broker,
                name="DeleteRecords",
                purge_interval=1,  # Kafka's delete.records.purgatory.purge.interval.requests
            ),
            TopicPurgatoryActor.start_on(
                on, addresses.topic_purgatory(broker), directory, self.timer, clock, broker
            ),
            ReplicaManagerActor.start_on(
                on,
                addresses.replica_manager(broker),
                directory,
                clock,
                broker,
                log_manager=self.log_manager,
                high_watermarks=self.high_watermarks,
                timer=self.timer,
                scheduler=self.scheduler,
                topic_configs=self.topic_configs,
                logs=self.logs,
                config=self.config.replica,
                zk=self.zookeeper,
            ),
            GroupCoordinatorActor.start(
                addresses.group_coordinator(broker),
                directory,
                self.timer,
                clock,
                broker,
                logs=self.logs,
                config=self.config.group,
            ),
            TransactionCoordinatorActor.start(
                addresses.transaction_coordinator(broker),
                directory,
                self.timer,
                clock,
                broker,
                logs=self.logs,
                scheduler=self.scheduler,
                producer_ids=self._producer_id_source(),
                config=self.config.transaction,
                offsets_topic_partitions=self.config.group.offsets_topic_partitions,
            ),
        ]
        for ref, address in zip(
            self.refs,
            [
                addresses.reaper(broker),
                addresses.produce_purgatory(broker),
                addresses.fetch_purgatory(broker),
                addresses.delete_records_purgatory(broker),
                addresses.topic_purgatory(broker),
                addresses.replica_manager(broker),
                addresses.group_coordinator(broker),
                addresses.transaction_coordinator(broker),
            ],
            strict=True,
        ):
            directory.register(address, ref)  # reachable as soon as start() returns
        if self.security is not None:
            self.security.start()  # before the network: its listeners need the credentials
        if self.listener is not None:
            self.socket_server = start_network(self)
        if self.zookeeper is not None:
            self.zookeeper.start()  # registered: the controller will send LeaderAndIsr
            if self.security is not None:  # the ACLs, once the session is up
                self.security.start_acl_store()
            self._start_dynamic_config_manager()
            controller = ControllerActor.start(
                addresses.controller(broker),
                directory,
                clock,
                broker,
                zk=self.zookeeper,
                timer=self.timer,
                log_defaults=self.config.log_manager.default_log_config,
                config=self.config.controller,
            )
            directory.register(addresses.controller(broker), controller)
            self.refs.append(controller)
        self.alive = True
        _log.info(
            "broker.start",
            broker=broker,
            data_dir=str(self.data_dir),
            clean_shutdown=self.log_manager.had_clean_shutdown,
        )
        return self

    def _start_dynamic_config_manager(self) -> None:
        """Kafka's DynamicConfigManager: topic config changes under `/config/changes` reach
        this broker's logs and partitions (started before the controller, stopped after)."""
        assert self.zookeeper is not None
        address = addresses.dynamic_config_manager(self.broker_id)
        ref = DynamicConfigManagerActor.start(
            address,
            self.directory,
            self.clock,
            self.broker_id,
            zk=self.zookeeper,
            defaults=self.config.log_manager.default_log_config,
            credentials=self.credentials,
        )
        self.directory.register(address, ref)
        self.refs.append(ref)

    def _producer_id_source(self) -> ProducerIdSource:
        """The broker's one producer id manager, shared by InitProducerId of idempotent
        producers and the transaction coordinator: blocks claimed in ZooKeeper (or in this
        process without it), unless the broker was given a source."""
        if self.producer_ids is None:
            session = self.zookeeper
            self.producer_ids = producer_id_manager(
                self.broker_id, CurrentZkClient(session) if session is not None else None
            )
        return self.producer_ids

    def _topic_config_repository(self) -> TopicConfigRepository:
        """Where DescribeConfigs reads a topic's overrides: `/config/topics/<t>` with
        ZooKeeper, else the topic configs of this process (what differs from the defaults)."""
        session = self.zookeeper
        if session is not None:
            return ZkTopicConfigRepository(lambda: session.client)
        return MappingTopicConfigRepository(
            self.topic_configs, self.config.log_manager.default_log_config
        )

    def _entity_config_admin(self) -> EntityAdminZkClient | None:
        """Where the SCRAM-credential and client-quota APIs read and write the users and
        clients entity configs: ZooKeeper's (None without it: those APIs fail)."""
        session = self.zookeeper
        return EntityAdminZkClient(lambda: session.client) if session is not None else None

    def _stop_actors(self) -> None:
        if self.socket_server is not None:  # no more requests: clients see the broker go
            self.socket_server.stop()
            self.socket_server = None
        if self.security is not None:
            self.security.stop()
        self.timer.shutdown()  # the Reaper's wait ends at once
        # newest first: the controller (stops acting) ... the replica manager; a slow one is left
        for ref in reversed(self.refs):
            try:
                if ref.is_alive():
                    ref.stop(block=True, timeout=STOP_TIMEOUT_S)
            except pykka.Timeout:
                name, waited = ref.actor_class.__name__, STOP_TIMEOUT_S
                _log.warning(
                    "broker.stop_timeout", broker=self.broker_id, actor=name, timeout_s=waited
                )
        self.refs = []
        if self.dispatcher is not None:  # its actors have stopped
            self.dispatcher.shutdown(STOP_TIMEOUT_S)
            self.dispatcher = None
        self.scheduler.shutdown()

    def shutdown(self) -> None:
        """A clean stop: actors stopped, HWs checkpointed, logs flushed and closed."""
        if not self.alive:
            return
        self.alive = False
        self._stop_actors()
        if self.zookeeper is not None:
            self.zookeeper.close()  # the registration goes now: the controller reacts at once
        self.high_watermarks.checkpoint()
        self.log_manager.shutdown()
        _log.info("broker.stop", broker=self.broker_id)

    def controlled_shutdown(
        self, *, retries: int = 3, backoff_ms: int = 5000, timeout_s: float = 30.0
    ) -> bool:
        """Kafka's controlled shutdown (KAFKA-340), before `shutdown()`: ask the controller to
        move this broker's leaderships to other ISR members, so clients fail over at once
        instead of after a session timeout. Asks up to `retries` times, `backoff_ms` apart,
        while the controller answers with partitions still led here (no other ISR member) or
        cannot be reached. True when no leadership is left here. Without ZooKeeper there is no
        controller: False at once."""
        if self.zookeeper is None or not self.alive:
            return False
        client = Client(f"controlled-shutdown-{self.broker_id}", self.directory, self.clock)
        pause = threading.Event()
        try:
            for attempt in range(1, retries + 1):
                controller, error, remaining = self._ask_to_shut_down(client, timeout_s)
                _log.info(
                    "broker.controlled_shutdown",
                    broker=self.broker_id,
                    attempt=attempt,
                    controller=controller,
                    error=error.name,
                    error_code=int(error),
                    remaining=remaining,
                )
                if error is ErrorCode.NONE and not remaining:
                    return True
                if attempt < retries:
                    pause.wait(backoff_ms / 1000)
            return False
        finally:
            client.close()

    def _ask_to_shut_down(
        self, client: Client, timeout_s: float
    ) -> tuple[int, ErrorCode, list[str]]:
        """One ControlledShutdown request to the controller of the moment: (its id, the
        error, the partitions still led here)."""
        assert self.zookeeper is not None
        try:
            data, _ = self.zookeeper.client.get(zk_data.CONTROLLER)
            controller = zk_data.decode_controller(data)
        except (NoNodeError, zk_data.MalformedZnodeError):
            return -1, ErrorCode.NOT_CONTROLLER, []
        request = ControlledShutdownRequest(
            broker_id=self.broker_id, broker_epoch=self.zookeeper.broker_epoch
        )
        try:
            response = client.call(addresses.controller(controller), request, timeout_s)
        except RequestTimeoutError:
            return controller, ErrorCode.REQUEST_TIMED_OUT, []
        if isinstance(response, ControlledShutdownResponse):
            remaining = [str(tp) for tp in response.remaining_partitions]
            return controller, response.error_code, remaining
        if isinstance(response, ErrorResponse):
            return controller, response.error_code, []
        return controller, ErrorCode.UNKNOWN_SERVER_ERROR, []

    def kill(self, *, lose_unflushed: bool = False) -> None:
        """A crash: actors stopped, nothing flushed or checkpointed. With `lose_unflushed`, an
        OS crash or power loss: the segment files are also cut back to what was fsynced."""
        if not self.alive:
            return
        self.alive = False
        if self.zookeeper is not None:
            self.zookeeper.pause()  # no more heartbeats: the session expires after its timeout
        self._stop_actors()
        self.log_manager.crash(lose_unflushed=lose_unflushed)
        _log.info("broker.crash", broker=self.broker_id, lose_unflushed=lose_unflushed)

    def actor_count(self) -> int:
        """Live actors of this broker (registered in the directory)."""
        prefix = addresses.broker_prefix(self.broker_id) + "/"
        return sum(1 for a in self.directory.addresses() if a.startswith(prefix))


def _tell_all(directory: Directory, targets: tuple[str, ...], message: Any) -> None:
    for address in targets:
        directory.tell(address, message)
