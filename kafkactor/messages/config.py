"""Dynamic topic configs: what a broker's config-change listener, its replica manager, its
partitions and its controller tell each other when a topic's config changes (Kafka's
DynamicConfigManager → TopicConfigHandler → LogManager.updateTopicConfig / Log.updateConfig)."""

from __future__ import annotations

from kafkactor.messages.base import message


@message
class ConfigChangesNotified:
    """The children of `/config/changes` changed (or a new ZooKeeper session began): process
    the notifications not processed yet."""


@message
class TopicConfigChanged:
    """A topic's overrides are now `overrides` (Kafka's names and string values, as
    `/config/topics/<t>` holds them): the replica manager applies them, over the broker's
    defaults, to the topic's logs and partitions (Kafka's TopicConfigHandler)."""

    topic: str = ""
    overrides: tuple[tuple[str, str], ...] = ()


@message
class UpdateLogConfig:
    """A partition's log takes a new config (Kafka's Log.updateConfig): `config` is the whole
    LogConfig as its settings that differ from Kafka's defaults, by Kafka's names."""

    config: tuple[tuple[str, str], ...] = ()


@message
class TopicUncleanElectionChanged:
    """A topic's `unclean.leader.election.enable` is now `enabled` (Kafka's
    enableTopicUncleanLeaderElection): the controller elects its offline partitions from
    their live out-of-sync replicas when it turns true."""

    topic: str = ""
    enabled: bool = False
