"""The streaming write side of the ``delta`` Python data source (PySpark 4.0+):
``df.writeStream.format("delta")`` as Spark plans it itself, with no ``register()`` patch in
the path (a Connect client in any language, a pipeline's ``create_sink(format="delta")``).

Each micro-batch is one write of :mod:`deltalog.spark.write.source_writer` (planned on the
driver, files written by the tasks, one commit) committed as ``STREAMING UPDATE`` with
``txn(appId=<query id>, version=<batch id>)``, as the reference's ``DeltaSink`` does. A batch
Spark replays (its end was not recorded in the checkpoint's commit log when the query
stopped) finds its transaction in the table: nothing is committed and the files the replay
wrote are deleted, so every batch is in the table exactly once.

The query's id: Spark tells the tasks (the ``sql.streaming.queryId`` local property, the
persistent id kept in ``<checkpointLocation>/metadata``), and each task's commit message
carries it to ``commit``, which Spark gives only the batch id. A batch of no tasks falls back
to the checkpoint's ``metadata`` file (the ``checkpointLocation`` option).

Output modes: ``append``, and ``complete`` (Spark asks the source to truncate: each batch
replaces the table). Spark itself refuses ``update`` for a Python sink ("delta does not
support Update mode"), as the reference's sink does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from deltalog import errors
from deltalog.spark.streaming.sink import id_from_checkpoint
from deltalog.spark.write.source_writer import (
    DeltaCommitMessage,
    SourceWrite,
    commit_source_write,
    delete_written,
    write_task,
)
from deltalog.txn import operations

_log = logging.getLogger(__name__)


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """One micro-batch's writer (Spark makes one per batch, on the driver and again for the
    commit)."""

    def __init__(self, write: SourceWrite, *, complete: bool, checkpoint: str | None) -> None:
        self.source_write = write
        self.output_mode = "Complete" if complete else "Append"
        self.checkpoint = checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
        return write_task(self.source_write, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self, messages, int(batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        delete_written(self.source_write, messages)


def commit_batch(
    writer: DeltaStreamWriter, messages: Sequence[WriterCommitMessage | None], batch_id: int
) -> int | None:
    """Commit micro-batch ``batch_id`` once; returns its version, or ``None`` when the table
    already has it (its replayed files are deleted) or it wrote nothing and names no query.

    Raises:
        InvalidArgumentError: files were written but the query's id is unknown.
        DeltaConcurrentModificationException: e.g. two queries on one checkpoint.
    """
    write = writer.source_write
    query_id = _query_id(writer, messages)
    if query_id is None:
        if any(isinstance(m, DeltaCommitMessage) and m.adds for m in messages):
            delete_written(write, messages)
            raise errors.invalid_argument(
                "the Delta streaming sink needs the query's id, which Spark gave neither the "
                "tasks nor a checkpoint: set .option('checkpointLocation', <dir>) on writeStream",
                table=write.path,
            )
        return None
    options = dataclasses.replace(write.options, txn_app_id=query_id, txn_version=batch_id)
    operation = operations.streaming_update(writer.output_mode, query_id, batch_id)
    version = commit_source_write(write, messages, options=options, operation=operation)
    if version is None:
        _log.info(
            "%s: batch %s of query %s is already in the table; skipped",
            write.path,
            batch_id,
            query_id,
        )
    return version


def _query_id(
    writer: DeltaStreamWriter, messages: Sequence[WriterCommitMessage | None]
) -> str | None:
    for m in messages:
        if isinstance(m, DeltaCommitMessage) and m.query_id:
            return m.query_id
    if writer.checkpoint is not None:
        return id_from_checkpoint(writer.checkpoint)
    return None
