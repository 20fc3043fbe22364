"""MERGE INTO spread over Spark (reference ``MergeIntoCommand``, ``DeltaMergeBuilder``).

``DeltaTable.merge(source, condition)`` returns a :class:`DeltaMergeBuilder`; its clauses act,
per row, in the reference's order: a target row matched by a source row takes the first
``whenMatched`` clause whose condition holds, an unmatched source row the first
``whenNotMatched`` clause, an unmatched target row the first ``whenNotMatchedBySource`` clause;
no clause → the row is left as it is (or not inserted).

Execution:

* **phase 1**: one job joins the target (files pruned by the ON condition's target-only
  conjuncts) with the source and collects, for every target row some clause may act on, its
  file, row index, clause and source row: these give the touched files, the multiple-match
  check, the row counts and the matched source rows.
* **phase 2** writes. Copy-on-write joins the touched files with the source again and rewrites
  them (updated and unchanged rows); the source rows that matched nothing are inserted (the
  matched ones left out by their ids from phase 1, so the target is not joined again). With
  deletion vectors only updated and inserted rows are written and the changed rows are marked
  deleted in place; when every update takes its values from the source alone (``UPDATE *``),
  both come from one join of the source with phase 1's pairs, without reading the target. With
  the change data feed on, the change rows are written too. An insert-only merge touches no
  file: it only appends.

The source is materialized while the command runs (a local checkpoint on classic sessions),
so its row ids hold between the two phases.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.commands.dml.file_changes import (
    CHANGE_TYPE,
    ROW_BITS,
    DmlSettings,
    FileChanges,
    live_records,
    physical_records,
    remove_files,
)
from deltalog.commands.write.write_into_delta import dml_plan, evolved_metadata
from deltalog.scan.predicate import And, Comparison, In, IsNull, Predicate, parse_predicate
from deltalog.schema import StructType, parse_schema
from deltalog.snapshot import Snapshot
from deltalog.spark import captured
from deltalog.spark.commands.dml import (
    GENERATION_KEY,
    IDENTITY_START,
    NEW,
    Touched,
    _elapsed_ms,
    condition_column,
    condition_sql,
    is_true,
    mark_rows_deleted,
    schema_frame,
    start,
)
from deltalog.spark.commands.file_codes import collect_rows
from deltalog.spark.read.common import FILE, ROW, arrow_to_df, file_keys
from deltalog.spark.read.scan import scan_dataframe
from deltalog.spark.session import conf_get
from deltalog.spark.write.batch import write_change_rows, write_rows
from deltalog.txn import operations
from deltalog.txn.operations import MergePredicate

SOURCE_PRESENT, TARGET_PRESENT, ACTION, SOURCE_ID = (
    "__deltalog_source",
    "__deltalog_target",
    "__deltalog_action",
    "__deltalog_source_row",
)
MATCHED_ACTION = "__deltalog_matched_action"  # a matched source row's clause (phase 2)
BROADCAST_ROWS = 2_000_000  # sources up to this many rows are sent whole to every task
COPY = -1  # a matched pair no clause acts on (kept for the multiple-match check)
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
MATCHED, NOT_MATCHED, BY_SOURCE = "matched", "notMatched", "notMatchedBySource"


@dataclass(frozen=True, slots=True)
class MergeClause:
    """One WHEN clause.

    Attributes:
        kind: ``matched``, ``notMatched`` or ``notMatchedBySource``.
        action: ``update``, ``delete`` or ``insert``.
        condition: SQL text or Column, ``None`` for always.
        assignments: target column → SQL text or Column; ``None`` for ``*`` (all columns).
    """

    kind: str
    action: str
    condition: Any = None
    assignments: Mapping[str, Any] | None = None

    def describe(self, frame: Any = None) -> MergePredicate:
        """The clause for ``commitInfo``; ``frame`` resolves a Column condition."""
        text = None if self.condition is None else condition_sql(self.condition, frame)
        return MergePredicate(self.action, text)


@dataclass(frozen=True)
@captured.surfaces_all
class DeltaMergeBuilder:
    """delta-spark's ``DeltaMergeBuilder``: add clauses, then :meth:`execute`. Each method
    returns a new builder."""

    _table: Any  # deltalog.spark.api.delta_table.DeltaTable
    _source: Any
    _condition: Any
    _clauses: tuple[MergeClause, ...] = ()
    _evolve: bool = False

    def _with(self, clause: MergeClause) -> DeltaMergeBuilder:
        return replace(self, _clauses=(*self._clauses, clause))

    def whenMatchedUpdate(
        self, condition: Any = None, set: Mapping[str, Any] | None = None
    ) -> DeltaMergeBuilder:
        return self._with(
            MergeClause(MATCHED, "update", condition, _required(set, "set", condition))
        )

    def whenMatchedUpdateAll(self, condition: Any = None) -> DeltaMergeBuilder:
        return self._with(MergeClause(MATCHED, "update", _condition(condition), None))

    def whenMatchedDelete(self, condition: Any = None) -> DeltaMergeBuilder:
        return self._with(MergeClause(MATCHED, "delete", _condition(condition), {}))

    def whenNotMatchedInsert(
        self, condition: Any = None, values: Mapping[str, Any] | None = None
    ) -> DeltaMergeBuilder:
        return self._with(
            MergeClause(NOT_MATCHED, "insert", condition, _required(values, "values", condition))
        )

    def whenNotMatchedInsertAll(self, condition: Any = None) -> DeltaMergeBuilder:
        return self._with(MergeClause(NOT_MATCHED, "insert", _condition(condition), None))

    def whenNotMatchedBySourceUpdate(
        self, condition: Any = None, set: Mapping[str, Any] | None = None
    ) -> DeltaMergeBuilder:
        return self._with(
            MergeClause(BY_SOURCE, "update", condition, _required(set, "set", condition))
        )

    def whenNotMatchedBySourceDelete(self, condition: Any = None) -> DeltaMergeBuilder:
        return self._with(MergeClause(BY_SOURCE, "delete", _condition(condition), {}))

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        return replace(self, _evolve=True)

    def execute(self) -> Any:
        """Run the merge and commit it; returns delta-spark's one-row metrics DataFrame
        (``num_affected_rows``, ``num_updated_rows``, ``num_deleted_rows``,
        ``num_inserted_rows``).

        Raises:
            InvalidArgumentError: no clause, a non-last clause without condition, a column
                that cannot be resolved.
            DeltaWriteError: several source rows matched one target row (nothing changed);
                a written row breaks a rule.
            DeltaConcurrentModificationException: a concurrent commit conflicts.
        """
        spark = self._table._spark
        counts = MergeCommand(self, spark).run()
        schema = (
            "num_affected_rows long, num_updated_rows long, num_deleted_rows long, "
            "num_inserted_rows long"
        )
        updated, deleted, inserted = counts
        return spark.createDataFrame(
            [(updated + deleted + inserted, updated, deleted, inserted)], schema
        )


def _required(value: Mapping[str, Any] | None, name: str, condition: Any) -> Mapping[str, Any]:
    """delta-spark's checks of a clause's assignments (first) and condition."""
    from deltalog.spark.api import arguments

    arguments.column_mapping(value, f"'{name}'")
    arguments.condition(condition)
    if not value:
        raise errors.invalid_argument(f"'{name}' must be a non-empty dict of column → expression")
    return dict(value)


def _condition(value: Any) -> Any:
    from deltalog.spark.api import arguments

    return arguments.condition(value)


# -- the command ---------------------------------------------------------------------------------


@dataclass
class _Counts:
    matched_updated: int = 0
    matched_deleted: int = 0
    by_source_updated: int = 0
    by_source_deleted: int = 0
    inserted: int = 0
    copied: int = 0

    @property
    def updated(self) -> int:
        return self.matched_updated + self.by_source_updated

    @property
    def deleted(self) -> int:
        return self.matched_deleted + self.by_source_deleted


@dataclass
class MergeCommand:
    builder: DeltaMergeBuilder
    spark: Any
    counts: _Counts = field(default_factory=_Counts)
    _acted: Any = None  # the persisted acted rows (see _find_touched)
    _images: bool = False  # whether _acted holds their new and old values
    _pairs: pa.Table | None = None  # (source row, clause) of the matched pairs (phase 1)

    def run(self) -> tuple[int, int, int]:
        began = time.monotonic()
        table = self.builder._table
        log = table._log
        self.txn = start(log)
        snapshot = self.txn.snapshot
        assert snapshot is not None
        self.snapshot: Snapshot = snapshot
        self.root = snapshot.table_root
        self.clauses = self.builder._clauses
        _check_clauses(self.clauses, self.root)
        self.settings = DmlSettings.for_snapshot(snapshot)
        self.alias = table._alias
        self.evolve = self.builder._evolve or conf_get(self.spark, AUTO_MERGE, "false") == "true"
        self.target_schema = self._final_schema(self.evolve)
        self._check_assignment_keys()
        frame = self._condition_frame()
        self.operation = operations.merge(
            condition_sql(self.builder._condition, frame),
            [c.describe(frame) for c in self.clauses if c.kind == MATCHED],
            [c.describe(frame) for c in self.clauses if c.kind == NOT_MATCHED],
            [c.describe(frame) for c in self.clauses if c.kind == BY_SOURCE],
        )
        from pyspark.sql import functions as F

        t0 = time.monotonic()
        source, num_source, release = _materialized(self.builder._source, self.spark)
        try:
            materialize_ms = _elapsed_ms(t0)
            self.source = source.withColumn(SOURCE_PRESENT, _lit(True))
            # A small source goes to every task: the target is never shuffled.
            self.build = F.broadcast(self.source) if num_source <= BROADCAST_ROWS else self.source
            self.on = condition_column(self.builder._condition)
            changes, scan_ms, rewrite_ms = self._execute()
        finally:
            release()
        c = self.counts
        metrics = changes.metrics(merge=True)
        metrics.update(
            numSourceRows=num_source,
            numTargetRowsInserted=c.inserted,
            numTargetRowsUpdated=c.updated,
            numTargetRowsMatchedUpdated=c.matched_updated,
            numTargetRowsNotMatchedBySourceUpdated=c.by_source_updated,
            numTargetRowsDeleted=c.deleted,
            numTargetRowsMatchedDeleted=c.matched_deleted,
            numTargetRowsNotMatchedBySourceDeleted=c.by_source_deleted,
            numTargetRowsCopied=c.copied,
            numOutputRows=c.inserted + c.updated + c.copied,
            executionTimeMs=_elapsed_ms(began),
            materializeSourceTimeMs=materialize_ms,
            scanTimeMs=scan_ms,
            rewriteTimeMs=rewrite_ms,
        )
        self.txn.commit_if_needed(changes.actions(), self.operation.with_metrics(metrics))
        return c.updated, c.deleted, c.inserted

    # -- schema ------------------------------------------------------------------------------

    def _final_schema(self, evolve: bool) -> StructType:
        """The target schema after the merge: with schema evolution, source columns reached
        by ``*`` or assigned explicitly are appended (written into the metadata)."""
        schema = self.snapshot.schema
        if not evolve:
            return schema
        source_schema = parse_schema(self.builder._source.schema.json())
        known = {n.lower() for n in schema.names}
        wanted: set[str] = set()
        for clause in self.clauses:
            if clause.action == "delete":
                continue
            if clause.assignments is None:
                wanted |= {n.lower() for n in source_schema.names}
            else:
                wanted |= {k.strip("`").rsplit(".", 1)[-1].lower() for k in clause.assignments}
        # Added columns are nullable, as in delta-spark: existing rows have no value for them.
        new = [
            replace(f, nullable=True)
            for f in source_schema.fields
            if f.name.lower() in wanted - known
        ]
        if not new:
            return schema
        metadata = evolved_metadata(self.txn, StructType(tuple(new)))
        if metadata is None:
            return schema
        self.txn.update_metadata(metadata)
        assert metadata.schema_string is not None
        return parse_schema(metadata.schema_string)

    # -- the plan ----------------------------------------------------------------------------

    def _execute(self) -> tuple[FileChanges, int, int]:
        files = self.txn.filter_files(self._target_predicate())
        self.plan = dml_plan(self.txn, self.operation)
        self._check_identity()
        changes = FileChanges()
        t0 = time.monotonic()
        try:
            return self._scan_and_write(files, changes, t0)
        finally:
            if self._acted is not None:
                self._acted.unpersist()

    def _scan_and_write(
        self, files: pa.Table, changes: FileChanges, t0: float
    ) -> tuple[FileChanges, int, int]:
        touched, rows = self._find_touched(files)
        scan_ms = _elapsed_ms(t0)
        t0 = time.monotonic()
        rewrites = touched.files.num_rows > 0 and any(c.kind != NOT_MATCHED for c in self.clauses)
        updated: tuple[Any, Any, list[Any], Any] | None = None
        inserted: tuple[Any, Any, list[Any], Any] | None = None
        if rewrites and self.settings.deletion_vectors and not self._images:
            frames = [self._source_writes()]  # the updates and the inserts, from the source
        else:
            if rewrites and self._images:
                updated = self._acted_updates()
            elif rewrites:
                updated = self._updated_rows(touched)
            inserted = self._inserted_rows() if self._ids("insert") else None
            frames = [f[0] for f in (updated, inserted) if f is not None]
        if not frames:
            return changes, scan_ms, _elapsed_ms(t0)
        data = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
        adds, _ = write_rows(data, self.plan)
        changes.adds.extend(adds)
        if rewrites:
            self._mark_changed(touched, rows, changes)
        if updated is not None and self.settings.change_data_feed:
            cdc = self._change_rows(updated[1], updated[2], updated[3])
            if inserted is not None:
                cdc = cdc.unionByName(self._change_rows(inserted[1], inserted[2], None))
            changes.cdc = write_change_rows(cdc, self.plan)
        self._count_written(touched if rewrites else None, changes)
        return changes, scan_ms, _elapsed_ms(t0)

    def _condition_frame(self) -> Any:
        """Target (empty, aliased) beside the source: what the conditions resolve against, for
        their SQL in ``commitInfo`` (classic sessions; analysed only, no job runs)."""
        target = schema_frame(self.spark, self.snapshot)
        if target is None:
            return None
        target = target.alias(self.alias) if self.alias else target
        return target.crossJoin(self.builder._source)

    def _target_predicate(self) -> Predicate | None:
        """The ON condition's conjuncts on target columns alone (``alias.col op literal``),
        for partition pruning, data skipping and the conflict checker's read set."""
        condition, alias = self.builder._condition, self.alias
        if not isinstance(condition, str) or not alias:
            return None
        try:
            parsed = parse_predicate(condition)
        except ValueError:
            return None
        prefix = alias.lower() + "."
        kept = [
            _unqualified(p, len(prefix))
            for p in _conjuncts(parsed)
            if isinstance(p, Comparison | In | IsNull) and p.column.lower().startswith(prefix)
        ]
        result: Predicate | None = None
        for p in kept:
            result = p if result is None else And(result, p)
        return result

    def _check_identity(self) -> None:
        for f in self.target_schema.fields:
            if IDENTITY_START in f.metadata and any(c.action == "insert" for c in self.clauses):
                raise errors.UnsupportedFeatureError(
                    "DELTA_UNSUPPORTED_MERGE_INTO_IDENTITY",
                    f"MERGE with an INSERT clause into a table with the identity column "
                    f"{f.name} is not supported by deltalog yet.",
                    table=self.root,
                    help="insert the new rows with an append (identity values are generated "
                    "there) and merge the rest.",
                )

    def _target(self, files: pa.Table, *, row_ids: bool = True) -> Any:
        store = self.txn.log.store
        df = scan_dataframe(self.spark, self.snapshot, store, files, row_ids=row_ids)
        df = df.alias(self.alias) if self.alias else df
        return df.withColumn(TARGET_PRESENT, _lit(True))

    def _action(self, df: Any, kinds: set[str]) -> Any:
        """The index of the clause acting on each joined row (NULL: none)."""
        from pyspark.sql import functions as F

        matched = df[TARGET_PRESENT].isNotNull() & df[SOURCE_PRESENT].isNotNull()
        where = {
            MATCHED: matched,
            NOT_MATCHED: df[TARGET_PRESENT].isNull(),
            BY_SOURCE: df[SOURCE_PRESENT].isNull(),
        }
        expr = None
        for i, clause in enumerate(self.clauses):
            if clause.kind not in kinds:
                continue
            test = where[clause.kind]
            if clause.condition is not None:
                test = test & is_true(condition_column(clause.condition))
            expr = F.when(test, F.lit(i)) if expr is None else expr.when(test, F.lit(i))
        return expr if expr is not None else F.lit(None).cast("int")

    # -- phase 1: which target rows are acted on -------------------------------------------

    def _find_touched(self, files: pa.Table) -> tuple[Touched, pa.Table]:
        """One job: the (file, row, clause) of every target row some clause acts on, and of
        every matched pair the multiple-match check counts.

        With deletion vectors, unless :meth:`_updates_from_source`, the acted rows' new
        values (and, for the change feed, their old ones) are computed in the same job and
        persisted: only acted rows are written, so the write reads them back instead of
        scanning and joining the target a second time.
        """
        from pyspark.sql import functions as F

        by_source = any(c.kind == BY_SOURCE for c in self.clauses)
        target = self._target(files)
        joined = target.join(self.build, self.on, "left" if by_source else "inner")
        action = self._action(joined, {MATCHED, BY_SOURCE})
        matched = joined[SOURCE_PRESENT].isNotNull()
        only_matched = all(c.kind == MATCHED for c in self.clauses)
        # Which matched pairs count for the multiple-match check (and touch their file).
        relevant = matched & action.isNotNull() if only_matched else matched
        acted = joined.where(relevant | action.isNotNull()).withColumn(
            ACTION, F.coalesce(action, F.lit(COPY))
        )
        columns = [acted[FILE], acted[ROW], acted[ACTION], acted[SOURCE_ID]]
        self._images = self.settings.deletion_vectors and any(
            c.kind != NOT_MATCHED for c in self.clauses
        )
        if self._images and not self._updates_from_source():
            columns += self._acted_images(acted, target)
        else:
            self._images = False
        acted = acted.select(*columns)
        if self._images:  # the write reads the acted rows' values back
            acted = self._acted = acted.persist()
        keys = file_keys(self.snapshot, files)
        rows = collect_rows(acted, keys, [ROW, ACTION, SOURCE_ID])
        self._pairs = rows.select([SOURCE_ID, ACTION]).filter(pc.is_valid(rows.column(SOURCE_ID)))
        self._check_multiple_matches(rows)
        rows = _first_per_row(rows)
        hit = set(rows.column(FILE).to_pylist())
        mask = pa.array([k in hit for k in keys], pa.bool_())
        touched = Touched(files.filter(mask), [k for k in keys if k in hit], 0, None)
        self._count_target_actions(rows)
        return touched, rows

    def _acted_images(self, acted: Any, target: Any) -> list[Any]:
        """Deletion vectors: each acted row's new values (``NEW`` + column, as an updating
        clause sets them) and, with the change feed, its old ones (under the column's name).
        A column every updating clause assigns needs nothing from the target, so the scan
        reads only what the conditions and the other assignments use."""
        values = self._value_exprs(acted, target, {MATCHED, BY_SOURCE}, acted_only=True)
        columns = [value.alias(NEW + name) for name, value in values]
        if self.settings.change_data_feed:
            columns += [target[f"`{n}`"].alias(n) for n in self.snapshot.schema.names]
        return columns

    def _acted_updates(self) -> tuple[Any, Any, list[Any], Any]:
        """:meth:`_updated_rows` for deletion vectors, from the persisted acted rows."""
        from pyspark.sql import functions as F

        acted = self._acted
        names = [c[len(NEW) :] for c in acted.columns if c.startswith(NEW)]
        values = [acted[f"`{NEW}{n}`"].alias(n) for n in names]
        updates = acted.where(F.col(ACTION).isin(self._ids("update"))).select(*values)
        return updates, acted, values, acted if self.settings.change_data_feed else None

    def _updates_from_source(self) -> bool:
        """Deletion vectors without the change feed: whether each MATCHED update sets every
        column from source columns alone (``UPDATE *``, ``SET x = s.x``) and no BY SOURCE
        clause updates. Then an updated row's values are the source row's, so the scan that
        finds the acted rows keeps only their source ids: the source crosses to the tasks
        with the columns the conditions need, not whole (see :meth:`_source_writes`)."""
        from pyspark.errors import PySparkException

        if self.settings.change_data_feed:
            return False
        for clause in self.clauses:
            if clause.action != "update":
                continue
            if clause.kind == BY_SOURCE:
                return False
            exprs = [self._assignment(clause, f.name, None) for f in self._written_fields()]
            if any(e is None for e in exprs):
                return False  # a column keeps the target's value
            try:  # resolves against the source alone: it names no target column
                self.source.select(*exprs).schema  # noqa: B018
            except (PySparkException, errors.DeltaError):
                return False
        return True

    def _written_fields(self) -> list[Any]:
        """The target columns an update writes (generated ones nobody assigns are computed
        by the writer)."""
        assigned = self._assigned_columns()
        return [
            f
            for f in self.target_schema.fields
            if GENERATION_KEY not in f.metadata or f.name.lower() in assigned
        ]

    def _source_writes(self) -> Any:
        """The rows to write when :meth:`_updates_from_source`: one join of the source with
        its matched pairs (source row, clause) from phase 1. A source row a MATCHED update
        acts on is written with that clause's values (once per target row it updates); one
        with no match is inserted by the first NOT MATCHED clause that takes it. One scan of
        the source, instead of one for the updates and one for the inserts."""
        from pyspark.sql import functions as F

        pairs = self._pairs
        assert pairs is not None
        named = pairs.rename_columns([SOURCE_ID, MATCHED_ACTION])
        picked = arrow_to_df(self.spark, named, local=False)
        joined = self.source.join(F.broadcast(picked), on=SOURCE_ID, how="left")
        joined = joined.withColumn(TARGET_PRESENT, F.lit(None).cast("boolean"))
        matched = F.col(MATCHED_ACTION)
        action = F.when(matched.isNull(), self._action(joined, {NOT_MATCHED})).when(
            matched.isin(self._ids("update")), matched
        )
        joined = joined.withColumn(ACTION, action)
        kinds = {MATCHED, BY_SOURCE, NOT_MATCHED}
        values = self._value_exprs(joined, None, kinds, acted_only=True)
        return joined.where(F.col(ACTION).isNotNull()).select(*[v.alias(n) for n, v in values])

    def _check_multiple_matches(self, rows: pa.Table) -> None:
        # The reference's one exemption: the only MATCHED clause is an unconditional delete.
        matched = [c for c in self.clauses if c.kind == MATCHED]
        single_delete = (
            len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None
        )
        if single_delete or rows.num_rows == 0:
            return
        matched_ids = [i for i, c in enumerate(self.clauses) if c.kind == MATCHED] + [COPY]
        pairs = rows.filter(pc.is_in(rows.column(ACTION), pa.array(matched_ids, pa.int32())))
        if _has_repeats(_row_keys(pairs)):
            raise errors.multiple_source_rows_matched(self.root)

    def _count_target_actions(self, rows: pa.Table) -> None:
        acts = rows.column(ACTION).to_numpy(zero_copy_only=False)
        c = self.counts
        for i, clause in enumerate(self.clauses):
            n = int(np.count_nonzero(acts == i))
            if clause.kind == MATCHED and clause.action == "update":
                c.matched_updated += n
            elif clause.kind == MATCHED and clause.action == "delete":
                c.matched_deleted += n
            elif clause.kind == BY_SOURCE and clause.action == "update":
                c.by_source_updated += n
            elif clause.kind == BY_SOURCE and clause.action == "delete":
                c.by_source_deleted += n

    # -- phase 2: write ----------------------------------------------------------------------

    def _updated_rows(self, touched: Touched) -> tuple[Any, Any, list[Any], Any]:
        """The touched files' rows after the MATCHED and BY SOURCE clauses (copy-on-write:
        with the unchanged rows; deletion vectors: only the updated ones), the joined frame
        with its clause column, and the value columns."""
        from pyspark.sql import functions as F

        # Rows are known from phase 1; reading row ids again would slow the whole scan.
        target = self._target(touched.files, row_ids=False)
        joined = target.join(self.build, self.on, "left")
        joined = joined.withColumn(ACTION, self._action(joined, {MATCHED, BY_SOURCE}))
        act = F.col(ACTION)
        keep = act.isin(self._ids("update"))
        if not self.settings.deletion_vectors:
            keep = keep | act.isNull()
        values = self._values(joined, target, {MATCHED, BY_SOURCE})
        return joined.where(keep).select(*values), joined, values, target

    def _inserted_rows(self) -> tuple[Any, Any, list[Any], Any]:
        """The source rows without a match that an insert clause takes."""
        from pyspark.sql import functions as F

        source = self.source
        pairs = self._pairs
        assert pairs is not None
        if pairs.num_rows:
            matched = pa.table({SOURCE_ID: pc.unique(pairs.column(SOURCE_ID))})
            matched_df = arrow_to_df(self.spark, matched, local=False)
            source = source.join(F.broadcast(matched_df), on=SOURCE_ID, how="left_anti")
        df = source.withColumn(TARGET_PRESENT, F.lit(None).cast("boolean"))
        df = df.withColumn(ACTION, self._action(df, {NOT_MATCHED}))
        values = self._values(df, None, {NOT_MATCHED})
        return df.where(F.col(ACTION).isNotNull()).select(*values), df, values, None

    def _mark_changed(self, touched: Touched, rows: pa.Table, changes: FileChanges) -> None:
        """Copy-on-write: remove the touched files; deletion vectors: mark the updated and
        deleted rows."""
        from deltalog.commands.dml.file_changes import group_row_indexes

        if not self.settings.deletion_vectors:
            changes.removes = remove_files(touched.files)
            return
        acted_ids = pa.array(self._ids("update", "delete"), pa.int32())
        acted = rows.filter(pc.is_in(rows.column(ACTION), acted_ids))
        by_file = group_row_indexes(acted.column(FILE), acted.column(ROW))
        mask = pa.array([k in by_file for k in touched.keys], pa.bool_())
        keys = [k for k in touched.keys if k in by_file]
        mark_rows_deleted(self.txn, Touched(touched.files.filter(mask), keys, 0, by_file), changes)

    def _count_written(self, rewritten: Touched | None, changes: FileChanges) -> None:
        """Inserted and copied rows, from the rows written and the touched files' row counts
        (one write job, so not counted apart)."""
        written = changes.written_rows()
        c = self.counts
        if rewritten is None:
            c.inserted = written
        elif self.settings.deletion_vectors:
            c.inserted = written - c.updated
        else:
            c.copied = self._live_rows(rewritten.files) - c.updated - c.deleted
            c.inserted = written - c.updated - c.copied

    def _ids(self, *actions: str) -> list[int]:
        return [i for i, c in enumerate(self.clauses) if c.action in actions]

    def _values(self, joined: Any, target: Any | None, kinds: set[str]) -> list[Any]:
        """The final value of each target column: the acting clause's assignment, else the
        target's value (NULL for an inserted row or a column new to the table)."""
        return [value.alias(name) for name, value in self._value_exprs(joined, target, kinds)]

    def _value_exprs(
        self, joined: Any, target: Any | None, kinds: set[str], *, acted_only: bool = False
    ) -> list[tuple[str, Any]]:
        """(column, expression) pairs of :meth:`_values`; ``acted_only``: the rows are those
        an updating clause acts on, so a column every such clause assigns never falls back to
        the target's value (and the target's column need not be read for it)."""
        from pyspark.sql import functions as F

        from deltalog.spark.schema import to_spark_schema

        act = F.col(ACTION)
        out = []
        old_names = {n.lower() for n in self.snapshot.schema.names}
        assigned_anywhere = self._assigned_columns()
        for f, sf in zip(
            self.target_schema.fields, to_spark_schema(self.target_schema).fields, strict=True
        ):
            if GENERATION_KEY in f.metadata and f.name.lower() not in assigned_anywhere:
                continue  # computed by the writer from the final values
            old = (
                target[f"`{f.name}`"]
                if target is not None and f.name.lower() in old_names
                else F.lit(None)
            ).cast(sf.dataType)
            value = None
            complete = True
            for i, clause in enumerate(self.clauses):
                if clause.action == "delete" or clause.kind not in kinds:
                    continue
                expr = self._assignment(clause, f.name, old)
                if expr is None:
                    complete = False
                    continue
                expr = expr.cast(sf.dataType)
                value = F.when(act == i, expr) if value is None else value.when(act == i, expr)
            if value is None:
                out.append((f.name, old))
            elif acted_only and complete:
                out.append((f.name, value))
            else:
                out.append((f.name, value.otherwise(old)))
        return out

    def _assigned_columns(self) -> set[str]:
        names: set[str] = set()
        for clause in self.clauses:
            if clause.assignments is None:
                names |= {n.lower() for n in self.builder._source.columns}
            else:
                names |= {k.strip("`").rsplit(".", 1)[-1].lower() for k in clause.assignments}
        return names

    def _assignment(self, clause: MergeClause, column: str, old: Any) -> Any | None:
        """The clause's expression for ``column``; ``None`` keeps the target's value (UPDATE)
        or leaves it NULL (INSERT).

        Raises:
            InvalidArgumentError: ``*`` without schema evolution and no source column of that
                name; an assignment to a column the table does not have.
        """
        from pyspark.sql import functions as F

        if clause.assignments is None:
            source_column = _find(self.builder._source.columns, column)
            if source_column is not None:
                return self.builder._source[f"`{source_column}`"]
            if not self.evolve:
                raise errors.merge_unresolved(
                    f"`{column}`",
                    f"{clause.kind} {clause.action} *",
                    self.builder._source.columns,
                    self.root,
                )
            return None if clause.action == "update" else F.lit(None)
        for key, value in clause.assignments.items():
            if key.strip("`").rsplit(".", 1)[-1].lower() == column.lower():
                return condition_column(value)
        return None

    def _check_assignment_keys(self) -> None:
        """Every assigned column is a column of the (evolved) target; none is an identity
        column (UPDATE) ."""
        names = {f.name.lower(): f for f in self.target_schema.fields}
        for clause in self.clauses:
            for key in clause.assignments or {}:
                field = names.get(key.strip("`").rsplit(".", 1)[-1].lower())
                if field is None:
                    raise errors.unresolved_column(
                        key, f"MERGE {clause.action}", self.target_schema.names, self.root
                    )
                if clause.action == "update" and IDENTITY_START in field.metadata:
                    raise errors.identity_update(field.name, self.root)

    def _change_rows(self, joined: Any, values: list[Any], target: Any | None) -> Any:
        """``update_preimage``/``update_postimage``, ``delete`` and ``insert`` rows of a frame
        with its clause column (old values from ``target``'s columns, if any)."""
        from pyspark.sql import functions as F

        from deltalog.spark.schema import to_spark_schema

        act = F.col(ACTION)
        names = [f.name for f in self.target_schema.fields]
        old_names = {n.lower() for n in self.snapshot.schema.names} if target is not None else set()
        old = [
            (
                target[f"`{f.name}`"]
                if target is not None and f.name.lower() in old_names
                else F.lit(None)
            )
            .cast(sf.dataType)
            .alias(f.name)
            for f, sf in zip(
                self.target_schema.fields, to_spark_schema(self.target_schema).fields, strict=True
            )
        ]
        new = joined.select(*values, act)
        for f in self.target_schema.fields:
            if GENERATION_KEY in f.metadata and f.name not in new.columns:
                new = new.withColumn(f.name, F.expr(str(f.metadata[GENERATION_KEY])))
        new = new.select(*[F.col(f"`{n}`") for n in names], act)
        updates, deletes, inserts = self._ids("update"), self._ids("delete"), self._ids("insert")
        pre_or_delete = joined.where(act.isin(updates + deletes)).select(
            *old,
            F.when(act.isin(updates), F.lit("update_preimage"))
            .otherwise(F.lit("delete"))
            .alias(CHANGE_TYPE),
        )
        post_or_insert = new.where(act.isin(updates + inserts)).select(
            *[F.col(f"`{n}`") for n in names],
            F.when(act.isin(updates), F.lit("update_postimage"))
            .otherwise(F.lit("insert"))
            .alias(CHANGE_TYPE),
        )
        return pre_or_delete.unionByName(post_or_insert)

    def _live_rows(self, files: pa.Table) -> int:
        total = 0
        for row in files.to_pylist():
            n = live_records(row)
            if n is None:
                n = physical_records(row, self.txn.log.store, self.root)
            total += n
        return total


# -- helpers -------------------------------------------------------------------------------------


def _lit(value: Any) -> Any:
    from pyspark.sql import functions as F

    return F.lit(value)


def _materialized(given: Any, spark: Any) -> tuple[Any, int, Callable[[], None]]:
    """The source with a stable id per row (:data:`SOURCE_ID`), materialized once (the
    reference's ``MergeIntoMaterializeSource``), its row count, and the function that frees
    it.

    The rows that matched are found once and the others inserted without joining the target
    a second time, so the ids must not change between the two reads. On a classic session the
    source is local-checkpointed: its lineage is cut, so every later plan built on it is
    analysed quickly even when the source came from local data (a large ``LocalRelation``
    costs each analysis in proportion to its rows). Over Connect (whose column references
    name their plan) it is persisted instead, unless the caller persisted it already.
    """
    from pyspark.sql import functions as F

    from deltalog.spark.session import is_connect

    source = given.withColumn(SOURCE_ID, F.monotonically_increasing_id())
    if not is_connect(spark):
        from pyspark.sql import Observation

        # The rows are counted by the checkpoint's own job.
        rows = Observation(f"deltalog_merge_source_{uuid.uuid4().hex}")
        observed = source.observe(rows, F.count(F.lit(1)).alias("n"))
        checkpointed = observed.localCheckpoint(eager=True)
        return checkpointed, int(rows.get["n"]), lambda: _free_checkpoint(checkpointed)
    # A source the caller persisted already has fixed partitions, so its ids are stable.
    if not _is_persisted(given):
        source = source.persist()
        return source, source.count(), source.unpersist
    return source, source.count(), lambda: None


def _free_checkpoint(df: Any) -> None:
    """Drop a local checkpoint's blocks now rather than when the JVM collects its RDD."""
    # Not a LogicalRDD (a future Spark): the context cleaner frees it later.
    with contextlib.suppress(Exception):
        df._jdf.queryExecution().analyzed().rdd().unpersist(False)


def _is_persisted(df: Any) -> bool:
    try:
        level = df.storageLevel
    except Exception:  # an engine without the property: persist to be safe
        return False
    return bool(level.useMemory or level.useDisk)


def _find(names: list[str], name: str) -> str | None:
    return next((n for n in names if n.lower() == name.lower()), None)


def _check_clauses(clauses: tuple[MergeClause, ...], table: str) -> None:
    if not clauses:
        raise errors.merge_missing_when(table)
    for kind in (MATCHED, NOT_MATCHED, BY_SOURCE):
        of_kind = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise errors.non_last_clause_omits_condition(kind, table)


def _conjuncts(p: Predicate) -> list[Predicate]:
    if isinstance(p, And):
        return _conjuncts(p.left) + _conjuncts(p.right)
    return [p]


def _unqualified(p: Comparison | In | IsNull, prefix: int) -> Predicate:
    return replace(p, column=p.column[prefix:])


def _row_keys(rows: pa.Table) -> np.ndarray:
    """One integer per target row of ``rows`` (file number and row index): grouping 100k
    rows by the file's path string and the index takes Arrow ~60 ms, sorting these ~5 ms."""
    files = rows.column(FILE).combine_chunks().dictionary_encode().indices
    numbers = files.to_numpy(zero_copy_only=False).astype(np.int64)
    indexes = rows.column(ROW).to_numpy().astype(np.int64)
    return (numbers << ROW_BITS) | indexes


def _has_repeats(keys: np.ndarray) -> bool:
    ordered = np.sort(keys)
    return bool(np.any(ordered[1:] == ordered[:-1]))


def _first_per_row(rows: pa.Table) -> pa.Table:
    """One row per target row (a delete-only merge may match a target row several times)."""
    if rows.num_rows == 0 or not _has_repeats(_row_keys(rows)):
        return rows
    grouped = rows.group_by([FILE, ROW]).aggregate([(ACTION, "min"), (SOURCE_ID, "min")])
    return pa.table(
        {
            FILE: grouped[FILE],
            ROW: grouped[ROW],
            ACTION: grouped[f"{ACTION}_min"],
            SOURCE_ID: grouped[f"{SOURCE_ID}_min"],
        }
    )
