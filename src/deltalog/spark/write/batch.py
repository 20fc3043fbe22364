"""Data files written from Spark, spread over the executors, for every command that writes
(``df.write``, DML, MERGE, OPTIMIZE, the streaming sink), in one Spark job:

* Spark's own parquet writer (:mod:`deltalog.spark.write.parquet`), the default: rows never
  leave the JVM; ``add`` actions are built from the files' paths and footers.
* Under column mapping, one ``mapInArrow`` stage: every task feeds its Arrow batches to a
  :class:`~deltalog.write.file_writer.DataFileWriter` (physical names and field ids at any
  depth) and returns the ``add`` actions of the files it wrote, one JSON line each.

Rules every row must pass (NOT NULL, CHECK constraints, the ``replaceWhere`` condition,
generated columns given by the data) are Spark expressions evaluated in that same job, failing
it with the reference's error; generated columns the data lacks are computed there too, and
identity values generated. The writer's options are parsed here too
(:func:`parse_writer_options`).

Only DataFrame APIs are used, so this runs on classic sessions and over Spark Connect, on
PySpark 3.5 and 4.x.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltalog import errors
from deltalog.actions import AddCDCFile, AddFile, action_from_json
from deltalog.column_defaults import missing_defaults
from deltalog.commands.dml.file_changes import as_change_files
from deltalog.commands.write.constraints import GENERATION_KEY, constraints
from deltalog.commands.write.identity import (
    IdentityColumn,
    columns_to_generate,
    identity_columns,
    marks_after,
)
from deltalog.commands.write.write_into_delta import (
    WriteOptions,
    WritePlan,
    change_data_layout,
)
from deltalog.schema import StructType
from deltalog.spark.schema import spark_type
from deltalog.spark.session import conf_get, to_arrow
from deltalog.spark.storage import note_path
from deltalog.spark.write import parquet
from deltalog.storage import register, store_for
from deltalog.storage.options import StorageOptions, registered
from deltalog.write.char_varchar import Declared, declared
from deltalog.write.file_writer import DataFileWriter, WriteLayout
from deltalog.write.type_widening import ALLOW_AUTOMATIC_WIDENING_CONF

_ADD_COLUMN = "add"
_RANGE_COLUMN = "identity_range"
_CHECK_MARKER = "[deltalog:"
_TRUE = {"true": True, "false": False}


def parse_writer_options(
    spark: SparkSession,
    options: Mapping[str, Any],
    *,
    mode: str | None,
    partition_by: Sequence[str] | None,
    table: str,
) -> WriteOptions:
    """delta-spark's writer options (keys case-insensitive) and session confs as
    :class:`WriteOptions` (see :func:`writer_options`)."""
    return writer_options(
        options,
        mode=mode,
        partition_by=partition_by,
        table=table,
        conf=lambda key, default: conf_get(spark, key, default),
    )


def writer_options(
    options: Mapping[str, Any],
    *,
    mode: str | None,
    partition_by: Sequence[str] | None,
    table: str,
    conf: Callable[[str, str], str] = lambda key, default: default,
) -> WriteOptions:
    """delta-spark's writer options (keys case-insensitive) as :class:`WriteOptions`, with the
    session confs ``conf`` answers (key, default) where an option is absent.

    Raises:
        InvalidArgumentError: an option value of the wrong kind (DELTA_ILLEGAL_OPTION), or an
            unknown ``delta.*`` property.
    """
    opts = {k.lower(): None if v is None else str(v) for k, v in options.items()}
    configuration = {k: str(v) for k, v in options.items() if k.lower().startswith("delta.")}
    dpo_option = opts.get("partitionoverwritemode")
    dpo_session = conf("spark.sql.sources.partitionOverwriteMode", "static")
    replace_where = opts.get("replacewhere")
    replace_on = opts.get("replaceon")
    replace_using = _columns(opts.get("replaceusing"), "replaceUsing", table)
    by_source = replace_on is not None or replace_using is not None
    if by_source and dpo_option is not None:
        raise errors.InvalidArgumentError(
            "DELTA_DYNAMIC_PARTITION_OVERWRITE_INCOMPATIBLE_REPLACE_ON_OR_USING",
            "Dynamic partition overwrite (partitionOverwriteMode) is incompatible with the "
            "replaceOn/replaceUsing option.",
            table=table,
            help="drop partitionOverwriteMode: replaceOn/replaceUsing choose the rows replaced.",
        )
    static = replace_where or by_source  # these choose what is replaced, not the session
    dynamic_value = dpo_option or ("static" if static else dpo_session)
    dynamic = _choice(dynamic_value, ("static", "dynamic"), "partitionOverwriteMode", table)
    merge_default = conf("spark.databricks.delta.schema.autoMerge.enabled", "false")
    user_metadata = opts.get("usermetadata") or _none_if_empty(
        conf("spark.databricks.delta.commitInfo.userMetadata", "")
    )
    return WriteOptions(
        mode=(mode or "errorifexists"),
        partition_by=tuple(partition_by) if partition_by else None,
        replace_where=replace_where,
        replace_on=replace_on,
        replace_using=replace_using,
        target_alias=opts.get("targetalias"),
        dynamic_partition_overwrite=dynamic == "dynamic",
        merge_schema=_bool(opts.get("mergeschema", merge_default), "mergeSchema", table),
        overwrite_schema=_bool(opts.get("overwriteschema", "false"), "overwriteSchema", table),
        txn_app_id=opts.get("txnappid"),
        txn_version=_int(opts.get("txnversion"), "txnVersion", table),
        user_metadata=user_metadata,
        max_records_per_file=_int(opts.get("maxrecordsperfile"), "maxRecordsPerFile", table)
        or int(conf("spark.sql.files.maxRecordsPerFile", "0")),
        data_change=_bool(opts.get("datachange", "true"), "dataChange", table),
        configuration=configuration,
        description=opts.get("comment"),
        allow_automatic_widening=conf(ALLOW_AUTOMATIC_WIDENING_CONF, "always"),
    )


def write_rows(
    df: Any, plan: WritePlan, *, generated: Sequence[str] = ()
) -> tuple[list[AddFile], dict[str, int]]:
    """Write ``df`` (the table's columns by name) as new data files of ``plan``'s table, every
    row checked against the table's rules and missing defaulted, generated and identity values
    computed, all in one Spark job; returns the ``add`` actions and the identity high-water
    marks.

    ``generated`` names identity columns ``df`` holds but whose values the caller generated
    for some rows (MERGE's inserts): they are not explicit inserts, and their high-water marks
    follow from every value written, as the reference's tracker does.

    Raises:
        DeltaWriteError: a row breaks a rule (NOT NULL, CHECK, generated column...); values
            are given for a GENERATED ALWAYS identity column.
    """
    table = plan.layout.table_root
    given = {n.lower() for n in generated}
    columns = identity_columns(plan.layout.schema)
    tracked = [c for c in columns if c.name.lower() in given]
    identity = columns_to_generate(
        [c for c in columns if c.name.lower() not in given], df.columns, table
    )
    checked = _with_rules(_with_identity(df, identity), plan)
    adds, ranges = _write_files(checked, plan, identity + tracked, table)
    return adds, marks_after(identity + tracked, ranges)


def write_change_rows(df: Any, plan: WritePlan) -> list[AddCDCFile]:
    """Write ``df`` (the table's columns plus ``_change_type``) as change data files under
    ``<table>/_change_data``; returns their ``cdc`` actions."""
    cdc_plan = replace(plan, layout=change_data_layout(plan.layout))
    adds, _ = _write_files(df, cdc_plan, [], plan.layout.table_root)
    return as_change_files(adds)


def _write_files(
    df: Any, plan: WritePlan, identity: list[IdentityColumn], table: str
) -> tuple[list[AddFile], dict[str, tuple[int, int]]]:
    try:
        if parquet.can_write(df.sparkSession, plan):
            return parquet.write_files(df, plan, identity)
        return _write_in_python_tasks(df, plan, identity)
    except Exception as e:  # a row broke a rule: surface the reference's error, typed
        raise _rule_error(e, table) from None


def _write_in_python_tasks(
    df: Any, plan: WritePlan, identity: list[IdentityColumn]
) -> tuple[list[AddFile], dict[str, tuple[int, int]]]:
    """Every task writes its batches with deltalog's Python file writer (column mapping:
    physical names and field ids at any depth) and returns its ``add`` lines."""
    task = WriteTask(
        plan.layout, tuple(c.name for c in identity), registered(plan.layout.table_root)
    )
    note_path(plan.layout.table_root, "write", jvm=False)
    out = to_arrow(df.mapInArrow(task, f"{_ADD_COLUMN} string, {_RANGE_COLUMN} string"))
    adds = [_add(line) for line in out.column(_ADD_COLUMN).to_pylist() if line is not None]
    return adds, _identity_ranges(out.column(_RANGE_COLUMN).to_pylist())


class WriteTask:
    """The function each Spark task runs: write its batches, yield one row per ``add`` (JSON)
    and one row with the range of identity values it generated (JSON), if any."""

    def __init__(
        self,
        layout: WriteLayout,
        identity: tuple[str, ...] = (),
        storage: StorageOptions | None = None,
    ) -> None:
        self.layout = layout
        self.identity = identity
        self.storage = storage or StorageOptions()  # an object store's options, for the workers

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.storage.items:
            register(self.layout.table_root, self.storage)
        store = store_for(self.layout.table_root)
        ranges: dict[str, list[int]] = {}
        # A failed task deletes the files it wrote (the commit never names them).
        with DataFileWriter(store, self.layout, task_id=_task_id()) as writer:
            for batch in batches:
                if not batch.num_rows:
                    continue
                for name in self.identity:
                    lo, hi = (v.as_py() for v in pc.min_max(batch.column(name)).values())
                    if lo is None:  # only nulls (values given for a BY DEFAULT column)
                        continue
                    seen = ranges.setdefault(name, [lo, hi])
                    seen[0], seen[1] = min(seen[0], lo), max(seen[1], hi)
                writer.add(_drop_checks(batch))
            lines: list[str | None] = [a.to_json() for a in writer.finish()]
        extra: list[str | None] = [None] * len(lines)
        if ranges:
            lines.append(None)
            extra.append(json.dumps(ranges))
        yield pa.RecordBatch.from_arrays(
            [pa.array(lines, pa.string()), pa.array(extra, pa.string())],
            [_ADD_COLUMN, _RANGE_COLUMN],
        )


def _with_identity(df: Any, columns: list[IdentityColumn]) -> Any:
    """Generated identity values: unique, not consecutive (``monotonically_increasing_id`` is
    the partition id in the high bits and the row's position in the low ones), continuing past
    the high-water mark in steps of ``step``."""
    for c in columns:
        value = F.lit(c.first_value) + F.lit(c.step) * F.monotonically_increasing_id()
        df = df.withColumn(c.name, value.cast("long"))
    return df


def _identity_ranges(texts: list[str | None]) -> dict[str, tuple[int, int]]:
    ranges: dict[str, tuple[int, int]] = {}
    for text in texts:
        for name, (lo, hi) in json.loads(text).items() if text else ():
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))
    return ranges


def _task_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _drop_checks(batch: pa.RecordBatch) -> pa.RecordBatch:
    names = [n for n in batch.schema.names if not n.startswith("__deltalog_")]
    return batch.select(names) if len(names) != batch.num_columns else batch


def _add(line: str) -> AddFile:
    action = action_from_json(line)
    assert isinstance(action, AddFile)
    return action


# -- rules evaluated by Spark --------------------------------------------------------------------


def _with_rules(df: Any, plan: WritePlan) -> Any:
    """``df`` with missing defaulted and generated columns computed and a filter that is
    always true or raises the reference's error for the first row that breaks a rule."""
    schema: StructType = plan.layout.schema
    df = _char_varchar_checked(with_defaults(df, schema), schema)
    present = {c.lower() for c in df.columns}
    for f in schema.fields:
        if GENERATION_KEY in f.metadata and f.name.lower() not in present:
            df = df.withColumn(f.name, F.expr(str(f.metadata[GENERATION_KEY])))
    checks = []
    for f in schema.fields:
        if not f.nullable:
            msg = (
                f"{_CHECK_MARKER}DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint "
                f"violated for column: {f.name}."
            )
            column = F.col(f"`{f.name}`") if f.name.lower() in present else F.lit(None)
            checks.append(F.when(column.isNull(), F.raise_error(F.lit(msg))))
        if GENERATION_KEY in f.metadata and f.name.lower() in present:
            expr = str(f.metadata[GENERATION_KEY])
            msg = (
                f"{_CHECK_MARKER}DELTA_GENERATED_COLUMNS_VALUE_MISMATCH] CHECK constraint "
                f"Generated Column ({f.name} <=> {expr}) violated by row with values: "
            )
            ok = F.col(f"`{f.name}`").eqNullSafe(F.expr(expr))
            checks.append(F.when(~ok, F.raise_error(F.concat(F.lit(msg), _row_text(df)))))
    for name, expr in constraints(plan.layout.configuration).items():
        msg = (
            f"{_CHECK_MARKER}DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK constraint {name} "
            f"{expr} violated by row with values: "
        )
        ok = F.coalesce(F.expr(expr), F.lit(False))
        checks.append(F.when(~ok, F.raise_error(F.concat(F.lit(msg), _row_text(df)))))
    if plan.options.replace_where is not None and plan.replace_predicate is not None:
        expr = plan.options.replace_where
        msg = (
            f"{_CHECK_MARKER}DELTA_REPLACE_WHERE_MISMATCH] Written data does not conform to "
            f"partial table overwrite condition or constraint '{expr}'. Row: "
        )
        ok = F.coalesce(F.expr(expr), F.lit(False))
        checks.append(F.when(~ok, F.raise_error(F.concat(F.lit(msg), _row_text(df)))))
    if checks:
        df = df.where(F.coalesce(*checks, F.lit(True)))
    return df


def with_defaults(df: Any, schema: StructType) -> Any:
    """``df`` with the columns it lacks that have a default (``CURRENT_DEFAULT``) set to it,
    evaluated by Spark and cast to the column's type, as the reference's writer does for every
    write (PROTOCOL.md "Default Columns")."""
    for name, sql in missing_defaults(schema, list(df.columns)).items():
        df = df.withColumn(name, F.expr(sql).cast(spark_type(schema.field(name))))
    return df


def _row_text(df: Any) -> Any:
    parts = []
    for i, name in enumerate(df.columns):
        parts += [
            F.lit(("" if i == 0 else ", ") + f"{name} = "),
            F.coalesce(F.col(f"`{name}`").cast("string"), F.lit("null")),
        ]
    return F.concat(*parts) if parts else F.lit("")


_RULE = re.compile(r"\[deltalog:([A-Z_]+)\] (.*?)(?:\n|$|\" *\}|\. SQLSTATE)", re.S)


def _char_varchar_checked(df: Any, schema: StructType) -> Any:
    """``df`` with each ``CHAR(n)``/``VARCHAR(n)`` column's values as Spark writes them to such
    a column (``CharVarcharCodegenUtils``): a longer value loses trailing spaces down to n, and
    if still longer fails the write (``EXCEED_LIMIT_LENGTH``); a ``CHAR`` value is then padded
    with spaces to n. Values nested in structs, arrays and maps are fitted alike."""
    present = {c.lower(): c for c in df.columns}
    for f in schema.fields:
        tree = declared(f)
        name = present.get(f.name.lower())
        if tree is None or name is None:
            continue
        df = df.withColumn(name, _fitted(F.col(f"`{name}`"), tree))
    return df


def _fitted(value: Any, tree: Declared) -> Any:
    """``value`` fitted to the declared type ``tree`` (a column expression, no job)."""
    children = dict(tree.children)
    if tree.kind == "struct":
        for name, child in tree.children:  # withField keeps a NULL struct NULL
            if child.has_char_varchar():
                field = value.getField(name)
                quoted = name.replace("`", "``")
                value = value.withField(f"`{quoted}`", _fitted(field, child))
        return value
    if tree.kind == "array":
        return F.transform(value, lambda x: _fitted(x, children["element"]))
    if tree.kind == "map":
        if children["key"].has_char_varchar():
            value = F.transform_keys(value, lambda k, _: _fitted(k, children["key"]))
        if children["value"].has_char_varchar():
            value = F.transform_values(value, lambda _, v: _fitted(v, children["value"]))
        return value
    if tree.kind not in ("char", "varchar"):
        return value
    limit = tree.length
    msg = (
        f"{_CHECK_MARKER}EXCEED_LIMIT_LENGTH] Exceeds char/varchar type length limitation: {limit}."
    )
    fitted = (
        F.when(value.isNull() | (F.length(value) <= limit), value)
        .when(F.length(F.rtrim(value)) <= limit, F.substring(value, 1, limit))
        .otherwise(F.raise_error(F.lit(msg)).cast("string"))
    )
    return F.rpad(fitted, limit, " ") if tree.kind == "char" else fitted


def _rule_error(e: Exception, table: str) -> Exception:
    text = str(e)
    m = _RULE.search(text)
    if m is None:
        return e
    return errors.DeltaWriteError(m.group(1), m.group(2).strip().rstrip("."), table=table)


# -- option values -------------------------------------------------------------------------------


def _bool(value: str | None, name: str, table: str) -> bool:
    if value is None:
        return False
    result = _TRUE.get(value.strip().lower())
    if result is None:
        raise _illegal(name, value, "must be 'true' or 'false'", table)
    return result


def _int(value: str | None, name: str, table: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise _illegal(name, value, "must be an integer", table) from None


def _columns(value: str | None, name: str, table: str) -> tuple[str, ...] | None:
    """A comma-separated list of column names, trimmed, duplicates dropped (the reference's
    ``parsedReplaceUsingColsList``)."""
    if value is None:
        return None
    names = [n.strip() for n in value.split(",")]
    if any(not n for n in names):
        raise _illegal(name, value, "must not contain empty column names", table)
    return tuple(dict.fromkeys(names))


def _choice(value: str, allowed: tuple[str, ...], name: str, table: str) -> str:
    lowered = value.strip().lower()
    if lowered not in allowed:
        raise _illegal(name, value, f"must be one of {', '.join(allowed)}", table)
    return lowered


def _illegal(name: str, value: str, why: str, table: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        "DELTA_ILLEGAL_OPTION",
        f"Invalid value '{value}' for option '{name}': {why}.",
        table=table,
    )


def _none_if_empty(value: str) -> str | None:
    return value or None
