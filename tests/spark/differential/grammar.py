"""The rows and the grammar of the differential suite: Spark SQL conditions over every Delta
primitive type, generated from a seeded ``random.Random``.

Everything here is plain Python (no Spark): :data:`COLUMNS` is the table's schema,
:func:`rows` the rows every table holds (NULL, NaN, ±0.0, ±inf, integral bounds, empty,
non-ASCII and long strings, far past and far future times, microseconds), and
:func:`conditions` the conditions a seed generates. A condition is only text: what it means
(rows, or an error) is asked of Spark itself, never decided here.

The grammar deliberately produces conditions Spark refuses (mismatched types, malformed
literals): deltalog must refuse them the same way. It produces nothing Spark cannot evaluate
deterministically (no ``rand()``, ``current_*()``, ``uuid()``).
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from decimal import Decimal

# -- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    family: str  # int | frac | decimal | string | bool | date | ts | binary
    values: tuple[object, ...]  # the values rows take (None: NULL), each at least once


_INF, _NAN = float("inf"), float("nan")
_UTC = dt.UTC
_LONG = "x" * 32 + "y"  # longer than the 32 characters of string statistics
_LONGER = "x" * 40
# The earliest timestamp of the rows: where Spark's range starts (as a partition value it was
# once written unpadded, ``1-01-01T00:00:00.000000Z``, and made the table unreadable).
FAR_PAST = "0001-01-01 00:00:00"

COLUMNS: tuple[Column, ...] = (
    Column("by", "tinyint", "int", (-128, 127, 0, -1, 42, None)),
    Column("sh", "smallint", "int", (-32768, 32767, 0, 7, None)),
    Column("i", "int", "int", (-2147483648, 2147483647, 0, -7, 100, None)),
    Column("l", "bigint", "int", (-(2**63), 2**63 - 1, 0, 5, -5, None)),
    Column("f", "float", "frac", (_NAN, -0.0, 0.0, _INF, -_INF, 1.5, 0.1, -2.25, None)),
    Column(
        "d", "double", "frac", (_NAN, -0.0, 0.0, _INF, -_INF, 1.5, 0.1, -2.5, 1e308, 5e-324, None)
    ),
    Column(
        "dc",
        "decimal(9,2)",
        "decimal",
        tuple(
            None if v is None else Decimal(v)
            for v in ("-9999999.99", "9999999.99", "0.00", "1.50", "-0.01", "123.45", None)
        ),
    ),
    Column(
        "dw",
        "decimal(38,10)",
        "decimal",
        tuple(
            None if v is None else Decimal(v)
            for v in (
                "9999999999999999999999999999.9999999999",
                "-9999999999999999999999999999.9999999999",
                "0E-10",
                "1.5000000000",
                "0.0000000001",
                None,
            )
        ),
    ),
    Column(
        "s",
        "string",
        "string",
        (
            "",
            "a",
            "A",
            "abc",
            "é",
            "日本",
            "😀",
            " ",
            "10",
            "-1.5",
            "true",
            "2024-01-01",
            _LONG,
            _LONGER,
            "a%b",
            "zzz",
            None,
        ),
    ),
    Column("bo", "boolean", "bool", (True, False, None)),
    Column(
        "dt",
        "date",
        "date",
        tuple(
            None if v is None else dt.date.fromisoformat(v)
            for v in (
                "0001-01-01",
                "1969-12-31",
                "1970-01-01",
                "2024-02-29",
                "9999-12-31",
                "1582-10-10",
                None,
            )
        ),
    ),
    Column(
        "ts",
        "timestamp",
        "ts",
        tuple(
            None if v is None else dt.datetime.fromisoformat(v).replace(tzinfo=_UTC)
            for v in (
                FAR_PAST,
                "1969-12-31 23:59:59.999999",
                "1970-01-01 00:00:00",
                "2024-02-29 12:34:56.123456",
                "2024-02-29 12:34:56.123",
                "9999-12-31 23:59:59.999999",
                "1900-01-01 00:00:00.000001",
                None,
            )
        ),
    ),
    Column(
        "tn",
        "timestamp_ntz",
        "ts",
        tuple(
            None if v is None else dt.datetime.fromisoformat(v)
            for v in (
                FAR_PAST,
                "1969-12-31 23:59:59.999999",
                "1970-01-01 00:00:00",
                "2024-02-29 12:34:56.123456",
                "9999-12-31 23:59:59.999999",
                "1900-01-01 00:00:00.000001",
                None,
            )
        ),
    ),
    Column("bi", "binary", "binary", (b"", b"\x00", b"\xff", b"abc", None)),
)
BY_NAME = {c.name: c for c in COLUMNS}
# Partition columns of the partitioned layout: every column under test but binary.
PARTITION_COLUMNS = tuple(c.name for c in COLUMNS if c.family != "binary")
# id: unique per row, compared in results; mark: what UPDATE and MERGE set.
SCHEMA = "id bigint, " + ", ".join(f"{c.name} {c.sql_type}" for c in COLUMNS) + ", mark int"
NUM_ROWS = 36
ROW_SEED = 20240229  # the rows are the same for every seed of conditions


def rows(layout: str = "data") -> list[tuple[object, ...]]:
    """The rows (``id``, every column of :data:`COLUMNS`, ``mark`` = 0): row 0 is all NULL,
    then every value of every column appears at least once, in a seeded order.

    For the ``partitioned`` layout, the rows as Delta stores them: an empty string partition
    value is NULL (as in delta-spark, whose partition values cannot tell them apart)."""
    rng = random.Random(ROW_SEED)
    columns = []
    for c in COLUMNS:
        pool = [c.values[k % len(c.values)] for k in range(NUM_ROWS - 1)]
        rng.shuffle(pool)
        if layout == "partitioned" and c.name in PARTITION_COLUMNS:
            pool = [None if v == "" else v for v in pool]
        columns.append([None, *pool])
    return [(n, *(col[n] for col in columns), 0) for n in range(NUM_ROWS)]


# Files of the unpartitioned layout, by row count (single-row files have exact statistics);
# they sum to NUM_ROWS.
FILE_SIZES = (1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 10)
assert sum(FILE_SIZES) == NUM_ROWS


# -- literals -------------------------------------------------------------------------------------


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Literals by family: of the column's own type, then of types Spark coerces (strings, other
# numeric kinds, typed literals), then a few that Spark refuses or cannot cast (errors).
LITERALS: dict[str, tuple[str, ...]] = {
    "int": (
        "0",
        "-1",
        "7",
        "42",
        "100",
        "127",
        "128",
        "-129",
        "32767",
        "2147483647",
        "-2147483648",
        "9223372036854775807",
        "-9223372036854775808",
        "10L",
        "7S",
        "42Y",
        "'7'",
        "' 42 '",
        "'100'",
        "1.5",
        "0.0",
        "42.0",
        "1.5D",
        "2BD",
        "-0.0D",
        "1E2",
        "'abc'",
        "'1.5'",
    ),
    "frac": (
        "0",
        "0.0",
        "-0.0",
        "0.0D",
        "-0.0D",
        "1.5",
        "0.1",
        "0.1D",
        "0.1F",
        "1.5F",
        "-2.25",
        "1E308",
        "1e-300",
        "3.4028235E38",
        "'NaN'",
        "CAST('NaN' AS DOUBLE)",
        "'Infinity'",
        "'-Infinity'",
        "CAST('-inf' AS DOUBLE)",
        "'1.5'",
        "'0.1'",
        "2BD",
        "'x'",
        "127",
    ),
    "decimal": (
        "0",
        "1.5",
        "1.50",
        "1.500",
        "1.505",
        "-0.01",
        "123.45",
        "2BD",
        "1.5D",
        "9999999.99",
        "10000000",
        "-9999999.99",
        "0.0000000001",
        "'1.5'",
        "'123.45'",
        "100",
        "1E1",
        "99999999999999999999999999999",
        "'abc'",
    ),
    "string": (
        "''",
        "'a'",
        "'A'",
        "'abc'",
        "'ab'",
        "'é'",
        "'日本'",
        "'😀'",
        "' '",
        "'10'",
        "'2'",
        "'zzz'",
        "'zz'",
        _q(_LONG),
        _q(_LONGER),
        _q("x" * 32),
        _q("x" * 33),
        "'true'",
        "'2024-01-01'",
        "'a%b'",
        "10",
        "-1.5",
        "true",
        "DATE'2024-01-01'",
    ),
    "bool": ("true", "false", "'true'", "'false'", "'y'", "'0'", "'maybe'", "1", "NULL"),
    "date": (
        "DATE'2024-02-29'",
        "DATE'1970-01-01'",
        "DATE'1969-12-31'",
        "DATE'0001-01-01'",
        "DATE'9999-12-31'",
        "'2024-02-29'",
        "'1969-12-31'",
        "'2024-02-29 10:00:00'",
        "TIMESTAMP'2024-02-29 00:00:00'",
        "TIMESTAMP'2024-02-28 23:59:59.999999'",
        "TIMESTAMP_NTZ'1970-01-01 00:00:00'",
        "'2024-13-01'",
        "'not a date'",
        "20240229",
        "DATE'1582-10-10'",
        "'1582-10-05'",
    ),
    "ts": (
        "TIMESTAMP'2024-02-29 12:34:56.123456'",
        "TIMESTAMP'2024-02-29 12:34:56.123'",
        "TIMESTAMP'2024-02-29 12:34:56.1234'",
        "TIMESTAMP'1970-01-01 00:00:00'",
        "TIMESTAMP'1969-12-31 23:59:59.999999'",
        "TIMESTAMP'0001-01-01 00:00:00'",
        "TIMESTAMP'1000-01-01 00:00:00'",
        "'1000-01-01'",
        "TIMESTAMP'9999-12-31 23:59:59.999999'",
        "TIMESTAMP_NTZ'2024-02-29 12:34:56.123456'",
        "TIMESTAMP_LTZ'1970-01-01 00:00:00'",
        "'2024-02-29 12:34:56.123456'",
        "'2024-02-29 12:34:56'",
        "'2024-02-29'",
        "'1969-12-31 23:59:59.999999'",
        "'2024-02-29T13:34:56.123456+01:00'",
        "DATE'2024-02-29'",
        "DATE'1970-01-01'",
        "'1900-01-01 00:00:00.000001'",
        "'garbage'",
        "0",
    ),
    "binary": ("X''", "X'00'", "X'FF'", "X'616263'", "X'6162'", "'abc'", "''", "1"),
}
# Families whose values compare with each other without an error (string literals aside).
COMPATIBLE = {
    "int": ("int", "frac", "decimal"),
    "frac": ("int", "frac", "decimal"),
    "decimal": ("int", "frac", "decimal"),
    "string": ("string",),
    "bool": ("bool",),
    "date": ("date", "ts"),
    "ts": ("date", "ts"),
    "binary": ("binary",),
}
COMPARISONS = ("=", "!=", "<>", "<", "<=", ">", ">=", "<=>", "==")


def sql_value(value: object, sql_type: str) -> str:
    """``value`` as a SQL literal of ``sql_type`` (the rows as an inline ``VALUES`` table)."""
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):  # through text: NaN, ±inf and -0.0 keep what they are
        text = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(repr(value), repr(value))
        return f"CAST('{text}' AS {sql_type})"
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return f"TIMESTAMP_NTZ'{value.isoformat(sep=' ')}'"
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, str):
        return _q(value)
    return f"CAST('{value}' AS {sql_type})"  # integers, decimals


# -- conditions -----------------------------------------------------------------------------------


class Grammar:
    """Conditions from one seed. ``columns`` limits the columns a condition names (all of
    :data:`COLUMNS` by default); ``id`` also appears, rarely, so that conditions of the
    partitioned layout sometimes mix partition and data columns."""

    def __init__(self, seed: int, columns: tuple[str, ...] | None = None) -> None:
        self.rng = random.Random(seed)
        self.columns = [BY_NAME[n] for n in columns] if columns else list(COLUMNS)

    def conditions(self, n: int) -> list[str]:
        """``n`` distinct conditions."""
        out: dict[str, None] = {}
        while len(out) < n:
            out.setdefault(self.condition(), None)
        return list(out)

    def condition(self, depth: int = 0) -> str:
        r = self.rng.random()
        if depth < 2 and r < 0.12:
            return f"NOT ({self.condition(depth + 1)})"
        if depth < 2 and r < 0.32:
            op = self.rng.choice(("AND", "OR"))
            return f"({self.condition(depth + 1)}) {op} ({self.condition(depth + 1)})"
        return self.atom()

    # - atoms -

    def atom(self) -> str:
        kind = self.rng.choices(
            [
                "compare",
                "columns",
                "in",
                "between",
                "null",
                "bool",
                "like",
                "function",
                "arithmetic",
                "constant",
            ],
            weights=[30, 6, 10, 6, 7, 3, 4, 14, 8, 1],
        )[0]
        return getattr(self, f"_{kind}")()

    def _column(self, *families: str) -> Column:
        pool = [c for c in self.columns if not families or c.family in families]
        return self.rng.choice(pool or self.columns)

    def _literal(self, family: str) -> str:
        """A literal for a value of ``family``: mostly of a compatible family (string literals
        among them), sometimes of any family, sometimes NULL."""
        r = self.rng.random()
        if r < 0.04:
            return "NULL"
        if r < 0.10:
            family = self.rng.choice(list(LITERALS))
        elif r < 0.25:
            family = self.rng.choice(COMPATIBLE[family])
        return self.rng.choice(LITERALS[family])

    def _compare(self) -> str:
        c = self._column()
        op, lit = self.rng.choice(COMPARISONS), self._literal(c.family)
        if self.rng.random() < 0.2:  # the literal on the left
            return f"{lit} {op} {c.name}"
        return f"{c.name} {op} {lit}"

    def _columns(self) -> str:
        a = self._column()
        compatible = COMPATIBLE[a.family] if self.rng.random() < 0.85 else ()
        b = self._column(*compatible)
        return f"{a.name} {self.rng.choice(COMPARISONS)} {b.name}"

    def _in(self) -> str:
        c = self._column()
        items = [self._literal(c.family) for _ in range(self.rng.randint(1, 4))]
        if self.rng.random() < 0.2:
            items.insert(self.rng.randrange(len(items) + 1), "NULL")
        negated = "NOT " if self.rng.random() < 0.4 else ""
        return f"{c.name} {negated}IN ({', '.join(items)})"

    def _between(self) -> str:
        c = self._column()
        negated = "NOT " if self.rng.random() < 0.25 else ""
        lo, hi = self._literal(c.family), self._literal(c.family)
        return f"{c.name} {negated}BETWEEN {lo} AND {hi}"

    def _null(self) -> str:
        target = self._column().name if self.rng.random() < 0.75 else self._expression()[0]
        return f"{target} IS {self.rng.choice(('', 'NOT '))}NULL"

    def _bool(self) -> str:
        c = self._column("bool")
        if c.family != "bool":
            return f"{c.name} IS NULL"
        return self.rng.choice(
            (
                c.name,
                f"NOT {c.name}",
                f"{c.name} IS TRUE",
                f"{c.name} IS NOT FALSE",
                f"{c.name} = {c.name}",
            )
        )

    def _like(self) -> str:
        c = self._column("string", "string", "string", "int")
        pattern = self.rng.choice(
            (
                "'a%'",
                "'%b'",
                "'_'",
                "''",
                "'%'",
                "'x%y'",
                "'a\\\\%b'",
                "'日%'",
                "'1%'",
                "'%é%'",
                "'A%'",
            )
        )
        negated = "NOT " if self.rng.random() < 0.3 else ""
        return f"{c.name} {negated}LIKE {pattern}"

    def _function(self) -> str:
        expression, family = self._expression()
        op = self.rng.choice(COMPARISONS)
        return f"{expression} {op} {self._literal(family)}"

    def _arithmetic(self) -> str:
        c = self._column("int", "frac", "decimal")
        op = self.rng.choice("+-*/%")
        if self.rng.random() < 0.3:
            other = self._column(*COMPATIBLE[c.family]).name
        else:
            other = self.rng.choice(
                ("1", "2", "0", "1.5", "0.5D", "-1", "'2'", "100", "3", "-3", "2147483647", "7L")
            )
        family = "frac" if op == "/" or "D" in other else c.family
        return f"{c.name} {op} {other} {self.rng.choice(COMPARISONS)} {self._literal(family)}"

    def _constant(self) -> str:
        return self.rng.choice(
            ("TRUE", "FALSE", "NULL", "1 = 1", "1 = 0", "NULL = NULL", "'a' < 'b'", "NOT NULL")
        )

    def _expression(self) -> tuple[str, str]:
        """A function call or cast over a column, and the family of its result."""
        c = self._column()
        name = c.name
        choices: list[tuple[str, str]] = [
            (f"coalesce({name}, {self._literal(c.family)})", c.family),
            (f"CAST({name} AS STRING)", "string"),
        ]
        if c.family in ("int", "frac", "decimal"):
            choices += [
                (f"abs({name})", c.family),
                (f"CAST({name} AS INT)", "int"),
                (f"CAST({name} AS DOUBLE)", "frac"),
                (f"-{name}", c.family),
                (f"CAST({name} AS DECIMAL(12, 3))", "decimal"),
            ]
        if c.family == "string":
            choices += [
                (f"lower({name})", "string"),
                (f"upper({name})", "string"),
                (f"length({name})", "int"),
                (f"CAST({name} AS INT)", "int"),
                (f"CAST({name} AS DOUBLE)", "frac"),
                (f"CAST({name} AS DATE)", "date"),
                (f"substring({name}, 1, 2)", "string"),
                (f"trim({name})", "string"),
            ]
        if c.family in ("date", "ts"):
            choices += [
                (f"year({name})", "int"),
                (f"month({name})", "int"),
                (f"CAST({name} AS DATE)", "date"),
                (f"CAST({name} AS TIMESTAMP)", "ts"),
                (f"dayofmonth({name})", "int"),
            ]
        if c.family == "bool":
            choices += [(f"CAST({name} AS INT)", "int"), (f"NOT {name}", "bool")]
        if c.family == "binary":
            choices += [(f"length({name})", "int"), (f"CAST({name} AS STRING)", "string")]
        return self.rng.choice(choices)


def conditions(seed: int, n: int, columns: tuple[str, ...] | None = None) -> list[str]:
    """``n`` distinct conditions of ``seed`` (the same list for the same arguments)."""
    return Grammar(seed, columns).conditions(n)


if __name__ == "__main__":  # a look at a seed: python -m tests.spark.differential.grammar 1
    import sys

    for text in conditions(int(sys.argv[1]) if len(sys.argv) > 1 else 1, 40):
        print(text)
