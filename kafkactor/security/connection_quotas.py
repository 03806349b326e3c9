"""Kafka's `ConnectionQuotas`: `max.connections`, `max.connections.per.ip` and
`max.connections.per.ip.overrides`, counted over every listener of a broker."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Final

__all__ = ["INT_MAX", "ConnectionQuotas", "parse_per_ip_overrides"]

INT_MAX: Final = 2**31 - 1


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count` pairs separated by commas
    (`127.0.0.1:200,10.0.0.7:5`); ValueError on a malformed pair or a negative count."""
    overrides: dict[str, int] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host:
            raise ValueError(
                f"expected <host>:<count> in max.connections.per.ip.overrides: {entry}"
            )
        try:
            value = int(count)
        except ValueError:
            raise ValueError(
                f"not a connection count in max.connections.per.ip.overrides: {entry}"
            ) from None
        if value < 0:
            raise ValueError(
                f"a negative connection count in max.connections.per.ip.overrides: {entry}"
            )
        overrides[host.strip()] = value
    return overrides


class ConnectionQuotas:
    """Open connections by client address, and whether one more may be opened.

    `inc(address)` counts a new connection and answers True, or answers False and counts
    nothing when it would pass `max.connections` (over the whole broker) or the address's
    limit (`max.connections.per.ip`, or its entry in `max.connections.per.ip.overrides`);
    `dec(address)` when an accepted connection closes. `refusal` says why the last refused
    `inc` was refused. A `protected` connection (the inter-broker listener's: Kafka keeps
    brokers able to reach each other at the broker-wide limit) is bound only by the
    per-address limit. Thread-safe.
    """

    def __init__(
        self,
        max_connections: int = INT_MAX,
        max_connections_per_ip: int = INT_MAX,
        per_ip_overrides: Mapping[str, int] | None = None,
    ) -> None:
        if max_connections < 0:
            raise ValueError(f"max.connections must not be negative, got {max_connections}")
        if max_connections_per_ip < 0:
            raise ValueError(
                f"max.connections.per.ip must not be negative, got {max_connections_per_ip}"
            )
        overrides = dict(per_ip_overrides or {})
        if max_connections_per_ip == 0 and not overrides:
            raise ValueError(
                "max.connections.per.ip of 0 needs max.connections.per.ip.overrides "
                "(otherwise no client could connect)"
            )
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = overrides
        self._counts: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()
        self.refusal = ""

    def max_connections_for(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_connections_per_ip)

    def inc(self, address: str, *, protected: bool = False) -> bool:
        with self._lock:
            if not protected and self._total >= self.max_connections:
                self.refusal = f"max.connections ({self.max_connections}) reached"
                return False
            count = self._counts.get(address, 0)
            limit = self.max_connections_for(address)
            if count >= limit:
                name = (
                    "max.connections.per.ip.overrides"
                    if address in self.per_ip_overrides
                    else "max.connections.per.ip"
                )
                self.refusal = f"{name} ({limit}) reached for {address}"
                return False
            self._counts[address] = count + 1
            self._total += 1
            return True

    def dec(self, address: str) -> None:
        with self._lock:
            count = self._counts.get(address, 0)
            if count <= 0:
                raise ValueError(f"no open connection from {address} to close")
            if count == 1:
                del self._counts[address]
            else:
                self._counts[address] = count - 1
            self._total -= 1

    def get(self, address: str) -> int:
        """Open connections from `address`."""
        return self._counts.get(address, 0)

    @property
    def total(self) -> int:
        return self._total
