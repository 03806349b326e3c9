"""Kafka's `ReplicaAssignment`: a partition's replicas, with those a reassignment adds and
removes (KIP-455)."""

from __future__ import annotations

from dataclasses import dataclass


def _without(values: tuple[int, ...], drop: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(v for v in values if v not in drop)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's full replica set (RS) during a reassignment: the original replicas (ORS)
    and the target ones (TRS), in Kafka's order (TRS first, then what ORS has beyond it), with
    `adding` = TRS - ORS and `removing` = ORS - TRS. Outside a reassignment both are empty and
    `replicas` is the assignment. `/brokers/topics/<t>` (version 2+) keeps `adding_replicas`
    and `removing_replicas` per partition, so a new controller can resume."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment began."""
        return _without(self.replicas, self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas once it completes."""
        return _without(self.replicas, self.removing)

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: tuple[int, ...]) -> ReplicaAssignment:
        """Kafka's `reassignTo`: the assignment moving from this one's origin to `target`
        (a reassignment under way is replaced, its origin kept)."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, _without(full, origin), _without(full, tuple(target)))
