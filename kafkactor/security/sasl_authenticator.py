"""Kafka's `SaslServerAuthenticator`: the SASL exchange of one connection on a SASL listener,
before any request reaches KafkaApis. Pure: frames in, frames to write and a verdict out.

The states are Kafka's: INITIAL_REQUEST → HANDSHAKE_OR_VERSIONS_REQUEST (a valid Kafka request
was read) → HANDSHAKE_REQUEST (after ApiVersions) → AUTHENTICATE (after a SaslHandshake naming
an enabled mechanism) → COMPLETE, or FAILED. Only ApiVersions and SaslHandshake are served
before the handshake; after a SaslHandshake v1 every token comes in a SaslAuthenticate request
(KIP-152, v0-2; v1+ answer a session lifetime of 0: no re-authentication is required), after a
v0 handshake as a raw size-prefixed token (Kafka 0.10's framing), answered the same way.

How a failure ends, as Kafka's authenticator and selector end it:
- an authentication failure (wrong credentials, an unsupported mechanism, an unexpected request
  during the exchange: Kafka's `AuthenticationException`s) is `delayed`: the connection stops
  reading and is closed `connection.failed.authentication.delay.ms` later, after writing the
  failure's `response` if it has one (SASL_AUTHENTICATION_FAILED with Kafka's message, or
  UNSUPPORTED_SASL_MECHANISM with the enabled mechanisms);
- a malformed frame, an unsupported version, a second ApiVersions, or a SASL error after a v0
  handshake (Kafka's `InvalidRequestException`, `IOException`s) closes the connection at once.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import (
    BadRequestError,
    UnsupportedApiVersions,
    build,
    decode_request,
    encode_response,
    nested,
    response_type,
)
from kafkactor.network.steps import NO_THROTTLE
from kafkactor.security.plain_server import PLAIN, PlainSaslServer
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.sasl_server import SaslAuthenticationError, SaslError, SaslServer
from kafkactor.security.scram_credential import SCRAM_MECHANISMS, ScramCredentialLookup
from kafkactor.security.scram_server import ScramSaslServer

__all__ = [
    "AuthenticationFailure",
    "SaslOutcome",
    "SaslServerAuthenticator",
    "SaslState",
    "sasl_servers",
]

_PREFIX: Final = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE: Final = struct.Struct(">i")

#: A mechanism's server side for one exchange, by mechanism name.
SaslServerFactory = Callable[[str], SaslServer]


class SaslState(enum.Enum):
    """Kafka's `SaslServerAuthenticator.SaslState` (without re-authentication's)."""

    INITIAL_REQUEST = enum.auto()
    HANDSHAKE_OR_VERSIONS_REQUEST = enum.auto()
    HANDSHAKE_REQUEST = enum.auto()
    AUTHENTICATE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


@dataclass(frozen=True, slots=True)
class AuthenticationFailure:
    """Why an exchange failed (`reason`, for the event: never a password or token), Kafka's
    error for it, and how the connection ends: `delayed` (closed after
    connection.failed.authentication.delay.ms, `response` written first) or at once."""

    reason: str
    error: ErrorCode
    delayed: bool
    response: bytes | None = None


@dataclass(frozen=True, slots=True)
class SaslOutcome:
    """What one frame led to: a frame to write now, the principal when the exchange has just
    completed, or the failure that ends it."""

    response: bytes | None = None
    principal: KafkaPrincipal | None = None
    failure: AuthenticationFailure | None = None


def sasl_servers(
    plain_users: Mapping[str, str], scram: ScramCredentialLookup | None
) -> SaslServerFactory:
    """The server side of each mechanism kafkactor serves: PLAIN over `plain_users`, SCRAM over
    `scram` (every SCRAM user unknown without one)."""

    def server(mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramSaslServer(mechanism, scram if scram is not None else _no_credentials)
        raise ValueError(f"SASL mechanism {mechanism} is not served")

    return server


def _no_credentials(mechanism: str, user: str) -> None:
    return None


class SaslServerAuthenticator:
    """One connection's SASL exchange with the `mechanisms` enabled on its listener
    (`sasl.enabled.mechanisms`, in their order: the SaslHandshake response lists them).
    `receive` takes each frame (without its size prefix) until `complete`."""

    def __init__(self, mechanisms: Sequence[str], servers: SaslServerFactory) -> None:
        self.mechanisms = tuple(mechanisms)
        self._servers = servers
        self.state = SaslState.INITIAL_REQUEST
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self._server: SaslServer | None = None
        self._kafka_headers = False  # SaslHandshake v1: tokens in SaslAuthenticate requests

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    def receive(self, frame: bytes) -> SaslOutcome:
        state = self.state
        if state in (SaslState.COMPLETE, SaslState.FAILED):
            return self._fail(f"a frame after the exchange ended ({state.name})", delayed=False)
        if state is SaslState.AUTHENTICATE:
            if self._kafka_headers:
                return self._authenticate_request(frame)
            return self._raw_token(frame)
        return self._kafka_request(frame)

    # -- before the handshake: ApiVersions and SaslHandshake ----------------------------------

    def _kafka_request(self, frame: bytes) -> SaslOutcome:
        if len(frame) < _PREFIX.size:
            return self._invalid(f"a {len(frame)}-byte frame is shorter than a request header")
        api_key, _, _ = _PREFIX.unpack_from(frame)
        if api_key not in ApiKey._value2member_map_:
            return self._invalid(f"an unknown api key {api_key}")
        if api_key not in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            return self._fail(
                f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake.",
                error=ErrorCode.ILLEGAL_SASL_STATE,
            )
        try:
            header, body = decode_request(frame)
        except BadRequestError as error:
            return self._invalid(error.reason)
        if self.state is SaslState.INITIAL_REQUEST:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if api_key == ApiKey.API_VERSIONS:
            return self._api_versions(header.api_version, header.correlation_id, body)
        return self._handshake(header.api_version, header.correlation_id, body.mechanism)

    def _api_versions(self, version: int, correlation_id: int, body: Any) -> SaslOutcome:
        if self.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
            return self._fail(
                f"Unexpected ApiVersions request received during SASL authentication state "
                f"{self.state.name}",
                delayed=False,
            )
        entry_of = nested(response_type(ApiKey.API_VERSIONS, 0), "ApiVersion")
        if isinstance(body, UnsupportedApiVersions):  # KIP-511: v0 naming our range; no move
            low, high = SUPPORTED[ApiKey.API_VERSIONS]
            answer = response_type(ApiKey.API_VERSIONS, 0)(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                api_keys=(
                    entry_of(api_key=ApiKey.API_VERSIONS, min_version=low, max_version=high),
                ),
            )
            return SaslOutcome(encode_response(ApiKey.API_VERSIONS, 0, correlation_id, answer))
        response = response_type(ApiKey.API_VERSIONS, version)
        entry = nested(response, "ApiVersion")
        answer = build(
            response,
            error_code=ErrorCode.NONE,
            api_keys=tuple(
                entry(api_key=int(api), min_version=low, max_version=high)
                for api, (low, high) in sorted(SUPPORTED.items())
            ),
            throttle_time=NO_THROTTLE,
        )
        self.state = SaslState.HANDSHAKE_REQUEST
        return SaslOutcome(encode_response(ApiKey.API_VERSIONS, version, correlation_id, answer))

    def _handshake(self, version: int, correlation_id: int, mechanism: str) -> SaslOutcome:
        if version >= 1:
            self._kafka_headers = True
        enabled = mechanism in self.mechanisms
        answer = response_type(ApiKey.SASL_HANDSHAKE, version)(
            error_code=ErrorCode.NONE if enabled else ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            mechanisms=self.mechanisms,
        )
        frame = encode_response(ApiKey.SASL_HANDSHAKE, version, correlation_id, answer)
        if not enabled:
            return self._fail(
                f"Unsupported SASL mechanism {mechanism}",
                error=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                response=frame,
            )
        self.mechanism = mechanism
        self._server = self._servers(mechanism)
        self.state = SaslState.AUTHENTICATE
        return SaslOutcome(frame)

    # -- the exchange -------------------------------------------------------------------------

    def _authenticate_request(self, frame: bytes) -> SaslOutcome:
        """A token in a SaslAuthenticate request (after a SaslHandshake v1)."""
        try:
            header, body = decode_request(frame)
        except BadRequestError as error:
            return self._invalid(error.reason)
        if header.api_key != ApiKey.SASL_AUTHENTICATE:
            return self._fail(
                f"Unexpected Kafka request of type {_name(header.api_key)} during SASL "
                f"authentication.",
                error=ErrorCode.ILLEGAL_SASL_STATE,
            )
        version, correlation_id = header.api_version, header.correlation_id
        response = response_type(ApiKey.SASL_AUTHENTICATE, version)
        try:
            token = self._evaluate(bytes(body.auth_bytes))
        except (SaslAuthenticationError, SaslError) as error:
            message = self._client_message(error)
            answer = build(
                response,
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=message,
                auth_bytes=b"",
            )
            return self._fail(
                _with_detail(message, error),
                error=ErrorCode.SASL_AUTHENTICATION_FAILED,
                response=encode_response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, answer),
            )
        answer = build(response, error_code=ErrorCode.NONE, error_message=None, auth_bytes=token)
        frame_out = encode_response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, answer)
        return SaslOutcome(frame_out, principal=self._completed())

    def _raw_token(self, frame: bytes) -> SaslOutcome:
        """A token on its own (after a SaslHandshake v0), answered the same way."""
        try:
            token = self._evaluate(frame)
        except SaslAuthenticationError as error:
            return self._fail(str(error), error=ErrorCode.SASL_AUTHENTICATION_FAILED)
        except SaslError as error:  # Kafka: an IOException, the connection closes at once
            return self._fail(_with_detail(self._client_message(error), error), delayed=False)
        return SaslOutcome(_SIZE.pack(len(token)) + token, principal=self._completed())

    def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None
        try:
            return self._server.evaluate_response(token)
        except (SaslAuthenticationError, SaslError):
            raise
        except Exception as error:  # a mechanism's own bug must not end more than this exchange
            raise SaslError(f"{type(error).__name__}") from error

    def _completed(self) -> KafkaPrincipal | None:
        assert self._server is not None
        if not self._server.complete:
            return None
        self.state = SaslState.COMPLETE
        self.principal = KafkaPrincipal.user(self._server.authorization_id)
        self._server = None
        return self.principal

    def _client_message(self, error: Exception) -> str:
        """What the client is told: a SaslAuthenticationError's own message; Kafka's generic
        one for a SaslError (whose detail could tell an unknown user from a wrong password)."""
        if isinstance(error, SaslAuthenticationError):
            return str(error)
        return (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )

    # -- failures -----------------------------------------------------------------------------

    def _invalid(self, reason: str) -> SaslOutcome:
        if self.state is SaslState.INITIAL_REQUEST:
            reason = (
                "Invalid request, potential reasons: kafka client configured with the wrong "
                f"security protocol, it does not support KIP-43 or it is not a kafka client. "
                f"({reason})"
            )
        return self._fail(reason, error=ErrorCode.INVALID_REQUEST, delayed=False)

    def _fail(
        self,
        reason: str,
        *,
        error: ErrorCode = ErrorCode.ILLEGAL_SASL_STATE,
        delayed: bool = True,
        response: bytes | None = None,
    ) -> SaslOutcome:
        self.state = SaslState.FAILED
        self._server = None
        return SaslOutcome(failure=AuthenticationFailure(reason, error, delayed, response))


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN_{api_key}"


def _with_detail(message: str, error: Exception) -> str:
    """The event's reason: what the client was told, and a SaslError's detail (the broker's
    own words, e.g. "Invalid user credentials": never a token or a password)."""
    if isinstance(error, SaslError) and str(error):
        return f"{message} ({error})"
    return message
