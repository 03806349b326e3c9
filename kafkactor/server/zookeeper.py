"""`LocalZooKeeper`: one standalone ZooKeeper 3.8 server from Debian's `zookeeper` package, run
as a child process, as Kafka's `bin/zookeeper-server-start.sh` runs one for a local cluster.

Everything of one server lives in its directory:

    zoo.cfg             the server's config (written at each start)
    log4j.properties    its logging: INFO to the console, which is the log file below
    data/               dataDir: snapshots and transaction logs
    zookeeper.log       the server's output, appended at each start after a marker line
    zookeeper.pid       the running server's pid (removed when it is stopped)

A server may be *detached*: started in a session of its own, it outlives the command that
started it, and another process stops it later through `LocalZooKeeper.attach(dir).stop()`,
which signals the pid from the pid file only while that pid still runs this directory's
zoo.cfg.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from kazoo.client import KazooClient

from kafkactor.server import processes
from kafkactor.server.processes import ProcessState

__all__ = [
    "DEBIAN_JAVA_LIBS",
    "DEBIAN_ZOOKEEPER",
    "LocalZooKeeper",
    "LocalZooKeeperError",
    "ZooKeeperInstall",
    "quiet_kazoo_client",
]

DEBIAN_ZOOKEEPER = Path("/usr/share/zookeeper")  # the package's own files (bin/zkServer.sh)
DEBIAN_JAVA_LIBS = Path("/usr/share/java")
# zookeeper.jar's manifest names every other jar it needs; the log4j binding gives a log.
SERVER_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
HOST = "127.0.0.1"
LOG4J = """\
log4j.rootLogger=${zookeeper.root.logger}
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Threshold=INFO
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
"""
PORT_TAKEN = "Address already in use"

# Our own clients' connection chatter (refused connections while a server starts) goes nowhere:
# the library prints nothing.
_KAZOO_LOG = logging.getLogger("kafkactor.server.kazoo")
_KAZOO_LOG.addHandler(logging.NullHandler())
_KAZOO_LOG.propagate = False


def quiet_kazoo_client(hosts: str, *, session_timeout_s: float = 10.0) -> KazooClient:
    """A kazoo client (not started) whose log goes nowhere."""
    return KazooClient(hosts=hosts, timeout=session_timeout_s, logger=_KAZOO_LOG)


class LocalZooKeeperError(RuntimeError):
    """The local ZooKeeper cannot be installed, started or found."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    """Whether Debian's ZooKeeper can run here: true when it can; `reason` says why not."""

    ok: bool
    reason: str
    java: str | None = None
    jars: tuple[Path, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.ok


def _find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def _config_value(config: Path, key: str) -> str | None:
    try:
        lines = config.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        name, equals, value = line.partition("=")
        if equals and name.strip() == key:
            return value.strip()
    return None


class LocalZooKeeper:
    """A standalone ZooKeeper 3.8 server (Kafka's `zookeeper-server-start.sh` with a
    `zookeeper.properties`): `ZooKeeperServerMain` from Debian's package, listening on the
    loopback interface only, with its config, data, log and pid file in `root` (see the module
    doc).

    `port`: None picks a free one at `start` (and another one if the server then finds it
    taken). `tick_time_ms` is ZooKeeper's tickTime; sessions may last from
    `min_session_timeout_ms` (default 2 ticks) to `max_session_timeout_ms` (default 20 ticks).
    `force_sync=False` skips the fsync of every write: for throwaway data only. A free port is
    never one of `avoid_ports` (ports the caller has promised to others).
    """

    CONFIG = "zoo.cfg"
    PID_FILE = "zookeeper.pid"
    LOG = "zookeeper.log"

    def __init__(
        self,
        root: str | Path,
        *,
        port: int | None = None,
        tick_time_ms: int = 2000,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        force_sync: bool = True,
        four_letter_words: Sequence[str] = ("ruok", "srvr", "stat", "mntr", "conf"),
        heap_mb: int = 256,
        avoid_ports: Collection[int] = (),
    ) -> None:
        self.root = Path(root).resolve()
        self._port = port
        self._port_given = port is not None
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms or 20 * tick_time_ms
        self.force_sync = force_sync
        self.four_letter_words = tuple(four_letter_words)
        self.heap_mb = heap_mb
        self.avoid_ports = frozenset(avoid_ports)
        self._pid: int | None = None

    # -- where things are -----------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.root / self.CONFIG

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / self.LOG

    @property
    def pid_path(self) -> Path:
        return self.root / self.PID_FILE

    @property
    def port(self) -> int:
        """The client port (known once started, given, or read by `attach`)."""
        if self._port is None:
            raise LocalZooKeeperError(f"ZooKeeper in {self.root}: no port yet (not started)")
        return self._port

    @property
    def hosts(self) -> str:
        """Its connect string, `127.0.0.1:<port>`."""
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid of this directory's running server (started here, or from the pid file)."""
        pid = self._pid if self._pid is not None else self._pid_from_file()
        if processes.process_state(pid, str(self.config_path)) == "dead":
            return None
        return pid

    def _pid_from_file(self) -> int | None:
        try:
            return int(self.pid_path.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            return None

    # -- what it is doing -------------------------------------------------------------------

    def state(self) -> ProcessState:
        """The server's state: "running", "paused" (SIGSTOPped) or "dead" (never started,
        stopped or crashed)."""
        pid = self._pid if self._pid is not None else self._pid_from_file()
        return processes.process_state(pid, str(self.config_path))

    def four_letter_word(self, word: str, timeout_s: float = 1.0) -> str | None:
        """The server's answer to a four-letter word ("ruok", "srvr", ...; those of
        `four_letter_words` are allowed), or None when nothing answers on its port."""
        if self._port is None:
            return None
        try:
            with socket.create_connection((HOST, self._port), timeout=timeout_s) as connection:
                connection.sendall(word.encode("ascii"))
                chunks = []
                while chunk := connection.recv(4096):
                    chunks.append(chunk)
        except OSError:
            return None
        return b"".join(chunks).decode("utf-8", errors="replace")

    def answers(self, timeout_s: float = 2.0) -> bool:
        """Whether a client can open a session and read `/` within `timeout_s`."""
        if self.four_letter_word("ruok", timeout_s) is None:  # quick, and quiet in its log
            return False
        client = quiet_kazoo_client(self.hosts, session_timeout_s=max(timeout_s, 2.0))
        try:
            client.start(timeout=timeout_s)
            client.get_children("/")
            return True
        except Exception:
            return False
        finally:
            client.stop()
            client.close()

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's log since its last start."""
        return processes.log_tail(self.log_path, lines)

    # -- availability -----------------------------------------------------------------------

    @staticmethod
    def available(
        *, package_dir: Path = DEBIAN_ZOOKEEPER, java_libs: Path = DEBIAN_JAVA_LIBS
    ) -> ZooKeeperInstall:
        """Whether Debian's `zookeeper` package and a java are installed (truthy), or why not."""
        if not package_dir.is_dir():
            return ZooKeeperInstall(
                False, f"{package_dir} missing (install Debian's zookeeper package)"
            )
        jars = tuple(java_libs / jar for jar in SERVER_JARS if (java_libs / jar).is_file())
        if not jars or jars[0].name != SERVER_JARS[0]:
            return ZooKeeperInstall(
                False, f"{java_libs / SERVER_JARS[0]} missing (Debian's zookeeper package)"
            )
        java = _find_java()
        if java is None:
            return ZooKeeperInstall(False, "no java on PATH (nor in $JAVA_HOME/bin)")
        return ZooKeeperInstall(True, f"ZooKeeper from {package_dir}, {java}", java, jars)

    # -- start and stop ---------------------------------------------------------------------

    @classmethod
    def attach(cls, root: str | Path) -> LocalZooKeeper:
        """The server an earlier `start` set up in `root` (its port and settings from its
        zoo.cfg), running or not: to ask about it, stop it, or start it again."""
        config = Path(root).resolve() / cls.CONFIG
        port = _config_value(config, "clientPort")
        if port is None:
            raise LocalZooKeeperError(f"no ZooKeeper in {Path(root)}: {config} missing")
        tick = int(_config_value(config, "tickTime") or 2000)
        words = _config_value(config, "4lw.commands.whitelist") or "ruok"
        return cls(
            root,
            port=int(port),
            tick_time_ms=tick,
            min_session_timeout_ms=int(_config_value(config, "minSessionTimeout") or 2 * tick),
            max_session_timeout_ms=int(_config_value(config, "maxSessionTimeout") or 20 * tick),
            force_sync=_config_value(config, "forceSync") != "no",
            four_letter_words=[w.strip() for w in words.split(",") if w.strip()],
        )

    def _write_config(self, port: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={port}",
            f"clientPortAddress={HOST}",
            "admin.enableServer=false",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            f"4lw.commands.whitelist={','.join(self.four_letter_words)}",
            f"forceSync={'yes' if self.force_sync else 'no'}",
            "",
        ]
        self.config_path.write_text("\n".join(lines), encoding="utf-8")
        (self.root / "log4j.properties").write_text(LOG4J, encoding="utf-8")

    def _command(self, install: ZooKeeperInstall) -> list[str]:
        assert install.java is not None
        classpath = ":".join([str(self.root), *map(str, install.jars)])
        return [
            install.java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # a quick start matters more here than peak speed
            "-Dzookeeper.root.logger=INFO,CONSOLE",
            "-cp",
            classpath,
            SERVER_MAIN,
            str(self.config_path),
        ]

    def start(self, *, detach: bool = False, timeout_s: float = 30.0) -> Self:
        """Start the server and return once a client can read `/`; on failure (it exits, or
        does not answer within `timeout_s`) stop it and raise with the log's tail.

        `detach`: in a session of its own, so it outlives this process (stop it later with
        `LocalZooKeeper.attach(root).stop()`)."""
        install = self.available()
        if not install:
            raise LocalZooKeeperError(f"cannot run ZooKeeper: {install.reason}")
        running = self.pid
        if running is not None:
            raise LocalZooKeeperError(
                f"ZooKeeper in {self.root} is already running (pid {running})"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        attempts = 1 if self._port_given else 3  # a chosen free port may be taken meanwhile
        for attempt in range(attempts):
            port = (
                self._port
                if self._port_given and self._port
                else processes.free_port(self.avoid_ports)
            )
            self._port = port
            self._write_config(port)
            self._pid = processes.spawn(self._command(install), self.log_path, detached=detach)
            self.pid_path.write_text(f"{self._pid}\n", encoding="ascii")
            problem = self._wait_until_answering(timeout_s)
            if problem is None:
                return self
            tail = self.log_tail()
            self.stop()
            if PORT_TAKEN not in tail or attempt == attempts - 1:
                raise LocalZooKeeperError(
                    f"ZooKeeper in {self.root} on {HOST}:{port} {problem}; "
                    f"the end of {self.log_path}:\n{tail}"
                )
        raise AssertionError("unreachable")

    def _wait_until_answering(self, timeout_s: float) -> str | None:
        """None once the server answers; else what went wrong."""
        assert self._pid is not None
        deadline = time.monotonic() + timeout_s
        marker = str(self.config_path)
        while time.monotonic() < deadline:
            if processes.process_state(self._pid, marker) == "dead":
                code = processes.exit_status(self._pid)
                return "exited during start-up" + ("" if code is None else f" (exit code {code})")
            if self.four_letter_word("ruok", 0.2) == "imok" and self.answers(timeout_s=2.0):
                return None
            time.sleep(processes.POLL_S * 2)
        return f"did not answer within {timeout_s:g} s"

    def stop(self, *, grace_s: float = 10.0) -> Literal["exited", "killed", "gone"]:
        """SIGTERM, then SIGKILL after `grace_s`; removes the pid file. "exited" when it stopped
        on SIGTERM, "killed" when it needed SIGKILL, "gone" when it was not running (a pid file
        naming a process that is not this directory's server is left unsignalled)."""
        pid = self._pid if self._pid is not None else self._pid_from_file()
        outcome: Literal["exited", "killed", "gone"] = "gone"
        if pid is not None:
            outcome = processes.terminate(pid, str(self.config_path), grace_s)
        self._pid = None
        self.pid_path.unlink(missing_ok=True)
        return outcome

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        port = self._port if self._port is not None else "?"
        return f"LocalZooKeeper({str(self.root)!r}, port={port})"
