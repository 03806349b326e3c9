"""The KafkaApis actor: runs `KafkaApis` steps between the socket server and the broker's actors."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from kafkactor.actors.runtime import Directory, TracedActor, addresses, handles
from kafkactor.actors.runtime.actor import TraceContext
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.network.client_quotas import apply_client_quotas, limit_fetch
from kafkactor.network.codec import encode_response
from kafkactor.network.kafka_apis import KafkaApis
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse
from kafkactor.network.steps import Admin, Answer, Ask, Close, NoAnswer, Step
from kafkactor.security.client_quota_manager import QuotaManagers
from kafkactor.timer import Clock, ScheduledTask, Scheduler


@dataclass(frozen=True, slots=True)
class _AdminDone:
    """Blocking admin work finished (told to the actor by its worker thread)."""

    token: int
    result: Any


@dataclass(frozen=True, slots=True)
class _SweepPending:
    """Time to answer the requests whose actor or admin work has not answered in time."""


@dataclass(slots=True)
class _Pending:
    request: NetworkRequest
    then: Callable[[Any], Step]
    trace: TraceContext | None
    deadline_ms: int
    admin: bool = False  # resumed with the admin work's result, not an actor's Response


class KafkaApisActor(TracedActor):
    """Kafka's `KafkaApis` request handler as an actor (one per broker).

    A `NetworkRequest` from the socket server is handed to the pure `KafkaApis`; an `Ask`
    step is sent to its actor with this actor as `reply_to`, and the answer resumes the
    request; an `Admin` step runs on this actor's one worker thread (ZooKeeper writes may
    block, and an actor never blocks) and resumes when it finishes. The final step is
    encoded and told to the socket server as a `NetworkResponse`. A step that fails closes
    the request's connection with the reason, and the actor keeps serving.

    Nothing waits forever: an Ask or Admin step not answered within `answer_timeout_ms`
    (longer than any request's own timeout) resumes with REQUEST_TIMED_OUT, so a lost answer
    costs one error response, not a connection whose later responses queue behind it, nor a
    pending entry kept for ever. A sweep every `sweep_ms` (on the broker's scheduler) finds them.

    With `quotas` (Kafka's `QuotaManagers`), a Produce's request bytes and a client Fetch's
    response bytes count against the client's byte-rate quota; past it the response carries the
    throttle time and the socket server mutes the connection that long (client_quotas.py).
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        clock: Clock,
        broker: int,
        *,
        apis: KafkaApis,
        scheduler: Scheduler | None = None,
        answer_timeout_ms: int = 120_000,
        sweep_ms: int = 1000,
        quotas: QuotaManagers | None = None,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.apis = apis
        self.scheduler = scheduler
        self.answer_timeout_ms = answer_timeout_ms
        self.sweep_ms = sweep_ms
        self.quotas = quotas
        self._sweeper: ScheduledTask | None = None
        self.socket_server = addresses.socket_server(broker)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._admin = ThreadPoolExecutor(1, thread_name_prefix=f"broker-{broker}-admin")

    def on_start(self) -> None:
        super().on_start()
        if self.scheduler is not None:
            me = self.actor_ref
            self._sweeper = self.scheduler.schedule(
                f"{self.address}-sweep",
                lambda: me.tell(_SweepPending()) if me.is_alive() else None,
                delay_ms=self.sweep_ms,
                period_ms=self.sweep_ms,
            )

    def on_stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._admin.shutdown(wait=False, cancel_futures=True)
        self._pending.clear()
        super().on_stop()

    @handles(NetworkRequest)
    def _on_request(self, request: NetworkRequest) -> None:
        if self.quotas is not None:
            request = limit_fetch(self.quotas, request)
        self._run(request, lambda: self.apis.handle(request.header, request.body))

    @handles(Response)
    def _on_response(self, response: Response) -> None:
        pending = self._pending.pop(response.correlation_id, None)
        if pending is not None:
            self._run(pending.request, lambda: pending.then(response), pending.trace)

    @handles(_AdminDone)
    def _on_admin_done(self, done: _AdminDone) -> None:
        pending = self._pending.pop(done.token, None)
        if pending is not None:
            self._run(pending.request, lambda: pending.then(done.result), pending.trace)

    @handles(_SweepPending)
    def _on_sweep(self, _sweep: _SweepPending) -> None:
        now = self.clock.now_ms()
        overdue = [token for token, p in self._pending.items() if p.deadline_ms <= now]
        for token in overdue:
            self._time_out(token, self._pending.pop(token))

    def _time_out(self, token: int, pending: _Pending) -> None:
        reason = f"no answer within {self.answer_timeout_ms} ms"
        timed_out: Any = (
            TimeoutError(reason)  # what admin work that raised would have handed on
            if pending.admin
            else ErrorResponse(
                correlation_id=token, error_code=ErrorCode.REQUEST_TIMED_OUT, message=reason
            )
        )
        self._run(pending.request, lambda: pending.then(timed_out), pending.trace)

    def _run(
        self,
        request: NetworkRequest,
        step_of: Callable[[], Step],
        trace: TraceContext | None = None,
    ) -> None:
        try:
            step = step_of()
            frame = self._encode(request, step) if isinstance(step, Answer) else None
        except Exception as error:  # a translation bug must not leave the client hanging
            self.log_event(
                "network.request_failed",
                trace=trace,
                connection=request.connection_id,
                api_key=request.header.api_key,
                error=repr(error),
            )
            self._respond(request, None, close=True, reason=f"{type(error).__name__}", trace=trace)
            return
        if isinstance(step, Answer | NoAnswer):
            throttle_ms = 0
            if self.quotas is not None:
                frame, throttle_ms = self._throttle(request, step, frame, trace)
            self._respond(request, frame, trace=trace, throttle_ms=throttle_ms)
        elif isinstance(step, Close):
            self._respond(request, None, close=True, reason=step.reason, trace=trace)
        elif isinstance(step, Ask):
            token = next(self._ids)
            context = trace if trace is not None else self.trace_context
            self._pending[token] = _Pending(request, step.then, context, self._deadline())
            outgoing = replace(step.request, reply_to=self.address, correlation_id=token)
            self.send(step.address, outgoing, trace=context)
        else:
            self._admin_step(request, step, trace)

    def _throttle(
        self,
        request: NetworkRequest,
        step: Answer | NoAnswer,
        frame: bytes | None,
        trace: TraceContext | None,
    ) -> tuple[bytes | None, int]:
        assert self.quotas is not None
        throttle = apply_client_quotas(
            self.quotas, request, step, frame, lambda answer: self._encode(request, answer)
        )
        if throttle is None:
            return frame, 0
        self.log_event(
            "quota.throttled",
            trace=trace,
            connection=request.connection_id,
            user=throttle.user,
            client_id=throttle.client_id,
            kind=throttle.kind,
            throttle_ms=throttle.throttle_ms,
        )
        return throttle.frame, throttle.throttle_ms

    def _deadline(self) -> int:
        return self.clock.now_ms() + self.answer_timeout_ms

    @staticmethod
    def _encode(request: NetworkRequest, answer: Answer) -> bytes:
        header = request.header
        version = header.api_version if answer.version is None else answer.version
        return encode_response(header.api_key, version, header.correlation_id, answer.body)

    def _admin_step(self, request: NetworkRequest, step: Admin, trace: TraceContext | None) -> None:
        token = next(self._ids)
        self._pending[token] = _Pending(
            request,
            step.then,
            trace if trace is not None else self.trace_context,
            self._deadline(),
            admin=True,
        )
        me = self.actor_ref

        def work() -> None:
            try:
                result = step.work()
            except Exception as error:  # handed to the continuation, which answers an error
                result = error
            if me.is_alive():
                me.tell(_AdminDone(token, result))

        self._admin.submit(work)

    def _respond(
        self,
        request: NetworkRequest,
        frame: bytes | None,
        *,
        close: bool = False,
        reason: str = "",
        trace: TraceContext | None = None,
        throttle_ms: int = 0,
    ) -> None:
        self.send(
            self.socket_server,
            NetworkResponse(
                connection_id=request.connection_id,
                sequence=request.sequence,
                frame=frame,
                close=close,
                reason=reason,
                throttle_ms=throttle_ms,
            ),
            trace=trace,
        )
