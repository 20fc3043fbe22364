"""Partition values and data-file paths as the reference writes them (PROTOCOL.md "Partition Value
Serialization", "Path"; writes.md §2.7-2.8).

Three strings describe one partition value:

- the **log value** (``add.partitionValues``): Spark's cast to string, except ``timestamp``, which
  the reference writes as UTC ISO-8601 with microseconds (``2024-01-01T18:00:00.000000Z``);
- the **directory value**: Spark's cast to string in the session time zone
  (``2024-01-01 10:00:00``), Hive-escaped into ``col=value/``;
- the **log path** of a file: its relative path URI-encoded once more (``%3A`` -> ``%253A``).

Every log value round-trips through :func:`deltalog.partition_values.parse_partition_value`,
and every log path through :func:`deltalog.paths.resolve`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import unicodedata
import zoneinfo
from collections.abc import Sequence
from typing import Any

import numpy as np

from deltalog import errors
from deltalog.schema import DataType, DecimalType, PrimitiveType

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Hive's FileUtils.escapePathName set (Spark ExternalCatalogUtils.charToEscape, non-Windows):
# ASCII 0x01-0x1F, the characters below and DEL. NUL and space are left alone, as in Spark.
_HIVE_ESCAPED = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\{[]^") + ["\x7f"])
# java.net.URI's legal path characters (unreserved, punct, "@" and "/"): Hadoop's Path.toUri
# leaves these as they are and percent-encodes every other ASCII character.
_URI_PATH_LEGAL = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'(),;:$&+=@/"
)
_INTEGRAL = frozenset({"byte", "short", "integer", "long"})
_DECIMAL_CONTEXT = decimal.Context(prec=80)


def serialize_partition_value(value: Any, data_type: DataType) -> str | None:
    """The ``add.partitionValues`` string of ``value`` (a Python value of ``data_type``, as
    ``pyarrow`` hands it out), or ``None`` for null and for the empty string.

    Timestamps (aware, or naive meaning UTC) become UTC ISO-8601 with microseconds and ``Z``;
    ``timestamp_ntz`` becomes ``yyyy-MM-dd HH:mm:ss[.ffffff]`` (fraction without trailing zeros,
    as Spark's cast); decimals are plain text at the column's scale; floats follow Java's
    ``Double.toString`` (``1.0``, ``1.0E10``, ``NaN``), as Spark's cast does.

    Raises:
        InvalidArgumentError: ``data_type`` cannot be a partition column, or a binary value is
            not UTF-8 (Spark would silently replace its bytes; the value would not round-trip).
    """
    if isinstance(data_type, PrimitiveType) and data_type.name == "timestamp" and value is not None:
        utc = _as_utc(value)
        return f"{_date_time_text(utc, 'T')}.{utc.microsecond:06d}Z"
    return directory_value(value, data_type)


def directory_value(value: Any, data_type: DataType, *, time_zone: str = "UTC") -> str | None:
    """The (unescaped) string ``value`` takes in a Hive directory name: Spark's cast to string,
    timestamps rendered in ``time_zone`` as ``yyyy-MM-dd HH:mm:ss[.ffffff]``. ``None`` for null
    and the empty string (the directory then reads ``__HIVE_DEFAULT_PARTITION__``).

    Raises:
        InvalidArgumentError: as :func:`serialize_partition_value`.
    """
    if value is None:
        return None
    if isinstance(data_type, DecimalType):
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        # The default context (28 digits) cannot hold decimal(38, s).
        exact = decimal.Decimal(value).quantize(quantum, context=_DECIMAL_CONTEXT)
        return format(exact, "f")
    if not isinstance(data_type, PrimitiveType):
        raise errors.invalid_argument(f"a partition column cannot have type {data_type}")
    text = _cast_to_string(value, data_type.name, time_zone)
    return text or None


def _cast_to_string(value: Any, name: str, time_zone: str) -> str:
    if name == "string":
        return str(value)
    if name in _INTEGRAL:
        return str(int(value))
    if name == "boolean":
        return "true" if value else "false"
    if name == "double":
        return java_double_string(float(value))
    if name == "float":
        return java_double_string(float(value), single=True)
    if name == "date":
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if name == "timestamp":
        local = _as_utc(value).astimezone(zoneinfo.ZoneInfo(time_zone))
        return _spark_timestamp_string(local.replace(tzinfo=None))
    if name == "timestamp_ntz":
        return _spark_timestamp_string(value.replace(tzinfo=None))
    if name == "binary":
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise errors.invalid_argument(
                f"binary partition value {bytes(value)!r} is not UTF-8, so it cannot be written "
                "as a partition value that reads back as the same bytes"
            ) from None
    raise errors.invalid_argument(f"a partition column cannot have type {name}")


def java_double_string(value: float, *, single: bool = False) -> str:
    """``value`` as Java's ``Double.toString`` (``Float.toString`` with ``single``) writes it:
    shortest round-tripping digits, plain for 1e-3 <= |v| < 1e7, else ``d.dddE<exp>``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    number = np.float32(value) if single else np.float64(value)
    mantissa, exponent = np.format_float_scientific(number, unique=True).split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    exp = int(exponent)
    if 1e-3 <= abs(value) < 1e7:
        if exp >= 0:
            whole, frac = digits[: exp + 1].ljust(exp + 1, "0"), digits[exp + 1 :]
        else:
            whole, frac = "0", "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


def _as_utc(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        raise errors.invalid_argument(f"not a timestamp: {value!r}")
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _spark_timestamp_string(value: dt.datetime) -> str:
    # Spark's fraction formatter prints 0-6 digits: trailing zeros (and a zero fraction) dropped.
    text = _date_time_text(value, " ")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def _date_time_text(value: dt.datetime, sep: str) -> str:
    # Not strftime: glibc's %Y does not pad years before 1000 to four digits ("1-01-01").
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}{sep}"
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )


def escape_path_name(text: str) -> str:
    """Hive's escaping of one partition column name or value (``:`` -> ``%3A``, space kept)."""
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPED else c for c in text)


def partition_directory(pairs: Sequence[tuple[str, str | None]]) -> str:
    """The relative directory ``col=value/col2=__HIVE_DEFAULT_PARTITION__`` (no trailing slash)
    of ``(column name, directory value)`` pairs in partition order; names and values are
    Hive-escaped, and a ``None`` or empty value is the default partition."""
    return "/".join(
        f"{escape_path_name(name)}={escape_path_name(value) if value else HIVE_DEFAULT_PARTITION}"
        for name, value in pairs
    )


def encode_log_path(relative_path: str) -> str:
    """``add.path`` for a file at ``relative_path`` below the table root: URI-encoded once, as
    Hadoop's ``Path.toUri`` does (``%`` -> ``%25``, space -> ``%20``; non-ASCII letters kept),
    so that decoding once (:func:`deltalog.paths.resolve`) gives back ``relative_path``."""
    return "".join(c if _uri_legal(c) else _percent_encode(c) for c in relative_path)


def _uri_legal(c: str) -> bool:
    if c in _URI_PATH_LEGAL:
        return True
    # java.net.URI's "other" category: non-ASCII characters that are neither control nor space.
    return ord(c) > 0x7F and unicodedata.category(c) not in ("Cc", "Zs", "Zl", "Zp")


def _percent_encode(c: str) -> str:
    return "".join(f"%{b:02X}" for b in c.encode("utf-8"))
