"""Reading a snapshot's rows as a Spark DataFrame with Spark's own parquet reader.

The file list comes from the snapshot, never from a directory listing; files are passed as
decoded local paths (on a classic session without a listing job: see
:func:`~deltalog.spark.read.common.read_parquet_files`), built from the
snapshot's Arrow state and cached per snapshot (:mod:`deltalog.scan.plan`). What the
parquet files do not hold comes from their paths or is joined in by file:

* partition values: from hive-style directories by Spark's reader itself (so filters on them
  prune files), else typed from the schema (PROTOCOL.md "Partition Value Serialization") and
  joined;
* deleted rows: each file's deletion vector, matched on ``_metadata.row_index``: pairs read on
  the driver and anti-joined when few, applied in the executors otherwise
  (:mod:`~deltalog.spark.read.deletion_vectors`);
* column mapping: data is read by physical name (``name``) or parquet field id (``id``; on
  Spark Connect through the storage seam, :func:`through_seam`) and renamed to logical names
  (nested fields too) by a struct cast.

The join key is ``_metadata.file_path``, which Spark derives from the path through Hadoop's
``Path.toUri``; :func:`spark_file_uri` reproduces it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deltalog import errors
from deltalog.scan.plan import (
    UNREADABLE,
    ScanInputs,
    jvm_readable,
    scan_inputs,
    snapshot_inputs,
    spark_file_uri,  # noqa: F401  (re-exported: the scan's join key)
)
from deltalog.schema import PrimitiveType, StructField, StructType, explode, map_fields
from deltalog.schema import (
    read_schema as visible_schema,
)
from deltalog.spark.read.common import FILE, ROW, WHOLE, read_files_or_raise
from deltalog.spark.read.deletion_vectors import drop_deleted_rows
from deltalog.spark.read.delta_read import DeltaRead, tag, tag_filtered
from deltalog.spark.read.listed import listed_read
from deltalog.spark.read.seam_scan import read_through_seam, seam_dataframe
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import (
    arrow_to_df,
    empty_frame,
    is_connect,
    session_time_zone_id,
)
from deltalog.spark.storage import jvm_reads, note_path
from deltalog.write.type_widening import TYPE_CHANGES_KEY

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore


def read_snapshot(spark: Any, snapshot: Snapshot, store: LogStore, where: str | None = None) -> Any:
    """The rows of ``snapshot`` as a DataFrame with the table's logical schema.

    ``where`` is a SQL filter: files it rules out by partition values or statistics are not
    read at all (:mod:`deltalog.scan.skipping`), and the filter is applied to the rows read.
    The result is tagged (:mod:`~deltalog.spark.read.delta_read`): filters applied to it skip
    files the same way where the entry point installed :mod:`deltalog.spark.read.pushdown`.

    Raises:
        InvalidTableError: a data file named in the log is missing.
        UnsupportedFeatureError: a file path Spark's file source cannot read as given.
    """
    if not jvm_reads(spark, snapshot.table_root):  # an object store without its Hadoop jars
        df = read_through_seam(spark, snapshot.table_root, snapshot.version)
        return df.where(where) if where else df
    if not where:
        inputs = snapshot_inputs(snapshot, store)
        df = scan_dataframe(spark, snapshot, store, None, inputs=inputs)
        return tag(df, DeltaRead(snapshot, store))
    files = scan_files(spark, snapshot, where)
    return tag_filtered(
        scan_dataframe(spark, snapshot, store, files), where, DeltaRead(snapshot, store)
    )


def scan_dataframe(
    spark: Any,
    snapshot: Snapshot,
    store: LogStore,
    files: pa.Table | None,
    *,
    row_ids: bool = False,
    whole: bool = False,
    inputs: ScanInputs | None = None,
    carried: tuple[str, ...] = (),
) -> Any:
    """The live rows of ``files`` (rows of ``all_files_arrow()``; or those ``inputs`` were
    built from) with the table's logical columns; with ``row_ids``, also :data:`FILE` (the
    :func:`~deltalog.spark.read.common.file_keys` value of each row's file) and :data:`ROW`
    (its physical row index), which deletion vectors are made of; with ``whole`` too,
    :data:`WHOLE` (whether the task reading the row reads all of its file: Spark splits a
    large file between tasks); ``carried`` names ``long`` parquet columns outside the schema
    to read too, null in files without them (row tracking's materialized columns).

    On an object store the session's JVM cannot reach (no Hadoop connector), the files are
    read in Python tasks through the storage seam instead (:mod:`deltalog.spark.read.seam_scan`),
    with the same columns.

    Raises:
        InvalidTableError: a data file named in the log is missing.
        UnsupportedFeatureError: a file path Spark's file source cannot read as given.
    """
    if through_seam(spark, snapshot):
        if files is None:  # ``inputs`` alone: the whole snapshot's
            files = snapshot.all_files_arrow()
        df = seam_dataframe(spark, snapshot, files, row_ids=row_ids)
        return df.withColumn(WHOLE, F.lit(True)) if whole else df  # a task reads whole files
    check_spark_reads(spark, snapshot)
    note_path(snapshot.table_root, "scan", jvm=True)
    if inputs is None:
        assert files is not None, "scan_dataframe needs files or inputs"
        inputs = scan_inputs(snapshot, store, files)
    schema = snapshot.schema
    mode = snapshot.column_mapping_mode
    partition_names = {c.lower() for c in snapshot.partition_columns}
    logical = to_spark_schema(visible_schema(schema))
    if len(inputs.paths) == 0:
        empty = empty_frame(spark, logical)
        if row_ids:
            empty = empty.select(
                "*", F.lit(None).cast("string").alias(FILE), F.lit(None).cast("long").alias(ROW)
            )
        if carried:
            empty = empty.select("*", *(F.lit(None).cast("long").alias(n) for n in carried))
        return empty.withColumn(WHOLE, F.lit(True)) if whole else empty
    check_readable(snapshot.table_root, inputs.paths)
    field_ids = mode == "id"
    from_paths = inputs.base_path is not None
    read_fields = [
        physical_field(f, mode)
        for f in schema.fields
        if from_paths or f.name.lower() not in partition_names
    ]
    read_fields += [StructField(name, PrimitiveType("long"), True) for name in carried]
    read_schema = to_spark_schema(StructType(tuple(read_fields)))
    df = listed_read(spark, read_schema, inputs.paths, inputs.base_path, field_ids=field_ids)
    if df is None:
        df = read_files_or_raise(
            spark,
            read_schema,
            inputs.paths,
            snapshot.table_root,
            store,
            base_path=inputs.base_path,
            field_ids=field_ids,
        )
    # Only where needed: a relation with ``_metadata`` in its output reads every metadata
    # field, the row index included, whatever the query then keeps.
    if row_ids or inputs.deletion_vectors is not None or inputs.partition_values is not None:
        meta = df["_metadata"]
        added = [meta["file_path"].alias(FILE), meta["row_index"].alias(ROW)]
        if whole:
            start, length = meta["file_block_start"], meta["file_block_length"]
            added.append(((start == 0) & (length == meta["file_size"])).alias(WHOLE))
        df = df.select("*", *added)
    df = drop_deleted_rows(spark, df, inputs, snapshot.table_root, store)
    if inputs.partition_values is not None:
        values = arrow_to_df(spark, inputs.partition_values)
        df = df.join(F.broadcast(values), on=FILE, how="inner")
    extra = [df[FILE], df[ROW]] if row_ids else []
    extra += [df[WHOLE]] if whole else []
    extra += [df[name] for name in carried]
    return df.select(*logical_columns(df, schema, partition_names, mode), *extra)


def through_seam(spark: Any, snapshot: Snapshot) -> bool:
    """Whether ``snapshot``'s files are read in Python tasks through the storage seam rather
    than by Spark's parquet reader: on an object store the session's JVM cannot reach (no
    Hadoop connector), and under column mapping mode ``id`` on Spark Connect (Spark reads
    parquet field ids only where the session says so, and a Connect session cannot say it
    for one read without saying it for every query of the user's)."""
    if not jvm_reads(spark, snapshot.table_root):
        return True
    return snapshot.column_mapping_mode == "id" and is_connect(spark)


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
    zone = session_time_zone_id(spark)
    return snapshot.files_for_filter(where, time_zone=zone)


def nullable_type(t: Any) -> Any:
    """``t`` with every nested field, element and value nullable (a cast target Spark accepts)."""
    if isinstance(t, T.StructType):
        return T.StructType(
            [T.StructField(f.name, nullable_type(f.dataType), True) for f in t.fields]
        )
    if isinstance(t, T.ArrayType):
        return T.ArrayType(nullable_type(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(nullable_type(t.keyType), nullable_type(t.valueType), True)
    return t


def check_spark_reads(spark: Any, snapshot: Snapshot) -> None:
    """Refuse, before any job, a table whose older files Spark's parquet reader cannot read.

    Spark widens a file's narrower type to the table's (int to long, float to double, decimals,
    date to timestamp_ntz) only from Spark 4.0; before, the job fails inside a task ("Expected:
    bigint, Found: INT32"). Called wherever Spark's reader reads the table's files: reads, the
    change feed, and DELETE, UPDATE, MERGE and OPTIMIZE on Spark's engine (the local engine
    reads with pyarrow, which widens).

    Raises:
        UnsupportedFeatureError: ``DELTA_UNSUPPORTED_FEATURES_FOR_READ``: a column was widened
            (``delta.typeChanges``) and this is Spark before 4.0.
    """
    widening = {"typeWidening", "typeWidening-preview"} & set(
        snapshot.protocol.reader_features or ()
    )
    if not widening or int(str(spark.version).split(".")[0]) >= 4:
        return
    if not any(TYPE_CHANGES_KEY in f.metadata for _, f in explode(snapshot.schema)):
        return  # the feature without a change yet: every file has the table's types
    raise errors.UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
        f"reading a table with {sorted(widening)[0]} needs Spark 4.0 or newer "
        f"(this is Spark {spark.version}): its older files hold narrower types than the "
        "table's, which Spark's parquet reader widens only from 4.0.",
        table=snapshot.table_root,
        help="use Spark 4.0+ (DELETE, UPDATE and OPTIMIZE also run here with "
        "spark.deltalog.engine=local).",
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
    path = next(p for p in paths.to_pylist() if re.search(UNREADABLE, p))
    raise errors.UnsupportedFeatureError(
        "DELTA_UNREADABLE_FILE_PATH",
        f"data file {path} has a character Spark's file source cannot read by path.",
        table=table_root,
        help='read it with spark.read.format("delta").load(path), which can.',
    )
