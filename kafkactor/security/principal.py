"""Kafka's `KafkaPrincipal`: who a connection is, as ACLs and quotas name it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["ANONYMOUS", "KafkaPrincipal"]

USER_TYPE: Final = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal, `<type>:<name>` (Kafka's `KafkaPrincipal`): `User:alice` after SASL as
    alice; the certificate's distinguished name (`User:CN=client,O=...`) after TLS client
    authentication; `User:ANONYMOUS` on a PLAINTEXT listener or TLS without a client
    certificate."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` (as ACLs and `super.users` write it); ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a principal of the form <type>:<name>, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS: Final = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
