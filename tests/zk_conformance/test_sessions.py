"""Sessions: ephemerals live and die with them; closing and expiry as a kazoo client sees them.

What kazoo does on expiry (and the model must mirror): the client goes SUSPENDED (the server drops
the connection), then LOST when its reconnect is told the session expired, then it opens a NEW
session on its own and goes CONNECTED with a new client_id. Watches it had set are dropped, each
called once with a NONE event.
"""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionClosedError, NodeExistsError
from kazoo.protocol.states import EventType, KazooState

from tests.zk_conformance.support import ZK, Events, States, event


def test_ephemerals_vanish_when_their_client_stops(zk: ZK) -> None:
    owner, observer = zk.connect(), zk.connect()
    parent = observer.create(zk.path("p"))
    eph = owner.create(zk.path("p", "e"), b"x", ephemeral=True)
    seq = owner.create(zk.path("p", "s-"), ephemeral=True, sequence=True)
    owner.create(zk.path("p", "kept"))
    node_events, child_events = Events(), Events()
    assert observer.exists(eph, watch=node_events) is not None
    observer.get_children(parent, watch=child_events)

    owner.stop()

    assert node_events.next() == event(EventType.DELETED, eph)
    assert child_events.next() == event(EventType.CHILD, parent)
    assert observer.exists(eph) is None
    assert observer.exists(seq) is None
    assert observer.get_children(parent) == ["kept"]


def test_stopping_one_client_leaves_other_sessions_ephemerals(zk: ZK) -> None:
    leaving, staying = zk.connect(), zk.connect()
    leaving.create(zk.path("gone"), ephemeral=True)
    staying.create(zk.path("stays"), ephemeral=True)
    leaving.stop()
    assert staying.exists(zk.path("gone")) is None
    assert staying.exists(zk.path("stays")).ephemeralOwner == staying.client_id[0]


def test_stopped_client_reports_lost_and_refuses_requests(zk: ZK) -> None:
    client = zk.connect()
    assert client.connected
    assert client.state == KazooState.CONNECTED
    states = States()
    client.add_listener(states)
    client.stop()
    assert states.wait_for(KazooState.LOST) == [KazooState.LOST]
    assert not client.connected
    assert client.state == KazooState.LOST
    with pytest.raises(ConnectionClosedError):
        client.get("/")
    with pytest.raises(ConnectionClosedError):
        client.create(zk.path("after-stop"))
    client.close()
    with pytest.raises(ConnectionClosedError):
        client.exists("/")


def test_stopped_clients_watches_are_never_called(zk: ZK) -> None:
    client, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"))
    events = Events()
    client.get(node, watch=events)
    client.get_children(node, watch=events)
    client.exists(zk.path("missing"), watch=events)
    client.stop()
    writer.set(node, b"after stop")
    writer.create(zk.path("n", "c"))
    writer.create(zk.path("missing"))
    events.expect_none()


def test_any_session_may_delete_anothers_ephemeral(zk: ZK) -> None:
    owner, other = zk.connect(), zk.connect()
    eph = owner.create(zk.path("e"), ephemeral=True)
    events = Events()
    owner.exists(eph, watch=events)
    assert other.delete(eph) is True
    assert events.next() == event(EventType.DELETED, eph)
    assert owner.exists(eph) is None


def test_expired_session_loses_its_ephemerals_and_others_see_deleted(zk: ZK) -> None:
    owner, observer = zk.connect(), zk.connect()
    parent = observer.create(zk.path("p"))
    eph = owner.create(zk.path("p", "e"), ephemeral=True)
    seq = owner.create(zk.path("p", "s-"), ephemeral=True, sequence=True)
    owner.create(zk.path("p", "kept"))
    node_events, child_events = Events(), Events()
    observer.exists(eph, watch=node_events)
    observer.get_children(parent, watch=child_events)

    zk.expire(owner)

    assert node_events.next() == event(EventType.DELETED, eph)
    assert child_events.next() == event(EventType.CHILD, parent)
    assert observer.exists(eph) is None
    assert observer.exists(seq) is None
    assert observer.get_children(parent) == ["kept"]


def test_expired_client_goes_lost_then_reconnects_with_a_new_session(zk: ZK) -> None:
    client = zk.connect()
    old_session = client.client_id[0]
    eph = client.create(zk.path("e"), ephemeral=True)
    states = States()
    client.add_listener(states)

    zk.expire(client)

    seen = states.wait_for(KazooState.LOST, KazooState.CONNECTED)
    assert seen[-1] == KazooState.CONNECTED
    assert client.connected
    new_session = client.client_id[0]
    assert new_session != old_session
    # the old ephemeral is gone for good (the new session does not bring it back); the new
    # session works and owns what it creates
    assert client.exists(eph) is None
    assert client.get_children(zk.base) == []
    client.create(eph, ephemeral=True)
    assert client.exists(eph).ephemeralOwner == new_session
    client.create(zk.path("persistent"))
    assert client.exists(zk.path("persistent")).ephemeralOwner == 0


def test_expired_client_sees_suspended_before_lost(zk: ZK) -> None:
    """A server expiring a session drops its connection, so kazoo is SUSPENDED first."""
    client = zk.connect()
    states = States()
    client.add_listener(states)
    zk.expire(client)
    seen = states.wait_for(KazooState.LOST)
    assert seen[0] == KazooState.SUSPENDED
    assert seen.index(KazooState.SUSPENDED) < seen.index(KazooState.LOST)


def test_expired_clients_watches_are_dropped_with_a_none_event(zk: ZK) -> None:
    client, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"))
    missing = zk.path("missing")
    events = Events()
    client.get(node, watch=events)
    client.exists(missing, watch=events)
    states = States()
    client.add_listener(states)

    zk.expire(client)
    states.wait_for(KazooState.LOST)

    for _watch in range(2):  # each dropped watch is called once, with no path
        dropped = events.next()
        assert dropped.type == EventType.NONE
        assert dropped.path is None
    writer.set(node, b"after expiry")  # the old session's watches are not carried over
    writer.create(missing)
    events.expect_none()


def test_ephemeral_handover_after_expiry(zk: ZK) -> None:
    """Kafka's controller election: the standby watches the leader's ephemeral and takes over."""
    leader, standby = zk.connect(), zk.connect()
    node = leader.create(zk.path("controller"), b"leader", ephemeral=True)
    events = Events()
    with pytest.raises(NodeExistsError):
        standby.create(node, b"standby", ephemeral=True)
    assert standby.exists(node, watch=events) is not None

    zk.expire(leader)

    assert events.next() == event(EventType.DELETED, node)
    assert standby.create(node, b"standby", ephemeral=True) == node
    data, stat = standby.get(node)
    assert data == b"standby"
    assert stat.ephemeralOwner == standby.client_id[0]


def test_sessions_have_distinct_ids(zk: ZK) -> None:
    clients = [zk.connect() for _ in range(4)]
    assert len({client.client_id[0] for client in clients}) == 4
