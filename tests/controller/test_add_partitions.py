"""Adding partitions, decided without a cluster: the replicas Kafka generates for added
partitions, each of Kafka's refusals with its message, what the controller makes of a changed
`/brokers/topics/<t>`, and AdminZkClient's write of the larger assignment (on a ZooKeeper
model with no controller: nothing elects, so only the znodes are looked at)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.add_partitions import (
    QUEUED_FOR_DELETION,
    assign_added_replicas,
    plan_added_partitions,
)
from kafkactor.actors.controller.admin_zk import AdminZkClient
from kafkactor.actors.controller.state import ControllerState
from kafkactor.common import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicQueuedForDeletionError,
    UnknownTopicError,
)
from kafkactor.timer import ManualClock
from kafkactor.zk_model import EmbeddedZooKeeper

pytestmark = pytest.mark.timeout(30)

EXISTING = {0: (1, 2), 1: (2, 3)}  # a topic of two partitions, replication factor 2
BROKERS = [1, 2, 3]


# -- the generated assignment --------------------------------------------------------------------


def test_generated_replicas_follow_kafkas_round_robin_with_shifted_followers() -> None:
    # Kafka's AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, 3 replicas, index 0
    assert assign_added_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, start_partition=0) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_added_partitions_continue_from_the_current_count_and_partition_0s_first_replica() -> None:
    assert plan_added_partitions("t", EXISTING, BROKERS, 5) == {
        2: (3, 1),
        3: (1, 3),  # the followers shift once the partition ids wrap round the brokers
        4: (2, 1),
    }
    # partition 0 on broker 2 first (index 1): partition p's first replica is index p + 1
    assert plan_added_partitions("t", {0: (2, 3)}, BROKERS, 3) == {1: (3, 2), 2: (1, 3)}
    # a first replica no longer registered: the next registered id, or index 0
    assert plan_added_partitions("t", {0: (9,)}, BROKERS, 2) == {1: (2,)}


def test_a_generated_assignment_needs_as_many_brokers_as_replicas() -> None:
    with pytest.raises(
        InvalidReplicationFactorError,
        match=r"^Replication factor: 3 larger than available brokers: 2\.$",
    ):
        plan_added_partitions("t", {0: (1, 2, 3)}, [1, 2], 2)


def test_a_manual_assignment_is_taken_as_given_from_the_current_count() -> None:
    assert plan_added_partitions("t", EXISTING, BROKERS, 4, [[3, 1], [1, 2]]) == {
        2: (3, 1),
        3: (1, 2),
    }


# -- Kafka's refusals ----------------------------------------------------------------------------

REFUSALS: list[tuple[int, list[list[int]] | None, type[Exception], str]] = [
    (
        1,
        None,
        InvalidPartitionsError,
        "Topic currently has 2 partitions, which is higher than the requested 1.",
    ),
    (2, None, InvalidPartitionsError, "Topic already has 2 partitions."),
    (2, [[1, 2]], InvalidPartitionsError, "Topic already has 2 partitions."),
    (
        4,
        [[1, 4], [2, 3]],
        InvalidReplicaAssignmentError,
        "Unknown broker(s) in replica assignment: 4.",
    ),
    (
        4,
        [[1, 2]],
        InvalidReplicaAssignmentError,
        "Increasing the number of partitions by 2 but 1 assignments provided.",
    ),
    (
        3,
        [[]],
        InvalidReplicaAssignmentError,
        "Cannot have replication factor of 0 for partition id 2.",
    ),
    (
        3,
        [[3, 3]],
        InvalidReplicaAssignmentError,
        "Duplicate brokers not allowed in replica assignment: 3, 3 for partition id 2.",
    ),
    (
        4,
        [[1, 2], [1, 2, 3]],
        InvalidReplicaAssignmentError,
        "Inconsistent replication factor between partitions, partition 0 has 2 while "
        "partitions [3] have replication factors [3], respectively.",
    ),
    (
        20_001,
        None,
        InvalidPartitionsError,
        "Topic cannot have 20001 partitions: at most 10000 partitions per topic here.",
    ),
]


@pytest.mark.parametrize(("total", "assignments", "error", "message"), REFUSALS)
def test_each_refusal_is_kafkas_error_with_kafkas_message(
    total: int, assignments: list[list[int]] | None, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as refused:
        plan_added_partitions("t", EXISTING, BROKERS, total, assignments, max_partitions=10_000)
    assert str(refused.value) == message


# -- the controller's view of a changed assignment -----------------------------------------------


def _state_with_topic() -> ControllerState:
    state = ControllerState()
    state.brokers_changed(BROKERS)
    state.add_topic("t", EXISTING)
    return state


def test_partitions_the_controller_does_not_know_are_added_and_known_ones_left_alone() -> None:
    state = _state_with_topic()
    found = state.partition_modifications("t", {0: (1, 2), 1: (3, 1), 2: (3, 1), 3: (1, 3)})
    assert found.added == {2: (3, 1), 3: (1, 3)}
    assert found.reassigned == [1]  # Kafka reassigns through /admin/reassign_partitions
    assert not found.deleting
    assert state.partition_modifications("t", dict(EXISTING)).added == {}
    # the added partitions become new partitions led by their first live replica
    changes = state.add_topic("t", found.added)
    assert [(c.after.partition, c.after.leader, c.after.isr) for c in changes] == [
        (2, 3, (3, 1)),
        (3, 1, (1, 3)),
    ]
    assert state.partitions_of(3)[0].replicas == (2, 3)  # partition 1 kept its replicas


def test_a_topic_being_deleted_gains_no_partitions() -> None:
    state = _state_with_topic()
    state.begin_deletion("t")
    found = state.partition_modifications("t", {**EXISTING, 2: (3, 1)})
    assert found.deleting


# -- AdminZkClient on ZooKeeper ------------------------------------------------------------------

# a topic znode as a Kafka 2.8 broker writes it: version 3 with its topic id
KAFKA_ZNODE = {
    "version": 3,
    "topic_id": "tqDrdHMFTAuk9CxzmW3rqg",
    "partitions": {"0": [1, 2], "1": [2, 3]},
    "adding_replicas": {},
    "removing_replicas": {},
}


@pytest.fixture
def zk() -> Iterator[Any]:
    with EmbeddedZooKeeper(ManualClock(0)) as server:
        session = server.connect(30_000)
        for broker in BROKERS:
            session.create(zk_data.broker_path(broker), b"{}", makepath=True)
        session.create(zk_data.topic_path("t"), json.dumps(KAFKA_ZNODE).encode(), makepath=True)
        yield session
        session.stop()


def test_the_larger_assignment_is_written_with_the_znodes_other_fields_kept(zk: Any) -> None:
    whole = AdminZkClient(lambda: zk).create_partitions("t", 4, [[3, 1], [1, 3]], wait=False)
    assert whole == {0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (1, 3)}
    written = json.loads(zk.get(zk_data.topic_path("t"))[0])
    assert written == {
        **KAFKA_ZNODE,
        "partitions": {"0": [1, 2], "1": [2, 3], "2": [3, 1], "3": [1, 3]},
    }


def test_validate_only_checks_and_writes_nothing(zk: Any) -> None:
    admin = AdminZkClient(lambda: zk)
    before = zk.get(zk_data.topic_path("t"))
    assert admin.create_partitions("t", 3, validate_only=True) == {**EXISTING, 2: (3, 1)}
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions("t", 2, validate_only=True)
    after = zk.get(zk_data.topic_path("t"))
    assert after[0] == before[0] and after[1].version == before[1].version


def test_an_unknown_topic_and_a_topic_marked_for_deletion_are_refused(zk: Any) -> None:
    admin = AdminZkClient(lambda: zk)
    with pytest.raises(UnknownTopicError, match=r"^The topic 'ghost' does not exist\.$"):
        admin.create_partitions("ghost", 3, wait=False)
    zk.create(zk_data.delete_topic_path("t"), b"", makepath=True)
    with pytest.raises(TopicQueuedForDeletionError) as refused:
        admin.create_partitions("t", 3, wait=False)
    assert str(refused.value) == QUEUED_FOR_DELETION == "The topic is queued for deletion."
    assert json.loads(zk.get(zk_data.topic_path("t"))[0]) == KAFKA_ZNODE
