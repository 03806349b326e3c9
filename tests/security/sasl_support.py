"""Client sides of the SASL exchanges for the tests: Kafka request frames built with kio alone
(tests/network/wire.py), SCRAM's client messages from scramp's ScramClient, users and their
credentials."""

from __future__ import annotations

from typing import Any, Final

from scramp import ScramClient, ScramMechanism

from kafkactor.network.api_versions import ApiKey
from kafkactor.security.scram_credential import ScramCredential
from tests.network.wire import (
    api_versions_request,
    decode_response,
    encode_request,
    sasl_authenticate_request,
    sasl_handshake_request,
)

PLAIN_USERS: Final = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS: Final = {"bob": "bob-secret", "carol": "carol secret, with = and ,"}


def scram_credentials() -> dict[tuple[str, str], ScramCredential]:
    credentials = {}
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        for user, password in SCRAM_USERS.items():
            salt, stored_key, server_key, iterations = ScramMechanism(mechanism).make_auth_info(
                password, iteration_count=4096
            )
            credentials[mechanism, user] = ScramCredential(salt, stored_key, server_key, iterations)
    return credentials


CREDENTIALS: Final = scram_credentials()


def scram_lookup(mechanism: str, user: str) -> ScramCredential | None:
    return CREDENTIALS.get((mechanism, user))


def api_versions_frame(version: int = 3, correlation_id: int = 1) -> bytes:
    return encode_request(
        ApiKey.API_VERSIONS, version, api_versions_request(version), correlation_id=correlation_id
    )


def handshake_frame(mechanism: str, version: int = 1, correlation_id: int = 2) -> bytes:
    return encode_request(
        ApiKey.SASL_HANDSHAKE,
        version,
        sasl_handshake_request(version, mechanism),
        correlation_id=correlation_id,
    )


def authenticate_frame(token: bytes, version: int = 2, correlation_id: int = 3) -> bytes:
    return encode_request(
        ApiKey.SASL_AUTHENTICATE,
        version,
        sasl_authenticate_request(version, token),
        correlation_id=correlation_id,
    )


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def unsized(frame: bytes) -> bytes:
    return frame[4:]


def response(frame: bytes | None, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, body) of a size-prefixed response frame."""
    assert frame is not None
    return decode_response(unsized(frame), api_key, version)


def scram_client(mechanism: str, user: str, password: str) -> Any:
    return ScramClient([mechanism], user, password)
