"""Reading one data file with pyarrow as logical rows: deleted rows dropped, physical columns
mapped to logical ones (by name or parquet field id, nested too), cast to the table's current
types (type widening), partition columns added.

The engine-free reader: the Python data source runs it on executors, the CLI on the driver.
Spark's JVM reader (:mod:`deltalog.spark.read.scan`) is the fast path for big scans.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.partition_values import lookup_partition_value, parse_partition_value
from deltalog.schema import ArrayType, DataType, MapType, StructField, StructType, to_arrow
from deltalog.storage import is_remote, store_for

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot

_FIELD_ID = b"PARQUET:field_id"


@dataclasses.dataclass(frozen=True, slots=True)
class TableLayout:
    """What reading a data file needs to know of its table (picklable, for executors)."""

    table_root: str
    schema: StructType
    partition_columns: tuple[str, ...]
    column_mapping_mode: str

    @classmethod
    def of(cls, snapshot: Snapshot) -> TableLayout:
        return cls(
            snapshot.table_root,
            snapshot.schema,
            tuple(snapshot.partition_columns),
            snapshot.column_mapping_mode,
        )


def read_parquet(path: str, table_root: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A data file's physical rows (only the physical ``columns`` when given; names the file
    does not have are left out).

    Raises:
        InvalidTableError: the file does not exist (DELTA_FILE_NOT_FOUND).
    """
    import pyarrow.parquet as pq  # only when rows are read (~25 ms): not on a snapshot's path

    try:
        # INT96 timestamps in nanoseconds overflow past 2262; Delta's unit is microseconds.
        if is_remote(path):  # one GET of the whole object: fewer round trips than ranges
            source: Any = pa.BufferReader(store_for(path).read(path))
        else:
            source = path
        # ``ParquetFile`` rather than ``read_table``: no dataset discovery, which is about half
        # of a small file's read (bench/README.md).
        parquet = pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
        if columns is not None:
            present = set(parquet.schema_arrow.names)
            columns = [c for c in columns if c in present]
        return parquet.read(columns=columns)
    except FileNotFoundError:
        raise errors.InvalidTableError(
            "DELTA_FILE_NOT_FOUND",
            f"data file {path}, named in the log, does not exist.",
            table=table_root,
            help="restore the file, or repair the table (FSCK) to drop it from the log.",
        ) from None


def select_rows(data: pa.Table, rows: np.ndarray | None, *, keep_listed: bool) -> pa.Table:
    """``data`` without the listed row indexes (``keep_listed=False``, a deletion vector) or
    with only them (``keep_listed=True``); ``rows=None`` keeps everything."""
    if rows is None:
        return data
    listed = np.zeros(data.num_rows, dtype=bool)
    listed[rows[rows < data.num_rows].astype(np.int64)] = True
    return data.filter(pa.array(listed if keep_listed else ~listed))


def to_logical(
    data: pa.Table,
    schema: StructType,
    partition_columns: list[str] | tuple[str, ...],
    mode: str,
    partition_values: Mapping[str, str | None],
) -> pa.Table:
    """Physical rows of one file as the table's logical columns, partition columns added."""
    lowered = {c.lower() for c in partition_columns}
    columns = []
    for f in schema.fields:
        if f.name.lower() in lowered:
            key = f.physical_name if mode != "none" else f.name
            raw = lookup_partition_value(dict(partition_values), key)
            value = parse_partition_value(raw, f.type)
            columns.append(pa.array([value] * data.num_rows, to_arrow(f.type)))
        else:
            source = _find(data.schema, data.columns, f, mode)
            columns.append(_logical(source, f.type, mode, data.num_rows))
    return pa.Table.from_arrays(columns, schema=schema.to_arrow())


def _find(schema: pa.Schema | pa.StructType, children: list[Any], f: StructField, mode: str) -> Any:
    fields = list(schema)
    if mode == "id" and "delta.columnMapping.id" in f.metadata:
        wanted = str(f.metadata["delta.columnMapping.id"]).encode()
        for field, child in zip(fields, children, strict=True):
            if (field.metadata or {}).get(_FIELD_ID) == wanted:
                return child
    name = f.physical_name if mode != "none" else f.name
    for field, child in zip(fields, children, strict=True):
        if field.name == name:
            return child
    return None


def _logical(array: Any, t: DataType, mode: str, length: int) -> pa.Array:
    """``array`` (a physical column, or None when absent) in the logical type ``t``."""
    target = to_arrow(t)
    if array is None:
        return pa.nulls(length, target)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], array.type)
    if isinstance(t, StructType):
        children = [
            _logical(
                _find(array.type, [array.field(i) for i in range(array.type.num_fields)], f, mode),
                f.type,
                mode,
                len(array),
            )
            for f in t.fields
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=array.is_null() if array.null_count else None
        )
    if isinstance(t, ArrayType):
        values = _logical(array.values, t.element_type, mode, len(array.values))
        return pa.ListArray.from_arrays(
            array.offsets, values, type=target, mask=array.is_null() if array.null_count else None
        )
    if isinstance(t, MapType):
        keys = _logical(array.keys, t.key_type, mode, len(array.keys))
        items = _logical(array.items, t.value_type, mode, len(array.items))
        return pa.MapArray.from_arrays(
            array.offsets,
            keys,
            items,
            type=target,
            mask=array.is_null() if array.null_count else None,
        )
    return array if array.type == target else array.cast(target)
