"""Kafka's admin tools over the wire: a blocking `AdminClient` (`admin_client`) and the
`kafkactor topics` command (`topic_command`: Kafka's `kafka-topics.sh --bootstrap-server`).

The names below are imported on first use: `kafkactor --help` builds its parser from
`topic_command` without loading the codec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkactor.admin.admin_client import AdminClient, AdminError, ConfigEntry, TopicInfo

__all__ = ["AdminClient", "AdminError", "ConfigEntry", "TopicInfo"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'kafkactor.admin' has no attribute {name!r}")
    return getattr(importlib.import_module("kafkactor.admin.admin_client"), name)
