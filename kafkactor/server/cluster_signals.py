"""`kafkactor cluster kill|stop|pause|resume|down`: signals to a local cluster's processes, as
Kafka's `bin/kafka-server-stop.sh` sends SIGTERM, and the crashes and hangs a fault checker
needs. Every pid is checked to still run its broker's properties file before it is signalled.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path

from kafkactor.server import processes
from kafkactor.server.cluster_files import BrokerRecord, ClusterError, ClusterLayout, ClusterState
from kafkactor.server.cluster_status import (
    BrokerState,
    broker_state,
    own_zookeeper,
    read_controller,
)

__all__ = ["STOP_TIMEOUT_S", "ProcessAction", "down", "kill", "pause", "resume", "stop"]

STOP_TIMEOUT_S = 30.0  # a controlled shutdown may retry for seconds (Kafka's backoff is 5 s)


@dataclass(frozen=True)
class ProcessAction:
    """What a command did to one process: `str()` is "broker 2 pid 1234 killed (SIGKILL)"."""

    name: str
    pid: int | None
    action: str

    def __str__(self) -> str:
        return f"{self.name} pid {self.pid if self.pid is not None else '-'} {self.action}"


def _live_broker(
    root: str | Path, broker_id: int, allowed: tuple[BrokerState, ...]
) -> tuple[ClusterLayout, ClusterState, BrokerRecord, str]:
    layout = ClusterLayout.of(root)
    state = ClusterState.read(layout)
    record = state.record(layout, broker_id)
    current = broker_state(layout, record)
    if current not in allowed:
        raise ClusterError(f"broker {broker_id} is {current}, not {' or '.join(allowed)}")
    return layout, state, record, str(layout.properties(broker_id))


def kill(root: str | Path, broker_id: int) -> ProcessAction:
    """SIGKILL the broker (a crash: no controlled shutdown; its registration stays until its
    ZooKeeper session expires) and wait until it is gone."""
    _, _, record, marker = _live_broker(root, broker_id, ("running", "paused"))
    assert record.pid is not None
    processes.send_signal(record.pid, marker, signal.SIGKILL)
    processes.wait_until_dead(record.pid, marker, 10.0)
    return ProcessAction(f"broker {broker_id}", record.pid, "killed (SIGKILL)")


def stop(root: str | Path, broker_id: int, *, timeout_s: float = STOP_TIMEOUT_S) -> ProcessAction:
    """SIGTERM the broker (it shuts down cleanly, after a controlled shutdown) and wait for it to
    exit; SIGKILL it when it is still running `timeout_s` later. It is then "stopped"."""
    layout, state, record, _ = _live_broker(root, broker_id, ("running", "paused"))
    action = _terminate(layout, record, timeout_s)
    state.write(layout)
    return action


def _terminate(layout: ClusterLayout, record: BrokerRecord, timeout_s: float) -> ProcessAction:
    name = f"broker {record.broker_id}"
    started = time.monotonic()
    outcome = (
        "gone"
        if record.pid is None
        else processes.terminate(record.pid, str(layout.properties(record.broker_id)), timeout_s)
    )
    record.stopped = True
    if outcome == "exited":
        return ProcessAction(
            name, record.pid, f"stopped (SIGTERM; exited in {time.monotonic() - started:.1f} s)"
        )
    if outcome == "killed":
        return ProcessAction(
            name, record.pid, f"killed (SIGKILL): still running {timeout_s:g} s after SIGTERM"
        )
    return ProcessAction(name, record.pid, "was not running")


def pause(root: str | Path, broker_id: int) -> ProcessAction:
    """SIGSTOP the broker: it holds its sockets and session but does nothing (a long GC pause,
    a frozen VM), until `resume`. Returns once it is stopped."""
    return _stop_or_continue(root, broker_id, signal.SIGSTOP)


def resume(root: str | Path, broker_id: int) -> ProcessAction:
    """SIGCONT a paused broker; returns once it runs again."""
    return _stop_or_continue(root, broker_id, signal.SIGCONT)


def _stop_or_continue(root: str | Path, broker_id: int, signum: int) -> ProcessAction:
    pausing = signum == signal.SIGSTOP
    before: BrokerState = "running" if pausing else "paused"
    after: BrokerState = "paused" if pausing else "running"
    layout, _, record, marker = _live_broker(root, broker_id, (before,))
    assert record.pid is not None
    processes.send_signal(record.pid, marker, signum)
    deadline = time.monotonic() + 10.0
    while (now := broker_state(layout, record)) != after:
        if now == "dead" or time.monotonic() >= deadline:
            raise ClusterError(f"broker {broker_id} is {now} after {signal.Signals(signum).name}")
        time.sleep(processes.POLL_S)
    verb = "paused" if pausing else "resumed"
    return ProcessAction(
        f"broker {broker_id}", record.pid, f"{verb} ({signal.Signals(signum).name})"
    )


def down(root: str | Path, *, timeout_s: float = STOP_TIMEOUT_S) -> list[ProcessAction]:
    """Stop the cluster: resume every paused broker (one of them may be the controller the
    others' controlled shutdowns need), then SIGTERM each running broker in turn (the
    controller last, so that the others find it) and wait for it to exit (SIGKILL after
    `timeout_s`, saying so), then stop the directory's own ZooKeeper. The data stays for the
    next `up`."""
    layout = ClusterLayout.of(root)
    state = ClusterState.read(layout)
    live = set()
    for record in state.brokers.values():
        current = broker_state(layout, record)
        if current == "paused" and record.pid is not None:
            processes.send_signal(
                record.pid, str(layout.properties(record.broker_id)), signal.SIGCONT
            )
        if current in ("running", "paused"):
            live.add(record.broker_id)
    controller = read_controller(state.zookeeper_connect) if live else None
    actions = []
    for record in sorted(
        state.brokers.values(), key=lambda r: (r.broker_id == controller, r.broker_id)
    ):
        if record.broker_id in live:
            actions.append(_terminate(layout, record, timeout_s))
        else:
            was = broker_state(layout, record)
            record.stopped = True
            actions.append(ProcessAction(f"broker {record.broker_id}", record.pid, f"was {was}"))
        state.write(layout)
    if not state.zookeeper_external:
        server = own_zookeeper(layout)
        pid = server.pid
        outcome = server.stop(grace_s=timeout_s)
        action = {
            "exited": "stopped (SIGTERM)",
            "killed": f"killed (SIGKILL): still running {timeout_s:g} s after SIGTERM",
            "gone": "was not running",
        }[outcome]
        actions.append(ProcessAction("zookeeper", pid, action))
    return actions
