"""A secured in-process cluster for tests: `Cluster(security=ClusterSecurity(...))`.

`ClusterSecurity` says what the client listener speaks (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL), which users exist (SCRAM-SHA-256/512 credentials written to the cluster's
ZooKeeper at `/config/users/<user>`, and/or PLAIN users in the brokers' JAAS options), who the
super users are, whether an authorizer decides and which ACLs exist at start. For TLS it
generates a test CA and a broker certificate (trustme; SANs localhost and 127.0.0.1, so
librdkafka's default host name check passes), written as PEM files into the cluster's data
dir and removed with it. The cluster then tells each client what to set::

    security = ClusterSecurity(protocol="SASL_SSL", users={"alice": "alice-secret"})
    with Cluster(security=security) as cluster:
        producer = confluent_kafka.Producer(cluster.client_config("confluent-kafka", user="alice"))

Brokers of one process still talk to each other by message, as without security: only the
clients' listener is secured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from kafkactor.actors.controller.entity_admin_zk import EntityAdminZkClient
from kafkactor.security.listener import ClientAuth, ListenerConfig, SecurityProtocol, SslConfig
from kafkactor.security.security_config import (
    AuthorizerConfig,
    BrokerSecurityConfig,
    InterBrokerSecurity,
    SaslServerConfig,
)

if TYPE_CHECKING:  # the ACL code loads when a cluster has ACLs (create_acls, acls_reached)
    from kafkactor.security.acl import AclBinding

__all__ = ["CLIENTS", "ClusterSecurity", "TestCertificates", "client_config"]

Client = Literal["confluent-kafka", "kafka-python", "aiokafka", "kcat"]
CLIENTS: Final[tuple[Client, ...]] = ("confluent-kafka", "kafka-python", "aiokafka", "kcat")
SCRAM: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class TestCertificates:
    """A generated test CA (`ca_file`) and the brokers' PEM key store (certificate chain and
    private key in one file, Kafka's `ssl.keystore.type=PEM`)."""

    __test__ = False  # not a pytest test class

    ca_file: Path
    keystore: Path

    @staticmethod
    def generate(directory: Path) -> TestCertificates:
        """A new CA and a broker certificate for localhost and 127.0.0.1, as PEM files in
        `directory` (trustme, the `tls` extra)."""
        import trustme

        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="kafkactor test CA")
        broker = ca.issue_cert("localhost", "127.0.0.1", common_name="localhost")
        ca_file, keystore = directory / "ca.pem", directory / "broker.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        broker.private_key_and_cert_chain_pem.write_to_path(str(keystore))
        keystore.chmod(0o600)
        return TestCertificates(ca_file=ca_file, keystore=keystore)


@dataclass(frozen=True, kw_only=True)
class ClusterSecurity:
    """How a test cluster's clients connect and what they may do.

    `protocol` is the client listener's. `users` maps a name to its password; each gets a
    SCRAM credential for each SCRAM mechanism of `mechanisms` and, when PLAIN is among them, a
    PLAIN login. `super_users` are user names (or principals, `User:admin`); `acls` are
    created at start; `authorizer` sets Kafka's AclAuthorizer (then
    `allow_everyone_if_no_acl_found`, false by default as in Kafka, applies). `client_auth`
    is `ssl.client.auth` of a TLS listener."""

    protocol: str = "SASL_SSL"
    users: Mapping[str, str] = field(default_factory=dict, repr=False)
    mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
    super_users: tuple[str, ...] = ()
    acls: tuple[AclBinding, ...] = ()
    authorizer: bool = False
    allow_everyone_if_no_acl_found: bool = False
    client_auth: ClientAuth = "none"
    failed_authentication_delay_ms: int = 100

    def __post_init__(self) -> None:
        protocol = SecurityProtocol[self.protocol]  # KeyError: not one of Kafka's four
        unknown = set(self.mechanisms) - {"PLAIN", *SCRAM}
        if unknown:
            raise ValueError(f"unknown SASL mechanisms {sorted(unknown)}")
        if protocol.uses_sasl and not self.mechanisms:
            raise ValueError(f"{self.protocol} needs at least one SASL mechanism")

    @property
    def security_protocol(self) -> SecurityProtocol:
        return SecurityProtocol[self.protocol]

    @property
    def scram_mechanisms(self) -> tuple[str, ...]:
        return tuple(m for m in self.mechanisms if m in SCRAM)

    @property
    def principals(self) -> tuple[str, ...]:
        """The super users as principals (`User:admin`)."""
        return tuple(u if ":" in u else f"User:{u}" for u in self.super_users)

    def broker_config(
        self, host: str, port: int, certificates: TestCertificates | None
    ) -> BrokerSecurityConfig:
        """One broker's security settings: its one client listener at host:port."""
        protocol = self.security_protocol
        ssl = None
        if protocol.uses_tls:
            assert certificates is not None
            ssl = SslConfig(
                keystore=certificates.keystore,
                truststore=certificates.ca_file,
                client_auth=self.client_auth,
            )
        listener = ListenerConfig(
            name=protocol.name,
            security_protocol=protocol,
            host=host,
            port=port,
            ssl=ssl,
            sasl_mechanisms=self.mechanisms if protocol.uses_sasl else (),
        )
        plain = dict(self.users) if "PLAIN" in self.mechanisms else {}
        return BrokerSecurityConfig(
            listeners=(listener,),
            inter_broker=InterBrokerSecurity(listener=listener.name),
            sasl=SaslServerConfig(
                plain_users=plain,
                connection_failed_authentication_delay_ms=self.failed_authentication_delay_ms,
            ),
            authorizer=AuthorizerConfig(
                enabled=self.authorizer,
                super_users=self.principals,
                allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found,
            ),
        )

    def with_user(self, name: str, password: str) -> ClusterSecurity:
        return dataclasses.replace(self, users={**self.users, name: password})


def client_config(
    client: Client,
    security: ClusterSecurity,
    bootstrap_servers: str,
    ca_file: Path | None,
    *,
    user: str | None = None,
    password: str | None = None,
    mechanism: str | None = None,
) -> Any:
    """The settings `client` needs to reach the cluster as `user` (its password from
    `security.users` unless given; the mechanism the first of `security.mechanisms` unless
    given): a dict for confluent_kafka, keyword arguments for kafka-python and aiokafka, `-b`
    and `-X` arguments for kcat."""
    protocol = security.security_protocol
    if protocol.uses_sasl:
        if user is None:
            raise ValueError(f"a {protocol.name} client needs a user")
        if password is None:
            password = security.users[user]
        mechanism = mechanism or security.mechanisms[0]
    if client in ("confluent-kafka", "kcat"):
        return _librdkafka(
            client,
            protocol,
            bootstrap_servers=bootstrap_servers,
            ca_file=ca_file,
            user=user,
            password=password,
            mechanism=mechanism,
        )
    if client not in ("kafka-python", "aiokafka"):
        raise ValueError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")
    kwargs: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers,
        "security_protocol": protocol.name,
    }
    if protocol.uses_tls:
        if client == "kafka-python":
            kwargs["ssl_cafile"] = str(ca_file)
        else:
            from aiokafka.helpers import create_ssl_context

            kwargs["ssl_context"] = create_ssl_context(cafile=str(ca_file))
    if protocol.uses_sasl:
        kwargs["sasl_mechanism"] = mechanism
        kwargs["sasl_plain_username"] = user
        kwargs["sasl_plain_password"] = password
    return kwargs


def _librdkafka(
    client: Client,
    protocol: SecurityProtocol,
    *,
    bootstrap_servers: str,
    ca_file: Path | None,
    user: str | None,
    password: str | None,
    mechanism: str | None,
) -> Any:
    """librdkafka's properties: a dict for confluent_kafka, `-b` and `-X` for kcat."""
    settings: dict[str, str] = {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": protocol.name,
    }
    if protocol.uses_tls:
        settings["ssl.ca.location"] = str(ca_file)
    if protocol.uses_sasl:
        settings["sasl.mechanisms"] = str(mechanism)
        settings["sasl.username"] = str(user)
        settings["sasl.password"] = str(password)
    if client == "confluent-kafka":
        return settings
    arguments = ["-b", settings.pop("bootstrap.servers")]
    for key, value in settings.items():
        arguments += ["-X", f"{key}={value}"]
    return arguments


def write_user(zk: Any, security: ClusterSecurity, user: str, password: str) -> None:
    """`user`'s SCRAM credentials (one per SCRAM mechanism of `security`) written to
    `/config/users/<user>` with a change notification, as `kafka-configs --alter
    --add-config SCRAM-SHA-256=[password=...]` writes them: brokers take them without a
    restart."""
    admin = EntityAdminZkClient(lambda: zk)
    for mechanism in security.scram_mechanisms:
        admin.set_scram_credential(user, mechanism, password)


def create_acls(zk: Any, bindings: tuple[AclBinding, ...]) -> None:
    """Create ACLs in ZooKeeper as `kafka-acls --add` does (each broker's ACL store reloads
    its authorizer on the change notification). Raises what the store refused."""
    from kafkactor.security.acl_store import AclStore
    from kafkactor.security.authorizer import AclAuthorizer

    store = AclStore(lambda: zk, AclAuthorizer())
    store.create_acl_paths()
    store.load_all()
    for error in store.create_acls(bindings):
        if error is not None:
            raise error


def acls_reached(brokers: Iterable[Any], bindings: tuple[AclBinding, ...]) -> bool:
    """Whether every broker's authorizer holds `bindings` (brokers without one: trivially)."""
    from kafkactor.security.authorizer import AccessControlEntry

    for broker in brokers:
        authorizer = getattr(broker.security, "authorizer", None)
        if authorizer is None:
            continue
        snapshot = authorizer.snapshot
        for binding in bindings:
            if AccessControlEntry.of(binding) not in snapshot.get(binding.pattern):
                return False
    return True


def prepare(security: ClusterSecurity, directory: Path, zk: Any) -> TestCertificates | None:
    """Before the brokers start: the test CA and broker certificate for a TLS protocol, the
    users' SCRAM credentials and the ACLs in ZooKeeper (none without ZooKeeper)."""
    certificates = None
    if security.security_protocol.uses_tls:
        certificates = TestCertificates.generate(directory)
    if zk is not None and security.security_protocol.uses_sasl:
        for user, password in security.users.items():
            write_user(zk, security, user, password)
    if zk is not None and security.acls:  # before the brokers: their ACL stores load them
        create_acls(zk, security.acls)
    return certificates


def broker_security(
    security: ClusterSecurity | None, listener: Any, certificates: TestCertificates | None
) -> BrokerSecurityConfig | None:
    """One broker's `BrokerSecurityConfig`: its client listener where its socket listens (a
    restart binds the port it had)."""
    if security is None or listener is None:
        return None
    return security.broker_config(listener.host, listener.port, certificates)
