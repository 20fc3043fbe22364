"""``spark.read.format("delta").load(path)``: the plan a load gets.

Every entry point reads through one plan, Spark's own parquet scan over the snapshot's file
list (:func:`deltalog.spark.read.scan.read_snapshot`, the plan of ``DeltaTable.toDF()``;
:func:`deltalog.spark.read.changes.changes_to_df` for ``readChangeFeed``). The Python data source
(:mod:`deltalog.spark.read.data_source`) remains for what only it can read: files whose paths
Spark's file source cannot take as given (glob characters, ``:``), and a user-specified schema;
:func:`load_with_python_source` hands a load to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from deltalog.change_data_feed import CdfBounds, is_cdc_read, plan_changes, resolve_range
from deltalog.delta_log import DeltaLog
from deltalog.scan.plan import jvm_readable, snapshot_inputs
from deltalog.spark.read.changes import changes_to_df
from deltalog.spark.read.options import read_options, snapshot_for, storage_of
from deltalog.spark.read.row_tracking import read_with_row_tracking
from deltalog.spark.read.scan import read_snapshot
from deltalog.spark.session import session_time_zone, session_time_zone_id
from deltalog.spark.storage import jvm_reads, register_session


def load(
    spark: SparkSession, options: Mapping[str, Any], *, python_source: bool = True
) -> Any | None:
    """The DataFrame of a Delta load through Spark's parquet scan, or ``None`` when only the
    Python data source can read it and ``python_source`` says there is one (the caller then
    hands the load to it; without one, the scan raises DELTA_UNREADABLE_FILE_PATH).

    Raises:
        DeltaError: the typed errors of :func:`read_options`, :func:`snapshot_for`, the change
            feed's range resolution and planning, and the scan.
    """
    opts = read_options(options)
    # Object stores: the session's settings, under the load's own storage options.
    register_session(spark, opts["path"], storage_of(opts))
    seam = not jvm_reads(spark, opts["path"])  # the storage seam reads any path: no fallback
    if is_cdc_read(opts):
        log = DeltaLog.for_table(opts["path"], storage_options=storage_of(opts).as_dict())
        zone = session_time_zone_id(spark)
        bounds = CdfBounds.from_options(opts, table=log.table_root)
        plan = plan_changes(log, resolve_range(log, bounds, time_zone=zone))
        if python_source and not seam and not jvm_readable(plan.files["path"]):
            return None
        return changes_to_df(spark, plan, log.store)
    snapshot = snapshot_for(opts, session_time_zone(spark))
    store = DeltaLog.for_table(opts["path"], storage_options=storage_of(opts).as_dict()).store
    if opts.get("rowtracking", "false").strip().lower() == "true":
        # Row ids need Spark's row_index: never the Python data source (its errors are typed).
        return read_with_row_tracking(spark, snapshot, store)
    if python_source and not seam and not jvm_readable(snapshot_inputs(snapshot, store).paths):
        return None
    return read_snapshot(spark, snapshot, store)


def load_with_python_source(reader: Any, path: str) -> Any:
    """``reader.load(path)`` by PySpark's own ``load``: the Python data source serves the
    Delta format (PySpark 4.0+), whatever the bridge would choose."""
    load = type(reader).load
    return getattr(load, "__wrapped__", load)(reader, path)
