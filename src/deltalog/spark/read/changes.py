"""The change data feed as a Spark DataFrame (reference ``CDCReaderImpl.changesToBatchDF``).

The plan (:func:`deltalog.change_data_feed.plan_changes`) names every file read of the range;
here Spark's parquet reader reads them all in one scan per kind (data files, change files), so
the rows of a long range are read in parallel across the cluster:

* each row is joined to the plan rows of its file (a file added in one commit and removed in a
  later one is read once and appears twice: as inserts and as deletes);
* deletion vectors select rows by ``_metadata.row_index``: all rows, all but the vector's, or
  only those of one vector the other lacks (a vector replaced inside a commit); the vectors
  are read in the executors (:mod:`deltalog.spark.read.change_vectors`), never on the driver;
* partition values, the change type, the commit version and the commit timestamp come from the
  plan; change files bring their own ``_change_type``;
* a commit's large whole-file reads of one change type (a first write, an overwrite) get a scan
  of their own with the change columns as literals and partition values from the paths, so
  their rows skip the join (:func:`_bulk_groups`);
* each scan is coalesced to the tasks its bytes need (:func:`scan_tasks`): a busy table's range
  is mostly tiny files, which Spark's split planning (4 MB assumed per file open) spreads over
  dozens of tasks of milliseconds of work each.

A range of few bytes (``spark.deltalog.local.maxReadBytes``, :mod:`deltalog.spark.engine`) is
read on the driver instead (:func:`deltalog.change_data_feed.read_plan`: one pyarrow scan of
its many small files) and handed to Spark as Arrow: the same rows, without the scans' jobs and
the joins to the plan (``bench/README.md``). Even then a commit's large whole-file reads (the
bulk groups above) stay Spark scans, unioned with the rows read here, and only the rest of
the range counts toward the setting (:func:`_spark_bulk`).

Output: the table's columns at the range's end (logical names), then ``_change_type``,
``_commit_version`` and ``_commit_timestamp`` (``cdcReadSchema``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.change_data_feed import (
    ALL_ROWS,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    CdfBounds,
    ChangePlan,
    cdc_read_schema,
    plan_changes,
    read_plan,
    resolve_range,
)
from deltalog.partition_values import typed_partition_values
from deltalog.scan.plan import partitions_from_paths, spark_file_uris
from deltalog.schema import PrimitiveType, StructField, StructType
from deltalog.spark.engine import ENGINE_KEY, choose_engine
from deltalog.spark.read.change_vectors import MODE, SPEC, select_rows
from deltalog.spark.read.common import FILE, ROW, read_files_or_raise
from deltalog.spark.read.scan import (
    check_spark_reads,
    logical_columns,
    physical_field,
    through_seam,
)
from deltalog.spark.read.seam_scan import changes_through_seam
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import (
    arrow_as_frame,
    arrow_to_df,
    conf_get,
    default_parallelism,
    session_time_zone_id,
)
from deltalog.table_properties import parse_byte_size

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog
    from deltalog.storage.base import LogStore

# Plans up to this many file reads are broadcast to the scans.
BROADCAST_ROWS = 200_000
# A commit's whole-file reads of one change type of at least this many bytes get a scan of
# their own without the join to the plan (:func:`_bulk_groups`); at most this many such scans.
BULK_BYTES = 8 * 2**20
MAX_BULK_GROUPS = 8


def read_changes(spark: SparkSession, log: DeltaLog, options: Mapping[str, str]) -> Any:
    """The change feed of the table for the range in ``options`` (delta-spark's names:
    ``startingVersion`` / ``startingTimestamp``, ``endingVersion`` / ``endingTimestamp``).

    Raises:
        DeltaError: the typed errors of :func:`resolve_range` and :func:`plan_changes`.
    """
    zone = session_time_zone_id(spark)
    cdf_range = resolve_range(
        log, CdfBounds.from_options(options, table=log.table_root), time_zone=zone
    )
    return changes_to_df(spark, plan_changes(log, cdf_range), log.store)


def _estimated_bytes(sizes: pa.ChunkedArray) -> int:
    """The bytes of a plan's files. A ``remove`` may omit its size (the protocol makes it
    optional): such a file counts as the mean of the known ones, or as unbounded when none is
    known, so that an unknown range never passes for a small one."""
    known = int(pc.sum(sizes).as_py() or 0)
    unknown = sizes.null_count
    if unknown == 0:
        return known
    if unknown == len(sizes):
        return 2**62
    return known + unknown * -(-known // (len(sizes) - unknown))


def changes_to_df(spark: SparkSession, plan: ChangePlan, store: LogStore) -> Any:
    """The rows of ``plan`` as a DataFrame with :func:`cdc_read_schema`."""
    snapshot = plan.snapshot
    schema = snapshot.schema
    out_schema = to_spark_schema(cdc_read_schema(schema))
    if plan.files.num_rows == 0:
        return spark.createDataFrame([], out_schema)
    bulk = _spark_bulk(spark, plan)
    local_files = plan.files
    if bulk:
        taken = pa.concat_arrays([g["spec_id"].combine_chunks() for g in bulk])
        local_files = plan.files.filter(pc.invert(pc.is_in(plan.files["spec_id"], taken)))
    read_bytes = _estimated_bytes(local_files["size"])
    if choose_engine(spark, snapshot, read_bytes, "change feed read", read_only=True).local:
        local = dataclasses.replace(plan, files=local_files)
        return _read_locally(spark, local, store, out_schema, bulk)
    if through_seam(spark, snapshot):  # no Hadoop connector, or field ids on Spark Connect
        return changes_through_seam(spark, snapshot.table_root, plan.range.start, plan.range.end)
    check_spark_reads(spark, snapshot)
    mode = snapshot.column_mapping_mode
    partition_names = {c.lower() for c in snapshot.partition_columns}
    data_fields = [f for f in schema.fields if f.name.lower() not in partition_names]
    physical = StructType(tuple(physical_field(f, mode) for f in data_fields))
    is_cdc = plan.files["is_cdc"]
    data, cdc = plan.files.filter(pc.invert(is_cdc)), plan.files.filter(is_cdc)
    bulk, joined = _bulk_groups(plan, data)
    parts = [_bulk_scan(spark, plan, group, store) for group in bulk]
    joined_and_cdc = pa.concat_tables([joined, cdc])
    specs = _specs(spark, plan, joined_and_cdc, mode) if joined_and_cdc.num_rows else None
    data_paths = _distinct(joined["path"])
    if data_paths:
        selects = not pc.all(pc.equal(joined["mode"], ALL_ROWS)).as_py()
        df = _scan(spark, physical, data_paths, plan, store, row_index=selects)
        assert specs is not None
        df = df.join(specs, on=FILE, how="inner")
        df = select_rows(spark, snapshot.table_root, joined, df, store)
        parts.append(df.drop(FILE))
    cdc_paths = _distinct(cdc["path"])
    if cdc_paths:
        change_fields = (*physical.fields, StructField(CHANGE_TYPE, PrimitiveType("string"), True))
        df = _scan(spark, StructType(change_fields), cdc_paths, plan, store, row_index=False)
        assert specs is not None
        df = df.join(specs.drop(CHANGE_TYPE), on=FILE, how="inner")
        parts.append(df.drop(FILE, SPEC, MODE, ROW))
    df = parts[0]
    for other in parts[1:]:
        df = df.unionByName(other)
    table_columns = logical_columns(df, schema, partition_names, mode)
    return df.select(*table_columns, CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)


def _spark_bulk(spark: SparkSession, plan: ChangePlan) -> list[pa.Table]:
    """The :func:`_bulk_groups` of ``plan`` that Spark's parquet reader reads even when the
    rest of the range is read here (``spark.deltalog.engine`` ``auto``, files Spark reads):
    a first write's million rows read by a Spark scan with the change columns as literals
    cost less than the same rows read here and handed to the JVM (``bench/README.md``), and
    the driver never holds them."""
    snapshot = plan.snapshot
    if conf_get(spark, ENGINE_KEY, "auto").strip().lower() != "auto":
        return []
    if through_seam(spark, snapshot):
        return []
    try:
        check_spark_reads(spark, snapshot)
    except errors.DeltaError:
        return []  # read here, where pyarrow widens the older files' types
    data = plan.files.filter(pc.invert(plan.files["is_cdc"]))
    return _bulk_groups(plan, data)[0]


def _read_locally(
    spark: SparkSession, plan: ChangePlan, store: LogStore, schema: Any, bulk: list[pa.Table]
) -> Any:
    """The rows of ``plan`` read here, as a DataFrame of ``schema`` in about as many partitions
    as the cluster has task slots, and those of the ``bulk`` groups read by Spark's scans."""
    rows = read_plan(plan, store)
    df = arrow_as_frame(spark, rows, schema, partitions=default_parallelism(spark))
    if not bulk:
        return df
    snapshot = plan.snapshot
    partition_names = {c.lower() for c in snapshot.partition_columns}
    mode = snapshot.column_mapping_mode
    for group in bulk:
        scan = _bulk_scan(spark, plan, group, store)
        columns = logical_columns(scan, snapshot.schema, partition_names, mode)
        df = df.unionByName(scan.select(*columns, CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP))
    return df


def _distinct(paths: pa.ChunkedArray) -> list[str]:
    return [str(p) for p in pc.unique(paths).to_pylist()]


def _scan(
    spark: SparkSession,
    physical: StructType,
    paths: list[str],
    plan: ChangePlan,
    store: LogStore,
    *,
    row_index: bool,
    joined: bool = True,
    base_path: str | None = None,
) -> Any:
    """Spark's parquet reader over ``paths``, coalesced to the tasks their bytes need; for a
    scan ``joined`` to the plan, with each row's file (:data:`FILE`) and, when a deletion
    vector selects rows, its index (:data:`ROW`: generating it costs every file). Partition
    columns come from the directories under ``base_path`` when given."""
    root = plan.snapshot.table_root
    schema = to_spark_schema(physical)
    field_ids = plan.snapshot.column_mapping_mode == "id"
    df = read_files_or_raise(
        spark, schema, paths, root, store, base_path=base_path, field_ids=field_ids
    )
    if joined:
        columns = [df["_metadata.file_path"].alias(FILE)]
        if row_index:
            columns.append(df["_metadata.row_index"].alias(ROW))
        df = df.select("*", *columns)
    tasks = scan_tasks(spark, _bytes(plan, paths))
    return df if tasks is None else df.coalesce(tasks)


def _bytes(plan: ChangePlan, paths: list[str]) -> int:
    """Bytes of the distinct files ``paths`` (a file read twice in the plan counts once)."""
    files = plan.files.filter(pc.is_in(plan.files["path"], pa.array(paths, pa.string())))
    sizes = files.group_by("path").aggregate([("size", "max")])["size_max"]
    return int(pc.sum(pc.fill_null(sizes, 0)).as_py() or 0)


def _bulk_groups(plan: ChangePlan, data: pa.Table) -> tuple[list[pa.Table], pa.Table]:
    """The data-file reads of ``data`` worth a scan of their own, grouped, and the rest.

    A group is every whole-file read (no deletion vector) of one commit and change type, of at
    least :data:`BULK_BYTES` (a table's first write, an overwrite): its version, change type and
    timestamp are literals and its partition values come from the paths, so its rows skip the
    join to the plan. Groups whose files are not all in their hive partition directories stay
    joined, as do the small reads of a busy range (one scan for all of them is cheaper than a
    scan each). At most :data:`MAX_BULK_GROUPS`, the largest.
    """
    snapshot = plan.snapshot
    whole = data.filter(pc.equal(data["mode"], ALL_ROWS))
    if whole.num_rows == 0:
        return [], data
    sizes = whole.group_by(["version", "change_type"]).aggregate(
        [("size", "sum"), ("path", "count"), ("path", "count_distinct")]
    )
    sizes = sizes.filter(pc.greater_equal(sizes["size_sum"], BULK_BYTES))
    sizes = sizes.filter(pc.equal(sizes["path_count"], sizes["path_count_distinct"]))
    groups: list[pa.Table] = []
    for key in sizes.sort_by([("size_sum", "descending")]).to_pylist()[:MAX_BULK_GROUPS]:
        in_group = pc.and_(
            pc.equal(whole["version"], key["version"]),
            pc.equal(whole["change_type"], key["change_type"]),
        )
        group = whole.filter(in_group)
        if snapshot.partition_columns and not partitions_from_paths(
            snapshot, group, group["path"].combine_chunks()
        ):
            continue
        groups.append(group)
    if not groups:
        return [], data
    taken = pa.concat_arrays([g["spec_id"].combine_chunks() for g in groups])
    return groups, data.filter(pc.invert(pc.is_in(data["spec_id"], taken)))


def _bulk_scan(spark: SparkSession, plan: ChangePlan, group: pa.Table, store: LogStore) -> Any:
    """The rows of one :func:`_bulk_groups` group, with the change columns as literals."""
    snapshot = plan.snapshot
    mode = snapshot.column_mapping_mode
    fields = StructType(tuple(physical_field(f, mode) for f in snapshot.schema.fields))
    base_path = snapshot.table_root if snapshot.partition_columns else None
    paths = _distinct(group["path"])
    df = _scan(
        spark, fields, paths, plan, store, row_index=False, joined=False, base_path=base_path
    )
    first = group.slice(0, 1).to_pylist()[0]
    micros = int(first["timestamp"]) * 1000
    return df.select(
        "*",
        F.lit(first["change_type"]).alias(CHANGE_TYPE),
        F.lit(int(first["version"])).cast("long").alias(COMMIT_VERSION),
        F.expr(f"timestamp_micros({micros})").alias(COMMIT_TIMESTAMP),
    )


def scan_tasks(spark: SparkSession, total_bytes: int) -> int | None:
    """Tasks for a scan of ``total_bytes``: one per ``spark.sql.files.maxPartitionBytes``, at
    least ``spark.sql.files.minPartitionNum`` (default: the cluster's parallelism).

    Spark's own splits pad every file with ``spark.sql.files.openCostInBytes`` (4 MB), so a
    thousand 10 kB files become ~32 tasks on 2 cores; the coalesce keeps its splits and runs
    them in fewer tasks, never more (it is lazy, narrow, and a no-op for large files). ``None``
    where the parallelism is unknown (Spark Connect: no SparkContext).
    """
    parallelism = default_parallelism(spark)
    if parallelism is None:  # Spark Connect
        return None
    minimum = conf_get(spark, "spark.sql.files.minPartitionNum", "")
    floor = int(minimum) if minimum.isdigit() else parallelism
    per_task = parse_byte_size(conf_get(spark, "spark.sql.files.maxPartitionBytes", "128m"))
    per_task = max(per_task or 128 * 2**20, 1)
    return max(floor, math.ceil(total_bytes / per_task), 1)


def _specs(spark: SparkSession, plan: ChangePlan, files: pa.Table, mode: str) -> Any:
    """The plan rows ``files`` as a DataFrame keyed by Spark's file URI, with typed partition
    values."""
    snapshot = plan.snapshot
    raw = [dict(pv or []) for pv in files["partitionValues"].to_pylist()]
    columns: dict[str, Any] = {
        FILE: spark_file_uris(files["path"].combine_chunks()),
        SPEC: files["spec_id"],
        MODE: files["mode"],
        CHANGE_TYPE: files["change_type"],
        COMMIT_VERSION: files["version"],
        COMMIT_TIMESTAMP: pc.cast(
            pc.multiply(files["timestamp"], 1000), pa.timestamp("us", tz="UTC")
        ),
    }
    columns.update(
        typed_partition_values(
            snapshot.schema,
            snapshot.partition_columns,
            raw,
            column_mapping=mode != "none",
            table_root=snapshot.table_root,
        )
    )
    specs = arrow_to_df(spark, pa.table(columns))
    return F.broadcast(specs) if files.num_rows <= BROADCAST_ROWS else specs
