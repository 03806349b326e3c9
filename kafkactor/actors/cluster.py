"""A cluster of brokers in one process, with topic creation, clients and fault injection."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

from kafkactor.actors import addresses
from kafkactor.actors.broker import Broker, BrokerConfig
from kafkactor.actors.client import Client
from kafkactor.actors.consumer import Consumer
from kafkactor.actors.directory import Directory
from kafkactor.actors.producer import Producer
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import (
    DescribePartition,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    PartitionDescription,
    PartitionLeaderState,
    UpdateMetadata,
    partition_key,
)
from kafkactor.storage import LogConfig
from kafkactor.timer import Clock, SystemClock
from kafkactor.tracing import get_logger

_log = get_logger("kafkactor.cluster")

# Kafka's legal topic names: ASCII letters, digits, '.', '_' and '-', at most 249 characters.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

CLUSTER_CONTROLLER_ID = 0  # the Cluster itself assigns leaders until a controller does


class TopicExistsError(ValueError):
    """A topic of that name already exists (Kafka's TOPIC_ALREADY_EXISTS)."""


class ControllerRequestError(RuntimeError):
    """A broker refused or did not answer a LeaderAndIsr / UpdateMetadata request."""


class Cluster:
    """N brokers (ids 1..N) in one process on one `Directory`, each with its own data dir.

    Until the controller takes over, the Cluster assigns replicas and leaders itself, through
    the same `LeaderAndIsr` and `UpdateMetadata` requests a controller sends (controller epoch
    1): `create_topic` spreads each partition's replicas over the brokers round-robin and makes
    the first replica leader with the whole replica list as ISR. `kill_broker` stops a broker
    as a crash (nothing flushed); `restart_broker` starts it again from its data dir (logs
    recovered) and makes it follow the partitions it holds, or lead again (leader epoch + 1)
    the ones it led. Leaders do not move on their own: that is the controller's job.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        data_dir: Path | str | None = None,
        clock: Clock | None = None,
        config: BrokerConfig | None = None,
        request_timeout_s: float = 10.0,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, got {brokers}")
        self._owns_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafkactor-"))
        )
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.config = config if config is not None else BrokerConfig()
        self.request_timeout_s = request_timeout_s
        self.directory = Directory()
        self.topic_configs: dict[str, LogConfig] = {}
        self.broker_ids = list(range(1, brokers + 1))
        self.brokers: dict[int, Broker] = {}
        self.partition_states: dict[tuple[str, int], PartitionLeaderState] = {}
        self.controller_epoch = 1
        self._controller: Client | None = None
        self._clients: list[Producer | Consumer] = []
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Cluster:
        for broker_id in self.broker_ids:
            self.brokers[broker_id] = self._new_broker(broker_id).start()
        self._controller = Client("controller", self.directory, self.clock)
        self._started = True
        self._update_metadata()
        return self

    def _new_broker(self, broker_id: int) -> Broker:
        return Broker(
            broker_id,
            self.data_dir / f"broker-{broker_id}",
            self.directory,
            clock=self.clock,
            config=self.config,
            topic_configs=self.topic_configs,
        )

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
        return self.partition_states[(topic, partition)].leader

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
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
                address=addresses.partition(target, partition_key(topic, partition)),
            ),
        )
        if not isinstance(response, PartitionDescription):
            raise ControllerRequestError(f"broker {target} has no replica of {topic}-{partition}")
        return response

    # -- topics ----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: LogConfig | None = None,
    ) -> dict[int, tuple[int, ...]]:
        """Create a topic; returns its replica assignment (partition -> broker ids)."""
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise ValueError(f"illegal topic name {name!r}: use [a-zA-Z0-9._-], 1-249 chars")
        if any(topic == name for topic, _ in self.partition_states):
            raise TopicExistsError(f"topic {name!r} already exists")
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        live = self.live_brokers()
        if not 1 <= replication_factor <= len(live):
            raise ValueError(
                f"replication factor {replication_factor} needs 1..{len(live)} live brokers"
            )
        if config is not None:
            self.topic_configs[name] = config
        assignment = {
            p: tuple(live[(p + r) % len(live)] for r in range(replication_factor))
            for p in range(partitions)
        }
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
        _log.info(
            "cluster.topic_created",
            topic=name,
            partitions=partitions,
            replication_factor=replication_factor,
            assignment={str(p): list(r) for p, r in assignment.items()},
        )
        self._leader_and_isr(states)
        self._update_metadata()
        return assignment

    # -- clients ---------------------------------------------------------------------------------

    def producer(self, **options: Any) -> Producer:
        """A producer (see `Producer`: acks, timeout_ms, retries, ...), closed with the cluster."""
        producer = Producer(self.directory, self.live_brokers, clock=self.clock, **options)
        self._clients.append(producer)
        return producer

    def consumer(self, **options: Any) -> Consumer:
        """A consumer (see `Consumer`: max_wait_ms, min_bytes, ...), closed with the cluster."""
        consumer = Consumer(self.directory, self.live_brokers, clock=self.clock, **options)
        self._clients.append(consumer)
        return consumer

    # -- faults ----------------------------------------------------------------------------------

    def kill_broker(self, broker_id: int) -> None:
        """Stop a broker as a crash: its actors stop, nothing is flushed or checkpointed."""
        self.brokers[broker_id].kill()
        _log.info("cluster.broker_killed", broker=broker_id)
        self._update_metadata()

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker cleanly (flushed, checkpointed)."""
        self.brokers[broker_id].shutdown()
        self._update_metadata()

    def restart_broker(self, broker_id: int) -> Broker:
        """Start a stopped or killed broker from its data dir; it rejoins its partitions."""
        old = self.brokers.get(broker_id)
        if old is not None and old.alive:
            raise RuntimeError(f"broker {broker_id} is running")
        broker = self._new_broker(broker_id).start()
        self.brokers[broker_id] = broker
        _log.info("cluster.broker_restarted", broker=broker_id)
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
            if failed:
                raise ControllerRequestError(f"broker {broker}: LeaderAndIsr failed for {failed}")

    def _update_metadata(self) -> None:
        live = tuple(self.live_brokers())
        request = UpdateMetadata(
            controller_id=CLUSTER_CONTROLLER_ID,
            controller_epoch=self.controller_epoch,
            partition_states=tuple(self.partition_states.values()),
            live_brokers=live,
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
