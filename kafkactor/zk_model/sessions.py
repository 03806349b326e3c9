"""Client sessions: ids, passwords, negotiated timeouts, liveness (ZooKeeper's SessionTracker)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from kazoo.exceptions import SessionExpiredError

# ZooKeeper derives a session's password from its id and this constant.
_SUPER_SECRET = 0xB3415C00
_PASSWORD_BYTES = 16


@dataclass(slots=True)
class Session:
    """One ZooKeeper session: alive while a heartbeat arrives at least every `timeout_ms`."""

    session_id: int
    password: bytes
    timeout_ms: int
    last_heard_ms: int

    @property
    def deadline_ms(self) -> int:
        """When the session expires unless a heartbeat arrives before."""
        return self.last_heard_ms + self.timeout_ms


class SessionTracker:
    """ZooKeeper's `SessionTracker`: opens sessions, records heartbeats, finds expired ones.

    A requested timeout is clamped to [2, 20] ticks (the server's minSessionTimeout and
    maxSessionTimeout defaults). Session ids count up from `first_session_id`; by default the
    first is (server id 1 << 56) plus a random part, so that a new server hands out ids no client
    of an earlier one holds. A session is due once `now >= last heartbeat + timeout` (a real
    server rounds expiry up to its next tick; this tracker does not).
    """

    __slots__ = ("_next_id", "_sessions", "tick_ms")

    def __init__(self, *, tick_ms: int = 2000, first_session_id: int | None = None) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms must be positive, got {tick_ms}")
        self.tick_ms = tick_ms
        self._next_id = (
            first_session_id
            if first_session_id is not None
            else (1 << 56) | (random.getrandbits(32) << 16)
        )
        self._sessions: dict[int, Session] = {}

    @property
    def min_timeout_ms(self) -> int:
        return 2 * self.tick_ms

    @property
    def max_timeout_ms(self) -> int:
        return 20 * self.tick_ms

    def negotiate(self, requested_ms: int) -> int:
        """The timeout the server grants for a requested one."""
        return min(max(requested_ms, self.min_timeout_ms), self.max_timeout_ms)

    def open(self, requested_timeout_ms: int, now_ms: int) -> Session:
        session_id = self._next_id
        self._next_id += 1
        password = random.Random(session_id ^ _SUPER_SECRET).randbytes(_PASSWORD_BYTES)
        session = Session(session_id, password, self.negotiate(requested_timeout_ms), now_ms)
        self._sessions[session_id] = session
        return session

    def get(self, session_id: int) -> Session | None:
        return self._sessions.get(session_id)

    def check(self, session_id: int) -> Session:
        """The live session `session_id`; SessionExpiredError when it is not (or no longer) open."""
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionExpiredError(f"session 0x{session_id:x} is not live")
        return session

    def touch(self, session_id: int, now_ms: int) -> int:
        """Record a heartbeat of a live session; returns its new deadline."""
        session = self.check(session_id)
        session.last_heard_ms = max(session.last_heard_ms, now_ms)
        return session.deadline_ms

    def due(self, now_ms: int) -> list[int]:
        """The sessions that have expired by `now_ms`, earliest deadline first."""
        expired = [s for s in self._sessions.values() if s.deadline_ms <= now_ms]
        expired.sort(key=lambda s: (s.deadline_ms, s.session_id))
        return [s.session_id for s in expired]

    def remove(self, session_id: int) -> Session | None:
        return self._sessions.pop(session_id, None)

    def ids(self) -> list[int]:
        """The live session ids, oldest first."""
        return list(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)
