"""The transaction coordinator's settings (Kafka's `TransactionConfig`) and the topic configs
`__transaction_state` is created with."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TransactionConfig", "transaction_state_topic_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionConfig:
    """The broker settings the transaction coordinator reads (Kafka's names and 2.8 defaults).

    - `transaction.max.timeout.ms` 900000: an InitProducerId asking for a longer transaction
      timeout answers INVALID_TRANSACTION_TIMEOUT.
    - `transactional.id.expiration.ms` 604800000 (7 days): a transactional id without a
      transaction for that long is expired (a tombstone in `__transaction_state`).
    - `transaction.abort.timed.out.transaction.cleanup.interval.ms` 10000: how often open
      transactions older than their timeout are aborted (with an epoch bump).
    - `transaction.remove.expired.transaction.cleanup.interval.ms` 3600000: how often expired
      transactional ids are looked for.
    - `transaction.state.log.num.partitions` 50, `.replication.factor` 3 (created with
      min(this, live brokers)), `.min.isr` 2, `.segment.bytes` 104857600: `__transaction_state`.
    """

    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000
    state_log_num_partitions: int = 50
    state_log_replication_factor: int = 3
    state_log_min_isr: int = 2
    state_log_segment_bytes: int = 104_857_600


def transaction_state_topic_config(
    config: TransactionConfig | None = None, replication_factor: int | None = None
) -> dict[str, str]:
    """The topic configs `__transaction_state` is created with, by Kafka's names (Kafka's
    `TransactionStateManager.transactionTopicConfigs`): compacted (only a transactional id's
    latest state matters), `min.insync.replicas` from `transaction.state.log.min.isr`, its
    segment size, no unclean election and no compression.

    Given the `replication_factor` the topic is created with, `min.insync.replicas` is capped
    at it: Kafka leaves a one- or two-broker cluster with min.isr 2 > RF, where every write of
    the coordinator fails NOT_ENOUGH_REPLICAS until the operator lowers the setting; a test
    broker serves transactions out of the box instead (docs/transactions.md)."""
    config = config if config is not None else TransactionConfig()
    min_isr = config.state_log_min_isr
    if replication_factor is not None:
        min_isr = max(1, min(min_isr, replication_factor))
    return {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(min_isr),
        "segment.bytes": str(config.state_log_segment_bytes),
        "unclean.leader.election.enable": "false",
        "compression.type": "uncompressed",
    }
