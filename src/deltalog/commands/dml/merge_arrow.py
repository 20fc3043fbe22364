"""MERGE from plain Python on pyarrow: an equality-key upsert (reference ``MergeIntoCommand``
for ``ON t.k1 = s.k1 AND ...`` with unconditional clauses), with pyarrow joins, no Spark.

Keys compare with SQL equality: a NULL key never matches (such source rows are inserted, such
target rows are "not matched by source"). Execution follows the reference:

* **insert-only** (no MATCHED and no NOT MATCHED BY SOURCE clause): the source rows without a
  match in the target are appended; nothing is rewritten and no change files are written.
* **general**: the target rows of the candidate files are joined with the source; the action
  of every target row decides the touched files; copy-on-write rewrites them (updated,
  inserted and unchanged rows), deletion vectors write only updated and inserted rows and mark
  the changed ones deleted in place. With the change data feed on, ``update_preimage``,
  ``update_postimage``, ``delete`` and ``insert`` rows are written too. When no target row is
  acted on, the inserts take the insert-only path.

Without a NOT MATCHED BY SOURCE clause only the files that may hold a key between the source's
smallest and largest key are read (data skipping; the conflict checker sees the same range).
Several source rows matching one target row raise ``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_
ROW_IN_MERGE`` (nothing is changed), unless the matched action is ``delete``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import Action
from deltalog.commands.dml.file_changes import row_indexes_by_number
from deltalog.commands.dml.job import DmlJob, elapsed_ms_since
from deltalog.commands.write.identity import identity_columns
from deltalog.scan.predicate import And, Comparison, Literal, Predicate
from deltalog.schema import StructField, StructType, compares_by_bytes
from deltalog.txn import operations
from deltalog.txn.operations import MergePredicate
from deltalog.write.char_varchar import fit_char_varchar
from deltalog.write.conform import conform_table

ROW, TARGET, SOURCE = "__deltalog_row", "__deltalog_t", "__deltalog_s"
KEEP, UPDATE, DELETE = 0, 1, 2
CLAUSES = {
    "when_matched": (None, "update", "delete"),
    "when_not_matched": (None, "insert"),
    "when_not_matched_by_source": (None, "delete"),
}


def merge(
    path: str,
    source: pa.Table | pa.RecordBatch | pa.RecordBatchReader,
    on: Sequence[str] | str,
    *,
    when_matched: str | None = "update",
    when_not_matched: str | None = "insert",
    when_not_matched_by_source: str | None = None,
) -> dict[str, int]:
    """Merge ``source`` into the Delta table at ``path`` on equal keys ``on`` (column names of
    both; NULL keys never match).

    Args:
        when_matched: ``update`` sets every target column from the source column of the same
            name (``UPDATE SET *``); ``delete`` deletes the target row; ``None`` leaves it.
        when_not_matched: ``insert`` inserts the source row (``INSERT *``); ``None`` does not.
        when_not_matched_by_source: ``delete`` deletes target rows no source row matches.

    With ``update`` or ``insert`` every target column must be a source column (matched by
    name, ignoring case; values are cast to the target's types; extra source columns are
    ignored). Conditions on clauses, explicit assignments and schema evolution are Spark's
    (``DeltaTable.merge``).

    Returns:
        The operation metrics with the reference's names: ``numSourceRows``,
        ``numTargetRowsInserted``, ``numTargetRowsUpdated``, ``numTargetRowsDeleted``,
        ``numTargetRowsCopied``, ``numOutputRows``, ``numTargetFilesAdded``,
        ``numTargetFilesRemoved``, ``numTargetChangeFilesAdded``, ...

    Raises:
        InvalidArgumentError: no clause, an unknown action, a key missing from either side
            (``UNRESOLVED_COLUMN``, ``DELTA_MERGE_UNRESOLVED_EXPRESSION``), a target column
            missing from the source, a value that does not cast.
        DeltaWriteError: several source rows matched one target row; a written row breaks a
            NOT NULL or CHECK constraint. Nothing is committed.
        UnsupportedFeatureError: the table has generated columns, an identity column is updated
            or (GENERATED ALWAYS) inserted.
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    clauses = {
        "when_matched": when_matched,
        "when_not_matched": when_not_matched,
        "when_not_matched_by_source": when_not_matched_by_source,
    }
    for name, value in clauses.items():
        if value not in CLAUSES[name]:
            raise errors.invalid_argument(
                f"{name} must be one of {', '.join(repr(v) for v in CLAUSES[name])}, not {value!r}",
                path,
            )
    keys = [on] if isinstance(on, str) else list(on)
    source = _as_table(source, path)
    operation = operations.merge(
        " AND ".join(f"t.{k} = s.{k}" for k in keys),
        [MergePredicate(when_matched)] if when_matched else [],
        [MergePredicate(when_not_matched)] if when_not_matched else [],
        [MergePredicate(when_not_matched_by_source)] if when_not_matched_by_source else [],
    )
    with DmlJob.at(path, operation) as job:
        actions, metrics = merge_rows(
            job, source, keys, when_matched, when_not_matched, when_not_matched_by_source
        )
    job.commit(actions, metrics)
    return metrics


def merge_rows(
    job: DmlJob,
    source: pa.Table,
    keys: Sequence[str],
    when_matched: str | None,
    when_not_matched: str | None,
    when_not_matched_by_source: str | None,
) -> tuple[list[Action], dict[str, int]]:
    """The MERGE of :func:`merge` in ``job``: its files written, and its actions and metrics,
    to commit in ``job.txn`` (the Spark layer's local engine runs it in its own command's
    transaction)."""
    command = _Merge(job, list(keys), when_matched, when_not_matched, when_not_matched_by_source)
    command.run(source)
    actions = job.finish()
    job.check_written(command.written)
    return actions, command.metrics()


def target_columns(job: DmlJob, keys: Sequence[str]) -> list[str] | None:
    """The target columns a MERGE on ``keys`` (the table's spelling) reads; ``None``: all.

    The target's old values are needed to rewrite its files (copy-on-write), for change data
    and for row ids; otherwise (deletion vectors: updated rows come whole from the source) its
    keys find every row acted on."""
    settings = job.settings
    if not settings.deletion_vectors or settings.change_data_feed or job.tracking is not None:
        return None
    return list(keys)


def _as_table(source: Any, table: str) -> pa.Table:
    if isinstance(source, pa.RecordBatch):
        return pa.Table.from_batches([source])
    if isinstance(source, pa.RecordBatchReader):
        return source.read_all()
    if isinstance(source, pa.Table):
        return source
    raise errors.invalid_argument(
        f"source must be a pyarrow Table, RecordBatch or RecordBatchReader, not "
        f"{type(source).__name__}",
        table,
    )


class _Merge:
    def __init__(
        self,
        job: DmlJob,
        keys: list[str],
        matched: str | None,
        not_matched: str | None,
        by_source: str | None,
    ) -> None:
        self.job = job
        self.matched, self.not_matched, self.by_source = matched, not_matched, by_source
        if not (matched or not_matched or by_source):
            raise errors.merge_missing_when(job.root)
        if not keys:
            raise errors.invalid_argument("on must name at least one key column", job.root)
        self.schema = job.snapshot.schema
        by_lower = {f.name.lower(): f.name for f in self.schema.fields}
        self.keys = []
        for key in keys:
            name = by_lower.get(key.strip("`").lower())
            if name is None:
                raise errors.unresolved_column(key, "MERGE ON", self.schema.names, job.root)
            self.keys.append(name)
            if not compares_by_bytes(self.schema.field(name)):
                # Arrow joins by bytes; Spark matches 'ABC' with 'abc' under UTF8_LCASE.
                raise errors.UnsupportedFeatureError(
                    "DELTA_UNSUPPORTED_PREDICATE",
                    f"key column {name!r} has a collation (or is a CHAR): Spark does not match "
                    "its values by their bytes, and this merge joins only by bytes.",
                    table=job.root,
                    help="run the MERGE through Spark, which matches by the column's collation.",
                )
        self.source_rows = self.inserted = self.updated = self.copied = 0
        self.matched_deleted = self.by_source_deleted = 0
        self.materialize_ms = 0
        self.written = 0

    def metrics(self) -> dict[str, int]:
        job = self.job
        metrics = job.changes.metrics(merge=True)
        deleted = self.matched_deleted + self.by_source_deleted
        metrics.update(
            numSourceRows=self.source_rows,
            numTargetRowsInserted=self.inserted,
            numTargetRowsUpdated=self.updated,
            numTargetRowsMatchedUpdated=self.updated,
            numTargetRowsNotMatchedBySourceUpdated=0,
            numTargetRowsDeleted=deleted,
            numTargetRowsMatchedDeleted=self.matched_deleted,
            numTargetRowsNotMatchedBySourceDeleted=self.by_source_deleted,
            numTargetRowsCopied=self.copied,
            numOutputRows=self.inserted + self.updated + self.copied,
            executionTimeMs=job.elapsed_ms(),
            materializeSourceTimeMs=self.materialize_ms,
            scanTimeMs=job.scan_ms,
            rewriteTimeMs=job.rewrite_ms,
        )
        return metrics

    # -- the source ----------------------------------------------------------------------------

    def _source(self, source: pa.Table) -> pa.Table:
        """The source's columns the merge uses, named and typed as the target's, plus each
        row's index (SOURCE).

        Raises:
            InvalidArgumentError: a key or (for update/insert) a target column is missing.
        """
        started = time.monotonic()
        job, schema = self.job, self.schema
        writes = self.matched == "update" or self.not_matched == "insert"
        by_lower = {n.lower(): n for n in source.column_names}
        key_set = {k.lower() for k in self.keys}
        needed = [f for f in schema.fields if writes or f.name.lower() in key_set]
        clause = "MATCHED UPDATE *" if self.matched == "update" else "NOT MATCHED INSERT *"
        columns: dict[str, Any] = {}
        for f in needed:
            name = by_lower.get(f.name.lower())
            if name is None:
                where = "MERGE ON" if f.name.lower() in key_set else clause
                raise errors.merge_unresolved(f"`{f.name}`", where, source.column_names, job.root)
            columns[f.name] = source.column(name)
        if writes:
            self._check_writable()
        data = pa.table(columns) if columns else pa.table({})
        fields = tuple(StructField(f.name, f.type, True, f.metadata) for f in needed)
        rows = conform_table(data, StructType(fields), job.root)
        if writes:  # the values written to CHAR/VARCHAR columns, as Spark stores them
            rows = fit_char_varchar(rows, schema, job.root)
        rows = rows.append_column(SOURCE, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
        self.materialize_ms = elapsed_ms_since(started)
        return rows

    def _check_writable(self) -> None:
        job = self.job
        for c in identity_columns(self.schema):
            if self.matched == "update":
                raise errors.identity_update(c.name, job.root)
            # INSERT * takes every target column from the source (its values are explicit):
            # allowed for BY DEFAULT, refused for ALWAYS, as in the reference.
            if not c.allow_explicit_insert:
                raise errors.identity_explicit_insert(c.name, job.root)
        job.check_rules()

    def _key_range(self, source: pa.Table) -> tuple[Predicate | None, bool]:
        """The target files worth reading: a predicate on the keys' range in the source (for
        integer and string keys), and whether no target row can match at all (a key column
        of the source is all NULL)."""
        result: Predicate | None = None
        for key in self.keys:
            column = source.column(key)
            if column.null_count == len(column):
                return None, True
            t = column.type
            kind = "int" if pa.types.is_integer(t) else "string" if pa.types.is_string(t) else None
            if kind is None:
                continue
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            both: Predicate = And(
                Comparison(key, ">=", Literal(low, kind)),
                Comparison(key, "<=", Literal(high, kind)),
            )
            result = both if result is None else And(result, both)
        return result, False

    # -- the target ----------------------------------------------------------------------------

    def _target(
        self, files: pa.Table, columns: Sequence[str] | None, *, row_indexes: bool
    ) -> tuple[pa.Table, np.ndarray, list[dict[str, Any]]]:
        """Every live row of ``files`` (only ``columns`` when given), file after file, with its
        position in the result (TARGET) and, with ``row_indexes``, its physical row index
        (ROW); and where each file's rows end in the result."""
        rows_of_files = files.to_pylist()

        def read(row: Mapping[str, Any]) -> pa.Table:
            rows, index = self.job.read(row, columns)
            return rows.append_column(ROW, pa.array(index, pa.uint64())) if row_indexes else rows

        parts = list(self.job.over_files(rows_of_files, read))
        self.job.drop_prefetched()  # files read ahead that the key range skips
        if parts:
            target = pa.concat_tables(parts)
        else:
            target = self.job.empty_rows()
            if columns is not None:
                target = target.select(list(columns))
            if row_indexes:
                target = target.append_column(ROW, pa.array([], pa.uint64()))
        ends = np.cumsum([part.num_rows for part in parts], dtype=np.int64)
        positions = pa.array(np.arange(target.num_rows, dtype=np.int64))
        return target.append_column(TARGET, positions), ends, rows_of_files

    def _pairs(self, target: pa.Table, source: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(target position, source index) of every matching pair (NULL keys never match)."""
        started = time.monotonic()
        if target.num_rows == 0 or source.num_rows == 0:
            empty = np.array([], dtype=np.int64)
            return empty, empty
        joined = target.select([*self.keys, TARGET]).join(
            source.select([*self.keys, SOURCE]), keys=self.keys, join_type="inner"
        )
        self.job.scan_ms += elapsed_ms_since(started)
        return (
            joined.column(TARGET).to_numpy().astype(np.int64),
            joined.column(SOURCE).to_numpy().astype(np.int64),
        )

    # -- the plan ------------------------------------------------------------------------------

    def run(self, source_data: pa.Table) -> None:
        job = self.job
        source = self._source(source_data)
        self.source_rows = source.num_rows
        key_range, nothing_matches = self._key_range(source)
        if self.by_source:
            files = job.txn.filter_files(None)
        elif nothing_matches:
            files = job.snapshot.all_files_arrow().slice(0, 0)
        else:
            files = job.txn.filter_files(key_range)
        insert_only = self.matched is None and self.by_source is None
        settings = job.settings
        columns = target_columns(job, self.keys)
        whole = columns is None
        dv = settings.deletion_vectors
        target, ends, file_rows = self._target(files, columns, row_indexes=dv)
        target_at, source_at = self._pairs(target, source)
        data_names = self.schema.names
        if insert_only:
            self._insert(source, source_at, data_names)
            return
        matched = np.zeros(target.num_rows, dtype=bool)
        matched[target_at] = True
        # A target row in two pairs: two source rows match it (only DELETE may).
        if self.matched != "delete" and np.count_nonzero(matched) != len(target_at):
            raise errors.multiple_source_rows_matched(job.root)
        action = np.full(target.num_rows, KEEP, dtype=np.int8)
        if self.matched is not None:
            action[matched] = UPDATE if self.matched == "update" else DELETE
        if self.by_source is not None:
            action[~matched] = DELETE
        acted = action != KEEP
        if not acted.any():
            self._insert(source, source_at, data_names)
            return
        acted_at = np.flatnonzero(acted)
        acted_files = np.searchsorted(ends, acted_at, side="right")  # each one's file
        updating = action == UPDATE
        deleting = action == DELETE
        self.updated = int(np.count_nonzero(updating))
        self.matched_deleted = int(np.count_nonzero(deleting & matched))
        self.by_source_deleted = int(np.count_nonzero(deleting)) - self.matched_deleted
        source_of = np.full(target.num_rows, -1, dtype=np.int64)
        source_of[target_at] = source_at
        new = (
            source.select(data_names).take(pa.array(source_of[updating]))
            if self.updated
            else job.empty_rows()
        )
        data = target.select([*data_names, *job.carried(target)]) if whole else None
        old = data.filter(pa.array(updating)) if data is not None else None
        if old is not None:
            new = job.updated(new, old)  # updated rows keep their row ids
        inserts = self._unmatched(source, source_at, data_names)
        self.inserted = inserts.num_rows
        touched = np.flatnonzero(np.bincount(acted_files, minlength=len(file_rows)))
        if dv:
            rows = target.column(ROW).to_numpy()[acted_at]
            numbers = [str(i) for i in range(len(file_rows))]
            by_file = row_indexes_by_number(acted_files, rows, numbers)
            for i in touched:
                job.mark_deleted(file_rows[i], by_file[str(i)])
            job.write(new)
            job.write(inserts)
        else:
            assert data is not None
            self.copied = self._rewrite(data, ends, acted, touched, [new, inserts])
            for i in touched:
                job.remove(file_rows[i])
        self.written = self.copied + self.updated + self.inserted
        if settings.change_data_feed:
            assert data is not None and old is not None
            job.write_changes(old, "update_preimage")
            job.write_changes(new, "update_postimage")
            job.write_changes(data.filter(pa.array(deleting)), "delete")
            job.write_changes(inserts, "insert")

    def _rewrite(
        self,
        data: pa.Table,
        ends: np.ndarray,
        acted: np.ndarray,
        touched: np.ndarray,
        written: list[pa.Table],
    ) -> int:
        """Copy-on-write: the unchanged rows of the touched files and the ``written`` rows
        (updated, inserted), written on threads a file at a time (file ``i``'s rows are the
        slice of ``data`` ending at ``ends[i]``: the target is read file by file). Returns
        the rows copied."""
        starts = np.concatenate([[0], ends[:-1]])
        pieces: list[tuple[pa.Table, np.ndarray | None]] = [
            (data.slice(start, end - start), ~acted[start:end])
            for start, end in zip(starts[touched].tolist(), ends[touched].tolist(), strict=True)
        ]
        pieces += [(rows, None) for rows in written if rows.num_rows]

        def write(piece: tuple[pa.Table, np.ndarray | None]) -> int:
            rows, keep = piece
            if keep is None:
                self.job.write(rows)
                return 0
            kept = rows.filter(pa.array(keep))
            self.job.write(kept, check=False)
            return kept.num_rows

        return sum(self.job.over_files(pieces, write))

    def _unmatched(self, source: pa.Table, source_at: np.ndarray, names: list[str]) -> pa.Table:
        """The source rows an insert clause takes: those matching no target row."""
        if self.not_matched is None:
            return self.job.empty_rows()
        unmatched = np.ones(source.num_rows, dtype=bool)
        unmatched[source_at] = False
        return source.select(names).filter(pa.array(unmatched))

    def _insert(self, source: pa.Table, source_at: np.ndarray, names: list[str]) -> None:
        """The insert-only path: append the unmatched source rows (no change files: readers
        derive the inserts from the adds)."""
        inserts = self._unmatched(source, source_at, names)
        self.inserted = self.written = inserts.num_rows
        self.job.write(inserts)
