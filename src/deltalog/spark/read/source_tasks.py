"""The tasks of the Delta Python data source and the reader that runs them on the executors.

A batch read (:mod:`deltalog.spark.read.data_source`) and a streaming read
(:mod:`deltalog.spark.read.stream_source`) both plan :class:`FileGroup` partitions: the files one
Spark task reads, each a :class:`FileTask` (a data file: path, typed partition values, deletion
vector) or a :class:`ChangeTask` (one file read of a change-feed plan). :class:`DeltaReader`
reads each file with pyarrow, drops deleted rows, maps physical columns to logical ones and adds
the partition columns.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from deltalog.actions import DeletionVectorDescriptor
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.geospatial import to_spark_arrow_table
from deltalog.scan.file_groups import MIN_TASKS, group_files
from deltalog.schema import StructType, parse_schema
from deltalog.storage import StorageOptions, is_remote, store_for
from deltalog.storage import register as register_storage


@dataclasses.dataclass(frozen=True)
class FileTask(InputPartition):
    """One data file to read: path, partition values (JSON), deletion vector (JSON)."""

    path: str
    partition_values: str
    deletion_vector: str | None


@dataclasses.dataclass(frozen=True)
class ChangeTask(InputPartition):
    """One file read of a change-feed plan: the plan row (JSON), deletion vectors as
    descriptors; the task reads them (O(files) on the driver, whatever the vectors hold)."""

    spec: str


@dataclasses.dataclass(frozen=True)
class FileGroup(InputPartition):
    """The files one Spark task reads, in order."""

    files: tuple[FileTask | ChangeTask, ...]


def file_groups(
    tasks: Sequence[FileTask | ChangeTask], sizes: list[int], min_tasks: int = MIN_TASKS
) -> list[FileGroup]:
    """The tasks' files packed into Spark partitions (see :mod:`deltalog.scan.file_groups`)."""
    return [FileGroup(g.files) for g in group_files(tasks, sizes, min_tasks)]


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
                rows = self._read_change(schema, task)
            else:
                rows = read_file(self.table_root, schema, self.partition_columns, self.mode, task)
            # Spark takes geospatial values in its own Arrow form only.
            yield from to_spark_arrow_table(rows, schema).to_batches()

    def _read_change(self, schema: StructType, task: ChangeTask) -> pa.Table:
        layout = TableLayout(self.table_root, schema, tuple(self.partition_columns), self.mode)
        # The plan row's vectors are read here, on the executor, through the storage seam.
        # Imported here: the change feed brings pyarrow.compute, which a streaming query's
        # planner process (it unpickles these tasks' classes) does not need.
        from deltalog.change_data_feed import read_change_file

        return read_change_file(layout, json.loads(task.spec), store_for(self.table_root))


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
