"""Everything a broker needs to know about security, as one value (built from Kafka's settings
by `kafkactor.server.config`, or by `kafkactor.testing.security` for an in-process cluster)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kafkactor.security.listener import ListenerConfig, SslConfig, plaintext

__all__ = [
    "AuthorizerConfig",
    "BrokerSecurityConfig",
    "InterBrokerSecurity",
    "SaslServerConfig",
]

INT_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslServerConfig:
    """The SASL server side shared by a broker's SASL listeners: PLAIN's users (the JAAS
    `user_<name>="<password>"` options of `PlainLoginModule`), and how long a connection whose
    authentication failed is held before it is closed
    (`connection.failed.authentication.delay.ms`, on the broker's timer). SCRAM's credentials
    are not here: they live in ZooKeeper (`/config/users/<user>`) and may change while the
    broker runs."""

    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    connection_failed_authentication_delay_ms: int = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class InterBrokerSecurity:
    """How this broker connects to the others (`inter.broker.listener.name` or
    `security.inter.broker.protocol`, `sasl.mechanism.inter.broker.protocol`, and the
    inter-broker listener's JAAS `username` / `password`), and the TLS settings of its client
    side (the trust store that checks the peer)."""

    listener: str = "PLAINTEXT"
    mechanism: str | None = None  # SASL listeners only
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl: SslConfig | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerConfig:
    """`authorizer.class.name` set (`enabled`), `super.users` (principals, `User:admin`) and
    `allow.everyone.if.no.acl.found` (false by default, as Kafka's AclAuthorizer)."""

    enabled: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSecurityConfig:
    """A broker's listeners and who may connect and do what (docs/security.md).

    The defaults are a broker as before security: one PLAINTEXT listener, no authorizer, no
    memory pool bound (`queued.max.request.bytes` -1), no connection limit, Kafka's quota
    sampling (11 windows of 1 s)."""

    listeners: tuple[ListenerConfig, ...] = field(default_factory=lambda: (plaintext(),))
    # advertised.listeners: (listener name, host, port) registered for a listener instead of
    # its own address; a listener not named here is registered as it listens
    advertised: tuple[tuple[str, str, int], ...] = ()
    inter_broker: InterBrokerSecurity = field(default_factory=InterBrokerSecurity)
    sasl: SaslServerConfig = field(default_factory=SaslServerConfig)
    authorizer: AuthorizerConfig = field(default_factory=AuthorizerConfig)
    queued_max_request_bytes: int = -1
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    # max.connections.per.ip.overrides: {address: count}
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1

    def __post_init__(self) -> None:
        names = [listener.name for listener in self.listeners]
        if not names:
            raise ValueError("a broker needs at least one listener")
        if len(set(names)) != len(names):
            raise ValueError(f"listener names must be unique, got {names}")
        if self.inter_broker.listener not in names:
            raise ValueError(
                f"the inter-broker listener {self.inter_broker.listener} is not among {names}"
            )

    def advertised_endpoint(self, name: str) -> tuple[str, int] | None:
        """The host and port advertised for listener `name` (None: not advertised apart)."""
        for listener, host, port in self.advertised:
            if listener == name:
                return host, port
        return None

    def listener(self, name: str) -> ListenerConfig:
        for listener in self.listeners:
            if listener.name == name:
                return listener
        raise KeyError(name)
