"""The group coordinator's actor shell (`GroupCoordinatorActor`) in real in-process clusters.

Requests go from a `Client` to `broker/<id>/group-coordinator` of the broker that leads the
group's `__consumer_offsets` partition, as a consumer's would once FindCoordinator named it.
What is checked is what a consumer would notice: answers, generations, assignments, sessions
and rebalance timeouts expiring through the broker's Reaper, commits answered only once the
ISR has them, failover to the new leader of the partition, and the event log.

Clusters:

- one broker on a `ManualClock` (`single`): time moves only when a test moves it, so session
  and rebalance timeouts are exact; `__consumer_offsets` has RF 1.
- three brokers on the real clock without ZooKeeper (`trio`, `trio_sticky`): RF 3 replication
  of `__consumer_offsets`, with a dead or isolated follower.
- three brokers on the embedded ZooKeeper (`zk_trio`): a killed leader's partitions move.

Nothing sleeps to wait for the system: futures are waited on with a deadline, conditions are
polled against one (`wait_until`), and `settle_actor` / `settle_timer` / `not_answered` send a
message through an actor's mailbox so that everything queued before it has been handled (after
a ManualClock move: the Reaper's timer advance, then the expirations it delivered).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.resources import files
from itertools import count, islice
from pathlib import Path
from typing import Any, TypeVar

import jsonschema
import pytest

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.coordinator.offsets_topic import (
    GroupKey,
    OffsetKey,
    decode_record,
    partition_for,
)
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupProtocol,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartitionRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetsPartitionElected,
    OffsetsPartitionResigned,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkactor.storage import iter_batches
from kafkactor.testing import Cluster
from kafkactor.timer import ManualClock
from tests.replication.support import (
    FAST,
    STICKY_ISR,
    WAIT_S,
    actor_ref,
    purgatory_state,
    settle_actor,
    wait_until,
)

PARTITIONS = 3  # partitions of __consumer_offsets, and offsets.topic.num.partitions
COMPACT = {"cleanup.policy": "compact"}
SESSION_MS = 10_000
REBALANCE_MS = 30_000
TOPIC = "orders"  # the topic whose offsets the groups commit
NONE = ErrorCode.NONE
R = TypeVar("R")


def _groups_in(partition: int) -> list[str]:
    """The first two group ids "group-<n>" that live in `partition` of __consumer_offsets."""
    names = (f"group-{n}" for n in count())
    return list(islice((n for n in names if partition_for(n, PARTITIONS) == partition), 2))


# With `Cluster._assign`, partition p of a topic created on brokers 1..3 is led by broker p + 1.
GROUPS = {p: _groups_in(p)[0] for p in range(PARTITIONS)}
SECOND_GROUPS = {p: _groups_in(p)[1] for p in range(PARTITIONS)}  # a second group of each
GROUP = GROUPS[0]


def broker_config(base: BrokerConfig | None = None, **group: int) -> BrokerConfig:
    """`base` with the group coordinator settings of these tests (`group` overrides them)."""
    settings: dict[str, int] = {
        "offsets_topic_partitions": PARTITIONS,
        "initial_rebalance_delay_ms": 0,
        **group,
    }
    return dataclasses.replace(
        base if base is not None else BrokerConfig(), group=GroupConfig(**settings)
    )


# -- the client side ---------------------------------------------------------------------------


@dataclass
class Groups:
    """A test's client of the group coordinators of one cluster."""

    cluster: Cluster
    client: Client

    def coordinator(self, group: str) -> int:
        """The broker that leads the group's partition of __consumer_offsets."""
        return self.cluster.leader(OFFSETS_TOPIC, partition_for(group, PARTITIONS))

    def send(self, group: str, request: Any, broker: int | None = None) -> Future[Any]:
        target = self.coordinator(group) if broker is None else broker
        return self.client.request(addresses.group_coordinator(target), request)

    def join(
        self,
        group: str = GROUP,
        member_id: str = "",
        *,
        client_id: str = "consumer",
        metadata: bytes = b"subscription",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        broker: int | None = None,
    ) -> Future[Any]:
        request = JoinGroupRequest(
            group_id=group,
            member_id=member_id,
            client_id=client_id,
            client_host="/127.0.0.1",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type="consumer",
            protocols=(GroupProtocol(name="range", metadata=metadata),),
        )
        return self.send(group, request, broker)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: Mapping[str, bytes] | None = None,
        group: str = GROUP,
        broker: int | None = None,
    ) -> Future[Any]:
        request = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=tuple(
                SyncGroupAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ),
        )
        return self.send(group, request, broker)

    def heartbeat(
        self, member_id: str, generation: int, group: str = GROUP, broker: int | None = None
    ) -> ErrorCode:
        request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
        response = answer(self.send(group, request, broker), HeartbeatResponse)
        return response.error_code

    def commit(
        self,
        offsets: Mapping[int, int],
        member_id: str = "",
        generation: int = -1,
        group: str = GROUP,
        broker: int | None = None,
        *,
        leader_epoch: int = -1,
        metadata: str | None = None,
    ) -> Future[Any]:
        """An OffsetCommit of partition -> offset of TOPIC (metadata "at <offset>" unless
        given)."""
        request = OffsetCommitRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            partitions=tuple(
                OffsetCommitPartition(
                    topic=TOPIC,
                    partition=p,
                    offset=o,
                    leader_epoch=leader_epoch,
                    metadata=f"at {o}" if metadata is None else metadata,
                )
                for p, o in offsets.items()
            ),
        )
        return self.send(group, request, broker)

    def fetch(
        self,
        partitions: tuple[int, ...] = (0,),
        group: str = GROUP,
        broker: int | None = None,
        *,
        require_stable: bool = False,
    ) -> OffsetFetchResponse:
        request = OffsetFetchRequest(
            group_id=group,
            partitions=tuple(
                OffsetFetchPartitionRequest(topic=TOPIC, partition=p) for p in partitions
            ),
            require_stable=require_stable,
        )
        return answer(self.send(group, request, broker), OffsetFetchResponse)

    def committed(self, group: str = GROUP, broker: int | None = None) -> dict[int, int]:
        """Every offset the group has committed (OffsetFetch of all partitions)."""
        request = OffsetFetchRequest(group_id=group, all_partitions=True)
        response = answer(self.send(group, request, broker), OffsetFetchResponse)
        assert response.error_code is NONE, response
        return {p.partition: p.offset for p in response.partitions if p.topic == TOPIC}

    def describe(self, group: str = GROUP, broker: int | None = None) -> DescribedGroup:
        request = DescribeGroupsRequest(group_ids=(group,))
        (described,) = answer(self.send(group, request, broker), DescribeGroupsResponse).groups
        return described

    def wait_loaded(self, group: str = GROUP, broker: int | None = None) -> None:
        """Wait until the group's coordinator serves it (its partition is loaded)."""

        def served() -> bool:
            request = OffsetFetchRequest(group_id=group, all_partitions=True)
            response = answer(self.send(group, request, broker), OffsetFetchResponse)
            return response.error_code is NONE

        wait_until(served, message=f"the coordinator of {group} to serve it")

    def stable_group(
        self, members: int, group: str = GROUP, *, session_ms: int = SESSION_MS, **join: Any
    ) -> tuple[list[str], int]:
        """A Stable group of `members` members (the first is the leader): their ids in join
        order and the generation. Each new member joins, then every earlier one rejoins."""
        ids: list[str] = []
        generation = -1
        for n in range(members):
            futures = [self.join(group, client_id=f"consumer-{n}", session_ms=session_ms, **join)]
            futures += [self.join(group, m, session_ms=session_ms, **join) for m in ids]
            answers = [answer(f, JoinGroupResponse) for f in futures]
            assert all(a.error_code is NONE for a in answers), answers
            ids = [a.member_id for a in answers[1:]] + [answers[0].member_id]
            generation = answers[0].generation_id
            leader = answers[0].leader_id
            syncs = {m: self.sync(m, generation, group=group) for m in ids if m != leader}
            assignments = {m: f"assignment of {m}".encode() for m in ids}
            synced = answer(self.sync(leader, generation, assignments, group), SyncGroupResponse)
            assert synced.error_code is NONE, synced
            for m, future in syncs.items():
                assert answer(future, SyncGroupResponse).assignment == assignments[m]
        assert self.describe(group).state == "Stable"
        return ids, generation


def answer(future: Future[Any], kind: type[R], timeout_s: float = WAIT_S) -> R:
    """The future's response, which must be a `kind`."""
    response = future.result(timeout_s)
    assert isinstance(response, kind), f"expected a {kind.__name__}, got {response!r}"
    return response


def not_answered(future: Future[Any], *coordinators: tuple[Cluster, int]) -> bool:
    """True if `future` is still open once each coordinator has handled its mailbox."""
    for cluster, broker in coordinators:
        settle_actor(cluster, addresses.group_coordinator(broker))
    return not future.done()


def commit_errors(future: Future[Any]) -> set[ErrorCode]:
    return {p.error_code for p in answer(future, OffsetCommitResponse).partitions}


def coordinator_view(cluster: Cluster, broker: int) -> dict[str, Any]:
    """The coordinator actor's `describe()`, through its mailbox."""
    ref = actor_ref(cluster, addresses.group_coordinator(broker))
    view: dict[str, Any] = ref.proxy().describe().get(timeout=WAIT_S)
    return view


def settle_timer(cluster: Cluster, broker: int) -> None:
    """After a ManualClock move: the Reaper has advanced the timer, and the coordinator has
    handled the expirations it delivered."""
    settle_actor(cluster, addresses.reaper(broker))
    settle_actor(cluster, addresses.group_coordinator(broker))


# -- clusters ----------------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as clusters:
        yield clusters


def start(
    stack: ExitStack, cluster: Cluster, *, replication_factor: int, **topic_config: str
) -> Groups:
    """Start `cluster` (stopped at the test's end), create __consumer_offsets and wait until
    every partition's leader serves its groups."""
    stack.enter_context(cluster)
    cluster.create_topic(OFFSETS_TOPIC, PARTITIONS, replication_factor, {**COMPACT, **topic_config})
    client = Client(f"test-{id(cluster)}", cluster.directory, cluster.clock)
    stack.callback(client.close)
    groups = Groups(cluster, client)
    for group in GROUPS.values():
        groups.wait_loaded(group)
    return groups


@pytest.fixture
def single(stack: ExitStack, clock: ManualClock) -> Groups:
    """One broker on a ManualClock; __consumer_offsets RF 1 (every group is broker 1's)."""
    cluster = Cluster(1, clock=clock, config=broker_config(), zookeeper=None)
    return start(stack, cluster, replication_factor=1)


@pytest.fixture
def trio(stack: ExitStack) -> Callable[..., Groups]:
    """Three brokers on the real clock without ZooKeeper, whose ISR drops a silent follower in
    ~0.5 s; __consumer_offsets RF 3 with the topic config given."""

    def started(**topic_config: str) -> Groups:
        cluster = Cluster(3, config=broker_config(FAST), zookeeper=None)
        return start(stack, cluster, replication_factor=3, **topic_config)

    return started


@pytest.fixture
def trio_sticky(stack: ExitStack) -> Groups:
    """Three brokers on the real clock whose ISR keeps a silent follower for 10 s."""
    cluster = Cluster(3, config=broker_config(STICKY_ISR), zookeeper=None)
    return start(stack, cluster, replication_factor=3)


@pytest.fixture
def zk_trio(stack: ExitStack) -> Groups:
    """Three brokers on the embedded ZooKeeper: a killed broker's session ends in 0.6 s and
    the controller moves its partitions."""
    cluster = Cluster(3, config=broker_config(FAST), zookeeper="embedded", session_timeout_ms=600)
    return start(stack, cluster, replication_factor=3)


# -- the event log -----------------------------------------------------------------------------


@dataclass
class EventFile:
    path: Path

    def all(self) -> list[dict[str, Any]]:
        tracing.flush()
        lines = self.path.read_bytes().splitlines()
        return [json.loads(line) for line in lines if line]

    def named(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        return [
            e
            for e in self.all()
            if e["event"] == event and all(e.get(k) == v for k, v in fields.items())
        ]


@pytest.fixture
def events(tmp_path: Path) -> Iterator[EventFile]:
    """Tracing into a file of the test's own for its duration; restored as found after."""
    path = tmp_path / "events.jsonl"
    with tracing.configured(path=path):
        yield EventFile(path)


# -- JoinGroup and SyncGroup -------------------------------------------------------------------


def test_one_member_joins_and_syncs_and_the_group_is_stable(single: Groups) -> None:
    joined = answer(single.join(client_id="consumer-1"), JoinGroupResponse)

    assert joined.error_code is NONE
    assert joined.generation_id == 1
    assert joined.member_id.startswith("consumer-1-")
    assert joined.leader_id == joined.member_id
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [
        (joined.member_id, b"subscription")
    ]
    assert single.describe().state == "CompletingRebalance"

    synced = answer(
        single.sync(joined.member_id, 1, {joined.member_id: b"orders-0,orders-1"}),
        SyncGroupResponse,
    )

    assert synced.error_code is NONE
    assert synced.assignment == b"orders-0,orders-1"
    described = single.describe()
    assert (described.error_code, described.state, described.protocol) == (NONE, "Stable", "range")
    assert [(m.member_id, m.assignment) for m in described.members] == [
        (joined.member_id, b"orders-0,orders-1")
    ]


def test_two_parked_joins_are_answered_with_one_generation_and_only_the_leader_sees_members(
    single: Groups,
) -> None:
    (first,), generation = single.stable_group(1)

    second = single.join(client_id="consumer-2", metadata=b"second's subscription")
    assert not_answered(second, (single.cluster, 1))  # parked: the first member must rejoin
    assert single.describe().state == "PreparingRebalance"
    assert single.heartbeat(first, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = single.join(member_id=first, metadata=b"first's subscription")

    a = answer(rejoin, JoinGroupResponse)
    b = answer(second, JoinGroupResponse)
    assert (a.error_code, b.error_code) == (NONE, NONE)
    assert a.generation_id == b.generation_id == generation + 1
    assert a.leader_id == b.leader_id == first
    assert sorted((m.member_id, m.metadata) for m in a.members) == sorted(
        [(first, b"first's subscription"), (b.member_id, b"second's subscription")]
    )
    assert b.members == ()  # a follower's answer lists no members

    # The follower's SyncGroup waits for the leader's; both get their own assignment.
    follower_sync = single.sync(b.member_id, b.generation_id)
    assert not_answered(follower_sync, (single.cluster, 1))
    assignments = {first: b"orders-0", b.member_id: b"orders-1"}
    leader_sync = answer(single.sync(first, a.generation_id, assignments), SyncGroupResponse)
    assert leader_sync.assignment == b"orders-0"
    assert answer(follower_sync, SyncGroupResponse).assignment == b"orders-1"
    assert single.describe().state == "Stable"


def test_an_initial_rebalance_delay_holds_the_first_joins_until_the_reaper_ends_it(
    stack: ExitStack, clock: ManualClock
) -> None:
    """KIP-134's InitialDelayedJoin in the "Rebalance" purgatory, on the broker's timer."""
    cluster = Cluster(
        1, clock=clock, config=broker_config(initial_rebalance_delay_ms=3_000), zookeeper=None
    )
    groups = start(stack, cluster, replication_factor=1)

    first = groups.join(client_id="consumer-1")
    second = groups.join(client_id="consumer-2")
    assert not_answered(first, (cluster, 1))
    clock.advance(3_000)  # a member came during this wait: the delay is extended once more
    settle_timer(cluster, 1)
    assert not first.done() and not second.done()
    clock.advance(2_999)
    settle_timer(cluster, 1)
    assert not first.done() and not second.done()

    clock.advance(1)

    a, b = answer(first, JoinGroupResponse), answer(second, JoinGroupResponse)
    assert a.generation_id == b.generation_id == 1
    assert a.leader_id == b.leader_id == a.member_id
    assert len(a.members) == 2 and b.members == ()


def test_a_join_for_another_protocol_type_is_refused(single: Groups) -> None:
    single.stable_group(1)
    request = JoinGroupRequest(
        group_id=GROUP,
        client_id="connect",
        session_timeout_ms=SESSION_MS,
        protocol_type="connect",  # the same protocol name, for another kind of group
        protocols=(GroupProtocol(name="range", metadata=b""),),
    )

    refused = answer(single.send(GROUP, request), JoinGroupResponse)

    assert refused.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert single.describe().state == "Stable"  # the group is undisturbed


# -- Heartbeat ---------------------------------------------------------------------------------


def test_heartbeats_in_a_stable_group(single: Groups) -> None:
    (member,), generation = single.stable_group(1)

    assert single.heartbeat(member, generation) is NONE
    assert single.heartbeat(member, generation + 1) is ErrorCode.ILLEGAL_GENERATION
    assert single.heartbeat(member, generation - 1) is ErrorCode.ILLEGAL_GENERATION
    assert single.heartbeat("consumer-9-ghost", generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert single.heartbeat(member, generation, group=GROUPS[1]) is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_stops_heartbeating_is_removed_when_its_session_ends(
    single: Groups, clock: ManualClock
) -> None:
    (a, b), generation = single.stable_group(2)
    cluster = single.cluster

    # a keeps heartbeating; b stays silent. b's session ends SESSION_MS after the sync.
    clock.advance(SESSION_MS // 2)
    assert single.heartbeat(a, generation) is NONE
    clock.advance(SESSION_MS // 2 - 1)
    settle_timer(cluster, 1)
    assert single.describe().state == "Stable"
    assert single.heartbeat(a, generation) is NONE

    clock.advance(1)

    wait_until(
        lambda: single.describe().state == "PreparingRebalance",
        message="b's session to expire through the Reaper",
    )
    assert single.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    assert single.heartbeat(b, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert [m.member_id for m in single.describe().members] == [a]
    # a rejoins: the rebalance completes at once without b
    rejoined = answer(single.join(member_id=a), JoinGroupResponse)
    assert rejoined.generation_id == generation + 1
    assert [m.member_id for m in rejoined.members] == [a]


def test_a_commit_renews_the_session_as_a_heartbeat_does(
    single: Groups, clock: ManualClock
) -> None:
    (a,), generation = single.stable_group(1)

    clock.advance(SESSION_MS - 1)
    assert commit_errors(single.commit({0: 5}, a, generation)) == {NONE}
    clock.advance(SESSION_MS - 1)  # long past the session the sync gave
    settle_timer(single.cluster, 1)
    assert single.describe().state == "Stable"

    clock.advance(1)  # the session the commit gave ends: a, the only member, is gone

    wait_until(lambda: single.describe().state == "Empty", message="a's session to end")
    assert single.heartbeat(a, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert single.committed() == {0: 5}


def test_the_rebalance_timeout_drops_a_member_that_did_not_rejoin(
    single: Groups, clock: ManualClock
) -> None:
    rebalance_ms = 5_000
    session_ms = 60_000  # longer than the rebalance: only the join phase can drop b
    (a, b), generation = single.stable_group(2, session_ms=session_ms, rebalance_ms=rebalance_ms)
    cluster = single.cluster

    rejoin = single.join(member_id=a, session_ms=session_ms, rebalance_ms=rebalance_ms)
    assert not_answered(rejoin, (cluster, 1))
    assert single.heartbeat(b, generation) is ErrorCode.REBALANCE_IN_PROGRESS  # b ignores it
    clock.advance(rebalance_ms - 1)
    settle_timer(cluster, 1)
    assert not rejoin.done()

    clock.advance(1)

    joined = answer(rejoin, JoinGroupResponse)
    assert joined.error_code is NONE
    assert joined.generation_id == generation + 1
    assert [m.member_id for m in joined.members] == [a]
    assert [m.member_id for m in single.describe().members] == [a]
    assert single.heartbeat(b, generation) is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_leaves_is_gone_at_once(single: Groups) -> None:
    (a, b), generation = single.stable_group(2)
    request = LeaveGroupRequest(group_id=GROUP, member_ids=(b,))

    left = answer(single.send(GROUP, request), LeaveGroupResponse)

    assert left.error_code is NONE
    assert [(m.member_id, m.error_code) for m in left.members] == [(b, NONE)]
    assert single.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    assert answer(single.join(member_id=a), JoinGroupResponse).generation_id == generation + 1


def test_a_parked_member_that_leaves_gets_its_join_answered(single: Groups) -> None:
    (a, b), _ = single.stable_group(2)
    parked = single.join(member_id=a)  # waits for b
    assert not_answered(parked, (single.cluster, 1))

    answer(
        single.send(GROUP, LeaveGroupRequest(group_id=GROUP, member_ids=(a,))), LeaveGroupResponse
    )

    assert answer(parked, JoinGroupResponse).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert [m.member_id for m in single.describe().members] == [b]


def test_a_follower_waiting_for_the_assignment_is_told_when_the_leader_leaves(
    single: Groups,
) -> None:
    leader = answer(single.join(client_id="consumer-1"), JoinGroupResponse).member_id
    second = single.join(client_id="consumer-2")  # the leader must rejoin: both get gen 2
    assert answer(single.join(member_id=leader), JoinGroupResponse).leader_id == leader
    follower = answer(second, JoinGroupResponse)
    parked_sync = single.sync(follower.member_id, follower.generation_id)
    assert not_answered(parked_sync, (single.cluster, 1))

    leave = LeaveGroupRequest(group_id=GROUP, member_ids=(leader,))
    answer(single.send(GROUP, leave), LeaveGroupResponse)

    assert answer(parked_sync, SyncGroupResponse).error_code is ErrorCode.REBALANCE_IN_PROGRESS


def test_a_second_join_from_a_parked_member_replaces_the_first(single: Groups) -> None:
    (a, b), generation = single.stable_group(2)
    first = single.join(member_id=a)
    assert not_answered(first, (single.cluster, 1))

    second = single.join(member_id=a)

    assert answer(first, JoinGroupResponse).error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert not_answered(second, (single.cluster, 1))
    answer(single.join(member_id=b), JoinGroupResponse)
    assert answer(second, JoinGroupResponse).generation_id == generation + 1


def test_a_new_member_that_waits_too_long_in_a_rebalance_is_dropped(
    stack: ExitStack, clock: ManualClock
) -> None:
    cluster = Cluster(
        1, clock=clock, config=broker_config(new_member_join_timeout_ms=2_000), zookeeper=None
    )
    groups = start(stack, cluster, replication_factor=1)
    (a, b), generation = groups.stable_group(2, session_ms=60_000)

    newcomer = groups.join(client_id="newcomer")  # a and b do not rejoin (for now)
    assert not_answered(newcomer, (cluster, 1))
    clock.advance(1_999)
    settle_timer(cluster, 1)
    assert not newcomer.done()

    clock.advance(1)

    assert answer(newcomer, JoinGroupResponse).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert {m.member_id for m in groups.describe().members} == {a, b}
    rejoins = [groups.join(member_id=m, session_ms=60_000) for m in (a, b)]
    answers = [answer(f, JoinGroupResponse) for f in rejoins]
    assert {r.generation_id for r in answers} == {generation + 1}
    assert {m.member_id for m in answers[0].members} == {a, b}


def test_a_member_id_handed_out_and_not_used_within_the_session_is_forgotten(
    single: Groups, clock: ManualClock
) -> None:
    """KIP-394 (JoinGroup v4+): a new member first gets its id with MEMBER_ID_REQUIRED."""
    request = JoinGroupRequest(
        group_id=GROUP,
        client_id="kip-394",
        session_timeout_ms=SESSION_MS,
        protocol_type="consumer",
        protocols=(GroupProtocol(name="range", metadata=b""),),
        require_known_member_id=True,
    )
    first = answer(single.send(GROUP, request), JoinGroupResponse)
    assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("kip-394-")
    late = answer(single.send(GROUP, request), JoinGroupResponse)  # another new member

    rejoined = answer(
        single.send(GROUP, dataclasses.replace(request, member_id=first.member_id)),
        JoinGroupResponse,
    )
    assert (rejoined.error_code, rejoined.generation_id) == (NONE, 1)

    clock.advance(SESSION_MS)  # `late` never came back with its id
    settle_timer(single.cluster, 1)
    again = answer(
        single.send(GROUP, dataclasses.replace(request, member_id=late.member_id)),
        JoinGroupResponse,
    )
    assert again.error_code is ErrorCode.UNKNOWN_MEMBER_ID


# -- OffsetCommit and OffsetFetch --------------------------------------------------------------


def test_a_member_commits_and_fetches_its_offsets(single: Groups) -> None:
    (member,), generation = single.stable_group(1)

    assert commit_errors(single.commit({0: 42, 1: 7}, member, generation)) == {NONE}

    fetched = single.fetch((0, 1, 2))
    assert fetched.error_code is NONE
    assert [(p.partition, p.offset, p.metadata, p.error_code) for p in fetched.partitions] == [
        (0, 42, "at 42", NONE),
        (1, 7, "at 7", NONE),
        (2, -1, "", NONE),
    ]
    assert single.committed() == {0: 42, 1: 7}


def test_a_commit_with_too_much_metadata_is_refused_for_that_partition(single: Groups) -> None:
    (member,), generation = single.stable_group(1)
    too_long = "x" * 4097
    request = OffsetCommitRequest(
        group_id=GROUP,
        generation_id=generation,
        member_id=member,
        partitions=(
            OffsetCommitPartition(topic=TOPIC, partition=0, offset=1, metadata=too_long),
            OffsetCommitPartition(topic=TOPIC, partition=1, offset=2, metadata="fine"),
        ),
    )

    committed = answer(single.send(GROUP, request), OffsetCommitResponse)

    assert {p.partition: p.error_code for p in committed.partitions} == {
        0: ErrorCode.OFFSET_METADATA_TOO_LARGE,
        1: NONE,
    }
    assert single.committed() == {1: 2}


def test_a_commit_from_a_stale_generation_or_unknown_member_is_refused(single: Groups) -> None:
    (a, _), generation = single.stable_group(2)

    stale = commit_errors(single.commit({0: 1}, a, generation - 1))
    ghost = commit_errors(single.commit({0: 2}, "consumer-9-ghost", generation))

    assert stale == {ErrorCode.ILLEGAL_GENERATION}
    assert ghost == {ErrorCode.UNKNOWN_MEMBER_ID}
    assert single.fetch().partitions[0].offset == -1


def test_a_consumer_outside_group_management_commits_to_an_empty_group(single: Groups) -> None:
    group = GROUPS[2]

    assert commit_errors(single.commit({3: 100}, group=group)) == {NONE}

    assert single.committed(group) == {3: 100}
    assert single.describe(group).state == "Empty"
    listed = answer(single.send(group, ListGroupsRequest()), ListGroupsResponse)
    assert (group, "Empty") in {(g.group_id, g.state) for g in listed.groups}


def stored_records(cluster: Cluster, broker: int, partition: int) -> list[tuple[Any, Any]]:
    """The decoded (key, value) records of a replica of a __consumer_offsets partition, read
    from its log directly (a Log is thread-safe)."""
    log = cluster.brokers[broker].logs[f"{OFFSETS_TOPIC}-{partition}"]
    found: list[tuple[Any, Any]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for batch in iter_batches(log.read(offset, 1 << 20).records):
            for record in batch.records():
                assert record.key is not None
                found.append(decode_record(record.key, record.value))
            offset = batch.next_offset
    return found


def test_each_groups_records_go_to_its_own_partition_of_the_offsets_topic(
    single: Groups,
) -> None:
    for partition, group in GROUPS.items():
        (member,), generation = single.stable_group(1, group)
        committed = single.commit({partition: 100 + partition}, member, generation, group=group)
        assert commit_errors(committed) == {NONE}

    for partition, group in GROUPS.items():
        records = stored_records(single.cluster, 1, partition)
        assert {key.group for key, _ in records} == {group}
        metadata = [v for k, v in records if isinstance(k, GroupKey)]
        offsets = [(k, v) for k, v in records if isinstance(k, OffsetKey)]
        assert [(v.generation, v.protocol, len(v.members)) for v in metadata] == [(1, "range", 1)]
        assert [(k.topic, k.partition, v.offset, v.metadata) for k, v in offsets] == [
            (TOPIC, partition, 100 + partition, f"at {100 + partition}")
        ]


def test_a_commit_is_answered_only_once_the_isr_has_it(trio_sticky: Groups) -> None:
    groups = trio_sticky
    cluster = groups.cluster
    leader = groups.coordinator(GROUP)
    assert leader == 1 and cluster.replicas(OFFSETS_TOPIC, 0) == (1, 2, 3)
    (member,), generation = groups.stable_group(1)
    assert commit_errors(groups.commit({0: 1}, member, generation)) == {NONE}

    cluster.isolate_broker(3)  # still in the ISR for 10 s: the HW cannot move past the commit
    pending = groups.commit({0: 2}, member, generation)
    wait_until(
        lambda: purgatory_state(cluster, leader, "produce")["delayed"] == 1,
        message="the commit's append to wait for the ISR in the produce purgatory",
    )

    assert not_answered(pending, (cluster, leader))
    assert groups.fetch().partitions[0].offset == 1  # the append is not acknowledged yet
    stable = groups.fetch(require_stable=True).partitions[0]
    assert stable.error_code is ErrorCode.UNSTABLE_OFFSET_COMMIT

    cluster.heal_broker(3)

    assert commit_errors(pending) == {NONE}
    assert groups.fetch().partitions[0].offset == 2
    assert groups.fetch(require_stable=True).partitions[0].error_code is NONE


def test_a_sync_is_answered_only_once_the_isr_has_the_assignment(trio_sticky: Groups) -> None:
    groups = trio_sticky
    cluster = groups.cluster
    joined = answer(groups.join(client_id="consumer-1"), JoinGroupResponse)
    member = joined.member_id

    cluster.isolate_broker(2)
    sync = groups.sync(member, joined.generation_id, {member: b"orders-0"})
    wait_until(
        lambda: purgatory_state(cluster, 1, "produce")["delayed"] == 1,
        message="the group's append to wait for the ISR",
    )
    assert not_answered(sync, (cluster, 1))
    assert groups.describe().state == "CompletingRebalance"

    cluster.heal_broker(2)

    assert answer(sync, SyncGroupResponse).assignment == b"orders-0"
    assert groups.describe().state == "Stable"


@pytest.mark.timeout(30)
def test_a_commit_the_isr_cannot_acknowledge_answers_coordinator_not_available(
    trio: Callable[..., Groups],
) -> None:
    groups = trio(**{"min.insync.replicas": "3"})
    cluster = groups.cluster
    assert groups.coordinator(GROUP) == 1
    (member,), generation = groups.stable_group(1)
    assert commit_errors(groups.commit({0: 1}, member, generation)) == {NONE}

    cluster.kill_broker(3)
    # appended while the ISR still has broker 3: refused once the ISR shrinks below 3
    # (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or at once if it shrank first (NOT_ENOUGH_REPLICAS)
    during = groups.commit({0: 2}, member, generation)
    assert commit_errors(during) == {ErrorCode.COORDINATOR_NOT_AVAILABLE}
    wait_until(
        lambda: cluster.describe_partition(OFFSETS_TOPIC, 0).isr == (1, 2),
        message="the ISR of the group's partition to shrink",
    )
    after = groups.commit({0: 3}, member, generation)

    assert commit_errors(after) == {ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert groups.committed() == {0: 1}
    assert groups.fetch(require_stable=True).partitions[0].offset == 1
    # The rebalance's group write fails too: the leader's SyncGroup is told, and rejoins.
    joined = answer(groups.join(member_id=member), JoinGroupResponse)
    assert joined.generation_id == generation + 1
    synced = answer(groups.sync(member, joined.generation_id, {member: b"x"}), SyncGroupResponse)
    assert synced.error_code is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert groups.describe().state == "PreparingRebalance"


@pytest.mark.timeout(30)
def test_a_delete_whose_tombstones_cannot_be_acknowledged_still_answers_none(
    trio: Callable[..., Groups],
) -> None:
    """As Kafka's DeleteGroups: the group leaves the coordinator at once and is answered NONE
    once the tombstones' append is done, whatever it did (the group may come back at the next
    load of its partition; docs/coordinator.md)."""
    groups = trio(**{"min.insync.replicas": "3"})
    cluster = groups.cluster
    assert commit_errors(groups.commit({0: 5})) == {NONE}
    cluster.kill_broker(3)
    wait_until(
        lambda: cluster.describe_partition(OFFSETS_TOPIC, 0).isr == (1, 2),
        message="the ISR of the group's partition to shrink below min.insync.replicas",
    )

    deleted = answer(
        groups.send(GROUP, DeleteGroupsRequest(group_ids=(GROUP,))), DeleteGroupsResponse
    )

    assert [(g.group_id, g.error_code) for g in deleted.groups] == [(GROUP, NONE)]
    assert groups.committed() == {}
    assert groups.describe().state == "Dead"


# -- which broker coordinates ------------------------------------------------------------------


@pytest.mark.parametrize("replication_factor", [1, 3])
def test_a_broker_that_does_not_lead_the_groups_partition_answers_not_coordinator(
    stack: ExitStack, replication_factor: int
) -> None:
    """With RF 3 the other brokers follow the partition (they were told they resign); with
    RF 1 they hold no replica of it and know of it from their metadata alone. Before any
    broker knows of `__consumer_offsets`, every broker is in the load window (it cannot tell
    "not mine" from "not told yet", docs/coordinator.md) and answers as Kafka does there."""
    cluster = stack.enter_context(Cluster(3, config=broker_config(STICKY_ISR), zookeeper=None))
    client = Client("test", cluster.directory, cluster.clock)
    stack.callback(client.close)
    groups = Groups(cluster, client)

    def refused_everywhere(group: str, brokers: set[int]) -> None:
        for broker in brokers:
            joined = answer(groups.join(group, broker=broker), JoinGroupResponse)
            synced = answer(groups.sync("m", 1, group=group, broker=broker), SyncGroupResponse)
            committed = commit_errors(groups.commit({0: 1}, group=group, broker=broker))
            fetched = groups.fetch(group=group, broker=broker)
            described = groups.describe(group, broker=broker)
            assert joined.error_code is ErrorCode.NOT_COORDINATOR
            assert synced.error_code is ErrorCode.NOT_COORDINATOR
            assert groups.heartbeat("m", 1, group, broker) is ErrorCode.NOT_COORDINATOR
            assert committed == {ErrorCode.NOT_COORDINATOR}
            assert fetched.error_code is ErrorCode.NOT_COORDINATOR
            assert described.error_code is ErrorCode.NOT_COORDINATOR

    for broker in (1, 2, 3):  # no __consumer_offsets yet: not told of it yet
        joined = answer(groups.join(GROUP, broker=broker), JoinGroupResponse)
        assert joined.error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert groups.fetch(broker=broker).error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert groups.heartbeat("m", 1, GROUP, broker) is NONE  # Kafka's blind answer
    cluster.create_topic(OFFSETS_TOPIC, PARTITIONS, replication_factor, COMPACT)
    for partition, group in GROUPS.items():
        leader = groups.coordinator(group)
        assert leader == partition + 1
        groups.wait_loaded(group)
        for broker in {1, 2, 3} - {leader}:  # once its metadata shows the partition

            def told(broker: int = broker, group: str = group) -> bool:
                return groups.fetch(group=group, broker=broker).error_code is (
                    ErrorCode.NOT_COORDINATOR
                )

            wait_until(told, message=f"broker {broker} to know it does not coordinate {group}")
        refused_everywhere(group, {1, 2, 3} - {leader})
        # ... while its leader serves it
        assert answer(groups.join(group), JoinGroupResponse).error_code is NONE
    for broker in (1, 2, 3):
        assert coordinator_view(cluster, broker)["owned_partitions"] == [broker - 1]


# -- failover ----------------------------------------------------------------------------------


def wait_for_new_coordinator(groups: Groups, group: str, old: int) -> int:
    """The new leader of the group's partition once it serves the group (while it answers
    NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, ask again)."""
    partition = partition_for(group, PARTITIONS)
    new = groups.cluster.wait_for_leader(OFFSETS_TOPIC, partition, not_broker=old)

    def served() -> bool:
        error = groups.fetch(group=group, broker=new).error_code
        assert error in (
            NONE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ), error
        return error is NONE

    wait_until(served, message=f"broker {new} to load the groups of partition {partition}")
    return new


@pytest.mark.timeout(30)
def test_the_new_leader_of_the_partition_loads_the_group_and_its_offsets(
    zk_trio: Groups, events: EventFile
) -> None:
    groups = zk_trio
    cluster = groups.cluster
    old = groups.coordinator(GROUP)
    (a, b), generation = groups.stable_group(2)
    assert commit_errors(groups.commit({0: 42, 1: 43}, a, generation, leader_epoch=5)) == {NONE}
    assert commit_errors(groups.commit({1: 44}, b, generation)) == {NONE}  # the last wins
    other = GROUPS[1]  # another partition's group, with offsets only
    assert commit_errors(groups.commit({2: 7}, group=other)) == {NONE}
    before = groups.describe()

    cluster.kill_broker(old)
    new = wait_for_new_coordinator(groups, GROUP, old)

    assert new != old
    assert groups.committed(broker=new) == {0: 42, 1: 44}
    fetched = groups.fetch((0, 1), broker=new).partitions
    assert [(p.offset, p.leader_epoch, p.metadata) for p in fetched] == [
        (42, 5, "at 42"),
        (44, -1, "at 44"),
    ]
    described = groups.describe(broker=new)
    assert (described.state, described.protocol_type, described.protocol) == (
        "Stable",
        "consumer",
        "range",
    )
    assert sorted((m.member_id, m.assignment) for m in described.members) == sorted(
        (m.member_id, m.assignment) for m in before.members
    )
    # the generation came back too: the members carry on heartbeating and committing in it
    assert groups.heartbeat(a, generation, broker=new) is NONE
    assert groups.heartbeat(b, generation - 1, broker=new) is ErrorCode.ILLEGAL_GENERATION
    assert commit_errors(groups.commit({0: 50}, a, generation, broker=new)) == {NONE}
    assert groups.committed(broker=new) == {0: 50, 1: 44}
    # the other partition's group moved only if its leader did
    other_coordinator = groups.coordinator(other)
    if other_coordinator == old:
        other_coordinator = wait_for_new_coordinator(groups, other, old)
    assert groups.committed(other, broker=other_coordinator) == {2: 7}

    loads = events.named("group.load", broker=new, partition=partition_for(GROUP, PARTITIONS))
    assert loads, "no group.load event from the new coordinator"
    assert loads[-1]["groups"] >= 1 and loads[-1]["records"] >= 4
    assert loads[-1]["error"] == ""


@pytest.mark.timeout(30)
def test_a_deleted_group_stays_deleted_after_failover(zk_trio: Groups) -> None:
    groups = zk_trio
    cluster = groups.cluster
    old = groups.coordinator(GROUP)
    assert commit_errors(groups.commit({0: 5})) == {NONE}
    deleted = answer(
        groups.send(GROUP, DeleteGroupsRequest(group_ids=(GROUP,))), DeleteGroupsResponse
    )
    assert [(g.group_id, g.error_code) for g in deleted.groups] == [(GROUP, NONE)]
    assert groups.committed() == {}

    cluster.kill_broker(old)
    new = wait_for_new_coordinator(groups, GROUP, old)

    assert groups.committed(broker=new) == {}
    assert groups.describe(broker=new).state == "Dead"


def test_deleted_offsets_stay_deleted_after_a_restart(single: Groups) -> None:
    """OffsetDelete's tombstones are in the log when it answers: a reload does not bring the
    offsets back, and the group, left with an offset, is still there."""
    assert commit_errors(single.commit({0: 11, 1: 12, 2: 13})) == {NONE}
    request = OffsetDeleteRequest(
        group_id=GROUP,
        partitions=tuple(OffsetFetchPartitionRequest(topic=TOPIC, partition=p) for p in (0, 2)),
    )
    deleted = answer(single.send(GROUP, request), OffsetDeleteResponse)
    assert deleted.error_code is NONE
    assert [(p.partition, p.error_code) for p in deleted.partitions] == [(0, NONE), (2, NONE)]
    assert single.committed() == {1: 12}

    single.cluster.stop_broker(1)
    single.cluster.restart_broker(1)
    single.wait_loaded()
    assert single.committed() == {1: 12}
    assert single.describe().state == "Empty"


def test_a_restarted_broker_loads_its_groups_from_its_log(
    single: Groups, clock: ManualClock
) -> None:
    (a, b), generation = single.stable_group(2)
    assert commit_errors(single.commit({0: 11, 1: 12}, a, generation)) == {NONE}
    empty = GROUPS[1]
    assert commit_errors(single.commit({4: 99}, group=empty)) == {NONE}
    cluster = single.cluster

    cluster.stop_broker(1)
    cluster.restart_broker(1)
    single.wait_loaded()

    assert single.committed() == {0: 11, 1: 12}
    assert single.committed(empty) == {4: 99}
    assert single.describe().state == "Stable"
    assert {m.member_id for m in single.describe().members} == {a, b}
    assert single.heartbeat(a, generation) is NONE
    # loaded members get fresh sessions: b, silent, is gone a session later
    clock.advance(SESSION_MS - 1)
    assert single.heartbeat(a, generation) is NONE
    settle_timer(cluster, 1)
    assert single.describe().state == "Stable"
    clock.advance(1)
    wait_until(
        lambda: single.describe().state == "PreparingRebalance",
        message="b's session, started by the load, to expire",
    )
    assert single.heartbeat(b, generation) is ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.timeout(30)
def test_a_coordinator_that_loses_the_partition_answers_its_parked_requests(
    zk_trio: Groups,
) -> None:
    """Its broker's ZooKeeper session expires: the partition moves to another broker while
    this one lives on, and learns it follows (OffsetsPartitionResigned)."""
    groups = zk_trio
    cluster = groups.cluster
    (a, b), generation = groups.stable_group(2)
    assert commit_errors(groups.commit({0: 8}, a, generation)) == {NONE}
    old = groups.coordinator(GROUP)
    parked = groups.join(member_id=a)  # waits for b
    assert not_answered(parked, (cluster, old))

    cluster.expire_session(old)

    assert answer(parked, JoinGroupResponse).error_code is ErrorCode.NOT_COORDINATOR
    new = wait_for_new_coordinator(groups, GROUP, old)
    assert groups.fetch(broker=old).error_code is ErrorCode.NOT_COORDINATOR
    assert groups.heartbeat(a, generation, broker=old) is ErrorCode.NOT_COORDINATOR
    assert (
        partition_for(GROUP, PARTITIONS) not in coordinator_view(cluster, old)["owned_partitions"]
    )
    # the new coordinator has the group as last stored (Stable, before a's rejoin)
    assert groups.committed(broker=new) == {0: 8}
    assert groups.heartbeat(b, generation, broker=new) is NONE


def test_leadership_news_from_an_older_leader_epoch_is_ignored(single: Groups) -> None:
    """OffsetsPartitionElected / OffsetsPartitionResigned carry the leader epoch: one older
    than the last heard of is stale (a late message) and changes nothing."""
    cluster = single.cluster
    coordinator = addresses.group_coordinator(1)
    (a,), generation = single.stable_group(1)
    assert commit_errors(single.commit({0: 3}, a, generation)) == {NONE}

    def tell(message: Any) -> None:
        assert cluster.directory.tell(coordinator, message)
        settle_actor(cluster, coordinator)

    tell(OffsetsPartitionResigned(partition=0, leader_epoch=2))
    assert single.fetch().error_code is ErrorCode.NOT_COORDINATOR
    assert single.heartbeat(a, generation) is ErrorCode.NOT_COORDINATOR

    tell(OffsetsPartitionElected(partition=0, leader_epoch=1))  # stale
    assert single.fetch().error_code is ErrorCode.NOT_COORDINATOR
    assert coordinator_view(cluster, 1)["owned_partitions"] == [1, 2]

    tell(OffsetsPartitionElected(partition=0, leader_epoch=3))  # the partition is back: reload
    assert single.committed() == {0: 3}
    assert single.heartbeat(a, generation) is NONE

    tell(OffsetsPartitionResigned(partition=0, leader_epoch=2))  # stale
    tell(OffsetsPartitionElected(partition=0, leader_epoch=3))  # the same news again
    assert single.committed() == {0: 3}
    assert coordinator_view(cluster, 1)["owned_partitions"] == [0, 1, 2]


def test_a_load_reads_every_segment_and_keeps_each_keys_last_record(
    stack: ExitStack, clock: ManualClock
) -> None:
    """__consumer_offsets with tiny segments: the load reads the partition segment after
    segment; a group whose members all left was stored Empty and loads Empty."""
    cluster = Cluster(1, clock=clock, config=broker_config(), zookeeper=None)
    groups = start(stack, cluster, replication_factor=1, **{"segment.bytes": "300"})
    (a, b), generation = groups.stable_group(2)
    for n in range(30):
        assert commit_errors(groups.commit({n % 4: n}, a, generation)) == {NONE}
    emptied = GROUPS[1]
    (x,), other_generation = groups.stable_group(1, emptied)
    assert commit_errors(groups.commit({0: 5}, x, other_generation, group=emptied)) == {NONE}
    leave = LeaveGroupRequest(group_id=emptied, member_ids=(x,))
    answer(groups.send(emptied, leave), LeaveGroupResponse)
    assert groups.describe(emptied).state == "Empty"
    log = cluster.brokers[1].logs[f"{OFFSETS_TOPIC}-0"]
    assert log.log_start_offset == 0 and log.log_end_offset > 30
    assert log.num_segments > 5  # the load has many segments to read

    cluster.stop_broker(1)
    cluster.restart_broker(1)
    groups.wait_loaded()

    assert groups.committed() == {0: 28, 1: 29, 2: 26, 3: 27}
    assert groups.describe().state == "Stable"
    assert groups.heartbeat(b, generation) is NONE
    groups.wait_loaded(emptied)
    described = groups.describe(emptied)
    assert (described.state, described.members) == ("Empty", ())
    assert groups.committed(emptied) == {0: 5}


def test_deleting_the_offsets_topic_unloads_its_groups(single: Groups) -> None:
    """StopReplica(delete) of a __consumer_offsets partition: the replica manager tells the
    coordinator, which answers the group's parked requests and stops serving it."""
    cluster = single.cluster
    (a, _), generation = single.stable_group(2)
    assert commit_errors(single.commit({0: 4}, a, generation)) == {NONE}
    parked = single.join(member_id=a)
    assert not_answered(parked, (cluster, 1))

    cluster.delete_topic(OFFSETS_TOPIC)

    assert answer(parked, JoinGroupResponse).error_code is ErrorCode.NOT_COORDINATOR
    assert single.fetch(broker=1).error_code is ErrorCode.NOT_COORDINATOR
    assert coordinator_view(cluster, 1)["owned_partitions"] == []
    cluster.create_topic(OFFSETS_TOPIC, PARTITIONS, 1, COMPACT)
    single.wait_loaded()
    assert single.committed() == {}  # a new topic: nothing of the old one is left
    assert single.describe().state == "Dead"


def test_a_recreated_offsets_topic_is_served_again_after_its_leader_epochs_restarted(
    single: Groups,
) -> None:
    """The coordinator remembers the highest leader epoch it heard of per partition and
    ignores an OffsetsPartitionElected with a lower one (a late message). A deleted and
    re-created __consumer_offsets starts again at leader epoch 0: a coordinator that had seen
    epoch 1 (here: a restart made broker 1 lead again in epoch 1) must still load the new
    partition, or every group request would answer NOT_COORDINATOR for good. (This failed
    when written: the StopReplica's OffsetsPartitionResigned did not make the coordinator
    forget the partition's epochs.)"""
    cluster = single.cluster
    cluster.stop_broker(1)
    cluster.restart_broker(1)  # leads again, in leader epoch 1
    single.wait_loaded()
    assert cluster.partition_states[(OFFSETS_TOPIC, 0)].leader_epoch == 1
    cluster.delete_topic(OFFSETS_TOPIC)

    cluster.create_topic(OFFSETS_TOPIC, PARTITIONS, 1, COMPACT)  # leader epoch 0 again

    assert cluster.partition_states[(OFFSETS_TOPIC, 0)].leader_epoch == 0
    single.wait_loaded()
    assert commit_errors(single.commit({0: 1})) == {NONE}


# -- stopping ----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stop_broker", "kill_broker"])
def test_a_stopping_broker_answers_the_requests_it_parked(single: Groups, how: str) -> None:
    (a, _), _ = single.stable_group(2)
    parked_join = single.join(member_id=a)  # waits for b to rejoin
    other = GROUPS[1]
    leader = answer(single.join(other, client_id="leader"), JoinGroupResponse)
    follower_join = single.join(other, client_id="follower")
    rejoin = answer(single.join(other, leader.member_id), JoinGroupResponse)
    follower = answer(follower_join, JoinGroupResponse)
    parked_sync = single.sync(follower.member_id, follower.generation_id, group=other)
    assert not_answered(parked_join, (single.cluster, 1))
    assert rejoin.generation_id == follower.generation_id and not parked_sync.done()

    getattr(single.cluster, how)(1)

    assert answer(parked_join, JoinGroupResponse).error_code is ErrorCode.NOT_COORDINATOR
    assert answer(parked_sync, SyncGroupResponse).error_code is ErrorCode.NOT_COORDINATOR


def test_a_stopping_broker_answers_the_requests_whose_appends_are_in_flight(
    trio_sticky: Groups,
) -> None:
    groups = trio_sticky
    cluster = groups.cluster
    joined = answer(groups.join(client_id="consumer-1"), JoinGroupResponse)
    other = SECOND_GROUPS[0]  # in the same partition, led by broker 1
    cluster.isolate_broker(3)  # the HW of the partition stays where it is
    sync = groups.sync(joined.member_id, joined.generation_id, {joined.member_id: b"a"})
    commit = groups.commit({0: 1}, group=other)
    wait_until(
        lambda: purgatory_state(cluster, 1, "produce")["delayed"] == 2,
        message="the group's and the commit's appends to wait for the ISR",
    )

    started = time.monotonic()
    cluster.stop_broker(1)

    assert answer(sync, SyncGroupResponse).error_code is ErrorCode.NOT_COORDINATOR
    assert commit_errors(commit) == {ErrorCode.NOT_COORDINATOR}
    assert time.monotonic() - started < WAIT_S


# -- events ------------------------------------------------------------------------------------


def test_the_group_purgatories_log_their_operations(single: Groups, events: EventFile) -> None:
    (a, b), generation = single.stable_group(2)
    coordinator = addresses.group_coordinator(1)

    watches = events.named("purgatory.watch", actor=coordinator)
    by_purgatory = {e["purgatory"] for e in watches}
    assert {"Heartbeat", "Rebalance"} <= by_purgatory
    heartbeat_keys = {k for e in watches if e["purgatory"] == "Heartbeat" for k in e["keys"]}
    assert {f"{GROUP}/{a}", f"{GROUP}/{b}"} <= heartbeat_keys
    rebalance_keys = {k for e in watches if e["purgatory"] == "Rebalance" for k in e["keys"]}
    assert rebalance_keys == {GROUP}
    assert events.named("timer.add", actor=coordinator, purgatory="Heartbeat")
    assert single.heartbeat(a, generation) is NONE


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(
        files("kafkactor").joinpath("events.schema.json").read_text(encoding="utf-8")
    )
    return schema


def schema_errors(events: list[dict[str, Any]]) -> list[str]:
    """Every way these events break the published event schema (kafkactor/events.schema.json)."""
    validator = jsonschema.Draft202012Validator(load_schema())
    return [
        f"{event['event']}: {'/'.join(map(str, error.absolute_path)) or '<event>'}: {error.message}"
        for event in events
        for error in validator.iter_errors(event)
    ]


def test_the_coordinators_events_follow_the_event_schema(
    single: Groups, clock: ManualClock, events: EventFile
) -> None:
    cluster = single.cluster
    coordinator = addresses.group_coordinator(1)
    (a, _), generation = single.stable_group(2)  # watches, completions, timer additions
    clock.advance(SESSION_MS // 2)
    assert single.heartbeat(a, generation) is NONE
    clock.advance(SESSION_MS // 2)  # b's session expires
    wait_until(lambda: single.describe().state == "PreparingRebalance", message="b to expire")
    assert commit_errors(single.commit({0: 1}, a, generation)) == {NONE}
    for message in (
        OffsetsPartitionResigned(partition=0, leader_epoch=1),
        OffsetsPartitionElected(partition=0, leader_epoch=2),
    ):
        assert cluster.directory.tell(coordinator, message)
    single.wait_loaded()

    written = [e for e in events.all() if e.get("actor") == coordinator]
    kinds = {e["event"] for e in written}
    assert {
        "purgatory.watch",
        "purgatory.complete",
        "purgatory.expire",
        "timer.add",
        "group.load",
        "group.unload",
    } <= kinds, kinds
    # the expiry of b's session (and of the initial DelayedJoins, whose delay is 0)
    assert {e["purgatory"] for e in written if e["event"] == "purgatory.expire"} == {
        "Heartbeat",
        "Rebalance",
    }
    (unload,) = [e for e in written if e["event"] == "group.unload"]
    assert (unload["partition"], unload["groups"]) == (0, 1)
    (load,) = [e for e in written if e["event"] == "group.load"]
    assert (load["partition"], load["leader_epoch"], load["groups"]) == (0, 2, 1)
    assert (load["skipped"], load["error"]) == (0, "")
    assert schema_errors(written) == []
