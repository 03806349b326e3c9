"""Kafka's admin tools over the wire: a blocking `AdminClient` and the `kafkactor topics`
command (Kafka's `kafka-topics.sh --bootstrap-server`)."""

from kafkactor.admin.admin_client import AdminClient, AdminError, ConfigEntry, TopicInfo

__all__ = ["AdminClient", "AdminError", "ConfigEntry", "TopicInfo"]
