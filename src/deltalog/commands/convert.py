"""CONVERT TO DELTA: build a Delta log over an existing directory of parquet files, in place
(reference ``ConvertToDeltaCommand`` / ``ConvertUtils``). Pure core.

* Every file below the root is listed through the storage seam, except hidden ones (a path
  segment starting with ``_`` or ``.``, e.g. ``_SUCCESS``, ``_delta_log``, ``.crc`` files), as
  the reference's listing skips them.
* Partition values come from the ``col=value`` directories between the root and each file:
  names and values are Hive-unescaped, ``__HIVE_DEFAULT_PARTITION__`` is null, the number and
  names of the columns must match ``partition_schema``, and every value must parse as its
  column's type; the log keeps the directory's text, as the reference does.
* The schema is the files' parquet schemas merged (nullable; the partition columns appended
  with their given types); two files disagreeing on a column's type is an error. Each file's
  ``add.stats`` (``numRecords``, min/max, null counts) comes from its footer. Footers are read
  through the ``footer_reader`` seam: on a thread pool by default (:func:`read_footers`); the
  Spark layer reads them in tasks for many files (:mod:`deltalog.spark.commands.convert_footers`).
* Version 0 is committed with operation ``CONVERT`` (``numFiles``, ``partitionedBy``,
  ``collectStats``, ``sourceFormat``; metric ``numConvertedFiles``), then checkpointed, as the
  reference's ``commitLarge``. A directory that is already a Delta table is left alone.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.actions import Action, AddFile, Metadata
from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.errors import optimize as optimize_errors
from deltalog.partition_values import parse_partition_value
from deltalog.schema import StructField, StructType, as_nullable, schema_from_arrow, simple_string
from deltalog.storage import is_remote
from deltalog.storage.base import FileInfo, LogStore
from deltalog.txn import operations
from deltalog.txn.hooks import checkpoint_after_commit
from deltalog.write.partitioning import encode_log_path
from deltalog.write.stats import StatsCollector

if TYPE_CHECKING:
    import pyarrow.parquet as pq

log = logging.getLogger(__name__)

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_FOOTER_THREADS = 8


FooterReader = Callable[[LogStore, str, Sequence[str], str], "list[pq.FileMetaData]"]
"""``(store, table root, file paths, source format) -> footers`` in the order of the paths.

Raises ``DELTA_CONVERT_NON_PARQUET_TABLE`` for a file that is not parquet, and
``FileNotFoundError`` for one that vanished, as :func:`read_footers` does."""


@dataclass(frozen=True, slots=True)
class ConvertResult:
    """What CONVERT did: the table's version (0 when converted now, the latest when the
    directory already was a Delta table) and the number of files it took in (0 for a no-op)."""

    version: int
    num_files: int
    converted: bool


@dataclass(frozen=True, slots=True)
class _SourceFile:
    info: FileInfo
    relative: str
    partition_values: dict[str, str | None]


def convert_to_delta(
    path: str,
    partition_schema: StructType | None = None,
    *,
    collect_stats: bool = True,
    source_format: str | None = "parquet",
    store: LogStore | None = None,
    footer_reader: FooterReader | None = None,
) -> ConvertResult:
    """Convert the parquet directory at ``path`` into a Delta table (version 0).

    ``footer_reader`` reads the files' parquet footers (default :func:`read_footers`, threads
    in this process).

    Raises:
        TableNotFoundError: ``DELTA_CONVERT_EMPTY_DIRECTORY`` (no data files).
        UnsupportedFeatureError: ``DELTA_CONVERT_NON_PARQUET_TABLE``: a file is not parquet.
        InvalidArgumentError: partition directories that do not match ``partition_schema``
            (``DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME``,
            ``DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME``), a value that does not parse
            as its type (``DELTA_FAILED_CAST_PARTITION_VALUE``).
        DeltaWriteError: files disagreeing on a column's type (``DELTA_FAILED_MERGE_SCHEMA_FILE``).
    """
    delta_log = DeltaLog.for_table(path, store=store)
    txn = delta_log.start_transaction()
    if txn.snapshot is not None:
        return ConvertResult(txn.snapshot.version, 0, converted=False)
    root = delta_log.table_root
    partition_schema = partition_schema or StructType(())
    files = _list_files(delta_log.store, root, partition_schema)
    if not files:
        raise manage_errors.convert_empty_directory(root)
    read = footer_reader or read_footers
    paths = [f.info.path for f in files]
    footers = read(delta_log.store, root, paths, source_format or "parquet")
    _refuse_geospatial(root, footers)
    data_schema = _merged_schema(root, files, footers, partition_schema)
    schema = StructType((*data_schema.fields, *as_nullable(partition_schema).fields))
    partition_columns = tuple(f.name for f in partition_schema.fields)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema.to_json(),
        partition_columns=partition_columns,
        configuration={},
        created_time=min(f.info.modification_time for f in files),
    )
    txn.update_metadata(metadata)
    txn.read_whole_table()  # the reference's commitLarge records isBlindAppend=false
    adds: list[Action] = [
        _add_file(f, meta, schema, partition_columns, collect_stats)
        for f, meta in zip(files, footers, strict=True)
    ]
    op = operations.convert(len(files), partition_columns, collect_stats, source_format)
    version = txn.commit(adds, op)
    checkpoint_after_commit(delta_log, version, "CONVERT")
    return ConvertResult(version, len(files), converted=True)


# -- listing and partition values -----------------------------------------------------------------


def _list_files(store: LogStore, root: str, partition_schema: StructType) -> list[_SourceFile]:
    out = []
    for info in store.list_recursive(root):
        relative = str(posixpath.relpath(info.path, root))
        if any(seg.startswith(("_", ".")) for seg in relative.split("/")):
            continue
        values = _partition_values(root, relative, partition_schema)
        out.append(_SourceFile(info, relative, values))
    out.sort(key=lambda f: f.relative)
    return out


def _partition_values(
    table: str, relative: str, partition_schema: StructType
) -> dict[str, str | None]:
    """``col=value`` directories of ``relative`` as the log's partition values, checked
    against ``partition_schema`` (names case-insensitive, values typed)."""
    found: list[tuple[str, str | None]] = []
    for segment in relative.split("/")[:-1]:
        if "=" not in segment:
            continue  # the reference's parser ignores other directories
        name, _, raw = segment.partition("=")
        text = unquote(raw)
        found.append((unquote(name), None if text == HIVE_DEFAULT_PARTITION else text))
    expected = partition_schema.names
    if len(found) != len(expected):
        raise manage_errors.unexpected_num_partition_columns_from_file_name(
            table, relative, expected, [n for n, _ in found]
        )
    out: dict[str, str | None] = {}
    for name, value in found:
        try:
            field = partition_schema.field(name)
        except KeyError:
            raise manage_errors.unexpected_partition_column_from_file_name(
                table, relative, name, expected
            ) from None
        _check_castable(table, field, value)
        out[field.name] = value
    return out


def _check_castable(table: str, field: StructField, value: str | None) -> None:
    try:
        parse_partition_value(value, field.type)
    except (ValueError, ArithmeticError):
        raise manage_errors.failed_cast_partition_value(
            table, value or "", simple_string(field.type), field.name
        ) from None


# -- footers, schema and stats --------------------------------------------------------------------


def read_footers(
    store: LogStore, root: str, paths: Sequence[str], source_format: str
) -> list[pq.FileMetaData]:
    """The footers of ``paths`` read on a thread pool (see :data:`FooterReader`)."""

    def one(path: str) -> pq.FileMetaData:
        meta = read_footer(store, path)
        if meta is None:
            raise manage_errors.convert_non_parquet_table(root, source_format)
        return meta

    with ThreadPoolExecutor(max_workers=_FOOTER_THREADS) as pool:
        return list(pool.map(one, paths))


def read_footer(store: LogStore, path: str) -> pq.FileMetaData | None:
    """The parquet footer of ``path`` (read by range on object stores), ``None`` when it is not
    a parquet file. Runs wherever footers are read (driver threads or Spark tasks).

    Raises:
        FileNotFoundError: the file is gone.
    """
    try:
        source = store.open_input(path) if is_remote(path) else path  # type: ignore[attr-defined]
        return pq.read_metadata(source)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        log.debug("not parquet: %s (%s)", path, e)
        return None


def _refuse_geospatial(table: str, footers: Sequence[pq.FileMetaData]) -> None:
    """Refuse parquet holding GEOMETRY or GEOGRAPHY columns, as delta-spark's
    ``ConvertToDeltaCommand`` does (``DeltaGeoSpatial.failIfSchemaHasGeoColumn``).

    Raises:
        InvalidArgumentError: ``DELTA_OPERATION_NOT_SUPPORTED_FOR_DATATYPES`` naming the column.
    """
    for meta in footers:
        for i in range(meta.num_columns):
            column = meta.schema.column(i)
            kind = column.logical_type.type
            if kind in ("GEOMETRY", "GEOGRAPHY"):
                raise optimize_errors.operation_not_supported_for_data_types(
                    "CONVERT TO DELTA",
                    column.path,
                    kind.lower(),
                    table,
                    help="convert parquet without geometry or geography columns, or write "
                    "the rows into a new Delta table instead.",
                )


def _merged_schema(
    table: str,
    files: Sequence[_SourceFile],
    footers: Sequence[pq.FileMetaData],
    partition_schema: StructType,
) -> StructType:
    """The union of the files' schemas, first-seen column order, all nullable; a column whose
    type differs between files is an error. Partition columns found in files are dropped."""
    fields: dict[str, StructField] = {}
    skip = {n.lower() for n in partition_schema.names}
    for f, meta in zip(files, footers, strict=True):
        file_schema = as_nullable(schema_from_arrow(meta.schema.to_arrow_schema(), table))
        for field in file_schema.fields:
            key = field.name.lower()
            if key in skip:
                continue
            seen = fields.get(key)
            if seen is None:
                fields[key] = field
            elif seen.type != field.type:
                raise manage_errors.convert_schema_conflict(
                    table,
                    f.relative,
                    f"column {field.name} is {simple_string(field.type)} here but "
                    f"{simple_string(seen.type)} in an earlier file",
                )
    if not fields:
        raise errors.invalid_argument("the parquet files have no columns", table=table)
    return StructType(tuple(fields.values()))


def _add_file(
    f: _SourceFile,
    meta: pq.FileMetaData,
    schema: StructType,
    partition_columns: Sequence[str],
    collect_stats: bool,
) -> AddFile:
    stats: str | None = None
    if collect_stats:
        collector = StatsCollector.for_table(schema, partition_columns)
        collector.update_from_footer(meta)
        stats = collector.to_json()
    return AddFile(
        path=encode_log_path(f.relative),
        partition_values=dict(f.partition_values),
        size=f.info.size,
        modification_time=f.info.modification_time,
        data_change=True,
        stats=stats,
    )
