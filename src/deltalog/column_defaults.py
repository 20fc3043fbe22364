"""Column defaults (PROTOCOL.md "Default Columns", the ``allowColumnDefaults`` writer feature).

A column's default is the Spark SQL text in its ``CURRENT_DEFAULT`` metadata key. Writers give
every written row that lacks a value for such a column the result of evaluating that text; an
explicit ``DEFAULT`` in SQL means the same. Engines evaluate the text (it is Spark SQL): this
module only says which columns have defaults and which commits may carry them.

The reference (``OptimisticTransaction.checkNoColumnDefaults``) refuses a commit whose new
schema assigns a default unless the protocol supports ``allowColumnDefaults``, and
(``SchemaUtils.removeExistsDefaultMetadata``) drops Spark's ``EXISTS_DEFAULT`` key, which Delta
does not use, from the schemas of new and replaced tables.
"""

from __future__ import annotations

from collections.abc import Mapping

from deltalog import errors
from deltalog.actions import Metadata, Protocol
from deltalog.features import is_feature_supported
from deltalog.schema import ArrayType, DataType, MapType, StructField, StructType, parse_schema

CURRENT_DEFAULT = "CURRENT_DEFAULT"
EXISTS_DEFAULT = "EXISTS_DEFAULT"
FEATURE = "allowColumnDefaults"

# Operations that create or replace a table: the reference names them "CREATE TABLE" in the
# error, every other schema change "ALTER TABLE".
_CREATING = ("CREATE", "REPLACE")


def column_defaults(schema: StructType) -> dict[str, str]:
    """The top-level columns with a default: name -> its SQL text."""
    return {f.name: str(f.metadata[CURRENT_DEFAULT]) for f in schema.fields if has_default(f)}


def has_default(field: StructField) -> bool:
    return CURRENT_DEFAULT in field.metadata


def _uses_defaults(field: StructField) -> bool:
    return CURRENT_DEFAULT in field.metadata or EXISTS_DEFAULT in field.metadata


def check_commit(
    protocol: Protocol,
    old: Metadata | None,
    new: Metadata,
    operation: str,
    table: str | None,
) -> None:
    """Refuse a metadata change that assigns a column default on a table whose protocol does
    not support ``allowColumnDefaults``. Schemas that already had their defaults (``old``'s) are
    not re-checked, as the reference checks only the operations that set them.

    Raises:
        DeltaWriteError: ``WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED`` naming
            ``CREATE TABLE`` (create, replace) or ``ALTER TABLE`` (any other operation).
    """
    if new.schema_string is None or is_feature_supported(protocol, FEATURE):
        return
    if old is not None and old.schema_string == new.schema_string:
        return
    if CURRENT_DEFAULT not in new.schema_string and EXISTS_DEFAULT not in new.schema_string:
        return  # no field can carry a default: skip parsing the schema
    schema = parse_schema(new.schema_string)
    if not any(_uses_defaults(f) for f in schema.fields):
        return
    before = parse_schema(old.schema_string) if old is not None and old.schema_string else None
    if before is not None and _defaults_of(before) == _defaults_of(schema):
        return
    command = "CREATE TABLE" if operation.upper().startswith(_CREATING) else "ALTER TABLE"
    raise errors.column_defaults_not_enabled(command, table)


def _defaults_of(schema: StructType) -> dict[str, tuple[object, object]]:
    return {
        f.name.lower(): (f.metadata.get(CURRENT_DEFAULT), f.metadata.get(EXISTS_DEFAULT))
        for f in schema.fields
        if _uses_defaults(f)
    }


def without_exists_default(schema: StructType) -> StructType:
    """``schema`` without Spark's ``EXISTS_DEFAULT`` keys, at any depth (the reference's
    ``removeExistsDefaultMetadata``, for new and replaced tables)."""
    return StructType(tuple(_strip(f) for f in schema.fields))


def _strip(field: StructField) -> StructField:
    metadata: Mapping[str, object] = field.metadata
    if EXISTS_DEFAULT in metadata:
        metadata = {k: v for k, v in metadata.items() if k != EXISTS_DEFAULT}
    return StructField(field.name, _strip_type(field.type), field.nullable, dict(metadata))


def _strip_type(t: DataType) -> DataType:
    if isinstance(t, StructType):
        return without_exists_default(t)
    if isinstance(t, ArrayType):
        return ArrayType(_strip_type(t.element_type), t.contains_null)
    if isinstance(t, MapType):
        return MapType(_strip_type(t.key_type), _strip_type(t.value_type), t.value_contains_null)
    return t


def missing_defaults(schema: StructType, present: list[str]) -> dict[str, str]:
    """The defaulted columns a write's data lacks (names matched ignoring case): name -> SQL."""
    names = {n.lower() for n in present}
    return {n: sql for n, sql in column_defaults(schema).items() if n.lower() not in names}


def check_given(schema: StructType, present: list[str], table: str | None) -> None:
    """For writers that cannot evaluate Spark SQL (the Python writers): every defaulted column
    must be in the data, or the rows would lack the values the protocol requires.

    Raises:
        DeltaWriteError: ``DELTA_UNSUPPORTED_WRITE_COLUMN_DEFAULTS`` naming the columns.
    """
    missing = missing_defaults(schema, present)
    if missing:
        raise errors.column_default_not_evaluable(sorted(missing), table)
