"""Producer id blocks claimed in ZooKeeper (`/latest_producer_id_block`), and without it.

Managers run against the embedded ZooKeeper model on a ManualClock (sessions never expire:
the clock does not move). Small blocks make several claims per test. Races are forced, not
waited for: a client wrapper lets a competing manager claim in between a manager's read and
its conditional write; the thread tests only check that whatever interleaving happened handed
out no id twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError

from kafkactor.actors.controller.zk_data import MalformedZnodeError
from kafkactor.actors.replication.producer_ids import (
    PRODUCER_ID_BLOCK_PATH,
    PRODUCER_ID_BLOCK_SIZE,
    LocalProducerIdBlocks,
    LocalProducerIdManager,
    ProducerIdBlock,
    ProducerIdManager,
    ProducerIdsExhaustedError,
    producer_id_manager,
)
from kafkactor.timer import ManualClock
from kafkactor.zk_model import EmbeddedZooKeeper

TIMEOUT_MS = 10_000
JOIN_S = 30.0


@pytest.fixture
def zk() -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(ManualClock(1_000_000), tick_ms=2000)
    try:
        yield server
    finally:
        server.close()


def latest(zk: EmbeddedZooKeeper) -> ProducerIdBlock:
    data, _stat = zk.connect(TIMEOUT_MS).get(PRODUCER_ID_BLOCK_PATH)
    return ProducerIdBlock.decode(data)


def take(manager: ProducerIdManager | LocalProducerIdManager, count: int) -> list[int]:
    return [manager.generate_producer_id() for _ in range(count)]


class Interposed:
    """A client that runs `before` once, just before its first call of `method`."""

    def __init__(self, client: Any, method: str, before: Callable[[], object]) -> None:
        self._client = client
        self._method = method
        self._before: Callable[[], object] | None = before
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if name == self._method and self._before is not None:
                before, self._before = self._before, None
                before()
            return target(*args, **kwargs)

        return call


# --------------------------------------------------------------------------------------------
# The znode


def test_the_first_id_claims_the_first_block_in_kafkas_format(zk: EmbeddedZooKeeper) -> None:
    manager = ProducerIdManager(7, zk.connect(TIMEOUT_MS))
    assert manager.current_block is None  # nothing claimed before the first id
    assert take(manager, 3) == [0, 1, 2]
    data, stat = zk.connect(TIMEOUT_MS).get(PRODUCER_ID_BLOCK_PATH)
    assert data == b'{"version":1,"broker":7,"block_start":"0","block_end":"999"}'
    assert stat.version == 0
    assert manager.current_block == ProducerIdBlock(7, 0, PRODUCER_ID_BLOCK_SIZE - 1)


def test_an_empty_znode_as_kafka_creates_it_means_no_block_yet(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.create(PRODUCER_ID_BLOCK_PATH, b"")
    assert take(ProducerIdManager(1, client, block_size=10), 2) == [0, 1]
    _data, stat = client.get(PRODUCER_ID_BLOCK_PATH)
    assert stat.version == 1 and latest(zk) == ProducerIdBlock(1, 0, 9)


def test_a_block_written_by_kafka_or_with_numbers_is_read(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.create(
        PRODUCER_ID_BLOCK_PATH, b'{"version":1,"broker":3,"block_start":"5000","block_end":"5999"}'
    )
    assert ProducerIdManager(1, client).generate_producer_id() == 6000
    assert ProducerIdBlock.decode(b'{"version":1,"broker":2,"block_start":7,"block_end":9}') == (
        ProducerIdBlock(2, 7, 9)
    )


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"version":1,"block_start":"0","block_end":"9"}',
        b'{"version":1,"broker":1,"block_start":"-1","block_end":"9"}',
        b'{"version":1,"broker":1,"block_start":"9","block_end":"0"}',
        b'{"version":1,"broker":1,"block_start":"0","block_end":true}',
    ],
)
def test_a_malformed_block_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError):
        ProducerIdBlock.decode(data)


def test_producer_ids_run_out_at_the_int64_limit(zk: EmbeddedZooKeeper) -> None:
    last = 2**63 - 1
    client = zk.connect(TIMEOUT_MS)
    client.create(PRODUCER_ID_BLOCK_PATH, ProducerIdBlock(1, last - 1500, last - 1000).encode())
    manager = ProducerIdManager(2, client)
    assert manager.generate_producer_id() == last - 999  # the last whole block still fits
    assert latest(zk) == ProducerIdBlock(2, last - 999, last)
    with pytest.raises(ProducerIdsExhaustedError):
        ProducerIdManager(3, client).generate_producer_id()


# --------------------------------------------------------------------------------------------
# Claims by several managers


def test_an_exhausted_block_claims_the_next_free_one(zk: EmbeddedZooKeeper) -> None:
    first = ProducerIdManager(1, zk.connect(TIMEOUT_MS), block_size=10)
    second = ProducerIdManager(2, zk.connect(TIMEOUT_MS), block_size=10)
    assert take(first, 10) == list(range(10))
    assert latest(zk) == ProducerIdBlock(1, 0, 9)
    assert second.generate_producer_id() == 10  # 10..19 is broker 2's now
    assert first.generate_producer_id() == 20  # broker 1's block was used up: it claims 20..29
    assert first.current_block == ProducerIdBlock(1, 20, 29) == latest(zk)
    assert take(second, 9) == list(range(11, 20))


def test_two_brokers_hand_out_disjoint_ids_across_many_blocks(zk: EmbeddedZooKeeper) -> None:
    managers = [ProducerIdManager(b, zk.connect(TIMEOUT_MS), block_size=10) for b in (1, 2)]
    handed: dict[int, list[int]] = {1: [], 2: []}
    for round_ in range(12):
        for manager in managers:
            handed[manager.broker_id] += take(manager, 3 + round_ % 5)
    everything = handed[1] + handed[2]
    assert len(everything) == len(set(everything)) > 8 * 10
    blocks = {pid // 10 for pid in handed[1]}, {pid // 10 for pid in handed[2]}
    assert not blocks[0] & blocks[1]  # each block belongs to one broker
    assert latest(zk).last == max(everything) // 10 * 10 + 9


def test_a_claim_that_loses_the_race_reads_again(zk: EmbeddedZooKeeper) -> None:
    rival = ProducerIdManager(2, zk.connect(TIMEOUT_MS), block_size=10)
    take(rival, 1)  # 0..9
    client = Interposed(zk.connect(TIMEOUT_MS), "set", lambda: take(rival, 10))
    manager = ProducerIdManager(1, client, block_size=10)
    # between the manager's read (latest 0..9) and its write, the rival claims 10..19
    assert manager.generate_producer_id() == 20
    assert client.calls == {"get": 2, "set": 2}  # BadVersion, then a fresh read and write
    assert manager.current_block == ProducerIdBlock(1, 20, 29) == latest(zk)


def test_a_creation_that_loses_the_race_claims_the_next_block(zk: EmbeddedZooKeeper) -> None:
    rival = ProducerIdManager(2, zk.connect(TIMEOUT_MS), block_size=10)
    client = Interposed(zk.connect(TIMEOUT_MS), "create", lambda: take(rival, 1))
    manager = ProducerIdManager(1, client, block_size=10)
    assert manager.generate_producer_id() == 10  # NodeExists: the rival took 0..9 first
    assert rival.current_block == ProducerIdBlock(2, 0, 9)
    assert latest(zk) == ProducerIdBlock(1, 10, 19)


def run_threads(count: int, work: Callable[[int], list[int]]) -> list[list[int]]:
    """`work(i)` on `count` threads released together; every result, or the first error."""
    barrier = threading.Barrier(count)
    results: list[list[int]] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(JOIN_S)
            results[index] = work(index)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_S)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    assert not errors, errors
    return results


class ReadTogether:
    """A client whose first read waits until every client sharing `barrier` has read: they
    all see the same znode version, so all but one of their conditional writes must fail."""

    def __init__(self, client: Any, barrier: threading.Barrier) -> None:
        self._client = client
        self._barrier: threading.Barrier | None = barrier
        self.lost_races = 0

    def get(self, path: str) -> Any:
        found = self._client.get(path)
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            barrier.wait(JOIN_S)
        return found

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        try:
            return self._client.set(path, value, version=version)
        except BadVersionError:
            self.lost_races += 1
            raise

    def create(self, path: str, value: bytes, **kwargs: Any) -> Any:
        return self._client.create(path, value, **kwargs)


def test_concurrent_claims_from_many_brokers_stay_disjoint(zk: EmbeddedZooKeeper) -> None:
    zk.connect(TIMEOUT_MS).create(PRODUCER_ID_BLOCK_PATH, b"")  # as Kafka's brokers create it
    together = threading.Barrier(8)
    clients = [ReadTogether(zk.connect(TIMEOUT_MS), together) for _ in range(8)]
    managers = [ProducerIdManager(b, clients[b], block_size=5) for b in range(8)]
    results = run_threads(len(managers), lambda i: take(managers[i], 60))
    assert sum(client.lost_races for client in clients) >= 7  # the first round's losers
    everything = [pid for ids in results for pid in ids]
    assert len(everything) == len(set(everything)) == 8 * 60
    owners: dict[int, int] = {}
    for broker, ids in enumerate(results):
        for pid in ids:
            assert owners.setdefault(pid // 5, broker) == broker  # one owner per block


def test_threads_sharing_one_manager_never_get_the_same_id(zk: EmbeddedZooKeeper) -> None:
    manager = ProducerIdManager(1, zk.connect(TIMEOUT_MS), block_size=7)
    results = run_threads(6, lambda _i: take(manager, 50))
    everything = sorted(pid for ids in results for pid in ids)
    assert everything == list(range(300))  # one broker alone: no block is skipped


# --------------------------------------------------------------------------------------------
# Without ZooKeeper


def test_local_managers_share_the_blocks_of_their_process() -> None:
    blocks = LocalProducerIdBlocks()
    first = LocalProducerIdManager(1, blocks, block_size=10)
    second = LocalProducerIdManager(2, blocks, block_size=10)
    assert take(first, 3) == [0, 1, 2]
    assert take(second, 12) == list(range(10, 22))
    assert take(first, 8) == [3, 4, 5, 6, 7, 8, 9, 30]
    assert blocks.latest == ProducerIdBlock(1, 30, 39)


def test_local_managers_from_threads_stay_disjoint() -> None:
    blocks = LocalProducerIdBlocks()
    managers = [LocalProducerIdManager(b, blocks, block_size=3) for b in range(6)]
    results = run_threads(len(managers), lambda i: take(managers[i], 40))
    everything = [pid for ids in results for pid in ids]
    assert len(everything) == len(set(everything)) == 240


def test_a_broker_without_zookeeper_gets_a_process_local_manager(zk: EmbeddedZooKeeper) -> None:
    local = producer_id_manager(1, None)
    other = producer_id_manager(2, None)
    assert isinstance(local, LocalProducerIdManager)
    assert isinstance(other, LocalProducerIdManager) and local.blocks is other.blocks
    assert not set(take(local, 5)) & set(take(other, 5))
    with_zk = producer_id_manager(1, zk.connect(TIMEOUT_MS), block_size=4)
    assert isinstance(with_zk, ProducerIdManager) and take(with_zk, 5) == [0, 1, 2, 3, 4]


def test_a_block_holds_at_least_one_id() -> None:
    with pytest.raises(ValueError, match="at least one id"):
        LocalProducerIdManager(1, LocalProducerIdBlocks(), block_size=0)
