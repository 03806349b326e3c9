"""Kafka's controller (0.9): elected through ZooKeeper, it decides partition leadership.

`ControllerState` is the pure core (leader election, ISR, LeaderAndIsr fan-out, topic
deletion);
`ControllerActor` owns it and ZooKeeper; `zk_data` holds Kafka's znode paths and JSON payloads;
`ZooKeeperSession` is a broker's registration under /brokers/ids."""

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.controller import ControllerActor, ControllerFencedError
from kafkactor.actors.controller.state import ControllerState, LeadershipChange
from kafkactor.actors.controller.zk_session import ZooKeeperSession

__all__ = [
    "ControllerActor",
    "ControllerFencedError",
    "ControllerState",
    "LeadershipChange",
    "ZooKeeperSession",
    "zk_data",
]
