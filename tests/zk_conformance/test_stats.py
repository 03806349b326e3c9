"""ZnodeStat fields. Zxids differ between servers, so only their relations are compared."""

from __future__ import annotations

import time

import pytest
from kazoo.protocol.states import ZnodeStat

from tests.zk_conformance.support import ZK

# ctime/mtime are the server's wall clock (epoch ms); both servers run on this machine.
CLOCK_SLACK_MS = 10_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_new_node_stat(zk: ZK) -> None:
    client = zk.connect()
    before = _now_ms()
    client.create(zk.path("n"), b"abc")
    after = _now_ms()
    data, stat = client.get(zk.path("n"))
    assert isinstance(stat, ZnodeStat)
    assert data == b"abc"
    assert (stat.version, stat.cversion, stat.aversion) == (0, 0, 0)
    assert stat.dataLength == 3
    assert stat.numChildren == 0
    assert stat.ephemeralOwner == 0
    assert stat.czxid == stat.mzxid == stat.pzxid
    assert stat.czxid > 0
    assert stat.ctime == stat.mtime
    assert before - CLOCK_SLACK_MS <= stat.ctime <= after + CLOCK_SLACK_MS


def test_get_and_exists_report_the_same_stat(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("n"), b"v")
    assert client.exists(zk.path("n")) == client.get(zk.path("n"))[1]


def test_create_include_data_returns_path_and_stat(zk: ZK) -> None:
    client = zk.connect()
    path, stat = client.create(zk.path("n"), b"xy", include_data=True)
    assert path == zk.path("n")
    assert stat == client.exists(zk.path("n"))
    assert stat.dataLength == 2
    seq_path, seq_stat = client.create(zk.path("s-"), sequence=True, include_data=True)
    assert seq_path == zk.path("s-0000000001")
    assert seq_stat.czxid > stat.czxid


def test_set_increments_version_and_moves_mzxid_and_mtime(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("n"), b"abc")
    created = client.exists(zk.path("n"))
    returned = client.set(zk.path("n"), b"longer value")
    stat = client.exists(zk.path("n"))
    assert returned == stat
    assert stat.version == 1
    assert stat.dataLength == len(b"longer value")
    assert stat.czxid == created.czxid
    assert stat.mzxid > created.mzxid
    assert stat.pzxid == created.pzxid  # data changes do not touch pzxid
    assert stat.ctime == created.ctime
    assert stat.mtime >= stat.ctime
    assert stat.cversion == 0
    # setting the same value again is still a new version
    again = client.set(zk.path("n"), b"longer value")
    assert again.version == 2
    assert again.mzxid > stat.mzxid


def test_zxids_increase_across_operations(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("a"))
    client.create(zk.path("b"))
    a, b = client.exists(zk.path("a")), client.exists(zk.path("b"))
    assert b.czxid > a.czxid
    set_a = client.set(zk.path("a"), b"x")
    assert set_a.mzxid > b.czxid
    client.create(zk.path("c"))
    assert client.exists(zk.path("c")).czxid > set_a.mzxid


def test_child_create_and_delete_update_the_parent(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p"), b"data")
    parent0 = client.exists(zk.path("p"))

    client.create(zk.path("p", "c1"))
    child1 = client.exists(zk.path("p", "c1"))
    parent1 = client.exists(zk.path("p"))
    assert parent1.cversion == 1
    assert parent1.numChildren == 1
    assert parent1.pzxid == child1.czxid
    assert parent1.version == parent0.version  # the parent's data is untouched
    assert parent1.mzxid == parent0.mzxid
    assert parent1.mtime == parent0.mtime
    assert parent1.dataLength == 4

    client.create(zk.path("p", "c2"))
    parent2 = client.exists(zk.path("p"))
    assert (parent2.cversion, parent2.numChildren) == (2, 2)
    assert parent2.pzxid == client.exists(zk.path("p", "c2")).czxid

    client.delete(zk.path("p", "c1"))
    parent3 = client.exists(zk.path("p"))
    assert (parent3.cversion, parent3.numChildren) == (3, 1)
    assert parent3.pzxid > parent2.pzxid  # the delete's zxid
    assert parent3.mzxid == parent0.mzxid
    client.create(zk.path("later"))
    assert client.exists(zk.path("later")).czxid > parent3.pzxid


def test_grandchildren_do_not_change_the_grandparent(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p", "c"), makepath=True)
    before = client.exists(zk.path("p"))
    client.create(zk.path("p", "c", "g"))
    client.set(zk.path("p", "c"), b"x")
    assert client.exists(zk.path("p")) == before


def test_get_children_include_data_returns_the_parents_stat(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p", "c"), makepath=True)
    children, stat = client.get_children(zk.path("p"), include_data=True)
    assert children == ["c"]
    assert stat == client.exists(zk.path("p"))
    assert stat.numChildren == 1


def test_ephemeral_owner_is_the_creating_session(zk: ZK) -> None:
    first, second = zk.connect(), zk.connect()
    assert first.client_id[0] != second.client_id[0]
    first.create(zk.path("e1"), ephemeral=True)
    second.create(zk.path("e2"), ephemeral=True)
    first.create(zk.path("p"))
    # whoever reads it, the owner is the session that created it
    for reader in (first, second):
        assert reader.exists(zk.path("e1")).ephemeralOwner == first.client_id[0]
        assert reader.exists(zk.path("e2")).ephemeralOwner == second.client_id[0]
        assert reader.exists(zk.path("p")).ephemeralOwner == 0


def test_client_id_is_session_id_and_password(zk: ZK) -> None:
    client = zk.connect()
    session_id, password = client.client_id
    assert isinstance(session_id, int)
    assert session_id > 0
    assert isinstance(password, bytes)
    assert len(password) == 16


def test_root_stat(zk: ZK) -> None:
    client = zk.connect()
    data, stat = client.get("/")
    assert data == b""
    assert (stat.czxid, stat.mzxid, stat.ctime, stat.mtime) == (0, 0, 0, 0)
    assert (stat.version, stat.aversion, stat.ephemeralOwner, stat.dataLength) == (0, 0, 0, 0)
    assert stat.numChildren == len(client.get_children("/"))


@pytest.mark.parametrize("size", [0, 1, 1000, 100_000])
def test_data_length(zk: ZK, size: int) -> None:
    client = zk.connect()
    client.create(zk.path("n"), b"x" * size)
    assert client.exists(zk.path("n")).dataLength == size
