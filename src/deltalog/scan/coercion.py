"""Spark's coercion of a literal to a column's type, shared by skipping and the row evaluator.

A filter ``column op literal`` is decided by Spark after its type coercion: a string literal
compared with a number, date, timestamp or boolean column is cast to the column's type; an
integer compared with a float column is compared as a double under ANSI (Spark 4's default) but
as a float without it (Spark 3.5); a string column compared with a number is cast to a number
(so ``'1.0' = 1`` is true), and so on. :func:`coerce` gives the literal's value in the column's
Arrow type only where that value decides the comparison exactly as Spark does in both modes;
anything else is :data:`UNKNOWN` (skipping then keeps the file, the Python evaluator refuses).

Float and double columns are compared in float64: a float32 value widens exactly, and Spark
compares a float column with a decimal or double literal in double (``CAST(0.1 AS FLOAT) >
0.1`` is true). Timestamp literals without an offset name a wall-clock time in Spark's session
time zone; where the zone is unknown the value is a :class:`Range` of every instant it can name.
The facts these rules rest on were checked with Spark 4.1 (ANSI on and off); the unit tests in
``tests/unit/scan/test_coercion.py`` state them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from deltalog.scan.predicate import Literal

UNKNOWN: Any = object()
"""The literal's value in the column's type is not one this module reproduces exactly."""

# Time zones run from UTC-12:00 to UTC+14:00: a wall-clock time names an instant this much
# earlier or later than the same time read in UTC.
_EARLIEST_OFFSET = dt.timedelta(hours=14)
_LATEST_OFFSET = dt.timedelta(hours=12)
# A wall-clock time read in a zone with daylight saving (or a skipped day, as Samoa in 2011)
# may land anywhere within this of its UTC reading.
_WALL_SLACK = dt.timedelta(days=2)

_INT_RANGES = {8: 1 << 7, 16: 1 << 15, 32: 1 << 31, 64: 1 << 63}
# Spark's string-to-boolean cast (``StringUtils.isTrueString``/``isFalseString``).
_TRUE_TEXT = {"t", "true", "y", "yes", "1"}
_FALSE_TEXT = {"f", "false", "n", "no", "0"}
_INT_TEXT = re.compile(r" *([+-]?[0-9]+) *")
_FLOAT_TEXT = re.compile(r" *([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?) *")
_FLOAT_SPECIALS = {
    "nan": float("nan"),
    **dict.fromkeys(("inf", "+inf", "infinity", "+infinity"), float("inf")),
    **dict.fromkeys(("-inf", "-infinity"), float("-inf")),
}
_TIME = r"(?:[ T]([0-9]{1,2})(?::([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{1,9}))?)?)?)?"
_DATE_TEXT = re.compile(r" *([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})" + _TIME + " *")
_TIMESTAMP_TEXT = re.compile(
    r" *([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})" + _TIME + r" *(Z|[+-][0-9]{2}:[0-9]{2})? *"
)


@dataclass(frozen=True, slots=True)
class Range:
    """A literal whose instant depends on a time zone the caller does not know: it is
    somewhere in [lo, hi]."""

    lo: pa.Scalar
    hi: pa.Scalar


def comparison_type(column_type: pa.DataType) -> pa.DataType:
    """The Arrow type a column is compared in: float64 for any floating column, else its own."""
    return pa.float64() if pa.types.is_floating(column_type) else column_type


def coerce(lit: Literal, column_type: pa.DataType, zone: dt.tzinfo | None) -> Any:
    """``lit`` as Spark compares it with a column of ``column_type``: a scalar of
    :func:`comparison_type` (a :class:`Range` for a timestamp whose zone is unknown), ``None``
    for NULL, or :data:`UNKNOWN`.

    ``zone`` is Spark's session time zone (``None``: unknown)."""
    if lit.kind == "null":
        return None
    t = column_type
    try:
        if pa.types.is_integer(t):
            return _scalar(_integer(lit, t.bit_width), t)
        if pa.types.is_floating(t):
            return _scalar(_floating(lit, t.bit_width), pa.float64())
        if pa.types.is_decimal(t):
            return _scalar(_decimal(lit, t), t)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return _scalar(lit.value if lit.kind == "string" else UNKNOWN, t)
        if pa.types.is_boolean(t):
            return _scalar(_boolean(lit), t)
        if pa.types.is_date32(t):
            return _scalar(_date(lit), t)
        if pa.types.is_timestamp(t):
            value = _timestamp(lit, t.tz is not None, zone)
            if isinstance(value, tuple):
                return Range(pa.scalar(value[0], t), pa.scalar(value[1], t))
            return _scalar(value, t)
    except (pa.ArrowInvalid, OverflowError, TypeError, ValueError, decimal.InvalidOperation):
        return UNKNOWN
    return UNKNOWN


def _scalar(value: Any, t: pa.DataType) -> Any:
    return UNKNOWN if value is UNKNOWN or value is None else pa.scalar(value, t)


def float32(value: float) -> float:
    """``value`` rounded to the nearest float32 (round half to even, as Java's cast)."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _integer(lit: Literal, bits: int) -> Any:
    """Integral columns: integers, integral decimals (Spark compares in a wide decimal, so
    ``5.0`` is 5; ``6.5`` is left to Spark), and integer text (cast to bigint under ANSI, to the
    column's type without it: the same value when it fits the column)."""
    value: Any = UNKNOWN
    if lit.kind == "int":
        value = lit.value
    elif lit.kind == "decimal" and lit.value == lit.value.to_integral_value():
        value = int(lit.value)
    elif lit.kind == "string" and (m := _INT_TEXT.fullmatch(lit.value)):
        value = int(m.group(1))
    if value is UNKNOWN or not -_INT_RANGES[bits] <= value < _INT_RANGES[bits]:
        return UNKNOWN
    return value


def _floating(lit: Literal, bits: int) -> Any:
    """Float and double columns, compared in double. An integer literal against a float column
    is a float under Spark 3.5 and a double under ANSI: only an integer a float holds exactly
    compares the same in both. String text is Spark's cast to double (double columns only:
    a float column casts text straight to float)."""
    if lit.kind == "float":
        return lit.value
    if lit.kind == "decimal":
        return float(lit.value)
    if lit.kind == "int":
        value = float(lit.value)
        return value if bits == 64 or (value == lit.value and float32(value) == value) else UNKNOWN
    if lit.kind == "string" and bits == 64:
        text = lit.value.strip(" ").lower()
        if text in _FLOAT_SPECIALS:
            return _FLOAT_SPECIALS[text]
        if _FLOAT_TEXT.fullmatch(lit.value):
            return float(lit.value)
    return UNKNOWN


def _decimal(lit: Literal, t: pa.Decimal128Type) -> Any:
    """Decimal columns: integers and decimals the column's type holds exactly (Spark compares
    both in a wider decimal); a double literal is compared in double by Spark: left to it."""
    if lit.kind not in ("int", "decimal"):
        return UNKNOWN
    value = decimal.Decimal(lit.value)
    quantum = decimal.Decimal(1).scaleb(-t.scale)
    exact = value.quantize(quantum, context=decimal.Context(prec=80))
    if exact != value or len(exact.as_tuple().digits) > t.precision:
        return UNKNOWN
    return exact


def _boolean(lit: Literal) -> Any:
    if lit.kind == "bool":
        return lit.value
    if lit.kind == "string":
        text = lit.value.strip(" ").lower()
        if text in _TRUE_TEXT:
            return True
        if text in _FALSE_TEXT:
            return False
    return UNKNOWN


def _date(lit: Literal) -> Any:
    if lit.kind == "date":
        return lit.value
    if lit.kind == "string":
        return parse_spark_date(lit.value) or UNKNOWN
    return UNKNOWN  # a timestamp: Spark compares the date column as a timestamp


def _timestamp(lit: Literal, ltz: bool, zone: dt.tzinfo | None) -> Any:
    """A timestamp column (``ltz``: with local time zone, an instant; else ``timestamp_ntz``,
    a wall-clock time) against a timestamp, ``timestamp_ntz``, date or string literal."""
    if lit.kind == "date":
        wall = dt.datetime(lit.value.year, lit.value.month, lit.value.day)
    elif lit.kind in ("timestamp", "timestamp_ntz"):
        wall = lit.value
    elif lit.kind == "string":
        parsed = parse_spark_timestamp(lit.value)
        if parsed is None:
            return UNKNOWN
        if not ltz:
            # Spark's cast of text to timestamp_ntz ignores an offset in it.
            return parsed.replace(tzinfo=None)
        wall = parsed
    else:
        return UNKNOWN
    if lit.kind == "timestamp_ntz":
        wall = wall.replace(tzinfo=None)
    if ltz:
        if wall.tzinfo is not None:
            return wall.astimezone(dt.UTC)
        if zone is None:
            utc = wall.replace(tzinfo=dt.UTC)
            return utc - _EARLIEST_OFFSET, utc + _LATEST_OFFSET
        return wall.replace(tzinfo=zone).astimezone(dt.UTC)
    if lit.kind != "timestamp":
        return wall  # a date or a timestamp_ntz against timestamp_ntz: wall-clock times
    # A timestamp (an instant) against timestamp_ntz: Spark reads the column in the session
    # zone. Exact in a fixed-offset zone; elsewhere the wall time is only near.
    if isinstance(zone, dt.timezone):
        return wall.astimezone(zone).replace(tzinfo=None) if wall.tzinfo else wall
    base = wall.astimezone(dt.UTC).replace(tzinfo=None) if wall.tzinfo else wall
    return base - _WALL_SLACK, base + _WALL_SLACK


def parse_spark_date(text: str) -> dt.date | None:
    """A date from Spark's text forms ``yyyy-[m]m-[d]d``, optionally followed by a time after a
    space or ``T`` (which Spark's cast ignores); ``None`` for other text (Spark's other forms,
    such as ``yyyy`` alone, are left to Spark)."""
    m = _DATE_TEXT.fullmatch(text)
    if m is None:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def parse_spark_timestamp(text: str) -> dt.datetime | None:
    """A date-time from Spark's text forms ``yyyy-[m]m-[d]d[( |T)[h]h[:[m]m[:[s]s[.f]]]]``
    with ``Z`` or ``±hh:mm`` (aware) or nothing (naive); ``None`` for anything else, or a
    fraction finer than microseconds."""
    m = _TIMESTAMP_TEXT.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = m.groups()
    fraction = fraction or ""
    if fraction[6:].strip("0"):
        return None
    tz = None
    if offset == "Z":
        tz = dt.UTC
    elif offset:
        sign = -1 if offset[0] == "-" else 1
        tz = dt.timezone(sign * dt.timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    try:
        return dt.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction + "000000")[:6]),
            tzinfo=tz,
        )
    except ValueError:
        return None
