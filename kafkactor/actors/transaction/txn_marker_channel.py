"""Kafka's `TransactionMarkerChannelManager`, in messages: which markers of which ended
transactions are still to be written, to which leader each went, and which wait for a retry."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from kafkactor.actors.transaction.results import MarkerJob
from kafkactor.common import NO_LEADER, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import MetadataResponse
from kafkactor.messages.transaction import TxnMarkerEntry, TxnPartition, WriteTxnMarkersResponse

__all__ = ["MarkerSend", "TxnMarkerChannel"]

#: a partition's marker is asked again (after `RETRY_BACKOFF_MS`) on these answers; any other
#: error but the fencing ones below is retried too (the marker must be written eventually)
ABORT_SENDING: Final = frozenset(
    {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)


@dataclass(slots=True)
class MarkerSend:
    """One WriteTxnMarkersRequest in flight to `leader`: the jobs and partitions it carries."""

    leader: int
    sent_ms: int
    entries: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)


class TxnMarkerChannel:
    """The markers still to write, per transactional id (a `MarkerJob` each).

    `to_send` is what awaits a leader lookup (new jobs, and partitions whose leader was
    unknown or answered an error); `route` turns a metadata answer into one
    WriteTxnMarkersRequest per leader; `on_response` records what each leader wrote. A
    partition whose topic no longer exists counts as written (Kafka drops markers of deleted
    partitions). Nothing here sends or waits: the actor does, on the broker's timer.
    """

    def __init__(self) -> None:
        self.jobs: dict[str, MarkerJob] = {}
        self.unsent: dict[str, set[TopicPartition]] = {}
        self.sends: dict[int, MarkerSend] = {}
        self._ids = itertools.count(1)

    def add(self, job: MarkerJob) -> None:
        self.jobs[job.transactional_id] = job
        self.unsent[job.transactional_id] = set(job.partitions)

    def remove(self, transactional_id: str) -> MarkerJob | None:
        """Forget a job (written, moot, or fenced); its sends in flight are ignored."""
        self.unsent.pop(transactional_id, None)
        for send in self.sends.values():
            send.entries.pop(transactional_id, None)
        return self.jobs.pop(transactional_id, None)

    def remove_txn_partition(self, partition: int) -> list[str]:
        """Forget the jobs of a `__transaction_state` partition (resigned or reloaded)."""
        gone = [t for t, job in self.jobs.items() if job.txn_partition == partition]
        for transactional_id in gone:
            self.remove(transactional_id)
        return gone

    def topics_to_look_up(self) -> tuple[str, ...]:
        return tuple(sorted({tp.topic for parts in self.unsent.values() for tp in parts}))

    def route(
        self, metadata: MetadataResponse, now: int
    ) -> tuple[dict[int, tuple[int, MarkerSend]], list[tuple[str, TopicPartition]]]:
        """Group the unsent markers by leader: ({leader: (correlation id, send)}, partitions
        whose topic is gone). Partitions without a leader stay unsent."""
        leaders: dict[TopicPartition, int] = {}
        # the topics this answer speaks for: lookups overlap, and one asked before a job was
        # added says nothing of that job's other topics (they wait for their own answer)
        answered = {topic.topic for topic in metadata.topics}
        for topic in metadata.topics:
            if topic.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue
            for p in topic.partitions:
                leaders[TopicPartition(topic=topic.topic, partition=p.partition)] = p.leader
        sends: dict[int, tuple[int, MarkerSend]] = {}
        gone: list[tuple[str, TopicPartition]] = []
        for transactional_id, partitions in self.unsent.items():
            for tp in sorted(partitions):
                if tp.topic not in answered:
                    continue
                if tp not in leaders:  # Kafka drops the markers of a deleted partition
                    gone.append((transactional_id, tp))
                    partitions.discard(tp)
                    continue
                leader = leaders[tp]
                if leader == NO_LEADER:
                    continue  # asked again after the backoff
                if leader not in sends:
                    sends[leader] = (next(self._ids), MarkerSend(leader, now))
                entries = sends[leader][1].entries
                entries[transactional_id] = entries.get(transactional_id, frozenset()) | {tp}
                partitions.discard(tp)
        for correlation_id, send in sends.values():
            self.sends[correlation_id] = send
        return sends, gone

    def entries(self, send: MarkerSend) -> tuple[TxnMarkerEntry, ...]:
        return tuple(
            TxnMarkerEntry(
                producer_id=job.producer_id,
                producer_epoch=job.producer_epoch,
                committed=job.committed,
                coordinator_epoch=job.coordinator_epoch,
                partitions=tuple(
                    TxnPartition(topic=tp.topic, partition=tp.partition) for tp in sorted(parts)
                ),
            )
            for tid, parts in send.entries.items()
            if (job := self.jobs.get(tid)) is not None
        )

    def on_response(
        self, correlation_id: int, response: WriteTxnMarkersResponse | None
    ) -> tuple[MarkerSend | None, dict[str, list[TopicPartition]], set[str]]:
        """A leader answered (None: the request failed as a whole). Returns the send, the
        partitions written per transactional id, and the ids whose sending is abandoned
        (fenced: a newer producer epoch or coordinator wrote the partition first)."""
        send = self.sends.pop(correlation_id, None)
        written: dict[str, list[TopicPartition]] = {}
        fenced: set[str] = set()
        if send is None:
            return None, written, fenced
        errors: dict[tuple[int, TopicPartition], ErrorCode] = {}
        for result in response.markers if response is not None else ():
            for p in result.partitions:
                tp = TopicPartition(topic=p.topic, partition=p.partition)
                errors[(result.producer_id, tp)] = p.error_code
        for transactional_id, partitions in send.entries.items():
            job = self.jobs.get(transactional_id)
            if job is None:
                continue
            for tp in partitions:
                error = errors.get((job.producer_id, tp), ErrorCode.UNKNOWN_SERVER_ERROR)
                if error is ErrorCode.NONE:
                    written.setdefault(transactional_id, []).append(tp)
                elif error in ABORT_SENDING:
                    fenced.add(transactional_id)
                else:
                    self.unsent[transactional_id].add(tp)
        return send, written, fenced

    def stale_sends(self, now: int, timeout_ms: int) -> Iterable[int]:
        """Sends unanswered for `timeout_ms` (the leader went away): to be asked again."""
        return [cid for cid, send in self.sends.items() if now - send.sent_ms >= timeout_ms]

    @property
    def has_unsent(self) -> bool:
        return any(self.unsent.values())
