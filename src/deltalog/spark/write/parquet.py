"""Data files written by Spark's own parquet writer (the fast path of ``format("delta")``).

Rows never leave the JVM: the DataFrame is written with ``df.write.parquet`` (partition
directories by ``partitionBy``) into a staging folder of its own inside the table, so the files
of this write and no other are known; each file is then moved to its place in the table, and
its ``add`` action is built on the driver from its path (partition values), its size and its
parquet footer (statistics: :meth:`deltalog.write.stats.StatsCollector.update_from_footer`).

Timestamps are written as INT64 microseconds (Spark's default INT96 has no statistics, and the
``add`` statistics come from the footers), without Hadoop's ``.crc`` side files or ``_SUCCESS``.
The timestamp type is a write option from Spark 4.2 (SPARK-56414); before, Spark takes it from
the session, as it takes the calendar of dates and timestamps (proleptic Gregorian, which Spark
before 4.0 refuses to write for ancient values by default), so a classic session writes from a
clone of itself
(:mod:`~deltalog.spark.session_clone`) and Spark Connect leaves tables with timestamps to the
Python writer: the user's session never changes. A crashed write leaves only the staging folder,
which no commit names (VACUUM removes it once it is older than the retention period).

Used when the table has no column mapping (Spark cannot write field ids into nested columns
under physical names through the DataFrame API); otherwise the Python writer in
``mapInArrow`` tasks writes the files (:mod:`deltalog.spark.write.batch`).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.actions import AddFile
from deltalog.commands.write.identity import IdentityColumn
from deltalog.commands.write.write_into_delta import WritePlan
from deltalog.partition_values import parse_partition_value
from deltalog.schema import ArrayType, DataType, MapType, PrimitiveType, StructField, StructType
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import RAW_LOCAL_FS_OPTIONS, conf_get, is_connect, session_time_zone
from deltalog.spark.session_clone import adopt, clone_with, spark_version
from deltalog.spark.storage import jvm_reads
from deltalog.storage import is_remote, store_for
from deltalog.storage.base import LogStore
from deltalog.timestamps import parse_datetime, time_zone
from deltalog.write.partitioning import (
    HIVE_DEFAULT_PARTITION,
    encode_log_path,
    serialize_partition_value,
)
from deltalog.write.stats import StatsCollector

STAGING_PREFIX = "deltalog-staging-"
_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
_MICROS = "TIMESTAMP_MICROS"
_TIMESTAMP_OPTION_SINCE = (4, 2)  # the first Spark whose parquet writer takes it as an option
# Dates and timestamps are written in the proleptic Gregorian calendar, as Delta's readers
# expect. Spark before 4.0 refuses ancient values by default (EXCEPTION), and LEGACY would
# rebase them to the hybrid Julian calendar; neither is a write option.
_REBASE = "spark.sql.parquet.datetimeRebaseModeInWrite"
_CORRECTED = "CORRECTED"
# Variant shredding (delta-spark's VariantShreddingShims, TransactionalWrite): a write option.
_ENABLE_SHREDDING = "delta.enableVariantShredding"
_INFER_SHREDDING = "spark.sql.variant.inferShreddingSchema"
_FORCE_SHREDDING = "spark.sql.variant.forceShreddingSchemaForTest"
WRITER_CONF = "spark.deltalog.writer"  # auto (default), spark or python: which writer to use


def can_write(spark: SparkSession, plan: WritePlan) -> bool:
    """Whether Spark's parquet writer can write this table's files."""
    choice = conf_get(spark, WRITER_CONF, "auto").lower()
    if choice == "python" or not jvm_reads(spark, plan.layout.table_root):
        return False
    if is_connect(spark) and _session_settings(spark, plan.layout.schema):
        return False  # no session of the write's own to give the settings to
    if plan.layout.carried_columns:
        return False  # row ids outside the table's schema: deltalog's file writer carries them
    if plan.layout.materialize_partition_columns:
        return False  # Spark's partitionBy leaves the partition columns out of the files
    return plan.layout.column_mapping_mode == "none"


def _session_settings(spark: Any, schema: StructType) -> dict[str, str]:
    """The session settings a write of ``schema`` needs and the user's session lacks: the
    timestamp type (Spark before 4.2 ignores the write option; only timestamp columns care)
    and the proleptic Gregorian calendar for dates and timestamps."""
    settings = {}
    if _holds(schema, {"timestamp"}) and spark_version(spark) < _TIMESTAMP_OPTION_SINCE:
        settings[_TIMESTAMP_TYPE] = _MICROS
    # The schema first: reading the session's calendar costs a py4j conf call (~6 ms).
    if _holds(schema, {"date", "timestamp"}) and _calendar(spark) != _CORRECTED:
        settings[_REBASE] = _CORRECTED
    return settings


def _calendar(spark: Any) -> str:
    """The session's effective ``datetimeRebaseModeInWrite``: Spark's default when unset
    (``EXCEPTION`` before 4.0, ``CORRECTED`` since), which ``conf.get(key, default)`` hides."""
    try:
        return str(spark.conf.get(_REBASE)).upper()
    except Exception:  # an old Connect server may refuse the key: its version's default
        return "EXCEPTION" if spark_version(spark) < (4, 0) else _CORRECTED


def _holds(t: DataType, names: set[str]) -> bool:
    """Whether ``t`` is or holds a primitive type named in ``names``."""
    if isinstance(t, StructType):
        return any(_holds(f.type, names) for f in t.fields)
    if isinstance(t, ArrayType):
        return _holds(t.element_type, names)
    if isinstance(t, MapType):
        return _holds(t.key_type, names) or _holds(t.value_type, names)
    return isinstance(t, PrimitiveType) and t.name in names


def write_files(
    df: Any, plan: WritePlan, identity: list[IdentityColumn]
) -> tuple[list[AddFile], dict[str, tuple[int, int]]]:
    """Write ``df`` (columns by the table's names) as the table's data files; returns their
    ``add`` actions and, per generated identity column, the lowest and highest value written."""
    layout = plan.layout
    spark = df.sparkSession
    store = store_for(layout.table_root)
    staging = f"{layout.table_root}/{STAGING_PREFIX}{uuid.uuid4().hex}"
    frame = _aligned(df, layout.schema)
    settings = _session_settings(spark, layout.schema)
    if settings:
        clone = clone_with(spark, settings)
        assert clone is not None, "can_write leaves this case to the Python writer on Connect"
        frame = adopt(clone, frame)
    try:
        _writer(frame, plan).parquet(staging)
        files = _move_into_table(store, staging, layout.table_root)
    finally:
        store.delete_directory(staging)
    zone = str(session_time_zone(spark))
    adds: list[AddFile] = []
    ranges: dict[str, tuple[int, int]] = {}
    for relative in files:
        add, file_ranges = _add(store, plan, relative, zone, identity)
        adds.append(add)
        for name, (lo, hi) in file_ranges.items():
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))
    return adds, ranges


def _aligned(df: Any, schema: StructType) -> Any:
    """``df`` with the table's columns in the table's spelling (missing nullable columns as
    nulls of their type; ``void`` columns, which parquet cannot hold, left out)."""
    present = {c.lower(): c for c in df.columns}
    columns = []
    for f in schema.fields:
        if isinstance(f.type, PrimitiveType) and f.type.name == "void":
            continue
        name = present.get(f.name.lower())
        if name is not None:
            columns.append(F.col(f"`{name}`").alias(f.name))
        else:
            spark_type = to_spark_schema(StructType((_plain(f),)))[0].dataType
            columns.append(F.lit(None).cast(spark_type).alias(f.name))
    return df.select(*columns)


def _plain(f: StructField) -> StructField:
    return StructField(f.name, f.type, True, {})


def _writer(df: Any, plan: WritePlan) -> Any:
    layout = plan.layout
    writer = (
        df.write.mode("error")  # Connect knows "error", not "errorifexists"
        .options(**RAW_LOCAL_FS_OPTIONS)
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
        .option("compression", layout.compression)
        .option(_TIMESTAMP_TYPE, _MICROS)
    )
    if layout.partition_columns:
        writer = writer.partitionBy(*layout.partition_columns)
    if layout.max_records_per_file:
        writer = writer.option("maxRecordsPerFile", str(layout.max_records_per_file))
    return writer.options(**_shredding_options(df.sparkSession, plan))


def _shredding_options(spark: Any, plan: WritePlan) -> dict[str, str]:
    """Whether Spark's writer may shred variants, as delta-spark tells it: only where
    ``delta.enableVariantShredding`` is true (PROTOCOL.md "Variant Shredding"; other tables take
    unshredded variants). Spark 4.1+ infers a shredding schema by default; the option is ignored
    before. A schema forced for tests (which overrides the option) is refused on other tables.

    Raises:
        UnsupportedFeatureError: DELTA_SHREDDING_TABLE_PROPERTY_DISABLED.
    """
    layout = plan.layout
    if not _holds(layout.schema, {"variant"}):
        return {}
    raw = layout.configuration.get(_ENABLE_SHREDDING, "false")
    enabled = raw.strip().lower() == "true"
    if not enabled and conf_get(spark, _FORCE_SHREDDING, ""):
        raise errors.shredding_table_property_disabled(layout.table_root)
    return {_INFER_SHREDDING: str(enabled).lower()}


def _move_into_table(store: LogStore, staging: str, root: str) -> list[str]:
    """Move every data file of the staging folder to the same relative place in the table;
    returns the relative paths."""
    moved = []
    for info in store.list_recursive(staging):
        relative = info.path[len(staging) + 1 :]
        parts = relative.split("/")
        if not relative.endswith(".parquet") or any(p.startswith(("_", ".")) for p in parts):
            continue
        store.rename(info.path, f"{root}/{relative}")
        moved.append(relative)
    return sorted(moved)


def _add(
    store: LogStore, plan: WritePlan, relative: str, zone: str, identity: list[IdentityColumn]
) -> tuple[AddFile, dict[str, tuple[int, int]]]:
    layout = plan.layout
    path = f"{layout.table_root}/{relative}"
    info = store.stat(path)
    footer = pq.read_metadata(store.open_input(path) if is_remote(path) else path)  # type: ignore[attr-defined]
    stats = StatsCollector.for_table(
        layout.schema,
        layout.partition_columns,
        layout.configuration,
        tight_bounds=layout.stats_tight_bounds,
    )
    stats.update_from_footer(footer)
    add = AddFile(
        path=encode_log_path(relative),
        partition_values=_partition_values(layout.schema, relative, zone),
        size=info.size,
        modification_time=info.modification_time,
        data_change=layout.data_change,
        stats=stats.to_json(),
    )
    return add, _identity_ranges(footer, identity)


def _partition_values(schema: StructType, relative: str, zone: str) -> dict[str, str | None]:
    """The log's partition values of a file, from the directories Spark wrote it in (values
    as Spark prints them, timestamps in the session time zone)."""
    values: dict[str, str | None] = {}
    for part in relative.split("/")[:-1]:
        key, _, raw = part.partition("=")
        name, text = unquote(key), unquote(raw)
        field = schema.field(name)
        values[field.name] = _log_value(text, field, zone)
    return values


def _log_value(text: str, field: StructField, zone: str) -> str | None:
    if text == HIVE_DEFAULT_PARTITION:
        return None
    if isinstance(field.type, PrimitiveType) and field.type.name == "timestamp":
        value = parse_datetime(text)
        if value.tzinfo is None:
            value = value.replace(tzinfo=time_zone(zone))
        return serialize_partition_value(value, field.type)
    return serialize_partition_value(parse_partition_value(text, field.type), field.type)


def _identity_ranges(
    footer: pq.FileMetaData, identity: list[IdentityColumn]
) -> dict[str, tuple[int, int]]:
    ranges: dict[str, tuple[int, int]] = {}
    names = [footer.schema.column(i).path for i in range(footer.num_columns)]
    for c in identity:
        index = names.index(c.name)
        for g in range(footer.num_row_groups):
            s = footer.row_group(g).column(index).statistics
            if s is not None and s.has_min_max:
                lo, hi = ranges.get(c.name, (s.min, s.max))
                ranges[c.name] = (min(lo, s.min), max(hi, s.max))
    return ranges
