"""Testing tools: `Cluster` (brokers in this process, with fault injection) and the nemesis,
a Jepsen-style fault-schedule checker (as `kazoo.testing` ships ZooKeeper test harnesses).

`generate_schedule` and the verdict functions are pure; `run_schedule` runs one schedule
against a fresh in-process cluster and returns a `ScheduleResult` (docs/nemesis.md).

The names below are imported on first use: `kafkactor serve` needs `Cluster` alone, and
`kafkactor --help` builds the nemesis command's parser without loading a broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkactor.common import TopicExistsError, UnknownTopicError
    from kafkactor.testing.cluster import Cluster, ControllerRequestError, KafkaStorageError
    from kafkactor.testing.nemesis import (
        nemesis_config,
        run_schedule,
    )
    from kafkactor.testing.schedule import (
        Action,
        EpisodeKind,
        Role,
        Schedule,
        Step,
        generate_schedule,
        parse_seeds,
        validate_schedule,
    )
    from kafkactor.testing.verdict import (
        Ack,
        Divergence,
        LostRecord,
        ScheduleResult,
        StoredBatch,
        Summary,
        count_duplicates,
        find_divergence,
        find_lost,
        format_line,
        format_summary,
        summarize,
    )

__all__ = [
    "Ack",
    "Action",
    "Cluster",
    "ControllerRequestError",
    "Divergence",
    "EpisodeKind",
    "KafkaStorageError",
    "LostRecord",
    "Role",
    "Schedule",
    "ScheduleResult",
    "Step",
    "StoredBatch",
    "Summary",
    "TopicExistsError",
    "UnknownTopicError",
    "count_duplicates",
    "find_divergence",
    "find_lost",
    "format_line",
    "format_summary",
    "generate_schedule",
    "nemesis_config",
    "parse_seeds",
    "run_schedule",
    "summarize",
    "validate_schedule",
]

#: the module of each name above, imported when the name is first asked for
_HOMES: dict[str, str] = {
    "TopicExistsError": "kafkactor.common",
    "UnknownTopicError": "kafkactor.common",
    "Cluster": "kafkactor.testing.cluster",
    "ControllerRequestError": "kafkactor.testing.cluster",
    "KafkaStorageError": "kafkactor.testing.cluster",
    "nemesis_config": "kafkactor.testing.nemesis",
    "run_schedule": "kafkactor.testing.nemesis",
    **dict.fromkeys(
        (
            "Action",
            "EpisodeKind",
            "Role",
            "Schedule",
            "Step",
            "generate_schedule",
            "parse_seeds",
            "validate_schedule",
        ),
        "kafkactor.testing.schedule",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name, "kafkactor.testing.verdict" if name in __all__ else None)
    if home is None:
        raise AttributeError(f"module 'kafkactor.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
