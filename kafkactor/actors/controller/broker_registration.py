"""A live broker's `/brokers/ids/<id>` znode: Kafka's `BrokerIdZNode` JSON, listeners included.

Kafka 2.8 writes version 4 (and 5 with features): `endpoints` lists every listener's connection
string (`SASL_SSL://host:9093`), `listener_security_protocol_map` maps each listener name to its
security protocol, and the top-level `host` / `port` are the first PLAINTEXT endpoint's, for
clients older than listeners (`null` / -1 without one). Older versions decode too: version 1-3
registrations without the map take a listener's protocol from its name, version 0 has only
`host` and `port` (one PLAINTEXT listener).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kafkactor.actors.controller.znode_error import MalformedZnodeError
from kafkactor.common import DEFAULT_LISTENER, BrokerEndpoint, ListenerEndpoint

__all__ = ["REGISTRATION_VERSION", "BrokerRegistration"]

REGISTRATION_VERSION = 4
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_PROTOCOL_NAMES = {code: name for name, code in _PROTOCOL_IDS.items()}


def _broker_path(broker_id: int) -> str:
    return f"/brokers/ids/{broker_id}"


def _malformed(path: str, reason: str) -> Exception:
    return MalformedZnodeError(path, reason)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker's ephemeral registration (Kafka's `BrokerInfo` as `BrokerIdZNode` holds it).

    `host` / `port` are the top-level pair (the PLAINTEXT listener's); `listeners` every
    listener's endpoint. Built without listeners, the registration is the one PLAINTEXT
    listener at host:port that a broker without security has."""

    broker_id: int
    host: str
    port: int
    timestamp_ms: int
    listeners: tuple[ListenerEndpoint, ...] = ()

    @classmethod
    def of(
        cls, broker_id: int, listeners: tuple[ListenerEndpoint, ...], timestamp_ms: int
    ) -> BrokerRegistration:
        """The registration of a broker with these listeners (top-level: its PLAINTEXT one)."""
        plain = next((e for e in listeners if e.security_protocol == 0), None)
        host, port = (plain.host, plain.port) if plain is not None else ("", -1)
        return cls(broker_id, host, port, timestamp_ms, listeners)

    @property
    def endpoints(self) -> tuple[ListenerEndpoint, ...]:
        """Every listener's endpoint (without listeners: PLAINTEXT at host:port)."""
        if self.listeners:
            return self.listeners
        return (ListenerEndpoint(host=self.host, port=self.port),)

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the listener named `listener`; None when the broker has none."""
        for endpoint in self.endpoints:
            if endpoint.listener == listener and endpoint.port >= 0:
                return endpoint.host, endpoint.port
        return None

    def broker_endpoint(self, inter_broker_listener: str = DEFAULT_LISTENER) -> BrokerEndpoint:
        """The broker as the controller spreads it in UpdateMetadata: its inter-broker
        endpoint on top (else the top-level pair, else its first listener) and every
        listener's endpoint."""
        found = self.endpoint(inter_broker_listener)
        if found is None and self.port < 0 and self.listeners:
            found = self.listeners[0].host, self.listeners[0].port
        host, port = found if found is not None else (self.host, self.port)
        return BrokerEndpoint(
            broker_id=self.broker_id, host=host, port=port, listeners=self.listeners
        )

    def encode(self) -> bytes:
        endpoints = self.endpoints
        body = {
            "listener_security_protocol_map": {
                e.listener: _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT") for e in endpoints
            },
            "endpoints": [e.url() for e in endpoints],
            "jmx_port": -1,
            "port": self.port,
            "host": self.host or None,
            "version": REGISTRATION_VERSION,
            "timestamp": str(self.timestamp_ms),
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        path = _broker_path(broker_id)
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise _malformed(path, f"not JSON ({error})") from None
        if not isinstance(body, dict):
            raise _malformed(path, f"expected a JSON object, got {body!r}")
        listeners = _listeners(path, body)
        host, timestamp = body.get("host"), body.get("timestamp")
        if not isinstance(host, str) and not (host is None and listeners):
            raise _malformed(path, f"host is {host!r}, not a string")
        if not isinstance(timestamp, str | int) or isinstance(timestamp, bool):
            raise _malformed(path, f"timestamp is {timestamp!r}")
        try:
            timestamp_ms = int(timestamp)
        except ValueError:
            raise _malformed(path, f"timestamp {timestamp!r} is not a number") from None
        port = body.get("port")
        if type(port) is not int:
            raise _malformed(path, f"port is {port!r}, not an integer")
        return cls(broker_id, host or "", port, timestamp_ms, listeners)


def _listeners(path: str, body: dict[str, Any]) -> tuple[ListenerEndpoint, ...]:
    """The `endpoints` of a version 1+ registration, each with its security protocol."""
    urls = body.get("endpoints")
    if urls is None:
        return ()
    protocols = body.get("listener_security_protocol_map") or {}
    if not isinstance(urls, list) or not isinstance(protocols, dict):
        raise _malformed(path, f"endpoints {urls!r} with protocols {protocols!r}")
    listeners = []
    for url in urls:
        name, sep, address = url.partition("://") if isinstance(url, str) else ("", "", "")
        host, colon, port = address.rpartition(":")
        if not (sep and colon and port.lstrip("-").isdigit()):
            raise _malformed(path, f"endpoint {url!r} is not listener://host:port")
        protocol = protocols.get(name, name)
        if protocol not in _PROTOCOL_IDS:
            raise _malformed(path, f"listener {name} has no known security protocol")
        listeners.append(
            ListenerEndpoint(
                listener=name,
                host=host.removeprefix("[").removesuffix("]"),
                port=int(port),
                security_protocol=_PROTOCOL_IDS[protocol],
            )
        )
    return tuple(listeners)
