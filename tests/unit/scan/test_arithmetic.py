"""Arithmetic of a column and a literal, as Spark computes it (``deltalog.scan.arithmetic``), in
conditions (``k % 10 = 0``) and in UPDATE's values (``v + 1``).

Expected values are Java's: ``%`` takes the dividend's sign, ``x % -1`` is 0, an integer
result is ``int`` or ``bigint``; what Spark's two modes answer differently (overflow, a
remainder by zero) is refused. Spark itself checks the same cases in
``tests/spark/differential/test_conditions.py::test_local_engine_arithmetic``.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest

from deltalog import errors
from deltalog.commands.dml.values import SqlValue
from deltalog.scan.arithmetic import spark_arithmetic
from deltalog.scan.predicate import (
    Arithmetic,
    Computed,
    Literal,
    Opaque,
    PredicateSyntaxError,
    parse_operand,
    parse_predicate,
    push_down_not,
    simple_string,
)
from deltalog.scan.row_filter import evaluate


def _lit(v: int) -> Literal:
    return Literal(v, "int")


# -- parsing ----------------------------------------------------------------------------------


def test_arithmetic_parses_as_a_computed_comparison() -> None:
    p = parse_predicate("k % 10 = 0")
    assert p == Computed(Arithmetic("k", "%", _lit(10)), "=", _lit(0))
    # A literal on the left mirrors the comparison; BETWEEN makes two.
    assert parse_predicate("3 < k - 1") == Computed(Arithmetic("k", "-", _lit(1)), ">", _lit(3))
    assert simple_string(parse_predicate("k * 2 BETWEEN 1 AND 4")) == (
        "((('k * 2) >= 1) AND (('k * 2) <= 4))"
    )
    # NOT goes to the leaves: k % 2 != 0 OR ...
    pushed = push_down_not(parse_predicate("NOT (k % 2 = 0)"))
    assert pushed == Computed(Arithmetic("k", "%", _lit(2)), "!=", _lit(0))
    assert parse_operand("v + 1.5") == Arithmetic("v", "+", Literal(Decimal("1.5"), "decimal"))
    assert parse_operand("`a b` % -3") == Arithmetic("a b", "%", _lit(-3))


@pytest.mark.parametrize(
    "text", ["k + 1 + 2 = 3", "1 + k = 2", "k + j = 1", "k / 2 = 1", "k % 2 IN (1)"]
)
def test_other_arithmetic_is_outside_the_subset(text: str) -> None:
    try:
        p = parse_predicate(text)
    except PredicateSyntaxError:
        return
    assert isinstance(p, Opaque)


# -- integral ---------------------------------------------------------------------------------


def test_remainder_takes_the_dividends_sign() -> None:
    column = pa.array([7, -7, 0, None, -(2**63), 2**63 - 1], pa.int64())
    assert spark_arithmetic(column, "%", _lit(3), name="k").to_pylist() == [
        1,
        -1,
        0,
        None,
        -2,  # -9223372036854775808 = -3074457345618258602 * 3 - 2
        1,
    ]
    assert spark_arithmetic(column, "%", _lit(-3), name="k").to_pylist() == [
        1,
        -1,
        0,
        None,
        -2,
        1,
    ]
    # The least value by -1 is 0 (Java), not an overflow.
    assert spark_arithmetic(column, "%", _lit(-1), name="k").to_pylist() == [
        0,
        0,
        0,
        None,
        0,
        0,
    ]


def test_integer_results_are_int_or_bigint() -> None:
    tiny = pa.array([-128, 127, None], pa.int8())
    # tinyint + int: an int, so 127 + 100 does not overflow.
    plus = spark_arithmetic(tiny, "+", _lit(100), name="by")
    assert plus.type == pa.int32() and plus.to_pylist() == [-28, 227, None]
    # An int column with a literal past int: bigint.
    wide = spark_arithmetic(pa.array([2**31 - 1], pa.int32()), "+", _lit(2**31), name="i")
    assert wide.type == pa.int64() and wide.to_pylist() == [2**32 - 1]
    assert spark_arithmetic(tiny, "*", _lit(1000), name="by").to_pylist() == [
        -128000,
        127000,
        None,
    ]


@pytest.mark.parametrize(
    ("values", "op", "operand"),
    [
        (pa.array([2**31 - 1], pa.int32()), "+", 1),
        (pa.array([-(2**31)], pa.int32()), "-", 1),
        (pa.array([2**62], pa.int64()), "*", 2),
        (pa.array([1, None], pa.int32()), "%", 0),
    ],
)
def test_what_the_modes_answer_differently_is_refused(
    values: pa.Array, op: str, operand: int
) -> None:
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        spark_arithmetic(values, op, _lit(operand), name="x", table="/t")
    assert e.value.error_class == "DELTA_UNSUPPORTED_PREDICATE"


def test_remainder_by_zero_of_nulls_is_null() -> None:
    # Spark checks the divisor only for a non-null dividend, in both modes.
    assert spark_arithmetic(
        pa.array([None, None], pa.int32()), "%", _lit(0), name="x"
    ).to_pylist() == [
        None,
        None,
    ]


# -- floating ---------------------------------------------------------------------------------


def test_floating_arithmetic_is_ieee_in_the_columns_type() -> None:
    d = pa.array([math.nan, -0.0, 0.5, None, math.inf], pa.float64())
    got = spark_arithmetic(d, "+", _lit(1), name="d").to_pylist()
    assert math.isnan(got[0]) and got[1:] == [1.0, 1.5, None, math.inf]
    times = spark_arithmetic(d, "*", _lit(2), name="d").to_pylist()
    assert str(times[1]) == "-0.0"  # -0.0 * 2 keeps its sign
    f = spark_arithmetic(pa.array([0.1], pa.float32()), "+", _lit(1), name="f")
    assert f.type == pa.float32()
    half = spark_arithmetic(d, "-", Literal(Decimal("1.5"), "decimal"), name="d").to_pylist()
    assert half[2] == -1.0


@pytest.mark.parametrize(
    ("values", "op", "operand"),
    [
        (pa.array([1.0]), "%", _lit(2)),  # % of a double: ANSI raises on 0, not reproduced
        (pa.array([1.0], pa.float32()), "+", Literal(1.5, "float")),  # float + double: a double
        (pa.array([Decimal("1.00")], pa.decimal128(9, 2)), "+", _lit(1)),  # decimals: not here
        (pa.array([1], pa.int32()), "+", Literal(Decimal("1.5"), "decimal")),
        (pa.array(["a"]), "+", _lit(1)),
        (pa.array([1.0], pa.float32()), "+", _lit(2**60)),  # rounds twice through a double
    ],
)
def test_other_types_are_refused(values: pa.Array, op: str, operand: Literal) -> None:
    with pytest.raises(errors.UnsupportedFeatureError):
        spark_arithmetic(values, op, operand, name="x")


# -- in conditions ----------------------------------------------------------------------------


def test_conditions_over_arithmetic() -> None:
    rows = pa.table(
        {
            "k": pa.array([10, 11, -10, None, 3], pa.int64()),
            "v": pa.array([math.nan, -0.0, 0.5, 1.0, None]),
        }
    )
    assert evaluate(parse_predicate("k % 10 = 0"), rows).to_pylist() == [
        True,
        False,
        True,
        None,
        False,
    ]
    # NaN + 1 is NaN, above every number in Spark's order.
    assert evaluate(parse_predicate("v + 1 > 100"), rows).to_pylist() == [
        True,
        False,
        False,
        False,
        None,
    ]
    # NULL AND FALSE is FALSE; TRUE AND NULL is NULL.
    assert evaluate(parse_predicate("NOT (k % 10 = 0) AND v * 2 = 0"), rows).to_pylist() == [
        False,
        True,
        False,
        False,
        None,
    ]


# -- UPDATE's values --------------------------------------------------------------------------


def _compute(text: str, rows: pa.Table, target: pa.DataType) -> list[object]:
    value = SqlValue.parse(text, "/t").compute(rows, target, name="c", table="/t", zone=dt.UTC)
    if isinstance(value, pa.Scalar):
        return [value.as_py()]
    return value.to_pylist()


def test_values_are_assigned_as_spark_casts_them() -> None:
    rows = pa.table({"n": pa.array([1, None], pa.int32()), "v": pa.array([0.5, 2.0])})
    assert _compute("v + 1", rows, pa.float64()) == [1.5, 3.0]
    assert _compute("n * 3", rows, pa.int64()) == [3, None]  # int widens to bigint
    assert _compute("n", rows, pa.float64()) == [1.0, None]  # int into double
    assert _compute("7", rows, pa.int8()) == [7]
    assert _compute("'done'", rows, pa.string()) == ["done"]
    assert _compute("NULL", rows, pa.int32()) == [None]
    assert _compute("1.25", rows, pa.decimal128(5, 2)) == [Decimal("1.25")]


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("300", pa.int8()),  # out of range: ANSI raises, the legacy mode wraps
        ("1.5", pa.int32()),  # a decimal into an int rounds one way or raises
        ("v", pa.float32()),  # double into float
        ("n + 1", pa.int8()),  # int into tinyint
        ("'1'", pa.int32()),  # text into a number
        ("1.255", pa.decimal128(5, 2)),  # rounds
        ("length(s)", pa.int32()),
    ],
)
def test_values_outside_the_subset_are_refused(text: str, target: pa.DataType) -> None:
    rows = pa.table({"n": pa.array([1], pa.int32()), "v": pa.array([0.5])})
    with pytest.raises(errors.UnsupportedFeatureError):
        _compute(text, rows, target)
