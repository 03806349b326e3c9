"""Kafka's group coordinator (classic protocol, as in Kafka 2.8; docs/coordinator.md).

- `member_metadata`: one member of a group (`MemberMetadata`) and its member id
- `group_state`: a group's state machine (`GroupState`)
- `group_metadata`: a group (`GroupMetadata`) and its committed offsets
- `group_coordinator`: `GroupCoordinatorCore`, the request handling as pure methods that
  return answers and `Effects` for an actor shell (`results`); `rebalance` holds its
  JoinGroup / SyncGroup / Heartbeat / LeaveGroup logic, `static_membership` KIP-345's
  rejoins, `group_offsets` OffsetCommit and OffsetFetch, `txn_offset_commit` TxnOffsetCommit
  and a transaction marker's completion of the pending offsets (`txn_offsets`)
- `offsets_topic`: the `__consumer_offsets` topic's partitioning and record formats

Nothing is imported here: import from the modules.
"""
