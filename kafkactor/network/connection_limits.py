"""What a broker's socket server bounds across its connections: Kafka's request memory pool
(`queued.max.request.bytes`, KIP-72), its connection quotas (`max.connections`,
`max.connections.per.ip`, `max.connections.per.ip.overrides`), and the mute of a connection
whose client went over its byte-rate quota (KIP-219), lifted by a task on the broker's timer.

The connections call in on the socket server's loop thread; a timer task and the pool's
listener come back to that loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kafkactor import tracing
from kafkactor.security.connection_quotas import ConnectionQuotas
from kafkactor.security.memory_pool import UNBOUNDED, SimpleMemoryPool
from kafkactor.security.security_config import BrokerSecurityConfig
from kafkactor.timer import Clock, TimerTask

__all__ = ["ConnectionLimits", "connection_limits"]

_log = tracing.get_logger("kafkactor.network")


class Connection(Protocol):
    """What the limits need of a socket server's connection (`network.connection`)."""

    @property
    def connection_id(self) -> str: ...

    @property
    def peer_host(self) -> str: ...

    def retry_memory(self) -> None: ...


class _Unmute(TimerTask):
    """Kafka's `ThrottledChannel`: when its delay has passed, the connection is read again
    (on the socket server's loop)."""

    def __init__(self, delay_ms: int, loop: asyncio.AbstractEventLoop, unmute: Callable[[], None]):
        super().__init__(delay_ms)
        self.loop = loop
        self.unmute = unmute

    def run(self) -> None:
        # RuntimeError: the loop closed meanwhile (the broker stopped), and the connection too
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.unmute)


class ConnectionLimits:
    """The socket server's limits across connections (one per `SocketServer`).

    - `admit(connection)`: a new connection counted, or refused (closed at once by the caller)
      with a `network.connection_refused` event, when `max.connections` or the address's
      limit is reached; connections of `inter_broker_listener` are bound only per address.
    - `pool`: the request memory pool the connections' `FrameDecoder`s allocate from (None
      when `queued.max.request.bytes` is -1); a connection refused memory is told to
      `retry_memory()` once some is released (Kafka unmutes the channels it muted for memory).
    - `mute_for(ms, unmute)`: `unmute` runs on the loop `ms` later, by a task on the broker's
      `timer` (or, without one, the loop's own `call_later`).
    """

    def __init__(
        self,
        broker_id: int,
        clock: Clock,
        *,
        timer: Any = None,
        pool: SimpleMemoryPool | None = None,
        quotas: ConnectionQuotas | None = None,
        inter_broker_listener: str | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.timer = timer
        self.pool = pool if pool is not None and pool.bounded else None
        self.quotas = quotas if quotas is not None else ConnectionQuotas()
        self.inter_broker_listener = inter_broker_listener
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting_for_memory: dict[str, Connection] = {}
        if self.pool is not None:
            self.pool.add_listener(self._memory_released)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the connections live on (set when the socket server starts serving)."""
        self._loop = loop

    # -- connection quotas --------------------------------------------------------------------

    def admit(self, listener: str, peer_host: str, peer: str) -> bool:
        protected = listener == self.inter_broker_listener
        if self.quotas.inc(peer_host, protected=protected):
            return True
        _log.info(
            "network.connection_refused",
            broker=self.broker_id,
            listener=listener,
            peer_address=peer,
            reason=self.quotas.refusal,
            ts_ms=self.clock.now_ms(),
        )
        return False

    def closed(self, connection: Connection, *, admitted: bool) -> None:
        self._waiting_for_memory.pop(connection.connection_id, None)
        if admitted:
            self.quotas.dec(connection.peer_host)

    # -- memory pool --------------------------------------------------------------------------

    def release(self, size: int) -> None:
        if self.pool is not None and size > 0:
            self.pool.release(size)

    def wait_for_memory(self, connection: Connection) -> None:
        self._waiting_for_memory[connection.connection_id] = connection

    def _memory_released(self) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(self._wake_waiting)

    def _wake_waiting(self) -> None:
        """Memory came back: each connection waiting for it tries again, in the order they
        began waiting, until the pool runs out again."""
        for connection_id, connection in list(self._waiting_for_memory.items()):
            if self.pool is not None and self.pool.is_out_of_memory():
                return
            del self._waiting_for_memory[connection_id]
            connection.retry_memory()

    @property
    def waiting_for_memory(self) -> int:
        return len(self._waiting_for_memory)

    # -- client quota throttling --------------------------------------------------------------

    def mute_for(self, delay_ms: int, unmute: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None:
            unmute()
        elif self.timer is not None:
            self.timer.add(_Unmute(delay_ms, loop, unmute))
        else:
            loop.call_later(delay_ms / 1000, unmute)


def connection_limits(
    broker_id: int,
    clock: Clock,
    *,
    timer: Any,
    socket_request_max_bytes: int,
    security: BrokerSecurityConfig | None = None,
    memory_pool: SimpleMemoryPool | None = None,
    queued_max_request_bytes: int | None = None,
    max_connections: int | None = None,
    max_connections_per_ip: int | None = None,
    max_connections_per_ip_overrides: Mapping[str, int] | None = None,
) -> ConnectionLimits:
    """A socket server's limits: each setting as given, else the broker's `security` config's,
    else Kafka's default (no pool, no connection limit); `memory_pool` a pool built by the
    broker, else one of `queued.max.request.bytes` whose largest grant is one
    `socket.request.max.bytes` frame (a smaller pool is refused, as Kafka refuses it)."""
    config = security if security is not None else BrokerSecurityConfig()
    if memory_pool is None:
        size = (
            queued_max_request_bytes
            if queued_max_request_bytes is not None
            else config.queued_max_request_bytes
        )
        if size > 0:
            memory_pool = SimpleMemoryPool(size, socket_request_max_bytes)
        elif size != UNBOUNDED:
            raise ValueError(f"queued.max.request.bytes must be positive or -1, got {size}")
    quotas = ConnectionQuotas(
        max_connections if max_connections is not None else config.max_connections,
        max_connections_per_ip
        if max_connections_per_ip is not None
        else config.max_connections_per_ip,
        max_connections_per_ip_overrides
        if max_connections_per_ip_overrides is not None
        else config.max_connections_per_ip_overrides,
    )
    return ConnectionLimits(
        broker_id,
        clock,
        timer=timer,
        pool=memory_pool,
        quotas=quotas,
        inter_broker_listener=config.inter_broker.listener if security is not None else None,
    )
