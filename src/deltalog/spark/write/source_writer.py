"""The write side of the ``delta`` Python data source (PySpark 4.0+): the writes Spark plans
itself (a Spark Connect client in any language, Spark Declarative Pipelines, a source
registered on the server) reach deltalog here, with no ``register()`` patch in the path.

Three steps, each in a Python process of its own, which share only what is pickled:

1. The planning worker (:func:`plan_source_write`) prepares the write as
   ``df.write.format("delta")`` does
   (:func:`~deltalog.commands.write.write_into_delta.prepare_write`: mode, schema, options,
   refusals) and keeps the result as a :class:`SourceWrite`: the version it read and the
   layout of the files to write.
2. Every task (:func:`write_task`) checks its rows against the table's rules (NOT NULL, CHECK
   constraints, the ``replaceWhere`` condition), generates identity values, writes its Arrow
   batches with the shared :class:`~deltalog.write.file_writer.DataFileWriter` (statistics,
   partition values, column mapping) and returns their ``add`` actions in a
   :class:`DeltaCommitMessage`. A failed task deletes what it wrote.
3. The driver's commit worker (:func:`commit_source_write`) prepares the write again *on the
   version step 1 read*, with step 1's new metadata (the files were written for its physical
   column names), so the conflict checker judges what was committed since, and commits once;
   on failure, and on ``abort``, the files the tasks wrote are deleted, so nothing of the
   write remains.

A ``replaceWhere`` on data columns is refused (``DELTA_SOURCE_UNSUPPORTED_OPTION``): its
rewrite of the matching files would run in the commit, on the driver, with no Spark to spread
it; one on partition columns removes whole files and works. What the Python Data Source API
cannot express is refused by Spark before this code runs:
the ``errorifexists`` and ``ignore`` modes (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``) and
``partitionBy`` (a new table's partition columns are the ``partitionBy`` option here, comma
separated). Session confs do not reach the planning worker, so delta-spark's confs
(``spark.databricks.delta.schema.autoMerge.enabled``...) are options here (``mergeSchema``...).
Generated columns are refused as by deltalog's other Python writer: their SQL is Spark's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from deltalog import column_defaults, errors
from deltalog.actions import AddFile, Metadata, action_from_json
from deltalog.commands.write.constraints import check_rows
from deltalog.commands.write.identity import (
    IdentityColumn,
    columns_to_generate,
    identity_columns,
    marks_after,
)
from deltalog.commands.write.write_into_delta import (
    WriteOptions,
    WritePlan,
    commit_write,
    prepare_write,
    replaces_by_source,
    replaces_partitions_only,
)
from deltalog.delta_log import DeltaLog
from deltalog.paths import resolve
from deltalog.schema import parse_schema
from deltalog.spark.write.batch import writer_options
from deltalog.storage import register, store_for
from deltalog.storage.options import STORAGE_PREFIXES, StorageOptions
from deltalog.txn import operations
from deltalog.write.file_writer import DataFileWriter, WriteLayout

NO_TABLE = -1  # the read version of a write that creates the table
PARTITION_BY = "partitionby"  # a new table's partition columns (Spark refuses partitionBy())
# Identity values of task ``t`` start at ``t << _TASK_BITS`` steps past the high-water mark,
# as Spark's monotonically_increasing_id does: unique across tasks, not consecutive.
_TASK_BITS = 33


@dataclass(frozen=True)
class DeltaCommitMessage(WriterCommitMessage):
    """What one task wrote: its ``add`` actions (JSON), the range of identity values it
    generated per column, and the version its layout came from.

    Attributes:
        adds: the ``add`` actions of the files written, as log JSON.
        identity: ``(column, lowest, highest)`` per identity column generated.
        read_version: the table version the write was planned on (``-1``: no table).
        query_id, batch_id: a streaming task's query and micro-batch (Spark's local
            properties), else ``None``.
    """

    adds: tuple[str, ...]
    identity: tuple[tuple[str, int, int], ...]
    read_version: int
    query_id: str | None = None
    batch_id: int | None = None


@dataclass(frozen=True)
class SourceWrite:
    """A prepared write of the data source (picklable: it ships to the tasks and to the
    commit worker).

    Attributes:
        path: the table's path as given.
        data_schema: the written DataFrame's schema (Delta JSON).
        options: the write's options.
        read_version: the version the write was planned on (``-1``: no table).
        layout: how the tasks write the files.
        identity: the identity columns the tasks generate (the data lacks them).
        replace_where: the condition every written row must meet, or ``None``.
        storage: object-store options (never shown in messages).
        skip: an idempotent write the table already has: the tasks write nothing.
        metadata: the new metadata the write commits (a new table, an evolved schema), or
            ``None``; it is the planned one that the commit writes, as the files were written
            for its physical column names (column mapping draws them at random).
    """

    path: str
    data_schema: str
    options: WriteOptions
    read_version: int
    layout: WriteLayout
    identity: tuple[IdentityColumn, ...]
    replace_where: str | None
    storage: StorageOptions
    skip: bool
    metadata: Metadata | None

    @property
    def table_root(self) -> str:
        return self.layout.table_root


def source_write_options(
    options: Mapping[str, Any], *, overwrite: bool
) -> tuple[str, WriteOptions, StorageOptions]:
    """The table path, the write options and the object-store options of a data source
    write (options case-insensitive; ``overwrite`` is Spark's save mode).

    Raises:
        InvalidArgumentError: no ``path`` (a catalog table: Spark gives the source neither its
            name nor its location), or an option of the wrong kind (DELTA_ILLEGAL_OPTION).
    """
    opts = {str(k).lower(): v for k, v in options.items() if v is not None}
    path = opts.get("path")
    if not path:
        raise errors.InvalidArgumentError(
            "DELTA_PATH_NOT_SPECIFIED",
            "'path' is not specified: the delta data source writes a table by its path. Spark "
            "gives a Python data source no name or location for a catalog table "
            "(saveAsTable, CREATE TABLE ... USING delta, a pipeline's table), only its options.",
            help="write with .save(<path>) or .option('path', <path>); in a pipeline, use "
            "create_sink(name, format='delta', options={'path': <path>}).",
        )
    partition_by = [c.strip() for c in str(opts.get(PARTITION_BY) or "").split(",") if c.strip()]
    mode = "overwrite" if overwrite else "append"
    parsed = writer_options(opts, mode=mode, partition_by=partition_by or None, table=str(path))
    storage = StorageOptions.of({k: v for k, v in opts.items() if k.startswith(STORAGE_PREFIXES)})
    return str(path), parsed, storage


def plan_source_write(
    path: str, data_schema_json: str, options: WriteOptions, storage: StorageOptions
) -> SourceWrite:
    """Prepare a write of ``path`` (the planning worker's step; see the module docstring).

    Raises:
        DeltaWriteError, InvalidArgumentError, UnsupportedFeatureError: the write cannot be
            done as asked (nothing is written).
    """
    log = _log_of(path, storage)
    data_schema = parse_schema(data_schema_json)
    plan = prepare_write(log, data_schema, options)
    rewrites = plan.replace_predicate is not None and not replaces_partitions_only(plan)
    if rewrites and plan.txn.snapshot is not None:
        raise _rewrite_refused(log.table_root, str(options.replace_where))
    if replaces_by_source(plan):  # a join of the table with the data: not a task's work
        raise errors.UnsupportedFeatureError(
            "DELTA_SOURCE_UNSUPPORTED_OPTION",
            "the options replaceOn/replaceUsing join the table with the written rows, which "
            "the data source's tasks cannot do.",
            table=log.table_root,
            help="write through deltalog.register(spark), which runs the join in a Spark job.",
        )
    # The tasks write Arrow batches: a defaulted column's SQL cannot be evaluated there.
    column_defaults.check_given(plan.layout.schema, list(data_schema.names), log.table_root)
    identity = columns_to_generate(
        identity_columns(plan.layout.schema), list(data_schema.names), log.table_root
    )
    snapshot = plan.txn.snapshot
    return SourceWrite(
        path=path,
        data_schema=data_schema.to_json(),
        options=options,
        read_version=NO_TABLE if snapshot is None else snapshot.version,
        layout=plan.layout,
        identity=tuple(identity),
        replace_where=options.replace_where if plan.replace_predicate is not None else None,
        storage=storage,
        skip=plan.skip,
        metadata=plan.txn.new_metadata,
    )


def write_task(write: SourceWrite, batches: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
    """Write one task's rows as data files of ``write``'s table; returns their ``add`` actions.

    Raises:
        DeltaWriteError: a row breaks a rule (NOT NULL, CHECK, replaceWhere); the task's files
            are deleted.
    """
    context = TaskContext.get()
    query_id = _local_property(context, "sql.streaming.queryId")
    batch_id = _local_property(context, "streaming.sql.batchId")
    task_id = context.partitionId() if context is not None else 0
    if write.skip:
        for _ in batches:  # an idempotent write already in the table: write nothing
            pass
        return DeltaCommitMessage((), (), write.read_version, query_id, _int_or_none(batch_id))
    if write.storage.items:
        register(write.table_root, write.storage)
    store = store_for(write.table_root)
    ranges: dict[str, tuple[int, int]] = {}
    offset = 0
    with DataFileWriter(store, write.layout, task_id=task_id) as writer:
        for batch in batches:
            if not batch.num_rows:
                continue
            batch = _with_identity(batch, write.identity, task_id, offset, ranges)
            offset += batch.num_rows
            check_rows(write.layout, batch, write.replace_where)
            writer.add(batch)
        adds = writer.finish()
    identity = tuple((name, lo, hi) for name, (lo, hi) in sorted(ranges.items()))
    return DeltaCommitMessage(
        tuple(a.to_json() for a in adds),
        identity,
        write.read_version,
        query_id,
        _int_or_none(batch_id),
    )


def commit_source_write(
    write: SourceWrite,
    messages: Sequence[WriterCommitMessage | None],
    *,
    options: WriteOptions | None = None,
    operation: operations.Operation | None = None,
) -> int | None:
    """Commit what the tasks wrote, once, on the version the write was planned on; returns
    the version, or ``None`` when nothing was committed (an idempotent write the table already
    has: the tasks' files are deleted). ``options`` replace the write's own (a stream's
    transaction id); ``operation`` replaces the ``WRITE`` operation.

    Raises:
        DeltaConcurrentModificationException: a commit since the planned version conflicts;
            the tasks' files are deleted and nothing is committed.
    """
    adds = [_add(line) for m in _ours(messages) for line in m.adds]
    try:
        plan = _prepare_again(write, messages, options or write.options)
        if plan.skip:
            delete_written(write, messages)
            return None
        if operation is not None:
            plan.operation = operation
        return commit_write(plan, adds, identity_marks=_marks(write, messages))
    except BaseException:
        delete_written(write, messages)
        raise


def delete_written(write: SourceWrite, messages: Iterable[WriterCommitMessage | None]) -> None:
    """Delete the data files the tasks wrote (an aborted or refused write leaves nothing)."""
    if write.storage.items:
        register(write.table_root, write.storage)
    store = store_for(write.table_root)
    for m in _ours(messages):
        for line in m.adds:
            store.delete(resolve(write.table_root, _add(line).path))


class DeltaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("delta").mode("append" | "overwrite").save(path)`` through Spark's
    Python data source API (see the module docstring)."""

    def __init__(self, write: SourceWrite) -> None:
        self.source_write = write

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
        return write_task(self.source_write, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_source_write(self.source_write, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        delete_written(self.source_write, messages)


# -- helpers -------------------------------------------------------------------------------------


def _log_of(path: str, storage: StorageOptions) -> DeltaLog:
    if storage.items:
        register(path, storage)
    return DeltaLog.for_table(path, storage_options=storage.as_dict() or None)


def _prepare_again(
    write: SourceWrite, messages: Sequence[WriterCommitMessage | None], options: WriteOptions
) -> WritePlan:
    """The write prepared on the version its files were planned on (the tasks' version when
    they report one: a stream plans each micro-batch anew), with the planned metadata.

    Raises:
        InternalError: the preparation decided differently from the planning one.
    """
    ours = list(_ours(messages))
    read_version = ours[0].read_version if ours else write.read_version
    log = _log_of(write.path, write.storage)
    plan = prepare_write(
        log,
        parse_schema(write.data_schema),
        options,
        read_version=read_version,
    )
    if plan.skip:
        return plan
    if (plan.txn.new_metadata is None) != (write.metadata is None):
        raise errors.InternalError(
            "DELTA_SOURCE_WRITE_PLAN_CHANGED",
            f"the write prepared again on version {read_version} changes the metadata "
            "differently from the data files' planning.",
            table=log.table_root,
        )
    if write.metadata is not None:
        plan.txn.update_metadata(write.metadata, amend=True)
    plan.layout = write.layout
    return plan


def _rewrite_refused(table: str, condition: str) -> errors.UnsupportedFeatureError:
    return errors.UnsupportedFeatureError(
        "DELTA_SOURCE_UNSUPPORTED_OPTION",
        f"the option replaceWhere '{condition}' names data columns: the matching rows would be "
        "rewritten in the data source's commit, on the driver, outside Spark's tasks.",
        table=table,
        help="use a replaceWhere on partition columns only, or write through "
        "deltalog.register(spark), which rewrites the rows in a Spark job.",
    )


def _ours(messages: Iterable[WriterCommitMessage | None]) -> Iterator[DeltaCommitMessage]:
    """The messages of tasks that succeeded (a failed task's is ``None``)."""
    return (m for m in messages if isinstance(m, DeltaCommitMessage))


def _marks(write: SourceWrite, messages: Iterable[WriterCommitMessage | None]) -> dict[str, int]:
    """The identity columns' new high-water marks, from every task's range."""
    ranges: dict[str, tuple[int, int]] = {}
    for m in _ours(messages):
        for name, lo, hi in m.identity:
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))
    return marks_after(write.identity, ranges)


def _with_identity(
    batch: pa.RecordBatch,
    columns: Sequence[IdentityColumn],
    task_id: int,
    offset: int,
    ranges: dict[str, tuple[int, int]],
) -> pa.RecordBatch:
    """``batch`` with generated values for the identity columns it lacks, unique across the
    write's tasks; ``ranges`` collects the lowest and highest value per column."""
    for c in columns:
        first = c.first_value + c.step * ((task_id << _TASK_BITS) + offset)
        last = first + c.step * (batch.num_rows - 1)
        values = pa.array(range(first, last + c.step, c.step), pa.int64())
        batch = batch.append_column(c.name, values)
        lo, hi = min(first, last), max(first, last)
        seen = ranges.get(c.name, (lo, hi))
        ranges[c.name] = (min(seen[0], lo), max(seen[1], hi))
    return batch


def _add(line: str) -> AddFile:
    action = action_from_json(line)
    assert isinstance(action, AddFile)
    return action


def _local_property(context: Any, key: str) -> str | None:
    if context is None:
        return None
    value = context.getLocalProperty(key)
    return str(value) if value else None


def _int_or_none(value: str | None) -> int | None:
    return None if value is None else int(value)
