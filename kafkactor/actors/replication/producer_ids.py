"""Producer ids for idempotent producers: Kafka's ZooKeeper-era ``ProducerIdManager``.

InitProducerId gives an idempotent producer an id that no other producer of the cluster has.
With ZooKeeper (Kafka 0.11 to 2.x, and 3.x clusters still on ZooKeeper) every broker hands out
ids from a block of 1000 it has claimed: the znode ``/latest_producer_id_block`` holds the
latest block claimed by any broker, as
``{"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}`` (both ends
inclusive and, as Kafka writes them, JSON strings; numbers are read too). A broker claims the
block after it with a setData conditional on the znode version it read; when another broker
claimed one in between, the write fails with BadVersion and the broker reads again. Two brokers
therefore never hand out the same id. The rest of a block whose broker stops is never used, as
in Kafka.

Where we differ from Kafka's ``ZkProducerIdManager``:

- the first block is claimed on the first `generate_producer_id`, not when the manager is
  built, so building one does no ZooKeeper I/O;
- an absent znode is created holding the first block (Kafka creates it empty when a broker
  starts, with its other persistent paths; an empty znode is read as "no block yet" here too);
- after a BadVersion Kafka compares the znode with the block it tried to write (its write may
  have succeeded and only the answer been lost) and takes the block when they match. We do not:
  two managers with the same broker id could then both take one block. Such a write simply
  costs a block.

Without ZooKeeper (a `Cluster` with ``zookeeper=None``), `LocalProducerIdManager` hands out
ids the same way from `LocalProducerIdBlocks`, an in-process stand-in for the znode shared by
every broker of the process.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkactor.actors.controller.zk_data import MalformedZnodeError

__all__ = [
    "PRODUCER_ID_BLOCK_PATH",
    "PRODUCER_ID_BLOCK_SIZE",
    "LocalProducerIdBlocks",
    "LocalProducerIdManager",
    "ProducerIdBlock",
    "ProducerIdGenerator",
    "ProducerIdManager",
    "ProducerIdsExhaustedError",
    "producer_id_manager",
]

PRODUCER_ID_BLOCK_PATH: Final = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE: Final = 1000
_VERSION: Final = 1
_MAX_PRODUCER_ID: Final = 2**63 - 1


class ProducerIdsExhaustedError(RuntimeError):
    """The next block would pass the largest int64 producer id (Kafka's fatal error)."""


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Kafka's ``ProducerIdsBlock``: the ids `first`..`last` (inclusive) claimed by a broker."""

    broker_id: int
    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    @staticmethod
    def initial(broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The first block of a cluster: ids from 0."""
        return ProducerIdBlock(broker_id, 0, size - 1)

    def following(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block after this one, claimed by `broker_id`."""
        if self.last > _MAX_PRODUCER_ID - size:
            raise ProducerIdsExhaustedError(
                f"no producer ids left after block {self.first}..{self.last}"
            )
        return ProducerIdBlock(broker_id, self.last + 1, self.last + size)

    def encode(self) -> bytes:
        """The znode payload, as Kafka writes it (the ends as JSON strings)."""
        body = {
            "version": _VERSION,
            "broker": self.broker_id,
            "block_start": str(self.first),
            "block_end": str(self.last),
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        """A znode payload; `MalformedZnodeError` when it is not a block Kafka could write."""
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise MalformedZnodeError(PRODUCER_ID_BLOCK_PATH, f"not JSON ({error})") from None
        if not isinstance(body, dict):
            raise MalformedZnodeError(PRODUCER_ID_BLOCK_PATH, f"not a JSON object: {body!r}")
        broker = body.get("broker")
        if type(broker) is not int:
            raise MalformedZnodeError(PRODUCER_ID_BLOCK_PATH, f"broker is {broker!r}")
        first = _block_end(body, "block_start")
        last = _block_end(body, "block_end")
        if not 0 <= first <= last:
            raise MalformedZnodeError(PRODUCER_ID_BLOCK_PATH, f"empty block {first}..{last}")
        return cls(broker, first, last)


def _block_end(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if type(value) is int:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise MalformedZnodeError(PRODUCER_ID_BLOCK_PATH, f"{key} is {value!r}, not a producer id")


class ProducerIdGenerator(Protocol):
    """What InitProducerId needs: a fresh producer id on each call."""

    def generate_producer_id(self) -> int: ...


class _BlockAllocator:
    """Hands out the ids of a claimed block one by one, claiming the next block when it is
    used up (Kafka's ``generateProducerId``). Thread-safe: one lock around both."""

    def __init__(self, broker_id: int, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"a producer id block holds at least one id, not {block_size}")
        self.broker_id = broker_id
        self.block_size = block_size
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next = 0

    @property
    def current_block(self) -> ProducerIdBlock | None:
        """The block ids are taken from (None before the first id)."""
        return self._block

    def generate_producer_id(self) -> int:
        """The next id of the current block; claims a new block first when it is used up."""
        with self._lock:
            if self._block is None or self._next > self._block.last:
                self._block = self._claim_block()
                self._next = self._block.first
            producer_id = self._next
            self._next += 1
            return producer_id

    def _claim_block(self) -> ProducerIdBlock:
        raise NotImplementedError


class ProducerIdManager(_BlockAllocator):
    """Kafka's ZooKeeper-era ``ProducerIdManager`` for one broker: blocks claimed in
    ``/latest_producer_id_block`` with a versioned setData (see the module docstring).

    `client` is a started kazoo-compatible client: kazoo's own or `kafkactor.zk_model`'s, whose
    errors are kazoo's. ZooKeeper errors other than the races handled here propagate.
    """

    def __init__(
        self, broker_id: int, client: Any, *, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> None:
        super().__init__(broker_id, block_size)
        self.client = client

    def _claim_block(self) -> ProducerIdBlock:
        client = self.client
        while True:
            try:
                data, stat = client.get(PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                block = ProducerIdBlock.initial(self.broker_id, self.block_size)
                try:
                    client.create(PRODUCER_ID_BLOCK_PATH, block.encode(), makepath=True)
                except NodeExistsError:
                    continue  # another broker created it first: claim the block after its own
                return block
            if data:
                block = ProducerIdBlock.decode(data).following(self.broker_id, self.block_size)
            else:
                block = ProducerIdBlock.initial(self.broker_id, self.block_size)
            try:
                client.set(PRODUCER_ID_BLOCK_PATH, block.encode(), version=stat.version)
            except (BadVersionError, NoNodeError):
                continue  # another claim came in between: read the znode again
            return block


class LocalProducerIdBlocks:
    """The latest claimed block, kept in the process instead of ZooKeeper (no ZooKeeper).

    Claims are serialised by a lock, so every manager sharing one instance gets its own blocks.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: ProducerIdBlock | None = None

    @property
    def latest(self) -> ProducerIdBlock | None:
        return self._latest

    def claim(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block after the latest one (the first block when none), now claimed."""
        with self._lock:
            latest = self._latest
            block = (
                ProducerIdBlock.initial(broker_id, size)
                if latest is None
                else latest.following(broker_id, size)
            )
            self._latest = block
            return block


_PROCESS_BLOCKS = LocalProducerIdBlocks()


class LocalProducerIdManager(_BlockAllocator):
    """`ProducerIdManager` for a cluster without ZooKeeper: the same blocks, claimed from
    `LocalProducerIdBlocks` (by default the one shared by the whole process)."""

    def __init__(
        self,
        broker_id: int,
        blocks: LocalProducerIdBlocks | None = None,
        *,
        block_size: int = PRODUCER_ID_BLOCK_SIZE,
    ) -> None:
        super().__init__(broker_id, block_size)
        self.blocks = blocks if blocks is not None else _PROCESS_BLOCKS

    def _claim_block(self) -> ProducerIdBlock:
        return self.blocks.claim(self.broker_id, self.block_size)


def producer_id_manager(
    broker_id: int, client: Any | None, *, block_size: int = PRODUCER_ID_BLOCK_SIZE
) -> ProducerIdManager | LocalProducerIdManager:
    """A broker's producer id manager: through ZooKeeper when `client` is given, else local."""
    if client is None:
        return LocalProducerIdManager(broker_id, block_size=block_size)
    return ProducerIdManager(broker_id, client, block_size=block_size)


class CurrentZkClient:
    """The broker's ZooKeeper client of the moment (a new one after a session expiry), for the
    producer id manager, which outlives sessions."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session.client, name)
