"""Kafka's transaction coordinator: the transaction state machine, `__transaction_state`'s
formats, the pure `TransactionCoordinatorCore` and (in `coordinator_actor`) its actor."""

from kafkactor.actors.transaction.results import (
    AppendOutcome,
    AppendPurpose,
    CompletedTxn,
    Decision,
    MarkerJob,
    Transition,
    TxnAppend,
)
from kafkactor.actors.transaction.transaction_config import (
    TransactionConfig,
    transaction_state_topic_config,
)
from kafkactor.actors.transaction.transaction_coordinator import (
    ProducerIdGenerator,
    TransactionCoordinatorCore,
)
from kafkactor.actors.transaction.transaction_log import (
    TransactionLogError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for_transactional_id,
)
from kafkactor.actors.transaction.transaction_metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransitMetadata,
)
from kafkactor.actors.transaction.transaction_state import TransactionState
from kafkactor.actors.transaction.transaction_state_manager import TransactionStateManager

__all__ = [
    "AppendOutcome",
    "AppendPurpose",
    "CompletedTxn",
    "Decision",
    "IllegalTransitionError",
    "MarkerJob",
    "ProducerIdGenerator",
    "TransactionConfig",
    "TransactionCoordinatorCore",
    "TransactionLogError",
    "TransactionMetadata",
    "TransactionState",
    "TransactionStateManager",
    "Transition",
    "TxnAppend",
    "TxnTransitMetadata",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for_transactional_id",
    "transaction_state_topic_config",
]
