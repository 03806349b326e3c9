"""`kafkactor serve`: a cluster in this process, speaking Kafka's protocol, until a signal.

Like `kafka-server-start.sh server.properties --override name=value`, it takes Kafka's broker
properties: a file, then overrides on top, read and checked as `kafkactor broker` reads its
file (`SharedBrokerConfig`), shared by every broker. Each command-line flag is an override of
a property (`--data-dir` of `log.dirs`, ...): it wins over the file, and an `--override` of
the same property alongside it is refused. docs/broker-config.md has the rules.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final, TextIO

from kafkactor import tracing
from kafkactor.serve_security import print_client_settings
from kafkactor.server.config import DEFAULT_LISTENER, ConfigError, SharedBrokerConfig
from kafkactor.testing import Cluster
from kafkactor.testing.security import ClusterSecurity

__all__ = ["ServeOptions", "ServePlan", "plan", "serve"]

DEFAULT_HOST: Final = DEFAULT_LISTENER.host
DEFAULT_PORT: Final = DEFAULT_LISTENER.port
DEFAULT_SESSION_TIMEOUT_MS: Final = 6000  # the in-process Cluster's (Kafka's: 18000)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """What `kafkactor serve` was asked for. A None flag was not given: the properties'
    value applies, else the default noted."""

    brokers: int = 3
    host: str | None = None  # listeners' host, else 127.0.0.1
    port: int | None = None  # broker i listens on port + i - 1; listeners' port, else 9092
    data_dir: Path | None = None  # log.dirs, else a temporary directory removed at exit
    zookeeper: str | None = None  # zookeeper.connect, else "embedded"
    events: Path | None = None  # kafkactor.event.log, else no event log
    auto_create_topics: bool | None = None  # auto.create.topics.enable
    default_replication_factor: int | None = None  # default.replication.factor
    properties: Path | None = None  # a server.properties file
    overrides: Sequence[tuple[str, str]] = ()  # --override name=value, in order
    # --security-protocol, --user, ... (kafkactor.serve_security); None: PLAINTEXT, no users
    security: ClusterSecurity | None = None
    ca_file: Path | None = None  # --ca-file: where the generated CA is copied


@dataclass(frozen=True, slots=True, kw_only=True)
class ServePlan:
    """The cluster `kafkactor serve` runs, resolved from its options and properties."""

    options: ServeOptions
    config: SharedBrokerConfig
    host: str
    port: int
    data_dir: Path | None
    zookeeper: str
    session_timeout_ms: int
    events: Path | None

    def cluster(self) -> Cluster:
        """The Cluster, not started."""
        return Cluster(
            self.options.brokers,
            data_dir=self.data_dir,
            properties=self.config,
            zookeeper=self.zookeeper,
            session_timeout_ms=self.session_timeout_ms,
            listen=self.host,
            port=self.port,
            security=self.options.security,
        )


# flag -> the property it overrides (--host and --port share `listeners`)
_FLAG_PROPERTIES: Final = {
    "--host": ("listeners",),
    "--port": ("listeners",),
    "--data-dir": ("log.dirs", "log.dir"),
    "--zookeeper": ("zookeeper.connect",),
    "--events": ("kafkactor.event.log",),
    "--no-auto-create-topics": ("auto.create.topics.enable",),
    "--default-replication-factor": ("default.replication.factor",),
}


def _given_flags(options: ServeOptions) -> list[str]:
    given = {
        "--host": options.host,
        "--port": options.port,
        "--data-dir": options.data_dir,
        "--zookeeper": options.zookeeper,
        "--events": options.events,
        "--no-auto-create-topics": options.auto_create_topics,
        "--default-replication-factor": options.default_replication_factor,
    }
    return [flag for flag, value in given.items() if value is not None]


def plan(options: ServeOptions) -> ServePlan:
    """Read the properties and lay the flags over them; `ConfigError` for a bad property, a
    per-broker one (`broker.id`, `advertised.listeners`), or a flag and an `--override` of
    the same property."""
    overridden = {name for name, _ in options.overrides}
    for flag in _given_flags(options):
        for name in _FLAG_PROPERTIES[flag]:
            if name in overridden:
                raise ConfigError(
                    "--override",
                    f"{name!r} is overridden and set by {flag} too: give one of them",
                    setting=name,
                )
    overrides = list(options.overrides)
    if options.auto_create_topics is not None:
        overrides.append(("auto.create.topics.enable", str(options.auto_create_topics).lower()))
    if options.default_replication_factor is not None:
        overrides.append(("default.replication.factor", str(options.default_replication_factor)))
    config = SharedBrokerConfig.read(options.properties, overrides, source="--override")
    listeners = config.listeners
    host = options.host or (listeners.host if listeners is not None else DEFAULT_HOST)
    port = options.port
    if port is None:
        port = listeners.port if listeners is not None else DEFAULT_PORT
    if port and not 0 < port <= 65536 - options.brokers:
        where = "--port" if options.port is not None else "listeners"
        raise ConfigError(
            where, f"port {port} leaves no room for {options.brokers} brokers", setting=where
        )
    events = options.events
    if events is None and config.event_log_enable is not False:
        events = config.event_log
    return ServePlan(
        options=options,
        config=config,
        host=host,
        port=port,
        data_dir=options.data_dir or config.log_dirs,
        zookeeper=options.zookeeper or config.zookeeper_connect or "embedded",
        session_timeout_ms=config.zookeeper_session_timeout_ms or DEFAULT_SESSION_TIMEOUT_MS,
        events=events,
    )


def serve(
    planned: ServePlan,
    out: TextIO,
    stop: threading.Event | None = None,
    *,
    err: TextIO | None = None,
) -> int:
    """Run the planned cluster (`plan`, which raises `ConfigError` for properties it cannot
    run with); print `bootstrap.servers=...` to `out` once every broker listens (then, with
    security, the client settings: `security.protocol=`, `ssl.ca.location=`,
    `sasl.mechanism=`); return after
    SIGINT or SIGTERM (or `stop`), once every broker has shut down cleanly (logs flushed, high
    watermarks checkpointed, the clean-shutdown marker written).

    Raises an OSError when a port cannot be bound. The properties accepted with no effect are
    named on `err`, when given, before the cluster starts."""
    if planned.config.ignored and err is not None:
        print(
            f"kafkactor serve: ignored (no meaning here): {', '.join(planned.config.ignored)}",
            file=err,
            flush=True,
        )
    if planned.events is not None:
        tracing.configure(path=planned.events)
    stopping = stop if stop is not None else threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        with planned.cluster() as cluster:
            print(f"bootstrap.servers={cluster.bootstrap_servers}", file=out, flush=True)
            print_client_settings(cluster, out, planned.options.ca_file)
            while not stopping.wait(0.5):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
