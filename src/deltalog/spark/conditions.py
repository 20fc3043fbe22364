"""Spark decides what a condition selects, and says what it is.

A condition a user gives (``replaceWhere``, a DML condition) means what Spark's analyzer and
evaluator say it means: implicit casts, ANSI errors, NULL, NaN and -0.0, the session time
zone, case sensitivity. deltalog's own evaluator may only skip files (keep too many, never too
few); a file removed whole because of its partition values is decided here, by Spark, over a
tiny typed DataFrame with one row per distinct partition. A condition given as SQL text or a
Column becomes a Column (:func:`condition_column`) or the SQL recorded in ``commitInfo``
(:func:`condition_sql`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import sqlglot
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from deltalog import errors
from deltalog.errors import optimize as optimize_errors
from deltalog.scan.row_filter import PartitionMatcher
from deltalog.spark.session import arrow_to_df, empty_frame, to_arrow

_ROW = "__deltalog_partition_row"


def condition_column(condition: Any) -> Any:
    """A SQL string or a Column as a Column."""
    return F.expr(condition) if isinstance(condition, str) else condition


def condition_sql(condition: Any, frame: Any = None) -> str:
    """The condition's SQL text for ``commitInfo``: the text given, or a Column's SQL.

    With ``frame`` (a DataFrame the condition resolves against) on a classic session, the text
    is Catalyst's SQL of the resolved condition, what delta-spark records. Otherwise it is the
    unresolved expression's SQL (PySpark 3.5) or the Column's rendering (Connect; PySpark 4's
    classic Columns render as function calls). A Column's ``str()`` on 3.5 drops string
    literals' quotes (``p = a``), so it is the last resort.
    """
    if isinstance(condition, str):
        return condition
    resolved = _resolved_sql(condition, frame)
    if resolved is not None:
        return resolved
    jc = getattr(condition, "_jc", None)
    if jc is not None:
        with contextlib.suppress(Exception):  # PySpark 4 has no Column.expr(): its rendering
            return str(jc.expr().sql())
    text = str(condition)
    if text.startswith("Column<'") and text.endswith("'>"):
        return text[len("Column<'") : -2]
    return text


def _resolved_sql(condition: Any, frame: Any) -> str | None:
    """Catalyst's SQL of ``condition`` analysed over ``frame`` (classic sessions only)."""
    if frame is None or getattr(frame, "_jdf", None) is None:
        return None
    with contextlib.suppress(Exception):  # unresolvable over frame: the caller falls back
        analyzed = frame.where(condition)._jdf.queryExecution().analyzed()
        return str(analyzed.condition().sql())
    return None


def is_partition_condition(
    spark: SparkSession,
    schema: T.StructType,
    partition_columns: Sequence[str],
    condition: Any,
    *,
    operation: str,
    table: str,
) -> bool:
    """Check ``condition`` (SQL text or a Column) as Spark resolves it against the table's
    columns, and say whether its value is the same for every row of a file: it names partition
    columns only and is deterministic. Nothing runs; plans are only analysed.

    Raises:
        AnalysisException: Spark's own error for a condition it refuses (an unknown column,
            ``DATATYPE_MISMATCH``...), before anything is written or committed.
        UnsupportedFeatureError: a subquery (``DELTA_UNSUPPORTED_SUBQUERY``), or, for a
            ``replaceWhere``, a non-deterministic function
            (``DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED``), as the reference refuses them.
    """
    cond = condition_column(condition)
    resolved = _analysed(empty_frame(spark, schema).where(cond))
    subquery, deterministic = _shape(resolved, condition)
    if subquery:
        raise errors.unsupported_subquery(operation, condition_sql(condition), table)
    if not deterministic and operation == "replaceWhere":
        raise errors.non_deterministic_condition(operation, condition_sql(condition), table)
    names = {c.lower() for c in partition_columns}
    if not names or not deterministic:
        return False
    partition_schema = T.StructType([f for f in schema.fields if f.name.lower() in names])
    try:
        _analysed(empty_frame(spark, partition_schema).where(cond))
    except AnalysisException:  # it names a data column
        return False
    return True


def check_partition_filter(
    spark: SparkSession,
    schema: T.StructType,
    partition_columns: Sequence[str],
    text: str,
    *,
    table: str,
) -> None:
    """The reference's checks of an OPTIMIZE ``WHERE`` filter (``parsePredicates`` and
    ``verifyPartitionPredicates``), with Spark's parser and analyzer: the text must parse, hold
    no subquery, and name partition columns only (as Spark's resolver matches names). Nothing
    runs; a plan over no rows is analysed.

    Raises:
        InvalidArgumentError: ``DELTA_FAILED_RECOGNIZE_PREDICATE`` (Spark cannot parse it),
            ``DELTA_UNSUPPORTED_SUBQUERY_IN_PARTITION_PREDICATES``, or
            ``DELTA_NON_PARTITION_COLUMN_REFERENCE`` (any column Spark cannot resolve among the
            partition columns, a data column or an unknown one, as the reference names both).
        AnalysisException: Spark's own refusal of a filter over partition columns
            (``DATATYPE_MISMATCH``...).
    """
    # The reference rejects a subquery before looking at columns (a subquery's table need not
    # exist for the refusal), so the text is checked first.
    if _text_has_subquery(text):
        raise optimize_errors.subquery_in_partition_predicate(text, table)
    names = {c.lower() for c in partition_columns}
    partition_schema = T.StructType([f for f in schema.fields if f.name.lower() in names])
    try:
        _analysed(empty_frame(spark, partition_schema).where(F.expr(text)))
    except ParseException as e:
        raise optimize_errors.failed_recognize_predicate(text, _first_line(e), table) from None
    except AnalysisException as e:
        column = _unresolved_column(e)
        if column is None:
            raise
        raise optimize_errors.non_partition_column_reference(
            column, partition_columns, table
        ) from None


def _text_has_subquery(text: str) -> bool:
    tree = _sql_tree(text)  # None: Spark's parser decides, and analyses what sqlglot cannot
    return tree is not None and any(True for _ in tree.find_all(exp.Select))


def _sql_tree(text: str) -> exp.Expr | None:
    """sqlglot's tree of a Spark SQL expression, or ``None`` where sqlglot cannot parse it."""
    try:
        return sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError:
        return None


def _unresolved_column(error: AnalysisException) -> str | None:
    """The column Spark could not resolve (``UNRESOLVED_COLUMN.*``), dotted, or ``None``."""
    condition = error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()
    if not str(condition or "").startswith("UNRESOLVED_COLUMN"):
        return None
    name = (error.getMessageParameters() or {}).get("objectName")
    if not name:
        return None
    return ".".join(part.strip("`") for part in name.split("`.`"))


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [""])[0]


def _analysed(frame: Any) -> Any:
    """``frame`` analysed: classic sessions analyse eagerly, Connect when asked for a schema."""
    frame.schema  # noqa: B018 (the analysis is the point)
    return frame


# Spark's non-deterministic functions (``Nondeterministic`` expressions and those marked so).
_NON_DETERMINISTIC = {
    "rand", "random", "randn", "randstr", "uniform", "uuid", "shuffle",
    "monotonically_increasing_id",
    "spark_partition_id", "input_file_name", "input_file_block_start", "input_file_block_length",
    "reflect", "java_method", "try_reflect",
}  # fmt: skip


def _shape(frame: Any, condition: Any) -> tuple[bool, bool]:
    """Whether the condition of ``frame`` (a filter) holds a subquery, and whether it is
    deterministic: Catalyst's answer on classic sessions, the SQL text's otherwise."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is not None:
        analysed = jdf.queryExecution().analyzed()
        return not analysed.subqueries().isEmpty(), bool(analysed.condition().deterministic())
    tree = _sql_tree(condition_sql(condition))
    if tree is None:
        return False, True  # Spark parsed it; the text is only a second opinion
    subquery = any(True for _ in tree.find_all(exp.Select))
    names = {_function_name(f) for f in tree.find_all(exp.Func)}
    return subquery, not (names & _NON_DETERMINISTIC)


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def is_true(column: Any) -> Any:
    """``column <=> true``: NULL counts as not matching."""
    return F.coalesce(column, F.lit(False))


def partition_matcher(spark: SparkSession, condition: Any) -> PartitionMatcher:
    """A :data:`~deltalog.scan.row_filter.PartitionMatcher` evaluating ``condition`` (SQL text or
    a Column) with Spark over typed partition values.

    Raises (when called): Spark's own errors for a condition it refuses (``DATATYPE_MISMATCH``,
    ``CAST_INVALID_INPUT`` under ANSI, an unknown column...), before anything is committed.
    """

    def match(partitions: pa.Table) -> pa.Array:
        return partition_mask(spark, partitions, condition)

    return match


def partition_mask(spark: SparkSession, partitions: pa.Table, condition: Any) -> pa.Array:
    """For each row of ``partitions`` (typed partition values, logical names), whether
    ``condition`` is TRUE for it, as Spark evaluates it. Distinct rows are evaluated once.

    The values are an RDD-based frame, not a ``LocalRelation``: Spark filters a local relation
    before its other optimizer rules run, so it raises (ANSI) where a scan of the table would
    have simplified the failing part away (``CAST(x AS INT) > 9223372036854775807``). A scan's
    answer is the one a read gives; it costs a small job."""
    if partitions.num_rows == 0:
        return pa.array([], pa.bool_())
    distinct, inverse = _distinct_rows(partitions)
    numbered = distinct.append_column(_ROW, pa.array(range(distinct.num_rows)))
    frame = arrow_to_df(spark, numbered, local=False)
    cond = F.expr(condition) if isinstance(condition, str) else condition
    hits = to_arrow(frame.where(cond).select(_ROW)).column(_ROW).to_pylist()
    chosen = [False] * distinct.num_rows
    for i in hits:
        chosen[i] = True
    return pa.array([chosen[i] for i in inverse], pa.bool_())


def _distinct_rows(table: pa.Table) -> tuple[pa.Table, list[int]]:
    """The distinct rows of ``table`` and, per row, the index of its distinct row."""
    keys = list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True))
    first: dict[tuple[Any, ...], int] = {}
    inverse = [first.setdefault(_key(k), len(first)) for k in keys]
    picks = [-1] * len(first)
    for row, group in enumerate(inverse):
        if picks[group] < 0:
            picks[group] = row
    return table.take(pa.array(picks, pa.int64())), inverse


def _key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    # NaN != NaN in Python: key floats by their repr so equal partitions share a row.
    return tuple(repr(v) if isinstance(v, float) else v for v in values)
