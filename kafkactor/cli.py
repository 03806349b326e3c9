"""The `kafkactor` command."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # the serve module loads the broker: imported where a command runs
    from kafkactor.serve import ServeOptions

# Start-up (docs/processes.md "Start-up"): building the parser imports no command's work;
# each command imports what it runs when it runs, so `kafkactor serve` loads the broker and
# nothing else (tests/test_startup_imports.py keeps it so).


def _cmd_version(_args: argparse.Namespace) -> int:
    from kafkactor import __version__
    from kafkactor.build_info import describe

    print(f"kafkactor {__version__} ({describe()}, Python {sys.version.split()[0]})")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kafkactor.demo import run_demo

    print(
        f"kafkactor demo: 3 brokers in this process on an embedded ZooKeeper, a topic with RF 3 "
        f"and min ISR 2, an acks=all and an acks=1 producer, a group of two consumers; a partition "
        f"leader crashes at {args.seconds / 3:.0f}s and comes back at "
        f"{2 * args.seconds / 3:.0f}s; then an exactly-once stage in transactions",
        flush=True,
    )
    result = run_demo(seconds=args.seconds, events_path=Path(args.events), batch=args.batch)
    print()
    for stats in result.producers:
        name = "acks=all" if stats.acks == -1 else f"acks={stats.acks}"
        errors = ", ".join(f"{code} x{n}" for code, n in stats.errors.most_common()) or "none"
        print(
            f"  {name:8s} records acked {stats.acked:7d}   latency p50 "
            f"{stats.percentile(0.5):6.1f} ms  p99 {stats.percentile(0.99):6.1f} ms   "
            f"errors: {errors}   acknowledged but lost: {result.missing_by_acks[stats.acks]}"
        )
    print(f"  consumed {result.consumed} records")
    if result.missing_by_acks.get(1):
        print(
            "  (acks=1 records are acknowledged by the leader alone: those it had not replicated"
            " when it crashed are gone, as in Kafka. acks=all loses none.)"
        )
    stage = result.exactly_once
    if stage is not None:
        print(
            f"  exactly-once: {stage.inputs} orders -> {stage.committed_output} priced records "
            f"read_committed in {stage.transactions} transactions: duplicated {stage.duplicated},"
            f" missing {stage.missing}; the aborted transaction's {stage.aborted_records} "
            f"records visible {stage.aborted_visible}; input offsets committed with the output"
        )
    interesting = [
        "controller.elected",
        "controller.leader_elected",
        "partition.isr_shrink",
        "partition.isr_expand",
        "partition.truncate",
        "purgatory.expire",
        "broker.crash",
    ]
    print(
        f"  event log {result.events_path}: {sum(result.events.values())} events; "
        + ", ".join(f"{name} {result.events[name]}" for name in interesting)
    )
    _print_slowest_produce(result.events_path)
    if not args.no_analyze:
        missing = _missing_analytics()
        if missing is not None:
            print(
                f"kafkactor demo: the Spark analysis was skipped: {missing} is not installed "
                f"(the analytics extra: {ANALYTICS_INSTALL})",
                file=sys.stderr,
            )
        else:
            print()
            print(
                f"  Spark analysis of the event log (`kafkactor analyze {result.events_path} "
                f"--out {args.analysis_out}`):",
                flush=True,
            )
            _run_analysis([result.events_path], Path(args.analysis_out), master=None, plots=True)
    return 1 if result.missing_acked or (stage is not None and not stage.proved) else 0


# `kafkactor analyze` (and the demo's analysis) need the analytics extra: PySpark and matplotlib.
ANALYTICS_INSTALL = "pip install 'kafkactor[analytics]'"
_ANALYTICS_MODULES = frozenset({"pyspark", "py4j", "matplotlib"})


def _missing_analytics() -> str | None:
    """The module of the analytics extra that cannot be imported, or None when the analysis can
    run (importing it is the check: a broken install is found as surely as a missing one)."""
    try:
        import kafkactor.analytics  # noqa: F401 -- imports pyspark and matplotlib
    except ModuleNotFoundError as error:
        name = (error.name or "").partition(".")[0]
        if name in _ANALYTICS_MODULES:
            return name
        raise
    return None


def _print_slowest_produce(path: Path) -> None:
    from kafkactor import trace

    with path.open("rb") as lines:
        traces = trace.build_traces(trace.iter_events(lines))
    slowest = trace.select_traces(traces, trace_id=None, request="produce", slowest=1)
    if slowest:
        print()
        print(f"  the slowest produce request (`kafkactor trace {path} --request produce`):")
        for line in trace.render_tree(slowest[0]).splitlines():
            print(f"    {line}")


def _cmd_timer_demo(args: argparse.Namespace) -> int:
    from kafkactor import tracing
    from kafkactor.timer.demo import TimerDemoStats, run_timer_demo
    from kafkactor.timer.system_timer import Timer

    tracing.configure(enabled=False)  # no event log: the numbers below are the whole output

    print(
        f"kafkactor demo: {args.rate} delayed requests/s for {args.seconds:.1f}s on a "
        f"hierarchical timing wheel; {args.early:.0%} complete early, the rest expire"
    )

    def progress(elapsed_s: float, stats: TimerDemoStats, timer: Timer) -> None:
        print(
            f"  t={elapsed_s:5.1f}s  added={stats.added:6d}  completed={stats.completed_early:6d}"
            f"  expired={stats.expired:6d}  pending={timer.size:5d}"
            f"  wheel levels={len(timer.wheel.levels())}  queued buckets={timer.queued_buckets}",
            flush=True,
        )

    stats = run_timer_demo(
        duration_s=args.seconds,
        requests_per_s=args.rate,
        max_timeout_ms=args.max_timeout_ms,
        early_fraction=args.early,
        on_progress=progress,
    )
    print()
    print(f"  requests added       {stats.added}")
    print(f"  completed early      {stats.completed_early}")
    print(f"  expired by the timer {stats.expired}")
    print(f"  peak pending         {stats.max_pending}")
    print(f"  wheel levels used    {stats.max_levels}")
    print(
        "  expiry lateness (ms) "
        f"p50={stats.lateness_percentile(0.5)} p99={stats.lateness_percentile(0.99)} "
        f"max={max(stats.lateness_ms, default=0)}"
    )
    lost = stats.added - stats.completed_early - stats.expired
    if lost:
        print(f"  ERROR: {lost} requests neither completed nor expired", file=sys.stderr)
        return 1
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _open_events(path: str) -> contextlib.AbstractContextManager[BinaryIO]:
    if path == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    return Path(path).open("rb")


def _cmd_trace(args: argparse.Namespace) -> int:
    from kafkactor import trace
    from kafkactor.trace.inputs import resolve_inputs

    def warn(message: str) -> None:
        print(f"kafkactor trace: {message}", file=sys.stderr)

    report = trace.ReadReport()
    keep = None
    if args.trace_id is not None:
        wanted = args.trace_id.strip().lower()

        def keep(trace_id: str) -> bool:
            return trace_id.lower().startswith(wanted)

    try:
        paths = ["-"] if args.events == ["-"] else resolve_inputs(args.events)
    except FileNotFoundError as error:
        warn(f"cannot read {error.filename or ' '.join(args.events)}: {error.strerror or error}")
        return 2
    try:
        with contextlib.ExitStack() as opened:
            logs = [opened.enter_context(_open_events(path)) for path in paths]
            events = itertools.chain.from_iterable(trace.iter_events(log, report) for log in logs)
            traces = trace.build_traces(events, report=report, keep=keep)
    except OSError as error:
        warn(f"cannot read {' '.join(args.events)}: {error.strerror or error}")
        return 2
    for message in report.warnings():
        warn(f"warning: {message}")
    if report.read_error is not None and report.events == 0:
        return 2  # nothing readable at all: a directory, a device that fails
    slowest = args.slowest
    if args.mermaid and slowest is None and args.trace_id is None:
        slowest = 1
    chosen = trace.select_traces(
        traces, trace_id=args.trace_id, request=args.request, slowest=slowest
    )
    if not chosen:
        name = "stdin" if args.events == ["-"] else " ".join(args.events)
        warn(
            trace.no_match_message(
                traces, source=name, trace_id=args.trace_id, request=args.request
            )
        )
        return 1
    try:
        if args.mermaid:
            print("\n\n".join(trace.render_mermaid(t) for t in chosen))
        elif slowest is not None or args.trace_id is not None:
            print("\n\n".join(trace.render_tree(t) for t in chosen))
        else:
            matching = trace.select_traces(traces, request=args.request)
            which = f"{args.request} " if args.request else ""
            print(
                f"{len(matching)} {which}trace{'' if len(matching) == 1 else 's'} in "
                f"{' '.join(args.events)}; the {min(len(matching), trace.SUMMARY_LIMIT)} slowest:"
            )
            print(trace.render_summary(matching))
        sys.stdout.flush()
    except BrokenPipeError:  # `kafkactor trace ... | head`: the reader has seen enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    def warn(message: str) -> None:
        print(f"kafkactor analyze: {message}", file=sys.stderr)

    missing = _missing_analytics()
    if missing is not None:
        warn(f"needs the analytics extra ({missing} is not installed): {ANALYTICS_INSTALL}")
        return 2

    from kafkactor.trace.inputs import resolve_inputs

    try:
        paths = resolve_inputs(args.events)
    except FileNotFoundError as error:
        warn(f"{error.filename}: {error.strerror}" if error.filename else str(error))
        return 2
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        warn(f"cannot create {out}: {error.strerror or error}")
        return 2

    _run_analysis(paths, out, master=args.master, plots=not args.no_plots)
    return 0


def _run_analysis(
    paths: Sequence[str | Path], out: Path, *, master: str | None, plots: bool
) -> None:
    """Run the Spark analysis with a progress line on stderr, then name what it wrote."""
    import time

    from kafkactor.analytics import analyze
    from kafkactor.analytics.report import summary_lines

    started = time.monotonic()
    result = analyze(paths, out, master=master, plots=plots, progress=True)
    elapsed = time.monotonic() - started
    files = f"{len(paths)} file{'' if len(paths) == 1 else 's'}"
    print(f"kafkactor analyze: {files} analysed in {elapsed:.1f} s")
    print(f"  report   {result.report}")
    print(f"  tables   {len(result.tables)} Parquet tables in {result.out_dir}")
    if result.plots:
        print(f"  plots    {len(result.plots)} PNGs in {result.plots[0].parent}")
    for line in summary_lines(result.summary):
        print(f"  {line}")


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """The `ServeOptions` of a parsed `kafkactor serve` command line (None: a flag not given)."""
    from kafkactor.serve import ServeOptions
    from kafkactor.serve_security import security_of

    return ServeOptions(
        brokers=args.brokers,
        host=args.host,
        port=args.port,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        zookeeper=args.zookeeper,
        events=Path(args.events) if args.events else None,
        auto_create_topics=False if args.no_auto_create_topics else None,
        default_replication_factor=args.default_replication_factor,
        properties=Path(args.properties) if args.properties else None,
        overrides=tuple(args.override),
        security=security_of(args),
        ca_file=Path(args.ca_file) if args.ca_file else None,
    )


def _cmd_serve(args: argparse.Namespace) -> int:
    from kafkactor.serve import plan, serve
    from kafkactor.server.config import ConfigError

    try:
        planned = plan(serve_options(args))
    except (ConfigError, ValueError) as error:  # as `kafkactor broker` refuses a bad config
        print(f"kafkactor serve: {error}", file=sys.stderr)
        return 2
    try:
        return serve(planned, sys.stdout, err=sys.stderr)
    except OSError as error:  # the port is taken, the address is not ours ...
        print(
            f"kafkactor serve: cannot listen on {planned.host}:{planned.port}: {error}",
            file=sys.stderr,
        )
        return 1


def _override(text: str) -> tuple[str, str]:
    """`--override name=value`: split at the first '=', as kafka-server-start.sh does."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, got {text!r}")
    return name.strip(), value


def _add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    server = commands.add_parser(
        "serve",
        help="serve Kafka's protocol from a cluster in this process until SIGINT / SIGTERM",
        description=(
            "Start a cluster of brokers in this process, each listening for Kafka's wire "
            "protocol (broker i on PORT + i - 1), and print one line "
            "'bootstrap.servers=HOST:PORT,...' once every broker serves. Any Kafka client "
            "can then produce and consume. SIGINT or SIGTERM shuts every broker down cleanly "
            "(docs/network.md). Broker properties (Kafka's names, docs/broker-config.md) come "
            "from PROPERTIES_FILE and --override, as kafka-server-start.sh takes them, and "
            "apply to every broker; each flag below overrides the property it names. Exit "
            "codes: 0 after a clean shutdown, 1 when a port cannot be bound, 2 usage or a "
            "property refused."
        ),
    )
    server.add_argument(
        "properties",
        nargs="?",
        metavar="PROPERTIES_FILE",
        help="a server.properties file for every broker (no broker.id or advertised.listeners)",
    )
    server.add_argument(
        "--override",
        action="append",
        default=[],
        type=_override,
        metavar="NAME=VALUE",
        help="a broker property over the file's (repeatable), e.g. num.partitions=4",
    )
    server.add_argument("--brokers", type=_positive_int, default=3, help="brokers (default 3)")
    server.add_argument(
        "--port",
        type=int,
        help="the first broker's port (default: that of 'listeners', else 9092; 0: free)",
    )
    server.add_argument(
        "--host",
        help="the address to listen on (default: that of 'listeners', else 127.0.0.1)",
    )
    server.add_argument(
        "--data-dir",
        help="keep broker i's logs in DIR/broker-i ('log.dirs'; default: a temporary directory)",
    )
    server.add_argument(
        "--zookeeper",
        help="'embedded' or a real ZooKeeper's host:port ('zookeeper.connect'; default: embedded)",
    )
    server.add_argument(
        "--events", help="write the event log (JSON lines) to this file ('kafkactor.event.log')"
    )
    server.add_argument(
        "--no-auto-create-topics",
        action="store_true",
        help="refuse unknown topics instead of creating them (auto.create.topics.enable=false)",
    )
    server.add_argument(
        "--default-replication-factor",
        type=_positive_int,
        help="replication factor of auto-created topics (default.replication.factor; "
        "default 1, as Kafka's)",
    )
    from kafkactor.serve_security import add_security_arguments

    add_security_arguments(server)
    server.set_defaults(func=_cmd_serve)


class _VersionAction(argparse.Action):
    """`--version`: argparse's version action, the version read only when asked (from the
    installed metadata, whose loading a broker's start does without)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from kafkactor import __version__

        print(f"kafkactor {__version__}", flush=True)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkactor",
        description="Kafka's broker internals rebuilt as a Python actor system.",
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    version = commands.add_parser(
        "version", help="print the version and the build: pure Python or compiled (mypyc)"
    )
    version.set_defaults(func=_cmd_version)

    demo = commands.add_parser(
        "demo", help="run the demo topology: 3 brokers, acks=all and acks=1, a leader crash"
    )
    demo.add_argument("--seconds", type=float, default=12.0, help="how long to run")
    demo.add_argument(
        "--events", default="kafkactor-demo-events.jsonl", help="where to write the event log"
    )
    demo.add_argument("--batch", type=int, default=10, help="records per produce request")
    demo.add_argument(
        "--analysis-out",
        default="kafkactor-demo-analysis",
        metavar="DIR",
        help="where the Spark analysis of the event log goes (report.md, Parquet, plots)",
    )
    demo.add_argument(
        "--no-analyze", action="store_true", help="skip the Spark analysis at the end"
    )
    demo.set_defaults(func=_cmd_demo)

    timer_demo = commands.add_parser(
        "timer-demo", help="the timing wheel alone under a purgatory-shaped load"
    )
    demo = timer_demo
    demo.add_argument("--seconds", type=float, default=3.0, help="how long to add requests")
    demo.add_argument("--rate", type=int, default=2000, help="delayed requests per second")
    demo.add_argument(
        "--max-timeout-ms", type=int, default=1500, help="request timeouts are 1..this many ms"
    )
    demo.add_argument(
        "--early", type=float, default=0.9, help="fraction of requests completed before timeout"
    )
    demo.set_defaults(func=_cmd_timer_demo)

    tracer = commands.add_parser(
        "trace",
        help="rebuild each request's causal tree from an event log",
        description=(
            "Rebuild each request's causal tree from the spans of an event log (msg.send / "
            "msg.recv, state events under the hop that caused them). Without --trace-id or "
            "--slowest, print a table of the 20 slowest traces. A broken or truncated log is "
            "read up to the damage, with a warning. Exit codes: 0 ok, 1 no trace matched, "
            "2 usage or unreadable file."
        ),
    )
    tracer.add_argument(
        "events",
        metavar="EVENTS",
        nargs="+",
        help="JSON-lines event logs: files, directories or globs, e.g. the logs of every broker "
        "process ('kc/broker-*/events.jsonl'), read as one; '-': stdin",
    )
    tracer.add_argument(
        "--trace-id",
        metavar="ID",
        help="print the tree of this trace (or of every trace whose id starts so)",
    )
    tracer.add_argument(
        "--slowest", metavar="N", type=_positive_int, help="print the trees of the N slowest traces"
    )
    tracer.add_argument(
        "--request",
        metavar="KIND",
        help="only requests of this kind: produce, fetch, metadata, ... (Kafka's request name) "
        "or the message type (ProduceRequest)",
    )
    tracer.add_argument(
        "--mermaid",
        action="store_true",
        help="print Mermaid sequence diagrams instead of trees (of the slowest trace when "
        "neither --trace-id nor --slowest is given)",
    )
    tracer.set_defaults(func=_cmd_trace)

    analyzer = commands.add_parser(
        "analyze",
        help="analyse event logs with Spark: Parquet tables, a Markdown report, PNG plots",
        description=(
            "Analyse event logs with PySpark (explicit schema, one cached parse): request "
            "latency by acks and outcome, purgatory occupancy and expiries over time, timer "
            "lateness, HW lag per follower, the broker / controller / leader / ISR timeline, "
            "mailbox delay per actor type and hops per trace. Writes <DIR>/<table>.parquet, "
            "<DIR>/report.md and <DIR>/plots/*.png (docs/analytics.md). Corrupt lines are "
            "set aside and counted. Needs the analytics extra (pip install "
            "'kafkactor[analytics]'). Exit codes: 0 ok, 2 an input does not exist or the "
            "extra is missing."
        ),
    )
    analyzer.add_argument(
        "events",
        metavar="EVENTS",
        nargs="+",
        help="event logs: files, directories (their *.jsonl, *.json, *.log) or globs",
    )
    analyzer.add_argument("--out", metavar="DIR", required=True, help="where to write the results")
    analyzer.add_argument(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default local[*])",
    )
    analyzer.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    analyzer.set_defaults(func=_cmd_analyze)

    _add_serve_command(commands)
    from kafkactor.server.cluster_cli import add_broker_command, add_cluster_command

    add_cluster_command(commands)
    add_broker_command(commands)

    from kafkactor.testing.nemesis_command import add_nemesis_command

    add_nemesis_command(commands)
    from kafkactor.admin.reassign_command import add_reassign_command
    from kafkactor.admin.topic_command import add_topics_command

    add_topics_command(commands)
    add_reassign_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
