"""The actor system kafkactor's brokers run on: traced pykka actors, addresses and mailboxes.

Every actor of a broker is a `TracedActor` named by an address string (`addresses`); a
`Directory` resolves addresses to mailboxes; `hops` wraps each message in a traced envelope;
a `Client` is the blocking edge where callers outside the actor system send requests."""

from kafkactor.actors.runtime import addresses, hops
from kafkactor.actors.runtime.actor import TraceContext, TracedActor, UnhandledMessageError, handles
from kafkactor.actors.runtime.client import Client, MailboxFullError, RequestTimeoutError
from kafkactor.actors.runtime.directory import Directory, Mailbox

__all__ = [
    "Client",
    "Directory",
    "Mailbox",
    "MailboxFullError",
    "RequestTimeoutError",
    "TraceContext",
    "TracedActor",
    "UnhandledMessageError",
    "addresses",
    "handles",
    "hops",
]
