"""OPTIMIZE spread over Spark: ``DeltaTable.forPath(spark, p).optimize()`` (reference
``DeltaOptimizeBuilder``, ``OptimizeExecutor``, ``MultiDimClustering``).

The plan, commit and metrics are :mod:`deltalog.commands.optimize.plan`'s and
:mod:`deltalog.commands.optimize.commit`'s; here the bins are read with
:func:`~deltalog.spark.read.scan.scan_dataframe` (deletion vectors applied) and written with
the table's Spark writer (:func:`~deltalog.spark.write.batch.write_rows`), ``dataChange=false``:

* compaction: each bin read and written by one task (``coalesce(1)``, as the reference
  writes a bin: no shuffle), so each bin becomes one file; the bins' frames unioned, so one
  Spark job writes many bins at once (the reference runs a job per bin, several at once);
* Z-order: one job per partition of the table (the reference's bin), on the core's curve
  (:mod:`deltalog.commands.optimize.zorder`, which the pyarrow engine uses too): each Z-order
  column gets range ids from the core's bounds over a sample (a binary search of ``CASE WHEN``
  on the bounds), their bits are interleaved with shifts into a ``long`` Z-value at the core's
  positions, the rows are range-partitioned on it into ``max(1, size // maxFileSize)`` files
  and sorted within them. No Python UDF runs.

Where the bins' files are few bytes (:mod:`deltalog.spark.engine`: 256 MiB by default), they
are read and written in this process instead, by :func:`deltalog.commands.optimize.arrow.write_bins`
(the same plan, curve and commit): Spark's fixed costs would be most of the command's time.

The returned DataFrame has delta-spark's columns: ``path`` and the ``metrics`` struct
(reference ``OptimizeMetrics``).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deltalog import errors, row_tracking
from deltalog.actions import AddFile
from deltalog.commands.optimize.arrow import keeps_row_ids
from deltalog.commands.optimize.arrow import write_bins as local_write_bins
from deltalog.commands.optimize.commit import bin_removes, commit_bins, optimize_metrics
from deltalog.commands.optimize.plan import Bin, OptimizePlan, OptimizeSettings, plan_optimize
from deltalog.commands.optimize.zorder import (
    SAMPLE_ROWS,
    bits_per_column,
    range_bounds,
    z_positions,
)
from deltalog.commands.write.write_into_delta import WritePlan, dml_plan
from deltalog.spark import captured
from deltalog.spark.commands.dml import start
from deltalog.spark.commands.row_ids import carrying
from deltalog.spark.conditions import check_partition_filter, partition_matcher
from deltalog.spark.engine import choose_engine
from deltalog.spark.read.row_tracking import tracked_scan
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import (
    arrow_to_df,
    conf_get,
    default_parallelism,
    planned,
    to_arrow,
)
from deltalog.spark.session_clone import adopt, clone_with
from deltalog.spark.write.batch import write_rows

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog
    from deltalog.txn.transaction import Transaction

_Z = "__deltalog_z"


@captured.surfaces_all
class DeltaOptimizeBuilder:
    """delta-spark's ``DeltaOptimizeBuilder``: ``where`` partition filters, then
    :meth:`executeCompaction` or :meth:`executeZOrderBy`."""

    def __init__(self, spark: Any, log: DeltaLog) -> None:
        self._spark = spark
        self._log = log
        self._filters: list[str] = []

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        """Only rewrite the partitions matching ``partitionFilter`` (SQL on partition columns;
        several calls add filters joined by AND)."""
        self._filters.append(partitionFilter)
        return self

    def executeCompaction(self) -> DataFrame:
        """Compact small files; returns delta-spark's metrics DataFrame (``path``, ``metrics``).

        Raises:
            InvalidArgumentError: a filter names a non-partition column.
            DeltaConcurrentModificationException: a concurrent commit removed a compacted file.
        """
        return optimize(self._spark, self._log, self._filters, ())

    def executeZOrderBy(self, *cols: str | list[str]) -> DataFrame:
        """Z-order every selected partition by ``cols``; returns the metrics DataFrame.

        Raises:
            InvalidArgumentError: a partition column, an unknown column or a column without
                statistics among ``cols``; a filter on a non-partition column.
        """
        names = [c for group in cols for c in ([group] if isinstance(group, str) else group)]
        return optimize(self._spark, self._log, self._filters, tuple(names))


def optimize(spark: Any, log: DeltaLog, where: list[str], z_order_by: tuple[str, ...]) -> DataFrame:
    """Run OPTIMIZE on the table's latest version; the metrics DataFrame."""
    started = int(time.time() * 1000)
    txn = start(log)
    assert txn.snapshot is not None
    settings = OptimizeSettings.from_conf(lambda key: _conf(spark, key))
    snapshot = txn.snapshot
    for text in where:  # Spark's parser and analyzer decide what a filter means, not deltalog's
        check_partition_filter(
            spark,
            to_spark_schema(snapshot.schema),
            snapshot.partition_columns,
            text,
            table=snapshot.table_root,
        )
    matcher = partition_matcher(spark, " AND ".join(f"({w})" for w in where)) if where else None
    plan = plan_optimize(txn.snapshot, where, z_order_by, settings, matcher)
    plan.track_reads(txn)
    read_bytes = int(sum(plan.files.column("size").to_pylist())) if plan.bins else 0
    adds: list[AddFile] | None = None
    if plan.bins and choose_engine(spark, plan.snapshot, read_bytes, "OPTIMIZE").local:
        try:
            adds = local_write_bins(plan, txn.log.store)  # same plan, rules and commit
            txn.row_tracking_preserved = keeps_row_ids(plan.snapshot)
        except errors.UnsupportedFeatureError:
            adds = None  # e.g. shredded variants, which Spark's reader rebuilds (files deleted)
    if adds is None:
        adds = write_bins(spark, txn, plan)
    removes = bin_removes(plan, adds)
    metrics = optimize_metrics(
        plan, adds, removes, start_ms=started, parallelism=_parallelism(spark)
    )
    # The metrics are known before the commit: Spark makes and plans their frame on its own
    # cores while this thread writes the commit (bench/README.md).
    with ThreadPoolExecutor(1, thread_name_prefix="deltalog-optimize-metrics") as pool:
        frame = pool.submit(metrics_frame, spark, plan.snapshot.table_root, metrics.to_dict())
        commit_bins(log, txn, plan, adds, removes)
        return frame.result()


def write_bins(spark: Any, txn: Transaction, plan: OptimizePlan) -> list[AddFile]:
    """Write every bin of ``plan`` as new files (``dataChange=false``); their adds."""
    if not plan.bins:
        return []
    tracking = row_tracking.materialized_columns(plan.snapshot.protocol, plan.snapshot.metadata)
    write_plan = carrying(txn, _write_plan(txn, plan), tracking)
    if not plan.z_order_by:
        return _compact(spark, txn, plan, write_plan)
    adds: list[AddFile] = []
    for b in plan.bins:
        adds += _z_order(spark, txn, plan, b, write_plan)
    return adds


def _write_plan(txn: Transaction, plan: OptimizePlan) -> WritePlan:
    write_plan = dml_plan(txn, plan.operation)
    return replace(write_plan, layout=replace(write_plan.layout, data_change=False))


def _conf(spark: Any, key: str) -> str | None:
    return conf_get(spark, key, "") or None


def _parallelism(spark: Any) -> int:
    return default_parallelism(spark) or 0  # 0: unknown (Spark Connect)


# -- compaction ----------------------------------------------------------------------------------


def _compact(
    spark: Any, txn: Transaction, plan: OptimizePlan, write_plan: WritePlan
) -> list[AddFile]:
    """Each bin's files read and written by one task, as the reference writes a bin
    (``coalesce(1)``: no shuffle of its rows), so each bin becomes one file.

    On a classic session the bins' frames are unioned, so one job writes up to
    :data:`_BINS_PER_JOB` bins, one task each; the union runs in a clone of the session with
    ``spark.sql.unionOutputPartitioning`` off, as Spark 4 would otherwise read single-partition
    branches in ONE task. On Spark Connect (no clone) each bin is a job of its own,
    ``spark.databricks.delta.optimize.maxThreads`` (15) at once, as the reference runs them."""
    frames = [_bin_frame(spark, txn, plan, b) for b in plan.bins]
    clone = clone_with(spark, {_UNION_PARTITIONING: "false"}) if len(frames) > 1 else None
    if clone is None and len(frames) > 1:
        threads = min(len(frames), _max_threads(spark, plan.snapshot.table_root))
        with ThreadPoolExecutor(threads, thread_name_prefix="deltalog-optimize") as pool:
            written = list(pool.map(lambda df: write_rows(df, write_plan)[0], frames))
        return [add for adds in written for add in adds]
    adds: list[AddFile] = []
    for first in range(0, len(frames), _BINS_PER_JOB):
        df = _union(frames[first : first + _BINS_PER_JOB])
        adds += write_rows(adopt(clone, df) if clone is not None else df, write_plan)[0]
    return adds


# Bins written by one job: a union's analysis grows with its branches (bench/README.md).
_BINS_PER_JOB = 64
_UNION_PARTITIONING = "spark.sql.unionOutputPartitioning"
_MAX_THREADS_KEY = "spark.databricks.delta.optimize.maxThreads"


def _bin_frame(spark: Any, txn: Transaction, plan: OptimizePlan, b: Bin) -> DataFrame:
    """The live rows of bin ``b`` in one partition (one task reads its files)."""
    df, _ = tracked_scan(spark, plan.snapshot, txn.log.store, b.files, "OPTIMIZE")
    return df.coalesce(1)


def _union(frames: list[DataFrame]) -> DataFrame:
    """The frames' rows, each frame's partitions kept as they are (a union adds no shuffle),
    unioned as a balanced tree (a chain would analyse ever longer plans)."""
    while len(frames) > 1:
        pairs = [a.union(b) for a, b in zip(frames[::2], frames[1::2], strict=False)]
        frames = pairs + ([frames[-1]] if len(frames) % 2 else [])
    return frames[0]


def _max_threads(spark: Any, table: str) -> int:
    """``spark.databricks.delta.optimize.maxThreads``: bins written at once (15 by default).

    Raises:
        InvalidArgumentError: it is not a positive whole number.
    """
    text = conf_get(spark, _MAX_THREADS_KEY, "15").strip()
    if not text.isdigit() or int(text) < 1:
        raise errors.invalid_argument(
            f"{_MAX_THREADS_KEY} is {text!r}; set it to a positive whole number", table
        )
    return int(text)


# -- Z-order -------------------------------------------------------------------------------------


def _z_order(
    spark: Any, txn: Transaction, plan: OptimizePlan, b: Bin, write_plan: WritePlan
) -> list[AddFile]:
    """One partition: range-partitioned on the Z-value into about size / maxFileSize files."""
    df, _ = tracked_scan(spark, plan.snapshot, txn.log.store, b.files, "OPTIMIZE")
    cols = list(plan.z_order_by)
    bits = bits_per_column(len(cols))
    bounds = quantile_bounds(df, cols, _live_rows(b), bits)
    z = z_value([range_id(df[f"`{c}`"], bounds[c]) for c in cols], bits)
    files = max(1, b.size // plan.settings.max_file_size)
    # The partition columns lead the sort so that the writer's own ordering is already met and
    # it adds no sort of its own, which would undo the Z-order inside each file.
    order = [F.col(f"`{c}`") for c in (*write_plan.layout.partition_columns, _Z)]
    out = df.withColumn(_Z, z).repartitionByRange(files, _Z).sortWithinPartitions(*order)
    adds, _ = write_rows(out.drop(_Z), write_plan)
    return adds


def _live_rows(b: Bin) -> int:
    total = 0
    for stats, dv in zip(
        b.files["stats"].to_pylist(), b.files["deletionVector"].to_pylist(), strict=True
    ):
        n = json.loads(stats).get("numRecords") if stats else None
        total += (int(n) if n is not None else 1_000_000) - (int(dv["cardinality"]) if dv else 0)
    return max(total, 1)


def quantile_bounds(df: Any, cols: list[str], rows: int, bits: int) -> dict[str, list[Any]]:
    """Per column, the core's :func:`~deltalog.commands.optimize.zorder.range_bounds` over a
    sample of its values (the reference's ``range_partition_id`` samples too; below
    :data:`~deltalog.commands.optimize.zorder.SAMPLE_ROWS` rows the sample is every row)."""
    fraction = min(1.0, SAMPLE_ROWS / rows)
    sample = df.select(*[df[f"`{c}`"] for c in cols])
    if fraction < 1.0:
        sample = sample.sample(withReplacement=False, fraction=fraction, seed=42)
    # ``rows`` comes from stats (a file without them counts as 1M rows): a hard cap keeps
    # the driver's sample bounded whatever the files really hold.
    table = to_arrow(sample.limit(4 * SAMPLE_ROWS))
    return {c: range_bounds(table[c], bits) for c in cols}


def range_id(column: Any, bounds: list[Any]) -> Any:
    """The core's range id (:func:`~deltalog.commands.optimize.zorder.range_ids`): 0 for NULL,
    else one more than the number of ``bounds`` below the value, by a binary search of nested
    ``CASE WHEN``s, so each row evaluates about log2(len(bounds)) comparisons."""

    def search(lo: int, hi: int) -> Any:  # the count of bounds below lies in [lo, hi]
        if lo == hi:
            return F.lit(lo + 1).cast("long")
        mid = (lo + hi) // 2
        return F.when(column > F.lit(bounds[mid]), search(mid + 1, hi)).otherwise(search(lo, mid))

    return F.when(column.isNull(), F.lit(0).cast("long")).otherwise(search(0, len(bounds)))


def z_value(ids: list[Any], bits: int) -> Any:
    """The bits of ``ids`` interleaved at the core's
    :func:`~deltalog.commands.optimize.zorder.z_positions`."""
    z = F.lit(0).cast("long")
    for j, bit, position in z_positions(len(ids), bits):
        one = F.shiftright(ids[j], bit).bitwiseAND(F.lit(1).cast("long"))
        z = z.bitwiseOR(F.shiftleft(one, position))
    return z


# -- the metrics DataFrame -----------------------------------------------------------------------


def metrics_frame(spark: Any, path: str, metrics: dict[str, Any]) -> DataFrame:
    """The one-row metrics DataFrame, made from Arrow (a local relation: collecting it runs
    no job, where a frame of Python rows is an RDD), its physical plan made already."""
    from pyspark.sql.pandas.types import to_arrow_schema  # pandas: only when it is made

    schema = to_arrow_schema(metrics_schema())
    table = pa.Table.from_pylist([{"path": path, "metrics": metrics}], schema)
    return planned(arrow_to_df(spark, table))


def metrics_schema() -> T.StructType:
    """``path`` and ``metrics`` as delta-spark's ``OptimizeTableCommand`` outputs them (the
    ``OptimizeMetrics`` encoder: ``Long`` fields non-null, ``Option``s and structs nullable)."""

    def long(name: str, nullable: bool = False) -> T.StructField:
        return T.StructField(name, T.LongType(), nullable)

    def struct(name: str, fields: list[T.StructField]) -> T.StructField:
        return T.StructField(name, T.StructType(fields), True)

    sizes = [long("min", True), long("max", True), T.StructField("avg", T.DoubleType(), False)]
    sizes += [long("totalFiles"), long("totalSize")]
    z_files = [long("num"), long("size")]
    c_files = [long("numFiles"), long("size")]
    metrics = T.StructType(
        [
            long("numFilesAdded"),
            long("numFilesRemoved"),
            struct("filesAdded", sizes),
            struct("filesRemoved", sizes),
            long("partitionsOptimized"),
            struct(
                "zOrderStats",
                [
                    T.StructField("strategyName", T.StringType(), True),
                    struct("inputCubeFiles", z_files),
                    struct("inputOtherFiles", z_files),
                    long("inputNumCubes"),
                    struct("mergedFiles", z_files),
                    long("numOutputCubes"),
                    long("mergedNumCubes", True),
                ],
            ),
            struct(
                "clusteringStats",
                [
                    struct("inputZCubeFiles", c_files),
                    struct("inputOtherFiles", c_files),
                    long("inputNumZCubes"),
                    struct("mergedFiles", c_files),
                    long("numOutputZCubes"),
                ],
            ),
            long("numBins"),
            long("numBatches"),
            long("totalConsideredFiles"),
            long("totalFilesSkipped"),
            T.StructField("preserveInsertionOrder", T.BooleanType(), False),
            long("numFilesSkippedToReduceWriteAmplification"),
            long("numBytesSkippedToReduceWriteAmplification"),
            long("startTimeMs"),
            long("endTimeMs"),
            long("totalClusterParallelism"),
            long("totalScheduledTasks"),
            struct(
                "autoCompactParallelismStats",
                [
                    long(f"{m}{s}ActiveParallelism", True)
                    for s in ("Cluster", "Session")
                    for m in ("max", "min")
                ],
            ),
            struct(
                "deletionVectorStats",
                [long("numDeletionVectorsRemoved"), long("numDeletionVectorRowsRemoved")],
            ),
            long("numTableColumns"),
            long("numTableColumnsWithStats"),
        ]
    )
    return T.StructType(
        [T.StructField("path", T.StringType(), True), T.StructField("metrics", metrics, True)]
    )
