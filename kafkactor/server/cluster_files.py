"""The files of a local cluster kept in one directory (`kafkactor cluster --dir D`): where each
lives, the brokers' `server.properties` (Kafka's names) and the state file `cluster.json`.

    D/cluster.json                  the launcher's record: ports, pids, ZooKeeper, the command
    D/zookeeper/                    the cluster's own ZooKeeper (`LocalZooKeeper`'s directory)
    D/broker-<id>/server.properties the broker's config, rewritten by every `up`
    D/broker-<id>/data/             log.dirs: the broker's partitions
    D/broker-<id>/events.jsonl      kafkactor.event.log: the broker's event log
    D/broker-<id>/stdout.log        the broker process's stdout and stderr, appended per start
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import javaproperties

__all__ = [
    "CHROOT",
    "HOST",
    "BrokerRecord",
    "ClusterError",
    "ClusterLayout",
    "ClusterState",
    "broker_properties",
    "write_broker_properties",
]

HOST = "127.0.0.1"
CHROOT = "/kafkactor"  # the cluster's znodes stay together under it
STATE_VERSION = 1


class ClusterError(RuntimeError):
    """A `kafkactor cluster` command cannot do what it was asked; the message says why."""


@dataclass(frozen=True)
class ClusterLayout:
    """Where the files of the cluster kept in `root` are (see the module doc)."""

    root: Path

    @classmethod
    def of(cls, root: str | Path) -> ClusterLayout:
        return cls(Path(root).resolve())

    @property
    def state_path(self) -> Path:
        return self.root / "cluster.json"

    @property
    def zookeeper_dir(self) -> Path:
        return self.root / "zookeeper"

    def broker_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def properties(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "server.properties"

    def data_dir(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "data"

    def event_log(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "events.jsonl"

    def stdout_log(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "stdout.log"


# -- server.properties -----------------------------------------------------------------------


def broker_properties(
    broker_id: int,
    port: int,
    log_dir: Path,
    zookeeper_connect: str,
    event_log: Path,
    *,
    extra: Mapping[str, str] | None = None,
    brokers: int = 3,
    session_timeout_ms: int = 6000,
) -> dict[str, str]:
    """One broker's `server.properties`, under Kafka's names: its id and PLAINTEXT listener on
    127.0.0.1, its log dir, ZooKeeper (under the chroot `/kafkactor` unless `zookeeper_connect`
    names one), the durability defaults of a cluster of `brokers` (min ISR 2 from 3 brokers
    up; replication factor min(3, brokers), for `__consumer_offsets` too) and its event log.
    `extra` is laid over all of these."""
    hosts, slash, chroot = zookeeper_connect.partition("/")
    connect = f"{hosts}/{chroot.strip('/')}" if slash and chroot.strip("/") else hosts + CHROOT
    replication = str(min(3, brokers))
    properties = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{HOST}:{port}",
        "log.dirs": str(log_dir),
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(session_timeout_ms),
        "min.insync.replicas": "2" if brokers >= 3 else "1",
        "default.replication.factor": replication,
        "offsets.topic.replication.factor": replication,
        # Kafka's 5 s between attempts: the last broker of a `down`, whose leaderships can go
        # nowhere, would spend 10 s on its three attempts
        "controlled.shutdown.retry.backoff.ms": "1000",
        "kafkactor.event.log": str(event_log),
    }
    properties.update(extra or {})
    return properties


def write_broker_properties(path: Path, properties: Mapping[str, str]) -> None:
    """Write `properties` in Java's `.properties` format (escaped by `javaproperties`),
    atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", encoding="latin-1") as out:
        javaproperties.dump(
            properties,
            out,
            comments="written by `kafkactor cluster up`, which rewrites it: edit with care",
            timestamp=False,
        )
    os.replace(temporary, path)


# -- cluster.json ----------------------------------------------------------------------------


@dataclass
class BrokerRecord:
    """What the launcher knows of one broker: its port, its last pid, and whether the launcher
    stopped it (`stop`, `down`: "stopped") rather than it dying ("dead")."""

    broker_id: int
    port: int
    pid: int | None = None
    stopped: bool = True


@dataclass
class ClusterState:
    """The contents of `cluster.json`: the brokers, the ZooKeeper connect string (with the
    chroot), whether that ZooKeeper is the directory's own, and the broker command (the
    properties file's path is its last argument)."""

    zookeeper_connect: str
    zookeeper_external: bool
    broker_command: tuple[str, ...]
    brokers: dict[int, BrokerRecord] = field(default_factory=dict)

    def to_json(self, layout: ClusterLayout) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "zookeeper": {"connect": self.zookeeper_connect, "external": self.zookeeper_external},
            "broker_command": list(self.broker_command),
            "brokers": [
                {
                    "id": record.broker_id,
                    "port": record.port,
                    "pid": record.pid,
                    "stopped": record.stopped,
                    "config": str(layout.properties(record.broker_id).relative_to(layout.root)),
                }
                for record in sorted(self.brokers.values(), key=lambda r: r.broker_id)
            ],
        }

    @classmethod
    def from_json(cls, body: Any) -> ClusterState:
        try:
            if body["version"] != STATE_VERSION:
                raise ClusterError(f"state file version {body['version']!r} is not 1")
            brokers = {
                int(entry["id"]): BrokerRecord(
                    broker_id=int(entry["id"]),
                    port=int(entry["port"]),
                    pid=None if entry["pid"] is None else int(entry["pid"]),
                    stopped=bool(entry["stopped"]),
                )
                for entry in body["brokers"]
            }
            return cls(
                zookeeper_connect=str(body["zookeeper"]["connect"]),
                zookeeper_external=bool(body["zookeeper"]["external"]),
                broker_command=tuple(str(arg) for arg in body["broker_command"]),
                brokers=brokers,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ClusterError(f"malformed state file: {error!r}") from None

    @classmethod
    def read(cls, layout: ClusterLayout) -> ClusterState:
        try:
            text = layout.state_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster in {layout.root}: {layout.state_path.name} missing"
                f" (`kafkactor cluster up --dir {layout.root}` makes one)"
            ) from None
        try:
            return cls.from_json(json.loads(text))
        except (json.JSONDecodeError, ClusterError) as error:
            raise ClusterError(f"{layout.state_path}: {error}") from None

    def write(self, layout: ClusterLayout) -> None:
        """Replace the state file atomically (a reader sees the old or the new one, whole)."""
        layout.root.mkdir(parents=True, exist_ok=True)
        temporary = layout.state_path.with_name(f".cluster.json.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self.to_json(layout), indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, layout.state_path)

    def command_for(self, layout: ClusterLayout, broker_id: int) -> Sequence[str]:
        return [*self.broker_command, str(layout.properties(broker_id))]

    def record(self, layout: ClusterLayout, broker_id: int) -> BrokerRecord:
        try:
            return self.brokers[broker_id]
        except KeyError:
            ids = ", ".join(map(str, sorted(self.brokers)))
            raise ClusterError(
                f"no broker {broker_id} in {layout.root} (its brokers: {ids})"
            ) from None
