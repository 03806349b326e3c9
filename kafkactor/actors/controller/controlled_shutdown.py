"""Kafka's controlled shutdown (KAFKA-340), for the controller actor: a broker shutting down
cleanly asks the controller to move its leaderships first."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from kafkactor.actors.controller.state import (
    ControllerState,
    LeadershipChange,
)
from kafkactor.actors.runtime import TracedActor, addresses, handles
from kafkactor.common import (
    TopicPartition,
)
from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from kafkactor.messages.replication import (
    StopReplica,
)


class ControlledShutdown(TracedActor):
    """The handler `ControllerActor` inherits for ControlledShutdown requests: the decision is
    `ControllerState.controlled_shutdown`'s; this writes it, stops the broker's other replicas
    and answers with the partitions it still leads (Kafka's `KafkaController.shutdownBroker`)."""

    # the ControllerActor's own, which these handlers use
    state: ControllerState
    epoch: int
    is_controller: bool
    broker_id: int
    _ids: Iterator[int]

    if TYPE_CHECKING:

        def _apply(
            self, changes: list[LeadershipChange], *, stopping: int | None = None
        ) -> None: ...

        def _send_update_metadata(
            self,
            only: set[int] | None = None,
            *,
            partitions: Iterable[TopicPartition] | None = None,
        ) -> None: ...

    @handles(ControlledShutdownRequest)
    def _on_controlled_shutdown(self, request: ControlledShutdownRequest) -> None:
        """A broker about to stop asks for its leaderships to move first (KAFKA-340). The
        moves are written and sent as for any election, except to the broker itself: it is
        told to stop the replicas it no longer leads (StopReplica without deletion) instead,
        and answered with the partitions it still leads."""
        broker = request.broker_id
        error = ErrorCode.NONE
        if not self.is_controller:
            error = ErrorCode.NOT_CONTROLLER
        elif broker not in self.state.live_brokers:
            error = ErrorCode.BROKER_NOT_AVAILABLE
        elif 0 <= request.broker_epoch < self.state.broker_epochs.get(broker, -1):
            error = ErrorCode.STALE_BROKER_EPOCH
        if error is not ErrorCode.NONE:
            self._refuse_shutdown(request, error)
            return
        decision = self.state.controlled_shutdown(broker)
        # the broker is not told the moves of what it stops: a LeaderAndIsr would make its
        # replica manager start fetchers after the StopReplica had removed them
        self._apply(decision.changes, stopping=broker)
        if not self.is_controller:  # fenced while writing: the newer controller decides
            self._refuse_shutdown(request, ErrorCode.NOT_CONTROLLER)
            return
        # after the writes, where a conflict may have decided again: what it still leads, or
        # is still in the ISR of under a live leader, is not stopped
        stop = [key for key in decision.stop if not self._still_served_by(key, broker)]
        if stop:
            self.send(
                addresses.replica_manager(broker),
                StopReplica(
                    reply_to=self.address,
                    correlation_id=next(self._ids),
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=self.state.broker_epochs.get(broker, -1),
                    delete_partitions=False,
                    partitions=tuple(stop),
                ),
            )
        if decision.changes:
            self._send_update_metadata()
        remaining = self.state.led_by(broker)  # after the writes: a conflict may re-decide
        self.log_event(
            "controller.controlled_shutdown",
            replica=broker,
            error="NONE",
            error_code=0,
            remaining=[str(tp) for tp in remaining],
        )
        self.reply(request, ControlledShutdownResponse(remaining_partitions=tuple(remaining)))

    def _refuse_shutdown(self, request: ControlledShutdownRequest, error: ErrorCode) -> None:
        self.log_event(
            "controller.controlled_shutdown",
            replica=request.broker_id,
            error=error.name,
            error_code=int(error),
            remaining=[],
        )
        self.reply(request, ControlledShutdownResponse(error_code=error))

    def _still_served_by(self, key: TopicPartition, broker: int) -> bool:
        """`broker` leads `key`, or is in the ISR of its live leader."""
        state = self.state.partitions[key]
        if state.leader == broker:
            return True
        return broker in state.isr and state.leader in self.state.live_brokers
