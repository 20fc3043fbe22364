"""``df.write.format("delta")``: the reference's ``WriteIntoDelta``, spread over Spark.

The driver prepares the write (:func:`deltalog.commands.write.write_into_delta.prepare_write`:
mode, schema, idempotence, refusals); a ``replaceWhere`` then removes what it replaces as the
reference does, by running a DELETE of its condition in the same transaction
(:func:`deltalog.spark.commands.dml.delete_actions`): whole files when the condition is
deterministic and names partition columns alone, otherwise the files holding matching rows,
rewritten by Spark on the executors. Which rows match is Spark's decision. One Spark job writes
the data (every row checked against the condition: ``DELTA_REPLACE_WHERE_MISMATCH``) and the
driver commits once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.actions import Action, AddCDCFile
from deltalog.commands.dml.file_changes import CHANGE_TYPE
from deltalog.commands.write.write_into_delta import WritePlan, commit_write, prepare_write
from deltalog.delta_log import DeltaLog
from deltalog.schema import parse_schema
from deltalog.spark.commands.dml import SourceMatch, delete_actions, delete_matching_actions
from deltalog.spark.session import configure_log, free_local_checkpoint, is_connect
from deltalog.spark.storage import register_session
from deltalog.spark.write.batch import parse_writer_options, write_change_rows, write_rows
from deltalog.storage.options import STORAGE_PREFIXES, StorageOptions
from deltalog.txn import operations

# The DELETE's metrics a replaceWhere's WRITE reports, as the reference's do.
_REPLACE_METRICS = ("numDeletedRows", "numCopiedRows", "numAddedChangeFiles")


def write_dataframe(
    df: Any,
    path: str,
    *,
    mode: str | None = None,
    partition_by: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> int | None:
    """Write ``df`` into the Delta table at ``path``; returns the committed version (``None``
    when nothing was committed: ignore mode on an existing table, an idempotent write already
    applied, or no rows appended).

    Raises:
        AnalysisException: Spark refuses the ``replaceWhere`` condition; nothing was written.
        DeltaWriteError, InvalidArgumentError, UnsupportedFeatureError: the write cannot be done
            as asked; nothing was committed.
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    spark = df.sparkSession
    register_session(spark, path, StorageOptions.of(_storage_options(options)))
    log = DeltaLog.for_table(path)
    configure_log(spark, log)
    write_options = parse_writer_options(
        spark, options or {}, mode=mode, partition_by=partition_by, table=log.table_root
    )
    plan = prepare_write(log, parse_schema(df.schema.json()), write_options)
    if plan.skip:
        return None
    replaced = _replace_where(spark, plan)
    if replaced is None:
        replaced = _replace_by_source(spark, plan, df)
    if replaced is None:
        adds, marks = write_rows(df, plan)
        return commit_write(plan, adds, identity_marks=marks)
    actions, metrics = replaced
    if any(isinstance(a, AddCDCFile) for a in actions):
        # The written rows are also the commit's ``insert`` change rows: both come from one
        # evaluation of ``df`` (a non-deterministic or costly frame must not give the data
        # files and the change files different rows), as the reference writes both at once.
        once, release = _evaluated_once(df)
        try:
            adds, marks = write_rows(once, plan)
            actions = [*actions, *_inserted_changes(once, plan)]
        finally:
            release()
    else:
        adds, marks = write_rows(df, plan)
    return commit_write(
        plan, adds, identity_marks=marks, replaced_rows=actions, extra_metrics=metrics
    )


def _evaluated_once(df: Any) -> tuple[Any, Callable[[], object]]:
    """``df`` computed once, and the function that frees what that holds: local-checkpointed
    on a classic session (later plans read its blocks, never its lineage), persisted and
    counted over Spark Connect."""
    if is_connect(df.sparkSession):
        persisted = df.persist()
        persisted.count()
        return persisted, persisted.unpersist
    checkpointed = df.localCheckpoint(eager=True)
    return checkpointed, lambda: free_local_checkpoint(checkpointed)


def _replace_where(
    spark: SparkSession, plan: WritePlan
) -> tuple[list[Action], dict[str, int]] | None:
    """The actions and metrics of the DELETE a ``replaceWhere`` runs, or ``None`` when the write
    replaces nothing by a condition."""
    condition = plan.options.replace_where
    if condition is None or plan.options.normalized_mode != "overwrite":
        return None
    if plan.txn.snapshot is None:
        return None
    actions, operation = delete_actions(spark, plan.txn, condition, operation_name="replaceWhere")
    metrics = {k: int(operation.metrics[k]) for k in _REPLACE_METRICS if k in operation.metrics}
    metrics.setdefault("numAddedChangeFiles", 0)
    return actions, metrics


def _replace_by_source(
    spark: SparkSession, plan: WritePlan, df: Any
) -> tuple[list[Action], dict[str, int]] | None:
    """The actions and metrics of the DELETE a ``replaceOn``/``replaceUsing`` overwrite runs:
    the target rows some written row matches (``EXISTS (SELECT 1 FROM df WHERE cond)``, a
    semi-join Spark runs), or ``None`` when the write replaces nothing so. An empty ``df``
    matches nothing, so deletes nothing.

    Raises:
        InvalidArgumentError: a ``replaceUsing`` column is missing from the table or the data
            (``UNRESOLVED_INSERT_REPLACE_USING_COLUMN``).
        AnalysisException: Spark refuses the ``replaceOn`` condition; nothing was written.
    """
    options = plan.options
    if options.normalized_mode != "overwrite" or plan.txn.snapshot is None:
        return None
    if options.replace_on is not None:
        condition = options.replace_on
        match = SourceMatch(df, lambda _target: F.expr(condition), options.target_alias)
    elif options.replace_using is not None:
        pairs = _using_columns(plan, df, options.replace_using)
        match = SourceMatch(df, lambda target: _equal_on(target, df, pairs), options.target_alias)
    else:
        return None
    operation = operations.delete([])
    actions, operation = delete_matching_actions(spark, plan.txn, match, operation)
    metrics = {k: int(operation.metrics[k]) for k in _REPLACE_METRICS if k in operation.metrics}
    metrics.setdefault("numAddedChangeFiles", 0)
    return actions, metrics


def _using_columns(plan: WritePlan, df: Any, columns: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each ``replaceUsing`` column as (the table's name, the data's name), matched without
    regard to case as Spark's resolver does by default.

    Raises:
        InvalidArgumentError: ``UNRESOLVED_INSERT_REPLACE_USING_COLUMN``.
    """
    snapshot = plan.txn.snapshot
    assert snapshot is not None
    pairs = []
    for name in columns:
        target = _resolve(name, list(snapshot.schema.names))
        source = _resolve(name, list(df.columns))
        for found, where, names in (
            (target, "the target table", snapshot.schema.names),
            (source, "the source query", df.columns),
        ):
            if found is None:
                raise errors.InvalidArgumentError(
                    "UNRESOLVED_INSERT_REPLACE_USING_COLUMN",
                    f"Column {name} cannot be resolved in {where}. Did you mean one of the "
                    f"following? [{', '.join(names)}].",
                    table=plan.layout.table_root,
                    help="name in replaceUsing columns both the table and the data hold.",
                )
        assert target is not None and source is not None
        pairs.append((target, source))
    return pairs


def _resolve(name: str, names: list[str]) -> str | None:
    return next((n for n in names if n.lower() == name.lower()), None)


def _equal_on(target: Any, source: Any, pairs: list[tuple[str, str]]) -> Any:
    """``replaceUsing``'s condition: plain equality on every column (NULL never matches)."""
    condition = None
    for t, s in pairs:
        equal = target[f"`{t}`"] == source[f"`{s}`"]
        condition = equal if condition is None else condition & equal
    return condition


def _inserted_changes(df: Any, plan: WritePlan) -> list[AddCDCFile]:
    """The written rows as ``insert`` change files: a commit's change feed is read from its
    change files alone once it has some, and the removal wrote ``delete`` ones.

    Raises:
        UnsupportedFeatureError: the data lacks a column the write computes (a generated or an
            identity column): its change rows would not hold the values written.
    """
    names = plan.layout.schema.names
    present = {c.lower() for c in df.columns}
    missing = [n for n in names if n.lower() not in present]
    if missing:
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_REPLACE_WHERE_WITH_CDF",
            f"a replaceWhere on data columns of a table with the change data feed needs the "
            f"written data to hold every column; it lacks {', '.join(missing)}.",
            table=plan.layout.table_root,
            help="give the computed columns' values in the data, or use a condition on "
            "partition columns only.",
        )
    rows = df.select(*[F.col(f"`{n}`") for n in names], F.lit("insert").alias(CHANGE_TYPE))
    return write_change_rows(rows, plan)


def _storage_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The writer options that are object-store options (delta-rs's ``AWS_*`` names, ...)."""
    return {k: v for k, v in (options or {}).items() if k.lower().startswith(STORAGE_PREFIXES)}
