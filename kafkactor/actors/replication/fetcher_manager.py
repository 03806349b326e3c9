"""A broker's fetcher manager: one replica fetcher per leader broker it follows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pykka

from kafkactor.actors.replication.config import ReplicaManagerConfig
from kafkactor.actors.replication.replica_fetcher import ReplicaFetcherActor
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.common import TopicPartition
from kafkactor.messages.replication import (
    AddFetcherPartitions,
    FetcherPartition,
    RemoveFetcherPartitions,
)
from kafkactor.timer import Clock, Timer

Send = Callable[[str, Any], object]


class ReplicaFetcherManager:
    """Kafka's `ReplicaFetcherManager` (`AbstractFetcherManager`): which leader each follower
    partition fetches from, and the `ReplicaFetcherActor` per leader broker.

    A fetcher starts when a first partition follows its leader and stops once no partition
    is left to copy from that leader (Kafka's `shutdownIdleFetcherThreads`). It runs in the
    replica manager's actor and sends through it (`send`), so its messages are traced as the
    replica manager's.
    """

    def __init__(
        self,
        *,
        broker: int,
        directory: Directory,
        clock: Clock,
        timer: Timer,
        config: ReplicaManagerConfig,
        send: Send,
    ) -> None:
        self.broker = broker
        self.directory = directory
        self.clock = clock
        self.timer = timer
        self.config = config
        self.send = send
        self.fetchers: dict[int, pykka.ActorRef[Any]] = {}
        self.fetcher_of: dict[TopicPartition, int] = {}
        self._followed: dict[int, int] = {}  # leader -> how many partitions fetch from it

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The leader `tp` fetches from now, if any."""
        return self.fetcher_of.get(tp)

    def add(self, leader: int, partitions: Sequence[FetcherPartition]) -> None:
        """These partitions fetch from `leader` (its fetcher started if needed)."""
        self._fetcher(leader)
        self.send(
            addresses.fetcher(self.broker, leader),
            AddFetcherPartitions(partitions=tuple(partitions)),
        )
        for p in partitions:
            tp = TopicPartition.of(p)
            before = self.fetcher_of.get(tp)
            if before == leader:
                continue
            if before is not None:
                self._unfollow(before)
            self.fetcher_of[tp] = leader
            self._followed[leader] = self._followed.get(leader, 0) + 1

    def _unfollow(self, leader: int) -> int:
        """One partition fewer fetches from `leader`; how many are left."""
        left = self._followed.get(leader, 0) - 1
        if left > 0:
            self._followed[leader] = left
        else:
            self._followed.pop(leader, None)
        return left

    def remove(self, tp: TopicPartition) -> None:
        """`tp` no longer fetches (it leads, stops, or follows another leader)."""
        leader = self.fetcher_of.pop(tp, None)
        if leader is None:
            return
        left = self._unfollow(leader)  # a count: not a walk over every partition followed
        ref = self.fetchers.get(leader)
        if ref is None:
            return
        if left <= 0:
            # nothing left to copy from that leader. The fetcher never waits on the replica
            # manager, so stopping it here cannot deadlock.
            del self.fetchers[leader]
            ref.stop(block=True, timeout=10)
            return
        self.send(addresses.fetcher(self.broker, leader), RemoveFetcherPartitions(partitions=(tp,)))

    def refs(self) -> list[pykka.ActorRef[Any]]:
        return list(self.fetchers.values())

    def _fetcher(self, leader: int) -> pykka.ActorRef[Any]:
        ref = self.fetchers.get(leader)
        if ref is None or not ref.is_alive():
            address = addresses.fetcher(self.broker, leader)
            ref = ReplicaFetcherActor.start(
                address,
                self.directory,
                self.clock,
                self.broker,
                leader=leader,
                timer=self.timer,
                config=self.config,
            )
            self.directory.register(address, ref)
            self.fetchers[leader] = ref
        return ref
