"""DELETE, UPDATE and MERGE from plain Python on pyarrow, no Spark (for small jobs, tests and
tools): the same semantics and commits as the Spark commands (:mod:`deltalog.spark.commands.dml`,
:mod:`deltalog.spark.commands.merge`), with every row on this process.

* A row is deleted or updated where the condition is TRUE; FALSE and NULL keep it as it is.
* A DELETE with no condition, or with one on partition columns only, removes whole files
  without reading them (row counts from the files' statistics).
* Otherwise the candidate files (partition pruning and data skipping through
  ``txn.filter_files``, which also records the read for the conflict checker) are read one by
  one: copy-on-write rewrites the files holding matching rows; with deletion vectors
  (``delta.enableDeletionVectors``) DELETE marks the rows deleted in place and UPDATE writes
  only the updated rows and marks the old ones.
* With the change data feed on (``delta.enableChangeDataFeed``) the changed rows go to
  ``_change_data/`` (``delete``, ``update_preimage``/``update_postimage``, ``insert``), all of a
  version's changes or none: no change files for deletion-vector DELETEs, metadata-only
  DELETEs and insert-only MERGEs, whose changes readers derive from the file actions.
* Written rows pass the table's rules (NOT NULL, CHECK constraints) with
  :func:`deltalog.commands.write.constraints.check_batch`, as :func:`deltalog.write_table`
  does: tables with generated columns are refused for UPDATE and MERGE (their SQL expressions
  are not evaluated here), and so are assignments to identity columns.

Each command commits once, with the reference's operation parameters and metrics, which it
returns. Conditions use the SQL subset :mod:`deltalog.scan.row_filter` evaluates (comparisons with
literals, IN, IS [NOT] NULL, BETWEEN, AND/OR/NOT); anything else raises
``UnsupportedFeatureError`` before a byte is written.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import Action, DeletionVectorDescriptor
from deltalog.commands.dml.file_changes import (
    CHANGE_TYPE,
    DmlSettings,
    FileChanges,
    as_change_files,
    live_records,
    mark_deleted,
    now_ms,
    remove_files,
)
from deltalog.commands.write.constraints import check_batch
from deltalog.commands.write.identity import identity_columns
from deltalog.commands.write.write_into_delta import change_data_layout, dml_plan, remove_action
from deltalog.data_files import TableLayout, read_parquet, to_logical
from deltalog.delta_log import DeltaLog
from deltalog.features import check_write_supported
from deltalog.scan.predicate import Predicate, PredicateSyntaxError, parse_predicate
from deltalog.scan.row_filter import evaluate, is_partition_only, is_true, partition_matches
from deltalog.schema import to_arrow
from deltalog.txn import operations
from deltalog.write.file_writer import DataFileWriter

if TYPE_CHECKING:
    from deltalog.write.deletion_vectors import DeletionVectorWriter


class DmlJob:
    """One command's transaction and the files it writes (data, change data, deletion
    vectors). Use as a context manager: files written before a failure inside the block are
    deleted; :meth:`finish` ends the writing, :meth:`commit` commits (outside the block, so a
    failed commit never deletes files a concurrent reader might already see)."""

    def __init__(self, path: str, operation: operations.Operation) -> None:
        self.began = time.monotonic()
        log = DeltaLog.for_table(path)
        self.txn = log.start_transaction()
        snapshot = self.txn.snapshot
        if snapshot is None:
            raise errors.table_not_found(log.table_root)
        check_write_supported(snapshot.protocol, log.table_root)
        self.snapshot = snapshot
        self.store = log.store
        self.root = snapshot.table_root
        self.settings = DmlSettings.for_snapshot(snapshot)
        self.operation = operation
        self.plan = dml_plan(self.txn, operation)
        self.layout = TableLayout.of(snapshot)
        self.changes = FileChanges()
        self.now = now_ms()
        self.scan_ms = self.rewrite_ms = 0
        self._stack = contextlib.ExitStack()
        self._data: DataFileWriter | None = None
        self._cdc: DataFileWriter | None = None
        self._vectors: DeletionVectorWriter | None = None

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
        evaluate(predicate, self.empty_rows(), table=self.root)
        return predicate

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
        hit = is_true(evaluate(predicate, rows, table=self.root))
        return hit, int(pc.sum(hit).as_py() or 0)

    # -- reading -----------------------------------------------------------------------------

    def read(self, row: Mapping[str, Any]) -> tuple[pa.Table, np.ndarray]:
        """A live file's logical rows (deleted rows dropped) and their physical row indexes."""
        from deltalog.deletion_vectors import read_deletion_vector
        from deltalog.paths import resolve

        started = time.monotonic()
        data = read_parquet(resolve(self.root, row["path"]), self.root)
        index = np.arange(data.num_rows, dtype=np.uint64)
        dv = row.get("deletionVector")
        if dv:
            descriptor = DeletionVectorDescriptor.from_dict(dv)
            deleted = read_deletion_vector(self.store, self.root, descriptor)
            keep = np.ones(data.num_rows, dtype=bool)
            keep[deleted[deleted < data.num_rows].astype(np.int64)] = False
            data, index = data.filter(pa.array(keep)), index[keep]
        layout = self.layout
        rows = to_logical(
            data,
            layout.schema,
            layout.partition_columns,
            layout.column_mapping_mode,
            dict(row.get("partitionValues") or []),
        )
        self.scan_ms += _elapsed_ms(started)
        return rows, index

    # -- writing -----------------------------------------------------------------------------

    def write(self, rows: pa.Table, *, check: bool = True) -> None:
        """Write ``rows`` (the table's logical columns) as new data files; ``check`` makes them
        pass the table's rules first (rows copied unchanged need not)."""
        if rows.num_rows == 0:
            return
        started = time.monotonic()
        if self._data is None:
            self._data = self._stack.enter_context(DataFileWriter(self.store, self.plan.layout))
        for batch in rows.to_batches():
            if check:
                check_batch(self.plan, batch)
            self._data.add(batch)
        self.rewrite_ms += _elapsed_ms(started)

    def write_changes(self, rows: pa.Table, change_type: str) -> None:
        """Write ``rows`` as change data of ``change_type`` (when the table keeps a feed)."""
        if not self.settings.change_data_feed or rows.num_rows == 0:
            return
        started = time.monotonic()
        if self._cdc is None:
            layout = change_data_layout(self.plan.layout)
            self._cdc = self._stack.enter_context(DataFileWriter(self.store, layout))
        kinds = pa.array([change_type] * rows.num_rows, pa.string())
        self._cdc.add(rows.append_column(CHANGE_TYPE, kinds))
        self.rewrite_ms += _elapsed_ms(started)

    def mark_deleted(self, row: Mapping[str, Any], indexes: np.ndarray) -> None:
        """Mark the physical rows ``indexes`` of the live file ``row`` deleted (a deletion
        vector merged with its old one; the file is removed when no row is left)."""
        from deltalog.write.deletion_vectors import DeletionVectorWriter

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
        if self._data is not None:
            self.changes.adds.extend(self._data.finish())
        if self._cdc is not None:
            self.changes.cdc = as_change_files(self._cdc.finish())
        if self._vectors is not None:
            self._vectors.finish()
        return self.changes.actions()

    def check_written(self, expected: int) -> None:
        """The reference's guard: the rows written are the rows the command meant to write."""
        written = self.changes.written_rows()
        if written != expected:
            raise errors.num_records_mismatch(self.operation.name, written, expected, self.root)

    def elapsed_ms(self) -> int:
        return _elapsed_ms(self.began)

    def commit(self, actions: list[Action], metrics: Mapping[str, int]) -> int | None:
        return self.txn.commit_if_needed(actions, self.operation.with_metrics(metrics))


def _elapsed_ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


# -- DELETE --------------------------------------------------------------------------------------


def delete(path: str, predicate: str | None = None) -> dict[str, int]:
    """Delete the rows of the Delta table at ``path`` where ``predicate`` (SQL) is TRUE; every
    row when ``None``. Nothing is committed when no row matches.

    Returns:
        The operation metrics (``numDeletedRows``, ``numCopiedRows``, ``numAddedFiles``,
        ``numRemovedFiles``, ``numDeletionVectorsAdded``...; a metadata-only DELETE of files
        without ``numRecords`` statistics has no row counts, as in the reference).

    Raises:
        TableNotFoundError: no table at ``path``.
        UnsupportedFeatureError: the condition is outside the evaluated SQL subset.
        InvalidArgumentError: the condition names a column the table does not have.
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    with DmlJob(path, operations.delete([] if predicate is None else [predicate])) as job:
        parsed = job.parse(predicate)
        snapshot, deleted, copied = job.snapshot, 0, 0
        if parsed is None or is_partition_only(snapshot, parsed):
            files = job.txn.filter_files(parsed)
            if parsed is not None:
                files = files.filter(partition_matches(snapshot, files, parsed))
            job.changes.removes = remove_files(files, job.now)
            live = [live_records(r) for r in files.select(["stats", "deletionVector"]).to_pylist()]
            counted = None if any(n is None for n in live) else sum(n or 0 for n in live)
        else:
            for row in job.txn.filter_files(parsed).to_pylist():
                rows, index = job.read(row)
                hit, n = job.match(parsed, rows)
                if n == 0:
                    continue
                deleted += n
                if job.settings.deletion_vectors:
                    job.mark_deleted(row, index[hit.to_numpy(zero_copy_only=False)])
                    continue
                kept = rows.filter(pc.invert(hit))
                copied += kept.num_rows
                job.write(kept, check=False)
                job.write_changes(rows.filter(hit), "delete")
                job.remove(row)
            counted = deleted
        actions = job.finish()
        job.check_written(copied)
    metrics = job.changes.metrics()
    metrics.update(
        numDeletedRows=counted or 0,
        numCopiedRows=copied,
        executionTimeMs=job.elapsed_ms(),
        scanTimeMs=job.scan_ms,
        rewriteTimeMs=job.rewrite_ms,
    )
    if counted is None:  # whole files removed without row counts: the reference omits them
        for key in ("numDeletedRows", "numCopiedRows", "numAddedFiles"):
            metrics.pop(key)
    job.commit(actions, metrics)
    return metrics


# -- UPDATE --------------------------------------------------------------------------------------


def update(path: str, predicate: str | None, new_values: Mapping[str, Any]) -> dict[str, int]:
    """Set columns of the rows of the Delta table at ``path`` where ``predicate`` (SQL) is
    TRUE (every row when ``None``); NULL keeps a row as it is.

    ``new_values`` maps column names to Python values (or pyarrow scalars), cast to the
    column's type, like ``deltalake``'s ``new_values``: ``{"status": "done", "n": 0}``. SQL
    expressions (``"n + 1"``) are out of scope here; Spark's ``DeltaTable.update`` takes them.

    Returns:
        The operation metrics (``numUpdatedRows``, ``numCopiedRows``, ``numAddedFiles``,
        ``numRemovedFiles``, ``numAddedChangeFiles``...).

    Raises:
        TableNotFoundError: no table at ``path``.
        InvalidArgumentError: no values; a column the table does not have
            (``UNRESOLVED_COLUMN``); a value that does not cast to its column's type.
        UnsupportedFeatureError: an identity column is assigned; the table has generated
            columns; the condition is outside the evaluated SQL subset.
        DeltaWriteError: an updated row breaks a NOT NULL or CHECK constraint.
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    with DmlJob(path, operations.update(predicate)) as job:
        parsed = job.parse(predicate)
        values = _assignments(job, new_values)
        job.check_rules()
        dv = job.settings.deletion_vectors
        updated = copied = 0
        for row in job.txn.filter_files(parsed).to_pylist():
            rows, index = job.read(row)
            hit, n = job.match(parsed, rows)
            if n == 0:
                continue
            updated += n
            new = _assign(rows, hit, values)
            if dv:
                job.write(new.filter(hit))
                job.mark_deleted(row, index[hit.to_numpy(zero_copy_only=False)])
            else:
                job.write(new)
                job.remove(row)
                copied += rows.num_rows - n
            job.write_changes(rows.filter(hit), "update_preimage")
            job.write_changes(new.filter(hit), "update_postimage")
        actions = job.finish()
        job.check_written(updated + copied)
    metrics = job.changes.metrics()
    metrics.update(
        numUpdatedRows=updated,
        numCopiedRows=copied,
        executionTimeMs=job.elapsed_ms(),
        scanTimeMs=job.scan_ms,
        rewriteTimeMs=job.rewrite_ms,
    )
    job.commit(actions, metrics)
    return metrics


def _assignments(job: DmlJob, new_values: Mapping[str, Any]) -> dict[str, pa.Scalar]:
    """``new_values`` keyed by the table's spelling of each column, as scalars of its type."""
    if not new_values:
        raise errors.invalid_argument("new_values must name at least one column", job.root)
    schema = job.snapshot.schema
    by_lower = {f.name.lower(): f for f in schema.fields}
    identity = {c.name for c in identity_columns(schema)}
    out: dict[str, pa.Scalar] = {}
    for key, value in new_values.items():
        field = by_lower.get(key.strip("`").lower())
        if field is None:
            raise errors.unresolved_column(key, "UPDATE", schema.names, job.root)
        if field.name in identity:
            raise errors.identity_update(field.name, job.root)
        out[field.name] = _scalar(value, to_arrow(field.type), field.name, job.root)
    return out


def _scalar(value: Any, target: pa.DataType, name: str, table: str) -> pa.Scalar:
    failures = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)
    try:
        if isinstance(value, pa.Scalar):
            return value.cast(target)
        try:
            return pa.scalar(value, target)
        except failures:
            return pa.scalar(value).cast(target)
    except failures as e:
        raise errors.invalid_argument(
            f"the new value {value!r} of column {name} does not cast to {target}: {e}", table
        ) from None


def _assign(rows: pa.Table, hit: pa.Array, values: Mapping[str, pa.Scalar]) -> pa.Table:
    """``rows`` with ``values`` set where ``hit`` is true."""
    columns = [
        pc.if_else(hit, values[name], rows.column(name)) if name in values else rows.column(name)
        for name in rows.column_names
    ]
    return pa.Table.from_arrays(columns, schema=rows.schema)


# -- MERGE ---------------------------------------------------------------------------------------


def merge(
    path: str,
    source: pa.Table,
    on: Sequence[str] | str,
    *,
    when_matched: str | None = "update",
    when_not_matched: str | None = "insert",
    when_not_matched_by_source: str | None = None,
) -> dict[str, int]:
    """An equality-key MERGE of ``source`` into the Delta table at ``path``; see
    :func:`deltalog.commands.dml.merge_arrow.merge`."""
    from deltalog.commands.dml.merge_arrow import merge as run

    return run(
        path,
        source,
        on,
        when_matched=when_matched,
        when_not_matched=when_not_matched,
        when_not_matched_by_source=when_not_matched_by_source,
    )
