"""Kafka's delayed-operation purgatory (`DelayedOperationPurgatory`) and the Reaper.

`Purgatory` and `DelayedOperation` are the pure core: operations watched by key, completed at
most once, expired by the timing wheel. `PurgatoryActor` owns one `Purgatory`; the `ReaperActor`
advances a broker's one shared timer and hands expired operations back to their purgatories."""

from kafkactor.actors.purgatory.purgatory import DelayedOperation, Purgatory
from kafkactor.actors.purgatory.purgatory_actor import (
    EXPIRED,
    CompletedBy,
    DelayedAwaitValue,
    OperationFactory,
    PurgatoryActor,
    RequestOperation,
)
from kafkactor.actors.purgatory.reaper import REAPER_POLL_MS, ExpirationDelivery, ReaperActor

__all__ = [
    "EXPIRED",
    "REAPER_POLL_MS",
    "CompletedBy",
    "DelayedAwaitValue",
    "DelayedOperation",
    "ExpirationDelivery",
    "OperationFactory",
    "Purgatory",
    "PurgatoryActor",
    "ReaperActor",
    "RequestOperation",
]
