"""Schema rules of a write: merging the data's schema into the table's, partition-column checks,
and column-mapping ids and physical names for new fields.

Follows the reference's ``SchemaMergingUtils.mergeSchemas`` (type widening as
:class:`~deltalog.write.type_widening.WideningMode` allows),
``ImplicitMetadataOperation`` (when a merged schema needs ``mergeSchema``), ``PartitionUtils``
/ ``TransactionalWrite`` (partition columns) and ``DeltaColumnMapping`` (id and physical-name
assignment). Pure: no Spark, no I/O.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from deltalog import errors
from deltalog.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    drop_column_mapping_metadata,
    explode,
    map_fields,
    simple_string,
)
from deltalog.write.type_widening import NO_WIDENING, WideningMode

COLUMN_MAPPING_ID = "delta.columnMapping.id"
COLUMN_MAPPING_PHYSICAL_NAME = "delta.columnMapping.physicalName"
COLUMN_MAPPING_NESTED_IDS = "delta.columnMapping.nested.ids"

# Parquet stores byte, short and int as INT32, so these three merge into the widest of them.
_INT32_FAMILY = {"byte": 0, "short": 1, "integer": 2}


# -- merging ----------------------------------------------------------------------------------


def merge_schema(
    table: StructType,
    data: StructType,
    *,
    merge: bool,
    table_root: str,
    overwrite_hint: bool = False,
    table_id: str | None = None,
    widening: WideningMode = NO_WIDENING,
    implicit_conversions: bool = False,
    nested_fields: bool = True,
) -> StructType:
    """The table schema after writing data of schema ``data`` into it.

    Names match case-insensitively. Table columns missing from the data are kept (written as
    null). Matching columns keep the table's name, nullability and metadata, with types merged:
    equal types; a type ``widening`` allows widening to the data's (type widening, before any
    other rule); byte/short/integer among themselves (the wider wins); ``void`` on either side.
    New columns (or nested fields of structs, also inside arrays and maps) are appended at the
    end of their struct, as the data defines them but without column-mapping metadata (ids and
    physical names are the table's to assign). Without ``merge`` a merged schema that differs
    from ``table`` is refused.

    Args:
        overwrite_hint: the write is an overwrite, so the error also suggests
            ``overwriteSchema``.
        table_id: ``metaData.id``, named in the mismatch error like the reference does.
        widening: the type changes schema evolution may apply (none unless the table enables
            type widening).
        implicit_conversions: atomic types that do not merge keep the table's (the data is
            cast on write; MERGE's rule) instead of failing.
        nested_fields: new fields of nested structs join (``False``: only new top-level
            columns do).

    Raises:
        DeltaWriteError: ``DELTA_DUPLICATE_COLUMNS_FOUND.DATA`` (names equal ignoring case at one
            level of the data); ``DELTA_FAILED_TO_MERGE_FIELDS`` (incompatible types, with the
            ``DELTA_MERGE_INCOMPATIBLE_DATATYPE`` / ``..._DECIMAL_TYPE`` error as cause; raised even
            with ``merge``); ``DELTA_METADATA_MISMATCH.SCHEMA_MISMATCH`` (new columns or a widened
            type without ``merge``).
    """
    check_no_duplicate_columns(data, table_root)
    rules = _Rules(widening, implicit_conversions, nested_fields)
    merged = _merge_struct(table, data, (), table_root, rules)
    if merged != table and not merge:
        raise errors.schema_mismatch(
            table_root,
            table_id,
            simple_string(table),
            simple_string(data),
            _differences(table, merged),
            overwrite_hint,
        )
    return merged


def check_no_duplicate_columns(
    schema: StructType, table_root: str | None, where: str = "DATA"
) -> None:
    """Refuse column paths that are equal ignoring case (at any nesting level).

    Raises:
        DeltaWriteError: ``DELTA_DUPLICATE_COLUMNS_FOUND.<where>`` naming the paths.
    """
    counts = Counter(".".join(path).lower() for path, _ in explode(schema))
    duplicates = [name for name, n in counts.items() if n > 1]
    if duplicates:
        raise errors.duplicate_columns(table_root, duplicates, where)


@dataclass(frozen=True, slots=True)
class _Rules:
    widening: WideningMode
    implicit: bool
    nested_fields: bool


class _Conflict(Exception):
    """Two types at ``path`` cannot be merged; ``cause`` is the reference's inner error."""

    def __init__(
        self,
        path: tuple[str, ...],
        current: DataType,
        update: DataType,
        cause: errors.DeltaWriteError,
    ) -> None:
        super().__init__(path)
        self.path = path
        self.current = current
        self.update = update
        self.cause = cause


def _merge_struct(
    current: StructType, update: StructType, path: tuple[str, ...], table_root: str, rules: _Rules
) -> StructType:
    by_name = {f.name.lower(): f for f in update.fields}
    merged: list[StructField] = []
    for field in current.fields:
        other = by_name.get(field.name.lower())
        if other is None:
            merged.append(field)
            continue
        field_path = (*path, field.name)
        try:
            merged_type = _merge_types(field.type, other.type, field_path, table_root, rules)
        except _Conflict as conflict:
            if path:  # wrap once, at the top-level column, naming the full path
                raise
            raise errors.failed_to_merge_fields(
                table_root,
                ".".join(conflict.path),
                simple_string(conflict.current),
                simple_string(conflict.update),
                conflict.cause,
            ) from conflict.cause
        merged.append(
            field
            if merged_type is field.type
            else StructField(field.name, merged_type, field.nullable, field.metadata)
        )
    known = {f.name.lower() for f in current.fields}
    new_fields = tuple(f for f in update.fields if f.name.lower() not in known)
    if new_fields and (rules.nested_fields or not path):
        # column-mapping ids of a source table must not come along
        merged.extend(drop_column_mapping_metadata(StructType(new_fields)).fields)
    result = StructType(tuple(merged))
    return current if result == current else result


def _merge_types(
    current: DataType, update: DataType, path: tuple[str, ...], table_root: str, rules: _Rules
) -> DataType:
    if isinstance(current, StructType) and isinstance(update, StructType):
        return _merge_struct(current, update, path, table_root, rules)
    if isinstance(current, ArrayType) and isinstance(update, ArrayType):
        element = _merge_types(
            current.element_type, update.element_type, (*path, "element"), table_root, rules
        )
        if element is current.element_type:
            return current
        return ArrayType(element, current.contains_null)
    if isinstance(current, MapType) and isinstance(update, MapType):
        key = _merge_types(current.key_type, update.key_type, (*path, "key"), table_root, rules)
        value = _merge_types(
            current.value_type, update.value_type, (*path, "value"), table_root, rules
        )
        if key is current.key_type and value is current.value_type:
            return current
        return MapType(key, value, current.value_contains_null)
    if current == update:
        return current
    widened = rules.widening.widened(current, update)
    if widened is not None:
        return widened
    if rules.implicit and _castable(current) and _castable(update):
        return current  # Spark casts the data to the table's type
    return _merge_atomic(current, update, path)


def _castable(t: DataType) -> bool:
    return isinstance(t, DecimalType) or (isinstance(t, PrimitiveType) and t.name != "void")


def _merge_atomic(current: DataType, update: DataType, path: tuple[str, ...]) -> DataType:
    if isinstance(current, DecimalType) and isinstance(update, DecimalType):
        raise _Conflict(path, current, update, _decimal_error(current, update))
    if isinstance(current, PrimitiveType) and isinstance(update, PrimitiveType):
        a, b = _INT32_FAMILY.get(current.name), _INT32_FAMILY.get(update.name)
        if a is not None and b is not None:
            return current if a >= b else update
        if current.name == "void":
            return update
        if update.name == "void":
            return current
    elif _is_void(current):
        return update
    elif _is_void(update):
        return current
    raise _Conflict(
        path,
        current,
        update,
        errors.merge_incompatible_datatype(simple_string(current), simple_string(update)),
    )


def _is_void(t: DataType) -> bool:
    return isinstance(t, PrimitiveType) and t.name == "void"


def _decimal_error(current: DecimalType, update: DecimalType) -> errors.DeltaWriteError:
    p1, s1, p2, s2 = current.precision, current.scale, update.precision, update.scale
    if p1 != p2 and s1 != s2:
        text = f"precision {p1} and {p2} & scale {s1} and {s2}"
    elif p1 != p2:
        text = f"precision {p1} and {p2}"
    else:
        text = f"scale {s1} and {s2}"
    return errors.merge_incompatible_decimal(text)


def _differences(table: StructType, merged: StructType) -> list[str]:
    """What makes ``merged`` differ from ``table``, for the mismatch message."""
    old = {tuple(p.lower() for p in path): f for path, f in explode(table)}
    new_keys: list[tuple[str, ...]] = []
    new_columns: list[str] = []
    changed: list[str] = []
    for path, f in explode(merged):
        key = tuple(p.lower() for p in path)
        before = old.get(key)
        if before is None:
            # report the topmost new field only (parents come before their children)
            if not any(key[: len(k)] == k for k in new_keys):
                new_columns.append(".".join(path))
            new_keys.append(key)
        elif not isinstance(f.type, StructType | ArrayType | MapType) and f.type != before.type:
            changed.append(
                f"{'.'.join(path)} {simple_string(before.type)} -> {simple_string(f.type)}"
            )
    out = []
    if new_columns:
        out.append("new column(s) " + ", ".join(new_columns))
    if changed:
        out.append("changed type(s) " + ", ".join(changed))
    return out or ["the schemas differ"]


# -- partition columns ------------------------------------------------------------------------


def check_partition_columns(
    schema: StructType,
    partition_columns: Sequence[str],
    table_root: str | None,
    *,
    data: bool = False,
) -> list[str]:
    """Check ``partition_columns`` against ``schema`` and return them spelled as in the schema.

    Args:
        data: ``schema`` is the schema of the data being written (the reference's write-time
            check) rather than the table's; only changes the error class when every column is a
            partition column.

    Raises:
        DeltaWriteError: ``DELTA_DUPLICATE_COLUMNS_FOUND.PARTITION_COLUMNS``;
            ``DELTA_PARTITION_COLUMN_NOT_FOUND`` (not a top-level column);
            ``DELTA_AMBIGUOUS_PARTITION_COLUMN``; ``DELTA_INVALID_PARTITION_COLUMN_TYPE``
            (struct, array, map, void, variant); when no other column remains
            ``DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION`` for a table schema, or
            ``DELTA_NON_PARTITION_COLUMN_ABSENT.ALL_PARTITION_COLUMNS`` for data.
    """
    counts = Counter(c.lower() for c in partition_columns)
    duplicates = [c for c, n in counts.items() if n > 1]
    if duplicates:
        raise errors.duplicate_columns(table_root, duplicates, "PARTITION_COLUMNS")
    names: list[str] = []
    for column in partition_columns:
        matches = [f for f in schema.fields if f.name.lower() == column.lower()]
        if not matches:
            raise errors.partition_column_not_found(table_root, column, schema.names)
        if len(matches) > 1:
            raise errors.ambiguous_partition_column(table_root, column, [f.name for f in matches])
        field = matches[0]
        if not _partitionable(field.type):
            raise errors.invalid_partition_column_type(
                table_root, field.name, simple_string(field.type)
            )
        names.append(field.name)
    if names and len(names) == len(schema.fields):
        raise errors.non_partition_column_absent(table_root, all_columns=not data)
    return names


def _partitionable(t: DataType) -> bool:
    if isinstance(t, DecimalType):
        return True
    return isinstance(t, PrimitiveType) and t.name not in ("void", "variant")


# -- column mapping ---------------------------------------------------------------------------


def assign_column_mapping(
    schema: StructType, mode: str, max_column_id: int
) -> tuple[StructType, int]:
    """Give every field (nested ones too, inside arrays and maps) that lacks them a
    ``delta.columnMapping.id`` and a ``delta.columnMapping.physicalName`` (``col-<uuid4>``).

    Ids continue from the larger of ``max_column_id`` (the table's
    ``delta.columnMapping.maxColumnId``) and the largest id already in ``schema``, in the order
    parents before children. Fields that have an id or a physical name keep it. With mode
    ``none`` the schema is returned unchanged.

    Returns:
        The schema and the new maximum id (store it as ``delta.columnMapping.maxColumnId``).

    Raises:
        InvalidArgumentError: ``mode`` is not ``none``, ``id`` or ``name``.
    """
    normalized = mode.lower()
    if normalized not in ("none", "id", "name"):
        raise errors.invalid_table_property_value(
            "delta.columnMapping.mode", mode, "must be one of none, id, name", None
        )
    if normalized == "none":
        return schema, max_column_id
    counter = [max(max_column_id, find_max_column_id(schema))]
    result = _assign_struct(schema, counter)
    return result, counter[0]


def find_max_column_id(schema: StructType) -> int:
    """The largest column-mapping id in ``schema`` (nested ids included), 0 without any."""
    best = 0
    for _, f in explode(schema):
        if COLUMN_MAPPING_ID in f.metadata:
            best = max(best, int(f.metadata[COLUMN_MAPPING_ID]))
            nested = f.metadata.get(COLUMN_MAPPING_NESTED_IDS)
            if isinstance(nested, dict) and nested:
                best = max(best, *(int(v) for v in nested.values()))
    return best


def _assign_struct(struct: StructType, counter: list[int]) -> StructType:
    """``struct`` with an id and a physical name on every field that lacks one, ids counted on
    from ``counter`` in schema order, a parent before its children."""

    def assign(f: StructField) -> StructField:
        metadata = dict(f.metadata)
        if COLUMN_MAPPING_ID not in metadata:
            counter[0] += 1
            metadata[COLUMN_MAPPING_ID] = counter[0]
        if COLUMN_MAPPING_PHYSICAL_NAME not in metadata:
            metadata[COLUMN_MAPPING_PHYSICAL_NAME] = f"col-{uuid.uuid4()}"
        return replace(f, metadata=metadata)

    return map_fields(struct, assign)


def column_paths(schema: StructType) -> Iterable[str]:
    """Dotted paths of every field of ``schema`` (for messages and tests)."""
    return (".".join(path) for path, _ in explode(schema))
