"""The `kafka_cluster` pytest fixture, as a user's suite gets it: through the pytest11 entry
point, in a separate pytest run (pytester), with the README's own example test."""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_fixture_example() -> str:
    """The README's example test for the fixture (the python block that uses it)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    found: list[str] = [b for b in blocks if "def test_" in b and "kafka_cluster" in b]
    assert len(found) == 1, "the README should show one example test using kafka_cluster"
    return found[0]


def test_the_plugin_is_registered_for_pytest() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("kafkactor") == "kafkactor.testing.pytest_plugin"


@pytest.mark.timeout(120)
def test_the_readme_example_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_readme=readme_fixture_example())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)


@pytest.mark.timeout(120)
def test_each_test_gets_a_fresh_cluster_with_the_markers_options(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_fresh="""
        import socket
        import pytest

        seen = []

        @pytest.mark.kafka_cluster(brokers=1, zookeeper=None)
        def test_one(kafka_cluster):
            assert len(kafka_cluster.bootstrap_servers.split(",")) == 1
            kafka_cluster.create_topic("t")
            seen.append(str(kafka_cluster.data_dir))

        def test_two(kafka_cluster):
            # a fresh cluster: its own data dir, and no topic "t" (its ports may be the
            # previous cluster's: the OS hands a freed port out again)
            assert str(kafka_cluster.data_dir) not in seen
            kafka_cluster.create_topic("t")
            servers = kafka_cluster.bootstrap_servers.split(",")
            assert len(servers) == 3
            host, port = servers[0].split(":")
            assert host == "127.0.0.1"
            socket.create_connection((host, int(port)), timeout=5).close()
            with pytest.raises(Exception):
                kafka_cluster.create_topic("t", replication_factor=4)

        def test_listen_cannot_be_chosen(request):
            request.applymarker(pytest.mark.kafka_cluster(listen="0.0.0.0"))
            with pytest.raises(pytest.UsageError):
                request.getfixturevalue("kafka_cluster")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)


def test_the_fixture_takes_a_cluster_security(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_secured="""
        import pytest
        from kafka import KafkaProducer
        from kafkactor.testing.security import ClusterSecurity

        @pytest.mark.kafka_cluster(
            brokers=1, security=ClusterSecurity(protocol="SSL")
        )
        def test_ssl(kafka_cluster):
            assert kafka_cluster.ca_file.exists()
            kafka_cluster.create_topic("t", 1, 1)
            producer = KafkaProducer(**kafka_cluster.client_config("kafka-python"))
            producer.send("t", b"over TLS").get(timeout=30)
            producer.close()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
