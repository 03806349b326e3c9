"""Kafka's ControllerChannelManager and ControllerBrokerRequestBatch, for the controller actor:
LeaderAndIsr and UpdateMetadata sent to the brokers, their answers, and the resend of one lost
on the way to a live broker."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kafkactor.actors.controller.channel import ControllerChannel
from kafkactor.actors.controller.state import (
    ControllerState,
)
from kafkactor.actors.runtime import TracedActor, addresses, handles
from kafkactor.common import (
    LEADER_DURING_DELETE,
    BrokerEndpoint,
    PartitionLeaderState,
    TopicPartition,
)
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.controller import (
    ResendToBrokers,
)
from kafkactor.messages.replication import (
    LeaderAndIsr,
    LeaderAndIsrResponse,
    TopicIdentity,
    UpdateMetadata,
)
from kafkactor.timer import CallbackTask, Timer


class ControllerChannelManager(TracedActor):
    """The steps and handlers `ControllerActor` inherits to talk to brokers: LeaderAndIsr to
    the live replicas of the partitions given, UpdateMetadata to every live broker (a topic
    being deleted with leader `LEADER_DURING_DELETE`), each stamped with the controller and
    broker epochs. `ControllerChannel` tracks what is unanswered: a request lost on the way to
    a live broker makes that broker due a resend of its partitions' states and the metadata,
    as they stand then, on the broker's timer."""

    # the ControllerActor's own, which these handlers use
    state: ControllerState
    epoch: int
    is_controller: bool
    broker_id: int
    timer: Timer
    _channel: ControllerChannel
    _resend: CallbackTask | None
    _ids: Iterator[int]
    _endpoints: dict[int, BrokerEndpoint]
    _deletes_sent: dict[int, int]

    if TYPE_CHECKING:

        def _tell_self(self, message: Any) -> None: ...

        def _log_delete_failed(
            self, broker: int, partitions: list[str], error: ErrorCode
        ) -> None: ...

        def _stop_replica_elections(self) -> None: ...

    @handles(LeaderAndIsrResponse)
    def _on_leader_and_isr_response(self, response: LeaderAndIsrResponse) -> None:
        self._channel.answered(
            response.correlation_id,
            response.error_code,
            self.state.broker_epochs,
            self.clock.now_ms(),
        )
        if response.error_code:
            self.log_event(
                "controller.request_refused",
                error=response.error_code.name,
                error_code=int(response.error_code),
            )

    @handles(Response)
    def _on_response(self, response: Response) -> None:
        """UpdateMetadata answers and undeliverable requests. A LeaderAndIsr or UpdateMetadata
        lost on the way to a live broker makes that broker due a resend (`ControllerChannel`);
        a StopReplica(delete) that did not reach its broker is logged (the replica is sent it
        again when that broker registers again)."""
        error = getattr(response, "error_code", ErrorCode.NONE)
        due_at = self._channel.answered(
            response.correlation_id, error, self.state.broker_epochs, self.clock.now_ms()
        )
        if due_at is not None and self.is_controller:
            self._resend_at(due_at)
        broker = self._deletes_sent.pop(response.correlation_id, None)
        if broker is not None and isinstance(response, ErrorResponse):
            self._log_delete_failed(broker, [], response.error_code)

    def _resend_at(self, at_ms: int) -> None:
        if self._resend is not None:
            self._resend.cancel()

        def due() -> None:
            self._tell_self(ResendToBrokers())

        self._resend = CallbackTask(max(0, at_ms - self.clock.now_ms()), due)
        self.timer.add(self._resend)

    @handles(ResendToBrokers)
    def _on_resend(self, _event: ResendToBrokers) -> None:
        """A live broker lost a LeaderAndIsr or UpdateMetadata on the way: it is sent the
        state of its partitions and the cluster's metadata as they stand now."""
        self._resend = None
        if not self.is_controller:
            return
        brokers, next_at = self._channel.due(self.state.broker_epochs, self.clock.now_ms())
        for broker in brokers:
            partitions = self.state.partitions_of(broker)
            self.log_event(
                "controller.resend", to_broker=broker, partitions=len(partitions), epoch=self.epoch
            )
            self._send_leader_and_isr(partitions, only={broker})
            self._send_update_metadata(only={broker})
        if next_at is not None:
            self._resend_at(next_at)

    def _forget_requests(self) -> None:
        self._stop_replica_elections()
        self._channel.clear()
        if self._resend is not None:
            self._resend.cancel()
            self._resend = None

    def _send_leader_and_isr(
        self,
        partitions: Iterable[PartitionLeaderState],
        only: set[int] | None = None,
        *,
        stopping: int | None = None,
    ) -> None:
        by_broker: dict[int, list[PartitionLeaderState]] = {}
        for p in partitions:
            for replica in p.replicas:
                if replica == stopping and p.leader != stopping:
                    continue  # it is sent StopReplica for this partition instead
                if replica in self.state.live_brokers and (only is None or replica in only):
                    by_broker.setdefault(replica, []).append(self._leader_state(p))
        for broker, states in sorted(by_broker.items()):
            named = {s.topic for s in states}
            topic_ids = tuple(  # KIP-516: each replica checks its directory's id against it
                TopicIdentity(topic=t, topic_id=self.state.topic_ids[t])
                for t in sorted(named)
                if t in self.state.topic_ids
            )
            correlation_id = next(self._ids)
            broker_epoch = self.state.broker_epochs.get(broker, -1)
            self._channel.sent(correlation_id, broker, broker_epoch)
            self.send(
                addresses.replica_manager(broker),
                LeaderAndIsr(
                    reply_to=self.address,
                    correlation_id=correlation_id,
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=broker_epoch,
                    partition_states=tuple(states),
                    topic_ids=topic_ids,
                ),
            )

    def _send_update_metadata(
        self,
        only: set[int] | None = None,
        *,
        partitions: Iterable[TopicPartition] | None = None,
    ) -> None:
        """UpdateMetadata to every live broker (or those in `only`) with the live brokers,
        their endpoints, and the states of `partitions`, the ones a decision just changed, as
        Kafka's ControllerBrokerRequestBatch adds an UpdateMetadata entry for each partition it
        sends a LeaderAndIsr for, so that a change costs the size of the change, not of the
        cluster. Without `partitions`, every partition: what a new controller, a broker
        starting or a resend tells. A broker's metadata cache keeps what it was told before."""
        live = tuple(sorted(self.state.live_brokers))
        if partitions is None:
            states = tuple(self._leader_state(p) for p in self.state.partitions.values()) + tuple(
                replace(self._leader_state(p), leader=LEADER_DURING_DELETE)
                for p in self.state.deleting.values()
            )
            known = {p.topic for p in self.state.partitions}
        else:
            states = tuple(self._metadata_states(partitions))
            if not states:
                return  # nothing left to tell of them (deleted meanwhile)
            known = {s.topic for s in states if s.leader != LEADER_DURING_DELETE}
        topic_ids = tuple(
            TopicIdentity(topic=t, topic_id=self.state.topic_ids[t])
            for t in sorted(known)
            if t in self.state.topic_ids
        )
        for broker in live:
            if only is not None and broker not in only:
                continue
            correlation_id = next(self._ids)
            broker_epoch = self.state.broker_epochs.get(broker, -1)
            self._channel.sent(correlation_id, broker, broker_epoch)
            self.send(
                addresses.replica_manager(broker),
                UpdateMetadata(
                    reply_to=self.address,
                    correlation_id=correlation_id,
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=broker_epoch,
                    partition_states=states,
                    live_brokers=live,
                    endpoints=tuple(self._endpoints[b] for b in live if b in self._endpoints),
                    topic_ids=topic_ids,
                ),
            )

    def _metadata_states(
        self, partitions: Iterable[TopicPartition]
    ) -> Iterator[PartitionLeaderState]:
        """The states UpdateMetadata gives `partitions`, in order: as decided, or with leader
        `LEADER_DURING_DELETE` for a topic being deleted (unknown ones are left out)."""
        for key in sorted(set(partitions)):
            state = self.state.partitions.get(key)
            if state is not None:
                yield self._leader_state(state)
                continue
            deleting = self.state.deleting.get(key)
            if deleting is not None:
                yield replace(self._leader_state(deleting), leader=LEADER_DURING_DELETE)

    def _leader_state(self, p: PartitionLeaderState) -> PartitionLeaderState:
        return replace(p, controller_epoch=self.epoch)
