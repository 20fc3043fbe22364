"""Scanning data files through deltalog's storage seam in Spark's Python workers: the read side
of DML, MERGE and OPTIMIZE on an object store the session's JVM cannot reach (no Hadoop
connector jars), and the loads of the ``deltalog_seam`` Python data source that read a snapshot or a
change feed there (:func:`read_through_seam`, :func:`changes_through_seam`).

:func:`seam_dataframe` is the stand-in for :func:`deltalog.spark.read.scan.scan_dataframe`'s JVM
parquet scan, with the same columns: the table's logical columns and, with ``row_ids``,
:data:`~deltalog.scan.plan.FILE` (the key :func:`~deltalog.spark.read.scan.file_keys` gives the
file, so the commands map rows back to files exactly as on the JVM path) and
:data:`~deltalog.scan.plan.ROW` (the row's physical index in its parquet file, which
deletion vectors are made of).

The plan is ``spark.range(n, numPartitions=n).mapInArrow(...)``: task ``i`` reads group ``i``
of the files (about equal bytes per group, as the Python data source groups them), each file in
one GET through :func:`deltalog.storage.store_for`, its deletion vector applied, partition
values added. The bucket's storage options travel inside the pickled task function
(:class:`~deltalog.storage.options.StorageOptions` shows no values when printed).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from deltalog.actions import DeletionVectorDescriptor
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.geospatial import to_spark_arrow_table
from deltalog.paths import resolve
from deltalog.scan.file_groups import group_files
from deltalog.spark.read.common import FILE, ROW, file_keys
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.storage import note_path
from deltalog.storage import register, store_for
from deltalog.storage.options import StorageOptions, registered

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot

_BATCH_ROWS = 64 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class SeamFile:
    """One data file to read: absolute path, FILE key, partition values and deletion vector
    (JSON, as in the log)."""

    path: str
    key: str
    partition_values: str
    deletion_vector: str | None


def seam_dataframe(
    spark: SparkSession, snapshot: Snapshot, files: pa.Table, *, row_ids: bool
) -> Any:
    """The live rows of ``files`` (rows of ``snapshot.all_files_arrow()``), read in Python
    tasks through the storage seam; the same columns as ``scan_dataframe`` gives."""
    root = snapshot.table_root
    schema = to_spark_schema(snapshot.schema)
    if row_ids:
        schema = T.StructType(
            [*schema.fields, T.StructField(FILE, T.StringType()), T.StructField(ROW, T.LongType())]
        )
    rows = files.select(["path", "partitionValues", "deletionVector", "size"]).to_pylist()
    tasks = [
        SeamFile(
            resolve(root, r["path"]),
            key,
            json.dumps(dict(r["partitionValues"] or [])),
            None if r["deletionVector"] is None else json.dumps(r["deletionVector"]),
        )
        for r, key in zip(rows, file_keys(snapshot, files), strict=True)
    ]
    sizes = [int(r["size"] or 0) for r in rows]
    groups = [g.files for g in group_files(tasks, sizes)]
    note_path(root, "scan", jvm=False)
    if not groups:
        return spark.createDataFrame([], schema)
    read = SeamRead(TableLayout.of(snapshot), tuple(groups), row_ids, registered(root))
    return spark.range(0, len(groups), 1, len(groups)).mapInArrow(read, schema)


class SeamRead:
    """The function each task runs: the files of the groups whose ids it is given, as Arrow
    batches of logical rows (plus FILE and ROW when asked)."""

    def __init__(
        self,
        layout: TableLayout,
        groups: tuple[tuple[SeamFile, ...], ...],
        row_ids: bool,
        storage: StorageOptions,
    ) -> None:
        self.layout = layout
        self.groups = groups
        self.row_ids = row_ids
        self.storage = storage

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.storage.items:
            register(self.layout.table_root, self.storage)  # this worker's store_for finds them
        for batch in batches:
            for group_id in batch.column(0).to_pylist():
                for file in self.groups[group_id]:
                    rows = read_seam_file(self.layout, file, self.row_ids)
                    # mapInArrow takes geospatial values in Spark's Arrow form only.
                    spark_rows = to_spark_arrow_table(rows, self.layout.schema)
                    yield from spark_rows.to_batches(_BATCH_ROWS)


def read_seam_file(layout: TableLayout, file: SeamFile, row_ids: bool) -> pa.Table:
    """One data file's live rows as the table's logical columns (with FILE and ROW when
    ``row_ids``: ROW is the physical index, counted before deleted rows are dropped)."""
    data = read_parquet(file.path, layout.table_root)
    index = pa.table({ROW: pa.array(np.arange(data.num_rows, dtype=np.int64))})
    if file.deletion_vector is not None:
        descriptor = DeletionVectorDescriptor.from_dict(json.loads(file.deletion_vector))
        deleted = read_deletion_vector(store_for(layout.table_root), layout.table_root, descriptor)
        data = select_rows(data, deleted, keep_listed=False)
        index = select_rows(index, deleted, keep_listed=False)
    logical = to_logical(
        data,
        layout.schema,
        layout.partition_columns,
        layout.column_mapping_mode,
        json.loads(file.partition_values),
    )
    if not row_ids:
        return logical
    keys = pa.array([file.key] * logical.num_rows, pa.string())
    return logical.append_column(FILE, keys).append_column(ROW, index.column(ROW))


def read_through_seam(spark: SparkSession, table_root: str, version: int) -> Any:
    """The rows of ``table_root`` at ``version`` read by the ``deltalog_seam`` Python data source,
    whose workers fetch the files through the storage seam with this bucket's options."""
    return load_through_seam(spark, table_root, {"versionAsOf": str(version)})


def changes_through_seam(spark: SparkSession, table_root: str, start: int, end: int) -> Any:
    """The change feed of versions ``start`` to ``end`` (both included) read by the
    ``deltalog_seam`` Python data source through the storage seam."""
    options = {"readChangeFeed": "true", "startingVersion": str(start), "endingVersion": str(end)}
    return load_through_seam(spark, table_root, options)


def load_through_seam(spark: SparkSession, table_root: str, options: Mapping[str, str]) -> Any:
    """A load of the ``deltalog_seam`` Python data source with ``options`` and this bucket's
    storage options (its planner runs in a Python worker of its own, which sees only the
    load's options; Spark's plans do not show them)."""
    # PySpark 4.0+ only (Python data sources): imported when a load needs it.
    from deltalog.spark.read.data_source import SeamReadSource

    spark.dataSource.register(SeamReadSource)
    reader = spark.read.format(SeamReadSource.name()).options(**options)
    for key, value in registered(table_root).items:
        reader = reader.option(key, value)
    note_path(table_root, "read", jvm=False)
    return reader.load(table_root)
