"""A broker's `CredentialCache` (and the quota configs its quota managers read): what the
DynamicConfigManager last read of the users and clients entity configs in ZooKeeper.

One immutable `EntityConfigs` is swapped whole on every change, under a lock only writers take:
a reader (the SASL/SCRAM authenticator on the socket server's thread, the quota manager on the
request path) reads one attribute and never waits nor sees half an update.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from kafkactor.security.entity_configs import EntityConfigs, EntityName, QuotaEntity
from kafkactor.security.scram_credential import ScramCredential

__all__ = ["CredentialCache", "CredentialChange"]


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """A user's SCRAM credential for a mechanism came, changed or went (never the credential
    itself: this is what an event may say)."""

    user: str
    mechanism: str
    kind: str  # "added", "updated" or "removed"


class CredentialCache:
    """Kafka's `CredentialCache` (SCRAM credentials by mechanism and user) together with the
    raw user / client-id quota configs, defaults included.

    `scram_credential` is a `ScramCredentialLookup` for the SCRAM authenticator;
    `quota_config(user, client_id)` gives one entity's own quota settings (None for a part
    that is not in the entity, `ConfigEntityName.DEFAULT` for a default), which the quota
    manager resolves in Kafka's order. `replace` and `update` swap in a new view and return
    the credential changes they made.
    """

    def __init__(self, configs: EntityConfigs | None = None) -> None:
        self._configs = configs if configs is not None else EntityConfigs()
        self._lock = threading.Lock()

    @property
    def configs(self) -> EntityConfigs:
        return self._configs

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._configs.scram_credential(mechanism, user)

    def quota_config(
        self, user: EntityName | None, client_id: EntityName | None
    ) -> Mapping[str, float]:
        if user is None and client_id is None:
            return {}
        return self._configs.quota_config(QuotaEntity(user, client_id))

    def replace(self, configs: EntityConfigs) -> list[CredentialChange]:
        """Everything read again (a broker starting, a new ZooKeeper session)."""
        with self._lock:
            before, self._configs = self._configs, configs
        return _changes(before, configs)

    def update(self, entity: QuotaEntity, config: Mapping[str, str]) -> list[CredentialChange]:
        """One entity's config as a change notification named it ({}: gone)."""
        with self._lock:
            before = self._configs
            self._configs = after = before.with_entity(entity, config)
        return _changes(before, after)


def _changes(before: EntityConfigs, after: EntityConfigs) -> list[CredentialChange]:
    changes = []
    for key in sorted(set(before.credentials) | set(after.credentials)):
        mechanism, user = key
        old, new = before.credentials.get(key), after.credentials.get(key)
        if old is None and new is not None:
            changes.append(CredentialChange(user, mechanism, "added"))
        elif old is not None and new is None:
            changes.append(CredentialChange(user, mechanism, "removed"))
        elif old != new:
            changes.append(CredentialChange(user, mechanism, "updated"))
    return changes
