"""`kafkactor reassign`: Kafka's `kafka-reassign-partitions.sh --bootstrap-server`, over the wire.

Exactly one action: --generate (a plan that moves the topics of --topics-to-move-json-file onto
--broker-list), --execute, --verify or --cancel (of the plan in --reassignment-json-file), or
--list (the reassignments in progress). Plans are Kafka's JSON
(`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}`),
and the output is Kafka's. A failure prints "Error: <why>" on stderr and exits 1; bad usage
exits 2. The reassignment itself is the controller's (docs/controller.md).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from kafkactor.admin.command import add_admin_command, run_admin_command

if TYPE_CHECKING:  # the codec takes a while to load: imported when a command runs
    from kafkactor.admin.admin_client import AdminClient

__all__ = [
    "ACTIONS",
    "add_reassign_command",
    "format_plan",
    "parse_plan",
    "run_reassign",
]

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
Partition = tuple[str, int]
Plan = dict[Partition, tuple[int, ...]]


def add_reassign_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_admin_command(
        commands,
        "reassign",
        ACTIONS,
        help="move partitions' replicas between brokers (kafka-reassign-partitions.sh)",
        description=(
            "Kafka's kafka-reassign-partitions.sh over the wire: exactly one of --generate, "
            "--execute, --verify, --cancel or --list, against the brokers at "
            "--bootstrap-server."
        ),
    )
    parser.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='for --generate: {"topics":[{"topic":"t"}],"version":1}',
    )
    parser.add_argument("--broker-list", metavar="1,2,3", help="for --generate: the brokers")
    parser.add_argument(
        "--reassignment-json-file", metavar="FILE", help="the plan to execute, verify or cancel"
    )
    parser.set_defaults(func=run_reassign)


_NEEDS = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}


def run_reassign(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run one `kafkactor reassign` action (`args` from `add_reassign_command`'s parser),
    printing to `out` (default: stdout); its exit code."""

    def usage(action: str) -> str | None:
        missing = [f"--{n.replace('_', '-')}" for n in _NEEDS[action] if not getattr(args, n)]
        return f"--{action} needs {' and '.join(missing)}" if missing else None

    handlers = {
        "generate": _generate,
        "execute": _execute,
        "verify": _verify,
        "cancel": _cancel,
        "list": _list,
    }
    return run_admin_command(args, handlers, out, usage=usage, error_prefix="Error: ")


# -- plans ---------------------------------------------------------------------------------------


def parse_plan(text: str) -> Plan:
    """A reassignment plan in Kafka's JSON; raises ValueError with Kafka's reasons for an
    empty plan, an empty replica list, a partition named twice or a broker twice in a list."""
    try:
        data = json.loads(text)
        entries = [
            (str(e["topic"]), int(e["partition"]), [int(b) for b in e["replicas"]])
            for e in data["partitions"]
        ]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"Unable to parse the reassignment JSON: {error!r}") from None
    if not entries:
        raise ValueError("Partition reassignment list cannot be empty.")
    plan: Plan = {}
    for topic, partition, replicas in entries:
        if not replicas:
            raise ValueError("Partition replica list cannot be empty.")
        if (topic, partition) in plan:
            raise ValueError(
                f"Cannot reassign the same partition more than once: {topic}-{partition}"
            )
        twice = sorted({b for b in replicas if replicas.count(b) > 1})
        if twice:
            raise ValueError(
                "Partition replica lists may not contain duplicate entries: "
                f"{topic}-{partition} contains multiple entries for {','.join(map(str, twice))}."
            )
        plan[(topic, partition)] = tuple(replicas)
    return plan


def format_plan(plan: Mapping[Partition, Sequence[int]]) -> str:
    """Kafka's compact JSON of a plan, partitions in order."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": topic,
                    "partition": partition,
                    "replicas": list(replicas),
                    "log_dirs": ["any"] * len(replicas),
                }
                for (topic, partition), replicas in sorted(plan.items())
            ],
        },
        separators=(",", ":"),
    )


def _names(plan: Mapping[Partition, Any]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(plan))


def _current(admin: AdminClient, topics: Sequence[str]) -> Plan:
    """The replicas of every partition of `topics`; a topic that does not exist raises."""
    found = admin.topics(sorted(set(topics)))
    for topic in topics:
        if topic not in found:
            raise ValueError(f"Topic {topic} not found")
    return {(t, p.partition): p.replicas for t, info in found.items() for p in info.partitions}


# -- actions -------------------------------------------------------------------------------------


def _generate(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    from kafkactor.actors.controller.add_partitions import assign_added_replicas

    try:
        brokers = [int(b) for b in str(args.broker_list).split(",")]
    except ValueError:
        raise ValueError(f"--broker-list is broker ids, got {args.broker_list!r}") from None
    twice = sorted({b for b in brokers if brokers.count(b) > 1})
    if twice:
        raise ValueError(f"Broker list contains duplicate entries: {','.join(map(str, twice))}")
    try:
        wanted = json.loads(Path(args.topics_to_move_json_file).read_text(encoding="utf-8"))
        topics = [str(t["topic"]) for t in wanted["topics"]]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"Unable to parse the topics JSON: {error!r}") from None
    twice_topics = sorted({t for t in topics if topics.count(t) > 1})
    if twice_topics:
        raise ValueError(
            f"List of topics to reassign contains duplicate entries: {','.join(twice_topics)}"
        )
    current = _current(admin, topics)
    proposed: Plan = {}
    for topic in sorted(set(topics)):
        partitions = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, 0)])
        for partition, replicas in assign_added_replicas(
            sorted(brokers), len(partitions), factor, start_index=0, start_partition=0
        ).items():
            proposed[(topic, partition)] = replicas
    print("Current partition replica assignment", file=out)
    print(format_plan(current), file=out)
    print(file=out)
    print("Proposed partition reassignment configuration", file=out)
    print(format_plan(proposed), file=out)


def _execute(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    from kafkactor.admin.reassignments import alter_partition_reassignments

    plan = parse_plan(Path(args.reassignment_json_file).read_text(encoding="utf-8"))
    current = _current(admin, [t for t, _ in plan])
    unknown = sorted(tp for tp in plan if tp not in current)
    if unknown:
        raise ValueError(f"Unable to find partition: {_names(dict.fromkeys(unknown))}")
    print("Current partition replica assignment", file=out)
    print(file=out)
    print(format_plan({tp: current[tp] for tp in plan}), file=out)
    print(file=out)
    print("Save this to use as the --reassignment-json-file option during rollback", file=out)
    failed = {tp: e for tp, e in alter_partition_reassignments(admin, plan).items() if e}
    if failed:
        raise ValueError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{t}-{p}: {error}" for (t, p), error in sorted(failed.items()))
        )
    print(f"Successfully started partition reassignments for {_names(plan)}", file=out)


def _verify(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    from kafkactor.admin.reassignments import list_partition_reassignments

    plan = parse_plan(Path(args.reassignment_json_file).read_text(encoding="utf-8"))
    ongoing = list_partition_reassignments(admin, sorted(plan))
    current = _current(admin, [t for t, _ in plan])
    print("Status of partition reassignment:", file=out)
    for (topic, partition), target in sorted(plan.items()):
        name = f"{topic}-{partition}"
        if (topic, partition) in ongoing:
            print(f"Reassignment of partition {name} is still in progress.", file=out)
        elif current.get((topic, partition)) == target:
            print(f"Reassignment of partition {name} is complete.", file=out)
        else:
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{','.join(map(str, current.get((topic, partition), ())))} rather than "
                f"{','.join(map(str, target))}.",
                file=out,
            )


def _cancel(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    from kafkactor.admin.reassignments import alter_partition_reassignments

    plan = parse_plan(Path(args.reassignment_json_file).read_text(encoding="utf-8"))
    outcomes = alter_partition_reassignments(admin, dict.fromkeys(plan))
    failed = {
        tp: e for tp, e in outcomes.items() if e and e.code.name != "NO_REASSIGNMENT_IN_PROGRESS"
    }
    if failed:
        raise ValueError(
            "Error cancelling partition reassignment(s):\n"
            + "\n".join(f"{t}-{p}: {error}" for (t, p), error in sorted(failed.items()))
        )
    cancelled = {tp: None for tp, e in outcomes.items() if e is None}
    if cancelled:
        print(f"Successfully cancelled partition reassignments for: {_names(cancelled)}", file=out)
    else:
        print("None of the specified partition reassignments are active.", file=out)


def _list(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    from kafkactor.admin.reassignments import list_partition_reassignments

    ongoing = list_partition_reassignments(admin)
    if not ongoing:
        print("No partition reassignments found.", file=out)
        return
    print("Current partition reassignments:", file=out)
    for (topic, partition), r in sorted(ongoing.items()):
        print(
            f"{topic}-{partition}: replicas: {','.join(map(str, r.replicas))}. "
            f"adding: {','.join(map(str, r.adding))}. "
            f"removing: {','.join(map(str, r.removing))}.",
            file=out,
        )
