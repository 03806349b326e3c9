"""Fixtures of the client tests: the replication suite's (a captured event log, and started
clusters without ZooKeeper, where partition `p` of a topic is led by broker `p % 3 + 1`)."""

from tests.replication.conftest import cluster, events, sticky_cluster

__all__ = ["cluster", "events", "sticky_cluster"]
