"""Writing data files: Arrow rows in, parquet files and their ``add`` actions out (writes.md §2.7).

:class:`DataFileWriter` takes rows by logical column name, casts them to the table schema, splits
them by partition values (:mod:`deltalog.write.partition_split`: vectorised, no loop over rows),
and writes each group to its own parquet files, rolled over at ``target_file_size`` or
``max_records_per_file``. Partition columns are not written into the files; the log carries them.
Under column mapping the parquet columns take the physical names and ``PARQUET:field_id``s, and
files go into random prefix folders instead of Hive directories.

Rows are buffered per partition group only up to a row group's worth, so a Spark task can feed
batches as they arrive (:meth:`DataFileWriter.add`, then :meth:`DataFileWriter.finish`). Many
rows are split on threads, a partition per task: its rows gathered, then, when buffering them
would overflow the buffer, written at once, so one partition's gather runs beside another's
parquet encoding.
Every byte goes through the :class:`~deltalog.storage.base.LogStore`.
"""

from __future__ import annotations

import contextlib
import os
import random
import string
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.actions import AddFile
from deltalog.data_files import physical_schema
from deltalog.features import is_feature_supported
from deltalog.schema import (
    PrimitiveType,
    StructField,
    StructType,
)
from deltalog.storage.base import LogStore
from deltalog.table_properties import TableProperties
from deltalog.write.conform import conform_table, to_physical
from deltalog.write.parquet_leaves import (
    dictionary_leaves,
    distinct_columns,
    non_floating_leaves,
)
from deltalog.write.partition_split import PartitionSplit, split_by_partition
from deltalog.write.partitioning import (
    directory_value,
    encode_log_path,
    partition_directory,
    serialize_partition_value,
)
from deltalog.write.stats import StatsCollector

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
MATERIALIZE_PARTITION_COLUMNS = "materializePartitionColumns"
MATERIALIZE_PROPERTY = "delta.enableMaterializePartitionColumnsFeature"
# Best effort, without the feature (RFC materialize-partition-columns): writers SHOULD follow it.
WRITE_PARTITION_COLUMNS_PROPERTY = "delta.writePartitionColumnsToParquet"
# Spark's file-name extension of each parquet codec ("" for uncompressed).
_CODEC_EXTENSIONS = {
    "uncompressed": "",
    "none": "",
    "snappy": ".snappy",
    "gzip": ".gz",
    "zstd": ".zstd",
    "lz4": ".lz4raw",
    "brotli": ".br",
}
_ALPHANUMERIC = string.digits + string.ascii_letters


@dataclass(frozen=True, slots=True)
class WriteLayout:
    """Everything writing a table's data files needs (picklable: it ships to Spark executors).

    ``schema`` is the logical table schema; ``configuration`` the table properties (statistics
    settings, ``delta.randomizeFilePrefixes``, ``delta.randomPrefixLength``). ``stats_tight_bounds``
    adds ``tightBounds: true`` to the statistics: set it when the protocol supports deletion
    vectors. ``time_zone`` renders timestamp partition values in directory names.
    ``materialize_partition_columns`` writes the partition columns into the files too (the
    ``materializePartitionColumns`` feature); their values still go into ``partitionValues``.
    """

    table_root: str
    schema: StructType
    partition_columns: tuple[str, ...] = ()
    column_mapping_mode: str = "none"
    configuration: Mapping[str, str] = field(default_factory=dict)
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    max_records_per_file: int = 0
    compression: str = "snappy"
    data_change: bool = True
    stats_tight_bounds: bool = False
    time_zone: str = "UTC"
    carried_columns: tuple[str, ...] = ()
    materialize_partition_columns: bool = False

    def __post_init__(self) -> None:
        if self.column_mapping_mode not in ("none", "id", "name"):
            raise errors.invalid_argument(
                f"unknown column mapping mode {self.column_mapping_mode!r}", self.table_root
            )
        if self.compression.lower() not in _CODEC_EXTENSIONS:
            raise errors.invalid_argument(
                f"unsupported parquet compression {self.compression!r}; use one of "
                + ", ".join(sorted(_CODEC_EXTENSIONS)),
                self.table_root,
            )
        for name in self.partition_columns:
            try:
                self.schema.field(name)
            except KeyError:
                raise errors.invalid_argument(
                    f"partition column {name} is not in the schema {self.schema.names}",
                    self.table_root,
                ) from None

    @classmethod
    def of(cls, snapshot: Snapshot, **options: Any) -> WriteLayout:
        """The layout of ``snapshot``'s table; ``options`` set the other fields."""
        options.setdefault(
            "stats_tight_bounds", is_feature_supported(snapshot.protocol, "deletionVectors")
        )
        options.setdefault(
            "materialize_partition_columns",
            is_feature_supported(snapshot.protocol, MATERIALIZE_PARTITION_COLUMNS)
            or writes_partition_columns(snapshot.metadata.configuration),
        )
        return cls(
            snapshot.table_root,
            snapshot.schema,
            tuple(snapshot.partition_columns),
            snapshot.column_mapping_mode,
            dict(snapshot.metadata.configuration),
            **options,
        )

    @property
    def partition_fields(self) -> tuple[StructField, ...]:
        """The partition columns' fields, in partition order."""
        return tuple(self.schema.field(name) for name in self.partition_columns)

    @property
    def data_fields(self) -> tuple[StructField, ...]:
        """The fields written into the data files: the schema minus the partition columns
        (all of it when they are materialized)."""
        if self.materialize_partition_columns:
            return self.schema.fields
        lowered = {c.lower() for c in self.partition_columns}
        return tuple(f for f in self.schema.fields if f.name.lower() not in lowered)

    @property
    def random_prefix_length(self) -> int | None:
        """Characters of the random folder each file goes into, or ``None`` for Hive folders:
        set under column mapping or ``delta.randomizeFilePrefixes=true`` (default 2)."""
        props = TableProperties(self.configuration, self.table_root)
        randomize = (props.get("delta.randomizeFilePrefixes") or "false").strip().lower()
        if self.column_mapping_mode == "none" and randomize != "true":
            return None
        raw = props.get("delta.randomPrefixLength") or "2"
        if not raw.strip().isdigit() or int(raw) < 1:
            raise errors.InvalidTableError(
                "DELTA_INVALID_TABLE_PROPERTY",
                f"Table property delta.randomPrefixLength has an invalid value {raw!r}.",
                table=self.table_root,
                help="set it to a positive whole number of characters.",
            )
        return int(raw)


def writes_partition_columns(configuration: Mapping[str, str]) -> bool:
    """Whether ``delta.writePartitionColumnsToParquet`` asks for the partition columns in the
    data files. delta-spark 4.4 writes them unless the property is ``false``; deltalog writes
    them only when it is ``true`` (unset, the protocol leaves it to the writer)."""
    props = {k.lower(): v for k, v in configuration.items()}
    raw = props.get(WRITE_PARTITION_COLUMNS_PROPERTY.lower(), "")
    return str(raw).strip().lower() == "true"


class _OpenFile:
    """One parquet file being written: its stream, writer, and running statistics."""

    def __init__(
        self,
        store: LogStore,
        root: str,
        relative: str,
        schema: pa.Schema,
        layout: WriteLayout,
        plain: frozenset[str] = frozenset(),
    ) -> None:
        self.relative = relative
        self.path = f"{root.rstrip('/')}/{relative}"
        self.rows = 0
        self.arrow_bytes = 0
        self._stack = contextlib.ExitStack()
        self._footer: list[pq.FileMetaData] = []  # the file's footer, once closed
        stream = self._stack.enter_context(store.open_output(self.path))
        try:
            self.sink = pa.PythonFile(stream, mode="w")
            compression = layout.compression.lower()
            carried = layout.carried_columns
            self.writer = pq.ParquetWriter(
                self.sink,
                schema,
                compression="none" if compression == "uncompressed" else compression,
                # INT64 micros with isAdjustedToUTC (timestamp) or without (timestamp_ntz).
                use_deprecated_int96_timestamps=False,
                coerce_timestamps="us",
                # Floating leaves: no dictionary, no footer min/max (parquet_leaves says why).
                use_dictionary=dictionary_leaves(schema, carried, plain),
                write_statistics=non_floating_leaves(schema),
                # Row ids run in sequence: delta encoding stores them in a few bits each.
                column_encoding=dict.fromkeys(carried, "DELTA_BINARY_PACKED") or None,
                metadata_collector=self._footer,
            )
        except BaseException as e:
            self._stack.__exit__(type(e), e, e.__traceback__)
            raise
        self.stats = StatsCollector.for_table(
            layout.schema,
            layout.partition_columns,
            layout.configuration,
            layout.column_mapping_mode,
            tight_bounds=layout.stats_tight_bounds,
            footer_strings=True,
        )

    @property
    def written(self) -> int:
        """Bytes written to the file so far (whole row groups; the footer comes at close)."""
        return int(self.sink.tell())

    def write(self, logical: pa.Table, physical: pa.Table, *, overlap: bool = False) -> None:
        """Write the rows (``physical``) and add them (``logical``) to the statistics; with
        ``overlap``, the statistics of many rows on a thread of their own."""
        if not overlap or logical.num_rows < _OVERLAPPED_ROWS:
            self.writer.write_table(physical)
            self.stats.update(logical)
        else:
            # The statistics (pyarrow kernels) beside parquet's encoding and compression: both
            # run without the GIL, so on a free core the statistics cost no wall time (a fifth
            # of an unpartitioned write's).
            with ThreadPoolExecutor(1, thread_name_prefix="deltalog-stats") as pool:
                collected = pool.submit(self.stats.update, logical)
                self.writer.write_table(physical)
                collected.result()
        self.rows += logical.num_rows
        self.arrow_bytes += logical.nbytes

    def close(self) -> int:
        """Finish the file (its statistics too); the bytes written."""
        self.writer.close()
        self.stats.add_footer(self._footer[0])
        written = self.sink.tell()
        self._stack.close()
        return written

    def abort(self) -> None:
        """Drop the half-written file (the store deletes it when its stream fails)."""
        with contextlib.suppress(Exception):
            self.writer.close()
        failure = RuntimeError("data file write aborted")
        with contextlib.suppress(Exception):
            self._stack.__exit__(RuntimeError, failure, None)


@dataclass(slots=True)
class _Group:
    """Rows sharing one set of partition values: their log values, folder and buffered rows."""

    partition_values: dict[str, str | None]
    directory: str | None
    buffered: list[pa.Table] = field(default_factory=list)
    buffered_bytes: int = 0
    file: _OpenFile | None = None
    file_count: int = 0


class DataFileWriter:
    """Writes rows into a table's data files and returns their ``add`` actions (not committed).

    Feed rows with :meth:`add` (any number of times), then call :meth:`finish`; or call
    :meth:`write` once. Rows name columns by their LOGICAL names, in any order; missing nullable
    columns are written as nulls; values are cast to the schema's types. Use as a context
    manager to :meth:`abort` (delete every file written) when the body fails.

    ``overlap_statistics``: collect a file's statistics on a second thread while parquet encodes
    the same rows, where the writer writes one file at a time. For a caller that owns the
    machine's cores (``write_table``), not for one of several writers running at once (a Spark
    task, a thread per file), where the extra thread only contends for the same cores.
    """

    def __init__(
        self,
        store: LogStore,
        layout: WriteLayout,
        *,
        task_id: int = 0,
        buffer_bytes: int = 64 * 1024 * 1024,
        overlap_statistics: bool = False,
    ) -> None:
        self._store = store
        self._overlap = overlap_statistics
        self._layout = layout
        self._task_id = task_id
        self._buffer_limit = buffer_bytes
        # A group's rows go to parquet as one row group once they reach this size.
        self._row_group_bytes = max(1, min(buffer_bytes, layout.target_file_size))
        # void columns are never written to parquet (readers fill them with nulls).
        written = [f for f in layout.data_fields if f.type != PrimitiveType("void")]
        self._data_names = [f.name for f in written] + list(layout.carried_columns)
        carried = [pa.field(name, pa.int64(), True) for name in layout.carried_columns]
        self._physical = pa.schema(
            [*physical_schema(written, layout.column_mapping_mode), *carried]
        )
        self._groups: dict[tuple[str | None, ...], _Group] = {}
        self._added: list[AddFile] = []
        self._written: list[str] = []
        self._bytes_per_arrow_byte = 1.0  # parquet bytes per Arrow byte, learnt from closed files
        self._finished = False

    def __enter__(self) -> DataFileWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()

    def write(self, data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch]) -> list[AddFile]:
        """Write all of ``data`` and finish: the ``add`` actions of the files written."""
        if isinstance(data, pa.Table | pa.RecordBatch):
            self.add(data)
        else:
            for batch in data:
                self.add(batch)
        return self.finish()

    def add(self, data: pa.Table | pa.RecordBatch) -> None:
        """Buffer or write the rows of ``data``.

        Raises:
            InvalidArgumentError: a column not in the schema, a missing non-nullable column, a
                value that does not cast, or a partition value that cannot be written.
        """
        if self._finished:
            raise errors.invalid_argument(
                "this DataFileWriter is finished", self._layout.table_root
            )
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        table = self._conform(table)
        if table.num_rows == 0:
            return
        split = split_by_partition(table, list(self._layout.partition_columns), self._data_names)
        groups, parts = self._groups_of(split)
        flushed = self._flushed_now(groups, parts, split)

        def place(g: int) -> None:
            group = groups[g]
            for i in parts[g]:
                rows = split.rows(i)
                group.buffered.append(rows)
                group.buffered_bytes += rows.nbytes
            if g in flushed or group.buffered_bytes >= self._row_group_bytes:
                self._flush(group)

        if len(groups) > 1 and table.num_rows >= _THREADED_ROWS:
            self._on_threads(place, groups)
        else:
            for g in range(len(groups)):
                place(g)
        self._relieve_memory()

    def _groups_of(self, split: PartitionSplit) -> tuple[list[_Group], list[list[int]]]:
        """The groups of ``split``'s partitions, each once, and which partitions each holds
        (distinct values can share a group: NaN and -NaN, whose log text is the same)."""
        groups: list[_Group] = []
        parts: list[list[int]] = []
        at: dict[int, int] = {}
        for i, values in enumerate(split.values):
            group = self._group_of(values)
            if id(group) not in at:
                at[id(group)] = len(groups)
                groups.append(group)
                parts.append([])
            parts[at[id(group)]].append(i)
        return groups, parts

    def _group_of(self, values: list[Any]) -> _Group:
        """The group of rows with partition ``values`` (made on first sight)."""
        fields = self._layout.partition_fields
        key = tuple(self._log_value(v, f) for v, f in zip(values, fields, strict=True))
        group = self._groups.get(key) or self._new_group(key, values)
        self._groups[key] = group
        return group

    def _flushed_now(
        self, groups: list[_Group], parts: list[list[int]], split: PartitionSplit
    ) -> set[int]:
        """The groups that :meth:`_relieve_memory` would write out once ``split``'s rows
        (``parts[g]``: group ``g``'s) are buffered, by their estimated bytes: they are written
        as soon as gathered, one partition's gather beside another's parquet encoding."""
        sizes = [
            g.buffered_bytes + sum(split.estimated_bytes(i) for i in part)
            for g, part in zip(groups, parts, strict=True)
        ]
        total = sum(g.buffered_bytes for g in self._groups.values())
        total += sum(sizes) - sum(g.buffered_bytes for g in groups)
        chosen = set()
        for g in sorted(range(len(groups)), key=lambda g: -sizes[g]):
            if total <= self._buffer_limit:
                break
            total -= sizes[g]
            chosen.add(g)
        return chosen

    def _conform(self, table: pa.Table) -> pa.Table:
        """``table`` in the schema's columns and types, then the carried columns."""
        carried = self._layout.carried_columns
        if not carried:
            return conform_table(table, self._layout.schema, self._layout.table_root)
        present = [n for n in carried if n in table.column_names]
        rows = table.drop_columns(present) if present else table
        out = conform_table(rows, self._layout.schema, self._layout.table_root)
        for name in carried:
            column = table.column(name) if name in present else pa.nulls(len(out), pa.int64())
            out = out.append_column(name, column.cast(pa.int64()))
        return out

    def finish(self) -> list[AddFile]:
        """Write everything buffered, close every file: the ``add`` actions, in writing order."""
        if not self._finished:
            self._each_group(self._finish_group, list(self._groups.values()))
            self._finished = True
        return list(self._added)

    def _finish_group(self, group: _Group) -> None:
        self._flush(group)
        self._close_file(group)

    def _each_group(self, work: Callable[[_Group], None], groups: list[_Group]) -> None:
        """``work`` (a flush, a finish) of each of ``groups``: on threads where there are
        several partitions' worth of rows (pyarrow encodes and compresses without the GIL)."""
        buffered = sum(g.buffered_bytes for g in groups)
        if len(groups) < 2 or buffered < _THREADED_BYTES:
            for group in groups:
                work(group)
            return
        self._on_threads(lambda i: work(groups[i]), groups)

    def _on_threads(self, work: Callable[[int], None], groups: list[_Group]) -> None:
        """``work(i)`` for each of ``groups`` on threads, the adds then put in the order of
        ``groups``, as one thread would have made them."""
        before = len(self._added)
        # The groups' threads use the cores already: no statistics thread beside each.
        overlap, self._overlap = self._overlap, False
        try:
            with ThreadPoolExecutor(_THREADS, thread_name_prefix="deltalog-write") as pool:
                list(pool.map(work, range(len(groups))))
        finally:
            self._overlap = overlap
        rank = {tuple(g.partition_values.items()): i for i, g in enumerate(groups)}
        done = self._added[before:]
        done.sort(key=lambda add: rank[tuple(add.partition_values.items())])
        self._added[before:] = done

    def abort(self) -> None:
        """Close and delete every file this writer made (nothing of it is committed)."""
        self._finished = True
        for group in self._groups.values():
            if group.file is not None:
                group.file.abort()
                group.file = None
            group.buffered.clear()
        for path in self._written:
            self._store.delete(path)
        self._added.clear()

    def _log_value(self, value: Any, f: StructField) -> str | None:
        try:
            return serialize_partition_value(value, f.type)
        except errors.InvalidArgumentError as e:
            raise errors.invalid_argument(
                f"partition column {f.name}: {e}", self._layout.table_root
            ) from None

    def _new_group(self, key: tuple[str | None, ...], values: list[Any]) -> _Group:
        layout = self._layout
        fields = layout.partition_fields
        mapped = layout.column_mapping_mode != "none"
        partition_values = {
            (f.physical_name if mapped else f.name): value
            for f, value in zip(fields, key, strict=True)
        }
        directory = None
        if fields and layout.random_prefix_length is None:
            directory = partition_directory(
                [
                    (f.name, directory_value(v, f.type, time_zone=layout.time_zone))
                    for f, v in zip(fields, values, strict=True)
                ]
            )
        return _Group(partition_values, directory)

    # -- files ------------------------------------------------------------------------------

    def _relieve_memory(self) -> None:
        """Write out the biggest buffers while all buffers together exceed the budget."""
        total = sum(g.buffered_bytes for g in self._groups.values())
        chosen = []
        for group in sorted(self._groups.values(), key=lambda g: -g.buffered_bytes):
            if total <= self._buffer_limit:
                break
            total -= group.buffered_bytes
            chosen.append(group)
        self._each_group(self._flush, chosen)

    def _flush(self, group: _Group) -> None:
        """Write ``group``'s buffered rows, rolling over to new files as they fill."""
        if not group.buffered:
            return
        table = pa.concat_tables(group.buffered)
        group.buffered, group.buffered_bytes = [], 0
        offset = 0
        while offset < table.num_rows:
            file = group.file or self._open_file(group, table.slice(offset))
            rows = self._rows_fitting(file, table, offset)
            piece = table.slice(offset, rows)
            file.write(piece, to_physical(piece, self._physical), overlap=self._overlap)
            offset += rows
            if self._is_full(file):
                self._close_file(group)

    def _rows_fitting(self, file: _OpenFile, table: pa.Table, offset: int) -> int:
        """How many rows from ``offset`` go into ``file`` (at least one): up to the record
        limit, and as many as its size estimate says fit below ``target_file_size``."""
        layout = self._layout
        fit = table.num_rows - offset
        if layout.max_records_per_file > 0:
            fit = min(fit, layout.max_records_per_file - file.rows)
        # Parquet bytes per Arrow byte: this file's so far, else the last file's (else 1, which
        # errs towards smaller row groups; the file then takes more once its ratio is known).
        ratio = file.written / file.arrow_bytes if file.arrow_bytes else self._bytes_per_arrow_byte
        bytes_per_row = max(table.nbytes / table.num_rows * ratio, 1e-9)
        by_size = int((layout.target_file_size - file.written) / bytes_per_row)
        return max(1, min(fit, by_size))

    def _is_full(self, file: _OpenFile) -> bool:
        """Whether ``file`` takes no more rows: at the record limit, at the target size, or so
        close to it (1/16) that more rows would only add tiny row groups."""
        layout = self._layout
        if 0 < layout.max_records_per_file <= file.rows:
            return True
        return file.written >= layout.target_file_size * 15 / 16

    def _open_file(self, group: _Group, first: pa.Table) -> _OpenFile:
        """A new file of ``group``, whose first rows are ``first`` (they choose which columns
        are written without dictionaries: :func:`distinct_columns`)."""
        layout = self._layout
        extension = _CODEC_EXTENSIONS[layout.compression.lower()]
        name = f"part-{self._task_id:05d}-{uuid.uuid4()}.c{group.file_count:03d}{extension}.parquet"
        prefix_length = layout.random_prefix_length
        if prefix_length is not None:
            folder: str | None = "".join(random.choices(_ALPHANUMERIC, k=prefix_length))
        else:
            folder = group.directory
        relative = f"{folder}/{name}" if folder else name
        plain = distinct_columns(to_physical(first.slice(0, 4096), self._physical))
        group.file = _OpenFile(
            self._store, layout.table_root, relative, self._physical, layout, plain
        )
        group.file_count += 1
        self._written.append(group.file.path)
        return group.file

    def _close_file(self, group: _Group) -> None:
        file = group.file
        if file is None:
            return
        group.file = None
        written = file.close()
        if file.arrow_bytes:
            self._bytes_per_arrow_byte = written / file.arrow_bytes
        info = self._store.stat(file.path)
        self._added.append(
            AddFile(
                path=encode_log_path(file.relative),
                partition_values=dict(group.partition_values),
                size=info.size,
                modification_time=info.modification_time,
                data_change=self._layout.data_change,
                stats=file.stats.to_json(),
            )
        )


# Rows of a piece whose statistics are collected beside its parquet encoding (fewer: in turn).
_OVERLAPPED_ROWS = 1 << 16
# Fewer rows gather, and fewer bytes write, faster than threads start.
_THREADED_ROWS = 1 << 16
_THREADED_BYTES = 4 << 20
_THREADS = min(4, os.cpu_count() or 1)
