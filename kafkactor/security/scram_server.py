"""Kafka's `ScramSaslServer` (SCRAM-SHA-256 and SCRAM-SHA-512, RFC 5802/7677) over a
`ScramCredentialLookup`, with scramp doing the SCRAM computations.

Two tokens: the client's first message (`n,,n=<user>,r=<nonce>`) is answered with the salt,
the iteration count and the combined nonce; the client's final message with its proof is
checked against the user's StoredKey and answered with the server signature. An unknown user
and a wrong proof fail alike (`SaslError`: the client hears Kafka's generic "invalid
credentials" message, never which); an authorization id other than the user name is refused
with Kafka's own message.
"""

from __future__ import annotations

import re
from typing import Any, Final

from scramp import ScramException, ScramMechanism
from scramp.core import Nonce

from kafkactor.security.sasl_server import SaslAuthenticationError, SaslError
from kafkactor.security.scram_credential import (
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramCredentialLookup,
)

__all__ = ["MIN_ITERATIONS", "ScramSaslServer"]

MIN_ITERATIONS: Final = 4096  # Kafka's ScramMechanism.minIterations, both mechanisms

# Kafka's ClientFirstMessage: GS2 flag "n" (no channel binding), an optional authzid, the bare
# message whose first attribute is the user name
_CLIENT_FIRST: Final = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<name>[^,]*),.*)", re.S
)


def _username(sasl_name: str) -> str:
    """Kafka's ScramFormatter.username: `=2C` is a comma, `=3D` an equals sign."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    """The server side of one SCRAM exchange for `mechanism` (SCRAM-SHA-256 / SCRAM-SHA-512),
    asking `credentials` for the user's stored credential."""

    def __init__(self, mechanism: str, credentials: ScramCredentialLookup) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._credentials = credentials
        self._server: Any = None  # scramp's ScramServer, untyped
        self._username: str | None = None
        self._complete = False
        self._failed = False

    def evaluate_response(self, token: bytes) -> bytes:
        if self._failed or self._complete:
            raise SaslError(f"Unexpected challenge in Sasl server state {self._state()}")
        try:
            if self._server is None:
                return self._client_first(token)
            return self._client_final(token)
        except (SaslError, SaslAuthenticationError):
            self._failed = True
            self._server = None
            raise

    def _state(self) -> str:
        return "FAILED" if self._failed else "COMPLETE"

    def _client_first(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SCRAM client first message format") from None
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslError("Invalid SCRAM client first message format")
        username = _username(match["name"])
        credential = self._credentials(self.mechanism, username)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and _username(authzid) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if authzid:  # scramp accepts no authzid at all; one equal to the user name is refused
            raise SaslError("an authorization id in the client first message is not supported")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism}"
            )
        server = ScramMechanism(self.mechanism).make_server(_auth_fn(credential))
        try:
            server.set_client_first(text)
            first: str = server.get_server_first()
        except ScramException as error:
            raise SaslError(f"Invalid SCRAM client first message: {error}") from None
        self._server = server
        self._username = username
        return first.encode("utf-8")

    def _client_final(self, token: bytes) -> bytes:
        server = self._server
        try:
            text = token.decode("utf-8")
            self._accept_nonce(text)
            server.set_client_final(text)
            final: str = server.get_server_final()
        except (ScramException, UnicodeDecodeError):
            raise SaslError("Invalid client credentials") from None
        self._server = None
        self._complete = True
        return final.encode("utf-8")

    def _accept_nonce(self, client_final: str) -> None:
        """Kafka's nonce check (3.8.1+, CVE-2024-56128): the client's final nonce must end with
        the one the server sent. librdkafka before 2.6.1 prepends its own nonce once more
        (`r=<client><client><server>`), which Kafka accepts and scramp, comparing for equality,
        would not: such a nonce is taken as the exchange's, the proof still checked over the
        client's own message. Any other nonce is scramp's to refuse."""
        sent = str(self._server.nonce)
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                nonce = attribute[2:]
                if nonce != sent and nonce.endswith(sent):
                    self._server.nonce = Nonce(nonce)
                return

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._username is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._username


def _auth_fn(credential: ScramCredential) -> object:
    def lookup(_username: str) -> tuple[bytes, bytes, bytes, int]:
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    return lookup
