"""DELETE and UPDATE spread over Spark (reference ``DeleteCommand``, ``UpdateCommand``).

Each command reads its files through one transaction and commits once:

1. candidate files: partition pruning and data skipping on a SQL condition
   (``txn.filter_files``, which also records the read for the conflict checker);
2. a DELETE whose condition names only partition columns removes the matching files whole,
   without reading them;
3. otherwise one Spark job finds the rows the condition holds for: per file, their count
   (copy-on-write), or, with deletion vectors, the files' new vectors, built and written by
   its tasks (:mod:`~deltalog.spark.commands.vector_job`): the driver gets one row per file;
4. copy-on-write rewrites only the files holding such rows (rows kept or updated, one job) and
   removes them; with deletion vectors the rows are marked deleted in place and UPDATE writes
   only the updated rows;
5. with the change data feed on, the changed rows are written as change files
   (``delete``, ``update_preimage``/``update_postimage``) in a second job over the same files.

A row is deleted or updated where the condition is TRUE; NULL keeps it as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.actions import Action
from deltalog.commands.dml.arrow import delete_rows, update_rows
from deltalog.commands.dml.file_changes import (
    CHANGE_TYPE,
    DmlSettings,
    FileChanges,
    live_records,
    now_ms,
    remove_files,
)
from deltalog.commands.write.write_into_delta import dml_plan
from deltalog.scan.predicate import Predicate, parse_predicate
from deltalog.scan.row_filter import typed_partitions
from deltalog.spark.commands.local_dml import local_job, run_local, sql_values
from deltalog.spark.commands.row_ids import carrying, updated_row_ids, without_row_ids
from deltalog.spark.commands.touched_files import matching_files
from deltalog.spark.commands.vector_job import Marks, MarkSpec, mark_rows, numbered, read_task
from deltalog.spark.conditions import (
    condition_column,
    condition_sql,
    is_partition_condition,
    is_true,
    partition_mask,
)
from deltalog.spark.read.common import FILE, ROW, WHOLE, file_keys
from deltalog.spark.read.row_tracking import tracked_scan
from deltalog.spark.read.scan import scan_dataframe
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import empty_frame
from deltalog.spark.write.batch import write_change_rows, write_rows
from deltalog.txn import operations

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog
    from deltalog.log.snapshot import Snapshot
    from deltalog.txn.transaction import Transaction

GENERATION_KEY = "delta.generationExpression"
IDENTITY_START = "delta.identity.start"
IDENTITY_ALLOW_EXPLICIT = "delta.identity.allowExplicitInsert"


# -- conditions ----------------------------------------------------------------------------------


def schema_frame(spark: SparkSession, snapshot: Snapshot) -> Any:
    """An empty DataFrame with the table's columns, to resolve conditions against (classic
    sessions; no job runs)."""
    if getattr(spark, "_jsparkSession", None) is None:
        return None
    return empty_frame(spark, to_spark_schema(snapshot.schema))


def _condition_text(spark: SparkSession, snapshot: Snapshot, condition: Any) -> str:
    """The condition's SQL for ``commitInfo``: SQL text as given; a Column's as Spark resolves
    it against the table (the frame only made for one: a few py4j round trips)."""
    if isinstance(condition, str):
        return condition
    return condition_sql(condition, schema_frame(spark, snapshot))


def _whole_files(spark: SparkSession, snapshot: Snapshot, condition: Any, operation: str) -> bool:
    """Whether ``condition`` selects whole files (deterministic, on partition columns only);
    Spark's refusals of it are raised here, before any work."""
    return is_partition_condition(
        spark,
        to_spark_schema(snapshot.schema),
        snapshot.partition_columns,
        condition,
        operation=operation,
        table=snapshot.table_root,
    )


def pruning_predicate(condition: Any) -> Predicate | None:
    """The condition as a predicate for partition pruning and data skipping: only SQL text is
    parsed (a Column's rendering differs between Spark versions); ``None`` reads every file."""
    if not isinstance(condition, str):
        return None
    try:
        return parse_predicate(condition)
    except ValueError:
        return None


# -- the shared skeleton -------------------------------------------------------------------------


NEW = "__deltalog_new_"  # prefix of a changed row's new value in a persisted frame


@dataclass(slots=True)
class Touched:
    """The files holding rows a condition is true for, found by one Spark job."""

    files: pa.Table  # rows of all_files_arrow()
    keys: list[str]  # their FILE keys
    rows: int  # matching rows


@dataclass(frozen=True, slots=True)
class SourceMatch:
    """The target rows some source row meets a join condition with: ``EXISTS (SELECT 1 FROM
    source WHERE on)`` (``replaceOn``/``replaceUsing``), run by Spark as a semi-join (an
    anti-join for the rows kept); a NULL condition is no match.

    Attributes:
        source: the source DataFrame (its own alias, if any, qualifies its columns).
        on: the join condition, given the target frame (aliased ``alias`` when set).
        alias: the target's alias in the condition, or ``None``.
    """

    source: Any
    on: Callable[[Any], Any]
    alias: str | None = None

    def rows(self, target: Any, *, matching: bool = True) -> Any:
        """``target``'s rows some source row matches (``matching``), or those none does."""
        aliased = target.alias(self.alias) if self.alias else target
        how = "left_semi" if matching else "left_anti"
        return aliased.join(self.source, self.on(aliased), how)


def _where(df: Any, hit: Any, *, matching: bool = True) -> Any:
    """``df``'s rows ``hit`` (a Column or a :class:`SourceMatch`) holds for, or the others."""
    if isinstance(hit, SourceMatch):
        return hit.rows(df, matching=matching)
    return df.where(hit if matching else ~hit)


def find_touched(spark: SparkSession, txn: Transaction, files: pa.Table, hit: Any) -> Touched:
    """Scan ``files`` and keep those with a row where ``hit`` (a Column or a
    :class:`SourceMatch`) holds (copy-on-write): the scan's tasks report the files they
    found such rows in, with no shuffle (:mod:`~deltalog.spark.commands.touched_files`)."""
    if not files.num_rows:
        return Touched(files, [], 0)
    snapshot = _snapshot(txn)
    scan = scan_dataframe(spark, snapshot, txn.log.store, files, row_ids=True)
    touched_keys, count = matching_files(spark, _where(scan, hit))
    keys = file_keys(snapshot, files)
    mask = pa.array([k in touched_keys for k in keys], pa.bool_())
    return Touched(files.filter(mask), [k for k in keys if k in touched_keys], count)


def mark_matching(spark: SparkSession, txn: Transaction, files: pa.Table, hit: Any) -> Marks:
    """Deletion vectors: scan ``files`` (only the columns ``hit`` reads) and mark the rows it
    holds for deleted, in the executors (:mod:`~deltalog.spark.commands.vector_job`); the
    vector files are written, not committed."""
    snapshot = _snapshot(txn)
    scan = scan_dataframe(spark, snapshot, txn.log.store, files, row_ids=True, whole=True)
    if isinstance(hit, SourceMatch):  # a join moves rows between tasks: marked after a shuffle
        matches = hit.rows(scan).select(FILE, ROW)
    else:
        matches = read_task(scan.where(hit).select(FILE, ROW, WHOLE))
    keys = file_keys(snapshot, files)
    return mark_rows(
        spark,
        numbered(spark, matches, keys),
        files,
        keys,
        table_root=snapshot.table_root,
        configuration=dict(snapshot.metadata.configuration),
        spec=MarkSpec(),
    )


def add_marks(marks: Marks, changes: FileChanges) -> None:
    """``marks``' file actions into ``changes``.

    Raises:
        InternalError: a task met a row already deleted (nothing is committed).
    """
    for update in marks.updates(now_ms()):
        changes.add_vector_update(update)


def _snapshot(txn: Transaction) -> Snapshot:
    snapshot = txn.snapshot
    assert snapshot is not None
    return snapshot


def start(log: DeltaLog) -> Transaction:
    """A transaction on the table's latest version.

    Raises:
        TableNotFoundError: no table at the log's path.
    """
    log.update()
    txn = log.start_transaction()
    if txn.snapshot is None:
        raise errors.table_not_found(log.table_root)
    return txn


def _elapsed_ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


# -- DELETE --------------------------------------------------------------------------------------


def delete(spark: SparkSession, log: DeltaLog, condition: Any = None) -> int | None:
    """Delete the rows for which ``condition`` (SQL text or Column; all rows when ``None``)
    is true; returns the committed version, or ``None`` when no row matched.

    Raises:
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    txn = start(log)
    return txn.commit_if_needed(*delete_actions(spark, txn, condition))


def delete_actions(
    spark: SparkSession,
    txn: Transaction,
    condition: Any = None,
    *,
    operation_name: str = "DELETE",
) -> tuple[list[Action], operations.Operation]:
    """The DELETE's data and change files written, and its actions and operation (with
    metrics) to commit in ``txn``; what it read is in ``txn``'s read set. ``operation_name``
    names the command in errors (``replaceWhere`` runs its removal as a DELETE).

    Raises:
        AnalysisException: Spark refuses the condition (nothing is written).
        UnsupportedFeatureError: the condition holds a subquery.
    """
    began = time.monotonic()
    snapshot = _snapshot(txn)
    predicate = pruning_predicate(condition)
    operation = operations.delete(
        [] if condition is None else [_condition_text(spark, snapshot, condition)]
    )
    whole = condition is None or _whole_files(spark, snapshot, condition, operation_name)
    files = txn.filter_files(predicate)
    job = local_job(spark, txn, operation, operation_name, condition, predicate, files)
    if job is not None:
        done = run_local(job, operation_name, lambda job: delete_rows(job, predicate, files))
        if done is not None:
            return done[0], operation.with_metrics(done[1])
    changes = FileChanges()
    scan_ms = rewrite_ms = 0
    if whole:
        if condition is not None:  # removals are Spark's decision; skipping only narrowed
            files = files.filter(
                partition_mask(spark, typed_partitions(snapshot, files), condition)
            )
        changes.removes = remove_files(files)
        live = [live_records(r) for r in files.select(["stats", "deletionVector"]).to_pylist()]
        deleted: int | None = sum(n for n in live if n is not None)
        if any(n is None for n in live):
            deleted = None
        copied = 0
    else:
        # The rows are found by the condition itself, as a read filters them (the reference's
        # ``filter(condition)``): Spark then simplifies it as it simplifies a read's filter, so
        # what raises (ANSI) and what does not is the same. Rewrites keep ``NOT (c <=> true)``.
        found = condition_column(condition)
        deleted, copied, scan_ms, rewrite_ms = _delete_found(
            spark, txn, operation, files, (found, is_true(found)), changes
        )
    return _delete_result(changes, operation, began, deleted, copied, scan_ms, rewrite_ms)


def delete_matching_actions(
    spark: SparkSession, txn: Transaction, match: SourceMatch, operation: operations.Operation
) -> tuple[list[Action], operations.Operation]:
    """:func:`delete_actions` for the rows ``match`` finds (a join with a source, never
    whole files, always on Spark): the rewritten (or deletion-vector) and change files and the
    actions, with ``operation`` (the DELETE's metrics added) to commit in ``txn``. Every file
    is read: the read set is the whole table."""
    began = time.monotonic()
    files = txn.filter_files(None)
    changes = FileChanges()
    deleted, copied, scan_ms, rewrite_ms = _delete_found(
        spark, txn, operation, files, (match, match), changes
    )
    return _delete_result(changes, operation, began, deleted, copied, scan_ms, rewrite_ms)


def _delete_found(
    spark: SparkSession,
    txn: Transaction,
    operation: operations.Operation,
    files: pa.Table,
    found_hit: tuple[Any, Any],
    changes: FileChanges,
) -> tuple[int, int, int, int]:
    """Remove the rows found (``found_hit``: what finds them, and what is true for them
    alone; Columns, or twice one :class:`SourceMatch`) from ``files`` into ``changes``:
    (deleted, copied, scan ms, rewrite ms)."""
    found, hit = found_hit
    settings = DmlSettings.for_snapshot(_snapshot(txn))
    t0 = time.monotonic()
    if settings.deletion_vectors:  # the vectors are written by the scan's job
        marks = mark_matching(spark, txn, files, found)
        scan_ms = _elapsed_ms(t0)
        deleted, copied = marks.rows, 0
        t0 = time.monotonic()
        add_marks(marks, changes)
    else:
        touched = find_touched(spark, txn, files, found)
        scan_ms = _elapsed_ms(t0)
        deleted = touched.rows
        t0 = time.monotonic()
        copied = _rewrite_without(spark, txn, operation, touched, hit, settings, changes)
    return deleted, copied, scan_ms, _elapsed_ms(t0)


def _delete_result(
    changes: FileChanges,
    operation: operations.Operation,
    began: float,
    deleted: int | None,
    copied: int,
    scan_ms: int,
    rewrite_ms: int,
) -> tuple[list[Action], operations.Operation]:
    metrics = changes.metrics()
    metrics.update(
        numDeletedRows=deleted or 0,
        numCopiedRows=copied,
        executionTimeMs=_elapsed_ms(began),
        scanTimeMs=scan_ms,
        rewriteTimeMs=rewrite_ms,
    )
    if deleted is None:  # whole files removed without row counts: the reference omits them
        for key in ("numDeletedRows", "numCopiedRows", "numAddedFiles"):
            metrics.pop(key)
    return changes.actions(), operation.with_metrics(metrics)


def _rewrite_without(
    spark: SparkSession,
    txn: Transaction,
    operation: operations.Operation,
    touched: Touched,
    hit: Any,
    settings: DmlSettings,
    changes: FileChanges,
) -> int:
    """Copy-on-write: rewrite the touched files without the rows ``hit`` holds for."""
    if not touched.files.num_rows:
        return 0
    snapshot = _snapshot(txn)
    df, tracking = tracked_scan(spark, snapshot, txn.log.store, touched.files, operation.name)
    plan = carrying(txn, dml_plan(txn, operation), tracking)
    adds, _ = write_rows(_where(df, hit, matching=False), plan)
    if settings.change_data_feed:
        gone = _where(without_row_ids(df, tracking), hit).withColumn(CHANGE_TYPE, F.lit("delete"))
        changes.cdc = write_change_rows(gone, plan)
    changes.adds = adds
    changes.removes = remove_files(touched.files)
    return changes.written_rows()


# -- UPDATE --------------------------------------------------------------------------------------


def update(
    spark: SparkSession, log: DeltaLog, condition: Any, assignments: Mapping[str, Any]
) -> int | None:
    """Set ``assignments`` (column name → SQL text or Column) on the rows for which
    ``condition`` is true (all rows when ``None``); returns the committed version, or ``None``
    when no row matched.

    Raises:
        InvalidArgumentError: an assigned column is not in the table (UNRESOLVED_COLUMN).
        UnsupportedFeatureError: an identity column is assigned.
        DeltaWriteError: an updated row breaks a rule (NOT NULL, CHECK, generated column).
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    began = time.monotonic()
    txn = start(log)
    snapshot = _snapshot(txn)
    settings = DmlSettings.for_snapshot(snapshot)
    targets = resolve_assignments(snapshot, assignments, "UPDATE")
    predicate = pruning_predicate(condition)
    operation = operations.update(
        None if condition is None else _condition_text(spark, snapshot, condition)
    )

    if condition is not None:
        _whole_files(spark, snapshot, condition, "UPDATE")  # Spark's refusals, before any work
    files = txn.filter_files(predicate)
    values = sql_values(targets, snapshot.table_root)
    job = None
    if values is not None:
        job = local_job(spark, txn, operation, "UPDATE", condition, predicate, files)
    if job is not None and values is not None:
        new = values
        done = run_local(job, "UPDATE", lambda job: update_rows(job, predicate, new, files))
        if done is not None:
            return txn.commit_if_needed(done[0], operation.with_metrics(done[1]))
    found = F.lit(True) if condition is None else condition_column(condition)
    hit = is_true(found)  # found: as a read filters (see delete_actions); hit: for rewrites
    t0 = time.monotonic()
    changes = FileChanges()
    if settings.deletion_vectors:
        updated, rewrite_ms = _update_with_vectors(
            spark, txn, operation, files, (found, hit), targets, changes
        )
        scan_ms = _elapsed_ms(t0) - rewrite_ms
        copied = 0
    else:
        touched = find_touched(spark, txn, files, found)
        updated = touched.rows
        scan_ms = _elapsed_ms(t0)
        t0 = time.monotonic()
        copied = _update_copy_on_write(spark, txn, operation, touched, hit, targets, changes)
        rewrite_ms = _elapsed_ms(t0)
    metrics = changes.metrics()
    metrics.update(
        numUpdatedRows=updated,
        numCopiedRows=copied,
        executionTimeMs=_elapsed_ms(began),
        scanTimeMs=scan_ms,
        rewriteTimeMs=rewrite_ms,
    )
    return txn.commit_if_needed(changes.actions(), operation.with_metrics(metrics))


def _update_copy_on_write(
    spark: SparkSession,
    txn: Transaction,
    operation: operations.Operation,
    touched: Touched,
    hit: Any,
    targets: Mapping[str, Any],
    changes: FileChanges,
) -> int:
    """Rewrite the touched files with the updated rows' new values; returns the rows copied."""
    if not touched.files.num_rows:
        return 0
    snapshot = _snapshot(txn)
    df, tracking = tracked_scan(spark, snapshot, txn.log.store, touched.files, "UPDATE")
    plan = carrying(txn, dml_plan(txn, operation), tracking)
    new_values = updated_columns(df, snapshot, targets, hit)
    adds, _ = write_rows(df.select(*new_values, *updated_row_ids(df, tracking, hit)), plan)
    changes.adds.extend(adds)
    changes.removes = remove_files(touched.files)
    if DmlSettings.for_snapshot(snapshot).change_data_feed:
        changes.cdc = write_change_rows(_update_images(df, snapshot, new_values, hit), plan)
    return changes.written_rows() - touched.rows


def _update_with_vectors(
    spark: SparkSession,
    txn: Transaction,
    operation: operations.Operation,
    files: pa.Table,
    conditions: tuple[Any, Any],
    targets: Mapping[str, Any],
    changes: FileChanges,
) -> tuple[int, int]:
    """Deletion vectors: one scan, of only the columns the condition reads, marks the updated
    rows deleted (the vectors written by its tasks); a second scan of the touched files writes
    their new values (reference ``DeltaUpdate`` with DVs). That beats one scan of every column
    persisted and read back twice (caching wide rows costs more than reading the touched files
    again: ``bench/README.md``). ``conditions`` are the condition as a read filters by it and
    as ``<=> true`` (:func:`update`). Returns the rows updated and the milliseconds spent
    writing.

    A condition that is not deterministic may select other rows the second time: the written
    count then differs from the marked one and the command fails without committing.
    """
    snapshot = _snapshot(txn)
    found, hit = conditions
    marks = mark_matching(spark, txn, files, found)
    t0 = time.monotonic()
    if not marks.files.num_rows:
        return 0, 0
    try:
        df, tracking = tracked_scan(spark, snapshot, txn.log.store, marks.files, "UPDATE")
        new_values = updated_columns(df, snapshot, targets, hit)
        plan = carrying(txn, dml_plan(txn, operation), tracking)
        updated = df.where(hit).select(*new_values, *updated_row_ids(df, tracking, hit))
        adds, _ = write_rows(updated, plan)
        add_marks(marks, changes)
        changes.adds.extend(adds)
        if DmlSettings.for_snapshot(snapshot).change_data_feed:
            images = _update_images(df, snapshot, new_values, hit)
            changes.cdc = write_change_rows(images, plan)
        if changes.written_rows() != marks.rows:
            raise errors.num_records_mismatch(
                "UPDATE", changes.written_rows(), marks.rows, snapshot.table_root
            )
    except BaseException:
        marks.abort(txn.log.store)
        raise
    return marks.rows, _elapsed_ms(t0)


def resolve_assignments(
    snapshot: Snapshot, assignments: Mapping[str, Any], clause: str
) -> dict[str, Any]:
    """Assignments keyed by the table's own spelling of each column.

    Raises:
        InvalidArgumentError: a key is not a column of the table.
        UnsupportedFeatureError: a key is an identity column.
    """
    by_lower = {f.name.lower(): f for f in snapshot.schema.fields}
    out: dict[str, Any] = {}
    for key, value in assignments.items():
        name = key.strip("`")
        # A target alias may qualify the column (``t.value``).
        field = by_lower.get(name.lower()) or by_lower.get(name.rsplit(".", 1)[-1].lower())
        if field is None:
            raise errors.unresolved_column(name, clause, snapshot.schema.names, snapshot.table_root)
        if IDENTITY_START in field.metadata:
            raise errors.identity_update(field.name, snapshot.table_root)
        out[field.name] = value
    return out


def updated_columns(df: Any, snapshot: Snapshot, targets: Mapping[str, Any], hit: Any) -> list[Any]:
    """The table's columns where ``hit`` holds replaced by their assigned values (cast to the
    column's type); generated columns no assignment sets are left out, so the writer computes
    them from the new values. Their names are :func:`_value_names`."""
    types = {f.name: f.dataType for f in to_spark_schema(snapshot.schema).fields}
    out = []
    for name in _value_names(snapshot, targets):
        old = df[f"`{name}`"]
        if name in targets:
            value = condition_column(targets[name]).cast(types[name])
            out.append(F.when(hit, value).otherwise(old).alias(name))
        else:
            out.append(old.alias(name))
    return out


def _value_names(snapshot: Snapshot, targets: Mapping[str, Any]) -> list[str]:
    """The columns an UPDATE writes: all but generated ones it does not assign."""
    return [
        f.name
        for f in snapshot.schema.fields
        if f.name in targets or GENERATION_KEY not in f.metadata
    ]


def _update_images(df: Any, snapshot: Snapshot, new_values: list[Any], hit: Any) -> Any:
    """``update_preimage`` and ``update_postimage`` rows of the updated rows."""
    names = snapshot.schema.names
    pre = df.where(hit).select(*[df[f"`{n}`"] for n in names], F.lit("update_preimage"))
    post = df.where(hit).select(*new_values)
    for f in snapshot.schema.fields:
        if GENERATION_KEY in f.metadata and f.name not in post.columns:
            post = post.withColumn(f.name, F.expr(str(f.metadata[GENERATION_KEY])))
    post = post.select(*[F.col(f"`{n}`") for n in names], F.lit("update_postimage"))
    return pre.toDF(*names, CHANGE_TYPE).unionByName(post.toDF(*names, CHANGE_TYPE))
