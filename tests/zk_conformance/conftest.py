"""The `zk` fixture: one harness interface over the embedded model and a real ZooKeeper 3.8.

"real" starts Debian's ZooKeeper once per test session (a `LocalZooKeeper` of
`kafkactor.server.zookeeper`: `ZooKeeperServerMain` on a free loopback port, its own data dir,
config and log file in a temp dir) and stops it at the end. "embedded" makes a fresh
`EmbeddedZooKeeper` per test. Either way each test gets its own top-level node `zk.base`,
created before and deleted recursively after it, and every client it connects is closed afterwards.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from kafkactor.server.zookeeper import LocalZooKeeper, LocalZooKeeperError
from kafkactor.timer.clock import SystemClock
from tests.zk_conformance.support import TIMEOUT_S, ZK, Client

STARTUP_DEADLINE_S = 30.0
SESSION_TIMEOUT_S = 5.0  # within the server's [minSessionTimeout, maxSessionTimeout]
CONNECT_TIMEOUT_S = 10.0
BACKENDS = ["embedded", "real"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "model_differs(reason): the embedded model is known to differ from the real server here;"
        " the embedded case is a strict xfail",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("model_differs")
        callspec = getattr(item, "callspec", None)
        if marker is None or callspec is None or callspec.params.get("zk") != "embedded":
            continue
        reason = f"MODEL DIFFERS: {marker.args[0]}"
        item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


# --- the real server -------------------------------------------------------------------------


@dataclass(frozen=True)
class RealServer:
    hosts: str
    log_path: Path


@pytest.fixture(scope="session")
def real_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    """Debian's ZooKeeper 3.8, standalone, on a free loopback port; stopped at session end."""
    install = LocalZooKeeper.available()
    if not install:
        pytest.skip(f"real ZooKeeper: {install.reason}")
    server = LocalZooKeeper(
        tmp_path_factory.mktemp("zookeeper"),
        tick_time_ms=100,  # fast session expiry
        min_session_timeout_ms=200,
        max_session_timeout_ms=10_000,
        four_letter_words=["ruok"],
        force_sync=False,  # no fsync per write: a throwaway data dir, and a faster suite
    )
    try:
        server.start(timeout_s=STARTUP_DEADLINE_S)  # on failure it is stopped again
    except LocalZooKeeperError as error:
        pytest.fail(f"real ZooKeeper did not start: {error}")
    try:
        yield RealServer(hosts=server.hosts, log_path=server.log_path)
    finally:
        server.stop()


# --- harnesses -------------------------------------------------------------------------------


class _Harness:
    backend = ""

    def __init__(self) -> None:
        self.base = f"/t-{uuid.uuid4().hex}"
        self._clients: list[Client] = []
        self._admin: Client = None

    def _new_client(self) -> Client:
        raise NotImplementedError

    def expire(self, client: Client) -> None:
        raise NotImplementedError

    def connect(self) -> Client:
        client = self._new_client()
        self._clients.append(client)
        return client

    def path(self, *parts: str) -> str:
        return "/".join((self.base, *parts))

    def open(self) -> None:
        self._admin = self._new_client()
        self._admin.create(self.base)

    def close(self) -> None:
        for client in reversed(self._clients):
            client.stop()
            client.close()
        if self._admin is not None:
            self._admin.delete(self.base, recursive=True)
            self._admin.stop()
            self._admin.close()


class _RealHarness(_Harness):
    backend = "real"

    def __init__(self, server: RealServer) -> None:
        super().__init__()
        self._hosts = server.hosts

    def _new_client(self) -> Client:
        client = KazooClient(hosts=self._hosts, timeout=SESSION_TIMEOUT_S)
        client.start(timeout=CONNECT_TIMEOUT_S)
        return client

    def expire(self, client: Client) -> None:
        """The standard trick: a second connection with the same session id and password takes
        the session over (the server drops the first connection), then closes it. The first
        client's reconnect is then told the session expired. Confirmed by the client going LOST;
        retried in the rare case its reconnect wins the race and reclaims the session."""
        lost = threading.Event()

        def on_state(state: str) -> None:
            if state == KazooState.LOST:
                lost.set()

        client.add_listener(on_state)
        try:
            for _attempt in range(3):
                session_id, password = client.client_id
                intruder = KazooClient(
                    hosts=self._hosts, client_id=(session_id, password), timeout=SESSION_TIMEOUT_S
                )
                intruder.start(timeout=CONNECT_TIMEOUT_S)
                intruder.stop()
                intruder.close()
                if lost.wait(TIMEOUT_S):
                    return
            raise AssertionError(f"session {session_id:#x} did not expire")
        finally:
            client.remove_listener(on_state)


class _EmbeddedHarness(_Harness):
    backend = "embedded"

    def __init__(self, server: Any) -> None:
        super().__init__()
        self._server = server

    def _new_client(self) -> Client:
        return self._server.connect(session_timeout_ms=int(SESSION_TIMEOUT_S * 1000))

    def expire(self, client: Client) -> None:
        self._server.expire_session(client.client_id[0])

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._server.close()


def _embedded_harness() -> _EmbeddedHarness:
    try:
        from kafkactor.zk_model import EmbeddedZooKeeper
    except ImportError as missing:
        pytest.skip(f"embedded model: kafkactor.zk_model not importable ({missing})")
    return _EmbeddedHarness(EmbeddedZooKeeper(clock=SystemClock(), tick_ms=100))


@pytest.fixture(params=BACKENDS)
def zk(request: pytest.FixtureRequest) -> Iterator[ZK]:
    """A harness for one test on one backend; its clients and nodes are gone afterwards."""
    harness: _Harness
    if request.param == "real":
        harness = _RealHarness(request.getfixturevalue("real_zookeeper"))
    else:
        harness = _embedded_harness()
    try:
        harness.open()
        yield harness
    finally:
        harness.close()
