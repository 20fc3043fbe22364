"""``spark.readStream.format("delta").load(path)``: the Delta table as a streaming source, on
PySpark's Python streaming data source API (``DataSourceStreamReader``, PySpark >= 4.0;
admission control and ``Trigger.AvailableNow`` from 4.2).

Spark keeps one reader per running query in a planner process on the driver; it asks it for
offsets and for the partitions between two offsets, and checkpoints the offsets (JSON) itself,
so a restarted query resumes from exactly where the last committed batch ended. All of that
is :class:`~deltalog.streaming.source_plan.SourcePlanner`; this module turns its batches into
Spark partitions and reads them on the executors with the batch source's per-file readers
(deletion vectors, column mapping, type widening, change-feed rows).

Admission control: the default read limit is ``ReadMaxFiles(maxFilesPerTrigger)`` (or
``ReadMaxBytes`` when only ``maxBytesPerTrigger`` is set); whenever Spark passes a limit other
than ``ReadAllAvailable`` (``Trigger.Once``), both options apply together, as in the reference.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from deltalog.delta_log import DeltaLog
from deltalog.paths import resolve
from deltalog.schema import parse_schema
from deltalog.spark.read.source_tasks import (
    ChangeTask,
    DeltaReader,
    FileGroup,
    FileTask,
    file_groups,
)
from deltalog.streaming.options import AdmissionLimits, SourceOptions, StreamConfig
from deltalog.streaming.source_plan import SourcePlanner, StreamBatch

# A micro-batch of small files is read by few tasks (each task start is the fixed cost); large
# batches still get one task per ``TASK_BYTES``.
STREAM_MIN_TASKS = 2


@dataclasses.dataclass(frozen=True)
class SnapshotChangeTask(InputPartition):
    """A file of the initial snapshot read as change-feed ``insert`` rows."""

    file: FileTask
    version: int
    timestamp: int


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets and partitions of one streaming read (see the module docstring)."""

    def __init__(self, config: StreamConfig) -> None:
        self.config = config
        self.options = SourceOptions.from_options(dict(config.options), table=config.table_root)
        self._planner: SourcePlanner | None = None

    @property
    def planner(self) -> SourcePlanner:
        if self._planner is None:
            c = self.config
            self._planner = SourcePlanner(
                DeltaLog.for_table(c.path), self.options, parse_schema(c.schema_json), c.table_id
            )
        return self._planner

    def initialOffset(self) -> dict:
        return self.planner.initial_offset().to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_files is not None:
            return ReadMaxFiles(self.options.max_files)
        assert self.options.max_bytes is not None
        return ReadMaxBytes(self.options.max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        planner = self.planner
        limits = (
            None
            if isinstance(limit, ReadAllAvailable)
            else AdmissionLimits(self.options.max_files, self.options.max_bytes)
        )
        return planner.latest_offset(planner.parse(start), limits).to_json()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        planner = self.planner
        batch = planner.batch(planner.parse(start), planner.parse(end))
        tasks, sizes = self._tasks(batch)
        return file_groups(tasks, sizes, min_tasks=STREAM_MIN_TASKS)

    def commit(self, end: dict) -> None:
        self.planner.forget_before(self.planner.parse(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FileGroup):
            return
        c = self.config
        reader = DeltaReader(c.table_root, c.schema_json, list(c.partition_columns), c.mode, [])
        for task in partition.files:
            if isinstance(task, SnapshotChangeTask):
                yield from _as_inserts(reader, task).to_batches()
            else:
                yield from reader.read(FileGroup((task,)))

    # -- planning -------------------------------------------------------------------------

    def _tasks(self, batch: StreamBatch) -> tuple[list[Any], list[int]]:
        root = self.config.table_root
        tasks: list[Any] = []
        sizes: list[int] = []
        if batch.snapshot_files is not None:
            for row in batch.snapshot_files.to_pylist():
                task = _file_task(root, row)
                if self.options.read_change_feed:
                    tasks.append(
                        SnapshotChangeTask(task, batch.snapshot_version, batch.snapshot_timestamp)
                    )
                else:
                    tasks.append(task)
                sizes.append(int(row["size"] or 0))
        for commit in batch.commits:
            if not self.options.read_change_feed:
                for row in commit.files.to_pylist():
                    tasks.append(_file_task(root, row))
                    sizes.append(int(row["size"] or 0))
                continue

            # Plan rows carry their deletion vectors as descriptors: the task reads them.
            for spec in commit.files.drop_columns(["index"]).to_pylist():
                spec["partitionValues"] = dict(spec["partitionValues"] or [])
                tasks.append(ChangeTask(json.dumps(spec)))
                sizes.append(1)
        return tasks, sizes


def _file_task(root: str, row: dict[str, Any]) -> FileTask:
    return FileTask(
        resolve(root, row["path"]),
        json.dumps(dict(row["partitionValues"] or [])),
        None if row["deletionVector"] is None else json.dumps(row["deletionVector"]),
    )


def _as_inserts(reader: DeltaReader, task: SnapshotChangeTask) -> pa.Table:
    """A snapshot file's rows with ``_change_type=insert`` and the snapshot's version and
    timestamp."""
    # Imported here: the change feed brings pyarrow.compute (~30 ms), which the planner process
    # Spark starts with each streaming query needs only for a change-feed stream.
    from deltalog.change_data_feed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, INSERT

    table = pa.concat_tables(
        [pa.Table.from_batches([b]) for b in reader.read(FileGroup((task.file,)))]
        or [parse_schema(reader.schema_json).to_arrow().empty_table()]
    )
    n = table.num_rows
    stamp = pa.array([task.timestamp * 1000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    table = table.append_column(CHANGE_TYPE, pa.array([INSERT] * n, pa.string()))
    table = table.append_column(COMMIT_VERSION, pa.array([task.version] * n, pa.int64()))
    return table.append_column(COMMIT_TIMESTAMP, stamp)
