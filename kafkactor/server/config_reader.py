"""Reading `server.properties`: each entry checked against the property table
(`config_properties`) and parsed by its kind, aliases resolved as Kafka ranks them, the
security settings made into a `BrokerSecurityConfig` (`security_properties`), and the
arguments of `KafkaConfig` / `SharedBrokerConfig` assembled; a `ConfigError` names the file,
line and setting of the first problem."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from kafkactor.actors.broker import BrokerConfig
from kafkactor.network.socket_server import SocketServerConfig
from kafkactor.server.config_kinds import WILDCARD_HOSTS, EndPoint, Kind
from kafkactor.server.config_properties import (
    ALIASES,
    IGNORED,
    REQUIRED,
    SETTINGS,
    is_sensitive,
    known_names,
    unsupported_reason,
)
from kafkactor.server.security_properties import (
    LISTENER_PREFIX,
    SecurityProperties,
    SecuritySettingError,
    build_security,
    listener_override,
)

__all__ = ["ConfigError", "Entry", "Reader", "entries", "primary", "read_text"]

SOCKET_DEFAULTS: Final = SocketServerConfig()
DEFAULT_LISTENER: Final = EndPoint("127.0.0.1", 9092)  # Kafka's port; loopback, not every address
DEFAULT_LOG_DIRS: Final = Path("/tmp/kafka-logs")  # Kafka's log.dir default
SESSION_TIMEOUT_MS: Final = 18_000  # zookeeper.session.timeout.ms (Kafka 2.5 on)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the line terminators of a .properties file
HIDDEN: Final = "[hidden]"  # what `given` keeps of a secret's text
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
SOCKET_LIMITS: Final = (
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


def primary(endpoints: tuple[EndPoint, ...], like: EndPoint | None = None) -> EndPoint:
    """The listener that stands for all (`KafkaConfig.listeners`): the one named as `like`,
    else the one named PLAINTEXT, else the first."""
    for name in (like.listener_name if like is not None else None, DEFAULT_LISTENER.listener_name):
        for endpoint in endpoints:
            if endpoint.listener_name == name:
                return endpoint
    return endpoints[0]


def read_text(path: str | os.PathLike[str]) -> str:
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


class Entry(NamedTuple):
    key: str
    value: str
    line: int | None
    source: str | None = None  # None: the reader's source (the file)


def entries(text: str, source: str) -> list[Entry]:
    """The key-value pairs of a properties file with the line each starts on."""
    import javaproperties  # loaded for a file: `kafkactor serve` without one does without

    entries = []
    line = 1
    try:
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                entries.append(Entry(element.key, element.value, line))
            line += len(_LINE_BREAK.findall(element.source))
    except javaproperties.InvalidUEscapeError as error:
        raise ConfigError(source, f"malformed escape {error.escape!r}", line=line) from None
    return entries


class Reader:
    """One reading of properties: checks each entry, then assembles the arguments of a
    KafkaConfig (`read`) or, with `shared`, of the SharedBrokerConfig of brokers that share
    the properties, set on `base` (`read_shared`)."""

    def __init__(
        self, source: str, *, shared: bool = False, base: BrokerConfig | None = None
    ) -> None:
        self.source = source
        self.shared = shared
        self.base = base if base is not None else BrokerConfig()
        self.lines: dict[str, int | None] = {}  # setting or alias -> the line it was set on
        self.sources: dict[str, str] = {}  # setting or alias -> where, when not `source`
        self.given: dict[str, str] = {}  # setting or alias -> its text, trimmed (secrets hidden)
        self.overrides: list[tuple[str, Any]] = []  # listener.name.* settings, parsed

    def error(self, reason: str, setting: str | None = None) -> ConfigError:
        line = self.lines.get(setting) if setting is not None else None
        source = self.sources.get(setting, self.source) if setting is not None else self.source
        return ConfigError(source, reason, line=line, setting=setting)

    def read(self, entries: Iterable[Entry]) -> dict[str, Any]:
        chosen, ignored = self.check(entries)
        for name in REQUIRED:
            if name not in chosen:
                raise self.error(f"missing required setting {name!r}")
        return self.assemble(chosen, tuple(ignored))

    def read_shared(self, entries: Iterable[Entry]) -> dict[str, Any]:
        chosen, ignored = self.check(entries)
        for name in PROCESS_ONLY:
            if chosen.pop(name, None) is not None:
                ignored.append(name)
        top, broker = self.split(chosen)
        limits = {(attr,): top.pop(attr) for attr in SOCKET_LIMITS if attr in top}
        socket_server = self.replace(SOCKET_DEFAULTS, (), limits) if limits else SOCKET_DEFAULTS
        return dict(
            broker=broker,
            socket_server=socket_server,
            **top,
            ignored=tuple(ignored),
            given=tuple(self.given.items()),
        )

    def check(self, entries: Iterable[Entry]) -> tuple[dict[str, Any], list[str]]:
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
                    self.given[key] = HIDDEN if is_sensitive(key) else text.strip()
            elif key.startswith(LISTENER_PREFIX):
                try:
                    name, kind = listener_override(key)
                except ValueError as error:
                    raise self.error(f"{key!r} {error}", key) from None
                self.overrides.append((name, self.parse(key, kind, text)))
                self.lines.setdefault(name, line)
                self.given[key] = HIDDEN if is_sensitive(key) else text.strip()
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
            got = "" if is_sensitive(key) else f", got {text!r}"  # never a secret
            raise self.error(f"{key!r} {error}{got}", key) from None

    def unknown(self, key: str) -> str:
        reason = unsupported_reason(key)
        if reason is not None:
            return f"{key!r} is not supported: {reason}"
        close = difflib.get_close_matches(key, known_names(), n=1, cutoff=0.8)
        return f"unknown setting {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")

    def assemble(self, chosen: Mapping[str, Any], ignored: tuple[str, ...]) -> dict[str, Any]:
        top, broker = self.split(chosen)
        top["broker"] = broker
        listeners = top.setdefault("listener_endpoints", (DEFAULT_LISTENER,))
        for listener in listeners:
            if "advertised_endpoints" not in top and listener.host in WILDCARD_HOSTS:
                raise self.error(
                    f"'listeners' binds {listener.host}, which cannot be advertised: set "
                    "'advertised.listeners' to a routable address (as Kafka requires)",
                    "listeners",
                )
        advertised = top.setdefault("advertised_endpoints", listeners)
        top["listeners"] = primary(listeners)
        top["advertised_listeners"] = primary(advertised, top["listeners"])
        try:
            top["security"] = build_security(
                top.get("security_properties", SecurityProperties()), listeners, advertised
            )
        except SecuritySettingError as error:
            raise self.error(f"{error.setting!r}: {error.reason}", error.setting) from None
        except ValueError as error:
            raise self.error(str(error)) from None
        session_ms = top.get("zookeeper_session_timeout_ms", SESSION_TIMEOUT_MS)
        top.setdefault("zookeeper_connection_timeout_ms", session_ms)  # as Kafka resolves it
        log_dirs = top.setdefault("log_dirs", DEFAULT_LOG_DIRS)
        top.setdefault("event_log", log_dirs.parent / f"events-{top['broker_id']}.jsonl")
        return dict(**top, ignored=ignored, given=tuple(self.given.items()))

    def split(self, chosen: Mapping[str, Any]) -> tuple[dict[str, Any], BrokerConfig]:
        """The settings' top-level values (attribute -> value), and `base` with the settings
        under `broker` set on it."""
        values = {SETTINGS[name].path: value for name, value in chosen.items()}
        if self.overrides:
            values[("security_properties", "listener_overrides")] = tuple(self.overrides)
        top: dict[str, Any] = {path[0]: v for path, v in values.items() if path and len(path) == 1}
        nested = {path: v for path, v in values.items() if path and path[0] == "broker"}
        broker = self.replace(self.base, ("broker",), nested) if nested else self.base
        security = {p: v for p, v in values.items() if p and p[0] == "security_properties"}
        if security:
            top["security_properties"] = self.replace(
                SecurityProperties(), ("security_properties",), security
            )
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
