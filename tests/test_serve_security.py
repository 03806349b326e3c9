"""`kafkactor serve` with security, as the README shows it: a SASL_SSL cluster with a SCRAM
user, the client settings it prints, and a real client (confluent-kafka, librdkafka's host
name check on) producing and consuming with them."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kafkactor.cli import build_parser
from kafkactor.serve_security import security_of

SERVE = [sys.executable, "-m", "kafkactor.cli", "serve"]
READY_S = 60.0

pytestmark = pytest.mark.timeout(120)


def lines(process: subprocess.Popen[str], count: int) -> list[str]:
    """The process's first `count` stdout lines, waited for with a deadline (not a sleep)."""
    assert process.stdout is not None
    stdout = process.stdout
    got: list[str] = []

    def read() -> None:
        for _ in range(count):
            got.append(stdout.readline().rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(READY_S)
    assert len(got) == count, f"{got} within {READY_S}s"
    return got


def test_a_sasl_ssl_cluster_prints_its_client_settings_and_serves_them(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    ca = tmp_path / "ca.pem"
    process = subprocess.Popen(
        [
            *SERVE,
            "--brokers",
            "1",
            "--port",
            "0",
            "--security-protocol",
            "SASL_SSL",
            "--user",
            "alice:alice-secret",
            "--ca-file",
            str(ca),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        printed = dict(line.split("=", 1) for line in lines(process, 4))
        assert printed["security.protocol"] == "SASL_SSL"
        assert printed["sasl.mechanism"] == "SCRAM-SHA-256"
        assert Path(printed["ssl.ca.location"]) == ca.resolve()
        assert "alice-secret" not in str(printed)

        settings = {**printed, "sasl.username": "alice", "sasl.password": "alice-secret"}
        producer = Producer(settings)
        producer.produce("orders", b"first")  # auto-created
        assert producer.flush(30) == 0
        consumer = Consumer({**settings, "group.id": "readme", "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        message = None
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None:
                break
        consumer.close()
        assert message is not None and message.error() is None
        assert message.value() == b"first"
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=READY_S)
    assert process.returncode == 0, err


def test_security_flags_make_the_cluster_security() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--security-protocol",
            "SASL_PLAINTEXT",
            "--user",
            "alice:a:b",
            "--user",
            "bob:bob-secret",
            "--sasl-mechanism",
            "PLAIN",
            "--super-user",
            "admin",
            "--authorizer",
        ]
    )
    security = security_of(args)

    assert security is not None
    assert security.users == {"alice": "a:b", "bob": "bob-secret"}
    assert security.mechanisms == ("PLAIN",)
    assert security.principals == ("User:admin",)
    assert security.authorizer


def test_no_security_flag_serves_as_before() -> None:
    assert security_of(build_parser().parse_args(["serve"])) is None


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--user", "alice"], id="no-password"),
        pytest.param(["--security-protocol", "TLS"], id="unknown-protocol"),
        pytest.param(["--sasl-mechanism", "GSSAPI"], id="unknown-mechanism"),
    ],
)
def test_bad_security_flags_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", *argv])
    assert exited.value.code == 2


def test_users_need_a_sasl_protocol() -> None:
    args = build_parser().parse_args(["serve", "--user", "alice:secret"])
    with pytest.raises(ValueError, match="--user needs a SASL protocol"):
        security_of(args)
