"""Helpers that behave the same on classic and Spark Connect sessions."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from deltalog import errors
from deltalog.log.checkpoint_options import CheckpointOptions
from deltalog.spark.session_clone import adopt, clone_with, spark_version
from deltalog.timestamps import time_zone

if TYPE_CHECKING:
    from deltalog.log.snapshots import SnapshotManagement

# Spark lists the explicit input paths of a read in a job of its own above this many paths
# (seconds for a thousand files); the log and the snapshot already know every file. A session
# setting only: raised in a clone of a classic session for one read (``session_clone``).
DISCOVERY_THRESHOLD_KEY = "spark.sql.sources.parallelPartitionDiscovery.threshold"
NO_LISTING_JOB = {DISCOVERY_THRESHOLD_KEY: "1000000000"}


# Where :func:`deltalog.spark.patches.sql_session.install` keeps a session class's own ``sql``.
ORIGINAL_SQL = "_deltalog_original_sql"


def spark_sql(spark: SparkSession, text: str, args: Any = None, **kwargs: Any) -> DataFrame:
    """Spark's own ``sql`` (never deltalog's), for text that is ready for Spark."""
    original = getattr(type(spark), ORIGINAL_SQL, None) or type(spark).sql
    return original(spark, text, args, **kwargs)


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM behind it)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def to_arrow(df: Any) -> pa.Table:
    """Collect a DataFrame as an Arrow table (``toArrow`` on 4.x, the Arrow collector on 3.5)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()  # PySpark 3.5 classic
    if batches:
        return pa.Table.from_batches(batches)
    # PySpark 3.5's path only (4.x has toArrow).
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema).empty_table()  # no rows: still the columns


def pyspark_classes(name: str, classic: str | tuple[str, ...], connect: str) -> list[type]:
    """PySpark's class ``name``: from the first module of ``classic`` that exists, and from
    Connect's ``connect`` module when Connect's client dependencies are installed (the bridge
    wraps both)."""
    classes: list[type] = []
    for module in (classic,) if isinstance(classic, str) else classic:
        try:
            classes.append(getattr(importlib.import_module(module), name))
            break
        except ImportError:
            continue
    with contextlib.suppress(Exception):  # Connect's client dependencies are optional
        classes.append(getattr(importlib.import_module(connect), name))
    return classes


def arrow_to_df(
    spark: SparkSession, table: pa.Table, *, local: bool = True, partitions: int | None = None
) -> DataFrame:
    """A small Arrow table as a DataFrame (Arrow directly on Spark 4; rows on 3.5, because a
    pandas round trip would turn null numbers into NaN).

    ``local=False`` (classic sessions): the rows become an RDD rather than a ``LocalRelation``.
    Every analysis of a plan holding a ``LocalRelation`` costs in proportion to its rows, so
    tables of many rows that later plans build on take this form (``bench/README.md``); with
    ``partitions``, in about that many partitions (PySpark makes one per Arrow batch of
    ``maxRecordsPerBatch`` rows, 10,000 by default: tasks of a few milliseconds each).
    """
    if not local:
        # PySpark reads these settings from the session that creates the frame: a clone's.
        settings = {"spark.sql.execution.arrow.localRelationThreshold": "0"}
        if partitions:
            table = table.combine_chunks()  # each chunk would be a batch of its own
            batch = max(-(-table.num_rows // partitions), 1)
            settings["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(batch)
        clone = clone_with(spark, settings)
        if clone is not None:
            return adopt(spark, arrow_to_df(clone, table))
    try:
        return spark.createDataFrame(table)
    except (TypeError, ValueError):
        # PySpark 3.5's path only (4.x takes Arrow).
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame(table.to_pylist(), from_arrow_schema(table.schema))


def arrow_as_frame(
    spark: SparkSession, table: pa.Table, schema: Any, *, partitions: int | None = None
) -> DataFrame:
    """``table`` (columns in the order and of the types of ``schema``, a Spark ``StructType``)
    as a DataFrame of exactly ``schema``, RDD-based (not a ``LocalRelation``, whose every
    analysis costs in proportion to its rows), in about ``partitions`` partitions.

    On a classic PySpark 4 session the Arrow batches go to the JVM as PySpark's own
    ``createDataFrame`` sends them, but cut into ``partitions`` batches by the caller and typed
    by ``schema`` at once: no session clone for the batch size, no projection of casts (each
    a few py4j calls per column), a fraction of the 92k-row change feed's time
    (``bench/README.md``). Elsewhere (Spark Connect, PySpark 3.5): :func:`arrow_to_df` and a
    projection to ``schema``'s types.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is not None and table.num_columns == len(schema.fields):
        with contextlib.suppress(ImportError, TypeError, ValueError, pa.ArrowException):
            return _arrow_batches_to_jvm(spark, table, schema, partitions)
    from pyspark.sql import functions as F

    df = arrow_to_df(spark, table, local=False, partitions=partitions)
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def _arrow_batches_to_jvm(
    spark: SparkSession, table: pa.Table, schema: Any, partitions: int | None
) -> DataFrame:
    """PySpark 4's ``_create_from_arrow_table`` without its settings (raises ``ImportError``
    where PySpark has no ``ArrowIteratorServer`` path: 3.5)."""
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer
    from pyspark.sql.pandas.types import to_arrow_schema

    jvm: Any = spark._jvm
    if spark_version(spark) < (4, 0) or not hasattr(jvm, "ArrowIteratorServer"):
        raise ImportError("PySpark 3.5 sends Arrow batches as an RDD of its own")
    target = to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")
    # Spark's TimestampType is UTC microseconds, as the change feed's rows hold them.
    table = table.rename_columns(target.names).cast(target).combine_chunks()
    size = max(-(-table.num_rows // max(partitions or 1, 1)), 1)
    # No rows: one empty batch, so that the frame has a partition as PySpark's has.
    empty = [pa.RecordBatch.from_pylist([], schema=target)]
    batches = table.to_batches(max_chunksize=size) or empty
    jiter = spark.sparkContext._serialize_to_jvm(
        batches,
        ArrowStreamSerializer(),
        jvm.PythonSQLUtils.readArrowStreamFromFile,
        jvm.ArrowIteratorServer,
    )
    # Below this many bytes of batches, Spark decodes them into a LocalRelation on the driver
    # (0.1 s for 92k rows, and every later analysis pays in proportion): read in a clone.
    clone = clone_with(spark, {"spark.sql.execution.arrow.localRelationThreshold": "0"})
    assert clone is not None  # a classic session
    jdf = jvm.PythonSQLUtils.toDataFrame(jiter, schema.json(), clone._jsparkSession)
    df = adopt(spark, DataFrame(jdf, clone))
    df._schema = schema  # what PySpark sets: the schema needs no trip to the JVM
    return df


def planned(df: DataFrame) -> DataFrame:
    """``df`` with its physical plan made now (classic sessions; Spark Connect plans on the
    server at each action), so that its first action only runs it: a frame made on a thread
    beside other work leaves less to its caller (optimising and planning a one-row local
    relation is ~3-5 ms of the JVM's time)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        with contextlib.suppress(Exception):  # a plan that fails now fails again at the action
            jdf.queryExecution().executedPlan()
    return df


def free_local_checkpoint(df: DataFrame) -> None:
    """Drop a local checkpoint's blocks now rather than when the JVM collects its RDD."""
    # Not a LogicalRDD (a future Spark): the context cleaner frees it later.
    with contextlib.suppress(Exception):
        df._jdf.queryExecution().analyzed().rdd().unpersist(False)


def conf_get(spark: Any, key: str, default: str) -> str:
    """The session's setting ``key``, or ``default`` where it is not set (as
    ``spark.conf.get(key, default)``, which a classic session answers in milliseconds: py4j
    resolves its overloads anew each call; asked whether the key is set, then for it, the JVM
    answers in a tenth of that)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is not None:
        try:
            jconf = jsession.conf()
            return str(jconf.get(key)) if jconf.contains(key) else default
        except Exception:  # a session without ``contains``: the general path
            pass
    try:
        value = spark.conf.get(key, default)
    except Exception:  # Connect raises for unknown keys on some versions
        return default
    return default if value is None else str(value)


def default_parallelism(spark: Any) -> int | None:
    """The cluster's task slots (``defaultParallelism``); ``None`` where the session cannot
    tell (Spark Connect has no SparkContext)."""
    try:
        return max(int(spark.sparkContext.defaultParallelism), 1)
    except Exception:  # Spark Connect
        return None


def empty_frame(spark: Any, schema: Any) -> DataFrame:
    """An empty DataFrame of ``schema`` (a Spark ``StructType``): on a classic session made in
    the JVM at once (``createDataFrame([])`` goes through an RDD of no rows)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return spark.createDataFrame([], schema)
    jschema = jsession.parseDataType(schema.json())
    return DataFrame(jsession.createDataFrame(spark._jvm.java.util.ArrayList(), jschema), spark)


def checkpoint_options(spark: Any) -> CheckpointOptions | None:
    """The session's checkpoint layout settings (``None`` when none is set): the reference's
    ``spark.databricks.delta.checkpoint.partSize`` and
    ``spark.databricks.delta.checkpointV2.topLevelFileFormat``."""
    part_size = conf_get(spark, "spark.databricks.delta.checkpoint.partSize", "")
    top_level = conf_get(spark, "spark.databricks.delta.checkpointV2.topLevelFileFormat", "")
    if not part_size and not top_level:
        return None
    try:
        size = int(part_size) if part_size else None
    except ValueError:
        raise errors.invalid_argument(
            f"spark.databricks.delta.checkpoint.partSize must be a number, not {part_size!r}"
        ) from None
    return CheckpointOptions(part_size=size, v2_top_level_format=top_level.lower() or "parquet")


WRITE_CHECKSUM_KEY = "spark.databricks.delta.writeChecksumFile.enabled"


def configure_log(spark: Any, log: SnapshotManagement) -> None:
    """Apply the session's settings for the log's own files to ``log`` before a command commits
    through it: the checkpoint layout (:func:`checkpoint_options`) and whether commits write
    version checksums (``spark.databricks.delta.writeChecksumFile.enabled``, default true).

    Raises:
        InvalidArgumentError: a setting that is not a number or a boolean where one is needed.
    """
    log.checkpoint_options = checkpoint_options(spark)
    enabled = conf_get(spark, WRITE_CHECKSUM_KEY, "true").strip().lower()
    if enabled not in ("true", "false"):
        raise errors.invalid_argument(
            f"{WRITE_CHECKSUM_KEY} must be true or false, not {enabled!r}"
        )
    log.write_checksum = enabled == "true"


def session_time_zone_id(spark: Any) -> str:
    """The session's effective ``spark.sql.session.timeZone``: when it is not set, Spark's
    default, the JVM's zone (``TimeZone.getDefault``), which is not always UTC."""
    key = "spark.sql.session.timeZone"
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is not None:
        # RuntimeConfig.get(key) answers a SQL setting's default when it is unset.
        return str(jsession.conf().get(key))
    value = spark.conf.get(key)
    return "UTC" if value is None else str(value)


def session_time_zone(spark: Any) -> dt.tzinfo:
    """:func:`session_time_zone_id` as a zone."""
    return time_zone(session_time_zone_id(spark))


# Hadoop's checksummed LocalFileSystem verifies ".<name>.crc" side files, which are not part of
# Delta and are often stale in copied tables; read local files raw. File-source options are merged
# into the Hadoop configuration of that read only.
RAW_LOCAL_FS_OPTIONS = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


# Delta's data files hold dates and timestamps in the proleptic Gregorian calendar, whoever wrote
# them. Spark before 4.0 refuses to read ancient values from files without Spark's footer metadata
# (pyarrow's, delta-rs's) unless told so; these read options say it for that read only.
CALENDAR_OPTIONS = {"datetimeRebaseMode": "CORRECTED", "int96RebaseMode": "CORRECTED"}


def reader(spark: Any) -> Any:
    """``spark.read`` with the options every deltalog file read uses."""
    return spark.read.options(**RAW_LOCAL_FS_OPTIONS, **CALENDAR_OPTIONS)


def get_or_create_session(master: str | None = None) -> Any:
    """The active session, or a new local one for deltalog's own commands and tests.

    ``SPARK_REMOTE`` (e.g. ``sc://host:15002`` or ``local[2]``) selects Spark Connect. Executors
    run this interpreter, so they import the same deltalog.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        ensure_worker_python(active)
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


# -- the Python that Spark's workers run -----------------------------------------------------

WORKER_PYTHON_ENV = "PYSPARK_PYTHON"
WORKER_PYTHON_CONF = "spark.pyspark.python"
_PYSPARK_DEFAULT_PYTHON = "python3"  # what PySpark runs when nothing is configured


def ensure_worker_python(spark: Any) -> str | None:
    """Make the Python workers of ``spark`` able to import deltalog; returns the interpreter
    they will run, or ``None`` when that is not this process's business.

    PySpark fixes the workers' interpreter when the session starts: ``PYSPARK_PYTHON`` from the
    environment, else ``python3`` from the PATH, which for a script run as ``venv/bin/python
    job.py`` (venv not activated) is another Python, without deltalog or pyarrow.

    * Classic session on a local master (``local``, ``local[N]``, ``local-cluster[...]``: every
      worker on this machine), ``PYSPARK_PYTHON`` unset: the workers run ``spark.pyspark.python``
      when the session conf has it (PySpark itself ignores it when Python starts the JVM), else
      :data:`sys.executable`. The choice is made on the live ``SparkContext`` (each UDF,
      ``mapInArrow`` and Python data source records it when created), so it applies to
      everything created afterwards, in every session of the process.
    * Spark Connect session served by this process (``remote("local[...]")``): the server took
      the interpreter from its environment at start-up and nothing can change it now. When
      neither ``PYSPARK_PYTHON`` nor ``PYSPARK_DRIVER_PYTHON`` was set and ``python3`` on the
      PATH cannot import deltalog, raises :class:`~deltalog.errors.InvalidArgumentError`
      (``DELTALOG_WORKER_PYTHON_UNSET``) saying what to set.
    * Anything else (a cluster, a remote Connect server): left alone, returns ``None``; the
      cluster's Python must have deltalog installed.
    """
    if is_connect(spark):
        _check_local_connect_python()
        return None
    sc = spark.sparkContext
    if not str(sc.master).startswith("local"):
        return None
    if not os.environ.get(WORKER_PYTHON_ENV) and sc.pythonExec == _PYSPARK_DEFAULT_PYTHON:
        sc.pythonExec = sc.getConf().get(WORKER_PYTHON_CONF) or sys.executable
    return str(sc.pythonExec)


def _check_local_connect_python() -> None:
    """Raise when a local Connect server (started by this process) has workers without
    deltalog; see :func:`ensure_worker_python`."""
    if not os.environ.get("SPARK_LOCAL_REMOTE"):  # set by PySpark when it starts the server
        return
    if os.environ.get(WORKER_PYTHON_ENV) or os.environ.get("PYSPARK_DRIVER_PYTHON"):
        return
    if _imports_deltalog(_PYSPARK_DEFAULT_PYTHON):
        return
    raise errors.InvalidArgumentError(
        "DELTALOG_WORKER_PYTHON_UNSET",
        f"this Spark Connect session's Python workers run {_PYSPARK_DEFAULT_PYTHON!r} from the "
        f"PATH, which cannot import deltalog (this script runs {sys.executable}); the server "
        "chose it when it started, so it cannot be changed now.",
        help=f"set {WORKER_PYTHON_ENV}={sys.executable} in the environment before the session "
        f'is created (os.environ["{WORKER_PYTHON_ENV}"] = sys.executable), or activate the '
        "virtual environment.",
    )


def _imports_deltalog(python: str) -> bool:
    """Whether ``python`` (a path or a name on the PATH) is this environment's interpreter or
    can import deltalog and pyarrow."""
    found = shutil.which(python)
    if found is None:
        return False
    if Path(found).parent == Path(sys.executable).parent:
        return True  # the same bin directory: the same environment
    try:
        probe = subprocess.run(
            [found, "-c", "import deltalog, pyarrow"], capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0
