"""What a broker tells clients of the cluster: one Metadata request over the wire.

A broker registers in ZooKeeper and opens its listener before the controller's first
UpdateMetadata reaches it; until then it answers a Metadata request with no brokers and no
controller, as a Kafka broker on ZooKeeper does. A client that connects in that moment (the
first AdminClient right after `kafkactor cluster up`) may sit on that answer: librdkafka, seeing
no controller, waited 30 s before it asked again. The launcher asks each broker it starts with
this probe and counts it serving only once its metadata names every registered broker and a
controller among them.
"""

from __future__ import annotations

import socket
from typing import Any, Final

from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import (
    BadResponseError,
    build,
    decode_response,
    encode_request,
    request_type,
)
from kafkactor.network.framing import FrameDecoder, FrameSizeError

__all__ = ["ClusterView", "cluster_view"]

METADATA_VERSION: Final = 1  # brokers and controller id; topics: an empty array asks none
_MAX_FRAME: Final = 1 << 20


class ClusterView:
    """The brokers and the controller one broker's metadata names."""

    __slots__ = ("brokers", "controller")

    def __init__(self, brokers: frozenset[int], controller: int) -> None:
        self.brokers = brokers
        self.controller = controller

    def knows(self, registered: set[int]) -> bool:
        """Whether it names every broker of `registered` and a controller among them."""
        return registered <= self.brokers and self.controller in registered

    def __repr__(self) -> str:
        return f"ClusterView(brokers={sorted(self.brokers)}, controller={self.controller})"


def _request() -> bytes:
    schema = request_type(ApiKey.METADATA, METADATA_VERSION)
    body = build(schema, topics=(), allow_auto_topic_creation=False)
    return encode_request(ApiKey.METADATA, METADATA_VERSION, 1, "kafkactor-launcher", body)


def _read_frame(sock: socket.socket) -> bytes:
    """The first size-prefixed frame the broker sends (`FrameDecoder` splits the bytes)."""
    frames = FrameDecoder(_MAX_FRAME)
    while True:
        data = sock.recv(65_536)
        if not data:
            raise ConnectionError("the broker closed the connection")
        for frame in frames.feed(data):
            return frame


def cluster_view(host: str, port: int, timeout_s: float = 1.0) -> ClusterView | None:
    """The broker's view of the cluster (None when it cannot be asked or answers nonsense)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(_request())
            frame = _read_frame(sock)
        _, body = decode_response(ApiKey.METADATA, METADATA_VERSION, frame)
    except (OSError, FrameSizeError, BadResponseError):
        return None
    brokers: Any = body.brokers
    return ClusterView(frozenset(int(b.node_id) for b in brokers), int(body.controller_id))
