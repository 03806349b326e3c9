"""Kafka's ConnectionQuotas: max.connections, max.connections.per.ip and its overrides."""

from __future__ import annotations

import pytest

from kafkactor.security.connection_quotas import ConnectionQuotas, parse_per_ip_overrides

pytestmark = pytest.mark.timeout(30)


def test_per_ip_limit_counts_each_address() -> None:
    quotas = ConnectionQuotas(max_connections_per_ip=2)
    assert quotas.inc("10.0.0.1") and quotas.inc("10.0.0.1")
    assert not quotas.inc("10.0.0.1")
    assert quotas.refusal == "max.connections.per.ip (2) reached for 10.0.0.1"
    assert quotas.inc("10.0.0.2")
    quotas.dec("10.0.0.1")
    assert quotas.inc("10.0.0.1")
    assert quotas.get("10.0.0.1") == 2 and quotas.total == 3


def test_overrides_replace_the_per_ip_limit_for_their_address() -> None:
    quotas = ConnectionQuotas(max_connections_per_ip=1, per_ip_overrides={"127.0.0.1": 3})
    assert all(quotas.inc("127.0.0.1") for _ in range(3))
    assert not quotas.inc("127.0.0.1")
    assert quotas.refusal == "max.connections.per.ip.overrides (3) reached for 127.0.0.1"
    assert quotas.inc("10.0.0.9") and not quotas.inc("10.0.0.9")


def test_max_connections_bounds_the_broker_but_not_protected_connections() -> None:
    quotas = ConnectionQuotas(max_connections=2)
    assert quotas.inc("a") and quotas.inc("b")
    assert not quotas.inc("c")
    assert quotas.refusal == "max.connections (2) reached"
    assert quotas.inc("broker-2", protected=True)  # the inter-broker listener
    assert quotas.total == 3
    quotas.dec("a")
    quotas.dec("broker-2")
    assert quotas.inc("c")


def test_closing_an_unknown_connection_is_an_error() -> None:
    quotas = ConnectionQuotas()
    with pytest.raises(ValueError, match="no open connection"):
        quotas.dec("10.0.0.1")


def test_overrides_setting_is_parsed() -> None:
    assert parse_per_ip_overrides("127.0.0.1:200, host-a:5,") == {"127.0.0.1": 200, "host-a": 5}
    assert parse_per_ip_overrides("::1:7") == {"::1": 7}
    assert parse_per_ip_overrides("") == {}
    for bad in ("127.0.0.1", "h:x", "h:-1", ":3"):
        with pytest.raises(ValueError, match=r"max\.connections\.per\.ip\.overrides"):
            parse_per_ip_overrides(bad)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match=r"max\.connections must not be negative"):
        ConnectionQuotas(max_connections=-1)
    with pytest.raises(ValueError, match=r"needs max\.connections\.per\.ip\.overrides"):
        ConnectionQuotas(max_connections_per_ip=0)
    only_listed = ConnectionQuotas(max_connections_per_ip=0, per_ip_overrides={"10.1.1.1": 1})
    assert not only_listed.inc("10.9.9.9") and only_listed.inc("10.1.1.1")
