"""The Delta format as a Python data source (Spark >= 4.0) over deltalog snapshots.

``spark.read.format("delta").load(path)`` gets the plan of ``DeltaTable.toDF()`` (Spark's own
parquet scan, :mod:`deltalog.spark.read.load`); this source serves what only it can read (paths
Spark's file source cannot take, a user-specified schema) and
:func:`deltalog.spark.read.load.load_with_python_source`. The source Spark
sees (:class:`deltalog.spark.source.DeltaDataSource`) adds the writers to this read side.

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

import json
from typing import Any

from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader

from deltalog import errors
from deltalog.delta_log import DeltaLog
from deltalog.paths import resolve
from deltalog.schema import (
    parse_schema,
    read_schema,
)
from deltalog.spark.read.options import (
    STREAMING_MARKER,
    from_catalog,
    read_options,
    snapshot_for,
    storage_of,
)
from deltalog.spark.read.source_tasks import (
    ChangeTask,
    DeltaReader,
    FileTask,
    file_groups,
)
from deltalog.spark.schema import to_spark_schema
from deltalog.streaming.options import SourceOptions, StreamConfig

_FIELD_ID = b"PARQUET:field_id"


class DeltaReadSource(DataSource):
    """The ``delta`` format, read side (the whole source, with its writers, is
    :class:`deltalog.spark.source.DeltaDataSource`).

    Nothing is read when the source is made: Spark makes one for writes too (of a table that
    may not exist yet). The read is planned on the first :meth:`schema`, :meth:`reader` or
    :meth:`streamReader`, in the planning worker, and the plan travels with the pickled
    source."""

    @classmethod
    def name(cls) -> str:
        return "delta"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._planned = False

    def _plan(self) -> None:
        if self._planned:
            return
        opts = read_options(self.options)
        # Object-store credentials and endpoints (delta-rs's names): never in error messages.
        self._storage = storage_of(opts)
        self._cdf = False  # a change-feed read
        self._stream: Any = None
        self._planned = True
        if opts.get(STREAMING_MARKER) == "true":
            self._plan_stream(opts)
            return
        # Imported here, not with this module: Spark unpickles this source in each streaming
        # query's fresh planner process, and the change feed brings pyarrow.compute (~30 ms).
        from deltalog.change_data_feed import is_cdc_read

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
        """A change-feed read: the plan's file reads become the tasks, each with its plan row
        (deletion vectors as descriptors, read by the task)."""
        from deltalog.change_data_feed import CdfBounds, plan_changes, resolve_range  # see _plan

        log = DeltaLog.for_table(opts["path"], storage_options=self._storage.as_dict())
        plan = plan_changes(
            log, resolve_range(log, CdfBounds.from_options(opts, table=log.table_root))
        )
        snapshot = plan.snapshot
        self._cdf = True
        self._table_root = snapshot.table_root
        self._schema_json = snapshot.schema.to_json()
        self._partition_columns = list(snapshot.partition_columns)
        self._mode = snapshot.column_mapping_mode
        tasks = []
        for spec in plan.files.to_pylist():
            spec["partitionValues"] = dict(spec["partitionValues"] or [])
            tasks.append(ChangeTask(json.dumps(spec)))
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
        self._plan()
        try:
            from deltalog.spark.read.stream_source import DeltaStreamReader
        except ImportError:  # pyspark.sql.streaming.datasource (read limits) arrived in 4.2
            raise errors.UnsupportedFeatureError(
                "DELTA_STREAMING_SOURCE_UNSUPPORTED",
                "streaming reads of the delta format need PySpark 4.2 or later (admission "
                "control for Python streaming sources).",
                table=self._table_root,
                help="upgrade PySpark, or read in batches with startingVersion on the change feed.",
            ) from None
        if self._stream is None:  # a stream Spark plans itself (no bridge, no marker)
            self._plan_stream(read_options(self.options))
        return DeltaStreamReader(self._stream)

    def schema(self) -> Any:
        if from_catalog(self.options):
            # The catalog records no columns, as delta-spark's DeltaCatalog does: the log
            # holds the schema (deltalog.spark.metastore).
            return T.StructType([])
        self._plan()
        table_schema = parse_schema(self._schema_json)
        if (self._stream is not None and self._stream_cdf) or self._cdf:
            from deltalog.change_data_feed import cdc_read_schema  # see _plan

            return to_spark_schema(cdc_read_schema(table_schema))
        return to_spark_schema(read_schema(table_schema))

    def reader(self, schema: Any) -> DataSourceReader:
        self._plan()
        return DeltaReader(
            self._table_root,
            self._schema_json,
            self._partition_columns,
            self._mode,
            self._tasks,
            self._storage,
        )


class SeamReadSource(DeltaReadSource):
    """The read side under a name of its own, for deltalog's reads through the storage seam
    (:mod:`deltalog.spark.read.seam_scan`), which never replaces a registered source."""

    @classmethod
    def name(cls) -> str:
        return "deltalog_seam"
