"""VACUUM and RESTORE behind ``DeltaTable`` (delta-spark's ``vacuum``, ``restoreToVersion``,
``restoreToTimestamp``): the session's confs are read here, the work is the pure core's
(:mod:`deltalog.commands.vacuum.gc`, :mod:`deltalog.commands.restore`).

Listing and deleting go through the core's ``file_ops`` seam with
:class:`~deltalog.spark.commands.vacuum_jobs.SparkFileOps`: a table with many top-level directories
is listed in Spark tasks, and deletes run in tasks when
``spark.databricks.delta.vacuum.parallelDelete.enabled``; smaller work stays on the driver.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from deltalog.commands import restore as restore_command
from deltalog.commands.restore import METRIC_NAMES
from deltalog.commands.vacuum import gc
from deltalog.delta_log import DeltaLog
from deltalog.paths import location_uri
from deltalog.spark.commands.vacuum_jobs import SparkFileOps
from deltalog.spark.session import conf_get, session_time_zone

RETENTION_CHECK_KEY = "spark.databricks.delta.retentionDurationCheck.enabled"
LITE_DEFAULT_KEY = "spark.databricks.delta.vacuum.lite.enabled"
IGNORE_MISSING_FILES_KEY = "spark.sql.files.ignoreMissingFiles"

RESTORE_SCHEMA = T.StructType(
    [
        T.StructField(name, T.LongType())
        for name in (
            "table_size_after_restore",
            "num_of_files_after_restore",
            "num_removed_files",
            "num_restored_files",
            "removed_files_size",
            "restored_files_size",
        )
    ]
)
DRY_RUN_SCHEMA = T.StructType([T.StructField("path", T.StringType())])


def vacuum(
    spark: SparkSession,
    log: DeltaLog,
    retention_hours: float | None,
    *,
    dry_run: bool,
    lite: bool | None,
) -> DataFrame:
    """Run VACUUM; an empty DataFrame (as delta-spark's Python ``vacuum``), or in a dry run
    the files it would delete as ``file:`` paths (object-store URIs as they are) in a
    ``path`` column."""
    if lite is None:
        lite = _flag(spark, LITE_DEFAULT_KEY, False)
    result = gc.vacuum(
        log.table_root,
        retention_hours,
        dry_run=dry_run,
        lite=lite,
        enforce_retention_duration=_flag(spark, RETENTION_CHECK_KEY, True),
        file_ops=SparkFileOps.for_session(spark, log.table_root),
    )
    log.update()
    if dry_run:
        return spark.createDataFrame([(location_uri(p),) for p in result.paths], DRY_RUN_SCHEMA)
    return spark.createDataFrame([], T.StructType([]))


def restore(
    spark: SparkSession, log: DeltaLog, version: int | None, timestamp: Any | None
) -> DataFrame:
    """Run RESTORE; delta-spark's one-row metrics DataFrame (no row when the version asked
    for is already the latest, as delta-spark's no-op restore)."""
    metrics = restore_command.restore(
        log.table_root,
        version=version,
        timestamp=timestamp,
        ignore_missing_files=_flag(spark, IGNORE_MISSING_FILES_KEY, False),
        time_zone=session_time_zone(spark),
    )
    log.update()
    rows = [tuple(metrics[k] for k in METRIC_NAMES)] if metrics else []
    return spark.createDataFrame(rows, RESTORE_SCHEMA)


def _flag(spark: SparkSession, key: str, default: bool) -> bool:
    return str(conf_get(spark, key, str(default).lower())).strip().lower() == "true"
