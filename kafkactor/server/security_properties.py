"""A broker's security properties as read (`SecurityProperties`), and the `BrokerSecurityConfig`
they make with its listeners (`build_security`), checked as Kafka's `KafkaConfig` checks them.

Most settings apply to every listener; `listener.name.<listener>.<setting>` overrides one for
one listener (`listener.name.internal.ssl.keystore.location`), and a SASL mechanism's JAAS entry
is `listener.name.<listener>.<mechanism>.sasl.jaas.config` (names lower-cased, as Kafka's
`ListenerName.configPrefix` and its mechanism prefix write them), or `sasl.jaas.config` for every
listener and mechanism (a stand-in for the static JAAS file's `KafkaServer` section).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kafkactor.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasEntry
from kafkactor.security.listener import (
    DEFAULT_SASL_MECHANISMS,
    ListenerConfig,
    SecurityProtocol,
    SslConfig,
)
from kafkactor.security.security_config import (
    INT_MAX,
    AuthorizerConfig,
    BrokerSecurityConfig,
    InterBrokerSecurity,
    SaslServerConfig,
)
from kafkactor.server.config_kinds import EndPoint, File, Kind
from kafkactor.server.security_kinds import (
    DEFAULT_PROTOCOL_MAP,
    MECHANISMS,
    ClientAuthKind,
    EndpointIdentification,
    Jaas,
    Mechanisms,
    Password,
    StoreType,
)

__all__ = [
    "LISTENER_PREFIX",
    "SecurityProperties",
    "SecuritySettingError",
    "build_security",
    "check_store_files",
    "listener_override",
]

LISTENER_PREFIX: Final = "listener.name."
JAAS: Final = "sasl.jaas.config"
# the settings a listener may override, with their kinds
LISTENER_SETTINGS: Final[Mapping[str, Kind]] = {
    "ssl.keystore.type": StoreType(),
    "ssl.keystore.location": File(),
    "ssl.key.password": Password(),
    "ssl.truststore.type": StoreType(),
    "ssl.truststore.location": File(),
    "ssl.client.auth": ClientAuthKind(),
    "ssl.endpoint.identification.algorithm": EndpointIdentification(),
    "sasl.enabled.mechanisms": Mechanisms(),
}
_LOGIN_MODULES: Final = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
}


class SecuritySettingError(ValueError):
    """A security setting kafkactor will not run with: `setting` names it, `reason` says why
    (never quoting a secret)."""

    def __init__(self, setting: str, reason: str) -> None:
        super().__init__(reason)
        self.setting = setting
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityProperties:
    """Kafka's security settings as the properties gave them (defaults where they did not):
    `config_properties` maps each one here; `build_security` makes the broker's
    `BrokerSecurityConfig` of them. `listener_overrides` holds the `listener.name.*` settings
    (their names lower-cased, their values parsed), in the order given."""

    listener_security_protocol_map: tuple[tuple[str, SecurityProtocol], ...] = DEFAULT_PROTOCOL_MAP
    inter_broker_listener_name: str | None = None
    security_inter_broker_protocol: SecurityProtocol | None = None  # unset: PLAINTEXT
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: Path | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: Path | None = None
    ssl_client_auth: str = "none"
    ssl_endpoint_identification_algorithm: str = "https"
    sasl_enabled_mechanisms: tuple[str, ...] = DEFAULT_SASL_MECHANISMS
    sasl_mechanism_inter_broker_protocol: str = "PLAIN"
    sasl_jaas_config: JaasEntry | None = None
    authorizer_class_name: str = ""
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    connection_failed_authentication_delay_ms: int = 100
    queued_max_request_bytes: int = -1
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    listener_overrides: tuple[tuple[str, Any], ...] = field(default=(), repr=False)


def listener_override(key: str) -> tuple[str, Kind]:
    """A `listener.name.<listener>.<setting>` property's name (listener and mechanism
    lower-cased) and the setting's kind. ValueError("...") when the setting is not one a
    listener may override."""
    rest = key[len(LISTENER_PREFIX) :]
    listener, dot, setting = rest.partition(".")
    if not listener or not dot or not setting:
        raise ValueError("must be listener.name.<listener>.<setting>")
    kind = LISTENER_SETTINGS.get(setting)
    if kind is None and setting.lower().endswith("." + JAAS):
        mechanism = setting[: -len(JAAS) - 1].upper()
        if mechanism not in MECHANISMS:
            raise ValueError(
                f"names the SASL mechanism {mechanism!r}, which kafkactor does not serve: it "
                "serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"
            )
        kind, setting = Jaas(), f"{mechanism.lower()}.{JAAS}"
    if kind is None:
        raise ValueError(
            "is not a setting a listener overrides here: listener.name.<listener>. takes "
            f"{', '.join(LISTENER_SETTINGS)} and <mechanism>.sasl.jaas.config"
        )
    return f"{LISTENER_PREFIX}{listener.lower()}.{setting}", kind


class _Values:
    """The value of a setting for one listener: its `listener.name.` override, else the
    broker-wide setting; and the name it came from (for a message)."""

    def __init__(self, properties: SecurityProperties) -> None:
        self.properties = properties
        self.overrides = dict(properties.listener_overrides)

    def get(self, listener: str, setting: str) -> tuple[Any, str]:
        name = f"{LISTENER_PREFIX}{listener.lower()}.{setting}"
        if name in self.overrides:
            return self.overrides[name], name
        if setting.endswith("." + JAAS):
            return self.properties.sasl_jaas_config, JAAS
        return getattr(self.properties, setting.replace(".", "_")), setting


def build_security(
    properties: SecurityProperties,
    listeners: tuple[EndPoint, ...],
    advertised: tuple[EndPoint, ...],
) -> BrokerSecurityConfig:
    """The broker's `BrokerSecurityConfig`: its listeners (`listeners`, with the protocols of
    listener.security.protocol.map and each one's TLS and SASL settings), the inter-broker side,
    the SASL server settings, the authorizer and the limits. SecuritySettingError names the
    setting at fault: a listener with no protocol, an advertised listener that is not a
    listener, an inter-broker listener that is not advertised, a TLS listener without a key
    store, a SASL listener whose mechanisms have no JAAS entry, ..."""
    protocols = dict(properties.listener_security_protocol_map)
    for endpoint in listeners:
        if endpoint.listener_name not in protocols:
            raise SecuritySettingError(
                "listeners",
                f"No security protocol defined for listener {endpoint.listener_name} "
                "(listener.security.protocol.map maps "
                f"{', '.join(protocols)})",
            )
    names = [endpoint.listener_name for endpoint in listeners]
    advertised_names = [endpoint.listener_name for endpoint in advertised]
    if not set(advertised_names) <= set(names):
        raise SecuritySettingError(
            "advertised.listeners",
            "advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(advertised_names)}. The valid options "
            f"based on the current configuration are {','.join(names)}",
        )
    _inter_broker_name(properties, advertised_names)  # Kafka checks it before the listeners'
    values = _Values(properties)
    unknown = {
        key: key[len(LISTENER_PREFIX) :].partition(".")[0].upper() for key in values.overrides
    }
    for key, name in unknown.items():
        if name not in names:
            raise SecuritySettingError(
                key, f"names listener {name}, which is not among listeners ({', '.join(names)})"
            )
    plain_users: dict[str, tuple[str, str]] = {}  # user -> (password, where)
    configs = []
    for endpoint in listeners:
        protocol = protocols[endpoint.listener_name]
        ssl = _ssl(values, endpoint.listener_name) if protocol.uses_tls else None
        mechanisms: tuple[str, ...] = DEFAULT_SASL_MECHANISMS
        if protocol.uses_sasl:
            mechanisms = _sasl(values, endpoint.listener_name, protocol, plain_users)
        configs.append(
            ListenerConfig(
                name=endpoint.listener_name,
                security_protocol=protocol,
                host=endpoint.host,
                port=endpoint.port,
                ssl=ssl,
                sasl_mechanisms=mechanisms,
            )
        )
    inter_broker = _inter_broker(properties, values, configs, advertised_names)
    return BrokerSecurityConfig(
        listeners=tuple(configs),
        advertised=tuple(
            (e.listener_name, e.host, e.port)
            for e in advertised
            if (e.host, e.port) != _address(listeners, e.listener_name)
        ),
        inter_broker=inter_broker,
        sasl=SaslServerConfig(
            plain_users={user: password for user, (password, _) in plain_users.items()},
            connection_failed_authentication_delay_ms=(
                properties.connection_failed_authentication_delay_ms
            ),
        ),
        authorizer=AuthorizerConfig(
            enabled=bool(properties.authorizer_class_name),
            super_users=properties.super_users,
            allow_everyone_if_no_acl_found=properties.allow_everyone_if_no_acl_found,
        ),
        queued_max_request_bytes=properties.queued_max_request_bytes,
        max_connections=properties.max_connections,
        max_connections_per_ip=properties.max_connections_per_ip,
        max_connections_per_ip_overrides=dict(properties.max_connections_per_ip_overrides),
        quota_window_num=properties.quota_window_num,
        quota_window_size_seconds=properties.quota_window_size_seconds,
    )


def check_store_files(properties: SecurityProperties) -> None:
    """Every key store and trust store the properties name is a readable file (checked when a
    broker starts, not when properties are read: a configuration may be written elsewhere).
    SecuritySettingError names the setting."""
    named = [
        ("ssl.keystore.location", properties.ssl_keystore_location),
        ("ssl.truststore.location", properties.ssl_truststore_location),
        *(
            (name, value)
            for name, value in properties.listener_overrides
            if name.endswith((".ssl.keystore.location", ".ssl.truststore.location"))
        ),
    ]
    for setting, path in named:
        if path is not None and not os.access(path, os.R_OK):
            raise SecuritySettingError(setting, f"{path} is not a readable file")


def _address(listeners: tuple[EndPoint, ...], name: str) -> tuple[str, int] | None:
    return next(((e.host, e.port) for e in listeners if e.listener_name == name), None)


def _ssl(values: _Values, listener: str) -> SslConfig:
    keystore, _ = values.get(listener, "ssl.keystore.location")
    if keystore is None:
        raise SecuritySettingError(
            "ssl.keystore.location",
            f"listener {listener} uses TLS and has no key store: set ssl.keystore.location "
            f"(or listener.name.{listener.lower()}.ssl.keystore.location) to a PEM file holding "
            "the broker's certificate chain and private key",
        )
    truststore, _ = values.get(listener, "ssl.truststore.location")
    key_password, _ = values.get(listener, "ssl.key.password")
    client_auth, _ = values.get(listener, "ssl.client.auth")
    identification, _ = values.get(listener, "ssl.endpoint.identification.algorithm")
    return SslConfig(
        keystore=Path(keystore),
        key_password=key_password,
        truststore=None if truststore is None else Path(truststore),
        client_auth=client_auth,
        endpoint_identification=identification == "https",
    )


def _sasl(
    values: _Values,
    listener: str,
    protocol: SecurityProtocol,
    plain_users: dict[str, tuple[str, str]],
) -> tuple[str, ...]:
    """A SASL listener's mechanisms, each with its JAAS entry checked; PLAIN's users added to
    `plain_users` (one password per user across listeners)."""
    mechanisms, mechanisms_setting = values.get(listener, "sasl.enabled.mechanisms")
    if not mechanisms:
        raise SecuritySettingError(
            mechanisms_setting, f"listener {listener} ({protocol.name}) enables no SASL mechanism"
        )
    for mechanism in mechanisms:
        entry, setting = _jaas(values, listener, mechanism)
        if mechanism != "PLAIN":
            continue
        for user, password in entry.plain_users().items():
            known = plain_users.setdefault(user, (password, setting))
            if known[0] != password:
                raise SecuritySettingError(
                    setting,
                    f"gives PLAIN user {user} another password than {known[1]} does: kafkactor "
                    "keeps one PLAIN user list per broker",
                )
    return tuple(mechanisms)


def _jaas(values: _Values, listener: str, mechanism: str) -> tuple[JaasEntry, str]:
    """The JAAS entry of `mechanism` on `listener`, and the setting that gave it."""
    entry, setting = values.get(listener, f"{mechanism.lower()}.{JAAS}")
    module = _LOGIN_MODULES[mechanism]
    if entry is None:
        name = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.{JAAS}"
        raise SecuritySettingError(
            name,
            f"listener {listener} enables SASL mechanism {mechanism} and has no JAAS "
            f"configuration for it: set {name} (or {JAAS}) to a {module} entry",
        )
    if entry.login_module != module:
        raise SecuritySettingError(
            setting,
            f"is a {entry.login_module} entry, and {mechanism} on listener {listener} needs "
            f"{module}",
        )
    assert isinstance(entry, JaasEntry)
    return entry, setting


def _inter_broker_name(properties: SecurityProperties, advertised_names: list[str]) -> str:
    """The inter-broker listener's name (by name, or named after its protocol), checked as
    Kafka's KafkaConfig checks it."""
    by_name = properties.inter_broker_listener_name
    by_protocol = properties.security_inter_broker_protocol
    if by_name is not None and by_protocol is not None:
        raise SecuritySettingError(
            "inter.broker.listener.name",
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should "
            "be set.",
        )
    name = by_name if by_name is not None else (by_protocol or SecurityProtocol.PLAINTEXT).name
    if name not in advertised_names:
        setting = "security.inter.broker.protocol" if by_protocol else "inter.broker.listener.name"
        unset = "" if by_name or by_protocol else f" (unset: the listener {name})"
        raise SecuritySettingError(
            setting,
            f"inter.broker.listener.name{unset} must be a listener name defined in "
            "advertised.listeners. The valid options based on currently configured listeners "
            f"are {','.join(advertised_names)}",
        )
    return name


def _inter_broker(
    properties: SecurityProperties,
    values: _Values,
    listeners: list[ListenerConfig],
    advertised_names: list[str],
) -> InterBrokerSecurity:
    """How this broker connects to its peers: the inter-broker listener (by name, or named
    after security.inter.broker.protocol), its mechanism and the broker's own login."""
    name = _inter_broker_name(properties, advertised_names)
    listener = next(config for config in listeners if config.name == name)
    protocol = listener.security_protocol
    if not protocol.uses_sasl:
        return InterBrokerSecurity(listener=name, ssl=listener.ssl)
    mechanism = properties.sasl_mechanism_inter_broker_protocol
    if mechanism not in listener.sasl_mechanisms:
        raise SecuritySettingError(
            "sasl.mechanism.inter.broker.protocol",
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
            f"when SASL is used for inter-broker communication (listener {name} enables "
            f"{','.join(listener.sasl_mechanisms)})",
        )
    entry, setting = _jaas(values, name, mechanism)
    if not entry.username or entry.password is None:
        raise SecuritySettingError(
            setting,
            f"needs the options username and password on the inter-broker listener {name}: "
            f"the broker's own {mechanism} login to its peers",
        )
    return InterBrokerSecurity(
        listener=name,
        mechanism=mechanism,
        username=entry.username,
        password=entry.password,
        ssl=listener.ssl,
    )
