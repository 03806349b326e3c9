"""What the admin commands share, as Kafka's tools share `CommandLineUtils`: a subcommand with
`--bootstrap-server`, one flag per action and `--timeout`; exactly one action per run; the
admin client opened for it; Kafka's exit codes (0 done, 1 refused or unreachable with the
reason on stderr, 2 usage)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the codec takes a while to load: imported when a command runs
    from kafkactor.admin.admin_client import AdminClient

__all__ = ["Action", "add_admin_command", "run_admin_command"]

Action = Callable[["AdminClient", argparse.Namespace, TextIO], None]


def add_admin_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    actions: Sequence[str],
    *,
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    """The subcommand's parser with `--bootstrap-server`, a flag per action and `--timeout`;
    the caller adds its own options."""
    parser = commands.add_parser(
        name,
        help=help,
        description=description
        + " Exit codes: 0 done, 1 the cluster refused or could not be reached (the reason on "
        "stderr), 2 usage.",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    for action in actions:
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    return parser


def run_admin_command(
    args: argparse.Namespace,
    handlers: Mapping[str, Action],
    out: TextIO | None,
    *,
    usage: Callable[[str], str | None],
    error_prefix: str,
) -> int:
    """Run the one action `args` names with an admin client of `--bootstrap-server`, printing
    to `out` (default: stdout). `usage(action)` says what is wrong with the arguments (None:
    nothing); a refusal or a failure prints `error_prefix` and the reason on stderr."""
    out = sys.stdout if out is None else out
    chosen = [a for a in handlers if getattr(args, a)]
    if len(chosen) != 1:
        flags = [f"--{a}" for a in handlers]
        print(
            f"Command must include exactly one action: {', '.join(flags[:-1])} or {flags[-1]}",
            file=sys.stderr,
        )
        return 2
    problem = usage(chosen[0])
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    from kafkactor.admin.admin_client import AdminClient, AdminError

    try:
        with AdminClient(args.bootstrap_server, timeout_s=args.timeout) as admin:
            handlers[chosen[0]](admin, args, out)
    except (AdminError, ValueError, OSError) as error:
        print(f"{error_prefix}{error}", file=sys.stderr)
        return 1
    return 0
