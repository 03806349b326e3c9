"""A socket server's limits and timeouts (Kafka's broker settings of the same names), apart
from `socket_server` so that what a connection needs of its server names no cycle."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SocketServerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SocketServerConfig:
    """A listener's address and limits (Kafka's broker settings of the same names)."""

    host: str = "127.0.0.1"  # listeners bind loopback unless an address is given
    port: int = 0  # 0: a free port, chosen at start
    socket_request_max_bytes: int = 100 * 1024 * 1024
    queued_max_requests: int = 500
    max_in_flight_per_connection: int = 16
    connections_max_idle_ms: int = 600_000
    # how long a TLS listener waits for a client's handshake, and for its close_notify when
    # the server closes (kafkactor's own: Kafka's SSL channel has no bound of its own but
    # connections.max.idle.ms)
    tls_handshake_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        for name in (
            "socket_request_max_bytes",
            "queued_max_requests",
            "max_in_flight_per_connection",
            "connections_max_idle_ms",
            "tls_handshake_timeout_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
