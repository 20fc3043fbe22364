"""The Delta format as a Python data source (Spark >= 4.0) over deltalog snapshots.

``spark.read.format("delta").load(path)`` gets the plan of ``DeltaTable.toDF()`` (Spark's own
parquet scan, :mod:`deltalog.spark.read.load`); this source serves what only it can read (paths
Spark's file source cannot take, a user-specified schema) and
:func:`deltalog.spark.patches.dataframe_io.load_with_python_source`.

The driver resolves the snapshot (``versionAsOf`` / ``timestampAsOf``, delta-spark's option names,
case-insensitive) and plans one task per data file: its path, typed partition values and deletion
vector. Executors read each file with pyarrow, drop deleted rows, map physical columns to logical
ones (by name or parquet field id, nested too), cast to the table's current types (type widening)
and add the partition columns.

No filter pushdown: with ``spark.sql.python.filterPushdown.enabled`` PySpark 4.3 reuses a scan
pruned for one query in later queries of the same source (checked: an unfiltered count after a
filtered one returned the filtered count), so pruning there would give wrong answers.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.change_data_feed import (
    CdfBounds,
    ChangePlan,
    cdc_read_schema,
    is_cdc_read,
    plan_changes,
    read_change_file,
    resolve_range,
)
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.delta_log import DeltaLog
from deltalog.paths import resolve
from deltalog.scan.file_groups import MIN_TASKS, group_files
from deltalog.schema import (
    StructType,
    parse_schema,
    read_schema,
)
from deltalog.spark.read.load import STREAMING_MARKER, read_options, snapshot_for, storage_of
from deltalog.spark.schema import to_spark_schema
from deltalog.storage import StorageOptions, is_remote, store_for
from deltalog.storage import register as register_storage
from deltalog.streaming.options import SourceOptions, StreamConfig

_FIELD_ID = b"PARQUET:field_id"


def register(spark: Any) -> str:
    """Register the data source; returns the format name to use.

    ``"delta"``, unless the session already has a JVM Delta source (delta-spark), in which case
    the source is registered as ``"deltalog"`` only, so delta-spark keeps working.
    """
    from deltalog.spark.patches.dataframe_io import install

    name = "deltalog" if _jvm_delta_present(spark) else "delta"
    source = DeltaDataSource if name == "delta" else DeltalogDataSource
    spark.dataSource.register(source)
    install(name, reads=True)
    return name


@dataclasses.dataclass(frozen=True)
class FileTask(InputPartition):
    """One data file to read: path, partition values (JSON), deletion vector (JSON)."""

    path: str
    partition_values: str
    deletion_vector: str | None


@dataclasses.dataclass(frozen=True)
class ChangeTask(InputPartition):
    """One file read of a change-feed plan: the plan row (JSON) and its selected rows."""

    spec: str
    rows: tuple[int, ...] | None


@dataclasses.dataclass(frozen=True)
class FileGroup(InputPartition):
    """The files one Spark task reads, in order."""

    files: tuple[FileTask | ChangeTask, ...]


def file_groups(
    tasks: Sequence[FileTask | ChangeTask], sizes: list[int], min_tasks: int = MIN_TASKS
) -> list[FileGroup]:
    """The tasks' files packed into Spark partitions (see :mod:`deltalog.scan.file_groups`)."""
    return [FileGroup(g.files) for g in group_files(tasks, sizes, min_tasks)]


class DeltaDataSource(DataSource):
    """The ``delta`` format, read side."""

    @classmethod
    def name(cls) -> str:
        return "delta"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        opts = read_options(options)
        # Object-store credentials and endpoints (delta-rs's names): never in error messages.
        self._storage = storage_of(opts)
        self._cdf: ChangePlan | None = None
        self._stream: Any = None
        if opts.get(STREAMING_MARKER) == "true":
            self._plan_stream(opts)
            return
        if is_cdc_read(opts):
            self._plan_changes(opts)
            return
        snapshot = snapshot_for(opts, storage=self._storage)
        self._table_root = snapshot.table_root
        self._schema_json = snapshot.schema.to_json()
        self._partition_columns = list(snapshot.partition_columns)
        self._mode = snapshot.column_mapping_mode
        files = snapshot.all_files_arrow().select(
            ["path", "partitionValues", "deletionVector", "size"]
        )
        rows = files.to_pylist()
        tasks = [
            FileTask(
                resolve(snapshot.table_root, r["path"]),
                json.dumps(dict(r["partitionValues"] or [])),
                None if r["deletionVector"] is None else json.dumps(r["deletionVector"]),
            )
            for r in rows
        ]
        self._tasks = file_groups(tasks, [int(r["size"] or 0) for r in rows])

    def _plan_changes(self, opts: dict[str, str]) -> None:
        """A change-feed read: the plan's file reads become the tasks."""
        log = DeltaLog.for_table(opts["path"], storage_options=self._storage.as_dict())
        plan = plan_changes(
            log, resolve_range(log, CdfBounds.from_options(opts, table=log.table_root))
        )
        snapshot = plan.snapshot
        self._cdf = plan
        self._table_root = snapshot.table_root
        self._schema_json = snapshot.schema.to_json()
        self._partition_columns = list(snapshot.partition_columns)
        self._mode = snapshot.column_mapping_mode
        by_spec = plan.rows_by_spec()
        tasks = []
        for spec in plan.files.to_pylist():
            rows = by_spec.get(spec["spec_id"])
            spec["partitionValues"] = dict(spec["partitionValues"] or [])
            tasks.append(
                ChangeTask(json.dumps(spec), None if rows is None else tuple(rows.tolist()))
            )
        self._tasks = file_groups(tasks, [1] * len(tasks))

    def _plan_stream(self, opts: dict[str, str]) -> None:
        """A streaming read: the table as it is now gives the schema and the table id; the
        batches are planned by the stream reader."""
        log = DeltaLog.for_table(opts["path"])
        snapshot = log.update()
        options = {k: v for k, v in opts.items() if k not in ("path", STREAMING_MARKER)}
        parsed = SourceOptions.from_options(options, table=log.table_root)
        self._stream_cdf = parsed.read_change_feed
        self._table_root = snapshot.table_root
        self._schema_json = snapshot.schema.to_json()
        self._partition_columns = list(snapshot.partition_columns)
        self._mode = snapshot.column_mapping_mode
        self._tasks = []
        self._stream = StreamConfig(
            opts["path"],
            snapshot.table_root,
            snapshot.metadata.id,
            self._schema_json,
            tuple(snapshot.partition_columns),
            self._mode,
            tuple(sorted(options.items())),
        )

    def streamReader(self, schema: Any) -> Any:
        try:
            from deltalog.spark.streaming.source import DeltaStreamReader
        except ImportError:  # pyspark.sql.streaming.datasource (read limits) arrived in 4.2
            raise errors.UnsupportedFeatureError(
                "DELTA_STREAMING_SOURCE_UNSUPPORTED",
                "streaming reads of the delta format need PySpark 4.2 or later (admission "
                "control for Python streaming sources).",
                table=self._table_root,
                help="upgrade PySpark, or read in batches with startingVersion on the change feed.",
            ) from None
        if self._stream is None:
            raise errors.invalid_argument(
                "a streaming read of the delta format needs deltalog's bridge: call "
                "deltalog.register(spark) before spark.readStream"
            )
        return DeltaStreamReader(self._stream)

    def schema(self) -> Any:
        table_schema = parse_schema(self._schema_json)
        if self._stream is not None and self._stream_cdf:
            return to_spark_schema(cdc_read_schema(table_schema))
        if self._cdf is not None:
            return to_spark_schema(cdc_read_schema(table_schema))
        return to_spark_schema(read_schema(table_schema))

    def reader(self, schema: Any) -> DataSourceReader:
        return DeltaReader(
            self._table_root,
            self._schema_json,
            self._partition_columns,
            self._mode,
            self._tasks,
            self._storage,
        )


class DeltalogDataSource(DeltaDataSource):
    """The same source under the name ``deltalog`` (when delta-spark owns ``delta``)."""

    @classmethod
    def name(cls) -> str:
        return "deltalog"


class DeltaReader(DataSourceReader):
    """Plans one partition per group of files; reads them with pyarrow on the executor."""

    def __init__(
        self,
        table_root: str,
        schema_json: str,
        partition_columns: list[str],
        mode: str,
        tasks: list[FileGroup],
        storage: StorageOptions | None = None,
    ) -> None:
        self.table_root = table_root
        self.storage = storage or StorageOptions()
        self.schema_json = schema_json
        self.partition_columns = partition_columns
        self.mode = mode
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        return list(self.tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FileGroup):
            return  # a table without files: Spark still reads one (empty) partition
        if self.storage.items and is_remote(self.table_root):
            register_storage(self.table_root, self.storage)  # this worker's store_for finds them
        schema = parse_schema(self.schema_json)
        for task in partition.files:
            if isinstance(task, ChangeTask):
                yield from self._read_change(schema, task).to_batches()
            else:
                yield from read_file(
                    self.table_root, schema, self.partition_columns, self.mode, task
                ).to_batches()

    def _read_change(self, schema: StructType, task: ChangeTask) -> pa.Table:
        import numpy as np

        layout = TableLayout(self.table_root, schema, tuple(self.partition_columns), self.mode)
        rows = None if task.rows is None else np.array(task.rows, dtype=np.int64)
        return read_change_file(layout, json.loads(task.spec), rows)


def read_file(
    table_root: str, schema: StructType, partition_columns: list[str], mode: str, task: FileTask
) -> pa.Table:
    """One data file as logical rows (deleted rows dropped, partition columns added)."""
    data = read_parquet(task.path, table_root)
    if task.deletion_vector is not None:
        descriptor = DeletionVectorDescriptor.from_dict(json.loads(task.deletion_vector))
        deleted = read_deletion_vector(store_for(table_root), table_root, descriptor)
        data = select_rows(data, deleted, keep_listed=False)
    values = json.loads(task.partition_values)
    return to_logical(data, schema, partition_columns, mode, values)


def _jvm_delta_present(spark: Any) -> bool:
    """Whether the session resolves ``format("delta")`` to a JVM source (delta-spark)."""
    from deltalog.spark.patches.dataframe_io import load_with_python_source

    try:
        probe = "/deltalog-probe-path-that-does-not-exist"
        load_with_python_source(spark.read.format("delta"), probe).schema  # noqa: B018
    except Exception as e:  # the analyzer answers without running a job
        message = str(e)
        if "PYTHON_DATA_SOURCE" in message:  # our own source, registered earlier
            return False
        return "DATA_SOURCE_NOT_FOUND" not in message and "Failed to find" not in message
    return True
