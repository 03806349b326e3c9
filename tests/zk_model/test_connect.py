"""zk_model.connect: the embedded client for "embedded", kazoo's client for "host:port"."""

from __future__ import annotations

from typing import Any

import kazoo.client
import pytest

from kafkactor.timer import ManualClock
from kafkactor.zk_model import EmbeddedClient, EmbeddedZooKeeper, connect


def test_embedded_returns_a_started_client_of_that_server() -> None:
    with EmbeddedZooKeeper(ManualClock(0)) as zk:
        client = connect("embedded", embedded=zk, session_timeout_ms=6_000)
        assert isinstance(client, EmbeddedClient)
        assert client.connected and client.session_timeout_ms == 6_000
        assert client.client_id is not None
        assert zk.sessions() == [client.client_id[0]]


def test_embedded_needs_the_server() -> None:
    with pytest.raises(ValueError, match="embedded"):
        connect("embedded")


def test_a_host_list_starts_a_kazoo_client(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class FakeKazooClient:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

        def start(self, timeout: float) -> None:
            made.append({"started": timeout})

    monkeypatch.setattr(kazoo.client, "KazooClient", FakeKazooClient)
    client = connect("127.0.0.1:2181", session_timeout_ms=6_000, timeout_s=3.0)
    assert isinstance(client, FakeKazooClient)
    assert made == [{"hosts": "127.0.0.1:2181", "timeout": 6.0}, {"started": 3.0}]
