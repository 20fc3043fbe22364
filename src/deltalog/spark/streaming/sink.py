"""``df.writeStream.format("delta").start(path)``: the Delta table as an exactly-once streaming
sink (reference ``DeltaSink``).

The bridge turns the query into a ``foreachBatch`` query whose function is a
:class:`DeltaStreamSink`: every micro-batch is one batch write through the ordinary write path
(:func:`deltalog.commands.write.write_into_delta.prepare_write`, the Spark file writer,
:func:`~deltalog.commands.write.write_into_delta.commit_write`), committed as ``STREAMING UPDATE``
with ``SetTransaction(appId=<query id>, version=<batch id>)``. A batch whose id is at most the
version the table already records for the query is skipped, so a batch Spark replays after a
failure (it re-runs the last batch whose end it had not recorded) is never written twice; a
failure between writing files and committing leaves only unreferenced files.

Why ``foreachBatch`` rather than PySpark's ``DataSourceStreamWriter`` (which serves the
streams Spark plans itself, :mod:`deltalog.spark.streaming.source_writer`): there every row
crosses into Python on the executors and only the data source's options apply; the
``foreachBatch`` path keeps Spark's own parquet writer and every write option of batch writes.

The query id is the one Spark keeps in ``<checkpointLocation>/metadata`` (stable across
restarts of the query from that checkpoint); without a ``checkpointLocation`` option (the
session's ``spark.sql.streaming.checkpointLocation``) it is the running query's
``sql.streaming.queryId`` local property (classic sessions).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlparse

from deltalog import errors
from deltalog.commands.write.write_into_delta import commit_write, prepare_write
from deltalog.delta_log import DeltaLog
from deltalog.schema import parse_schema
from deltalog.spark.session import configure_log
from deltalog.spark.write.batch import parse_writer_options, write_rows
from deltalog.txn import operations

_log = logging.getLogger(__name__)
OUTPUT_MODES = {"append": "Append", "complete": "Complete"}
# Options of the query, not of each batch's write.
_QUERY_OPTIONS = {"checkpointlocation", "path", "queryname", "txnappid", "txnversion"}


@dataclasses.dataclass(frozen=True)
class DeltaStreamSink:
    """The ``foreachBatch`` function of a Delta sink (picklable: Spark Connect ships it to
    the server's Python worker).

    Attributes:
        path: the table.
        output_mode: ``Append`` or ``Complete``.
        partition_by: partition columns for a table the first batch creates.
        options: the writer options (``mergeSchema``, ``userMetadata``...).
        checkpoint: the query's ``checkpointLocation`` option, if given.
    """

    path: str
    output_mode: str
    partition_by: tuple[str, ...] | None
    options: tuple[tuple[str, str], ...]
    checkpoint: str | None

    @classmethod
    def create(
        cls,
        path: str,
        output_mode: str | None,
        partition_by: Sequence[str] | None,
        options: Mapping[str, Any],
    ) -> DeltaStreamSink:
        """Check the query's settings and build its sink.

        Raises:
            UnsupportedFeatureError: output mode ``update`` (DELTA_UNSUPPORTED_OUTPUT_MODE).
        """
        mode = (output_mode or "append").lower()
        if mode not in OUTPUT_MODES:
            raise errors.UnsupportedFeatureError(
                "DELTA_UNSUPPORTED_OUTPUT_MODE",
                f"Data source delta does not support {output_mode} output mode",
                table=path,
                help="use outputMode('append') or outputMode('complete'); for upserts use "
                "foreachBatch with DeltaTable.merge.",
            )
        lowered = {k.lower(): str(v) for k, v in options.items() if v is not None}
        kept = tuple(sorted((k, v) for k, v in lowered.items() if k not in _QUERY_OPTIONS))
        return cls(
            path,
            OUTPUT_MODES[mode],
            tuple(partition_by) if partition_by else None,
            kept,
            lowered.get("checkpointlocation"),
        )

    def __call__(self, df: Any, batch_id: int) -> None:
        write_batch(self, df, batch_id)

    def query_id(self, df: Any) -> str:
        """The query's persistent id (see the module docstring).

        Raises:
            InvalidArgumentError: neither source of the id is available.
        """
        if self.checkpoint is not None:
            found = id_from_checkpoint(self.checkpoint)
            if found is not None:
                return found
        try:
            value = df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        except Exception:  # Spark Connect has no SparkContext
            value = None
        if value:
            return str(value)
        raise errors.invalid_argument(
            "the Delta streaming sink needs the query's checkpoint: set "
            ".option('checkpointLocation', <dir>) on writeStream",
            table=self.path,
        )


def write_batch(sink: DeltaStreamSink, df: Any, batch_id: int) -> int | None:
    """Write one micro-batch as one ``STREAMING UPDATE`` commit; returns its version, or
    ``None`` when the table already has this batch (skipped).

    Raises:
        DeltaWriteError, InvalidArgumentError: the batch cannot be written (nothing committed).
        DeltaConcurrentModificationException: e.g. two queries on one checkpoint
            (DELTA_CONCURRENT_TRANSACTION).
    """
    spark = df.sparkSession
    query_id = sink.query_id(df)
    log = DeltaLog.for_table(sink.path)
    configure_log(spark, log)
    mode = "overwrite" if sink.output_mode == "Complete" else "append"
    options = parse_writer_options(
        spark, dict(sink.options), mode=mode, partition_by=sink.partition_by, table=log.table_root
    )
    options = dataclasses.replace(options, txn_app_id=query_id, txn_version=int(batch_id))
    plan = prepare_write(log, parse_schema(df.schema.json()), options)
    if plan.skip:
        _log.info(
            "%s: batch %s of query %s is already in the table; skipped",
            sink.path,
            batch_id,
            query_id,
        )
        return None
    plan.operation = operations.streaming_update(sink.output_mode, query_id, int(batch_id))
    adds, marks = write_rows(df, plan)
    version = commit_write(plan, adds, identity_marks=marks)
    _log.info(
        "%s: batch %s of query %s committed as version %s", sink.path, batch_id, query_id, version
    )
    return version


def id_from_checkpoint(checkpoint: str) -> str | None:
    """The ``id`` in ``<checkpoint>/metadata`` (written by Spark when the query first starts)."""
    parsed = urlparse(checkpoint)
    local = unquote(parsed.path) if parsed.scheme == "file" else checkpoint
    try:
        with open(f"{local.rstrip('/')}/metadata", encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return None
    value = json.loads(lines[0]).get("id") if lines else None
    return str(value) if value else None
