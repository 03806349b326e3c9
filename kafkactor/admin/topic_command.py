"""`kafkactor topics`: Kafka's `kafka-topics.sh --bootstrap-server`, over the wire.

Exactly one action of --create, --list, --describe, --alter (--partitions) or --delete, with
Kafka's options and output formats: "Created topic t.", one line per topic
("Topic: t<TAB>PartitionCount: 3<TAB>ReplicationFactor: 2<TAB>Configs: k=v,...", the configs
that are not defaults) followed by one per partition ("<TAB>Topic: t<TAB>Partition: 0<TAB>
Leader: 1<TAB>Replicas: 1,2<TAB>Isr: 1,2"). A failure prints "Error while executing topic
command : <why>" on stderr and exits 1; bad usage exits 2. It works against any broker that
speaks Kafka's admin APIs (kafkactor's or Kafka's), through `AdminClient`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from kafkactor.admin.command import add_admin_command, run_admin_command

if TYPE_CHECKING:  # the codec takes a while to load: imported when a command runs
    from kafkactor.admin.admin_client import AdminClient, ConfigEntry, TopicInfo

__all__ = ["ACTIONS", "add_topics_command", "parse_replica_assignment", "run_topics"]

ACTIONS = ("create", "list", "describe", "alter", "delete")


def add_topics_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_admin_command(
        commands,
        "topics",
        ACTIONS,
        help="create, list, describe, add partitions to or delete topics (kafka-topics.sh)",
        description=(
            "Kafka's kafka-topics.sh over the wire: exactly one of --create, --list, "
            "--describe, --alter (--partitions) or --delete, against the brokers at "
            "--bootstrap-server."
        ),
    )
    parser.add_argument(
        "--topic", help="the topic; for --list, --describe, --alter and --delete a regex"
    )
    parser.add_argument("--partitions", type=int, help="partitions to create or grow to")
    parser.add_argument("--replication-factor", type=int, help="replicas of each partition")
    parser.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4,...",
        help="replicas per partition (first = preferred leader), for --create or --alter",
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="NAME=VALUE", help="a topic config"
    )
    parser.add_argument("--if-not-exists", action="store_true")
    parser.add_argument("--if-exists", action="store_true")
    parser.add_argument("--exclude-internal", action="store_true")
    parser.add_argument("--under-replicated-partitions", action="store_true")
    parser.add_argument("--unavailable-partitions", action="store_true")
    parser.add_argument("--topics-with-overrides", action="store_true")
    parser.set_defaults(func=run_topics)


def run_topics(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run one `kafkactor topics` action (`args` from `add_topics_command`'s parser),
    printing to `out` (default: stdout); its exit code."""

    def usage(action: str) -> str | None:
        if action in ("create", "alter") and not args.topic:
            return f'Missing required argument "[topic]" for --{action}'
        return None

    handlers = {
        "list": _list,
        "describe": _describe,
        "create": _create,
        "alter": _alter,
        "delete": _delete,
    }
    return run_admin_command(
        args, handlers, out, usage=usage, error_prefix="Error while executing topic command : "
    )


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's --replica-assignment: "1:2,2:3" is partition 0 on [1, 2], partition 1 on
    [2, 3]; duplicates in a list and lists of different lengths are refused."""
    assignment: dict[int, list[int]] = {}
    for partition, replicas in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in replicas.split(":")]
        except ValueError:
            raise ValueError(
                f"Invalid replica assignment {text!r}: broker ids are integers"
            ) from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise ValueError(
                "Partition replica lists may not contain duplicate entries: "
                + ",".join(map(str, duplicates))
            )
        if assignment and len(brokers) != len(assignment[0]):
            raise ValueError(f"Partition {partition} has different replication factor: {brokers}")
        assignment[partition] = brokers
    return assignment


def _configs(entries: Sequence[str]) -> dict[str, str]:
    configs = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep or not name.strip():
            raise ValueError(
                'Invalid topic config: all configs to be added must be in the format "key=val".'
            )
        configs[name.strip()] = value.strip()
    return configs


def _create(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    from kafkactor.admin.admin_client import AdminError
    from kafkactor.messages import ErrorCode

    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise ValueError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise ValueError("The partitions must be greater than 0")
    assignments = (
        parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    )
    try:
        admin.create_topic(
            args.topic,
            None if assignments else args.partitions,
            None if assignments else args.replication_factor,
            _configs(args.config),
            assignments=assignments,
        )
    except AdminError as error:
        if args.if_not_exists and error.code is ErrorCode.TOPIC_ALREADY_EXISTS:
            return
        raise
    print(f"Created topic {args.topic}.", file=out)


def _matching(admin: AdminClient, args: argparse.Namespace, *, required: bool) -> list[str]:
    """The topics --topic names (a regex matched against the whole name; none: all), sorted;
    internal ones left out with --exclude-internal. A --topic that matches nothing raises
    unless --if-exists."""
    topics = admin.topics()
    names = sorted(
        name
        for name, info in topics.items()
        if not (args.exclude_internal and info.internal)
        and (args.topic is None or _include(args.topic, name))
    )
    if args.topic is not None and not names and required and not args.if_exists:
        raise ValueError(f"Topic '{args.topic}' does not exist as expected")
    return names


def _include(pattern: str, name: str) -> bool:
    """Kafka's IncludeList: a regex over the whole name, ',' meaning '|'."""
    return re.fullmatch(pattern.strip().replace(",", "|"), name) is not None


def _list(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    for name in _matching(admin, args, required=False):
        print(name, file=out)


def _describe(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    names = _matching(admin, args, required=True)
    if not names:
        return
    topics = admin.topics(names)
    configs = admin.topic_configs(names)
    live = set(admin.live_brokers())
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    for name in names:
        info = topics.get(name)
        if info is None or not info.partitions:
            continue
        overrides = [c for c in configs.get(name, []) if not c.is_default]
        if not filtered and (not args.topics_with_overrides or overrides):
            print(_topic_line(info, overrides), file=out)
        if args.topics_with_overrides:
            continue
        for p in info.partitions:
            under = len(p.isr) < len(p.replicas)
            unavailable = p.leader < 0 or p.leader not in live
            if filtered and not (
                (args.under_replicated_partitions and under)
                or (args.unavailable_partitions and unavailable)
            ):
                continue
            print(
                f"\tTopic: {name}\tPartition: {p.partition}"
                f"\tLeader: {p.leader if p.leader >= 0 else 'none'}"
                f"\tReplicas: {','.join(map(str, p.replicas))}"
                f"\tIsr: {','.join(map(str, p.isr))}",
                file=out,
            )


def _topic_line(info: TopicInfo, overrides: Sequence[ConfigEntry]) -> str:
    configs = ",".join(f"{c.name}={c.value}" for c in overrides)
    topic_id = f"\tTopicId: {info.topic_id}" if info.topic_id else ""  # when not the zero uuid
    return (
        f"Topic: {info.name}{topic_id}\tPartitionCount: {len(info.partitions)}"
        f"\tReplicationFactor: {len(info.partitions[0].replicas)}\tConfigs: {configs}"
    )


def _alter(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    if args.partitions is None:
        raise ValueError("--alter needs --partitions (topic configs: kafkactor's alter APIs)")
    names = _matching(admin, args, required=True)
    if not names:
        return
    topics = admin.topics(names)
    for name in names:
        assignments = None
        if args.replica_assignment:
            planned = parse_replica_assignment(args.replica_assignment)
            start = len(topics[name].partitions)
            assignments = [planned[p] for p in sorted(planned) if p >= start]
        admin.create_partitions(name, args.partitions, assignments)


def _delete(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    names = _matching(admin, args, required=True)
    if names:
        admin.delete_topics(names)
