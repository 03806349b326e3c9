"""`kafkactor cluster`: a local multi-process cluster kept in one directory, started and stopped
as Kafka's `bin/zookeeper-server-start.sh`, `bin/kafka-server-start.sh` and
`bin/kafka-server-stop.sh` do, plus the faults a checker needs (kill, pause).

Each broker is a detached process (`kafkactor broker --config D/broker-<id>/server.properties`
unless the caller names another command); the directory's own ZooKeeper is a detached
`LocalZooKeeper`, unless `up` is given another one. The launcher keeps what it started in
`D/cluster.json` (`cluster_files`), so any later command, in any process, finds the cluster
again; before it signals a recorded pid it checks that the pid still runs that broker's
properties file. Nothing here prints: every command returns what it did.

This module starts things (`up`, `restart`); it re-exports the rest of the commands, so that
`launcher` is the one face of them: `status` and `format_status` (`cluster_status`), `kill`,
`stop`, `pause`, `resume` and `down` (`cluster_signals`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kafkactor.actors.controller import zk_data
from kafkactor.server import processes
from kafkactor.server.cluster_files import (
    CHROOT,
    HOST,
    BrokerRecord,
    ClusterError,
    ClusterLayout,
    ClusterState,
    broker_properties,
    write_broker_properties,
)
from kafkactor.server.cluster_signals import ProcessAction, down, kill, pause, resume, stop
from kafkactor.server.cluster_status import (
    ClusterStatus,
    broker_state,
    format_status,
    own_zookeeper,
    status,
)
from kafkactor.server.metadata_probe import cluster_view
from kafkactor.server.zookeeper import LocalZooKeeper, LocalZooKeeperError, quiet_kazoo_client

__all__ = [
    "DEFAULT_BROKER_COMMAND",
    "BrokerServing",
    "ClusterError",
    "ClusterStatus",
    "ClusterUp",
    "ProcessAction",
    "down",
    "format_status",
    "kill",
    "pause",
    "restart",
    "resume",
    "status",
    "stop",
    "up",
]

# `kafkactor broker --config`, with this Python; the properties file's path is appended.
DEFAULT_BROKER_COMMAND: tuple[str, ...] = (sys.executable, "-m", "kafkactor", "broker", "--config")
START_TIMEOUT_S = 60.0
FAILED_START_GRACE_S = 5.0
ZK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class BrokerServing:
    """A broker that serves: registered in ZooKeeper and accepting connections."""

    broker_id: int
    pid: int
    port: int
    host: str = HOST

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"broker {self.broker_id} pid {self.pid} serving on {self.endpoint}"


@dataclass(frozen=True)
class ClusterUp:
    """What `up` did: its ZooKeeper (started now or already running) and its brokers."""

    root: Path
    zookeeper_connect: str
    zookeeper_pid: int | None  # None: a ZooKeeper the directory does not own
    zookeeper_started: bool
    brokers: tuple[BrokerServing, ...]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.endpoint for broker in self.brokers)

    def zookeeper_line(self) -> str:
        if self.zookeeper_pid is None:
            return f"zookeeper {self.zookeeper_connect} (not the directory's own)"
        how = "started" if self.zookeeper_started else "already running"
        return f"zookeeper pid {self.zookeeper_pid} {self.zookeeper_connect} ({how})"


# -- up and restart --------------------------------------------------------------------------


def up(
    root: str | Path,
    brokers: int = 3,
    base_port: int | None = None,
    *,
    zookeeper: str | None = None,
    settings: Mapping[str, str] | None = None,
    per_broker: Mapping[int, Mapping[str, str]] | None = None,
    broker_command: Sequence[str] = DEFAULT_BROKER_COMMAND,
    session_timeout_ms: int = 6000,
    zookeeper_tick_ms: int = 2000,
    timeout_s: float = START_TIMEOUT_S,
) -> ClusterUp:
    """Start the cluster kept in `root` and return once every broker serves.

    Creates the directory's layout, starts its ZooKeeper detached (unless one from this
    directory is running, or `zookeeper` names another: `host:port[/chroot]`), writes every
    broker's `server.properties` (`settings` laid over the defaults, then `per_broker[id]`:
    a broker's own, such as a second listener on a port of its own), starts each broker
    detached as `broker_command + [properties file]` and waits, at most `timeout_s`, until each
    is registered under `/brokers/ids` and accepts connections on its port.

    Ports: broker i listens on `base_port + i - 1`, or else on its port from the last `up` of
    this directory, or else on a free one. A directory whose brokers are running (any of them)
    is refused: `restart` starts one broker, `down` stops them. When a broker exits or does
    not serve in time, every process this call started is stopped again and the error names
    the broker and ends with its output.
    """
    if brokers < 1:
        raise ClusterError(f"a cluster needs at least one broker, not {brokers}")
    layout = ClusterLayout.of(root)
    previous = ClusterState.read(layout) if layout.state_path.exists() else None
    if previous is not None:
        _refuse_running(layout, previous, brokers)
    fixed = _fixed_ports(brokers, base_port, previous)
    layout.root.mkdir(parents=True, exist_ok=True)
    connect, zk_pid, zk_started = _zookeeper_up(
        layout, zookeeper, zookeeper_tick_ms, avoid=fixed.values()
    )
    try:
        ports = _free_ports(brokers, fixed, avoid=_ports_of(connect))
        _ensure_chroot(connect)
        state = ClusterState(
            zookeeper_connect=connect,
            zookeeper_external=zk_pid is None,
            broker_command=tuple(broker_command),
        )
        for broker_id, port in ports.items():
            layout.data_dir(broker_id).mkdir(parents=True, exist_ok=True)
            layout.event_log(broker_id).touch()
            properties = broker_properties(
                broker_id,
                port,
                layout.data_dir(broker_id),
                connect,
                layout.event_log(broker_id),
                extra={**(settings or {}), **(per_broker or {}).get(broker_id, {})},
                brokers=brokers,
                session_timeout_ms=session_timeout_ms,
            )
            write_broker_properties(layout.properties(broker_id), properties)
            state.brokers[broker_id] = BrokerRecord(broker_id, port)
        state.write(layout)
        serving = _start_brokers(layout, state, sorted(ports), timeout_s)
    except BaseException:
        if zk_started:
            own_zookeeper(layout).stop()
        raise
    return ClusterUp(layout.root, connect, zk_pid, zk_started, tuple(serving))


def restart(
    root: str | Path, broker_id: int, *, timeout_s: float = START_TIMEOUT_S
) -> BrokerServing:
    """Start a stopped or dead broker again from its properties file, with the command of the
    last `up`; returns once it serves (as `up` waits)."""
    layout = ClusterLayout.of(root)
    state = ClusterState.read(layout)
    record = state.record(layout, broker_id)
    current = broker_state(layout, record)
    if current in ("running", "paused"):
        raise ClusterError(
            f"broker {broker_id} is {current} (pid {record.pid}): stop or kill it first"
        )
    if not state.zookeeper_external and own_zookeeper(layout).pid is None:
        raise ClusterError(
            f"the ZooKeeper of {layout.root} is not running (`kafkactor cluster up` starts it)"
        )
    return _start_brokers(layout, state, [broker_id], timeout_s)[0]


def _refuse_running(layout: ClusterLayout, state: ClusterState, brokers: int) -> None:
    running = [
        f"broker {record.broker_id} pid {record.pid}"
        for record in state.brokers.values()
        if broker_state(layout, record) in ("running", "paused")
    ]
    if running:
        raise ClusterError(
            f"the cluster in {layout.root} is already running ({', '.join(running)}):"
            " `kafkactor cluster status` shows it, `down` stops it"
        )
    if len(state.brokers) != brokers:
        raise ClusterError(
            f"{layout.root} holds a cluster of {len(state.brokers)} brokers, not {brokers}"
        )


def _fixed_ports(
    brokers: int, base_port: int | None, previous: ClusterState | None
) -> dict[int, int]:
    """The brokers' ports known before anything starts: from `base_port`, or the last `up`."""
    if base_port is not None:
        if not 1 <= base_port <= 65536 - brokers:
            raise ClusterError(f"ports {base_port}..{base_port + brokers - 1} are not all ports")
        return {i: base_port + i - 1 for i in range(1, brokers + 1)}
    if previous is None:
        return {}
    return {i: previous.brokers[i].port for i in range(1, brokers + 1) if i in previous.brokers}


def _free_ports(brokers: int, fixed: Mapping[int, int], avoid: Iterable[int]) -> dict[int, int]:
    """`fixed`, and a free port for each other broker (none of them one of `avoid`)."""
    ports = dict(fixed)
    taken = {*fixed.values(), *avoid}
    for broker_id in range(1, brokers + 1):
        if broker_id not in ports:
            ports[broker_id] = processes.free_port(avoid=taken)
            taken.add(ports[broker_id])
    return dict(sorted(ports.items()))


def _ports_of(connect: str) -> set[int]:
    """The ports of a connect string's hosts (`host:port,...[/chroot]`)."""
    hosts = connect.partition("/")[0].split(",")
    return {int(port) for _, _, port in (h.rpartition(":") for h in hosts) if port.isdigit()}


def _zookeeper_up(
    layout: ClusterLayout, external: str | None, tick_ms: int, avoid: Iterable[int]
) -> tuple[str, int | None, bool]:
    """(connect string with the chroot, the own server's pid or None, whether started now)."""
    if external is not None:
        hosts, slash, chroot = external.partition("/")
        connect = f"{hosts}/{chroot.strip('/')}" if slash and chroot.strip("/") else hosts + CHROOT
        return connect, None, False
    running = own_zookeeper(layout)
    if running.pid is not None:
        return running.hosts + CHROOT, running.pid, False
    server = LocalZooKeeper(layout.zookeeper_dir, tick_time_ms=tick_ms, avoid_ports=list(avoid))
    try:
        server.start(detach=True)
    except LocalZooKeeperError as error:
        raise ClusterError(str(error)) from None
    return server.hosts + CHROOT, server.pid, True


@contextlib.contextmanager
def _zookeeper_client(connect: str, timeout_s: float = ZK_TIMEOUT_S) -> Iterator[KazooClient]:
    client = quiet_kazoo_client(connect, session_timeout_s=10.0)
    try:
        try:
            client.start(timeout=timeout_s)
        except KazooTimeoutError:
            raise ClusterError(f"ZooKeeper {connect} does not answer") from None
        yield client
    except KazooException as error:
        raise ClusterError(f"ZooKeeper {connect}: {error!r}") from None
    finally:
        client.stop()
        client.close()


def _ensure_chroot(connect: str) -> None:
    hosts, _, chroot = connect.partition("/")
    with _zookeeper_client(hosts) as client:
        client.ensure_path("/" + chroot)


def _start_brokers(
    layout: ClusterLayout, state: ClusterState, ids: Sequence[int], timeout_s: float
) -> list[BrokerServing]:
    """Start `ids` detached and wait until each serves; on failure stop those still running."""
    with _zookeeper_client(state.zookeeper_connect) as client:
        stale = {}  # a registration left by a dead broker's session that has not expired yet
        for broker_id in ids:
            stat = client.exists(zk_data.broker_path(broker_id))
            stale[broker_id] = None if stat is None else stat.czxid
        started: list[BrokerRecord] = []
        try:
            for broker_id in ids:
                record = state.brokers[broker_id]
                command = state.command_for(layout, broker_id)
                try:
                    pid = processes.spawn(command, layout.stdout_log(broker_id), detached=True)
                except OSError as error:
                    raise ClusterError(
                        f"broker {broker_id}: cannot run {command[0]}: {error.strerror or error}"
                    ) from None
                record.pid, record.stopped = pid, False
                started.append(record)
            state.write(layout)
            _wait_serving(client, layout, state, stale, time.monotonic() + timeout_s)
        except BaseException:
            for record in started:  # the one that failed is dead: it stays "dead"
                marker = str(layout.properties(record.broker_id))
                assert record.pid is not None
                if processes.terminate(record.pid, marker, FAILED_START_GRACE_S) != "gone":
                    record.stopped = True
            state.write(layout)
            raise
    return [
        BrokerServing(broker_id, state.brokers[broker_id].pid or 0, state.brokers[broker_id].port)
        for broker_id in ids
    ]


def _wait_serving(
    client: KazooClient,
    layout: ClusterLayout,
    state: ClusterState,
    stale: Mapping[int, int | None],
    deadline: float,
) -> None:
    """Until each broker of `stale` serves: its registration is not the stale one it had, it
    accepts connections, and its metadata names every registered broker and a controller
    among them (`metadata_probe`: before the controller's first UpdateMetadata, a broker tells
    clients of no broker and no controller)."""
    pending = set(stale)
    while True:
        try:
            registered_now = {int(b) for b in client.get_children(zk_data.BROKER_IDS)}
        except NoNodeError:  # before the first broker registers
            registered_now = set()
        for broker_id in sorted(pending):
            record = state.brokers[broker_id]
            assert record.pid is not None
            output = layout.stdout_log(broker_id)
            if processes.process_state(record.pid, str(layout.properties(broker_id))) == "dead":
                code = processes.exit_status(record.pid)
                how = "" if code is None else f" with code {code}"
                raise ClusterError(
                    f"broker {broker_id} (pid {record.pid}) exited{how} during start-up;"
                    f" the end of {output}:\n{processes.log_tail(output)}"
                )
            stat = client.exists(zk_data.broker_path(broker_id))
            registered = stat is not None and stat.czxid != stale[broker_id]
            listening = registered and processes.accepts(HOST, record.port, 0.2)
            view = cluster_view(HOST, record.port, 0.5) if listening else None
            informed = view is not None and view.knows(registered_now)
            if informed:
                pending.discard(broker_id)
            elif time.monotonic() >= deadline:
                raise ClusterError(
                    f"broker {broker_id} (pid {record.pid}) did not serve in time"
                    f" (registered in ZooKeeper: {'yes' if registered else 'no'}; accepting"
                    f" on {HOST}:{record.port}: {'yes' if listening else 'no'}; its metadata:"
                    f" {view if view is not None else 'none'}, registered:"
                    f" {sorted(registered_now)}); the end of {output}:\n"
                    f"{processes.log_tail(output)}"
                )
        if not pending:
            return
        time.sleep(processes.POLL_S * 2)
