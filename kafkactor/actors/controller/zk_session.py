"""A broker's ZooKeeper session: registered on start, re-established after an expiry."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NodeExistsError
from kazoo.protocol.states import KazooState

from kafkactor.actors.controller import zk_data
from kafkactor.tracing import get_logger

_log = get_logger("kafkactor.zookeeper")


class ZooKeeperSession:
    """What Kafka's ZkClient and KafkaHealthcheck do for a broker.

    `start()` connects (through `connect`, which returns a started kazoo-compatible client) and
    registers the broker's ephemeral `/brokers/ids/<id>`. When the session is lost (expired),
    `on_lost` is called at once; the client opens a new session by itself (as kazoo does),
    and then, on a thread of its own, the broker is registered again and `on_started` called.
    `pause()` stops a session's heartbeats without closing it (a hung or crashed broker:
    ZooKeeper expires it after its timeout), where the client supports that.

    `broker_epoch` is the czxid of the current registration (KIP-380): it changes with every
    registration, so the controller tells a restarted broker (or one whose session expired)
    from the one it knew, and the broker refuses controller requests meant for an earlier
    registration. -1 before the first registration.
    """

    def __init__(
        self,
        broker_id: int,
        connect: Callable[[], Any],
        registration: Callable[[], bytes],
        *,
        on_lost: Callable[[], object] = lambda: None,
        on_started: Callable[[], object] = lambda: None,
    ) -> None:
        self.broker_id = broker_id
        self._connect = connect
        self._registration = registration
        self.on_lost = on_lost
        self.on_started = on_started
        self._client: Any = None
        self._closed = threading.Event()
        self._lost = False
        self.registration_timeout_s = 60.0
        self.broker_epoch = -1

    @property
    def client(self) -> Any:
        return self._client

    @property
    def session_id(self) -> int:
        return int(self._client.client_id[0])

    def start(self) -> ZooKeeperSession:
        self._open()
        return self

    def _open(self) -> None:
        client = self._connect()
        self._client = client
        client.add_listener(self._state_changed)
        self._register(client)
        _log.info(
            "broker.registered",
            broker=self.broker_id,
            session=self.session_id,
            broker_epoch=self.broker_epoch,
        )

    def _register(self, client: Any) -> None:
        """Create `/brokers/ids/<id>`; if an old session of this broker (a crash just before)
        still holds it, wait for that session to expire, as Kafka's registration does."""
        path = zk_data.broker_path(self.broker_id)
        deadline = time.monotonic() + self.registration_timeout_s
        while True:
            try:
                client.create(path, self._registration(), ephemeral=True, makepath=True)
                stat = client.exists(path)  # ours: an ephemeral goes only with our session
                if stat is not None:
                    self.broker_epoch = int(stat.czxid)
                return
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise
            gone = threading.Event()
            if client.exists(path, watch=lambda _event, gone=gone: gone.set()) is not None:
                gone.wait(max(0.0, deadline - time.monotonic()))

    def _state_changed(self, state: Any) -> None:
        """A kazoo client reconnects on its own after an expiry, with a new session: LOST,
        then CONNECTED. Listeners must not call ZooKeeper, so registering again happens on a
        thread of its own."""
        if self._closed.is_set():
            return
        if state == KazooState.LOST:
            self._lost = True
            self.on_lost()
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            threading.Thread(
                target=self._register_again, name=f"broker-{self.broker_id}-zk", daemon=True
            ).start()

    def _register_again(self) -> None:
        try:
            self._register(self._client)
        except Exception as error:
            _log.error("broker.zk_register_failed", broker=self.broker_id, error=repr(error))
            return
        _log.info(
            "broker.registered",
            broker=self.broker_id,
            session=self.session_id,
            broker_epoch=self.broker_epoch,
        )
        self.on_started()

    def pause(self) -> None:
        """Stop heartbeating without closing the session (a crash, as ZooKeeper sees it)."""
        self._closed.set()
        pause = getattr(self._client, "pause_heartbeats", None)
        if pause is not None:
            pause()
        else:  # a real ZooKeeper client cannot stop heartbeats alone: close the session
            self._close_client()

    def close(self) -> None:
        """End the session (a clean shutdown: the registration goes at once)."""
        self._closed.set()
        self._close_client()

    def _close_client(self) -> None:
        client = self._client
        if client is None:
            return
        try:
            client.stop()
            client.close()
        except Exception:
            pass
