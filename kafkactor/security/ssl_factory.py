"""Kafka's `SslFactory`: the TLS contexts of a listener (server side) and of a broker's
connections to others (client side), from an `SslConfig` of PEM files; and the principal of a
TLS connection (Kafka's `DefaultKafkaPrincipalBuilder` for SSL).

TLS 1.2 is the lowest version either side accepts (Kafka's `ssl.enabled.protocols` default is
TLSv1.2,TLSv1.3). `ssl.client.auth` maps to the server context's verify mode: `none` asks for
no client certificate, `requested` asks and accepts none, `required` refuses a connection
without one; a certificate that is sent is always checked against the trust store.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any, Final

from kafkactor.security.listener import SslConfig
from kafkactor.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["client_context", "principal_of", "server_context", "subject_dn"]

_VERIFY_MODES: Final[Mapping[str, ssl.VerifyMode]] = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}

#: The attribute keywords of RFC 2253 (what Java's `X500Principal.getName()` writes), by the
#: long names Python's `getpeercert()` gives them.
_KEYWORDS: Final[Mapping[str, str]] = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
#: X500Principal writes the attributes RFC 2253 has no keyword for as their OID.
_OIDS: Final[Mapping[str, str]] = {
    "emailAddress": "1.2.840.113549.1.9.1",
    "serialNumber": "2.5.4.5",
    "title": "2.5.4.12",
    "surname": "2.5.4.4",
    "givenName": "2.5.4.42",
}


def server_context(config: SslConfig) -> ssl.SSLContext:
    """The context of a TLS listener: its certificate chain and key from `keystore` (and `key`,
    decrypted with `key_password`), client certificates checked against `truststore` as
    `client_auth` says. A missing or unreadable file raises (the broker does not start)."""
    if config.keystore is None:
        raise ValueError("a TLS listener needs ssl.keystore.location (a PEM key store)")
    if config.client_auth not in _VERIFY_MODES:
        raise ValueError(f"ssl.client.auth must be none, requested or required: {config}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(
        certfile=str(config.keystore),
        keyfile=str(config.key) if config.key is not None else None,
        password=config.key_password,
    )
    if config.client_auth != "none":
        if config.truststore is None:
            raise ValueError(f"ssl.client.auth={config.client_auth} needs ssl.truststore.location")
        context.load_verify_locations(cafile=str(config.truststore))
    context.verify_mode = _VERIFY_MODES[config.client_auth]
    return context


def client_context(config: SslConfig) -> ssl.SSLContext:
    """The context of a connection to a TLS listener: the server checked against `truststore`
    (the system's CAs without one), its host name checked when `endpoint_identification`
    (Kafka's `ssl.endpoint.identification.algorithm=https`), and `keystore` presented as the
    client certificate when there is one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if config.truststore is not None:
        context.load_verify_locations(cafile=str(config.truststore))
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = config.endpoint_identification
    context.verify_mode = ssl.CERT_REQUIRED
    if config.keystore is not None:
        context.load_cert_chain(
            certfile=str(config.keystore),
            keyfile=str(config.key) if config.key is not None else None,
            password=config.key_password,
        )
    return context


def subject_dn(certificate: Mapping[str, Any]) -> str:
    """A certificate's subject as Java's `X500Principal.getName()` writes it (RFC 2253): the
    last relative distinguished name first, `CN=client,O=kafkactor`, values escaped."""
    names = []
    for rdn in reversed(certificate.get("subject", ())):
        names.append("+".join(f"{_attribute(key)}={_escape(str(value))}" for key, value in rdn))
    return ",".join(names)


def principal_of(certificate: Mapping[str, Any] | None) -> KafkaPrincipal:
    """Kafka's principal of a TLS connection: `User:<subject DN>` with a (verified) client
    certificate, `User:ANONYMOUS` without one."""
    if not certificate or not certificate.get("subject"):
        return ANONYMOUS
    return KafkaPrincipal.user(subject_dn(certificate))


def _attribute(name: str) -> str:
    return _KEYWORDS.get(name) or _OIDS.get(name) or name


def _escape(value: str) -> str:
    """RFC 2253 section 2.4: `,+"\\<>;` escaped, and a leading `#` or space, a trailing space."""
    out = []
    for i, char in enumerate(value):
        if char in ',+"\\<>;' or (i == 0 and char in "# ") or (i == len(value) - 1 and char == " "):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)
