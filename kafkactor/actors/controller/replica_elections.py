"""The controller actor's replica leader elections: Kafka's `/admin/preferred_replica_election`,
ElectLeaders and `auto.leader.rebalance.enable` (the decisions are `preferred_election`'s)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.controller.preferred_election import (
    ElectionResult,
    ElectionType,
    elect_leaders,
    failure,
    imbalance_ratios,
    imbalanced_partitions,
)
from kafkactor.actors.controller.preferred_election_zk import (
    PREFERRED_REPLICA_ELECTION,
    PreferredElectionZk,
    decode_preferred_replica_election,
)
from kafkactor.actors.controller.state import ControllerState, LeadershipChange
from kafkactor.actors.controller.zk_data import MalformedZnodeError
from kafkactor.actors.runtime import TracedActor, handles
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import (
    CheckLeaderImbalance,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
    PreferredReplicaElectionCreated,
)
from kafkactor.timer import CallbackTask, Timer

ROUNDS = 3  # elections decided again after a leader changed the state znode under the write


class ReplicaElections(TracedActor):
    """The handlers `ControllerActor` inherits for elections an operator or a timer asks for.

    - **`/admin/preferred_replica_election`** (Kafka's PreferredReplicaElectionHandler): an
      exists watch, set at take-over and again after each election. When the znode is there
      (at take-over too), the preferred replicas of the partitions it lists are elected and
      the znode deleted. A malformed one is logged (`controller.bad_preferred_replica_election`)
      and deleted.
    - **ElectLeaders** (`ElectLeadersRequest`): answered with a result per partition; when
      this broker's controller is not the active one, NOT_CONTROLLER for each.
    - **The leader-imbalance check** (`auto.leader.rebalance.enable`): every
      `leader.imbalance.check.interval.seconds` on the broker's timer, while active.
    """

    # the ControllerActor's own, which these handlers use
    state: ControllerState
    is_controller: bool
    timer: Timer
    epoch: int
    controller_config: ControllerConfig
    _imbalance_check: CallbackTask | None
    _imbalance_armed: int
    _preferred_znode: PreferredElectionZk

    if TYPE_CHECKING:

        @property
        def _zk(self) -> Any: ...

        def _tell_self(self, message: Any) -> None: ...

        def _apply(
            self, changes: list[LeadershipChange], *, stopping: int | None = None
        ) -> None: ...

        def _send_update_metadata(
            self,
            only: set[int] | None = None,
            *,
            partitions: Iterable[TopicPartition] | None = None,
        ) -> None: ...

    def _init_replica_elections(self, config: ControllerConfig | None) -> None:
        self.controller_config = config if config is not None else ControllerConfig()
        self._imbalance_check = None
        self._imbalance_armed = 0  # the latest arming; a check of an earlier one is stale
        self._preferred_znode = PreferredElectionZk(
            lambda: self._zk, lambda: self._tell_self(PreferredReplicaElectionCreated())
        )

    def _start_replica_elections(self) -> None:
        """At take-over (Kafka's onControllerFailover): a pending
        `/admin/preferred_replica_election` is processed, and the imbalance check armed."""
        if not self.is_controller:
            return
        self._on_preferred_replica_election(PreferredReplicaElectionCreated())
        self._arm_imbalance_check()

    def _stop_replica_elections(self) -> None:
        self._imbalance_armed += 1
        if self._imbalance_check is not None:
            self._imbalance_check.cancel()
            self._imbalance_check = None

    # -- elections -------------------------------------------------------------------------------

    def _elect(
        self, keys: Iterable[TopicPartition], election: ElectionType, trigger: str
    ) -> dict[TopicPartition, ElectionResult]:
        """Decide, write and send (then UpdateMetadata to every live broker). A partition whose
        state znode a leader changed under the write is decided again from what it holds; a
        controller fenced meanwhile answers NOT_CONTROLLER for what it had not written."""
        reason = f"{election.name.lower()} replica election ({trigger})"
        decision = elect_leaders(self.state, keys, election, reason=reason)
        results = dict(decision.answered)
        changes = decision.changes
        wrote = False
        for attempt in range(ROUNDS):
            if not changes:
                break
            self._apply(changes)
            wrote = True
            if not self.is_controller:
                for change in changes:
                    results[change.after.topic_partition] = ElectionResult(ErrorCode.NOT_CONTROLLER)
                return results
            again = []
            for change in changes:
                key = change.after.topic_partition
                now = self.state.partitions.get(key)
                if now is not None and now.leader == change.after.leader:
                    results[key] = ElectionResult(leader=now.leader)
                elif attempt + 1 < ROUNDS:
                    again.append(key)
                else:
                    results[key] = failure(key, election)
            decision = elect_leaders(self.state, again, election, reason=reason)
            for key, result in decision.answered.items():  # now led as asked: done
                results[key] = (
                    ElectionResult(leader=self.state.partitions[key].leader)
                    if result.error is ErrorCode.ELECTION_NOT_NEEDED
                    else result
                )
            changes = decision.changes
        if wrote:
            self._send_update_metadata()
        self._log_election(election, trigger, results)
        return results

    def _log_election(
        self,
        election: ElectionType,
        trigger: str,
        results: dict[TopicPartition, ElectionResult],
    ) -> None:
        failed: dict[str, list[str]] = {}
        for key, result in sorted(results.items()):
            if result.error is not ErrorCode.NONE:
                failed.setdefault(result.error.name, []).append(str(key))
        self.log_event(
            "controller.replica_election",
            election_type=election.name,
            trigger=trigger,
            elected={str(k): r.leader for k, r in sorted(results.items()) if not r.error},
            errors=failed,
            controller_epoch=self.epoch,
        )

    # -- /admin/preferred_replica_election -------------------------------------------------------

    @handles(PreferredReplicaElectionCreated)
    def _on_preferred_replica_election(self, _event: PreferredReplicaElectionCreated) -> None:
        """Kafka's ZkTriggered election: elect what the znode lists, delete it, and watch for
        the next one (a znode created again meanwhile is processed at once)."""
        while self.is_controller:
            data = self._preferred_znode.pending()
            if data is None:
                return
            try:
                keys = decode_preferred_replica_election(data)
            except MalformedZnodeError as error:
                self.log_event(
                    "controller.bad_preferred_replica_election",
                    path=PREFERRED_REPLICA_ELECTION,
                    error=str(error),
                )
            else:
                self._elect(keys, ElectionType.PREFERRED, "zookeeper")
            if self.is_controller:
                self._preferred_znode.delete()

    # -- ElectLeaders ----------------------------------------------------------------------------

    @handles(ElectLeadersRequest)
    def _on_elect_leaders(self, request: ElectLeadersRequest) -> None:
        try:
            election = ElectionType(request.election_type)
        except ValueError:
            election = None
        keys = sorted(set(request.partitions))
        if not self.is_controller:
            results = {k: ElectionResult(ErrorCode.NOT_CONTROLLER) for k in keys}
        elif election is None:
            results = {k: ElectionResult(ErrorCode.INVALID_REQUEST) for k in keys}
        else:
            results = self._elect(keys, election, "admin request")
        self.reply(
            request,
            ElectLeadersResponse(
                results=tuple(
                    PartitionElectionResult(
                        topic=key.topic,
                        partition=key.partition,
                        error_code=result.error,
                        error_message=result.message,
                        leader=result.leader,
                    )
                    for key, result in sorted(results.items())
                )
            ),
        )

    # -- auto.leader.rebalance.enable ------------------------------------------------------------

    def _arm_imbalance_check(self) -> None:
        self._stop_replica_elections()
        if not self.controller_config.auto_leader_rebalance_enable:
            return

        armed = self._imbalance_armed

        def due() -> None:
            self._tell_self(CheckLeaderImbalance(armed=armed))

        delay_ms = self.controller_config.leader_imbalance_check_interval_seconds * 1000
        self._imbalance_check = CallbackTask(delay_ms, due)
        self.timer.add(self._imbalance_check)

    @handles(CheckLeaderImbalance)
    def _on_check_leader_imbalance(self, event: CheckLeaderImbalance) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance, then armed again for the next interval.
        A check armed before a resignation (or before the last take-over) is dropped."""
        if not self.is_controller or event.armed != self._imbalance_armed:
            return
        self._imbalance_check = None
        try:
            percentage = self.controller_config.leader_imbalance_per_broker_percentage
            keys = imbalanced_partitions(self.state, percentage)
            self.log_event(
                "controller.leader_imbalance_check",
                imbalance={str(b): round(r, 3) for b, r in imbalance_ratios(self.state).items()},
                percentage=percentage,
                to_elect=[str(k) for k in keys],
            )
            if keys:
                self._elect(keys, ElectionType.PREFERRED, "auto leader rebalance")
        finally:
            if self.is_controller:
                self._arm_imbalance_check()
