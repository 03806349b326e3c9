"""The `kafkactor` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kafkactor import __version__


def _cmd_version(_args: argparse.Namespace) -> int:
    print(f"kafkactor {__version__}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kafkactor.demo import run_demo

    print(
        f"kafkactor demo: 3 brokers in this process, a topic with RF 3 and min ISR 2, an "
        f"acks=all and an acks=1 producer, a long-poll consumer; broker 3 crashes at "
        f"{args.seconds / 3:.0f}s and comes back at {2 * args.seconds / 3:.0f}s",
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
            f"errors: {errors}"
        )
    print(f"  consumed {result.consumed} records; acknowledged but missing: {result.missing_acked}")
    interesting = [
        "partition.isr_shrink",
        "partition.isr_expand",
        "partition.truncate",
        "purgatory.expire",
        "broker.crash",
        "broker.start",
    ]
    print(
        f"  event log {result.events_path}: {sum(result.events.values())} events; "
        + ", ".join(f"{name} {result.events[name]}" for name in interesting)
    )
    return 1 if result.missing_acked else 0


def _cmd_timer_demo(args: argparse.Namespace) -> int:
    from kafkactor.timer.demo import TimerDemoStats, run_timer_demo
    from kafkactor.timer.system_timer import Timer

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkactor",
        description="Kafka's broker internals rebuilt as a Python actor system.",
    )
    parser.add_argument("--version", action="version", version=f"kafkactor {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    version = commands.add_parser("version", help="print the version")
    version.set_defaults(func=_cmd_version)

    demo = commands.add_parser(
        "demo", help="run the demo topology: 3 brokers, acks=all and acks=1, a follower crash"
    )
    demo.add_argument("--seconds", type=float, default=12.0, help="how long to run")
    demo.add_argument(
        "--events", default="kafkactor-demo-events.jsonl", help="where to write the event log"
    )
    demo.add_argument("--batch", type=int, default=10, help="records per produce request")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
