"""Kafka's `KafkaConfig`: one broker's settings, read from a `server.properties` file.

The property table (names, kinds, where each value goes) is `config_properties`; how a value
is parsed is `config_kinds` / `security_kinds`; `config_reader` reads a file (through
javaproperties), checks every entry and assembles the existing config objects (`BrokerConfig`
and what it holds, `BrokerSecurityConfig`). This module holds the results and writes a
configuration back out (`to_properties`). docs/broker-config.md documents every property.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkactor.actors.broker import BrokerConfig
from kafkactor.network.socket_server import SocketServerConfig
from kafkactor.security.security_config import BrokerSecurityConfig
from kafkactor.server.config_describe import (
    MISSING,
    describe_properties,
    field_default,
    nested_value,
)
from kafkactor.server.config_kinds import EndPoint
from kafkactor.server.config_properties import SECTIONS
from kafkactor.server.config_reader import (
    DEFAULT_LISTENER,
    DEFAULT_LOG_DIRS,
    PER_BROKER,
    PROCESS_ONLY,
    SESSION_TIMEOUT_MS,
    SOCKET_DEFAULTS,
    SOCKET_LIMITS,
    ConfigError,
    Entry,
    Reader,
    entries,
    primary,
    read_text,
)
from kafkactor.server.security_properties import (
    SecurityProperties,
    build_security,
    listener_override,
)
from kafkactor.storage import LogConfig

__all__ = [
    "DEFAULT_LISTENER",
    "PER_BROKER",
    "PROCESS_ONLY",
    "ConfigError",
    "EndPoint",
    "KafkaConfig",
    "SharedBrokerConfig",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaConfig:
    """Kafka's `KafkaConfig`: everything one broker process is started with, read from a
    properties file with Kafka's property names (`from_file`).

    The broker's own settings: its id, its listeners and the ones it advertises
    (`listener_endpoints`, `advertised_endpoints`; `listeners` / `advertised_listeners` are the
    one named PLAINTEXT, else the first, as before listeners had names), its security
    (`security`, built from `security_properties`), its one data directory (`log.dirs`), its
    ZooKeeper ensemble and session, the timeout of its requests to other brokers, controlled
    shutdown, and where kafkactor's event log goes.
    `broker` is the `BrokerConfig` the other Kafka settings build (replication, log manager,
    topic-config defaults in `log_config`, KafkaApis, group coordinator); `socket_server` the
    listener's `SocketServerConfig`. Defaults are the config objects' own (Kafka's, except as
    docs/broker-config.md says). `ignored` names the Kafka settings the file held that have
    no meaning here, in file order, for the broker to log; equality does not compare it.
    """

    broker_id: int
    zookeeper_connect: str
    listeners: EndPoint = DEFAULT_LISTENER
    advertised_listeners: EndPoint  # from_properties: the listeners unless set
    # every listener (empty: `listeners` alone) and every advertised one (empty: as listening)
    listener_endpoints: tuple[EndPoint, ...] = ()
    advertised_endpoints: tuple[EndPoint, ...] = ()
    security_properties: SecurityProperties = field(default_factory=SecurityProperties)
    security: BrokerSecurityConfig | None = None  # None: built from the two above
    log_dirs: Path = DEFAULT_LOG_DIRS
    event_log: Path  # from_properties: events-<broker id>.jsonl beside log_dirs unless set
    event_log_enable: bool = True
    zookeeper_session_timeout_ms: int = SESSION_TIMEOUT_MS
    # from_properties: the session timeout unless set, as Kafka resolves it
    zookeeper_connection_timeout_ms: int = SESSION_TIMEOUT_MS
    request_timeout_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    socket_request_max_bytes: int = SOCKET_DEFAULTS.socket_request_max_bytes
    queued_max_requests: int = SOCKET_DEFAULTS.queued_max_requests
    connections_max_idle_ms: int = SOCKET_DEFAULTS.connections_max_idle_ms
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    ignored: tuple[str, ...] = field(default=(), compare=False)
    # the settings and other names the properties gave, as given (trimmed): DescribeConfigs'
    # STATIC_BROKER_CONFIG; equality does not compare them
    given: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.listener_endpoints:
            object.__setattr__(self, "listener_endpoints", (self.listeners,))
        else:
            object.__setattr__(self, "listeners", primary(self.listener_endpoints))
        if not self.advertised_endpoints:
            advertised = self.advertised_listeners
            endpoints = tuple(
                advertised if e.listener_name == advertised.listener_name else e
                for e in self.listener_endpoints
            )
            object.__setattr__(self, "advertised_endpoints", endpoints)
        else:
            object.__setattr__(
                self, "advertised_listeners", primary(self.advertised_endpoints, self.listeners)
            )
        if self.security is None:
            security = build_security(
                self.security_properties, self.listener_endpoints, self.advertised_endpoints
            )
            object.__setattr__(self, "security", security)
        # `broker.properties`: this configuration as DescribeConfigs lists it
        described = describe_properties(
            lambda path: nested_value(self, path),
            lambda path: field_default(KafkaConfig, path),
            dict(self.given),
            self.broker,
        )
        object.__setattr__(self, "broker", dataclasses.replace(self.broker, properties=described))

    @property
    def log_config(self) -> LogConfig:
        """The broker-wide defaults of the topic configs (`log.segment.bytes`, ...)."""
        return self.broker.log_manager.default_log_config

    @property
    def socket_server(self) -> SocketServerConfig:
        """The listener: its host and port, with the socket server's limits."""
        return dataclasses.replace(
            SOCKET_DEFAULTS,
            host=self.listeners.host,
            port=self.listeners.port,
            socket_request_max_bytes=self.socket_request_max_bytes,
            queued_max_requests=self.queued_max_requests,
            connections_max_idle_ms=self.connections_max_idle_ms,
        )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> KafkaConfig:
        """Read a properties file (UTF-8; Java's syntax, through javaproperties). Raises
        `ConfigError` naming the file and line of the first problem."""
        source = os.fspath(path)
        return cls(**Reader(source).read(entries(read_text(path), source)))

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], source: str = "<properties>"
    ) -> KafkaConfig:
        """The configuration of these properties (name -> value), as `from_file` reads them;
        `source` names them in a `ConfigError`."""
        return cls(**Reader(source).read(Entry(k, v, None) for k, v in properties.items()))

    def to_properties(self) -> str:
        """This configuration as a properties file, every setting in its commented section;
        `from_file` reads it back to an equal configuration."""
        import javaproperties  # loaded to read or write a file: a broker's start does neither

        lines = [
            _comment(
                "kafkactor broker configuration, with Kafka's server.properties names\n"
                "(docs/broker-config.md describes each setting)"
            )
        ]
        for section in SECTIONS:
            lines += ["", f"{'#' * 29} {section.title} {'#' * 29}", _comment(section.comment)]
            for setting in section.settings:
                if setting.path is None:  # accepted at one value, with no effect: not written
                    continue
                value = nested_value(self, setting.path)
                if value is None or (  # unset, or the default that reading it back gives
                    setting.name == "advertised.listeners" and value == self.listener_endpoints
                ):
                    lines.append(f"#{setting.name}=")
                else:
                    lines.append(
                        javaproperties.join_key_value(setting.name, setting.kind.format(value))
                    )
            if section.title == "Security":
                for name, value in self.security_properties.listener_overrides:
                    text = listener_override(name)[1].format(value)
                    lines.append(javaproperties.join_key_value(name, text))
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedBrokerConfig:
    """Broker properties that every broker of an in-process cluster shares (`kafkactor serve`,
    `Cluster(properties=...)`), read by `KafkaConfig`'s reader with its names and checks.

    Nothing is required. The settings that name one broker (`PER_BROKER`: `broker.id`,
    `advertised.listeners`) are refused. `broker` and `socket_server` (its limits; host and
    port are the caller's) take effect in every broker. The broker-process settings that
    say where the cluster lives are kept as given, None when unset, for the caller to apply or
    refuse: `listeners` (the first broker's), `log_dirs`, `zookeeper_connect`,
    `zookeeper_session_timeout_ms`, `event_log`, `event_log_enable`. `ignored` names the
    settings accepted with no effect: Kafka's ignored ones and `PROCESS_ONLY`.
    """

    broker: BrokerConfig = field(default_factory=BrokerConfig)
    socket_server: SocketServerConfig = SOCKET_DEFAULTS
    listeners: EndPoint | None = None
    listener_endpoints: tuple[EndPoint, ...] | None = None  # every listener given
    security_properties: SecurityProperties = field(default_factory=SecurityProperties)
    log_dirs: Path | None = None
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int | None = None
    event_log: Path | None = None
    event_log_enable: bool | None = None
    ignored: tuple[str, ...] = field(default=(), compare=False)
    given: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # as KafkaConfig's

    def __post_init__(self) -> None:
        if self.listener_endpoints:
            object.__setattr__(self, "listeners", primary(self.listener_endpoints))

        def value_of(path: tuple[str, ...]) -> Any:
            if path[0] in SOCKET_LIMITS:
                return getattr(self.socket_server, path[0])
            found = nested_value(self, path)
            return MISSING if found is None else found  # unset where the cluster lives

        described = describe_properties(
            value_of, lambda path: field_default(KafkaConfig, path), dict(self.given), self.broker
        )
        object.__setattr__(self, "broker", dataclasses.replace(self.broker, properties=described))

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        *,
        base: BrokerConfig | None = None,
        source: str = "<properties>",
    ) -> SharedBrokerConfig:
        """A properties file (as `KafkaConfig.from_file` reads it), then `overrides` over it,
        as `kafka-server-start.sh FILE --override name=value` layers them: an override
        replaces the file's value; one name overridden twice is refused. `base` is the
        `BrokerConfig` the properties are set on (default: the defaults). Errors name the file
        and line, or `--override` (or `source` without a file) for an override."""
        given: list[Entry] = []
        file_source = source
        if path is not None:
            file_source = os.fspath(path)
            given = entries(read_text(path), file_source)
        pairs = overrides.items() if isinstance(overrides, Mapping) else overrides
        where = "--override" if path is not None else source
        overridden: set[str] = set()
        for key, value in pairs:
            if key in overridden:
                raise ConfigError(where, f"{key!r} is overridden twice", setting=key)
            overridden.add(key)
            given = [entry for entry in given if entry.key != key]
            given.append(Entry(key, value, None, where))
        return cls(**Reader(file_source, shared=True, base=base).read_shared(given))

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        *,
        base: BrokerConfig | None = None,
        source: str = "<properties>",
    ) -> SharedBrokerConfig:
        """The shared configuration of these properties (name -> value), set on `base`."""
        return cls.read(None, properties, base=base, source=source)


def _comment(text: str) -> str:
    import javaproperties

    return javaproperties.to_comment("\n".join(f" {line}" for line in text.splitlines()))
