"""Kafka's security settings in server.properties: read into the broker's BrokerSecurityConfig,
every misconfiguration refused naming its setting, and secrets never shown (DescribeConfigs,
errors, reprs)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafkactor.actors.broker_security import BrokerSecurity, registration
from kafkactor.network.config_apis import ConfigSource
from kafkactor.security.listener import DEFAULT_SASL_MECHANISMS, SecurityProtocol, SslConfig
from kafkactor.security.security_config import INT_MAX
from kafkactor.server import ConfigError, EndPoint, KafkaConfig
from kafkactor.server.security_properties import SecuritySettingError, check_store_files
from kafkactor.timer import ManualClock, Timer
from tests.network.test_config_apis import apis, describe

pytestmark = pytest.mark.timeout(60)

MINIMAL = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)
SASL = {
    **MINIMAL,
    "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093,SECURE://127.0.0.1:9094",
    "advertised.listeners": "PLAINTEXT://b1.example:9092,INTERNAL://b1.internal:9093,"
    "SECURE://b1.example:9094",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SECURE:SASL_SSL",
    "inter.broker.listener.name": "internal",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.internal.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.secure.plain.sasl.jaas.config": PLAIN_JAAS,
    "ssl.keystore.location": "/etc/kafka/broker.pem",
    "ssl.key.password": "key-secret",
    "ssl.truststore.location": "/etc/kafka/ca.pem",
    "listener.name.secure.ssl.client.auth": "required",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin; User:broker",
    "connection.failed.authentication.delay.ms": "250",
    "queued.max.request.bytes": "1048576",
    "max.connections": "100",
    "max.connections.per.ip": "10",
    "max.connections.per.ip.overrides": "127.0.0.1:200, 10.0.0.7:5",
    "quota.window.num": "5",
    "quota.window.size.seconds": "2",
}
SECRETS = ("admin-secret", "alice-secret", "broker-secret", "key-secret")


def test_a_broker_without_security_settings_has_one_plaintext_listener() -> None:
    security = KafkaConfig.from_properties(MINIMAL).security
    assert security is not None
    (listener,) = security.listeners
    assert (listener.name, listener.security_protocol) == ("PLAINTEXT", SecurityProtocol.PLAINTEXT)
    assert (listener.host, listener.port, listener.ssl) == ("127.0.0.1", 9092, None)
    assert security.inter_broker.listener == "PLAINTEXT"
    assert security.inter_broker.mechanism is None
    assert security.authorizer.enabled is False
    assert (security.queued_max_request_bytes, security.max_connections) == (-1, INT_MAX)
    assert (security.quota_window_num, security.quota_window_size_seconds) == (11, 1)
    assert security.sasl.connection_failed_authentication_delay_ms == 100


def test_listeners_protocols_tls_sasl_and_limits_make_the_brokers_security() -> None:
    config = KafkaConfig.from_properties(SASL)
    assert config.listeners == EndPoint("127.0.0.1", 9092)  # the PLAINTEXT one, as before
    assert config.advertised_listeners == EndPoint("b1.example", 9092)
    assert [str(e) for e in config.listener_endpoints] == [
        "PLAINTEXT://127.0.0.1:9092",
        "INTERNAL://127.0.0.1:9093",
        "SECURE://127.0.0.1:9094",
    ]
    security = config.security
    assert security is not None
    plain, internal, secure = security.listeners
    assert plain.security_protocol is SecurityProtocol.PLAINTEXT
    assert (internal.name, internal.port) == ("INTERNAL", 9093)
    assert internal.security_protocol is SecurityProtocol.SASL_PLAINTEXT
    assert internal.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert internal.ssl is None
    assert secure.security_protocol is SecurityProtocol.SASL_SSL
    assert secure.sasl_mechanisms == ("PLAIN",)  # its listener.name. override
    assert secure.ssl == SslConfig(
        keystore=Path("/etc/kafka/broker.pem"),
        key_password="key-secret",
        truststore=Path("/etc/kafka/ca.pem"),
        client_auth="required",  # its override; the broker-wide default is none
        endpoint_identification=True,
    )
    assert security.advertised_endpoint("INTERNAL") == ("b1.internal", 9093)
    inter = security.inter_broker
    assert (inter.listener, inter.mechanism) == ("INTERNAL", "SCRAM-SHA-256")
    assert (inter.username, inter.password) == ("broker", "broker-secret")
    assert security.sasl.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert security.sasl.connection_failed_authentication_delay_ms == 250
    assert security.authorizer.enabled is True
    assert security.authorizer.super_users == ("User:admin", "User:broker")
    assert security.authorizer.allow_everyone_if_no_acl_found is False
    assert (security.queued_max_request_bytes, security.max_connections) == (1_048_576, 100)
    assert security.max_connections_per_ip == 10
    assert security.max_connections_per_ip_overrides == {"127.0.0.1": 200, "10.0.0.7": 5}
    assert (security.quota_window_num, security.quota_window_size_seconds) == (5, 2)


def test_security_inter_broker_protocol_names_the_listener_of_that_protocol() -> None:
    config = KafkaConfig.from_properties(
        {
            **MINIMAL,
            "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": PLAIN_JAAS.replace("PlainLoginModule", "PlainLoginModule"),
            "sasl.enabled.mechanisms": "PLAIN",
        }
    )
    assert config.security is not None
    inter = config.security.inter_broker
    assert (inter.listener, inter.mechanism, inter.username) == ("SASL_PLAINTEXT", "PLAIN", "admin")
    assert config.security.listener("SASL_PLAINTEXT").sasl_mechanisms == ("PLAIN",)


def test_what_to_properties_writes_reads_back_to_the_same_security() -> None:
    config = KafkaConfig.from_properties(SASL)
    text = config.to_properties()
    assert "listener.name.secure.ssl.client.auth=required" in text
    again = KafkaConfig.from_properties(
        dict(line.split("=", 1) for line in _logical_lines(text) if not line.startswith("#"))
    )
    assert again == config
    assert again.security == config.security


def _logical_lines(text: str) -> list[str]:
    import javaproperties

    return [f"{k}={v}" for k, v in javaproperties.loads(text).items()]


def _refused(properties: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        KafkaConfig.from_properties(properties)
    for secret in SECRETS:
        assert secret not in str(refused.value)
    return refused.value


@pytest.mark.parametrize(
    ("changes", "setting", "needle"),
    [
        (
            {"listeners": "SSL://127.0.0.1:9093", "security.inter.broker.protocol": "SSL"},
            "ssl.keystore.location",
            "listener SSL uses TLS and has no key store",
        ),
        (
            {"listeners": "PLAINTEXT://h:1,INTERNAL://h:2"},
            "listeners",
            "No security protocol defined for listener INTERNAL",
        ),
        (
            {"listeners": "PLAINTEXT://h:1", "advertised.listeners": "SSL://h:2"},
            "advertised.listeners",
            "must be equal to or a subset of the ones defined in listeners",
        ),
        (
            {"inter.broker.listener.name": "REPLICATION"},
            "inter.broker.listener.name",
            "must be a listener name defined in advertised.listeners. The valid options",
        ),
        (
            {"listeners": "SASL_PLAINTEXT://h:1"},
            "inter.broker.listener.name",
            "(unset: the listener PLAINTEXT) must be a listener name defined",
        ),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "inter.broker.listener.name",
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        (
            {"listeners": "PLAINTEXT://h:1,SASL_PLAINTEXT://h:2"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            "listener SASL_PLAINTEXT enables SASL mechanism PLAIN and has no JAAS",
        ),
        (
            {
                "listeners": "PLAINTEXT://h:1,SASL_PLAINTEXT://h:2",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "sasl.jaas.config": PLAIN_JAAS,
            },
            "sasl.jaas.config",
            "SCRAM-SHA-512 on listener SASL_PLAINTEXT needs "
            "org.apache.kafka.common.security.scram.ScramLoginModule",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://h:2",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "sasl.jaas.config": SCRAM_JAAS,
            },
            "sasl.mechanism.inter.broker.protocol",
            "must be included in sasl.enabled.mechanisms when SASL is used for inter-broker",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://h:2",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required user_admin="admin-secret";',
            },
            "sasl.jaas.config",
            "needs the options username and password on the inter-broker listener",
        ),
        (
            {
                "listeners": "PLAINTEXT://h:1,SASL_PLAINTEXT://h:2",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "",
            },
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "enables no SASL mechanism",
        ),
        (
            {
                "listeners": "PLAINTEXT://h:1,SASL_PLAINTEXT://h:2,SASL_SSL://h:3",
                "sasl.enabled.mechanisms": "PLAIN",
                "ssl.keystore.location": "/k.pem",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS.replace(
                    "alice-secret", "other"
                ),
            },
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "gives PLAIN user alice another password than",
        ),
        (
            {"listener.name.external.ssl.client.auth": "required"},
            "listener.name.external.ssl.client.auth",
            "names listener EXTERNAL, which is not among listeners",
        ),
    ],
)
def test_a_misconfiguration_is_refused_naming_the_setting(
    changes: dict[str, str], setting: str, needle: str
) -> None:
    error = _refused({**MINIMAL, **changes})
    assert error.setting == setting
    assert needle in error.reason


@pytest.mark.parametrize(
    ("line", "setting", "needle"),
    [
        ("ssl.keystore.type=JKS", "ssl.keystore.type", "must be PEM"),
        ("ssl.truststore.type=PKCS12", "ssl.truststore.type", "must be PEM"),
        ("ssl.client.auth=always", "ssl.client.auth", "must be none, requested or required"),
        ("ssl.endpoint.identification.algorithm=dns", "ssl.endpoint.identification", "https"),
        ("sasl.enabled.mechanisms=GSSAPI", "sasl.enabled.mechanisms", "does not serve"),
        ("sasl.mechanism.inter.broker.protocol=OAUTHBEARER", "sasl.mechanism", "does not serve"),
        ("listener.security.protocol.map=A:TLS", "listener.security.protocol.map", "protocol"),
        ("security.inter.broker.protocol=HTTPS", "security.inter.broker.protocol", "SASL_SSL"),
        ("authorizer.class.name=com.example.Mine", "authorizer.class.name", "AclAuthorizer"),
        ("super.users=admin", "super.users", "<type>:<name>"),
        ("max.connections=-1", "max.connections", "non-negative"),
        ("max.connections.per.ip.overrides=h", "max.connections.per.ip.overrides", "<host>"),
        ("max.connections.per.ip.overrides=h:-2", "max.connections.per.ip.overrides", "negative"),
        ("quota.window.num=0", "quota.window.num", "positive"),
        ("listener.name.a.ssl.protocol=TLSv1.3", "listener.name.a.ssl.protocol", "overrides"),
        ("listener.name.a.gssapi.sasl.jaas.config=x", "listener.name.a.gssapi", "GSSAPI"),
        (
            'sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required k="s3cret";',
            "sasl.jaas.config",
            "Krb5LoginModule' is not supported",
        ),
        ('sasl.jaas.config=x required password="s3cret"', "sasl.jaas.config", "semi-colon"),
        ("ssl.keystore.password=s3cret", "ssl.keystore.password", "has no store password"),
        ("ssl.cipher.suites=X", "ssl.cipher.suites", "Python's ssl defaults"),
        ("sasl.kerberos.service.name=kafka", "sasl.kerberos.service.name", "Kerberos"),
    ],
)
def test_a_malformed_security_value_is_refused_on_its_line(
    tmp_path: Path, line: str, setting: str, needle: str
) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        KafkaConfig.from_file(path)
    assert refused.value.line == 3
    assert (refused.value.setting or "").startswith(setting)
    assert needle in str(refused.value)
    assert "s3cret" not in str(refused.value)  # a JAAS entry's or a password's value


def test_describe_configs_lists_security_settings_and_hides_every_secret() -> None:
    config = KafkaConfig.from_properties(SASL)
    properties = config.broker.properties
    assert properties is not None
    by_name = {prop.name: prop for prop in properties.properties}
    assert by_name["listeners"].value == SASL["listeners"]
    assert by_name["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256"
    assert by_name["listener.name.secure.ssl.client.auth"].value == "required"
    for name in (
        "ssl.key.password",
        "listener.name.internal.plain.sasl.jaas.config",
        "listener.name.internal.scram-sha-256.sasl.jaas.config",
    ):
        assert by_name[name].sensitive, name
    listing = repr(properties) + repr(config) + repr(config.given)
    for secret in SECRETS:
        assert secret not in listing
    # as a client decodes DescribeConfigs: a PASSWORD has no value, is_sensitive, its source
    (result,) = describe(apis(properties=properties), 1, (4, "1", None), synonyms=True).results
    configs = {entry.name: entry for entry in result.configs}
    secret = configs["ssl.key.password"]
    assert (secret.value, secret.is_sensitive) == (None, True)
    assert secret.config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert all(synonym.value is None for synonym in secret.synonyms)
    jaas = configs["listener.name.internal.plain.sasl.jaas.config"]
    assert (jaas.value, jaas.is_sensitive) == (None, True)
    assert configs["super.users"].value == "User:admin;User:broker"


def test_a_key_store_that_cannot_be_read_is_named_at_start(tmp_path: Path) -> None:
    pem = tmp_path / "broker.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n", encoding="ascii")
    config = KafkaConfig.from_properties(
        {**SASL, "ssl.keystore.location": str(pem), "ssl.truststore.location": str(pem)}
    )
    check_store_files(config.security_properties)  # readable: nothing to say
    missing = {**SASL, "ssl.keystore.location": str(pem), "ssl.truststore.location": "/no/ca"}
    with pytest.raises(SecuritySettingError) as refused:
        check_store_files(KafkaConfig.from_properties(missing).security_properties)
    assert refused.value.setting == "ssl.truststore.location"


def test_kafkactor_broker_exits_2_naming_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        textwrap.dedent(
            """\
            broker.id=1
            zookeeper.connect=127.0.0.1:1
            listeners=SASL_SSL://127.0.0.1:0
            security.inter.broker.protocol=SASL_SSL
            ssl.keystore.location=/no/such/broker.pem
            sasl.enabled.mechanisms=PLAIN
            sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
                username="admin" password="admin-secret";
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "kafkactor", "broker", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "'ssl.keystore.location'" in done.stderr
    assert "/no/such/broker.pem is not a readable file" in done.stderr
    assert "admin-secret" not in done.stderr + done.stdout


def test_default_sasl_mechanisms_are_the_three_served() -> None:
    assert DEFAULT_SASL_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    config = KafkaConfig.from_properties(MINIMAL)
    assert config.security_properties.sasl_enabled_mechanisms == DEFAULT_SASL_MECHANISMS


def test_a_broker_registers_its_advertised_listeners() -> None:
    """advertised.listeners of a broker on every interface reach its registration in
    /brokers/ids/<id>: each listener's advertised address, the inter-broker one on top."""
    config = KafkaConfig.from_properties(
        {
            **MINIMAL,
            "listeners": "PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:9093",
            "advertised.listeners": "PLAINTEXT://b1.example:19092,INTERNAL://b1.internal:19093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert config.security is not None
    clock = ManualClock()
    security = BrokerSecurity(1, config.security, clock=clock, timer=Timer(clock), zookeeper=None)
    registered = registration(1, security.endpoint, security, clock)
    assert [e.url() for e in registered.endpoints] == [
        "PLAINTEXT://b1.example:19092",
        "INTERNAL://b1.internal:19093",
    ]
    assert security.endpoint == ("b1.internal", 19093)
