"""The job of one Python DML command (:class:`DmlJob`): its transaction, the files it reads and
writes (data, change data, deletion vectors) and its timings, shared by DELETE and UPDATE
(:mod:`deltalog.commands.dml.arrow`) and MERGE (:mod:`deltalog.commands.dml.merge_arrow`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors, row_tracking
from deltalog.actions import Action, DeletionVectorDescriptor, remove_action
from deltalog.commands.dml.file_changes import (
    CHANGE_TYPE,
    DmlSettings,
    FileChanges,
    as_change_files,
    mark_deleted,
    now_ms,
)
from deltalog.commands.write.constraints import check_batch
from deltalog.commands.write.write_into_delta import change_data_layout, dml_plan
from deltalog.data_files import TableLayout, read_parquet, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.delta_log import DeltaLog
from deltalog.features import check_write_supported
from deltalog.paths import resolve
from deltalog.scan.predicate import Predicate, PredicateSyntaxError, parse_predicate
from deltalog.scan.row_filter import evaluate, is_true
from deltalog.schema import StructType
from deltalog.txn import operations
from deltalog.write.deletion_vectors import DeletionVectorWriter
from deltalog.write.file_writer import DataFileWriter

if TYPE_CHECKING:
    from deltalog.txn.transaction import Transaction

T = TypeVar("T")
U = TypeVar("U")

# Files read or rewritten at once: pyarrow reads, computes and writes parquet without the GIL.
_THREADS = max(1, min(8, os.cpu_count() or 1))


class DmlJob:
    """One command's transaction and the files it writes (data, change data, deletion
    vectors). Use as a context manager: files written before a failure inside the block are
    deleted; :meth:`finish` ends the writing, :meth:`commit` commits (outside the block, so a
    failed commit never deletes files a concurrent reader might already see).

    :meth:`over_files` runs a function per file on threads: :meth:`write` and
    :meth:`write_changes` may be called from it (each thread has its own writers), the other
    methods only from the thread that made the job.
    """

    def __init__(
        self,
        txn: Transaction,
        operation: operations.Operation,
        *,
        zone: dt.tzinfo | None = None,
    ) -> None:
        self.began = time.monotonic()
        snapshot = txn.snapshot
        if snapshot is None:
            raise errors.table_not_found(txn.log.table_root)
        check_write_supported(snapshot.protocol, txn.log.table_root)
        self.txn = txn
        self.snapshot = snapshot
        self.store = txn.log.store
        self.root = snapshot.table_root
        self.zone = zone  # literals without a zone (Spark's session zone; UTC when None)
        self.settings = DmlSettings.for_snapshot(snapshot)
        self.operation = operation
        self.plan = dml_plan(self.txn, operation)
        self.layout = TableLayout.of(snapshot)
        # Row tracking enabled: rows read carry their ids and commit versions (the
        # materialized columns) into every data file written, so rewrites keep them.
        self.tracking = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
        if self.tracking is not None:
            txn.row_tracking_preserved = True
        self.changes = FileChanges()
        self.now = now_ms()
        self.scan_ms = self.rewrite_ms = 0
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._writers: list[tuple[DataFileWriter, bool]] = []  # (writer, is change data)
        self._vectors: DeletionVectorWriter | None = None
        self._prefetched: dict[tuple[str, str, tuple[str, ...] | None], Future[Any]] = {}

    @classmethod
    def at(cls, path: str, operation: operations.Operation) -> DmlJob:
        """A job on the latest version of the table at ``path``.

        Raises:
            TableNotFoundError: no table at ``path``.
        """
        return cls(DeltaLog.for_table(path).start_transaction(), operation)

    def __enter__(self) -> DmlJob:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)

    # -- conditions and rules ---------------------------------------------------------------

    def parse(self, condition: str | None) -> Predicate | None:
        """The condition parsed, checked against the table's columns (on no rows).

        Raises:
            UnsupportedFeatureError: outside the evaluated SQL subset.
            InvalidArgumentError: it names a column the table does not have.
        """
        if condition is None:
            return None
        try:
            predicate = parse_predicate(condition)
        except PredicateSyntaxError as e:
            raise errors.UnsupportedFeatureError(
                "DELTA_UNSUPPORTED_PREDICATE",
                f"the condition {condition!r} is outside what the Python DML evaluates ({e}).",
                table=self.root,
                help="use comparisons of a column with a literal, IN, IS [NOT] NULL, BETWEEN "
                "and AND/OR/NOT, or run the command through Spark.",
            ) from None
        self.check_condition(predicate)
        return predicate

    def check_condition(self, predicate: Predicate) -> None:
        """Judge ``predicate``'s literals and types on no rows (before any file is read).

        Raises:
            UnsupportedFeatureError: a literal or type outside the evaluated subset.
            InvalidArgumentError: it names a column the table does not have.
        """
        self.evaluate(predicate, self.empty_rows())

    def evaluate(self, predicate: Predicate, rows: pa.Table) -> pa.BooleanArray:
        return evaluate(
            predicate, rows, table=self.root, zone=self.zone_or_utc, schema=self.snapshot.schema
        )

    @property
    def zone_or_utc(self) -> dt.tzinfo:
        return self.zone or dt.UTC

    def empty_rows(self) -> pa.Table:
        return self.snapshot.schema.to_arrow().empty_table()

    def check_rules(self) -> None:
        """Refuse now, before reading or writing, a table whose rules cannot be checked here
        (generated columns, constraints outside the evaluated subset)."""
        check_batch(self.plan, pa.RecordBatch.from_pylist([], schema=self.empty_rows().schema))

    def match(self, predicate: Predicate | None, rows: pa.Table) -> tuple[pa.Array, int]:
        """Where ``predicate`` is TRUE on ``rows`` (everywhere for ``None``), and how often."""
        if predicate is None:
            return pa.array(np.ones(rows.num_rows, dtype=bool)), rows.num_rows
        hit = is_true(self.evaluate(predicate, rows))
        return hit, int(pc.sum(hit).as_py() or 0)

    # -- reading -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def prefetching(self, files: pa.Table, columns: Sequence[str] | None = None) -> Iterator[None]:
        """Read ``files`` (rows of the snapshot's ``all_files_arrow()``) on threads while the
        block runs (the caller waits there for something else: a Spark source collected), for
        :meth:`read` of the same file and ``columns`` to take, in or after the block; reads
        nothing takes are dropped at its end. Reading here records nothing in the read set:
        the command still asks the transaction for the files it reads."""
        pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="deltalog-prefetch")
        wanted = tuple(columns) if columns is not None else None
        try:
            with self._lock:
                for row in files.to_pylist():
                    key = _file_key(row, wanted)
                    self._prefetched[key] = pool.submit(self._read_now, row, columns)
            yield
        finally:
            self.drop_prefetched()
            pool.shutdown(wait=True, cancel_futures=True)

    def drop_prefetched(self) -> None:
        """Forget the files :meth:`prefetching` read that no :meth:`read` took."""
        with self._lock:
            dropped, self._prefetched = self._prefetched, {}
        for future in dropped.values():
            future.cancel()

    def read(
        self, row: Mapping[str, Any], columns: Sequence[str] | None = None
    ) -> tuple[pa.Table, np.ndarray]:
        """A live file's logical rows (deleted rows dropped) and their physical row indexes;
        only ``columns`` (logical names, the table's spelling) when given. Thread-safe."""
        key = _file_key(row, tuple(columns) if columns is not None else None)
        with self._lock:
            future = self._prefetched.pop(key, None)
        if future is not None and not future.cancelled():
            rows: tuple[pa.Table, np.ndarray] = future.result()
            return rows
        return self._read_now(row, columns)

    def _read_now(
        self, row: Mapping[str, Any], columns: Sequence[str] | None
    ) -> tuple[pa.Table, np.ndarray]:
        started = time.monotonic()
        layout = self.layout
        schema = layout.schema
        if columns is not None:
            wanted = set(columns)
            schema = StructType(tuple(f for f in schema.fields if f.name in wanted))
        physical = None
        if columns is not None and layout.column_mapping_mode != "id":  # id: matched by ids
            physical = [
                f.physical_name if layout.column_mapping_mode != "none" else f.name
                for f in schema.fields
                if f.name.lower() not in {c.lower() for c in layout.partition_columns}
            ]
        data = read_parquet(resolve(self.root, row["path"]), self.root, columns=physical)
        index = np.arange(data.num_rows, dtype=np.uint64)
        tracking = self._row_tracking(row, data, index) if columns is None else None
        dv = row.get("deletionVector")
        if dv:
            descriptor = DeletionVectorDescriptor.from_dict(dv)
            deleted = read_deletion_vector(self.store, self.root, descriptor)
            keep = np.ones(data.num_rows, dtype=bool)
            keep[deleted[deleted < data.num_rows].astype(np.int64)] = False
            data, index = data.filter(pa.array(keep)), index[keep]
            if tracking is not None:
                tracking = tracking.filter(pa.array(keep))
        rows = to_logical(
            data,
            schema,
            layout.partition_columns,
            layout.column_mapping_mode,
            dict(row.get("partitionValues") or []),
        )
        if tracking is not None:
            for name in tracking.column_names:
                rows = rows.append_column(name, tracking.column(name))
        with self._lock:
            self.scan_ms += elapsed_ms_since(started)
        return rows, index

    def _row_tracking(
        self, row: Mapping[str, Any], data: pa.Table, index: np.ndarray
    ) -> pa.Table | None:
        """The row ids and commit versions of a file's rows (all of them, before deleted rows
        are dropped), named as the table's materialized columns."""
        if self.tracking is None:
            return None
        return row_tracking.read_values(self.tracking, row, data, index)

    def carried(self, rows: pa.Table) -> list[str]:
        """The row-tracking columns ``rows`` carry (read by :meth:`read`)."""
        if self.tracking is None:
            return []
        return [n for n in self.tracking.names if n in rows.column_names]

    def updated(self, new: pa.Table, old: pa.Table) -> pa.Table:
        """Updated rows ``new`` keep the ids of ``old`` (the same rows before the update,
        in order); their commit version becomes null: the commit's own."""
        if self.tracking is None or self.tracking.row_id not in old.column_names:
            return new
        ids = old.column(self.tracking.row_id)
        new = new.drop_columns(self.carried(new)).append_column(self.tracking.row_id, ids)
        return new.append_column(self.tracking.row_commit_version, pa.nulls(len(new), pa.int64()))

    def over_files(self, files: Iterable[U], work: Callable[[U], T]) -> Generator[T, None, None]:
        """``work(file)`` for each file (or any piece of work), on threads, a few ahead of the
        caller; results in order. A failure stops the rest and is raised here. A caller that
        may stop early closes the iterator (``contextlib.closing``): closing waits for the
        running pieces, so nothing is written after the job's files are deleted."""
        pending: deque[Future[T]] = deque()
        with ThreadPoolExecutor(_THREADS, thread_name_prefix="deltalog-dml") as pool:
            try:
                for row in files:
                    pending.append(pool.submit(work, row))
                    if len(pending) > 2 * _THREADS:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()

    # -- writing -----------------------------------------------------------------------------

    def write(self, rows: pa.Table, *, check: bool = True) -> None:
        """Write ``rows`` (the table's logical columns) as new data files; ``check`` makes them
        pass the table's rules first (rows copied unchanged need not)."""
        if rows.num_rows == 0:
            return
        started = time.monotonic()
        layout = self.plan.layout
        if self.tracking is not None:
            layout = replace(layout, carried_columns=self.tracking.names)
        writer = self._writer("data", layout, change_data=False)
        for batch in rows.to_batches():
            if check:
                check_batch(self.plan, batch)
            writer.add(batch)
        self._took(started)

    def write_changes(self, rows: pa.Table, change_type: str) -> None:
        """Write ``rows`` as change data of ``change_type`` (when the table keeps a feed)."""
        if not self.settings.change_data_feed or rows.num_rows == 0:
            return
        started = time.monotonic()
        writer = self._writer("cdc", change_data_layout(self.plan.layout), change_data=True)
        rows = rows.drop_columns(self.carried(rows))  # change data keeps no row ids
        kinds = pa.array([change_type] * rows.num_rows, pa.string())
        writer.add(rows.append_column(CHANGE_TYPE, kinds))
        self._took(started)

    def _writer(self, slot: str, layout: Any, *, change_data: bool) -> DataFileWriter:
        """This thread's writer of data (or change data) files."""
        writer: DataFileWriter | None = getattr(self._local, slot, None)
        if writer is None:
            with self._lock:
                writer = DataFileWriter(self.store, layout, task_id=len(self._writers))
                self._stack.enter_context(writer)
                self._writers.append((writer, change_data))
            setattr(self._local, slot, writer)
        return writer

    def _took(self, started: float) -> None:
        with self._lock:
            self.rewrite_ms += elapsed_ms_since(started)

    def mark_deleted(self, row: Mapping[str, Any], indexes: np.ndarray) -> None:
        """Mark the physical rows ``indexes`` of the live file ``row`` deleted (a deletion
        vector merged with its old one; the file is removed when no row is left)."""
        if len(indexes) == 0:
            return
        if self._vectors is None:
            writer = DeletionVectorWriter(
                self.store, self.root, self.snapshot.metadata.configuration
            )
            self._vectors = self._stack.enter_context(writer)
        update = mark_deleted(
            row,
            indexes,
            store=self.store,
            table_root=self.root,
            write_vector=self._vectors.add,
            now=self.now,
        )
        self.changes.add_vector_update(update)

    def remove(self, row: Mapping[str, Any]) -> None:
        self.changes.removes.append(remove_action(row, self.now))

    def finish(self) -> list[Action]:
        """Close every file written: the actions to commit."""
        cdc = []
        # Each writer writes its last buffered rows: on threads (parquet encodes without the
        # GIL), the adds then taken in the writers' order.
        with ThreadPoolExecutor(_THREADS, thread_name_prefix="deltalog-dml") as pool:
            finished = list(pool.map(lambda w: w[0].finish(), self._writers))
        for (_, change_data), adds in zip(self._writers, finished, strict=True):
            if change_data:
                cdc.extend(adds)
            else:
                self.changes.adds.extend(adds)
        if cdc:
            self.changes.cdc = as_change_files(cdc)
        if self._vectors is not None:
            self._vectors.finish()
        return self.changes.actions()

    def check_written(self, expected: int) -> None:
        """The reference's guard: the rows written are the rows the command meant to write."""
        written = self.changes.written_rows()
        if written != expected:
            raise errors.num_records_mismatch(self.operation.name, written, expected, self.root)

    def elapsed_ms(self) -> int:
        return elapsed_ms_since(self.began)

    def commit(self, actions: list[Action], metrics: Mapping[str, int]) -> int | None:
        return self.txn.commit_if_needed(actions, self.operation.with_metrics(metrics))


def _file_key(
    row: Mapping[str, Any], columns: tuple[str, ...] | None
) -> tuple[str, str, tuple[str, ...] | None]:
    """A live file's rows, as read: its path, its deletion vector, the columns read."""
    return str(row["path"]), repr(row.get("deletionVector")), columns


def elapsed_ms_since(since: float) -> int:
    return int((time.monotonic() - since) * 1000)
