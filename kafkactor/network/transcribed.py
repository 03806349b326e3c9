"""kio entity classes for message definitions kio does not ship, transcribed field by field from
Kafka's JSON files.

kio generates its entities from one Kafka release's `clients/src/main/resources/common/message`.
A definition from elsewhere (the group coordinator's `__consumer_offsets` records) or a version
that release removed (KIP-896) has no kio entity. Such a definition is transcribed here as a
tuple of `Field`s (name in kio's snake case, Kafka type, versions), and `entity` makes, per
version, the frozen dataclass kio's generator would emit for it: fields in definition order, each
with its `kafka_type` metadata, non-flexible. kio's `entity_reader` / `entity_writer` then do
every byte; nothing is packed by hand.

`message` makes a request or response entity and its nested structs, and registers them in a
namespace module, as kio's generated module of one API version holds them: so
`codec.nested(schema, "<NestedName>")`, which looks a name up in the entity's module, finds them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, make_dataclass
from types import GenericAlias, ModuleType
from typing import Any, Final

from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)

from kio.schema.errors import ErrorCode  # isort: skip
from kio.schema.request_header.v1.header import RequestHeader  # isort: skip
from kio.schema.response_header.v0.header import ResponseHeader  # isort: skip
from kio.static.constants import EntityType  # isort: skip
from kio.static.primitive import i16, i32, i64  # isort: skip

__all__ = ["EntityType", "Field", "entity", "message"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a Kafka message definition: its kio name, Kafka type and versions (`first`
    to `last`; None for "first+"). A field with a `nested` struct (its name and fields) is an
    array of that struct; a type `[]int32` (no `nested`) is an array of that primitive."""

    name: str
    kafka_type: str
    first: int
    last: int | None = None
    nullable: bool = False
    nested: tuple[str, tuple[Field, ...]] | None = None

    def held_by(self, version: int) -> bool:
        """Whether `version` of the message has this field."""
        return self.first <= version and (self.last is None or version <= self.last)


_PYTHON_TYPES: Final[dict[str, Any]] = {
    "string": str,
    "bytes": bytes,
    "int16": i16,
    "int32": i32,
    "int64": i64,
}


def _field_spec(f: Field, nested: Any) -> tuple[str, Any, Any]:
    """(name, type, dataclasses.field) of one field, typed as kio's generator types it."""
    if f.nested is not None:
        return f.name, GenericAlias(tuple, (nested, ...)), field()
    array = f.kafka_type.startswith("[]")
    kafka_type = f.kafka_type.removeprefix("[]")
    python_type: Any = _PYTHON_TYPES[kafka_type]
    if kafka_type == "int16" and f.name == "error_code":
        # as kio's generator: an ErrorCode field is an `ErrorCode` of kafka_type "error_code"
        python_type, kafka_type = ErrorCode, "error_code"
    if f.nullable:
        python_type = python_type | None
    if array:
        python_type = GenericAlias(tuple, (python_type, ...))
    return f.name, python_type, field(metadata={"kafka_type": kafka_type})


def entity(
    name: str,
    version: int,
    schema: Sequence[Field],
    kind: EntityType,
    *,
    module: str,
    api: tuple[int, type[Any]] | None = None,
    found: dict[str, Any] | None = None,
) -> Any:
    """The kio entity class of one version of a schema, defined in module `module`.

    With an `api` (API key, header entity), the class and each nested struct carry
    `__api_key__` and `__header_schema__`, as kio's generated request and response classes do.
    `found` collects every class made, by name, the nested structs first."""
    spec: list[tuple[str, Any, Any]] = []
    for f in schema:
        if not f.held_by(version):
            continue
        item = None
        if f.nested is not None:
            struct_name, struct = f.nested
            nested_kind = EntityType.nested
            item = entity(
                struct_name, version, struct, nested_kind, module=module, api=api, found=found
            )
        spec.append(_field_spec(f, item))
    namespace: dict[str, Any] = {
        "__type__": kind,
        "__version__": i16(version),
        "__flexible__": False,
    }
    if api is not None:
        namespace["__api_key__"] = i16(api[0])
        namespace["__header_schema__"] = api[1]
    made = make_dataclass(name, spec, namespace=namespace, frozen=True, slots=True, kw_only=True)
    made.__module__ = module
    if found is not None:
        found[name] = made
    return made


def message(
    name: str,
    api_key: int,
    version: int,
    kind: EntityType,
    schema: Sequence[Field],
    *,
    package: str,
) -> Any:
    """The request or response entity of one version of a message, and its nested structs, all
    defined in a namespace module `<package>.v<version>.<request|response>` (registered in
    `sys.modules`, as kio's generated module of that version would be)."""
    module_name = f"{package}.v{version}.{kind.name}"
    if kind not in (EntityType.request, EntityType.response):
        raise ValueError(f"a message is a request or a response, not {kind.name}")
    header = RequestHeader if kind is EntityType.request else ResponseHeader
    found: dict[str, Any] = {}
    made = entity(
        name, version, schema, kind, module=module_name, api=(api_key, header), found=found
    )
    namespace = ModuleType(module_name, f"{name} v{version}, transcribed (kafkactor.network)")
    for class_name, cls in found.items():
        setattr(namespace, class_name, cls)
    sys.modules[module_name] = namespace
    return made
