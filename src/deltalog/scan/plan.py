"""What Spark's parquet reader needs to scan a set of a snapshot's files, built from Arrow columns.

Planning costs Arrow kernels over the file columns plus Python work per *distinct* partition
value and per deletion vector, never per file:

* local paths: the table root joined to the log's relative paths (percent-decoding only for the
  paths that have escapes, and absolute paths);
* partition columns: when every file lies in the hive-style directory its partition values name
  (``col=escaped value/...``, as delta-spark and most writers lay files out) and the columns'
  types cast from those strings exactly as the log's values parse, Spark's reader supplies them
  itself from the paths (``basePath``); filters on them then prune files in Spark's own scan.
  Otherwise (column mapping, other layouts, timestamp/decimal/float/binary columns) a table of
  typed values per file is joined on ``_metadata.file_path``;
* deletion vectors: each file's descriptor (one row per file that has one), keyed by the file's
  ``_metadata.file_path``; the vectors themselves are read only when asked
  (:func:`deleted_rows`), so the inputs stay in proportion to the files, never to the deleted
  rows (a DELETE of millions of rows leaves millions of row indexes in its vectors).

The inputs of a whole snapshot are cached per snapshot (an immutable table version).
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.partition_values import parse_partition_value, typed_partition_values
from deltalog.paths import resolve
from deltalog.schema import PrimitiveType
from deltalog.storage import is_remote

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

FILE, ROW = "__deltalog_file", "__deltalog_row"
# With ``FILE`` and ``ROW``: whether the task that read the row read its whole file (Spark splits
# large files between tasks).
WHOLE = "__deltalog_whole_file"
# The column of ``ScanInputs.deletion_vectors`` holding each file's descriptor (the log's struct).
VECTOR = "deletionVector"
# Spark's file source globs these, and Hadoop's Path cannot take ':' inside a name.
UNREADABLE = r"[*?\[\]{}\\:]"
# Partition column types whose hive directory strings Spark casts to the values the log's
# strings parse to (timestamps, decimals, floats and binary differ in zone or formatting).
PATH_TYPES = frozenset({"string", "byte", "short", "integer", "long", "boolean", "date"})
HIVE_DEFAULT = "__HIVE_DEFAULT_PARTITION__"
# Hive's escapePathName set (Spark's ExternalCatalogUtils.charToEscape, outside Windows).
_ESCAPED = frozenset([chr(c) for c in range(1, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
# java.net.URI leaves these ASCII characters of a path unquoted (and all printable non-ASCII).
_URI_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-!.~'()*,;:$&+=/@"
)

_NOT_URI_SAFE = r"[^A-Za-z0-9_\-!.~'()*,;:$&+=/@]"


@dataclasses.dataclass(frozen=True, slots=True)
class ScanInputs:
    """The scan of some files: ``paths`` (local, in file order), whether partition columns
    come from the paths (``base_path`` is then the table root), the typed partition values to
    join otherwise (``FILE`` + one column per partition column), and, when any file has a
    deletion vector, ``deletion_vectors``: one row per such file, ``FILE`` and :data:`VECTOR`
    (its descriptor as in the log: ``storageType``, ``pathOrInlineDv``, ``offset``,
    ``sizeInBytes``, ``cardinality``). Every part is in proportion to the files."""

    paths: pa.Array
    base_path: str | None
    partition_values: pa.Table | None
    deletion_vectors: pa.Table | None

    @property
    def deleted_row_count(self) -> int:
        """The rows the deletion vectors delete, by the descriptors' cardinalities."""
        if self.deletion_vectors is None:
            return 0
        cardinality = pc.struct_field(self.deletion_vectors[VECTOR], "cardinality")
        return int(pc.sum(cardinality).as_py() or 0)


_CACHE: weakref.WeakKeyDictionary[Snapshot, ScanInputs] = weakref.WeakKeyDictionary()


def snapshot_inputs(snapshot: Snapshot, store: LogStore) -> ScanInputs:
    """:func:`scan_inputs` of all of ``snapshot``'s files, computed once per snapshot."""
    cached = _CACHE.get(snapshot)
    if cached is None:
        cached = scan_inputs(snapshot, store, snapshot.all_files_arrow())
        _CACHE[snapshot] = cached
    return cached


def scan_inputs(snapshot: Snapshot, store: LogStore, files: pa.Table) -> ScanInputs:
    """The :class:`ScanInputs` of ``files`` (rows of ``snapshot.all_files_arrow()``).

    Raises:
        InvalidTableError: a partition value does not parse as its column's type.
    """
    root = snapshot.table_root
    paths = local_paths(root, files["path"])
    from_paths = partitions_from_paths(snapshot, files, paths)
    values = None
    if snapshot.partition_columns and not from_paths:
        values = _partition_values(snapshot, files, paths)
    vectors = _deletion_vectors(files, paths)
    if is_remote(root):  # the JVM reader (with a Hadoop connector) wants Hadoop's names
        paths, root = hadoop_names(paths), hadoop_names(pa.array([root])).to_pylist()[0]
    return ScanInputs(paths, root if from_paths else None, values, vectors)


def hadoop_names(paths: pa.Array) -> pa.Array:
    """Object-store URIs as Hadoop names them for Spark's reader (``s3://`` is ``s3a://``)."""
    return pc.replace_substring_regex(paths, "^s3://", "s3a://")


def local_paths(root: str, paths: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The local path of each log path (relative to ``root``, or absolute)."""
    paths = _array(paths)
    special = pc.or_(
        pc.match_substring(paths, "%"),
        pc.or_(pc.starts_with(paths, "/"), pc.starts_with(paths, "file:")),
    )
    if not pc.any(special).as_py():
        return pc.binary_join_element_wise(root, paths, "/")
    return pa.array([resolve(root, p) for p in paths.to_pylist()], pa.string())


def jvm_readable(paths: pa.ChunkedArray | pa.Array) -> bool:
    """Whether Spark's file source can read every path as given (an object store's scheme
    aside)."""
    names = pc.replace_substring_regex(_array(paths), "^[A-Za-z][A-Za-z0-9+.-]*://", "")
    return not pc.any(pc.match_substring_regex(names, UNREADABLE)).as_py()


def spark_file_uris(paths: pa.Array) -> pa.Array:
    """Each local path's ``_metadata.file_path`` (Spark derives it with Hadoop ``Path.toUri``);
    object-store URIs are reported by their Hadoop names."""
    if len(paths) and is_remote(str(paths[0].as_py())):
        return hadoop_names(paths)
    if not pc.any(pc.match_substring_regex(paths, _NOT_URI_SAFE)).as_py():
        return pc.binary_join_element_wise("file:", paths, "")
    return pa.array([spark_file_uri(p) for p in paths.to_pylist()], pa.string())


def spark_file_uri(local_path: str) -> str:
    """The ``_metadata.file_path`` Spark reports for a local file read by its plain path."""
    out: list[str] = []
    for ch in local_path:
        if ch in _URI_SAFE or (ord(ch) > 127 and ch.isprintable() and not ch.isspace()):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "file:" + "".join(out)


def partitions_from_paths(snapshot: Snapshot, files: pa.Table, paths: pa.Array) -> bool:
    """Whether Spark's reader can take the partition columns from the paths (see the module
    docstring); validates the distinct values of each partition column on the way.

    Raises:
        InvalidTableError: a partition value does not parse as its column's type.
    """
    columns = snapshot.partition_columns
    if not columns or snapshot.column_mapping_mode != "none" or files.num_rows == 0:
        return False
    fields = {f.name: f for f in snapshot.schema.fields}
    parts: list[pa.Scalar | pa.Array] = [pa.scalar(snapshot.table_root.rstrip("/") + "/")]
    for i, name in enumerate(columns):
        field = fields.get(name)
        if field is None or not isinstance(field.type, PrimitiveType):
            return False
        if field.type.name not in PATH_TYPES:
            return False
        raw = pc.map_lookup(files["partitionValues"], name, "first")
        encoded = _array(raw).dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        for value in distinct:
            _check_value(snapshot, field.name, field.type, value)
        escaped = pa.array([_escape(v) for v in distinct], pa.string())
        has_null = encoded.indices.null_count > 0
        segment = pc.take(escaped, pc.fill_null(encoded.indices, 0)) if distinct else None
        if has_null or segment is None:
            default = pa.array([HIVE_DEFAULT] * len(encoded), pa.string())
            segment = (
                default
                if segment is None
                else pc.if_else(pc.is_null(encoded.indices), default, segment)
            )
        parts.extend([pa.scalar(("/" if i else "") + name + "="), segment])
    expected = pc.binary_join_element_wise(*parts, "")
    directories = pc.replace_substring_regex(paths, "/[^/]*$", "")
    return bool(pc.all(pc.equal(directories, expected)).as_py())


def _check_value(snapshot: Snapshot, name: str, data_type: PrimitiveType, raw: str | None) -> None:
    try:
        parse_partition_value(raw, data_type)
    except ValueError as e:
        raise errors.InvalidTableError(
            "DELTA_INVALID_PARTITION_VALUE",
            f"a partition value of column {name} does not parse as {data_type}: {e}.",
            table=snapshot.table_root,
        ) from None


def _escape(value: str | None) -> str:
    """The hive directory name of one partition value (``escapePathName``; null and empty
    are the default partition)."""
    if value is None or value == "":
        return HIVE_DEFAULT
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _partition_values(snapshot: Snapshot, files: pa.Table, paths: pa.Array) -> pa.Table:
    raw = [dict(pv or []) for pv in files["partitionValues"].to_pylist()]
    columns: dict[str, pa.Array] = {FILE: spark_file_uris(paths)}
    columns.update(
        typed_partition_values(
            snapshot.schema,
            snapshot.partition_columns,
            raw,
            column_mapping=snapshot.column_mapping_mode != "none",
            table_root=snapshot.table_root,
        )
    )
    return pa.table(columns)


def _deletion_vectors(files: pa.Table, paths: pa.Array) -> pa.Table | None:
    """``FILE`` and :data:`VECTOR` of the files of ``files`` that have a deletion vector."""
    column = _array(files[VECTOR])
    if column.null_count == len(column):
        return None
    with_dv = pc.is_valid(column)
    keys = spark_file_uris(pc.filter(paths, with_dv))
    return pa.table({FILE: keys, VECTOR: pc.filter(column, with_dv)})


def deleted_rows(table_root: str, store: LogStore, vectors: pa.Table) -> pa.Table:
    """Every row the ``vectors`` (a ``ScanInputs.deletion_vectors`` table) delete, as ``FILE``
    and ``ROW`` (``int64``) pairs: one Arrow row per deleted row, so callers bound the total
    first (``ScanInputs.deleted_row_count``).

    Raises:
        InvalidTableError: a vector's file is missing or does not match its descriptor.
    """
    rows: list[np.ndarray] = []
    for dv in vectors[VECTOR].to_pylist():
        descriptor = DeletionVectorDescriptor.from_dict(dv)
        rows.append(read_deletion_vector(store, table_root, descriptor).astype(np.int64))
    counts = np.array([len(r) for r in rows], dtype=np.int64)
    files = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    keys = pc.take(_array(vectors[FILE]), pa.array(files))
    flat = np.concatenate(rows) if rows else np.empty(0, np.int64)
    return pa.table({FILE: keys, ROW: pa.array(flat)})


def _array(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    return values
