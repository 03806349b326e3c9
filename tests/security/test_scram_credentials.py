"""SCRAM credentials as Kafka stores them (ScramCredentialUtils' text form) and as they are made
from a password or from a client's salted password (ScramFormatter)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kafkactor.security.scram_credential import ScramCredential
from kafkactor.security.scram_credentials import (
    MalformedScramCredentialError,
    ScramMechanismType,
    credential_from_password,
    credential_from_salted,
    credential_from_string,
    credential_to_string,
)

pytestmark = pytest.mark.timeout(30)

SALT = b"0123456789abcdef"


def _expected(name: str, password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """RFC 5802's keys, worked out with hashlib alone (an independent derivation)."""
    salted = hashlib.pbkdf2_hmac(name, password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=hmac.new(salted, b"Server Key", name).digest(),
        iterations=iterations,
    )


def test_the_text_form_is_kafkas_and_reads_back() -> None:
    credential = ScramCredential(
        salt=b"\x01\x02", stored_key=b"sk", server_key=b"vk", iterations=8192
    )
    text = credential_to_string(credential)
    assert text == "salt=AQI=,stored_key=c2s=,server_key=dms=,iterations=8192"
    assert credential_from_string(text) == credential
    # the keys may come in any order (Kafka reads them into Properties)
    assert credential_from_string("iterations=8192,server_key=dms=,stored_key=c2s=,salt=AQI=") == (
        credential
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AQI=,stored_key=c2s=,server_key=dms=",  # a key missing
        "salt=AQI=,stored_key=c2s=,server_key=dms=,iterations=1,extra=1",  # one too many
        "salt=AQI=,stored_key=c2s=,server_key=dms=,iterations=many",
        "salt=***,stored_key=c2s=,server_key=dms=,iterations=4096",  # not base64
        "=AQI=,stored_key=c2s=,server_key=dms=,iterations=4096",  # an empty key
        "salt,stored_key=c2s=,server_key=dms=,iterations=4096",  # no '='
    ],
)
def test_text_kafka_would_not_read_is_a_typed_error_that_does_not_quote_it(text: str) -> None:
    with pytest.raises(MalformedScramCredentialError, match="Credentials not valid") as raised:
        credential_from_string(text)
    assert "c2s=" not in str(raised.value)  # a stored key never reaches a message


@pytest.mark.parametrize(
    ("mechanism", "digest"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")]
)
def test_a_credential_from_a_password_has_rfc_5802_keys(mechanism: str, digest: str) -> None:
    made = credential_from_password(mechanism, "alice-secret", 4096, salt=SALT)
    assert made == _expected(digest, b"alice-secret", SALT, 4096)
    assert credential_from_password(mechanism, "alice-secret").iterations == 4096  # the default
    fresh = credential_from_password(mechanism, "alice-secret")
    assert fresh.salt != credential_from_password(mechanism, "alice-secret").salt  # random


@pytest.mark.parametrize(
    ("mechanism", "digest"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")]
)
def test_a_client_salted_password_gives_the_same_credential(mechanism: str, digest: str) -> None:
    salted = hashlib.pbkdf2_hmac(digest, b"bob-secret", SALT, 8192)
    from_salted = credential_from_salted(mechanism, SALT, salted, 8192)
    assert from_salted == credential_from_password(mechanism, "bob-secret", 8192, salt=SALT)


def test_kafkas_iteration_bounds_and_mechanisms() -> None:
    with pytest.raises(ValueError, match="Too few iterations"):
        credential_from_password("SCRAM-SHA-256", "pw", 4095)
    with pytest.raises(ValueError, match="Too many iterations"):
        credential_from_password("SCRAM-SHA-512", "pw", 16385)
    with pytest.raises(ValueError, match="Unknown SCRAM mechanism"):
        credential_from_salted("SCRAM-SHA-1", SALT, b"x" * 20, 4096)
    assert credential_from_password("SCRAM-SHA-512", "pw", 16384).iterations == 16384


def test_the_mechanism_type_bytes_are_kafkas() -> None:
    assert ScramMechanismType.from_type(1).mechanism_name == "SCRAM-SHA-256"
    assert ScramMechanismType.from_type(2).mechanism_name == "SCRAM-SHA-512"
    assert ScramMechanismType.from_type(7) is ScramMechanismType.UNKNOWN
    assert ScramMechanismType.from_name("SCRAM-SHA-512") is ScramMechanismType.SCRAM_SHA_512
    assert ScramMechanismType.from_name("PLAIN") is ScramMechanismType.UNKNOWN


def test_the_repr_shows_no_key() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "pw", salt=SALT)
    assert repr(credential) == "ScramCredential(iterations=4096)"
    assert base64.b64encode(credential.stored_key).decode() not in repr(credential)
