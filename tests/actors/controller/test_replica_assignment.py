"""A manual replica assignment checked as Kafka's AdminZkClient checks one (validateTopicCreate,
validateReplicaAssignment, CreatePartitions' unknown-broker check): each refusal is an
`InvalidReplicaAssignmentError` with Kafka's message; and the assignment a new topic gets
(`plan_assignment`), manual or generated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kafkactor.actors.controller.admin_zk import (
    BOTH_SIZES_AND_ASSIGNMENTS,
    plan_assignment,
    validate_replica_assignment,
)
from kafkactor.common import InvalidReplicaAssignmentError

pytestmark = pytest.mark.timeout(10)

REGISTERED = [1, 2, 3]


def test_a_good_assignment_comes_back_in_partition_order_as_tuples() -> None:
    assert validate_replica_assignment({1: [3, 1], 0: [2, 3]}, REGISTERED) == {
        0: (2, 3),
        1: (3, 1),
    }


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({}, "partitions should be a consecutive 0-based integer sequence"),
        ({1: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        ({-1: [1], 0: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        ({0: [1, 2], 1: []}, "Cannot have replication factor of 0 for partition id 1."),
        (
            {0: [1, 2], 1: [3, 3]},
            "Duplicate brokers not allowed in replica assignment: 3, 3 for partition id 1.",
        ),
        (
            {0: [1, 2], 1: [2, 3, 1], 2: [3, 1], 3: [1]},
            "Inconsistent replication factor between partitions, partition 0 has 2 while "
            "partitions [1, 3] have replication factors [3, 1], respectively.",
        ),
        ({0: [1, 4], 1: [5, 2]}, "Unknown broker(s) in replica assignment: 4, 5."),
    ],
)
def test_each_refusal_is_invalid_replica_assignment_with_kafkas_message(
    assignment: Mapping[int, Sequence[int]], message: str
) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as refused:
        validate_replica_assignment(assignment, REGISTERED)
    assert str(refused.value) == message


def test_without_the_registered_brokers_only_the_shape_is_checked() -> None:
    assert validate_replica_assignment({0: [7, 8]}, None) == {0: (7, 8)}


def test_plan_takes_the_manual_assignment_or_spreads_the_partitions() -> None:
    assert plan_assignment(REGISTERED, None, None, {0: [2, 3], 1: [3, 1]}) == {
        0: (2, 3),
        1: (3, 1),
    }
    assert plan_assignment(REGISTERED, 3, 2, None) == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert plan_assignment(REGISTERED, None, None, None) == {0: (1,)}


@pytest.mark.parametrize(("partitions", "factor"), [(2, None), (None, 2), (2, 2)])
def test_plan_refuses_sizes_given_with_an_assignment(
    partitions: int | None, factor: int | None
) -> None:
    with pytest.raises(ValueError, match=r"^Both numPartitions") as refused:
        plan_assignment(REGISTERED, partitions, factor, {0: [1]})
    assert str(refused.value) == BOTH_SIZES_AND_ASSIGNMENTS
    assert not isinstance(refused.value, InvalidReplicaAssignmentError)


def test_plan_refuses_a_bad_generated_size() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        plan_assignment(REGISTERED, 0, 1, None)
    with pytest.raises(ValueError, match=r"replication factor 4 needs 1\.\.3 live brokers"):
        plan_assignment(REGISTERED, 1, 4, None)
