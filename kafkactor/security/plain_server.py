"""Kafka's `PlainSaslServer` (SASL/PLAIN, RFC 4616) over the users of `PlainLoginModule`'s
JAAS options (`user_<name>="<password>"`): one token, `[authzid] NUL authcid NUL passwd`."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

from kafkactor.security.sasl_server import SaslAuthenticationError, SaslError

__all__ = ["PLAIN", "PlainSaslServer"]

PLAIN: Final = "PLAIN"


class PlainSaslServer:
    """The server side of one SASL/PLAIN exchange. The password is compared in constant time
    and never kept; an authorization id other than the user name is refused, as Kafka does."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    def evaluate_response(self, token: bytes) -> bytes:
        # Kafka's split: up to three NUL-separated parts, whatever follows a third NUL dropped
        text = token.decode("utf-8", errors="replace")
        parts = ["", "", ""]
        start = 0
        for i in range(3):
            end = text.find("\0", start)
            if end == -1:
                parts[i] = text[start:]
                break
            parts[i] = text[start:end]
            start = end + 1
        authorization_id, username, password = parts
        if not username:
            raise SaslError("Authentication failed: username not specified")
        if not password:
            raise SaslError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(
            expected.encode("utf-8"), password.encode("utf-8")
        ):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._authorization_id = username
        return b""

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id
