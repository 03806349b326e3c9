"""Kafka's `KafkaConfig`: one broker's settings, read from a `server.properties` file.

The property table (names, kinds, where each value goes) is `config_properties`; how a value
is parsed is `config_kinds`. This module reads a file (through javaproperties), checks every
entry, assembles the existing config objects (`BrokerConfig` and what it holds) and writes a
configuration back out (`to_properties`). docs/broker-config.md documents every property.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

import javaproperties

from kafkactor.actors.broker import BrokerConfig
from kafkactor.network.socket_server import SocketServerConfig
from kafkactor.server.config_describe import (
    MISSING,
    describe_properties,
    field_default,
    nested_value,
)
from kafkactor.server.config_kinds import WILDCARD_HOSTS, EndPoint, Kind
from kafkactor.server.config_properties import (
    ALIASES,
    IGNORED,
    REQUIRED,
    SECTIONS,
    SETTINGS,
    known_names,
    unsupported_reason,
)
from kafkactor.storage import LogConfig

__all__ = ["ConfigError", "EndPoint", "KafkaConfig", "SharedBrokerConfig"]

_SOCKET_DEFAULTS: Final = SocketServerConfig()
DEFAULT_LISTENER: Final = EndPoint("127.0.0.1", 9092)  # Kafka's port; loopback, not every address
DEFAULT_LOG_DIRS: Final = Path("/tmp/kafka-logs")  # Kafka's log.dir default
_SESSION_TIMEOUT_MS: Final = 18_000  # zookeeper.session.timeout.ms (Kafka 2.5 on)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the line terminators of a .properties file
# where each setting's value goes -> its name, for messages about an assembled config object
_NAMES_BY_PATH: Final = {s.path: s.name for s in SETTINGS.values() if s.path is not None}
# Settings that name one broker: brokers that share one set of properties cannot share these
PER_BROKER: Final = {
    "broker.id": "names one broker, and these properties are shared by every broker of the "
    "cluster (numbered 1 to N): remove it",
    "advertised.listeners": "names one broker's address, and these properties are shared by "
    "every broker of the cluster: each advertises its own listener",
}
# Settings that only a broker process acts on: brokers of one process reach each other's
# actors without the network, and stop with the process (checked, then listed in `ignored`)
PROCESS_ONLY: Final = (
    "request.timeout.ms",
    "zookeeper.connection.timeout.ms",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
)
_SOCKET_LIMITS: Final = (
    "socket_request_max_bytes",
    "queued_max_requests",
    "connections_max_idle_ms",
)


class ConfigError(ValueError):
    """A broker configuration kafkactor will not run with (Kafka's `ConfigException`).

    `str()` is one line: `<source>:<line>: <reason>`, or `<source>: <reason>` when no line is
    known (a missing setting, or properties that came from a mapping). `setting` names the
    property at fault, when there is one.
    """

    def __init__(
        self, source: str, reason: str, *, line: int | None = None, setting: str | None = None
    ) -> None:
        self.source = source
        self.reason = reason
        self.line = line
        self.setting = setting
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaConfig:
    """Kafka's `KafkaConfig`: everything one broker process is started with, read from a
    properties file with Kafka's property names (`from_file`).

    The broker's own settings: its id, its one PLAINTEXT listener and the one it advertises,
    its one data directory (`log.dirs`), its ZooKeeper ensemble and session, the timeout of
    its requests to other brokers, controlled shutdown, and where kafkactor's event log goes.
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
    log_dirs: Path = DEFAULT_LOG_DIRS
    event_log: Path  # from_properties: events-<broker id>.jsonl beside log_dirs unless set
    event_log_enable: bool = True
    zookeeper_session_timeout_ms: int = _SESSION_TIMEOUT_MS
    # from_properties: the session timeout unless set, as Kafka resolves it
    zookeeper_connection_timeout_ms: int = _SESSION_TIMEOUT_MS
    request_timeout_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    socket_request_max_bytes: int = _SOCKET_DEFAULTS.socket_request_max_bytes
    queued_max_requests: int = _SOCKET_DEFAULTS.queued_max_requests
    connections_max_idle_ms: int = _SOCKET_DEFAULTS.connections_max_idle_ms
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    ignored: tuple[str, ...] = field(default=(), compare=False)
    # the settings and other names the properties gave, as given (trimmed): DescribeConfigs'
    # STATIC_BROKER_CONFIG; equality does not compare them
    given: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
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
            _SOCKET_DEFAULTS,
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
        return _Reader(source).read(_entries(_read_text(path), source))

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], source: str = "<properties>"
    ) -> KafkaConfig:
        """The configuration of these properties (name -> value), as `from_file` reads them;
        `source` names them in a `ConfigError`."""
        return _Reader(source).read(_Entry(k, v, None) for k, v in properties.items())

    def to_properties(self) -> str:
        """This configuration as a properties file, every setting in its commented section;
        `from_file` reads it back to an equal configuration."""
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
                    setting.name == "advertised.listeners" and value == self.listeners
                ):
                    lines.append(f"#{setting.name}=")
                else:
                    lines.append(
                        javaproperties.join_key_value(setting.name, setting.kind.format(value))
                    )
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
    socket_server: SocketServerConfig = _SOCKET_DEFAULTS
    listeners: EndPoint | None = None
    log_dirs: Path | None = None
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int | None = None
    event_log: Path | None = None
    event_log_enable: bool | None = None
    ignored: tuple[str, ...] = field(default=(), compare=False)
    given: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # as KafkaConfig's

    def __post_init__(self) -> None:
        def value_of(path: tuple[str, ...]) -> Any:
            if path[0] in _SOCKET_LIMITS:
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
        entries: list[_Entry] = []
        file_source = source
        if path is not None:
            file_source = os.fspath(path)
            entries = _entries(_read_text(path), file_source)
        pairs = overrides.items() if isinstance(overrides, Mapping) else overrides
        where = "--override" if path is not None else source
        overridden: set[str] = set()
        for key, value in pairs:
            if key in overridden:
                raise ConfigError(where, f"{key!r} is overridden twice", setting=key)
            overridden.add(key)
            entries = [entry for entry in entries if entry.key != key]
            entries.append(_Entry(key, value, None, where))
        return _Reader(file_source, shared=True, base=base).read_shared(entries)

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


def _read_text(path: str | os.PathLike[str]) -> str:
    """A properties file's text (UTF-8, a BOM dropped); ConfigError when it cannot be read."""
    source = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(source, f"cannot be read: {error.strerror or error}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(source, "is not UTF-8 text", line=line) from None


class _Entry(NamedTuple):
    key: str
    value: str
    line: int | None
    source: str | None = None  # None: the reader's source (the file)


def _entries(text: str, source: str) -> list[_Entry]:
    """The key-value pairs of a properties file with the line each starts on."""
    entries = []
    line = 1
    try:
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                entries.append(_Entry(element.key, element.value, line))
            line += len(_LINE_BREAK.findall(element.source))
    except javaproperties.InvalidUEscapeError as error:
        raise ConfigError(source, f"malformed escape {error.escape!r}", line=line) from None
    return entries


def _comment(text: str) -> str:
    return javaproperties.to_comment("\n".join(f" {line}" for line in text.splitlines()))


class _Reader:
    """One reading of properties: checks each entry, then assembles the KafkaConfig (or, with
    `shared`, the SharedBrokerConfig of brokers that share the properties, set on `base`)."""

    def __init__(
        self, source: str, *, shared: bool = False, base: BrokerConfig | None = None
    ) -> None:
        self.source = source
        self.shared = shared
        self.base = base if base is not None else BrokerConfig()
        self.lines: dict[str, int | None] = {}  # setting or alias -> the line it was set on
        self.sources: dict[str, str] = {}  # setting or alias -> where, when not `source`
        self.given: dict[str, str] = {}  # setting or alias -> its text, trimmed

    def error(self, reason: str, setting: str | None = None) -> ConfigError:
        line = self.lines.get(setting) if setting is not None else None
        source = self.sources.get(setting, self.source) if setting is not None else self.source
        return ConfigError(source, reason, line=line, setting=setting)

    def read(self, entries: Iterable[_Entry]) -> KafkaConfig:
        chosen, ignored = self.check(entries)
        for name in REQUIRED:
            if name not in chosen:
                raise self.error(f"missing required setting {name!r}")
        return self.assemble(chosen, tuple(ignored))

    def read_shared(self, entries: Iterable[_Entry]) -> SharedBrokerConfig:
        chosen, ignored = self.check(entries)
        for name in PROCESS_ONLY:
            if chosen.pop(name, None) is not None:
                ignored.append(name)
        top, broker = self.split(chosen)
        limits = {(attr,): top.pop(attr) for attr in _SOCKET_LIMITS if attr in top}
        socket_server = self.replace(_SOCKET_DEFAULTS, (), limits) if limits else _SOCKET_DEFAULTS
        return SharedBrokerConfig(
            broker=broker,
            socket_server=socket_server,
            **top,
            ignored=tuple(ignored),
            given=tuple(self.given.items()),
        )

    def check(self, entries: Iterable[_Entry]) -> tuple[dict[str, Any], list[str]]:
        """Each entry parsed and checked: the settings' values (aliases resolved, as Kafka
        ranks them) and the names accepted with no effect."""
        chosen: dict[str, Any] = {}  # setting -> value
        aliases: dict[str, Any] = {}  # alias -> value
        ignored: list[str] = []
        for key, text, line, source in entries:
            if key in self.lines:
                first = self.lines[key]
                self.lines[key] = line
                raise self.error(
                    f"{key!r} is set twice (first on line {first}); kafkactor refuses a "
                    "duplicate instead of keeping the later value as Java does",
                    key,
                )
            self.lines[key] = line
            if source is not None:
                self.sources[key] = source
            if self.shared and key in PER_BROKER:
                raise self.error(f"{key!r} {PER_BROKER[key]}", key)
            if key in SETTINGS:
                value = self.parse(key, SETTINGS[key].kind, text)
                if SETTINGS[key].path is None:
                    ignored.append(key)
                else:
                    chosen[key] = value
                    self.given[key] = text.strip()
            elif key in ALIASES:
                aliases[key] = self.parse(key, ALIASES[key].kind, text)
                self.given[key] = text.strip()
            elif key in IGNORED:
                ignored.append(key)
            else:
                raise self.error(self.unknown(key), key)
        self.resolve(chosen, aliases)
        return chosen, ignored

    def resolve(self, chosen: dict[str, Any], aliases: Mapping[str, Any]) -> None:
        """Set each alias's target in `chosen` as Kafka ranks them."""
        for name, alias in ALIASES.items():  # listed in Kafka's order of precedence
            converted = alias.convert(aliases[name]) if name in aliases else None
            if converted is not None and (alias.overrides or alias.target not in chosen):
                chosen[alias.target] = converted
                self.lines[alias.target] = self.lines[name]
                self.sources.pop(alias.target, None)
                if name in self.sources:
                    self.sources[alias.target] = self.sources[name]

    def parse(self, key: str, kind: Kind, text: str) -> Any:
        try:
            return kind.parse(text.strip())  # Kafka trims every value
        except ValueError as error:
            raise self.error(f"{key!r} {error}, got {text!r}", key) from None

    def unknown(self, key: str) -> str:
        reason = unsupported_reason(key)
        if reason is not None:
            return f"{key!r} is not supported: {reason}"
        close = difflib.get_close_matches(key, known_names(), n=1, cutoff=0.8)
        return f"unknown setting {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")

    def assemble(self, chosen: Mapping[str, Any], ignored: tuple[str, ...]) -> KafkaConfig:
        top, broker = self.split(chosen)
        top["broker"] = broker
        listeners = top.setdefault("listeners", DEFAULT_LISTENER)
        if "advertised_listeners" not in top and listeners.host in WILDCARD_HOSTS:
            raise self.error(
                f"'listeners' binds {listeners.host}, which cannot be advertised: set "
                "'advertised.listeners' to a routable address (as Kafka requires)",
                "listeners",
            )
        top.setdefault("advertised_listeners", listeners)
        session_ms = top.get("zookeeper_session_timeout_ms", _SESSION_TIMEOUT_MS)
        top.setdefault("zookeeper_connection_timeout_ms", session_ms)  # as Kafka resolves it
        log_dirs = top.setdefault("log_dirs", DEFAULT_LOG_DIRS)
        top.setdefault("event_log", log_dirs.parent / f"events-{top['broker_id']}.jsonl")
        return KafkaConfig(**top, ignored=ignored, given=tuple(self.given.items()))

    def split(self, chosen: Mapping[str, Any]) -> tuple[dict[str, Any], BrokerConfig]:
        """The settings' top-level values (attribute -> value), and `base` with the settings
        under `broker` set on it."""
        values = {SETTINGS[name].path: value for name, value in chosen.items()}
        top: dict[str, Any] = {path[0]: v for path, v in values.items() if path and len(path) == 1}
        nested = {path: v for path, v in values.items() if path and len(path) > 1}
        broker = self.replace(self.base, ("broker",), nested) if nested else self.base
        return top, broker

    def replace(self, base: Any, prefix: tuple[str, ...], values: Mapping[Any, Any]) -> Any:
        """`base` with the values under `prefix` (paths from the outermost object), inner
        config objects first; a config object's own check is reported against the settings
        it names."""
        changes: dict[str, Any] = {}
        inner: dict[str, dict[Any, Any]] = {}
        for path, value in values.items():
            attr = path[len(prefix)]
            if len(path) == len(prefix) + 1:
                changes[attr] = value
            else:
                inner.setdefault(attr, {})[path] = value
        for attr, below in inner.items():
            changes[attr] = self.replace(getattr(base, attr), (*prefix, attr), below)
        try:
            return dataclasses.replace(base, **changes)
        except ValueError as error:
            raise self.rejected(str(error), base, prefix, values) from None

    def rejected(
        self, message: str, base: Any, prefix: tuple[str, ...], values: Mapping[Any, Any]
    ) -> ConfigError:
        """A config object's own ValueError, its field names replaced by the settings', blamed
        on the first setting it names that the properties set."""
        blamed: list[tuple[int, str]] = []
        reason = message
        for attr in (f.name for f in dataclasses.fields(base)):
            name = _NAMES_BY_PATH.get((*prefix, attr))
            found = re.search(rf"\b{attr}\b", message)
            if name is None or found is None:
                continue
            if (*prefix, attr) in values:
                blamed.append((found.start(), name))
            reason = re.sub(rf"\b{attr}\b", repr(name), reason)
        return self.error(reason, min(blamed)[1] if blamed else None)
