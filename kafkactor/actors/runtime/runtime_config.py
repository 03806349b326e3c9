"""How a broker runs its actors: on a shared dispatcher, or a thread per actor."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kafkactor.actors.runtime.dispatcher import DEFAULT_THROUGHPUT, Dispatcher

# The environment variable that sets the default runtime of every broker this process starts
# (`./dev test` runs the suite on either: KAFKACTOR_ACTOR_RUNTIME=threads ./dev test).
ACTOR_RUNTIME_ENV = "KAFKACTOR_ACTOR_RUNTIME"
DISPATCHER, THREADS = "dispatcher", "threads"
RUNTIMES = (DISPATCHER, THREADS)


def default_runtime() -> str:
    """The runtime named by KAFKACTOR_ACTOR_RUNTIME, else the dispatcher."""
    return os.environ.get(ACTOR_RUNTIME_ENV, "").strip().lower() or DISPATCHER


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorRuntimeConfig:
    """A broker's actor runtime (`actor.runtime`, `actor.dispatcher.throughput`).

    "dispatcher": the broker's partitions, purgatories and replica manager share one
    `Dispatcher` thread, `throughput` messages per actor per turn; "threads": each of them is a
    thread of its own (Pykka's ThreadingActor). Every other actor (the Reaper, the coordinators,
    the controller, fetchers, the network) keeps its own thread either way: those block.
    """

    runtime: str = field(default_factory=default_runtime)
    throughput: int = DEFAULT_THROUGHPUT

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(
                f"actor.runtime must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}"
            )
        if self.throughput < 1:
            raise ValueError(f"actor.dispatcher.throughput must be positive, not {self.throughput}")

    def dispatcher(self, name: str) -> Dispatcher | None:
        """A new dispatcher for a broker (None with a thread per actor)."""
        if self.runtime == THREADS:
            return None
        return Dispatcher(name, throughput=self.throughput)
