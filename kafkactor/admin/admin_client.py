"""A blocking admin client over Kafka's wire protocol, for kafkactor's admin commands.

It is what Kafka's `Admin` client is to `kafka-topics.sh --bootstrap-server`: it connects to a
bootstrap broker, asks each broker's ApiVersions and speaks the highest version both sides
know, finds the controller in Metadata and sends it the requests only a controller serves
(CreateTopics, CreatePartitions, DeleteTopics), retrying those on NOT_CONTROLLER after asking
Metadata again (the controller moved). Anything else goes to the bootstrap broker. It works
against kafkactor's brokers and Kafka's alike. The codec is kio's (`kafkactor.network.codec`);
this module only picks versions, sends frames and reads answers.
"""

from __future__ import annotations

import datetime
import itertools
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafkactor.kafka_uuid import ZERO_UUID, uuid_to_string
from kafkactor.messages import ErrorCode
from kafkactor.network.codec import (
    BadResponseError,
    build,
    decode_response,
    encode_request,
    nested,
    request_type,
)
from kafkactor.network.framing import FrameDecoder, FrameSizeError

__all__ = [
    "AdminClient",
    "AdminError",
    "ConfigEntry",
    "PartitionInfo",
    "TopicInfo",
    "raise_for",
]

# Kafka's API keys this client sends, and the versions of each it can build a request of
API_VERSIONS: Final = 18
METADATA: Final = 3
CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
DESCRIBE_CONFIGS: Final = 32
CREATE_PARTITIONS: Final = 37
ALTER_PARTITION_REASSIGNMENTS: Final = 45
LIST_PARTITION_REASSIGNMENTS: Final = 46
_OWN_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    METADATA: (1, 12),
    CREATE_TOPICS: (2, 4),
    DELETE_TOPICS: (1, 3),
    DESCRIBE_CONFIGS: (1, 2),
    CREATE_PARTITIONS: (0, 3),
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
}
_CONTROLLER_ONLY: Final = frozenset(
    {
        CREATE_TOPICS,
        DELETE_TOPICS,
        CREATE_PARTITIONS,
        ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS,
    }
)
_MAX_FRAME: Final = 100 * 1024 * 1024
_TOPIC_RESOURCE: Final = 2  # ConfigResource.Type.TOPIC
DEFAULT_CONFIG_SOURCE: Final = 5  # DescribeConfigs v1+: ConfigSource.DEFAULT_CONFIG


class AdminError(Exception):
    """A request refused by the cluster (its Kafka error code and message), or a cluster
    that cannot be reached or answered in time (`code` UNKNOWN_SERVER_ERROR /
    REQUEST_TIMED_OUT / NETWORK_EXCEPTION)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as Metadata describes it (leader -1: none)."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic as Metadata describes it, its partitions in order."""

    name: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    topic_id: str = ""  # Kafka's base64 Uuid (Metadata v10+, KIP-516); "" when not given


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a topic as DescribeConfigs v1+ describes it."""

    name: str
    value: str | None
    source: int

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG_SOURCE


@dataclass(slots=True)
class _Connection:
    """One broker's socket, with the versions it speaks."""

    sock: socket.socket
    frames: FrameDecoder = field(default_factory=lambda: FrameDecoder(_MAX_FRAME))
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)


class AdminClient:
    """Admin requests to the cluster at `bootstrap_servers` ("host:port,host:port"): blocking,
    each bounded by `timeout_s` (Kafka's `default.api.timeout.ms`)."""

    def __init__(
        self, bootstrap_servers: str, *, timeout_s: float = 30.0, client_id: str = "kafkactor"
    ) -> None:
        self.bootstrap = [_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        if not self.bootstrap:
            raise ValueError("no bootstrap server given")
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._controller = -1

    def close(self) -> None:
        for connection in self._connections.values():
            connection.sock.close()
        self._connections.clear()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------------

    def topics(self, names: Sequence[str] | None = None) -> dict[str, TopicInfo]:
        """Metadata of `names` (None: every topic), without creating any. A name that does not
        exist is absent from the answer; an error for a topic that exists raises."""
        body = self._metadata(names)
        found: dict[str, TopicInfo] = {}
        for topic in body.topics:
            code = ErrorCode(topic.error_code)
            if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue
            if code is not ErrorCode.NONE and not topic.partitions:
                raise AdminError(code, f"topic {topic.name!r}: {code.name}")
            partitions = tuple(
                sorted(
                    (
                        PartitionInfo(
                            partition=int(p.partition_index),
                            leader=int(p.leader_id),
                            replicas=tuple(int(b) for b in p.replica_nodes),
                            isr=tuple(int(b) for b in p.isr_nodes),
                        )
                        for p in topic.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            topic_id = getattr(topic, "topic_id", None)
            found[str(topic.name)] = TopicInfo(
                name=str(topic.name),
                internal=bool(topic.is_internal),
                partitions=partitions,
                topic_id=uuid_to_string(topic_id) if topic_id not in (None, ZERO_UUID) else "",
            )
        return found

    def live_brokers(self) -> list[int]:
        """The brokers Metadata names."""
        self._metadata(())
        return sorted(self._brokers)

    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str],
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        """CreateTopics of one topic; None sizes are the broker's defaults (-1)."""

        def body(schema: Any) -> Any:
            topic_type = nested(schema, "CreatableTopic")
            assignment_type = nested(schema, "CreatableReplicaAssignment")
            config_type = nested(schema, "CreatableTopicConfig")
            topic = build(
                topic_type,
                name=name,
                num_partitions=-1 if partitions is None else partitions,
                replication_factor=-1 if replication_factor is None else replication_factor,
                assignments=tuple(
                    build(assignment_type, partition_index=p, broker_ids=tuple(r))
                    for p, r in sorted((assignments or {}).items())
                ),
                configs=tuple(build(config_type, name=k, value=v) for k, v in configs.items()),
            )
            return build(schema, topics=(topic,), timeout=self._timeout_ms(), validate_only=False)

        answer = self.call(CREATE_TOPICS, body)
        for result in answer.topics:
            raise_for(result.error_code, getattr(result, "error_message", None))

    def create_partitions(
        self, topic: str, total: int, assignments: Sequence[Sequence[int]] | None = None
    ) -> None:
        """CreatePartitions: `topic` grows to `total` partitions (the new ones' replicas in
        `assignments`, else the controller's choice)."""

        def body(schema: Any) -> Any:
            topic_type = nested(schema, "CreatePartitionsTopic")
            assignment_type = nested(schema, "CreatePartitionsAssignment")
            entry = build(
                topic_type,
                name=topic,
                count=total,
                assignments=None
                if assignments is None
                else tuple(build(assignment_type, broker_ids=tuple(r)) for r in assignments),
            )
            return build(schema, topics=(entry,), timeout=self._timeout_ms(), validate_only=False)

        answer = self.call(CREATE_PARTITIONS, body)
        for result in answer.results:
            raise_for(result.error_code, getattr(result, "error_message", None))

    def delete_topics(self, names: Sequence[str]) -> None:
        def body(schema: Any) -> Any:
            return build(schema, topic_names=tuple(names), timeout=self._timeout_ms())

        answer = self.call(DELETE_TOPICS, body)
        for result in answer.responses:
            raise_for(result.error_code, getattr(result, "error_message", None))

    def topic_configs(self, names: Sequence[str]) -> dict[str, list[ConfigEntry]]:
        """Every config of each topic in `names`, with its source."""

        def body(schema: Any) -> Any:
            resource_type = nested(schema, "DescribeConfigsResource")
            return build(
                schema,
                resources=tuple(
                    build(
                        resource_type,
                        resource_type=_TOPIC_RESOURCE,
                        resource_name=n,
                        configuration_keys=None,
                    )
                    for n in names
                ),
                include_synonyms=False,
            )

        answer = self.call(DESCRIBE_CONFIGS, body)
        configs: dict[str, list[ConfigEntry]] = {}
        for result in answer.results:
            raise_for(result.error_code, result.error_message)
            configs[str(result.resource_name)] = [
                ConfigEntry(name=str(c.name), value=c.value, source=int(c.config_source))
                for c in result.configs
            ]
        return configs

    # -- the wire -----------------------------------------------------------------------------

    def _timeout_ms(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.timeout_s)

    def _metadata(self, names: Sequence[str] | None) -> Any:
        def body(schema: Any) -> Any:
            topic_type = nested(schema, "MetadataRequestTopic")
            return build(
                schema,
                topics=None
                if names is None
                else tuple(build(topic_type, name=n, topic_id=None) for n in names),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        answer = self.call(METADATA, body, to_controller=False)
        self._brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in answer.brokers}
        self._controller = int(answer.controller_id)
        return answer

    def call(self, api_key: int, body: Any, *, to_controller: bool | None = None) -> Any:
        """Send one request (`body(schema)` builds it in the version chosen) and return the
        answer; a controller-only request is sent to the controller, again after a
        NOT_CONTROLLER (the controller moved), until `timeout_s` passes."""
        controller_only = api_key in _CONTROLLER_ONLY if to_controller is None else to_controller
        deadline = time.monotonic() + self.timeout_s
        while True:
            if controller_only:
                if self._controller not in self._brokers:
                    self._metadata(())
                address = self._brokers.get(self._controller)
                if address is None:
                    _wait_or_fail(deadline, "no controller is known to the cluster")
                    self._controller = -1
                    continue
                connection = self._connect(address)
            else:
                connection = self._bootstrap_connection()
            answer = self._send(connection, api_key, body)
            if controller_only and _not_controller(answer):
                self._controller = -1
                _wait_or_fail(deadline, "the controller kept moving")
                continue
            return answer

    def _bootstrap_connection(self) -> _Connection:
        failures = []
        for address in self.bootstrap:
            try:
                return self._connect(address)
            except AdminError as error:
                failures.append(str(error))
        raise AdminError(ErrorCode.NETWORK_EXCEPTION, "; ".join(failures))

    def _connect(self, address: tuple[str, int]) -> _Connection:
        found = self._connections.get(address)
        if found is not None:
            return found
        try:
            sock = socket.create_connection(address, timeout=self.timeout_s)
        except OSError as error:
            raise AdminError(
                ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {address[0]}:{address[1]}: {error}"
            ) from None
        connection = _Connection(sock)
        self._connections[address] = connection
        try:
            answer = self._send(connection, API_VERSIONS, build, version=0)
        except AdminError:
            self._connections.pop(address, None)
            sock.close()
            raise
        connection.versions = {
            int(a.api_key): (int(a.min_version), int(a.max_version)) for a in answer.api_keys
        }
        return connection

    def _send(
        self, connection: _Connection, api_key: int, body: Any, *, version: int | None = None
    ) -> Any:
        if version is None:
            version = self._version(connection, api_key)
        correlation_id = next(self._ids)
        frame = encode_request(
            api_key, version, correlation_id, self.client_id, body(request_type(api_key, version))
        )
        try:
            connection.sock.sendall(frame)
            while True:
                data = connection.sock.recv(65_536)
                if not data:
                    raise ConnectionError("the broker closed the connection")
                for answer in connection.frames.feed(data):
                    got, decoded = decode_response(api_key, version, answer)
                    if got == correlation_id:
                        return decoded
        except (OSError, FrameSizeError, BadResponseError) as error:
            self._drop(connection)
            code = (
                ErrorCode.REQUEST_TIMED_OUT
                if isinstance(error, TimeoutError)
                else (ErrorCode.NETWORK_EXCEPTION)
            )
            raise AdminError(code, f"request {api_key} v{version} failed: {error}") from None

    def _version(self, connection: _Connection, api_key: int) -> int:
        low, high = _OWN_VERSIONS[api_key]
        theirs = connection.versions.get(api_key)
        if theirs is None or theirs[1] < low or theirs[0] > high:
            raise AdminError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"the broker does not serve api key {api_key} in versions {low}-{high}",
            )
        return min(high, theirs[1])

    def _drop(self, connection: _Connection) -> None:
        for address, held in list(self._connections.items()):
            if held is connection:
                del self._connections[address]
        connection.sock.close()


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a bootstrap server is host:port, got {server!r}")
    return host.strip("[]"), int(port)


def _not_controller(answer: Any) -> bool:
    """NOT_CONTROLLER for the whole request (Kafka 2.4+'s reassignment APIs) or any entry."""
    if int(getattr(answer, "error_code", 0)) == ErrorCode.NOT_CONTROLLER:
        return True
    entries = (
        getattr(answer, "topics", None)
        or getattr(answer, "results", None)
        or getattr(answer, "responses", None)
        or ()
    )
    return any(int(getattr(e, "error_code", 0)) == ErrorCode.NOT_CONTROLLER for e in entries)


def raise_for(code: Any, message: str | None) -> None:
    """Raise `AdminError` for an error code other than NONE (its message, else its name)."""
    error = ErrorCode(int(code))
    if error is not ErrorCode.NONE:
        raise AdminError(error, message or error.name)


def _wait_or_fail(deadline: float, why: str) -> None:
    if time.monotonic() > deadline:
        raise AdminError(ErrorCode.REQUEST_TIMED_OUT, f"timed out: {why}")
    time.sleep(0.1)  # Kafka's retry.backoff.ms before asking Metadata again
