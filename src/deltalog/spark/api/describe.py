"""``DeltaTable.history()`` and ``DeltaTable.detail()``: the table's commits and its current
state as rows with delta-spark's columns (also ``DESCRIBE HISTORY`` / ``DESCRIBE DETAIL``)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from deltalog.commands.optimize.plan import clustering_columns
from deltalog.delta_log import DeltaLog
from deltalog.features import reader_features, writer_features
from deltalog.paths import location_uri

HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("version", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("userId", T.StringType()),
        T.StructField("userName", T.StringType()),
        T.StructField("operation", T.StringType()),
        T.StructField("operationParameters", T.MapType(T.StringType(), T.StringType())),
        T.StructField(
            "job",
            T.StructType(
                [
                    T.StructField(n, T.StringType())
                    for n in ("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType")
                ]
            ),
        ),
        T.StructField("notebook", T.StructType([T.StructField("notebookId", T.StringType())])),
        T.StructField("clusterId", T.StringType()),
        T.StructField("readVersion", T.LongType()),
        T.StructField("isolationLevel", T.StringType()),
        T.StructField("isBlindAppend", T.BooleanType()),
        T.StructField("operationMetrics", T.MapType(T.StringType(), T.StringType())),
        T.StructField("userMetadata", T.StringType()),
        T.StructField("engineInfo", T.StringType()),
    ]
)


DETAIL_SCHEMA = T.StructType(
    [
        T.StructField("format", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField("name", T.StringType()),
        T.StructField("description", T.StringType()),
        T.StructField("location", T.StringType()),
        T.StructField("createdAt", T.TimestampType()),
        T.StructField("lastModified", T.TimestampType()),
        T.StructField("partitionColumns", T.ArrayType(T.StringType())),
        T.StructField("clusteringColumns", T.ArrayType(T.StringType())),
        T.StructField("numFiles", T.LongType()),
        T.StructField("sizeInBytes", T.LongType()),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType())),
        T.StructField("minReaderVersion", T.IntegerType()),
        T.StructField("minWriterVersion", T.IntegerType()),
        T.StructField("tableFeatures", T.ArrayType(T.StringType())),
    ]
)


def history(spark: SparkSession, log: DeltaLog, limit: int | None = None) -> DataFrame:
    """Commits newest first, with delta-spark's columns."""
    rows = []
    for record in log.history(limit):
        info = record.commit_info
        ci = info.to_dict() if info is not None else {}
        params = ci.get("operationParameters")
        rows.append(
            (
                record.version,
                _utc(record.timestamp),
                ci.get("userId"),
                ci.get("userName"),
                ci.get("operation"),
                None if params is None else {k: _text(v) for k, v in params.items()},
                _struct(ci.get("job"), HISTORY_SCHEMA["job"].dataType),
                _struct(ci.get("notebook"), HISTORY_SCHEMA["notebook"].dataType),
                ci.get("clusterId"),
                ci.get("readVersion"),
                ci.get("isolationLevel"),
                ci.get("isBlindAppend"),
                ci.get("operationMetrics"),
                ci.get("userMetadata"),
                ci.get("engineInfo"),
            )
        )
    return spark.createDataFrame(rows, HISTORY_SCHEMA)


def detail(spark: SparkSession, log: DeltaLog) -> DataFrame:
    """One row describing the current version, with delta-spark's columns."""
    s = log.update()
    md, proto = s.metadata, s.protocol
    # delta-spark's implicitlyAndExplicitlySupportedFeatures: legacy versions imply theirs.
    features = sorted(reader_features(proto) | writer_features(proto))
    row: tuple[Any, ...] = (
        "delta",
        md.id,
        md.name,
        md.description,
        location_uri(s.table_root),
        None if md.created_time is None else _utc(md.created_time),
        _utc(s.timestamp),
        list(md.partition_columns),
        list(clustering_columns(s)),
        s.num_of_files,
        s.size_in_bytes,
        dict(md.configuration),
        proto.min_reader_version,
        proto.min_writer_version,
        features,
    )
    return spark.createDataFrame([row], DETAIL_SCHEMA)


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value

    return json.dumps(value)


def _struct(value: dict[str, Any] | None, struct: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    return tuple(value.get(f.name) for f in struct.fields)
