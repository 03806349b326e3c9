"""FindCoordinator's lookup (Kafka's handleFindCoordinatorRequest): the coordinator of a group
(key type 0) or of a transactional id (key type 1) is the leader of the key's partition of an
internal topic (`__consumer_offsets`, `__transaction_state`), read from the metadata cache. A
missing topic is created on the first lookup (Kafka's getOrCreateInternalTopic) with
min(its replication factor setting, live brokers) replicas, and the lookup answered
COORDINATOR_NOT_AVAILABLE meanwhile: clients ask again until its partitions have leaders."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactor.common import TopicExistsError
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse, TopicMetadata
from kafkactor.network.admin_apis import TopicAdmin
from kafkactor.network.steps import Admin, Ask, Step, error_of, respond

__all__ = ["CoordinatorLookup", "InternalTopic"]


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic whose partition leaders are coordinators: how a key maps to its
    partition, and how the topic is created when a lookup finds it missing."""

    name: str
    partitions: int  # its num.partitions setting: the partition count of a topic created here
    replication_factor: int  # its replication.factor setting, capped at the live brokers
    #: the key's partition among `partitions`
    partition_for: Callable[[str, int], int]
    #: the topic configs it is created with, given the replication factor used
    config: Callable[[int], Mapping[str, str]]
    #: whether the partition count of the existing topic (the metadata cache's) is used rather
    #: than `partitions` (Kafka's transaction coordinator reads it from ZooKeeper)
    count_from_metadata: bool = False


class CoordinatorLookup:
    """FindCoordinator's answer for one key of one internal topic (one creation of each topic at
    a time per broker)."""

    def __init__(self, replica_manager: str, admin: TopicAdmin | None) -> None:
        self.replica_manager = replica_manager
        self.admin = admin
        self._creating: set[str] = set()

    def find(self, schema: type[Any], topic: InternalTopic, key: str, listener: str = "") -> Step:
        """The coordinator of `key`: the leader of its partition of `topic`, at its endpoint on
        `listener` (the request's; COORDINATOR_NOT_AVAILABLE when it has none there)."""

        def unavailable(why: str) -> Step:
            return respond(
                schema,
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                error_message=why,
                node_id=-1,
                host="",
                port=-1,
            )

        def answered(response: Response) -> Step:
            if not isinstance(response, MetadataResponse):
                return unavailable(f"no metadata ({error_of(response).name})")
            found = next((t for t in response.topics if t.topic == topic.name), None)
            if found is None or found.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return self._create(topic, response, unavailable)
            partition = topic.partition_for(key, _partition_count(topic, found))
            leader = next((p.leader for p in found.partitions if p.partition == partition), -1)
            endpoints = [e for e in response.endpoints if e.broker_id == leader and leader >= 0]
            if not endpoints:
                return unavailable(f"{topic.name}-{partition} has no leader")
            return respond(
                schema,
                error_code=ErrorCode.NONE,
                error_message=None,
                node_id=endpoints[0].broker_id,
                host=endpoints[0].host,
                port=endpoints[0].port,
            )

        request = MetadataRequest(topics=(topic.name,), listener=listener)
        return Ask(self.replica_manager, request, answered)

    def _create(
        self, topic: InternalTopic, response: MetadataResponse, unavailable: Callable[[str], Step]
    ) -> Step:
        """Create the topic and answer COORDINATOR_NOT_AVAILABLE once ZooKeeper has it, without
        waiting for its leaders (as Kafka answers)."""
        admin = self.admin
        if admin is None or topic.name in self._creating:
            return unavailable(f"{topic.name} does not exist yet")
        live = max(1, len(response.endpoints) or len(response.brokers))
        factor = min(topic.replication_factor, live)
        config = dict(topic.config(factor))
        self._creating.add(topic.name)

        def create() -> Exception | None:
            try:
                admin.create_topic(topic.name, topic.partitions, factor, config, wait=False)
            except TopicExistsError:  # another broker's lookup created it meanwhile
                return None
            except Exception as error:  # ZooKeeper or the controller failed: a later lookup
                return error  # tries again
            return None

        def created(outcome: Any) -> Step:
            self._creating.discard(topic.name)
            if isinstance(outcome, BaseException):
                return unavailable(f"creating {topic.name} failed: {outcome}")
            return unavailable(f"{topic.name} is being created")

        return Admin(create, created)


def _partition_count(topic: InternalTopic, found: TopicMetadata) -> int:
    if topic.count_from_metadata and found.partitions:
        return len(found.partitions)
    return topic.partitions
