"""Skipping never drops a file holding a row Spark selects, and the Python evaluator selects the
rows Spark selects, for the values and coercions where the two are easy to get wrong: NaN (the
greatest double, equal to itself), -0.0 (equal to 0.0), NULL, truncated string maxima, float32
columns, literals of another type.

Expected answers are Spark's. The facts below were checked once with Spark 4.1 (``spark.sql``,
ANSI on, and off as in Spark 3.5), and are written here as inputs and answers:

* ``-0.0 = 0``, ``NaN = NaN``, ``NaN > 5``, ``NaN > +inf``, ``NaN BETWEEN 0 AND NaN`` are true;
  ``NaN < 5`` false; ``NOT (NaN < 0)`` true; ``-0.0 IN (0, 1)`` true; ``NaN IN (1.0, NULL)``
  NULL; ``1 NOT IN (2, NULL)`` NULL; ``NaN NOT IN (1.0)`` true; ``-0.0 NOT IN (0)`` false.
* ``v <=> 0`` is true for -0.0, false for NaN and NULL; ``NULL <=> NULL`` true.
* ``i = 6.5`` false for i = 6 and 7; ``i > 6.5`` true for 7 only.
* ``i = '6'`` and ``i = ' 6 '`` true for 6 (both modes); ``i = '6.5'``: CAST_INVALID_INPUT under
  ANSI, true for 6 in Spark 3.5.
* a string column against a number is cast to a number: ``'1.0' = 1`` true in 3.5 (ANSI:
  error), ``'10.5' > 10`` false in 3.5, ``'1.50' = 1.5`` true in both.
* a float column against an integer: ``CAST(16777216 AS FLOAT) = 16777217`` false under ANSI
  (double), true in 3.5 (float); against a decimal or double, double: ``CAST(0.1 AS FLOAT) >
  0.1`` true, ``= 0.1`` false, ``= 0.1F`` true.
* ``d = 'NaN'`` true for a NaN double, ``d > 'Infinity'`` true for NaN.
* ``DATE'2024-01-03' = '2024-1-3'`` true; ``= '20240103'`` error (ANSI) or NULL.
* a timestamp_ntz column against ``TIMESTAMP '2024-01-03 10:00:00+02:00'`` (session UTC) matches
  08:00; against the text ``'2024-01-03 10:00:00+02:00'`` matches 10:00 (the offset is ignored).
* ``'ä' < 'b'`` false, ``'\\uffff' < '😀'`` true: strings compare by UTF-8 bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltalog import errors
from deltalog.scan.coercion import UNKNOWN, coerce
from deltalog.scan.predicate import Literal, parse_predicate
from deltalog.scan.row_filter import evaluate
from deltalog.scan.skipping import files_matching
from deltalog.schema import PrimitiveType, StructField, StructType
from deltalog.write.stats import _truncate_max, file_stats

NAN = float("nan")
INF = float("inf")


def _files(
    stats: list[str | None], partitions: list[dict[str, str | None]] | None = None
) -> pa.Table:
    """``add`` rows as the snapshot gives them: path, partition values, stats JSON."""
    n = len(stats)
    values = partitions or [{} for _ in range(n)]
    return pa.table(
        {
            "path": [f"f{i}.parquet" for i in range(n)],
            "partitionValues": pa.array(
                [list(v.items()) for v in values], pa.map_(pa.string(), pa.string())
            ),
            "stats": pa.array(stats, pa.string()),
        }
    )


def _kept(
    schema: StructType, files: pa.Table, where: str, partitions: tuple[str, ...] = ()
) -> list[int]:
    kept = files_matching(files, schema, partitions, parse_predicate(where), time_zone="UTC")
    return [int(p[1:].split(".")[0]) for p in kept["path"].to_pylist()]


def _schema(type_name: str, **metadata: Any) -> StructType:
    return StructType((StructField("v", PrimitiveType(type_name), True, metadata),))


def _stats(lo: Any, hi: Any, nulls: int = 0, records: int = 2) -> str:
    return json.dumps(
        {
            "numRecords": records,
            "minValues": {"v": lo},
            "maxValues": {"v": hi},
            "nullCount": {"v": nulls},
        }
    )


# -- literals as Spark coerces them ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "column", "expected"),
    [
        (Literal("6", "string"), pa.int64(), 6),  # i = '6' (both modes)
        (Literal(" 6 ", "string"), pa.int32(), 6),
        (Literal("6.5", "string"), pa.int64(), UNKNOWN),  # ANSI error; 3.5 reads 6
        (Literal(1, "int"), pa.string(), UNKNOWN),  # '1.0' = 1 in 3.5
        (Literal(16777217, "int"), pa.float32(), UNKNOWN),  # float in 3.5, double under ANSI
        (Literal(16777216, "int"), pa.float32(), 16777216.0),
        (Literal("NaN", "string"), pa.float64(), "nan"),  # d = 'NaN'
        (Literal("Infinity", "string"), pa.float64(), INF),
        (Literal("yes", "string"), pa.bool_(), True),  # true = 'yes'
        (Literal(1, "int"), pa.bool_(), UNKNOWN),  # ANSI: type mismatch
        (Literal("2024-1-3", "string"), pa.date32(), dt.date(2024, 1, 3)),
        (Literal("20240103", "string"), pa.date32(), UNKNOWN),  # ANSI error / NULL
        (Literal(300, "int"), pa.int8(), UNKNOWN),
    ],
)
def test_literals_are_coerced_as_spark_does(
    literal: Literal, column: pa.DataType, expected: Any
) -> None:
    got = coerce(literal, column, dt.UTC)
    if expected is UNKNOWN:
        assert got is UNKNOWN
    elif expected == "nan":
        assert math.isnan(got.as_py())
    else:
        assert got.as_py() == expected


def test_timestamp_ntz_against_an_offset() -> None:
    ntz = pa.timestamp("us")
    typed = parse_predicate("v = TIMESTAMP '2024-01-03 10:00:00+02:00'")
    text = parse_predicate("v = '2024-01-03 10:00:00+02:00'")
    assert coerce(typed.literal, ntz, dt.UTC).as_py() == dt.datetime(2024, 1, 3, 8)
    assert coerce(text.literal, ntz, dt.UTC).as_py() == dt.datetime(2024, 1, 3, 10)


# -- skipping on statistics and partitions -----------------------------------------------------


def test_float_statistics_keep_nan_and_negative_zero_rows() -> None:
    schema = _schema("double")
    files = _files(
        [
            _stats(-0.0, -0.0),  # rows [-0.0, -0.0]
            _stats(1.0, "NaN"),  # delta-spark: rows [1.0, NaN] give max NaN, written as a string
            _stats("NaN", "NaN"),  # rows [NaN, NaN]: NaN bounds decide nothing (kept)
            _stats(1.0, None),  # our writer: NaN present, max left out
            _stats(-5.0, 2.0),  # rows [-5.0, 2.0]
        ]
    )
    assert _kept(schema, files, "v = 0") == [0, 2, 4]  # -0.0 = 0
    assert _kept(schema, files, "v > 5") == [0, 1, 2, 3, 4]  # NaN > 5: floats keep on '>'
    assert _kept(schema, files, "v < 0") == [2, 4]  # -0.0 < 0 false; NaN < 0 false
    assert _kept(schema, files, "v = 'NaN'") == [0, 1, 2, 3, 4]  # NaN is in no statistic
    assert _kept(schema, files, "v < 'NaN'") == [0, 1, 2, 3, 4]  # every number is below NaN
    assert _kept(schema, files, "v IN (0, 1)") == [0, 1, 2, 3, 4]
    assert _kept(schema, files, "v IN (0, -1)") == [0, 2, 4]
    assert _kept(schema, files, "NOT (v < 0)") == [0, 1, 2, 3, 4]


def test_float32_statistics_compare_in_double() -> None:
    """A float column holding 0.1f (0.10000000149...): ``v > 0.1`` is true in Spark."""
    schema = _schema("float")
    files = _files([_stats(0.1, 0.1)])
    assert _kept(schema, files, "v > 0.1D") == [0]
    assert _kept(schema, files, "v > 0.1") == [0]
    assert _kept(schema, files, "v = 0.1F") == [0]
    assert _kept(schema, files, "v <= 0.1") == []  # 0.1f widened is above 0.1
    assert _kept(schema, files, "v = CAST(16777217 AS FLOAT)") == []  # float 16777216
    assert _kept(schema, files, "v = 16777217") == [0]  # 3.5 compares in float: kept


def test_float_partitions_use_equality_not_hashing() -> None:
    schema = _schema("double")
    files = _files([None] * 3, [{"v": "-0.0"}, {"v": "NaN"}, {"v": "1.0"}])
    assert _kept(schema, files, "v IN (0, 2)", ("v",)) == [0, 1]
    assert _kept(schema, files, "v = 0", ("v",)) == [0, 1]
    assert _kept(schema, files, "v NOT IN (0)", ("v",)) == [1, 2]  # -0.0 NOT IN (0) is false
    assert _kept(schema, files, "v < 'NaN'", ("v",)) == [0, 1, 2]
    assert _kept(schema, files, "v <=> 0", ("v",)) == [0, 1]
    assert _kept(schema, files, "NOT (v <=> 1)", ("v",)) == [0, 1]


def test_truncated_string_maxima_are_not_trusted() -> None:
    """A writer that cuts the max to a 32-character prefix (no tie-breaker) and an old
    delta-spark one that appends U+FFFF (below a supplementary character) both leave a max
    below the real one."""
    schema = _schema("string")
    real = "a" * 32 + "zzz"
    smiley = "a" * 32 + "😀"
    files = _files(
        [
            _stats("a" * 32, "a" * 32, records=1),  # bare prefix of `real`
            _stats("a" * 32, "a" * 32 + "\uffff", records=1),  # old tie-breaker, row `smiley`
            _stats("b", "c", records=1),
        ]
    )
    assert _kept(schema, files, f"v = '{real}'") == [0, 1]
    assert _kept(schema, files, f"v >= '{smiley}'") == [0, 1, 2]
    # Any max may be a cut one: only its prefix less the last character bounds the file.
    assert _kept(schema, files, "v > 'd'") == [2]
    assert _kept(schema, files, "v > 'b'") == [2]
    assert _kept(schema, files, "v < 'b'") == [0, 1]


def test_short_string_maxima_bound_their_file_where_the_prefix_is_known() -> None:
    """A maximum shorter than the table's statistics prefix (32 by default, and delta-rs's
    fixed cut) was not cut: it bounds its file exactly. A 32-character one may still be cut."""
    schema = _schema("string")
    files = _files(
        [
            _stats("AR", "UK", records=1),
            _stats("a" * 32, "a" * 32, records=1),  # may be a bare prefix of a longer max
        ]
    )

    def kept(where: str, prefix: int) -> list[int]:
        parsed = parse_predicate(where)
        out = files_matching(files, schema, (), parsed, string_prefix_length=prefix)
        return [int(p[1:].split(".")[0]) for p in out["path"].to_pylist()]

    assert kept("v = 'US'", 32) == []
    assert kept("v = 'US'", 0) == [0]  # the prefix is unknown: "UK" may be a cut "UKZ..."
    assert kept("v = 'UK'", 32) == [0]
    assert kept("v > '" + "a" * 32 + "'", 32) == [1]
    assert kept("v = 'UKA'", 2) == [0]  # a 2-character cut: "UK" may be "UKA"


def test_char_and_collated_columns_keep_every_file() -> None:
    """CHAR(n) pads the literal; UTF8_LCASE equates cases: binary bounds decide neither."""
    files = _files([_stats("ab   ", "ab   ", records=1)])
    char = _schema("string", __CHAR_VARCHAR_TYPE_STRING="char(5)")
    lcase = _schema("string", __COLLATIONS={"v": "spark.UTF8_LCASE"})
    assert _kept(char, files, "v = 'ab'") == [0]
    assert _kept(lcase, files, "v = 'AB   '") == [0]


def test_literals_spark_coerces_differently_keep_every_file() -> None:
    int_files = _files([_stats(6, 6, records=1), _stats(7, 7, records=1)])
    ints = _schema("long")
    assert _kept(ints, int_files, "v = '6.5'") == [0, 1]  # 3.5: 6 matches
    assert _kept(ints, int_files, "v = 6.5") == [0, 1]  # no row; left to Spark
    assert _kept(ints, int_files, "v = '6'") == [0]
    assert _kept(ints, int_files, "v = 6.0") == [0]
    strings = _schema("string")
    text_files = _files([_stats("1.0", "1.0", records=1), _stats("9", "9", records=1)])
    assert _kept(strings, text_files, "v = 1") == [0, 1]  # '1.0' = 1 in Spark 3.5
    assert _kept(strings, text_files, "v > 10") == [0, 1]


# -- the Python evaluator -----------------------------------------------------------------

ROWS = pa.table({"v": pa.array([-0.0, 0.0, NAN, INF, -INF, 1.5, None], pa.float64())})


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("v = 0", [True, True, False, False, False, False, None]),
        ("v > 5", [False, False, True, True, False, False, None]),
        ("v >= 'NaN'", [False, False, True, False, False, False, None]),
        ("v < 'NaN'", [True, True, False, True, True, True, None]),
        ("v = 'NaN'", [False, False, True, False, False, False, None]),
        ("NOT (v < 0)", [True, True, True, True, False, True, None]),
        ("v IN (0, 1.5)", [True, True, False, False, False, True, None]),
        ("v IN (0, NULL)", [True, True, None, None, None, None, None]),
        ("v NOT IN (0, NULL)", [False, False, None, None, None, None, None]),
        ("v NOT IN (0)", [False, False, True, True, True, True, None]),
        ("v <=> 0", [True, True, False, False, False, False, False]),
        ("NOT (v <=> 0)", [False, False, True, True, True, True, True]),
        ("v <=> NULL", [False] * 6 + [True]),
        ("v BETWEEN 0 AND 'NaN'", [True, True, True, True, False, True, None]),
        ("v > 0 OR v IS NULL", [False, False, True, True, False, True, True]),
        ("v > 0 AND v = NULL", [False, False, None, None, False, None, None]),
    ],
)
def test_evaluate_follows_spark(where: str, expected: list[bool | None]) -> None:
    assert evaluate(parse_predicate(where), ROWS).to_pylist() == expected


def test_evaluate_float32_and_decimals_exactly() -> None:
    rows = pa.table(
        {
            "f": pa.array([0.1, 16777216.0], pa.float32()),
            "d": pa.array([pa.scalar(1, pa.decimal128(10, 2)).as_py(), None], pa.decimal128(10, 2)),
        }
    )
    assert evaluate(parse_predicate("f > 0.1"), rows).to_pylist() == [True, True]
    assert evaluate(parse_predicate("f = 0.1"), rows).to_pylist() == [False, False]
    assert evaluate(parse_predicate("f = 0.1F"), rows).to_pylist() == [True, False]
    assert evaluate(parse_predicate("d = 1"), rows).to_pylist() == [True, None]
    assert evaluate(parse_predicate("d < 1.01"), rows).to_pylist() == [True, None]


@pytest.mark.parametrize(
    ("column", "where"),
    [
        (pa.array(["1.0"]), "v = 1"),  # '1.0' = 1 is true in 3.5, an error under ANSI
        (pa.array([6], pa.int64()), "v = 6.5"),
        (pa.array([6], pa.int64()), "v > '6.5'"),
        (pa.array([16777216.0], pa.float32()), "v = 16777217"),
        (pa.array([True]), "v = 1"),
        (pa.array([dt.date(2024, 1, 3)]), "v = '20240103'"),
        (pa.array([1], pa.decimal128(10, 2)), "v = 0.1D"),
    ],
)
def test_evaluate_refuses_what_it_cannot_do_as_spark(column: pa.Array, where: str) -> None:
    with pytest.raises(errors.UnsupportedFeatureError) as raised:
        evaluate(parse_predicate(where), pa.table({"v": column}), table="/t")
    assert "DELTA_UNSUPPORTED_PREDICATE" in str(raised.value)
    assert "'v'" in str(raised.value)


# -- property: skipping keeps every file a reference evaluation of Spark selects -----------------

VALUES = st.sampled_from([NAN, -0.0, 0.0, INF, -INF, 1.0, -1.5, 5.0, None])
LITERALS = st.sampled_from(
    ["0", "-0.0", "1", "5", "-1.5", "'NaN'", "'Infinity'", "'-Infinity'", "NULL"]
)
OPS = st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"])


def _spark_value(text: str) -> float | None:
    return None if text == "NULL" else float(text.strip("'"))


def _order(x: float) -> tuple[int, float]:
    """Spark's total order of doubles: NaN above +inf and equal to itself; -0.0 = 0.0."""
    return (1, 0.0) if math.isnan(x) else (0, x + 0.0)


def _reference(op: str, x: float | None, lit: float | None) -> bool | None:
    if op == "<=>":
        if x is None or lit is None:
            return x is None and lit is None
        return _order(x) == _order(lit)
    if x is None or lit is None:
        return None
    a, b = _order(x), _order(lit)
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _condition(negated: bool, op: str, lit: str) -> str:
    text = f"v {op} {lit}"
    return f"NOT ({text})" if negated else text


def _spark_delta_stats(rows: list[float | None]) -> str:
    """Statistics as delta-spark writes them: Spark's min/max (NaN greatest), NaN as "NaN"."""
    present = [r for r in rows if r is not None]
    lo = min(present, key=_order) if present else None
    hi = max(present, key=_order) if present else None
    shown = [None if v is None else ("NaN" if math.isnan(v) else v) for v in (lo, hi)]
    shown = [("Infinity" if v == INF else "-Infinity" if v == -INF else v) for v in shown]
    return _stats(shown[0], shown[1], rows.count(None), len(rows))


@settings(max_examples=300, deadline=None)
@given(
    files=st.lists(st.lists(VALUES, min_size=1, max_size=4), min_size=1, max_size=4),
    negated=st.booleans(),
    op=OPS,
    lit=LITERALS,
    spark_stats=st.booleans(),
    partitioned=st.booleans(),
)
def test_skipping_never_drops_a_matching_file(
    files: list[list[float | None]],
    negated: bool,
    op: str,
    lit: str,
    spark_stats: bool,
    partitioned: bool,
) -> None:
    schema = _schema("double")
    if partitioned:
        files = [[rows[0]] * len(rows) for rows in files]  # one partition value per file
        table = _files(
            [None] * len(files),
            [{"v": None if r[0] is None else repr(r[0]).replace("inf", "Infinity")} for r in files],
        )
    else:
        stats = [
            _spark_delta_stats(rows)
            if spark_stats
            else file_stats(pa.table({"v": pa.array(rows, pa.float64())}), schema)
            for rows in files
        ]
        table = _files(stats)
    where = _condition(negated, op, lit)
    kept = set(_kept(schema, table, where, ("v",) if partitioned else ()))
    for i, rows in enumerate(files):
        answers = [_reference(op, x, _spark_value(lit)) for x in rows]
        if negated:
            answers = [None if a is None else not a for a in answers]
        if any(a is True for a in answers):
            assert i in kept, f"{where}: file {rows} dropped"
    # The Python evaluator gives the reference answers exactly.
    flat = [x for rows in files for x in rows]
    expected = [_reference(op, x, _spark_value(lit)) for x in flat]
    if negated:
        expected = [None if a is None else not a for a in expected]
    got = evaluate(parse_predicate(where), pa.table({"v": pa.array(flat, pa.float64())}))
    assert got.to_pylist() == expected, where


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.text(alphabet="ab\x7f\uffff😀", min_size=0, max_size=6), min_size=1, max_size=3
    ),
    literal=st.text(alphabet="ab\x7f\uffff😀", min_size=0, max_size=7),
    op=st.sampled_from(["=", "<", "<=", ">", ">="]),
    prefix=st.integers(1, 4),
    writer=st.sampled_from(["delta-spark", "bare prefix", "old tie-breaker"]),
)
def test_truncated_string_statistics_never_drop_a_match(
    rows: list[str], literal: str, op: str, prefix: int, writer: str
) -> None:
    """Strings compare by UTF-8 bytes (code points); the max is cut to ``prefix``."""
    lo, hi = min(rows, key=lambda s: s.encode()), max(rows, key=lambda s: s.encode())
    if writer == "delta-spark":
        cut = _truncate_max(hi, prefix)
    elif writer == "bare prefix":
        cut = hi[:prefix]
    else:
        cut = hi if len(hi) <= prefix else hi[:prefix] + "\uffff"
    table = _files([_stats(lo[:prefix], cut, records=len(rows))])
    where = f"v {op} '{literal}'"
    kept = _kept(_schema("string"), table, where)
    b = literal.encode()
    ops = {
        "=": lambda a: a == b,
        "<": lambda a: a < b,
        "<=": lambda a: a <= b,
        ">": lambda a: a > b,
        ">=": lambda a: a >= b,
    }
    if any(ops[op](r.encode()) for r in rows):
        assert kept == [0], f"{where}: {rows} (stats {lo[:prefix]!r}..{cut!r}) dropped"
