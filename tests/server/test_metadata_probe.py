"""The launcher's probe of what a broker tells clients of the cluster (`metadata_probe`)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kafkactor.server.metadata_probe import ClusterView, cluster_view
from kafkactor.testing import Cluster

pytestmark = pytest.mark.timeout(60)


def test_a_view_knows_the_cluster_only_with_every_registered_broker_and_a_controller() -> None:
    informed = ClusterView(frozenset({1, 2, 3}), 2)
    assert informed.knows({1, 2, 3})
    assert informed.knows({1, 3}) is False  # its controller is not registered (any more)
    assert ClusterView(frozenset({1, 2}), 2).knows({1, 2, 3}) is False  # a broker missing
    assert ClusterView(frozenset(), -1).knows({1, 2, 3}) is False  # before UpdateMetadata
    assert ClusterView(frozenset({1, 2, 3}), -1).knows({1, 2, 3}) is False


def test_a_brokers_view_names_every_broker_and_the_controller() -> None:
    with Cluster(brokers=3, listen="127.0.0.1") as cluster:
        controller = cluster.controller_id()
        for endpoint in cluster.bootstrap_servers.split(","):
            host, _, port = endpoint.rpartition(":")
            view = cluster_view(host, int(port))
            assert view is not None, endpoint
            assert view.brokers == {1, 2, 3} and view.controller == controller, view


@contextmanager
def _answering(answer: bytes) -> Iterator[int]:
    """A listener that answers every connection with `answer` and closes it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"",
        b"\x00\x00\x00\x05garbage",
        b"\xff\xff\xff\xff",
        b"\x00\x00\x00\x02\x00",
        b"\x00\x00\x00\x00",
        b"\x7f\xff\xff\xff",
    ],
    ids=["closed", "garbage", "negative-size", "cut-short", "empty-frame", "oversized"],
)
def test_nothing_usable_is_no_view(answer: bytes) -> None:
    with _answering(answer) as port:
        assert cluster_view("127.0.0.1", port, timeout_s=0.5) is None


def test_no_listener_is_no_view() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert cluster_view("127.0.0.1", port, timeout_s=0.5) is None
