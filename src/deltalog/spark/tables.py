"""delta-spark's read API, same names: ``DeltaTable.forPath(spark, path).toDF()`` and friends."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from deltalog import errors
from deltalog.delta_log import DeltaLog
from deltalog.log.history import parse_timestamp
from deltalog.snapshot import Snapshot
from deltalog.spark.scan import read_snapshot
from deltalog.spark.session import session_time_zone

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


class DeltaTable:
    """A Delta table for reading, as in delta-spark (``delta.tables.DeltaTable``)."""

    def __init__(self, spark: SparkSession, log: DeltaLog, alias: str | None = None) -> None:
        self._spark = spark
        self._log = log
        self._alias = alias

    @classmethod
    def forPath(
        cls,
        sparkSession: SparkSession,
        path: str,
        hadoopConf: dict[str, str] | None = None,
    ) -> DeltaTable:
        """The table at ``path``.

        Raises:
            TableNotFoundError: ``path`` is not a Delta table.
        """
        log = DeltaLog.for_table(path)
        log.update()
        return cls(sparkSession, log)

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """Whether ``identifier`` (a path) holds a Delta table."""
        try:
            DeltaLog.for_table(identifier).update()
        except errors.TableNotFoundError:
            return False
        return True

    def toDF(self) -> DataFrame:
        """The current snapshot's rows."""
        df = read_snapshot(self._spark, self._log.update(), self._log.store)
        return df.alias(self._alias) if self._alias else df

    def alias(self, aliasName: str) -> DeltaTable:
        return DeltaTable(self._spark, self._log, aliasName)

    def history(self, limit: int | None = None) -> DataFrame:
        """Commits newest first, with delta-spark's columns."""
        rows = []
        for record in self._log.history(limit):
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
        return self._spark.createDataFrame(rows, HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        """One row describing the current version, with delta-spark's columns."""
        s = self._log.update()
        md, proto = s.metadata, s.protocol
        features = sorted(set(proto.reader_features or ()) | set(proto.writer_features or ()))
        row: tuple[Any, ...] = (
            "delta",
            md.id,
            md.name,
            md.description,
            f"file:{s.table_root}",
            None if md.created_time is None else _utc(md.created_time),
            _utc(s.timestamp),
            list(md.partition_columns),
            [],
            s.num_of_files,
            s.size_in_bytes,
            dict(md.configuration),
            proto.min_reader_version,
            proto.min_writer_version,
            features,
        )
        return self._spark.createDataFrame([row], DETAIL_SCHEMA)


def read_table(
    spark: SparkSession,
    path: str,
    *,
    version: int | None = None,
    timestamp: str | int | None = None,
    where: str | None = None,
) -> DataFrame:
    """The rows of the table at ``path``: latest, or as of a version or a timestamp.

    ``where`` (a SQL filter) is applied to the rows, and files that cannot hold a matching row
    (by partition values or min/max/null-count statistics) are never opened.

    Raises:
        InvalidArgumentError: both ``version`` and ``timestamp`` are given.
    """
    if version is not None and timestamp is not None:
        raise errors.invalid_argument("Cannot specify both version and timestamp", table=path)
    log = DeltaLog.for_table(path)
    snapshot: Snapshot
    if version is not None:
        snapshot = log.get_snapshot_at(version)
    elif timestamp is not None:
        zone = session_time_zone(spark)
        ms = timestamp if isinstance(timestamp, int) else parse_timestamp(timestamp, zone)
        snapshot = log.get_snapshot_at_timestamp(ms)
    else:
        snapshot = log.update()
    return read_snapshot(spark, snapshot, log.store, where)


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    import json

    return json.dumps(value)


def _struct(value: dict[str, Any] | None, struct: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    return tuple(value.get(f.name) for f in struct.fields)


def read_changes(
    spark: SparkSession,
    path: str,
    *,
    starting_version: int | None = None,
    starting_timestamp: str | None = None,
    ending_version: int | None = None,
    ending_timestamp: str | None = None,
) -> DataFrame:
    """The change data feed of the table at ``path`` (delta-spark's ``readChangeFeed`` read),
    through Spark's parquet reader: the table's columns plus ``_change_type``,
    ``_commit_version`` and ``_commit_timestamp``.

    A version bound wins over a timestamp bound for the same end; timestamps without a zone
    are in the session time zone.

    Raises:
        DeltaError: the typed errors of the change feed's version resolution and planning.
    """
    from deltalog.spark.changes import read_changes as read

    options = {
        "startingVersion": starting_version,
        "startingTimestamp": starting_timestamp,
        "endingVersion": ending_version,
        "endingTimestamp": ending_timestamp,
    }
    given = {k: str(v) for k, v in options.items() if v is not None}
    return read(spark, DeltaLog.for_table(path), given)
