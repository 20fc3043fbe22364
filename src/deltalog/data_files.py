"""Reading one data file with pyarrow as logical rows: deleted rows dropped, physical columns
mapped to logical ones (by name or parquet field id, nested too), cast to the table's current
types (type widening), partition columns added.

The engine-free reader: the Python data source runs it on executors, the CLI on the driver.
Spark's JVM reader (:mod:`deltalog.spark.read.scan`) is the fast path for big scans.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.geospatial import wkb_type
from deltalog.partition_values import lookup_partition_value, parse_partition_value
from deltalog.schema import (
    ArrayType,
    DataType,
    GeoType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    to_arrow,
)
from deltalog.storage import is_remote, store_for

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot

_FIELD_ID = b"PARQUET:field_id"
VARIANT = PrimitiveType("variant")
# pyarrow's columns: the index of the row's file in a dataset, of its batch in the file.
_FRAGMENT, _BATCH = "__fragment_index", "__batch_index"


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
    one_file = np.zeros(data.num_rows, dtype=np.int64)
    return to_logical_files(data, schema, partition_columns, mode, [partition_values], one_file)


def to_logical_files(
    data: pa.Table,
    schema: StructType,
    partition_columns: list[str] | tuple[str, ...],
    mode: str,
    partition_values: Sequence[Mapping[str, str | None]],
    file_of_row: np.ndarray,
) -> pa.Table:
    """Physical rows of several files as the table's logical columns: row ``i`` came from the
    file whose partition values are ``partition_values[file_of_row[i]]``."""
    lowered = {c.lower() for c in partition_columns}
    take = pa.array(file_of_row, pa.int64())
    columns = []
    for f in schema.fields:
        if f.name.lower() in lowered:
            key = f.physical_name if mode != "none" else f.name
            values = [
                parse_partition_value(lookup_partition_value(dict(v), key), f.type)
                for v in partition_values
            ]
            columns.append(pa.array(values, to_arrow(f.type)).take(take))
        else:
            source = _find(data.schema, data.columns, f, mode)
            columns.append(_logical(source, f.type, mode, data.num_rows, f.name))
    return pa.Table.from_arrays(columns, schema=schema.to_arrow())


def read_parquet_files(
    paths: Sequence[str], physical: pa.Schema, *, threads: bool = True
) -> tuple[pa.Table, np.ndarray] | None:
    """The rows of the local files ``paths``, one after the other, as ``physical`` (columns a
    file lacks are null, narrower types are cast up, columns ``physical`` lacks are not read),
    and the index in ``paths`` of each row's file; ``None`` where one read cannot do it (a
    remote path, a missing file, a column that does not cast): read those file by file.

    Files whose columns are ``physical``'s exactly are decoded each by its own reader on a
    pool of threads (pyarrow decodes without the GIL); otherwise one pyarrow dataset scan
    reads them all, casting as it must. Opening and decoding are most of the cost of many small
    files (``bench/README.md``).
    """
    import pyarrow.dataset as ds  # only when rows are read

    if not paths or any(is_remote(p) for p in paths):
        return None
    if any(_holds_variant(f.type) for f in physical):
        return None  # file by file: a shredded variant is refused, not cast to its parts
    if not any(p.startswith("file:") for p in paths):
        exact = _read_exact(paths, physical, threads)
        if exact is not None:
            return exact
    fmt = ds.ParquetFileFormat(
        read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"),
        # Small local files: one read each is all pre-buffering would save (measured slower).
        default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False),
    )
    try:
        dataset = ds.dataset(list(paths), schema=physical, format=fmt)
        columns = [*physical.names, _FRAGMENT, _BATCH]
        data = dataset.to_table(columns=columns, use_threads=threads)
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None  # the file-by-file reader raises the typed error, or casts as it can
    files, batches = _chunk_origins(data)
    # pyarrow returns a file's batches in order, files in order: checked, as rows' positions
    # in their files (deletion vectors) rest on it.
    if len(files) and np.any(np.diff(files * (int(batches.max()) + 1) + batches) < 0):
        order = np.lexsort((batches, files))  # stable: a batch's rows keep their order
        data, files = data.take(pa.array(order)), files[order]
    return data.drop_columns([_FRAGMENT, _BATCH]), files


# Threads decoding files (pyarrow releases the GIL): a few per core, as small files also wait
# on their reads.
_THREADS = min(8, 2 * (os.cpu_count() or 1))
_TASK_FILES = 32  # files read by one task of the pool, at most
_WHOLE_READ_BYTES = 16 << 20  # a file up to this size is read into memory in one call


def _read_exact(
    paths: Sequence[str], physical: pa.Schema, threads: bool
) -> tuple[pa.Table, np.ndarray] | None:
    """The rows of ``paths`` as :func:`read_parquet_files` returns them, each file read by
    :func:`read_exact`; ``None`` when one of them cannot be."""
    if threads and len(paths) > 1:
        # Runs of files per task: a task per small file costs more in hand-overs between
        # threads (the GIL) than the file's decode (bench/README.md).
        step = max(1, min(_TASK_FILES, -(-len(paths) // _THREADS)))
        runs = [paths[i : i + step] for i in range(0, len(paths), step)]
        with ThreadPoolExecutor(min(_THREADS, len(runs))) as pool:
            read_runs = pool.map(lambda run: [read_exact(p, physical) for p in run], runs)
            tables = [t for run in read_runs for t in run]
    else:
        tables = [read_exact(p, physical) for p in paths]
    read = [t for t in tables if t is not None]
    return stack_files(read) if len(read) == len(tables) else None


def read_exact(path: str, physical: pa.Schema) -> pa.Table | None:
    """The ``physical`` columns of the local file ``path`` (not a ``file:`` URI), decoded by a
    ``ParquetFile`` of its own (no dataset machinery: about a third of a small file's cost);
    ``None`` unless the file holds them with exactly their types (nullability and metadata
    aside) and can be read here: a missing or unreadable file is left to the readers that
    raise its typed error."""
    import pyarrow.parquet as pq  # only when rows are read

    try:
        with open(path, "rb") as f:
            # A small file in one read: a reader on the path reads its footer, then its pages.
            small = os.fstat(f.fileno()).st_size <= _WHOLE_READ_BYTES
            source: Any = pa.BufferReader(f.read()) if small else path
        parquet = pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
        found = parquet.schema_arrow
        if found.equals(physical, check_metadata=True):  # the usual file: nothing to check
            return parquet.read(use_threads=False)
        if any(found.get_field_index(name) < 0 for name in physical.names):
            return None
        data = parquet.read(columns=physical.names, use_threads=False)
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    for got, wanted in zip(data.schema, physical, strict=True):
        if not got.type.equals(wanted.type, check_metadata=False):
            return None
    return pa.Table.from_arrays(data.columns, schema=physical)


def stack_files(tables: Sequence[pa.Table]) -> tuple[pa.Table, np.ndarray]:
    """The rows of files read one by one (tables of one schema), one file after the other,
    and the index in ``tables`` of each row's file."""
    counts = np.fromiter((t.num_rows for t in tables), np.int64, len(tables))
    file_of_row = np.repeat(np.arange(len(tables), dtype=np.int64), counts)
    return pa.concat_tables(tables), file_of_row


def _chunk_origins(data: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each row's file and batch index (columns of many chunks: combined first, as a chunked
    ``to_numpy`` is several times slower)."""
    return tuple(
        data[name].combine_chunks().to_numpy().astype(np.int64, copy=False)
        for name in (_FRAGMENT, _BATCH)
    )


def row_positions(file_of_row: np.ndarray) -> np.ndarray:
    """Each row's index inside its file, for rows grouped by file (as :func:`read_parquet_files`
    returns them)."""
    n = len(file_of_row)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, file_of_row[1:] != file_of_row[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)


def rows_kept(
    file_of_row: np.ndarray, files: int, listed: Mapping[int, tuple[np.ndarray, bool]]
) -> np.ndarray | None:
    """Which rows of a scan (rows grouped by file, in order, as :func:`read_parquet_files`
    returns them) to keep: of each file ``i`` in ``listed`` (its row indexes, and whether to
    keep only those or all but those), the rows so selected; of the other files, every row
    (``None`` when ``listed`` is empty)."""
    if not listed:
        return None
    keep = np.ones(len(file_of_row), dtype=bool)
    positions = row_positions(file_of_row)
    starts = np.searchsorted(file_of_row, np.arange(files + 1))
    for i, (rows, keep_listed) in listed.items():
        lo, hi = starts[i], starts[i + 1]
        found = np.isin(positions[lo:hi], rows)
        keep[lo:hi] = found if keep_listed else ~found
    return keep


def physical_schema(fields: Iterable[StructField], mode: str) -> pa.Schema:
    """The parquet schema of the data files: physical names and ``PARQUET:field_id``s under
    column mapping (nested fields too); every column optional, as Spark writes them."""
    return pa.schema([_physical_field(f, mode) for f in fields])


def _physical_field(f: StructField, mode: str) -> pa.Field:
    metadata = None
    if mode != "none" and "delta.columnMapping.id" in f.metadata:
        metadata = {b"PARQUET:field_id": str(f.metadata["delta.columnMapping.id"]).encode()}
    name = f.physical_name if mode != "none" else f.name
    return pa.field(name, _physical_type(f.type, mode), True, metadata)


def _physical_type(t: DataType, mode: str) -> pa.DataType:
    if isinstance(t, StructType):
        return pa.struct([_physical_field(f, mode) for f in t.fields])
    if isinstance(t, ArrayType):
        return pa.list_(pa.field("element", _physical_type(t.element_type, mode), True))
    if isinstance(t, MapType):
        value = pa.field("value", _physical_type(t.value_type, mode), True)
        return pa.map_(_physical_type(t.key_type, mode), value)
    if isinstance(t, GeoType):  # parquet's GEOMETRY/GEOGRAPHY annotation, as Spark writes it
        return wkb_type(t)
    return to_arrow(t)


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


def _logical(array: Any, t: DataType, mode: str, length: int, path: str) -> pa.Array:
    """``array`` (a physical column, or None when absent) in the logical type ``t``.

    Raises:
        UnsupportedFeatureError: column ``path`` is a shredded variant.
    """
    target = to_arrow(t)
    if array is None:
        return pa.nulls(length, target)
    if t == VARIANT and _shredded(array.type):
        # Cast to (value, metadata), the shredded fields in typed_value would be dropped.
        raise errors.shredded_variant_unreadable("", path)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], array.type)
    if isinstance(t, StructType):
        children = [
            _logical(
                _find(array.type, [array.field(i) for i in range(array.type.num_fields)], f, mode),
                f.type,
                mode,
                len(array),
                f"{path}.{f.name}",
            )
            for f in t.fields
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=array.is_null() if array.null_count else None
        )
    if isinstance(t, ArrayType):
        values = _logical(array.values, t.element_type, mode, len(array.values), path)
        return pa.ListArray.from_arrays(
            array.offsets, values, type=target, mask=array.is_null() if array.null_count else None
        )
    if isinstance(t, MapType):
        keys = _logical(array.keys, t.key_type, mode, len(array.keys), path)
        items = _logical(array.items, t.value_type, mode, len(array.items), path)
        return pa.MapArray.from_arrays(
            array.offsets,
            keys,
            items,
            type=target,
            mask=array.is_null() if array.null_count else None,
        )
    return array if array.type == target else array.cast(target)


def _shredded(t: pa.DataType) -> bool:
    """Whether a variant column's physical type is shredded (PROTOCOL.md "Shredded Variant
    data in Parquet": a ``typed_value`` beside ``metadata`` and ``value``)."""
    return pa.types.is_struct(t) and t.get_field_index("typed_value") >= 0


def _holds_variant(t: pa.DataType) -> bool:
    """Whether a physical type is or holds an unshredded variant's struct (``value`` and
    ``metadata``), which a dataset scan would cast a shredded file's column to silently."""
    if pa.types.is_struct(t):
        names = {t.field(i).name for i in range(t.num_fields)}
        return names == {"value", "metadata"} or any(
            _holds_variant(t.field(i).type) for i in range(t.num_fields)
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _holds_variant(t.value_type)
    if pa.types.is_map(t):
        return _holds_variant(t.key_type) or _holds_variant(t.item_type)
    return False
