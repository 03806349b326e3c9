"""Kafka's `SaslClientAuthenticator`: a broker authenticating to a peer's SASL listener.

The exchange, as Kafka's client runs it since KIP-152: ApiVersions (which versions of
SaslHandshake and SaslAuthenticate the peer serves), SaslHandshake v1 naming the mechanism,
then the mechanism's tokens inside SaslAuthenticate (v0-2, the highest both sides know):

- PLAIN: one token, `\\0<username>\\0<password>` (RFC 4616, no authorization id);
- SCRAM-SHA-256 / SCRAM-SHA-512: client-first, server-first, client-final, server-final
  (RFC 5802 / RFC 7677 through `scramp`'s ScramClient, which also checks the server's
  signature, so a peer that does not know the password is refused too).

`SaslClient` is the pure state machine (requests to send, answers to read); `authenticate`
drives it over an asyncio stream. Every failure is a `SaslClientError` whose message never
holds the password or a token: a peer's refusal (Kafka's SASL_AUTHENTICATION_FAILED with its
message, UNSUPPORTED_SASL_MECHANISM with the mechanisms it offers), an old peer, a malformed
answer.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field
from typing import Any, Final

from scramp import ScramClient, ScramException

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import (
    BadResponseError,
    build,
    decode_response,
    encode_request,
    request_type,
)
from kafkactor.security.scram_credential import SCRAM_MECHANISMS

__all__ = ["SaslClient", "SaslClientError", "SaslLogin", "authenticate"]

API_VERSIONS_VERSION: Final = 0  # every peer answers it, before authentication too
HANDSHAKE_VERSION: Final = 1  # KIP-152: the tokens then travel inside SaslAuthenticate
MAX_AUTHENTICATE_VERSION: Final = 2
MECHANISMS: Final = ("PLAIN", *SCRAM_MECHANISMS)
_SIZE: Final = struct.Struct(">i")
_MAX_FRAME: Final = 1 << 20  # a SASL answer is small; more is not one


class SaslClientError(Exception):
    """The peer did not authenticate this broker (or could not be asked); the message says
    why, never with the password or a token."""


@dataclass(frozen=True, slots=True)
class SaslLogin:
    """The broker's own login on the inter-broker listener: the mechanism
    (sasl.mechanism.inter.broker.protocol) and the JAAS entry's username and password."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism!r} is not one of {MECHANISMS}")


@dataclass(frozen=True, slots=True)
class _Request:
    api_key: int
    version: int
    body: Any


class SaslClient:
    """One authentication's states (Kafka's SaslClientAuthenticator): `next_request()` is what
    to send (None once authenticated), `receive(body)` reads its answer."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self.authenticate_version = 0
        self.complete = False
        self._pending: _Request | None = _Request(
            ApiKey.API_VERSIONS,
            API_VERSIONS_VERSION,
            build(request_type(ApiKey.API_VERSIONS, API_VERSIONS_VERSION)),
        )
        self._scram: Any = None
        self._round = 0  # SaslAuthenticate rounds answered

    def next_request(self) -> _Request | None:
        return self._pending

    def receive(self, body: Any) -> None:
        """Read the answer to `next_request()`; SaslClientError when the peer refuses."""
        request = self._pending
        if request is None:
            raise SaslClientError("an answer after authentication completed")
        if request.api_key == ApiKey.API_VERSIONS:
            self._versions(body)
        elif request.api_key == ApiKey.SASL_HANDSHAKE:
            self._handshake(body)
        else:
            self._authenticated(body)

    def _versions(self, body: Any) -> None:
        error = int(body.error_code)
        if error != ErrorCode.NONE:
            raise SaslClientError(f"ApiVersions answered error {_error_name(error)}")
        served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        handshake = served.get(ApiKey.SASL_HANDSHAKE)
        authenticate = served.get(ApiKey.SASL_AUTHENTICATE)
        if handshake is None or handshake[1] < HANDSHAKE_VERSION or authenticate is None:
            raise SaslClientError(
                "the peer does not serve SaslHandshake v1 and SaslAuthenticate (KIP-152)"
            )
        self.authenticate_version = min(MAX_AUTHENTICATE_VERSION, authenticate[1])
        schema = request_type(ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION)
        self._pending = _Request(
            ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, build(schema, mechanism=self.login.mechanism)
        )

    def _handshake(self, body: Any) -> None:
        error = int(body.error_code)
        if error == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(str(m) for m in body.mechanisms) or "none"
            raise SaslClientError(
                f"the peer does not enable SASL mechanism {self.login.mechanism} "
                f"(it enables: {offered})"
            )
        if error != ErrorCode.NONE:
            raise SaslClientError(f"SaslHandshake answered error {_error_name(error)}")
        self._pending = self._authenticate(self._first_token())

    def _first_token(self) -> bytes:
        login = self.login
        if login.mechanism == "PLAIN":
            return b"\0" + login.username.encode() + b"\0" + login.password.encode()
        self._scram = ScramClient([login.mechanism], login.username, login.password)
        return str(self._scram.get_client_first()).encode()

    def _authenticate(self, token: bytes) -> _Request:
        schema = request_type(ApiKey.SASL_AUTHENTICATE, self.authenticate_version)
        return _Request(
            ApiKey.SASL_AUTHENTICATE, self.authenticate_version, build(schema, auth_bytes=token)
        )

    def _authenticated(self, body: Any) -> None:
        error = int(body.error_code)
        if error != ErrorCode.NONE:
            message = body.error_message or _error_name(error)
            raise SaslClientError(f"{self.login.mechanism} authentication refused: {message}")
        self._round += 1
        if self.login.mechanism == "PLAIN" or self._round == 2:
            if self._scram is not None:
                try:  # the server's signature: a peer that does not know the password fails
                    self._scram.set_server_final(bytes(body.auth_bytes).decode())
                except (ScramException, UnicodeDecodeError) as failure:
                    raise SaslClientError(
                        f"{self.login.mechanism}: the peer's final message failed: {failure}"
                    ) from None
            self._pending = None
            self.complete = True
            return
        try:
            self._scram.set_server_first(bytes(body.auth_bytes).decode())
            final = str(self._scram.get_client_final()).encode()
        except (ScramException, UnicodeDecodeError) as failure:
            raise SaslClientError(
                f"{self.login.mechanism}: the peer's first message failed: {failure}"
            ) from None
        self._pending = self._authenticate(final)


def _error_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return str(code)


async def authenticate(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    login: SaslLogin,
    client_id: str,
) -> None:
    """Authenticate on a fresh connection to a SASL listener (see the module doc); returns
    once the peer accepted the login, raises SaslClientError otherwise (OSError and
    IncompleteReadError as the connection fails)."""
    client = SaslClient(login)
    correlation_id = 0
    while (request := client.next_request()) is not None:
        correlation_id += 1
        writer.write(
            encode_request(
                request.api_key, request.version, correlation_id, client_id, request.body
            )
        )
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        if not 0 < size <= _MAX_FRAME:
            raise SaslClientError(f"a SASL answer of {size} bytes")
        frame = await reader.readexactly(size)
        try:
            answered, body = decode_response(request.api_key, request.version, frame)
        except BadResponseError as error:
            raise SaslClientError(f"a malformed SASL answer: {error}") from None
        if answered != correlation_id:
            raise SaslClientError(f"an answer to correlation id {answered}, not {correlation_id}")
        client.receive(body)
