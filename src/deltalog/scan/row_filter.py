"""Evaluating a parsed predicate on rows (Arrow), with SQL's three-valued logic.

The Python writer needs this where Spark would evaluate the expression: which rows of a file a
``replaceWhere`` removes, and whether the rows written satisfy it. Only the subset of
:mod:`deltalog.scan.predicate` is understood; anything else
(:class:`~deltalog.scan.predicate.Opaque`) raises, so a condition is never guessed. Spark
writers evaluate the original SQL text instead.

Values compare as Spark 4 (ANSI) and 3.5 both compare them: NaN equals NaN and is above every
number (``NaN > x``, ``x < NaN``), ``-0.0 = 0.0``, NULL is unknown (three-valued AND/OR/NOT,
``x IN (..., NULL)`` unknown when not found), ``x <=> v`` never NULL. A literal is coerced to the
column's type as Spark does (:func:`~deltalog.scan.coercion.coerce`); where the two modes
differ or the coercion is not reproduced (a string column against a number, an integer column
against ``6.5``, a decimal column against a double...) the condition is refused. Arithmetic on
a column and a literal (``k % 10 = 0``) is computed by :mod:`deltalog.scan.arithmetic`, which
refuses what the two modes answer differently (an overflow, a remainder by zero). A timestamp
literal without an offset is read in ``zone`` (the Spark session's, from the Spark layer), UTC
by default.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.partition_values import typed_partition_values
from deltalog.scan.arithmetic import spark_arithmetic
from deltalog.scan.coercion import UNKNOWN, coerce, comparison_type
from deltalog.scan.predicate import (
    And,
    Arithmetic,
    Comparison,
    Computed,
    In,
    IsNull,
    Literal,
    Not,
    Opaque,
    Or,
    Predicate,
    columns,
    has_opaque,
)
from deltalog.scan.skipping import COMPARE
from deltalog.schema import (
    CHAR_VARCHAR_KEY,
    StructType,
    collation,
    compares_by_bytes,
    field_at,
)
from deltalog.timestamps import time_zone

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot

PartitionMatcher = Callable[[pa.Table], pa.Array]
"""An engine's exact decision on a partition-only condition: given the typed partition values
of some files (:func:`typed_partitions`), whether the condition is TRUE for each file's rows."""


def evaluate(
    predicate: Predicate,
    rows: pa.Table,
    *,
    table: str = "",
    zone: dt.tzinfo | None = None,
    schema: StructType | None = None,
) -> pa.BooleanArray:
    """The predicate's value per row: true, false or null (unknown), as SQL defines it.

    Column names are matched case-insensitively (Spark's default). Literals are coerced to the
    column's type as Spark does; timestamp literals without an offset are read in ``zone``
    (UTC when ``None``). ``schema``: the table's, whose columns the predicate compares
    (:func:`check_compared_by_bytes`).

    Raises:
        UnsupportedFeatureError: the predicate uses syntax outside the supported subset, a
            literal this evaluator cannot compare with its column exactly as Spark does, or a
            column of ``schema`` Spark compares otherwise than by bytes
            (DELTA_UNSUPPORTED_PREDICATE).
        InvalidArgumentError: it names a column ``rows`` does not have.
    """
    if schema is not None:
        check_compared_by_bytes(predicate, schema, table)
    result = _Evaluator(rows, table, zone or _UTC).eval(predicate)
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    return result


def check_compared_by_bytes(predicate: Predicate, schema: StructType, table: str = "") -> None:
    """Refuse a predicate comparing a column of ``schema`` that Spark does not compare by its
    UTF-8 bytes, as Arrow does: a collated string (``UTF8_LCASE`` equates ``'ABC'`` and
    ``'abc'``) or a ``CHAR(n)`` (Spark pads the literal). ``IS [NOT] NULL`` is the same under
    any collation.

    Raises:
        UnsupportedFeatureError: DELTA_UNSUPPORTED_PREDICATE, naming the column.
    """
    for name in sorted(compared_columns(predicate)):
        field = field_at(schema, name)
        if field is not None and not compares_by_bytes(field):
            how = collation(field) or field.metadata.get(CHAR_VARCHAR_KEY) or "a collation"
            raise errors.UnsupportedFeatureError(
                "DELTA_UNSUPPORTED_PREDICATE",
                f"column {name!r} ({how}) is not compared by its bytes in Spark, and the Python "
                "evaluator compares only by bytes, so it cannot decide this condition exactly.",
                table=table or None,
                help="run the command through Spark, which compares by the column's collation.",
            )


def compared_columns(p: Predicate) -> set[str]:
    """The columns ``p`` compares with a value (``IS NULL`` compares nothing)."""
    if isinstance(p, (Comparison, In)):
        return {p.column}
    if isinstance(p, Computed):
        return {p.term.column}
    if isinstance(p, (And, Or)):
        return compared_columns(p.left) | compared_columns(p.right)
    if isinstance(p, Not):
        return compared_columns(p.child)
    return set()


def is_true(mask: pa.BooleanArray) -> pa.BooleanArray:
    """``mask <=> true``: nulls count as not true."""
    return pc.fill_null(mask, False)


def is_partition_only(snapshot: Snapshot, predicate: Predicate | None) -> bool:
    """Whether ``predicate`` names only partition columns (and nothing opaque), so that its
    value is the same for every row of a file."""
    if predicate is None or has_opaque(predicate):
        return False
    names = {c.lower() for c in snapshot.partition_columns}
    used = {c.lower() for c in columns(predicate)}
    return bool(names) and used <= names


def typed_partitions(snapshot: Snapshot, files: pa.Table) -> pa.Table:
    """The partition values of ``files`` (rows of ``all_files_arrow()``) typed by the table's
    schema, one column per partition column (logical names), one row per file."""
    raw = [dict(pv or []) for pv in files.column("partitionValues").to_pylist()]
    typed = typed_partition_values(
        snapshot.schema,
        snapshot.partition_columns,
        raw,
        column_mapping=snapshot.column_mapping_mode != "none",
        table_root=snapshot.table_root,
    )
    return pa.table(typed) if typed else pa.table({"_": pa.nulls(files.num_rows)})


def partition_matches(
    snapshot: Snapshot,
    files: pa.Table,
    predicate: Predicate | None,
    matcher: PartitionMatcher | None = None,
) -> pa.Array:
    """For each file, whether a partition-only ``predicate`` is TRUE for its rows (NULL and
    FALSE both keep the rows, as ``DELETE`` keeps rows whose condition is not true).

    This decides removals, so it is exact or it fails: ``matcher`` is the engine's own
    evaluation (Spark's, in the Spark layer); without one the predicate is evaluated here.

    Raises:
        UnsupportedFeatureError: a literal this evaluator cannot compare with its column
            exactly (no file is guessed to match).
    """
    if files.num_rows == 0 or not snapshot.partition_columns:
        return pa.array([False] * files.num_rows, pa.bool_())
    typed = typed_partitions(snapshot, files)
    if matcher is not None:
        return matcher(typed)
    if predicate is None:
        raise TypeError("partition_matches needs a predicate or a matcher")
    return is_true(evaluate(predicate, typed, table=snapshot.table_root, schema=snapshot.schema))


class _Evaluator:
    """One evaluation of a predicate over ``rows``: literals coerced in ``zone``."""

    def __init__(self, rows: pa.Table, table: str, zone: dt.tzinfo) -> None:
        self.rows, self.table, self.zone = rows, table, zone

    def eval(self, p: Predicate) -> Any:
        if isinstance(p, And):
            return pc.and_kleene(self.eval(p.left), self.eval(p.right))
        if isinstance(p, Or):
            return pc.or_kleene(self.eval(p.left), self.eval(p.right))
        if isinstance(p, Not):
            return pc.invert(self.eval(p.child))
        if isinstance(p, IsNull):
            column = find_column(self.rows, p.column, self.table)
            return pc.is_valid(column) if p.negated else pc.is_null(column)
        if isinstance(p, Comparison):
            return self._compare(find_column(self.rows, p.column, self.table), p.column, p)
        if isinstance(p, Computed):
            values = compute(p.term, self.rows, table=self.table)
            return self._compare(values, p.term.column, p)
        if isinstance(p, In):
            return self._in(p)
        assert isinstance(p, Opaque)
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_PREDICATE",
            f"the condition {p.text!r} is outside what the Python writer evaluates (comparisons "
            "of a column or of arithmetic on a column with a literal, IN, IS [NOT] NULL, "
            "BETWEEN, AND/OR/NOT).",
            table=self.table or None,
            help="simplify the condition, or write through Spark, which evaluates any SQL.",
        )

    def _compare(self, raw: Any, name: str, p: Comparison | Computed) -> Any:
        value = _scalar(p.literal, raw.type, name, self.table, self.zone)
        if value is None:
            return pa.nulls(len(raw), pa.bool_())
        return _spark_compare(_compared(raw), p.op, value)

    def _in(self, p: In) -> Any:
        raw = find_column(self.rows, p.column, self.table)
        values = [_scalar(v, raw.type, p.column, self.table, self.zone) for v in p.values]
        column = _compared(raw)
        present = [v for v in values if v is not None]
        if pa.types.is_floating(column.type):
            # Equality, not hashing: -0.0 = 0.0 and NaN = NaN in Spark.
            found: Any = pa.array([False] * self.rows.num_rows, pa.bool_())
            for v in present:
                found = pc.or_(found, pc.fill_null(_spark_compare(column, "=", v), False))
        else:
            found = pc.is_in(column, value_set=pa.array([v.as_py() for v in present], column.type))
        # SQL: x IN (..., NULL) is true when found, else unknown; a null x is unknown.
        found = pc.if_else(pc.is_null(column), pa.scalar(None, pa.bool_()), found)
        if len(present) != len(values):
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        return pc.invert(found) if p.negated else found


def compute(term: Arithmetic, rows: pa.Table, *, table: str = "") -> pa.Array:
    """``term`` per row of ``rows``, as Spark computes it (:mod:`deltalog.scan.arithmetic`).

    Raises:
        UnsupportedFeatureError: a type or a row whose result Spark's modes disagree on.
        InvalidArgumentError: the column is not in ``rows``.
    """
    column = find_column(rows, term.column, table)
    return spark_arithmetic(column, term.op, term.operand, name=term.column, table=table)


def find_column(rows: pa.Table, name: str, table: str) -> pa.ChunkedArray:
    """Column ``name`` of ``rows`` as Spark resolves it: case-insensitively, ``a.b`` a field of
    struct ``a``.

    Raises:
        InvalidArgumentError: ``rows`` has no such column.
    """
    for candidate in rows.column_names:
        if candidate.lower() == name.lower():
            return rows.column(candidate)
    if "." in name:
        head, rest = name.split(".", 1)
        for candidate in rows.column_names:
            if candidate.lower() == head.lower():
                struct = rows.column(candidate).combine_chunks()
                return find_column(pa.Table.from_struct_array(struct), rest, table)
    raise errors.invalid_argument(f"column {name!r} is not in {rows.column_names}", table=table)


_UTC = time_zone("UTC")


def _compared(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Floating columns compare in float64 (a float32 value widens exactly)."""
    return column.cast(comparison_type(column.type))


def _spark_compare(column: pa.ChunkedArray, op: str, v: pa.Scalar) -> Any:
    """``column op v`` in Spark's order: for floating values NaN equals NaN and is above every
    number (IEEE says false to both); ``-0.0 = 0.0`` holds in both."""
    if not pa.types.is_floating(column.type):
        return COMPARE[op](column, v)
    nan = pc.is_nan(column)
    if math.isnan(v.as_py()):
        below = pc.invert(nan)  # x < NaN for every number x
        exact = {"=": nan, "!=": below, "<": below, ">=": nan, ">": pc.and_(nan, False)}
        return exact.get(op, pc.or_(nan, below))  # "<=": every non-null value
    if op in (">", ">=", "!="):
        return pc.or_kleene(COMPARE[op](column, v), nan)
    return COMPARE[op](column, v)  # NaN is neither equal to nor below a number: false


def _scalar(
    lit: Literal, target: pa.DataType, column: str, table: str, zone: dt.tzinfo
) -> pa.Scalar | None:
    """``lit`` as Spark compares it with a column of type ``target``; ``None`` for NULL."""
    value = coerce(lit, target, zone)
    if value is UNKNOWN:
        # Never compare a changed or guessed literal (6.5 taken as 6 would select other rows).
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_PREDICATE",
            f"the literal {_shown(lit)} cannot be compared with column {column!r} of type "
            f"{target} exactly as Spark does by the Python evaluator (Spark's coercion of this "
            "pair differs between ANSI and non-ANSI mode, or is not reproduced).",
            table=table or None,
            help="write the literal in the column's type, or run the command through Spark.",
        )
    return value


def _shown(lit: Literal) -> str:
    return repr(lit.value) if lit.kind != "string" else "'" + str(lit.value) + "'"
