"""Helpers that behave the same on classic and Spark Connect sessions."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from deltalog.timestamps import time_zone

# Spark lists every explicit input path in a job of its own above this many paths; the log and
# the snapshot already know every file, so never let it.
DISCOVERY_THRESHOLD_KEY = "spark.sql.sources.parallelPartitionDiscovery.threshold"
DISCOVERY_THRESHOLD = "1000000000"


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM behind it)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def to_arrow(df: Any) -> pa.Table:
    """Collect a DataFrame as an Arrow table (``toArrow`` on 4.x, the Arrow collector on 3.5)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()  # PySpark 3.5 classic
    return pa.Table.from_batches(batches) if batches else pa.table({})


def conf_get(spark: Any, key: str, default: str) -> str:
    try:
        value = spark.conf.get(key, default)
    except Exception:  # Connect raises for unknown keys on some versions
        return default
    return default if value is None else str(value)


def session_time_zone(spark: Any) -> dt.tzinfo:
    """``spark.sql.session.timeZone`` (UTC when unset)."""
    return time_zone(conf_get(spark, "spark.sql.session.timeZone", "UTC"))


def ensure_no_listing_job(spark: Any) -> None:
    """Raise the partition-discovery threshold so explicit file lists are never re-listed."""
    if conf_get(spark, DISCOVERY_THRESHOLD_KEY, "32") != DISCOVERY_THRESHOLD:
        spark.conf.set(DISCOVERY_THRESHOLD_KEY, DISCOVERY_THRESHOLD)


# Hadoop's checksummed LocalFileSystem verifies ".<name>.crc" side files, which are not part of
# Delta and are often stale in copied tables; read local files raw. File-source options are merged
# into the Hadoop configuration of that read only.
RAW_LOCAL_FS_OPTIONS = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


def reader(spark: Any) -> Any:
    """``spark.read`` with the options every deltalog file read uses."""
    return spark.read.options(**RAW_LOCAL_FS_OPTIONS)


def get_or_create_session(master: str | None = None) -> Any:
    """The active session, or a new local one for deltalog's own commands and tests.

    ``SPARK_REMOTE`` (e.g. ``sc://host:15002`` or ``local[2]``) selects Spark Connect. Executors
    run this interpreter, so they import the same deltalog.
    """
    import os
    import sys

    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("deltalog")
    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        builder = builder.remote(remote)
    else:
        builder = (
            builder.master(master or os.environ.get("DELTALOG_SPARK_MASTER", "local[2]"))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
    spark = builder.config("spark.sql.shuffle.partitions", "8").getOrCreate()
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    return spark
