"""Scatter-gather: one request served by sub-requests to several partitions, answered once."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactor.actors.runtime import TraceContext
from kafkactor.messages import Request, Response


@dataclass(slots=True)
class Gather:
    """Responses to a fan-out of sub-requests, and what to do when the last one arrives."""

    waiting: int
    on_done: Callable[[dict[str, Response]], None]
    origin: Request | None = None  # answered with an error if the broker stops first
    trace: TraceContext | None = None
    responses: dict[str, Response] = field(default_factory=dict)


class ScatterGather:
    """The replica manager's outstanding fan-outs (a produce to many partitions, a
    LeaderAndIsr for many replicas), keyed by the correlation id of each sub-request.

    `scatter` numbers the sub-requests; `gather` takes each response and runs the fan-out's
    `on_done` with every response once the last arrives; `abort` hands back the fan-outs
    still waiting (the broker is stopping), each once.
    """

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[Gather, str]] = {}

    def scatter(
        self,
        keys: Mapping[str, Any],
        on_done: Callable[[dict[str, Response]], None],
        *,
        origin: Request | None = None,
        trace: TraceContext | None = None,
    ) -> dict[str, int]:
        """Start a fan-out over `keys`; returns each key's correlation id."""
        gather = Gather(waiting=len(keys), on_done=on_done, origin=origin, trace=trace)
        ids = {}
        for key in keys:
            correlation_id = next(self._ids)
            self._waiting[correlation_id] = (gather, key)
            ids[key] = correlation_id
        return ids

    def gather(self, response: Response) -> None:
        entry = self._waiting.pop(response.correlation_id, None)
        if entry is None:
            return  # not ours, or from a fan-out already aborted
        gather, key = entry
        gather.responses[key] = response
        gather.waiting -= 1
        if gather.waiting == 0:
            gather.on_done(gather.responses)

    def abort(self) -> list[Gather]:
        """Every fan-out still waiting, once each; none is waiting afterwards."""
        pending = {id(g): g for g, _ in self._waiting.values()}
        self._waiting.clear()
        return list(pending.values())
