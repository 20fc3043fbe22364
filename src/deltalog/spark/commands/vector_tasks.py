"""The two task functions of :func:`~deltalog.spark.commands.vector_job.mark_rows`, run by
``mapInArrow`` in the executors (reference ``DeletionVectorBitmapGenerator``'s partial and
final bitmap aggregation).

* :class:`PartialTask` runs in the stage that found the rows (the scan, or MERGE's join): per
  file and clause, the row indexes it saw become one serialized portable Roaring bitmap. Rows
  close together compress to bits (a file half of whose rows are deleted costs about one bit
  per row), so the shuffle that follows carries bitmaps, not a pair of integers per row.
* :class:`MarkTask` gets every bitmap of a file in one task (partitioned by file number):
  their union is the file's rows; each target row counts for its first clause (MERGE may match
  a row more than once); the multiple-match check compares the pieces' cardinalities with
  their union's; the marked rows are merged with the file's old vector and written. It returns
  one row per file, and one per vector file written.
* :class:`WholeTask` does both in the stage that found the rows, where Spark read every file in
  one task and nothing moved the rows since (DELETE's and UPDATE's scans of files no larger
  than Spark's split size): no shuffle, one job. It checks that each row was read, from its
  whole file, by the task it is in, and fails before writing anything where one was not.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from deltalog.commands.dml.file_changes import merge_marks
from deltalog.deletion_vectors import parse_roaring_bitmap_array
from deltalog.storage import register, store_for
from deltalog.storage.options import StorageOptions
from deltalog.write.deletion_vectors import (
    DeletionVectorWriter,
    serialize_roaring_bitmap_array,
    sorted_unique,
)

PIECES = pa.schema(
    [
        ("number", pa.int32()),
        ("action", pa.int32()),
        ("bitmap", pa.binary()),
        ("repeats", pa.bool_()),
    ]
)
PIECES_DDL = "number int, action int, bitmap binary, repeats boolean"
RESULTS = pa.schema(
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
RESULTS_DDL = (
    "number int, counts string, repeats boolean, descriptor string, deleted long, "
    "old long, physical long, again long, path string"
)
NO_ACTION = 0  # DELETE and UPDATE rows have no clause
SPLIT = "DELTALOG_FILE_SPLIT"  # the error of a WholeTask whose rows are not whole files


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
class FileCodes:
    """Spark's ``crc32`` of each candidate file's scan key (sorted) and the file's number:
    rows can carry the code, which Spark computes where they are, instead of a number joined
    in by file path (a broadcast join costs the stage more than the hash)."""

    codes: np.ndarray  # int64, sorted, distinct
    numbers: np.ndarray  # int32, the file number of each code

    @classmethod
    def of(cls, keys: list[str]) -> FileCodes | None:
        """The codes of ``keys`` (UTF-8, as Spark hashes strings); ``None`` when two share
        one (32 bits: rare, but then the file must be joined in by path)."""
        codes = np.array([zlib.crc32(k.encode("utf-8")) for k in keys], np.int64)
        order = np.argsort(codes, kind="stable")
        codes = codes[order]
        if np.any(codes[1:] == codes[:-1]):
            return None
        return cls(codes, order.astype(np.int32))

    def number(self, codes: np.ndarray) -> np.ndarray:
        """The file number of each code.

        Raises:
            ValueError: a code of no candidate file (the scan read a file it was not given).
        """
        at = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        if not np.array_equal(self.codes[at], codes):
            raise ValueError("a row's file is not among the command's candidate files")
        return self.numbers[at]


@dataclass(frozen=True, slots=True)
class TaskFile:
    """What a task knows of one candidate file: enough to merge and size its vector."""

    path: str
    deletion_vector: dict[str, Any] | None
    num_records: int | None


class PartialTask:
    """Rows (file number or, with ``codes``, file code; row index[, clause]) → one bitmap
    per file and clause of this task, with whether a checked target row repeats within it."""

    def __init__(self, spec: MarkSpec, codes: FileCodes | None) -> None:
        self.spec = spec
        self.codes = codes

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numbers, rows, actions, _ = _gather(batches, self.spec.action is not None, False)
        pieces = self.pieces(numbers, rows, actions)
        if pieces is not None:
            yield pieces

    def pieces(
        self, numbers: np.ndarray, rows: np.ndarray, actions: np.ndarray
    ) -> pa.RecordBatch | None:
        """The bitmaps of these rows (``None`` for none)."""
        if not len(numbers):
            return None
        if self.codes is not None:
            numbers = self.codes.number(numbers)
        order = np.lexsort((rows, actions, numbers))
        numbers, rows, actions = numbers[order], rows[order], actions[order]
        out: dict[str, list[Any]] = {name: [] for name in PIECES.names}
        for s, e in _runs(numbers):
            repeats = self._repeats(rows[s:e], actions[s:e])
            for a, b in _runs(actions[s:e]):
                out["number"].append(int(numbers[s]))
                out["action"].append(int(actions[s + a]))
                unique = sorted_unique(rows[s + a : s + b].astype(np.uint64))
                out["bitmap"].append(serialize_roaring_bitmap_array(unique))
                out["repeats"].append(repeats)
        return pa.RecordBatch.from_pydict(out, schema=PIECES)

    def _repeats(self, rows: np.ndarray, actions: np.ndarray) -> bool:
        checked = self.spec.checked
        if checked is None:
            return False
        pairs = np.sort(rows[np.isin(actions, checked)])
        return bool(np.any(pairs[1:] == pairs[:-1]))


class WholeTask:
    """Both steps in the stage that found the rows, when every file's rows are all in one task
    (no shuffle): rows (as :class:`PartialTask`'s, then the number of the task that read each
    row's whole file, or -1) → :class:`MarkTask`'s results.

    Raises:
        RuntimeError: (:data:`SPLIT`) a row read by another task, or from part of its file;
            before this task writes anything. The caller runs both stages instead.
    """

    def __init__(self, partial: PartialTask, mark: MarkTask) -> None:
        self.partial = partial
        self.mark = mark

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        numbers, rows, actions, parts = _gather(batches, self.partial.spec.action is not None, True)
        context = TaskContext.get()
        task = context.partitionId() if context is not None else -1
        if np.any(parts != task):
            raise RuntimeError(f"{SPLIT}: a file's rows are not all in task {task}")
        pieces = self.partial.pieces(numbers, rows, actions)
        if pieces is not None:
            yield from self.mark(iter([pieces]))


class MarkTask:
    """Every piece of a file → the file's result (see the module docstring)."""

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
        pieces = pa.Table.from_batches(list(batches), schema=PIECES)
        if not pieces.num_rows:
            return
        pieces = pieces.sort_by([("number", "ascending"), ("action", "ascending")])
        numbers = pieces.column("number").to_numpy()
        if self.storage.items:
            register(self.table_root, self.storage)
        store = store_for(self.table_root)
        results: list[dict[str, Any]] = []
        with DeletionVectorWriter(
            store, self.table_root, prefix_length=self.prefix_length
        ) as writer:
            for s, e in _runs(numbers):
                file_pieces = pieces.slice(s, e - s)
                results.append(self._mark_file(int(numbers[s]), file_pieces, store, writer))
            writer.finish()
            results += [{"path": p} for p in writer.paths]
        yield pa.RecordBatch.from_pylist(results, schema=RESULTS)

    def _mark_file(
        self, number: int, pieces: pa.Table, store: Any, writer: DeletionVectorWriter
    ) -> dict[str, Any]:
        rows, counts, repeats = combine(pieces, self.spec)
        out: dict[str, Any] = {
            "number": number,
            "counts": json.dumps(counts),
            "repeats": repeats,
            "deleted": len(rows) if self.spec.write else 0,
            "old": 0,
            "again": 0,
        }
        if not self.spec.write or not len(rows) or repeats:
            return out
        file = self.files[number]
        marked = merge_marks(
            file.path,
            file.deletion_vector,
            file.num_records,
            rows,
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


def combine(pieces: pa.Table, spec: MarkSpec) -> tuple[np.ndarray, dict[int, int], bool]:
    """One file's pieces (sorted by clause) → its marked rows (sorted unique ``uint64``), the
    target rows per clause (each row for its first clause) and whether a target row was
    matched more than once (a repeat within a piece's task, or checked pieces overlapping)."""
    repeats = bool(pa.compute.any(pieces.column("repeats")).as_py())
    seen = np.empty(0, np.uint64)
    marked: list[np.ndarray] = []
    counts: dict[int, int] = {}
    checked_total = 0
    checked: list[np.ndarray] = []
    actions = pieces.column("action").to_numpy()
    bitmaps = pieces.column("bitmap").to_pylist()
    for a, b in _runs(actions):
        action = int(actions[a])
        parts = [parse_roaring_bitmap_array(bitmaps[i]) for i in range(a, b)]
        rows = sorted_unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        if spec.checked is not None and action in spec.checked:
            checked_total += sum(len(p) for p in parts)
            checked.append(rows)
        first = np.setdiff1d(rows, seen, assume_unique=True) if len(seen) else rows
        seen = sorted_unique(np.concatenate((seen, rows))) if len(seen) else rows
        counts[action] = len(first)
        if spec.marked is None or action in spec.marked:
            marked.append(first)
    if checked and not repeats:
        union = sorted_unique(np.concatenate(checked)) if len(checked) > 1 else checked[0]
        repeats = checked_total > len(union)
    rows = sorted_unique(np.concatenate(marked)) if marked else np.empty(0, np.uint64)
    if spec.action is None:
        counts = {}
    return rows, counts, repeats


def _gather(
    batches: Iterator[pa.RecordBatch], with_action: bool, with_part: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The columns of ``batches`` (file, row index[, clause][, task]) as arrays."""
    columns: list[list[np.ndarray]] = [[], [], [], []]
    for batch in batches:
        if not batch.num_rows:
            continue
        for i in range(batch.num_columns):
            columns[i].append(batch.column(i).to_numpy(zero_copy_only=False))
    if not columns[0]:
        empty = np.empty(0, np.int64)
        return empty, empty, np.empty(0, np.int32), empty
    n = np.concatenate(columns[0]).astype(np.int64)
    a = np.concatenate(columns[2]) if with_action else np.full(len(n), NO_ACTION, np.int32)
    p = np.concatenate(columns[3 if with_action else 2]) if with_part else np.empty(0, np.int64)
    return n, np.concatenate(columns[1]), a, p


def _runs(values: np.ndarray) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of equal values of a sorted array."""
    if not len(values):
        return
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    yield from zip(starts.tolist(), ends.tolist(), strict=True)
