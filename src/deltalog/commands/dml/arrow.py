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

from collections.abc import Mapping, Sequence
from contextlib import closing
from typing import Any, TypeAlias, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import Action
from deltalog.commands.dml.file_changes import (
    live_records,
    remove_files,
)
from deltalog.commands.dml.job import DmlJob
from deltalog.commands.dml.merge_arrow import merge as merge_rows
from deltalog.commands.dml.values import SqlValue
from deltalog.commands.write.identity import identity_columns
from deltalog.scan.predicate import Predicate, columns
from deltalog.scan.row_filter import is_partition_only, partition_matches
from deltalog.schema import to_arrow
from deltalog.txn import operations
from deltalog.write.char_varchar import fit_values

T = TypeVar("T")

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
    with DmlJob.at(path, operations.delete([] if predicate is None else [predicate])) as job:
        actions, metrics = delete_rows(job, job.parse(predicate))
    job.commit(actions, metrics)
    return metrics


def delete_rows(
    job: DmlJob, parsed: Predicate | None, files: pa.Table | None = None
) -> tuple[list[Action], dict[str, int]]:
    """The DELETE of the rows where ``parsed`` is TRUE in ``job``: its files written, and its
    actions and metrics, to commit in ``job.txn``. ``files`` are the candidate files when the
    caller has already filtered them (the read is then in the read set already)."""
    snapshot, deleted, copied = job.snapshot, 0, 0
    if files is None:
        files = job.txn.filter_files(parsed)
    if parsed is None or is_partition_only(snapshot, parsed):
        if parsed is not None:
            files = files.filter(partition_matches(snapshot, files, parsed))
        job.changes.removes = remove_files(files, job.now)
        live = [live_records(r) for r in files.select(["stats", "deletionVector"]).to_pylist()]
        counted = None if any(n is None for n in live) else sum(n or 0 for n in live)
    else:
        vectors = job.settings.deletion_vectors
        # Marking rows reads only the condition's columns; copy-on-write rewrites whole rows.
        wanted = _read_columns(job, parsed) if vectors else None

        def work(row: Mapping[str, Any]) -> tuple[int, np.ndarray | None, int]:
            rows, index = job.read(row, wanted)
            hit, n = job.match(parsed, rows)
            if n == 0 or vectors:
                return n, index[hit.to_numpy(zero_copy_only=False)] if n else None, 0
            kept = rows.filter(pc.invert(hit))
            job.write(kept, check=False)
            job.write_changes(rows.filter(hit), "delete")
            return n, None, kept.num_rows

        rows = files.to_pylist()
        with closing(job.over_files(rows, work)) as results:
            for row, (n, marked, kept) in zip(rows, results, strict=True):
                if n == 0:
                    continue
                deleted += n
                copied += kept
                if marked is not None:
                    job.mark_deleted(row, marked)
                else:
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
    return actions, metrics


def _read_columns(job: DmlJob, predicate: Predicate) -> list[str] | None:
    """The table's columns ``predicate`` reads (``None``: every column)."""
    by_lower = {f.name.lower(): f.name for f in job.snapshot.schema.fields}
    out = []
    for name in columns(predicate):
        field = by_lower.get(name.strip("`").lower()) or by_lower.get(
            name.split(".", 1)[0].strip("`").lower()
        )
        if field is None:
            return None
        out.append(field)
    return out


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
    with DmlJob.at(path, operations.update(predicate)) as job:
        parsed = job.parse(predicate)
        values = {
            name: _scalar(value, to_arrow(job.snapshot.schema.field(name).type), name, job.root)
            for name, value in assignment_names(job, new_values).items()
        }
        actions, metrics = update_rows(job, parsed, values)
    job.commit(actions, metrics)
    return metrics


NewValue: TypeAlias = "pa.Scalar | SqlValue"
"""An UPDATE's new value: a constant, or SQL computed per row (:mod:`.values`)."""


def update_rows(
    job: DmlJob,
    parsed: Predicate | None,
    values: Mapping[str, NewValue],
    files: pa.Table | None = None,
) -> tuple[list[Action], dict[str, int]]:
    """The UPDATE of the rows where ``parsed`` is TRUE in ``job`` (keys of ``values`` are the
    table's spelling of each column): its files written, and its actions and metrics, to
    commit in ``job.txn``. ``files`` as for :func:`delete_rows`."""
    job.check_rules()
    dv = job.settings.deletion_vectors
    if files is None:
        files = job.txn.filter_files(parsed)
    types = {f.name: to_arrow(f.type) for f in job.snapshot.schema.fields}

    def work(row: Mapping[str, Any]) -> tuple[int, np.ndarray | None, int]:
        rows, index = job.read(row)
        hit, n = job.match(parsed, rows)
        if n == 0:
            return 0, None, 0
        new = _assign(job, rows, hit, values, types)
        if dv:
            job.write(new.filter(hit))
        else:
            job.write(new)
        job.write_changes(rows.filter(hit), "update_preimage")
        job.write_changes(new.filter(hit), "update_postimage")
        return n, index[hit.to_numpy(zero_copy_only=False)] if dv else None, rows.num_rows - n

    updated = copied = 0
    rows = files.to_pylist()
    # closing: a failure here stops the threads before the job deletes what they wrote.
    with closing(job.over_files(rows, work)) as results:
        for row, (n, marked, kept) in zip(rows, results, strict=True):
            if n == 0:
                continue
            updated += n
            if marked is not None:
                job.mark_deleted(row, marked)
            else:
                job.remove(row)
                copied += kept
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
    return actions, metrics


def assignment_names(job: DmlJob, new_values: Mapping[str, T]) -> dict[str, T]:
    """``new_values`` keyed by the table's spelling of each column.

    Raises:
        InvalidArgumentError: no values, or a column the table does not have.
        UnsupportedFeatureError: an identity column is assigned.
    """
    if not new_values:
        raise errors.invalid_argument("new_values must name at least one column", job.root)
    schema = job.snapshot.schema
    by_lower = {f.name.lower(): f for f in schema.fields}
    identity = {c.name for c in identity_columns(schema)}
    out: dict[str, T] = {}
    for key, value in new_values.items():
        field = by_lower.get(key.strip("`").lower())
        if field is None:
            raise errors.unresolved_column(key, "UPDATE", schema.names, job.root)
        if field.name in identity:
            raise errors.identity_update(field.name, job.root)
        out[field.name] = value
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


def _assign(
    job: DmlJob,
    rows: pa.Table,
    hit: pa.Array,
    values: Mapping[str, NewValue],
    types: Mapping[str, pa.DataType],
) -> pa.Table:
    """``rows`` with ``values`` set where ``hit`` is true (an updated row's commit version,
    when the rows carry one, becomes null: the commit's own)."""
    columns = []
    fields = {f.name: f for f in job.snapshot.schema.fields}
    version = job.tracking.row_commit_version if job.tracking is not None else None
    for name in rows.column_names:
        if name == version:
            columns.append(pc.if_else(hit, pa.scalar(None, pa.int64()), rows.column(name)))
            continue
        value = values.get(name)
        if value is None:
            columns.append(rows.column(name))
            continue
        if isinstance(value, SqlValue):
            zone = job.zone_or_utc
            value = value.compute(rows, types[name], name=name, table=job.root, zone=zone)
        value = fit_values(value, fields[name], job.root)  # CHAR/VARCHAR, as Spark stores it
        columns.append(pc.if_else(hit, value, rows.column(name)))
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
    return merge_rows(
        path,
        source,
        on,
        when_matched=when_matched,
        when_not_matched=when_not_matched,
        when_not_matched_by_source=when_not_matched_by_source,
    )
