"""What a broker's controller actor tells itself when ZooKeeper watches fire."""

from __future__ import annotations

from kafkactor.messages.base import message


@message
class StandForElection:
    """`/controller` is gone (or was never there): try to become the controller."""


@message
class BrokersChanged:
    """The children of `/brokers/ids` changed: a broker registered or its session ended."""


@message
class TopicsChanged:
    """The children of `/brokers/topics` changed: a topic was created."""


@message
class IsrChangeNotified:
    """A leader announced ISR changes under `/isr_change_notification`."""


@message
class ZooKeeperSessionLost:
    """This broker's ZooKeeper session expired: a controller resigns at once."""


@message
class ZooKeeperSessionStarted:
    """A new ZooKeeper session is up (after an expiry): register and stand again."""


@message
class DeleteTopicsChanged:
    """The children of `/admin/delete_topics` changed: topics were marked for deletion."""
