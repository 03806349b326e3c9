"""How a Kafka property's text becomes a value of `KafkaConfig` and back: integers in a range,
booleans, listeners (`EndPoint`), the data directory, the ZooKeeper connect string, ...

Each kind's `parse` raises ValueError("must be ...") naming what it expected; `KafkaConfig`
turns that into a `ConfigError` naming the property and its line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kafkactor.actors.runtime.runtime_config import RUNTIMES
from kafkactor.storage.config import LONG_MAX  # a Java long: Kafka's widest integer setting
from kafkactor.storage.topic_config import TOPIC_CONFIGS, TopicConfigError, format_topic_config

INT_MAX: Final = 2**31 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
PLAINTEXT: Final = "PLAINTEXT"
WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "::"})
# Kafka's own listener pattern (SocketServer's EndPoint.uriParseExp)
_LISTENER = re.compile(r"(?P<name>[^:/]*)://\[?(?P<host>[0-9a-zA-Z\-%._:]*)\]?:(?P<port>[0-9]+)")
_ZK_HOST = re.compile(r"(?P<host>\[[0-9a-fA-F:.%]+\]|[^:\[\]/]+):(?P<port>[0-9]+)")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """Kafka's `EndPoint`: one listener, `NAME://host:port` (its security protocol is the
    name's in listener.security.protocol.map)."""

    host: str
    port: int
    listener_name: str = PLAINTEXT

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


class Kind:
    """How one property's text becomes a value and back; `parse` raises ValueError("must be
    ...") naming what it expected."""

    def parse(self, text: str) -> Any:
        return text

    def format(self, value: Any) -> str:
        return str(value)


@dataclass(frozen=True, slots=True)
class Int(Kind):
    """An integer from `minimum` to `maximum` (Kafka's int and long settings)."""

    minimum: int = 1
    maximum: int = LONG_MAX

    @property
    def expected(self) -> str:
        if self.maximum == self.minimum + 1:
            return f"must be {self.minimum} or {self.maximum}"
        if self.maximum not in (INT_MAX, LONG_MAX):
            return f"must be an integer from {self.minimum} to {self.maximum}"
        return {
            1: "must be a positive integer",
            0: "must be a non-negative integer",
            -1: "must be -1 or a non-negative integer",
        }.get(self.minimum, f"must be an integer of at least {self.minimum}")

    def parse(self, text: str) -> int:
        if not _INTEGER.fullmatch(text) or not self.minimum <= int(text) <= self.maximum:
            raise ValueError(self.expected)
        return int(text)


@dataclass(frozen=True, slots=True)
class Bool(Kind):
    """`true` or `false`, in any case (Kafka's boolean settings)."""

    def parse(self, text: str) -> bool:
        if text.lower() not in ("true", "false"):
            raise ValueError("must be true or false")
        return text.lower() == "true"

    def format(self, value: Any) -> str:
        return "true" if value else "false"


@dataclass(frozen=True, slots=True)
class Ratio(Kind):
    """A number from 0 to 1 (log.cleaner.min.cleanable.ratio)."""

    def parse(self, text: str) -> float:
        if not _NUMBER.fullmatch(text) or not 0.0 <= float(text) <= 1.0:
            raise ValueError("must be a number from 0 to 1")
        return float(text)

    def format(self, value: Any) -> str:
        return repr(float(value))


@dataclass(frozen=True, slots=True)
class CleanupPolicy(Kind):
    """`delete`, `compact` or both, comma-separated (written `compact,delete`, as LogConfig)."""

    def parse(self, text: str) -> str:
        policies = [part.strip() for part in text.split(",")]
        if len(set(policies)) != len(policies) or not set(policies) <= {"compact", "delete"}:
            raise ValueError("must be delete, compact or compact,delete")
        return ",".join(policy for policy in ("compact", "delete") if policy in policies)


@dataclass(frozen=True, slots=True)
class Text(Kind):
    """A non-empty string."""

    def parse(self, text: str) -> str:
        if not text:
            raise ValueError("must not be empty")
        return text


@dataclass(frozen=True, slots=True)
class File(Kind):
    """A path (kafkactor.event.log)."""

    def parse(self, text: str) -> Path:
        if not text:
            raise ValueError("must be a path")
        return Path(text)


@dataclass(frozen=True, slots=True)
class LogDirs(Kind):
    """log.dirs: Kafka's comma-separated list of data directories, here exactly one."""

    def parse(self, text: str) -> Path:
        dirs = [part.strip() for part in text.split(",") if part.strip()]
        if not dirs:
            raise ValueError("must name a directory")
        if len(dirs) > 1:
            raise ValueError(
                f"must name one directory, not {len(dirs)}: kafkactor keeps one data directory "
                "per broker (its LogManager has no JBOD)"
            )
        return Path(dirs[0])


@dataclass(frozen=True, slots=True)
class Listeners(Kind):
    """listeners and advertised.listeners: comma-separated `NAME://host:port`, each name once
    (upper-cased, as Kafka's `ListenerName.normalised`); `listeners` ports distinct but for 0
    (Kafka's `listenerListToEndPoints`). A name's security protocol is checked later, against
    listener.security.protocol.map."""

    advertised: bool = False

    def parse(self, text: str) -> tuple[EndPoint, ...]:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts:
            raise ValueError("must name a listener, NAME://host:port")
        endpoints = tuple(self._endpoint(part) for part in parts)
        names = [endpoint.listener_name for endpoint in endpoints]
        if len(set(names)) != len(names):
            raise ValueError("must give each listener a different name (as Kafka requires)")
        ports = [endpoint.port for endpoint in endpoints if endpoint.port != 0]
        if not self.advertised and len(set(ports)) != len(ports):
            raise ValueError("must give each listener a different port (as Kafka requires)")
        return endpoints

    def _endpoint(self, text: str) -> EndPoint:
        match = _LISTENER.fullmatch(text)
        if match is None or not match["name"]:
            raise ValueError("must be NAME://host:port[,NAME://host:port...]")
        name, host, port = match["name"].upper(), match["host"], int(match["port"])
        if not host:
            raise ValueError(
                "must name a host (write 0.0.0.0 to listen on every interface: Kafka's empty "
                "host is not supported)"
            )
        if port > 65535 or (self.advertised and port == 0):
            raise ValueError(f"must have a port from {int(self.advertised)} to 65535")
        if self.advertised and host in WILDCARD_HOSTS:
            raise ValueError(f"must not name the non-routable address {host}, as in Kafka")
        return EndPoint(host, port, name)

    def format(self, value: Any) -> str:
        return ",".join(str(endpoint) for endpoint in value)


@dataclass(frozen=True, slots=True)
class ZooKeeperConnect(Kind):
    """zookeeper.connect: `host:port[,host:port...][/chroot]`, kept as written (kazoo reads it)."""

    def parse(self, text: str) -> str:
        hosts, slash, chroot = text.partition("/")
        for host in hosts.split(","):
            match = _ZK_HOST.fullmatch(host.strip())
            if match is None or not 1 <= int(match["port"]) <= 65535:
                raise ValueError("must be host:port[,host:port...][/chroot]")
        if slash and chroot:
            segments = chroot.split("/")
            if "" in segments or {".", ".."} & set(segments):
                raise ValueError("has a malformed chroot path (as ZooKeeper reads paths)")
        return text


@dataclass(frozen=True, slots=True)
class TopicValue(Kind):
    """The broker-wide default of the topic config `topic`, read and checked as that topic-level
    key is (its `ConfigDef` type and validator in `kafkactor.storage.topic_config`), as Kafka's
    `LogConfig` checks the defaults its broker copies in from `KafkaConfig`."""

    topic: str

    def parse(self, text: str) -> Any:
        key = TOPIC_CONFIGS[self.topic]
        try:
            return key.parse(text)
        except TopicConfigError as error:
            raise ValueError(f"must be a valid {self.topic} value ({error.reason})") from None

    def format(self, value: Any) -> str:
        return format_topic_config(self.topic, value)


@dataclass(frozen=True, slots=True)
class ActorRuntime(Kind):
    """actor.runtime: "dispatcher" (a broker's partitions share one thread) or "threads"."""

    def parse(self, text: str) -> str:
        if text not in RUNTIMES:
            raise ValueError(f"must be {' or '.join(RUNTIMES)}")
        return text
