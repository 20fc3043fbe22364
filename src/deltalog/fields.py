"""The field table: one description of every log field, from which all schemas derive.

Each action class declares ``FIELDS``, a tuple of :class:`Field`. The JSON codec
(:mod:`deltalog.actions`), the Arrow log schema (here) and the Spark ``StructType`` log schema
(:mod:`deltalog.spark.read.log_schema`) are all computed from those tuples, so they cannot drift.

The types are the handful the Delta log uses (PROTOCOL.md, "Actions"): strings, 32- and 64-bit
integers, booleans, string-to-string maps, arrays and nested structs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

try:  # the kernels without pyarrow.compute's costly import (see deltalog.log.kernels)
    from pyarrow._compute import CastOptions, call_function
except ImportError:  # pragma: no cover - a pyarrow that moved it
    from pyarrow.compute import CastOptions, call_function

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True, slots=True)
class Primitive:
    """A scalar log type: ``string``, ``long``, ``integer`` or ``boolean``."""

    name: str


@dataclass(frozen=True, slots=True)
class MapOf:
    """A ``map<string, string>`` whose values may be null."""

    raw_json_values: bool = False  # commitInfo.operationParameters holds raw JSON scalars


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """An array of a primitive element type."""

    element: Primitive


@dataclass(frozen=True, slots=True)
class StructOf:
    """A nested struct described by another class's ``FIELDS``."""

    cls: Any  # a class with a ``FIELDS`` tuple; typed loosely to avoid an import cycle


FieldType = Primitive | MapOf | ArrayOf | StructOf

STRING = Primitive("string")
LONG = Primitive("long")
INT = Primitive("integer")
BOOLEAN = Primitive("boolean")
STRING_MAP = MapOf()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of an action.

    Attributes:
        attr: the Python attribute name (snake_case).
        json: the wire name in the log (camelCase).
        type: the field's log type.
        nullable: whether the Spark log schema marks it nullable.
        always: serialize even when empty/None (``add.partitionValues`` is always written).
    """

    attr: str
    json: str
    type: FieldType
    nullable: bool = True
    always: bool = False


_PRIMITIVE_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "boolean": pa.bool_(),
}


def arrow_type(t: FieldType) -> pa.DataType:
    """The Arrow type of a log type (the same layout Spark's Arrow conversion produces)."""
    if isinstance(t, Primitive):
        return _PRIMITIVE_ARROW[t.name]
    if isinstance(t, MapOf):
        return pa.map_(pa.string(), pa.string())
    if isinstance(t, ArrayOf):
        return pa.list_(arrow_type(t.element))
    return arrow_struct(t.cls.FIELDS)


def arrow_struct(fields: Sequence[Field]) -> pa.StructType:
    """The Arrow struct of a field table, with wire (JSON) names."""
    return pa.struct([pa.field(f.json, arrow_type(f.type), nullable=True) for f in fields])


def conform_array(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """Reshape ``array`` to ``target``: missing struct fields become nulls, extra ones are dropped,
    compatible scalar types are cast.

    Checkpoints written by different engines carry different subsets of the log schema (no
    ``deletionVector`` in old ones, extra ``stats_parsed`` in others); this gives them all one
    shape so replay and comparison never depend on the writer.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if array.type.equals(target):
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = []
        src_names = [array.type.field(i).name for i in range(array.type.num_fields)]
        for i in range(target.num_fields):
            tf = target.field(i)
            if tf.name in src_names:
                children.append(conform_array(array.field(tf.name), tf.type))
            else:
                children.append(pa.nulls(len(array), tf.type))
        # The parent's nulls as a validity bitmap (StructArray.from_arrays(mask=...) would
        # import pyarrow.compute to invert a mask).
        validity = call_function("is_valid", [array]).buffers()[1] if array.null_count else None
        return pa.Array.from_buffers(target, len(array), [validity], children=children)
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    cast: pa.Array = call_function("cast", [array], CastOptions.safe(target))
    return cast


def conform_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Give ``table`` exactly ``schema``'s columns (see :func:`conform_array`). Columns keep
    their chunks: a checkpoint's row groups are never copied into one."""
    columns: list[pa.Array | pa.ChunkedArray] = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            columns.append(
                pa.chunked_array([conform_array(c, field.type) for c in column.chunks], field.type)
            )
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)
