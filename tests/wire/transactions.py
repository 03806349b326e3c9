"""Helpers of the transactional wire tests (tests/wire/test_transactions_*.py): the cluster
they share (one per test run: `txn_cluster` in tests/wire/conftest.py), and what every client
module checks the same way.

The cluster aborts timed-out transactions every 200 ms (Kafka's
`transaction.abort.timed.out.transaction.cleanup.interval.ms` is 10 s), so that a transaction
whose `transaction.timeout.ms` has passed is aborted by the broker within a test's bounds; every
other setting is Kafka's default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.transaction import TransactionConfig
from kafkactor.testing import Cluster

__all__ = ["ABORT_CHECK_MS", "TXN_TIMEOUT_MS", "transactions_cluster"]

ABORT_CHECK_MS: Final = 200  # transaction.abort.timed.out.transaction.cleanup.interval.ms
TXN_TIMEOUT_MS: Final = 1_500  # a transaction.timeout.ms the broker's abort comes well after
LISTEN: Final = "127.0.0.1"


@contextmanager
def transactions_cluster(brokers: int = 3) -> Iterator[Cluster]:
    """`brokers` brokers on loopback whose transaction coordinators abort timed-out
    transactions every ABORT_CHECK_MS."""
    config = dataclasses.replace(
        BrokerConfig(),
        transaction=TransactionConfig(abort_timed_out_transactions_interval_ms=ABORT_CHECK_MS),
    )
    with Cluster(brokers, listen=LISTEN, config=config) as started:
        yield started
