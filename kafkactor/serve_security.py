"""`kafkactor serve`'s security options: the client listener's protocol, SASL users, super
users and the authorizer, and the client settings it prints after `bootstrap.servers=`.

    kafkactor serve --security-protocol SASL_SSL --user alice:alice-secret --ca-file ca.pem

prints, once every broker serves, the properties a librdkafka (or Java) client sets::

    bootstrap.servers=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
    security.protocol=SASL_SSL
    ssl.ca.location=/path/to/ca.pem
    sasl.mechanism=SCRAM-SHA-256

Passwords are never printed (they were given on the command line).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # the testing package loads the broker: imported where serve runs
    from kafkactor.testing.security import ClusterSecurity

__all__ = ["add_security_arguments", "print_client_settings", "security_of"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


def _user(text: str) -> tuple[str, str]:
    name, colon, password = text.partition(":")
    if not colon or not name or not password:
        raise argparse.ArgumentTypeError(f"must be NAME:PASSWORD, got {name!r}:...")
    return name, password


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """The security flags of `kafkactor serve`."""
    group = parser.add_argument_group("security (docs/security.md)")
    group.add_argument(
        "--security-protocol",
        choices=PROTOCOLS,
        help="the client listener's protocol (default PLAINTEXT); SSL and SASL_SSL use a "
        "generated test CA and broker certificate for localhost and 127.0.0.1",
    )
    group.add_argument(
        "--user",
        action="append",
        default=[],
        type=_user,
        metavar="NAME:PASSWORD",
        help="a SASL user (repeatable): SCRAM credentials in ZooKeeper and a PLAIN login",
    )
    group.add_argument(
        "--sasl-mechanism",
        action="append",
        choices=MECHANISMS,
        help="a SASL mechanism to enable (repeatable; default all three, the first printed)",
    )
    group.add_argument(
        "--super-user",
        action="append",
        default=[],
        metavar="NAME",
        help="a user every ACL check allows (super.users; repeatable)",
    )
    group.add_argument(
        "--authorizer",
        action="store_true",
        help="check ACLs (Kafka's AclAuthorizer; allow.everyone.if.no.acl.found=false)",
    )
    group.add_argument(
        "--ca-file",
        metavar="PATH",
        help="copy the generated CA certificate (PEM) here (default: it stays in the data dir)",
    )


def security_of(args: argparse.Namespace) -> ClusterSecurity | None:
    """The `ClusterSecurity` the flags ask for; None when none was given (as before).
    Raises ValueError for flags that do not go together."""
    given = (
        args.security_protocol or args.user or args.sasl_mechanism or args.super_user
    ) or args.authorizer
    if not given:
        return None
    from kafkactor.testing.security import ClusterSecurity

    protocol = args.security_protocol or "PLAINTEXT"
    if args.user and "SASL" not in protocol:
        raise ValueError(f"--user needs a SASL protocol, not {protocol}")
    return ClusterSecurity(
        protocol=protocol,
        users=dict(args.user),
        mechanisms=tuple(dict.fromkeys(args.sasl_mechanism or MECHANISMS)),
        super_users=tuple(args.super_user),
        authorizer=bool(args.authorizer),
    )


def print_client_settings(cluster: Any, out: TextIO, ca_file: Path | None) -> None:
    """The client properties after `bootstrap.servers=` (nothing more without security)."""
    security: ClusterSecurity | None = cluster.security
    if security is None:
        return
    protocol = security.security_protocol
    lines = [f"security.protocol={protocol.name}"]
    if protocol.uses_tls:
        ca = cluster.ca_file
        if ca_file is not None:
            shutil.copyfile(ca, ca_file)
            ca = ca_file.resolve()
        lines.append(f"ssl.ca.location={ca}")
    if protocol.uses_sasl:
        lines.append(f"sasl.mechanism={security.mechanisms[0]}")
    for line in lines:
        print(line, file=out, flush=True)
