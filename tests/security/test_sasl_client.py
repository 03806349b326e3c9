"""The inter-broker SASL client (Kafka's SaslClientAuthenticator) against the broker's own
server side (SaslServerAuthenticator): PLAIN and SCRAM-SHA-256/512 log in; a wrong password, an
unknown user, a mechanism the peer does not enable, an old peer and a forged SCRAM server
signature are refused with a reason that never holds the password."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from scramp import ScramMechanism

from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import (
    build,
    decode_response,
    encode_request,
    nested,
    response_type,
)
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.sasl_authenticator import SaslServerAuthenticator, sasl_servers
from kafkactor.security.sasl_client import SaslClient, SaslClientError, SaslLogin, authenticate
from kafkactor.security.scram_credential import ScramCredential

pytestmark = pytest.mark.timeout(30)

ENABLED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS = {"bob": "bob-secret", "carol": "carol secret, with = and ,"}
CREDENTIALS = {
    (mechanism, user): ScramCredential(
        *ScramMechanism(mechanism).make_auth_info(password, iteration_count=4096)
    )
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    for user, password in SCRAM_USERS.items()
}


def scram_lookup(mechanism: str, user: str) -> ScramCredential | None:
    return CREDENTIALS.get((mechanism, user))


Tamper = Callable[[int, Any], Any]  # (api key, response body) -> the body the client reads


def _exchange(
    login: SaslLogin, enabled: tuple[str, ...] = ENABLED, tamper: Tamper | None = None
) -> SaslServerAuthenticator:
    """Run the client against the server side in memory, frame by frame, as the wire would
    carry them; the server's authenticator after the exchange."""
    server = SaslServerAuthenticator(enabled, sasl_servers(PLAIN_USERS, scram_lookup))
    client = SaslClient(login)
    correlation_id = 0
    while (request := client.next_request()) is not None:
        correlation_id += 1
        frame = encode_request(request.api_key, request.version, correlation_id, "b1", request.body)
        outcome = server.receive(frame[4:])
        answer = outcome.response if outcome.failure is None else outcome.failure.response
        if answer is None:
            raise SaslClientError("the peer closed the connection")
        answered, body = decode_response(request.api_key, request.version, answer[4:])
        assert answered == correlation_id
        client.receive(tamper(request.api_key, body) if tamper is not None else body)
    assert client.complete
    return server


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", PLAIN_USERS["alice"]),
        ("SCRAM-SHA-256", "bob", SCRAM_USERS["bob"]),
        ("SCRAM-SHA-512", "carol", SCRAM_USERS["carol"]),  # `=` and `,` in the password
    ],
)
def test_each_mechanism_logs_in_as_its_user(mechanism: str, user: str, password: str) -> None:
    server = _exchange(SaslLogin(mechanism, user, password))
    assert server.complete
    assert server.principal == KafkaPrincipal.user(user)


@pytest.mark.parametrize(
    ("login", "needle"),
    [
        (SaslLogin("PLAIN", "alice", "wrong-pw"), "PLAIN authentication refused: "),
        (SaslLogin("PLAIN", "mallory", "wrong-pw"), "PLAIN authentication refused: "),
        (SaslLogin("SCRAM-SHA-256", "bob", "wrong-pw"), "SCRAM-SHA-256 authentication refused"),
        (SaslLogin("SCRAM-SHA-512", "mallory", "wrong-pw"), "SCRAM-SHA-512 authentication"),
    ],
)
def test_a_wrong_password_or_unknown_user_is_refused(login: SaslLogin, needle: str) -> None:
    with pytest.raises(SaslClientError) as refused:
        _exchange(login)
    assert needle in str(refused.value)
    assert "wrong-pw" not in str(refused.value)
    assert "wrong-pw" not in repr(login)


def test_a_mechanism_the_peer_does_not_enable_is_refused_naming_those_it_does() -> None:
    with pytest.raises(SaslClientError) as refused:
        _exchange(SaslLogin("PLAIN", "alice", PLAIN_USERS["alice"]), enabled=("SCRAM-SHA-512",))
    assert str(refused.value) == (
        "the peer does not enable SASL mechanism PLAIN (it enables: SCRAM-SHA-512)"
    )


def test_a_peer_without_saslhandshake_v1_is_refused() -> None:
    def old_peer(api_key: int, body: Any) -> Any:
        if api_key != ApiKey.API_VERSIONS:
            return body
        keys = tuple(
            dataclasses.replace(k, max_version=type(k.max_version)(0))
            if int(k.api_key) == ApiKey.SASL_HANDSHAKE
            else k
            for k in body.api_keys
        )
        return dataclasses.replace(body, api_keys=keys)

    with pytest.raises(SaslClientError, match="does not serve SaslHandshake v1"):
        _exchange(SaslLogin("PLAIN", "alice", PLAIN_USERS["alice"]), tamper=old_peer)


def test_a_forged_scram_server_signature_is_refused() -> None:
    """A peer that does not hold the user's credential cannot sign the final message: the
    client checks the signature (scramp), so it never talks to an impostor."""
    answers = 0

    def forger(api_key: int, body: Any) -> Any:
        nonlocal answers
        if api_key != ApiKey.SASL_AUTHENTICATE:
            return body
        answers += 1
        if answers < 2:
            return body
        return dataclasses.replace(body, auth_bytes=b"v=" + b"A" * 44)

    with pytest.raises(SaslClientError, match="the peer's final message failed"):
        _exchange(SaslLogin("SCRAM-SHA-256", "bob", SCRAM_USERS["bob"]), tamper=forger)
    assert answers == 2  # refused at the very last message, not before


def test_authentication_versions_follow_what_the_peer_serves() -> None:
    client = SaslClient(SaslLogin("PLAIN", "alice", "x"))
    schema = response_type(ApiKey.API_VERSIONS, 0)
    entry = nested(schema, "ApiVersion")
    body = build(
        schema,
        error_code=0,
        api_keys=(
            build(entry, api_key=ApiKey.SASL_HANDSHAKE, min_version=0, max_version=1),
            build(entry, api_key=ApiKey.SASL_AUTHENTICATE, min_version=0, max_version=1),
        ),
    )
    client.receive(body)
    assert client.authenticate_version == 1  # the peer's highest, below the client's 2


# -- over a socket: `authenticate` on an asyncio stream -------------------------------------------


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A scripted peer: the broker's SaslServerAuthenticator on one connection, closing it
    on failure as a SASL listener does."""
    server = SaslServerAuthenticator(ENABLED, sasl_servers(PLAIN_USERS, scram_lookup))
    try:
        while not server.complete:
            size = int.from_bytes(await reader.readexactly(4), "big")
            outcome = server.receive(await reader.readexactly(size))
            if outcome.failure is not None:
                if outcome.failure.response is not None:
                    writer.write(outcome.failure.response)
                break
            assert outcome.response is not None
            writer.write(outcome.response)
            await writer.drain()
    except asyncio.IncompleteReadError:
        pass
    finally:
        writer.close()


async def _login(login: SaslLogin) -> None:
    listener = await asyncio.start_server(_serve_one, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.wait_for(authenticate(reader, writer, login, "broker-1"), 10)
        finally:
            writer.close()
    finally:
        listener.close()
        await listener.wait_closed()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_authenticate_over_a_connection(mechanism: str) -> None:
    user = "alice" if mechanism == "PLAIN" else "bob"
    password = {**PLAIN_USERS, **SCRAM_USERS}[user]
    asyncio.run(_login(SaslLogin(mechanism, user, password)))


def test_a_refused_login_over_a_connection_is_an_error_without_the_password() -> None:
    with pytest.raises(SaslClientError) as refused:
        asyncio.run(_login(SaslLogin("SCRAM-SHA-256", "bob", "not-bobs-pw")))
    assert "not-bobs-pw" not in str(refused.value)


def test_an_unknown_mechanism_is_refused_before_any_connection() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslLogin("GSSAPI", "a", "b")
