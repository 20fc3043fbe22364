"""Evaluating a parsed predicate on rows (Arrow), with SQL's three-valued logic.

The Python writer needs this where Spark would evaluate the expression: which rows of a file a
``replaceWhere`` removes, and whether the rows written satisfy it. Only the subset of
:mod:`deltalog.predicate` is understood; anything else (:class:`~deltalog.predicate.Opaque`)
raises, so a condition is never guessed. Spark writers evaluate the original SQL text instead.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.data_skipping import COMPARE
from deltalog.predicate import And, Comparison, In, IsNull, Literal, Not, Opaque, Or, Predicate


def evaluate(predicate: Predicate, rows: pa.Table, *, table: str = "") -> pa.BooleanArray:
    """The predicate's value per row: true, false or null (unknown), as SQL defines it.

    Column names are matched case-insensitively (Spark's default). Literals are cast to the
    column's type.

    Raises:
        UnsupportedFeatureError: the predicate uses syntax outside the supported subset.
        InvalidArgumentError: it names a column ``rows`` does not have.
    """
    result = _eval(predicate, rows, table)
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    return result


def is_true(mask: pa.BooleanArray) -> pa.BooleanArray:
    """``mask <=> true``: nulls count as not true."""
    return pc.fill_null(mask, False)


def _eval(p: Predicate, rows: pa.Table, table: str) -> Any:
    if isinstance(p, And):
        return pc.and_kleene(_eval(p.left, rows, table), _eval(p.right, rows, table))
    if isinstance(p, Or):
        return pc.or_kleene(_eval(p.left, rows, table), _eval(p.right, rows, table))
    if isinstance(p, Not):
        return pc.invert(_eval(p.child, rows, table))
    if isinstance(p, IsNull):
        column = _column(rows, p.column, table)
        return pc.is_valid(column) if p.negated else pc.is_null(column)
    if isinstance(p, Comparison):
        column = _column(rows, p.column, table)
        if p.literal.kind == "null":
            return pa.nulls(rows.num_rows, pa.bool_())
        return COMPARE[p.op](column, _scalar(p.literal, column.type))
    if isinstance(p, In):
        column = _column(rows, p.column, table)
        values = [v for v in p.values if v.kind != "null"]
        has_null = len(values) != len(p.values)
        found = pc.is_in(
            column,
            value_set=pa.array([_scalar(v, column.type).as_py() for v in values], column.type),
        )
        # SQL: x IN (..., NULL) is true when found, else unknown; a null x is unknown.
        found = pc.if_else(pc.is_null(column), pa.scalar(None, pa.bool_()), found)
        if has_null:
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        return pc.invert(found) if p.negated else found
    assert isinstance(p, Opaque)
    raise errors.UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_PREDICATE",
        f"the condition {p.text!r} is outside what the Python writer evaluates (comparisons "
        "of a column with a literal, IN, IS [NOT] NULL, BETWEEN, AND/OR/NOT).",
        table=table or None,
        help="simplify the condition, or write through Spark, which evaluates any SQL.",
    )


def _column(rows: pa.Table, name: str, table: str) -> pa.ChunkedArray:
    for candidate in rows.column_names:
        if candidate.lower() == name.lower():
            return rows.column(candidate)
    if "." in name:
        head, rest = name.split(".", 1)
        for candidate in rows.column_names:
            if candidate.lower() == head.lower():
                struct = rows.column(candidate).combine_chunks()
                return _column(pa.Table.from_struct_array(struct), rest, table)
    raise errors.invalid_argument(
        f"the condition names column {name!r}, which is not in {rows.column_names}", table=table
    )


def _scalar(lit: Literal, target: pa.DataType) -> pa.Scalar:
    value = lit.value
    naive = isinstance(value, dt.datetime) and value.tzinfo is None
    if pa.types.is_timestamp(target) and target.tz is not None and naive:
        value = value.replace(tzinfo=dt.UTC)  # the Python writer reads zone-less text as UTC
    if pa.types.is_date(target) and isinstance(value, str):
        value = dt.date.fromisoformat(value)
    try:
        return pa.scalar(value).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return pa.scalar(value, target)
