"""`kafkactor nemesis`: the seeded fault schedules of docs/nemesis.md run from the command line
(in process, on broker processes with `--processes`, or with transactional workers with
`--transactions`), one line per schedule and a summary on stdout, progress on stderr."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where the command runs: `kafkactor serve` builds this parser too
    from kafkactor.testing.verdict import ScheduleResult


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _seeds(text: str) -> list[int]:
    from kafkactor.testing.schedule import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _prefixed(say: Callable[[str], None], prefix: str, message: str) -> None:
    say(prefix + message)


def _nemesis_progress(message: str) -> None:
    print(f"kafkactor nemesis: {message}", file=sys.stderr, flush=True)


def _nemesis_runner(args: argparse.Namespace) -> tuple[Callable[..., ScheduleResult], str] | None:
    """What runs one schedule (in process, on broker processes, or with transactions) and the
    run's description; None, once said why, on a usage error."""
    from kafkactor.testing import nemesis

    if args.read_uncommitted and not args.transactions:
        _nemesis_progress("--read-uncommitted is the control of --transactions")
        return None
    if args.transactions:  # consume-transform-produce transactions, exactly-once checked
        from kafkactor.testing import txn_nemesis

        if args.unsafe or args.processes:
            _nemesis_progress(
                "--transactions runs in process, without --unsafe (its control "
                "is --read-uncommitted)"
            )
            return None
        mode = "control: the output read with read_uncommitted" if args.read_uncommitted else "safe"
        return txn_nemesis.run_txn_schedule, f"{mode}, 3 brokers, transactional workers"
    mode = "unsafe control (acks=1, min ISR 1, unclean election on)" if args.unsafe else "safe"
    if args.processes:  # broker processes on a real ZooKeeper, a librdkafka workload
        from kafkactor.testing import process_nemesis

        problem = process_nemesis.missing()
        if problem is not None:
            _nemesis_progress(f"--processes cannot run here: {problem}")
            return None
        args.no_power_loss = True  # a killed process keeps its page cache
        return (
            process_nemesis.run_process_schedule,
            f"{mode}, 3 broker processes on ZooKeeper, no power losses",
        )
    return nemesis.run_schedule, f"{mode}, 3 brokers"


def _run_schedules(
    args: argparse.Namespace,
    run_schedule: Callable[..., ScheduleResult],
    options: dict[str, object],
    line: Callable[[ScheduleResult], str],
) -> list[ScheduleResult]:
    """Every seed's schedule, one after the other or `--jobs` at a time in subprocesses,
    each result printed as a line when it comes; sorted by seed."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from kafkactor.testing.verdict import ScheduleResult

    results: list[ScheduleResult] = []

    def report(result: ScheduleResult) -> None:
        results.append(result)
        print(line(result), flush=True)

    if args.jobs == 1:
        for seed in args.seeds:
            _nemesis_progress(f"seed {seed}: running")
            step_line = functools.partial(_prefixed, _nemesis_progress, f"seed {seed}: ")
            report(run_schedule(seed, args.seconds, progress=step_line, **options))
    else:  # each schedule in a process of its own (tracing and timing are per process)
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
            running = {
                pool.submit(run_schedule, seed, args.seconds, **options): seed
                for seed in args.seeds
            }
            for done in as_completed(running):
                seed = running[done]
                _nemesis_progress(f"seed {seed}: done")
                try:
                    report(done.result())
                except Exception as error:  # the subprocess itself failed
                    failed = ScheduleResult(seed=seed, unsafe=args.unsafe, schedule="-")
                    failed.error = repr(error)
                    report(failed)
    results.sort(key=lambda r: r.seed)
    return results


def _nemesis_verdict(args: argparse.Namespace, results: list[ScheduleResult]) -> int:
    """Print the summary and the run's conclusion; the exit code."""
    from kafkactor.testing.verdict import format_summary, summarize

    print()
    if args.transactions:
        from kafkactor.testing.txn_verdict import txn_conclusion

        text, code = txn_conclusion(results, control=args.read_uncommitted)
        print(text)
        return code
    summary = summarize(results)
    print(format_summary(summary))
    if args.unsafe:
        if summary.lost:
            print(
                f"the unsafe control lost acknowledged records in {len(summary.seeds_with_loss)} "
                f"of {summary.schedules} schedules: the checker can find loss"
            )
            return 0
        print("CONTROL FAILED: the unsafe configuration lost nothing; the checker proved nothing")
        return 1
    if summary.ok:
        print("the claim held: 0 acknowledged records lost, 0 divergent, every schedule recovered")
        return 0
    print("THE CLAIM FAILED: see the lines above (--events-dir keeps the failing event logs)")
    return 1


def _cmd_nemesis(args: argparse.Namespace) -> int:
    from kafkactor.testing.txn_verdict import format_txn_line
    from kafkactor.testing.verdict import format_line

    runner = _nemesis_runner(args)
    if runner is None:
        return 2
    run_schedule, description = runner
    _nemesis_progress(
        f"{len(args.seeds)} schedules of ~{args.seconds:g}s, {description}, RF 3, "
        f"session timeout {args.session_timeout_ms} ms, {args.jobs} at a time"
    )
    options: dict[str, object] = {
        "events_dir": args.events_dir,
        "session_timeout_ms": args.session_timeout_ms,
        "power_loss": not args.no_power_loss,
    }
    if args.transactions:
        options["read_uncommitted"] = args.read_uncommitted
    else:
        options["unsafe"] = args.unsafe
    line = format_txn_line if args.transactions else format_line
    return _nemesis_verdict(args, _run_schedules(args, run_schedule, options, line))


def add_nemesis_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    nemesis = commands.add_parser(
        "nemesis",
        help="check acks=all under seeded fault schedules: no acked record lost, no divergence",
        description=(
            "Run seeded, Jepsen-style fault schedules (crashes, controlled shutdowns, fast "
            "and slow restarts, ZooKeeper session expiries, isolation, power loss of one "
            "broker) against 3 "
            "brokers with acks=all, min ISR 2, RF 3, and check that no acknowledged record is "
            "lost, no replicas diverge below the high watermark, and every partition has a "
            "leader and a full ISR soon after healing (docs/nemesis.md). With --transactions, "
            "consume-transform-produce transactions run instead and are checked for "
            "exactly-once. One line per schedule and a summary on stdout, progress on stderr. "
            "Exit codes: 0 the claim held (with --unsafe or --read-uncommitted: the control "
            "found loss or anomalies), 1 otherwise, 2 usage."
        ),
    )
    nemesis.add_argument("--seeds", type=_seeds, default="1-10", help="A-B or A,B,C (default 1-10)")
    nemesis.add_argument(
        "--seconds", type=float, default=12.0, help="faults per schedule, seconds (default 12)"
    )
    nemesis.add_argument(
        "--unsafe",
        action="store_true",
        help="the control: acks=1, min ISR 1, unclean leader election on; exit 0 if loss is found",
    )
    nemesis.add_argument(
        "--events-dir",
        metavar="DIR",
        help="keep each failing schedule's event log here (--processes: its cluster directory)",
    )
    nemesis.add_argument(
        "--jobs", type=_positive_int, default=1, help="schedules run at once, in subprocesses"
    )
    nemesis.add_argument(
        "--session-timeout-ms",
        type=_positive_int,
        default=2000,
        help="the brokers' ZooKeeper session timeout (default 2000; Kafka's is 6000)",
    )
    nemesis.add_argument(
        "--no-power-loss", action="store_true", help="leave power losses out of the schedules"
    )
    nemesis.add_argument(
        "--processes",
        action="store_true",
        help=(
            "run against 3 `kafkactor broker` processes on a real ZooKeeper (Debian's package) "
            "with librdkafka producers: SIGKILL, SIGTERM, SIGSTOP/SIGCONT, restarts, session "
            "expiry; "
            "no power losses; the verdict is read from the stopped brokers' data dirs"
        ),
    )
    nemesis.add_argument(
        "--transactions",
        action="store_true",
        help=(
            "consume-transform-produce transactions instead of acks=all producers: every "
            "consumed input record in the output exactly once, nothing aborted visible to "
            "read_committed, no transaction in part, no hanging transaction"
        ),
    )
    nemesis.add_argument(
        "--read-uncommitted",
        action="store_true",
        help="with --transactions, the control: read the output with read_uncommitted, "
        "where the checker must find aborted records (exit 0 if it does)",
    )
    nemesis.set_defaults(func=_cmd_nemesis)
