"""Reading a snapshot's rows as a Spark DataFrame with Spark's own parquet reader.

The file list comes from the snapshot, never from a directory listing; files are passed as
decoded local paths (no listing job: the discovery threshold is raised), built from the
snapshot's Arrow state and cached per snapshot (:mod:`deltalog.scan.plan`). What the
parquet files do not hold comes from their paths or is joined in by file:

* partition values: from hive-style directories by Spark's reader itself (so filters on them
  prune files), else typed from the schema (PROTOCOL.md "Partition Value Serialization") and
  joined;
* deleted rows: each file's deletion vector, as (file, row index) pairs, removed by an anti-join
  on ``_metadata.row_index``;
* column mapping: data is read by physical name (``name``) or parquet field id (``id``) and
  renamed to logical names (nested fields too) by a struct cast.

The join key is ``_metadata.file_path``, which Spark derives from the path through Hadoop's
``Path.toUri``; :func:`spark_file_uri` reproduces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.scan.plan import (
    FILE,
    ROW,
    UNREADABLE,
    ScanInputs,
    jvm_readable,
    local_paths,
    scan_inputs,
    snapshot_inputs,
    spark_file_uri,  # noqa: F401  (re-exported: the scan's join key)
    spark_file_uris,
)
from deltalog.schema import StructField, StructType, map_fields
from deltalog.schema import (
    read_schema as visible_schema,
)
from deltalog.spark.read.listed import listed_read
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import conf_get, ensure_no_listing_job, is_connect, reader, session_conf
from deltalog.spark.storage import jvm_reads, note_path, read_through_seam

if TYPE_CHECKING:
    from deltalog.snapshot import Snapshot
    from deltalog.storage.base import LogStore

FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"


def read_snapshot(spark: Any, snapshot: Snapshot, store: LogStore, where: str | None = None) -> Any:
    """The rows of ``snapshot`` as a DataFrame with the table's logical schema.

    ``where`` is a SQL filter: files it rules out by partition values or statistics are not
    read at all (:mod:`deltalog.scan.skipping`), and the filter is applied to the rows read.
    Filters applied to the result skip files the same way (:mod:`deltalog.spark.patches.pushdown`).

    Raises:
        InvalidTableError: a data file named in the log is missing.
        UnsupportedFeatureError: a file path Spark's file source cannot read as given.
    """
    if not jvm_reads(spark, snapshot.table_root):  # an object store without its Hadoop jars
        df = read_through_seam(spark, snapshot.table_root, snapshot.version)
        return df.where(where) if where else df
    from deltalog.spark.patches.pushdown import DeltaRead, tag, tag_filtered

    _check_spark_supports(spark, snapshot)
    if not where:
        inputs = snapshot_inputs(snapshot, store)
        df = scan_dataframe(spark, snapshot, store, None, inputs=inputs)
        return tag(df, DeltaRead(snapshot, store))
    files = scan_files(spark, snapshot, where)
    return tag_filtered(
        scan_dataframe(spark, snapshot, store, files), where, DeltaRead(snapshot, store)
    )


def file_keys(snapshot: Snapshot, files: pa.Table) -> list[str]:
    """Each file's ``_metadata.file_path`` as Spark reports it (the join key of row ids)."""
    paths = local_paths(snapshot.table_root, files["path"])
    return [str(k) for k in spark_file_uris(paths).to_pylist()]


def scan_dataframe(
    spark: Any,
    snapshot: Snapshot,
    store: LogStore,
    files: pa.Table | None,
    *,
    row_ids: bool = False,
    inputs: ScanInputs | None = None,
) -> Any:
    """The live rows of ``files`` (rows of ``all_files_arrow()``; or those ``inputs`` were
    built from) with the table's logical columns; with ``row_ids``, also :data:`FILE` (the
    :func:`file_keys` value of each row's file) and :data:`ROW` (its physical row index),
    which deletion vectors are made of.

    On an object store the session's JVM cannot reach (no Hadoop connector), the files are
    read in Python tasks through the storage seam instead (:mod:`deltalog.spark.read.seam_scan`),
    with the same columns.

    Raises:
        InvalidTableError: a data file named in the log is missing.
        UnsupportedFeatureError: a file path Spark's file source cannot read as given.
    """
    if not jvm_reads(spark, snapshot.table_root):  # an object store without its Hadoop jars
        from deltalog.spark.read.seam_scan import seam_dataframe

        assert files is not None, "the storage seam's scan reads given files"
        return seam_dataframe(spark, snapshot, files, row_ids=row_ids)
    note_path(snapshot.table_root, "scan", jvm=True)
    if inputs is None:
        assert files is not None, "scan_dataframe needs files or inputs"
        inputs = scan_inputs(snapshot, store, files)
    schema = snapshot.schema
    mode = snapshot.column_mapping_mode
    partition_names = {c.lower() for c in snapshot.partition_columns}
    logical = to_spark_schema(visible_schema(schema))
    if len(inputs.paths) == 0:
        empty = spark.createDataFrame([], logical)
        if row_ids:
            from pyspark.sql import functions as F

            empty = empty.select(
                "*", F.lit(None).cast("string").alias(FILE), F.lit(None).cast("long").alias(ROW)
            )
        return empty
    check_readable(snapshot.table_root, inputs.paths)
    ensure_no_listing_job(spark)
    if mode == "id":
        spark.conf.set(FIELD_ID_READ, "true")
    from_paths = inputs.base_path is not None
    read_fields = [
        physical_field(f, mode)
        for f in schema.fields
        if from_paths or f.name.lower() not in partition_names
    ]
    read_schema = to_spark_schema(StructType(tuple(read_fields)))
    df = listed_read(spark, read_schema, inputs.paths, inputs.base_path)
    if df is None:
        df = read_files_or_raise(
            spark, read_schema, inputs.paths, snapshot.table_root, store, base_path=inputs.base_path
        )
    # Only where needed: a relation with ``_metadata`` in its output reads every metadata
    # field, the row index included, whatever the query then keeps.
    if row_ids or inputs.deleted is not None or inputs.partition_values is not None:
        file_path, row_index = df["_metadata.file_path"], df["_metadata.row_index"]
        df = df.select("*", file_path.alias(FILE), row_index.alias(ROW))
    if inputs.deleted is not None:
        from pyspark.sql import functions as F

        deleted = arrow_to_df(spark, inputs.deleted)
        df = df.join(F.broadcast(deleted), on=[FILE, ROW], how="left_anti")
    if inputs.partition_values is not None:
        from pyspark.sql import functions as F

        values = arrow_to_df(spark, inputs.partition_values)
        df = df.join(F.broadcast(values), on=FILE, how="inner")
    extra = [df[FILE], df[ROW]] if row_ids else []
    return df.select(*logical_columns(df, schema, partition_names, mode), *extra)


def logical_columns(df: Any, schema: StructType, partition_names: set[str], mode: str) -> list[Any]:
    """The table's columns of ``df`` under their logical names, in schema order (data columns
    are read by physical name; partition columns are already logical)."""
    columns = []
    for f, spark_field in zip(
        schema.fields, to_spark_schema(visible_schema(schema)).fields, strict=True
    ):
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


def read_parquet_files(
    spark: Any, schema: Any, paths: Sequence[str] | pa.Array, base_path: str | None = None
) -> Any:
    """Spark's parquet reader over exactly ``paths`` (partition columns from the directories
    under ``base_path`` when given: ``schema`` then names them too).

    On a classic session the list crosses py4j as one string split in the JVM: PySpark's own
    conversion makes one gateway round trip per path (seconds for 10k files).
    """
    read = reader(spark).schema(schema)
    if base_path is not None:
        read = read.option("basePath", base_path)
    joined = newline_joined(paths)
    if is_connect(spark) or joined is None:
        listed = paths.to_pylist() if isinstance(paths, pa.Array) else list(paths)
        return read.parquet(*listed)
    from pyspark.sql import DataFrame

    jvm = spark.sparkContext._jvm
    seq = jvm.scala.io.Source.fromString(joined).getLines().toList()
    return DataFrame(read._jreader.parquet(seq), spark)


def newline_joined(paths: Sequence[str] | pa.Array) -> str | None:
    """The paths joined by newlines (``None`` when a path has a line break)."""
    if not isinstance(paths, pa.Array):
        paths = pa.array(list(paths), pa.string())
    if pc.any(pc.match_substring_regex(paths, "[\\r\\n]")).as_py():
        return None
    whole = pa.ListArray.from_arrays(pa.array([0, len(paths)], pa.int32()), paths)
    return str(pc.binary_join(whole, "\n")[0].as_py())


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

    def stored(f: StructField) -> StructField:
        metadata: dict[str, Any] = {}
        if mode == "id" and "delta.columnMapping.id" in f.metadata:
            metadata["parquet.field.id"] = int(f.metadata["delta.columnMapping.id"])
        return StructField(f.physical_name, f.type, f.nullable, metadata)

    return map_fields(StructType((field,)), stored).fields[0]


def check_readable(table_root: str, paths: pa.Array) -> None:
    """Raise when Spark's file source cannot read a path as given (the Python data source
    can: ``spark.read.format("delta")`` falls back to it).

    Raises:
        UnsupportedFeatureError: a path with a glob character or ``:`` (DELTA_UNREADABLE_FILE_PATH).
    """
    if jvm_readable(paths):
        return
    import re

    path = next(p for p in paths.to_pylist() if re.search(UNREADABLE, p))
    raise errors.UnsupportedFeatureError(
        "DELTA_UNREADABLE_FILE_PATH",
        f"data file {path} has a character Spark's file source cannot read by path.",
        table=table_root,
        help='read it with spark.read.format("delta").load(path), which can.',
    )


def read_files_or_raise(
    spark: Any,
    schema: Any,
    paths: Sequence[str] | pa.Array,
    table_root: str,
    store: LogStore,
    *,
    base_path: str | None = None,
) -> Any:
    """:func:`read_parquet_files`, with a missing file reported as a typed error naming it.

    Spark checks every path while planning (it stats them anyway); only when it fails are the
    paths checked here, to name the missing one.

    Raises:
        InvalidTableError: a data file named in the log does not exist (DELTA_FILE_NOT_FOUND).
    """
    try:
        return read_parquet_files(spark, schema, paths, base_path)
    except Exception as e:
        listed = paths.to_pylist() if isinstance(paths, pa.Array) else paths
        missing = next((p for p in listed if not store.exists(p)), None)
        if missing is None:
            raise
        raise errors.InvalidTableError(
            "DELTA_FILE_NOT_FOUND",
            f"data file {missing}, named in the log, does not exist.",
            table=table_root,
            help="restore the file, or repair the table (FSCK) to drop it from the log.",
        ) from e


def arrow_to_df(spark: Any, table: pa.Table, *, local: bool = True) -> Any:
    """A small Arrow table as a DataFrame (Arrow directly on Spark 4; rows on 3.5, because a
    pandas round trip would turn null numbers into NaN).

    ``local=False`` (classic sessions): the rows become an RDD rather than a ``LocalRelation``.
    Every analysis of a plan holding a ``LocalRelation`` costs in proportion to its rows
    (measured: 100k rows joined into a plan built with a few ``withColumn``, 0.1-0.3 s against
    0.05 s), so tables of many rows that later plans build on take this form.
    """
    if not local and getattr(spark, "_jsparkSession", None) is not None:
        with session_conf(spark, "spark.sql.execution.arrow.localRelationThreshold", "0"):
            return arrow_to_df(spark, table)
    try:
        return spark.createDataFrame(table)
    except (TypeError, ValueError):
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame(table.to_pylist(), from_arrow_schema(table.schema))
