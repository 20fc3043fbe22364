"""Reading a snapshot's rows as a Spark DataFrame with Spark's own parquet reader.

The file list comes from the snapshot, never from a directory listing; files are passed as
decoded local paths (no listing job: the discovery threshold is raised). What the parquet files
do not hold is joined in by file:

* partition values, typed from the schema (PROTOCOL.md "Partition Value Serialization");
* deleted rows: each file's deletion vector, as (file, row index) pairs, removed by an anti-join
  on ``_metadata.row_index``;
* column mapping: data is read by physical name (``name``) or parquet field id (``id``) and
  renamed to logical names (nested fields too) by a struct cast.

The join key is ``_metadata.file_path``, which Spark derives from the path through Hadoop's
``Path.toUri``; :func:`spark_file_uri` reproduces it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.partition_values import typed_partition_values
from deltalog.paths import resolve
from deltalog.schema import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
)
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import conf_get, ensure_no_listing_job, is_connect, reader
from deltalog.spark.storage import jvm_reads, read_through_seam
from deltalog.storage import is_remote

if TYPE_CHECKING:
    from deltalog.snapshot import Snapshot
    from deltalog.storage.base import LogStore

FILE, ROW = "__deltalog_file", "__deltalog_row"
FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"
# java.net.URI leaves these ASCII characters of a path unquoted (and all printable non-ASCII).
_URI_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-!.~'()*,;:$&+=/@"
)
_PLAIN_PATH = re.compile("[" + re.escape("".join(sorted(_URI_SAFE))) + "]*")
# Spark's file source globs these, and Hadoop's Path cannot take ':' inside a name.
_UNREADABLE = frozenset("*?[]{}\\:")


def spark_file_uri(local_path: str) -> str:
    """The ``_metadata.file_path`` Spark reports for a local file read by its plain path (an
    object-store URI as Hadoop names it: ``s3://`` is ``s3a://``)."""
    if local_path.startswith("s3://"):
        return "s3a://" + local_path[len("s3://") :]
    if is_remote(local_path):
        return local_path
    if _PLAIN_PATH.fullmatch(local_path):
        return "file:" + local_path
    out: list[str] = []
    for ch in local_path:
        if ch in _URI_SAFE or (ord(ch) > 127 and ch.isprintable() and not ch.isspace()):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "file:" + "".join(out)


def read_snapshot(spark: Any, snapshot: Snapshot, store: LogStore, where: str | None = None) -> Any:
    """The rows of ``snapshot`` as a DataFrame with the table's logical schema.

    ``where`` is a SQL filter: files it rules out by partition values or statistics are not
    read at all (:mod:`deltalog.data_skipping`), and the filter is applied to the rows read.

    Raises:
        InvalidTableError: a data file named in the log is missing.
        UnsupportedFeatureError: a file path Spark's file source cannot read as given.
    """
    if not jvm_reads(spark, snapshot.table_root):  # an object store without its Hadoop jars
        df = read_through_seam(spark, snapshot.table_root, snapshot.version)
        return df.where(where) if where else df
    _check_spark_supports(spark, snapshot)
    files = scan_files(spark, snapshot, where)
    df = scan_dataframe(spark, snapshot, store, files)
    return df.where(where) if where else df


def file_keys(snapshot: Snapshot, files: pa.Table) -> list[str]:
    """Each file's ``_metadata.file_path`` as Spark reports it (the join key of row ids)."""
    return [spark_file_uri(resolve(snapshot.table_root, p)) for p in files["path"].to_pylist()]


def scan_dataframe(
    spark: Any, snapshot: Snapshot, store: LogStore, files: pa.Table, *, row_ids: bool = False
) -> Any:
    """The live rows of ``files`` (rows of ``all_files_arrow()``) with the table's logical
    columns; with ``row_ids``, also :data:`FILE` (the :func:`file_keys` value of each row's
    file) and :data:`ROW` (its physical row index), which deletion vectors are made of.

    Raises:
        InvalidTableError: a data file named in the log is missing.
        UnsupportedFeatureError: a file path Spark's file source cannot read as given.
    """
    schema = snapshot.schema
    mode = snapshot.column_mapping_mode
    partition_names = {c.lower() for c in snapshot.partition_columns}
    data_fields = [f for f in schema.fields if f.name.lower() not in partition_names]
    logical = to_spark_schema(schema)
    if files.num_rows == 0:
        empty = spark.createDataFrame([], logical)
        if row_ids:
            from pyspark.sql import functions as F

            empty = empty.select(
                "*", F.lit(None).cast("string").alias(FILE), F.lit(None).cast("long").alias(ROW)
            )
        return empty
    paths = [resolve(snapshot.table_root, p) for p in files["path"].to_pylist()]
    if is_remote(snapshot.table_root):  # Hadoop's names for the JVM reader (s3:// is s3a://)
        paths = [spark_file_uri(p) for p in paths]
    _check_readable(snapshot.table_root, paths)
    ensure_no_listing_job(spark)
    if mode == "id":
        spark.conf.set(FIELD_ID_READ, "true")
    read_schema = to_spark_schema(StructType(tuple(physical_field(f, mode) for f in data_fields)))
    df = read_files_or_raise(spark, read_schema, paths, snapshot.table_root, store)
    df = df.select("*", df["_metadata.file_path"].alias(FILE), df["_metadata.row_index"].alias(ROW))
    keys = [spark_file_uri(p) for p in paths]
    deleted = _deleted_rows(snapshot, store, files, keys)
    if deleted is not None:
        from pyspark.sql import functions as F

        df = df.join(F.broadcast(arrow_to_df(spark, deleted)), on=[FILE, ROW], how="left_anti")
    if partition_names:
        from pyspark.sql import functions as F

        values = _partition_values(snapshot, files, keys, mode)
        df = df.join(F.broadcast(arrow_to_df(spark, values)), on=FILE, how="inner")
    extra = [df[FILE], df[ROW]] if row_ids else []
    return df.select(*logical_columns(df, schema, partition_names, mode), *extra)


def logical_columns(df: Any, schema: StructType, partition_names: set[str], mode: str) -> list[Any]:
    """The table's columns of ``df`` under their logical names, in schema order (data columns
    are read by physical name; partition columns are already logical)."""
    columns = []
    for f, spark_field in zip(schema.fields, to_spark_schema(schema).fields, strict=True):
        if f.name.lower() in partition_names or mode == "none":
            columns.append(df[f.name])
        else:
            # A struct cast renames nested physical fields to logical ones, by position.
            target = nullable_type(spark_field.dataType)
            columns.append(df[f.physical_name].cast(target).alias(f.name))
    return columns


def scan_files(spark: Any, snapshot: Snapshot, where: str | None) -> pa.Table:
    """The snapshot's live files that may hold rows matching ``where`` (all when ``None``)."""
    if not where:
        return snapshot.all_files_arrow()
    zone = conf_get(spark, "spark.sql.session.timeZone", "UTC")
    return snapshot.files_for_filter(where, time_zone=zone)


def read_parquet_files(spark: Any, schema: Any, paths: list[str]) -> Any:
    """Spark's parquet reader over exactly ``paths``.

    On a classic session the list crosses py4j as one string split in the JVM: PySpark's own
    conversion makes one gateway round trip per path (seconds for 10k files).
    """
    if is_connect(spark) or any("\n" in p or "\r" in p for p in paths):
        return reader(spark).schema(schema).parquet(*paths)
    from pyspark.sql import DataFrame

    jvm = spark.sparkContext._jvm
    seq = jvm.scala.io.Source.fromString("\n".join(paths)).getLines().toList()
    jreader = reader(spark).schema(schema)._jreader
    return DataFrame(jreader.parquet(seq), spark)


def nullable_type(t: Any) -> Any:
    """``t`` with every nested field, element and value nullable (a cast target Spark accepts)."""
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        return T.StructType(
            [T.StructField(f.name, nullable_type(f.dataType), True) for f in t.fields]
        )
    if isinstance(t, T.ArrayType):
        return T.ArrayType(nullable_type(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(nullable_type(t.keyType), nullable_type(t.valueType), True)
    return t


def _check_spark_supports(spark: Any, snapshot: Snapshot) -> None:
    """Spark's parquet reader widens types (int to long, float to double, decimals, date to
    timestamp_ntz) only from Spark 4.0; refuse earlier rather than fail inside a job."""
    widening = {"typeWidening", "typeWidening-preview"} & set(
        snapshot.protocol.reader_features or ()
    )
    if widening and int(str(spark.version).split(".")[0]) < 4:
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
            f"reading a table with {sorted(widening)[0]} needs Spark 4.0 or newer "
            f"(this is Spark {spark.version}).",
            table=snapshot.table_root,
            help="use Spark 4.0+.",
            features=widening,
        )


def physical_field(field: StructField, mode: str) -> StructField:
    """``field`` as stored in parquet: physical names (and field ids in ``id`` mode), nested."""
    if mode == "none":
        return field
    metadata: dict[str, Any] = {}
    if mode == "id" and "delta.columnMapping.id" in field.metadata:
        metadata["parquet.field.id"] = int(field.metadata["delta.columnMapping.id"])
    return StructField(
        field.physical_name, _physical_type(field.type, mode), field.nullable, metadata
    )


def _physical_type(t: DataType, mode: str) -> DataType:
    if isinstance(t, StructType):
        return StructType(tuple(physical_field(f, mode) for f in t.fields))
    if isinstance(t, ArrayType):
        return ArrayType(_physical_type(t.element_type, mode), t.contains_null)
    if isinstance(t, MapType):
        return MapType(
            _physical_type(t.key_type, mode),
            _physical_type(t.value_type, mode),
            t.value_contains_null,
        )
    return t


def _check_readable(table_root: str, paths: list[str]) -> None:
    for path in paths:
        name = path.partition("://")[2] if is_remote(path) else path
        if any(ch in _UNREADABLE for ch in name):
            raise errors.UnsupportedFeatureError(
                "DELTA_UNREADABLE_FILE_PATH",
                f"data file {path} has a character Spark's file source cannot read by path.",
                table=table_root,
            )


def read_files_or_raise(
    spark: Any, schema: Any, paths: list[str], table_root: str, store: LogStore
) -> Any:
    """:func:`read_parquet_files`, with a missing file reported as a typed error naming it.

    Spark checks every path while planning (it stats them anyway); only when it fails are the
    paths checked here, to name the missing one.

    Raises:
        InvalidTableError: a data file named in the log does not exist (DELTA_FILE_NOT_FOUND).
    """
    try:
        return read_parquet_files(spark, schema, paths)
    except Exception as e:
        missing = next((p for p in paths if not store.exists(p)), None)
        if missing is None:
            raise
        raise errors.InvalidTableError(
            "DELTA_FILE_NOT_FOUND",
            f"data file {missing}, named in the log, does not exist.",
            table=table_root,
            help="restore the file, or repair the table (FSCK) to drop it from the log.",
        ) from e


def _deleted_rows(
    snapshot: Snapshot, store: LogStore, files: pa.Table, keys: list[str]
) -> pa.Table | None:
    column = files["deletionVector"]
    if column.null_count == len(column):
        return None
    file_keys: list[pa.Array] = []
    rows: list[pa.Array] = []
    for key, dv in zip(keys, column.to_pylist(), strict=True):
        if dv is None:
            continue
        descriptor = DeletionVectorDescriptor.from_dict(dv)
        deleted = read_deletion_vector(store, snapshot.table_root, descriptor)
        rows.append(pa.array(deleted.astype("int64")))
        file_keys.append(pa.array([key] * len(deleted), pa.string()))
    return pa.table({FILE: pa.concat_arrays(file_keys), ROW: pa.concat_arrays(rows)})


def _partition_values(snapshot: Snapshot, files: pa.Table, keys: list[str], mode: str) -> pa.Table:
    raw = [dict(pv or []) for pv in files["partitionValues"].to_pylist()]
    columns: dict[str, pa.Array] = {FILE: pa.array(keys, pa.string())}
    columns.update(
        typed_partition_values(
            snapshot.schema,
            snapshot.partition_columns,
            raw,
            column_mapping=mode != "none",
            table_root=snapshot.table_root,
        )
    )
    return pa.table(columns)


def arrow_to_df(spark: Any, table: pa.Table) -> Any:
    """A small Arrow table as a DataFrame (Arrow directly on Spark 4; rows on 3.5, because a
    pandas round trip would turn null numbers into NaN)."""
    try:
        return spark.createDataFrame(table)
    except (TypeError, ValueError):
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame(table.to_pylist(), from_arrow_schema(table.schema))
