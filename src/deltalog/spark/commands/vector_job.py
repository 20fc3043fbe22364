"""Deletion vectors built and written in the executors (reference
``DeletionVectorBitmapGenerator`` and the tasks of ``DMLWithDeletionVectorsHelper``).

DELETE, UPDATE and MERGE find the rows they change with a scan that carries each row's file
(:data:`~deltalog.spark.read.common.FILE`) and physical row index
(:data:`~deltalog.spark.read.common.ROW`). :func:`mark_rows` sends those pairs, with the file
replaced by its number among the candidate files (a broadcast join with a table of
O(files) rows), to tasks grouped by file (one shuffle of two integers per row). Each task, for
each of its files:

* merges the rows with the file's old vector, read through the storage seam, and writes the
  merged vector with a :class:`~deltalog.write.deletion_vectors.DeletionVectorWriter` (one
  vector file per task; small vectors inline), unless no row of the file is left;
* for MERGE, keeps one row per target row (its first clause), counts the rows per clause and
  tells whether a target row was matched by more than one source row
  (``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE``);
* returns one row: the descriptor, the counts, the flags.

So the driver receives O(files) rows, never a row per changed row: it builds the ``remove`` and
``add`` actions from them and the candidate files' own log rows
(:func:`~deltalog.commands.dml.file_changes.vector_update`). A failed task deletes the vector
file it wrote; :meth:`Marks.abort` deletes them all when the command does not commit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog.actions import DeletionVectorDescriptor
from deltalog.commands.dml.file_changes import (
    DeletionVectorUpdate,
    MarkedRows,
    merge_marks,
    stats_records,
    vector_update,
)
from deltalog.spark.read.common import FILE, ROW
from deltalog.spark.session import arrow_to_df, conf_get, to_arrow
from deltalog.storage import register, store_for
from deltalog.storage.options import StorageOptions, registered
from deltalog.write.deletion_vectors import DeletionVectorWriter, random_prefix_length

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

NUMBER = "__deltalog_file_number"
_OUT_SCHEMA = (
    "number int, counts string, repeats boolean, descriptor string, deleted long, "
    "old long, physical long, again long, path string"
)


@dataclass(frozen=True, slots=True)
class MarkSpec:
    """What the tasks do with each file's rows.

    Attributes:
        action: the column holding each row's MERGE clause (``None``: DELETE and UPDATE, every
            row is marked).
        marked: the clauses whose rows are marked deleted (``None``: every row).
        checked: the clauses whose matched pairs the multiple-match check counts (``None``: no
            check).
        write: whether to write deletion vectors (``False``: copy-on-write MERGE, which only
            needs the touched files and the counts).
    """

    action: str | None = None
    marked: tuple[int, ...] | None = None
    checked: tuple[int, ...] | None = None
    write: bool = True


@dataclass(frozen=True, slots=True)
class TaskFile:
    """What a task knows of one candidate file: enough to merge and size its vector."""

    path: str
    deletion_vector: dict[str, Any] | None
    num_records: int | None


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


def numbered(spark: SparkSession, rows: Any, keys: Sequence[str]) -> Any:
    """``rows`` (with :data:`FILE`, one of ``keys``) with :data:`NUMBER`, the file's position
    in ``keys``, instead of :data:`FILE`: a broadcast join with a table of O(files) rows. An
    integer is what crosses the shuffle and the Python workers, not the path."""
    numbers = pa.table(
        {FILE: pa.array(keys, pa.string()), NUMBER: pa.array(range(len(keys)), pa.int32())}
    )
    joined = rows.join(F.broadcast(arrow_to_df(spark, numbers)), on=FILE)
    return joined.select(NUMBER, *[c for c in rows.columns if c != FILE])


def mark_rows(
    spark: SparkSession,
    rows: Any,
    files: pa.Table,
    keys: Sequence[str],
    *,
    table_root: str,
    configuration: dict[str, str],
    spec: MarkSpec,
) -> Marks:
    """Group ``rows`` (a :func:`numbered` DataFrame with :data:`ROW` and ``spec.action``) by
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
    grouped = rows.select(*columns).repartition(parts, NUMBER)
    out = to_arrow(grouped.mapInArrow(task, _OUT_SCHEMA))
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


class MarkTask:
    """The function each task runs over its (file number, row index[, clause]) batches: every
    file's rows are in one task (the rows are partitioned by file number)."""

    def __init__(
        self,
        table_root: str,
        storage: StorageOptions,
        files: list[TaskFile],
        spec: MarkSpec,
        prefix_length: int,
    ) -> None:
        self.table_root = table_root
        self.storage = storage
        self.files = files
        self.spec = spec
        self.prefix_length = prefix_length

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numbers, rows, actions = self._gather(batches)
        if not len(numbers):
            return
        if self.storage.items:
            register(self.table_root, self.storage)
        store = store_for(self.table_root)
        results: list[dict[str, Any]] = []
        with DeletionVectorWriter(
            store, self.table_root, prefix_length=self.prefix_length
        ) as writer:
            for number, file_rows, file_actions in _by_file(numbers, rows, actions):
                results.append(self._mark_file(number, file_rows, file_actions, store, writer))
            writer.finish()
            paths = writer.paths
        results += [{"path": p} for p in paths]
        yield pa.RecordBatch.from_pylist(results, schema=_arrow_schema())

    def _gather(
        self, batches: Iterator[pa.RecordBatch]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        numbers, rows, actions = [], [], []
        for batch in batches:
            if not batch.num_rows:
                continue
            numbers.append(batch.column(0).to_numpy(zero_copy_only=False))
            rows.append(batch.column(1).to_numpy(zero_copy_only=False))
            if self.spec.action:
                actions.append(batch.column(2).to_numpy(zero_copy_only=False))
        if not numbers:
            return np.empty(0, np.int64), np.empty(0, np.int64), None
        return (
            np.concatenate(numbers).astype(np.int64),
            np.concatenate(rows).astype(np.int64),
            np.concatenate(actions).astype(np.int64) if actions else None,
        )

    def _mark_file(
        self,
        number: int,
        rows: np.ndarray,
        actions: np.ndarray | None,
        store: Any,
        writer: DeletionVectorWriter,
    ) -> dict[str, Any]:
        """One file's result; ``rows`` are sorted (by row, then clause)."""
        spec = self.spec
        repeats = False
        if actions is not None and spec.checked is not None:
            pairs = rows[np.isin(actions, spec.checked)]
            repeats = bool(np.any(pairs[1:] == pairs[:-1]))
        first = np.r_[True, rows[1:] != rows[:-1]]
        rows = rows[first]
        counts: dict[int, int] = {}
        if actions is not None:
            actions = actions[first]
            values, n = np.unique(actions, return_counts=True)
            counts = {int(v): int(c) for v, c in zip(values, n, strict=True)}
            if spec.marked is not None:
                rows = rows[np.isin(actions, spec.marked)]
        out: dict[str, Any] = {
            "number": number,
            "counts": json.dumps(counts),
            "repeats": repeats,
            "deleted": len(rows) if spec.write else 0,
            "old": 0,
            "again": 0,
        }
        if not spec.write or not len(rows) or repeats:
            return out
        file = self.files[number]
        marked = merge_marks(
            file.path,
            file.deletion_vector,
            file.num_records,
            rows.astype(np.uint64),
            store=store,
            table_root=self.table_root,
            write_vector=writer.add,
        )
        descriptor = marked.descriptor
        out.update(
            descriptor=json.dumps(descriptor.to_dict()) if descriptor else None,
            old=marked.old_cardinality,
            physical=marked.physical_rows,
            again=marked.again,
        )
        return out


def _by_file(
    numbers: np.ndarray, rows: np.ndarray, actions: np.ndarray | None
) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
    """Each file's rows, sorted by row index (then clause)."""
    keys = (rows,) if actions is None else (actions, rows)
    order = np.lexsort((*keys, numbers))
    numbers, rows = numbers[order], rows[order]
    actions = actions[order] if actions is not None else None
    starts = np.flatnonzero(np.r_[True, numbers[1:] != numbers[:-1]])
    ends = np.r_[starts[1:], len(numbers)]
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        yield (
            int(numbers[s]),
            rows[s:e],
            actions[s:e] if actions is not None else None,
        )


def _arrow_schema() -> pa.Schema:
    return pa.schema(
        [
            ("number", pa.int32()),
            ("counts", pa.string()),
            ("repeats", pa.bool_()),
            ("descriptor", pa.string()),
            ("deleted", pa.int64()),
            ("old", pa.int64()),
            ("physical", pa.int64()),
            ("again", pa.int64()),
            ("path", pa.string()),
        ]
    )
