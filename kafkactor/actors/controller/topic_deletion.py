"""Kafka's TopicDeletionManager, for the controller actor: topics marked in
`/admin/delete_topics` go offline, their replicas are deleted, then their znodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.partition_state_machine import (
    WRITE_ATTEMPTS,
    ControllerFencedError,
)
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
    DeleteTopicsChanged,
)
from kafkactor.messages.replication import (
    StopReplica,
    StopReplicaResponse,
)


class TopicDeletion(TracedActor):
    """The handlers `ControllerActor` inherits for topic deletion (`delete.topic.enable=true`).

    A topic marked in `/admin/delete_topics` goes offline (leader -1 in its state znodes),
    every UpdateMetadata from then on gives its partitions leader `LEADER_DURING_DELETE` so
    brokers' caches forget it, and each live replica is sent StopReplica(delete_partitions=
    True). A replica on a dead broker is sent it when the broker registers again. Once every
    replica is deleted, `/brokers/topics/<t>` (with its partition states), `/config/topics/<t>`
    and then `/admin/delete_topics/<t>` are deleted and the topic is forgotten. A mark for a
    topic that does not exist is removed."""

    # the ControllerActor's own, which these handlers use
    state: ControllerState
    epoch: int
    is_controller: bool
    broker_id: int
    _ids: Iterator[int]
    _deletes_sent: dict[int, int]

    if TYPE_CHECKING:

        @property
        def _zk(self) -> Any: ...

        def _watch_children(self, path: str, event: Any) -> list[str]: ...

        def _load_topics(self, topics: Iterable[str]) -> list[LeadershipChange]: ...

        def _apply(
            self, changes: list[LeadershipChange], *, stopping: int | None = None
        ) -> None: ...

        def _resign(self, reason: str) -> None: ...

        def _log_change(self, change: LeadershipChange) -> None: ...

        def _send_update_metadata(
            self,
            only: set[int] | None = None,
            *,
            partitions: Iterable[TopicPartition] | None = None,
        ) -> None: ...

    @handles(DeleteTopicsChanged)
    def _on_delete_topics_changed(self, _event: DeleteTopicsChanged) -> None:
        if not self.is_controller:
            return
        self._zk.ensure_path(zk_data.ADMIN_DELETE_TOPICS)  # a tool may have removed it all
        marked = self._watch_children(zk_data.ADMIN_DELETE_TOPICS, DeleteTopicsChanged())
        begun = self._begin_deletions(marked)
        if not begun:
            return
        self._send_update_metadata()  # brokers forget the topics first, as Kafka's do
        self._send_deletes(self.state.live_brokers, topics=set(begun))

    def _begin_deletions(self, marked: Iterable[str]) -> list[str] | None:
        """Start deleting the topics marked for deletion that are not being deleted yet;
        remove the marks of topics that do not exist. Returns the topics started (None when
        this controller turned out to be fenced, and resigned)."""
        begun: list[str] = []
        for topic in sorted(set(marked) - self.state.deleting_topics()):
            if topic not in self.state.topics() and self._zk.exists(zk_data.topic_path(topic)):
                # created but not loaded yet (its TopicsChanged is still queued)
                self._apply(self._load_topics([topic]))
                if not self.is_controller:
                    return None
            if topic not in self.state.topics():
                self.log_event(
                    "controller.topic_deletion_ignored", topic=topic, reason="no such topic"
                )
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(zk_data.delete_topic_path(topic))
                continue
            try:
                for change in self.state.begin_deletion(topic):
                    self._log_change(self._write_offline(change))
            except ControllerFencedError as fenced:
                self._resign(str(fenced))
                return None
            keys = sorted(tp for tp in self.state.deleting if tp.topic == topic)
            replicas = sorted({b for tp in keys for b in self.state.undeleted[tp]})
            self.log_event(
                "controller.topic_deletion_started",
                topic=topic,
                partitions=len(keys),
                replicas=replicas,
                waiting_for=[b for b in replicas if b not in self.state.live_brokers],
                controller_epoch=self.epoch,
            )
            begun.append(topic)
        return begun

    def _write_offline(self, change: LeadershipChange) -> LeadershipChange:
        """Write a partition of a topic being deleted as offline (leader -1): a versioned set,
        taken again from what is there when a leader changed the ISR meanwhile. A partition
        without a state znode (never led) has nothing to write."""
        state = change.after
        path = zk_data.partition_state_path(state.topic, state.partition)
        for _ in range(WRITE_ATTEMPTS):
            data = zk_data.encode_partition_state(replace(state, controller_epoch=self.epoch))
            try:
                self._zk.set(path, data, version=state.zk_version)
                return replace(change, after=state)
            except NoNodeError:
                return replace(change, after=state)
            except BadVersionError:
                try:
                    current, stat = self._zk.get(path)
                except NoNodeError:
                    return replace(change, after=state)
                found = zk_data.decode_partition_state(state.topic, state.partition, current)
                if found.controller_epoch > self.epoch:
                    raise ControllerFencedError(
                        f"{path} was written by controller epoch {found.controller_epoch}"
                    ) from None
                state = replace(
                    state,
                    leader_epoch=found.leader_epoch + 1,
                    isr=found.isr,
                    zk_version=stat.version,
                )
        raise ControllerFencedError(f"{path} kept changing under controller epoch {self.epoch}")

    def _send_deletes(self, brokers: Iterable[int], topics: set[str] | None = None) -> None:
        """StopReplica(delete_partitions=True) to each live broker among `brokers` for its
        replicas still to delete (of `topics` only, when given)."""
        for broker in sorted(set(brokers) & self.state.live_brokers):
            keys = [
                tp for tp in self.state.deletions_on(broker) if topics is None or tp.topic in topics
            ]
            if not keys:
                continue
            correlation_id = next(self._ids)
            self._deletes_sent[correlation_id] = broker
            self.send(
                addresses.replica_manager(broker),
                StopReplica(
                    reply_to=self.address,
                    correlation_id=correlation_id,
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=self.state.broker_epochs.get(broker, -1),
                    delete_partitions=True,
                    partitions=tuple(keys),
                ),
            )

    @handles(StopReplicaResponse)
    def _on_stop_replica_response(self, response: StopReplicaResponse) -> None:
        broker = self._deletes_sent.pop(response.correlation_id, None)
        if broker is None or not self.is_controller:
            return
        if response.error_code is not ErrorCode.NONE:
            self._log_delete_failed(broker, [], response.error_code)
            return
        failed: dict[ErrorCode, list[str]] = {}
        for part in response.partitions:
            if part.error_code is ErrorCode.NONE:
                self.state.replica_deleted(TopicPartition.of(part), broker)
            else:
                failed.setdefault(part.error_code, []).append(str(TopicPartition.of(part)))
        for error, names in sorted(failed.items()):
            self._log_delete_failed(broker, names, error)
        self._complete_deletions()

    def _log_delete_failed(self, broker: int, partitions: list[str], error: ErrorCode) -> None:
        self.log_event(
            "controller.replica_deletion_failed",
            replica=broker,
            failed_partitions=partitions,
            error=error.name,
            error_code=int(error),
        )

    def _complete_deletions(self) -> None:
        """Remove every topic whose replicas are all deleted: `/brokers/topics/<t>` (with its
        partition states), `/config/topics/<t>`, then the mark `/admin/delete_topics/<t>`."""
        done = self.state.deleted_topics()
        for topic in done:
            for path in (zk_data.topic_path(topic), zk_data.topic_config_path(topic)):
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(path, recursive=True)
            with contextlib.suppress(NoNodeError):
                self._zk.delete(zk_data.delete_topic_path(topic))
            self.state.finish_deletion(topic)
            self.log_event("controller.topic_deleted", topic=topic, controller_epoch=self.epoch)
        if done:
            self._send_update_metadata()
