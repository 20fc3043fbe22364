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
inline), counts MERGE's rows per clause and runs its multiple-match check.

So the driver receives O(files) rows, never a row per changed row: it builds the ``remove`` and
``add`` actions from them and the candidate files' own log rows
(:func:`~deltalog.commands.dml.file_changes.vector_update`). A failed task deletes the vector
file it wrote; :meth:`Marks.abort` deletes them all when the command does not commit.
"""

from __future__ import annotations

import json
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
    FileCodes,
    MarkSpec,
    MarkTask,
    PartialTask,
    TaskFile,
)
from deltalog.spark.read.common import FILE, ROW
from deltalog.spark.session import arrow_to_df, conf_get, to_arrow
from deltalog.storage.options import registered
from deltalog.write.deletion_vectors import random_prefix_length

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

NUMBER = "__deltalog_file_number"


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
    parts = max(1, min(len(keys), int(conf_get(spark, "spark.sql.shuffle.partitions", "200"))))
    # Each stage's bitmaps per file and clause, then every file's in one task.
    partial = PartialTask(spec, rows.codes)
    pieces = rows.frame.select(*columns).mapInArrow(partial, PIECES_DDL)
    out = to_arrow(pieces.repartition(parts, "number").mapInArrow(task, RESULTS_DDL))
    return _marks(out, files, list(keys), table_root)


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
