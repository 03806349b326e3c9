"""A broker whose actor does not stop in time still stops the rest, says so in an event, and
lets the process end: before, the stop's timeout raised out of `Cluster.stop()` and left every
other actor running (a process holding 10,000 partitions never exited)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import kafkactor.actors.broker as broker_module
from kafkactor.actors.replication.replica_manager import ReplicaManagerActor
from kafkactor.testing import Cluster
from tests.replication.support import captured_events, wait_until

pytestmark = pytest.mark.timeout(60)


def test_an_actor_slow_to_stop_leaves_the_broker_stopping_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    original = ReplicaManagerActor.on_stop

    def slow_on_stop(self: ReplicaManagerActor) -> None:
        release.wait(30)
        original(self)

    with captured_events() as events:
        cluster = Cluster(1, data_dir=tmp_path).start()
        cluster.create_topic("events", 2, 1)
        assert cluster.producer().send("events", b"k", b"v").result(10) is not None
        broker = cluster.brokers[1]
        dispatcher = broker.dispatcher
        monkeypatch.setattr(ReplicaManagerActor, "on_stop", slow_on_stop)
        monkeypatch.setattr(broker_module, "STOP_TIMEOUT_S", 0.3)
        try:
            cluster.stop()  # does not raise
        finally:
            release.set()
        timeouts = events.named("broker.stop_timeout")
        # the replica manager, and the actors queued behind it on its dispatcher
        assert timeouts[0] == {**timeouts[0], "broker": 1, "actor": "ReplicaManagerActor"}
        assert events.named("broker.stop")  # the rest of the broker stopped
    if dispatcher is not None:  # the slow actor finishes its stop, and its thread ends
        wait_until(lambda: not dispatcher.is_alive(), 20.0, "the dispatcher's thread to end")
