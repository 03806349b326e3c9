"""One member of a consumer group, as the group coordinator knows it (Kafka's MemberMetadata)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

Protocol = tuple[str, bytes]
"""One protocol a member supports: its name (e.g. "range") and the member's metadata for it
(for consumers, the serialized subscription)."""

MEMBER_ID_DELIMITER = "-"
UNKNOWN_MEMBER_ID = ""  # the member id of a JoinGroup from a member the group does not know yet


def random_suffix() -> str:
    """The random part of a new member id (Kafka: `UUID.randomUUID().toString`)."""
    return str(uuid.uuid4())


def generate_member_id(
    client_id: str,
    group_instance_id: str | None = None,
    suffix: Callable[[], str] = random_suffix,
) -> str:
    """Kafka's `GroupMetadata.generateMemberId`: the client id (the group instance id for a
    static member) joined to a fresh UUID by "-", e.g. `consumer-1-6f1c...`."""
    prefix = client_id if group_instance_id is None else group_instance_id
    return prefix + MEMBER_ID_DELIMITER + suffix()


@dataclass(frozen=True, slots=True)
class MemberSummary:
    """Kafka's `MemberSummary`: one member as DescribeGroups shows it. `metadata` and
    `assignment` are empty unless the group is Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True, kw_only=True)
class MemberMetadata:
    """Kafka's `MemberMetadata`: a member's identity, timeouts, protocols and rebalance flags.

    - `supported_protocols` is in the member's order of preference; `vote` picks the first
      of them that every member supports.
    - `awaiting_join` / `awaiting_sync` stand for Kafka's `awaitingJoinCallback` /
      `awaitingSyncCallback`: the member's JoinGroup (SyncGroup) is parked until the rebalance
      answers it. The callbacks themselves stay with the actor shell, keyed by member id.
    - `heartbeat_deadline_ms` is when the member's current DelayedHeartbeat falls due (None
      when none is scheduled). It stands for Kafka's `heartbeatSatisfied` flag: any sign of
      life schedules a later deadline, so an expiry naming an older deadline is stale.
    - `is_new`: joined but not yet through a completed join phase; such a member has only
      the new-member join timeout (5 minutes) and is not kept alive by waiting for the join.
    - `group_instance_id` (KIP-345) makes the member static: the group maps the instance id
      to the member's current id, a restarted instance rejoining with member id "" takes
      this member's place (`GroupMetadata.replace_static_member`), and the member stays
      through a rebalance it does not rejoin (only its session's end removes it).
    """

    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    session_timeout_ms: int = 0
    protocol_type: str = ""
    supported_protocols: list[Protocol] = field(default_factory=list)
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_leaving: bool = False
    is_new: bool = False
    heartbeat_deadline_ms: int | None = None

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocols(self) -> set[str]:
        """The names of the protocols the member supports (Kafka's `plainProtocolSet`)."""
        return {name for name, _ in self.supported_protocols}

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Whether the expiry of the member's current heartbeat deadline spares it.

        A member waiting in a rebalance (its JoinGroup or SyncGroup parked) cannot heartbeat
        and is spared, except a new member, which only has its join timeout.
        """
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for `protocol`; ValueError if it does not support it."""
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        """Whether `protocols` are exactly the stored ones: same names, same metadata, same
        order. A follower rejoining with matching protocols does not trigger a rebalance."""
        return [(name, bytes(metadata)) for name, metadata in protocols] == [
            (name, bytes(metadata)) for name, metadata in self.supported_protocols
        ]

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among `candidates`; ValueError if none."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(
            f"member {self.member_id} supports none of the candidate protocols {sorted(candidates)}"
        )

    def summary(self, protocol: str) -> MemberSummary:
        return MemberSummary(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.metadata(protocol),
            self.assignment,
        )

    def summary_no_metadata(self) -> MemberSummary:
        return MemberSummary(
            self.member_id, self.group_instance_id, self.client_id, self.client_host, b"", b""
        )
