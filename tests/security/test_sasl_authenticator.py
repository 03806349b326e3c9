"""Kafka's SaslServerAuthenticator, pure: frames in, frames and verdicts out (no sockets)."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode

from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.sasl_authenticator import (
    SaslOutcome,
    SaslServerAuthenticator,
    SaslState,
    sasl_servers,
)
from tests.network.wire import encode_request, metadata_request
from tests.security.sasl_support import (
    PLAIN_USERS,
    api_versions_frame,
    authenticate_frame,
    handshake_frame,
    plain_token,
    response,
    scram_client,
    scram_lookup,
)

pytestmark = pytest.mark.timeout(30)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


def authenticator(mechanisms: tuple[str, ...] = MECHANISMS) -> SaslServerAuthenticator:
    return SaslServerAuthenticator(mechanisms, sasl_servers(PLAIN_USERS, scram_lookup))


def handshaken(mechanism: str, version: int = 1) -> SaslServerAuthenticator:
    auth = authenticator()
    assert auth.receive(api_versions_frame()).failure is None
    outcome = auth.receive(handshake_frame(mechanism, version))
    assert outcome.failure is None
    _, body = response(outcome.response, ApiKey.SASL_HANDSHAKE, version)
    assert body.error_code == ErrorCode.none
    assert tuple(body.mechanisms) == MECHANISMS
    return auth


def test_api_versions_then_plain_through_sasl_authenticate() -> None:
    auth = authenticator()
    outcome = auth.receive(api_versions_frame(3, correlation_id=7))
    correlation_id, body = response(outcome.response, ApiKey.API_VERSIONS, 3)
    assert correlation_id == 7
    listed = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    assert listed[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert listed[ApiKey.SASL_AUTHENTICATE] == (0, 2)
    assert len(listed) == len(SUPPORTED)
    assert auth.state.name == "HANDSHAKE_REQUEST"
    outcome = auth.receive(handshake_frame("PLAIN"))
    assert auth.state.name == "AUTHENTICATE"
    outcome = auth.receive(authenticate_frame(plain_token("alice", "alice-secret"), 2, 9))
    correlation_id, body = response(outcome.response, ApiKey.SASL_AUTHENTICATE, 2)
    assert correlation_id == 9
    assert body.error_code == ErrorCode.none
    assert body.error_message is None
    assert body.session_lifetime.total_seconds() == 0  # KIP-368: no re-authentication asked
    assert outcome.principal == KafkaPrincipal.user("alice")
    assert auth.complete
    assert auth.mechanism == "PLAIN"


def test_the_handshake_may_come_first_and_sasl_authenticate_v0_works() -> None:
    auth = authenticator()
    assert auth.receive(handshake_frame("PLAIN", 1)).failure is None
    outcome = auth.receive(authenticate_frame(plain_token("admin", "admin-secret"), 0))
    _, body = response(outcome.response, ApiKey.SASL_AUTHENTICATE, 0)
    assert body.error_code == ErrorCode.none
    assert outcome.principal == KafkaPrincipal.user("admin")


def test_a_wrong_plain_password_fails_with_kafkas_message_after_the_delay() -> None:
    auth = handshaken("PLAIN")
    outcome = auth.receive(authenticate_frame(plain_token("alice", "wrong")))
    assert outcome.response is None and outcome.principal is None
    failure = outcome.failure
    assert failure is not None and failure.delayed
    assert failure.error.name == "SASL_AUTHENTICATION_FAILED"
    _, body = response(failure.response, ApiKey.SASL_AUTHENTICATE, 2)
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == "Authentication failed: Invalid username or password"
    assert "wrong" not in failure.reason
    assert auth.state is SaslState.FAILED


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (plain_token("nobody", "x"), "Authentication failed: Invalid username or password"),
        (
            plain_token("alice", "alice-secret", authzid="admin"),
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
        (b"alice", GENERIC.format("PLAIN")),  # no user name: a SaslError, the generic message
        (b"\0alice\0", GENERIC.format("PLAIN")),  # no password
    ],
)
def test_plain_failures_answer_as_kafka(token: bytes, message: str) -> None:
    outcome = handshaken("PLAIN").receive(authenticate_frame(token))
    assert outcome.failure is not None
    _, body = response(outcome.failure.response, ApiKey.SASL_AUTHENTICATE, 2)
    assert body.error_message == message


def test_an_authzid_equal_to_the_user_is_accepted_for_plain() -> None:
    outcome = handshaken("PLAIN").receive(
        authenticate_frame(plain_token("alice", "alice-secret", authzid="alice"))
    )
    assert outcome.principal == KafkaPrincipal.user("alice")


def _scram(auth: SaslServerAuthenticator, mechanism: str, user: str, password: str) -> SaslOutcome:
    client = scram_client(mechanism, user, password)
    first = auth.receive(authenticate_frame(client.get_client_first().encode(), 1))
    if first.failure is not None:
        return first
    _, body = response(first.response, ApiKey.SASL_AUTHENTICATE, 1)
    assert body.error_code == ErrorCode.none
    client.set_server_first(bytes(body.auth_bytes).decode())
    final = auth.receive(authenticate_frame(client.get_client_final().encode(), 1))
    if final.failure is None:
        _, body = response(final.response, ApiKey.SASL_AUTHENTICATE, 1)
        client.set_server_final(bytes(body.auth_bytes).decode())  # checks the server signature
    return final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_and_the_client_checks_the_server(mechanism: str) -> None:
    outcome = _scram(handshaken(mechanism), mechanism, "bob", "bob-secret")
    assert outcome.principal == KafkaPrincipal.user("bob")
    outcome = _scram(handshaken(mechanism), mechanism, "carol", "carol secret, with = and ,")
    assert outcome.principal == KafkaPrincipal.user("carol")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_wrong_password_and_unknown_user_fail_alike(
    mechanism: str, user: str, password: str
) -> None:
    outcome = _scram(handshaken(mechanism), mechanism, user, password)
    failure = outcome.failure
    assert failure is not None and failure.delayed
    _, body = response(failure.response, ApiKey.SASL_AUTHENTICATE, 1)
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == GENERIC.format(mechanism)


def test_scram_credentials_of_the_other_mechanism_do_not_count() -> None:
    def sha512_only(mechanism: str, user: str):  # type: ignore[no-untyped-def]
        return scram_lookup(mechanism, user) if mechanism == "SCRAM-SHA-512" else None

    auth = SaslServerAuthenticator(MECHANISMS, sasl_servers({}, sha512_only))
    auth.receive(handshake_frame("SCRAM-SHA-256"))
    outcome = _scram(auth, "SCRAM-SHA-256", "bob", "bob-secret")
    assert outcome.failure is not None


def test_an_unsupported_mechanism_is_answered_with_the_enabled_list() -> None:
    auth = authenticator(("SCRAM-SHA-512", "PLAIN"))
    outcome = auth.receive(handshake_frame("GSSAPI"))
    failure = outcome.failure
    assert failure is not None and failure.delayed
    assert failure.error.name == "UNSUPPORTED_SASL_MECHANISM"
    assert failure.reason == "Unsupported SASL mechanism GSSAPI"
    _, body = response(failure.response, ApiKey.SASL_HANDSHAKE, 1)
    assert body.error_code == ErrorCode.unsupported_sasl_mechanism
    assert tuple(body.mechanisms) == ("SCRAM-SHA-512", "PLAIN")


def test_a_request_before_the_handshake_fails_the_exchange() -> None:
    auth = authenticator()
    outcome = auth.receive(
        encode_request(ApiKey.METADATA, 9, metadata_request(9, ["t"]), correlation_id=4)
    )
    failure = outcome.failure
    assert failure is not None and failure.delayed and failure.response is None
    assert failure.error.name == "ILLEGAL_SASL_STATE"
    assert failure.reason == "Unexpected Kafka request of type METADATA during SASL handshake."


def test_sasl_authenticate_before_the_handshake_is_illegal_sasl_state() -> None:
    outcome = authenticator().receive(authenticate_frame(plain_token("alice", "alice-secret")))
    failure = outcome.failure
    assert failure is not None and failure.error.name == "ILLEGAL_SASL_STATE"
    assert "SASL_AUTHENTICATE during SASL handshake" in failure.reason


def test_another_request_during_the_exchange_is_illegal_sasl_state() -> None:
    auth = handshaken("PLAIN")
    outcome = auth.receive(api_versions_frame())
    failure = outcome.failure
    assert failure is not None and failure.error.name == "ILLEGAL_SASL_STATE"
    assert (
        failure.reason
        == "Unexpected Kafka request of type API_VERSIONS during SASL authentication."
    )


def test_a_second_api_versions_closes_at_once() -> None:
    auth = authenticator()
    auth.receive(api_versions_frame())
    failure = auth.receive(api_versions_frame()).failure
    assert failure is not None and not failure.delayed


def test_an_api_versions_newer_than_served_is_answered_v0_and_may_be_retried() -> None:
    auth = authenticator()
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 5, 0) + b"\x00\x00"
    outcome = auth.receive(frame)
    _, body = response(outcome.response, ApiKey.API_VERSIONS, 0)
    assert body.error_code == ErrorCode.unsupported_version
    assert auth.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
    assert auth.receive(api_versions_frame()).failure is None


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00", b"GET / HTTP/1.1\r\n", struct.pack(">hhi", 1000, 0, 1), b"\x16\x03\x01\x00"],
    ids=["empty", "short", "http", "unknown-api", "tls-hello"],
)
def test_a_frame_that_is_not_a_kafka_request_closes_at_once(frame: bytes) -> None:
    failure = authenticator().receive(frame).failure
    assert failure is not None and not failure.delayed
    assert failure.reason.startswith("Invalid request, potential reasons")


def test_v0_handshake_then_raw_plain_token() -> None:
    auth = handshaken("PLAIN", version=0)
    outcome = auth.receive(plain_token("alice", "alice-secret"))
    assert outcome.response == b"\x00\x00\x00\x00"  # PLAIN's empty challenge, size-prefixed
    assert outcome.principal == KafkaPrincipal.user("alice")


def test_v0_handshake_then_raw_scram_tokens() -> None:
    auth = handshaken("SCRAM-SHA-256", version=0)
    client = scram_client("SCRAM-SHA-256", "bob", "bob-secret")
    first = auth.receive(client.get_client_first().encode())
    assert first.response is not None
    client.set_server_first(first.response[4:].decode())
    final = auth.receive(client.get_client_final().encode())
    assert final.principal == KafkaPrincipal.user("bob")
    assert final.response is not None
    client.set_server_final(final.response[4:].decode())


def test_v0_wrong_password_fails_without_a_response() -> None:
    failure = handshaken("PLAIN", version=0).receive(plain_token("alice", "no")).failure
    assert failure is not None and failure.delayed and failure.response is None
    failure = handshaken("SCRAM-SHA-256", version=0).receive(b"garbage").failure
    assert failure is not None and not failure.delayed  # a SaslException: closed at once


_API_VERSIONS = api_versions_frame()
_HANDSHAKES = {(m, v): handshake_frame(m, v) for m in MECHANISMS for v in (0, 1)}
_SCRAM_FIRST = authenticate_frame(
    scram_client("SCRAM-SHA-256", "bob", "bob-secret").get_client_first().encode(), 1
)


def _handshaken_quickly(mechanism: str, version: int = 1) -> SaslServerAuthenticator:
    auth = authenticator()
    auth.receive(_HANDSHAKES[mechanism, version])
    return auth


def _scram_mid_exchange() -> SaslServerAuthenticator:
    auth = _handshaken_quickly("SCRAM-SHA-256")
    auth.receive(_SCRAM_FIRST)
    return auth


def _after_api_versions() -> SaslServerAuthenticator:
    auth = authenticator()
    auth.receive(_API_VERSIONS)
    return auth


STATES: dict[str, Callable[[], SaslServerAuthenticator]] = {
    "initial": authenticator,
    "after-api-versions": _after_api_versions,
    "plain-v1": lambda: _handshaken_quickly("PLAIN"),
    "scram-mid-exchange": _scram_mid_exchange,
    "plain-v0": lambda: _handshaken_quickly("PLAIN", version=0),
    "scram-v0": lambda: _handshaken_quickly("SCRAM-SHA-512", version=0),
}


_VALID = (
    _HANDSHAKES["PLAIN", 1],
    authenticate_frame(plain_token("alice", "alice-secret")),
    _API_VERSIONS,
)


def _random_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:  # bytes of any kind
        return rng.randbytes(rng.randrange(0, 64))
    api = rng.choice([ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS])
    version = rng.randrange(-1, 5)
    header = struct.pack(">hhih", api, version, rng.randrange(2**31), rng.randrange(-1, 8))
    if kind == 1:  # a plausible header, a random body
        return header + rng.randbytes(rng.randrange(0, 48))
    frame = bytearray(rng.choice(_VALID))
    for _ in range(rng.randrange(1, 4)):  # a valid frame, a few bytes changed
        frame[rng.randrange(len(frame))] = rng.randrange(256)
    return bytes(frame) if kind == 2 else bytes(frame[: rng.randrange(len(frame))])


@pytest.mark.parametrize("state", list(STATES))
def test_a_thousand_random_frames_never_raise_at_any_state(state: str) -> None:
    """Each frame goes to an authenticator in `state` (a new one once the last has ended)."""
    rng = random.Random(f"sasl-fuzz-{state}")
    seen = {"failed": 0, "answered": 0}
    auth = STATES[state]()
    for _ in range(1000):
        outcome = auth.receive(_random_frame(rng))
        assert isinstance(outcome, SaslOutcome)
        if outcome.failure is not None:
            seen["failed"] += 1
            assert auth.state is SaslState.FAILED
            assert outcome.failure.reason
        elif outcome.principal is not None:
            assert outcome.principal == KafkaPrincipal.user("alice")
        else:
            seen["answered"] += 1
        if auth.state in (SaslState.FAILED, SaslState.COMPLETE):
            auth = STATES[state]()
    assert seen["failed"] > 0
