"""A broker's security parts, built from its `BrokerSecurityConfig` (Kafka's KafkaServer.startup:
the credential cache, the authorizer and its ACL change listener, the client quota managers,
the request memory pool), started with the broker and stopped in reverse order.

Each part comes from its own module (docs/security.md): `CredentialCache` (kept current by
the broker's DynamicConfigManager from `/config/users`), `AclAuthorizer` with its `AclStore`
(`/kafka-acl`, `/kafka-acl-changes`), `QuotaManagers` over the cache's quota settings, the
`MemoryPool` of `queued.max.request.bytes`. The socket server and KafkaApis take those of
their keyword arguments they know.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kafkactor.actors.controller.broker_registration import BrokerRegistration
from kafkactor.common import ListenerEndpoint
from kafkactor.security.client_quota_manager import ClientQuotaManagerConfig, QuotaManagers
from kafkactor.security.credential_cache import CredentialCache
from kafkactor.security.entity_configs import QuotaEntity
from kafkactor.security.listener import ListenerConfig
from kafkactor.security.memory_pool import UNBOUNDED, SimpleMemoryPool
from kafkactor.security.security_config import BrokerSecurityConfig
from kafkactor.timer import Clock, Timer

if TYPE_CHECKING:  # loaded by a broker with an authorizer only (start, start_acl_store)
    from kafkactor.security.acl_store import AclStore
    from kafkactor.security.authorizer import AclAuthorizer

__all__ = ["BrokerSecurity", "client_quotas", "listener_endpoints", "registration"]


def client_quotas(
    security: BrokerSecurity | None, clock: Clock
) -> tuple[CredentialCache, QuotaManagers]:
    """The credential cache and the client quota managers of a broker: its security's, or,
    without security settings, ones of their own. As in Kafka, `/config/users` and
    `/config/clients` (SCRAM credentials, byte-rate quotas) apply to every broker: a
    PLAINTEXT client is `User:ANONYMOUS`, throttled by its client id's quota."""
    if security is not None:
        return security.credentials, security.quotas
    credentials = CredentialCache()
    return credentials, _quota_managers(credentials, clock, BrokerSecurityConfig())


def _quota_managers(
    credentials: CredentialCache, clock: Clock, config: BrokerSecurityConfig
) -> QuotaManagers:
    def entity_quota(path: str) -> Any:
        """An entity's raw config by its path under /config (the quota managers' lookup)."""
        entity_type, _, name = path.partition("/")
        entity = QuotaEntity.from_path(entity_type, name)
        return credentials.configs.configs.get(entity) if entity is not None else None

    return QuotaManagers.create(
        entity_quota,
        clock,
        ClientQuotaManagerConfig(
            num_quota_samples=config.quota_window_num,
            quota_window_size_seconds=config.quota_window_size_seconds,
        ),
    )


def listener_endpoints(
    listeners: tuple[ListenerConfig, ...], advertised: dict[str, tuple[str, int]] | None = None
) -> tuple[ListenerEndpoint, ...]:
    """Each listener's endpoint as registered: its advertised address when one is given
    (Kafka's `advertised.listeners`), else where it listens."""
    advertised = advertised or {}
    return tuple(
        ListenerEndpoint(
            listener=listener.name,
            host=advertised.get(listener.name, (listener.host, listener.port))[0],
            port=advertised.get(listener.name, (listener.host, listener.port))[1],
            security_protocol=listener.security_protocol.value,
        )
        for listener in listeners
    )


def registration(
    broker_id: int,
    endpoint: tuple[str, int],
    security: BrokerSecurity | None,
    clock: Clock,
) -> BrokerRegistration:
    """What the broker registers in `/brokers/ids/<id>`: every listener's endpoint with
    security; without, its one PLAINTEXT endpoint (port -1 without a listener)."""
    if security is None:
        return BrokerRegistration(broker_id, *endpoint, clock.now_ms())
    return BrokerRegistration.of(broker_id, security.endpoints, clock.now_ms())


class BrokerSecurity:
    """The security parts of one broker: `credentials` (SCRAM credentials and quota settings,
    filled from ZooKeeper by the DynamicConfigManager), `authorizer` (None without
    `authorizer.class.name`) and its ACL store, `quotas` (produce and fetch byte rates),
    `memory_pool` (`queued.max.request.bytes`), and the options its `SocketServer` and
    `KafkaApis` are built with."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerSecurityConfig,
        *,
        clock: Clock,
        timer: Timer,
        zookeeper: Callable[[], Any] | None,
        advertised: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.timer = timer
        self._zk = zookeeper
        self.credentials = CredentialCache()
        self.authorizer: AclAuthorizer | None = None
        self.acl_store: AclStore | None = None
        self.quotas = _quota_managers(self.credentials, clock, config)
        self.memory_pool = SimpleMemoryPool(
            config.queued_max_request_bytes if config.queued_max_request_bytes > 0 else UNBOUNDED
        )
        self._stops: list[Callable[[], None]] = []
        # the listeners as bound (a port 0 becomes the one chosen at the first start)
        self.listeners = config.listeners
        # advertised.listeners (BrokerSecurityConfig.advertised) unless given here
        self.advertised = (
            advertised
            if advertised is not None
            else {name: (host, port) for name, host, port in config.advertised}
        )

    @property
    def endpoints(self) -> tuple[ListenerEndpoint, ...]:
        """Every listener's endpoint, with the ports bound at start."""
        return listener_endpoints(self.listeners, self.advertised)

    @property
    def endpoint(self) -> tuple[str, int]:
        """(host, port) of the inter-broker listener, as registered."""
        name = self.config.inter_broker.listener
        found = next(e for e in self.endpoints if e.listener == name)
        return found.host, found.port

    def bound(self, server: Any) -> None:
        """Learn the ports the socket server bound (port 0: a free one, `server.ports` by
        listener name), so a restart binds them again."""
        ports: dict[str, int] = getattr(server, "ports", {})
        self.listeners = tuple(
            replace(listener, port=ports.get(listener.name, listener.port))
            for listener in self.listeners
        )

    def start(self) -> BrokerSecurity:
        config = self.config
        if config.authorizer.enabled:
            from kafkactor.security.authorizer import AclAuthorizer

            self.authorizer = AclAuthorizer(config.authorizer)
        return self

    def start_acl_store(self) -> None:
        """The ACL store, once the broker's ZooKeeper session is up: loads `/kafka-acl` into
        the authorizer and follows `/kafka-acl-changes` (stopped before the session closes).
        Until it has loaded, the authorizer has no ACL and refuses all but super users (the
        listener is bound before the session registers the broker)."""
        if self.authorizer is None or self._zk is None:
            return
        from kafkactor.security.acl_store import AclStore

        store = AclStore(self._zk, self.authorizer, broker_id=self.broker_id, clock=self.clock)
        store.start()
        self.acl_store = store
        self._stops.append(store.stop)

    def socket_server_options(self) -> dict[str, Any]:
        """The `SocketServer`'s keyword arguments: the listeners as bound, the SASL settings,
        the SCRAM credentials, the timer of delayed closes and mutes, the memory pool, and the
        configuration its connection limits come from."""
        return {
            "listeners": self.listeners,
            "sasl": self.config.sasl,
            "scram": self.credentials.scram_credential,
            "timer": self.timer,
            "memory_pool": self.memory_pool,
            "security": self.config,
        }

    def kafka_apis_options(self) -> dict[str, Any]:
        """KafkaApis' keyword arguments: the authorizer (None: everything allowed)."""
        return {"authorizer": self.authorizer}

    def stop(self) -> None:
        """Stop what `start` started, in reverse order."""
        while self._stops:
            stop = self._stops.pop()
            with contextlib.suppress(Exception):
                stop()
