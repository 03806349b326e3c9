"""The TLS contexts of a listener and of a client, and the principal of a TLS connection,
through in-memory handshakes with trustme certificates."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kafkactor.security.listener import SslConfig
from kafkactor.security.principal import ANONYMOUS, KafkaPrincipal
from kafkactor.security.ssl_factory import (
    client_context,
    principal_of,
    server_context,
    subject_dn,
)
from tests.security.tls_support import Pki, handshake, make_pki

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_a_client_trusting_the_ca_connects_with_tls_1_2_or_later(pki: Pki) -> None:
    server, _ = handshake(server_context(pki.server()), client_context(pki.client()))
    assert server.version() in ("TLSv1.2", "TLSv1.3")
    assert principal_of(server.getpeercert()) == ANONYMOUS


def test_tls_1_1_is_refused(pki: Pki) -> None:
    old = client_context(pki.client())
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(ssl.SSLError):
        handshake(server_context(pki.server()), old)


def test_a_client_not_trusting_the_ca_refuses_the_broker(pki: Pki) -> None:
    stranger = client_context(SslConfig(truststore=pki.other_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_context(pki.server()), stranger)


def test_the_host_name_is_checked_unless_endpoint_identification_is_off(pki: Pki) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match=r"match|mismatch"):
        handshake(server_context(pki.server()), client_context(pki.client()), "broker.example")
    handshake(
        server_context(pki.server()),
        client_context(pki.client(hostname=False)),
        "broker.example",
    )


def test_a_client_certificate_makes_the_principal_its_subject_dn(pki: Pki) -> None:
    server, _ = handshake(
        server_context(pki.server("required")), client_context(pki.client(certificate=True))
    )
    principal = principal_of(server.getpeercert())
    assert principal == KafkaPrincipal.user("CN=client,OU=clients,O=kafkactor")
    assert str(principal) == "User:CN=client,OU=clients,O=kafkactor"


def test_required_client_auth_refuses_a_client_without_certificate(pki: Pki) -> None:
    with pytest.raises(ssl.SSLError):
        _, client = handshake(server_context(pki.server("required")), client_context(pki.client()))
        client.read(1)  # TLS 1.3: the client hears of the refusal on its first read


def test_requested_client_auth_accepts_a_client_without_certificate(pki: Pki) -> None:
    server, _ = handshake(server_context(pki.server("requested")), client_context(pki.client()))
    assert principal_of(server.getpeercert()) == ANONYMOUS
    server, _ = handshake(
        server_context(pki.server("requested")), client_context(pki.client(certificate=True))
    )
    assert principal_of(server.getpeercert()) == KafkaPrincipal.user(
        "CN=client,OU=clients,O=kafkactor"
    )


def test_client_auth_needs_a_trust_store_and_a_listener_a_key_store(pki: Pki) -> None:
    with pytest.raises(ValueError, match="truststore"):
        server_context(SslConfig(keystore=pki.broker_keystore, client_auth="required"))
    with pytest.raises(ValueError, match="keystore"):
        server_context(SslConfig(truststore=pki.ca))


def test_a_missing_key_store_file_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        server_context(SslConfig(keystore=tmp_path / "absent.pem"))


def test_an_encrypted_key_needs_its_password(tmp_path: Path) -> None:
    import trustme
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    keystore = tmp_path / "keystore.pem"
    keystore.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems) + encrypted)
    server_context(SslConfig(keystore=keystore, key_password="s3cret"))
    with pytest.raises(ssl.SSLError):
        server_context(SslConfig(keystore=keystore, key_password="wrong"))


def test_the_subject_dn_is_written_as_rfc_2253() -> None:
    certificate = {
        "subject": (
            (("countryName", "GB"),),
            (("organizationName", "Acme, Inc."),),
            (("organizationalUnitName", "ops"), ("commonName", "#one ")),
        )
    }
    assert subject_dn(certificate) == r"OU=ops+CN=\#one\ ,O=Acme\, Inc.,C=GB"
    assert principal_of(None) == ANONYMOUS
    assert principal_of({}) == ANONYMOUS
