"""Kafka's `ScramCredential`: what the broker stores for a SCRAM user, never the password."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["SCRAM_MECHANISMS", "ScramCredential", "ScramCredentialLookup"]

SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True, repr=False)
class ScramCredential:
    """A user's SCRAM credential for one mechanism (RFC 5802's salt, StoredKey, ServerKey and
    iteration count), as `/config/users/<user>` holds it:
    `SCRAM-SHA-256=salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096`. Its repr
    shows nothing: a credential never reaches an event or a log line."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


# (mechanism, user name) -> the user's credential, or None for an unknown user
ScramCredentialLookup = Callable[[str, str], ScramCredential | None]
