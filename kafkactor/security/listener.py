"""A broker's listeners as Kafka configures them: `listeners`, `listener.security.protocol.map`.

`listeners=SASL_SSL://:9093,PLAINTEXT://:9092` names listeners; a listener's name is its
security protocol unless `listener.security.protocol.map` maps a custom name
(`INTERNAL:SASL_PLAINTEXT`). Each `ListenerConfig` is one bound socket of the broker's
`SocketServer` with what its connections must do before their first request: a TLS handshake
(`ssl`), a SASL exchange (`sasl_mechanisms`), both, or nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

__all__ = ["ClientAuth", "ListenerConfig", "SecurityProtocol", "SslConfig"]


class SecurityProtocol(enum.Enum):
    """Kafka's `SecurityProtocol`, with its ids (the UpdateMetadata / registration codes)."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


ClientAuth = Literal["none", "requested", "required"]  # ssl.client.auth

# sasl.enabled.mechanisms: Kafka's default is GSSAPI (Kerberos), which kafkactor does not
# serve; its default is the three it does (docs/security.md)
DEFAULT_SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True, kw_only=True)
class SslConfig:
    """A TLS listener's key store and trust store as PEM files (Kafka's `ssl.keystore.type=PEM`
    with `ssl.keystore.location`, `ssl.key.password`, `ssl.truststore.location`) and
    `ssl.client.auth`. `keystore` holds the certificate chain and the private key (or `key` the
    key alone); `truststore` the CAs a client certificate is checked against. The same shape
    serves the broker's client side (inter-broker connections): `truststore` then checks the
    peer broker, and `keystore` is presented when the peer asks for a client certificate."""

    keystore: Path | None = None
    key: Path | None = None
    key_password: str | None = field(default=None, repr=False)  # never in an event or a repr
    truststore: Path | None = None
    client_auth: ClientAuth = "none"
    # ssl.endpoint.identification.algorithm (client side): "https" checks the host name
    endpoint_identification: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerConfig:
    """One listener: `name://host:port` with its security protocol (Kafka's `EndPoint` plus the
    `listener.name.<name>.*` settings that concern it). Port 0 binds a free port."""

    name: str
    security_protocol: SecurityProtocol
    host: str = "127.0.0.1"
    port: int = 0
    ssl: SslConfig | None = None  # required when the protocol uses TLS
    sasl_mechanisms: tuple[str, ...] = DEFAULT_SASL_MECHANISMS  # SASL protocols only

    def __post_init__(self) -> None:
        if self.security_protocol.uses_tls and self.ssl is None:
            raise ValueError(f"listener {self.name} ({self.security_protocol.name}) needs ssl")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")

    def url(self, host: str | None = None, port: int | None = None) -> str:
        return f"{self.name}://{host or self.host}:{self.port if port is None else port}"


def plaintext(host: str = "127.0.0.1", port: int = 0) -> ListenerConfig:
    """The one listener a broker has unless told otherwise."""
    return ListenerConfig(
        name="PLAINTEXT", security_protocol=SecurityProtocol.PLAINTEXT, host=host, port=port
    )
