"""Kafka's `ScramCredentialUtils` and `ScramFormatter`: a SCRAM credential as ZooKeeper keeps it,
and made from a password or from a client's salted password.

A credential is persisted under the user's config (`/config/users/<user>`, key `SCRAM-SHA-256`
or `SCRAM-SHA-512`) as `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`
(`credential_to_string`); `credential_from_string` reads it back and raises
`MalformedScramCredentialError` for anything Kafka's `credentialFromString` refuses (not four
`key=value` pairs with those keys, bad base64, a non-integer iteration count). Kafka's message
quotes the whole string; here it does not, since the string holds the stored and server keys.

`credential_from_password` is what `kafka-configs --add-config 'SCRAM-SHA-256=[password=..]'`
stores (scramp's `ScramMechanism.make_auth_info`, a fresh random salt); `credential_from_salted`
is what AlterUserScramCredentials stores (KIP-554: the client sends salt, iterations and the
salted password; the broker derives StoredKey = H(HMAC(salted, "Client Key")) and ServerKey =
HMAC(salted, "Server Key"), as Kafka's `ScramFormatter.generateCredential`, with scramp's
primitives). Iterations are Kafka's bounds for both mechanisms: 4096 to 16384.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from typing import Final

from kafkactor.security.scram_credential import SCRAM_MECHANISMS, ScramCredential

# scramp (and the asn1crypto it loads) is imported where a credential is made: a broker's
# start makes none

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "MalformedScramCredentialError",
    "ScramMechanismType",
    "credential_from_password",
    "credential_from_salted",
    "credential_from_string",
    "credential_to_string",
]

# Kafka's internal ScramMechanism: minIterations and maxIterations of SCRAM-SHA-256 and -512
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384
DEFAULT_ITERATIONS: Final = 4096  # kafka-configs' default (ScramMechanism.minIterations)

_KEYS: Final = ("salt", "stored_key", "server_key", "iterations")
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+")


class ScramMechanismType(enum.IntEnum):
    """Kafka's public `ScramMechanism` (org.apache.kafka.clients.admin) and its wire type byte,
    as DescribeUserScramCredentials and AlterUserScramCredentials carry it."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """`SCRAM-SHA-256`, `SCRAM-SHA-512`; `UNKNOWN` for the unknown one."""
        return self.name.replace("_", "-") if self is not ScramMechanismType.UNKNOWN else "UNKNOWN"

    @classmethod
    def from_type(cls, value: int) -> ScramMechanismType:
        """Kafka's `ScramMechanism.fromType`: UNKNOWN for a byte it does not know."""
        return cls(value) if value in cls._value2member_map_ else cls.UNKNOWN

    @classmethod
    def from_name(cls, name: str) -> ScramMechanismType:
        """Kafka's `ScramMechanism.fromMechanismName`: UNKNOWN for a name it does not know."""
        for member in cls:
            if member is not cls.UNKNOWN and member.mechanism_name == name:
                return member
        return cls.UNKNOWN


class MalformedScramCredentialError(ValueError):
    """Kafka's IllegalArgumentException `Credentials not valid` from `credentialFromString`."""


def credential_to_string(credential: ScramCredential) -> str:
    """Kafka's `ScramCredentialUtils.credentialToString`."""
    return (
        f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
        f"server_key={_b64(credential.server_key)},iterations={credential.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """Kafka's `ScramCredentialUtils.credentialFromString`; raises
    `MalformedScramCredentialError` for what Kafka refuses."""
    props: dict[str, str] = {}
    for token in text.split(","):
        index = token.find("=")
        if index <= 0:
            raise MalformedScramCredentialError("Credentials not valid: not key=value pairs")
        props[token[:index]] = token[index + 1 :]
    if len(props) != len(_KEYS) or any(key not in props for key in _KEYS):
        raise MalformedScramCredentialError(
            "Credentials not valid: expected salt, stored_key, server_key and iterations"
        )
    iterations = props["iterations"]
    if _JAVA_INT.fullmatch(iterations) is None or not -(2**31) <= int(iterations) < 2**31:
        raise MalformedScramCredentialError(
            f"Credentials not valid: iterations {iterations!r} is not an integer"
        )
    return ScramCredential(
        salt=_unb64(props["salt"], "salt"),
        stored_key=_unb64(props["stored_key"], "stored_key"),
        server_key=_unb64(props["server_key"], "server_key"),
        iterations=int(iterations),
    )


def credential_from_password(
    mechanism: str,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    *,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for `password` (scramp's `make_auth_info`; a random salt unless given).
    Raises ValueError for a mechanism other than SCRAM-SHA-256/512 or iterations outside
    Kafka's 4096..16384."""
    _check(mechanism, iterations)
    from scramp import ScramMechanism as _ScrampMechanism

    made_salt, stored_key, server_key, count = _ScrampMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt
    )
    return ScramCredential(
        salt=bytes(made_salt),
        stored_key=bytes(stored_key),
        server_key=bytes(server_key),
        iterations=int(count),
    )


def credential_from_salted(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """Kafka's `ScramFormatter.generateCredential(salt, saltedPassword, iterations)`: the
    credential of a password a client already salted (AlterUserScramCredentials)."""
    _check(mechanism, iterations)
    from scramp import ScramMechanism as _ScrampMechanism
    from scramp.utils import h as _hash
    from scramp.utils import hmac as _hmac

    digest = _ScrampMechanism(mechanism).hf
    client_key = _hmac(digest, salted_password, b"Client Key")
    return ScramCredential(
        salt=bytes(salt),
        stored_key=_hash(digest, client_key),
        server_key=_hmac(digest, salted_password, b"Server Key"),
        iterations=iterations,
    )


def _check(mechanism: str, iterations: int) -> None:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"Unknown SCRAM mechanism {mechanism}")
    if iterations < MIN_ITERATIONS:
        raise ValueError("Too few iterations")
    if iterations > MAX_ITERATIONS:
        raise ValueError("Too many iterations")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, key: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise MalformedScramCredentialError(f"Credentials not valid: {key} is not base64") from None
