"""What a SASL mechanism's server side is to the authenticator (Java's `SaslServer` as Kafka
uses it), and the two ways it fails.

`evaluate_response` takes the client's next token and returns the server's challenge (b"" when
there is none); once `complete`, `authorization_id` is who authenticated. A failure raises
`SaslAuthenticationError`, whose message goes to the client as it is (Kafka's
`SaslAuthenticationException`: PLAIN's "Invalid username or password"), or `SaslError`
(Kafka's `SaslException`), whose detail the client never sees: it gets Kafka's generic
"Authentication failed during authentication due to invalid credentials with SASL mechanism
<mechanism>", so that a SCRAM client cannot tell an unknown user from a wrong password.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SaslAuthenticationError", "SaslError", "SaslServer"]


class SaslAuthenticationError(Exception):
    """A failed authentication whose message is the client's (Kafka's
    `SaslAuthenticationException`)."""


class SaslError(Exception):
    """A failed authentication whose detail stays on the broker (Kafka's `SaslException`)."""


class SaslServer(Protocol):
    """One connection's server side of one SASL mechanism."""

    mechanism: str

    def evaluate_response(self, token: bytes) -> bytes: ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...
