"""`kafkactor cluster ...` and `kafkactor broker --config FILE`: the parsers and handlers.

Kept out of `kafkactor.cli` (which calls `add_cluster_command` and `add_broker_command`), and
light to import: the launcher is imported only when a `cluster` command runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence

__all__ = ["add_broker_command", "add_cluster_command"]

SubParsers = argparse._SubParsersAction


def _broker_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a broker id: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a broker id: {value}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port: {value}")
    return value


def _run(name: str, body: Callable[[argparse.Namespace], Sequence[str]]) -> Callable[..., int]:
    """A handler that prints `body`'s lines and exits 0, or prints its error and exits 1."""

    def handler(args: argparse.Namespace) -> int:
        from kafkactor.server.launcher import ClusterError

        try:
            lines = body(args)
        except (ClusterError, OSError) as error:
            print(f"kafkactor cluster {name}: {error}", file=sys.stderr)
            return 1
        for line in lines:
            print(line)
        return 0

    return handler


def _up(args: argparse.Namespace) -> list[str]:
    from kafkactor.server import launcher

    command = (
        shlex.split(args.broker_command) if args.broker_command else launcher.DEFAULT_BROKER_COMMAND
    )
    cluster = launcher.up(
        args.dir,
        brokers=args.brokers,
        base_port=args.port,
        zookeeper=args.zookeeper,
        broker_command=command,
    )
    return [
        cluster.zookeeper_line(),
        *map(str, cluster.brokers),
        f"bootstrap.servers={cluster.bootstrap_servers}",
    ]


def _status(args: argparse.Namespace) -> list[str]:
    from kafkactor.server import launcher

    return launcher.format_status(launcher.status(args.dir))


def _one(action: str) -> Callable[[argparse.Namespace], list[str]]:
    def body(args: argparse.Namespace) -> list[str]:
        from kafkactor.server import launcher

        result = getattr(launcher, action)(args.dir, args.broker_id)
        return [str(result)]

    return body


def _down(args: argparse.Namespace) -> list[str]:
    from kafkactor.server import launcher

    return [str(action) for action in launcher.down(args.dir)]


_ONE_BROKER = {
    "kill": "SIGKILL the broker (a crash) and wait until it is gone",
    "stop": "SIGTERM the broker (a controlled shutdown) and wait until it exits",
    "restart": "start a stopped or dead broker again; returns once it serves",
    "pause": "SIGSTOP the broker (it hangs, holding its sockets and session)",
    "resume": "SIGCONT a paused broker",
}


def add_cluster_command(commands: SubParsers[argparse.ArgumentParser]) -> None:
    """`kafkactor cluster up|status|kill|stop|restart|pause|resume|down`."""
    cluster = commands.add_parser(
        "cluster",
        help="a local cluster of broker processes and a ZooKeeper, kept in one directory",
        description=(
            "Start, inspect, fault and stop a local cluster: a ZooKeeper 3.8 (Debian's package) "
            "and one `kafkactor broker` process per broker, each detached, with their configs, "
            "data and output in --dir (docs/processes.md). Each command prints one line per "
            "result. Exit codes: 0 done, 1 it could not be done (one error line on stderr), "
            "2 usage."
        ),
    )
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)

    def with_dir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--dir", required=True, help="the cluster's directory")
        return parser

    start = with_dir(
        actions.add_parser(
            "up",
            help="start ZooKeeper and the brokers; print bootstrap.servers once all serve",
            description=(
                "Start the directory's ZooKeeper (unless --zookeeper names one) and its brokers, "
                "each detached, and return once every broker is registered in ZooKeeper and "
                "accepts connections. The last line is 'bootstrap.servers=HOST:PORT,...'. A "
                "directory whose brokers run is refused."
            ),
        )
    )
    start.add_argument("--brokers", type=_count, default=3, help="brokers (default 3)")
    start.add_argument(
        "--port",
        type=_port,
        metavar="BASE",
        help="broker i listens on BASE + i - 1 (default: the ports of the last up, or free ones)",
    )
    start.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="use this ZooKeeper instead of starting the directory's own (chroot: /kafkactor)",
    )
    start.add_argument(
        "--broker-command",
        metavar="COMMAND",
        help="run each broker as COMMAND PROPERTIES_FILE (default: python -m kafkactor broker "
        "--config)",
    )
    start.set_defaults(func=_run("up", _up))

    show = with_dir(actions.add_parser("status", help="one line per broker: process, roles"))
    show.set_defaults(func=_run("status", _status))

    for action, help_text in _ONE_BROKER.items():
        parser = with_dir(actions.add_parser(action, help=help_text, description=help_text))
        parser.add_argument("broker_id", metavar="ID", type=_broker_id, help="the broker's id")
        parser.set_defaults(func=_run(action, _one(action)))

    stop_all = with_dir(
        actions.add_parser(
            "down",
            help="stop every broker (SIGTERM, SIGKILL after 30 s), then ZooKeeper; keep the data",
        )
    )
    stop_all.set_defaults(func=_run("down", _down))


def _cmd_broker(args: argparse.Namespace) -> int:
    try:
        from kafkactor.server import broker_process
    except ModuleNotFoundError as missing:
        if not (missing.name or "").startswith("kafkactor."):
            raise
        print("kafkactor broker: not built yet", file=sys.stderr)
        return 1
    result: int = broker_process.main(args.config)
    return result


def add_broker_command(commands: SubParsers[argparse.ArgumentParser]) -> None:
    """`kafkactor broker --config FILE`: one broker in this process (Kafka's `kafka.Kafka`)."""
    broker = commands.add_parser(
        "broker",
        help="run one broker from a Kafka-style server.properties until SIGTERM",
        description=(
            "Run one broker (Kafka's kafka-server-start.sh): its settings from a properties "
            "file with Kafka's names, its ZooKeeper from zookeeper.connect. SIGTERM or SIGINT "
            "stops it after a controlled shutdown."
        ),
    )
    broker.add_argument("--config", required=True, metavar="FILE", help="server.properties")
    broker.set_defaults(func=_cmd_broker)
