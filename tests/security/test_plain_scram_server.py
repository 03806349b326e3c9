"""The PLAIN and SCRAM mechanism servers on their own (Kafka's PlainSaslServer and
ScramSaslServer): tokens in, challenges out, Kafka's failures."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from scramp.core import Nonce

from kafkactor.security.plain_server import PlainSaslServer
from kafkactor.security.sasl_server import SaslAuthenticationError, SaslError, SaslServer
from kafkactor.security.scram_credential import ScramCredential
from kafkactor.security.scram_server import ScramSaslServer
from tests.security.sasl_support import (
    CREDENTIALS,
    PLAIN_USERS,
    plain_token,
    scram_client,
    scram_lookup,
)

pytestmark = pytest.mark.timeout(30)


def completed(server: SaslServer) -> bool:
    return server.complete


def test_plain_accepts_a_known_user_with_the_right_password() -> None:
    server = PlainSaslServer(PLAIN_USERS)
    assert not completed(server)
    assert server.evaluate_response(plain_token("alice", "alice-secret")) == b""
    assert completed(server)
    assert server.authorization_id == "alice"


@pytest.mark.parametrize(
    ("token", "error", "message"),
    [
        (
            plain_token("alice", "nope"),
            SaslAuthenticationError,
            "Authentication failed: Invalid username or password",
        ),
        (
            plain_token("mallory", "alice-secret"),
            SaslAuthenticationError,
            "Authentication failed: Invalid username or password",
        ),
        (
            plain_token("alice", "alice-secret", "admin"),
            SaslAuthenticationError,
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
        (b"\0\0alice-secret", SaslError, "Authentication failed: username not specified"),
        (b"\0alice\0", SaslError, "Authentication failed: password not specified"),
        (b"", SaslError, "Authentication failed: username not specified"),
    ],
)
def test_plain_failures(token: bytes, error: type[Exception], message: str) -> None:
    server = PlainSaslServer(PLAIN_USERS)
    with pytest.raises(error) as raised:
        server.evaluate_response(token)
    assert str(raised.value) == message
    assert not server.complete
    with pytest.raises(RuntimeError):
        _ = server.authorization_id


def test_plain_ignores_what_follows_a_third_nul_as_kafka_does() -> None:
    server = PlainSaslServer(PLAIN_USERS)
    server.evaluate_response(plain_token("alice", "alice-secret") + b"\0trailing")
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_scramps_client(mechanism: str) -> None:
    server = ScramSaslServer(mechanism, scram_lookup)
    client = scram_client(mechanism, "bob", "bob-secret")
    server_first = server.evaluate_response(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    assert not completed(server)
    server_final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # raises if the server signature is wrong
    assert completed(server)
    assert server.authorization_id == "bob"
    with pytest.raises(SaslError, match="Unexpected challenge"):
        server.evaluate_response(b"more")


def test_scram_unknown_user_and_wrong_proof_are_both_sasl_errors() -> None:
    server = ScramSaslServer("SCRAM-SHA-256", scram_lookup)
    with pytest.raises(SaslError, match="Invalid user credentials"):
        server.evaluate_response(
            scram_client("SCRAM-SHA-256", "nobody", "x").get_client_first().encode()
        )
    server = ScramSaslServer("SCRAM-SHA-256", scram_lookup)
    client = scram_client("SCRAM-SHA-256", "bob", "not-bobs")
    client.set_server_first(server.evaluate_response(client.get_client_first().encode()).decode())
    with pytest.raises(SaslError, match="Invalid client credentials"):
        server.evaluate_response(client.get_client_final().encode())
    assert not server.complete


def test_scram_authzid_other_than_the_user_is_refused_with_kafkas_message() -> None:
    server = ScramSaslServer("SCRAM-SHA-256", scram_lookup)
    with pytest.raises(SaslAuthenticationError) as raised:
        server.evaluate_response(b"n,a=admin,n=bob,r=abcdefgh")
    assert str(raised.value) == (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )


@pytest.mark.parametrize(
    "token",
    [b"", b"y,,n=bob,r=abc", b"n,,", b"n,,r=abc", b"\xff\xfe", b"n,,n=bob,r=abc,p=zzz"],
)
def test_scram_malformed_first_messages_are_sasl_errors(token: bytes) -> None:
    with pytest.raises(SaslError):
        ScramSaslServer("SCRAM-SHA-256", scram_lookup).evaluate_response(token)


def test_scram_refuses_fewer_than_4096_iterations() -> None:
    weak = CREDENTIALS["SCRAM-SHA-256", "bob"]
    credential = ScramCredential(weak.salt, weak.stored_key, weak.server_key, 1000)
    server = ScramSaslServer("SCRAM-SHA-256", lambda mechanism, user: credential)
    with pytest.raises(SaslError, match="less than the minimum 4096"):
        server.evaluate_response(
            scram_client("SCRAM-SHA-256", "bob", "x").get_client_first().encode()
        )


def test_scram_user_names_are_unescaped_as_kafka_does() -> None:
    seen = []

    def lookup(mechanism: str, user: str) -> None:
        seen.append(user)

    with pytest.raises(SaslError):
        ScramSaslServer("SCRAM-SHA-512", lookup).evaluate_response(b"n,,n=a=2Cb=3Dc,r=nonce")
    assert seen == ["a,b=c"]


@pytest.mark.parametrize(
    ("nonce_of", "accepted"),
    [
        (lambda client, combined: client + combined, True),  # librdkafka < 2.6.1
        (lambda client, combined: combined + "x", False),
        (lambda client, combined: client + "forged", False),
    ],
    ids=["client-nonce-twice", "server-nonce-not-last", "server-nonce-missing"],
)
def test_scram_final_nonce_must_end_with_the_servers(
    nonce_of: Callable[[str, str], str], accepted: bool
) -> None:
    """Kafka (3.8.1+, CVE-2024-56128) checks that the final nonce ends with the one it sent,
    which lets librdkafka before 2.6.1 in (it sends its own nonce twice); the proof is then
    checked over the message the client signed."""
    server = ScramSaslServer("SCRAM-SHA-256", scram_lookup)
    client = scram_client("SCRAM-SHA-256", "bob", "bob-secret")
    client.set_server_first(server.evaluate_response(client.get_client_first().encode()).decode())
    client.nonce = Nonce(nonce_of(str(client.c_nonce), str(client.nonce)))
    final = client.get_client_final().encode()
    if accepted:
        client.set_server_final(server.evaluate_response(final).decode())
        assert server.authorization_id == "bob"
    else:
        with pytest.raises(SaslError):
            server.evaluate_response(final)
