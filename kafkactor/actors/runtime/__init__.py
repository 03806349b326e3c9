"""The actor system kafkactor's brokers run on: traced pykka actors, addresses and mailboxes.

Every actor of a broker is a `TracedActor` named by an address string (`addresses`); a
`Directory` resolves addresses to mailboxes; `hops` wraps each message in a traced envelope;
a `Client` is the blocking edge where callers outside the actor system send requests. A
`Dispatcher` runs many actors on one shared thread (`ActorRuntimeConfig` picks it or a thread
per actor)."""

from kafkactor.actors.runtime import addresses, hops
from kafkactor.actors.runtime.actor import TraceContext, TracedActor, UnhandledMessageError, handles
from kafkactor.actors.runtime.client import Client, MailboxFullError, RequestTimeoutError
from kafkactor.actors.runtime.directory import Directory, Mailbox
from kafkactor.actors.runtime.dispatcher import Dispatcher, stop_actor
from kafkactor.actors.runtime.runtime_config import ActorRuntimeConfig

__all__ = [
    "ActorRuntimeConfig",
    "Client",
    "Directory",
    "Dispatcher",
    "Mailbox",
    "MailboxFullError",
    "RequestTimeoutError",
    "TraceContext",
    "TracedActor",
    "UnhandledMessageError",
    "addresses",
    "handles",
    "hops",
    "stop_actor",
]
