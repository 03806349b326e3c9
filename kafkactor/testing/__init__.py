"""Testing tools: `Cluster` (brokers in this process, with fault injection) and the nemesis,
a Jepsen-style fault-schedule checker (as `kazoo.testing` ships ZooKeeper test harnesses).

`generate_schedule` and the verdict functions are pure; `run_schedule` runs one schedule
against a fresh in-process cluster and returns a `ScheduleResult` (docs/nemesis.md).
"""

from kafkactor.common import TopicExistsError, UnknownTopicError
from kafkactor.testing.cluster import Cluster, ControllerRequestError
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
