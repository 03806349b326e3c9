"""`kafkactor serve`: a cluster in this process, speaking Kafka's protocol, until a signal."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TextIO

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.testing import Cluster


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """What `kafkactor serve` was asked for."""

    brokers: int = 3
    host: str = "127.0.0.1"
    port: int = 9092  # broker i listens on port + i - 1; 0: free ports
    data_dir: Path | None = None  # None: a temporary directory, removed at exit
    zookeeper: str = "embedded"
    events: Path | None = None
    auto_create_topics: bool = True
    default_replication_factor: int = 1


def serve(options: ServeOptions, out: TextIO, stop: threading.Event | None = None) -> int:
    """Run the cluster; print `bootstrap.servers=...` to `out` once every broker listens;
    return after SIGINT or SIGTERM (or `stop`), once every broker has shut down cleanly
    (logs flushed, high watermarks checkpointed, the clean-shutdown marker written)."""
    if options.events is not None:
        tracing.configure(path=options.events)
    base = BrokerConfig()
    config = replace(
        base,
        apis=replace(
            base.apis,
            auto_create_topics_enable=options.auto_create_topics,
            default_replication_factor=options.default_replication_factor,
        ),
    )
    stopping = stop if stop is not None else threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        cluster = Cluster(
            options.brokers,
            data_dir=options.data_dir,
            config=config,
            zookeeper=options.zookeeper,
            listen=options.host,
            port=options.port,
        )
        with cluster:
            print(f"bootstrap.servers={cluster.bootstrap_servers}", file=out, flush=True)
            while not stopping.wait(0.5):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
