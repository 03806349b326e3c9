"""Every script in examples/ runs as a newcomer would run it, and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EarlyRun

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# what each example must print (a line fragment), beyond exiting 0
PROMISES = {
    "embed_cluster.py": ["sent RecordMetadata(topic='orders'", "offset 0: b'order"],
    "acks_under_follower_failure.py": [
        "once the ISR shrank to",
        "acks=all refused: NOT_ENOUGH_REPLICAS",
        "acks=1 still answered: RecordMetadata",
    ],
    "long_poll_fetch.py": ["idle poll returned []", "long poll returned [b'click!']"],
    "timing_wheel.py": ["t= 8000ms  8000ms task", "pending: 0"],
    "kafka_python_client.py": [
        "bootstrap.servers = 127.0.0.1:",
        "acknowledged at offset 2 by the leader",
        "offset 2: key=b'customer-7' value=b'order 2'",
    ],
    "kafka_python_consumer_group.py": [
        "produced 8 orders to the 4 partitions of 'orders'",
        # which consumer holds which half varies; the halves (the range assignor's) do not
        "held partitions [0, 1] and read order 0 (p0@0), order 4 (p0@1), order 1 (p1@0), order 5",
        "held partitions [2, 3] and read order 2 (p2@0), order 6 (p2@1), order 3 (p3@0), order 7",
        "committed offsets: {0: 2, 1: 2, 2: 2, 3: 2}",
        "each order read exactly once: True",
    ],
    "controller_failover.py": ["epoch 2"],
    "sasl_ssl_client.py": [
        "security.protocol = SASL_SSL",
        "undelivered after flush: 0",
        "alice read b'order 0' at offset 0",
    ],
    "transactional_producer.py": [
        "committed: paid 0, paid 1, paid 2",
        "read_committed sees: ['paid 0', 'paid 1', 'paid 2']",
        "read_uncommitted sees: ['paid 0', 'paid 1', 'paid 2', 'refund 0']",
    ],
    "analyze_events.py": [
        "events analysed, 0 corrupt lines",
        "report: ",
        "produce (producer, acks=-1) completed: 200 requests",
        "produce (producer, acks=1) completed: 200 requests",
        "longest trace: ",
    ],
}
# seconds each example may take (default 80): the analysis starts Spark's JVM
TIMEOUT_S = {"analyze_events.py": 240}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(PROMISES)


# examples whose command starts early (once this process's Spark tests are done) and runs
# beside the tests before them (Spark's JVM spends most of a minute starting and warming up;
# tests/conftest.py)
EARLY = {"analyze_events.py"}


def _example(name: str) -> Any:
    timeout_s = TIMEOUT_S.get(name, 80)
    marks = [pytest.mark.timeout(timeout_s + 10)]
    if name in EARLY:
        marks.append(pytest.mark.early(sys.executable, str(EXAMPLES / name), timeout_s=timeout_s))
    return pytest.param(name, marks=marks)


@pytest.mark.parametrize("name", [_example(name) for name in sorted(PROMISES)])
def test_example_runs_and_prints_what_it_promises(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if name in EARLY:
        early: EarlyRun = request.getfixturevalue("early_run")
        done, cwd = early.wait(), early.cwd
    else:
        cwd = tmp_path
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / name)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S.get(name, 80),
            check=False,
        )
    assert done.returncode == 0, done.stderr
    for promise in PROMISES[name]:
        assert promise in done.stdout, (promise, done.stdout)
    assert not list(cwd.iterdir()), "an example left files behind"


@pytest.mark.parametrize(
    "name",
    [
        "kafka_python_client.py",
        "kafka_python_consumer_group.py",
        "transactional_producer.py",
        "sasl_ssl_client.py",
    ],
)
def test_the_readme_shows_the_kafka_python_examples_as_they_run(name: str) -> None:
    """The README's wire-protocol examples are these files, as run above."""
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    example = (EXAMPLES / name).read_text(encoding="utf-8")
    code = example.split('"""', 2)[2].strip()
    assert f"```python\n{code}\n```" in readme


def test_the_readme_shows_the_broker_properties_file_and_it_loads() -> None:
    """The README's broker properties are `examples/broker1.properties`, and a broker reads them."""
    from kafkactor.server.config import KafkaConfig

    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    path = EXAMPLES / "broker1.properties"
    settings = "\n".join(
        line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")
    )
    assert f"```properties\n{settings}\n```" in readme
    config = KafkaConfig.from_file(path)
    assert (config.broker_id, config.listeners.port) == (1, 9092)
    assert config.log_config.min_insync_replicas == 2
