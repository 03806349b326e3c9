"""kio entity classes for message definitions kio does not ship, transcribed field by field from
Kafka's JSON files.

kio generates its entities from one Kafka release's `clients/src/main/resources/common/message`.
A definition from elsewhere (the group coordinator's `__consumer_offsets` records) or a version
or an API that release removed (KIP-896, and the ZooKeeper-era inter-broker APIs of Kafka 4.0)
has no kio entity. Such a definition is transcribed here as a tuple of `Field`s (name in kio's
snake case, Kafka type, versions, and where the JSON has them, its default, nullability and
tag), and `entity` makes, per version, the frozen dataclass kio's generator would emit for it:
fields in definition order, each with its `kafka_type` metadata and default, flexible or not as
the definition's `flexibleVersions` says, tagged fields carrying `{"tag": N}`. kio's
`entity_reader` / `entity_writer` then do every byte; nothing is packed by hand.

`message` makes a request or response entity and its nested structs, and registers them in a
namespace module, as kio's generated module of one API version holds them: so
`codec.nested(schema, "<NestedName>")`, which looks a name up in the entity's module, finds them.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, make_dataclass
from types import GenericAlias, ModuleType
from typing import Any, Final

from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)

from kio.schema.errors import ErrorCode  # isort: skip
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1  # isort: skip
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2  # isort: skip
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0  # isort: skip
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1  # isort: skip
from kio.static.constants import EntityType  # isort: skip
from kio.static.primitive import i8, i16, i32, i64  # isort: skip

__all__ = ["EntityType", "Field", "entity", "message"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a Kafka message definition: its kio name, Kafka type and versions (`first`
    to `last`; None for "first+"). A field with a `nested` struct (its name and fields) is an
    array of that struct; a type `[]int32` (no `nested`) is an array of that primitive.

    `nullable`: the JSON's `nullableVersions` covers every version holding the field.
    `default`: the JSON's `"default"`, as written there ("-1", "false", "null", "0"); None when
    the JSON gives none. `tag`: the JSON's `"tag"` of a tagged field (its `taggedVersions` are
    the versions holding it, which must all be flexible)."""

    name: str
    kafka_type: str
    first: int
    last: int | None = None
    nullable: bool = False
    nested: tuple[str, tuple[Field, ...]] | None = None
    default: str | None = None
    tag: int | None = None

    def held_by(self, version: int) -> bool:
        """Whether `version` of the message has this field."""
        return self.first <= version and (self.last is None or version <= self.last)


_PYTHON_TYPES: Final[dict[str, Any]] = {
    "string": str,
    "bytes": bytes,
    "bool": bool,
    "int8": i8,
    "int16": i16,
    "int32": i32,
    "int64": i64,
    "uuid": uuid.UUID,
}

#: What a tagged field without a JSON default defaults to (kio's implicit defaults).
_IMPLICIT_DEFAULTS: Final[dict[str, Any]] = {
    "string": "",
    "bytes": b"",
    "bool": False,
    "int8": i8(0),
    "int16": i16(0),
    "int32": i32(0),
    "int64": i64(0),
    "uuid": None,
}


def _converted(f: Field, text: str) -> Any:
    """The Python value of the JSON default `text` of field `f`, as kio's generator writes it."""
    kafka_type = f.kafka_type
    if text == "null":
        if not f.nullable:
            raise ValueError(f"{f.name}: a default of null for a field that is not nullable")
        return None
    if kafka_type in ("int8", "int16", "int32", "int64"):
        return _PYTHON_TYPES[kafka_type](int(text, 0))
    if kafka_type == "bool":
        if text not in ("true", "false"):
            raise ValueError(f"{f.name}: {text!r} is not a bool default")
        return text == "true"
    if kafka_type == "string":
        return text
    raise ValueError(f"{f.name}: no default of type {kafka_type} is transcribed")


def _default(f: Field) -> Any:
    """The dataclass default of field `f` (MISSING for none), as kio's generator gives it:
    `()` for an array of primitives, the JSON's default where it has one, and for a tagged
    field without one the value its absence means (empty, zero, null)."""
    if f.kafka_type.startswith("[]") and f.nested is None:
        return ()
    if f.default is not None:
        return _converted(f, f.default)
    if f.tag is None:
        return MISSING
    if f.nested is not None:
        return None if f.nullable else ()
    return None if f.nullable else _IMPLICIT_DEFAULTS[f.kafka_type]


def _field_spec(f: Field, nested: Any) -> tuple[str, Any, Any]:
    """(name, type, dataclasses.field) of one field, typed as kio's generator types it."""
    default = _default(f)
    if f.nested is not None:
        python_type: Any = GenericAlias(tuple, (nested, ...))
        if f.nullable:
            python_type = python_type | None
        tag = {} if f.tag is None else {"tag": f.tag}  # an array of structs has no kafka_type
        return f.name, python_type, field(metadata=tag, default=default)
    array = f.kafka_type.startswith("[]")
    kafka_type = f.kafka_type.removeprefix("[]")
    python_type = _PYTHON_TYPES[kafka_type]
    if kafka_type == "int16" and f.name == "error_code":
        # as kio's generator: an ErrorCode field is an `ErrorCode` of kafka_type "error_code"
        python_type, kafka_type = ErrorCode, "error_code"
    if f.nullable or kafka_type == "uuid":  # kio types every uuid as `UUID | None`
        python_type = python_type | None
    if array:
        python_type = GenericAlias(tuple, (python_type, ...))
    metadata: dict[str, Any] = {"kafka_type": kafka_type}
    if f.tag is not None:
        metadata["tag"] = f.tag
    return f.name, python_type, field(metadata=metadata, default=default)


def _is_flexible(version: int, flexible_from: int | None) -> bool:
    """Whether `version` is flexible under `flexibleVersions` "<flexible_from>+" (None: none)."""
    return flexible_from is not None and version >= flexible_from


def entity(
    name: str,
    version: int,
    schema: Sequence[Field],
    kind: EntityType,
    *,
    module: str,
    api: tuple[int, type[Any]] | None = None,
    found: dict[str, Any] | None = None,
    flexible_from: int | None = None,
) -> Any:
    """The kio entity class of one version of a schema, defined in module `module`.

    `flexible_from` is the definition's `flexibleVersions` ("N+"; None for "none"): from that
    version on the entity and its nested structs are flexible (compact strings and arrays,
    tagged fields). With an `api` (API key, header entity), the class and each nested struct
    carry `__api_key__` and `__header_schema__`, as kio's generated request and response
    classes do. `found` collects every class made, by name, the nested structs first."""
    flexible = _is_flexible(version, flexible_from)
    spec: list[tuple[str, Any, Any]] = []
    for f in schema:
        if not f.held_by(version):
            continue
        if f.tag is not None and not flexible:
            raise ValueError(f"{name} v{version}: tagged field {f.name} in a non-flexible version")
        item = None
        if f.nested is not None and found is not None and f.nested[0] in found:
            item = found[f.nested[0]]  # a common struct met before (kio makes it once)
        elif f.nested is not None:
            struct_name, struct = f.nested
            item = entity(
                struct_name,
                version,
                struct,
                EntityType.nested,
                module=module,
                api=api,
                found=found,
                flexible_from=flexible_from,
            )
        spec.append(_field_spec(f, item))
    namespace: dict[str, Any] = {
        "__type__": kind,
        "__version__": i16(version),
        "__flexible__": flexible,
    }
    if api is not None:
        namespace["__api_key__"] = i16(api[0])
        namespace["__header_schema__"] = api[1]
    made = make_dataclass(name, spec, namespace=namespace, frozen=True, slots=True, kw_only=True)
    made.__module__ = module
    if found is not None:
        found[name] = made
    return made


def _header_schema(kind: EntityType, flexible: bool) -> type[Any]:
    """The header kio's generated classes name as `__header_schema__`: request header v2 for a
    flexible request, v1 otherwise; response header v1 for a flexible response, v0 otherwise."""
    if kind is EntityType.request:
        return RequestHeaderV2 if flexible else RequestHeaderV1
    return ResponseHeaderV1 if flexible else ResponseHeaderV0


def message(
    name: str,
    api_key: int,
    version: int,
    kind: EntityType,
    schema: Sequence[Field],
    *,
    package: str,
    flexible_from: int | None = None,
    header: type[Any] | None = None,
) -> Any:
    """The request or response entity of one version of a message, and its nested structs, all
    defined in a namespace module `<package>.v<version>.<request|response>` (registered in
    `sys.modules`, as kio's generated module of that version would be).

    `flexible_from`: the message's `flexibleVersions` (see `entity`). `header`: the header
    entity its `__header_schema__` names, when not the one the version's flexibility implies
    (ControlledShutdown v0 requests use request header v0)."""
    module_name = f"{package}.v{version}.{kind.name}"
    if kind not in (EntityType.request, EntityType.response):
        raise ValueError(f"a message is a request or a response, not {kind.name}")
    if header is None:
        header = _header_schema(kind, _is_flexible(version, flexible_from))
    found: dict[str, Any] = {}
    made = entity(
        name,
        version,
        schema,
        kind,
        module=module_name,
        api=(api_key, header),
        found=found,
        flexible_from=flexible_from,
    )
    namespace = ModuleType(module_name, f"{name} v{version}, transcribed (kafkactor.network)")
    for class_name, cls in found.items():
        setattr(namespace, class_name, cls)
    sys.modules[module_name] = namespace
    return made
