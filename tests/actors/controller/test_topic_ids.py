"""Topic ids (KIP-516) as Kafka 2.8 keeps them: Kafka's Uuid and its string form, the id in
`/brokers/topics/<t>` (TopicZNode version 3), the controller giving one to a topic written
without, and the brokers' metadata cache."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.reassignment_zk import encode_replica_assignments
from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.actors.controller.topic_ids import topic_id_of
from kafkactor.actors.replication.metadata_cache import MetadataCache
from kafkactor.common import LEADER_DURING_DELETE, PartitionLeaderState
from kafkactor.kafka_uuid import (
    METADATA_TOPIC_ID,
    ZERO_UUID,
    InvalidUuidError,
    random_uuid,
    uuid_from_string,
    uuid_to_string,
)
from kafkactor.messages.replication import TopicIdentity, UpdateMetadata

pytestmark = pytest.mark.timeout(30)

TOPIC_ID = uuid.UUID("6f1a9d3c-2b4e-4c8a-9e71-0d5b3f2a8c44")
TOPIC_ID_STRING = "bxqdPCtOTIqecQ1bPyqMRA"  # Kafka's Uuid.toString of it

# -- Kafka's Uuid --------------------------------------------------------------------------------


def test_the_string_form_is_kafkas_url_safe_base64_without_padding() -> None:
    assert uuid_to_string(TOPIC_ID) == TOPIC_ID_STRING
    assert uuid_from_string(TOPIC_ID_STRING) == TOPIC_ID
    assert uuid_to_string(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    # the URL-safe alphabet: "-" and "_", never "+" and "/"
    assert uuid_to_string(uuid.UUID(int=(1 << 128) - 1)) == "_____________________w"


@pytest.mark.parametrize("text", ["", "AAAA", "AAAAAAAAAAAAAAAAAAAAAAAA", "not a uuid at all!!!!!"])
def test_a_string_that_is_not_an_id_is_refused(text: str) -> None:
    with pytest.raises(InvalidUuidError):
        uuid_from_string(text)


def test_a_random_id_is_never_the_zero_nor_the_metadata_topic_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dashed = uuid_from_string("-" + "A" * 21)
    drawn: Iterator[uuid.UUID] = iter([ZERO_UUID, METADATA_TOPIC_ID, dashed, TOPIC_ID])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(drawn))

    assert random_uuid() == TOPIC_ID


# -- /brokers/topics/<t> ---------------------------------------------------------------------------


def test_a_new_topic_znode_is_kafka_28s_version_3_with_its_id() -> None:
    data = zk_data.encode_assignment({1: (2, 3), 0: (1, 2)}, TOPIC_ID)

    assert json.loads(data) == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": TOPIC_ID_STRING,
    }
    assert zk_data.decode_topic_id("t", data) == TOPIC_ID
    assert zk_data.decode_assignment("t", data) == {0: (1, 2), 1: (2, 3)}


def test_a_znode_an_older_tool_wrote_has_no_id() -> None:
    assert zk_data.decode_topic_id("t", b'{"version":1,"partitions":{"0":[1]}}') is None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"version":3,"partitions":{},"topic_id":7}', id="not-a-string"),
        pytest.param(b'{"version":3,"partitions":{},"topic_id":"short"}', id="not-an-id"),
        pytest.param(b"[]", id="not-an-object"),
    ],
)
def test_a_malformed_topic_id_is_refused(data: bytes) -> None:
    with pytest.raises(zk_data.MalformedZnodeError) as caught:
        zk_data.decode_topic_id("t", data)
    assert caught.value.path == "/brokers/topics/t"


def test_every_rewrite_of_the_znode_keeps_the_id() -> None:
    data = zk_data.encode_assignment({0: (1, 2)}, TOPIC_ID)

    grown = zk_data.encode_assignment_over("t", data, {0: (1, 2), 1: (2, 3)})
    moved = encode_replica_assignments("t", data, {0: ReplicaAssignment((1, 2, 3), (3,), ())})

    for rewritten in (grown, moved):
        assert zk_data.decode_topic_id("t", rewritten) == TOPIC_ID
        assert json.loads(rewritten)["version"] == 3


def test_an_id_added_to_an_old_znode_keeps_its_other_fields() -> None:
    data = b'{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{"0":[2]}}'

    written = json.loads(zk_data.encode_topic_id_over("t", data, TOPIC_ID))

    assert written == {
        "version": 3,
        "partitions": {"0": [1, 2]},
        "adding_replicas": {"0": [2]},
        "topic_id": TOPIC_ID_STRING,
    }


# -- the controller ------------------------------------------------------------------------------


@dataclass
class _Stat:
    version: int


class FakeZooKeeper:
    """One topic znode with versioned writes; `racer` is written by another writer first."""

    def __init__(self, data: bytes, racer: bytes | None = None) -> None:
        self.data, self.version, self.racer = data, 0, racer
        self.sets: list[int] = []

    def get(self, path: str, watch: Any = None) -> tuple[bytes, _Stat]:
        assert path == "/brokers/topics/t"
        return self.data, _Stat(self.version)

    def set(self, path: str, value: bytes, version: int = -1) -> None:
        self.sets.append(version)
        if self.racer is not None:
            self.data, self.version, self.racer = self.racer, self.version + 1, None
        if version != self.version:
            raise BadVersionError()
        self.data, self.version = value, self.version + 1


OLD = b'{"version":1,"partitions":{"0":[1,2]}}'


def test_the_controller_keeps_the_id_a_topic_has() -> None:
    zk = FakeZooKeeper(zk_data.encode_assignment({0: (1, 2)}, TOPIC_ID))

    assert topic_id_of(zk, "t", zk.data, 0) == (TOPIC_ID_STRING, False)
    assert zk.sets == []


def test_the_controller_gives_a_topic_without_an_id_a_random_one() -> None:
    zk = FakeZooKeeper(OLD)

    assigned, written = topic_id_of(zk, "t", OLD, 0)

    assert written and zk.sets == [0]  # conditional on the version read
    assert zk_data.decode_topic_id("t", zk.data) == uuid_from_string(assigned) != ZERO_UUID
    assert zk_data.decode_assignment("t", zk.data) == {0: (1, 2)}


def test_an_id_another_writer_gave_meanwhile_wins() -> None:
    theirs = zk_data.encode_assignment({0: (1, 2)}, TOPIC_ID)
    zk = FakeZooKeeper(OLD, racer=theirs)

    assert topic_id_of(zk, "t", OLD, 0) == (TOPIC_ID_STRING, False)
    assert zk.data == theirs


def test_partitions_added_meanwhile_are_kept_with_the_new_id() -> None:
    zk = FakeZooKeeper(OLD, racer=b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}')

    assigned, written = topic_id_of(zk, "t", OLD, 0)

    assert written and zk.sets == [0, 1]
    assert zk_data.decode_assignment("t", zk.data) == {0: (1, 2), 1: (2, 3)}
    assert zk_data.decode_topic_id("t", zk.data) == uuid_from_string(assigned)


# -- the metadata cache -------------------------------------------------------------------------


def _update(topic: str, topic_id: str, *, leader: int = 1) -> UpdateMetadata:
    return UpdateMetadata(
        partition_states=(
            PartitionLeaderState(topic=topic, partition=0, leader=leader, isr=(1,), replicas=(1,)),
        ),
        live_brokers=(1,),
        topic_ids=(TopicIdentity(topic=topic, topic_id=topic_id),),
    )


def test_the_metadata_cache_answers_each_topics_id_until_it_is_deleted() -> None:
    cache = MetadataCache()
    cache.update(_update("t", TOPIC_ID_STRING))

    assert [t.topic_id for t in cache.topic_metadata(("t", "unknown"))] == [TOPIC_ID_STRING, ""]
    assert cache.topic_name(TOPIC_ID_STRING) == "t"

    cache.update(_update("t", TOPIC_ID_STRING, leader=LEADER_DURING_DELETE))
    assert cache.topic_name(TOPIC_ID_STRING) is None
    assert cache.topic_metadata(("t",))[0].topic_id == ""

    again = uuid_to_string(uuid.UUID(int=5))
    cache.update(_update("t", again))
    assert cache.topic_metadata(("t",))[0].topic_id == again
