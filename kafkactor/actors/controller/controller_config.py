"""The controller's settings: Kafka's automatic preferred-leader rebalancing."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """Kafka's `auto.leader.rebalance.enable`, `leader.imbalance.per.broker.percentage` and
    `leader.imbalance.check.interval.seconds`: whether the active controller checks, every
    interval, each broker's share of the partitions it is preferred for and does not lead, and
    elects it back where that share is above the percentage."""

    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
