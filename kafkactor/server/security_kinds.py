"""How Kafka's security properties' text becomes values of `SecurityProperties` and back
(`listener.security.protocol.map`, `ssl.keystore.type`, `sasl.enabled.mechanisms`,
`sasl.jaas.config`, `super.users`, ...), as `config_kinds` does for the other settings.

A kind whose `sensitive` is true holds a secret (Kafka's PASSWORD type): its parse errors
never quote the text, and DescribeConfigs lists it with no value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kafkactor.security.connection_quotas import parse_per_ip_overrides
from kafkactor.security.jaas import JaasConfigError, JaasEntry, format_jaas, parse_jaas
from kafkactor.security.listener import SecurityProtocol
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.server.config_kinds import Kind

__all__ = [
    "ACL_AUTHORIZERS",
    "DEFAULT_PROTOCOL_MAP",
    "MECHANISMS",
    "AuthorizerClass",
    "ClientAuthKind",
    "EndpointIdentification",
    "Jaas",
    "ListenerNameKind",
    "Mechanism",
    "Mechanisms",
    "Password",
    "Principals",
    "Protocol",
    "ProtocolMap",
    "StoreType",
]

# Kafka's default listener.security.protocol.map: each protocol's name maps to itself
DEFAULT_PROTOCOL_MAP: Final = tuple((p.name, p) for p in SecurityProtocol)
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# authorizer.class.name values that turn on Kafka's ACL authorizer (2.8's and its old name)
ACL_AUTHORIZERS: Final = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)
_PROTOCOLS: Final = ", ".join(p.name for p in SecurityProtocol)


def _protocol(text: str) -> SecurityProtocol:
    try:
        return SecurityProtocol[text.upper()]
    except KeyError:
        raise ValueError(f"must name a security protocol ({_PROTOCOLS})") from None


@dataclass(frozen=True, slots=True)
class Protocol(Kind):
    """security.inter.broker.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""

    def parse(self, text: str) -> SecurityProtocol:
        return _protocol(text)

    def format(self, value: Any) -> str:
        return str(value.name)


@dataclass(frozen=True, slots=True)
class ListenerNameKind(Kind):
    """inter.broker.listener.name: a listener's name (upper-cased, as Kafka normalises it)."""

    def parse(self, text: str) -> str:
        if not text or any(c in text for c in ":/,"):
            raise ValueError("must be a listener name")
        return text.upper()


@dataclass(frozen=True, slots=True)
class ProtocolMap(Kind):
    """listener.security.protocol.map: `NAME:PROTOCOL[,NAME:PROTOCOL...]`."""

    def parse(self, text: str) -> tuple[tuple[str, SecurityProtocol], ...]:
        pairs: list[tuple[str, SecurityProtocol]] = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, protocol = part.partition(":")
            if not sep or not name.strip():
                raise ValueError("must be NAME:PROTOCOL[,NAME:PROTOCOL...]")
            pairs.append((name.strip().upper(), _protocol(protocol.strip())))
        names = [name for name, _ in pairs]
        if not pairs:
            raise ValueError("must map at least one listener name")
        if len(set(names)) != len(names):
            raise ValueError("must map each listener name once")
        return tuple(pairs)

    def format(self, value: Any) -> str:
        return ",".join(f"{name}:{protocol.name}" for name, protocol in value)


@dataclass(frozen=True, slots=True)
class StoreType(Kind):
    """ssl.keystore.type and ssl.truststore.type: PEM, the one kafkactor reads."""

    def parse(self, text: str) -> str:
        if text.upper() != "PEM":
            raise ValueError(
                "must be PEM: kafkactor reads key and trust stores as PEM files (JKS and "
                "PKCS12 stores are not supported; openssl converts them to PEM)"
            )
        return "PEM"


@dataclass(frozen=True, slots=True)
class ClientAuthKind(Kind):
    """ssl.client.auth: none, requested or required."""

    def parse(self, text: str) -> str:
        if text.lower() not in ("none", "requested", "required"):
            raise ValueError("must be none, requested or required")
        return text.lower()


@dataclass(frozen=True, slots=True)
class EndpointIdentification(Kind):
    """ssl.endpoint.identification.algorithm: `https` (the peer's certificate must name the
    host connected to) or empty (no such check)."""

    def parse(self, text: str) -> str:
        if text.lower() not in ("https", ""):
            raise ValueError("must be https or empty (no host name verification)")
        return text.lower()


def _mechanism(text: str) -> str:
    if text not in MECHANISMS:
        raise ValueError(
            f"names the SASL mechanism {text!r}, which kafkactor does not serve: it serves "
            "PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"
        )
    return text


@dataclass(frozen=True, slots=True)
class Mechanisms(Kind):
    """sasl.enabled.mechanisms: comma-separated, among PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."""

    def parse(self, text: str) -> tuple[str, ...]:
        names = [_mechanism(part.strip()) for part in text.split(",") if part.strip()]
        if len(set(names)) != len(names):
            raise ValueError("must name each mechanism once")
        return tuple(names)

    def format(self, value: Any) -> str:
        return ",".join(value)


@dataclass(frozen=True, slots=True)
class Mechanism(Kind):
    """sasl.mechanism.inter.broker.protocol: one of the mechanisms kafkactor serves."""

    def parse(self, text: str) -> str:
        return _mechanism(text)


@dataclass(frozen=True, slots=True)
class Password(Kind):
    """A secret (ssl.key.password): kept as given, never shown."""

    sensitive: bool = True


@dataclass(frozen=True, slots=True)
class Jaas(Kind):
    """sasl.jaas.config: one PlainLoginModule or ScramLoginModule entry (`security.jaas`)."""

    sensitive: bool = True

    def parse(self, text: str) -> JaasEntry:
        try:
            return parse_jaas(text)
        except JaasConfigError as error:
            raise ValueError(f"must be a JAAS login module entry ({error})") from None

    def format(self, value: Any) -> str:
        return format_jaas(value)


@dataclass(frozen=True, slots=True)
class AuthorizerClass(Kind):
    """authorizer.class.name: empty (no authorizer) or Kafka's ACL authorizer."""

    def parse(self, text: str) -> str:
        if text and text not in ACL_AUTHORIZERS:
            raise ValueError(
                f"must be {ACL_AUTHORIZERS[0]} (or {ACL_AUTHORIZERS[1]}), or empty: kafkactor "
                "has Kafka's ACL authorizer only"
            )
        return text


@dataclass(frozen=True, slots=True)
class PerIpOverrides(Kind):
    """max.connections.per.ip.overrides: `host:count` pairs separated by commas."""

    def parse(self, text: str) -> tuple[tuple[str, int], ...]:
        try:
            return tuple(parse_per_ip_overrides(text).items())
        except ValueError as error:
            raise ValueError(f"must be <host>:<count> pairs separated by ',' ({error})") from None

    def format(self, value: Any) -> str:
        return ",".join(f"{host}:{count}" for host, count in value)


@dataclass(frozen=True, slots=True)
class Principals(Kind):
    """super.users: principals separated by `;` (`User:admin;User:alice`)."""

    def parse(self, text: str) -> tuple[str, ...]:
        principals = []
        for part in (p.strip() for p in text.split(";")):
            if not part:
                continue
            try:
                principals.append(str(KafkaPrincipal.parse(part)))
            except ValueError:
                raise ValueError(
                    f"must be principals <type>:<name> separated by ';' ({part!r} is not one)"
                ) from None
        return tuple(principals)

    def format(self, value: Any) -> str:
        return ";".join(value)
