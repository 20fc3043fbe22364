"""Input rows in the table's logical columns and types (:func:`conform_table`), and logical rows
under the data files' physical names (:func:`to_physical`): what a writer does to rows before
splitting them by partition and encoding them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.geospatial import from_spark_arrow, is_spark_arrow
from deltalog.schema import (
    ArrayType,
    DataType,
    GeoType,
    MapType,
    StructField,
    StructType,
    to_arrow,
)


def conform_table(data: pa.Table, schema: StructType, table: str = "") -> pa.Table:
    """``data`` with exactly ``schema``'s columns, in order, in its Arrow types: columns found
    by name (exact, else ignoring case, nested too), missing nullable ones null.

    Raises:
        InvalidArgumentError: a column not in the schema, a missing non-nullable column, or a
            value that does not cast.
    """
    for name in data.column_names:
        if not any(f.name.lower() == name.lower() for f in schema.fields):
            raise errors.invalid_argument(
                f"column {name} is not in the table schema {schema.names}", table or None
            )
    given = list(data.schema)
    arrays = _conform_fields(given, list(data.columns), schema.fields, data.num_rows, ())
    return pa.Table.from_arrays(arrays, schema=schema.to_arrow())


def _conform_fields(
    given: list[pa.Field],
    children: list[Any],
    fields: tuple[StructField, ...],
    length: int,
    path: tuple[str, ...],
) -> list[Any]:
    names = [g.name for g in given]
    lowered = [n.lower() for n in names]
    out = []
    for f in fields:
        at = names.index(f.name) if f.name in names else None
        if at is None and f.name.lower() in lowered:
            at = lowered.index(f.name.lower())
        if at is None:
            if not f.nullable:
                raise errors.invalid_argument(
                    f"non-nullable column {'.'.join((*path, f.name))} is missing from the data"
                )
            out.append(_nulls(length, to_arrow(f.type)))
        else:
            out.append(_conform(children[at], f.type, (*path, f.name)))
    extra = set(lowered) - {f.name.lower() for f in fields}
    if path and extra:
        raise errors.invalid_argument(
            f"field(s) {sorted(extra)} of {'.'.join(path)} are not in the table schema"
        )
    return out


def _conform(values: Any, t: DataType, path: tuple[str, ...]) -> Any:
    """``values`` (an array or chunked array) in the Arrow type of ``t``."""
    target = to_arrow(t)
    if values.type.equals(target):
        return values
    if isinstance(values, pa.ChunkedArray):
        chunks = [_conform(c, t, path) for c in values.chunks]
        return pa.chunked_array(chunks, type=target)
    if isinstance(t, GeoType) and is_spark_arrow(values):  # Spark's struct<srid, wkb>
        return from_spark_arrow(values, t, ".".join(path))
    mask = values.is_null() if values.null_count else None
    if isinstance(t, StructType) and pa.types.is_struct(values.type):
        given = [values.type.field(i) for i in range(values.type.num_fields)]
        children = _conform_fields(given, values.flatten(), t.fields, len(values), path)
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if isinstance(t, ArrayType) and (
        pa.types.is_list(values.type) or pa.types.is_large_list(values.type)
    ):
        offsets, child = list_parts(values)
        items = _conform(child, t.element_type, (*path, "element"))
        return pa.ListArray.from_arrays(offsets.cast(pa.int32()), items, type=target, mask=mask)
    if isinstance(t, MapType) and pa.types.is_map(values.type):
        offsets, entries = list_parts(values)
        keys = _conform(entries.field(0), t.key_type, (*path, "key"))
        items = _conform(entries.field(1), t.value_type, (*path, "value"))
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise errors.invalid_argument(
            f"column {'.'.join(path)} of type {values.type} does not cast to {target}: {e}"
        ) from None


def _nulls(length: int, t: pa.DataType) -> pa.Array:
    """``length`` nulls of type ``t``. A struct with non-nullable children (a variant's
    ``value`` and ``metadata``) gets empty children under its null mask, as parquet stores
    it, so the column keeps its declared nullability."""
    if not pa.types.is_struct(t) or all(t.field(i).nullable for i in range(t.num_fields)):
        return pa.nulls(length, t)
    children = [_empty(length, t.field(i)) for i in range(t.num_fields)]
    mask = pa.array([True] * length, pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


def _empty(length: int, f: pa.Field) -> pa.Array:
    if f.nullable:
        return pa.nulls(length, f.type)
    if pa.types.is_binary(f.type) or pa.types.is_string(f.type):
        return pa.array([b"" if pa.types.is_binary(f.type) else ""] * length, f.type)
    return _nulls(length, f.type) if pa.types.is_struct(f.type) else pa.nulls(length, f.type)


def to_physical(logical: pa.Table, schema: pa.Schema) -> pa.Table:
    """The logical rows under the physical schema: a zero-copy view (same layout, new names)."""
    columns = [
        pa.chunked_array([c.view(f.type) for c in column.chunks], type=f.type)
        for column, f in zip(logical.columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def list_parts(values: Any) -> tuple[pa.Array, Any]:
    """A list or map array's offsets counted from 0 and the part of its child they cover (a
    map's entries): the pieces to rebuild it from, sliced or not. Arrow rebuilds no list from
    a slice's offsets under a null mask, and a slice's child is the whole unsliced child."""
    offsets = values.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, pa.scalar(first, offsets.type))
    return rebased, values.values.slice(first, last - first)
