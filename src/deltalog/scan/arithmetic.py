"""Spark's arithmetic on a column and a literal (``k % 10``, ``v + 1``), on Arrow, where it is
exact: the result type, the value of every row and the rows Spark computes to NULL are Spark's,
in ANSI mode and out of it.

* Integral columns (``tinyint`` ... ``bigint``) with an integer literal, ``+ - * %``: the
  result is ``int`` or ``bigint``, the wider of the column's type and the literal's (an integer
  literal is ``int`` when it fits, else ``bigint``). ``%`` takes the dividend's sign (Java's
  ``%``) and ``x % -1`` is 0 even for the least value.
* ``float`` and ``double`` columns with ``+ - *``: IEEE arithmetic in the column's type with an
  integer literal; a ``double`` column also with a floating literal, or a decimal literal of at
  most 15 digits (which Spark's cast gives exactly).

Where the two modes give different answers the computation is refused, never guessed: an
integral result that overflows (ANSI raises ``ARITHMETIC_OVERFLOW``, the legacy mode wraps) or a
remainder by zero of a non-null value (ANSI raises, the legacy mode gives NULL). A caller that
has Spark (the Spark layer's local engine) runs the command there instead, so Spark's own error
or value is what the user gets. Other types and literals (decimal columns, NULL, strings...) are
refused the same way.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.scan.predicate import Literal

_CHECKED = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_IEEE = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}
_INT32 = 1 << 31
_INT64 = 1 << 63
_DOUBLE_EXACT = 1 << 53
_EXACT_DECIMAL_DIGITS = 15  # a decimal of up to 15 digits converts to double exactly rounded


def spark_arithmetic(
    column: pa.ChunkedArray | pa.Array, op: str, operand: Literal, *, name: str, table: str = ""
) -> pa.Array:
    """``column op operand`` per row, as Spark computes it.

    Raises:
        UnsupportedFeatureError: the types are outside the exact subset, or a row overflows or
            divides by zero (Spark's answer then depends on ``spark.sql.ansi.enabled``).
    """
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_integer(values.type) and operand.kind == "int":
        return _integral(values, op, int(operand.value), name, table)
    if pa.types.is_floating(values.type) and op != "%":
        literal = _floating_operand(values.type, operand)
        if literal is not None:
            return _IEEE[op](values, pa.scalar(literal, values.type))
    raise _refused(
        f"{name} {op} {operand.value!r}: arithmetic on a {values.type} column with a "
        f"{operand.kind} literal",
        table,
    )


def _integral(values: pa.Array, op: str, operand: int, name: str, table: str) -> pa.Array:
    if not -_INT64 <= operand < _INT64:
        raise _refused(f"{name} {op} {operand}: the literal is a decimal in Spark", table)
    wide = values.type.bit_width == 64 or not -_INT32 <= operand < _INT32
    result_type = pa.int64() if wide else pa.int32()
    values = values.cast(result_type)
    if op == "%":
        return _remainder(values, operand, name, table)
    try:
        return _CHECKED[op](values, pa.scalar(operand, result_type))
    except pa.ArrowInvalid:  # overflow: ANSI raises, the legacy mode wraps
        raise _refused(
            f"{name} {op} {operand} overflows {result_type} on some row: Spark raises in ANSI "
            "mode and wraps around without it",
            table,
        ) from None


def _remainder(values: pa.Array, divisor: int, name: str, table: str) -> pa.Array:
    valid = values.is_valid()
    if divisor == 0:
        if values.null_count < len(values):
            raise _refused(
                f"{name} % 0 on a non-null value: Spark raises in ANSI mode and gives NULL "
                "without it",
                table,
            )
        return values
    raw = values.fill_null(0).to_numpy()
    # Java's % (the dividend's sign), which numpy's fmod is; x % -1 is 0 (fmod of the least
    # value by -1 would overflow in C).
    result = np.zeros_like(raw) if divisor == -1 else np.fmod(raw, raw.dtype.type(divisor))
    return pc.if_else(valid, pa.array(result, values.type), pa.scalar(None, values.type))


def _floating_operand(column_type: pa.DataType, operand: Literal) -> float | None:
    """The literal as the column's floating type takes it, or ``None`` when Spark would widen
    the result to another type or round it otherwise."""
    if operand.kind == "int":
        # Spark casts the integer to the column's type, to the nearest value; through a double
        # first that is the same value only while the double holds the integer exactly.
        return float(operand.value) if abs(operand.value) <= _DOUBLE_EXACT else None
    if column_type != pa.float64():
        return None  # float with a double or decimal literal: Spark's result is a double
    if operand.kind == "float":
        return float(operand.value)
    if operand.kind == "decimal":
        number = decimal.Decimal(operand.value)
        if len(number.as_tuple().digits) <= _EXACT_DECIMAL_DIGITS:
            return float(number)
    return None


def _refused(what: str, table: str) -> errors.UnsupportedFeatureError:
    return inexact(
        f"{what}; the Python evaluator computes only what it computes exactly as Spark does.",
        table,
        "run the command through Spark, which evaluates any SQL.",
    )


def inexact(message: str, table: str, help: str) -> errors.UnsupportedFeatureError:
    """The refusal of what the Python evaluator does not compute exactly as Spark
    (``DELTA_UNSUPPORTED_PREDICATE``): a caller with Spark runs the command there instead."""
    return errors.UnsupportedFeatureError(
        "DELTA_UNSUPPORTED_PREDICATE", message, table=table or None, help=help
    )
