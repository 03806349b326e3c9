"""A broker's listener of config changes in ZooKeeper: Kafka's `DynamicConfigManager`."""

from __future__ import annotations

import contextlib
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.config_changes import (
    CHANGE_EXPIRATION_MS,
    CONFIG_CHANGES,
    TOPICS,
    ChangeNotificationSequence,
    decode_config_change,
    fetch_topic_config,
)
from kafkactor.actors.controller.zk_session import ZooKeeperSession
from kafkactor.actors.runtime import Directory, TracedActor, addresses, handles
from kafkactor.messages.config import (
    ConfigChangesNotified,
    TopicConfigChanged,
    TopicUncleanElectionChanged,
)
from kafkactor.messages.controller import ZooKeeperSessionStarted
from kafkactor.security.credential_cache import CredentialCache, CredentialChange
from kafkactor.security.entity_configs import (
    CLIENTS,
    USERS,
    QuotaEntity,
    fetch_entity_config,
    load_entity_configs,
)
from kafkactor.storage import LogConfig
from kafkactor.timer import Clock

__all__ = ["DynamicConfigManagerActor"]


class DynamicConfigManagerActor(TracedActor):
    """Kafka's `DynamicConfigManager` (its `ZkNodeChangeNotificationListener` on
    `/config/changes`) with its `TopicConfigHandler`, for one broker.

    On start, and again on every new ZooKeeper session, it watches `/config/changes` and
    processes every notification still there; each time the children change it processes
    those numbered above the last it processed (`ChangeNotificationSequence`). A topic's
    notification makes it read `/config/topics/<t>` and tell the broker's replica manager
    the topic's overrides (`TopicConfigChanged`: the logs and partitions take the config),
    and the broker's controller actor whether unclean leader election is now enabled for
    the topic (the elected controller acts on it). With a `credentials` cache, the users and
    clients entity configs (SCRAM credentials, quotas) are all read at start and on every new
    session, and a `users/...` or `clients/...` notification re-reads that entity into it
    (Kafka's UserConfigHandler / ClientIdConfigHandler); a credential that came or went is an
    event naming the user and mechanism only. Other entity types (brokers) have no handler
    here and are skipped; a notification that does not decode is
    logged (`config_change.invalid`) and skipped, as Kafka does. Notifications older than
    `expiration_ms` are deleted after each round, as Kafka's listener deletes them.

    ZooKeeper calls are made on this actor's thread; the watch callback runs on the
    ZooKeeper client's thread and only tells this actor `ConfigChangesNotified`.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        clock: Clock,
        broker: int,
        *,
        zk: ZooKeeperSession,
        defaults: LogConfig | None = None,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
        credentials: CredentialCache | None = None,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.broker_id = broker
        self.zk = zk
        self.defaults = defaults if defaults is not None else LogConfig()
        self.sequence = ChangeNotificationSequence(expiration_ms)
        self.credentials = credentials
        self._entities_loaded = False  # users / clients read whole on start and per session

    def on_start(self) -> None:
        super().on_start()
        self.actor_ref.tell(ConfigChangesNotified())

    def _changed(self, event: Any) -> None:
        """The watch (one bound method, so kazoo keeps it once however often it is set)."""
        if getattr(event, "type", None) in (EventType.CHILD, EventType.DELETED):
            self.directory.tell(self.address, ConfigChangesNotified())

    @handles(ZooKeeperSessionStarted)
    def _on_session_started(self, _event: ZooKeeperSessionStarted) -> None:
        self._entities_loaded = False
        self._process()  # watches went with the old session: set again, catch up

    @handles(ConfigChangesNotified)
    def _on_changes(self, _event: ConfigChangesNotified) -> None:
        self._process()

    def _process(self) -> None:
        zk = self.zk.client
        zk.ensure_path(CONFIG_CHANGES)
        children: list[str] = zk.get_children(CONFIG_CHANGES, watch=self._changed)
        if self.credentials is not None and not self._entities_loaded:
            self._load_entities()
        for name in self.sequence.pending(children):
            path = f"{CONFIG_CHANGES}/{name}"
            try:
                data, _ = zk.get(path)
                change = decode_config_change(path, data)
                if change.entity_type == TOPICS:
                    self._topic_changed(change.entity_name, name)
                elif change.entity_type in (USERS, CLIENTS) and self.credentials is not None:
                    self._entity_changed(change.entity_type, change.entity_name, name)
            except NoNodeError:
                pass  # purged meanwhile: its change was older than the expiration
            except zk_data.MalformedZnodeError as error:
                self.log_event("config_change.invalid", notification=path, error=str(error))
            self.sequence.processed(name)
        self._purge(children)

    def _topic_changed(self, topic: str, notification: str) -> None:
        """Kafka's TopicConfigHandler.processConfigChanges, over ZooKeeper's current view."""
        zk = self.zk.client
        try:
            overrides = fetch_topic_config(zk, topic)
        except zk_data.MalformedZnodeError as error:
            self.log_event("config_change.invalid", entity=f"{TOPICS}/{topic}", error=str(error))
            return
        self.log_event(
            "config_change.processed",
            notification=notification,
            entity=f"{TOPICS}/{topic}",
            overrides=overrides,
        )
        pairs = tuple(sorted(overrides.items()))
        self.send(
            addresses.replica_manager(self.broker_id),
            TopicConfigChanged(topic=topic, overrides=pairs),
        )
        try:
            unclean = zk_data.log_config_from(overrides, base=self.defaults)
        except ValueError:
            return  # the replica manager reports it
        self.send(
            addresses.controller(self.broker_id),
            TopicUncleanElectionChanged(
                topic=topic, enabled=unclean.unclean_leader_election_enable
            ),
        )

    def _load_entities(self) -> None:
        assert self.credentials is not None
        configs, bad = load_entity_configs(self.zk.client)
        for path in bad:
            self.log_event("config_change.invalid", entity=path, error="not a config znode")
        self._credentials_changed(self.credentials.replace(configs), configs.malformed)
        self._entities_loaded = True

    def _entity_changed(self, entity_type: str, name: str, notification: str) -> None:
        """Kafka's UserConfigHandler / ClientIdConfigHandler: the entity's config re-read."""
        assert self.credentials is not None
        entity = QuotaEntity.from_path(entity_type, name)
        path = f"{entity_type}/{name}"
        try:
            if entity is None:
                raise ValueError(f"not a users or clients entity path: {path}")
            config = fetch_entity_config(self.zk.client, entity_type, name)
        except (zk_data.MalformedZnodeError, ValueError) as error:
            self.log_event("config_change.invalid", entity=path, error=str(error))
            return
        self.log_event(
            "config_change.processed",
            notification=notification,
            entity=path,
            overrides={k: v for k, v in config.items() if not k.startswith("SCRAM-")},
        )
        changes = self.credentials.update(entity, config)
        malformed = self.credentials.configs.malformed
        self._credentials_changed(changes, tuple(m for m in malformed if m.startswith(f"{path}:")))

    def _credentials_changed(
        self, changes: list[CredentialChange], malformed: tuple[str, ...]
    ) -> None:
        for change in changes:  # the user and mechanism only: never the credential
            event = (
                "security.scram_credential_removed"
                if change.kind == "removed"
                else "security.scram_credential_added"
            )
            self.log_event(
                event,
                user=change.user,
                mechanism=change.mechanism,
                replaced=change.kind == "updated",
            )
        for where in malformed:
            self.log_event("config_change.invalid", entity=where, error="Credentials not valid")

    def _purge(self, children: list[str]) -> None:
        zk = self.zk.client
        created = {}
        for name in children:
            stat = zk.exists(f"{CONFIG_CHANGES}/{name}")
            if stat is not None:
                created[name] = int(stat.ctime)
        for name in self.sequence.obsolete(created, self.clock.now_ms()):
            with contextlib.suppress(NoNodeError):  # another broker purged it first
                zk.delete(f"{CONFIG_CHANGES}/{name}")
