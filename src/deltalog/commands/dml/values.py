"""UPDATE's new values written as SQL (``"v + 1"``, ``"'done'"``, ``"other_column"``),
computed on Arrow exactly as Spark assigns them, or refused.

A value is a literal, a column, or arithmetic on a column and a literal
(:mod:`deltalog.scan.arithmetic`). Spark casts it to the assigned column's type under
``spark.sql.storeAssignmentPolicy``; only the casts whose result is the same under every policy
and mode are made here: the same type, a wider integer, an integer literal that fits, a number
into a ``double`` exactly as Spark converts it, a decimal literal that fits the column's
precision and scale, an integer column or result into a float, NULL. Anything else raises
``UnsupportedFeatureError`` (``DELTA_UNSUPPORTED_PREDICATE``), so a caller with Spark lets
Spark decide it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass

import pyarrow as pa

from deltalog import errors
from deltalog.scan.arithmetic import inexact, spark_arithmetic
from deltalog.scan.coercion import UNKNOWN, coerce
from deltalog.scan.predicate import Arithmetic, Literal, PredicateSyntaxError, parse_operand
from deltalog.scan.row_filter import find_column

_INTEGER_FAMILY = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


@dataclass(frozen=True, slots=True)
class SqlValue:
    """A new value written as SQL, parsed: a literal, a column name or arithmetic."""

    text: str
    value: Literal | str | Arithmetic

    @classmethod
    def parse(cls, text: str, table: str) -> SqlValue:
        """Raises ``UnsupportedFeatureError`` outside literals, columns and arithmetic."""
        try:
            return cls(text, parse_operand(text))
        except PredicateSyntaxError as e:
            raise _refused(f"the value {text!r} ({e})", table) from None

    def compute(
        self, rows: pa.Table, target: pa.DataType, *, name: str, table: str, zone: dt.tzinfo
    ) -> pa.Array | pa.Scalar:
        """The value for each row of ``rows`` as column ``name`` of type ``target`` takes it.

        Raises:
            UnsupportedFeatureError: Spark's cast of it to ``target`` is not reproduced here.
            InvalidArgumentError: it names a column ``rows`` does not have.
        """
        if isinstance(self.value, Literal):
            return _literal(self.value, target, name, table, zone)
        if isinstance(self.value, Arithmetic):
            values = spark_arithmetic(
                find_column(rows, self.value.column, table),
                self.value.op,
                self.value.operand,
                name=self.value.column,
                table=table,
            )
        else:
            values = find_column(rows, self.value, table).combine_chunks()
        if values.type == target or _widens(values.type, target):
            return values.cast(target, safe=False)
        what = f"the value {self.text!r} of type {values.type} into {name} ({target})"
        raise _refused(what, table)


def _literal(
    lit: Literal, target: pa.DataType, name: str, table: str, zone: dt.tzinfo
) -> pa.Scalar:
    if lit.kind == "null":
        return pa.scalar(None, target)
    family = {
        "int": lambda t: pa.types.is_integer(t) or pa.types.is_floating(t),
        "float": lambda t: t == pa.float64(),
        "decimal": lambda t: pa.types.is_decimal(t) or t == pa.float64(),
        "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        "bool": pa.types.is_boolean,
        "date": pa.types.is_date32,
        "timestamp": lambda t: pa.types.is_timestamp(t) and t.tz is not None,
        "timestamp_ntz": lambda t: pa.types.is_timestamp(t) and t.tz is None,
    }[lit.kind]
    exact = family(target)
    if exact and lit.kind == "decimal" and target == pa.float64():
        exact = len(decimal.Decimal(lit.value).as_tuple().digits) <= 15
    if exact and lit.kind == "int" and pa.types.is_floating(target):
        exact = abs(lit.value) <= 1 << 53
    value = coerce(lit, target, zone) if exact else UNKNOWN
    if value is UNKNOWN or value is None:
        raise _refused(f"the literal {lit.value!r} into {name} ({target})", table)
    scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value)
    return scalar.cast(target)


def _widens(source: pa.DataType, target: pa.DataType) -> bool:
    """A cast every policy makes the same: a wider integer or float, or an integer to a float
    (to the nearest value, as Java's conversion; Arrow's unchecked cast rounds the same)."""
    if source in _INTEGER_FAMILY and target in _INTEGER_FAMILY:
        return _INTEGER_FAMILY.index(source) <= _INTEGER_FAMILY.index(target)
    if source in _INTEGER_FAMILY and pa.types.is_floating(target):
        return True
    return source == pa.float32() and target == pa.float64()


def _refused(what: str, table: str) -> errors.UnsupportedFeatureError:
    return inexact(
        f"{what} is not assigned exactly as Spark assigns it by the Python evaluator.",
        table,
        "write the value in the column's type, or run the command through Spark.",
    )
