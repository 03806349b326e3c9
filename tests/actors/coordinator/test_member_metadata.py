"""MemberMetadata: the behaviours of Kafka's MemberMetadataTest, and member id generation."""

from __future__ import annotations

import uuid

import pytest

from kafkactor.actors.coordinator.member_metadata import (
    MemberMetadata,
    Protocol,
    generate_member_id,
)


def member(protocols: list[Protocol]) -> MemberMetadata:
    return MemberMetadata(
        member_id="member",
        client_id="client",
        client_host="host",
        rebalance_timeout_ms=60_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        supported_protocols=protocols,
    )


def test_matches_only_the_same_protocols_with_the_same_metadata_in_the_same_order() -> None:
    m = member([("range", b"")])
    assert m.matches([("range", b"")])
    assert not m.matches([("range", b"\x00")])
    assert not m.matches([("roundrobin", b"")])
    assert not m.matches([("range", b""), ("roundrobin", b"")])
    two = member([("range", b""), ("roundrobin", b"")])
    assert not two.matches([("roundrobin", b""), ("range", b"")])


def test_votes_for_its_most_preferred_candidate() -> None:
    m = member([("range", b""), ("roundrobin", b"")])
    assert m.vote({"range", "roundrobin"}) == "range"
    assert m.vote({"blah", "roundrobin"}) == "roundrobin"


def test_vote_raises_when_it_supports_no_candidate() -> None:
    with pytest.raises(ValueError, match="none of the candidate protocols"):
        member([("range", b""), ("roundrobin", b"")]).vote({"blah"})


def test_metadata_per_protocol_and_raises_on_an_unsupported_one() -> None:
    m = member([("range", b"\x00"), ("roundrobin", b"\x01")])
    assert m.metadata("range") == b"\x00"
    assert m.metadata("roundrobin") == b"\x01"
    with pytest.raises(ValueError, match="does not support"):
        m.metadata("blah")


def test_dynamic_member_has_no_group_instance_id() -> None:
    m = member([("range", b"")])
    assert m.group_instance_id is None
    assert not m.is_static_member
    assert MemberMetadata(member_id="m", group_instance_id="instance").is_static_member


def test_member_id_is_the_client_id_a_dash_and_a_uuid() -> None:
    member_id = generate_member_id("consumer-7")
    prefix, _, suffix = member_id.partition("consumer-7-")
    assert prefix == ""
    assert str(uuid.UUID(suffix)) == suffix
    assert generate_member_id("consumer-7") != member_id
    assert generate_member_id("c", "instance-1", lambda: "x") == "instance-1-x"


def spared(m: MemberMetadata) -> bool:
    return m.has_satisfied_heartbeat


def test_waiting_in_a_rebalance_spares_a_member_but_not_a_new_one() -> None:
    m = member([("range", b"")])
    assert not spared(m)
    m.awaiting_join = True
    assert spared(m)
    m.is_new = True
    assert not spared(m)
    m.is_new, m.awaiting_join, m.awaiting_sync = False, False, True
    assert spared(m)
