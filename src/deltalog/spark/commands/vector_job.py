"""Deletion vectors built and written in the executors (reference
``DeletionVectorBitmapGenerator`` and the tasks of ``DMLWithDeletionVectorsHelper``).

DELETE, UPDATE and MERGE find the rows they change with a scan that carries each row's file
(:data:`~deltalog.spark.read.common.FILE`) and physical row index
(:data:`~deltalog.spark.read.common.ROW`). :func:`numbered` replaces the file by an integer
(Spark's ``crc32`` of the path, mapped to the file's number in the tasks), and
:func:`mark_rows` runs two task functions (:mod:`~deltalog.spark.commands.vector_tasks`):
in the stage that found the rows, one Roaring bitmap per file and clause; after a shuffle of
those bitmaps by file, every file's in one task, which merges them with the file's old vector
(read through the storage seam), writes the vector (one vector file per task; small vectors
inline), counts MERGE's rows per clause and runs its multiple-match check. Where Spark reads
each file in one task and the rows stay there (DELETE and UPDATE on files no larger than
Spark's split size), the first stage does it all: one job, no shuffle.

So the driver receives O(files) rows, never a row per changed row: it builds the ``remove`` and
``add`` actions from them and the candidate files' own log rows
(:func:`~deltalog.commands.dml.file_changes.vector_update`). A failed task deletes the vector
file it wrote; :meth:`Marks.abort` deletes them all when the command does not commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog.actions import DeletionVectorDescriptor
from deltalog.commands.dml.file_changes import (
    DeletionVectorUpdate,
    MarkedRows,
    stats_records,
    vector_update,
)
from deltalog.spark.commands.vector_tasks import (
    PIECES_DDL,
    RESULTS_DDL,
    SPLIT,
    FileCodes,
    MarkSpec,
    MarkTask,
    PartialTask,
    TaskFile,
    WholeTask,
)
from deltalog.spark.read.common import FILE, ROW, WHOLE
from deltalog.spark.session import arrow_to_df, conf_get, default_parallelism, to_arrow
from deltalog.storage.options import registered
from deltalog.table_properties import parse_byte_size
from deltalog.write.deletion_vectors import random_prefix_length

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

NUMBER = "__deltalog_file_number"
# The number of the task that read the row's whole file, or -1 (see ``read_task``).
TASK = "__deltalog_read_task"

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class Marks:
    """What :func:`mark_rows` found and wrote: the touched files (rows of
    ``all_files_arrow()``, with their scan keys) and, for each, its result."""

    files: pa.Table
    keys: list[str]
    results: list[dict[str, Any]]
    vector_files: list[str]
    table_root: str

    @property
    def rows(self) -> int:
        """Target rows marked (each once)."""
        return sum(int(r["deleted"]) for r in self.results)

    def counts(self) -> dict[int, int]:
        """Target rows per MERGE clause (each row counted for its first clause)."""
        total: dict[int, int] = {}
        for r in self.results:
            for action, n in json.loads(r["counts"]).items():
                total[int(action)] = total.get(int(action), 0) + int(n)
        return total

    @property
    def repeats(self) -> bool:
        """Whether a target row was matched by more than one source row."""
        return any(bool(r["repeats"]) for r in self.results)

    def updates(self, now: int) -> list[DeletionVectorUpdate]:
        """The ``remove``/``add`` actions of every file whose rows were marked.

        Raises:
            InternalError: a task met a row its file's old vector had deleted already.
        """
        out = []
        for row, result in zip(self.files.to_pylist(), self.results, strict=True):
            if not result["deleted"]:
                continue
            text = result["descriptor"]
            descriptor = DeletionVectorDescriptor.from_dict(json.loads(text)) if text else None
            marked = MarkedRows(
                descriptor,
                int(result["deleted"]),
                int(result["old"]),
                int(result["physical"] or 0),
                int(result["again"]),
            )
            out.append(vector_update(row, marked, now, self.table_root))
        return out

    def abort(self, store: LogStore) -> None:
        """Delete the vector files the tasks wrote (the command will not commit them)."""
        for path in self.vector_files:
            store.delete(path)


@dataclass(frozen=True, slots=True)
class Numbered:
    """Rows whose :data:`NUMBER` column tells their file: its number, or with ``codes`` its
    code (see :class:`~deltalog.spark.commands.vector_tasks.FileCodes`)."""

    frame: Any
    codes: FileCodes | None


def numbered(spark: SparkSession, rows: Any, keys: Sequence[str]) -> Numbered:
    """``rows`` (with :data:`FILE`, one of ``keys``) with :data:`NUMBER` instead of
    :data:`FILE`: an integer, not the path, is what is cached, shuffled and sent to the
    Python workers. Spark's ``crc32`` of the path where the keys' codes are distinct, else the
    file's position in ``keys`` joined in (a broadcast of O(files) rows)."""
    others = [c for c in rows.columns if c != FILE]
    codes = FileCodes.of(list(keys))
    if codes is not None:
        return Numbered(rows.select(F.crc32(rows[FILE]).alias(NUMBER), *others), codes)
    numbers = pa.table(
        {FILE: pa.array(keys, pa.string()), NUMBER: pa.array(range(len(keys)), pa.int32())}
    )
    joined = rows.join(F.broadcast(arrow_to_df(spark, numbers)), on=FILE)
    return Numbered(joined.select(NUMBER, *others), None)


def read_task(rows: Any) -> Any:
    """``rows`` (a scan's, with :data:`WHOLE`, filtered) with :data:`TASK` instead: the
    number of the task that read the row where it read the row's whole file, else -1. Taken
    after the filter (a column that is not deterministic would keep Spark from pushing the
    filter into the parquet reader)."""
    task = F.when(rows[WHOLE], F.spark_partition_id()).otherwise(F.lit(-1))
    return rows.select(*[c for c in rows.columns if c != WHOLE], task.alias(TASK))


def mark_rows(
    spark: SparkSession,
    rows: Numbered,
    files: pa.Table,
    keys: Sequence[str],
    *,
    table_root: str,
    configuration: dict[str, str],
    spec: MarkSpec,
) -> Marks:
    """Group ``rows`` (:func:`numbered`, with :data:`ROW` and ``spec.action``) by
    file in the executors and mark them there (see the module docstring); ``files`` are the
    candidate files (rows of ``all_files_arrow()``) and ``keys`` their scan keys. Returns the
    touched files, in ``files``' order.

    Where ``rows`` carry :data:`TASK` (:func:`read_task`) and Spark will read every file in
    one task (:func:`whole_files_read`), the stage that found the rows also marks them: no
    shuffle, one job. A task that finds otherwise fails before writing; both stages then run.
    """
    if files.num_rows == 0:
        return Marks(files, [], [], [], table_root)
    columns = [F.col(NUMBER), F.col(ROW)] + ([F.col(spec.action)] if spec.action else [])
    task = MarkTask(
        table_root,
        registered(table_root),
        [_task_file(r) for r in files.select(["path", "deletionVector", "stats"]).to_pylist()],
        spec,
        random_prefix_length(configuration, table_root),
    )
    partial = PartialTask(spec, rows.codes)
    if TASK in rows.frame.columns and whole_files_read(spark, files.column("size").to_pylist()):
        whole = rows.frame.select(*columns, F.col(TASK)).mapInArrow(
            WholeTask(partial, task), RESULTS_DDL
        )
        try:
            return _marks(to_arrow(whole), files, list(keys), table_root)
        except Exception as e:  # Spark's exception types differ by session kind
            if SPLIT not in str(e):
                raise
            _log.info("deletion vectors of %s: a file was split between tasks", table_root)
    parts = min(len(keys), int(conf_get(spark, "spark.sql.shuffle.partitions", "200")))
    # One wave of tasks where the slots are known: each task costs a Python worker's round trip.
    parts = max(1, min(parts, default_parallelism(spark) or parts))
    # Each stage's bitmaps per file and clause, then every file's in one task.
    pieces = rows.frame.select(*columns).mapInArrow(partial, PIECES_DDL)
    out = to_arrow(pieces.repartition(parts, "number").mapInArrow(task, RESULTS_DDL))
    return _marks(out, files, list(keys), table_root)


def whole_files_read(spark: SparkSession, sizes: Sequence[int]) -> bool:
    """Whether Spark's file source reads each of files of ``sizes`` (bytes) in one task: it
    splits those larger than ``min(maxPartitionBytes, max(openCostInBytes, bytesPerCore))``,
    bytesPerCore being the files' bytes (plus the open cost of each) over the scan's minimum
    partitions (Spark's ``FilePartition.maxSplitBytes``). Where that minimum is unknown (a
    Connect session that does not set it), the split size is taken at its least."""
    max_bytes = _conf_bytes(spark, "spark.sql.files.maxPartitionBytes", 128 << 20)
    open_cost = _conf_bytes(spark, "spark.sql.files.openCostInBytes", 4 << 20)
    least = _min_partitions(spark)
    split = min(max_bytes, open_cost)
    if least is not None:
        per_core = (sum(sizes) + open_cost * len(sizes)) // max(1, least)
        split = min(max_bytes, max(open_cost, per_core))
    return max(sizes, default=0) <= split


def _conf_bytes(spark: SparkSession, key: str, default: int) -> int:
    return parse_byte_size(conf_get(spark, key, str(default))) or default


def _min_partitions(spark: SparkSession) -> int | None:
    for key in ("spark.sql.files.minPartitionNum", "spark.sql.leafNodeDefaultParallelism"):
        value = conf_get(spark, key, "")
        if value.strip().isdigit():
            return int(value)
    return default_parallelism(spark)


def _task_file(row: dict[str, Any]) -> TaskFile:
    return TaskFile(row["path"], row["deletionVector"], stats_records(row["stats"]))


def _marks(out: pa.Table, files: pa.Table, keys: list[str], table_root: str) -> Marks:
    is_file = pc.is_valid(out.column("number"))
    vector_files = [p for p in out.filter(pc.invert(is_file)).column("path").to_pylist() if p]
    results = {int(r["number"]): r for r in out.filter(is_file).to_pylist()}
    order = sorted(results)
    touched = files.take(pa.array(order, pa.int64())) if order else files.slice(0, 0)
    return Marks(
        touched, [keys[i] for i in order], [results[i] for i in order], vector_files, table_root
    )
