"""DescribeTransactions and ListTransactions (KIP-664) for the transaction coordinator."""

from __future__ import annotations

from kafkactor.actors.runtime import TracedActor, handles
from kafkactor.actors.transaction.coordinator_messages import describe
from kafkactor.actors.transaction.transaction_coordinator import TransactionCoordinatorCore
from kafkactor.actors.transaction.transaction_state import TransactionState
from kafkactor.messages import ErrorCode
from kafkactor.messages.transaction import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionDescription,
)

__all__ = ["DescribeHandlers"]


class DescribeHandlers(TracedActor):
    """Kafka's `handleDescribeTransactions` / `handleListTransactions`: the state of the
    transactional ids this coordinator serves (`core` is the subclass's)."""

    core: TransactionCoordinatorCore

    @handles(DescribeTransactionsRequest)
    def _on_describe(self, request: DescribeTransactionsRequest) -> None:
        described = []
        for tid in request.transactional_ids:
            found = self.core.state.get(tid) if tid else ErrorCode.INVALID_REQUEST
            if isinstance(found, ErrorCode):
                described.append(TransactionDescription(transactional_id=tid, error_code=found))
            elif found.metadata is None or found.metadata.state is TransactionState.DEAD:
                error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
                described.append(TransactionDescription(transactional_id=tid, error_code=error))
            else:
                described.append(describe(tid, found.metadata))
        self.reply(request, DescribeTransactionsResponse(transactions=tuple(described)))

    @handles(ListTransactionsRequest)
    def _on_list(self, request: ListTransactionsRequest) -> None:
        state = self.core.state
        if not state.active:
            response = ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self.reply(request, response)
            return
        states = set(request.state_filters)
        producers = set(request.producer_id_filters)
        listed = tuple(
            describe(tid, m)
            for tid, m in sorted(state.metadata.items())
            if state.partition_for(tid) not in state.loading
            and m.state is not TransactionState.DEAD
            and (not states or m.state.kafka_name in states)
            and (not producers or m.producer_id in producers)
        )
        self.reply(request, ListTransactionsResponse(transactions=listed))
