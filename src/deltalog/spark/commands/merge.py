"""MERGE INTO spread over Spark (reference ``MergeIntoCommand``).

``DeltaTable.merge(source, condition)`` returns a
:class:`~deltalog.spark.api.merge_builder.DeltaMergeBuilder`, whose ``execute`` runs a
:class:`MergeCommand`. Its clauses act, per row, in the reference's order
(:mod:`~deltalog.spark.commands.merge_clauses`); no clause → the row is left as it is (or not
inserted).

Execution:

* **phase 1**: one job joins the target (files pruned by the ON condition's target-only
  conjuncts) with the source; the (file, row index, clause, source row) of every target row
  some clause may act on stay in the executors (persisted when phase 2 reads them again).
  Tasks grouped by file (:mod:`~deltalog.spark.commands.vector_job`) count the rows per
  clause, run the multiple-match check and, with deletion vectors, write the touched files'
  new vectors: the driver gets one row per file.
* **phase 2** writes. Copy-on-write joins the touched files with the source again and rewrites
  them (updated and unchanged rows); the source rows that matched nothing are inserted (the
  matched ones left out by an anti-join with phase 1's pairs, so the target is not joined
  again). With deletion vectors only updated and inserted rows are written (the changed rows
  were marked deleted in place by phase 1); when every update takes its values from the source
  alone (``UPDATE *``), both come from one join of the source with phase 1's pairs, without
  reading the target. With the change data feed on, the change rows are written too. An
  insert-only merge touches no file: it only appends.

Spark chooses how to join the source: its plan statistics are exact once materialized, so a
source under ``spark.sql.autoBroadcastJoinThreshold`` is broadcast and a larger one is not
(the reference leaves this to Spark too).

The source is materialized while the command runs (a local checkpoint on classic sessions),
so its row ids hold between the two phases (:mod:`~deltalog.spark.commands.merge_source`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors, row_tracking
from deltalog.actions import Action
from deltalog.commands.dml.file_changes import (
    DmlSettings,
    FileChanges,
    live_records,
    physical_records,
    remove_files,
)
from deltalog.commands.write.write_into_delta import (
    dml_plan,
    evolved_metadata,
    record_high_water_marks,
)
from deltalog.log.snapshot import Snapshot
from deltalog.scan.predicate import And, Comparison, In, IsNull, Predicate, parse_predicate
from deltalog.schema import StructType, parse_schema
from deltalog.spark.commands.dml import (
    GENERATION_KEY,
    NEW,
    Touched,
    _elapsed_ms,
    add_marks,
    schema_frame,
    start,
)
from deltalog.spark.commands.local_dml import local_merge, merge_shape
from deltalog.spark.commands.merge_clauses import (
    ACTION,
    BY_SOURCE,
    COPY,
    MATCHED,
    MATCHED_ACTION,
    NOT_MATCHED,
    SOURCE_ID,
    SOURCE_PRESENT,
    TARGET_PRESENT,
    ClauseActions,
    MergeSpec,
    check_clauses,
)
from deltalog.spark.commands.merge_source import materialized
from deltalog.spark.commands.row_ids import carrying, updated_row_ids
from deltalog.spark.commands.vector_job import Marks, MarkSpec, mark_rows, numbered
from deltalog.spark.conditions import condition_column, condition_sql
from deltalog.spark.read.common import FILE, ROW, file_keys
from deltalog.spark.read.row_tracking import tracked_scan
from deltalog.spark.read.scan import check_spark_reads
from deltalog.spark.session import conf_get
from deltalog.spark.write.batch import write_change_rows, write_rows
from deltalog.txn import operations
from deltalog.write.type_widening import ALLOW_AUTOMATIC_WIDENING_CONF

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
# The acted rows' row ids (row tracking), kept from phase 1 for the rows deletion vectors write.
_ROW_ID_IMAGE = "__deltalog_row_id"


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
    builder: MergeSpec
    spark: SparkSession
    counts: _Counts = field(default_factory=_Counts)
    _acted: Any = None  # the acted rows, persisted when phase 2 reads them (_find_touched)
    _persisted: bool = False
    _images: bool = False  # whether _acted holds their new and old values

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
        check_clauses(self.clauses, self.root)
        self.settings = DmlSettings.for_snapshot(snapshot)
        self.alias = table._alias
        self.evolve = self.builder._evolve or conf_get(self.spark, AUTO_MERGE, "false") == "true"
        self.target_schema = self._final_schema(self.evolve)
        self.acts = ClauseActions(
            self.clauses,
            self.target_schema,
            frozenset(n.lower() for n in snapshot.schema.names),
            self.builder._source,
            self.evolve,
            self.root,
        )
        self.acts.check_assignment_keys()
        # Only a Column condition needs the frame it resolves against (analysing it costs a few
        # py4j round trips); SQL text is recorded as given.
        conditions = [self.builder._condition, *(c.condition for c in self.clauses)]
        frame = (
            self._condition_frame()
            if any(c is not None and not isinstance(c, str) for c in conditions)
            else None
        )
        self.operation = operations.merge(
            condition_sql(self.builder._condition, frame),
            [c.describe(frame) for c in self.clauses if c.kind == MATCHED],
            [c.describe(frame) for c in self.clauses if c.kind == NOT_MATCHED],
            [c.describe(frame) for c in self.clauses if c.kind == BY_SOURCE],
        )

        local = self._local()
        if local is not None:
            actions, metrics = local
            self.txn.commit_if_needed(actions, self.operation.with_metrics(metrics))
            return (
                metrics["numTargetRowsUpdated"],
                metrics["numTargetRowsDeleted"],
                metrics["numTargetRowsInserted"],
            )
        check_spark_reads(self.spark, self.snapshot)  # before the source's job
        t0 = time.monotonic()
        source, num_source, release = materialized(self.builder._source, self.spark)
        try:
            materialize_ms = _elapsed_ms(t0)
            self.source = source.withColumn(SOURCE_PRESENT, F.lit(True))
            self.build = self.source  # Spark broadcasts it when small (exact statistics)
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

    def _local(self) -> tuple[list[Action], dict[str, int]] | None:
        """The MERGE on the driver (:func:`~deltalog.spark.commands.local_dml.local_merge`)
        when its shape, its source and the table are small and simple enough; ``None`` runs it
        on Spark."""
        if self.target_schema != self.snapshot.schema:  # the schema evolves: Spark's casts
            return None
        if getattr(self.builder._source, "_jdf", None) is None:
            return None  # Spark Connect: the source's size is unknown without running it
        shape = merge_shape(
            self.builder._condition, self.clauses, self.alias, self.snapshot, self.builder._source
        )
        if shape is None:
            return None
        return local_merge(self.spark, self.txn, self.operation, shape, self.builder._source)

    # -- schema ------------------------------------------------------------------------------

    def _final_schema(self, evolve: bool) -> StructType:
        """The target schema after the merge: with schema evolution, source columns reached
        by ``*`` or assigned explicitly are appended, and existing ones they write are widened
        where the table's type widening allows (written into the metadata)."""
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
        written = [
            f if f.name.lower() in known else replace(f, nullable=True)
            for f in source_schema.fields
            if f.name.lower() in wanted
        ]
        if not written:
            return schema
        automatic = conf_get(self.spark, ALLOW_AUTOMATIC_WIDENING_CONF, "always")
        metadata = evolved_metadata(self.txn, StructType(tuple(written)), automatic)
        if metadata is None:
            return schema
        self.txn.update_metadata(metadata)
        assert metadata.schema_string is not None
        return parse_schema(metadata.schema_string)

    # -- the plan ----------------------------------------------------------------------------

    def _execute(self) -> tuple[FileChanges, int, int]:
        files = self.txn.filter_files(self._target_predicate())
        # Row tracking enabled: rewritten rows carry their ids (updated ones: a null version).
        self.tracking = row_tracking.materialized_columns(
            self.snapshot.protocol, self.snapshot.metadata
        )
        self.plan = carrying(self.txn, dml_plan(self.txn, self.operation), self.tracking)
        self._check_identity()
        changes = FileChanges()
        t0 = time.monotonic()
        try:
            return self._scan_and_write(files, changes, t0)
        finally:
            if self._persisted:
                self._acted.unpersist()

    def _scan_and_write(
        self, files: pa.Table, changes: FileChanges, t0: float
    ) -> tuple[FileChanges, int, int]:
        marks = self._find_touched(files)
        try:
            return self._write(marks, changes, _elapsed_ms(t0))
        except BaseException:
            marks.abort(self.txn.log.store)  # the vectors phase 1 wrote
            raise

    def _write(
        self, marks: Marks, changes: FileChanges, scan_ms: int
    ) -> tuple[FileChanges, int, int]:
        t0 = time.monotonic()
        touched = Touched(marks.files, marks.keys, 0)
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
            inserted = self._inserted_rows() if self.acts.ids("insert") else None
            frames = [f[0] for f in (updated, inserted) if f is not None]
        if not frames:
            return changes, scan_ms, _elapsed_ms(t0)
        data = frames[0]
        if len(frames) == 2:  # inserted rows have no row-tracking columns: null, fresh ids
            data = data.unionByName(frames[1], allowMissingColumns=True)
        adds, high_water = write_rows(data, self.plan, generated=self.acts.generated_identity())
        if high_water:
            record_high_water_marks(self.txn, high_water)
        changes.adds.extend(adds)
        if rewrites:
            self._mark_changed(marks, changes)
        if updated is not None and self.settings.change_data_feed:
            cdc = self.acts.change_rows(updated[1], updated[2], updated[3])
            if inserted is not None:
                cdc = cdc.unionByName(self.acts.change_rows(inserted[1], inserted[2], None))
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
        for partition pruning, data skipping and the conflict checker's read set. None with a
        ``WHEN NOT MATCHED BY SOURCE`` clause: a target row the ON condition is false for is
        one such a clause acts on, so no file may be skipped."""
        condition, alias = self.builder._condition, self.alias
        if not isinstance(condition, str) or not alias:
            return None
        if any(c.kind == BY_SOURCE for c in self.clauses):
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
        """Identity values generated for inserted rows would be generated again, differently,
        for their change rows: with the change data feed on, such a MERGE is refused.

        Raises:
            UnsupportedFeatureError: ``DELTA_UNSUPPORTED_MERGE_INTO_IDENTITY_WITH_CDF``.
        """
        generated = self.acts.generated_identity()
        if generated and self.settings.change_data_feed:
            raise errors.UnsupportedFeatureError(
                "DELTA_UNSUPPORTED_MERGE_INTO_IDENTITY_WITH_CDF",
                f"MERGE inserting rows with generated values for the identity column "
                f"{generated[0]} into a table with the change data feed is not supported by "
                "deltalog yet.",
                table=self.root,
                help="insert the new rows with an append (identity values are generated "
                "there) and merge the rest.",
            )

    def _target(self, files: pa.Table, *, row_ids: bool = True) -> Any:
        store = self.txn.log.store
        df, _ = tracked_scan(self.spark, self.snapshot, store, files, "MERGE", row_ids=row_ids)
        df = df.alias(self.alias) if self.alias else df
        return df.withColumn(TARGET_PRESENT, F.lit(True))

    # -- phase 1: which target rows are acted on -------------------------------------------

    def _find_touched(self, files: pa.Table) -> Marks:
        """One job: the (file, row, clause) of every target row some clause acts on, and of
        every matched pair the multiple-match check counts.

        With deletion vectors, unless :meth:`_updates_from_source`, the acted rows' new
        values (and, for the change feed, their old ones) are computed in the same job and
        persisted: only acted rows are written, so the write reads them back instead of
        scanning and joining the target a second time.
        """
        by_source = any(c.kind == BY_SOURCE for c in self.clauses)
        target = self._target(files)
        joined = target.join(self.build, self.on, "left" if by_source else "inner")
        action = self.acts.action(joined, {MATCHED, BY_SOURCE})
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
        keys = file_keys(self.snapshot, files)
        rows = numbered(self.spark, acted.select(*columns), keys)
        acted = rows.frame
        inserts = bool(self.acts.ids("insert"))
        if self._images or inserts or self._writes_from_source():  # phase 2 reads it again
            acted = acted.persist()
            self._persisted = True
        self._acted = acted
        marks = mark_rows(
            self.spark,
            replace(rows, frame=acted),
            files,
            keys,
            table_root=self.root,
            configuration=dict(self.snapshot.metadata.configuration),
            spec=MarkSpec(
                action=ACTION,
                marked=tuple(self.acts.ids("update", "delete")),
                checked=self._checked_clauses(),
                write=self.settings.deletion_vectors
                and any(c.kind != NOT_MATCHED for c in self.clauses),
            ),
        )
        if marks.repeats:
            marks.abort(self.txn.log.store)
            raise errors.multiple_source_rows_matched(self.root)
        self._count_target_actions(marks.counts())
        return marks

    def _acted_images(self, acted: Any, target: Any) -> list[Any]:
        """Deletion vectors: each acted row's new values (``NEW`` + column, as an updating
        clause sets them) and, with the change feed, its old ones (under the column's name).
        A column every updating clause assigns needs nothing from the target, so the scan
        reads only what the conditions and the other assignments use."""
        values = self.acts.value_exprs(acted, target, {MATCHED, BY_SOURCE}, acted_only=True)
        columns = [value.alias(NEW + name) for name, value in values]
        if self.tracking is not None:  # updated rows keep their ids, take the new version
            columns.append(target[f"`{self.tracking.row_id}`"].alias(_ROW_ID_IMAGE))
        if self.settings.change_data_feed:
            columns += [target[f"`{n}`"].alias(n) for n in self.snapshot.schema.names]
        return columns

    def _acted_updates(self) -> tuple[Any, Any, list[Any], Any]:
        """:meth:`_updated_rows` for deletion vectors, from the persisted acted rows."""
        acted = self._acted
        names = [c[len(NEW) :] for c in acted.columns if c.startswith(NEW)]
        values = [acted[f"`{NEW}{n}`"].alias(n) for n in names]
        ids: list[Any] = []
        if self.tracking is not None:
            null = F.lit(None).cast("long")
            ids = [
                acted[_ROW_ID_IMAGE].alias(self.tracking.row_id),
                null.alias(self.tracking.row_commit_version),
            ]
        updates = acted.where(F.col(ACTION).isin(self.acts.ids("update"))).select(*values, *ids)
        return updates, acted, values, acted if self.settings.change_data_feed else None

    def _updates_from_source(self) -> bool:
        """Deletion vectors without the change feed: whether each MATCHED update sets every
        column from source columns alone (``UPDATE *``, ``SET x = s.x``) and no BY SOURCE
        clause updates. Then an updated row's values are the source row's, so the scan that
        finds the acted rows keeps only their source ids: the source crosses to the tasks
        with the columns the conditions need, not whole (see :meth:`_source_writes`)."""
        if self.settings.change_data_feed or self.tracking is not None:
            return False  # the change feed's old values, or the rows' ids, need the target
        for clause in self.clauses:
            if clause.action != "update":
                continue
            if clause.kind == BY_SOURCE:
                return False
            exprs: list[Any] = [
                self.acts.assignment(clause, f.name, None) for f in self._written_fields()
            ]
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
        assigned = self.acts.assigned_columns()
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
        picked = self._matched_pairs().withColumnRenamed(ACTION, MATCHED_ACTION)
        joined = self.source.join(picked, on=SOURCE_ID, how="left")
        joined = joined.withColumn(TARGET_PRESENT, F.lit(None).cast("boolean"))
        matched = F.col(MATCHED_ACTION)
        action = F.when(matched.isNull(), self.acts.action(joined, {NOT_MATCHED})).when(
            matched.isin(self.acts.ids("update")), matched
        )
        joined = joined.withColumn(ACTION, action)
        kinds = {MATCHED, BY_SOURCE, NOT_MATCHED}
        values = self.acts.value_exprs(joined, None, kinds, acted_only=True)
        return joined.where(F.col(ACTION).isNotNull()).select(*[v.alias(n) for n, v in values])

    def _checked_clauses(self) -> tuple[int, ...] | None:
        """The clauses whose matched pairs the multiple-match check counts (``None``: no
        check: the reference's one exemption, the only MATCHED clause is an unconditional
        delete)."""
        matched = [c for c in self.clauses if c.kind == MATCHED]
        if len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None:
            return None
        return (*(i for i, c in enumerate(self.clauses) if c.kind == MATCHED), COPY)

    def _matched_pairs(self) -> Any:
        """(source row, clause) of every matched pair of phase 1, still in the executors."""
        acted = self._acted
        return acted.where(acted[SOURCE_ID].isNotNull()).select(SOURCE_ID, ACTION)

    def _writes_from_source(self) -> bool:
        """Whether phase 2 takes the updates from the source and phase 1's pairs."""
        return (
            self.settings.deletion_vectors
            and not self._images
            and any(c.kind != NOT_MATCHED for c in self.clauses)
        )

    def _count_target_actions(self, counts: dict[int, int]) -> None:
        c = self.counts
        for i, clause in enumerate(self.clauses):
            n = counts.get(i, 0)
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
        # Rows are known from phase 1; reading row ids again would slow the whole scan.
        target = self._target(touched.files, row_ids=False)
        joined = target.join(self.build, self.on, "left")
        joined = joined.withColumn(ACTION, self.acts.action(joined, {MATCHED, BY_SOURCE}))
        act = F.col(ACTION)
        keep = act.isin(self.acts.ids("update"))
        if not self.settings.deletion_vectors:
            keep = keep | act.isNull()
        values = self.acts.values(joined, target, {MATCHED, BY_SOURCE})
        ids = updated_row_ids(target, self.tracking, act.isin(self.acts.ids("update")))
        return joined.where(keep).select(*values, *ids), joined, values, target

    def _inserted_rows(self) -> tuple[Any, Any, list[Any], Any]:
        """The source rows without a match that an insert clause takes."""
        source = self.source
        if self._acted is not None:
            matched = self._matched_pairs().select(SOURCE_ID)
            source = source.join(matched, on=SOURCE_ID, how="left_anti")
        df = source.withColumn(TARGET_PRESENT, F.lit(None).cast("boolean"))
        df = df.withColumn(ACTION, self.acts.action(df, {NOT_MATCHED}))
        values = self.acts.values(df, None, {NOT_MATCHED})
        return df.where(F.col(ACTION).isNotNull()).select(*values), df, values, None

    def _mark_changed(self, marks: Marks, changes: FileChanges) -> None:
        """Copy-on-write: remove the touched files; deletion vectors: the vectors phase 1
        wrote for the updated and deleted rows."""
        if not self.settings.deletion_vectors:
            changes.removes = remove_files(marks.files)
            return
        add_marks(marks, changes)

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

    def _live_rows(self, files: pa.Table) -> int:
        total = 0
        for row in files.to_pylist():
            n = live_records(row)
            if n is None:
                n = physical_records(row, self.txn.log.store, self.root)
            total += n
        return total


# -- helpers -------------------------------------------------------------------------------------


def _conjuncts(p: Predicate) -> list[Predicate]:
    if isinstance(p, And):
        return _conjuncts(p.left) + _conjuncts(p.right)
    return [p]


def _unqualified(p: Comparison | In | IsNull, prefix: int) -> Predicate:
    return replace(p, column=p.column[prefix:])
