"""The users / clients entity configs in ZooKeeper (SCRAM credentials and quotas) and the
broker's credential cache: Kafka's znode names and JSON, `<default>` entities, the whole set
read at start and one entity re-read on its change notification, while readers see whole
snapshots."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kafkactor import zk_model
from kafkactor.actors.controller import ZooKeeperSession
from kafkactor.actors.controller.dynamic_config_manager import DynamicConfigManagerActor
from kafkactor.actors.controller.entity_admin_zk import EntityAdminZkClient
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.security.credential_cache import CredentialCache, CredentialChange
from kafkactor.security.entity_configs import (
    ConfigEntityName,
    EntityConfigs,
    QuotaEntity,
    change_entity_config,
    desanitize,
    fetch_entity_config,
    load_entity_configs,
    sanitize,
)
from kafkactor.security.scram_credentials import (
    credential_from_password,
    credential_from_string,
    credential_to_string,
)
from kafkactor.timer import SystemClock
from kafkactor.zk_model import EmbeddedZooKeeper
from tests.replication.support import EventLog, captured_events, wait_until

pytestmark = pytest.mark.timeout(60)

DEFAULT = ConfigEntityName.DEFAULT
ALICE = credential_from_password("SCRAM-SHA-256", "alice-secret", salt=b"salt-of-alice!")
ALICE_512 = credential_from_password("SCRAM-SHA-512", "alice-secret", salt=b"salt-of-alice!")


@pytest.fixture(autouse=True)
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


@pytest.fixture
def zk() -> Iterator[Any]:
    client = zk_model.connect("embedded", embedded=EmbeddedZooKeeper())
    try:
        yield client
    finally:
        client.stop()
        client.close()


# -- names, paths and znodes (pure) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("User:CN=alice,O=example", "User%3ACN%3Dalice%2CO%3Dexample"),
        ("a b*c", "a%20b%2Ac"),  # Kafka's Sanitizer: %20 for a space, %2A for '*'
        ("x.y-z_1~", "x.y-z_1%7E"),
        ("é", "%C3%A9"),
        ("<default>", "%3Cdefault%3E"),  # a user so named is not the default entity
    ],
)
def test_names_are_sanitized_as_kafka_sanitizes_them(name: str, sanitized: str) -> None:
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name


def test_an_entity_names_its_znode_and_back() -> None:
    both = QuotaEntity(user="bob smith", client_id="app-1")
    assert both.config_path() == ("users", "bob%20smith/clients/app-1")
    assert QuotaEntity.from_path("users", "bob%20smith/clients/app-1") == both
    assert QuotaEntity(user=DEFAULT).config_path() == ("users", "<default>")
    assert QuotaEntity.from_path("users", "<default>/clients/<default>") == QuotaEntity(
        DEFAULT, DEFAULT
    )
    assert QuotaEntity.from_path("clients", "<default>") == QuotaEntity(client_id=DEFAULT)
    assert QuotaEntity.from_path("users", "a/b") is None
    assert QuotaEntity.from_path("topics", "t") is None
    with pytest.raises(ValueError, match="Invalid empty client quota entity"):
        QuotaEntity()


def test_a_write_is_kafkas_znode_then_its_notification(zk: Any) -> None:
    notification = change_entity_config(
        zk, "users", "alice", {"SCRAM-SHA-256": credential_to_string(ALICE)}
    )
    data, _ = zk.get("/config/users/alice")
    assert data == (
        b'{"version":1,"config":{"SCRAM-SHA-256":"' + credential_to_string(ALICE).encode() + b'"}}'
    )
    assert notification == "/config/changes/config_change_0000000000"
    assert zk.get(notification)[0] == b'{"version":2,"entity_path":"users/alice"}'
    change_entity_config(zk, "users", "alice/clients/app", {"producer_byte_rate": "1024"})
    assert fetch_entity_config(zk, "users", "alice/clients/app") == {"producer_byte_rate": "1024"}
    assert zk.get("/config/changes/config_change_0000000001")[0] == (
        b'{"version":2,"entity_path":"users/alice/clients/app"}'
    )
    assert fetch_entity_config(zk, "clients", "nobody") == {}


def test_everything_is_read_at_once_defaults_included(zk: Any) -> None:
    change_entity_config(
        zk,
        "users",
        "alice",
        {"SCRAM-SHA-256": credential_to_string(ALICE), "consumer_byte_rate": "2048"},
    )
    change_entity_config(zk, "users", "<default>", {"producer_byte_rate": "100"})
    change_entity_config(zk, "users", "alice/clients/app", {"request_percentage": "12.5"})
    change_entity_config(zk, "clients", "<default>", {"consumer_byte_rate": "300"})
    change_entity_config(zk, "clients", "app", {"producer_byte_rate": "400", "other": "x"})
    zk.create("/config/clients/broken", b"not json", makepath=True)
    zk.create("/config/users/%FF", b'{"version":1,"config":{}}', makepath=True)  # not UTF-8
    configs, bad = load_entity_configs(zk)
    assert bad == ["/config/users/%FF", "/config/clients/broken"]
    assert configs.scram_credential("SCRAM-SHA-256", "alice") == ALICE
    assert configs.scram_credential("SCRAM-SHA-512", "alice") is None
    assert configs.quota_config(QuotaEntity(user="alice")) == {"consumer_byte_rate": 2048.0}
    assert configs.quota_config(QuotaEntity(user=DEFAULT)) == {"producer_byte_rate": 100.0}
    assert configs.quota_config(QuotaEntity("alice", "app")) == {"request_percentage": 12.5}
    assert configs.quota_config(QuotaEntity(client_id=DEFAULT)) == {"consumer_byte_rate": 300.0}
    assert configs.quota_config(QuotaEntity(client_id="app")) == {"producer_byte_rate": 400.0}
    assert configs.quota_config(QuotaEntity(user="bob")) == {}


def test_a_credential_that_does_not_parse_is_skipped_and_named() -> None:
    configs = EntityConfigs.of(
        {
            QuotaEntity(user="alice"): {"SCRAM-SHA-256": "salt=???"},
            QuotaEntity(user="bob"): {"SCRAM-SHA-512": credential_to_string(ALICE_512)},
        }
    )
    assert configs.scram_credential("SCRAM-SHA-256", "alice") is None
    assert configs.scram_credential("SCRAM-SHA-512", "bob") == ALICE_512
    assert configs.malformed == ("users/alice:SCRAM-SHA-256",)


# -- the cache -----------------------------------------------------------------------------------


def test_the_cache_swaps_whole_views_and_says_which_credentials_changed() -> None:
    cache = CredentialCache()
    lookup = cache.scram_credential  # what the SCRAM authenticator is given
    assert lookup("SCRAM-SHA-256", "alice") is None
    alice = QuotaEntity(user="alice")
    added = cache.update(alice, {"SCRAM-SHA-256": credential_to_string(ALICE)})
    assert added == [CredentialChange("alice", "SCRAM-SHA-256", "added")]
    assert lookup("SCRAM-SHA-256", "alice") == ALICE
    other = credential_from_password("SCRAM-SHA-256", "new-secret")
    assert cache.update(alice, {"SCRAM-SHA-256": credential_to_string(other)}) == [
        CredentialChange("alice", "SCRAM-SHA-256", "updated")
    ]
    assert cache.update(alice, {"producer_byte_rate": "5"}) == [
        CredentialChange("alice", "SCRAM-SHA-256", "removed")
    ]
    assert cache.quota_config("alice", None) == {"producer_byte_rate": 5.0}
    assert cache.quota_config(None, None) == {}
    assert cache.replace(EntityConfigs()) == []
    assert cache.quota_config("alice", None) == {}


def test_readers_never_see_half_an_update() -> None:
    """Writers replace a user's two credentials together; a reader looking at one view sees
    both or neither, never one of them."""
    cache = CredentialCache()
    alice = QuotaEntity(user="alice")
    both = {
        "SCRAM-SHA-256": credential_to_string(ALICE),
        "SCRAM-SHA-512": credential_to_string(ALICE_512),
    }
    stop = threading.Event()
    torn: list[int] = []

    def read() -> None:
        while not stop.is_set():
            view = cache.configs
            found = sum(
                view.scram_credential(m, "alice") is not None
                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            )
            if found == 1:
                torn.append(found)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(300):
            cache.update(alice, both)
            cache.update(alice, {})
    finally:
        stop.set()
        reader.join()
    assert torn == []


# -- the broker's DynamicConfigManager -----------------------------------------------------------


def test_a_credential_added_while_running_is_looked_up_after_its_notification(
    zk: Any, events: EventLog
) -> None:
    """Read at start, then kept up to date by notifications, as Kafka's UserConfigHandler."""
    change_entity_config(zk, "users", "early", {"SCRAM-SHA-512": credential_to_string(ALICE_512)})
    change_entity_config(zk, "clients", "<default>", {"producer_byte_rate": "1000"})
    cache = CredentialCache()
    directory = Directory()
    session = cast(ZooKeeperSession, SimpleNamespace(client=zk))
    address = addresses.dynamic_config_manager(1)
    ref = DynamicConfigManagerActor.start(
        address, directory, SystemClock(), 1, zk=session, credentials=cache
    )
    directory.register(address, ref)
    try:
        wait_until(lambda: cache.scram_credential("SCRAM-SHA-512", "early"), message="start")
        assert cache.quota_config(None, DEFAULT) == {"producer_byte_rate": 1000.0}
        assert cache.scram_credential("SCRAM-SHA-256", "alice") is None

        change_entity_config(zk, "users", "alice", {"SCRAM-SHA-256": credential_to_string(ALICE)})
        wait_until(lambda: cache.scram_credential("SCRAM-SHA-256", "alice"), message="added")
        assert cache.scram_credential("SCRAM-SHA-256", "alice") == ALICE
        (added,) = events.named("security.scram_credential_added", user="alice")
        assert added["mechanism"] == "SCRAM-SHA-256"
        assert added["replaced"] is False
        processed = events.named("config_change.processed", entity="users/alice")
        assert processed[-1]["overrides"] == {}  # the credential is never in an event
        logged = "".join(str(e) for e in events.all())
        assert credential_to_string(ALICE) not in logged
        assert "salt=" not in logged

        change_entity_config(zk, "users", "alice/clients/app", {"consumer_byte_rate": "64"})
        wait_until(lambda: cache.quota_config("alice", "app"), message="quota")
        assert cache.quota_config("alice", "app") == {"consumer_byte_rate": 64.0}

        change_entity_config(zk, "users", "alice", {})
        wait_until(
            lambda: cache.scram_credential("SCRAM-SHA-256", "alice") is None, message="removed"
        )
        assert events.named("security.scram_credential_removed", user="alice")
        # a stored credential that does not parse is named, and the others stay
        change_entity_config(zk, "users", "early", {"SCRAM-SHA-512": "iterations=4096"})
        wait_until(
            lambda: events.named("config_change.invalid", entity="users/early:SCRAM-SHA-512"),
            message="invalid",
        )
        assert cache.scram_credential("SCRAM-SHA-512", "early") is None
        assert cache.quota_config(None, DEFAULT) == {"producer_byte_rate": 1000.0}
    finally:
        ref.stop()


# -- the writer (AdminZkClient) ------------------------------------------------------------------


def test_the_writer_sets_and_deletes_credentials_as_kafka_configs_does(zk: Any) -> None:
    admin = EntityAdminZkClient(lambda: zk)
    admin.set_client_quotas(QuotaEntity(user="alice"), {"producer_byte_rate": 2048})
    admin.set_scram_credential("alice", "SCRAM-SHA-256", "alice-secret", 8192)
    config = fetch_entity_config(zk, "users", "alice")
    assert config["producer_byte_rate"] == "2048"  # the rest of the config is kept
    stored = credential_from_string(config["SCRAM-SHA-256"])
    assert stored.iterations == 8192
    assert stored == credential_from_password(
        "SCRAM-SHA-256", "alice-secret", 8192, salt=stored.salt
    )
    changes = sorted(zk.get_children("/config/changes"))
    assert [zk.get(f"/config/changes/{c}")[0] for c in changes] == [
        b'{"version":2,"entity_path":"users/alice"}'
    ] * 2
    assert admin.delete_scram_credential("alice", "SCRAM-SHA-256") is True
    assert admin.delete_scram_credential("alice", "SCRAM-SHA-256") is False  # nothing written
    assert fetch_entity_config(zk, "users", "alice") == {"producer_byte_rate": "2048"}
    assert len(zk.get_children("/config/changes")) == 3
    with pytest.raises(ValueError, match="Too few iterations"):
        admin.set_scram_credential("alice", "SCRAM-SHA-512", "pw", 1000)
    with pytest.raises(ValueError, match="Unknown SCRAM mechanism"):
        admin.delete_scram_credential("alice", "PLAIN")


def test_the_writer_sets_quotas_with_kafkas_types_and_keys(zk: Any) -> None:
    admin = EntityAdminZkClient(lambda: zk)
    entity = QuotaEntity(user="bob", client_id=DEFAULT)
    written = admin.set_client_quotas(
        entity, {"consumer_byte_rate": 1024.0, "request_percentage": 12.5}
    )
    assert written == {"consumer_byte_rate": "1024", "request_percentage": "12.5"}
    assert fetch_entity_config(zk, "users", "bob/clients/<default>") == written
    assert admin.set_client_quotas(entity, {"consumer_byte_rate": None}) == {
        "request_percentage": "12.5"
    }
    assert admin.set_client_quotas(QuotaEntity(client_id="c"), {"request_percentage": 1e7}) == {
        "request_percentage": "1.0E7"  # Java's Double.toString
    }
    with pytest.raises(ValueError, match="Configuration producer_byte_rate must be a LONG value"):
        admin.set_client_quotas(entity, {"producer_byte_rate": 1.5})
    with pytest.raises(ValueError, match="Invalid configuration key SCRAM-SHA-256"):
        admin.set_client_quotas(entity, {"SCRAM-SHA-256": 1.0})
    with pytest.raises(ValueError, match=r"Unknown Dynamic Configuration: Set\(SCRAM-SHA-256\)"):
        admin.change_configs(entity, {"SCRAM-SHA-256": "salt=x"})  # credentials are a user's
    assert admin.all_entity_configs().quota_config(entity) == {"request_percentage": 12.5}
    assert admin.active_controller() is None
    zk.create("/controller", b'{"version":1,"brokerid":2,"timestamp":"1"}')
    assert admin.active_controller() == 2
